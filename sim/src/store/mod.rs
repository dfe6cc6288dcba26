//! The store workload: several clients running transactions against a
//! [`Store`] on a faulty engine, with values at and around every limit, a
//! quota scope near its limit, TTL values under clock jumps and chunked
//! values, through crashes.
//!
//! Oracles, checked on the engine without faults:
//!
//! - **Money is conserved.** Transfers between accounts read two balances
//!   and write both; the sum of all balances never changes (atomicity and
//!   serializability, across crashes and unknown outcomes).
//! - **Counts match.** A document is inserted only if absent, with +1 to its
//!   actor's counter in the same transaction, and deleted with -1: the
//!   counter always equals the actor's documents.
//! - **Every key holds what was written.** An independent model (`model.rs`) of the
//!   workload's own writes (acknowledged: certain; outcome unknown: either;
//!   not durable at a crash: possibly lost) says what each key may hold; a
//!   read through the store must be one of those, a value not yet expired
//!   included, a blind counter add of unknown outcome included.
//! - **Quota is exact.** Every scope's counter equals a recount of its rows
//!   made from the raw rows by the documented formats (not through the
//!   store), never exceeds the quota, and the store's own audit agrees; a
//!   quota refusal is checked against the same recount.
//! - **The layout holds.** Every row parses, every chunked value's chunks
//!   are whole and no chunk row is left over, every expiring row is in the
//!   expiry index, and after a complete sweep at the end no expired row
//!   remains.
//! - **Chunks never mix.** Every blob is self-describing (its writer's
//!   sequence number and length, then a pattern derived from them); any
//!   read must decode and match whole.
//! - **Nothing expired is returned.** TTL documents carry their expiry in
//!   their bytes; a read at clock time `t` must not return one that
//!   expired at or before `t`.
//! - **Refusals leave no trace.** A commit over a limit is refused with the
//!   limit's error, and the engine's contents are unchanged.

use std::cell::RefCell;

use strata_codec::Limits;
use strata_engine::{
    Clock, CommitError, Engine, EngineError, KeyspaceSpec, ReadError, Rng, SeededRng,
};
use strata_keys::{Key, KeyRange, tuple, tuple_key};
use strata_store::{Scan, Store, StoreError, StoreOptions, Tx};

use crate::faults::{FaultClass, FaultyEngine};
use crate::run::{Frame, RunOptions, SeedReport, Violation, fail};
use crate::targets::Target;

mod model;
mod oracle;

pub(crate) use model::Applied;
use model::{Model, Seen, Write};

use crate::run::contents as state;

mod collections;
mod money;
mod pressure;
mod rows;

use self::collections::{join, members_of};
use self::rows::{blob_bytes, blob_ok, docs_of};

const ACTOR: i64 = 1;
const BANK: i64 = 2;
const ACCOUNTS: u64 = 5;
const START_BALANCE: i64 = 1_000;
const ACTORS: u64 = 3;
const DOCS: u64 = 6;
const GROUP: i64 = 3;
const GROUPS: u64 = 2;
/// At most this many members per group: an insert scans the group first (a
/// range read, so concurrent inserts conflict). Groups are outside every
/// quota scope, so nothing else serializes the inserts.
const MAX_MEMBERS: usize = 4;
const BLOBS: u64 = 3;
const NOTE: i64 = 4;
const NOTES: u64 = 8;
const EVENT: i64 = 5;
const LEADERS: i64 = 6;
const APPLIED: i64 = 7;
/// Members of the sorted set.
const RANKED: u64 = 6;

/// A sorted set of members `0..RANKED` by score.
fn leaders() -> strata_store::SortedSet<u64> {
    strata_store::SortedSet::new(strata_keys::Subspace::new(&(LEADERS,)))
}

