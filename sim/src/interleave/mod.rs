//! Concurrent transactions, interleaved step by step, checked for
//! serializability against independent models.
//!
//! Each client runs on its own thread, but only one thread runs at a
//! time: a [`Baton`] decides, with the seed's generator, which client goes
//! on at every engine call the [`Interleaved`] wrapper sees (a snapshot
//! opened, a commit). So one client's transaction reads, another client
//! commits over what it read, and the first then commits, in every order
//! the seed draws, and a seed replays the same schedule.
//!
//! Every operation a client finishes goes into the history with its
//! answer, the versions it committed at and the snapshot it last read
//! from. The oracle ([`serial_order`]) orders the history as the engine
//! serialized it: an operation that committed at its commit version, one
//! that only read at the version of its snapshot (after the commits at or
//! below it). A model of each layer's documented behaviour, written here
//! without the layer's code, replays that order and must give every
//! operation the answer it got, and end in the state the layer holds.
//!
//! Five layers run, each on a fresh engine:
//!
//! - `store.rs`: counters read then written, versioned records through
//!   compare-and-set, a quota scope near its limit, groups read by a scan
//!   before a member joins;
//! - `outbox.rs`: the lease and checkpoint rows of one consumer, taken,
//!   renewed, released and moved by workers, between producers' commits;
//! - `nokv.rs`: NoKV's inodes and dentries (create, unlink, setattr of a
//!   versioned inode), whose commands are planned in one transaction and
//!   executed under predicates in another;
//! - `code_sous.rs`: code-sous's function versions (`version_seq`), an
//!   alias set to versions that may not exist yet, activations started and
//!   ended at once by several clients;
//! - `toc.rs`: agent memory's versioned TOC nodes, written by several
//!   clients at once.
//!
//! The clock stands still while clients run (an operation's time is the
//! round's) and moves between rounds, so leases expire.

use std::cell::RefCell;
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::Duration;

use strata_engine::{
    Clock, Commit, CommitError, CommitInfo, Engine, EngineError, Keyspaces, ManualClock, ReadError,
    Rng, SeededRng, Snapshot,
};
use strata_store::{RetryPolicy, Store, StoreOptions};

use crate::run::{RunOptions, SeedReport, Trace, Violation, fail};
use crate::targets::Target;

mod code_sous;
mod nokv;
mod outbox;
mod store;
mod toc;

/// Clients per layer.
const CLIENTS: usize = 3;

/// How long a client waits for its turn before the run is declared stuck
/// (a lock held across an engine call would deadlock the schedule).
const STALL: Duration = Duration::from_mins(1);

/// Whose turn it is: at most one client thread runs at a time.
pub struct Baton {
    turns: Mutex<Turns>,
    /// Where each client waits for its turn: the turn wakes only the
    /// client it goes to (with one shared condition variable every
    /// handover woke every waiting client, most of them only to sleep
    /// again).
    turn_of: [Condvar; CLIENTS],
}

struct Turns {
    turn: Option<usize>,
    live: Vec<bool>,
    rng: SeededRng,
    /// Times the turn went to another client.
    switches: u64,
}

