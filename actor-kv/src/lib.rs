//! Actor KV (`actor-kv-structure.md`): an actor runtime's per-actor
//! isolated keyspaces, the engine's physical rows, its operations and
//! limits, and client helpers that keep every request within them.
//!
//! # The logical tree
//!
//! [`LogicalKey`] builds and parses every key of the document's tree
//! (namespaces 1 to 9, the workflow's, the traces' and the SQLite VFS's
//! nested keys) byte for byte, in the document's layout or with a version
//! byte after each namespace byte ([`Layout::Versioned`], as the document
//! sketches it). Not built: the runtime's real later layout (rivetkit's
//! `actor/keys.rs` renumbered the namespaces: queue 5 with metadata 1 and
//! messages 2, workflow 6, traces 7, SQLite 8, namespaces 1 to 4 without a
//! version byte, and dropped the workflow's `version` field);
//! `Layout::Versioned` is not that layout.
//! [`prefix_range`] ends a prefix by `strinc`, so keys whose next byte is
//! `0xFF` are inside (the document's `prefix ++ 0xFF` misses them).
//!
//! # The physical rows
//!
//! [`ActorKv`] keeps each actor's entries under the engine's subspace
//! `(RIVET, PEGBOARD, ACTOR_KV, actor_id)`, an entry being a metadata row
//! `(KeyWrapper(key), METADATA)` and data rows `(KeyWrapper(key), DATA, i)`
//! (module [`physical`], where each constant's source is named). Two
//! layouts share this key tree ([`PhysicalLayout`]):
//!
//! - **Native** (the default): the metadata row is a Strata envelope with
//!   a CRC-32 over the row's actor, key, header and body, holding the
//!   metadata and the value; a value whose envelope is over 10,000 bytes
//!   goes to the data rows, the metadata row then holding a chunk manifest
//!   with the whole envelope's CRC-32. A flipped bit, a missing, extra or
//!   foreign chunk, or a row copied under another actor or key is a typed
//!   [`ActorKvError::Corrupt`], never a wrong value.
//! - **Compatible**: the engine's own bytes, a BARE `KvMetadata` and the
//!   raw value in 10,000-byte data rows, so that engine reads what this
//!   module writes and the other way round. Its rows carry no checksum:
//!   what protects them is the storage engine's own (RocksDB's block
//!   checksums; redb's write-ahead commit) and the structural checks on
//!   read here (a metadata row that parses exactly, data rows numbered from
//!   0 without gaps, every one but the last exactly 10,000 bytes). A bit
//!   flipped inside a data row is **not** detected in this layout.
//!
//! [`ActorKv::migrate`] moves an actor between the two, a bounded step
//! per commit with its position recorded in the same commit, so it
//! resumes after a crash; the actor stays readable and writable meanwhile.
//!
//! # Limits and quota
//!
//! Requests are checked as the engine checks them, on the logical key and
//! value ([`limits`]): a key counts its length plus 2 (`KeyWrapper`'s
//! length, escapes not counted) against 2,048 bytes; a value is 1 to
//! 131,072 bytes; a request has at most 128 keys, and a put's payload
//! (wrapped keys plus values) at most 976 KiB. A request over any of them
//! is refused with a typed error before anything is written.
//!
//! The physical rows stay within the store's own limits
//! (FoundationDB's, [`ActorKv::store_options`]): a row's key is the 25-byte
//! subspace plus the wrapped key (at most 2 x 2,046 + 4 bytes with every
//! byte escaped) plus 2 to 4 bytes, under 10,000; a row's value is at most
//! 10,000 bytes plus an envelope header or the 20-byte manifest; a put of
//! 128 entries writes at most 128 x 15 rows and deletes the old rows, about
//! 1 MB, under 10 MB.
//!
//! The quota is exact and per actor ([`ActorKvConfig::quota_bytes`],
//! default 10 GiB): the actor's usage, the sum over its entries of the key
//! plus 2 plus the value (what the engine counts as a put's payload), is a
//! counter changed in the same commit as the rows, by the net growth. An
//! overwrite is charged the difference, so one near the quota succeeds when
//! the result fits; growth past it is [`ActorKvError::QuotaExceeded`].
//! [`ActorKv::recount`] recounts it from the rows.
//!
//! # Client helpers
//!
//! The document's known issues are client-side: unsplit batches, queue
//! messages and trace chunks over the value limit, a write queue that
//! wedges after one failure, dirty flags cleared before the write. Module
//! [`client`] plans batches within the limits (saying where atomicity
//! ends), plans SQLite page writes with the file's metadata last, refuses
//! queue messages over the value limit, chunks traces, and buffers writes so
//! that an entry leaves the buffer only once its commit succeeded.
//!
//! ```
//! use strata_actor_kv::{Layout, LogicalKey};
//!
//! let key = LogicalKey::QueueMessage { message_id: 258 };
//! assert_eq!(key.encode(Layout::Unversioned), [5, 0, 0, 0, 0, 0, 0, 1, 2]);
//! assert_eq!(key.encode(Layout::Versioned(1)), [5, 1, 0, 0, 0, 0, 0, 0, 1, 2]);
//! assert_eq!(LogicalKey::parse(&[5, 0, 0, 0, 0, 0, 0, 1, 2], Layout::Unversioned)?, key);
//! # Ok::<(), strata_actor_kv::ActorKvError>(())
//! ```
#![cfg_attr(docsrs, feature(doc_cfg))]

