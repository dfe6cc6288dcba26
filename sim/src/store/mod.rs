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
use std::sync::Arc;

use strata_codec::Limits;
use strata_engine::{
    Clock, CommitError, Engine, EngineError, KeyspaceSpec, ManualClock, ReadError, Rng, SeededRng,
};
use strata_keys::{Key, KeyRange, tuple, tuple_key};
use strata_store::{Scan, Store, StoreError, StoreOptions, Tx};

use crate::faults::{FaultClass, FaultConfig, FaultyEngine};
use crate::run::{RunOptions, SeedReport, Trace, Violation, fail};
use crate::targets::Target;

mod model;
mod oracle;

pub(crate) use model::Applied;
use model::{Model, Seen, Write};

use crate::run::contents as state;

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

/// A blob's bytes: sequence number, length, then a pattern of both.
fn blob_bytes(seq: u64, len: usize) -> Vec<u8> {
    let mut out = seq.to_be_bytes().to_vec();
    out.extend_from_slice(&u32::try_from(len).unwrap_or(u32::MAX).to_be_bytes());
    let mut x = seq.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    while out.len() < len.max(12) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.push(x.to_le_bytes()[0]);
    }
    out
}

/// Whether the value at data key `key` has chunk rows, read raw without
/// faults.
fn has_chunks<E: Target>(store: &Store<Faulty<E>>, key: &[u8]) -> Result<bool, String> {
    use strata_engine::Snapshot;
    let e = store.engine().inner();
    let system = e
        .keyspaces()
        .get(&store.options().system_keyspace)
        .map_err(|err| err.to_string())?;
    e.snapshot()
        .and_then(|snap| snap.get(system, &model::chunk_key(key, 0)))
        .map(|v| v.is_some())
        .map_err(|err| format!("a fault-free read failed: {err}"))
}

/// The rows a put of a `len`-byte blob at `key` writes, by the documented
/// formats (not the store's code): entries, and bytes at least and at most
/// (the manifest may or may not repeat the expiry). The envelope is a
/// 5-byte header, 8 bytes of expiry if any, a 4-byte checksum and the
/// bytes; up to the value limit it is the data row itself, above it chunks
/// of the value limit at `("c", key, i)` plus a manifest row (header,
/// checksum, 20 bytes of manifest).
fn blob_rows(key: &[u8], len: usize, expires: bool) -> (usize, usize, usize) {
    let whole = 5 + if expires { 8 } else { 0 } + 4 + len;
    let max = LIMITS.max_value_bytes;
    if whole <= max {
        return (1, key.len() + whole, key.len() + whole);
    }
    let n = whole.div_ceil(max);
    let mut bytes = 0;
    for i in 0..n {
        let chunk = if i + 1 == n {
            whole - max * (n - 1)
        } else {
            max
        };
        bytes += model::chunk_key(key, u32::try_from(i).unwrap_or(u32::MAX)).len() + chunk;
    }
    let manifest = key.len() + 5 + 4 + 20;
    (1 + n, bytes + manifest, bytes + manifest + 8)
}

/// Whether `bytes` is a whole blob written by [`blob_bytes`].
fn blob_ok(bytes: &[u8]) -> bool {
    let Some((seq, rest)) = bytes.split_first_chunk::<8>() else {
        return false;
    };
    let Some((len, _)) = rest.split_first_chunk::<4>() else {
        return false;
    };
    let len = u32::from_be_bytes(*len) as usize;
    blob_bytes(u64::from_be_bytes(*seq), len) == bytes
}

struct StoreRun {
    rng: SeededRng,
    clock: Arc<ManualClock>,
    trace: Trace,
    commits: u64,
    checks: u64,
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

impl StoreRun {
    fn open<E: Target>(&mut self, engine: Faulty<E>, options: &StoreOptions) -> Store<Faulty<E>> {
        Store::open_with(
            engine,
            options.clone(),
            self.clock.clone(),
            Box::new(SeededRng::new(self.rng.next_u64())),
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
                self.commits += 1;
                self.trace.event(step, format!("{what}: ok"));
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
                self.trace.event(
                    step,
                    format!("{what}: refused by the quota ({used} used, {requested} more)"),
                );
                Ok(None)
            }
            Err(e) if faulted(&e) => {
                self.trace.event(step, format!("{what}: {e}"));
                Ok(None)
            }
            Err(e) => Err(fail(step, format!("{what} failed: {e}"))),
        }
    }

