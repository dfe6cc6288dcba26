//! Agent memory (`agent-memory-storage-architecture.md`): conversation
//! events, a versioned table of contents over them, provenance grips, an
//! outbox and checkpoints, each in its own keyspace, with BM25 search over
//! the TOC and grips fed by the outbox.
//!
//! **Built:** the keyspaces with the document's roles as engine profiles,
//! its key formats, idempotent `put_event` (the event and its outbox entry
//! in one commit, the duplicate check a predicate), events by time range
//! either way, paged; TOC node versions with the latest pointer moved in
//! the same commit; the year → month → week → day → segment hierarchy with
//! child links; grips and grips by node; provenance (a grip's events);
//! checkpoints; stats, backup and compaction where the engine offers them;
//! the search projection of TOC nodes and grips, indexed by `strata-search`
//! from the outbox, with `rebuild`; the event topic consumed by a
//! segmenter (`register_consumer`, `new_events`, `finish_events`,
//! `trim_events`, [`segments`]); values past the value limit spilled to
//! chunked rows, so no event, node or grip fails on size; [`verify`] of
//! the whole database.
//!
//! The example (`examples/examples/agent_memory.rs`, crate `strata-examples`) ingests a JSON-lines
//! conversation and answers a search; the simulation's agent-memory
//! workload checks events, versions and the index under faults
//! (`sim/src/agent_memory.rs`).
//!
//! # Keyspaces
//!
//! | space | role | profile |
//! |---|---|---|
//! | `am.events` | raw events, `evt:{ts:013}:{ulid}` (`ts`: the ULID's time) | `AppendOnly` (compressed, written in time order) |
//! | `am.toc_nodes` | TOC node versions, `{node_id}:v{ver:06}` | `General` |
//! | `am.toc_latest` | latest version pointers, `latest:{node_id}`, a big-endian `u32` | `PointLookup` |
//! | `am.grips` | grips `{grip_id}` and the node index `node:{node_id}:{grip_id}` | `General` |
//! | `strata.outbox` | outbox entries (`strata-outbox`) | `Queue`: never compacted by age or size |
//! | `strata.outbox.state` ([`CHECKPOINTS`]) | the outbox consumers' checkpoints, and jobs' `checkpoint:{job}` | `General` |
//! | the store's data keyspace | search projections `("am", "doc", id)`; values past the limit `("am", "spill", space, key)`, chunked, their row holding a pointer | (the store's) |
//!
//! The search index keeps its own checkpoint in its commit payload, so
//! documents and checkpoint are one commit.
//!
//! **Where the document contradicts itself:** it gives the TOC key as
//! `toc:{node_id}:v{ver:06}` and node ids as `toc:day:2024-01-29`, but its
//! example key is `toc:day:2024-01-29:v000003`, not
//! `toc:toc:day:...`. Node ids here start with `toc:` and the key is
//! `{node_id}:v{ver:06}`, the example's bytes (tested). Its `checkpoints`
//! family holds "job recovery state"; here that keyspace is the outbox's
//! consumer-state space, which holds the outbox consumers' checkpoints
//! and the jobs' `checkpoint:{job}` rows.
#![cfg_attr(docsrs, feature(doc_cfg))]

mod dates;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use strata_codec::{EncodeOptions, Value};
use strata_engine::{Engine, Profile};
use strata_keys::tuple_key;
use strata_keys::{KeyRange, Ulid};
use strata_outbox::{Outbox, OutboxError, Topic};
use strata_search::{Document, IndexSpec, Indexer, Query, SearchError};
use strata_store::{Space, Store, StoreError, StoreOptions, Tx};

mod event_json;
mod events;
mod grips;
mod hook;
mod operations;
mod pipeline;
mod spill;
mod toc;
mod verify;