/// A bank account's balance (8 bytes, big-endian `i64`).
#[derive(Debug, Clone, PartialEq)]
struct Account {
    id: u64,
}
/// A document of an actor (quota-scoped).
#[derive(Debug, Clone, PartialEq)]
struct Doc {
    actor: u64,
    id: u64,
}
/// The number of an actor's documents.
#[derive(Debug, Clone, PartialEq)]
struct DocCount {
    actor: u64,
}
/// A blob of an actor, chunked when large.
#[derive(Debug, Clone, PartialEq)]
struct Blob {
    actor: u64,
    id: u64,
}
/// A value expiring at the time its first 8 bytes say (a flag byte follows,
/// flipped by compare-and-set).
#[derive(Debug, Clone, PartialEq)]
struct Ttl {
    actor: u64,
    id: u64,
}
/// A member of a group of at most `MAX_MEMBERS`.
#[derive(Debug, Clone, PartialEq)]
struct Member {
    group: u64,
    id: u64,
}
/// A note of an actor, written by the bulk writer, often with a time to
/// live: outside every quota scope.
#[derive(Debug, Clone, PartialEq)]
struct Note {
    actor: u64,
    id: u64,
}
/// An event whose key carries its commit's versionstamp; its value is the
/// workload's sequence number of the event.
#[derive(Debug, Clone, PartialEq)]
struct Event {
    stamp: strata_keys::tuple::Versionstamp,
}
/// How many times transfer `n` applied: each transfer adds 1 in its own
/// transaction, so a commit applied twice (a resent commit whose reply was
/// lost) shows as 2, whatever values the second run read and wrote.
#[derive(Debug, Clone, PartialEq)]
struct Transfer {
    n: u64,
}
/// A key of chosen length, for the key limit.
#[derive(Debug, Clone, PartialEq)]
struct Pad {
    actor: u64,
    name: String,
}
tuple_key! {
    Account -> Vec<u8> = (BANK, {id});
    Doc -> Vec<u8> = (ACTOR, {actor}, "doc", {id});
    DocCount -> i64 = (ACTOR, {actor}, "count");
    Blob -> Vec<u8> = (ACTOR, {actor}, "blob", {id});
    Ttl -> Vec<u8> = (ACTOR, {actor}, "ttl", {id});
    Member -> Vec<u8> = (GROUP, {group}, {id});
    Pad -> Vec<u8> = (ACTOR, {actor}, "pad", {name});
    Note -> Vec<u8> = (NOTE, {actor}, {id});
    Event -> Vec<u8> = (EVENT, {stamp});
    Transfer -> i64 = (APPLIED, {n});
}

/// A key of the workload, for the [`Model`].
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Slot {
    Account(u64),
    Doc(u64, u64),
    Count(u64),
    Blob(u64, u64),
    Ttl(u64, u64),
    Member(u64, u64),
    Pad(u64, String),
    Note(u64, u64),
    /// A member of the sorted set, holding its score.
    Ranked(u64),
    /// The applications of transfer `n` (a counter).
    Applied(u64),
}

impl Slot {
    /// Every key the workload may write but pads (whose names vary): a
    /// key the model never saw written must read as absent.
    fn fixed() -> Vec<Self> {
        let mut all: Vec<Self> = (0..ACCOUNTS).map(Self::Account).collect();
        for actor in 0..ACTORS {
            all.push(Self::Count(actor));
            all.extend((0..DOCS).map(|id| Self::Doc(actor, id)));
            all.extend((0..DOCS).map(|id| Self::Ttl(actor, id)));
            all.extend((0..BLOBS).map(|id| Self::Blob(actor, id)));
        }
        for group in 0..GROUPS {
            all.extend((0..8).map(|id| Self::Member(group, id)));
        }
        for actor in 0..ACTORS {
            all.extend((0..NOTES).map(|id| Self::Note(actor, id)));
        }
        all.extend((0..RANKED).map(Self::Ranked));
        all
    }