    /// One random step of the workload.
    fn step<E: Target>(&mut self, store: &Store<Faulty<E>>, step: usize) -> Result<(), Violation> {
        match self.rng.below(100) {
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
                self.trace.event(step, format!("sync: {r:?}"));
                Ok(())
            }
            _ => self.check(store, step, "at a random step"),
        }
    }

    /// Two different accounts and an amount below `max`.
    fn pick_transfer(&mut self, max: u64) -> (u64, u64, i64) {
        let from = self.rng.below(ACCOUNTS);
        let to = (from + 1 + self.rng.below(ACCOUNTS - 1)) % ACCOUNTS;
        (from, to, i64::try_from(self.rng.below(max)).unwrap_or(0))
    }

    fn transfer<E: Target>(
        &mut self,
        store: &Store<Faulty<E>>,
        step: usize,
    ) -> Result<(), Violation> {
        let (from, to, amount) = self.pick_transfer(300);
        self.seq += 1;
        let n = self.seq;
        let rec = Rec::default();
        let r = store.transact(|tx| {
            rec.start();
            move_money(tx, &rec, n, (from, to, amount))
        });
        self.settle(
            store,
            step,
            &format!("transfer {amount} {from}->{to}"),
            r,
            &rec.take(),
        )?;
        Ok(())
    }

    /// Two or three transfers interleaved by hand, committed in a random
    /// order: conflicts must be refused, never half-applied.
    fn interleaved<E: Target>(
        &mut self,
        store: &Store<Faulty<E>>,
        step: usize,
    ) -> Result<(), Violation> {
        let n = 2 + self.rng.below(2);
        // Transfers, or members joining one group (which may not take it
        // past MAX_MEMBERS together), now and then one leaving.
        let docs = self.rng.chance(0.4);
        let group = self.rng.below(GROUPS);
        let mut txs: Vec<Pending<'_, E>> = Vec::new();
        for k in 0..n {
            let (from, to, amount) = if docs {
                (
                    group,
                    (k + self.rng.below(8)) % 8,
                    i64::from(self.rng.chance(0.2)),
                )
            } else {
                self.pick_transfer(100)
            };
            txs.push((store.begin(), from, to, amount, Rec::default()));
        }
        for (tx, from, to, amount, rec) in &mut txs {
            let r = if docs && *amount == 1 {
                tx.delete(&Member {
                    group: *from,
                    id: *to,
                })
                .map(|()| rec.write(Slot::Member(*from, *to), Write::Delete))
            } else if docs {
                join(tx, rec, *from, *to).map(|_| ())
            } else {
                self.seq += 1;
                move_money(tx, rec, self.seq, (*from, *to, *amount))
            };
            if let Err(e) = r
                && !faulted(&e)
            {
                return Err(fail(step, format!("interleaved transaction: {e}")));
            }
        }
        while !txs.is_empty() {
            let i = usize::try_from(self.rng.below(txs.len() as u64)).unwrap_or(0);
            let (tx, from, to, amount, rec) = txs.remove(i);
            let r = tx.commit().map(|_| ());
            match r {
                Err(e) if e.is_conflict() => self
                    .trace
                    .event(step, format!("interleaved {from}->{to}: conflict")),
                r => {
                    let what = if docs {
                        format!("interleaved join or leave of member {from}/{to}")
                    } else {
                        format!("interleaved transfer {amount} {from}->{to}")
                    };
                    self.settle(store, step, &what, r, &rec.take())?;
                }
            }
        }
        Ok(())
    }

    fn doc<E: Target>(&mut self, store: &Store<Faulty<E>>, step: usize) -> Result<(), Violation> {
        let actor = self.rng.below(ACTORS);
        let id = self.rng.below(DOCS);
        let insert = self.rng.chance(0.6);
        // Sizes around the value limit (the envelope adds 9 bytes).
        let len = match self.rng.below(4) {
            0 => 150,
            1 => 151,
            2 => 152,
            _ => usize::try_from(self.rng.below(100)).unwrap_or(0),
        };
        let value = vec![u8::try_from(id).unwrap_or(0); len];
        let rec = Rec::default();
        let r = store.transact(|tx| {
            rec.start();
            let k = Doc { actor, id };
            if insert {
                if tx.put_if_absent(&k, &value)? {
                    rec.put(Slot::Doc(actor, id), &value);
                    tx.add(&DocCount { actor }, 1)?;
                    rec.write(Slot::Count(actor), Write::Add(1));
                }
            } else if tx.get(&k)?.is_some() {
                tx.delete(&k)?;
                rec.write(Slot::Doc(actor, id), Write::Delete);
                tx.add(&DocCount { actor }, -1)?;
                rec.write(Slot::Count(actor), Write::Add(-1));
            }
            Ok::<_, StoreError>(())
        });
        let over = len + 9 > LIMITS.max_value_bytes;
        match (&r, insert && over) {
            (Err(StoreError::ValueTooLarge { .. }), true) => {
                self.trace
                    .event(step, format!("doc {actor}/{id} of {len} bytes refused"));
                Ok(())
            }
            (Err(StoreError::ValueTooLarge { .. }), false) => Err(fail(
                step,
                format!("a {len}-byte document was refused as too large"),
            )),
            _ => {
                self.settle(
                    store,
                    step,
                    &format!(
                        "doc {} {actor}/{id} ({len} bytes)",
                        if insert { "insert" } else { "delete" }
                    ),
                    r,
                    &rec.take(),
                )?;
                Ok(())
            }
        }
    }

    fn blob<E: Target>(&mut self, store: &Store<Faulty<E>>, step: usize) -> Result<(), Violation> {
        let actor = self.rng.below(ACTORS);
        let id = self.rng.below(BLOBS);
        self.seq += 1;
        let len = match self.rng.below(5) {
            0 => 12 + usize::try_from(self.rng.below(100)).unwrap_or(0),
            1 => 150 + usize::try_from(self.rng.below(4)).unwrap_or(0), // the inline boundary
            2 => 1_200 + usize::try_from(self.rng.below(600)).unwrap_or(0), // near the batch limits
            _ => 200 + usize::try_from(self.rng.below(1_200)).unwrap_or(0),
        };
        let bytes = blob_bytes(self.seq, len);
        let delete = self.rng.chance(0.15);
        // Now and then a chunked value with a time to live.
        let expires = self
            .rng
            .chance(0.2)
            .then(|| self.clock.now_ms() + 1 + self.rng.below(3_000));
        // What the put's own rows take, computed from the documented
        // formats, and whether an old value has chunk rows (whose deletes
        // add to the commit), read raw before the transaction.
        let raw_key = Blob { actor, id }.pack().unwrap_or_default();
        let old_chunked = has_chunks(store, &raw_key).map_err(|why| fail(step, why))?;
        let own = (!delete).then(|| blob_rows(&raw_key, len, expires.is_some()));
        let rec = Rec::default();
        let r = store.transact(|tx| {
            rec.start();
            let key = Blob { actor, id };
            if delete {
                tx.delete(&key)?;
                rec.write(Slot::Blob(actor, id), Write::Delete);
            } else {
                match expires {
                    Some(at) => tx.put_expiring_at(&key, &bytes, at)?,
                    None => tx.put(&key, &bytes)?,
                }
                let value = bytes.clone();
                rec.write(Slot::Blob(actor, id), Write::Put { value, expires });
            }
            Ok::<_, StoreError>(())
        });
        if self.blob_refusal(step, (actor, id, len), &r, own, old_chunked)? {
            return Ok(());
        }
        self.settle(
            store,
            step,
            &format!("blob {actor}/{id} seq {} ({len} bytes)", self.seq),
            r,
            &rec.take(),
        )?;
        Ok(())
    }

    /// Checks a blob put's outcome against the limits, from the rows it
    /// writes (`own`: entries and bytes at least and at most) and whether
    /// old chunks were deleted too; returns whether it was refused.
    fn blob_refusal(
        &mut self,
        step: usize,
        (actor, id, len): (u64, u64, usize),
        r: &Result<(), StoreError>,
        own: Option<(usize, usize, usize)>,
        old_chunked: bool,
    ) -> Result<bool, Violation> {
        self.checks += 1;
        let within = |(entries, lo, hi): (usize, usize, usize)| {
            (
                entries <= LIMITS.max_batch_entries && hi as u64 <= LIMITS.max_batch_bytes,
                entries > LIMITS.max_batch_entries || lo as u64 > LIMITS.max_batch_bytes,
            )
        };
        match (&r, own.map(within)) {
            // Every row is within the row limits by construction (chunks of
            // the value limit, short keys): a row-limit refusal is wrong.
            (
                Err(StoreError::Limit {
                    row: Some(row),
                    source,
                }),
                _,
            ) => {
                return Err(fail(
                    step,
                    format!(
                        "blob {actor}/{id} of {len} bytes refused for its {} ({source}), though every row it writes is within the row limits",
                        row.kind
                    ),
                ));
            }
            // Its own rows fit and no old chunk is deleted: nothing else
            // counts, so the batch limits cannot refuse it.
            (Err(StoreError::Limit { source, .. }), Some((true, _))) if !old_chunked => {
                return Err(fail(
                    step,
                    format!(
                        "blob {actor}/{id} of {len} bytes refused ({source}), though its rows fit the batch limits"
                    ),
                ));
            }
            (Ok(()), Some((_, true))) => {
                return Err(fail(
                    step,
                    format!(
                        "blob {actor}/{id} of {len} bytes accepted, though its own rows exceed the batch limits"
                    ),
                ));
            }
            (Err(StoreError::Limit { source: l, .. }), _) => {
                self.trace.event(
                    step,
                    format!("blob {actor}/{id} of {len} bytes refused: {l}"),
                );
                return Ok(true);
            }
            _ => {}
        }
        Ok(false)
    }

    fn ttl<E: Target>(&mut self, store: &Store<Faulty<E>>, step: usize) -> Result<(), Violation> {
        let actor = self.rng.below(ACTORS);
        let id = self.rng.below(DOCS);
        if self.rng.chance(0.4) {
            // Finished by compare-and-set, which keeps the expiry: the new
            // value carries the same expiry time in its first 8 bytes and
            // must still expire then.
            let rec = Rec::default();
            let r = store.transact(|tx| {
                rec.start();
                let key = Ttl { actor, id };
                let Some(old) = tx.get(&key)? else {
                    return Ok(());
                };
                let mut new = old.clone();
                if let Some(flag) = new.get_mut(8) {
                    *flag ^= 1;
                }
                if tx.compare_and_set(&key, Some(&old), Some(&new))? {
                    rec.write(Slot::Ttl(actor, id), Write::PutKeep(new));
                }
                Ok(())
            });
            self.settle(
                store,
                step,
                &format!("ttl {actor}/{id} finished by compare-and-set"),
                r,
                &rec.take(),
            )?;
            return Ok(());
        }
        let ttl = 1 + self.rng.below(5_000);
        let at = self.clock.now_ms() + ttl;
        let value = [&at.to_be_bytes()[..], &[0]].concat();
        // An absolute expiry: the same in every attempt of the transaction,
        // and the same as the time in the value's bytes.
        let r = store.transact(|tx| tx.put_expiring_at(&Ttl { actor, id }, &value, at));
        let writes = [(
            Slot::Ttl(actor, id),
            Write::Put {
                value,
                expires: Some(at),
            },
        )];
        self.settle(
            store,
            step,
            &format!("ttl {actor}/{id} for {ttl} ms"),
            r,
            &writes,
        )?;
        Ok(())
    }

    /// Transactions racing on one chunked value, one quota scope or one
    /// TTL key, committed in a random order: each commits whole or
    /// conflicts, and the model and the recount see the result.
    fn race<E: Target>(&mut self, store: &Store<Faulty<E>>, step: usize) -> Result<(), Violation> {
        let actor = self.rng.below(ACTORS);
        let kind = self.rng.below(3);
        let n = 2 + self.rng.below(2);
        let mut txs: Vec<(Tx<'_, Faulty<E>>, Rec, String)> = Vec::new();
        for _ in 0..n {
            let mut tx = store.begin();
            let rec = Rec::default();
            self.seq += 1;
            let (what, r) = match kind {
                0 => {
                    let id = 0;
                    let len = 150 + usize::try_from(self.rng.below(900)).unwrap_or(0);
                    let bytes = blob_bytes(self.seq, len);
                    let r = tx.put(&Blob { actor, id }, &bytes);
                    if r.is_ok() {
                        rec.put(Slot::Blob(actor, id), &bytes);
                    }
                    (
                        format!("race on blob {actor}/{id} seq {} ({len} bytes)", self.seq),
                        r,
                    )
                }
                1 => {
                    // Rows of one scope, each alone within the quota.
                    let name = format!("r{}", self.rng.below(4));
                    let value = vec![7; 100 + usize::try_from(self.rng.below(40)).unwrap_or(0)];
                    let key = Pad {
                        actor,
                        name: name.clone(),
                    };
                    let r = tx.put(&key, &value);
                    if r.is_ok() {
                        rec.put(Slot::Pad(actor, name.clone()), &value);
                    }
                    (format!("race on the scope of actor {actor}: pad {name}"), r)
                }
                _ => {
                    let id = 0;
                    let at = self.clock.now_ms() + 1 + self.rng.below(4_000);
                    let value = [&at.to_be_bytes()[..], &[1]].concat();
                    let key = Ttl { actor, id };
                    // Read first, so that the racers conflict.
                    let r = tx
                        .get(&key)
                        .and_then(|_| tx.put_expiring_at(&key, &value, at));
                    if r.is_ok() {
                        rec.write(
                            Slot::Ttl(actor, id),
                            Write::Put {
                                value,
                                expires: Some(at),
                            },
                        );
                    }
                    (format!("race on ttl {actor}/{id} until {at}"), r)
                }
            };
            match r {
                Err(e) if !faulted(&e) && !matches!(e, StoreError::Limit { .. }) => {
                    return Err(fail(step, format!("{what}: {e}")));
                }
                _ => txs.push((tx, rec, what)),
            }
        }
        while !txs.is_empty() {
            let i = usize::try_from(self.rng.below(txs.len() as u64)).unwrap_or(0);
            let (tx, rec, what) = txs.remove(i);
            match tx.commit() {
                Err(e) if e.is_conflict() => self.trace.event(step, format!("{what}: conflict")),
                Err(StoreError::Limit { source, .. }) => {
                    self.trace
                        .event(step, format!("{what}: refused ({source})"));
                }
                r => {
                    self.settle(store, step, &what, r, &rec.take())?;
                }
            }
        }
        Ok(())
    }

    /// A member of the sorted set added with a score, moved, or removed.
    fn rank<E: Target>(&mut self, store: &Store<Faulty<E>>, step: usize) -> Result<(), Violation> {
        let m = self.rng.below(RANKED);
        let points = i64::try_from(self.rng.below(20)).unwrap_or(0) - 10;
        let remove = self.rng.chance(0.3);
        let rec = Rec::default();
        let r = store.transact(|tx| {
            rec.start();
            if remove {
                if leaders().remove(tx, &m)? {
                    rec.write(Slot::Ranked(m), Write::Delete);
                }
            } else {
                leaders().add(tx, &m, points)?;
                rec.put(Slot::Ranked(m), &points.to_be_bytes());
            }
            Ok::<_, StoreError>(())
        });
        let what = if remove {
            format!("unrank {m}")
        } else {
            format!("rank {m} at {points}")
        };
        self.settle(store, step, &what, r, &rec.take())?;
        Ok(())
    }

    /// One to three events in one transaction, their keys versionstamped.
    fn event<E: Target>(&mut self, store: &Store<Faulty<E>>, step: usize) -> Result<(), Violation> {
        let n = 1 + self.rng.below(3);
        let first = self.events.next;
        self.events.next += n;
        let r = store.transact(|tx| {
            for i in 0..n {
                let stamp =
                    strata_keys::tuple::Versionstamp::incomplete(u16::try_from(i).unwrap_or(0));
                tx.put_versionstamped(&Event { stamp }, &(first + i).to_be_bytes().to_vec())?;
            }
            Ok::<_, StoreError>(())
        });
        self.events.commit(first..first + n, applied(&r));
        self.settle(
            store,
            step,
            &format!("events {first}..{}", first + n),
            r,
            &[],
        )?;
        Ok(())
    }

    /// A bulk write of notes (many with a time to live, outside every
    /// quota scope), resumed once from its cursor after a failure: the
    /// entries before the cursor are written, the rest not (or, after an
    /// unknown outcome, perhaps).
    fn bulk<E: Target>(&mut self, store: &Store<Faulty<E>>, step: usize) -> Result<(), Violation> {
        let mut bulk = store.bulk_non_atomic();
        let mut writes = Vec::new();
        let n = 1 + self.rng.below(30);
        for _ in 0..n {
            let (actor, id) = (self.rng.below(ACTORS), self.rng.below(NOTES));
            let key = Note { actor, id };
            self.seq += 1;
            let r = match self.rng.below(4) {
                0 => bulk.delete(&key).map(|_| Write::Delete),
                1 => {
                    let value = self.seq.to_be_bytes().to_vec();
                    bulk.put(&key, &value).map(|_| Write::Put {
                        value,
                        expires: None,
                    })
                }
                _ => {
                    let ttl = 1 + self.rng.below(3_000);
                    let value = self.seq.to_be_bytes().to_vec();
                    let at = self.clock.now_ms() + ttl;
                    bulk.put_with_ttl(&key, &value, ttl).map(|_| Write::Put {
                        value,
                        expires: Some(at),
                    })
                }
            };
            match r {
                Ok(w) => writes.push((Slot::Note(actor, id), w)),
                Err(e) => return Err(fail(step, format!("queueing a bulk entry failed: {e}"))),
            }
        }
        let mut from = 0;
        for attempt in 0..2 {
            let r = bulk.apply_from(strata_store::BulkCursor { next: from });
            let (done, error) = match r {
                Ok(report) => {
                    self.commits += report.commits;
                    (writes.len(), None)
                }
                Err(e) => (e.cursor.next, Some(e.source)),
            };
            if done < from || done > writes.len() {
                return Err(fail(
                    step,
                    format!(
                        "a bulk write from entry {from} of {} stopped at {done}",
                        writes.len()
                    ),
                ));
            }
            // One entry at a time: the entries span several commits, and a
            // crash may keep any prefix of those not yet durable.
            for w in &writes[from..done] {
                self.model.commit(std::slice::from_ref(w), Applied::Yes);
            }
            if self.immediate {
                self.model.durable();
                self.events.durable();
            }
            let Some(e) = error else {
                self.trace
                    .event(step, format!("bulk of {n} notes: written"));
                return Ok(());
            };
            for w in &writes[done..] {
                self.model
                    .commit(std::slice::from_ref(w), applied_despite(&e));
            }
            self.trace.event(
                step,
                format!("bulk of {n} notes, attempt {attempt}: stopped at {done}: {e}"),
            );
            if !faulted(&e) {
                return Err(fail(step, format!("a bulk write of notes failed: {e}")));
            }
            from = done;
        }
        Ok(())
    }

    /// A read-only transaction: an actor's documents paged with cursors in
    /// either direction, a byte-prefix scan of them, and snapshot reads,
    /// each compared with the model.
    fn reader<E: Target>(
        &mut self,
        store: &Store<Faulty<E>>,
        step: usize,
    ) -> Result<(), Violation> {
        let actor = self.rng.below(ACTORS);
        let reverse = self.rng.chance(0.5);
        let size = 1 + usize::try_from(self.rng.below(4)).unwrap_or(0);
        let mut tx = store.begin();
        let now = tx.now_ms();
        let high = self.clock_high.max(now);
        let mut paged: Vec<(u64, Vec<u8>)> = Vec::new();
        let whole = if reverse {
            docs_of(actor).reverse()
        } else {
            docs_of(actor)
        };
        let mut next = Some(whole.clone().limit(size));
        while let Some(scan) = next {
            let page = match tx.scan::<Doc>(&scan) {
                Ok(page) => page,
                Err(e) if faulted(&e) => return Ok(()),
                Err(e) => {
                    return Err(fail(
                        step,
                        format!("paging documents in a transaction: {e}"),
                    ));
                }
            };
            next = page.next(&scan);
            paged.extend(page.items.into_iter().map(|(k, v)| (k.id, v)));
            if paged.len() > usize::try_from(DOCS).unwrap_or(0) {
                return Err(fail(step, "paging documents never ends".to_owned()));
            }
        }
        if reverse {
            paged.reverse();
        }
        // A byte prefix that is not a tuple boundary: the packed
        // `(ACTOR, actor)` then the string code and "d".
        let mut prefix = tuple::pack(&(ACTOR, actor));
        prefix.extend_from_slice(&[0x02, b'd']);
        let by_prefix = match tx.scan::<Doc>(&Scan::prefix(&prefix)) {
            Ok(page) => page
                .items
                .into_iter()
                .map(|(k, v)| (k.id, v))
                .collect::<Vec<_>>(),
            Err(e) if faulted(&e) => return Ok(()),
            Err(e) => return Err(fail(step, format!("a byte-prefix scan: {e}"))),
        };
        if by_prefix != paged {
            return Err(fail(
                step,
                format!(
                    "actor {actor}'s documents: paged ({}, pages of {size}) {:?}, by byte prefix {:?}",
                    if reverse { "reverse" } else { "forward" },
                    paged.iter().map(|(id, _)| id).collect::<Vec<_>>(),
                    by_prefix.iter().map(|(id, _)| id).collect::<Vec<_>>()
                ),
            ));
        }
        for id in 0..DOCS {
            self.checks += 1;
            let listed = paged.iter().find(|(i, _)| *i == id).map(|(_, v)| v.clone());
            let seen = if self.rng.chance(0.5) {
                match tx.snapshot_get(&Doc { actor, id }) {
                    Ok(v) if v != listed => {
                        return Err(fail(
                            step,
                            format!(
                                "doc {actor}/{id}: the scan and a snapshot read of one transaction disagree"
                            ),
                        ));
                    }
                    Ok(v) => v,
                    Err(e) if faulted(&e) => return Ok(()),
                    Err(e) => return Err(fail(step, format!("a snapshot read: {e}"))),
                }
            } else {
                listed
            };
            self.model
                .observe(&Slot::Doc(actor, id), &Seen::Value(seen), now, high)
                .map_err(|why| fail(step, format!("in a read-only transaction: {why}")))?;
        }
        match tx.commit() {
            Ok(None) => Ok(()),
            Ok(Some(info)) => Err(fail(
                step,
                format!(
                    "a read-only transaction committed at version {}",
                    info.version
                ),
            )),
            Err(e) if faulted(&e) => Ok(()),
            Err(e) => Err(fail(
                step,
                format!("committing a read-only transaction: {e}"),
            )),
        }
    }

    /// A commit at or just over a limit: refused exactly when over, with
    /// the engine untouched.
    fn pressure<E: Target>(
        &mut self,
        store: &Store<Faulty<E>>,
        step: usize,
    ) -> Result<(), Violation> {
        let actor = self.rng.below(ACTORS);
        let excess = self.rng.below(3); // 0, 1 or 2 over the edge, minus one
        let kind = self.rng.below(2);
        let before = state(store.engine().inner()).map_err(|why| fail(step, why))?;
        // Entries (max - 1, max, max + 1 puts of tiny pads), or key length
        // (max - 1, max, max + 1).
        let rec = Rec::default();
        let r = if kind == 0 {
            {
                let n = LIMITS.max_batch_entries - 1 + usize::try_from(excess).unwrap_or(0);
                store.transact(|tx| {
                    rec.start();
                    for i in 0..n {
                        let name = format!("e{i}");
                        tx.put(
                            &Pad {
                                actor,
                                name: name.clone(),
                            },
                            &Vec::new(),
                        )?;
                        rec.put(Slot::Pad(actor, name), &[]);
                    }
                    Ok::<_, StoreError>(())
                })
            }
        } else {
            {
                let base = Pad {
                    actor,
                    name: String::new(),
                }
                .pack_len();
                let name_len = (LIMITS.max_key_bytes - 1 + usize::try_from(excess).unwrap_or(0))
                    .saturating_sub(base);
                store.transact(|tx| {
                    rec.start();
                    let name = "k".repeat(name_len);
                    tx.put(
                        &Pad {
                            actor,
                            name: name.clone(),
                        },
                        &Vec::new(),
                    )?;
                    rec.put(Slot::Pad(actor, name), &[]);
                    Ok::<_, StoreError>(())
                })
            }
        };
        let over = excess == 2;
        match r {
            Err(StoreError::Limit { source: l, .. }) if over => {
                self.checks += 1;
                let after = state(store.engine().inner()).map_err(|why| fail(step, why))?;
                if let Some(diff) = crate::run::first_difference(&after, &before) {
                    return Err(fail(
                        step,
                        format!("a commit refused by {l} changed the engine: {diff}"),
                    ));
                }
                self.trace
                    .event(step, format!("pressure {kind}: refused ({l})"));
                Ok(())
            }
            Err(StoreError::Limit { source: l, .. }) => Err(fail(
                step,
                format!("a commit within the limits was refused: {l}"),
            )),
            Ok(()) if over => Err(fail(
                step,
                format!("a commit over the limit (kind {kind}) was accepted"),
            )),
            r => {
                self.settle(
                    store,
                    step,
                    &format!("pressure {kind} at the limit"),
                    r,
                    &rec.take(),
                )?;
                Ok(())
            }
        }
    }

    fn sweep<E: Target>(&mut self, store: &Store<Faulty<E>>, step: usize) -> Result<(), Violation> {
        let r = store.sweep_expired(Some(1 + self.rng.below(3)));
        match r {
            Ok(report) => {
                self.commits += report.commits;
                self.trace.event(
                    step,
                    format!(
                        "sweep: {} removed, {} stale, {} commits",
                        report.removed, report.stale, report.commits
                    ),
                );
                Ok(())
            }
            Err(e) if faulted(&e) => {
                self.trace.event(step, format!("sweep: {e}"));
                Ok(())
            }
            Err(e) => Err(fail(step, format!("sweep failed: {e}"))),
        }
    }
}

