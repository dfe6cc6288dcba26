//! Typed errors of the store.

use strata_codec::{ChunkError, DecodeError, EncodeError, LimitExceeded};
use strata_engine::{CommitError, EngineError, ReadError};
use strata_keys::KeyError;
use thiserror::Error;

/// Everything a store operation can fail with.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum StoreError {
    /// A key could not be packed, or a stored key is not of the type read
    /// (a scan over a prefix that several key types share).
    #[error("key of type {key_type}: {source}")]
    Key {
        /// The key type's [`Key::NAME`](strata_keys::Key::NAME).
        key_type: &'static str,
        /// What is wrong with it.
        #[source]
        source: KeyError,
    },
    /// [`Tx::put_versionstamped`](crate::Tx::put_versionstamped) with a key
    /// that holds no incomplete versionstamp.
    #[error("key of type {key_type} holds no incomplete versionstamp")]
    NoVersionstamp {
        /// The key type's name.
        key_type: &'static str,
    },
    /// A value could not be encoded.
    #[error("value of key type {key_type} could not be encoded: {source}")]
    Encode {
        /// The key type's name.
        key_type: &'static str,
        /// The codec's error.
        #[source]
        source: EncodeError,
    },
    /// A stored value could not be decoded (corrupt, foreign, or from a
    /// newer schema).
    #[error("value of key type {key_type} could not be decoded: {source}")]
    Decode {
        /// The key type's name.
        key_type: &'static str,
        /// The codec's error.
        #[source]
        source: DecodeError,
    },
    /// A chunked value's rows are inconsistent.
    #[error("chunked value of key type {key_type}: {source}")]
    Chunk {
        /// The key type's name.
        key_type: &'static str,
        /// What the assembler found.
        #[source]
        source: ChunkError,
    },
    /// The [`StoreOptions`](crate::StoreOptions) cannot work (a chunk size
    /// of 0, or one that leaves no room for data in a row).
    #[error("invalid store option {option}: {source}")]
    InvalidOptions {
        /// The option, by its field name.
        option: &'static str,
        /// Why.
        #[source]
        source: ChunkError,
    },
    /// A value is larger than one row may hold and its key type does not
    /// allow chunking ([`StoreOptions::chunked`](crate::StoreOptions::chunked)).
    #[error(
        "value of key type {key_type} is {size} bytes, above the {max}-byte value limit, and the key type is not chunked"
    )]
    ValueTooLarge {
        /// The key type's name.
        key_type: &'static str,
        /// Envelope size.
        size: u64,
        /// The value limit.
        max: u64,
    },
    /// The atomic commit would break a limit of the store's
    /// [`Limits`](strata_codec::Limits); nothing was written.
    #[error("commit refused, nothing written: {0}")]
    Limit(#[source] LimitExceeded),
    /// The commit would take a quota scope over its quota; nothing was
    /// written.
    #[error(
        "quota of scope {scope:02x?} exceeded: {used} bytes used, {requested} more requested, limit {limit}"
    )]
    Quota {
        /// The scope's bytes.
        scope: Vec<u8>,
        /// Bytes the scope uses now.
        used: u64,
        /// Net growth the commit asked for.
        requested: u64,
        /// The quota.
        limit: u64,
    },
    /// A quota counter or a counter row holds something other than an
    /// 8-byte counter.
    #[error("counter row is {len} bytes, not 8")]
    BadCounter {
        /// Its length.
        len: usize,
    },
    /// The transaction still conflicted after every allowed attempt.
    #[error("transaction gave up after {attempts} attempts: {last}")]
    RetriesExhausted {
        /// Attempts made.
        attempts: u32,
        /// The error of the last attempt.
        #[source]
        last: Box<StoreError>,
    },
    /// Reading from the engine failed.
    #[error("read failed: {0}")]
    Read(#[from] ReadError),
    /// The engine refused or failed the commit ([`CommitError::Conflict`]
    /// when a value read changed before the commit).
    #[error("commit failed: {0}")]
    Commit(#[from] CommitError),
    /// An engine-level failure (a keyspace missing at open, a sync).
    #[error("engine: {0}")]
    Engine(#[from] EngineError),
}

impl StoreError {
    /// Whether the error is a commit conflict, which a retry may resolve.
    pub fn is_conflict(&self) -> bool {
        matches!(self, Self::Commit(CommitError::Conflict { .. }))
    }

    /// Whether the commit's outcome is unknown: it may or may not have
    /// applied. Transactions are not retried after it.
    pub fn is_outcome_unknown(&self) -> bool {
        matches!(self, Self::Commit(CommitError::OutcomeUnknown(_)))
    }

    pub(crate) fn key<K: strata_keys::Key>(source: KeyError) -> Self {
        Self::Key {
            key_type: K::NAME,
            source,
        }
    }
}
