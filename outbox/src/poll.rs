//! Polling: a consumer's state, what is durable, and the entries delivered.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::PoisonError;

use strata_codec::{DecodeOptions, Value, decode_opened_owned, open};
use strata_engine::Engine;
use strata_engine::RowCursor;
use strata_keys::tuple;
use strata_store::Tx;

#[allow(clippy::wildcard_imports)]
use crate::*;

/// An entry handed to a consumer.
#[derive(Debug, Clone, PartialEq)]
pub struct Delivery<T> {
    /// Where it sits.
    pub position: Position,
    /// Its ordering key, if it was pushed with one.
    pub ordering_key: Option<Vec<u8>>,
    /// The entry as pushed, decoded as the topic's type.
    pub entry: T,
    /// 1 for a first delivery, then one more for each failure before.
    pub attempt: u32,
    /// When it was pushed (clock milliseconds).
    pub pushed_ms: u64,
}

/// A consumer's state in one snapshot.
pub(crate) struct ConsumerState {
    pub(crate) low_water: Position,
    pub(crate) done: BTreeSet<Position>,
    pub(crate) tries: BTreeMap<Position, TryRecord>,
}

/// What the poll needs of a failed entry's record.
#[derive(Debug, Clone)]
pub(crate) struct TryRecord {
    pub(crate) attempts: u32,
    pub(crate) next_ms: u64,
}

pub(crate) type TryRow = (u32, u64, u64, u64, String);

