//! One simulated run: what to run, what it reports, the trace, and the
//! dispatch to the engine workload ([`crate::run_seed_on`]) and the store
//! workload ([`crate::store`]).

use std::collections::VecDeque;

use strata_engine::{MemEngine, Rng, SeededRng};

use crate::engine_workload::run_seed_on;
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
    /// Producers and consumers through the outbox ([`crate::outbox`]).
    Outbox,
    /// The outbox's own worker loops, duplicated, between producers and
    /// crashes ([`crate::worker`]).
    Worker,
    /// Notes indexed through the outbox ([`crate::search`]).
    Search,
    /// A function platform's records ([`crate::code_sous`]).
    CodeSous,
    /// Interleaved transfers on UniversalDB's model ([`crate::universaldb`]).
    UniversalDb,
    /// Actors' keyspaces under quota and limit pressure ([`crate::actor_kv`]).
    ActorKv,
    /// A file system's metadata ([`crate::nokv`]).
    Nokv,
    /// Conversation memory with its outbox and index
    /// ([`crate::agent_memory`]).
    AgentMemory,
    /// Concurrent transactions of the store, the outbox and NoKV,
    /// interleaved step by step and checked for serializability
    /// ([`crate::interleave`]).
    Interleave,
    /// The five reference systems' workloads, one after the other:
    /// code-sous's, UniversalDB's, the actor KV's, NoKV's, agent memory's.
    Schemas,
    /// Every workload, in the order and on the seeds
    /// [`full_run`] gives (`all` or `both` on the command line).
    #[default]
    All,
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
    /// PostgreSQL, a throwaway server of the process; crashes are kills of
    /// every server process and a restart.
    Postgres,
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
            workload: Workload::All,
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
    /// Each workload's time on its thread, in the order they ran (for
    /// the summary's seeds per second; never part of the trace).
    pub spent: Vec<(&'static str, std::time::Duration)>,
}

const TRACE_TAIL: usize = 60;

/// What every workload's run of one seed shares, set up one way: the
/// seed's random draws (the swarm's fault rates and the faults' own seed
/// drawn first, then the workload's), the clock, the trace, and the
/// counts of commits and checks its report gives.
pub(crate) struct Frame {
    pub(crate) rng: SeededRng,
    pub(crate) clock: std::sync::Arc<strata_engine::ManualClock>,
    pub(crate) trace: Trace,
    pub(crate) commits: u64,
    pub(crate) checks: u64,
    /// The fault rates the swarm drew for this seed.
    pub(crate) faults: FaultConfig,
    /// The seed of the faults' own draws.
    pub(crate) fault_seed: u64,
}

impl Frame {
    /// The frame of `options.seed` for a workload whose draws are salted
    /// with `salt` (each workload has its own, so the workloads of one seed
    /// are independent), its clock starting at `start_ms`.
    pub(crate) fn new(options: &RunOptions, salt: u64, start_ms: u64) -> Self {
        let mut rng = SeededRng::new(options.seed ^ salt);
        let faults = FaultConfig::swarm(&mut rng, &options.faults);
        let fault_seed = rng.next_u64();
        Self {
            rng,
            clock: std::sync::Arc::new(strata_engine::ManualClock::new(start_ms)),
            trace: Trace::new(),
            commits: 0,
            checks: 0,
            faults,
            fault_seed,
        }
    }

    /// A fresh engine of kind `E` with these keyspaces, under the run's
    /// faults.
    pub(crate) fn engine<E: Target>(
        &self,
        specs: Vec<strata_engine::KeyspaceSpec>,
    ) -> FaultyEngine<E> {
        FaultyEngine::new(E::fresh(specs), self.faults, self.fault_seed)
    }

    /// Whether the run crashes before its next step: always when the
    /// engine is stuck (a failed sync it cannot recover from), else by the
    /// swarm's crash rate.
    pub(crate) fn crash_due(&mut self, stuck: bool) -> bool {
        let p = self.faults.p(FaultClass::Crash);
        stuck || (p > 0.0 && self.rng.chance(p))
    }

    /// Closes the run: the violation (if any) traced, then the report.
    pub(crate) fn report(
        self,
        workload: &str,
        seed: u64,
        faults: FaultCounters,
        violation: Option<Violation>,
    ) -> SeedReport {
        self.trace.report(
            workload,
            seed,
            (self.commits, self.checks),
            faults,
            violation,
        )
    }
}