    /// The key's bytes.
    fn pack(&self) -> Vec<u8> {
        let packed = match self {
            Self::Account(id) => Account { id: *id }.pack(),
            Self::Doc(actor, id) => Doc {
                actor: *actor,
                id: *id,
            }
            .pack(),
            Self::Count(actor) => DocCount { actor: *actor }.pack(),
            Self::Blob(actor, id) => Blob {
                actor: *actor,
                id: *id,
            }
            .pack(),
            Self::Ttl(actor, id) => Ttl {
                actor: *actor,
                id: *id,
            }
            .pack(),
            Self::Member(group, id) => Member {
                group: *group,
                id: *id,
            }
            .pack(),
            Self::Pad(actor, name) => Pad {
                actor: *actor,
                name: name.clone(),
            }
            .pack(),
            Self::Note(actor, id) => Note {
                actor: *actor,
                id: *id,
            }
            .pack(),
            Self::Ranked(m) => Ok(tuple::pack(&(LEADERS, "m", *m))),
            Self::Applied(n) => Transfer { n: *n }.pack(),
        };
        packed.unwrap_or_default()
    }

    /// Reads the key through the store.
    fn read<E: Engine>(&self, store: &Store<E>) -> Result<Seen, StoreError> {
        let v = match self {
            Self::Account(id) => store.get(&Account { id: *id })?,
            Self::Doc(actor, id) => store.get(&Doc {
                actor: *actor,
                id: *id,
            })?,
            Self::Count(actor) => {
                return store
                    .counter(&DocCount { actor: *actor })
                    .map(Seen::Counter);
            }
            Self::Applied(n) => return store.counter(&Transfer { n: *n }).map(Seen::Counter),
            Self::Blob(actor, id) => store.get(&Blob {
                actor: *actor,
                id: *id,
            })?,
            Self::Ttl(actor, id) => store.get(&Ttl {
                actor: *actor,
                id: *id,
            })?,
            Self::Member(group, id) => store.get(&Member {
                group: *group,
                id: *id,
            })?,
            Self::Pad(actor, name) => store.get(&Pad {
                actor: *actor,
                name: name.clone(),
            })?,
            Self::Note(actor, id) => store.get(&Note {
                actor: *actor,
                id: *id,
            })?,
            Self::Ranked(m) => {
                let mut tx = store.begin();
                leaders()
                    .score(&mut tx, m)?
                    .map(|s| s.to_be_bytes().to_vec())
            }
        };
        Ok(Seen::Value(v))
    }
}

/// The writes of a transaction's latest attempt, as the workload made them.
#[derive(Default)]
struct Rec(RefCell<Vec<(Slot, Write)>>);

impl Rec {
    /// A new attempt: the previous one's writes were not committed.
    fn start(&self) {
        self.0.borrow_mut().clear();
    }

    fn put(&self, slot: Slot, value: &[u8]) {
        self.write(
            slot,
            Write::Put {
                value: value.to_vec(),
                expires: None,
            },
        );
    }

    fn write(&self, slot: Slot, write: Write) {
        self.0.borrow_mut().push((slot, write));
    }

    fn take(&self) -> Vec<(Slot, Write)> {
        std::mem::take(&mut self.0.borrow_mut())
    }
}

/// The events the workload wrote: sequence numbers acknowledged (in commit
/// order, the durable ones first) and of unknown outcome.
#[derive(Debug, Default)]
struct Events {
    /// The next sequence number.
    next: u64,
    /// Acknowledged, in commit order.
    acked: Vec<u64>,
    /// How many of `acked` are durable.
    durable: usize,
    /// Written by a commit of unknown outcome, or acknowledged and then
    /// perhaps lost in a crash: may be there or not.
    maybe: std::collections::BTreeSet<u64>,
}

impl Events {
    fn commit(&mut self, seqs: std::ops::Range<u64>, applied: Applied) {
        match applied {
            Applied::Yes => self.acked.extend(seqs),
            Applied::Maybe => self.maybe.extend(seqs),
            Applied::No => {}
        }
    }

    fn durable(&mut self) {
        self.durable = self.acked.len();
    }

    fn crash(&mut self) {
        self.maybe.extend(self.acked.drain(self.durable..));
    }

