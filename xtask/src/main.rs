//! `cargo xtask`: the one entry point for checking Strata.
//!
//! `cargo xtask test` runs, in order and stopping at the first failure:
//! a format check, clippy with warnings denied on every target, the whole
//! test suite under cargo-nextest, and the doctests. It prints each command
//! before running it and ends with one summary line of the form
//! `summary: N passed, M failed`, counting nextest tests and doctests.
//!
//! It depends on nothing but std on purpose: it must build in seconds on a
//! fresh machine before anything else has been compiled.

mod api;
mod bench;
mod mutants;
mod prereq;
mod release;
mod tidy;

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Command, ExitCode, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::Instant;

const USAGE: &str = "\
usage: cargo xtask <command>

commands:
  test    fmt check, clippy -D warnings (all targets; the sim with RocksDB too), cargo doc -D warnings, the API
          snapshot, the feature check, cargo package (no verification),
          cargo nextest run --workspace,
          doctests, the planted-bug tests, a short decoder fuzz, and short fixed-seed
          simulations in the release build `sim` uses (seeds 20..120; on
          redb 10..50; the engine, store and schema workloads on PostgreSQL);
          starts a throwaway PostgreSQL server the tests share (installs
          postgresql-15 with apt when missing and possible);
          ends with `summary: N passed, M failed`
  sim     the deterministic simulation (release build); options are passed on:
          --seed S | --seeds N|A..B, --time T, --ops K, --faults LIST,
          --plant NAME|all (all: every planted bug, a table), --engine mem|redb|rocks|postgres,
          --workload engine|store|outbox|worker|search|both,
          --check-determinism, --soak MINUTES, --quiet
          (`--engine rocks` builds RocksDB in release mode once: ~15 minutes)
  fuzz    the decoders (tuple, raw and text keys, envelopes, chunked values, search
          change entries) against
          mutated valid encodings and random bytes, release build, on stable Rust:
          --iterations N (per decoder, default 1,000,000), --seed S
  corrupt real database files damaged at random (bits flipped, a page zeroed, a
          file cut short) on redb and RocksDB, then opened, checked with the
          engine's integrity check and read: 0 panics and 0 wrong reads after
          the check, or it fails; a table of the outcomes
          (--databases N per engine, default 1,000; --seed S; --engine redb|rocks)
  bench   every crate's benchmark, one after another, then one markdown table of
          the ours/raw time ratios (median and min–max of interleaved rounds) with
          the machine's load; the interleaved A/B reports only, criterion's own
          measurements too with --full; -p PACKAGE (repeatable) for some crates;
          the table is also written to $CARGO_TARGET_DIR/strata-bench/report.md
          (builds RocksDB in release mode once: ~15 minutes)
  mutants cargo-mutants over every library crate (or -p CRATE, repeatable), the
          same way every time: a copy of the tree, mutants in source order, the
          crate's tests under nextest (for strata-engine and the testkit, the
          redb engine's too), built in $STRATA_MUTANTS_TARGET (default
          $HOME/.cache/strata-mutants-target; RocksDB is built there once);
          --shard K/N for one slice, --timeout SECONDS (default: cargo-mutants' own,
          from the unmutated tests' time; for a crate another crate's tests
          also cover, no baseline and 600), --since REV for only the lines
          changed since a commit (cargo-mutants' --in-diff); ends with a
          table of caught, timed-out, missed and unviable mutants per crate and
          the missed ones, also written to <target>/mutants-out/report.md;
          installs cargo-mutants when missing. Hours per crate: not in `test`
  api     the public API of every published crate (from `cargo doc`'s output,
          built first as the `doc` step builds it) against the snapshot
          committed under api/ (also a step of `test`); --bless writes the
          snapshot
  features
          each published crate resolves with no features and each feature
          alone, and only the RocksDB engine and the tool pull in RocksDB
          (`cargo tree`, no build; also a step of `test`)
  release-check
          before a release, not in CI (about an hour): each published crate's
          tests alone, with its default features and with each feature on its
          own; then every published crate packaged and built from its package
  tidy    the architecture's rules: dependency layering of the crates, doc links and
          paths that exist inside the repository, no doc comment that only repeats
          its item's name, typed errors, file lengths, planted bugs as fault
          points listed in the one catalogue (also the first step of `test`)
  prereqs whether each thing the build needs beyond cargo (libclang, cargo-nextest,
          PostgreSQL's server programs, OpenSSL's headers and pkg-config)
          is present, checked as the build will load it; installs nothing
          (`test` and `sim` install what is missing when they can)
  help    this text
";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("test") => match test(&args[1..]) {
            Ok(()) => ExitCode::SUCCESS,
            Err(failure) => {
                eprintln!("xtask: {failure}");
                ExitCode::FAILURE
            }
        },
        Some("sim") => sim(&args[1..]),
        Some("bench") => match bench::run(&args[1..]) {
            Ok(()) => ExitCode::SUCCESS,
            Err(why) => {
                eprintln!("xtask: {why}");
                ExitCode::FAILURE
            }
        },
        Some("fuzz") => fuzz(&args[1..]),
        Some("mutants") => match mutants::run(&args[1..]) {
            Ok(()) => ExitCode::SUCCESS,
            Err(why) => {
                eprintln!("xtask: {why}");
                ExitCode::FAILURE
            }
        },
        Some("corrupt") => corrupt(&args[1..]),
        Some("api") => {
            match build_docs().and_then(|()| api::check(args.iter().any(|a| a == "--bless"))) {
                Ok(()) => ExitCode::SUCCESS,
                Err(why) => {
                    eprintln!("xtask: {why}");
                    ExitCode::FAILURE
                }
            }
        }
        Some("features") => match release::features_check() {
            Ok(()) => ExitCode::SUCCESS,
            Err(why) => {
                eprintln!("xtask: {why}");
                ExitCode::FAILURE
            }
        },
        Some("release-check") => match release::run(&args[1..]) {
            Ok(()) => ExitCode::SUCCESS,
            Err(why) => {
                eprintln!("xtask: {why}");
                ExitCode::FAILURE
            }
        },
        Some("tidy") => match tidy_step() {
            Ok(()) => ExitCode::SUCCESS,
            Err(why) => {
                eprintln!("xtask: {why}");
                ExitCode::FAILURE
            }
        },
        Some("prereqs") => {
            for p in prereq::ALL {
                let state = if (p.present)() { "present" } else { "missing" };
                println!("{:<14} {state:<8} (needed by {})", p.name, p.needed_by);
            }
            ExitCode::SUCCESS
        }
        Some("help" | "--help" | "-h") => {
            print!("{USAGE}");
            ExitCode::SUCCESS
        }
        Some(other) => {
            eprintln!("xtask: unknown command `{other}`\n\n{USAGE}");
            ExitCode::from(2)
        }
        None => {
            eprint!("{USAGE}");
            ExitCode::from(2)
        }
    }
}