pub use hook::HookEvent;
pub use pipeline::{NewEvent, SegmentRule, segments};
pub use spill::{PROJECTED_KEYWORD_BYTES, PROJECTED_TEXT_BYTES};
pub use verify::{MemoryCheck, MemoryProblem, verify};

pub use dates::{
    CalendarNode, calendar_chain, civil_date, day_id, month_id, parent_id, week_id, year_id,
};

/// Raw conversation events.
pub const EVENTS: &str = "am.events";
/// TOC node versions.
pub const TOC_NODES: &str = "am.toc_nodes";
/// Latest version pointers.
pub const TOC_LATEST: &str = "am.toc_latest";
/// Grips and their node index.
pub const GRIPS: &str = "am.grips";
/// Checkpoints: the outbox's consumer-state space, where the outbox keeps
/// its consumers' checkpoints; jobs' `checkpoint:{job}` rows live beside
/// them (their text keys cannot meet the outbox's tuple keys).
pub const CHECKPOINTS: &str = strata_outbox::STATE;
/// The outbox topic of new events.
pub const EVENT_TOPIC: &str = "am.events";

/// Why an agent-memory operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MemoryError {
    /// An id or timestamp that does not fit the document's formats.
    #[error("invalid {what}: {value:?}")]
    Invalid {
        /// What was checked.
        what: &'static str,
        /// The value refused.
        value: String,
    },
    /// Stored bytes that do not decode.
    #[error("the row {key:?} does not decode")]
    Corrupt {
        /// The row's key.
        key: String,
        /// What the codec said.
        #[source]
        source: strata_codec::DecodeError,
    },
    /// Rows that decode but do not agree with each other.
    #[error("the row {key:?} {problem}")]
    Inconsistent {
        /// The row's key.
        key: String,
        /// What does not agree.
        problem: Inconsistency,
    },
    /// A value could not be encoded (nothing was written).
    #[error("the value for {key:?} could not be encoded")]
    Encode {
        /// The row's key.
        key: String,
        /// What the codec said.
        #[source]
        source: strata_codec::EncodeError,
    },
    /// No grip of this id.
    #[error("no grip {grip_id:?}")]
    NoSuchGrip {
        /// The grip asked for.
        grip_id: String,
    },
    /// The outbox failed.
    #[error(transparent)]
    Outbox(#[from] OutboxError),
    /// The search index failed.
    #[error(transparent)]
    Search(#[from] SearchError),
    /// An engine capability (statistics, backup, compaction) failed or is
    /// not offered.
    #[error(transparent)]
    Engine(#[from] strata_engine::CapabilityError),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// How rows disagree ([`MemoryError::Inconsistent`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Inconsistency {
    /// A TOC node's latest pointer is not a 4-byte version.
    PointerNotFourBytes,
    /// A TOC node's latest pointer names a version that is not stored.
    VersionNotStored(u32),
    /// An index row names a grip that is not stored.
    GripNotStored,
    /// An entry of the event topic names an event that is not stored.
    EventNotStored,
    /// A row past the value limit points at a spilled value that is not
    /// stored.
    SpillNotStored,
}

impl std::fmt::Display for Inconsistency {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::PointerNotFourBytes => f.write_str("is a latest pointer that is not 4 bytes"),
            Self::VersionNotStored(v) => write!(f, "points at version {v}, which is not stored"),
            Self::GripNotStored => f.write_str("indexes a grip that is not stored"),
            Self::EventNotStored => f.write_str("is announced on the event topic but not stored"),
            Self::SpillNotStored => {
                f.write_str("points at a value past the limit that is not stored")
            }
        }
    }
}

/// What kind of conversation event it is: the original's eight kinds
/// (`EventType`), stored in snake case.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum EventType {
    /// A session started.
    SessionStart,
    /// The user submitted a message.
    UserMessage,
    /// The assistant answered.
    AssistantMessage,
    /// A tool was called and returned (the original records a tool's use
    /// and its result as this kind).
    ToolResult,
    /// The assistant finished answering.
    AssistantStop,
    /// A subagent started.
    SubagentStart,
    /// A subagent stopped.
    SubagentStop,
    /// The session ended.
    SessionEnd,
}