    /// Checks the events read in key order: sequence numbers strictly
    /// increasing (key order is commit order), every acknowledged one
    /// there, nothing that was never written.
    fn check(&self, seen: &[u64]) -> Result<(), String> {
        if let Some([a, b]) = seen.windows(2).find(|w| w[0] >= w[1]) {
            return Err(format!(
                "event {a} sorts before event {b}: versionstamps out of commit order"
            ));
        }
        let there: std::collections::BTreeSet<u64> = seen.iter().copied().collect();
        if let Some(lost) = self.acked.iter().find(|s| !there.contains(s)) {
            return Err(format!("acknowledged event {lost} is missing"));
        }
        if let Some(extra) = seen
            .iter()
            .find(|s| !self.maybe.contains(s) && !self.acked.contains(s))
        {
            return Err(format!("event {extra} was never acknowledged or attempted"));
        }
        Ok(())
    }
}

/// Whether a transaction that ended with `r` took effect.
fn applied<T>(r: &Result<T, StoreError>) -> Applied {
    r.as_ref().map_or_else(applied_despite, |_| Applied::Yes)
}

/// Whether a transaction that failed with `e` may have taken effect.
pub(crate) fn applied_despite(e: &StoreError) -> Applied {
    match e {
        StoreError::Commit(CommitError::OutcomeUnknown(_)) => Applied::Maybe,
        StoreError::RetriesExhausted { last, .. } => applied_despite(last),
        _ => Applied::No,
    }
}

/// The limits of the run: small, so that every one of them is met often.
const LIMITS: Limits = Limits {
    max_key_bytes: 40,
    max_value_bytes: 160,
    max_batch_entries: 12,
    max_batch_bytes: 1_500,
    quota_bytes: 2_000,
};

/// An actor's quota scope: the `(ACTOR, actor)` prefix of its keys. (The
/// tuple encoding of the integer 1 is `15 01`; a non-negative integer is a
/// code byte `0x14 + n` followed by `n` bytes.)
fn scope_of(key: &[u8]) -> Option<Vec<u8>> {
    let rest = key.strip_prefix(&[0x15, 0x01][..])?;
    let n = usize::from(rest.first()?.checked_sub(0x14)?);
    (n <= 8 && rest.len() > n).then(|| key[..3 + n].to_vec())
}

fn options(rng: &mut SeededRng) -> StoreOptions {
    let mut o = StoreOptions::new(LIMITS)
        .chunked::<Blob>()
        .quota_scope(scope_of);
    if rng.chance(0.5) {
        o = o.durability(strata_engine::Durability::Buffered);
    }
    o.retry = strata_store::RetryPolicy {
        max_attempts: 3,
        base_backoff_ms: 1,
        max_backoff_ms: 8,
    };
    o
}

struct StoreRun {
    /// The seed's draws, clock, trace and counts.
    frame: Frame,
    seq: u64,
    /// What each key may hold, from the workload's own writes.
    model: Model<Slot>,
    /// Whether commits are `Immediate` (each acknowledged one is durable).
    immediate: bool,
    /// Events written with versionstamped keys.
    events: Events,
    /// The latest clock reading so far. The clock jumps back too: a value
    /// may have expired (and been swept) at a later reading than now.
    clock_high: u64,
}

type Faulty<E> = FaultyEngine<E>;

/// A transaction of [`StoreRun::interleaved`] not yet committed: the
/// transaction, its two ids, its amount and its writes.
type Pending<'s, E> = (Tx<'s, Faulty<E>>, u64, u64, i64, Rec);

/// An error a fault may cause: not a violation.
pub(crate) fn faulted(e: &StoreError) -> bool {
    match e {
        StoreError::Read(ReadError::Backend(_))
        | StoreError::Commit(
            CommitError::Backend(_) | CommitError::OutcomeUnknown(_) | CommitError::Conflict { .. },
        )
        | StoreError::Engine(EngineError::Backend(_)) => true,
        StoreError::RetriesExhausted { last, .. } => faulted(last),
        _ => false,
    }
}

