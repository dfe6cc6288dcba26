//! One simulated run: a seeded workload of several clients against a
//! faulty engine, checked step by step against the reference model.

use std::collections::VecDeque;
use std::ops::Bound;

use strata_engine::{
    Clock, Commit, CommitError, Durability, Engine, Keyspace, KeyspaceSpec, ManualClock, MemEngine,
    Mutation, Predicate, Profile, RangeSpec, ReadError, Rng, SeededRng, Snapshot, StampAt,
};
use strata_engine_testkit::{Model, ModelError};

use crate::faults::{FaultClass, FaultConfig, FaultCounters, FaultyEngine};
use crate::targets::Target;

/// What to run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunOptions {
    /// The seed: it decides everything.
    pub seed: u64,
    /// Steps of the workload.
    pub ops: usize,
    /// Fault classes that may fire.
    pub faults: Vec<FaultClass>,
    /// A planted bug to enable, by name (needs the `planted-bugs` feature).
    pub plant: Option<String>,
    /// The engine under test.
    pub engine: EngineKind,
    /// The workloads to run.
    pub workload: Workload,
}

/// Which workloads a seed runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Workload {
    /// Raw commits and reads against the engine contract, checked against
    /// the model ([`run_seed_on`]).
    Engine,
    /// Transactions through the typed store ([`crate::store`]).
    Store,
    /// The engine workload, then the store workload.
    #[default]
    Both,
}

/// Which engine a run drives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum EngineKind {
    /// The in-memory reference engine.
    #[default]
    Mem,
    /// redb on a disk that loses power at every crash.
    Redb,
    /// RocksDB in a temporary directory; crashes are process kills.
    Rocks,
}

impl RunOptions {
    /// `ops` steps of seed `seed` with every fault class enabled.
    pub fn new(seed: u64, ops: usize) -> Self {
        Self {
            seed,
            ops,
            faults: FaultClass::ALL.to_vec(),
            plant: None,
            engine: EngineKind::Mem,
            workload: Workload::Both,
        }
    }
}

/// A broken promise, with the run's last events.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// What broke, precisely.
    pub message: String,
    /// The step at which it was found.
    pub step: usize,
}

/// What one seed did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeedReport {
    /// The seed that produced this run.
    pub seed: u64,
    /// Commits the engine acknowledged (or applied with an unknown outcome).
    pub commits: u64,
    /// Oracle checks performed.
    pub checks: u64,
    /// Faults fired, by class.
    pub faults: FaultCounters,
    /// Hash of the whole trace: equal for equal runs.
    pub trace_hash: u64,
    /// The last events of the trace.
    pub trace_tail: Vec<String>,
    /// The first violation, if any.
    pub violation: Option<Violation>,
}

const TRACE_TAIL: usize = 60;
const KEYS: u64 = 12;

/// The trace: every event hashed (FNV-1a), the last ones kept.
pub(crate) struct Trace {
    pub(crate) hash: u64,
    pub(crate) tail: VecDeque<String>,
}

impl Trace {
    pub(crate) fn new() -> Self {
        Self {
            hash: 0xCBF2_9CE4_8422_2325,
            tail: VecDeque::new(),
        }
    }

    #[allow(clippy::needless_pass_by_value)] // callers build the text with format!
    pub(crate) fn event(&mut self, step: usize, text: String) {
        let line = format!("{step:>5} {text}");
        for b in line.bytes().chain([b'\n']) {
            self.hash ^= u64::from(b);
            self.hash = self.hash.wrapping_mul(0x0100_0000_01B3);
        }
        if self.tail.len() == TRACE_TAIL {
            self.tail.pop_front();
        }
        self.tail.push_back(line);
    }
}

pub(crate) fn fail(step: usize, message: String) -> Violation {
    Violation { message, step }
}

/// A client's reads, which its next commit turns into predicates.
#[derive(Default)]
struct Client {
    /// Values read, by keyspace position (handles change at a restart;
    /// a clean restart keeps these reads).
    reads: Vec<(usize, Vec<u8>, Option<Vec<u8>>)>,
}