/// A conversation event: the original's fields, in its JSON (`timestamp`
/// in milliseconds, `metadata` and `agent` optional when read).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Event {
    /// Its ULID, chosen by the writer: a retry reuses it. The event's key
    /// takes the ULID's time, not `timestamp_ms` ([`event_key`]).
    pub event_id: String,
    /// The conversation.
    pub session_id: String,
    /// When it happened (the source's time, not the ingest's),
    /// milliseconds since the Unix epoch; `timestamp` in the stored JSON.
    #[serde(rename = "timestamp")]
    pub timestamp_ms: u64,
    /// Its kind.
    pub event_type: EventType,
    /// `user`, `assistant`, `system` or `tool` in the original; any text
    /// here.
    pub role: String,
    /// What was said or done.
    pub text: String,
    /// Tool names, file paths and the like.
    #[serde(default)]
    pub metadata: BTreeMap<String, String>,
    /// The agent that produced it (`claude`, `opencode`, ...), if known.
    #[serde(default)]
    pub agent: Option<String>,
}

impl Event {
    /// An event without metadata or agent.
    pub fn new(
        event_id: impl Into<String>,
        session_id: impl Into<String>,
        timestamp_ms: u64,
        event_type: EventType,
        role: impl Into<String>,
        text: impl Into<String>,
    ) -> Self {
        Self {
            event_id: event_id.into(),
            session_id: session_id.into(),
            timestamp_ms,
            event_type,
            role: role.into(),
            text: text.into(),
            metadata: BTreeMap::new(),
            agent: None,
        }
    }
}

/// A bullet of a TOC node, with the grips backing it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TocBullet {
    /// The bullet's text.
    pub text: String,
    /// Grips that back it.
    pub grip_ids: Vec<String>,
}

/// Where a node sits in the hierarchy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Level {
    /// `toc:year:2024`.
    Year,
    /// `toc:month:2024:01`.
    Month,
    /// `toc:week:2024:W05` (ISO week).
    Week,
    /// `toc:day:2024-01-29`.
    Day,
    /// `toc:segment:2024-01-29:{suffix}`.
    Segment,
}

impl Level {
    /// Its name in the search projection.
    pub fn name(self) -> &'static str {
        match self {
            Self::Year => "year",
            Self::Month => "month",
            Self::Week => "week",
            Self::Day => "day",
            Self::Segment => "segment",
        }
    }
}

/// What a node or grip records, for ranking: the original's kinds
/// (`MemoryKind`), stored in snake case; `Observation` by default.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum MemoryKind {
    /// Something seen; no boost.
    #[default]
    Observation,
    /// A preference ("I prefer ...").
    Preference,
    /// Steps to follow.
    Procedure,
    /// A requirement or limit ("must ...").
    Constraint,
    /// What a term means.
    Definition,
}

/// The salience of a node or grip written before salience was recorded:
/// the original's neutral midpoint.
pub const DEFAULT_SALIENCE: f32 = 0.5;

fn default_salience() -> f32 {
    DEFAULT_SALIENCE
}

/// How important a node or grip is, as the original records it on both
/// (its fields, flattened into the node's or grip's JSON); by default the
/// original's values for records written before it had them.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Salience {
    /// The score (the original computes it when the record is made: 0.35
    /// plus boosts for length, kind and pinning); stored as given.
    #[serde(default = "default_salience")]
    pub salience_score: f32,
    /// What it records.
    #[serde(default)]
    pub memory_kind: MemoryKind,
    /// Pinned by the user.
    #[serde(default)]
    pub is_pinned: bool,
}

impl Default for Salience {
    fn default() -> Self {
        Self {
            salience_score: DEFAULT_SALIENCE,
            memory_kind: MemoryKind::Observation,
            is_pinned: false,
        }
    }
}

