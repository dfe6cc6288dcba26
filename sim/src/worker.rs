//! The worker workload: the outbox's own worker loop
//! ([`WorkerLoop`], what `Worker` runs on its thread), two copies of it
//! for each of two consumers under one holder name (a duplicate
//! deployment, or a restart while the old process still runs), turned in
//! a random order between producers, stalls past the lease, workers that
//! stop or die, syncs and crashes, on a faulty engine. Its handlers fail at
//! random and add 1 to the entry's counter in the acknowledging
//! transaction; the workers trim what both consumers passed.
//!
//! The oracle:
//!
//! - no entry's effect commits twice: after every turn, each entry handed
//!   to a handler has a counter of at most 1 (read without faults);
//! - nothing is handed to a handler beyond the engine's durable version,
//!   nor an entry no commit pushed;
//! - a turn that asks to wait for a commit made none after the one it
//!   names (else the wait ends at once: a worker that never sleeps);
//! - per consumer and ordering key, effects commit in the entries' commit
//!   order: each keyed effect takes the next serial number of its key (a
//!   counter read in the same transaction), and at the end the serials
//!   rise with the positions (an entry handled only in the quiet phase
//!   counts as last);
//! - after the quiet phase of the outbox workload (every consumer drained
//!   without faults), its ledger: every entry of a commit that surely
//!   became durable handled exactly once by each consumer or
//!   dead-lettered for it, every entry that landed likewise, each counter
//!   exactly 1.

use std::collections::BTreeMap;
use std::time::Duration;

use strata_engine::{Engine, ManualClock, Rng, SeededRng, Snapshot};
use strata_keys::{Key, tuple_key};
use strata_outbox::{Delivery, HandlerError, Position, Turn, WorkerConfig, WorkerLoop};
use strata_store::{Store, Tx};

use crate::faults::FaultyEngine;
use crate::outbox::{CONSUMERS, Handled, OutboxRun, faulted, seq_of, topic};
use crate::run::{RunOptions, SeedReport, Violation, fail};
use crate::targets::Target;

/// Consumer `c`'s count of the effects of ordering key `k`.
#[derive(Debug, Clone, PartialEq)]
struct Serial {
    c: u64,
    k: u64,
}
/// The serial number of the effect of entry `seq` among its key's, for
/// consumer `c`.
#[derive(Debug, Clone, PartialEq)]
struct HandledAt {
    c: u64,
    seq: u64,
}
tuple_key! {
    Serial -> i64 = (23, {c}, {k});
    HandledAt -> i64 = (24, {c}, {seq});
}

/// The outbox workload's run and ledger, and what the workers were handed.
struct WorkerRun {
    run: OutboxRun,
    /// Per consumer: the position of every entry handed to a handler.
    handed_at: [BTreeMap<u64, Position>; 2],
}

/// Per consumer, its two worker loops (`None`: not running).
type Loops<'s, E> = [[Option<WorkerLoop<'s, FaultyEngine<E>, Vec<u8>>>; 2]; 2];

/// The workers' settings: one holder name for every copy, small batches,
/// short waits, and a trim of whatever both consumers passed.
fn worker_config(run: &OutboxRun) -> WorkerConfig {
    let mut w = WorkerConfig::new("worker");
    w.batch = 4;
    w.idle_wait = Duration::from_millis(50);
    w.outbox = run.config;
    w.retention_ms = Some(0);
    w.trim_every_ms = 100;
    w
}

/// An entry handed to a handler: its number, its position's version and
/// the durable version when it was handed.
struct Handed {
    seq: u64,
    position: Position,
    durable: u64,
}

/// A handler of consumer `c`: notes the delivery, takes a while one time
/// in ten (the clock moved by up to half a lease: a batch that renews its
/// lease, or loses it), fails one time in five, else adds 1 to the
/// entry's counter and, for a keyed entry, takes the next serial number
/// of its key.
fn effect<E: Engine>(
    tx: &mut Tx<'_, E>,
    (c, d): (usize, &Delivery<Vec<u8>>),
    inner: &impl Engine,
    handed: &mut Vec<Handed>,
    (draws, clock, lease_ms): (&mut SeededRng, &ManualClock, u64),
) -> Result<(), HandlerError> {
    let seq = seq_of(d);
    handed.push(Handed {
        seq,
        position: d.position,
        durable: inner.durable_version(),
    });
    if draws.chance(0.1) {
        clock.advance(draws.below(lease_ms / 2 + 1));
    }
    if draws.chance(0.2) {
        return Err("handler failed".into());
    }
    tx.add(&Handled { c: c as u64, seq }, 1)?;
    if let Some(&k) = d.ordering_key.as_ref().and_then(|k| k.get(1)) {
        let serial = Serial {
            c: c as u64,
            k: u64::from(k),
        };
        let n = tx.increment(&serial, 1)?;
        tx.add(&HandledAt { c: c as u64, seq }, n)?;
    }
    Ok(())
}

