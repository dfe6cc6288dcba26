//! Work in several commits: the expiry sweeper, the non-atomic bulk
//! writer, and the quota audit.

use std::collections::BTreeMap;

use strata_codec::{Value, stored_size};
use strata_engine::{Engine, RangeSpec, Snapshot};
use strata_keys::Key;

use crate::tx::{Pending, counter_value};
use crate::{Store, StoreError, Tx, layout};

/// What a sweep did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SweepReport {
    /// Expired values removed (with their chunks and index entries).
    pub removed: u64,
    /// Index entries removed whose value had been overwritten or deleted.
    pub stale: u64,
    /// Commits made.
    pub commits: u64,
    /// Where to resume when the sweep stopped at its commit budget; `None`
    /// when every entry expired at the sweep's clock reading was handled.
    pub resume: Option<SweepCursor>,
}

/// Where a sweep resumes: after this expiry index entry.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SweepCursor(Vec<u8>);

/// Resume point of a [`BulkNonAtomic`] write: the entries before
/// `next` are committed, those from `next` on are not (unless the error
/// was an unknown commit outcome: then the commit that started at `next`
/// may have been applied; resuming writes those entries again).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct BulkCursor {
    /// Index of the first entry not committed.
    pub next: usize,
}

/// A bulk write stopped by an error; see [`BulkNonAtomic::apply`].
#[derive(Debug, thiserror::Error)]
#[error("bulk write stopped before entry {}", cursor.next)]
pub struct BulkError {
    /// Entries before it are committed; resume from it.
    pub cursor: BulkCursor,
    /// Why it stopped.
    #[source]
    pub source: StoreError,
}

/// What a bulk write did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BulkReport {
    /// Entries written.
    pub entries: usize,
    /// Commits made.
    pub commits: u64,
}

/// A writer of many entries that is **not atomic**: it splits them into
/// consecutive commits that each respect the store's limits, in order.
/// After a failure, the entries before [`BulkError::cursor`] are written
/// and the rest are not, or, when the error is
/// [`CommitError::OutcomeUnknown`](strata_engine::CommitError::OutcomeUnknown),
/// perhaps some of them; [`BulkNonAtomic::apply_from`] resumes (puts and
/// deletes written twice end the same). Each
/// entry's rows (value, chunks, index, quota) are always in one commit.
pub struct BulkNonAtomic<'s, E: Engine> {
    store: &'s Store<E>,
    entries: Vec<(Vec<u8>, PendingEntry)>,
}

#[derive(Debug, Clone)]
enum PendingEntry {
    Ready(Pending),
    /// A put with a time to live, stamped when its commit is built.
    Ttl {
        pending: Pending,
    },
}

