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
//! # Rivet's own bytes: the raw format
//!
//! Rivet stores each value as its key type's own serialization
//! (`FormalKey::serialize`: an `i64` as 8 big-endian bytes, an [`Id`] as
//! its 19 bytes, a string as its UTF-8, `()` as nothing). A database
//! opened with [`Database::open_raw`] does the same: values are
//! [`FormalKey`] bytes, with no envelope and no checksum, so its rows are
//! Rivet's rows byte for byte and can be shared with it (nothing but the
//! engine's own checks guards them). The two formats live in different
//! spaces (`udb` and `udb_raw`), so neither reads the other's rows as its
//! own. [`formal_key!`](crate::formal_key) gives key types whose values are
//! plain ([`RawValue`]) Rivet's serialization in one line.
//!
//! # Subspaces
//!
//! Key types are declared relative to a subspace, as Rivet's are
//! (`(ACTOR, DATA, {actor_id}, CREATE_TS)` inside `(RIVET, PEGBOARD)`):
//! [`Transaction::with_subspace`] gives operations that put the subspace's
//! prefix before every key they pack and take it off every key they
//! unpack, so constants are not repeated in every declaration.
//!
//! # Ranges
//!
//! [`KeyRange::tuple_prefix`] over a packed prefix (what
//! `Subspace::tuple_range` returns) is `[prefix, prefix ++ 0xFF)`: it
//! **starts at the prefix itself**, so a row whose key is exactly the
//! prefix is in it. FoundationDB's and Rivet's `Subspace::range()` is
//! `[prefix ++ 0x00, prefix ++ 0xFF)` and leaves that row out. Keys
//! packed from a subspace plus at least one element are in both.
//!
//! ```
//! use serde::{Deserialize, Serialize};
//! use strata_engine::MemEngine;
//! use strata_keys::{tuple::Uuid, tuple_key};
//! use strata_universaldb::{keys::{ACTOR, CREATE_TS, DATA}, Database, Isolation, UdbError};
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
#![cfg_attr(docsrs, feature(doc_cfg))]

pub mod keys;
mod raw;

pub mod rivet_id;
pub use crate::rivet_id::{Id, IdError};
pub use raw::{FormalKey, RawValue, RawValueError};
#[doc(hidden)]
pub use strata_keys as __keys;

use std::marker::PhantomData;

use strata_codec::{DecodeError, EncodeError, EncodeOptions, Value};
use strata_engine::{Engine, Profile};
use strata_keys::{Key, KeyError, KeyRange, Subspace};
use strata_store::{Space, Store, StoreError, StoreOptions, Tx};

/// The store space holding the rows of an [`Enveloped`] database.
pub const SPACE: &str = "udb";
/// The store space holding the rows of a [`Raw`] database.
pub const RAW_SPACE: &str = "udb_raw";

mod sealed {
    pub trait Sealed {}
}

/// How a database stores values: [`Enveloped`] or [`Raw`].
pub trait ValueFormat: sealed::Sealed + Send + Sync + 'static {
    /// The store space of this format's rows.
    const SPACE: &'static str;
}

/// Values in the codec's checksummed envelope (the default).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Enveloped;

/// Values as their key type's own bytes ([`FormalKey`]), as Rivet stores
/// them: no envelope, no checksum.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Raw;

impl sealed::Sealed for Enveloped {}
impl sealed::Sealed for Raw {}
impl ValueFormat for Enveloped {
    const SPACE: &'static str = SPACE;
}
impl ValueFormat for Raw {
    const SPACE: &'static str = RAW_SPACE;
}

/// The values of key type `K` in format `Self`.
pub trait Codec<K: Key>: ValueFormat {
    /// The stored bytes of `value` at `key` (packed as `packed`).
    ///
    /// # Errors
    /// [`UdbError::Encode`] or [`UdbError::RawValue`].
    fn encode(key: &K, packed: &[u8], value: &K::Value) -> Result<Vec<u8>, UdbError>;

    /// The value stored as `stored` at `key` (packed as `packed`).
    ///
    /// # Errors
    /// [`UdbError::Decode`] or [`UdbError::RawValue`].
    fn decode(key: &K, packed: &[u8], stored: &[u8]) -> Result<K::Value, UdbError>;
}

