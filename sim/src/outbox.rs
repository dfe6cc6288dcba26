//! The outbox workload: producers commit data with outbox entries (now and
//! then two producers interleaved), workers of two consumers poll and run
//! handlers that fail at random, acknowledging in the handler's own
//! transaction; worker take-overs (a stale worker's acknowledgement must be
//! refused), trimming, syncs and crashes, on a faulty engine.
//!
//! The ledger oracle:
//!
//! - nothing is delivered beyond the engine's durable version, and nothing
//!   that was never pushed (a refused or failed commit leaves no entry);
//! - per consumer, first deliveries of one ordering key come in commit
//!   (position) order, entries without a key in commit order among
//!   themselves;
//! - what a failed entry holds back: while it waits for its retry (the
//!   time `fail` returned), no later entry of its ordering key is
//!   delivered (nor itself); and it holds back nothing else: a poll that
//!   returns fewer entries than asked includes every entry this consumer
//!   was handed before and surely did not finish, unless a failed entry of
//!   its key (it included) may be waiting;
//! - finished stays finished: an entry whose acknowledgement or dead
//!   letter is durable is never delivered to that consumer again;
//! - after a quiet phase that drains every consumer without faults, every
//!   entry of a commit that surely became durable was handled exactly once
//!   by every consumer, or dead-lettered for it; every entry that landed at
//!   all likewise; the handler's effect (a counter added in the
//!   acknowledging transaction) is exactly 1 for each handled entry,
//!   whatever crashes and unknown outcomes happened: exactly once for
//!   effects in the same store.

use std::collections::{BTreeMap, BTreeSet};

use strata_codec::Limits;
use strata_engine::{Clock, Engine, Rng, SeededRng, Snapshot};
use strata_keys::tuple_key;
use strata_outbox::{
    Delivery, Failed, Lease, Outbox, OutboxConfig, OutboxError, Position, Start, Topic,
};
use strata_store::{Store, StoreError, StoreOptions, Tx};

use crate::faults::FaultyEngine;
use crate::run::{Frame, RunOptions, SeedReport, Violation, fail};
use crate::store::{Applied, applied_despite};
use crate::targets::Target;

pub(crate) const TOPIC: &str = "jobs";
pub(crate) const CONSUMERS: [&str; 2] = ["a", "b"];
const KEYS: u64 = 3;

/// A handler's effect: how many times consumer `c` handled entry `seq`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Handled {
    pub(crate) c: u64,
    pub(crate) seq: u64,
}
/// The data a producer writes with its entry.
#[derive(Debug, Clone, PartialEq)]
struct Job {
    seq: u64,
}
tuple_key! {
    Handled -> i64 = (21, {c}, {seq});
    Job -> Vec<u8> = (20, {seq});
}

/// What is known of a pushed entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Known {
    /// Its commit is acknowledged and durable.
    Certain,
    /// Acknowledged, not yet durable: a crash may lose it.
    Pending,
    /// Unknown outcome, or lost in a crash perhaps: there or not.
    Maybe,
}

type Faulty<E> = FaultyEngine<E>;

/// An ordering key, `None` for entries pushed without one.
type OrderingKey = Option<Vec<u8>>;
/// Failed entries, per entry: its key, position and retry time.
type Failures = BTreeMap<u64, (OrderingKey, Position, u64)>;
/// Entries handed out and not finished, per entry: its key and position.
type Unfinished = BTreeMap<u64, (OrderingKey, Position)>;

pub(crate) struct OutboxRun {
    /// The seed's draws, clock, trace and counts.
    pub(crate) frame: Frame,
    next_seq: u64,
    immediate: bool,
    pub(crate) config: OutboxConfig,
    /// Every entry pushed by a commit not refused: its knowledge and key.
    pub(crate) pushed: BTreeMap<u64, (Known, Option<Vec<u8>>)>,
    /// Per consumer: entries delivered at least once.
    delivered: [BTreeSet<u64>; 2],
    /// Per consumer and key: the position of the latest first delivery.
    first: [BTreeMap<Option<Vec<u8>>, Position>; 2],
    /// Per consumer: the worker generation (its holder name).
    worker: [u64; 2],
    /// Per consumer: the lease its current worker took, renewed by it.
    leases: [Option<Lease>; 2],
    /// Per consumer: failed entries surely waiting for their retry: entry
    /// to its key, position and retry time.
    waiting: [Failures; 2],
    /// Per consumer: failed entries that may be waiting (a crash may have
    /// kept or lost the failure, or its outcome is unknown): the same,
    /// with `u64::MAX` for an unknown retry time.
    maybe_waiting: [Failures; 2],
    /// Per consumer: entries delivered and surely not finished since.
    open: [Unfinished; 2],
    /// Per consumer: entries this run finished (acknowledged or
    /// dead-lettered) since the last crash, with the finishing commit's
    /// version: finished for good once that version is durable.
    finishing: [BTreeMap<u64, u64>; 2],
    /// Per consumer: entries whose finishing commit is durable. Terminal:
    /// never delivered to that consumer again.
    finished: [BTreeSet<u64>; 2],
}

