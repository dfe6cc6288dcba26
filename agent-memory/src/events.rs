//! Events: stored once by id (a resend is a no-op), each with its outbox entry in the same commit; read by time.

#[allow(clippy::wildcard_imports)]
use super::*;

impl<E: Engine> AgentMemory<'_, E> {
    /// Writes `event` and its outbox entry in one commit, unless an event
    /// with its key exists: returns whether it wrote. The existence check
    /// is a read in the transaction, so it is a predicate of the commit: of
    /// two concurrent writers of one event, one commits and the other
    /// retries, sees the event and writes nothing.
    ///
    /// # Errors
    /// [`MemoryError::Invalid`], a store or outbox error.
    pub fn put_event(&self, event: &Event) -> Result<bool, MemoryError> {
        let key = event_key(event.timestamp_ms, &event.event_id)?;
        let bytes = encode(event, &key)?;
        self.store
            .transact(|tx| self.put_event_in(tx, &key, &bytes))
    }

    /// As [`AgentMemory::put_event`], in the caller's transaction.
    ///
    /// # Errors
    /// As [`AgentMemory::put_event`].
    pub fn put_event_tx(&self, tx: &mut Tx<'_, E>, event: &Event) -> Result<bool, MemoryError> {
        let key = event_key(event.timestamp_ms, &event.event_id)?;
        let bytes = encode(event, &key)?;
        self.put_event_in(tx, &key, &bytes)
    }

    pub(crate) fn put_event_in(
        &self,
        tx: &mut Tx<'_, E>,
        key: &str,
        bytes: &[u8],
    ) -> Result<bool, MemoryError> {
        let existing = if strata_engine::fault_point!("memory-read-then-write") {
            tx.snapshot_get_in(&self.events, key.as_bytes())?
        } else {
            tx.get_in(&self.events, key.as_bytes())?
        };
        let stored = existing.is_some();
        if !stored {
            tx.put_in(&self.events, key.as_bytes().to_vec(), bytes.to_vec())?;
        } else if !strata_engine::fault_point!("memory-resend-announced") {
            return Ok(false);
        }
        self.outbox.push(
            tx,
            &self.topic,
            &EventAdded {
                key: key.to_owned(),
            },
        )?;
        Ok(!stored)
    }

    /// The event at `timestamp_ms` with `event_id`.
    ///
    /// # Errors
    /// [`MemoryError::Invalid`], [`MemoryError::Corrupt`], a store error.
    pub fn event(&self, timestamp_ms: u64, event_id: &str) -> Result<Option<Event>, MemoryError> {
        let key = event_key(timestamp_ms, event_id)?;
        let mut tx = self.store.begin();
        tx.snapshot_get_in(&self.events, key.as_bytes())?
            .map(|b| decode(key.as_bytes(), &b))
            .transpose()
    }

    /// Events from `start_ms` (inclusive) to `end_ms` (exclusive), oldest
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
            .iter()
            .map(|(k, v)| decode(k, v))
            .collect::<Result<Vec<Event>, _>>()?;
        Ok(EventPage {
            events,
            more: page.more,
        })
    }
}