impl<K: Key> Codec<K> for Enveloped
where
    K::Value: Value,
{
    fn encode(_key: &K, packed: &[u8], value: &K::Value) -> Result<Vec<u8>, UdbError> {
        let mut encoded = Vec::new();
        strata_codec::encode(value, packed, EncodeOptions::default(), &mut encoded).map_err(
            |source| UdbError::Encode {
                key_type: K::NAME,
                source,
            },
        )?;
        Ok(encoded)
    }

    fn decode(_key: &K, packed: &[u8], stored: &[u8]) -> Result<K::Value, UdbError> {
        strata_codec::decode_with(
            packed,
            stored,
            strata_codec::DecodeOptions::checksum(strata_codec::ChecksumCheck::Require),
        )
        .map(|(v, _)| v)
        .map_err(|source| UdbError::Decode {
            key_type: K::NAME,
            source,
        })
    }
}

impl<K: FormalKey> Codec<K> for Raw {
    fn encode(key: &K, packed: &[u8], value: &K::Value) -> Result<Vec<u8>, UdbError> {
        key.serialize(value).map_err(|source| UdbError::RawValue {
            key_type: K::NAME,
            key: packed.to_vec(),
            source,
        })
    }

    fn decode(key: &K, packed: &[u8], stored: &[u8]) -> Result<K::Value, UdbError> {
        key.deserialize(stored)
            .map_err(|source| UdbError::RawValue {
                key_type: K::NAME,
                key: packed.to_vec(),
                source,
            })
    }
}

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
    #[error("a key of type {key_type} does not pack or read")]
    Key {
        /// Which key type (its name).
        key_type: &'static str,
        /// Why.
        #[source]
        source: KeyError,
    },
    /// A value did not decode (damaged, or written as another type).
    #[error("a value of key type {key_type} does not decode")]
    Decode {
        /// Which key type (its name).
        key_type: &'static str,
        /// Why.
        #[source]
        source: DecodeError,
    },
    /// A value did not encode.
    #[error("a value of key type {key_type} does not encode")]
    Encode {
        /// Which key type (its name).
        key_type: &'static str,
        /// Why.
        #[source]
        source: EncodeError,
    },
    /// A value of a [`Raw`] database did not serialize, or its stored
    /// bytes do not read as the key type's value.
    #[error("{key_type}: the raw value at this key does not read or write")]
    RawValue {
        /// Which key type (its name).
        key_type: &'static str,
        /// The packed key.
        key: Vec<u8>,
        /// Why.
        #[source]
        source: RawValueError,
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
    /// The stored value: an envelope, or in a [`Raw`] database the key
    /// type's own bytes.
    pub value: Vec<u8>,
}

/// The database: a store with the space of its value format (`udb` for
/// [`Enveloped`], the default; `udb_raw` for [`Raw`]).
pub struct Database<E: Engine, F: ValueFormat = Enveloped> {
    store: Store<E>,
    space: Space,
    format: PhantomData<F>,
}

impl<E: Engine, F: ValueFormat> std::fmt::Debug for Database<E, F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Database")
            .field("space", &F::SPACE)
            .finish_non_exhaustive()
    }
}

impl<E: Engine> Database<E, Enveloped> {
    /// The database on `store`, whose options declared the `udb` space
    /// ([`Database::store_options`] or [`Database::declare`]).
    ///
    /// # Errors
    /// [`StoreError`] naming the missing space.
    pub fn open(store: Store<E>) -> Result<Self, UdbError> {
        Self::open_format(store)
    }
}

impl<E: Engine> Database<E, Raw> {
    /// The database on `store` with Rivet's value bytes ([`Raw`]), whose
    /// options declared the `udb_raw` space
    /// (`Database::<E, Raw>::store_options()`).
    ///
    /// ```
    /// use strata_engine::MemEngine;
    /// use strata_keys::tuple_key;
    /// use strata_universaldb::formal_key;
    /// use strata_universaldb::{keys::{ACTOR, CREATE_TS, DATA}, Database, Id, Isolation, Raw};
    /// use strata_store::Store;
    ///
    /// #[derive(Debug, Clone, PartialEq)]
    /// pub struct CreateTsKey { pub actor_id: Id }
    /// tuple_key! { CreateTsKey -> i64 = (ACTOR, DATA, {actor_id}, CREATE_TS); }
    /// formal_key!(CreateTsKey);
    ///
    /// let options = Database::<MemEngine, Raw>::store_options();
    /// let db = Database::open_raw(Store::open(MemEngine::open(options.keyspace_specs())?, options)?)?;
    /// let key = CreateTsKey { actor_id: Id::v1(7, 1) };
    /// db.run("set", |tx| tx.write(&key, &1_730_000_000_000))?;
    /// let rows = db.run("scan", |tx| tx.get_ranges_keyvalues(&strata_keys::KeyRange::prefix(&[]), Isolation::Snapshot, None, false))?;
    /// // Rivet's bytes: the timestamp as 8 big-endian bytes.
    /// assert_eq!(rows[0].value, 1_730_000_000_000_i64.to_be_bytes());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// [`StoreError`] naming the missing space.
    pub fn open_raw(store: Store<E>) -> Result<Self, UdbError> {
        Self::open_format(store)
    }
}