thread_local! {
    /// The client this thread runs, while it runs one.
    static ME: std::cell::Cell<Option<usize>> = const { std::cell::Cell::new(None) };
    /// What the running operation did at the engine: versions it committed
    /// at, the version of the last snapshot it opened.
    static SEEN: RefCell<Seen> = const { RefCell::new(Seen { commits: Vec::new(), snapshot: None }) };
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Seen {
    commits: Vec<u64>,
    snapshot: Option<u64>,
}

impl Baton {
    /// A baton drawing its schedule from `seed`.
    pub fn new(seed: u64) -> Self {
        Self {
            turns: Mutex::new(Turns {
                turn: None,
                live: Vec::new(),
                rng: SeededRng::new(seed),
                switches: 0,
            }),
            turn_of: std::array::from_fn(|_| Condvar::new()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Turns> {
        self.turns.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Opens a round of `clients` clients; the first to run is drawn.
    fn open(&self, clients: usize) {
        assert!(
            clients <= CLIENTS,
            "a baton schedules at most {CLIENTS} clients"
        );
        let mut t = self.lock();
        t.live = vec![true; clients];
        t.turn = t.pick();
    }

    /// Wakes the client whose turn it now is (called under the lock).
    fn wake(&self, turn: Option<usize>) {
        if let Some(c) = turn.and_then(|c| self.turn_of.get(c)) {
            c.notify_one();
        }
    }

    /// Times the turn went from one client to another.
    pub fn switches(&self) -> u64 {
        self.lock().switches
    }

    /// Waits for client `me`'s first turn, on its thread.
    fn enter(&self, me: usize) -> Turn<'_> {
        ME.with(|m| m.set(Some(me)));
        let t = self.lock();
        drop(self.wait(t, me));
        Turn { baton: self, me }
    }

    fn wait<'a>(
        &'a self,
        mut t: std::sync::MutexGuard<'a, Turns>,
        me: usize,
    ) -> std::sync::MutexGuard<'a, Turns> {
        while t.turn != Some(me) {
            let (next, timeout) = self.turn_of[me]
                .wait_timeout(t, STALL)
                .unwrap_or_else(PoisonError::into_inner);
            t = next;
            assert!(
                !timeout.timed_out() || t.turn == Some(me),
                "client {me} waited {STALL:?} for its turn: the schedule is stuck"
            );
        }
        t
    }

    /// At an engine call: the turn goes to a client drawn among the live
    /// ones (possibly this one), and this thread waits until it is its
    /// turn again. Threads outside a round pass straight through.
    fn pass(&self) {
        let Some(me) = ME.with(std::cell::Cell::get) else {
            return;
        };
        let mut t = self.lock();
        let next = t.pick();
        t.turn = next;
        if next != Some(me) {
            t.switches += 1;
            self.wake(next);
        }
        drop(self.wait(t, me));
    }
}

impl Turns {
    fn pick(&mut self) -> Option<usize> {
        let live: Vec<usize> = (0..self.live.len()).filter(|&c| self.live[c]).collect();
        if live.is_empty() {
            return None;
        }
        let i = usize::try_from(self.rng.below(live.len() as u64)).unwrap_or(0);
        Some(live[i])
    }
}

/// A client's place in the round: dropping it (at the end of the client's
/// operations, or in a panic) hands the turn on for good.
struct Turn<'a> {
    baton: &'a Baton,
    me: usize,
}

impl Drop for Turn<'_> {
    fn drop(&mut self) {
        let mut t = self.baton.lock();
        if let Some(l) = t.live.get_mut(self.me) {
            *l = false;
        }
        t.turn = t.pick();
        self.baton.wake(t.turn);
        ME.with(|m| m.set(None));
    }
}

/// An engine whose snapshots and commits are points where the [`Baton`]
/// may hand the turn to another client; it records, per thread, what the
/// running operation committed and read.
pub struct Interleaved<E> {
    inner: E,
    baton: Baton,
}

impl<E> Interleaved<E> {
    /// `inner`, scheduled by a baton seeded with `seed`.
    pub fn new(inner: E, seed: u64) -> Self {
        Self {
            inner,
            baton: Baton::new(seed),
        }
    }

    /// The engine underneath.
    pub fn inner(&self) -> &E {
        &self.inner
    }

    /// The schedule.
    pub fn baton(&self) -> &Baton {
        &self.baton
    }
}

impl<E: Engine> Engine for Interleaved<E> {
    type Snapshot<'e>
        = E::Snapshot<'e>
    where
        Self: 'e;

    fn keyspaces(&self) -> &Keyspaces {
        self.inner.keyspaces()
    }

