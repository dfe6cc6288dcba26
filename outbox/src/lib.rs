//! A transactional outbox on [`strata_store`]: an entry is written in the
//! same atomic commit as the change it describes, and delivered to named
//! consumers in commit order, never skipped, never lost.
//!
//! **Status: in progress** (issue 16). Built: topics, pushes in the
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
//!   up to [`Engine::durable_version`],
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
#![cfg_attr(docsrs, feature(doc_cfg))]

mod error;
mod layout;
pub mod metrics;
pub mod prelude;
mod worker;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::marker::PhantomData;
use std::sync::{Arc, Mutex, PoisonError};

use strata_codec::{Value, decode, encode_keyless};
use strata_engine::{Clock, Engine, Profile, Rng};
use strata_keys::tuple;
use strata_store::{Space, Store, StoreOptions, Tx};

pub use crate::error::OutboxError;
pub use crate::worker::{Handler, HandlerError, Worker, WorkerConfig, WorkerReport};

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

/// Where an entry sits: its commit's version and its order in the commit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Position {
    /// The version of the commit that wrote the entry.
    pub version: u64,
    /// The entry's order among the versionstamped rows of that commit.
    pub order: u16,
}

impl Position {
    /// Before every entry.
    pub const START: Self = Self {
        version: 0,
        order: 0,
    };

    fn stamp_bytes(self) -> [u8; 10] {
        let mut b = [0; 10];
        b[..8].copy_from_slice(&self.version.to_be_bytes());
        b[8..].copy_from_slice(&self.order.to_be_bytes());
        b
    }

    fn from_stamp_bytes(b: [u8; 10]) -> Self {
        let mut v = [0; 8];
        v.copy_from_slice(&b[..8]);
        Self {
            version: u64::from_be_bytes(v),
            order: u16::from_be_bytes([b[8], b[9]]),
        }
    }

    /// The last position of commit `version`.
    pub fn end_of(version: u64) -> Self {
        Self {
            version,
            order: u16::MAX,
        }
    }
}

impl fmt::Display for Position {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.version, self.order)
    }
}

/// A topic of entries of type `T`.
pub struct Topic<T> {
    name: String,
    _entry: PhantomData<fn() -> T>,
}

impl<T> Clone for Topic<T> {
    fn clone(&self) -> Self {
        Self {
            name: self.name.clone(),
            _entry: PhantomData,
        }
    }
}

impl<T> fmt::Debug for Topic<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Topic").field("name", &self.name).finish()
    }
}

impl<T: Value> Topic<T> {
    /// The topic named `name` (1 to 64 bytes).
    ///
    /// # Errors
    /// [`OutboxError::BadName`].
    pub fn new(name: &str) -> Result<Self, OutboxError> {
        check_name("topic", name)?;
        Ok(Self {
            name: name.to_owned(),
            _entry: PhantomData,
        })
    }

    /// The name it was created with, the prefix of its entries' keys.
    pub fn name(&self) -> &str {
        &self.name
    }
}

fn check_name(what: &'static str, name: &str) -> Result<(), OutboxError> {
    if name.is_empty() || name.len() > 64 {
        return Err(OutboxError::BadName {
            what,
            name: name.to_owned(),
        });
    }
    Ok(())
}

/// Where a new consumer starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Start {
    /// With the first entry still in the topic.
    Beginning,
    /// After every entry committed so far.
    End,
    /// With the entries of commits after `version`.
    AfterVersion(u64),
}

/// How consumers retry and poll.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct OutboxConfig {
    /// Attempts before an entry is dead-lettered (at least 1; default 5).
    pub max_attempts: u32,
    /// Backoff after the first failure, in ms (default 100).
    pub base_backoff_ms: u64,
    /// Largest backoff, in ms (default 60,000).
    pub max_backoff_ms: u64,
    /// How long a lease lasts without renewal, in ms (default 30,000).
    pub lease_ms: u64,
    /// Under buffered durability, a poll syncs the engine when an entry of
    /// its topic waits for durability and this outbox's last sync is this
    /// old (default 50 ms).
    pub sync_interval_ms: u64,
    /// A deliberate mistake for the simulation to catch (feature
    /// `planted-bugs` only).
    #[cfg(feature = "planted-bugs")]
    pub planted: Option<PlantedBug>,
}

/// Deliberate mistakes the simulation must catch (feature `planted-bugs`,
/// which normal builds never enable).
#[cfg(feature = "planted-bugs")]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PlantedBug {
    /// The entry's position comes from a counter read (without a
    /// predicate) before the commit, not from the commit's versionstamp:
    /// concurrent producers take the same number and one entry replaces
    /// the other.
    SequenceFromCounter,
    /// Acknowledging an entry moves the checkpoint to it even past
    /// unfinished entries before it.
    CheckpointPastFailed,
    /// Polling reads up to the last commit, durable or not, and never
    /// syncs.
    PollBeyondDurable,
    /// Trimming cuts at the highest checkpoint instead of the lowest.
    TrimIgnoresSlowest,
    /// The lease belongs to a holder name (a second worker with the name
    /// shares it) and acknowledging a finished entry succeeds: two workers
    /// named alike apply entries twice.
    SharedHolderName,
    /// A failed entry waiting for its retry holds nothing back: the later
    /// entries of its ordering key are delivered before it.
    FailedHoldsNothing,
    /// A failed entry waiting for its retry holds back every ordering key:
    /// the poll stops at it.
    FailedHoldsEveryKey,
    /// A poll delivers again entries finished beyond the checkpoint
    /// (acknowledged or dead-lettered out of order).
    FinishedRedelivered,
    /// Taking a lease reads the lease row without a predicate: two workers
    /// taking a free consumer at once both get it, with one token.
    LeaseReadNotPinned,
    /// Releasing a lease ends it at the current millisecond, where its
    /// holder's renewal still accepts it: renewed in that millisecond, a
    /// released lease runs again (the bug the interleaved workload found).
    ReleaseRenewable,
}