impl WorkerRun {
    /// One random step of the worker workload.
    fn worker_step<'s, E: Target>(
        &mut self,
        store: &'s Store<FaultyEngine<E>>,
        loops: &mut Loops<'s, E>,
        step: usize,
    ) -> Result<(), Violation> {
        self.run.frame.clock.advance(self.run.frame.rng.below(50));
        let c = usize::try_from(self.run.frame.rng.below(2)).unwrap_or(0);
        let i = usize::try_from(self.run.frame.rng.below(2)).unwrap_or(0);
        match self.run.frame.rng.below(100) {
            0..=34 => self.run.produce(store, step),
            35..=79 => self.turn(store, &mut loops[c], step, c, i),
            80..=84 => {
                // A stall past the lease: the next turn of another copy
                // takes the consumer over; this one's lease is stale.
                self.run.frame.clock.advance(self.run.config.lease_ms + 1);
                self.run
                    .frame
                    .trace
                    .event(step, "stall past the lease".to_owned());
                Ok(())
            }
            85..=89 => {
                if let Some(w) = loops[c][i].take() {
                    // Stopped (its lease given up), or its process died
                    // (the lease left to expire).
                    if self.run.frame.rng.chance(0.5) {
                        let report = w.finish();
                        self.run
                            .frame
                            .trace
                            .event(step, format!("worker {c}.{i} stopped: {report:?}"));
                    } else {
                        self.run
                            .frame
                            .trace
                            .event(step, format!("worker {c}.{i} died"));
                    }
                }
                Ok(())
            }
            _ => {
                let r = store.engine().sync();
                if r.is_ok() {
                    self.run.durable();
                }
                self.run.frame.trace.event(step, format!("sync: {r:?}"));
                Ok(())
            }
        }
    }

    /// A turn of worker `i` of consumer `c` (started if not running).
    /// Now and then, while its handler holds an entry, the other copy (if
    /// running) takes a turn of its own: a duplicate worker racing this
    /// one for the same entries.
    fn turn<'s, E: Target>(
        &mut self,
        store: &'s Store<FaultyEngine<E>>,
        pair: &mut [Option<WorkerLoop<'s, FaultyEngine<E>, Vec<u8>>>; 2],
        step: usize,
        c: usize,
        i: usize,
    ) -> Result<(), Violation> {
        if pair[i].is_none() {
            let started = WorkerLoop::new(
                store,
                self.run.frame.clock.clone(),
                Box::new(SeededRng::new(self.run.frame.rng.next_u64())),
                topic(),
                CONSUMERS[c],
                worker_config(&self.run),
            );
            pair[i] = Some(started.map_err(|e| fail(step, format!("a worker loop: {e}")))?);
        }
        let [first, second] = pair;
        let (mine, twin) = if i == 0 {
            (first, second)
        } else {
            (second, first)
        };
        let Some(work) = mine.as_mut() else {
            unreachable!("started above")
        };
        let (mut handed, mut twin_handed) = (Vec::new(), Vec::new());
        let mut fails = SeededRng::new(self.run.frame.rng.next_u64());
        let mut twin_fails = SeededRng::new(self.run.frame.rng.next_u64());
        let mut racing = SeededRng::new(self.run.frame.rng.next_u64());
        let mut twin_turn = None;
        let never = std::sync::atomic::AtomicBool::new(false);
        let inner = store.engine().inner();
        let (clock, lease_ms) = (&*self.run.frame.clock, self.run.config.lease_ms);
        let mut handler =
            |tx: &mut Tx<'_, FaultyEngine<E>>, d: &Delivery<Vec<u8>>| -> Result<(), HandlerError> {
                if twin_turn.is_none()
                    && racing.chance(0.2)
                    && let Some(other) = twin.as_mut()
                {
                    let mut twin_handler = |tx: &mut Tx<'_, FaultyEngine<E>>,
                                            d: &Delivery<Vec<u8>>|
                     -> Result<(), HandlerError> {
                        effect(
                            tx,
                            (c, d),
                            inner,
                            &mut twin_handed,
                            (&mut twin_fails, clock, lease_ms),
                        )
                    };
                    twin_turn = Some(other.turn(&mut twin_handler, &never));
                }
                effect(
                    tx,
                    (c, d),
                    inner,
                    &mut handed,
                    (&mut fails, clock, lease_ms),
                )
            };
        let turn = work.turn(&mut handler, &never);
        // A wait is for others' commits: one the turn made itself would
        // end it at once (a worker that never sleeps).
        if let Ok(Turn::Wait { seen, .. }) = turn
            && twin_turn.is_none()
        {
            self.run.frame.checks += 1;
            let last = store.last_commit_seen();
            if last != seen {
                return Err(fail(
                    step,
                    format!(
                        "worker {c}.{i} waits for a commit after {seen}, but its own turn committed up to {last}: the wait ends at once"
                    ),
                ));
            }
        }
        self.settle_turn(step, (c, i), turn, mine, handed.len())?;
        if let Some(t) = twin_turn {
            self.run.frame.trace.event(
                step,
                format!(
                    "worker {c}.{} raced it ({} handed)",
                    1 - i,
                    twin_handed.len()
                ),
            );
            self.settle_turn(step, (c, 1 - i), t, twin, twin_handed.len())?;
        }
        handed.extend(twin_handed);
        self.check_handed(store, step, c, &handed)
    }

    /// What a turn's outcome does: a wait advances the clock (up to the
    /// wait); a faulted store ends the worker (its supervisor starts
    /// another later); any other error is a violation.
    fn settle_turn<E: Target>(
        &mut self,
        step: usize,
        (c, i): (usize, usize),
        turn: Result<Turn, strata_outbox::OutboxError>,
        slot: &mut Option<WorkerLoop<'_, FaultyEngine<E>, Vec<u8>>>,
        handed: usize,
    ) -> Result<(), Violation> {
        match turn {
            Ok(Turn::Wait { wait, .. }) => {
                let ms = u64::try_from(wait.as_millis()).unwrap_or(u64::MAX);
                let advance = self.run.frame.rng.below(ms.saturating_add(1));
                self.run.frame.clock.advance(advance);
                self.run
                    .frame
                    .trace
                    .event(step, format!("worker {c}.{i} waits ({handed} handed)"));
            }
            Ok(_) => self
                .run
                .frame
                .trace
                .event(step, format!("worker {c}.{i} turned ({handed} handed)")),
            Err(e) if faulted(&e) => {
                *slot = None;
                self.run
                    .frame
                    .trace
                    .event(step, format!("worker {c}.{i} ended: {e}"));
            }
            Err(e) => return Err(fail(step, format!("worker {c}.{i} ended: {e}"))),
        }
        Ok(())
    }

    /// Each entry handed: pushed, durable when handed, its effect applied
    /// at most once.
    fn check_handed<E: Target>(
        &mut self,
        store: &Store<FaultyEngine<E>>,
        step: usize,
        c: usize,
        handed: &[Handed],
    ) -> Result<(), Violation> {
        let inner = store.engine().inner();
        let (data, _) = store.keyspaces();
        let snap = inner
            .snapshot()
            .map_err(|e| fail(step, format!("a fault-free snapshot failed: {e}")))?;
        for h in handed {
            self.run.frame.checks += 1;
            self.handed_at[c].insert(h.seq, h.position);
            if h.position.version > h.durable {
                return Err(fail(
                    step,
                    format!(
                        "consumer {}: entry {} (at {}) handed to a handler beyond the durable version {}",
                        CONSUMERS[c], h.seq, h.position, h.durable
                    ),
                ));
            }
            if !self.run.pushed.contains_key(&h.seq) {
                return Err(fail(
                    step,
                    format!("entry {} handed to a handler, never pushed", h.seq),
                ));
            }
            let key = Handled {
                c: c as u64,
                seq: h.seq,
            }
            .pack()
            .map_err(|e| fail(step, format!("a counter's key: {e}")))?;
            let count = snap
                .get(data, &key)
                .map_err(|e| fail(step, format!("a fault-free read failed: {e}")))?
                .and_then(|v| <[u8; 8]>::try_from(v.as_slice()).ok())
                .map_or(0, i64::from_le_bytes);
            if count > 1 {
                return Err(fail(
                    step,
                    format!(
                        "consumer {}: entry {}'s effect applied {count} times",
                        CONSUMERS[c], h.seq
                    ),
                ));
            }
        }
        Ok(())
    }
}