pub mod client;
mod kv;
pub mod physical;

pub use kv::{
    ActorKv, ActorKvConfig, Entry, ListOptions, ListPage, ListQuery, META_SPACE, MigrationStep,
    PhysicalLayout, ROWS_SPACE, limits,
};
pub use physical::{ActorId, KvMetadata};

use strata_keys::tuple::{self, Element};
use strata_keys::{KeyRange, Subspace};

/// The top-level namespace bytes of an actor's keyspace.
pub mod ns {
    /// `[1]` the actor's persisted data.
    pub const PERSIST_DATA: u8 = 1;
    /// `[2] + utf8(conn_id)` a connection.
    pub const CONN: u8 = 2;
    /// `[3]` the inspector token.
    pub const INSPECTOR_TOKEN: u8 = 3;
    /// `[4] + user_key` user KV.
    pub const KV: u8 = 4;
    /// `[5] + u64_be(message_id)` a queue message.
    pub const QUEUE: u8 = 5;
    /// `[6]` the queue's metadata.
    pub const QUEUE_METADATA: u8 = 6;
    /// `[7] + tuple` the workflow engine's keys.
    pub const WORKFLOW: u8 = 7;
    /// `[8] + tuple` OpenTelemetry traces.
    pub const TRACES: u8 = 8;
    /// `[9] + bytes` the SQLite VFS's keys.
    pub const SQLITE: u8 = 9;
}

/// The byte layout of logical keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Layout {
    /// The document's tree: the namespace byte, then the key.
    #[default]
    Unversioned,
    /// The document's tree with a version byte after every namespace
    /// byte (the queue's `[5, 1, ...]`). Not the runtime's later layout,
    /// which renumbered the namespaces (see the module docs).
    Versioned(u8),
}

/// A workflow metadata field (`[7] [3, field]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WorkflowField {
    /// `[3, 1]`.
    State,
    /// `[3, 2]`.
    Output,
    /// `[3, 3]`.
    Error,
    /// `[3, 4]`.
    Version,
    /// `[3, 5]`.
    Input,
}

impl WorkflowField {
    const fn code(self) -> i64 {
        match self {
            Self::State => 1,
            Self::Output => 2,
            Self::Error => 3,
            Self::Version => 4,
            Self::Input => 5,
        }
    }