struct Run {
    rng: SeededRng,
    clock: ManualClock,
    ks: [Keyspace; 2],
    model: Model,
    /// Models after each commit since the last point known durable; a
    /// crash must recover one of these at or after `floor`.
    history: Vec<Model>,
    floor: u64,
    clients: Vec<Client>,
    trace: Trace,
    commits: u64,
    checks: u64,
    plant: Option<String>,
}

fn specs() -> Vec<KeyspaceSpec> {
    vec![
        KeyspaceSpec::new("data", Profile::General),
        KeyspaceSpec::new("queue", Profile::Queue),
    ]
}

/// The handles of [`specs`] on `e`: obtained again after every restart,
/// since a reopened engine issues new ones.
fn handles<E: Engine>(e: &E) -> [Keyspace; 2] {
    let at = |i| e.keyspaces().at(i).expect("the run declares two keyspaces");
    [at(0), at(1)]
}

fn key(rng: &mut SeededRng) -> Vec<u8> {
    let n = rng.below(KEYS);
    if rng.chance(0.1) {
        vec![0xFF, u8::try_from(n).unwrap_or(0)]
    } else {
        format!("k{n:02}").into_bytes()
    }
}

fn counter_key(rng: &mut SeededRng) -> Vec<u8> {
    format!("c{}", rng.below(3)).into_bytes()
}

fn show(bytes: &[u8]) -> String {
    bytes
        .iter()
        .map(|&b| {
            if b.is_ascii_graphic() {
                char::from(b).to_string()
            } else {
                format!("\\x{b:02x}")
            }
        })
        .collect()
}

/// Everything the engine holds, read without faults.
fn engine_state<E: Target>(e: &FaultyEngine<E>) -> Vec<Vec<(Vec<u8>, Vec<u8>)>> {
    let inner = e.inner();
    // The sim's own view; the fault wrapper is bypassed, and the inner
    // engines read from memory.
    let Ok(snap) = inner.snapshot() else {
        return Vec::new();
    };
    handles(inner)
        .into_iter()
        .map(|ks| {
            snap.range(ks, RangeSpec::all())
                .map(|it| it.filter_map(Result::ok).collect())
                .unwrap_or_default()
        })
        .collect()
}

