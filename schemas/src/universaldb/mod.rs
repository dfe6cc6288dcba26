//! UniversalDB's programming model (`universaldb-keys.md`) on any engine.
//!
//! A key type is one declaration tied to its value type (`tuple_key!`:
//! `WorkflowIdKey -> WorkflowId = (ACTOR, DATA, {actor_id}, WORKFLOW_ID)`),
//! where the document writes three trait implementations; its unpacking
//! checks every constant element, so a range read over a prefix shared by
//! several key types never decodes one as another ([`Transaction::read_entry`]
//! refuses it with a typed error). A subspace key with optional trailing
//! fields is one `tuple_prefix!` declaration (`?{create_ts}`).
//!
//! [`Database::run`] runs a named closure as one serializable transaction,
//! retried on conflict (the store's retry policy). Inside it,
//! [`Isolation::Serializable`] reads become predicates of the commit (a
//! concurrent change to what was read makes the commit conflict and the
//! closure run again) and [`Isolation::Snapshot`] reads do not (the value
//! may change before the commit, as FoundationDB's snapshot reads). Rows
//! live in the store's `udb` space; each value is an envelope of the codec,
//! checksummed with its key.
//!
//! ```
//! use serde::{Deserialize, Serialize};
//! use strata_engine::MemEngine;
//! use strata_keys::{tuple::Uuid, tuple_key};
//! use strata_schemas::universaldb::{keys::{ACTOR, CREATE_TS, DATA}, Database, Isolation, UdbError};
//! use strata_store::Store;
//!
//! #[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
//! pub struct CreateTs(pub i64);
//! strata_codec::value!(CreateTs: postcard, version = 1);
//!
//! #[derive(Debug, Clone, PartialEq)]
//! pub struct CreateTsKey { pub actor_id: Uuid }
//! tuple_key! { CreateTsKey -> CreateTs = (ACTOR, DATA, {actor_id}, CREATE_TS); }
//!
//! let options = Database::<MemEngine>::store_options();
//! let db = Database::open(Store::open(MemEngine::open(options.keyspace_specs())?, options)?)?;
//! let key = CreateTsKey { actor_id: Uuid::from_u128(7) };
//! db.run("set_create_ts", |tx| tx.write(&key, &CreateTs(1_730_000_000_000)))?;
//! let ts = db.run("get_create_ts", |tx| tx.read(&key, Isolation::Serializable))?;
//! assert_eq!(ts, CreateTs(1_730_000_000_000));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod keys;
mod planted;

use strata_codec::{DecodeError, EncodeError, EncodeOptions, Value};
use strata_engine::{Engine, Profile};
use strata_keys::{Key, KeyError, KeyRange};
use strata_store::{Space, Store, StoreError, StoreOptions, Tx};

/// The store space holding UniversalDB's rows.
pub const SPACE: &str = "udb";

/// Why an operation failed. Nothing of a failed transaction is written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum UdbError {
    /// The store failed (conflicts beyond the retry policy included).
    #[error(transparent)]
    Store(#[from] StoreError),
    /// [`Transaction::read`] of a key that holds no value.
    #[error("{key_type}: no value at this key")]
    MissingKey {
        /// The key type read.
        key_type: &'static str,
        /// The packed key.
        key: Vec<u8>,
    },
    /// A key did not pack, or a row read as another key type than its own.
    #[error("{key_type}: {source}")]
    Key {
        /// Which key type (its name).
        key_type: &'static str,
        /// Why.
        #[source]
        source: KeyError,
    },
    /// A value did not decode (damaged, or written as another type).
    #[error("{key_type}: {source}")]
    Decode {
        /// Which key type (its name).
        key_type: &'static str,
        /// Why.
        #[source]
        source: DecodeError,
    },
    /// A value did not encode.
    #[error("{key_type}: {source}")]
    Encode {
        /// Which key type (its name).
        key_type: &'static str,
        /// Why.
        #[source]
        source: EncodeError,
    },
}

/// How a read takes part in its transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Isolation {
    /// The read becomes a predicate of the commit: if what it read changes
    /// before the commit, the commit conflicts and the transaction is run
    /// again.
    Serializable,
    /// The read does not conflict: the value may change before the commit.
    Snapshot,
}