    fn from_code(code: i64) -> Option<Self> {
        [
            Self::State,
            Self::Output,
            Self::Error,
            Self::Version,
            Self::Input,
        ]
        .into_iter()
        .find(|f| f.code() == code)
    }
}

/// A segment of a workflow history location: a name index, or a loop
/// iteration marker (a nested tuple `(loop, iteration)`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Segment {
    /// An index into the name registry.
    Name(u64),
    /// The `iteration`th run of the loop at name index `loop_index`.
    Loop {
        /// The loop's name index.
        loop_index: u64,
        /// Which iteration.
        iteration: u64,
    },
}

/// A SQLite file of the VFS (`file_tag`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SqliteFile {
    /// `0`: the main database.
    Main,
    /// `1`: the rollback journal.
    Journal,
    /// `2`: the write-ahead log.
    Wal,
    /// `3`: the shared-memory file.
    Shm,
}

impl SqliteFile {
    const fn tag(self) -> u8 {
        match self {
            Self::Main => 0,
            Self::Journal => 1,
            Self::Wal => 2,
            Self::Shm => 3,
        }
    }

    fn from_tag(tag: u8) -> Option<Self> {
        [Self::Main, Self::Journal, Self::Wal, Self::Shm]
            .into_iter()
            .find(|f| f.tag() == tag)
    }
}

/// Every key of an actor's logical keyspace.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum LogicalKey {
    /// `[1]`.
    PersistData,
    /// `[2] + utf8(conn_id)`.
    Conn {
        /// The connection's id.
        conn_id: String,
    },
    /// `[3]`.
    InspectorToken,
    /// `[4] + user_key`.
    UserKv {
        /// The user's key bytes.
        key: Vec<u8>,
    },
    /// `[5] + u64_be(message_id)`.
    QueueMessage {
        /// The message's number.
        message_id: u64,
    },
    /// `[6]`.
    QueueMetadata,
    /// `[7] + pack(1, name_index)`: the workflow's name registry.
    WorkflowName {
        /// The index in the registry.
        name_index: u64,
    },
    /// `[7] + pack(2, ...segments)`: a workflow history entry.
    WorkflowHistory {
        /// Where in the workflow the entry is: name indexes and loop iterations.
        location: Vec<Segment>,
    },
    /// `[7] + pack(3, field)`: a workflow metadata field.
    WorkflowField(WorkflowField),
    /// `[7] + pack(4, entry_id)`: an entry's metadata.
    WorkflowEntryMetadata {
        /// The entry's id.
        entry_id: String,
    },
    /// `[8] + pack(1, bucket_start_sec, chunk_id)`: a chunk of traces.
    TraceChunk {
        /// The bucket's start, Unix seconds.
        bucket_start_sec: u64,
        /// The chunk within the bucket.
        chunk_id: u64,
    },
    /// `[9, 0, file_tag]`: a SQLite file's metadata.
    SqliteMetadata(SqliteFile),
    /// `[9, 1, file_tag] + u32_be(chunk_index)`: a chunk of a SQLite file.
    SqliteChunk {
        /// Which SQLite file.
        file: SqliteFile,
        /// The chunk's number.
        chunk_index: u32,
    },
}