/// Counts of tests gathered from the runners' own closing lines.
#[derive(Default, Debug, Clone, Copy)]
struct Counts {
    passed: u64,
    failed: u64,
}

impl Counts {
    fn add(&mut self, other: Counts) {
        self.passed += other.passed;
        self.failed += other.failed;
    }
}

type Parser = fn(&str) -> Option<Counts>;

/// The steps of `cargo xtask test`, in order: name, cargo arguments, and
/// the parser of the runner's closing count line.
const STEPS: &[(&str, &[&str], Parser)] = &[
    ("fmt", &["fmt", "--all", "--", "--check"], no_counts),
    (
        "clippy",
        &[
            "clippy",
            "--workspace",
            "--all-targets",
            "--locked",
            "--",
            "-D",
            "warnings",
        ],
        no_counts,
    ),
    // The simulation's RocksDB targets and `strata-corrupt` sit behind
    // its `rocks` feature (the RocksDB build is the one above, shared).
    (
        "clippy sim rocks",
        &[
            "clippy",
            "-p",
            "strata-sim",
            "--features",
            "rocks,planted-bugs",
            "--all-targets",
            "--locked",
            "--",
            "-D",
            "warnings",
        ],
        no_counts,
    ),
    // API docs with warnings denied: broken intra-doc links, links to
    // private items (missing docs are clippy's `missing_docs`).
    ("doc", DOC_ARGS, no_counts),
    // The public API against its committed snapshot, from the docs just
    // built (`cargo xtask api`).
    (
        "api",
        &["run", "--quiet", "--locked", "-p", "xtask", "--", "api"],
        no_counts,
    ),
    // Each published crate resolves with no features and with each
    // feature alone, and only the crates that ask for RocksDB pull it in
    // (`cargo tree`: nothing is built; the builds are `release-check`'s).
    (
        "features",
        &[
            "run", "--quiet", "--locked", "-p", "xtask", "--", "features",
        ],
        no_counts,
    ),
    // Every published crate packages (metadata, versioned path
    // dependencies, file lists); building from the packages is
    // `release-check`'s, so RocksDB is not built again here.
    (
        "package",
        &[
            "package",
            "--workspace",
            "--exclude",
            "strata-sim",
            "--exclude",
            "xtask",
            "--no-verify",
            "--allow-dirty",
            "--locked",
        ],
        no_counts,
    ),
    (
        "nextest",
        &[
            "nextest",
            "run",
            "--workspace",
            "--locked",
            "--no-fail-fast",
        ],
        parse_nextest,
    ),
    (
        "doctests",
        &["test", "--doc", "--workspace", "--locked"],
        parse_libtest,
    ),
    // The planted bugs are built in only for this test and `--plant` runs;
    // the same build runs the simulation's seeds on RocksDB (feature
    // `rocks`).
    (
        "planted bugs",
        &[
            "nextest",
            "run",
            "--locked",
            "-p",
            "strata-sim",
            "--features",
            "planted-bugs,rocks",
            "-E",
            "test(planted) | test(on_rocksdb)",
        ],
        parse_nextest,
    ),
    // The simulation's steps run the build `cargo xtask sim` and
    // `cargo xtask fuzz` use (release, no RocksDB): built once here, the
    // main job after this run builds nothing again, and the seeds run
    // about four times faster than a debug build's.
    (
        "sim",
        &[
            "run",
            "--release",
            "--quiet",
            "--locked",
            "-p",
            "strata-sim",
            "--",
            "--seeds",
            "20..120",
            "--ops",
            "400",
            "--quiet",
        ],
        no_counts,
    ),
    (
        "fuzz",
        &[
            "run",
            "--release",
            "--quiet",
            "--locked",
            "-p",
            "strata-sim",
            "--bin",
            "strata-fuzz",
            "--",
            "--iterations",
            "20000",
        ],
        no_counts,
    ),
    (
        "sim redb",
        &[
            "run",
            "--release",
            "--quiet",
            "--locked",
            "-p",
            "strata-sim",
            "--",
            "--engine",
            "redb",
            "--seeds",
            "10..50",
            "--ops",
            "400",
            "--quiet",
        ],
        no_counts,
    ),
    // A real server, killed and restarted at each crash (about 0.2 s).
    (
        "sim postgres engine",
        &[
            "run",
            "--release",
            "--quiet",
            "--locked",
            "-p",
            "strata-sim",
            "--",
            "--engine",
            "postgres",
            "--workload",
            "engine",
            "--seeds",
            "0..10",
            "--ops",
            "400",
            "--quiet",
        ],
        no_counts,
    ),
    (
        "sim postgres store",
        &[
            "run",
            "--release",
            "--quiet",
            "--locked",
            "-p",
            "strata-sim",
            "--",
            "--engine",
            "postgres",
            "--workload",
            "store",
            "--seeds",
            "0..4",
            "--ops",
            "400",
            "--quiet",
        ],
        no_counts,
    ),
    (
        "sim postgres schemas",
        &[
            "run",
            "--release",
            "--quiet",
            "--locked",
            "-p",
            "strata-sim",
            "--",
            "--engine",
            "postgres",
            "--workload",
            "schemas",
            "--seeds",
            "0..1",
            "--ops",
            "400",
            "--quiet",
        ],
        no_counts,
    ),
    (
        "sim postgres interleave",
        &[
            "run",
            "--release",
            "--quiet",
            "--locked",
            "-p",
            "strata-sim",
            "--",
            "--engine",
            "postgres",
            "--workload",
            "interleave",
            "--seeds",
            "0..1",
            "--ops",
            "400",
            "--quiet",
        ],
        no_counts,
    ),
];