/// The trace: every event hashed (FNV-1a), the last ones kept.
pub(crate) struct Trace {
    pub(crate) hash: u64,
    pub(crate) tail: VecDeque<String>,
}

impl Trace {
    /// Closes a workload's run: the violation (if any) traced, then the
    /// report.
    pub(crate) fn report(
        mut self,
        workload: &str,
        seed: u64,
        (commits, checks): (u64, u64),
        faults: FaultCounters,
        violation: Option<Violation>,
    ) -> SeedReport {
        if let Some(v) = &violation {
            self.event(
                v.step,
                format!("VIOLATION ({workload} workload): {}", v.message),
            );
        }
        SeedReport {
            seed,
            commits,
            checks,
            faults,
            trace_hash: self.hash,
            trace_tail: self.tail.into_iter().collect(),
            violation,
            spent: Vec::new(),
        }
    }

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

/// Every keyspace's rows, in declaration order.
pub(crate) type Contents = Vec<Vec<(Vec<u8>, Vec<u8>)>>;

/// Everything an engine holds, every keyspace in order, read at one
/// snapshot. A read that fails is an error, never an empty keyspace: the
/// oracles read without faults, so a failure is a finding.
pub(crate) fn contents<E: strata_engine::Engine>(e: &E) -> Result<Contents, String> {
    use strata_engine::Snapshot;
    let snap = e
        .snapshot()
        .map_err(|err| format!("a fault-free snapshot failed: {err}"))?;
    e.keyspaces()
        .handles()
        .map(|ks| {
            snap.range(ks, strata_engine::RangeSpec::all())
                .and_then(Iterator::collect)
                .map_err(|err| format!("a fault-free read of {ks} failed: {err}"))
        })
        .collect()
}

/// Bytes for a message: printable ASCII as is, the rest escaped, long ones
/// cut.
pub(crate) fn show_bytes(bytes: &[u8]) -> String {
    const SHOWN: usize = 40;
    let head = bytes[..bytes.len().min(SHOWN)].escape_ascii().to_string();
    if bytes.len() > SHOWN {
        format!("\"{head}…\" ({} bytes)", bytes.len())
    } else {
        format!("\"{head}\"")
    }
}

/// A range for a message: its bounds as bytes, its direction and limit.
pub(crate) fn show_range(range: &strata_engine::RangeSpec) -> String {
    use std::ops::Bound;
    let start = match &range.start {
        Bound::Included(k) => format!("[{}", show_bytes(k)),
        Bound::Excluded(k) => format!("({}", show_bytes(k)),
        Bound::Unbounded => "(unbounded".to_owned(),
    };
    let end = match &range.end {
        Bound::Included(k) => format!("{}]", show_bytes(k)),
        Bound::Excluded(k) => format!("{})", show_bytes(k)),
        Bound::Unbounded => "unbounded)".to_owned(),
    };
    format!(
        "{start}, {end}{}{}",
        if range.reverse { " reverse" } else { "" },
        range
            .limit
            .map(|l| format!(" limit {l}"))
            .unwrap_or_default()
    )
}

/// The first difference between what an engine holds and what it should
/// hold: the keyspace, the first key that differs, and both sides there.
pub(crate) fn first_difference(got: &Contents, want: &Contents) -> Option<String> {
    if got.len() != want.len() {
        return Some(format!("{} keyspaces, expected {}", got.len(), want.len()));
    }
    for (ks, (g, w)) in got.iter().zip(want).enumerate() {
        let (mut g, mut w) = (g.iter().peekable(), w.iter().peekable());
        loop {
            let found = match (g.peek(), w.peek()) {
                (None, None) => break,
                (Some((gk, gv)), Some((wk, wv))) if gk == wk => {
                    if gv == wv {
                        g.next();
                        w.next();
                        None
                    } else {
                        Some(format!(
                            "keyspace #{ks}, key {}: {} where {} was expected",
                            show_bytes(gk),
                            show_bytes(gv),
                            show_bytes(wv)
                        ))
                    }
                }
                (Some((gk, gv)), Some((wk, _))) if gk < wk => Some(format!(
                    "keyspace #{ks}, key {}: {} where no key was expected",
                    show_bytes(gk),
                    show_bytes(gv)
                )),
                (Some((gk, gv)), None) => Some(format!(
                    "keyspace #{ks}, key {}: {} where no key was expected",
                    show_bytes(gk),
                    show_bytes(gv)
                )),
                (_, Some((wk, wv))) => Some(format!(
                    "keyspace #{ks}, key {}: missing, {} was expected",
                    show_bytes(wk),
                    show_bytes(wv)
                )),
            };
            if found.is_some() {
                return found;
            }
        }
    }
    None
}

pub(crate) fn fail(step: usize, message: String) -> Violation {
    Violation { message, step }
}

/// Runs one seed to the end or to its first violation, on the engine and
/// with the workloads the options name.
pub fn run_seed(options: &RunOptions) -> SeedReport {
    // The run's planted bug holds for the thread running this seed (and
    // the threads its workloads start carry it along).
    strata_engine::faults::plant(options.plant.as_deref());
    let report = match options.engine {
        EngineKind::Mem => run_workloads::<MemEngine>(options),
        EngineKind::Redb => run_workloads::<crate::targets::RedbTarget>(options),
        EngineKind::Postgres => run_workloads::<crate::targets::PostgresTarget>(options),
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
            spent: Vec::new(),
        },
    };
    strata_engine::faults::plant(None);
    report
}

