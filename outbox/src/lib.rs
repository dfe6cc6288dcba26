//! A transactional outbox on [`strata_store`]: an entry is written in the
//! same atomic commit as the change it describes, and delivered to named
//! consumers in commit order, never skipped, never lost.
//!
//! **Status: built**: topics, pushes in the
//! producer's transaction with versionstamped keys, consumers with
//! checkpoints (a low-water mark plus the entries finished above it),
//! polling bounded by the engine's durable version, per-key holding back,
//! acknowledgement in the handler's own transaction, retries with backoff
//! and jitter, dead letters (list, re-drive, purge), leases with fencing
//! tokens, trimming below the slowest consumer, lag, topics and consumers
//! described in the store's catalog; a simulation workload with a ledger
//! oracle (`cargo xtask sim`); a [`Worker`] running a handler on its own
//! thread, woken by commits through the store, trimming its topic under a
//! retention. The benchmark (`cargo bench -p strata-outbox`) and its
//! figures are in the crate's README.
//!
//! # Layout
//!
//! All topics share one entries keyspace (`Queue` profile) with the topic
//! as key prefix, not one keyspace each: a keyspace is fixed when the engine
//! opens (a RocksDB column family each, with its own memtables), while
//! topics come and go with the application; a topic's entries are one
//! contiguous prefix, so reading or trimming one topic never touches
//! another's rows. Consumer state and dead letters have their own
//! keyspaces. The rows are listed in the `layout` module source.
//!
//! # Delivery guarantees
//!
//! - An entry is delivered only once its commit is durable: polling reads
//!   up to [`Engine::durable_version`](strata_engine::Engine::durable_version),
//!   and syncs the engine when an entry of the topic waits for durability
//!   and the last sync is [`OutboxConfig::sync_interval_ms`] old.
//! - Entries sort by their commit's versionstamp: gap-free, in commit order,
//!   with no counter and no read, so concurrent producers never commit out
//!   of order and a consumer never skips one.
//! - The checkpoint never passes an entry that is not finished (acknowledged
//!   or dead-lettered). First deliveries are in commit order per ordering
//!   key (globally for entries without one); a failed entry holds back the
//!   later entries of its key, not the others.
//! - At least once: an entry is delivered again only if it was not
//!   acknowledged (a crash, a lost acknowledgement, a failure). An
//!   acknowledgement made in the handler's own store transaction commits
//!   with its effects: exactly once for effects kept in the same store.
//!
//! # Map
//!
//! One concept per file; this file declares them and re-exports the API.
//!
//! | file | what |
//! |---|---|
//! | `outbox.rs` | [`Outbox`]: opening it over a store, pushing entries |
//! | `position.rs`, `topic.rs`, `config.rs` | [`Position`], [`Topic`], [`OutboxConfig`] and [`Start`] |
//! | `consumers.rs` | registering, unregistering and resetting consumers ([`Registered`]) |
//! | `lease.rs` | [`Lease`]: acquire, renew, release, and the check every acknowledgement makes |
//! | `poll.rs` | a consumer's state, the durable bound, [`Delivery`] |
//! | `ack.rs` | acknowledgements and failures with backoff ([`Failed`]) |
//! | `dead.rs` | [`DeadLetter`]s: listed, re-driven, purged |
//! | `trim.rs` | trimming below the slowest consumer, [`Lag`], checkpoints ([`Trimmed`]) |
//! | `worker.rs` | [`Worker`]: a handler on its own thread |
//! | `inspect.rs` | read-only: every registered consumer, each one's [`ConsumerStatus`] |
//! | `layout.rs`, `error.rs`, `metrics.rs`, `prelude.rs` | the rows, [`OutboxError`], metric names, one import |
#![cfg_attr(docsrs, feature(doc_cfg))]

mod ack;
mod config;
mod consumers;
mod dead;
mod error;
mod inspect;
mod layout;
mod lease;
pub mod metrics;
mod outbox;
mod planted;
mod poll;
mod position;
pub mod prelude;
mod topic;
mod trim;
mod worker;

pub use crate::ack::Failed;
pub use crate::config::{OutboxConfig, Start};
pub use crate::consumers::Registered;
pub use crate::dead::DeadLetter;
pub use crate::error::{OutboxError, OutboxRow};
pub use crate::inspect::{ConsumerStatus, LeaseStatus, TopicEntries};
pub use crate::lease::Lease;
pub(crate) use crate::lease::read_lease;
pub use crate::outbox::Outbox;
pub(crate) use crate::outbox::{corrupt, corrupt_by, unknown};
pub use crate::poll::Delivery;
pub(crate) use crate::poll::TryRow;
pub use crate::position::Position;
pub(crate) use crate::position::{pack_position, read_position};
pub use crate::topic::Topic;
pub(crate) use crate::topic::check_name;
pub use crate::trim::{Lag, Trimmed};
pub use crate::worker::{
    Handler, HandlerError, Turn, Worker, WorkerConfig, WorkerLoop, WorkerReport,
};

/// This crate's README example, compiled and run as a doctest.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

/// Name of the entries keyspace.
pub const ENTRIES: &str = "strata.outbox";
/// Name of the consumer-state keyspace.
pub const STATE: &str = "strata.outbox.state";
/// Name of the dead-letter keyspace.
pub const DEAD: &str = "strata.outbox.dead";

/// The format version of the outbox's rows.
pub const FORMAT: u64 = 1;
/// Catalog kind of a topic (detail: the entries keyspace's name).
pub const CATALOG_TOPIC: &str = "outbox.topic";
/// Catalog kind of a consumer, named `topic/consumer` (detail: the tuple
/// `(topic, consumer, version, order)` of its starting checkpoint).
pub const CATALOG_CONSUMER: &str = "outbox.consumer";