impl<E: Engine> BulkNonAtomic<'_, E> {
    /// Queues a put.
    ///
    /// # Errors
    /// As [`Tx::put`]: the entry is refused on its own, nothing is queued.
    pub fn put<K>(&mut self, key: &K, value: &K::Value) -> Result<&mut Self, StoreError>
    where
        K: Key + 'static,
        K::Value: Value,
    {
        let (k, p) = self.store.encode_put(key, value, None)?;
        self.entries.push((k, PendingEntry::Ready(p)));
        Ok(self)
    }

    /// Queues a put expiring `ttl_ms` after the clock reading at the time
    /// of queueing.
    ///
    /// # Errors
    /// As [`Tx::put_with_ttl`].
    pub fn put_with_ttl<K>(
        &mut self,
        key: &K,
        value: &K::Value,
        ttl_ms: u64,
    ) -> Result<&mut Self, StoreError>
    where
        K: Key + 'static,
        K::Value: Value,
    {
        let at = self.store.clock.now_ms().saturating_add(ttl_ms);
        let (k, p) = self.store.encode_put(key, value, Some(at))?;
        self.entries.push((k, PendingEntry::Ttl { pending: p }));
        Ok(self)
    }

    /// Queues a delete.
    ///
    /// # Errors
    /// As [`Tx::delete`].
    pub fn delete<K: Key + 'static>(&mut self, key: &K) -> Result<&mut Self, StoreError> {
        let (k, p) = self.store.encode_delete(key)?;
        self.entries.push((k, PendingEntry::Ready(p)));
        Ok(self)
    }

    /// Entries queued.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether nothing is queued.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Writes every entry, in order, in as few limit-respecting commits as
    /// it can. **Not atomic.**
    ///
    /// # Errors
    /// [`BulkError`] with the cursor to resume from and the cause (an
    /// entry that breaks a limit on its own, a quota, an engine failure,
    /// conflicts beyond the retry policy).
    pub fn apply(&self) -> Result<BulkReport, BulkError> {
        self.apply_from(BulkCursor { next: 0 })
    }

    /// As [`BulkNonAtomic::apply`], from `cursor` on.
    ///
    /// # Errors
    /// As [`BulkNonAtomic::apply`].
    pub fn apply_from(&self, cursor: BulkCursor) -> Result<BulkReport, BulkError> {
        let mut report = BulkReport::default();
        let store = self.store;
        let mut next = cursor.next.min(self.entries.len());
        let mut width = store.options.limits.max_batch_entries.clamp(1, 1024);
        let mut attempt = 0;
        while next < self.entries.len() {
            let end = (next + width).min(self.entries.len());
            let mut tx = store.begin();
            for (key, entry) in &self.entries[next..end] {
                let pending = match entry {
                    PendingEntry::Ready(p) | PendingEntry::Ttl { pending: p } => p.clone(),
                };
                tx.push_pending(key.clone(), pending);
            }
            let fail = |source| BulkError {
                cursor: BulkCursor { next },
                source,
            };
            match tx.commit() {
                Ok(_) => {
                    report.entries += end - next;
                    report.commits += 1;
                    next = end;
                    attempt = 0;
                }
                Err(StoreError::Limit { row: None, .. }) if width > 1 => width = width.div_ceil(2),
                Err(e) if e.is_conflict() => {
                    attempt += 1;
                    if attempt >= store.options.retry.max_attempts.max(1) {
                        return Err(fail(StoreError::RetriesExhausted {
                            attempts: attempt,
                            last: Box::new(e),
                        }));
                    }
                    store.clock.sleep_ms(store.backoff_ms(attempt));
                }
                Err(e) if strata_engine::fault_point!("bulk-cursor-past-failure") => {
                    return Err(BulkError {
                        cursor: BulkCursor { next: end },
                        source: e,
                    });
                }
                Err(e) => return Err(fail(e)),
            }
        }
        Ok(report)
    }
}

/// Usage of one quota scope: the counter and a recount.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ScopeUsage {
    /// What the scope's counter says.
    pub counted: i64,
    /// The `stored_size` of its rows, recounted from the rows themselves.
    pub actual: u64,
}