/// Runs the workloads of one seed on engine `E`.
pub fn run_workloads<E: Target>(options: &RunOptions) -> SeedReport {
    let one: Step = match options.workload {
        Workload::Engine => ("engine", run_seed_on::<E>, |_| true),
        Workload::Store => ("store", crate::store::run_store_seed_on::<E>, |_| true),
        Workload::Outbox => ("outbox", crate::outbox::run_outbox_seed_on::<E>, |_| true),
        Workload::Worker => ("worker", crate::worker::run_worker_seed_on::<E>, |_| true),
        Workload::Search => ("search", crate::search::run_search_seed_on::<E>, |_| true),
        Workload::CodeSous => schemas::<E>()[0],
        Workload::UniversalDb => schemas::<E>()[1],
        Workload::ActorKv => schemas::<E>()[2],
        Workload::Nokv => schemas::<E>()[3],
        Workload::AgentMemory => schemas::<E>()[4],
        Workload::Schemas => return run_all(options, schemas::<E>()),
        Workload::Interleave => (
            "interleave",
            crate::interleave::run_interleave_seed_on::<E>,
            |_| true,
        ),
        Workload::All => return run_all(options, full_run::<E>()),
    };
    run_all(options, [one])
}

/// Runs `steps` in order on the seeds each picks, stopping at the first
/// violation, timing each.
#[allow(clippy::disallowed_methods)] // the summary's timing, never part of a run
fn run_all<const N: usize>(options: &RunOptions, steps: [Step; N]) -> SeedReport {
    let mut all: Option<SeedReport> = None;
    for (name, run, on_seed) in steps {
        if !on_seed(options.seed) {
            continue;
        }
        let started = std::time::Instant::now();
        let mut report = run(options);
        report.spent = vec![(name, started.elapsed())];
        let joined = match all {
            None => report,
            Some(before) => join(options, &before, report),
        };
        let stop = joined.violation.is_some();
        all = Some(joined);
        if stop {
            break;
        }
    }
    all.expect("the first workload of a run runs on every seed")
}

