//! Consumers: registered, unregistered and reset on a topic.

use strata_engine::Engine;
use strata_keys::tuple;

#[allow(clippy::wildcard_imports)]
use crate::*;

/// What [`Outbox::register`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Registered {
    /// The consumer is new: entries after this position are its to handle.
    New(Position),
    /// The consumer was registered already and is left as it was (the
    /// start asked for is not applied; see [`Outbox::reset`]): its
    /// checkpoint.
    Existing(Position),
}

impl<E: Engine> Outbox<'_, E> {
    /// Registers `consumer` on `topic`, starting as `start` says, durably
    /// (an `Immediate` commit). A consumer already registered is left as it
    /// is, `start` not applied: the result says which happened (move an
    /// existing consumer with [`Outbox::reset`]).
    ///
    /// # Errors
    /// [`OutboxError::BadName`]; a store failure.
    pub fn register(
        &self,
        topic: &str,
        consumer: &str,
        start: Start,
    ) -> Result<Registered, OutboxError> {
        check_name("topic", topic)?;
        check_name("consumer", consumer)?;
        let from = self.start_position(topic, start)?;
        self.store.transact(|tx| {
            // Durable on return, whatever the store's durability: a
            // registration lost in a crash would make trimming forget the
            // consumer.
            tx.set_durability(strata_engine::Durability::Immediate);
            let key = layout::checkpoint_key(topic, consumer);
            if let Some(existing) = tx.get_in(&self.state, &key)? {
                return Ok(Registered::Existing(read_position(&key, &existing)?));
            }
            {
                tx.put_in(&self.state, key, pack_position(from))?;
                // Described in the store's catalog, for tools.
                tx.catalog_put(CATALOG_TOPIC, topic, FORMAT, ENTRIES.as_bytes())?;
                tx.catalog_put(
                    CATALOG_CONSUMER,
                    &format!("{topic}/{consumer}"),
                    FORMAT,
                    &tuple::pack(&(topic, consumer, from.version, from.order)),
                )?;
            }
            Ok::<_, OutboxError>(Registered::New(from))
        })
    }

    /// Removes `consumer` from `topic`: its checkpoint, lease, finished
    /// marks, attempt records, dead letters and catalog entry, so that
    /// trimming no longer waits for it. Rows go in commits within the batch
    /// entry limit, the checkpoint last (an interrupted call leaves the
    /// consumer registered; call again). Returns whether it was registered.
    ///
    /// # Errors
    /// [`OutboxError::LeaseHeld`] while a worker holds the consumer; a
    /// store failure.
    pub fn unregister(&self, topic: &str, consumer: &str) -> Result<bool, OutboxError> {
        let now = self.clock.now_ms();
        let room = self.store.options().limits.max_batch_entries.clamp(4, 1024) - 3;
        loop {
            let finished = self.store.transact(|tx| {
                let key = layout::checkpoint_key(topic, consumer);
                if tx.get_in(&self.state, &key)?.is_none() {
                    return Ok(None);
                }
                let lease = layout::lease_key(topic, consumer);
                if let Some(held) = tx
                    .get_in(&self.state, &lease)?
                    .map(|v| read_lease(&lease, &v))
                    .transpose()?
                    .filter(|h| h.until > now)
                {
                    return Err(OutboxError::LeaseHeld {
                        topic: topic.to_owned(),
                        consumer: consumer.to_owned(),
                        holder: held.holder,
                        until_ms: held.until,
                    });
                }
                let mut left = room;
                for (space, range) in [
                    (&self.state, layout::done_rows(topic, consumer)),
                    (&self.state, layout::try_rows(topic, consumer)),
                    (&self.dead, layout::dead_rows(topic, consumer)),
                    (&self.dead, layout::dead_note_rows(topic, consumer)),
                ] {
                    let page = tx.scan_in(space, &range, Some(left), false)?;
                    for (k, _) in page.rows {
                        tx.delete_in(space, k)?;
                        left -= 1;
                    }
                    if left == 0 {
                        return Ok(Some(false));
                    }
                }
                tx.delete_in(&self.state, key)?;
                tx.delete_in(&self.state, lease)?;
                tx.catalog_delete(CATALOG_CONSUMER, &format!("{topic}/{consumer}"))?;
                Ok::<_, OutboxError>(Some(true))
            })?;
            match finished {
                None => return Ok(false),
                Some(true) => return Ok(true),
                Some(false) => {}
            }
        }
    }

    /// Moves `consumer`'s checkpoint to `start` and forgets its finished
    /// marks and failures: a replay from there (or a skip ahead).
    ///
    /// # Errors
    /// [`OutboxError::UnknownConsumer`]; a store failure.
    pub fn reset(&self, topic: &str, consumer: &str, start: Start) -> Result<(), OutboxError> {
        let from = self.start_position(topic, start)?;
        self.store.transact(|tx| {
            tx.set_durability(strata_engine::Durability::Immediate);
            let key = layout::checkpoint_key(topic, consumer);
            if tx.get_in(&self.state, &key)?.is_none() {
                return Err(unknown(topic, consumer));
            }
            tx.put_in(&self.state, key, pack_position(from))?;
            for range in [
                layout::done_rows(topic, consumer),
                layout::try_rows(topic, consumer),
            ] {
                for (k, _) in tx.scan_in(&self.state, &range, None, false)?.rows {
                    tx.delete_in(&self.state, k)?;
                }
            }
            Ok(())
        })
    }

    pub(crate) fn start_position(
        &self,
        topic: &str,
        start: Start,
    ) -> Result<Position, OutboxError> {
        Ok(match start {
            Start::Beginning => Position::START,
            Start::AfterVersion(v) => Position::end_of(v),
            Start::End => {
                let last = self.store.transact(|tx| {
                    let page = tx.snapshot_scan_in(
                        &self.entries,
                        &layout::all_entries(topic),
                        Some(1),
                        true,
                    )?;
                    Ok::<_, OutboxError>(
                        page.rows
                            .first()
                            .and_then(|(k, _)| layout::entry_position(k)),
                    )
                })?;
                last.unwrap_or(Position::START)
                    .max(Position::end_of(self.store.engine().last_version()))
            }
        })
    }
}