    fn snapshot(&self) -> Result<Self::Snapshot<'_>, ReadError> {
        self.baton.pass();
        let snapshot = self.inner.snapshot()?;
        if let Ok(v) = snapshot.version() {
            SEEN.with(|s| s.borrow_mut().snapshot = Some(v));
        }
        Ok(snapshot)
    }

    fn commit(&self, commit: Commit) -> Result<CommitInfo, CommitError> {
        self.baton.pass();
        let r = self.inner.commit(commit);
        if let Ok(info) = &r {
            SEEN.with(|s| s.borrow_mut().commits.push(info.version));
        }
        r
    }

    fn sync(&self) -> Result<u64, EngineError> {
        self.inner.sync()
    }

    fn durable_version(&self) -> u64 {
        self.inner.durable_version()
    }

    fn last_version(&self) -> u64 {
        self.inner.last_version()
    }
}

/// One finished operation of a client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Done<Op> {
    /// The client that ran it.
    pub client: usize,
    /// Its place in its client's sequence, for the trace.
    pub nth: usize,
    /// What it did.
    pub op: Op,
    /// What it answered, in the form the model gives too.
    pub answer: String,
    /// Versions it committed at (one for the operations run here).
    pub commits: Vec<u64>,
    /// The version of the last snapshot it read from.
    pub snapshot: Option<u64>,
    /// The clock while it ran.
    pub now: u64,
}

/// Runs `op` on this client's thread, recording what it did at the engine.
fn record<Op>(
    client: usize,
    nth: usize,
    op: Op,
    now: u64,
    run: impl FnOnce(&Op) -> String,
) -> Done<Op> {
    SEEN.with(|s| *s.borrow_mut() = Seen::default());
    let answer = run(&op);
    let seen = SEEN.with(|s| std::mem::take(&mut *s.borrow_mut()));
    Done {
        client,
        nth,
        op,
        answer,
        commits: seen.commits,
        snapshot: seen.snapshot,
        now,
    }
}

/// The history in the engine's serial order: a committed operation at its
/// commit version, a read-only one after the commits its snapshot saw.
/// Operations that read nothing and committed nothing have no place and
/// are left out.
///
/// # Errors
/// An operation that committed more than once: it was not atomic.
pub fn serial_order<Op: std::fmt::Debug>(history: Vec<Done<Op>>) -> Result<Vec<Done<Op>>, String> {
    let mut placed = Vec::with_capacity(history.len());
    for d in history {
        let at = match (d.commits.as_slice(), d.snapshot) {
            ([], None) => continue,
            ([], Some(v)) => (v, 1),
            ([v], _) => (*v, 0),
            (more, _) => {
                return Err(format!(
                    "client {} operation {} ({:?}) committed {} times (versions {more:?}): it is not one transaction",
                    d.client,
                    d.nth,
                    d.op,
                    more.len()
                ));
            }
        };
        placed.push((at, d));
    }
    placed.sort_by_key(|(at, d)| (*at, d.client, d.nth));
    Ok(placed.into_iter().map(|(_, d)| d).collect())
}

/// A layer's workload for [`run_rounds`]: its operations and the model
/// that replays them.
pub(crate) trait Layer: Sync {
    /// An operation, drawn by a client.
    type Op: std::fmt::Debug + Clone + Send;
    /// What one client keeps between its operations (a lease it holds).
    type Client: Send + Default;
    /// Draws client `client`'s next operation.
    fn draw(&self, client: usize, state: &mut Self::Client, rng: &mut SeededRng) -> Self::Op;
    /// Runs it; returns its answer.
    fn run(&self, client: usize, state: &mut Self::Client, op: &Self::Op) -> String;
}