/// One workload of a seed on engine `E`: its name, its run, and the
/// seeds it runs on.
type Step = (&'static str, fn(&RunOptions) -> SeedReport, fn(u64) -> bool);

/// The full run ([`Workload::All`]), in order, each on the seeds its
/// condition picks; the run stops at the first violation. The engine's,
/// the store's, the outbox's, its workers' and the five reference
/// systems' workloads run on every seed; the interleaved transactions (threads) on every fourth
/// seed, the second of four; the search index (a tantivy writer with its
/// threads, about a second a seed, the slowest) on every fourth, the first
/// of four. `--workload search` or `interleave` runs one on every seed.
pub fn full_run<E: Target>() -> [Step; 11] {
    let [code_sous, universaldb, actor_kv, nokv, agent_memory] = schemas::<E>();
    [
        ("engine", run_seed_on::<E>, |_| true),
        ("store", crate::store::run_store_seed_on::<E>, |_| true),
        ("outbox", crate::outbox::run_outbox_seed_on::<E>, |_| true),
        ("worker", crate::worker::run_worker_seed_on::<E>, |_| true),
        code_sous,
        universaldb,
        actor_kv,
        nokv,
        agent_memory,
        (
            "interleave",
            crate::interleave::run_interleave_seed_on::<E>,
            |seed| seed % 4 == 2,
        ),
        ("search", crate::search::run_search_seed_on::<E>, |seed| {
            seed.is_multiple_of(4)
        }),
    ]
}

/// The five reference systems' workloads (`--workload schemas`), in order.
fn schemas<E: Target>() -> [Step; 5] {
    [
        (
            "code-sous",
            crate::code_sous::run_code_sous_seed_on::<E>,
            |_| true,
        ),
        (
            "universaldb",
            crate::universaldb::run_universaldb_seed_on::<E>,
            |_| true,
        ),
        (
            "actor-kv",
            crate::actor_kv::run_actor_kv_seed_on::<E>,
            |_| true,
        ),
        ("nokv", crate::nokv::run_nokv_seed_on::<E>, |_| true),
        (
            "agent-memory",
            crate::agent_memory::run_agent_memory_seed_on::<E>,
            |_| true,
        ),
    ]
}

/// Two workloads' reports as one: the later one's tail and violation.
fn join(options: &RunOptions, a: &SeedReport, b: SeedReport) -> SeedReport {
    let mut faults = a.faults;
    faults.add(&b.faults);
    SeedReport {
        seed: options.seed,
        commits: a.commits + b.commits,
        checks: a.checks + b.checks,
        faults,
        trace_hash: a.trace_hash.rotate_left(17) ^ b.trace_hash,
        trace_tail: b.trace_tail,
        violation: b.violation,
        spent: a.spent.iter().copied().chain(b.spent).collect(),
    }
}

/// A workload over a layer (a store, an outbox, a schema) on a faulty
/// engine, for [`drive`].
pub(crate) trait Driven<E: Target> {
    /// The layer the steps use.
    type Layer;
    /// The run's frame: crash odds are drawn from its generator, crashes
    /// recorded in its trace.
    fn frame(&mut self) -> &mut Frame;
    /// The engine under the layer.
    fn engine(layer: &Self::Layer) -> &FaultyEngine<E>;
    /// The layer taken apart, for a restart.
    fn into_engine(layer: Self::Layer) -> FaultyEngine<E>;
    /// The layer on a restarted engine.
    fn reopen(&mut self, engine: FaultyEngine<E>) -> Self::Layer;
    /// What a crash does to the run's knowledge (pending writes become
    /// uncertain).
    fn crashed(&mut self) {}
    /// One step and its checks.
    ///
    /// # Errors
    /// The violation it found.
    fn step(&mut self, layer: &Self::Layer, step: usize) -> Result<(), Violation>;
}

/// The accessors of a [`Driven`] run over a layer built on a store: the
/// run has `rng` and `trace` fields and an `open` method making the layer
/// on an engine; the layer has `store()` and `into_store()`. Used inside
/// `impl<E: Target> Driven<E> for Run`.
macro_rules! driven_on_store {
    ($layer:ty) => {
        type Layer = $layer;

        fn frame(&mut self) -> &mut $crate::run::Frame {
            &mut self.frame
        }

        fn engine(layer: &$layer) -> &FaultyEngine<E> {
            layer.store().engine()
        }

        fn into_engine(layer: $layer) -> FaultyEngine<E> {
            layer.into_store().into_engine()
        }

        fn reopen(&mut self, engine: FaultyEngine<E>) -> $layer {
            self.open(engine)
        }
    };
}
pub(crate) use driven_on_store;

/// The store options of a schema workload: `declared` (the schema's
/// spaces) with a short retry policy, and buffered durability on half the
/// seeds (one draw from `rng`).
pub(crate) fn schema_options(
    rng: &mut SeededRng,
    declared: strata_store::StoreOptions,
) -> strata_store::StoreOptions {
    let options = declared.retry(strata_store::RetryPolicy {
        max_attempts: 3,
        base_backoff_ms: 1,
        max_backoff_ms: 8,
    });
    if rng.chance(0.5) {
        options.durability(strata_engine::Durability::Buffered)
    } else {
        options
    }
}

/// A store on a faulty `engine` with the run's clock and a generator
/// seeded from `rng`.
pub(crate) fn open_store<E: Target>(
    engine: FaultyEngine<E>,
    options: &strata_store::StoreOptions,
    clock: std::sync::Arc<strata_engine::ManualClock>,
    rng: &mut SeededRng,
) -> strata_store::Store<FaultyEngine<E>> {
    strata_store::Store::open_with(
        engine,
        options.clone(),
        clock,
        Box::new(SeededRng::new(rng.next_u64())),
    )
    .unwrap_or_else(|e| unreachable!("the store's keyspaces are declared: {e}"))
}

/// A store on `engine`'s inner engine, without faults, sharing its data:
/// for the setup a workload needs before its faulty steps.
pub(crate) fn quiet_store<'e, E: Target>(
    engine: &'e FaultyEngine<E>,
    options: &strata_store::StoreOptions,
    clock: std::sync::Arc<strata_engine::ManualClock>,
) -> strata_store::Store<&'e E> {
    strata_store::Store::open_with(
        engine.inner(),
        options.clone(),
        clock,
        Box::new(SeededRng::new(0)),
    )
    .unwrap_or_else(|e| unreachable!("the store's keyspaces are declared: {e}"))
}