/// The lease `held` renewed, or a new one for `holder` when there is none
/// or it was lost (taken over, released, rolled back by a crash): how a
/// worker keeps its consumer.
pub(crate) fn hold<E: strata_engine::Engine>(
    outbox: &Outbox<'_, E>,
    held: &mut Option<Lease>,
    topic: &str,
    consumer: &str,
    holder: &str,
) -> Result<Lease, OutboxError> {
    if let Some(l) = held.as_ref() {
        match outbox.renew(l) {
            Ok(l) => {
                *held = Some(l.clone());
                return Ok(l);
            }
            Err(OutboxError::StaleLease { .. }) => *held = None,
            Err(e) => return Err(e),
        }
    }
    let l = outbox.acquire(topic, consumer, holder)?;
    *held = Some(l.clone());
    Ok(l)
}

fn options(rng: &mut SeededRng) -> StoreOptions {
    options_with(
        rng,
        Limits {
            max_key_bytes: 128,
            max_value_bytes: 256,
            max_batch_entries: 12,
            max_batch_bytes: 8_192,
            quota_bytes: 1 << 30,
        },
    )
}

/// Store options with the outbox's spaces declared, `limits`, buffered
/// durability in half the seeds, and short retries: for the workloads on
/// the outbox.
pub(crate) fn options_with(rng: &mut SeededRng, limits: Limits) -> StoreOptions {
    let mut o = Outbox::<strata_engine::MemEngine>::declare(StoreOptions::new(limits));
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

pub(crate) fn faulted(e: &OutboxError) -> bool {
    match e {
        OutboxError::Store(s) => crate::store::faulted(s),
        _ => false,
    }
}

pub(crate) fn topic() -> Topic<Vec<u8>> {
    Topic::new(TOPIC).unwrap_or_else(|e| unreachable!("{e}"))
}

impl OutboxRun {
    pub(crate) fn outbox<'s, E: strata_engine::Engine>(
        &mut self,
        store: &'s Store<E>,
    ) -> Outbox<'s, E> {
        Outbox::new(
            store,
            self.config,
            self.frame.clock.clone(),
            Box::new(SeededRng::new(self.frame.rng.next_u64())),
        )
        .unwrap_or_else(|e| unreachable!("the outbox's spaces are declared: {e}"))
    }

    pub(crate) fn open<E: Target>(
        &mut self,
        engine: Faulty<E>,
        options: &StoreOptions,
    ) -> Store<Faulty<E>> {
        Store::open_with(
            engine,
            options.clone(),
            self.frame.clock.clone(),
            Box::new(SeededRng::new(self.frame.rng.next_u64())),
        )
        .unwrap_or_else(|e| unreachable!("the store's keyspaces are declared: {e}"))
    }

    /// Records the outcome of a producing commit.
    fn record(&mut self, seqs: &[(u64, Option<Vec<u8>>)], applied: Applied) {
        let known = match applied {
            Applied::Yes if self.immediate => Known::Certain,
            Applied::Yes => Known::Pending,
            Applied::Maybe => Known::Maybe,
            Applied::No => return,
        };
        for (seq, key) in seqs {
            self.pushed.insert(*seq, (known, key.clone()));
        }
        if applied == Applied::Yes && self.immediate {
            self.durable();
        }
    }

    pub(crate) fn durable(&mut self) {
        for (k, _) in self.pushed.values_mut() {
            if *k == Known::Pending {
                *k = Known::Certain;
            }
        }
    }

    pub(crate) fn crash(&mut self) {
        for (k, _) in self.pushed.values_mut() {
            if *k == Known::Pending {
                *k = Known::Maybe;
            }
        }
        // A failure's commit may be lost with the crash, or kept; so may
        // a finishing commit not known durable (and its version be taken
        // by another commit after the restart).
        for c in 0..CONSUMERS.len() {
            let waiting = std::mem::take(&mut self.waiting[c]);
            self.maybe_waiting[c].extend(waiting);
            self.finishing[c].clear();
        }
    }

    /// Whether entry `seq` of `key` at `pos` may be held back at `now` by a
    /// failed entry (itself, or an earlier one of its key) for consumer `c`.
    fn may_be_held(&self, c: usize, seq: u64, key: Option<&[u8]>, pos: Position, now: u64) -> bool {
        self.waiting[c]
            .iter()
            .chain(&self.maybe_waiting[c])
            .any(|(f, (fkey, fpos, at))| {
                *at > now && (*f == seq || (fkey.as_deref() == key && *fpos < pos))
            })
    }

    fn new_entry(&mut self) -> (u64, Option<Vec<u8>>) {
        self.next_seq += 1;
        let key = (!self.frame.rng.chance(0.3))
            .then(|| vec![b'k', u8::try_from(self.frame.rng.below(KEYS)).unwrap_or(0)]);
        (self.next_seq, key)
    }

    fn push<E: strata_engine::Engine>(
        outbox: &Outbox<'_, E>,
        tx: &mut Tx<'_, E>,
        seq: u64,
        key: Option<&[u8]>,
    ) -> Result<(), OutboxError> {
        tx.put(&Job { seq }, &seq.to_be_bytes().to_vec())?;
        let entry = seq.to_be_bytes().to_vec();
        match key {
            Some(k) => outbox.push_keyed(tx, &topic(), k, &entry),
            None => outbox.push(tx, &topic(), &entry),
        }
    }

    /// One commit of one to three entries, or two producers interleaved.
    pub(crate) fn produce<E: Target>(
        &mut self,
        store: &Store<Faulty<E>>,
        step: usize,
    ) -> Result<(), Violation> {
        let outbox = self.outbox(store);
        if self.frame.rng.chance(0.3) {
            // Two producers: both begin, both push, they commit in a random
            // order.
            let entries = [self.new_entry(), self.new_entry()];
            let mut txs = Vec::new();
            for (seq, key) in &entries {
                let mut tx = store.begin();
                let r = Self::push(&outbox, &mut tx, *seq, key.as_deref());
                txs.push((tx, r, (*seq, key.clone())));
            }
            if self.frame.rng.chance(0.5) {
                txs.reverse();
            }
            for (tx, pushed, entry) in txs {
                let r = match pushed {
                    Ok(()) => tx.commit().map(|_| ()).map_err(OutboxError::from),
                    Err(e) => Err(e),
                };
                self.settle(step, &format!("producer of {}", entry.0), &r, &[entry])?;
            }
            return Ok(());
        }
        let n = 1 + self.frame.rng.below(3);
        let entries: Vec<_> = (0..n).map(|_| self.new_entry()).collect();
        let r = store.transact(|tx| {
            for (seq, key) in &entries {
                Self::push(&outbox, tx, *seq, key.as_deref())?;
            }
            Ok::<_, OutboxError>(())
        });
        self.settle(step, &format!("push of {n}"), &r, &entries)
    }

    fn settle(
        &mut self,
        step: usize,
        what: &str,
        r: &Result<(), OutboxError>,
        entries: &[(u64, Option<Vec<u8>>)],
    ) -> Result<(), Violation> {
        let applied = match r {
            Ok(()) => Applied::Yes,
            Err(OutboxError::Store(e)) => applied_despite(e),
            Err(_) => Applied::No,
        };
        self.record(entries, applied);
        match r {
            Ok(()) => {
                self.frame.commits += 1;
                self.frame.trace.event(step, format!("{what}: ok"));
                Ok(())
            }
            Err(e) if faulted(e) || matches!(e, OutboxError::Store(s) if s.is_conflict()) => {
                self.frame.trace.event(step, format!("{what}: {e}"));
                Ok(())
            }
            Err(e) => Err(fail(step, format!("{what} failed: {e}"))),
        }
    }

    /// A worker of consumer `c` polls and handles a batch.
    fn consume<E: Target>(
        &mut self,
        store: &Store<Faulty<E>>,
        step: usize,
        c: usize,
    ) -> Result<(), Violation> {
        let outbox = self.outbox(store);
        let holder = format!("w{}", self.worker[c]);
        let lease = match hold(&outbox, &mut self.leases[c], TOPIC, CONSUMERS[c], &holder) {
            Ok(l) => l,
            Err(e) if faulted(&e) || matches!(e, OutboxError::LeaseHeld { .. }) => {
                self.frame
                    .trace
                    .event(step, format!("{holder} of {}: {e}", CONSUMERS[c]));
                return Ok(());
            }
            Err(e) => return Err(fail(step, format!("acquire: {e}"))),
        };
        let max = 1 + usize::try_from(self.frame.rng.below(6)).unwrap_or(0);
        let batch = match outbox.poll(&lease, &topic(), max) {
            Ok(b) => b,
            Err(e) if faulted(&e) => {
                self.frame.trace.event(step, format!("poll: {e}"));
                return Ok(());
            }
            Err(e) => return Err(fail(step, format!("poll: {e}"))),
        };
        let now = self.frame.clock.now_ms();
        let durable = store.engine().inner().durable_version();
        self.check_batch(step, c, &batch, durable)?;
        if batch.len() < max {
            self.check_nothing_else_held(step, c, &batch, now)?;
        }
        if self.frame.rng.chance(0.2) {
            self.twin(store, &outbox, step, c, &holder, &batch)?;
        }
        let mut failed_keys = BTreeSet::new();
        for d in &batch {
            if failed_keys.contains(&d.ordering_key) {
                continue;
            }
            let seq = seq_of(d);
            if self.frame.rng.chance(0.2) {
                match outbox.fail(&lease, d.position, "handler failed") {
                    Ok(f) => {
                        self.frame
                            .trace
                            .event(step, format!("{} failed {seq}: {f:?}", CONSUMERS[c]));
                        if let Failed::Retry { at_ms, .. } = f {
                            self.waiting[c]
                                .insert(seq, (d.ordering_key.clone(), d.position, at_ms));
                        } else {
                            self.open[c].remove(&seq);
                            // Dead-lettered by the last commit (one thread).
                            self.finishing[c].insert(seq, store.engine().last_version());
                        }
                    }
                    Err(e) if faulted(&e) => {
                        self.frame.trace.event(step, format!("fail: {e}"));
                        self.open[c].remove(&seq);
                        self.maybe_waiting[c]
                            .insert(seq, (d.ordering_key.clone(), d.position, u64::MAX));
                        return Ok(());
                    }
                    Err(e) => return Err(fail(step, format!("fail: {e}"))),
                }
                failed_keys.insert(d.ordering_key.clone());
                continue;
            }
            let r = store.transact_info(|tx| {
                tx.add(&Handled { c: c as u64, seq }, 1)?;
                outbox.ack(tx, &lease, d.position)
            });
            match r {
                Ok(((), info)) => {
                    self.frame.commits += 1;
                    self.open[c].remove(&seq);
                    if let Some(info) = info {
                        self.finishing[c].insert(seq, info.version);
                    }
                    self.frame
                        .trace
                        .event(step, format!("{} handled {seq}", CONSUMERS[c]));
                }
                // Finished already: a retried commit whose first try
                // applied; its writes rolled back, the ledger counts.
                Err(e)
                    if faulted(&e)
                        || matches!(&e, OutboxError::Store(s) if s.is_conflict())
                        || matches!(e, OutboxError::AlreadyFinished(_)) =>
                {
                    // Finished perhaps: no claim on it any more.
                    self.open[c].remove(&seq);
                    self.frame.trace.event(step, format!("ack of {seq}: {e}"));
                    return Ok(());
                }
                Err(e) => return Err(fail(step, format!("ack of {seq}: {e}"))),
            }
        }
        Ok(())
    }

    /// Checks a polled batch: durable, pushed, first deliveries in order.
    fn check_batch(
        &mut self,
        step: usize,
        c: usize,
        batch: &[Delivery<Vec<u8>>],
        durable: u64,
    ) -> Result<(), Violation> {
        let now = self.frame.clock.now_ms();
        // Finishing commits now durable: their entries are finished for good.
        let finishing = std::mem::take(&mut self.finishing[c]);
        for (seq, version) in finishing {
            if version <= durable {
                self.finished[c].insert(seq);
            } else {
                self.finishing[c].insert(seq, version);
            }
        }
        for d in batch {
            self.frame.checks += 1;
            let seq = seq_of(d);
            if self.finished[c].contains(&seq) {
                return Err(fail(
                    step,
                    format!(
                        "consumer {}: entry {seq} at {} delivered again after it was finished (durably)",
                        CONSUMERS[c], d.position
                    ),
                ));
            }
            if let Some((f, (_, fpos, at))) =
                self.waiting[c].iter().find(|(f, (fkey, fpos, at))| {
                    *at > now && (**f == seq || (*fkey == d.ordering_key && *fpos < d.position))
                })
            {
                return Err(fail(
                    step,
                    format!(
                        "consumer {}: entry {seq} at {} delivered at {now} while entry {f} of its key (at {fpos}) waits for its retry at {at}",
                        CONSUMERS[c], d.position
                    ),
                ));
            }
            // Delivered: not waiting any more, and open until finished.
            self.waiting[c].remove(&seq);
            self.maybe_waiting[c].remove(&seq);
            self.open[c].insert(seq, (d.ordering_key.clone(), d.position));
            if d.position.version > durable {
                return Err(fail(
                    step,
                    format!(
                        "entry {seq} delivered at {} beyond the durable version {durable}",
                        d.position
                    ),
                ));
            }
            if !self.pushed.contains_key(&seq) {
                return Err(fail(
                    step,
                    format!("entry {seq} delivered but never pushed by a commit"),
                ));
            }
            if self.delivered[c].insert(seq) {
                let last = self.first[c]
                    .entry(d.ordering_key.clone())
                    .or_insert(d.position);
                if d.position < *last {
                    return Err(fail(
                        step,
                        format!(
                            "consumer {}: entry {seq} first delivered at {} after an entry of its key at {}",
                            CONSUMERS[c], d.position, last
                        ),
                    ));
                }
                *last = d.position;
            }
        }
        Ok(())
    }

    /// A poll that returned fewer than it was asked for: every entry this
    /// consumer was handed before and surely did not finish is in it,
    /// unless a failed entry of its key (it included) may be waiting: a
    /// failed entry holds back its own key and nothing else.
    fn check_nothing_else_held(
        &mut self,
        step: usize,
        c: usize,
        batch: &[Delivery<Vec<u8>>],
        now: u64,
    ) -> Result<(), Violation> {
        let got: BTreeSet<u64> = batch.iter().map(seq_of).collect();
        for (seq, (key, pos)) in &self.open[c] {
            self.frame.checks += 1;
            if got.contains(seq) || self.may_be_held(c, *seq, key.as_deref(), *pos, now) {
                continue;
            }
            return Err(fail(
                step,
                format!(
                    "consumer {}: entry {seq} (key {key:?}, at {pos}) is due and unfinished, but a poll of {} entries left it out",
                    CONSUMERS[c],
                    batch.len()
                ),
            ));
        }
        Ok(())
    }

    /// A second worker under the same holder name (a restart while the
    /// old process still runs) tries to take the consumer and, if it gets
    /// it, handles the batch the first one is about to handle. The ledger
    /// then requires each entry's effect to have committed once.
    fn twin<E: Target>(
        &mut self,
        store: &Store<Faulty<E>>,
        outbox: &Outbox<'_, Faulty<E>>,
        step: usize,
        c: usize,
        holder: &str,
        batch: &[Delivery<Vec<u8>>],
    ) -> Result<(), Violation> {
        let lease = match outbox.acquire(TOPIC, CONSUMERS[c], holder) {
            Ok(l) => l,
            Err(e) if faulted(&e) || matches!(e, OutboxError::LeaseHeld { .. }) => {
                self.frame.checks += 1;
                self.frame
                    .trace
                    .event(step, format!("a second {holder} of {}: {e}", CONSUMERS[c]));
                return Ok(());
            }
            Err(e) => return Err(fail(step, format!("a second {holder}: {e}"))),
        };
        self.frame.trace.event(
            step,
            format!("a second {holder} holds {} too", CONSUMERS[c]),
        );
        for d in batch {
            let seq = seq_of(d);
            let r = store.transact(|tx| {
                tx.add(&Handled { c: c as u64, seq }, 1)?;
                outbox.ack(tx, &lease, d.position)
            });
            self.frame
                .trace
                .event(step, format!("the second {holder} handled {seq}: {r:?}"));
            // Finished, or perhaps (an unknown outcome): no claim either way.
            self.open[c].remove(&seq);
            if r.is_ok() {
                self.frame.commits += 1;
            }
        }
        Ok(())
    }

    /// A worker stalls: the next one takes the consumer over once the lease
    /// runs out, and the stale worker's acknowledgement is refused.
    fn takeover<E: Target>(
        &mut self,
        store: &Store<Faulty<E>>,
        step: usize,
        c: usize,
    ) -> Result<(), Violation> {
        let outbox = self.outbox(store);
        let holder = format!("w{}", self.worker[c]);
        let old = match hold(&outbox, &mut self.leases[c], TOPIC, CONSUMERS[c], &holder) {
            Ok(l) => l,
            Err(e) if faulted(&e) || matches!(e, OutboxError::LeaseHeld { .. }) => return Ok(()),
            Err(e) => return Err(fail(step, format!("acquire: {e}"))),
        };
        self.frame.clock.advance(self.config.lease_ms + 1);
        self.worker[c] += 1;
        let new_holder = format!("w{}", self.worker[c]);
        match outbox.acquire(TOPIC, CONSUMERS[c], &new_holder) {
            Ok(l) if l.token() > old.token() => self.leases[c] = Some(l),
            Ok(l) => {
                return Err(fail(
                    step,
                    format!("take-over token {} not above {}", l.token(), old.token()),
                ));
            }
            Err(e) if faulted(&e) => return Ok(()),
            Err(e) => return Err(fail(step, format!("take-over: {e}"))),
        }
        self.frame
            .trace
            .event(step, format!("{new_holder} took {} over", CONSUMERS[c]));
        self.stale_ack(store, &outbox, step, &old)
    }

    fn stale_ack<E: Target>(
        &mut self,
        store: &Store<Faulty<E>>,
        outbox: &Outbox<'_, Faulty<E>>,
        step: usize,
        old: &Lease,
    ) -> Result<(), Violation> {
        let r = store.transact(|tx| outbox.ack(tx, old, Position::end_of(0)));
        self.frame.checks += 1;
        match r {
            Err(OutboxError::StaleLease { .. }) => Ok(()),
            Err(e) if faulted(&e) => Ok(()),
            other => Err(fail(
                step,
                format!("a stale worker's acknowledgement gave {other:?}"),
            )),
        }
    }

    fn trim<E: Target>(&mut self, store: &Store<Faulty<E>>, step: usize) -> Result<(), Violation> {
        let outbox = self.outbox(store);
        match outbox.trim(TOPIC, 0, Some(2)) {
            Ok(t) => {
                self.frame.commits += t.commits;
                self.frame
                    .trace
                    .event(step, format!("trim: {} entries", t.entries));
                Ok(())
            }
            Err(e) if faulted(&e) || matches!(&e, OutboxError::Store(s) if s.is_conflict()) => {
                Ok(())
            }
            Err(e) => Err(fail(step, format!("trim: {e}"))),
        }
    }

    /// One random step.
    fn step<E: Target>(&mut self, s: &Store<Faulty<E>>, step: usize) -> Result<(), Violation> {
        self.frame.clock.advance(self.frame.rng.below(50));
        match self.frame.rng.below(100) {
            0..=39 => self.produce(s, step),
            40..=79 => {
                let c = usize::try_from(self.frame.rng.below(2)).unwrap_or(0);
                self.consume(s, step, c)
            }
            80..=84 => {
                let c = usize::try_from(self.frame.rng.below(2)).unwrap_or(0);
                self.takeover(s, step, c)
            }
            85..=89 => self.trim(s, step),
            _ => {
                let r = s.engine().sync();
                if r.is_ok() {
                    self.durable();
                }
                self.frame.trace.event(step, format!("sync: {r:?}"));
                Ok(())
            }
        }
    }

    /// The quiet phase: every consumer drained without faults, then the
    /// ledger.
    pub(crate) fn drain_and_check<E: Target>(
        &mut self,
        store: &Store<Faulty<E>>,
        step: usize,
    ) -> Result<(), Violation> {
        let c_store: Store<&E> = Store::open_with(
            store.engine().inner(),
            store.options().clone(),
            self.frame.clock.clone(),
            Box::new(SeededRng::new(0)),
        )
        .unwrap_or_else(|e| unreachable!("{e}"));
        let err = |e: OutboxError| fail(step, format!("the quiet phase failed: {e}"));
        c_store
            .engine()
            .sync()
            .map_err(|e| fail(step, format!("a fault-free sync failed: {e}")))?;
        self.durable();
        self.frame.clock.advance(self.config.lease_ms + 1);
        let outbox = self.outbox(&c_store);
        for (c, name) in CONSUMERS.iter().enumerate() {
            let mut lease = outbox.acquire(TOPIC, name, "drainer").map_err(err)?;
            for _ in 0..10_000 {
                let batch = outbox.poll(&lease, &topic(), 64).map_err(err)?;
                if batch.is_empty() {
                    // Past every backoff, then once more.
                    self.frame.clock.advance(self.config.max_backoff_ms + 1);
                    lease = outbox.renew(&lease).map_err(err)?;
                    if outbox.poll(&lease, &topic(), 64).map_err(err)?.is_empty() {
                        break;
                    }
                    continue;
                }
                self.check_batch(step, c, &batch, c_store.engine().durable_version())?;
                for d in &batch {
                    let seq = seq_of(d);
                    c_store
                        .transact(|tx| {
                            tx.add(&Handled { c: c as u64, seq }, 1)?;
                            outbox.ack(tx, &lease, d.position)
                        })
                        .map_err(err)?;
                }
            }
        }
        self.check_ledger(&c_store, &outbox, step)
    }

    fn check_ledger<E: strata_engine::Engine>(
        &mut self,
        store: &Store<E>,
        outbox: &Outbox<'_, E>,
        step: usize,
    ) -> Result<(), Violation> {
        let read = |e: StoreError| fail(step, format!("a fault-free read failed: {e}"));
        let mut finished: Vec<BTreeSet<u64>> = Vec::new();
        for (c, name) in CONSUMERS.iter().enumerate() {
            let dead: BTreeSet<u64> = outbox
                .dead_letters(TOPIC, name)
                .map_err(|e| fail(step, format!("dead letters: {e}")))?
                .iter()
                .filter_map(|d| strata_codec::decode::<Vec<u8>>(&[], &d.envelope).ok())
                .filter_map(|b| {
                    <[u8; 8]>::try_from(b.as_slice())
                        .ok()
                        .map(u64::from_be_bytes)
                })
                .collect();
            // The handlers' counters, read raw: `(21, c, seq)` -> i64 LE.
            let snap = store.engine().snapshot().map_err(|e| read(e.into()))?;
            let range =
                strata_keys::KeyRange::tuple_prefix(&strata_keys::tuple::pack(&(21, c as u64)));
            let spec = strata_engine::RangeSpec::from(range);
            let rows: Vec<(Vec<u8>, Vec<u8>)> = snap
                .range(store.keyspaces().0, spec)
                .and_then(Iterator::collect)
                .map_err(|e| read(e.into()))?;
            let mut done = BTreeSet::new();
            for (raw_key, raw_value) in &rows {
                let k = <Handled as strata_keys::Key>::unpack(raw_key)
                    .map_err(|e| fail(step, format!("a handled counter's key: {e}")))?;
                let n = <[u8; 8]>::try_from(raw_value.as_slice()).map_or(-1, i64::from_le_bytes);
                self.frame.checks += 1;
                if n != 1 {
                    return Err(fail(
                        step,
                        format!("consumer {name} handled entry {} {n} times", k.seq),
                    ));
                }
                if !self.pushed.contains_key(&k.seq) {
                    return Err(fail(
                        step,
                        format!("consumer {name} handled entry {}, never pushed", k.seq),
                    ));
                }
                if dead.contains(&k.seq) {
                    return Err(fail(
                        step,
                        format!("entry {} both handled and dead-lettered by {name}", k.seq),
                    ));
                }
                done.insert(k.seq);
            }
            done.extend(dead);
            for (seq, (known, _)) in &self.pushed {
                self.frame.checks += 1;
                if *known == Known::Certain && !done.contains(seq) {
                    return Err(fail(
                        step,
                        format!(
                            "entry {seq}, acknowledged and durable, was never handled or dead-lettered by consumer {name}"
                        ),
                    ));
                }
            }
            finished.push(done);
        }
        // An entry that landed (finished by one consumer) was finished by
        // every consumer: none was trimmed or skipped under another.
        for (c, done) in finished.iter().enumerate() {
            for (o, other) in finished.iter().enumerate() {
                if let Some(seq) = done.difference(other).next() {
                    return Err(fail(
                        step,
                        format!(
                            "entry {seq} was finished by consumer {} but never by {}",
                            CONSUMERS[c], CONSUMERS[o]
                        ),
                    ));
                }
            }
        }
        Ok(())
    }
}

