//! The outbox itself: opening it over a store, and pushing entries.

use std::fmt;
use std::sync::{Arc, Mutex};

use strata_codec::{Value, encode_keyless};
use strata_engine::{Clock, Engine, Profile, Rng};
use strata_store::{Space, Store, StoreOptions, Tx};

#[allow(clippy::wildcard_imports)]
use crate::*;

/// The outbox over a store. See the [crate docs](crate).
pub struct Outbox<'s, E: Engine> {
    pub(crate) store: &'s Store<E>,
    pub(crate) entries: Space,
    pub(crate) state: Space,
    pub(crate) dead: Space,
    pub(crate) config: OutboxConfig,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) rng: Mutex<Box<dyn Rng>>,
    /// When this outbox last synced the engine.
    pub(crate) last_sync: Mutex<u64>,
}

impl<E: Engine> fmt::Debug for Outbox<'_, E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Outbox")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

pub(crate) fn unknown(topic: &str, consumer: &str) -> OutboxError {
    OutboxError::UnknownConsumer {
        topic: topic.to_owned(),
        consumer: consumer.to_owned(),
    }
}

/// A row that does not read: `row` at `key`, with the decoder's error if
/// it gave one.
pub(crate) fn corrupt(row: OutboxRow, key: &[u8]) -> OutboxError {
    OutboxError::Corrupt {
        row,
        key: key.to_vec(),
        source: None,
    }
}

/// [`corrupt`], with the decoder's error as the source.
pub(crate) fn corrupt_by(
    row: OutboxRow,
    key: &[u8],
    source: impl std::error::Error + Send + Sync + 'static,
) -> OutboxError {
    OutboxError::Corrupt {
        row,
        key: key.to_vec(),
        source: Some(Box::new(source)),
    }
}

impl<'s, E: Engine> Outbox<'s, E> {
    /// `options` with the outbox's three spaces declared: call it before
    /// opening the engine with [`StoreOptions::keyspace_specs`].
    #[must_use]
    pub fn declare(options: StoreOptions) -> StoreOptions {
        options
            .space(ENTRIES, Profile::Queue)
            .space(STATE, Profile::General)
            .space(DEAD, Profile::General)
    }

    /// The outbox of `store`, with its clock (backoff, leases, ages) and rng
    /// (jitter).
    ///
    /// # Errors
    /// [`OutboxError::NotDeclared`] when the store's options lack the
    /// outbox's spaces.
    pub fn new(
        store: &'s Store<E>,
        config: OutboxConfig,
        clock: Arc<dyn Clock>,
        rng: Box<dyn Rng>,
    ) -> Result<Self, OutboxError> {
        let space = |name| store.space(name).map_err(|_| OutboxError::NotDeclared);
        Ok(Self {
            store,
            entries: space(ENTRIES)?,
            state: space(STATE)?,
            dead: space(DEAD)?,
            config,
            clock,
            rng: Mutex::new(rng),
            last_sync: Mutex::new(0),
        })
    }

    /// The outbox of `store` with the store's clock and a generator drawn
    /// from the store's ([`Store::clock`], [`Store::fork_rng`]): the common
    /// way in.
    ///
    /// # Errors
    /// As [`Outbox::new`].
    pub fn open(store: &'s Store<E>, config: OutboxConfig) -> Result<Self, OutboxError> {
        Self::new(store, config, store.clock(), store.fork_rng())
    }

    /// The outbox's clock (the one it was made with).
    pub fn clock(&self) -> Arc<dyn Clock> {
        self.clock.clone()
    }

    /// The store underneath.
    pub fn store(&self) -> &'s Store<E> {
        self.store
    }

    /// Adds `entry` to `topic` in `tx`'s commit. Its key receives the
    /// commit's versionstamp, so it is ordered by commit with no read.
    ///
    /// # Errors
    /// [`OutboxError::Store`] with a limit error when the entry does not fit
    /// a row (the commit's batch limits are checked at commit); an encoding
    /// error. Nothing is added then.
    pub fn push<T: Value>(
        &self,
        tx: &mut Tx<'_, E>,
        topic: &Topic<T>,
        entry: &T,
    ) -> Result<(), OutboxError> {
        self.push_inner(tx, topic, None, entry)
    }

    /// As [`Outbox::push`], with an ordering key: first deliveries of the
    /// entries of one key are in commit order, and a failing entry holds
    /// back the later entries of its key only.
    ///
    /// # Errors
    /// As [`Outbox::push`].
    pub fn push_keyed<T: Value>(
        &self,
        tx: &mut Tx<'_, E>,
        topic: &Topic<T>,
        ordering_key: &[u8],
        entry: &T,
    ) -> Result<(), OutboxError> {
        self.push_inner(tx, topic, Some(ordering_key), entry)
    }

    pub(crate) fn push_inner<T: Value>(
        &self,
        tx: &mut Tx<'_, E>,
        topic: &Topic<T>,
        ordering_key: Option<&[u8]>,
        entry: &T,
    ) -> Result<(), OutboxError> {
        // Empty: `encode_keyless` reserves the envelope's room in one
        // allocation (a buffer made here first was grown again, a
        // reallocation per entry).
        let mut envelope = Vec::new();
        encode_keyless(entry, None, &mut envelope).map_err(OutboxError::Encode)?;
        let value = layout::entry_value(self.clock.now_ms(), ordering_key, &envelope);
        // Agent memory's `memory-sequence-from-counter` is the same mistake
        // made through the outbox, so it is switched here too.
        if strata_engine::fault_point!("sequence-from-counter" | "memory-sequence-from-counter") {
            return self.push_numbered_by_counter(tx, &topic.name, value);
        }
        let (key, offset) = topic.new_entry_key.clone();
        tx.put_versionstamped_in(&self.entries, key, offset, value)?;
        Ok(())
    }
}