/// Why an actor KV request failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ActorKvError {
    /// The bytes fit no key of the tree; `problem` says where they stop
    /// fitting.
    #[error("not an actor KV logical key: {problem}")]
    NotAKey {
        /// What did not fit.
        problem: KeyProblem,
    },
    /// More keys or entries than one request may carry.
    #[error("{count} keys in one request; at most {max}")]
    TooManyKeys {
        /// Keys given.
        count: usize,
        /// The limit.
        max: usize,
    },
    /// A key over the key limit, counted as the engine counts it (length
    /// plus 2).
    #[error("key {index} counts {len} bytes; at most {max}")]
    KeyTooLarge {
        /// Its position in the request.
        index: usize,
        /// Its counted length.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// An empty queue message ([`client::queue_message`]); the engine itself
    /// takes empty values (a metadata row and no data rows), and so does
    /// [`ActorKv::put`].
    #[error("value {index} is empty")]
    EmptyValue {
        /// Its position in the request.
        index: usize,
    },
    /// A value over the value limit.
    #[error("value {index} is {len} bytes; at most {max}")]
    ValueTooLarge {
        /// Its position in the request.
        index: usize,
        /// Its length.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// A put whose wrapped keys and values exceed the payload limit.
    #[error("put payload of {bytes} bytes; at most {max}")]
    PayloadTooLarge {
        /// The payload.
        bytes: usize,
        /// The limit.
        max: usize,
    },
    /// The same key twice in one put.
    #[error("key {index} repeats an earlier key of the same put")]
    DuplicateKey {
        /// The position of the repeat.
        index: usize,
    },
    /// The put would grow the actor's usage past its quota.
    #[error("quota exceeded: usage {usage} + growth {growth} > quota {quota}")]
    QuotaExceeded {
        /// Usage before the put.
        usage: u64,
        /// Net growth of the put.
        growth: u64,
        /// The actor's limit in bytes.
        quota: u64,
    },
    /// A migration to another layout is in progress: finish it first.
    #[error("a migration to {target:?} is in progress")]
    MigrationInProgress {
        /// The layout the running migration moves to.
        target: PhysicalLayout,
    },
    /// Stored rows that do not read: `key` is the logical key (or the row
    /// key), `problem` what is wrong, `source` what a decoder said.
    #[error("corrupt actor KV data at {key:?}: {problem}")]
    Corrupt {
        /// The entry's key, or the row's.
        key: Vec<u8>,
        /// What is wrong.
        problem: DataProblem,
        /// The decoder's error, where one said more.
        #[source]
        source: Option<Box<dyn std::error::Error + Send + Sync>>,
    },
    /// A value could not be encoded.
    #[error("a value could not be encoded")]
    Encode(#[from] strata_codec::EncodeError),
    /// A value could not be planned into rows.
    #[error("a value could not be planned into rows")]
    Chunk(#[from] strata_codec::ChunkError),
    /// The store failed (a conflict after the retries, an unknown commit
    /// outcome, a physical limit, an engine error).
    #[error(transparent)]
    Store(Box<strata_store::StoreError>),
}

/// Where bytes stop fitting the key tree ([`ActorKvError::NotAKey`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum KeyProblem {
    /// No bytes at all.
    Empty,
    /// A versioned layout's version byte is not after the namespace.
    NoVersionByte {
        /// The version expected.
        version: u8,
        /// The namespace byte read.
        namespace: u8,
    },
    /// Bytes after a namespace that holds a single key.
    TrailingBytes {
        /// The namespace byte.
        namespace: u8,
    },
    /// A connection id that is not UTF-8.
    ConnIdNotUtf8,
    /// A queue message id that is not 8 bytes.
    QueueIdNotEightBytes,
    /// A namespace byte the tree does not have.
    UnknownNamespace(u8),
    /// A workflow or traces key that is not a tuple.
    NotATuple,
    /// A workflow key of no known shape.
    WorkflowShape,
    /// A trace chunk with negative numbers.
    NegativeTraceChunk,
    /// A traces key of no known shape.
    TracesShape,
    /// A SQLite file tag the tree does not have.
    UnknownSqliteTag(u8),
    /// A SQLite key of no known shape.
    SqliteShape,
}

impl std::fmt::Display for KeyProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Empty => f.write_str("empty"),
            Self::NoVersionByte { version, namespace } => {
                write!(f, "no version byte {version} after namespace {namespace}")
            }
            Self::TrailingBytes { namespace } => {
                write!(f, "bytes after namespace {namespace}'s single key")
            }
            Self::ConnIdNotUtf8 => f.write_str("a connection id that is not UTF-8"),
            Self::QueueIdNotEightBytes => f.write_str("a queue message id that is not 8 bytes"),
            Self::UnknownNamespace(ns) => write!(f, "unknown namespace {ns}"),
            Self::NotATuple => f.write_str("not a tuple"),
            Self::WorkflowShape => f.write_str("a workflow key of no known shape"),
            Self::NegativeTraceChunk => f.write_str("a trace chunk with negative numbers"),
            Self::TracesShape => f.write_str("a traces key of no known shape"),
            Self::UnknownSqliteTag(tag) => write!(f, "unknown SQLite file tag {tag}"),
            Self::SqliteShape => f.write_str("a SQLite key of no known shape"),
        }
    }
}

