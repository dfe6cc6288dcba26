//! Dead letters: entries given up on, listed, re-driven and purged.

use strata_engine::Engine;
use strata_keys::tuple;
use strata_store::Tx;

#[allow(clippy::wildcard_imports)]
use crate::*;

/// An entry a consumer gave up on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeadLetter {
    /// Where it sat in the topic.
    pub position: Position,
    /// The ordering key it was pushed with, if any.
    pub ordering_key: Option<Vec<u8>>,
    /// The entry's envelope (decode with the topic's type).
    pub envelope: Vec<u8>,
    /// The last failure's text.
    pub error: String,
    /// Failures.
    pub attempts: u32,
    /// First and last failure (clock milliseconds).
    pub first_failure_ms: u64,
    /// The last failure.
    pub last_failure_ms: u64,
}

/// A dead letter from its entry row (`key`, `value`) and its note row:
/// the note's `(error, attempts, first_ms, last_ms)`, or, for a dead
/// letter written before notes had their own row, all of it in `value`.
pub(crate) fn read_dead(
    key: &[u8],
    value: &[u8],
    note: Option<&[u8]>,
    prefix: usize,
) -> Result<DeadLetter, OutboxError> {
    let position = layout::trailing_position(key, prefix)
        .ok_or_else(|| corrupt(OutboxRow::DeadLetter, key))?;
    let (entry, (error, attempts, first_failure_ms, last_failure_ms)) = if let Some(note) = note {
        let note = tuple::unpack::<(String, u32, u64, u64)>(note)
            .map_err(|e| corrupt_by(OutboxRow::DeadLetter, key, e))?;
        (std::borrow::Cow::Borrowed(value), note)
    } else {
        let (entry, error, attempts, first, last) =
            tuple::unpack::<(Vec<u8>, String, u32, u64, u64)>(value)
                .map_err(|e| corrupt_by(OutboxRow::DeadLetter, key, e))?;
        (entry.into(), (error, attempts, first, last))
    };
    let (_, ordering_key, envelope) =
        layout::read_entry_value(&entry).ok_or_else(|| corrupt(OutboxRow::DeadLetter, key))?;
    Ok(DeadLetter {
        position,
        ordering_key,
        envelope,
        error,
        attempts,
        first_failure_ms,
        last_failure_ms,
    })
}

impl<E: Engine> Outbox<'_, E> {
    /// Moves the entry at `position` to the dead letters at once, whatever
    /// its attempts: for an entry its consumer can never handle (one that
    /// does not map to a document, say). Counted as a dead letter in the
    /// metrics, like one [`Outbox::fail`] moved.
    ///
    /// # Errors
    /// [`OutboxError::StaleLease`]; [`OutboxError::NoEntry`];
    /// [`OutboxError::AlreadyFinished`]; a store failure.
    pub fn dead_letter(
        &self,
        lease: &Lease,
        position: Position,
        error: &str,
    ) -> Result<(), OutboxError> {
        self.dead_letter_now(lease, position, error)?;
        crate::metrics::failed(&lease.topic, &lease.consumer, true);
        Ok(())
    }

    pub(crate) fn dead_letter_now(
        &self,
        lease: &Lease,
        position: Position,
        error: &str,
    ) -> Result<(), OutboxError> {
        let now = self.clock.now_ms();
        self.store.transact(|tx| {
            self.check_lease(tx, lease)?;
            self.move_to_dead(tx, lease, position, error, 1, now, now)
        })
    }

    #[allow(clippy::too_many_arguments)]
    pub(crate) fn move_to_dead(
        &self,
        tx: &mut Tx<'_, E>,
        lease: &Lease,
        position: Position,
        error: &str,
        attempts: u32,
        first_ms: u64,
        now: u64,
    ) -> Result<(), OutboxError> {
        let (topic, consumer) = (&lease.topic, &lease.consumer);
        let entry = tx
            .get_in(&self.entries, &layout::entry_key(topic, position))?
            .ok_or(OutboxError::NoEntry(position))?;
        // The entry row as it was (it fit in its space, so it fits here),
        // and why, its text cut to fit: both always within the limit.
        let room = layout::error_room(self.store.options().limits.max_value_bytes);
        let error = layout::fit_error(error, room);
        tx.put_in(
            &self.dead,
            layout::dead_key(topic, consumer, position),
            entry,
        )?;
        tx.put_in(
            &self.dead,
            layout::dead_note_key(topic, consumer, position),
            tuple::pack(&(&*error, attempts, first_ms, now)),
        )?;
        tx.delete_in(&self.state, layout::try_key(topic, consumer, position))?;
        self.finish(tx, topic, consumer, position)
    }

    /// `consumer`'s dead letters on `topic`, in position order.
    ///
    /// # Errors
    /// A store failure or a corrupt row.
    pub fn dead_letters(
        &self,
        topic: &str,
        consumer: &str,
    ) -> Result<Vec<DeadLetter>, OutboxError> {
        let prefix = tuple::pack(&("x", topic, consumer)).len();
        self.store.transact(|tx| {
            let entries =
                tx.snapshot_scan_in(&self.dead, &layout::dead_rows(topic, consumer), None, false)?;
            let notes = tx.snapshot_scan_in(
                &self.dead,
                &layout::dead_note_rows(topic, consumer),
                None,
                false,
            )?;
            // Notes by position (their keys' tails are the entries').
            let notes: std::collections::BTreeMap<&[u8], &[u8]> = notes
                .rows
                .iter()
                .map(|(k, v)| (&k[prefix.min(k.len())..], v.as_slice()))
                .collect();
            entries
                .rows
                .iter()
                .map(|(k, v)| {
                    let note = notes.get(&k[prefix.min(k.len())..]).copied();
                    read_dead(k, v, note, prefix)
                })
                .collect()
        })
    }

    /// Pushes a dead letter's entry into `topic` again (a new entry, with
    /// its ordering key, delivered to every consumer of the topic) and
    /// removes the dead letter, in one commit.
    ///
    /// # Errors
    /// [`OutboxError::NoEntry`] when there is no such dead letter; a store
    /// failure.
    pub fn redrive(
        &self,
        topic: &str,
        consumer: &str,
        position: Position,
    ) -> Result<(), OutboxError> {
        let prefix = tuple::pack(&("x", topic, consumer)).len();
        let now = self.clock.now_ms();
        self.store.transact(|tx| {
            let key = layout::dead_key(topic, consumer, position);
            let note_key = layout::dead_note_key(topic, consumer, position);
            let row = tx
                .get_in(&self.dead, &key)?
                .ok_or(OutboxError::NoEntry(position))?;
            let note = tx.get_in(&self.dead, &note_key)?;
            let dead = read_dead(&key, &row, note.as_deref(), prefix)?;
            let (entry_key, offset) = layout::new_entry_key(topic);
            let value = layout::entry_value(now, dead.ordering_key.as_deref(), &dead.envelope);
            tx.put_versionstamped_in(&self.entries, entry_key, offset, value)?;
            tx.delete_in(&self.dead, key)?;
            tx.delete_in(&self.dead, note_key)?;
            Ok(())
        })
    }

    /// Deletes a dead letter for good.
    ///
    /// # Errors
    /// A store failure.
    pub fn purge(
        &self,
        topic: &str,
        consumer: &str,
        position: Position,
    ) -> Result<(), OutboxError> {
        self.store.transact(|tx| {
            tx.delete_in(&self.dead, layout::dead_key(topic, consumer, position))?;
            tx.delete_in(&self.dead, layout::dead_note_key(topic, consumer, position))?;
            Ok(())
        })
    }
}
