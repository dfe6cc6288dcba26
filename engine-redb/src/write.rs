//! Commits: one write transaction per group of commits, predicates and
//! mutations applied in it.

use redb::ReadableTable;
use strata_engine::BackendPanic;
use strata_engine::implement::{self, GroupFailed, GroupResults, Op, Reads};
use strata_engine::{Commit, CommitError, CommitInfo, Durability, GroupStats, Keyspace, RangeSpec};

#[allow(clippy::wildcard_imports)]
use super::*;

/// The most commits one group holds.
pub(crate) const MAX_GROUP: usize = 256;

/// The results of a written group.
pub(crate) fn infos(outcomes: Vec<Result<u64, CommitError>>, durable: bool) -> GroupResults {
    outcomes
        .into_iter()
        .map(|r| r.map(|version| CommitInfo { version, durable }))
        .collect()
}

/// The results of a group whose transaction was aborted when commit
/// `failed` met `error`: that commit carries the error; the ones before it
/// that were applied, and all after it, failed with the group (nothing of
/// them is stored); those refused before keep their own error.
pub(crate) fn abandon(
    outcomes: Vec<Result<u64, CommitError>>,
    failed: usize,
    error: CommitError,
    n: usize,
) -> GroupResults {
    let mut results: GroupResults = outcomes
        .into_iter()
        .map(|r| r.and_then(|_| Err(GroupFailed::not_applied(&error))))
        .collect();
    debug_assert_eq!(results.len(), failed);
    let later: Vec<_> = (failed + 1..n)
        .map(|_| Err(GroupFailed::not_applied(&error)))
        .collect();
    results.push(Err(error));
    results.extend(later);
    results
}

/// A keyspace's table, open in a write transaction.
pub(crate) type RedbTable<'t> = redb::Table<'t, &'static [u8], &'static [u8]>;

/// Reads of the latest state inside a write transaction.
pub(crate) struct TxnReads<'a> {
    pub(crate) engine: &'a RedbEngine,
    pub(crate) txn: &'a redb::WriteTransaction,
}

impl Reads for TxnReads<'_> {
    fn get(&mut self, ks: Keyspace, key: &[u8]) -> Result<Option<Vec<u8>>, CommitError> {
        let t = self.engine.open_table(self.txn, ks)?;
        let value = t.get(key).map_err(commit_err)?;
        Ok(value.map(|g| g.value().to_vec()))
    }

    fn any_in(&mut self, ks: Keyspace, range: &RangeSpec) -> Result<bool, CommitError> {
        if is_empty(&range.start, &range.end) {
            return Ok(false);
        }
        let t = self.engine.open_table(self.txn, ks)?;
        let mut rows = t.range::<&[u8]>(as_slices(range)).map_err(commit_err)?;
        Ok(rows.next().is_some())
    }
}

impl RedbEngine {
    pub(crate) fn raise_inner(&self, at_least: u64) -> Result<u64, strata_engine::Error> {
        let err = |e: redb::Error| commit_err(e);
        let mut sequence = self.seq.begin();
        let to = sequence.raise_to(at_least);
        if to == self.seq.last() {
            drop(sequence);
            return Ok(to);
        }
        let mut txn = self.db.begin_write().map_err(CommitError::Backend)?;
        txn.set_durability(redb::Durability::Immediate)
            .map_err(|e| err(e.into()))?;
        {
            let mut meta = txn.open_table(META).map_err(|e| err(e.into()))?;
            meta.insert(VERSION, to).map_err(|e| err(e.into()))?;
        }
        txn.commit()
            .map_err(|e| CommitError::OutcomeUnknown(backend(redb::Error::from(e))))?;
        Ok(sequence.publish(true))
    }
}

impl RedbEngine {
    /// How many commit groups this engine wrote since it opened, and how
    /// many commits they held (see [`Engine::commit_group`]): with
    /// `Immediate` commits, `commits / groups` is the number of commits
    /// per durable write.
    pub fn group_stats(&self) -> GroupStats {
        self.group.stats()
    }

    pub(crate) fn table_name(&self, ks: Keyspace) -> Option<&str> {
        self.keyspaces.index_of(ks).map(|i| self.tables[i].as_str())
    }