/// What is wrong with stored rows ([`ActorKvError::Corrupt`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum DataProblem {
    /// A row under the entry's base that is none of its rows.
    ForeignRow,
    /// The entry has no metadata row.
    NoMetadata,
    /// The metadata row is not a BARE `KvMetadata`.
    MetadataNotBare,
    /// A data row where another was due.
    DataRowOutOfOrder {
        /// The row found.
        found: u32,
        /// The row due.
        due: usize,
    },
    /// A data row of a length the layout does not allow.
    DataRowSize {
        /// The row.
        index: u32,
        /// Its length.
        len: usize,
    },
    /// Data rows beside a value held inline in its metadata row.
    DataBesideInline,
    /// The native layout's chunks do not assemble (the source says how).
    Chunks,
    /// The native layout's envelope does not decode (the source says how).
    Envelope,
    /// The actor's recorded layout state does not read.
    LayoutState,
    /// A row of the actor's space in no entry's layout.
    RowOutsideLayout,
    /// The usage counter is not 8 bytes.
    UsageCounter,
}

impl std::fmt::Display for DataProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::ForeignRow => f.write_str("a row that is not this entry's"),
            Self::NoMetadata => f.write_str("no metadata row"),
            Self::MetadataNotBare => f.write_str("metadata row is not a BARE KvMetadata"),
            Self::DataRowOutOfOrder { found, due } => {
                write!(f, "data row {found} where row {due} was due")
            }
            Self::DataRowSize { index, len } => write!(f, "data row {index} has {len} bytes"),
            Self::DataBesideInline => f.write_str("data rows beside an inline value"),
            Self::Chunks => f.write_str("the chunks do not assemble"),
            Self::Envelope => f.write_str("the value's envelope does not decode"),
            Self::LayoutState => f.write_str("the actor's layout state does not read"),
            Self::RowOutsideLayout => {
                f.write_str("a row of the actor's space in no entry's layout")
            }
            Self::UsageCounter => f.write_str("the usage counter is not 8 bytes"),
        }
    }
}

fn not_a_key(problem: KeyProblem) -> ActorKvError {
    ActorKvError::NotAKey { problem }
}

/// Stored rows at `key` with `problem`, and no more to say.
pub(crate) fn corrupt(key: &[u8], problem: DataProblem) -> ActorKvError {
    ActorKvError::Corrupt {
        key: key.to_vec(),
        problem,
        source: None,
    }
}

fn int(n: u64) -> Element<'static> {
    Element::Int(i64::try_from(n).unwrap_or(i64::MAX))
}

fn uint(e: &Element<'_>) -> Option<u64> {
    match e {
        Element::Int(n) => u64::try_from(*n).ok(),
        _ => None,
    }
}

/// The prefix of namespace `ns` in `layout`.
pub fn namespace(ns: u8, layout: Layout) -> Vec<u8> {
    match layout {
        Layout::Unversioned => vec![ns],
        Layout::Versioned(v) => vec![ns, v],
    }
}

/// Every key starting with `prefix`: `strinc`'s end, so keys whose next
/// byte is `0xFF` are inside (the document's `prefix ++ 0xFF` misses them).
pub fn prefix_range(prefix: &[u8]) -> KeyRange {
    Subspace::from_bytes(prefix.to_vec()).range()
}