#[cfg(feature = "planted-bugs")]
impl PlantedBug {
    /// Every planted bug.
    pub const ALL: [Self; 10] = [
        Self::SequenceFromCounter,
        Self::CheckpointPastFailed,
        Self::PollBeyondDurable,
        Self::TrimIgnoresSlowest,
        Self::SharedHolderName,
        Self::FailedHoldsNothing,
        Self::FailedHoldsEveryKey,
        Self::FinishedRedelivered,
        Self::LeaseReadNotPinned,
        Self::ReleaseRenewable,
    ];

    /// Its name on the command line.
    pub const fn name(self) -> &'static str {
        match self {
            Self::SequenceFromCounter => "sequence-from-counter",
            Self::CheckpointPastFailed => "checkpoint-past-failed",
            Self::PollBeyondDurable => "poll-beyond-durable",
            Self::TrimIgnoresSlowest => "trim-ignores-slowest",
            Self::SharedHolderName => "shared-holder-name",
            Self::FailedHoldsNothing => "failed-holds-nothing",
            Self::FailedHoldsEveryKey => "failed-holds-every-key",
            Self::FinishedRedelivered => "finished-redelivered",
            Self::LeaseReadNotPinned => "lease-read-not-pinned",
            Self::ReleaseRenewable => "release-renewable",
        }
    }

    /// The bug with this name.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|b| b.name() == name)
    }
}

impl Default for OutboxConfig {
    fn default() -> Self {
        Self {
            max_attempts: 5,
            base_backoff_ms: 100,
            max_backoff_ms: 60_000,
            lease_ms: 30_000,
            sync_interval_ms: 50,
            #[cfg(feature = "planted-bugs")]
            planted: None,
        }
    }
}

/// A worker's hold on a consumer: acknowledgements and failures under it
/// are refused once another worker has taken the consumer over.
///
/// A lease belongs to the one [`Outbox::acquire`] call that took it (a
/// random instance number is stored with it), not to its holder name: a
/// second worker with the same name (a restart while the old process still
/// runs, a name copied from the docs) is refused like any other until the
/// lease is released or expires. The holder keeps it with
/// [`Outbox::renew`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    topic: String,
    consumer: String,
    token: u64,
    holder: String,
    expires_ms: u64,
    instance: u64,
}

impl Lease {
    /// The fencing token: larger for every acquisition.
    pub fn token(&self) -> u64 {
        self.token
    }

    /// The holder name it was taken under (for people: it decides nothing).
    pub fn holder(&self) -> &str {
        &self.holder
    }

    /// Until when it holds without renewal (clock milliseconds).
    pub fn expires_ms(&self) -> u64 {
        self.expires_ms
    }

    /// The topic of the consumer it holds.
    pub fn topic(&self) -> &str {
        &self.topic
    }

    /// The consumer it holds.
    pub fn consumer(&self) -> &str {
        &self.consumer
    }
}

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

/// What [`Outbox::fail`] did with a failed entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failed {
    /// It will be delivered again from `at_ms` on.
    Retry {
        /// When, in clock milliseconds.
        at_ms: u64,
        /// Failures so far.
        attempts: u32,
    },
    /// It reached the attempt limit and is now a dead letter; the
    /// checkpoint may pass it.
    DeadLettered,
}

/// An entry a consumer gave up on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeadLetter {
    /// Where it sat in the topic.
    pub position: Position,
    /// The ordering key it was pushed with, if any.
    pub ordering_key: Option<Vec<u8>>,
    /// The entry's envelope (decode with the topic's type).
    pub envelope: Vec<u8>,
    /// The last failure's text.
    pub error: String,
    /// Failures.
    pub attempts: u32,
    /// First and last failure (clock milliseconds).
    pub first_failure_ms: u64,
    /// The last failure.
    pub last_failure_ms: u64,
}

/// What [`Outbox::register`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Registered {
    /// The consumer is new: entries after this position are its to handle.
    New(Position),
    /// The consumer was registered already and is left as it was (the
    /// start asked for is not applied; see [`Outbox::reset`]): its
    /// checkpoint.
    Existing(Position),
}

/// How far a consumer is behind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Lag {
    /// Durable entries not finished.
    pub entries: u64,
    /// Age of the oldest of them (clock milliseconds; 0 without any).
    pub oldest_age_ms: u64,
}

/// What [`Outbox::trim`] removed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Trimmed {
    /// Entries deleted.
    pub entries: u64,
    /// Commits made.
    pub commits: u64,
    /// Whether entries below the cut remain (`max_commits` reached).
    pub more: bool,
}

/// The outbox over a store. See the [crate docs](crate).
pub struct Outbox<'s, E: Engine> {
    store: &'s Store<E>,
    entries: Space,
    state: Space,
    dead: Space,
    config: OutboxConfig,
    clock: Arc<dyn Clock>,
    rng: Mutex<Box<dyn Rng>>,
    /// When this outbox last synced the engine.
    last_sync: Mutex<u64>,
}

impl<E: Engine> fmt::Debug for Outbox<'_, E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Outbox")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

/// A consumer's state in one snapshot.
struct ConsumerState {
    low_water: Position,
    done: BTreeSet<Position>,
    tries: BTreeMap<Position, TryRecord>,
}

/// What the poll needs of a failed entry's record.
#[derive(Debug, Clone)]
struct TryRecord {
    attempts: u32,
    next_ms: u64,
}