    pub(crate) fn open_table<'t>(
        &self,
        txn: &'t redb::WriteTransaction,
        ks: Keyspace,
    ) -> Result<RedbTable<'t>, CommitError> {
        let name = self
            .table_name(ks)
            .ok_or(CommitError::UnknownKeyspace(ks))?;
        txn.open_table(def(name)).map_err(commit_err)
    }

    /// Applies resolved changes inside the write transaction. Each table is opened once per commit, when first
    /// touched: opening one looks it up in redb's table tree, and dropping
    /// it writes its root back, so a commit of many rows would otherwise pay
    /// that for each row.
    pub(crate) fn apply(
        &self,
        txn: &redb::WriteTransaction,
        ops: &[Op],
    ) -> Result<(), CommitError> {
        let io = |e: redb::StorageError| commit_err(e);
        let mut open: Vec<Option<RedbTable<'_>>> = std::iter::repeat_with(|| None)
            .take(self.tables.len())
            .collect();
        for op in ops {
            match op {
                Op::Put(ks, key, value) => {
                    self.table_in(&mut open, txn, *ks)?
                        .insert(key.as_slice(), value.as_slice())
                        .map_err(io)?;
                }
                Op::Delete(ks, key) => {
                    self.table_in(&mut open, txn, *ks)?
                        .remove(key.as_slice())
                        .map_err(io)?;
                }
                Op::DeleteRange(ks, range) => {
                    let t = self.table_in(&mut open, txn, *ks)?;
                    if !is_empty(&range.start, &range.end) {
                        t.retain_in::<&[u8], _>(as_slices(range), |_, _| false)
                            .map_err(io)?;
                    }
                }
            }
        }
        Ok(())
    }

    /// Writes a group of commits in one write transaction: each commit's
    /// predicates read the transaction, so they see the group's earlier
    /// commits; a commit refused by a predicate or an invalid mutation
    /// writes nothing and fails alone; the version record is written once,
    /// for the last commit; the transaction is durable when an applied
    /// commit is `Immediate`. A failure while writing aborts the whole
    /// transaction, so every commit of the group fails (none applied).
    pub(crate) fn write_group(&self, commits: &[Commit]) -> GroupResults {
        let n = commits.len();
        let mut sequence = self.seq.begin();
        let txn = match self.db.begin_write() {
            Ok(txn) => txn,
            Err(e) => {
                // The first commit keeps the error itself (its chain says
                // whether the engine must be reopened); the others its text.
                let later: Vec<_> = (1..n).map(|_| Err(GroupFailed::not_applied(&e))).collect();
                let mut out = vec![Err(CommitError::Backend(e))];
                out.extend(later);
                return out;
            }
        };
        let mut outcomes: Vec<Result<u64, CommitError>> = Vec::with_capacity(n);
        let mut immediate = false;
        for (i, commit) in commits.iter().enumerate() {
            let version = sequence.version();
            let checked = {
                let mut reads = TxnReads {
                    engine: self,
                    txn: &txn,
                };
                implement::check_predicates(&commit.predicates, &mut reads)
                    .and_then(|()| implement::resolve(version, &commit.mutations, &mut reads))
            };
            let written = match checked {
                // A read failed: the transaction is suspect.
                Err(e @ CommitError::Backend(_)) => Err(e),
                // Refused; nothing of it was written.
                Err(e) => {
                    outcomes.push(Err(e));
                    continue;
                }
                Ok(ops) => self.apply(&txn, &ops),
            };
            if let Err(e) = written {
                // The transaction may hold part of this commit: abort it
                // (dropped unused) and fail the whole group.
                drop(txn);
                return abandon(outcomes, i, e, n);
            }
            immediate |= commit.durability == Durability::Immediate;
            outcomes.push(Ok(sequence.take()));
        }
        if sequence.taken() == 0 {
            // Every commit was refused: nothing to write.
            return infos(outcomes, false);
        }
        let finish = || -> Result<(), redb::Error> {
            let mut txn = txn;
            txn.set_durability(if immediate {
                redb::Durability::Immediate
            } else {
                redb::Durability::None
            })?;
            {
                let mut meta = txn.open_table(META)?;
                meta.insert(VERSION, sequence.version() - 1)?;
            }
            txn.commit()?;
            Ok(())
        };
        match finish() {
            Ok(()) => {
                sequence.publish(immediate);
                if immediate {
                    self.group.count_sync();
                }
                infos(outcomes, immediate)
            }
            // The commit of the transaction may or may not have reached
            // storage: every applied commit's outcome is unknown.
            Err(e) => outcomes
                .into_iter()
                .map(|r| r.and_then(|_| Err(GroupFailed::unknown(&e))))
                .collect(),
        }
    }

    /// [`RedbEngine::write_group`] with a panic inside redb reported as
    /// damaged data for every commit of the group (its transaction was
    /// dropped unfinished, so nothing of it was applied).
    pub(crate) fn write_group_guarded(&self, commits: &[Commit]) -> GroupResults {
        match BackendPanic::catch("a commit", || self.write_group(commits)) {
            Ok(results) => results,
            Err(p) => {
                let msg = p.to_string();
                let mut out = vec![Err(CommitError::Corrupt(Box::new(p)))];
                out.extend((1..commits.len()).map(|_| Err(GroupFailed::not_applied(&msg))));
                out
            }
        }
    }

    /// `ks`'s table among those `open` in this commit, opened now if it is
    /// not yet.
    pub(crate) fn table_in<'o, 't>(
        &self,
        open: &'o mut [Option<RedbTable<'t>>],
        txn: &'t redb::WriteTransaction,
        ks: Keyspace,
    ) -> Result<&'o mut RedbTable<'t>, CommitError> {
        let slot = self
            .keyspaces
            .index_of(ks)
            .and_then(|i| open.get_mut(i))
            .ok_or(CommitError::UnknownKeyspace(ks))?;
        if slot.is_none() {
            *slot = Some(self.open_table(txn, ks)?);
        }
        slot.as_mut().ok_or(CommitError::UnknownKeyspace(ks))
    }
}
