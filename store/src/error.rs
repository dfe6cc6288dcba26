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
    #[error("a key does not pack or read")]
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
    #[error("value of key type {key_type} could not be encoded")]
    Encode {
        /// The key type's name.
        key_type: &'static str,
        /// The codec's error.
        #[source]
        source: EncodeError,
    },
    /// A stored value could not be decoded (corrupt, foreign, or from a
    /// newer schema).
    #[error("value of key type {key_type} could not be decoded")]
    Decode {
        /// The key type's name.
        key_type: &'static str,
        /// The codec's error.
        #[source]
        source: DecodeError,
    },
    /// A chunked value's rows are inconsistent.
    #[error("chunked value of key type {key_type} does not assemble")]
    Chunk {
        /// The key type's name.
        key_type: &'static str,
        /// What the assembler found.
        #[source]
        source: ChunkError,
    },
    /// The [`StoreOptions`](crate::StoreOptions) cannot work (a chunk size
    /// of 0, or one that leaves no room for data in a row).
    #[error("invalid store option {option}")]
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
    /// [`Limits`](strata_codec::Limits); nothing was written. For a key or
    /// value limit, `row` says which row of which write broke it.
    #[error("{}; nothing was written", describe_row(row.as_ref()))]
    Limit {
        /// The limit, the size and the maximum.
        #[source]
        source: LimitExceeded,
        /// The row that broke a per-row limit (`None` for a batch limit).
        row: Option<LimitedRow>,
    },
    /// The commit would take a quota scope over its quota; nothing was
    /// written.
    #[error(
        "quota of scope {} exceeded: {used} bytes used, {requested} more requested, limit {limit}{}",
        show_key(scope),
        describe_grower(*key_type, key)
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
        /// The key type of the first write of the commit that grew the
        /// scope (`None` when not known: a counter created by `add`).
        key_type: Option<&'static str>,
        /// That write's key.
        key: Vec<u8>,
    },
    /// [`Store::space`](crate::Store::space) names a space the options did
    /// not declare.
    #[error("space {name:?} was not declared on the store's options")]
    UnknownSpace {
        /// The name asked for.
        name: String,
    },
    /// A versionstamp offset does not leave room for the 10-byte stamp in
    /// the key.
    #[error("versionstamp offset {offset} does not fit a {len}-byte key")]
    BadStampOffset {
        /// The offset given.
        offset: usize,
        /// The key's length.
        len: usize,
    },
    /// A quota counter or a counter row holds something other than an
    /// 8-byte counter.
    #[error("counter row is {len} bytes, not 8")]
    BadCounter {
        /// Its length.
        len: usize,
    },
    /// The transaction still conflicted after every allowed attempt.
    #[error("transaction gave up after {attempts} attempts")]
    RetriesExhausted {
        /// Attempts made.
        attempts: u32,
        /// The error of the last attempt.
        #[source]
        last: Box<StoreError>,
    },
    /// Reading from the engine failed.
    #[error("read failed")]
    Read(#[from] ReadError),
    /// The engine refused or failed the commit ([`CommitError::Conflict`]
    /// when a value read changed before the commit).
    #[error("commit failed")]
    Commit(#[from] CommitError),
    /// An engine-level failure (a keyspace missing at open, a sync).
    #[error("engine failed")]
    Engine(#[from] EngineError),
}

/// What a row is, in an error about it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RowKind {
    /// The row holding a value (inline).
    Value,
    /// The row of a chunked value that lists its chunks.
    Manifest,
    /// One chunk of a chunked value (in the system keyspace).
    Chunk,
    /// An atomic counter.
    Counter,
    /// A row whose key receives the commit's versionstamp.
    Versionstamped,
    /// A row of a declared space, or of the catalog.
    Space,
}

impl std::fmt::Display for RowKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Value => "value row",
            Self::Manifest => "chunk manifest",
            Self::Chunk => "chunk row",
            Self::Counter => "counter row",
            Self::Versionstamped => "versionstamped row",
            Self::Space => "space row",
        })
    }
}