impl<E: Engine, F: ValueFormat> Database<E, F> {
    /// Store options with this format's space declared.
    pub fn store_options() -> StoreOptions {
        Self::declare(StoreOptions::new(strata_codec::Limits::FOUNDATIONDB))
    }

    /// `options` with this format's space declared (for a store shared
    /// with other layers).
    pub fn declare(options: StoreOptions) -> StoreOptions {
        options.space(F::SPACE, Profile::General)
    }

    fn open_format(store: Store<E>) -> Result<Self, UdbError> {
        let space = store.space(F::SPACE)?;
        Ok(Self {
            store,
            space,
            format: PhantomData,
        })
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
        mut f: impl FnMut(&mut Transaction<'_, '_, E, F>) -> Result<T, UdbError>,
    ) -> Result<T, UdbError> {
        let span = tracing::debug_span!("udb_transaction", name);
        let _entered = span.enter();
        self.store.transact(|tx| {
            let mut t = Transaction::new(tx, &self.space);
            f(&mut t)
        })
    }

    /// A transaction to drive by hand ([`OpenTransaction::commit`]), not
    /// retried: for callers that interleave transactions themselves.
    pub fn begin(&self) -> OpenTransaction<'_, E, F> {
        OpenTransaction {
            tx: self.store.begin(),
            space: &self.space,
            format: PhantomData,
        }
    }
}

/// A transaction begun with [`Database::begin`].
pub struct OpenTransaction<'s, E: Engine, F: ValueFormat = Enveloped> {
    tx: Tx<'s, E>,
    space: &'s Space,
    format: PhantomData<F>,
}