/// Runs `rounds` rounds of [`CLIENTS`] clients on `layer`, each client
/// running one to three operations per round; `between` runs between
/// rounds (the clock moves). Returns the history in completion order.
pub(crate) fn run_rounds<L: Layer, E: Engine>(
    engine: &Interleaved<E>,
    layer: &L,
    rounds: usize,
    rng: &mut SeededRng,
    now: &dyn Fn() -> u64,
    mut between: impl FnMut(&mut SeededRng),
) -> Vec<Done<L::Op>> {
    let history = Mutex::new(Vec::new());
    let planting = strata_engine::faults::Planting::here();
    let mut clients: Vec<(L::Client, SeededRng, usize)> = (0..CLIENTS)
        .map(|c| {
            (
                L::Client::default(),
                SeededRng::new(rng.next_u64() ^ c as u64),
                0,
            )
        })
        .collect();
    for _ in 0..rounds {
        engine.baton().open(CLIENTS);
        let t = now();
        std::thread::scope(|s| {
            for (c, (state, crng, nth)) in clients.iter_mut().enumerate() {
                let history = &history;
                let planting = &planting;
                s.spawn(move || {
                    // The seed's planted bug holds for its clients.
                    planting.enter();
                    let turn = engine.baton().enter(c);
                    let n = 1 + crng.below(3);
                    for _ in 0..n {
                        let op = layer.draw(c, state, crng);
                        *nth += 1;
                        let done = record(c, *nth, op, t, |op| layer.run(c, state, op));
                        history
                            .lock()
                            .unwrap_or_else(PoisonError::into_inner)
                            .push(done);
                    }
                    drop(turn);
                });
            }
        });
        between(rng);
    }
    history.into_inner().unwrap_or_else(PoisonError::into_inner)
}

/// A layer's store options for an interleaved run: conflicts retried at
/// once (a backoff would move the clock, which stands still in a round), up
/// to 1,000 times.
pub(crate) fn layer_options(declared: StoreOptions) -> StoreOptions {
    declared.retry(RetryPolicy {
        max_attempts: 1_000,
        base_backoff_ms: 0,
        max_backoff_ms: 0,
    })
}

/// A fresh engine of kind `E` scheduled by the seed, and the rounds' clock.
pub(crate) struct Stage<E> {
    engine: Interleaved<E>,
    clock: Arc<ManualClock>,
}

impl<E: Target> Stage<E> {
    /// An empty engine for `store_options`, its schedule drawn from `rng`.
    pub(crate) fn new(store_options: &StoreOptions, rng: &mut SeededRng) -> Self {
        Self {
            engine: Interleaved::new(E::fresh(store_options.keyspace_specs()), rng.next_u64()),
            clock: Arc::new(ManualClock::new(1_730_000_000_000)),
        }
    }

    /// The time every operation of a round reads; a workload moves it
    /// between rounds.
    pub(crate) fn clock(&self) -> &ManualClock {
        &self.clock
    }

    /// The same clock, shared, for a layer that keeps one.
    pub(crate) fn shared_clock(&self) -> Arc<ManualClock> {
        self.clock.clone()
    }

    /// A store on the engine.
    ///
    /// # Errors
    /// Opening failed.
    pub(crate) fn store(
        &self,
        store_options: StoreOptions,
        rng: &mut SeededRng,
    ) -> Result<Store<&Interleaved<E>>, Violation> {
        Store::open_with(
            &self.engine,
            store_options,
            self.clock.clone(),
            Box::new(SeededRng::new(rng.next_u64())),
        )
        .map_err(|e| fail(0, format!("opening the store: {e}")))
    }

    /// Runs the seed's rounds of `layer` (see [`run_rounds`]), traced
    /// under `name`; returns the history and its commits.
    pub(crate) fn rounds<L: Layer>(
        &self,
        name: &str,
        layer: &L,
        (options, rng, trace): (&RunOptions, &mut SeededRng, &mut Trace),
        between: impl FnMut(&mut SeededRng),
    ) -> (Vec<Done<L::Op>>, u64) {
        let rounds = (options.ops / 8).max(4);
        let clock = &self.clock;
        let history = run_rounds(
            &self.engine,
            layer,
            rounds,
            rng,
            &|| clock.now_ms(),
            between,
        );
        let commits = history.iter().map(|d| d.commits.len() as u64).sum();
        trace.event(
            0,
            format!(
                "{name}: {} operations, {commits} commits, {} switches",
                history.len(),
                self.engine.baton().switches()
            ),
        );
        (history, commits)
    }
}