trait PackLen {
    fn pack_len(&self) -> usize;
}

impl<K: strata_keys::Key> PackLen for K {
    fn pack_len(&self) -> usize {
        self.pack().map_or(0, |b| b.len())
    }
}

fn specs(options: &StoreOptions) -> Vec<KeyspaceSpec> {
    options.keyspace_specs()
}

/// Runs the store workload of one seed on engine `E`.
pub fn run_store_seed_on<E: Target>(options: &RunOptions) -> SeedReport {
    let mut frame = Frame::new(options, 0x5709_E000_0000_0000, 1_700_000_000_000);
    let config = frame.faults;
    let store_options = self::options(&mut frame.rng);
    let mut run = StoreRun {
        seq: 0,
        model: Model::default(),
        events: Events::default(),
        immediate: store_options.durability == strata_engine::Durability::Immediate,
        clock_high: 0,
        frame,
    };
    run.frame.trace.event(
        0,
        format!(
            "store seed {} faults {config:?} durability {:?}",
            options.seed, store_options.durability
        ),
    );
    let engine = run.frame.engine::<E>(specs(&store_options));
    let mut store = Some(run.open(engine, &store_options));
    let mut violation = None;
    for step in 1..=options.ops {
        let Some(s) = store.take() else { break };
        let crash = run.frame.crash_due(s.engine().is_stuck());
        let (next, outcome) = if crash {
            let e = s.into_engine().crash_restart(&mut run.frame.rng);
            run.frame.trace.event(step, "crash and reopen".to_owned());
            // Commits not yet durable may be lost.
            run.model.crash();
            run.events.crash();
            let s = run.open(e, &store_options);
            let outcome = run.check(&s, step, "after a crash");
            (s, outcome)
        } else {
            if config.p(FaultClass::Clock) > 0.0
                && run.frame.rng.chance(config.p(FaultClass::Clock))
            {
                let jump = run.frame.rng.below(10_000);
                if run.frame.rng.chance(0.3) {
                    run.frame
                        .clock
                        .set(run.frame.clock.now_ms().saturating_sub(jump));
                } else {
                    run.frame.clock.advance(jump);
                }
                s.engine().record(FaultClass::Clock);
            } else {
                run.frame.clock.advance(run.frame.rng.below(100));
            }
            run.clock_high = run.clock_high.max(run.frame.clock.now_ms());
            let outcome = run.step(&s, step);
            (s, outcome)
        };
        store = Some(next);
        if let Err(v) = outcome {
            violation = Some(v);
            break;
        }
    }
    if violation.is_none()
        && let Some(s) = &store
        && let Err(v) = run.check_after_sweep(s, options.ops)
    {
        violation = Some(v);
    }
    let faults = store.map(|s| s.engine().counters()).unwrap_or_default();
    run.frame.report("store", options.seed, faults, violation)
}

impl StoreRun {
    fn open<E: Target>(&mut self, engine: Faulty<E>, options: &StoreOptions) -> Store<Faulty<E>> {
        Store::open_with(
            engine,
            options.clone(),
            self.frame.clock.clone(),
            Box::new(SeededRng::new(self.frame.rng.next_u64())),
        )
        .unwrap_or_else(|e| unreachable!("the store's keyspaces are declared: {e}"))
    }