fn no_counts(_: &str) -> Option<Counts> {
    None
}

fn test(args: &[String]) -> Result<(), String> {
    if let Some(extra) = args.first() {
        return Err(format!(
            "`cargo xtask test` takes no arguments, got `{extra}`"
        ));
    }
    let started = Instant::now();
    let mut total = Counts::default();
    let mut timings = Vec::new();

    let t = Instant::now();
    tidy_step().inspect_err(|_| println!("summary: 0 passed, 1 failed"))?;
    timings.push(format!("tidy {:.0}s", t.elapsed().as_secs_f64()));

    let mut step = |name: &'static str, args: &[&str], parse: fn(&str) -> Option<Counts>| {
        let t = Instant::now();
        let result = run_cargo(args, parse);
        timings.push(format!("{name} {:.0}s", t.elapsed().as_secs_f64()));
        match result {
            Ok(counts) => {
                total.add(counts);
                Ok(())
            }
            Err((counts, why)) => {
                total.add(counts);
                println!(
                    "summary: {} passed, {} failed",
                    total.passed,
                    total.failed.max(1)
                );
                Err(format!("step `{name}` failed: {why}"))
            }
        }
    };

    // The PostgreSQL server the tests share, from the nextest step on;
    // stopped when this function returns (also on failure).
    let mut postgres: Option<TestPostgres> = None;
    for (name, args, parse) in STEPS {
        if *name == "clippy" {
            // The first step that builds RocksDB's bindings, and OpenSSL's.
            prereq::ensure(&prereq::LIBCLANG)?;
            prereq::ensure(&prereq::LIBSSL)?;
            prereq::ensure(&prereq::PKG_CONFIG)?;
        }
        if *name == "nextest" {
            prereq::ensure(&prereq::NEXTEST)?;
            prereq::ensure(&prereq::POSTGRES)?;
            postgres = Some(TestPostgres::start()?);
        }
        step(name, args, *parse)?;
    }
    drop(postgres);

    println!(
        "xtask test: all steps passed in {:.0}s ({})",
        started.elapsed().as_secs_f64(),
        timings.join(", ")
    );
    println!("summary: {} passed, {} failed", total.passed, total.failed);
    Ok(())
}