impl<E: Engine> Outbox<'_, E> {
    /// The entries `consumer` finished above its checkpoint (pinned).
    pub(crate) fn finished_marks(
        &self,
        tx: &mut Tx<'_, E>,
        topic: &str,
        consumer: &str,
    ) -> Result<BTreeSet<Position>, OutboxError> {
        let prefix = tuple::pack(&("d", topic, consumer)).len();
        tx.scan_in(
            &self.state,
            &layout::done_rows(topic, consumer),
            None,
            false,
        )?
        .rows
        .iter()
        .map(|(k, _)| {
            layout::trailing_position(k, prefix).ok_or_else(|| corrupt(OutboxRow::DoneMark, k))
        })
        .collect()
    }

    /// The consumer's checkpoint, finished marks and failures.
    pub(crate) fn consumer_state(
        &self,
        tx: &mut Tx<'_, E>,
        topic: &str,
        consumer: &str,
    ) -> Result<ConsumerState, OutboxError> {
        let ck_key = layout::checkpoint_key(topic, consumer);
        let low_water = tx
            .get_in(&self.state, &ck_key)?
            .ok_or_else(|| unknown(topic, consumer))
            .and_then(|v| read_position(&ck_key, &v))?;
        let done = self.finished_marks(tx, topic, consumer)?;
        let try_prefix = tuple::pack(&("t", topic, consumer)).len();
        let tries = tx
            .scan_in(&self.state, &layout::try_rows(topic, consumer), None, false)?
            .rows
            .iter()
            .map(|(k, v)| {
                let pos = layout::trailing_position(k, try_prefix)
                    .ok_or_else(|| corrupt(OutboxRow::AttemptRecord, k))?;
                let (attempts, _first, _last, next_ms, _error) = tuple::unpack::<TryRow>(v)
                    .map_err(|e| corrupt_by(OutboxRow::AttemptRecord, k, e))?;
                Ok((pos, TryRecord { attempts, next_ms }))
            })
            .collect::<Result<_, OutboxError>>()?;
        Ok(ConsumerState {
            low_water,
            done,
            tries,
        })
    }

    /// The durable version to read up to, after syncing the engine if an
    /// entry of `topic` after `from` waits for durability and this
    /// outbox's last sync is old enough. Commits that carry no entry of
    /// the topic (a consumer's own acknowledgements, other topics) never
    /// cost this consumer a sync.
    pub(crate) fn durable_for(
        &self,
        tx: &mut Tx<'_, E>,
        topic: &str,
        from: Position,
        now: u64,
    ) -> Result<u64, OutboxError> {
        let engine = self.store.engine();
        let durable = engine.durable_version();
        if durable >= engine.last_version() {
            return Ok(durable);
        }
        let mut last = self
            .last_sync
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if now.saturating_sub(*last) < self.config.sync_interval_ms {
            return Ok(durable);
        }
        let beyond = layout::entries_between(
            topic,
            from.max(Position::end_of(durable)),
            Position::end_of(u64::MAX),
        );
        let waiting = !tx
            .snapshot_scan_in(&self.entries, &beyond, Some(1), false)?
            .rows
            .is_empty();
        if waiting {
            engine.sync().map_err(strata_store::StoreError::from)?;
            *last = now;
        }
        Ok(engine.durable_version())
    }

    /// Up to `max` entries for `lease`'s consumer, in commit order: durable
    /// ones only, none finished, none waiting for a retry, and none after
    /// an unfinished failed entry of the same ordering key. Entries that no
    /// longer decode as `T` are dead-lettered on the way.
    ///
    /// # Errors
    /// [`OutboxError::StaleLease`]; a store failure.
    pub fn poll<T: Value>(
        &self,
        lease: &Lease,
        topic: &Topic<T>,
        max: usize,
    ) -> Result<Vec<Delivery<T>>, OutboxError> {
        self.poll_after(lease, topic, Position::START, max)
    }

    /// As [`Outbox::poll`], only entries after `after`: for a consumer
    /// that handles entries strictly in order and acknowledges them later
    /// in one step ([`Outbox::ack_through`]), so that it can read ahead of
    /// its checkpoint without being handed the same entries again.
    ///
    /// # Errors
    /// As [`Outbox::poll`].
    pub fn poll_after<T: Value>(
        &self,
        lease: &Lease,
        topic: &Topic<T>,
        after: Position,
        max: usize,
    ) -> Result<Vec<Delivery<T>>, OutboxError> {
        self.poll_upto(lease, topic, after, max, beyond_durable())
    }

    /// As [`Outbox::poll_after`] on the topic named `topic`, each entry's
    /// envelope as it was pushed, not decoded (a consumer that decodes it
    /// itself, as a search index fed by a service's own topic does).
    ///
    /// # Errors
    /// As [`Outbox::poll`].
    pub fn poll_raw_after(
        &self,
        lease: &Lease,
        topic: &str,
        after: Position,
        max: usize,
    ) -> Result<Vec<Delivery<Vec<u8>>>, OutboxError> {
        self.poll_with(lease, topic, after, max, beyond_durable(), Ok)
    }

    pub(crate) fn poll_upto<T: Value>(
        &self,
        lease: &Lease,
        topic: &Topic<T>,
        after: Position,
        max: usize,
        beyond_durable: bool,
    ) -> Result<Vec<Delivery<T>>, OutboxError> {
        self.poll_with(lease, &topic.name, after, max, beyond_durable, |envelope| {
            // Opened, then decoded from the envelope's own buffer: a raw
            // entry (`Vec<u8>`, `String`) keeps it instead of a copy.
            let opened = open(&[], &envelope, DecodeOptions::default()).map(|(header, _)| header);
            opened
                .and_then(|header| decode_opened_owned::<T>(header, envelope))
                .map_err(|e| strata_engine::ErrorChain(&e).to_string())
        })
    }

    /// The poll, each entry's envelope made a `T` by `decode` (an entry it
    /// refuses is dead-lettered).
    pub(crate) fn poll_with<T>(
        &self,
        lease: &Lease,
        topic: &str,
        after: Position,
        max: usize,
        beyond_durable: bool,
        mut decode: impl FnMut(Vec<u8>) -> Result<T, String>,
    ) -> Result<Vec<Delivery<T>>, OutboxError> {
        let now = self.clock.now_ms();
        let mut tx = self.store.begin();
        self.check_lease(&mut tx, lease)?;
        let st = self.consumer_state(&mut tx, topic, &lease.consumer)?;
        let from = st.low_water.max(after);
        // The snapshot holds every commit up to the last one when the
        // transaction began; reading up to the durable version (which a
        // sync may raise past it) gives durable entries only.
        let durable = if beyond_durable {
            self.store.engine().last_version()
        } else {
            self.durable_for(&mut tx, topic, from, now)?
        };
        // Nothing durable after `from` (a commit's entries can be taken
        // over several polls: compare positions, not versions).
        if Position::end_of(durable) <= from {
            return Ok(Vec::new());
        }
        let range = layout::entries_between(topic, from, Position::end_of(durable));
        let mut held: BTreeSet<Option<Vec<u8>>> = BTreeSet::new();
        // Room for a full poll of small batches; a larger one grows.
        let mut out = Vec::with_capacity(max.min(256));
        let mut poison = Vec::new();
        // The entries lent one at a time, until `max` deliveries or the
        // end of the durable part: nothing is copied out of the engine but
        // what is delivered, and nothing is read beyond the last delivery.
        let mut rows = tx.snapshot_cursor_in(&self.entries, &range, false)?;
        while out.len() < max {
            let Some(row) = rows.next_row() else { break };
            let (k, v) = row.map_err(strata_store::StoreError::from)?;
            let pos = layout::entry_position(k).ok_or_else(|| corrupt(OutboxRow::EntryKey, k))?;
            if st.done.contains(&pos) {
                let skip = !strata_engine::fault_point!("finished-redelivered");
                if skip {
                    continue;
                }
            }
            let (pushed_ms, ordering_key, envelope) =
                layout::read_entry_value(v).ok_or_else(|| corrupt(OutboxRow::EntryValue, k))?;
            if held.contains(&ordering_key) {
                continue;
            }
            let tried = st.tries.get(&pos);
            if tried.is_some_and(|t| t.next_ms > now) {
                if strata_engine::fault_point!("failed-holds-every-key") {
                    break;
                }
                if strata_engine::fault_point!("failed-holds-nothing") {
                    continue;
                }
                held.insert(ordering_key);
                continue;
            }
            match decode(envelope) {
                Ok(entry) => out.push(Delivery {
                    position: pos,
                    ordering_key,
                    entry,
                    attempt: tried.map_or(1, |t| t.attempts + 1),
                    pushed_ms,
                }),
                Err(e) => {
                    held.insert(ordering_key);
                    poison.push((pos, e));
                }
            }
        }
        drop(rows);
        drop(tx);
        for (pos, why) in poison {
            tracing::warn!(%pos, topic, "an entry does not decode: dead-lettered");
            self.dead_letter_now(lease, pos, &format!("does not decode: {why}"))?;
        }
        Ok(out)
    }
}

/// Whether a poll reads past the durable version: never, unless a planted
/// bug says so. The search index's `index-non-durable` is the same mistake
/// made through the outbox's poll, so it is switched here too.
fn beyond_durable() -> bool {
    strata_engine::fault_point!("poll-beyond-durable" | "index-non-durable")
}