impl WorkerRun {
    /// After the ledger: per consumer and ordering key, the serial
    /// numbers of the effects rise with the entries' positions (an entry
    /// handled only in the quiet phase, with no serial, counts as last).
    fn check_order<E: Engine>(&mut self, store: &Store<E>, step: usize) -> Result<(), Violation> {
        let read =
            |e: strata_engine::ReadError| fail(step, format!("a fault-free read failed: {e}"));
        let snap = store.engine().snapshot().map_err(read)?;
        let (data, _) = store.keyspaces();
        for (c, name) in CONSUMERS.iter().enumerate() {
            let counters = |prefix: u64,
                            seq_of_key: &dyn Fn(&[u8]) -> Result<u64, strata_keys::KeyError>|
             -> Result<BTreeMap<u64, i64>, Violation> {
                let range = strata_keys::KeyRange::tuple_prefix(&strata_keys::tuple::pack(&(
                    prefix, c as u64,
                )));
                let rows: Vec<(Vec<u8>, Vec<u8>)> = snap
                    .range(data, strata_engine::RangeSpec::from(range))
                    .and_then(Iterator::collect)
                    .map_err(read)?;
                rows.iter()
                    .map(|(k, v)| {
                        let seq = seq_of_key(k)
                            .map_err(|e| fail(step, format!("a counter's key: {e}")))?;
                        let n = <[u8; 8]>::try_from(v.as_slice()).map_or(-1, i64::from_le_bytes);
                        Ok((seq, n))
                    })
                    .collect()
            };
            let handled = counters(21, &|k| <Handled as Key>::unpack(k).map(|h| h.seq))?;
            let serials = counters(24, &|k| <HandledAt as Key>::unpack(k).map(|h| h.seq))?;
            let mut by_key: BTreeMap<&[u8], Vec<(Position, i64, u64)>> = BTreeMap::new();
            for seq in handled.keys() {
                let (Some(position), Some((_, Some(key)))) =
                    (self.handed_at[c].get(seq), self.run.pushed.get(seq))
                else {
                    continue;
                };
                let serial = serials.get(seq).copied().unwrap_or(i64::MAX);
                by_key
                    .entry(key)
                    .or_default()
                    .push((*position, serial, *seq));
            }
            for (key, mut entries) in by_key {
                entries.sort_unstable();
                for pair in entries.windows(2) {
                    self.run.frame.checks += 1;
                    let ((p1, s1, e1), (p2, s2, e2)) = (pair[0], pair[1]);
                    if s1 > s2 {
                        return Err(fail(
                            step,
                            format!(
                                "consumer {name}, key {key:?}: entry {e2} (at {p2}) took effect as number {s2}, before entry {e1} (at {p1}) as number {s1}"
                            ),
                        ));
                    }
                }
            }
        }
        Ok(())
    }
}

