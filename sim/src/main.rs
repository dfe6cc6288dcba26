//! The simulation's command line; run it as `cargo xtask sim [OPTIONS]`.
//!
//! ```text
//! --seed S            replay one seed
//! --seeds N | A..B    run seeds 0..N, or A..B (default 0..500)
//! --time T            stop starting new seeds after T seconds
//! --ops K             steps per seed (default 400)
//! --faults LIST       fault classes, comma-separated, or `all` / `none`
//!                     (crash,commit,sticky,unknown,read,sync,clock)
//! --soak MINUTES      new seeds for MINUTES on each engine (or the --engine one), until a
//!                     violation; prints seeds, commits and faults per engine
//! --plant NAME        enable a planted bug (build with `planted-bugs`);
//!                     `--plant all` searches every planted bug (up to 100
//!                     seeds each, or the `--seeds` range) and prints a table
//! --engine mem|redb|rocks|postgres  the engine under test (default mem; redb runs on
//!                     a disk that loses power at every crash; rocks is
//!                     killed and reopened; postgres runs on a throwaway
//!                     server of the process, killed and restarted at every crash)
//! --workload engine|store|outbox|worker|search|code-sous|universaldb|actor-kv|nokv|agent-memory|schemas|interleave|both  the workloads of each seed (default both,
//!                     that is all: raw engine commits against the model,
//!                     store transactions with limits, quota, TTL and chunks,
//!                     outbox producers and consumers, code-sous records,
//!                     UniversalDB transfers, actor KV writes under quota, NoKV metadata
//!                     commands,
//!                     and the search index every
//!                     fourth seed)
//! --check-determinism run every seed twice and compare trace hashes
//! --jobs N            seeds run at once, one thread each (default: twice the
//!                     machine's cores; 1 on postgres, whose server the
//!                     seeds share)
//! --quiet             no progress bar
//! ```
//!
//! Seeds are independent and each is deterministic on its own thread (its
//! planted bug, its clock, its faults are the thread's), so they run in
//! parallel; a failure stops the handing out of new seeds, the seeds
//! below it finish, and the lowest failing seed is the one reported, as a
//! sequential run would.
//!
//! On a violation it prints the seed, the message, the last events of the
//! trace (also written to a file) and a one-line replay command, and exits
//! with status 1.

use std::io::{IsTerminal, Write};
use std::ops::Range;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use strata_sim::{EngineKind, FaultClass, FaultCounters, RunOptions, Workload, run_seed};

/// mimalloc keeps freed memory for the next allocation of its size. With
/// the system allocator, each tantivy segment writer's megabytes (its
/// arenas and hash tables, allocated and zeroed for every commit, and the
/// search workload commits every few changes) were mapped, faulted in and
/// unmapped again: 9.5 million page faults and a fifth of the default
/// run's time in the kernel.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Clone)]
struct Args {
    seeds: Range<u64>,
    time: Option<Duration>,
    ops: usize,
    faults: Vec<FaultClass>,
    faults_text: String,
    plant: Option<String>,
    engine: EngineKind,
    /// Whether `--engine` was given (a soak then runs on that engine only).
    engine_given: bool,
    workload: Workload,
    check: bool,
    quiet: bool,
    soak: Option<Duration>,
    /// Seeds run at once (`--jobs`); `None`: twice the machine's cores.
    jobs: Option<usize>,
}

fn engine_named(name: &str) -> Result<EngineKind, String> {
    Ok(match name {
        "mem" => EngineKind::Mem,
        "redb" => EngineKind::Redb,
        "rocks" => EngineKind::Rocks,
        "postgres" => EngineKind::Postgres,
        other => {
            return Err(format!(
                "unknown engine {other:?} (mem, redb, rocks, postgres)"
            ));
        }
    })
}

fn workload_named(name: &str) -> Result<Workload, String> {
    Ok(match name {
        "engine" => Workload::Engine,
        "store" => Workload::Store,
        "outbox" => Workload::Outbox,
        "worker" => Workload::Worker,
        "code-sous" => Workload::CodeSous,
        "universaldb" => Workload::UniversalDb,
        "actor-kv" => Workload::ActorKv,
        "nokv" => Workload::Nokv,
        "agent-memory" => Workload::AgentMemory,
        "search" => Workload::Search,
        "schemas" => Workload::Schemas,
        "interleave" => Workload::Interleave,
        "both" | "all" => Workload::All,
        other => {
            return Err(format!(
                "unknown workload {other:?} (engine, store, outbox, worker, search, code-sous, universaldb, actor-kv, nokv, agent-memory, schemas, interleave, both)"
            ));
        }
    })
}