/// A node of the table of contents: one version of it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TocNode {
    /// `toc:{level}:{...}`.
    pub node_id: String,
    /// Year, month, week, day or segment.
    pub level: Level,
    /// A short heading for the span.
    pub title: String,
    /// Bullets summarising the span.
    pub bullets: Vec<TocBullet>,
    /// Keywords for search.
    pub keywords: Vec<String>,
    /// Children, in order.
    pub child_node_ids: Vec<String>,
    /// The span covered, milliseconds since the Unix epoch.
    pub start_ms: u64,
    /// The span's end (exclusive).
    pub end_ms: u64,
    /// The version this is (set by [`AgentMemory::put_toc_node`]).
    pub version: u32,
    /// How important it is.
    #[serde(flatten)]
    pub salience: Salience,
    /// The agents whose events the span holds.
    #[serde(default)]
    pub contributing_agents: Vec<String>,
}

/// A reference to an event: its id, which makes its key, and its
/// timestamp, for readers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EventRef {
    /// The event's timestamp (its content; the key takes the ULID's).
    pub timestamp_ms: u64,
    /// Its ULID.
    pub event_id: String,
}

/// A provenance anchor: an excerpt and the events it came from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Grip {
    /// `grip:{ts:013}:{suffix}`.
    pub grip_id: String,
    /// The quoted excerpt.
    pub excerpt: String,
    /// The first event of the span.
    pub start: EventRef,
    /// The last event of the span (inclusive).
    pub end: EventRef,
    /// Where it came from (a segmenter, a tool).
    pub source: String,
    /// The TOC node it backs, if linked.
    pub toc_node_id: Option<String>,
    /// How important it is.
    #[serde(flatten)]
    pub salience: Salience,
}

/// The outbox entry of a new event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EventAdded {
    /// The event's key in `am.events`.
    pub key: String,
}

/// The search projection of a TOC node or grip: the document's index
/// schema (doc type, doc id, level, text, keywords, timestamp).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SearchDoc {
    /// `toc_node` or `grip`.
    pub doc_type: String,
    /// The node's level name, or empty for a grip.
    pub level: String,
    /// Title and bullets, or the excerpt.
    pub text: String,
    /// Keywords, space-separated.
    pub keywords: String,
    /// The span's start, milliseconds since the Unix epoch.
    pub timestamp_ms: u64,
}

/// `("am", "doc", doc_id)`: a search projection row, written in the same
/// commit as the node version or grip it projects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SearchDocKey {
    /// The node id or grip id.
    pub doc_id: String,
}

tuple_key! {
    SearchDocKey -> SearchDoc = ("am", "doc", {doc_id});
}

strata_codec::value!(SearchDoc: postcard, version = 1);
strata_codec::value!(TocNode: json, version = 1);
strata_codec::value!(Grip: json, version = 1);
strata_codec::value!(EventAdded: postcard, version = 1);

/// One page of events.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventPage {
    /// The events, in the order asked.
    pub events: Vec<Event>,
    /// Whether more remain in the range.
    pub more: bool,
}

/// Counts and sizes.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Stats {
    /// Rows per agent-memory space, by name.
    pub rows: Vec<(&'static str, u64)>,
    /// The engine's size of each keyspace (`None` where the engine offers
    /// no statistics): name, bytes, whether exact.
    pub disk: Option<Vec<(String, u64, bool)>>,
    /// Entries of the event topic not yet finished by `consumer`, when
    /// asked for one.
    pub outbox_lag: Option<u64>,
}

/// The length of every event key: `evt:`, 13 digits, `:`, 26 characters.
const EVENT_KEY_LEN: usize = 4 + 13 + 1 + strata_keys::ulid::ULID_LEN;