pub(crate) fn seq_of(d: &Delivery<Vec<u8>>) -> u64 {
    <[u8; 8]>::try_from(d.entry.as_slice()).map_or(u64::MAX, u64::from_be_bytes)
}

/// Small backoffs and leases, so that retries and take-overs happen often.
pub(crate) fn outbox_config() -> OutboxConfig {
    let mut c = OutboxConfig::default();
    c.max_attempts = 3;
    c.base_backoff_ms = 10;
    c.max_backoff_ms = 200;
    c.lease_ms = 1_000;
    c.sync_interval_ms = 20;
    c
}

impl OutboxRun {
    /// The run of `options.seed` (its draws salted with `salt`): its store
    /// options, and its store, with the consumers registered (without
    /// faults).
    pub(crate) fn start<E: Target>(
        options: &RunOptions,
        salt: u64,
        workload: &str,
    ) -> (Self, StoreOptions, Store<Faulty<E>>, Option<Violation>) {
        let mut frame = Frame::new(options, salt, 1_700_000_000_000);
        let config = frame.faults;
        let store_options = self::options(&mut frame.rng);
        let mut run = OutboxRun {
            next_seq: 0,
            immediate: store_options.durability == strata_engine::Durability::Immediate,
            config: outbox_config(),
            pushed: BTreeMap::new(),
            delivered: [BTreeSet::new(), BTreeSet::new()],
            first: [BTreeMap::new(), BTreeMap::new()],
            waiting: [BTreeMap::new(), BTreeMap::new()],
            maybe_waiting: [BTreeMap::new(), BTreeMap::new()],
            open: [BTreeMap::new(), BTreeMap::new()],
            finishing: [BTreeMap::new(), BTreeMap::new()],
            finished: [BTreeSet::new(), BTreeSet::new()],
            worker: [0, 0],
            leases: [None, None],
            frame,
        };
        run.frame.trace.event(
            0,
            format!(
                "{workload} seed {} faults {config:?} durability {:?}",
                options.seed, store_options.durability
            ),
        );
        let engine = run.frame.engine::<E>(store_options.keyspace_specs());
        let store = run.open(engine, &store_options);
        // Consumers are registered before the workload, without faults.
        let mut violation = None;
        let quiet =
            crate::run::quiet_store(store.engine(), &store_options, run.frame.clock.clone());
        for name in CONSUMERS {
            if let Err(e) = run.outbox(&quiet).register(TOPIC, name, Start::Beginning) {
                violation = Some(fail(
                    0,
                    format!("registering {name} without faults failed: {e}"),
                ));
            }
        }
        drop(quiet);
        (run, store_options, store, violation)
    }
}

/// Runs the outbox workload of one seed on engine `E`.
pub fn run_outbox_seed_on<E: Target>(options: &RunOptions) -> SeedReport {
    let (mut run, store_options, store, mut violation) =
        OutboxRun::start::<E>(options, 0x0B0C_0000_0000_0000, "outbox");
    let mut store = Some(store);
    for step in 1..=options.ops {
        let Some(s) = store.take() else { break };
        let crash = run.frame.crash_due(s.engine().is_stuck());
        if crash {
            let e = s.into_engine().crash_restart(&mut run.frame.rng);
            run.frame.trace.event(step, "crash and reopen".to_owned());
            run.crash();
            store = Some(run.open(e, &store_options));
            continue;
        }
        let outcome = run.step(&s, step);
        store = Some(s);
        if let Err(v) = outcome {
            violation = Some(v);
            break;
        }
    }
    if violation.is_none()
        && let Some(s) = &store
        && let Err(v) = run.drain_and_check(s, options.ops)
    {
        violation = Some(v);
    }
    let faults = store.map(|s| s.engine().counters()).unwrap_or_default();
    run.frame.report("outbox", options.seed, faults, violation)
}