/// A row read by [`Transaction::get_ranges_keyvalues`]: packed key and
/// stored value, decoded with [`Transaction::read_entry`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The packed key.
    pub key: Vec<u8>,
    /// The stored value (an envelope).
    pub value: Vec<u8>,
}

/// The database: a store with the `udb` space.
pub struct Database<E: Engine> {
    store: Store<E>,
    space: Space,
}

impl<E: Engine> std::fmt::Debug for Database<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Database").finish_non_exhaustive()
    }
}

impl<E: Engine> Database<E> {
    /// Store options with the `udb` space declared.
    pub fn store_options() -> StoreOptions {
        Self::declare(StoreOptions::new(strata_codec::Limits::FOUNDATIONDB))
    }

    /// `options` with the `udb` space declared (for a store shared with
    /// other layers).
    pub fn declare(options: StoreOptions) -> StoreOptions {
        options.space(SPACE, Profile::General)
    }

    /// The database on `store`, whose options declared the `udb` space.
    ///
    /// # Errors
    /// [`StoreError`] naming the missing space.
    pub fn open(store: Store<E>) -> Result<Self, UdbError> {
        let space = store.space(SPACE)?;
        Ok(Self { store, space })
    }

    /// The store underneath.
    pub fn store(&self) -> &Store<E> {
        &self.store
    }

    /// The store, given back.
    pub fn into_store(self) -> Store<E> {
        self.store
    }

    /// Runs `f` as one transaction named `name` (in traces): its writes
    /// commit atomically, or, on a conflict with a concurrent transaction,
    /// `f` runs again (up to the store's retry policy). An error of `f`
    /// writes nothing.
    ///
    /// # Errors
    /// `f`'s error, or the store's.
    pub fn run<T>(
        &self,
        name: &str,
        mut f: impl FnMut(&mut Transaction<'_, '_, E>) -> Result<T, UdbError>,
    ) -> Result<T, UdbError> {
        let span = tracing::debug_span!("udb_transaction", name);
        let _entered = span.enter();
        self.store.transact(|tx| {
            let mut t = Transaction {
                tx,
                space: &self.space,
            };
            f(&mut t)
        })
    }

    /// A transaction to drive by hand ([`OpenTransaction::commit`]), not
    /// retried: for callers that interleave transactions themselves.
    pub fn begin(&self) -> OpenTransaction<'_, E> {
        OpenTransaction {
            tx: self.store.begin(),
            space: &self.space,
        }
    }
}

/// A transaction begun with [`Database::begin`].
pub struct OpenTransaction<'s, E: Engine> {
    tx: Tx<'s, E>,
    space: &'s Space,
}

impl<'s, E: Engine> OpenTransaction<'s, E> {
    /// Its operations.
    pub fn ops(&mut self) -> Transaction<'_, 's, E> {
        Transaction {
            tx: &mut self.tx,
            space: self.space,
        }
    }

    /// Commits: the version, or `None` when nothing was written.
    ///
    /// # Errors
    /// A conflict ([`StoreError::Commit`]) when a serializable read
    /// changed since, or a store failure.
    pub fn commit(self) -> Result<Option<u64>, UdbError> {
        Ok(self.tx.commit()?.map(|info| info.version))
    }
}

/// The operations of a transaction: typed reads, writes, clears and range
/// reads of the `udb` space.
pub struct Transaction<'a, 's, E: Engine> {
    tx: &'a mut Tx<'s, E>,
    space: &'a Space,
}

fn pack<K: Key>(key: &K) -> Result<Vec<u8>, UdbError> {
    key.pack().map_err(|source| UdbError::Key {
        key_type: K::NAME,
        source,
    })
}

impl<E: Engine> Transaction<'_, '_, E> {
    /// The value at `key`.
    ///
    /// # Errors
    /// [`UdbError::MissingKey`] when there is none; a damaged value.
    pub fn read<K>(&mut self, key: &K, isolation: Isolation) -> Result<K::Value, UdbError>
    where
        K: Key,
        K::Value: Value,
    {
        self.read_opt(key, isolation)?
            .ok_or_else(|| UdbError::MissingKey {
                key_type: K::NAME,
                key: key.pack().unwrap_or_default(),
            })
    }