/// Runs the worker workload of one seed on engine `E`.
pub fn run_worker_seed_on<E: Target>(options: &RunOptions) -> SeedReport {
    let (run, store_options, mut store, mut violation) =
        OutboxRun::start::<E>(options, 0x0B0D_0000_0000_0000, "worker");
    let mut w = WorkerRun {
        run,
        handed_at: [BTreeMap::new(), BTreeMap::new()],
    };
    let mut step = 0;
    while step < options.ops && violation.is_none() {
        let mut crashed = false;
        {
            // The loops live as long as the process: a crash ends them all.
            let mut loops: Loops<'_, E> = Default::default();
            while step < options.ops {
                step += 1;
                if w.run.frame.crash_due(store.engine().is_stuck()) {
                    crashed = true;
                    break;
                }
                if let Err(v) = w.worker_step(&store, &mut loops, step) {
                    violation = Some(v);
                    break;
                }
            }
        }
        if crashed {
            let e = store.into_engine().crash_restart(&mut w.run.frame.rng);
            w.run.frame.trace.event(step, "crash and reopen".to_owned());
            w.run.crash();
            store = w.run.open(e, &store_options);
        }
    }
    if violation.is_none()
        && let Err(v) = w.run.drain_and_check(&store, options.ops).and_then(|()| {
            w.check_order(
                &crate::run::quiet_store(store.engine(), &store_options, w.run.frame.clock.clone()),
                options.ops,
            )
        })
    {
        violation = Some(v);
    }
    let faults = store.engine().counters();
    w.run
        .frame
        .report("worker", options.seed, faults, violation)
}
