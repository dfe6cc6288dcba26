//! Commits: a group of commits in one write batch, predicates read at the
//! latest state, the log synced when durability is promised.

use rocksdb::WriteBatch;
use strata_engine::implement::{self, GroupFailed, GroupResults, Op, Reads};
use strata_engine::{
    Commit, CommitError, CommitInfo, Keyspace, Mutation, MutationError, RangeSpec, StampAt,
};

#[allow(clippy::wildcard_imports)]
use super::*;

/// Whether a flush of the log where durability is promised syncs it
/// (always, unless a planted bug says otherwise).
pub(crate) fn wal_sync() -> bool {
    !strata_engine::fault_point!("wal-flushed-not-synced")
}

/// The most commits one group holds.
pub(crate) const MAX_GROUP: usize = 256;

/// Reads of the latest state, inside the commit's critical section.
pub(crate) struct LatestReads<'a> {
    pub(crate) engine: &'a RocksEngine,
}

impl Reads for LatestReads<'_> {
    fn get(&mut self, ks: Keyspace, key: &[u8]) -> Result<Option<Vec<u8>>, CommitError> {
        let cf = self.engine.commit_family(ks)?;
        self.engine
            .db
            .get_cf_opt(cf, key, &self.engine.read_options)
            .map_err(commit_err)
    }

    fn any_in(&mut self, ks: Keyspace, range: &RangeSpec) -> Result<bool, CommitError> {
        let cf = self.engine.commit_family(ks)?;
        let (ro, empty) = read_options(range);
        if empty {
            return Ok(false);
        }
        let mut it = self.engine.db.raw_iterator_cf_opt(cf, ro);
        it.seek_to_first();
        it.status().map_err(commit_err)?;
        Ok(it.valid())
    }
}

impl LatestReads<'_> {
    /// The exclusive upper bound that covers every key of `range` that
    /// exists now or is put by `ops`: for an unbounded range, one past the
    /// largest such key.
    pub(crate) fn upper_bound(
        &self,
        ks: Keyspace,
        range: &RangeSpec,
        ops: &[Op],
    ) -> Result<Option<Vec<u8>>, CommitError> {
        if let (_, Some(upper)) = rocks_bounds(range) {
            return Ok(Some(upper));
        }
        let cf = self.engine.commit_family(ks)?;
        let mut it = self.engine.db.raw_iterator_cf(cf);
        it.seek_to_last();
        it.status().map_err(commit_err)?;
        let mut max = it.key().map(<[u8]>::to_vec);
        for op in ops {
            if let Op::Put(o, k, _) = op
                && *o == ks
                && max.as_ref().is_none_or(|m| k > m)
            {
                max = Some(k.clone());
            }
        }
        Ok(max.map(|mut k| {
            k.push(0);
            k
        }))
    }
}

/// What `commit`'s write batch takes, about: RocksDB's 12-byte header,
/// each row's key and value with its tag, family and length varints (at
/// most 16 bytes), and the version record.
fn batch_bytes(commit: &Commit) -> usize {
    let rows: usize = commit
        .mutations
        .iter()
        .map(|m| match m {
            Mutation::Put { key, value, .. } | Mutation::PutVersionstamped { key, value, .. } => {
                key.len() + value.len() + 16
            }
            Mutation::Delete { key, .. } | Mutation::Add { key, .. } => key.len() + 24,
            _ => 32,
        })
        .sum();
    12 + rows + VERSION.len() + 8 + 16
}

