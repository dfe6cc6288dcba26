//! Trimming below the slowest consumer, lag and checkpoints.

use std::collections::BTreeSet;

use strata_engine::{Engine, RowCursor};
use strata_store::Tx;

#[allow(clippy::wildcard_imports)]
use crate::*;

/// How far a consumer is behind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Lag {
    /// Durable entries not finished.
    pub entries: u64,
    /// Age of the oldest of them (clock milliseconds; 0 without any).
    pub oldest_age_ms: u64,
}

/// What [`Outbox::trim`] removed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Trimmed {
    /// Entries deleted.
    pub entries: u64,
    /// Commits made.
    pub commits: u64,
    /// Whether entries below the cut remain (`max_commits` reached).
    pub more: bool,
}

impl<E: Engine> Outbox<'_, E> {
    /// Deletes `topic`'s entries that every registered consumer has passed
    /// (at or below the lowest checkpoint) and that were pushed at least
    /// `retention_ms` ago, in commits of at most the batch entry limit, up
    /// to `max_commits` of them (`None`: until done). Never deletes an entry
    /// a registered consumer has not passed; a topic without consumers keeps
    /// everything.
    ///
    /// # Errors
    /// A store failure; trimming can resume by calling again.
    pub fn trim(
        &self,
        topic: &str,
        retention_ms: u64,
        max_commits: Option<u64>,
    ) -> Result<Trimmed, OutboxError> {
        let now = self.clock.now_ms();
        let batch = self.store.options().limits.max_batch_entries.clamp(1, 1024);
        let mut report = Trimmed::default();
        loop {
            if max_commits.is_some_and(|m| report.commits >= m) {
                report.more = true;
                return Ok(report);
            }
            let deleted = self.store.transact(|tx| {
                // Pinned: a consumer moving back (a reset) conflicts.
                let checkpoints =
                    tx.scan_in(&self.state, &layout::checkpoints(topic), None, false)?;
                let marks = checkpoints
                    .rows
                    .iter()
                    .map(|(k, v)| read_position(k, v))
                    .collect::<Result<Vec<_>, _>>()?;
                let marks = if strata_engine::fault_point!("trim-ignores-slowest") {
                    marks.into_iter().max().into_iter().collect()
                } else {
                    marks
                };
                let Some(lowest) = marks.into_iter().min() else {
                    return Ok(0);
                };
                let range = layout::entries_between(topic, Position::START, lowest);
                let page = tx.snapshot_scan_in(&self.entries, &range, Some(batch), false)?;
                let mut n = 0;
                for (k, v) in page.rows {
                    let (pushed_ms, _, _) = layout::read_entry_value(&v)
                        .ok_or_else(|| corrupt(OutboxRow::EntryValue, &k))?;
                    if now.saturating_sub(pushed_ms) < retention_ms {
                        break;
                    }
                    tx.delete_in(&self.entries, k)?;
                    n += 1;
                }
                Ok::<_, OutboxError>(n)
            })?;
            if deleted == 0 {
                return Ok(report);
            }
            crate::metrics::trimmed(topic, deleted);
            report.entries += deleted;
            report.commits += 1;
        }
    }

    /// How far `consumer` is behind on `topic`: durable entries not finished,
    /// and the age of the oldest. Durable as a poll reads it: when entries
    /// wait beyond what this engine has seen durable (its own buffered
    /// commits, or another process's on a shared server), the engine is
    /// synced first, at most once per [`OutboxConfig::sync_interval_ms`](crate::OutboxConfig::sync_interval_ms).
    ///
    /// # Errors
    /// [`OutboxError::UnknownConsumer`]; a store failure.
    pub fn lag(&self, topic: &str, consumer: &str) -> Result<Lag, OutboxError> {
        let mut tx = self.store.begin();
        let st = self.consumer_state(&mut tx, topic, consumer)?;
        let lag = self.lag_in(&mut tx, topic, st.low_water, &st.done)?;
        crate::metrics::lag(topic, consumer, lag);
        Ok(lag)
    }

    /// How far a reader that holds every entry of `topic` up to `position`
    /// is behind: the durable entries after it, and the age of the oldest.
    /// For a consumer that keeps its own position (a search index, whose
    /// position may lag the consumer's checkpoint when its files were lost).
    ///
    /// # Errors
    /// A store failure.
    pub fn lag_after(&self, topic: &str, position: Position) -> Result<Lag, OutboxError> {
        let mut tx = self.store.begin();
        self.lag_in(&mut tx, topic, position, &BTreeSet::new())
    }

    pub(crate) fn lag_in(
        &self,
        tx: &mut Tx<'_, E>,
        topic: &str,
        after: Position,
        done: &BTreeSet<Position>,
    ) -> Result<Lag, OutboxError> {
        let now = self.clock.now_ms();
        // As a poll reads: up to the durable version, after a sync when
        // entries wait beyond it. Another process (on a shared server) may
        // have committed and finished entries past what this engine has
        // seen durable: the sync covers its commits, and a consumer ahead
        // of even that has nothing this outbox knows to be owed.
        let durable = self.durable_for(tx, topic, after, now)?;
        let mut lag = Lag::default();
        if Position::end_of(durable) <= after {
            return Ok(lag);
        }
        let range = layout::entries_between(topic, after, Position::end_of(durable));
        // Streamed: a backlog of any size is counted in constant memory.
        let mut rows = tx.snapshot_cursor_in(&self.entries, &range, false)?;
        while let Some(row) = rows.next_row() {
            let (k, v) = row.map_err(strata_store::StoreError::from)?;
            let pos = layout::entry_position(k).ok_or_else(|| corrupt(OutboxRow::EntryKey, k))?;
            if done.contains(&pos) {
                continue;
            }
            let (pushed_ms, _, _) =
                layout::read_entry_value(v).ok_or_else(|| corrupt(OutboxRow::EntryValue, k))?;
            lag.entries += 1;
            lag.oldest_age_ms = lag.oldest_age_ms.max(now.saturating_sub(pushed_ms));
        }
        Ok(lag)
    }

    /// The checkpoint of `consumer` on `topic`: every entry at or below it
    /// is finished (entries above it may be finished too, out of order). A
    /// consumer that keeps its own record of progress (a search index that
    /// commits its position with its documents) compares it with this.
    ///
    /// # Errors
    /// [`OutboxError::UnknownConsumer`]; a store failure.
    pub fn checkpoint(&self, topic: &str, consumer: &str) -> Result<Position, OutboxError> {
        let mut tx = self.store.begin();
        let key = layout::checkpoint_key(topic, consumer);
        tx.snapshot_get_in(&self.state, &key)?
            .ok_or_else(|| unknown(topic, consumer))
            .and_then(|v| read_position(&key, &v))
    }
}