/// The range of an actor's documents.
fn docs_of(actor: u64) -> Scan {
    Scan::range_of(KeyRange::tuple_prefix(&tuple::pack(&(ACTOR, actor, "doc"))))
}

/// The range of a group's members.
fn members_of(group: u64) -> Scan {
    Scan::range_of(KeyRange::tuple_prefix(&tuple::pack(&(GROUP, group))))
}

/// Adds member `id` to `group` if the group has fewer than
/// [`MAX_MEMBERS`]; returns whether it did.
fn join<E: Engine>(tx: &mut Tx<'_, E>, rec: &Rec, group: u64, id: u64) -> Result<bool, StoreError> {
    if tx.scan::<Member>(&members_of(group))?.items.len() >= MAX_MEMBERS {
        return Ok(false);
    }
    tx.put(&Member { group, id }, &Vec::new())?;
    rec.put(Slot::Member(group, id), &[]);
    Ok(true)
}

/// Moves `amount` from one account to another: two reads, two writes.
/// Transfer `n`: `amount` from account `from` to `to`, counted once in
/// its [`Transfer`] counter.
fn move_money<E: Engine>(
    tx: &mut Tx<'_, E>,
    rec: &Rec,
    n: u64,
    (from, to, amount): (u64, u64, i64),
) -> Result<(), StoreError> {
    let a = balance(tx, from)?;
    let b = balance(tx, to)?;
    for (id, value) in [(from, a - amount), (to, b + amount)] {
        let bytes = value.to_be_bytes().to_vec();
        tx.put(&Account { id }, &bytes)?;
        rec.put(Slot::Account(id), &bytes);
    }
    tx.add(&Transfer { n }, 1)?;
    rec.write(Slot::Applied(n), Write::Add(1));
    Ok(())
}