/// Runs `cargo` with `cmd` and then `args` (the user's, passed on),
/// printing the command first; success as cargo's.
fn pass_to_cargo<'a>(mut cmd: Vec<&'a str>, args: &'a [String]) -> ExitCode {
    cmd.extend(args.iter().map(String::as_str));
    println!("$ cargo {}", cmd.join(" "));
    let _ = std::io::stdout().flush();
    match Command::new(cargo()).args(&cmd).status() {
        Ok(status) if status.success() => ExitCode::SUCCESS,
        Ok(_) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("xtask: could not start cargo: {e}");
            ExitCode::FAILURE
        }
    }
}

/// `cargo xtask fuzz ARGS`: the decoder fuzzer, in a release build.
fn fuzz(args: &[String]) -> ExitCode {
    let cmd = vec![
        "run",
        "--release",
        "--quiet",
        "-p",
        "strata-sim",
        "--bin",
        "strata-fuzz",
        "--",
    ];
    pass_to_cargo(cmd, args)
}

/// `cargo xtask corrupt`: damaged database files on redb and RocksDB
/// (`strata-corrupt`). Built in the dev profile on purpose: the RocksDB
/// the tests built is reused, never compiled a second time.
fn corrupt(args: &[String]) -> ExitCode {
    // RocksDB's bindings, and the sim links the PostgreSQL test server's
    // client (OpenSSL-free, but pkg-config and libssl for its TLS crate).
    if let Err(e) = prereq::ensure(&prereq::LIBCLANG)
        .and_then(|()| prereq::ensure(&prereq::LIBSSL))
        .and_then(|()| prereq::ensure(&prereq::PKG_CONFIG))
    {
        eprintln!("xtask: {e}");
        return ExitCode::FAILURE;
    }
    let cmd = vec![
        "run",
        "--quiet",
        "--locked",
        "-p",
        "strata-sim",
        "--features",
        "rocks",
        "--bin",
        "strata-corrupt",
        "--",
    ];
    pass_to_cargo(cmd, args)
}