type TryRow = (u32, u64, u64, u64, String);

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

    /// Whether `bug` is planted.
    #[cfg(feature = "planted-bugs")]
    fn bug(&self, bug: PlantedBug) -> bool {
        self.config.planted == Some(bug)
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

    fn push_inner<T: Value>(
        &self,
        tx: &mut Tx<'_, E>,
        topic: &Topic<T>,
        ordering_key: Option<&[u8]>,
        entry: &T,
    ) -> Result<(), OutboxError> {
        let mut envelope = Vec::new();
        encode_keyless(entry, None, &mut envelope)
            .map_err(|e| OutboxError::Corrupt(format!("entry does not encode: {e}")))?;
        let value = layout::entry_value(self.clock.now_ms(), ordering_key, &envelope);
        #[cfg(feature = "planted-bugs")]
        if self.bug(PlantedBug::SequenceFromCounter) {
            let counter = tuple::pack(&("planted-seq", topic.name.as_str()));
            let n = tx
                .snapshot_get_in(&self.state, &counter)?
                .and_then(|v| <[u8; 8]>::try_from(v.as_slice()).ok())
                .map_or(0, u64::from_be_bytes)
                + 1;
            tx.put_in(&self.state, counter, n.to_be_bytes().to_vec())?;
            let pos = Position {
                version: n,
                order: 0,
            };
            tx.put_in(&self.entries, layout::entry_key(&topic.name, pos), value)?;
            return Ok(());
        }
        let (key, offset) = layout::new_entry_key(&topic.name);
        tx.put_versionstamped_in(&self.entries, key, offset, value)?;
        Ok(())
    }

    /// Registers `consumer` on `topic`, starting as `start` says, durably
    /// (an `Immediate` commit). A consumer already registered is left as it
    /// is, `start` not applied: the result says which happened (move an
    /// existing consumer with [`Outbox::reset`]).
    ///
    /// # Errors
    /// [`OutboxError::BadName`]; a store failure.
    pub fn register(
        &self,
        topic: &str,
        consumer: &str,
        start: Start,
    ) -> Result<Registered, OutboxError> {
        check_name("topic", topic)?;
        check_name("consumer", consumer)?;
        let from = self.start_position(topic, start)?;
        self.store.transact(|tx| {
            // Durable on return, whatever the store's durability: a
            // registration lost in a crash would make trimming forget the
            // consumer.
            tx.set_durability(strata_engine::Durability::Immediate);
            let key = layout::checkpoint_key(topic, consumer);
            if let Some(existing) = tx.get_in(&self.state, &key)? {
                return Ok(Registered::Existing(read_position(&existing)?));
            }
            {
                tx.put_in(&self.state, key, pack_position(from))?;
                // Described in the store's catalog, for tools.
                tx.catalog_put(CATALOG_TOPIC, topic, FORMAT, ENTRIES.as_bytes())?;
                tx.catalog_put(
                    CATALOG_CONSUMER,
                    &format!("{topic}/{consumer}"),
                    FORMAT,
                    &tuple::pack(&(topic, consumer, from.version, from.order)),
                )?;
            }
            Ok::<_, OutboxError>(Registered::New(from))
        })
    }

    /// Removes `consumer` from `topic`: its checkpoint, lease, finished
    /// marks, attempt records, dead letters and catalog entry, so that
    /// trimming no longer waits for it. Rows go in commits within the batch
    /// entry limit, the checkpoint last (an interrupted call leaves the
    /// consumer registered; call again). Returns whether it was registered.
    ///
    /// # Errors
    /// [`OutboxError::LeaseHeld`] while a worker holds the consumer; a
    /// store failure.
    pub fn unregister(&self, topic: &str, consumer: &str) -> Result<bool, OutboxError> {
        let now = self.clock.now_ms();
        let room = self.store.options().limits.max_batch_entries.clamp(4, 1024) - 3;
        loop {
            let finished = self.store.transact(|tx| {
                let key = layout::checkpoint_key(topic, consumer);
                if tx.get_in(&self.state, &key)?.is_none() {
                    return Ok(None);
                }
                let lease = layout::lease_key(topic, consumer);
                if let Some(held) = tx
                    .get_in(&self.state, &lease)?
                    .map(|v| read_lease(&v))
                    .transpose()?
                    .filter(|h| h.until > now)
                {
                    return Err(OutboxError::LeaseHeld {
                        topic: topic.to_owned(),
                        consumer: consumer.to_owned(),
                        holder: held.holder,
                        until_ms: held.until,
                    });
                }
                let mut left = room;
                for (space, range) in [
                    (&self.state, layout::done_rows(topic, consumer)),
                    (&self.state, layout::try_rows(topic, consumer)),
                    (&self.dead, layout::dead_rows(topic, consumer)),
                ] {
                    let page = tx.scan_in(space, &range, Some(left), false)?;
                    for (k, _) in page.rows {
                        tx.delete_in(space, k)?;
                        left -= 1;
                    }
                    if left == 0 {
                        return Ok(Some(false));
                    }
                }
                tx.delete_in(&self.state, key)?;
                tx.delete_in(&self.state, lease)?;
                tx.catalog_delete(CATALOG_CONSUMER, &format!("{topic}/{consumer}"))?;
                Ok::<_, OutboxError>(Some(true))
            })?;
            match finished {
                None => return Ok(false),
                Some(true) => return Ok(true),
                Some(false) => {}
            }
        }
    }

    /// Moves `consumer`'s checkpoint to `start` and forgets its finished
    /// marks and failures: a replay from there (or a skip ahead).
    ///
    /// # Errors
    /// [`OutboxError::UnknownConsumer`]; a store failure.
    pub fn reset(&self, topic: &str, consumer: &str, start: Start) -> Result<(), OutboxError> {
        let from = self.start_position(topic, start)?;
        self.store.transact(|tx| {
            tx.set_durability(strata_engine::Durability::Immediate);
            let key = layout::checkpoint_key(topic, consumer);
            if tx.get_in(&self.state, &key)?.is_none() {
                return Err(unknown(topic, consumer));
            }
            tx.put_in(&self.state, key, pack_position(from))?;
            for range in [
                layout::done_rows(topic, consumer),
                layout::try_rows(topic, consumer),
            ] {
                for (k, _) in tx.scan_in(&self.state, &range, None, false)?.rows {
                    tx.delete_in(&self.state, k)?;
                }
            }
            Ok(())
        })
    }

    fn start_position(&self, topic: &str, start: Start) -> Result<Position, OutboxError> {
        Ok(match start {
            Start::Beginning => Position::START,
            Start::AfterVersion(v) => Position::end_of(v),
            Start::End => {
                let last = self.store.transact(|tx| {
                    let page = tx.snapshot_scan_in(
                        &self.entries,
                        &layout::all_entries(topic),
                        Some(1),
                        true,
                    )?;
                    Ok::<_, OutboxError>(
                        page.rows
                            .first()
                            .and_then(|(k, _)| layout::entry_position(k)),
                    )
                })?;
                last.unwrap_or(Position::START)
                    .max(Position::end_of(self.store.engine().last_version()))
            }
        })
    }

    /// Takes `consumer`'s lease, named `holder`, if it is free (released
    /// or expired): a new fencing token each time. A lease that still runs
    /// is refused whoever holds it, even under the same holder name: the
    /// worker that took it keeps it with [`Outbox::renew`], so two workers
    /// never hold one consumer at once.
    ///
    /// # Errors
    /// [`OutboxError::LeaseHeld`] while a lease runs;
    /// [`OutboxError::UnknownConsumer`].
    pub fn acquire(&self, topic: &str, consumer: &str, holder: &str) -> Result<Lease, OutboxError> {
        let now = self.clock.now_ms();
        let instance = self
            .rng
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .next_u64();
        self.store.transact(|tx| {
            if tx
                .get_in(&self.state, &layout::checkpoint_key(topic, consumer))?
                .is_none()
            {
                return Err(unknown(topic, consumer));
            }
            let key = layout::lease_key(topic, consumer);
            #[cfg(feature = "planted-bugs")]
            let row = if self.bug(PlantedBug::LeaseReadNotPinned) {
                tx.snapshot_get_in(&self.state, &key)?
            } else {
                tx.get_in(&self.state, &key)?
            };
            #[cfg(not(feature = "planted-bugs"))]
            let row = tx.get_in(&self.state, &key)?;
            let current = row.map(|v| read_lease(&v)).transpose()?;
            #[cfg(feature = "planted-bugs")]
            if self.bug(PlantedBug::SharedHolderName)
                && let Some(held) = current.as_ref().filter(|h| h.holder == holder)
            {
                return Ok(Lease {
                    topic: topic.to_owned(),
                    consumer: consumer.to_owned(),
                    token: held.token,
                    holder: holder.to_owned(),
                    expires_ms: held.until,
                    instance: held.instance,
                });
            }
            let token = match current {
                Some(held) if held.until > now => {
                    return Err(OutboxError::LeaseHeld {
                        topic: topic.to_owned(),
                        consumer: consumer.to_owned(),
                        holder: held.holder,
                        until_ms: held.until,
                    });
                }
                Some(held) => held.token + 1,
                None => 1,
            };
            let expires_ms = now.saturating_add(self.config.lease_ms);
            tx.put_in(
                &self.state,
                key,
                tuple::pack(&(token, holder, expires_ms, instance)),
            )?;
            Ok(Lease {
                topic: topic.to_owned(),
                consumer: consumer.to_owned(),
                token,
                holder: holder.to_owned(),
                expires_ms,
                instance,
            })
        })
    }

    /// Extends `lease` by the configured term from now, keeping its token:
    /// how its holder keeps it. A lease that expired is renewed too as long
    /// as nobody took the consumer in between.
    ///
    /// # Errors
    /// [`OutboxError::StaleLease`] when the consumer was taken over or
    /// released since (acquire it again); a store failure.
    pub fn renew(&self, lease: &Lease) -> Result<Lease, OutboxError> {
        let now = self.clock.now_ms();
        self.store.transact(|tx| {
            let key = layout::lease_key(&lease.topic, &lease.consumer);
            let current = tx
                .get_in(&self.state, &key)?
                .map(|v| read_lease(&v))
                .transpose()?;
            match current {
                Some(held) if held.is(lease) && held.until >= lease.expires_ms.min(now) => {}
                _ => return Err(OutboxError::StaleLease { token: lease.token }),
            }
            let expires_ms = now.saturating_add(self.config.lease_ms);
            tx.put_in(
                &self.state,
                key,
                tuple::pack(&(
                    lease.token,
                    lease.holder.as_str(),
                    expires_ms,
                    lease.instance,
                )),
            )?;
            Ok(Lease {
                expires_ms,
                ..lease.clone()
            })
        })
    }

    /// Gives `lease` up at once, so another holder can take the consumer
    /// over without waiting for it to expire (a worker stopping cleanly).
    /// The token stays: the next holder gets a new one, and this lease's
    /// acknowledgements are refused from now on. Does nothing when the
    /// lease already changed hands.
    ///
    /// # Errors
    /// A store failure.
    pub fn release(&self, lease: &Lease) -> Result<(), OutboxError> {
        let now = self.clock.now_ms();
        self.store.transact(|tx| {
            let key = layout::lease_key(&lease.topic, &lease.consumer);
            let current = tx
                .get_in(&self.state, &key)?
                .map(|v| read_lease(&v))
                .transpose()?;
            if let Some(held) = current
                && held.is(lease)
                && held.until > now
            {
                // Ended a millisecond ago: free now, and not renewable by
                // its holder, whose renewal accepts an end at `now` (a
                // lease that ran out untaken).
                let ended = now.saturating_sub(1);
                #[cfg(feature = "planted-bugs")]
                let ended = if self.bug(PlantedBug::ReleaseRenewable) {
                    now
                } else {
                    ended
                };
                tx.put_in(
                    &self.state,
                    key,
                    tuple::pack(&(held.token, held.holder.as_str(), ended, held.instance)),
                )?;
            }
            Ok::<_, OutboxError>(())
        })
    }

    /// Checks in `tx` that `lease` still holds (pinned: a take-over before
    /// the commit makes it fail).
    fn check_lease(&self, tx: &mut Tx<'_, E>, lease: &Lease) -> Result<(), OutboxError> {
        let now = self.clock.now_ms();
        let row = tx.get_in(
            &self.state,
            &layout::lease_key(&lease.topic, &lease.consumer),
        )?;
        match row.map(|v| read_lease(&v)).transpose()? {
            Some(held) if held.is(lease) && held.until > now => Ok(()),
            _ => Err(OutboxError::StaleLease { token: lease.token }),
        }
    }

    /// The entries `consumer` finished above its checkpoint (pinned).
    fn finished_marks(
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
        .map(|(k, _)| layout::trailing_position(k, prefix).ok_or_else(|| corrupt("done mark")))
        .collect()
    }

    /// The consumer's checkpoint, finished marks and failures.
    fn consumer_state(
        &self,
        tx: &mut Tx<'_, E>,
        topic: &str,
        consumer: &str,
    ) -> Result<ConsumerState, OutboxError> {
        let low_water = tx
            .get_in(&self.state, &layout::checkpoint_key(topic, consumer))?
            .ok_or_else(|| unknown(topic, consumer))
            .and_then(|v| read_position(&v))?;
        let done = self.finished_marks(tx, topic, consumer)?;
        let try_prefix = tuple::pack(&("t", topic, consumer)).len();
        let tries = tx
            .scan_in(&self.state, &layout::try_rows(topic, consumer), None, false)?
            .rows
            .iter()
            .map(|(k, v)| {
                let pos = layout::trailing_position(k, try_prefix)
                    .ok_or_else(|| corrupt("attempt record"))?;
                let (attempts, _first, _last, next_ms, _error) =
                    tuple::unpack::<TryRow>(v).map_err(|_| corrupt("attempt record"))?;
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
    fn durable_for(
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
        #[cfg(feature = "planted-bugs")]
        let beyond = self.bug(PlantedBug::PollBeyondDurable);
        #[cfg(not(feature = "planted-bugs"))]
        let beyond = false;
        self.poll_upto(lease, topic, after, max, beyond)
    }

    /// For the planted bugs of crates above (feature `planted-bugs`): as
    /// [`Outbox::poll_after`], up to the last commit, durable or not.
    #[cfg(feature = "planted-bugs")]
    #[doc(hidden)]
    pub fn planted_poll_beyond_durable<T: Value>(
        &self,
        lease: &Lease,
        topic: &Topic<T>,
        after: Position,
        max: usize,
    ) -> Result<Vec<Delivery<T>>, OutboxError> {
        self.poll_upto(lease, topic, after, max, true)
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
        #[cfg(feature = "planted-bugs")]
        let beyond = self.bug(PlantedBug::PollBeyondDurable);
        #[cfg(not(feature = "planted-bugs"))]
        let beyond = false;
        self.poll_with(lease, topic, after, max, beyond, Ok)
    }

    fn poll_upto<T: Value>(
        &self,
        lease: &Lease,
        topic: &Topic<T>,
        after: Position,
        max: usize,
        beyond_durable: bool,
    ) -> Result<Vec<Delivery<T>>, OutboxError> {
        self.poll_with(lease, &topic.name, after, max, beyond_durable, |envelope| {
            decode::<T>(&[], &envelope).map_err(|e| e.to_string())
        })
    }

    /// The poll, each entry's envelope made a `T` by `decode` (an entry it
    /// refuses is dead-lettered).
    fn poll_with<T>(
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
        let mut range = layout::entries_between(topic, from, Position::end_of(durable));
        let mut held: BTreeSet<Option<Vec<u8>>> = BTreeSet::new();
        let mut out = Vec::new();
        let mut poison = Vec::new();
        // In pages, until `max` deliveries or the end of the durable part.
        // A page of `max` rows is all a poll needs unless entries are
        // skipped (finished, held back, waiting for a retry); every row
        // read beyond is copied out of the engine for nothing.
        let page_size = max.clamp(16, 1024);
        'pages: loop {
            let page = tx.snapshot_scan_in(&self.entries, &range, Some(page_size), false)?;
            for (k, v) in &page.rows {
                if out.len() >= max {
                    break 'pages;
                }
                let pos = layout::entry_position(k).ok_or_else(|| corrupt("entry key"))?;
                if st.done.contains(&pos) {
                    #[cfg(feature = "planted-bugs")]
                    let skip = !self.bug(PlantedBug::FinishedRedelivered);
                    #[cfg(not(feature = "planted-bugs"))]
                    let skip = true;
                    if skip {
                        continue;
                    }
                }
                let (pushed_ms, ordering_key, envelope) =
                    layout::read_entry_value(v).ok_or_else(|| corrupt("entry value"))?;
                if held.contains(&ordering_key) {
                    continue;
                }
                let tried = st.tries.get(&pos);
                if tried.is_some_and(|t| t.next_ms > now) {
                    #[cfg(feature = "planted-bugs")]
                    if self.bug(PlantedBug::FailedHoldsEveryKey) {
                        break 'pages;
                    }
                    #[cfg(feature = "planted-bugs")]
                    if self.bug(PlantedBug::FailedHoldsNothing) {
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
            match page.rows.last() {
                Some((k, _)) if page.more => {
                    let mut next = k.clone();
                    next.push(0);
                    range.start = next;
                }
                _ => break,
            }
        }
        drop(tx);
        for (pos, why) in poison {
            tracing::warn!(%pos, topic, "an entry does not decode: dead-lettered");
            self.dead_letter_now(lease, pos, &format!("does not decode: {why}"))?;
        }
        Ok(out)
    }

    /// Acknowledges the entry at `position` in `tx`, the handler's own
    /// transaction: it commits with the handler's writes (exactly once for
    /// effects in this store) or not at all. Moves the checkpoint past every
    /// finished entry in order.
    ///
    /// Acknowledging an entry already finished fails with
    /// [`OutboxError::AlreadyFinished`], so the handler's transaction rolls
    /// back with its writes: whatever delivered the entry twice (a retry
    /// after a lost reply, a second worker), its effects commit once.
    ///
    /// # Errors
    /// [`OutboxError::StaleLease`] when another worker took the consumer
    /// over; [`OutboxError::AlreadyFinished`]; a store failure.
    pub fn ack(
        &self,
        tx: &mut Tx<'_, E>,
        lease: &Lease,
        position: Position,
    ) -> Result<(), OutboxError> {
        self.check_lease(tx, lease)?;
        self.finish(tx, &lease.topic, &lease.consumer, position)
    }

    /// Marks `position` finished and advances the checkpoint over every
    /// finished entry that follows it in order.
    fn finish(
        &self,
        tx: &mut Tx<'_, E>,
        topic: &str,
        consumer: &str,
        position: Position,
    ) -> Result<(), OutboxError> {
        let ck_key = layout::checkpoint_key(topic, consumer);
        let low_water = tx
            .get_in(&self.state, &ck_key)?
            .ok_or_else(|| unknown(topic, consumer))
            .and_then(|v| read_position(&v))?;
        let done_key = layout::done_key(topic, consumer, position);
        if position <= low_water || tx.get_in(&self.state, &done_key)?.is_some() {
            #[cfg(feature = "planted-bugs")]
            if self.bug(PlantedBug::SharedHolderName) {
                return Ok(());
            }
            return Err(OutboxError::AlreadyFinished(position));
        }
        if tx
            .snapshot_get_in(&self.entries, &layout::entry_key(topic, position))?
            .is_none()
        {
            return Err(OutboxError::NoEntry(position));
        }
        tx.delete_in(&self.state, layout::try_key(topic, consumer, position))?;
        // The entries after the checkpoint, in order: passed while each is
        // this one or already finished.
        let done = self.finished_marks(tx, topic, consumer)?;
        let range = layout::entries_between(topic, low_water, Position::end_of(u64::MAX));
        let mut new_low = low_water;
        let mut page_from = range;
        // Small pages first: an acknowledgement in order stops at the
        // second entry, and every row a page reads is copied.
        let mut page_size = 4;
        'scan: loop {
            let page = tx.snapshot_scan_in(&self.entries, &page_from, Some(page_size), false)?;
            page_size = (page_size * 4).min(256);
            for (k, _) in &page.rows {
                let pos = layout::entry_position(k).ok_or_else(|| corrupt("entry key"))?;
                if pos == position || done.contains(&pos) {
                    new_low = pos;
                } else {
                    break 'scan;
                }
            }
            match page.rows.last() {
                Some((k, _)) if page.more => {
                    let mut start = k.clone();
                    start.push(0);
                    page_from.start = start;
                }
                _ => break,
            }
        }
        #[cfg(feature = "planted-bugs")]
        if self.bug(PlantedBug::CheckpointPastFailed) {
            new_low = new_low.max(position);
        }
        if new_low >= position {
            tx.put_in(&self.state, ck_key, pack_position(new_low))?;
        } else {
            tx.put_in(&self.state, done_key, Vec::new())?;
        }
        // Finished marks at or below the checkpoint are no longer needed:
        // a few go with each acknowledgement, so that one acknowledgement
        // never takes more than a quarter of the batch entry limit (the
        // handler's own writes share the commit). The rest go with later
        // ones; until then they are ignored.
        let cap = (self.store.options().limits.max_batch_entries / 4).max(1);
        for pos in done.range(..=new_low.max(low_water)).take(cap) {
            tx.delete_in(&self.state, layout::done_key(topic, consumer, *pos))?;
        }
        Ok(())
    }

    /// Acknowledges every entry up to and including `position` in `tx`, in
    /// one step: for a consumer that handles its topic strictly in commit
    /// order and keeps its own record of progress (a search index commits
    /// its position with its documents), the way a log consumer commits an
    /// offset. Entries at or below `position` that wait for a retry are
    /// acknowledged with the rest. `position` need not be an entry's: a
    /// consumer that rebuilt its state from a store snapshot at version `v`
    /// acknowledges through [`Position::end_of`]`(v)`. Acknowledging at or
    /// below the checkpoint does nothing.
    ///
    /// # Errors
    /// [`OutboxError::StaleLease`]; [`OutboxError::NoEntry`] when
    /// `position` lies after the last commit; a store failure.
    pub fn ack_through(
        &self,
        tx: &mut Tx<'_, E>,
        lease: &Lease,
        position: Position,
    ) -> Result<(), OutboxError> {
        self.check_lease(tx, lease)?;
        let (topic, consumer) = (lease.topic.as_str(), lease.consumer.as_str());
        let ck_key = layout::checkpoint_key(topic, consumer);
        let low_water = tx
            .get_in(&self.state, &ck_key)?
            .ok_or_else(|| unknown(topic, consumer))
            .and_then(|v| read_position(&v))?;
        if position <= low_water {
            return Ok(());
        }
        if position.version > self.store.engine().last_version() {
            return Err(OutboxError::NoEntry(position));
        }
        tx.put_in(&self.state, ck_key, pack_position(position))?;
        // Marks and attempt records at or below the new checkpoint are
        // dead weight; as in `finish`, a bounded number go per commit.
        let cap = (self.store.options().limits.max_batch_entries / 4).max(1);
        let done = self.finished_marks(tx, topic, consumer)?;
        let mut left = cap;
        for pos in done.range(..=position).take(left) {
            tx.delete_in(&self.state, layout::done_key(topic, consumer, *pos))?;
            left -= 1;
        }
        let try_prefix = tuple::pack(&("t", topic, consumer)).len();
        let tries = tx.scan_in(&self.state, &layout::try_rows(topic, consumer), None, false)?;
        for (k, _) in tries.rows.iter().take(left) {
            let pos = layout::trailing_position(k, try_prefix)
                .ok_or_else(|| corrupt("attempt record"))?;
            if pos > position {
                break;
            }
            tx.delete_in(&self.state, k.clone())?;
        }
        Ok(())
    }

    /// Records a failure of the entry at `position`: it is retried after a
    /// backoff (exponential, with jitter), or, at the attempt limit, moved
    /// to the dead letters in one commit, after which the checkpoint may
    /// pass it.
    ///
    /// # Errors
    /// [`OutboxError::StaleLease`]; [`OutboxError::NoEntry`]; a store
    /// failure.
    pub fn fail(
        &self,
        lease: &Lease,
        position: Position,
        error: &str,
    ) -> Result<Failed, OutboxError> {
        let outcome = self.fail_once(lease, position, error)?;
        crate::metrics::failed(
            &lease.topic,
            &lease.consumer,
            outcome == Failed::DeadLettered,
        );
        Ok(outcome)
    }

    fn fail_once(
        &self,
        lease: &Lease,
        position: Position,
        error: &str,
    ) -> Result<Failed, OutboxError> {
        let now = self.clock.now_ms();
        let jitter = self
            .rng
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .next_u64();
        self.store.transact(|tx| {
            self.check_lease(tx, lease)?;
            let (topic, consumer) = (&lease.topic, &lease.consumer);
            let key = layout::try_key(topic, consumer, position);
            let before = tx
                .get_in(&self.state, &key)?
                .map(|v| tuple::unpack::<TryRow>(&v).map_err(|_| corrupt("attempt record")))
                .transpose()?;
            let attempts = before.as_ref().map_or(0, |t| t.0) + 1;
            let first_ms = before.as_ref().map_or(now, |t| t.1);
            if attempts >= self.config.max_attempts.max(1) {
                self.move_to_dead(tx, lease, position, error, attempts, first_ms, now)?;
                return Ok(Failed::DeadLettered);
            }
            let ceiling = self
                .config
                .base_backoff_ms
                .saturating_mul(1u64 << (attempts - 1).min(40))
                .min(self.config.max_backoff_ms);
            let wait = ceiling / 2 + jitter % (ceiling - ceiling / 2 + 1);
            let at_ms = now.saturating_add(wait);
            tx.put_in(
                &self.state,
                key,
                tuple::pack(&(attempts, first_ms, now, at_ms, error)),
            )?;
            Ok(Failed::Retry { at_ms, attempts })
        })
    }

    /// Moves the entry at `position` to the dead letters at once, whatever
    /// its attempts: for an entry its consumer can never handle (one that
    /// does not map to a document, say). Counted as a dead letter in the
    /// metrics, like one [`Outbox::fail`] moved.
    ///
    /// # Errors
    /// [`OutboxError::StaleLease`]; [`OutboxError::NoEntry`];
    /// [`OutboxError::AlreadyFinished`]; a store failure.
    pub fn dead_letter(
        &self,
        lease: &Lease,
        position: Position,
        error: &str,
    ) -> Result<(), OutboxError> {
        self.dead_letter_now(lease, position, error)?;
        crate::metrics::failed(&lease.topic, &lease.consumer, true);
        Ok(())
    }

    fn dead_letter_now(
        &self,
        lease: &Lease,
        position: Position,
        error: &str,
    ) -> Result<(), OutboxError> {
        let now = self.clock.now_ms();
        self.store.transact(|tx| {
            self.check_lease(tx, lease)?;
            self.move_to_dead(tx, lease, position, error, 1, now, now)
        })
    }

    #[allow(clippy::too_many_arguments)]
    fn move_to_dead(
        &self,
        tx: &mut Tx<'_, E>,
        lease: &Lease,
        position: Position,
        error: &str,
        attempts: u32,
        first_ms: u64,
        now: u64,
    ) -> Result<(), OutboxError> {
        let (topic, consumer) = (&lease.topic, &lease.consumer);
        let entry = tx
            .get_in(&self.entries, &layout::entry_key(topic, position))?
            .ok_or(OutboxError::NoEntry(position))?;
        tx.put_in(
            &self.dead,
            layout::dead_key(topic, consumer, position),
            tuple::pack(&(entry.as_slice(), error, attempts, first_ms, now)),
        )?;
        tx.delete_in(&self.state, layout::try_key(topic, consumer, position))?;
        self.finish(tx, topic, consumer, position)
    }

    /// `consumer`'s dead letters on `topic`, in position order.
    ///
    /// # Errors
    /// A store failure or a corrupt row.
    pub fn dead_letters(
        &self,
        topic: &str,
        consumer: &str,
    ) -> Result<Vec<DeadLetter>, OutboxError> {
        let prefix = tuple::pack(&("x", topic, consumer)).len();
        self.store.transact(|tx| {
            tx.snapshot_scan_in(&self.dead, &layout::dead_rows(topic, consumer), None, false)?
                .rows
                .iter()
                .map(|(k, v)| read_dead(k, v, prefix))
                .collect()
        })
    }

    /// Pushes a dead letter's entry into `topic` again (a new entry, with
    /// its ordering key, delivered to every consumer of the topic) and
    /// removes the dead letter, in one commit.
    ///
    /// # Errors
    /// [`OutboxError::NoEntry`] when there is no such dead letter; a store
    /// failure.
    pub fn redrive(
        &self,
        topic: &str,
        consumer: &str,
        position: Position,
    ) -> Result<(), OutboxError> {
        let prefix = tuple::pack(&("x", topic, consumer)).len();
        let now = self.clock.now_ms();
        self.store.transact(|tx| {
            let key = layout::dead_key(topic, consumer, position);
            let row = tx
                .get_in(&self.dead, &key)?
                .ok_or(OutboxError::NoEntry(position))?;
            let dead = read_dead(&key, &row, prefix)?;
            let (entry_key, offset) = layout::new_entry_key(topic);
            let value = layout::entry_value(now, dead.ordering_key.as_deref(), &dead.envelope);
            tx.put_versionstamped_in(&self.entries, entry_key, offset, value)?;
            tx.delete_in(&self.dead, key)?;
            Ok(())
        })
    }

    /// Deletes a dead letter for good.
    ///
    /// # Errors
    /// A store failure.
    pub fn purge(
        &self,
        topic: &str,
        consumer: &str,
        position: Position,
    ) -> Result<(), OutboxError> {
        self.store.transact(|tx| {
            tx.delete_in(&self.dead, layout::dead_key(topic, consumer, position))?;
            Ok(())
        })
    }

    /// Deletes `topic`'s entries that every registered consumer has passed
    /// (at or below the lowest checkpoint) and that were pushed at least
    /// `retention_ms` ago, in commits of at most the batch entry limit, up
    /// to `max_commits` of them (`None`: until done). Never deletes an entry
    /// a registered consumer has not passed; a topic without consumers keeps
    /// everything.
    ///
    /// # Errors
    /// A store failure; trimming can resume by calling again.
    pub fn trim(
        &self,
        topic: &str,
        retention_ms: u64,
        max_commits: Option<u64>,
    ) -> Result<Trimmed, OutboxError> {
        let now = self.clock.now_ms();
        let batch = self.store.options().limits.max_batch_entries.clamp(1, 1024);
        let mut report = Trimmed::default();
        loop {
            if max_commits.is_some_and(|m| report.commits >= m) {
                report.more = true;
                return Ok(report);
            }
            let deleted = self.store.transact(|tx| {
                // Pinned: a consumer moving back (a reset) conflicts.
                let checkpoints =
                    tx.scan_in(&self.state, &layout::checkpoints(topic), None, false)?;
                let marks = checkpoints
                    .rows
                    .iter()
                    .map(|(_, v)| read_position(v))
                    .collect::<Result<Vec<_>, _>>()?;
                #[cfg(feature = "planted-bugs")]
                let marks = if self.bug(PlantedBug::TrimIgnoresSlowest) {
                    marks.into_iter().max().into_iter().collect()
                } else {
                    marks
                };
                let Some(lowest) = marks.into_iter().min() else {
                    return Ok(0);
                };
                let range = layout::entries_between(topic, Position::START, lowest);
                let page = tx.snapshot_scan_in(&self.entries, &range, Some(batch), false)?;
                let mut n = 0;
                for (k, v) in page.rows {
                    let (pushed_ms, _, _) =
                        layout::read_entry_value(&v).ok_or_else(|| corrupt("entry value"))?;
                    if now.saturating_sub(pushed_ms) < retention_ms {
                        break;
                    }
                    tx.delete_in(&self.entries, k)?;
                    n += 1;
                }
                Ok::<_, OutboxError>(n)
            })?;
            if deleted == 0 {
                return Ok(report);
            }
            crate::metrics::trimmed(topic, deleted);
            report.entries += deleted;
            report.commits += 1;
        }
    }

    /// How far `consumer` is behind on `topic`: durable entries not finished,
    /// and the age of the oldest.
    ///
    /// # Errors
    /// [`OutboxError::UnknownConsumer`]; a store failure.
    pub fn lag(&self, topic: &str, consumer: &str) -> Result<Lag, OutboxError> {
        let mut tx = self.store.begin();
        let st = self.consumer_state(&mut tx, topic, consumer)?;
        let lag = self.lag_in(&mut tx, topic, st.low_water, &st.done)?;
        crate::metrics::lag(topic, consumer, lag);
        Ok(lag)
    }

    /// How far a reader that holds every entry of `topic` up to `position`
    /// is behind: the durable entries after it, and the age of the oldest.
    /// For a consumer that keeps its own position (a search index, whose
    /// position may lag the consumer's checkpoint when its files were lost).
    ///
    /// # Errors
    /// A store failure.
    pub fn lag_after(&self, topic: &str, position: Position) -> Result<Lag, OutboxError> {
        let mut tx = self.store.begin();
        self.lag_in(&mut tx, topic, position, &BTreeSet::new())
    }

    fn lag_in(
        &self,
        tx: &mut Tx<'_, E>,
        topic: &str,
        after: Position,
        done: &BTreeSet<Position>,
    ) -> Result<Lag, OutboxError> {
        let now = self.clock.now_ms();
        let durable = self.store.engine().durable_version();
        let range = layout::entries_between(topic, after, Position::end_of(durable));
        let mut lag = Lag::default();
        for (k, v) in tx
            .snapshot_scan_in(&self.entries, &range, None, false)?
            .rows
        {
            let pos = layout::entry_position(&k).ok_or_else(|| corrupt("entry key"))?;
            if done.contains(&pos) {
                continue;
            }
            let (pushed_ms, _, _) =
                layout::read_entry_value(&v).ok_or_else(|| corrupt("entry value"))?;
            lag.entries += 1;
            lag.oldest_age_ms = lag.oldest_age_ms.max(now.saturating_sub(pushed_ms));
        }
        Ok(lag)
    }

    /// The checkpoint of `consumer` on `topic`: every entry at or below it
    /// is finished (entries above it may be finished too, out of order). A
    /// consumer that keeps its own record of progress (a search index that
    /// commits its position with its documents) compares it with this.
    ///
    /// # Errors
    /// [`OutboxError::UnknownConsumer`]; a store failure.
    pub fn checkpoint(&self, topic: &str, consumer: &str) -> Result<Position, OutboxError> {
        let mut tx = self.store.begin();
        tx.snapshot_get_in(&self.state, &layout::checkpoint_key(topic, consumer))?
            .ok_or_else(|| unknown(topic, consumer))
            .and_then(|v| read_position(&v))
    }
}

fn unknown(topic: &str, consumer: &str) -> OutboxError {
    OutboxError::UnknownConsumer {
        topic: topic.to_owned(),
        consumer: consumer.to_owned(),
    }
}

fn corrupt(what: &str) -> OutboxError {
    OutboxError::Corrupt(format!("a {what} does not read"))
}

fn pack_position(p: Position) -> Vec<u8> {
    tuple::pack(&(p.version, p.order))
}

fn read_position(bytes: &[u8]) -> Result<Position, OutboxError> {
    let (version, order) = tuple::unpack::<(u64, u16)>(bytes).map_err(|_| corrupt("checkpoint"))?;
    Ok(Position { version, order })
}

/// A lease row: `(token, holder, until_ms, instance)`.
struct LeaseRow {
    token: u64,
    holder: String,
    until: u64,
    instance: u64,
}

impl LeaseRow {
    /// Whether the row is `lease`'s own acquisition.
    fn is(&self, lease: &Lease) -> bool {
        self.token == lease.token && self.instance == lease.instance
    }
}

fn read_lease(bytes: &[u8]) -> Result<LeaseRow, OutboxError> {
    tuple::unpack::<(u64, String, u64, u64)>(bytes)
        .map(|(token, holder, until, instance)| LeaseRow {
            token,
            holder,
            until,
            instance,
        })
        .map_err(|_| corrupt("lease"))
}

fn read_dead(key: &[u8], value: &[u8], prefix: usize) -> Result<DeadLetter, OutboxError> {
    let position =
        layout::trailing_position(key, prefix).ok_or_else(|| corrupt("dead letter key"))?;
    let (entry, error, attempts, first_failure_ms, last_failure_ms) =
        tuple::unpack::<(Vec<u8>, String, u32, u64, u64)>(value)
            .map_err(|_| corrupt("dead letter"))?;
    let (_, ordering_key, envelope) =
        layout::read_entry_value(&entry).ok_or_else(|| corrupt("dead letter entry"))?;
    Ok(DeadLetter {
        position,
        ordering_key,
        envelope,
        error,
        attempts,
        first_failure_ms,
        last_failure_ms,
    })
}