    /// The value at `key`, if any.
    ///
    /// # Errors
    /// A key that does not pack; a damaged value; a store failure.
    pub fn read_opt<K>(
        &mut self,
        key: &K,
        isolation: Isolation,
    ) -> Result<Option<K::Value>, UdbError>
    where
        K: Key,
        K::Value: Value,
    {
        let bytes = pack(key)?;
        let row = if self.serializable(isolation) {
            self.tx.get_in(self.space, &bytes)?
        } else {
            self.tx.snapshot_get_in(self.space, &bytes)?
        };
        row.map(|v| decode::<K>(&bytes, &v)).transpose()
    }

    /// Whether reads at `isolation` pin what they read.
    #[allow(clippy::unused_self)] // a method, for the calls' sake
    fn serializable(&self, isolation: Isolation) -> bool {
        isolation == Isolation::Serializable && !planted::reads_unpinned()
    }

    /// Writes `value` at `key`, at commit.
    ///
    /// # Errors
    /// A key that does not pack; a value that does not encode or breaks the
    /// store's limits.
    pub fn write<K>(&mut self, key: &K, value: &K::Value) -> Result<(), UdbError>
    where
        K: Key,
        K::Value: Value,
    {
        let bytes = pack(key)?;
        let mut encoded = Vec::new();
        strata_codec::encode(value, &bytes, EncodeOptions::default(), &mut encoded).map_err(
            |source| UdbError::Encode {
                key_type: K::NAME,
                source,
            },
        )?;
        Ok(self.tx.put_in(self.space, bytes, encoded)?)
    }

    /// Removes the value at `key`, at commit.
    ///
    /// # Errors
    /// A key that does not pack.
    pub fn clear<K: Key>(&mut self, key: &K) -> Result<(), UdbError> {
        let bytes = pack(key)?;
        Ok(self.tx.delete_in(self.space, bytes)?)
    }

    /// The rows in `range`, in key order (reverse when asked), at most
    /// `limit`; serializable reads pin the part of the range examined.
    /// Build the range from a subspace key: `KeyRange::tuple_prefix(&sub.pack()?)`.
    ///
    /// # Errors
    /// A range with its start above its end; a store failure.
    pub fn get_ranges_keyvalues(
        &mut self,
        range: &KeyRange,
        isolation: Isolation,
        limit: Option<usize>,
        reverse: bool,
    ) -> Result<Vec<Entry>, UdbError> {
        let page = if self.serializable(isolation) {
            self.tx.scan_in(self.space, range, limit, reverse)?
        } else {
            self.tx
                .snapshot_scan_in(self.space, range, limit, reverse)?
        };
        Ok(page
            .rows
            .into_iter()
            .map(|(key, value)| Entry { key, value })
            .collect())
    }

    /// Decodes `entry` as key type `K`: its key must unpack as `K` (every
    /// constant element checked, so a row of another type under a shared
    /// prefix is refused) and its value as `K::Value`, checksummed with the
    /// key.
    ///
    /// # Errors
    /// [`UdbError::Key`] for a row of another type, [`UdbError::Decode`] for
    /// a damaged value.
    pub fn read_entry<K>(&self, entry: &Entry) -> Result<(K, K::Value), UdbError>
    where
        K: Key,
        K::Value: Value,
    {
        let key = K::unpack(&entry.key).map_err(|source| UdbError::Key {
            key_type: K::NAME,
            source,
        })?;
        Ok((key, decode::<K>(&entry.key, &entry.value)?))
    }
}

fn decode<K>(key: &[u8], value: &[u8]) -> Result<K::Value, UdbError>
where
    K: Key,
    K::Value: Value,
{
    strata_codec::decode_with(
        key,
        value,
        strata_codec::DecodeOptions::checksum(strata_codec::ChecksumCheck::Require),
    )
    .map(|(v, _)| v)
    .map_err(|source| UdbError::Decode {
        key_type: K::NAME,
        source,
    })
}

#[cfg(feature = "planted-bugs")]
pub use planted::{PLANTED, plant_unpinned_reads};