fn parse() -> Result<Args, String> {
    let mut args = Args {
        seeds: 0..500,
        time: None,
        ops: 400,
        faults: FaultClass::ALL.to_vec(),
        faults_text: "all".to_owned(),
        plant: None,
        engine: EngineKind::Mem,
        engine_given: false,
        workload: Workload::All,
        check: false,
        quiet: false,
        soak: None,
        jobs: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--seed" => {
                let s: u64 = value()?.parse().map_err(|e| format!("--seed: {e}"))?;
                args.seeds = s..s + 1;
            }
            "--seeds" => {
                let v = value()?;
                args.seeds = match v.split_once("..") {
                    Some((a, b)) => {
                        a.parse().map_err(|e| format!("--seeds: {e}"))?
                            ..b.parse().map_err(|e| format!("--seeds: {e}"))?
                    }
                    None => 0..v.parse().map_err(|e| format!("--seeds: {e}"))?,
                };
            }
            "--time" => {
                let secs: f64 = value()?
                    .trim_end_matches('s')
                    .parse()
                    .map_err(|e| format!("--time: {e}"))?;
                args.time = Some(Duration::from_secs_f64(secs));
            }
            "--ops" => args.ops = value()?.parse().map_err(|e| format!("--ops: {e}"))?,
            "--faults" => {
                let v = value()?;
                args.faults = match v.as_str() {
                    "all" => FaultClass::ALL.to_vec(),
                    "none" => Vec::new(),
                    list => list
                        .split(',')
                        .map(|n| {
                            FaultClass::from_name(n.trim())
                                .ok_or_else(|| format!("unknown fault class {n:?}"))
                        })
                        .collect::<Result<_, _>>()?,
                };
                args.faults_text = v;
            }
            "--plant" => args.plant = Some(value()?),
            "--engine" => {
                args.engine = engine_named(&value()?)?;
                args.engine_given = true;
            }
            "--workload" => args.workload = workload_named(&value()?)?,
            "--check-determinism" => args.check = true,
            "--soak" => {
                let minutes: f64 = value()?.parse().map_err(|e| format!("--soak: {e}"))?;
                if minutes.is_nan() || minutes <= 0.0 || minutes.is_infinite() {
                    return Err("--soak takes a positive number of minutes".to_owned());
                }
                args.soak = Some(Duration::from_secs_f64(minutes * 60.0));
            }
            "--quiet" => args.quiet = true,
            "--jobs" => {
                let n: usize = value()?.parse().map_err(|e| format!("--jobs: {e}"))?;
                if n == 0 {
                    return Err("--jobs: at least 1".to_owned());
                }
                args.jobs = Some(n);
            }
            "-h" | "--help" => return Err(String::new()),
            other => return Err(format!("unknown option {other}")),
        }
    }
    Ok(args)
}

fn replay(args: &Args, seed: u64) -> String {
    let mut line = format!(
        "cargo xtask sim --seed {seed} --ops {} --faults {}",
        args.ops, args.faults_text
    );
    match args.engine {
        EngineKind::Mem => {}
        EngineKind::Redb => line.push_str(" --engine redb"),
        EngineKind::Rocks => line.push_str(" --engine rocks"),
        EngineKind::Postgres => line.push_str(" --engine postgres"),
    }
    match args.workload {
        Workload::All => {}
        Workload::Engine => line.push_str(" --workload engine"),
        Workload::Store => line.push_str(" --workload store"),
        Workload::Outbox => line.push_str(" --workload outbox"),
        Workload::Worker => line.push_str(" --workload worker"),
        Workload::CodeSous => line.push_str(" --workload code-sous"),
        Workload::Schemas => line.push_str(" --workload schemas"),
        Workload::Interleave => line.push_str(" --workload interleave"),
        Workload::UniversalDb => line.push_str(" --workload universaldb"),
        Workload::ActorKv => line.push_str(" --workload actor-kv"),
        Workload::Nokv => line.push_str(" --workload nokv"),
        Workload::AgentMemory => line.push_str(" --workload agent-memory"),
        Workload::Search => line.push_str(" --workload search"),
    }
    if let Some(p) = &args.plant {
        line.push_str(" --plant ");
        line.push_str(p);
    }
    line
}