impl LogicalKey {
    /// The namespace byte it lives under.
    pub fn namespace(&self) -> u8 {
        match self {
            Self::PersistData => ns::PERSIST_DATA,
            Self::Conn { .. } => ns::CONN,
            Self::InspectorToken => ns::INSPECTOR_TOKEN,
            Self::UserKv { .. } => ns::KV,
            Self::QueueMessage { .. } => ns::QUEUE,
            Self::QueueMetadata => ns::QUEUE_METADATA,
            Self::WorkflowName { .. }
            | Self::WorkflowHistory { .. }
            | Self::WorkflowField(_)
            | Self::WorkflowEntryMetadata { .. } => ns::WORKFLOW,
            Self::TraceChunk { .. } => ns::TRACES,
            Self::SqliteMetadata(_) | Self::SqliteChunk { .. } => ns::SQLITE,
        }
    }

    /// Its bytes in `layout`.
    pub fn encode(&self, layout: Layout) -> Vec<u8> {
        let mut out = namespace(self.namespace(), layout);
        match self {
            Self::PersistData | Self::InspectorToken | Self::QueueMetadata => {}
            Self::Conn { conn_id } => out.extend_from_slice(conn_id.as_bytes()),
            Self::UserKv { key } => out.extend_from_slice(key),
            Self::QueueMessage { message_id } => out.extend_from_slice(&message_id.to_be_bytes()),
            Self::WorkflowName { name_index } => {
                out.extend(tuple::pack(&(1i64, int(*name_index))));
            }
            Self::WorkflowHistory { location } => {
                let mut elements = vec![Element::Int(2)];
                elements.extend(location.iter().map(|s| match s {
                    Segment::Name(n) => int(*n),
                    Segment::Loop {
                        loop_index,
                        iteration,
                    } => Element::Tuple(vec![int(*loop_index), int(*iteration)]),
                }));
                out.extend(tuple::pack(&Element::Tuple(elements)));
            }
            Self::WorkflowField(field) => out.extend(tuple::pack(&(3i64, field.code()))),
            Self::WorkflowEntryMetadata { entry_id } => {
                out.extend(tuple::pack(&(4i64, entry_id.as_str())));
            }
            Self::TraceChunk {
                bucket_start_sec,
                chunk_id,
            } => out.extend(tuple::pack(&(1i64, int(*bucket_start_sec), int(*chunk_id)))),
            Self::SqliteMetadata(file) => out.extend_from_slice(&[0, file.tag()]),
            Self::SqliteChunk { file, chunk_index } => {
                out.extend_from_slice(&[1, file.tag()]);
                out.extend_from_slice(&chunk_index.to_be_bytes());
            }
        }
        out
    }

    /// The key `bytes` encode in `layout`, every part checked.
    ///
    /// # Errors
    /// [`ActorKvError::NotAKey`] naming what does not fit.
    pub fn parse(bytes: &[u8], layout: Layout) -> Result<Self, ActorKvError> {
        let (&ns, rest) = bytes
            .split_first()
            .ok_or_else(|| not_a_key(KeyProblem::Empty))?;
        let rest = match layout {
            Layout::Unversioned => rest,
            Layout::Versioned(v) => match rest.split_first() {
                Some((&found, rest)) if found == v => rest,
                _ => {
                    return Err(not_a_key(KeyProblem::NoVersionByte {
                        version: v,
                        namespace: ns,
                    }));
                }
            },
        };
        let exact = |key: Self| {
            if rest.is_empty() {
                Ok(key)
            } else {
                Err(not_a_key(KeyProblem::TrailingBytes { namespace: ns }))
            }
        };
        match ns {
            ns::PERSIST_DATA => exact(Self::PersistData),
            ns::INSPECTOR_TOKEN => exact(Self::InspectorToken),
            ns::QUEUE_METADATA => exact(Self::QueueMetadata),
            ns::CONN => String::from_utf8(rest.to_vec())
                .map(|conn_id| Self::Conn { conn_id })
                .map_err(|_| not_a_key(KeyProblem::ConnIdNotUtf8)),
            ns::KV => Ok(Self::UserKv { key: rest.to_vec() }),
            ns::QUEUE => <[u8; 8]>::try_from(rest)
                .map(|b| Self::QueueMessage {
                    message_id: u64::from_be_bytes(b),
                })
                .map_err(|_| not_a_key(KeyProblem::QueueIdNotEightBytes)),
            ns::WORKFLOW => parse_workflow(rest),
            ns::TRACES => parse_traces(rest),
            ns::SQLITE => parse_sqlite(rest),
            other => Err(not_a_key(KeyProblem::UnknownNamespace(other))),
        }
    }
}