/// The event key of `event_id`: `evt:{ts:013}:{ulid}`, where `ts` is the
/// time inside the ULID (as the original keys an event), so every retry of
/// one id, whatever timestamp it carries, meets the same key, and an event
/// is found by its id alone. The ULID is written in its canonical
/// (upper-case) form, so `01hnvx...` and `01HNVX...` are one event.
///
/// # Errors
/// [`MemoryError::Invalid`] for an id that is not a ULID, or whose time
/// needs more than 13 digits (after the year 2286).
pub fn event_key(event_id: &str) -> Result<String, MemoryError> {
    // The ULID text is read in either case, as its specification asks
    // (upper-cased in a buffer of its length: a text of another length is
    // refused by the parse as it stands).
    let mut upper = [0u8; strata_keys::ulid::ULID_LEN];
    let text: &[u8] = if event_id.len() == upper.len() {
        upper.copy_from_slice(event_id.as_bytes());
        upper.make_ascii_uppercase();
        &upper
    } else {
        event_id.as_bytes()
    };
    let ulid = Ulid::parse(text).map_err(|_| MemoryError::Invalid {
        what: "event id (not a ULID)",
        value: event_id.to_owned(),
    })?;
    let ms = ulid.timestamp_ms();
    if ms > 9_999_999_999_999 {
        return Err(MemoryError::Invalid {
            what: "event id (its time needs over 13 digits)",
            value: event_id.to_owned(),
        });
    }
    // `evt:`, the time in 13 digits, `:`, the ULID: written by hand, as
    // `format!` took a third of the key's time, and as bytes (pushed as
    // `char`s one by one, they cost 800 instructions an event).
    let mut key = [0u8; EVENT_KEY_LEN];
    key[..4].copy_from_slice(b"evt:");
    let mut rest = ms;
    for d in key[4..17].iter_mut().rev() {
        // A digit: below 10.
        #[allow(clippy::cast_possible_truncation)]
        {
            *d = b'0' + (rest % 10) as u8;
        }
        rest /= 10;
    }
    key[17] = b':';
    key[18..].copy_from_slice(&ulid.to_text());
    // Only ASCII was written, so the text is the bytes as they are: read
    // by `from_utf8`, whose ASCII path is a few word compares (the lossy
    // reading, which walks the bytes one by one, is only its fallback, and
    // gives the same text).
    Ok(std::str::from_utf8(&key).map_or_else(
        |_| String::from_utf8_lossy(&key).into_owned(),
        str::to_owned,
    ))
}

/// The key of version `version` of TOC node `node_id`.
pub fn toc_key(node_id: &str, version: u32) -> String {
    format!("{node_id}:v{version:06}")
}

/// The latest-pointer key of `node_id`.
pub fn latest_key(node_id: &str) -> String {
    format!("latest:{node_id}")
}

/// The node-index key of grip `grip_id` under `node_id`.
pub fn node_grip_key(node_id: &str, grip_id: &str) -> String {
    format!("node:{node_id}:{grip_id}")
}

/// A node id starts with `toc:`, has something after it, and does not end
/// with `:` (its versions' keys then parse back unambiguously).
fn check_node_id(node_id: &str) -> Result<(), MemoryError> {
    if !node_id.starts_with("toc:") || node_id.len() == 4 || node_id.ends_with(':') {
        return Err(MemoryError::Invalid {
            what: "TOC node id (toc:{level}:{...})",
            value: node_id.to_owned(),
        });
    }
    Ok(())
}

fn encode<T: Value>(value: &T, key: &str) -> Result<Vec<u8>, MemoryError> {
    // One allocation: the envelope reserves the room of a value that
    // knows its size (an event); most others (a TOC node's or a grip's
    // JSON) fit in 512 bytes.
    let mut out = if value.body_size_hint().is_some() {
        Vec::new()
    } else {
        Vec::with_capacity(512)
    };
    strata_codec::encode(value, key.as_bytes(), EncodeOptions::default(), &mut out).map_err(
        |source| MemoryError::Encode {
            key: key.to_owned(),
            source,
        },
    )?;
    Ok(out)
}