#[allow(clippy::disallowed_methods)] // the command line times itself; runs do not
fn main() -> ExitCode {
    let args = match parse() {
        Ok(a) => a,
        Err(msg) => {
            if !msg.is_empty() {
                eprintln!("strata-sim: {msg}");
            }
            eprintln!(
                "usage: cargo xtask sim [--seed S | --seeds N|A..B] [--time T] [--ops K] [--faults LIST] [--plant NAME] [--engine mem|redb|rocks|postgres] [--workload engine|store|outbox|worker|search|code-sous|universaldb|actor-kv|nokv|agent-memory|schemas|interleave|both] [--check-determinism] [--soak MINUTES] [--jobs N] [--quiet]"
            );
            return ExitCode::from(2);
        }
    };
    if let Some(code) = unsupported(&args) {
        return code;
    }
    #[cfg(feature = "planted-bugs")]
    if args.plant.as_deref() == Some("all") {
        return plant_all(&args);
    }
    if let Some(length) = args.soak {
        return soak(&args, length);
    }
    let started = Instant::now();
    // A progress bar only on a terminal; logs get the summary alone.
    let show_progress = !args.quiet && std::io::stderr().is_terminal();
    let total = args.seeds.end.saturating_sub(args.seeds.start);
    let (mut seeds, mut commits, mut checks) = (0u64, 0u64, 0u64);
    let mut faults = FaultCounters::default();
    let mut spent = Spent::default();
    let mut last_draw = Instant::now();
    // The lowest failing seed: its report, and the second run's trace hash
    // when that is what failed.
    let mut failed: Option<Finished> = None;
    run_seeds(&args, started, |done| {
        seeds += 1;
        commits += done.report.commits;
        checks += done.report.checks + u64::from(done.again.is_some());
        faults.add(&done.report.faults);
        spent.add(&done.report.spent);
        if done.failed()
            && failed
                .as_ref()
                .is_none_or(|f| done.report.seed < f.report.seed)
        {
            failed = Some(done);
            return;
        }
        if show_progress && last_draw.elapsed() > Duration::from_millis(100) {
            last_draw = Instant::now();
            let done = usize::try_from(seeds * 30 / total.max(1))
                .unwrap_or(30)
                .min(30);
            eprint!(
                "\r[{}{}] {seeds}/{total} seeds, {commits} commits",
                "#".repeat(done),
                "-".repeat(30 - done)
            );
            let _ = std::io::stderr().flush();
        }
    });
    if let Some(done) = failed {
        let (seed, report) = (done.report.seed, &done.report);
        if let Some(v) = &report.violation {
            let path = std::env::temp_dir().join(format!("strata-sim-seed-{seed}.trace"));
            let written = std::fs::write(&path, report.trace_tail.join("\n") + "\n").is_ok();
            eprintln!();
            println!("VIOLATION at seed {seed}, step {}: {}", v.step, v.message);
            println!("last events of the trace:");
            for line in &report.trace_tail {
                println!("  {line}");
            }
            if written {
                println!("trace written to {}", path.display());
            }
            println!("replay: {}", replay(&args, seed));
        } else if let Some(again) = done.again {
            eprintln!(
                "\nstrata-sim: seed {seed} is not deterministic: trace hashes {:#018x} and {again:#018x}",
                report.trace_hash
            );
        }
        return ExitCode::FAILURE;
    }
    if show_progress {
        eprintln!(
            "\r[{}] {seeds}/{total} seeds, {commits} commits",
            "#".repeat(30)
        );
    }
    print_summary(
        &args,
        seeds,
        commits,
        checks,
        &faults,
        started.elapsed().as_secs_f64(),
    );
    spent.print();
    println!("sim: {seeds} passed, 0 failed");
    ExitCode::SUCCESS
}