/// Runs `ops` steps: each either crashes and reopens (at the seed's crash
/// odds, or when a sticky fault stuck the engine) or runs a step. Returns
/// the layer at the end and the first violation.
pub(crate) fn drive<E: Target, D: Driven<E>>(
    d: &mut D,
    layer: D::Layer,
    ops: usize,
) -> (Option<D::Layer>, Option<Violation>) {
    let mut layer = Some(layer);
    for step in 1..=ops {
        let Some(l) = layer.take() else { break };
        if d.frame().crash_due(D::engine(&l).is_stuck()) {
            let e = D::into_engine(l).crash_restart(&mut d.frame().rng);
            d.frame().trace.event(step, "crash and reopen".to_owned());
            d.crashed();
            layer = Some(d.reopen(e));
            continue;
        }
        let outcome = d.step(&l, step);
        layer = Some(l);
        if let Err(v) = outcome {
            return (layer, Some(v));
        }
    }
    (layer, None)
}

#[cfg(test)]
mod tests {
    use super::{Contents, FaultClass, Frame, RunOptions, first_difference};

    /// A frame crashes whenever the engine is stuck, never at a crash rate
    /// of zero, and at the swarm's highest rate (0.06) about 120 times in
    /// 2,000 steps (a binomial's mean; 60 and 200 are beyond 5 standard
    /// deviations).
    #[test]
    fn a_frame_crashes_at_the_swarm_rate_and_whenever_stuck() {
        let (mut none, mut high) = (false, false);
        for seed in 0..64 {
            let options = RunOptions {
                faults: vec![FaultClass::Crash],
                ..RunOptions::new(seed, 10)
            };
            let mut frame = Frame::new(&options, 0, 0);
            let p = frame.faults.p(FaultClass::Crash);
            let crashes = (0..2_000).filter(|_| frame.crash_due(false)).count();
            if p == 0.0 {
                assert_eq!(crashes, 0, "seed {seed}");
                none = true;
            }
            if p >= 0.06 {
                assert!((60..=200).contains(&crashes), "seed {seed}: {crashes}");
                high = true;
            }
            assert!(frame.crash_due(true), "seed {seed}: a stuck engine crashes");
        }
        assert!(none && high, "the seeds cover both rates");
    }

    fn rows(pairs: &[(&str, &str)]) -> Vec<(Vec<u8>, Vec<u8>)> {
        pairs
            .iter()
            .map(|(k, v)| (k.as_bytes().to_vec(), v.as_bytes().to_vec()))
            .collect()
    }

    #[test]
    fn the_first_difference_is_named_with_both_sides() {
        let want: Contents = vec![rows(&[("a", "1"), ("b", "2"), ("d", "4")]), rows(&[])];
        assert_eq!(first_difference(&want.clone(), &want), None);
        let changed = vec![rows(&[("a", "1"), ("b", "x"), ("d", "4")]), rows(&[])];
        assert_eq!(
            first_difference(&changed, &want).as_deref(),
            Some("keyspace #0, key \"b\": \"x\" where \"2\" was expected")
        );
        let extra = vec![
            rows(&[("a", "1"), ("b", "2"), ("c", "3"), ("d", "4")]),
            rows(&[]),
        ];
        assert_eq!(
            first_difference(&extra, &want).as_deref(),
            Some("keyspace #0, key \"c\": \"3\" where no key was expected")
        );
        let missing = vec![rows(&[("a", "1"), ("b", "2")]), rows(&[])];
        assert_eq!(
            first_difference(&missing, &want).as_deref(),
            Some("keyspace #0, key \"d\": missing, \"4\" was expected")
        );
        let other_keyspace = vec![want[0].clone(), rows(&[("q", "\u{1}")])];
        assert_eq!(
            first_difference(&other_keyspace, &want).as_deref(),
            Some("keyspace #1, key \"q\": \"\\x01\" where no key was expected")
        );
    }
}