/// Replays `history` in serial order through `apply` (the model: it
/// returns the answer the operation must have given); returns the checks
/// made. The caller then compares the layer's final state with the model's.
pub(crate) fn check<Op: std::fmt::Debug>(
    history: Vec<Done<Op>>,
    trace: &mut Trace,
    mut apply: impl FnMut(&Done<Op>) -> String,
) -> Result<u64, Violation> {
    let total = history.len();
    let order = serial_order(history).map_err(|m| fail(total, m))?;
    let mut checks = 0;
    for (i, d) in order.iter().enumerate() {
        let want = apply(d);
        checks += 1;
        trace.event(
            i,
            format!(
                "client {} op {} {:?} at {:?}/{:?}: {}",
                d.client, d.nth, d.op, d.commits, d.snapshot, d.answer
            ),
        );
        if want != d.answer {
            return Err(fail(
                i,
                format!(
                    "not serializable: client {} operation {} ({:?}, committed at {:?}, read at {:?}) answered \"{}\", but replayed in commit order it answers \"{want}\"",
                    d.client, d.nth, d.op, d.commits, d.snapshot, d.answer
                ),
            ));
        }
    }
    Ok(checks)
}

/// One layer's interleaved run: its checks and commits, or a violation.
type LayerRun = fn(&RunOptions, &mut Trace) -> Result<(u64, u64), Violation>;

/// Runs the interleaved workloads of one seed on engine `E`: the store's,
/// the outbox's, NoKV's, code-sous's and agent memory's TOC, each on a
/// fresh engine.
pub fn run_interleave_seed_on<E: Target>(options: &RunOptions) -> SeedReport {
    let mut trace = Trace::new();
    let mut checks = 0;
    let mut commits = 0;
    let mut violation = None;
    let layers: [(&str, LayerRun); 5] = [
        ("store", store::run::<E>),
        ("outbox", outbox::run::<E>),
        ("nokv", nokv::run::<E>),
        ("code-sous", code_sous::run::<E>),
        ("toc", toc::run::<E>),
    ];
    for (name, run) in layers {
        trace.event(0, format!("interleaved {name}, seed {}", options.seed));
        match run(options, &mut trace) {
            Ok((c, k)) => {
                checks += c;
                commits += k;
            }
            Err(v) => {
                violation = Some(Violation {
                    message: format!("interleaved {name}: {}", v.message),
                    step: v.step,
                });
                break;
            }
        }
    }
    trace.report(
        "interleave",
        options.seed,
        (commits, checks),
        crate::FaultCounters::default(),
        violation,
    )
}

#[cfg(test)]
mod tests {
    use super::{Done, serial_order};

    fn done(
        client: usize,
        nth: usize,
        commits: &[u64],
        snapshot: Option<u64>,
    ) -> Done<&'static str> {
        Done {
            client,
            nth,
            op: "op",
            answer: String::new(),
            commits: commits.to_vec(),
            snapshot,
            now: 0,
        }
    }

    #[test]
    fn the_serial_order_is_the_commit_order_with_reads_after_what_they_saw() {
        let history = vec![
            done(0, 1, &[7], Some(3)),
            done(1, 1, &[], Some(5)),
            done(2, 1, &[5], Some(4)),
            done(1, 2, &[], None),
            done(0, 2, &[], Some(7)),
            done(2, 2, &[3], Some(2)),
        ];
        let order: Vec<(usize, usize)> = serial_order(history)
            .unwrap()
            .iter()
            .map(|d| (d.client, d.nth))
            .collect();
        // Commit 3, commit 5, the read at 5, commit 7, the read at 7; the
        // operation that neither read nor wrote has no place.
        assert_eq!(order, [(2, 2), (2, 1), (1, 1), (0, 1), (0, 2)]);
    }

    #[test]
    fn an_operation_committing_twice_is_refused() {
        let err = serial_order(vec![done(0, 1, &[4, 6], Some(3))]).unwrap_err();
        assert!(err.contains("committed 2 times"), "{err}");
    }
}