impl RocksEngine {
    /// The write batch of `commit` as `version`: predicates checked and
    /// counters resolved against the latest state (which includes every
    /// commit written before, those of the same group too), plus the
    /// version record.
    pub(crate) fn batch(
        &self,
        version: u64,
        commit: &mut Commit,
    ) -> Result<WriteBatch, CommitError> {
        let mut reads = LatestReads { engine: self };
        implement::check_predicates(&commit.predicates, &mut reads)?;
        // Sized for the whole commit at once: grown row by row, the batch's
        // buffer was reallocated (and the allocator consolidated) several
        // times per commit.
        let mut batch = WriteBatch::with_capacity_bytes(batch_bytes(commit));
        // Plain puts and deletes, and rows stamped in the key, need no
        // resolving: write them straight from the commit.
        let plain = commit.mutations.iter().all(|m| {
            matches!(
                m,
                Mutation::Put { .. }
                    | Mutation::Delete { .. }
                    | Mutation::PutVersionstamped {
                        at: StampAt::Key(_) | StampAt::KeyInverted(_),
                        ..
                    }
            )
        });
        let ops = if plain {
            Vec::new()
        } else {
            implement::resolve(version, &commit.mutations, &mut reads)?
        };
        if plain {
            let mut stamps: u32 = 0;
            // The commit is the group's to consume: a stamped key is
            // stamped where it lies, not copied first.
            for (index, m) in commit.mutations.iter_mut().enumerate() {
                let family = |ks: &Keyspace| self.commit_family(*ks);
                match m {
                    Mutation::Put { ks, key, value } => batch.put_cf(family(ks)?, key, value),
                    Mutation::Delete { ks, key } => batch.delete_cf(family(ks)?, key),
                    Mutation::PutVersionstamped { ks, key, value, at } => {
                        let invalid = |reason| CommitError::InvalidMutation { index, reason };
                        let order = u16::try_from(stamps)
                            .map_err(|_| invalid(MutationError::TooManyStamps))?;
                        stamps += 1;
                        implement::stamp_into(key, *at, version, order).map_err(invalid)?;
                        batch.put_cf(family(ks)?, key, value);
                    }
                    _ => {}
                }
            }
        }
        for (i, op) in ops.iter().enumerate() {
            match op {
                Op::Put(ks, k, v) => batch.put_cf(self.commit_family(*ks)?, k, v),
                Op::Delete(ks, k) => batch.delete_cf(self.commit_family(*ks)?, k),
                Op::DeleteRange(ks, range) => {
                    let cf = self.commit_family(*ks)?;
                    let lower = rocks_bounds(range).0.unwrap_or_default();
                    if let Some(upper) = reads.upper_bound(*ks, range, &ops[..i])?
                        && lower < upper
                    {
                        batch.delete_range_cf(cf, lower, upper);
                    }
                }
            }
        }
        batch.put_cf(
            self.meta().map_err(CommitError::Backend)?,
            VERSION,
            version.to_be_bytes(),
        );
        Ok(batch)
    }

    /// Writes a group of commits in order, each as its own batch and WAL
    /// record (not synced), so each commit's predicates see the earlier
    /// ones; a commit refused by a predicate or an invalid mutation writes
    /// nothing and fails alone. A failed write stops the group: that
    /// commit's outcome is unknown, the later ones were not applied. The
    /// applied commits return not durable: the group committer then syncs
    /// the WAL once for the whole group ([`RocksEngine::sync_wal_through`]),
    /// after handing the commit lock to the next group, whose writes go on
    /// beside the sync.
    pub(crate) fn write_group(&self, commits: &mut [Commit]) -> GroupResults {
        let n = commits.len();
        let mut sequence = self.seq.begin();
        let mut outcomes: Vec<Result<u64, CommitError>> = Vec::with_capacity(n);
        let wo = &self.write_options;
        for (i, commit) in commits.iter_mut().enumerate() {
            let batch = match self.batch(sequence.version(), commit) {
                Ok(batch) => batch,
                Err(e) => {
                    outcomes.push(Err(e));
                    continue;
                }
            };
            if let Err(e) = self.db.write_opt(batch, wo) {
                // RocksDB may have written the WAL record before failing:
                // unknown. The rest is not attempted.
                let e = write_failure(e);
                let later: Vec<_> = (i + 1..n)
                    .map(|_| Err(GroupFailed::not_applied(&e)))
                    .collect();
                outcomes.push(Err(CommitError::OutcomeUnknown(e)));
                outcomes.extend(later);
                break;
            }
            outcomes.push(Ok(sequence.take()));
        }
        if sequence.taken() > 0 {
            sequence.publish(false);
        }
        outcomes
            .into_iter()
            .map(|r| {
                r.map(|version| CommitInfo {
                    version,
                    durable: false,
                })
            })
            .collect()
    }

    /// Makes every commit up to `version` durable with one WAL sync
    /// (`flush_wal(true)`), shared with concurrent callers, without the
    /// commit lock.
    pub(crate) fn sync_wal_through(
        &self,
        version: u64,
    ) -> Result<u64, strata_engine::BackendError> {
        self.seq
            .sync_through(version, || {
                self.group.count_sync();
                self.db.flush_wal(wal_sync())
            })
            .map_err(backend)
    }
}