fn decode<T: Value>(key: &[u8], bytes: &[u8]) -> Result<T, MemoryError> {
    strata_codec::decode(key, bytes).map_err(|source| MemoryError::Corrupt {
        key: String::from_utf8_lossy(key).into_owned(),
        source,
    })
}

/// The index of TOC nodes and grips: text (boost 1), keywords (boost 2),
/// doc type and level as filters, the span's start as time. Open an
/// [`Indexer`] with it to serve [`AgentMemory::search`].
///
/// # Errors
/// A [`SearchError`] from the mapping (none for this fixed one).
pub fn search_spec() -> Result<IndexSpec<SearchDocKey>, SearchError> {
    Ok(
        IndexSpec::new("agent_memory", |_k: &SearchDocKey, d: &SearchDoc| {
            Document::new()
                .text("text", &d.text)
                .text("keywords", &d.keywords)
                .string("doc_type", &d.doc_type)
                .string("level", &d.level)
                .time_ms(d.timestamp_ms)
        })?
        .text("text", 1.0)?
        .text("keywords", 2.0)?
        .string("doc_type")?
        .string("level")?
        .with_time(),
    )
}

/// A search hit with its content read from the store.
#[derive(Debug, Clone, PartialEq)]
pub enum Found {
    /// A TOC node's latest version.
    Toc(TocNode),
    /// A provenance anchor.
    Grip(Grip),
}

/// One hit of [`AgentMemory::search`].
#[derive(Debug, Clone, PartialEq)]
pub struct SearchHit {
    /// The node id or grip id.
    pub doc_id: String,
    /// BM25 score.
    pub score: f32,
    /// The full content, read from the store (`None` when it is gone).
    pub content: Option<Found>,
}

/// The outbox configuration agent memory expects: the default.
pub fn outbox_config() -> strata_outbox::OutboxConfig {
    strata_outbox::OutboxConfig::default()
}

/// Agent memory over a store and its outbox.
pub struct AgentMemory<'s, E: Engine> {
    store: &'s Store<E>,
    outbox: &'s Outbox<'s, E>,
    events: Space,
    toc: Space,
    latest: Space,
    grips: Space,
    checkpoints: Space,
    topic: Topic<EventAdded>,
    spec: IndexSpec<SearchDocKey>,
}

impl<'s, E: Engine> AgentMemory<'s, E> {
    /// `options` with the agent-memory spaces and the outbox's.
    pub fn declare(options: StoreOptions) -> StoreOptions {
        Outbox::<E>::declare(options)
            .space(EVENTS, Profile::AppendOnly)
            .space(TOC_NODES, Profile::General)
            .space(TOC_LATEST, Profile::PointLookup)
            .space(GRIPS, Profile::General)
    }

    /// Agent memory on `store` (opened with [`AgentMemory::declare`]d
    /// options) and its `outbox`.
    ///
    /// # Errors
    /// A store error when a space was not declared.
    pub fn open(store: &'s Store<E>, outbox: &'s Outbox<'s, E>) -> Result<Self, MemoryError> {
        // The keyspaces described in the store's catalog, for tools
        // (`strata info`): a read, and a commit only when it changed.
        store.publish_catalog()?;
        Ok(Self {
            store,
            outbox,
            events: store.space(EVENTS)?,
            toc: store.space(TOC_NODES)?,
            latest: store.space(TOC_LATEST)?,
            grips: store.space(GRIPS)?,
            checkpoints: store.space(CHECKPOINTS)?,
            topic: Topic::new(EVENT_TOPIC)?,
            spec: search_spec()?,
        })
    }

    /// The outbox topic of new events.
    pub fn event_topic(&self) -> &Topic<EventAdded> {
        &self.topic
    }
}

/// This crate's README example, compiled and run as a doctest.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
