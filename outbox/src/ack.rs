//! Acknowledgements and failures: entries finished, or retried with backoff.

use std::sync::PoisonError;

use strata_engine::Engine;
use strata_keys::tuple;
use strata_store::Tx;

#[allow(clippy::wildcard_imports)]
use crate::*;

/// What [`Outbox::fail`] did with a failed entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failed {
    /// It will be delivered again from `at_ms` on.
    Retry {
        /// When, in clock milliseconds.
        at_ms: u64,
        /// Failures so far.
        attempts: u32,
    },
    /// It reached the attempt limit and is now a dead letter; the
    /// checkpoint may pass it.
    DeadLettered,
}

impl<E: Engine> Outbox<'_, E> {
    /// Acknowledges the entry at `position` in `tx`, the handler's own
    /// transaction: it commits with the handler's writes (exactly once for
    /// effects in this store) or not at all. Moves the checkpoint past every
    /// finished entry in order.
    ///
    /// Acknowledging an entry already finished fails with
    /// [`OutboxError::AlreadyFinished`], so the handler's transaction rolls
    /// back with its writes: whatever delivered the entry twice (a retry
    /// after a lost reply, a second worker), its effects commit once.
    ///
    /// # Errors
    /// [`OutboxError::StaleLease`] when another worker took the consumer
    /// over; [`OutboxError::AlreadyFinished`]; a store failure.
    pub fn ack(
        &self,
        tx: &mut Tx<'_, E>,
        lease: &Lease,
        position: Position,
    ) -> Result<(), OutboxError> {
        self.check_lease(tx, lease)?;
        self.finish(tx, &lease.topic, &lease.consumer, position)
    }

    /// Marks `position` finished and advances the checkpoint over every
    /// finished entry that follows it in order.
    pub(crate) fn finish(
        &self,
        tx: &mut Tx<'_, E>,
        topic: &str,
        consumer: &str,
        position: Position,
    ) -> Result<(), OutboxError> {
        let ck_key = layout::checkpoint_key(topic, consumer);
        let low_water = tx
            .get_in(&self.state, &ck_key)?
            .ok_or_else(|| unknown(topic, consumer))
            .and_then(|v| read_position(&ck_key, &v))?;
        let done_key = layout::done_key(topic, consumer, position);
        if position <= low_water || tx.get_in(&self.state, &done_key)?.is_some() {
            if strata_engine::fault_point!("shared-holder-name") {
                return Ok(());
            }
            return Err(OutboxError::AlreadyFinished(position));
        }
        if tx
            .snapshot_get_in(&self.entries, &layout::entry_key(topic, position))?
            .is_none()
        {
            return Err(OutboxError::NoEntry(position));
        }
        tx.delete_in(&self.state, layout::try_key(topic, consumer, position))?;
        // The entries after the checkpoint, in order: passed while each is
        // this one or already finished.
        let done = self.finished_marks(tx, topic, consumer)?;
        let range = layout::entries_between(topic, low_water, Position::end_of(u64::MAX));
        let mut new_low = low_water;
        let mut page_from = range;
        // Small pages first: an acknowledgement in order stops at the
        // second entry, and every row a page reads is copied.
        let mut page_size = 4;
        'scan: loop {
            let page = tx.snapshot_scan_in(&self.entries, &page_from, Some(page_size), false)?;
            page_size = (page_size * 4).min(256);
            for (k, _) in &page.rows {
                let pos =
                    layout::entry_position(k).ok_or_else(|| corrupt(OutboxRow::EntryKey, k))?;
                if pos == position || done.contains(&pos) {
                    new_low = pos;
                } else {
                    break 'scan;
                }
            }
            match page.rows.last() {
                Some((k, _)) if page.more => {
                    let mut start = k.clone();
                    start.push(0);
                    page_from.start = start;
                }
                _ => break,
            }
        }
        if strata_engine::fault_point!("checkpoint-past-failed") {
            new_low = new_low.max(position);
        }
        if new_low >= position {
            tx.put_in(&self.state, ck_key, pack_position(new_low))?;
        } else {
            tx.put_in(&self.state, done_key, Vec::new())?;
        }
        // Finished marks at or below the checkpoint are no longer needed:
        // a few go with each acknowledgement, so that one acknowledgement
        // never takes more than a quarter of the batch entry limit (the
        // handler's own writes share the commit). The rest go with later
        // ones; until then they are ignored.
        let cap = (self.store.options().limits.max_batch_entries / 4).max(1);
        for pos in done.range(..=new_low.max(low_water)).take(cap) {
            tx.delete_in(&self.state, layout::done_key(topic, consumer, *pos))?;
        }
        Ok(())
    }

    /// Acknowledges every entry up to and including `position` in `tx`, in
    /// one step: for a consumer that handles its topic strictly in commit
    /// order and keeps its own record of progress (a search index commits
    /// its position with its documents), the way a log consumer commits an
    /// offset. Entries at or below `position` that wait for a retry are
    /// acknowledged with the rest. `position` need not be an entry's: a
    /// consumer that rebuilt its state from a store snapshot at version `v`
    /// acknowledges through [`Position::end_of`]`(v)`. Acknowledging at or
    /// below the checkpoint does nothing.
    ///
    /// # Errors
    /// [`OutboxError::StaleLease`]; [`OutboxError::NoEntry`] when
    /// `position` lies after the last commit; a store failure.
    pub fn ack_through(
        &self,
        tx: &mut Tx<'_, E>,
        lease: &Lease,
        position: Position,
    ) -> Result<(), OutboxError> {
        self.check_lease(tx, lease)?;
        let (topic, consumer) = (lease.topic.as_str(), lease.consumer.as_str());
        let ck_key = layout::checkpoint_key(topic, consumer);
        let low_water = tx
            .get_in(&self.state, &ck_key)?
            .ok_or_else(|| unknown(topic, consumer))
            .and_then(|v| read_position(&ck_key, &v))?;
        if position <= low_water {
            return Ok(());
        }
        if position.version > self.store.engine().last_version() {
            return Err(OutboxError::NoEntry(position));
        }
        tx.put_in(&self.state, ck_key, pack_position(position))?;
        // Marks and attempt records at or below the new checkpoint are
        // dead weight; as in `finish`, a bounded number go per commit.
        let cap = (self.store.options().limits.max_batch_entries / 4).max(1);
        let done = self.finished_marks(tx, topic, consumer)?;
        let mut left = cap;
        for pos in done.range(..=position).take(left) {
            tx.delete_in(&self.state, layout::done_key(topic, consumer, *pos))?;
            left -= 1;
        }
        let try_prefix = tuple::pack(&("t", topic, consumer)).len();
        let tries = tx.scan_in(&self.state, &layout::try_rows(topic, consumer), None, false)?;
        for (k, _) in tries.rows.iter().take(left) {
            let pos = layout::trailing_position(k, try_prefix)
                .ok_or_else(|| corrupt(OutboxRow::AttemptRecord, k))?;
            if pos > position {
                break;
            }
            tx.delete_in(&self.state, k.clone())?;
        }
        Ok(())
    }

    /// Records a failure of the entry at `position`: it is retried after a
    /// backoff (exponential, with jitter), or, at the attempt limit, moved
    /// to the dead letters in one commit, after which the checkpoint may
    /// pass it.
    ///
    /// # Errors
    /// [`OutboxError::StaleLease`]; [`OutboxError::NoEntry`]; a store
    /// failure.
    pub fn fail(
        &self,
        lease: &Lease,
        position: Position,
        error: &str,
    ) -> Result<Failed, OutboxError> {
        let outcome = self.fail_once(lease, position, error)?;
        crate::metrics::failed(
            &lease.topic,
            &lease.consumer,
            outcome == Failed::DeadLettered,
        );
        Ok(outcome)
    }

    pub(crate) fn fail_once(
        &self,
        lease: &Lease,
        position: Position,
        error: &str,
    ) -> Result<Failed, OutboxError> {
        let now = self.clock.now_ms();
        let jitter = self
            .rng
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .next_u64();
        self.store.transact(|tx| {
            self.check_lease(tx, lease)?;
            let (topic, consumer) = (&lease.topic, &lease.consumer);
            let key = layout::try_key(topic, consumer, position);
            let before = tx
                .get_in(&self.state, &key)?
                .map(|v| {
                    tuple::unpack::<TryRow>(&v)
                        .map_err(|e| corrupt_by(OutboxRow::AttemptRecord, &key, e))
                })
                .transpose()?;
            let attempts = before.as_ref().map_or(0, |t| t.0) + 1;
            let first_ms = before.as_ref().map_or(now, |t| t.1);
            if attempts >= self.config.max_attempts.max(1) {
                self.move_to_dead(tx, lease, position, error, attempts, first_ms, now)?;
                return Ok(Failed::DeadLettered);
            }
            let ceiling = self
                .config
                .base_backoff_ms
                .saturating_mul(1u64 << (attempts - 1).min(40))
                .min(self.config.max_backoff_ms);
            let wait = ceiling / 2 + jitter % (ceiling - ceiling / 2 + 1);
            let at_ms = now.saturating_add(wait);
            let room = layout::error_room(self.store.options().limits.max_value_bytes);
            tx.put_in(
                &self.state,
                key,
                tuple::pack(&(
                    attempts,
                    first_ms,
                    now,
                    at_ms,
                    &*layout::fit_error(error, room),
                )),
            )?;
            Ok(Failed::Retry { at_ms, attempts })
        })
    }
}