fn unpack_elements(rest: &[u8]) -> Result<Vec<Element<'static>>, ActorKvError> {
    // Bounded: a damaged key of thousands of nested tuples would overflow
    // the stack unpacking.
    let element: Element<'_> =
        tuple::unpack_bounded(rest).map_err(|_| not_a_key(KeyProblem::NotATuple))?;
    match element.into_owned() {
        Element::Tuple(items) => Ok(items),
        one => Ok(vec![one]),
    }
}

fn parse_workflow(rest: &[u8]) -> Result<LogicalKey, ActorKvError> {
    let items = unpack_elements(rest)?;
    let bad = || not_a_key(KeyProblem::WorkflowShape);
    match items.as_slice() {
        [Element::Int(1), n] => Ok(LogicalKey::WorkflowName {
            name_index: uint(n).ok_or_else(bad)?,
        }),
        [Element::Int(2), segments @ ..] => Ok(LogicalKey::WorkflowHistory {
            location: segments
                .iter()
                .map(|s| match s {
                    Element::Tuple(pair) => match pair.as_slice() {
                        [l, i] => Some(Segment::Loop {
                            loop_index: uint(l)?,
                            iteration: uint(i)?,
                        }),
                        _ => None,
                    },
                    other => uint(other).map(Segment::Name),
                })
                .collect::<Option<Vec<_>>>()
                .ok_or_else(bad)?,
        }),
        [Element::Int(3), Element::Int(f)] => WorkflowField::from_code(*f)
            .map(LogicalKey::WorkflowField)
            .ok_or_else(bad),
        [Element::Int(4), Element::String(id)] => Ok(LogicalKey::WorkflowEntryMetadata {
            entry_id: id.to_string(),
        }),
        _ => Err(bad()),
    }
}

fn parse_traces(rest: &[u8]) -> Result<LogicalKey, ActorKvError> {
    match unpack_elements(rest)?.as_slice() {
        [Element::Int(1), b, c] => match (uint(b), uint(c)) {
            (Some(bucket_start_sec), Some(chunk_id)) => Ok(LogicalKey::TraceChunk {
                bucket_start_sec,
                chunk_id,
            }),
            _ => Err(not_a_key(KeyProblem::NegativeTraceChunk)),
        },
        _ => Err(not_a_key(KeyProblem::TracesShape)),
    }
}

fn parse_sqlite(rest: &[u8]) -> Result<LogicalKey, ActorKvError> {
    let file = |tag: u8| {
        SqliteFile::from_tag(tag).ok_or_else(|| not_a_key(KeyProblem::UnknownSqliteTag(tag)))
    };
    match rest {
        [0, tag] => Ok(LogicalKey::SqliteMetadata(file(*tag)?)),
        [1, tag, a, b, c, d] => Ok(LogicalKey::SqliteChunk {
            file: file(*tag)?,
            chunk_index: u32::from_be_bytes([*a, *b, *c, *d]),
        }),
        _ => Err(not_a_key(KeyProblem::SqliteShape)),
    }
}

/// This crate's README example, compiled and run as a doctest.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