/// Each workload's seeds and time over a run, in the order they first
/// ran.
#[derive(Default)]
struct Spent(Vec<(&'static str, u64, Duration)>);

impl Spent {
    fn add(&mut self, spent: &[(&'static str, Duration)]) {
        for &(name, time) in spent {
            match self.0.iter_mut().find(|(n, _, _)| *n == name) {
                Some((_, seeds, total)) => {
                    *seeds += 1;
                    *total += time;
                }
                None => self.0.push((name, 1, time)),
            }
        }
    }

    /// The table of seeds per second of one thread, per workload (the
    /// whole run's rate is the summary's, over every job).
    #[allow(clippy::cast_precision_loss)]
    fn print(&self) {
        println!("  per workload             seeds  thread-seconds  seeds/s (one thread)");
        for (name, seeds, total) in &self.0 {
            let secs = total.as_secs_f64();
            println!(
                "    {name:<22} {seeds:>5} {secs:>15.1} {:>21.1}",
                *seeds as f64 / secs.max(1e-9)
            );
        }
    }
}

/// One seed's run, and the trace hash of its second run with
/// `--check-determinism`.
struct Finished {
    report: strata_sim::SeedReport,
    again: Option<u64>,
}

impl Finished {
    fn failed(&self) -> bool {
        self.report.violation.is_some() || self.again.is_some_and(|h| h != self.report.trace_hash)
    }
}

/// Runs the seeds of `args` on `--jobs` threads, each taking the next
/// seed in order, and hands each finished seed to `each` on this thread
/// (in the order they finish). After a failure no new seed starts, so every seed below a
/// failing one has run; `--time` stops new seeds likewise.
#[allow(clippy::disallowed_methods)] // the command line times itself
fn run_seeds(args: &Args, started: Instant, mut each: impl FnMut(Finished)) {
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    let total = args.seeds.end.saturating_sub(args.seeds.start);
    let cores = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
    let jobs = match args.engine {
        // The seeds would share the process's one server.
        EngineKind::Postgres => 1,
        // Seeds also wait (the interleaved clients hand over one at a
        // time, tantivy's writer threads, page faults of its arenas): two
        // a core keep the cores busy (500 seeds on 2 cores: 83.9 s with 2
        // jobs, 74.5 s with 4).
        _ => args.jobs.unwrap_or(2 * cores),
    };
    let jobs = u64::try_from(jobs).unwrap_or(1).clamp(1, total.max(1));
    let next = AtomicU64::new(args.seeds.start);
    let stop = AtomicBool::new(false);
    let (to_main, finished) = std::sync::mpsc::channel();
    std::thread::scope(|scope| {
        for _ in 0..jobs {
            let to_main = to_main.clone();
            let (next, stop) = (&next, &stop);
            scope.spawn(move || {
                loop {
                    if stop.load(Ordering::SeqCst)
                        || args.time.is_some_and(|t| started.elapsed() >= t)
                    {
                        break;
                    }
                    let seed = next.fetch_add(1, Ordering::SeqCst);
                    if seed >= args.seeds.end {
                        break;
                    }
                    let options = RunOptions {
                        seed,
                        ops: args.ops,
                        faults: args.faults.clone(),
                        plant: args.plant.clone(),
                        engine: args.engine,
                        workload: args.workload,
                    };
                    let report = run_seed(&options);
                    let again = args.check.then(|| run_seed(&options).trace_hash);
                    let done = Finished { report, again };
                    if done.failed() {
                        stop.store(true, Ordering::SeqCst);
                    }
                    if to_main.send(done).is_err() {
                        break;
                    }
                }
            });
        }
        drop(to_main);
        for done in finished {
            each(done);
        }
    });
}

/// `--soak MINUTES`: new seeds (from a base drawn from the wall clock, so
/// each soak covers seeds no earlier one did) on every embedded engine of
/// this build (or the one `--engine` names), MINUTES each, stopping at the
/// first violation.
#[allow(clippy::disallowed_methods, clippy::disallowed_types)] // the command line times itself
fn soak(args: &Args, length: Duration) -> ExitCode {
    let base = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
        .wrapping_mul(1_000_003);
    let mut engines = vec![EngineKind::Mem, EngineKind::Redb];
    if cfg!(feature = "rocks") {
        engines.push(EngineKind::Rocks);
    }
    if args.engine_given {
        engines = vec![args.engine];
    }
    for engine in engines {
        let started = Instant::now();
        let (mut seeds, mut commits, mut faults) = (0u64, 0u64, FaultCounters::default());
        let mut seed = base;
        while started.elapsed() < length {
            let options = RunOptions {
                seed,
                ops: args.ops,
                faults: args.faults.clone(),
                plant: args.plant.clone(),
                engine,
                workload: args.workload,
            };
            let report = run_seed(&options);
            seeds += 1;
            commits += report.commits;
            faults.add(&report.faults);
            if let Some(v) = &report.violation {
                println!("VIOLATION at seed {seed}, step {}: {}", v.step, v.message);
                let mut replay_args = Args {
                    engine,
                    ..args.clone()
                };
                replay_args.soak = None;
                println!("replay: {}", replay(&replay_args, seed));
                return ExitCode::FAILURE;
            }
            seed = seed.wrapping_add(1);
        }
        let total: u64 = FaultClass::ALL.iter().map(|c| faults.get(*c)).sum();
        println!(
            "soak {engine:?}: {seeds} seeds from {base}, {commits} commits, {total} faults, 0 violations in {:.0} s",
            started.elapsed().as_secs_f64()
        );
    }
    println!("sim: soak passed, 0 failed");
    ExitCode::SUCCESS
}

/// An exit code when the options need a feature this build lacks.
fn unsupported(args: &Args) -> Option<ExitCode> {
    if args.engine == EngineKind::Rocks && !cfg!(feature = "rocks") {
        eprintln!("strata-sim: --engine rocks needs the rocks feature (cargo xtask sim adds it)");
        return Some(ExitCode::from(2));
    }
    if args.plant.is_some() && !cfg!(feature = "planted-bugs") {
        eprintln!("strata-sim: --plant needs the planted-bugs feature (cargo xtask sim adds it)");
        return Some(ExitCode::from(2));
    }
    #[cfg(feature = "planted-bugs")]
    if let Some(name) = args.plant.as_deref().filter(|n| *n != "all") {
        match strata_sim::planted::catalogue()
            .iter()
            .find(|b| b.name == name)
        {
            None => {
                eprintln!(
                    "strata-sim: no planted bug is named {name} in this build (the RocksDB \
                     engine's need --engine rocks)"
                );
                return Some(ExitCode::from(2));
            }
            Some(bug) if bug.engine != EngineKind::Mem && bug.engine != args.engine => {
                eprintln!(
                    "strata-sim: {name} is planted in the {:?} engine: add --engine {}",
                    bug.engine,
                    format!("{:?}", bug.engine).to_lowercase()
                );
                return Some(ExitCode::from(2));
            }
            Some(_) => {}
        }
    }
    None
}

/// `--plant all`: searches each planted bug from the first seed of
/// `--seeds` for up to 100 seeds (or the range given), and prints a table.
#[cfg(feature = "planted-bugs")]
#[allow(clippy::disallowed_methods)] // the command line times itself; runs do not
fn plant_all(args: &Args) -> ExitCode {
    use strata_sim::planted::{catalogue, hunt};
    let planted = catalogue();
    let within = args.seeds.end.saturating_sub(args.seeds.start).max(100);
    println!("| bug | workload | caught | first seed | seeds run | seconds |");
    println!("|---|---|---|---|---|---|");
    let mut missed = 0;
    for bug in &planted {
        let started = Instant::now();
        let h = hunt(*bug, args.seeds.start, within, args.ops);
        let secs = started.elapsed().as_secs_f64();
        if h.caught_at.is_none() {
            missed += 1;
        }
        println!(
            "| `{}` | {:?} | {} | {} | {} | {secs:.2} |",
            bug.name,
            bug.workload,
            if h.caught_at.is_some() { "yes" } else { "NO" },
            h.caught_at
                .map_or_else(|| "-".to_owned(), |s| s.to_string()),
            h.seeds
        );
    }
    println!(
        "planted bugs: {} caught, {missed} missed (within {within} seeds of {} steps)",
        planted.len() - missed,
        args.ops
    );
    if missed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// The closing table.
fn print_summary(
    args: &Args,
    seeds: u64,
    commits: u64,
    checks: u64,
    faults: &FaultCounters,
    secs: f64,
) {
    #[allow(clippy::cast_precision_loss)]
    let (per_seed, per_commit) = (
        seeds as f64 / secs.max(1e-9),
        commits as f64 / secs.max(1e-9),
    );
    println!("simulation summary ({secs:.1} s)");
    println!("  {:<24} {seeds}", "seeds");
    println!("  {:<24} {commits}", "simulated commits");
    println!("  {:<24} {checks}", "checks performed");
    for class in FaultClass::ALL {
        println!(
            "  {:<24} {}",
            format!("faults: {}", class.name()),
            faults.get(class)
        );
    }
    println!("  {:<24} {per_seed:.1}", "seeds per second");
    println!("  {:<24} {per_commit:.0}", "commits per second");
    if args.check {
        println!("  determinism              every seed replayed with an equal trace hash");
    }
}