/// `cargo xtask tidy`: every rule of [`tidy`] over the repository.
fn tidy_step() -> Result<(), String> {
    println!("$ cargo xtask tidy");
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .ok_or("xtask has no parent directory")?;
    let findings = tidy::run(root);
    for f in &findings {
        println!("tidy: {f}");
    }
    if findings.is_empty() {
        println!(
            "tidy: dependency layering, doc paths, doc comments, file lengths, error types and fault points are clean"
        );
        Ok(())
    } else {
        Err(format!("tidy found {} problem(s)", findings.len()))
    }
}

/// `cargo xtask sim ARGS`: the simulation in a release build, with the
/// planted-bugs feature when `--plant` is given.
fn sim(args: &[String]) -> ExitCode {
    let mut cmd = vec!["run", "--release", "--quiet", "-p", "strata-sim"];
    if args.iter().any(|a| a == "--plant") {
        cmd.extend(["--features", "planted-bugs"]);
    }
    let rocks_named = args
        .windows(2)
        .any(|w| w[0] == "--engine" && w[1] == "rocks");
    let soak_everywhere =
        args.iter().any(|a| a == "--soak") && !args.iter().any(|a| a == "--engine");
    if rocks_named || soak_everywhere {
        if let Err(why) = prereq::ensure(&prereq::LIBCLANG) {
            eprintln!("xtask: {why}");
            return ExitCode::FAILURE;
        }
        cmd.extend(["--features", "rocks"]);
    }
    let postgres_named = args
        .windows(2)
        .any(|w| w[0] == "--engine" && w[1] == "postgres");
    if postgres_named && let Err(why) = prereq::ensure(&prereq::POSTGRES) {
        eprintln!("xtask: {why}");
        return ExitCode::FAILURE;
    }
    cmd.push("--");
    cmd.extend(args.iter().map(String::as_str));
    println!("$ cargo {}", cmd.join(" "));
    let _ = std::io::stdout().flush();
    match Command::new(cargo()).args(&cmd).status() {
        Ok(status) if status.success() => ExitCode::SUCCESS,
        Ok(status) => ExitCode::from(u8::try_from(status.code().unwrap_or(1)).unwrap_or(1)),
        Err(e) => {
            eprintln!("xtask: could not start cargo: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The environment every cargo command of this run gets (the shared
/// PostgreSQL server's socket, once it runs).
static SHARED_ENV: std::sync::Mutex<Vec<(String, String)>> = std::sync::Mutex::new(Vec::new());

/// The throwaway PostgreSQL server the test processes of one run share
/// (each test takes its own database on it): `strata-test-postgres` runs
/// it until its standard input closes, which dropping this does.
struct TestPostgres {
    child: std::process::Child,
}

impl TestPostgres {
    const SOCKET_ENV: &str = "STRATA_PG_TEST_SOCKET";

    fn start() -> Result<Self, String> {
        let args = [
            "run",
            "--quiet",
            "--locked",
            "-p",
            "strata-engine-postgres",
            "--features",
            "test-server",
            "--bin",
            "strata-test-postgres",
        ];
        println!("$ cargo {}", args.join(" "));
        let mut child = Command::new(cargo())
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| format!("could not start cargo: {e}"))?;
        let mut line = String::new();
        let read = child
            .stdout
            .take()
            .map(|out| BufReader::new(out).read_line(&mut line));
        let dir = line.trim().to_owned();
        if !matches!(read, Some(Ok(n)) if n > 0) || dir.is_empty() {
            let _ = child.wait();
            return Err("the test PostgreSQL server did not start (its error is above)".to_owned());
        }
        println!("xtask: test PostgreSQL server on socket directory {dir}");
        SHARED_ENV
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push((Self::SOCKET_ENV.to_owned(), dir));
        Ok(Self { child })
    }
}

impl Drop for TestPostgres {
    fn drop(&mut self) {
        SHARED_ENV
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .retain(|(k, _)| k != Self::SOCKET_ENV);
        // Closing its standard input stops the server.
        drop(self.child.stdin.take());
        let _ = self.child.wait();
    }
}

/// The `cargo doc` of the `doc` step: API docs with warnings denied, the
/// pages `api` reads.
const DOC_ARGS: &[&str] = &[
    "doc",
    "--no-deps",
    "--workspace",
    "--locked",
    "--config",
    "build.rustdocflags=[\"-D\", \"warnings\"]",
];

/// Builds the API docs `api` reads (as the `doc` step does, so nothing is
/// built again after it): an API read from docs older than the code
/// would be compared, or blessed, wrong.
fn build_docs() -> Result<(), String> {
    let status = std::process::Command::new(cargo())
        .args(DOC_ARGS)
        .arg("--quiet")
        .status()
        .map_err(|e| format!("could not run cargo doc: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!(
            "cargo doc failed ({status}): the API is read from its pages"
        ))
    }
}

pub(crate) fn cargo() -> String {
    std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned())
}

/// Runs `cargo ARGS`, echoing its output line by line while `parse` looks for
/// a closing count line. Returns the counts found, or the counts and a reason
/// on failure.
fn run_cargo(args: &[&str], parse: fn(&str) -> Option<Counts>) -> Result<Counts, (Counts, String)> {
    println!("$ cargo {}", args.join(" "));
    let _ = std::io::stdout().flush();
    let env = SHARED_ENV
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .clone();
    let mut child = Command::new(cargo())
        .args(args)
        .envs(env)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| (Counts::default(), format!("could not start cargo: {e}")))?;

    let (tx, rx) = mpsc::channel::<Counts>();
    let out = child
        .stdout
        .take()
        .map(|s| echo(s, false, parse, tx.clone()));
    let err = child.stderr.take().map(|s| echo(s, true, parse, tx));
    let status = child
        .wait()
        .map_err(|e| (Counts::default(), format!("could not wait for cargo: {e}")))?;
    for handle in [out, err].into_iter().flatten() {
        let _ = handle.join();
    }
    let mut counts = Counts::default();
    for c in rx.try_iter() {
        counts.add(c);
    }
    if status.success() {
        Ok(counts)
    } else {
        Err((
            counts,
            format!("`cargo {}` exited with {status}", args.join(" ")),
        ))
    }
}