fn model_state(m: &Model) -> Vec<Vec<(Vec<u8>, Vec<u8>)>> {
    m.maps
        .iter()
        .map(|map| map.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
        .collect()
}

impl Run {
    fn random_range(&mut self) -> RangeSpec {
        let a = key(&mut self.rng);
        let b = key(&mut self.rng);
        let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
        let bound = |rng: &mut SeededRng, k: Vec<u8>| match rng.below(3) {
            0 => Bound::Included(k),
            1 => Bound::Excluded(k),
            _ => Bound::Unbounded,
        };
        RangeSpec {
            start: bound(&mut self.rng, lo),
            end: bound(&mut self.rng, hi),
            reverse: self.rng.chance(0.3),
            limit: self
                .rng
                .chance(0.3)
                .then(|| usize::try_from(self.rng.below(5)).unwrap_or(0)),
        }
    }

    fn random_commit(&mut self, client: usize) -> Commit {
        let [data, queue] = self.ks;
        let mut c = Commit::new().durability(if self.rng.chance(0.3) {
            Durability::Immediate
        } else {
            Durability::Buffered
        });
        // The client's earlier reads become predicates: serialisable writes.
        for (at, k, v) in std::mem::take(&mut self.clients[client].reads) {
            c = c.require(Predicate::ValueEquals {
                ks: self.ks[at],
                key: k,
                value: v,
            });
        }
        if self.rng.chance(0.15) {
            let k = key(&mut self.rng);
            c = c.require(if self.rng.chance(0.5) {
                Predicate::Absent { ks: data, key: k }
            } else {
                Predicate::Exists { ks: data, key: k }
            });
        }
        if self.rng.chance(0.05) {
            let range = self.random_range();
            c = c.require(Predicate::RangeEmpty { ks: data, range });
        }
        let now = self.clock.now_ms();
        for _ in 0..=self.rng.below(3) {
            let m = match self.rng.below(10) {
                0..=3 => Mutation::Put {
                    ks: data,
                    key: key(&mut self.rng),
                    value: format!("{now}:{}", self.rng.below(100)).into_bytes(),
                },
                4 => Mutation::Delete {
                    ks: data,
                    key: key(&mut self.rng),
                },
                5 => Mutation::DeleteRange {
                    ks: data,
                    range: self.random_range(),
                },
                6 | 7 => {
                    // Now and then a counter op on a data key, to hit the
                    // wrong-length error path.
                    let k = if self.rng.chance(0.05) {
                        key(&mut self.rng)
                    } else {
                        counter_key(&mut self.rng)
                    };
                    Mutation::Add {
                        ks: data,
                        key: k,
                        delta: i64::try_from(self.rng.below(7)).unwrap_or(0) - 3,
                    }
                }
                _ => {
                    let mut k = b"q/".to_vec();
                    k.extend_from_slice(&[0xFF; 10]);
                    k.extend_from_slice(
                        &u16::try_from(self.rng.below(4)).unwrap_or(0).to_be_bytes(),
                    );
                    Mutation::PutVersionstamped {
                        ks: queue,
                        key: k,
                        value: now.to_be_bytes().to_vec(),
                        at: StampAt::Key(2),
                    }
                }
            };
            c = c.mutate(m);
        }
        c
    }

    fn check_state<E: Target>(
        &mut self,
        e: &FaultyEngine<E>,
        step: usize,
        when: &str,
    ) -> Result<(), Violation> {
        self.checks += 1;
        let got = engine_state(e);
        let want = model_state(&self.model);
        if got != want {
            return Err(fail(
                step,
                format!(
                    "{when}: engine state differs from the model at version {} (engine {:?}, model {:?})",
                    self.model.version, got, want
                ),
            ));
        }
        if e.last_version() != self.model.version {
            return Err(fail(
                step,
                format!(
                    "{when}: engine at version {}, model at {}",
                    e.last_version(),
                    self.model.version
                ),
            ));
        }
        Ok(())
    }

    fn commit<E: Target>(
        &mut self,
        e: &FaultyEngine<E>,
        step: usize,
        client: usize,
    ) -> Result<(), Violation> {
        let c = self.random_commit(client);
        let mut next = self.model.clone();
        let want = next.commit(&c);
        let got = e.commit(c.clone());
        self.checks += 1;
        match (&want, got) {
            (Ok(v), Ok(info)) => {
                self.trace.event(
                    step,
                    format!(
                        "client {client} commit v{} ({} preds, {} muts, {:?})",
                        info.version,
                        c.predicates.len(),
                        c.mutations.len(),
                        c.durability
                    ),
                );
                if info.version != *v {
                    return Err(fail(
                        step,
                        format!(
                            "commit acknowledged as version {}, the next version is {v}: versions must strictly increase by commit",
                            info.version
                        ),
                    ));
                }
                self.model = next;
                self.history.push(self.model.clone());
                self.commits += 1;
                if info.durable {
                    self.floor = self.floor.max(info.version);
                }
                self.check_state(e, step, "after commit")
            }
            (Err(w), Err(CommitError::Backend(src))) => {
                self.trace.event(
                    step,
                    format!("client {client} commit failed: {src} (model: {w:?})"),
                );
                self.check_state(e, step, "after failed commit")
            }
            (Ok(_), Err(CommitError::Backend(src))) => {
                self.trace
                    .event(step, format!("client {client} commit failed: {src}"));
                self.check_state(e, step, "after failed commit")
            }
            (_, Err(CommitError::OutcomeUnknown(src))) => {
                // Resolve against what the engine holds: applied or not.
                let applied = e.last_version() == self.model.version + 1;
                self.trace.event(
                    step,
                    format!(
                        "client {client} commit outcome unknown ({src}); resolved as {}",
                        if applied { "applied" } else { "not applied" }
                    ),
                );
                if applied {
                    if want.is_err() {
                        return Err(fail(
                            step,
                            format!("a commit the model refuses ({want:?}) was applied"),
                        ));
                    }
                    self.model = next;
                    self.history.push(self.model.clone());
                    self.commits += 1;
                }
                self.check_state(e, step, "after unknown outcome")
            }
            (Err(w), Err(g)) => {
                self.trace
                    .event(step, format!("client {client} commit refused: {g}"));
                let g_model = ModelError::of(&g);
                if g_model.as_ref() != Some(w) {
                    return Err(fail(
                        step,
                        format!("engine refused the commit with {g}, the model with {w:?}"),
                    ));
                }
                self.check_state(e, step, "after refused commit")
            }
            (Err(w), Ok(info)) => Err(fail(
                step,
                format!(
                    "engine applied a commit as version {} that the model refuses: {w:?}",
                    info.version
                ),
            )),
            (Ok(_), Err(g)) => Err(fail(
                step,
                format!("engine refused a commit the model accepts: {g}"),
            )),
        }
    }

    fn read<E: Target>(
        &mut self,
        e: &FaultyEngine<E>,
        step: usize,
        client: usize,
    ) -> Result<(), Violation> {
        let [data, queue] = self.ks;
        let snap = match e.snapshot() {
            Ok(s) => s,
            Err(err) => {
                self.trace
                    .event(step, format!("client {client} snapshot failed: {err}"));
                return Ok(());
            }
        };
        if self.rng.chance(0.6) {
            let k = if self.rng.chance(0.2) {
                counter_key(&mut self.rng)
            } else {
                key(&mut self.rng)
            };
            match snap.get(data, &k) {
                Ok(v) => {
                    self.checks += 1;
                    let want = self.model.maps[0].get(&k).cloned();
                    self.trace.event(
                        step,
                        format!(
                            "client {client} get {} = {:?}",
                            show(&k),
                            v.as_deref().map(show)
                        ),
                    );
                    if v != want {
                        return Err(fail(
                            step,
                            format!(
                                "get {} returned {:?}, the model holds {:?}",
                                show(&k),
                                v.as_deref().map(show),
                                want.as_deref().map(show)
                            ),
                        ));
                    }
                    self.clients[client].reads.push((0, k, v));
                }
                Err(err) => self
                    .trace
                    .event(step, format!("client {client} get failed: {err}")),
            }
        } else {
            let (ks, idx) = if self.rng.chance(0.3) {
                (queue, 1)
            } else {
                (data, 0)
            };
            let range = self.random_range();
            match snap.range(ks, range.clone()) {
                Ok(it) => {
                    self.checks += 1;
                    let got: Result<Vec<_>, ReadError> = it.collect();
                    let want = self.model.range(idx, &range);
                    match got {
                        Ok(rows) if rows == want => self
                            .trace
                            .event(step, format!("client {client} range {} rows", rows.len())),
                        Ok(rows) => {
                            return Err(fail(
                                step,
                                format!(
                                    "range {range:?} returned {} rows, the model {} ({rows:?} vs {want:?})",
                                    rows.len(),
                                    want.len()
                                ),
                            ));
                        }
                        Err(err) => self
                            .trace
                            .event(step, format!("client {client} range failed midway: {err}")),
                    }
                }
                Err(err) => self
                    .trace
                    .event(step, format!("client {client} range failed: {err}")),
            }
        }
        Ok(())
    }

    /// A snapshot taken before a commit must not see it.
    fn isolation<E: Target>(&mut self, e: &FaultyEngine<E>, step: usize) -> Result<(), Violation> {
        let Ok(snap) = e.inner().snapshot() else {
            return Ok(());
        };
        let before = self.model.clone();
        self.commit(e, step, 0)?;
        self.checks += 1;
        let rows: Vec<_> = snap
            .range(self.ks[0], RangeSpec::all())
            .map(|it| it.filter_map(Result::ok).collect())
            .unwrap_or_default();
        let want = before.range(0, &RangeSpec::all());
        if rows != want {
            return Err(fail(
                step,
                "a snapshot taken before a commit sees a different state".to_owned(),
            ));
        }
        Ok(())
    }

    /// Crashes and restarts; the restarted engine comes back whatever the
    /// check finds, so the run can still report its counters.
    fn crash<E: Target>(
        &mut self,
        e: FaultyEngine<E>,
        step: usize,
    ) -> (FaultyEngine<E>, Result<(), Violation>) {
        let floor = self.floor.max(e.durable_version());
        let pending = self.model.version.saturating_sub(floor);
        let e = e.crash_restart(&mut self.rng);
        let e = self.replant(e);
        let got = engine_state(&e);
        let version = e.last_version();
        self.checks += 1;
        let found = self
            .history
            .iter()
            .find(|m| m.version == version && model_state(m) == got);
        self.trace.event(step, format!("crash with {pending} unsynced commits: recovered version {version}, durable floor {floor}"));
        let outcome = match found {
            Some(m) if m.version >= floor => {
                self.model = m.clone();
                self.history = vec![self.model.clone()];
                self.floor = version;
                for c in &mut self.clients {
                    c.reads.clear();
                }
                Ok(())
            }
            Some(m) => Err(fail(
                step,
                format!(
                    "crash recovered version {}, before the durable floor {floor}: an acknowledged durable commit was lost",
                    m.version
                ),
            )),
            None => Err(fail(
                step,
                format!(
                    "crash recovered a state (version {version}) that is the state after no commit since the durable floor {floor}: a hole or half a commit"
                ),
            )),
        };
        (e, outcome)
    }

    fn sync<E: Target>(&mut self, e: &FaultyEngine<E>, step: usize) {
        match e.sync() {
            Ok(v) => {
                self.floor = self.floor.max(v);
                self.trace.event(step, format!("sync: durable {v}"));
                self.history.retain(|m| m.version >= v);
            }
            Err(err) => self.trace.event(step, format!("sync failed: {err}")),
        }
    }

    /// A clean restart keeps everything.
    fn clean_restart<E: Target>(
        &mut self,
        e: FaultyEngine<E>,
        step: usize,
    ) -> (FaultyEngine<E>, Result<(), Violation>) {
        let e = self.replant(e.clean_restart());
        self.floor = self.model.version;
        self.history = vec![self.model.clone()];
        self.trace.event(step, "clean restart".to_owned());
        let outcome = self.check_state(&e, step, "after clean restart");
        (e, outcome)
    }

    /// The reported durable version is at most the last version, and the
    /// next crash must honour it.
    fn durable_check<E: Target>(
        &mut self,
        e: &FaultyEngine<E>,
        step: usize,
    ) -> Result<(), Violation> {
        let reported = e.durable_version();
        self.checks += 1;
        if reported > e.last_version() {
            return Err(fail(
                step,
                format!(
                    "durable version {reported} above the last version {}",
                    e.last_version()
                ),
            ));
        }
        self.floor = self.floor.max(reported);
        self.trace
            .event(step, format!("durable version {reported}"));
        Ok(())
    }

    /// Re-plants the bug after a (re)start and takes the engine's new
    /// handles.
    fn replant<E: Target>(&mut self, e: FaultyEngine<E>) -> FaultyEngine<E> {
        let e = match &self.plant {
            Some(name) => e.map_inner(|inner| inner.plant(name)),
            None => e,
        };
        self.ks = handles(&e);
        e
    }
}

/// Runs one seed to the end or to its first violation, on the engine and
/// with the workloads the options name.
pub fn run_seed(options: &RunOptions) -> SeedReport {
    match options.engine {
        EngineKind::Mem => run_workloads::<MemEngine>(options),
        EngineKind::Redb => run_workloads::<crate::targets::RedbTarget>(options),
        #[cfg(feature = "rocks")]
        EngineKind::Rocks => run_workloads::<crate::targets::RocksTarget>(options),
        #[cfg(not(feature = "rocks"))]
        EngineKind::Rocks => SeedReport {
            seed: options.seed,
            commits: 0,
            checks: 0,
            faults: FaultCounters::default(),
            trace_hash: 0,
            trace_tail: Vec::new(),
            violation: Some(Violation {
                message: "this build has no RocksDB engine: run `cargo xtask sim --engine rocks` (feature `rocks`)".to_owned(),
                step: 0,
            }),
        },
    }
}

/// Runs the workloads of one seed on engine `E`.
pub fn run_workloads<E: Target>(options: &RunOptions) -> SeedReport {
    match options.workload {
        Workload::Engine => run_seed_on::<E>(options),
        Workload::Store => crate::store::run_store_seed_on::<E>(options),
        Workload::Both => {
            let engine = run_seed_on::<E>(options);
            if engine.violation.is_some() {
                return engine;
            }
            let store = crate::store::run_store_seed_on::<E>(options);
            let mut faults = engine.faults;
            faults.add(&store.faults);
            SeedReport {
                seed: options.seed,
                commits: engine.commits + store.commits,
                checks: engine.checks + store.checks,
                faults,
                trace_hash: engine.trace_hash.rotate_left(17) ^ store.trace_hash,
                trace_tail: store.trace_tail,
                violation: store.violation,
            }
        }
    }
}

/// Runs the engine workload of one seed on engine `E`.
pub fn run_seed_on<E: Target>(options: &RunOptions) -> SeedReport {
    let mut rng = SeededRng::new(options.seed);
    let config = FaultConfig::swarm(&mut rng, &options.faults);
    let fault_seed = rng.next_u64();
    let engine = E::fresh(specs());
    let mut run = Run {
        clock: ManualClock::new(1_700_000_000_000),
        ks: handles(&engine),
        model: Model::new(2),
        history: vec![Model::new(2)],
        floor: 0,
        clients: (0..=rng.below(3)).map(|_| Client::default()).collect(),
        trace: Trace::new(),
        commits: 0,
        checks: 0,
        plant: options.plant.clone(),
        rng,
    };
    let mut e = run.replant(FaultyEngine::new(engine, config, fault_seed));
    run.trace.event(
        0,
        format!(
            "seed {} with {} clients, faults {config:?}",
            options.seed,
            run.clients.len()
        ),
    );
    let mut violation = None;
    for step in 1..=options.ops {
        let client = usize::try_from(run.rng.below(run.clients.len() as u64)).unwrap_or(0);
        let roll = run.rng.below(1000);
        let outcome = if e.is_stuck()
            || (config.p(FaultClass::Crash) > 0.0 && run.rng.chance(config.p(FaultClass::Crash)))
        {
            let (next, outcome) = run.crash(e, step);
            e = next;
            outcome
        } else if config.p(FaultClass::Clock) > 0.0 && run.rng.chance(config.p(FaultClass::Clock)) {
            let jump = run.rng.below(7_200_000);
            let now = run.clock.now_ms();
            let back = run.rng.chance(0.3);
            run.clock.set(if back {
                now.saturating_sub(jump)
            } else {
                now + jump
            });
            e.record(FaultClass::Clock);
            run.trace.event(
                step,
                format!("clock jumps {}{jump} ms", if back { "-" } else { "+" }),
            );
            Ok(())
        } else {
            run.clock.advance(run.rng.below(50));
            match roll {
                0..=499 => run.commit(&e, step, client),
                500..=849 => run.read(&e, step, client),
                850..=899 => run.isolation(&e, step),
                900..=969 => {
                    run.sync(&e, step);
                    Ok(())
                }
                970..=979 => {
                    let (next, outcome) = run.clean_restart(e, step);
                    e = next;
                    outcome
                }
                _ => run.durable_check(&e, step),
            }
        };
        if let Err(v) = outcome {
            violation = Some(v);
            break;
        }
    }
    if let Some(v) = &violation {
        run.trace.event(v.step, format!("VIOLATION: {}", v.message));
    }
    SeedReport {
        seed: options.seed,
        commits: run.commits,
        checks: run.checks,
        faults: e.counters(),
        trace_hash: run.trace.hash,
        trace_tail: run.trace.tail.into_iter().collect(),
        violation,
    }
}
