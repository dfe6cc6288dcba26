//! Events: stored once by id (a resend is a no-op), each with its outbox entry in the same commit; read by id or by time.

#[allow(clippy::wildcard_imports)]
use super::*;

/// The key `event` is stored under: [`event_key`] of its id.
fn stored_key(event: &Event) -> Result<String, MemoryError> {
    let key = event_key(&event.event_id)?;
    if strata_engine::fault_point!("memory-key-from-caller-time") {
        // The old key: the caller's timestamp, so a retry whose timestamp
        // was derived again is a second event.
        return Ok(format!(
            "evt:{:013}:{}",
            event.timestamp_ms % 10_000_000_000_000,
            &key[18..]
        ));
    }
    Ok(key)
}

impl<E: Engine> AgentMemory<'_, E> {
    /// Writes `event` and its outbox entry in one commit, unless an event
    /// with its key exists: returns whether it wrote. The existence check
    /// is a predicate of the commit (the key must be free when it
    /// commits), checked by the engine without a read before: of two
    /// concurrent writers of one event, one commits and the other, refused,
    /// reads the event in a transaction of its own and writes nothing.
    ///
    /// # Errors
    /// [`MemoryError::Invalid`], a store or outbox error.
    pub fn put_event(&self, event: &Event) -> Result<bool, MemoryError> {
        let key = stored_key(event)?;
        // Most events are new: commit them without reading first, on the
        // condition that the key is still free, which the engine checks in
        // the commit. Refused (the event is there, or it lost a race for
        // its key), the transaction below reads and decides.
        if !strata_engine::fault_point!("memory-read-then-write") {
            let mut tx = self.store.begin();
            tx.expect_absent_in(&self.events, key.as_bytes())?;
            self.write_event(&mut tx, &key, encode(event, &key)?, true)?;
            match tx.commit() {
                Ok(_) => return Ok(true),
                Err(e) if e.is_conflict() => {}
                Err(e) => return Err(e.into()),
            }
        }
        let bytes = encode(event, &key)?;
        self.store
            .transact(|tx| self.put_event_in(tx, &key, &bytes, true))
    }

    /// Writes `event` alone, without its outbox entry (the original's
    /// `put_event_only`: for events imported or replayed that the
    /// consumers must not see again), unless an event with its key exists;
    /// returns whether it wrote.
    ///
    /// # Errors
    /// As [`AgentMemory::put_event`].
    pub fn put_event_only(&self, event: &Event) -> Result<bool, MemoryError> {
        let key = stored_key(event)?;
        let bytes = encode(event, &key)?;
        self.store
            .transact(|tx| self.put_event_in(tx, &key, &bytes, false))
    }

    /// As [`AgentMemory::put_event`], in the caller's transaction.
    ///
    /// # Errors
    /// As [`AgentMemory::put_event`].
    pub fn put_event_tx(&self, tx: &mut Tx<'_, E>, event: &Event) -> Result<bool, MemoryError> {
        let key = stored_key(event)?;
        let bytes = encode(event, &key)?;
        self.put_event_in(tx, &key, &bytes, true)
    }

    pub(crate) fn put_event_in(
        &self,
        tx: &mut Tx<'_, E>,
        key: &str,
        bytes: &[u8],
        announce: bool,
    ) -> Result<bool, MemoryError> {
        let existing = if strata_engine::fault_point!("memory-read-then-write") {
            tx.snapshot_get_in(&self.events, key.as_bytes())?
        } else {
            tx.get_in(&self.events, key.as_bytes())?
        };
        let stored = existing.is_some();
        if !stored {
            self.write_event(tx, key, bytes.to_vec(), announce)?;
        } else if strata_engine::fault_point!("memory-resend-announced") && announce {
            self.announce(tx, key)?;
        }
        Ok(!stored)
    }

    /// Writes the event's row and, when `announce`, its outbox entry.
    fn write_event(
        &self,
        tx: &mut Tx<'_, E>,
        key: &str,
        bytes: Vec<u8>,
        announce: bool,
    ) -> Result<(), MemoryError> {
        self.write_row(tx, (&self.events, EVENTS), key, bytes, false)?;
        if announce {
            self.announce(tx, key)?;
        }
        Ok(())
    }

    /// The event's entry in the events topic.
    fn announce(&self, tx: &mut Tx<'_, E>, key: &str) -> Result<(), MemoryError> {
        self.outbox.push(
            tx,
            &self.topic,
            &EventAdded {
                key: key.to_owned(),
            },
        )?;
        Ok(())
    }

    /// The event with id `event_id` (found by the id alone: its key holds
    /// the ULID's time).
    ///
    /// # Errors
    /// [`MemoryError::Invalid`], [`MemoryError::Corrupt`], a store error.
    pub fn event(&self, event_id: &str) -> Result<Option<Event>, MemoryError> {
        let key = event_key(event_id)?;
        let mut tx = self.store.begin();
        match tx.snapshot_get_in(&self.events, key.as_bytes())? {
            None => Ok(None),
            Some(b) => Self::read_row(&mut tx, EVENTS, key.as_bytes(), b, false).map(Some),
        }
    }

    /// Events whose ids' times run from `start_ms` (inclusive) to `end_ms`
    /// (exclusive): the key's time, which is the ULID's, as in the
    /// original (the event's own `timestamp_ms` is its content), oldest
    /// or newest first, at most `limit`, continuing after event key
    /// `after` (the last key of the previous page, see [`event_key`]).
    ///
    /// # Errors
    /// [`MemoryError::Corrupt`], a store error.
    pub fn events(
        &self,
        start_ms: u64,
        end_ms: u64,
        newest_first: bool,
        limit: usize,
        after: Option<&str>,
    ) -> Result<EventPage, MemoryError> {
        let mut range = KeyRange {
            start: format!("evt:{start_ms:013}:").into_bytes(),
            end: Some(format!("evt:{end_ms:013}:").into_bytes()),
        };
        if let Some(after) = after {
            let after = after.as_bytes().to_vec();
            if newest_first {
                range.end = range.end.map(|e| e.min(after));
            } else {
                let mut next = after;
                next.push(0);
                range.start = range.start.max(next);
            }
        }
        if range.end.as_ref().is_some_and(|e| *e <= range.start) {
            return Ok(EventPage {
                events: Vec::new(),
                more: false,
            });
        }
        let mut tx = self.store.begin();
        let page = tx.snapshot_scan_in(&self.events, &range, Some(limit), newest_first)?;
        let events = page
            .rows
            .into_iter()
            .map(|(k, v)| Self::read_row(&mut tx, EVENTS, &k, v, false))
            .collect::<Result<Vec<Event>, _>>()?;
        Ok(EventPage {
            events,
            more: page.more,
        })
    }
}