fn echo<R: Read + Send + 'static>(
    stream: R,
    to_stderr: bool,
    parse: fn(&str) -> Option<Counts>,
    tx: mpsc::Sender<Counts>,
) -> thread::JoinHandle<()> {
    thread::spawn(move || {
        let reader = BufReader::new(stream);
        for line in reader.split(b'\n').map_while(Result::ok) {
            let line = String::from_utf8_lossy(&line);
            if to_stderr {
                eprintln!("{line}");
            } else {
                println!("{line}");
            }
            if let Some(c) = parse(&line) {
                let _ = tx.send(c);
            }
        }
    })
}

/// nextest closes with `Summary [ 1.234s] 12 tests run: 11 passed, 1 failed, 0 skipped`.
fn parse_nextest(line: &str) -> Option<Counts> {
    let line = line.trim_start();
    if !line.starts_with("Summary") {
        return None;
    }
    let rest = line.split_once("run:")?.1;
    Some(Counts {
        passed: number_before(rest, "passed").unwrap_or(0),
        failed: number_before(rest, "failed").unwrap_or(0)
            + number_before(rest, "timed out").unwrap_or(0),
    })
}

/// libtest closes each binary with `test result: ok. 3 passed; 0 failed; ...`.
fn parse_libtest(line: &str) -> Option<Counts> {
    let rest = line.trim_start().strip_prefix("test result:")?;
    Some(Counts {
        passed: number_before(rest, "passed")?,
        failed: number_before(rest, "failed").unwrap_or(0),
    })
}

/// The integer written just before `word` in `text`, as in `12 passed`.
fn number_before(text: &str, word: &str) -> Option<u64> {
    let at = text.find(word)?;
    text[..at]
        .trim_end()
        .rsplit(|c: char| !c.is_ascii_digit())
        .next()?
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_nextest_summary() {
        let c =
            parse_nextest("     Summary [   2.043s] 57 tests run: 55 passed, 2 failed, 1 skipped")
                .expect("a summary line");
        assert_eq!((c.passed, c.failed), (55, 2));
        assert!(parse_nextest("   Compiling strata-keys").is_none());
    }

    #[test]
    fn reads_libtest_result() {
        let c = parse_libtest("test result: ok. 7 passed; 0 failed; 0 ignored; 0 measured")
            .expect("a result line");
        assert_eq!((c.passed, c.failed), (7, 0));
        let c = parse_libtest("test result: FAILED. 1 passed; 3 failed; 0 ignored").expect("line");
        assert_eq!((c.passed, c.failed), (1, 3));
    }
}
