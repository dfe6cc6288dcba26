//! Read-only inspection: which consumers are registered, and where each
//! stands (checkpoint, lag, dead letters, lease), for tools and
//! dashboards. Nothing here writes.

use strata_engine::Engine;
use strata_keys::tuple;
use strata_keys::{Key, KeyRange};

use crate::{Lag, Outbox, OutboxError, OutboxRow, Position, corrupt_by, layout, read_lease};

/// One topic holding entries ([`Outbox::topics`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct TopicEntries {
    /// The topic's name.
    pub topic: String,
    /// Entries stored (finished ones not yet trimmed included).
    pub entries: u64,
    /// The first entry's position.
    pub first: Position,
    /// The last entry's position.
    pub last: Position,
}

/// Where one registered consumer stands ([`Outbox::status`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ConsumerStatus {
    /// The topic it consumes.
    pub topic: String,
    /// The consumer's name.
    pub consumer: String,
    /// Every entry at or before it is finished.
    pub checkpoint: Position,
    /// Durable entries after the checkpoint not finished, and the oldest's
    /// age.
    pub lag: Lag,
    /// Entries moved to its dead letters (kept until re-driven or
    /// purged).
    pub dead_letters: usize,
    /// Its lease, if one was ever taken and has not been released or
    /// expired.
    pub lease: Option<LeaseStatus>,
}

/// A consumer's lease as [`Outbox::status`] reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct LeaseStatus {
    /// The name the holder took it under.
    pub holder: String,
    /// Its fencing token.
    pub token: u64,
    /// Until when it holds without renewal (clock milliseconds).
    pub until_ms: u64,
}

impl<E: Engine> Outbox<'_, E> {
    /// Every registered consumer, as `(topic, consumer)` pairs in that
    /// order, read from the consumers' checkpoints (the outbox's own
    /// record, not the store's catalog).
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use strata_codec::Limits;
    /// # use strata_engine::{ManualClock, MemEngine, SeededRng};
    /// # use strata_outbox::{Outbox, OutboxConfig, Start};
    /// # use strata_store::{Store, StoreOptions};
    /// let options = Outbox::<MemEngine>::declare(StoreOptions::new(Limits::FOUNDATIONDB));
    /// let store = Store::open(MemEngine::open(options.keyspace_specs())?, options)?;
    /// let clock = Arc::new(ManualClock::new(0));
    /// let outbox = Outbox::new(&store, OutboxConfig::default(), clock, Box::new(SeededRng::new(1)))?;
    /// outbox.register("orders", "mailer", Start::Beginning)?;
    /// outbox.register("audit", "archiver", Start::End)?;
    /// assert_eq!(
    ///     outbox.consumers()?,
    ///     [("audit".to_owned(), "archiver".to_owned()), ("orders".to_owned(), "mailer".to_owned())]
    /// );
    /// let status = outbox.status("orders", "mailer")?;
    /// assert_eq!((status.lag.entries, status.dead_letters, status.lease), (0, 0, None));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// A checkpoint row that does not read ([`OutboxError::Corrupt`]); a
    /// store failure.
    pub fn consumers(&self) -> Result<Vec<(String, String)>, OutboxError> {
        let mut tx = self.store.begin();
        let all = KeyRange::tuple_prefix(&tuple::pack(&("c",)));
        tx.snapshot_scan_in(&self.state, &all, None, false)?
            .rows
            .iter()
            .map(|(k, _)| {
                tuple::unpack::<(String, String, String)>(k)
                    .map(|(_, topic, consumer)| (topic, consumer))
                    .map_err(|e| corrupt_by(OutboxRow::Checkpoint, k, e))
            })
            .collect()
    }

    /// Every topic that holds entries, by name, with its entry count and
    /// first and last positions, whether or not a consumer is registered
    /// for it (a topic nothing consumes is never trimmed: this finds it).
    /// One snapshot; each topic's entries are read once to count them.
    ///
    /// # Errors
    /// An entry key that does not read ([`OutboxError::Corrupt`]); a store
    /// failure.
    pub fn topics(&self) -> Result<Vec<TopicEntries>, OutboxError> {
        let mut tx = self.store.begin();
        let mut from = KeyRange::tuple_prefix(&tuple::pack(&("e",)));
        let mut topics = Vec::new();
        loop {
            let Some((first_key, _)) = tx
                .snapshot_scan_in(&self.entries, &from, Some(1), false)?
                .rows
                .into_iter()
                .next()
            else {
                return Ok(topics);
            };
            let key = layout::EntryKey::unpack(&first_key)
                .map_err(|e| corrupt_by(OutboxRow::EntryKey, &first_key, e))?;
            let range = layout::all_entries(&key.topic);
            let position = |k: &[u8]| {
                layout::entry_position(k).ok_or_else(|| crate::corrupt(OutboxRow::EntryKey, k))
            };
            // Counted a page at a time: a topic may hold millions.
            let mut page_range = range.clone();
            let (mut entries, mut last) = (0u64, first_key.clone());
            loop {
                let page = tx.snapshot_scan_in(&self.entries, &page_range, Some(4_096), false)?;
                entries += u64::try_from(page.rows.len()).unwrap_or(u64::MAX);
                if let Some((k, _)) = page.rows.last() {
                    last.clone_from(k);
                }
                if !page.more || page.rows.is_empty() {
                    break;
                }
                page_range.start.clone_from(&last);
                page_range.start.push(0);
            }
            topics.push(TopicEntries {
                entries,
                first: position(&first_key)?,
                last: position(&last)?,
                topic: key.topic,
            });
            // The next topic starts past every key of this one.
            from.start = range.end.unwrap_or_default();
        }
    }

    /// Where consumer `consumer` of `topic` stands: its checkpoint, its
    /// lag, how many dead letters it holds, and its lease if one is live.
    /// Read in one snapshot but for the dead letters (their own read).
    ///
    /// # Errors
    /// [`OutboxError::UnknownConsumer`]; a row that does not read; a store
    /// failure.
    pub fn status(&self, topic: &str, consumer: &str) -> Result<ConsumerStatus, OutboxError> {
        let now = self.clock.now_ms();
        let mut tx = self.store.begin();
        let st = self.consumer_state(&mut tx, topic, consumer)?;
        let lag = self.lag_in(&mut tx, topic, st.low_water, &st.done)?;
        let key = layout::lease_key(topic, consumer);
        let lease = tx
            .snapshot_get_in(&self.state, &key)?
            .map(|v| read_lease(&key, &v))
            .transpose()?
            .filter(|l| l.until > now)
            .map(|l| LeaseStatus {
                holder: l.holder,
                token: l.token,
                until_ms: l.until,
            });
        let dead_letters = self.dead_letters(topic, consumer)?.len();
        Ok(ConsumerStatus {
            topic: topic.to_owned(),
            consumer: consumer.to_owned(),
            checkpoint: st.low_water,
            lag,
            dead_letters,
            lease,
        })
    }
}