    /// Outcome of a transaction: counted, traced, and a violation for an
    /// error that no fault explains.
    /// The model applies `writes` (the transaction's latest attempt) as the
    /// outcome says; a quota refusal is checked against the recount.
    fn settle<T, E: Target>(
        &mut self,
        store: &Store<Faulty<E>>,
        step: usize,
        what: &str,
        r: Result<T, StoreError>,
        writes: &[(Slot, Write)],
    ) -> Result<Option<T>, Violation> {
        let applied = applied(&r);
        self.model.commit(writes, applied);
        if applied == Applied::Yes && self.immediate {
            self.model.durable();
            self.events.durable();
        }
        match r {
            Ok(v) => {
                self.frame.commits += 1;
                self.frame.trace.event(step, format!("{what}: ok"));
                Ok(Some(v))
            }
            Err(StoreError::Quota {
                scope,
                used,
                requested,
                limit,
                ..
            }) => {
                self.check_refusal(store, step, &scope, used, requested, limit)?;
                self.frame.trace.event(
                    step,
                    format!("{what}: refused by the quota ({used} used, {requested} more)"),
                );
                Ok(None)
            }
            Err(e) if faulted(&e) => {
                self.frame.trace.event(step, format!("{what}: {e}"));
                Ok(None)
            }
            Err(e) => Err(fail(step, format!("{what} failed: {e}"))),
        }
    }

    /// One random step of the workload.
    fn step<E: Target>(&mut self, store: &Store<Faulty<E>>, step: usize) -> Result<(), Violation> {
        match self.frame.rng.below(100) {
            0..=16 => self.transfer(store, step),
            17..=19 => self.event(store, step),
            20..=29 => self.interleaved(store, step),
            30..=34 => self.race(store, step),
            35..=49 => self.doc(store, step),
            50..=61 => self.blob(store, step),
            62..=71 => self.ttl(store, step),
            72..=77 => self.pressure(store, step),
            78..=80 => self.bulk(store, step),
            81..=83 => self.reader(store, step),
            84..=85 => self.rank(store, step),
            86..=89 => self.sweep(store, step),
            90..=94 => {
                let r = store.engine().sync();
                if r.is_ok() {
                    self.model.durable();
                    self.events.durable();
                }
                self.frame.trace.event(step, format!("sync: {r:?}"));
                Ok(())
            }
            _ => self.check(store, step, "at a random step"),
        }
    }
}

#[cfg(test)]
mod tests {
    use strata_keys::Key;

    use super::*;

    #[test]
    fn every_actor_key_is_scoped_by_its_actor() {
        for actor in [0, 1, 255, 256, u64::MAX] {
            let want = Some(tuple::pack(&(ACTOR, actor)));
            assert_eq!(scope_of(&Doc { actor, id: 3 }.pack().unwrap()), want);
            assert_eq!(scope_of(&DocCount { actor }.pack().unwrap()), want);
            assert_eq!(
                scope_of(
                    &Pad {
                        actor,
                        name: "x".into()
                    }
                    .pack()
                    .unwrap()
                ),
                want
            );
        }
        assert_eq!(scope_of(&Account { id: 1 }.pack().unwrap()), None);
    }

    #[test]
    fn events_must_be_in_order_and_acknowledged_ones_kept_until_a_crash() {
        let mut ev = Events::default();
        ev.commit(0..2, Applied::Yes);
        ev.durable();
        ev.commit(2..3, Applied::Yes);
        ev.commit(3..4, Applied::Maybe);
        ev.commit(4..5, Applied::No);
        assert!(ev.check(&[0, 1, 2]).is_ok());
        assert!(ev.check(&[0, 1, 2, 3]).is_ok());
        assert!(ev.check(&[0, 2]).is_err(), "1 acknowledged, missing");
        assert!(ev.check(&[0, 1, 2, 4]).is_err(), "4 was refused");
        assert!(ev.check(&[1, 0, 2]).is_err(), "out of order");
        // A crash may lose 2 (not durable), never 0 or 1.
        ev.crash();
        assert!(ev.check(&[0, 1]).is_ok());
        assert!(ev.check(&[0, 1, 2]).is_ok());
        assert!(ev.check(&[0]).is_err());
    }

    #[test]
    fn blobs_check_themselves() {
        let b = blob_bytes(7, 500);
        assert!(blob_ok(&b));
        let mut mixed = b.clone();
        mixed[300..].copy_from_slice(&blob_bytes(8, 500)[300..]);
        assert!(!blob_ok(&mixed));
        assert!(!blob_ok(&b[..499]));
    }
}