impl<'s, E: Engine, F: ValueFormat> OpenTransaction<'s, E, F> {
    /// Its operations.
    pub fn ops(&mut self) -> Transaction<'_, 's, E, F> {
        Transaction::new(&mut self.tx, self.space)
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
/// reads of the database's space, every key inside the transaction's
/// subspace ([`Transaction::with_subspace`]; the whole space at first).
pub struct Transaction<'a, 's, E: Engine, F: ValueFormat = Enveloped> {
    tx: &'a mut Tx<'s, E>,
    space: &'a Space,
    subspace: Subspace,
    format: PhantomData<F>,
}

impl<'a, 's, E: Engine, F: ValueFormat> Transaction<'a, 's, E, F> {
    fn new(tx: &'a mut Tx<'s, E>, space: &'a Space) -> Self {
        Self {
            tx,
            space,
            subspace: Subspace::all(),
            format: PhantomData,
        }
    }

    /// The same transaction with every key packed inside `subspace` (its
    /// prefix put before each key written or read, and taken off each row
    /// [`Transaction::read_entry`] decodes), as Rivet's
    /// `tx.with_subspace(keys::subspace())`. It replaces the current
    /// subspace; nest with [`Subspace::subspace`].
    ///
    /// ```
    /// use strata_engine::MemEngine;
    /// use strata_keys::{tuple, tuple_key, Subspace};
    /// use strata_universaldb::{keys::{ACTOR, DATA, NAME, PEGBOARD, RIVET}, Database, Id, Isolation};
    /// use strata_store::Store;
    ///
    /// #[derive(Debug, Clone, PartialEq)]
    /// pub struct NameKey { pub actor_id: Id }
    /// tuple_key! { NameKey -> String = (ACTOR, DATA, {actor_id}, NAME); }
    ///
    /// let options = Database::<MemEngine>::store_options();
    /// let db = Database::open(Store::open(MemEngine::open(options.keyspace_specs())?, options)?)?;
    /// let pegboard = Subspace::new(&(RIVET, PEGBOARD));
    /// let key = NameKey { actor_id: Id::v1(1, 0) };
    /// db.run("name", |tx| tx.with_subspace(&pegboard).write(&key, &"counter".to_string()))?;
    /// let rows = db.run("all", |tx| tx.get_ranges_keyvalues(&pegboard.tuple_range(), Isolation::Snapshot, None, false))?;
    /// assert_eq!(rows[0].key, tuple::pack(&(RIVET, PEGBOARD, ACTOR, DATA, Id::v1(1, 0), NAME)));
    /// let read = db.run("read", |tx| {
    ///     let mut tx = tx.with_subspace(&pegboard);
    ///     tx.read_entry::<NameKey>(&rows[0])
    /// })?;
    /// assert_eq!(read, (key, "counter".to_string()));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn with_subspace(&mut self, subspace: &Subspace) -> Transaction<'_, 's, E, F> {
        Transaction {
            tx: &mut *self.tx,
            space: self.space,
            subspace: subspace.clone(),
            format: PhantomData,
        }
    }

    /// The transaction's subspace.
    pub fn subspace(&self) -> &Subspace {
        &self.subspace
    }

    fn pack<K: Key>(&self, key: &K) -> Result<Vec<u8>, UdbError> {
        self.subspace.pack_key(key).map_err(|source| UdbError::Key {
            key_type: K::NAME,
            source,
        })
    }
}

impl<E: Engine, F: ValueFormat> Transaction<'_, '_, E, F> {
    /// The value at `key`.
    ///
    /// # Errors
    /// [`UdbError::MissingKey`] when there is none; a damaged value.
    pub fn read<K>(&mut self, key: &K, isolation: Isolation) -> Result<K::Value, UdbError>
    where
        K: Key,
        F: Codec<K>,
    {
        match self.read_opt(key, isolation)? {
            Some(value) => Ok(value),
            None => Err(UdbError::MissingKey {
                key_type: K::NAME,
                key: self.pack(key)?,
            }),
        }
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
        F: Codec<K>,
    {
        let bytes = self.pack(key)?;
        let row = if self.serializable(isolation) {
            self.tx.get_in(self.space, &bytes)?
        } else {
            self.tx.snapshot_get_in(self.space, &bytes)?
        };
        row.map(|v| F::decode(key, &bytes, &v)).transpose()
    }

    /// Whether reads at `isolation` pin what they read.
    #[allow(clippy::unused_self)] // a method, for the calls' sake
    fn serializable(&self, isolation: Isolation) -> bool {
        isolation == Isolation::Serializable
            && !strata_engine::fault_point!("serializable-reads-unpinned")
    }

    /// Writes `value` at `key`, at commit.
    ///
    /// # Errors
    /// A key that does not pack; a value that does not encode or breaks the
    /// store's limits.
    pub fn write<K>(&mut self, key: &K, value: &K::Value) -> Result<(), UdbError>
    where
        K: Key,
        F: Codec<K>,
    {
        let bytes = self.pack(key)?;
        let encoded = F::encode(key, &bytes, value)?;
        Ok(self.tx.put_in(self.space, bytes, encoded)?)
    }

    /// Removes the value at `key`, at commit.
    ///
    /// # Errors
    /// A key that does not pack.
    pub fn clear<K: Key>(&mut self, key: &K) -> Result<(), UdbError> {
        let bytes = self.pack(key)?;
        Ok(self.tx.delete_in(self.space, bytes)?)
    }

    /// The rows in `range`, in key order (reverse when asked), at most
    /// `limit`; serializable reads pin the part of the range examined.
    /// Build the range from a subspace key: `KeyRange::tuple_prefix(&sub.pack()?)`
    /// (the range is of whole keys: put the transaction's subspace in it).
    /// Such a range starts at the prefix itself, where Rivet's starts at
    /// the prefix and `0x00` (see the module docs).
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

    /// Decodes `entry` as key type `K`: its key must be inside the
    /// transaction's subspace and unpack as `K` (every constant element
    /// checked, so a row of another type under a shared prefix is refused)
    /// and its value as `K::Value` (in an envelope, checksummed with the
    /// key, or in a [`Raw`] database as `K`'s own bytes).
    ///
    /// # Errors
    /// [`UdbError::Key`] for a row of another type or outside the
    /// subspace, [`UdbError::Decode`] for a damaged envelope,
    /// [`UdbError::RawValue`] for raw bytes that are not the value.
    pub fn read_entry<K>(&self, entry: &Entry) -> Result<(K, K::Value), UdbError>
    where
        K: Key,
        F: Codec<K>,
    {
        let key = self
            .subspace
            .unpack_key::<K>(&entry.key)
            .map_err(|source| UdbError::Key {
                key_type: K::NAME,
                source,
            })?;
        let value = F::decode(&key, &entry.key, &entry.value)?;
        Ok((key, value))
    }
}

/// This crate's README example, compiled and run as a doctest.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