impl<E: Engine> Store<E> {
    /// A writer that splits many entries into several commits. **Not
    /// atomic**; see [`BulkNonAtomic`].
    pub fn bulk_non_atomic(&self) -> BulkNonAtomic<'_, E> {
        BulkNonAtomic {
            store: self,
            entries: Vec::new(),
        }
    }

    /// The bytes quota scope `scope` uses, by its counter.
    ///
    /// # Errors
    /// An engine failure or a corrupt counter.
    pub fn quota_usage(&self, scope: &[u8]) -> Result<u64, StoreError> {
        let snap = self.engine.snapshot()?;
        let used = counter_value(snap.get(self.system, &layout::quota_key(scope))?.as_deref())?;
        Ok(u64::try_from(used).unwrap_or(0))
    }

    /// Every quota scope's counter next to a recount of its rows (data
    /// rows, chunk rows and rows of charged spaces), at one snapshot. Reads everything: for tests,
    /// audits and the simulation's oracle.
    ///
    /// # Errors
    /// An engine failure or a corrupt counter.
    pub fn audit_quota(&self) -> Result<BTreeMap<Vec<u8>, ScopeUsage>, StoreError> {
        let snap = self.engine.snapshot()?;
        let mut usage: BTreeMap<Vec<u8>, ScopeUsage> = BTreeMap::new();
        for row in snap.range(self.data, RangeSpec::all())? {
            let (k, v) = row?;
            if let Some(scope) = self.options.scope_of(&k) {
                usage.entry(scope).or_default().actual += stored_size(k.len(), v.len());
            }
        }
        for space in self.charged_spaces() {
            for row in snap.range(space, RangeSpec::all())? {
                let (k, v) = row?;
                if let Some(scope) = self.options.scope_of(&k) {
                    usage.entry(scope).or_default().actual += stored_size(k.len(), v.len());
                }
            }
        }
        let chunks = layout::chunk_rows_range();
        for row in snap.range(self.system, RangeSpec::from(chunks))? {
            let (k, v) = row?;
            if let Some(scope) =
                layout::chunk_owner(&k).and_then(|owner| self.options.scope_of(&owner))
            {
                usage.entry(scope).or_default().actual += stored_size(k.len(), v.len());
            }
        }
        for row in snap.range(self.system, RangeSpec::from(layout::quota_range()))? {
            let (k, v) = row?;
            if let Some(scope) = layout::quota_scope(&k) {
                usage.entry(scope).or_default().counted = counter_value(Some(&v))?;
            }
        }
        Ok(usage)
    }

    /// Removes values that expired at the clock's current reading, with
    /// their chunks and index entries, in commits that respect the limits,
    /// in expiry order. Stops after `max_commits` commits (`None`: no
    /// limit) and says where to resume. Deterministic for a given state and
    /// clock reading.
    ///
    /// # Errors
    /// An engine failure, or conflicts beyond the retry policy; commits
    /// made before it stay made (sweeping again is always safe).
    pub fn sweep_expired(&self, max_commits: Option<u64>) -> Result<SweepReport, StoreError> {
        self.sweep_from(None, max_commits)
    }

    /// As [`Store::sweep_expired`], resuming after `cursor`.
    ///
    /// # Errors
    /// As [`Store::sweep_expired`].
    pub fn sweep_from(
        &self,
        cursor: Option<SweepCursor>,
        max_commits: Option<u64>,
    ) -> Result<SweepReport, StoreError> {
        let now = self.clock.now_ms();
        let now = if strata_engine::fault_point!("sweep-too-early") {
            now + 1_000
        } else {
            now
        };
        let mut report = SweepReport::default();
        let mut from = cursor.map(|c| c.0);
        let mut width = self.options.limits.max_batch_entries.clamp(1, 256);
        let mut attempt = 0;
        loop {
            if max_commits.is_some_and(|m| report.commits >= m) {
                report.resume = from.map(SweepCursor);
                return Ok(report);
            }
            let range = layout::expiry_range(from.as_deref(), now);
            let entries: Vec<(Vec<u8>, u64, Vec<u8>)> = {
                let snap = self.engine.snapshot()?;
                snap.range(self.system, RangeSpec::from(range).limit(width))?
                    .filter_map(|row| match row {
                        Ok((k, _)) => layout::read_expiry(&k).map(|(at, data)| Ok((k, at, data))),
                        Err(e) => Some(Err(e)),
                    })
                    .collect::<Result<_, _>>()?
            };
            let Some((last, _, _)) = entries.last() else {
                return Ok(report);
            };
            let last = last.clone();
            let mut tx = Tx::at(self, now);
            let (mut removed, mut stale) = (0, 0);
            for (index_key, at, key) in entries {
                let meta = tx.read_data_row(&key)?;
                let live = self.describe(&key, meta.as_deref()).expires_at == Some(at) && at <= now;
                if live {
                    tx.push_pending(
                        key,
                        Pending::Delete {
                            chunked: true,
                            key_type: None,
                        },
                    );
                    removed += 1;
                } else {
                    tx.delete_system_row(index_key);
                    stale += 1;
                }
            }
            match tx.commit() {
                Ok(_) => {
                    crate::metrics::swept(removed, stale);
                    report.removed += removed;
                    report.stale += stale;
                    report.commits += 1;
                    attempt = 0;
                    let mut after = last;
                    after.push(0);
                    from = Some(after);
                }
                Err(StoreError::Limit { row: None, .. }) if width > 1 => width = width.div_ceil(2),
                Err(e) if e.is_conflict() => {
                    attempt += 1;
                    if attempt >= self.options.retry.max_attempts.max(1) {
                        return Err(StoreError::RetriesExhausted {
                            attempts: attempt,
                            last: Box::new(e),
                        });
                    }
                    self.clock.sleep_ms(self.backoff_ms(attempt));
                }
                Err(e) => return Err(e),
            }
        }
    }
}