/// The row that broke a key or value limit, named as the user wrote it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LimitedRow {
    /// The key type of the write (`None` when not known: a sweep).
    pub key_type: Option<&'static str>,
    /// What the row is.
    pub kind: RowKind,
    /// The key the user wrote (for a chunk row, its value's key: the
    /// limit's size is the chunk row's own).
    pub key: Vec<u8>,
}

/// A key in a message: as `strata_keys::show::show_key` reads it (tuple
/// notation for tuples, as the tool prints them), its first 48 bytes only
/// for a longer one, with its length.
pub(crate) fn show_key(key: &[u8]) -> String {
    const SHOWN: usize = 48;
    if key.len() > SHOWN {
        format!(
            "{}… ({} bytes)",
            strata_keys::show::show_key(&key[..SHOWN]),
            key.len()
        )
    } else {
        strata_keys::show::show_key(key)
    }
}

fn describe_row(row: Option<&LimitedRow>) -> String {
    row.map_or_else(
        || "the commit breaks a limit".to_owned(),
        |r| {
            format!(
                "the {} of a write of {} at key {} breaks a limit",
                r.kind,
                r.key_type.unwrap_or("an unknown key type"),
                show_key(&r.key)
            )
        },
    )
}

fn describe_grower(key_type: Option<&str>, key: &[u8]) -> String {
    format!(
        "; first grown by a write of {} at key {}",
        key_type.unwrap_or("a counter"),
        show_key(key)
    )
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

    /// Whether the engine failed in a way a later try may not meet: a
    /// read or a commit that could not reach it (a server restarting or
    /// failing over, a connection reset), or a commit whose reply was lost
    /// (its outcome unknown: read to find out, or retry only what is safe
    /// twice). Not damage, and not an engine that takes no more writes until
    /// it is reopened ([`ReopenRequired`](strata_engine::ReopenRequired),
    /// after a full disk). What a long-running consumer waits out.
    ///
    /// ```
    /// use strata_engine::{BackendError, CommitError, ReadError, ReopenRequired};
    /// use strata_store::StoreError;
    ///
    /// let reset = StoreError::Read(ReadError::Backend(BackendError::from("connection reset")));
    /// assert!(reset.is_transient());
    /// let full = StoreError::Commit(CommitError::Backend(BackendError::from(
    ///     ReopenRequired::new("RedbEngine", "no space left on device"),
    /// )));
    /// assert!(!full.is_transient());
    /// let damaged = StoreError::Read(ReadError::Corrupt(BackendError::from("bad page")));
    /// assert!(!damaged.is_transient());
    /// ```
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            Self::Read(ReadError::Backend(_))
                | Self::Commit(CommitError::Backend(_) | CommitError::OutcomeUnknown(_))
                | Self::Engine(EngineError::Backend(_))
        ) && !strata_engine::ReopenRequired::in_chain(self)
    }

    /// A per-row limit broken by `kind` of the write of `key_type` at `key`.
    pub(crate) fn row_limit(
        source: LimitExceeded,
        key_type: Option<&'static str>,
        kind: RowKind,
        key: &[u8],
    ) -> Self {
        crate::metrics::refused(source.limit);
        Self::Limit {
            source,
            row: Some(LimitedRow {
                key_type,
                kind,
                key: key.to_vec(),
            }),
        }
    }

    /// A batch limit of the whole commit.
    pub(crate) fn batch_limit(source: LimitExceeded) -> Self {
        crate::metrics::refused(source.limit);
        Self::Limit { source, row: None }
    }

    /// A value of key type `K` that does not decode.
    pub(crate) fn decode<K: strata_keys::Key>(source: DecodeError) -> Self {
        Self::Decode {
            key_type: K::NAME,
            source,
        }
    }

    pub(crate) fn key<K: strata_keys::Key>(source: KeyError) -> Self {
        Self::Key {
            key_type: K::NAME,
            source,
        }
    }
}