fn balance<E: Engine>(tx: &mut Tx<'_, E>, id: u64) -> Result<i64, StoreError> {
    Ok(tx.get(&Account { id })?.map_or(START_BALANCE, |b| {
        i64::from_be_bytes(b.try_into().unwrap_or([0; 8]))
    }))
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
    let mut rng = SeededRng::new(options.seed ^ 0x5709_E000_0000_0000);
    let config = FaultConfig::swarm(&mut rng, &options.faults);
    let fault_seed = rng.next_u64();
    let store_options = crate::run::plant_store(self::options(&mut rng), options);
    let mut run = StoreRun {
        clock: Arc::new(ManualClock::new(1_700_000_000_000)),
        trace: Trace::new(),
        commits: 0,
        checks: 0,
        seq: 0,
        model: Model::default(),
        events: Events::default(),
        immediate: store_options.durability == strata_engine::Durability::Immediate,
        clock_high: 0,
        rng,
    };
    run.trace.event(
        0,
        format!(
            "store seed {} faults {config:?} durability {:?}",
            options.seed, store_options.durability
        ),
    );
    let engine = FaultyEngine::new(E::fresh(specs(&store_options)), config, fault_seed);
    let mut store = Some(run.open(engine, &store_options));
    let mut violation = None;
    for step in 1..=options.ops {
        let Some(s) = store.take() else { break };
        let crash = s.engine().is_stuck()
            || (config.p(FaultClass::Crash) > 0.0 && run.rng.chance(config.p(FaultClass::Crash)));
        let (next, outcome) = if crash {
            let e = s.into_engine().crash_restart(&mut run.rng);
            run.trace.event(step, "crash and reopen".to_owned());
            // Commits not yet durable may be lost.
            run.model.crash();
            run.events.crash();
            let s = run.open(e, &store_options);
            let outcome = run.check(&s, step, "after a crash");
            (s, outcome)
        } else {
            if config.p(FaultClass::Clock) > 0.0 && run.rng.chance(config.p(FaultClass::Clock)) {
                let jump = run.rng.below(10_000);
                if run.rng.chance(0.3) {
                    run.clock.set(run.clock.now_ms().saturating_sub(jump));
                } else {
                    run.clock.advance(jump);
                }
                s.engine().record(FaultClass::Clock);
            } else {
                run.clock.advance(run.rng.below(100));
            }
            run.clock_high = run.clock_high.max(run.clock.now_ms());
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
    run.trace.report(
        "store",
        options.seed,
        (run.commits, run.checks),
        faults,
        violation,
    )
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
