//! `cargo xtask mutants`: cargo-mutants over every library crate, run the
//! same way every time, and a table of the outcomes.
//!
//! Each crate is mutated in a copy of the tree (cargo-mutants' default), built
//! in a target directory of its own (`STRATA_MUTANTS_TARGET`, default
//! `$HOME/.cache/strata-mutants-target`), so a run never touches the
//! working tree or the test build's artifacts; the first crate whose tests
//! need RocksDB builds it there once. Mutants are taken in source order
//! (`--no-shuffle`) and tested with the crate's own tests under nextest
//! (and, for the engine and the testkit, with the redb engine's: see
//! [`TESTED_BY`]); the
//! exclusions (planted bugs) are in `.cargo/mutants.toml`. `--shard K/N` runs
//! the K-th of N equal slices, so a long crate can be done piece by piece
//! with the same result as in one go.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Every library crate, in dependency order.
pub const CRATES: [&str; 17] = [
    "strata-keys",
    "strata-codec",
    "strata-engine",
    "strata-engine-testkit",
    "strata-engine-redb",
    "strata-engine-rocks",
    "strata-engine-postgres",
    "strata-store",
    "strata-outbox",
    "strata-search",
    "strata-universaldb",
    "strata-actor-kv",
    "strata-code-sous",
    "strata-nokv",
    "strata-agent-memory",
    "strata-schemas",
    "strata-cli",
];

/// Crates whose code is tested mostly by other crates' tests: the test
/// packages their mutants run (the crate's own first). The engine's
/// contract and the testkit's suite and helpers are exercised by the
/// engines that run them.
pub const TESTED_BY: [(&str, &[&str]); 7] = [
    (
        "strata-engine",
        &[
            "strata-engine",
            "strata-engine-testkit",
            "strata-engine-redb",
        ],
    ),
    (
        "strata-engine-testkit",
        &["strata-engine-testkit", "strata-engine-redb"],
    ),
    // The five designs' cases run on every engine from the facade's tests.
    (
        "strata-universaldb",
        &["strata-universaldb", "strata-schemas"],
    ),
    ("strata-actor-kv", &["strata-actor-kv", "strata-schemas"]),
    ("strata-code-sous", &["strata-code-sous", "strata-schemas"]),
    ("strata-nokv", &["strata-nokv", "strata-schemas"]),
    (
        "strata-agent-memory",
        &["strata-agent-memory", "strata-schemas"],
    ),
];

/// The mutants' test timeout, in seconds, when a crate is also tested by
/// another crate's tests and no `--timeout` is given.
const LONG_TIMEOUT_SECONDS: u64 = 600;

/// The nextest filter of the crates whose tests run each case once per
/// engine (`name::mem`, `::redb`, `::rocks`, `::postgres`, from
/// `engine_tests!`): their code above the engine contract is the same on
/// every engine, so a mutant is tested on `MemEngine` and redb only. The
/// RocksDB and PostgreSQL cases add engine behaviour, which the engines'
/// own runs cover, and take most of the time (a server per case).
pub const ABOVE_THE_ENGINES: &str = "not (test(/::rocks$/) | test(/::postgres$/))";

/// The crates whose mutants run with [`ABOVE_THE_ENGINES`].
pub const FILTERED: [&str; 9] = [
    "strata-store",
    "strata-outbox",
    "strata-search",
    "strata-universaldb",
    "strata-actor-kv",
    "strata-code-sous",
    "strata-nokv",
    "strata-agent-memory",
    "strata-schemas",
];

/// What one crate's run (or shard) found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Outcome {
    /// The crate.
    pub krate: String,
    /// The shard, as `K/N`, if one.
    pub shard: Option<String>,
    /// Mutants a test failed on.
    pub caught: usize,
    /// Mutants every test passed with.
    pub missed: Vec<String>,
    /// Mutants whose tests ran past the timeout.
    pub timeouts: usize,
    /// Mutants that did not build.
    pub unviable: usize,
}

impl Outcome {
    /// Caught (timeouts included) over every mutant that built, in percent.
    pub fn score(&self) -> Option<f64> {
        let killed = u32::try_from(self.caught + self.timeouts).ok()?;
        let built = killed.checked_add(u32::try_from(self.missed.len()).ok()?)?;
        (built > 0).then(|| 100.0 * f64::from(killed) / f64::from(built))
    }
}

/// The lines of one of cargo-mutants' list files (`caught.txt`, ...).
fn lines(dir: &Path, name: &str) -> Vec<String> {
    std::fs::read_to_string(dir.join(name))
        .map(|t| {
            t.lines()
                .filter(|l| !l.trim().is_empty())
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

/// Reads the outcome files cargo-mutants wrote in `dir` (its
/// `mutants.out`).
pub fn read(dir: &Path, krate: &str, shard: Option<&str>) -> Outcome {
    Outcome {
        krate: krate.to_owned(),
        shard: shard.map(str::to_owned),
        caught: lines(dir, "caught.txt").len(),
        missed: lines(dir, "missed.txt"),
        timeouts: lines(dir, "timeout.txt").len(),
        unviable: lines(dir, "unviable.txt").len(),
    }
}

/// The markdown table of `outcomes`, then every missed mutant.
pub fn render(outcomes: &[Outcome]) -> String {
    let mut out = String::from(
        "| crate | shard | mutants | caught | timeouts | missed | unviable | score |\n|---|---|---|---|---|---|---|---|\n",
    );
    for o in outcomes {
        let total = o.caught + o.timeouts + o.missed.len() + o.unviable;
        let score = o
            .score()
            .map_or_else(|| "n/a".to_owned(), |s| format!("{s:.1}%"));
        let _ = writeln!(
            out,
            "| {} | {} | {total} | {} | {} | {} | {} | {score} |",
            o.krate,
            o.shard.as_deref().unwrap_or("all"),
            o.caught,
            o.timeouts,
            o.missed.len(),
            o.unviable,
        );
    }
    for o in outcomes.iter().filter(|o| !o.missed.is_empty()) {
        let _ = writeln!(out, "\nmissed in {}:", o.krate);
        for m in &o.missed {
            let _ = writeln!(out, "- {m}");
        }
    }
    out
}

fn target_dir() -> PathBuf {
    std::env::var_os("STRATA_MUTANTS_TARGET").map_or_else(
        || {
            let home = std::env::var_os("HOME").unwrap_or_else(|| ".".into());
            Path::new(&home).join(".cache/strata-mutants-target")
        },
        PathBuf::from,
    )
}

/// The working tree's changes since `rev` (a commit, a branch), as a diff
/// of the Rust sources written under `reports`: cargo-mutants' `--in-diff`
/// then mutates only the lines it touches.
fn write_diff(rev: &str, reports: &Path) -> Result<PathBuf, String> {
    let out = Command::new("git")
        .args(["diff", "--no-color", "--no-ext-diff", rev, "--", "*.rs"])
        .output()
        .map_err(|e| format!("could not run git: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "git diff {rev} failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    std::fs::create_dir_all(reports).map_err(|e| format!("creating {}: {e}", reports.display()))?;
    let path = reports.join("since.diff");
    std::fs::write(&path, &out.stdout).map_err(|e| format!("writing {}: {e}", path.display()))?;
    println!(
        "xtask: only the lines changed since {rev} ({} bytes of diff in {})",
        out.stdout.len(),
        path.display()
    );
    Ok(path)
}

/// cargo-mutants, installed from crates.io when missing.
fn ensure_cargo_mutants() -> Result<(), String> {
    let present = Command::new(crate::cargo())
        .args(["mutants", "--version"])
        .output()
        .is_ok_and(|o| o.status.success());
    if present {
        return Ok(());
    }
    println!(
        "xtask: cargo-mutants is missing; installing it: cargo install --locked cargo-mutants"
    );
    let ok = Command::new(crate::cargo())
        .args(["install", "--locked", "cargo-mutants"])
        .status()
        .is_ok_and(|s| s.success());
    if ok {
        Ok(())
    } else {
        Err("cargo-mutants is needed: `cargo install --locked cargo-mutants`".to_owned())
    }
}

/// cargo-mutants' arguments for the tests of `krate`: the packages whose
/// tests run, and the baseline and timeout. cargo-mutants runs its
/// unmutated baseline on the mutated crate's own tests only (none, for a
/// design crate tested by the facade's, which fails the run) and sets the
/// mutants' timeout from it: far too short when another crate's tests run
/// too. So such a crate skips the baseline and gets a long timeout, unless
/// `timeout` is given.
fn test_args(krate: &str, timeout: Option<&str>) -> Vec<String> {
    let mut args = Vec::new();
    let mut tested_elsewhere = false;
    for (_, packages) in TESTED_BY.iter().filter(|(c, _)| *c == krate) {
        for p in *packages {
            args.extend(["--test-package".to_owned(), (*p).to_owned()]);
            tested_elsewhere |= *p != krate;
        }
    }
    if tested_elsewhere {
        args.extend(["--baseline".to_owned(), "skip".to_owned()]);
    }
    match (timeout, tested_elsewhere) {
        (Some(t), _) => args.extend(["--timeout".to_owned(), t.to_owned()]),
        (None, true) => args.extend(["--timeout".to_owned(), LONG_TIMEOUT_SECONDS.to_string()]),
        (None, false) => {}
    }
    args
}

/// `cargo xtask mutants [-p CRATE]... [--shard K/N] [--timeout SECONDS]`
/// (without `--timeout`, cargo-mutants sets one from the unmutated tests'
/// time).
///
/// # Errors
/// A bad argument, cargo-mutants missing, or a crate whose tests fail
/// unmutated (cargo-mutants' baseline).
pub fn run(args: &[String]) -> Result<(), String> {
    let mut crates: Vec<String> = Vec::new();
    let mut shard: Option<String> = None;
    // None: cargo-mutants' own, from the unmutated tests' time.
    let mut timeout: Option<String> = None;
    let mut since: Option<String> = None;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut value = || it.next().cloned().ok_or(format!("{a} needs a value"));
        match a.as_str() {
            "-p" | "--package" => crates.push(value()?),
            "--shard" => shard = Some(value()?),
            "--timeout" => timeout = Some(value()?),
            "--since" => since = Some(value()?),
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    if crates.is_empty() {
        crates = CRATES.iter().map(|c| (*c).to_owned()).collect();
    }
    if let Some(c) = crates.iter().find(|c| !CRATES.contains(&c.as_str())) {
        return Err(format!("{c} is not one of the library crates: {CRATES:?}"));
    }
    ensure_cargo_mutants()?;
    let target = target_dir();
    let reports = target.join("mutants-out");
    println!("xtask: mutants built in {}", target.display());
    let diff = match &since {
        Some(rev) => Some(write_diff(rev, &reports)?),
        None => None,
    };
    let mut outcomes = Vec::new();
    for krate in &crates {
        let name = match &shard {
            Some(s) => format!("{krate}-shard-{}", s.replace('/', "-of-")),
            None => krate.clone(),
        };
        let out = reports.join(&name);
        std::fs::create_dir_all(&out).map_err(|e| format!("creating {}: {e}", out.display()))?;
        let mut cmd_args = vec![
            "mutants".to_owned(),
            "-p".to_owned(),
            krate.clone(),
            "--test-tool".to_owned(),
            "nextest".to_owned(),
            "--no-shuffle".to_owned(),
            "--output".to_owned(),
            out.display().to_string(),
        ];
        cmd_args.extend(test_args(krate, timeout.as_deref()));
        if let Some(s) = &shard {
            cmd_args.extend(["--shard".to_owned(), s.clone()]);
        }
        if let Some(d) = &diff {
            cmd_args.extend(["--in-diff".to_owned(), d.display().to_string()]);
        }
        if FILTERED.contains(&krate.as_str()) {
            // Arguments for the test tool come last, after `--` (this
            // cargo-mutants, 25.3, has no option for them).
            cmd_args.extend([
                "--".to_owned(),
                "-E".to_owned(),
                ABOVE_THE_ENGINES.to_owned(),
            ]);
        }
        println!("$ cargo {}", cmd_args.join(" "));
        let status = Command::new(crate::cargo())
            .args(&cmd_args)
            .env("CARGO_TARGET_DIR", &target)
            .status()
            .map_err(|e| format!("could not run cargo mutants: {e}"))?;
        // 0: all caught; 2: some missed; 3: some timed out. Anything else
        // (a usage error, 4: the unmutated tests fail) stops the run.
        match status.code() {
            Some(0 | 2 | 3) => {}
            code => {
                return Err(format!(
                    "cargo mutants on {krate} ended with {code:?}; see {}",
                    out.join("mutants.out").display()
                ));
            }
        }
        outcomes.push(read(&out.join("mutants.out"), krate, shard.as_deref()));
    }
    let table = render(&outcomes);
    println!("{table}");
    let report = reports.join("report.md");
    std::fs::create_dir_all(&reports)
        .and_then(|()| std::fs::write(&report, &table))
        .map_err(|e| format!("writing {}: {e}", report.display()))?;
    println!("xtask: the table is also in {}", report.display());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{ABOVE_THE_ENGINES, CRATES, FILTERED, Outcome, read, render, test_args};

    /// A design crate tested by the facade's tests skips the baseline
    /// (its own tests are none) and gets a long timeout unless one is
    /// given; a crate tested by its own tests only gets neither.
    #[test]
    fn crates_tested_elsewhere_skip_the_baseline() {
        let words = |k, t| test_args(k, t).join(" ");
        assert_eq!(
            words("strata-nokv", None),
            "--test-package strata-nokv --test-package strata-schemas --baseline skip --timeout 600"
        );
        assert_eq!(
            words("strata-nokv", Some("90")),
            "--test-package strata-nokv --test-package strata-schemas --baseline skip --timeout 90"
        );
        assert_eq!(words("strata-codec", None), "");
        assert_eq!(words("strata-codec", Some("90")), "--timeout 90");
    }

    #[test]
    fn the_filtered_crates_are_library_crates() {
        assert!(FILTERED.iter().all(|c| CRATES.contains(c)));
        assert!(ABOVE_THE_ENGINES.contains("::postgres$") && ABOVE_THE_ENGINES.starts_with("not"));
    }

    #[test]
    fn the_outcome_files_are_counted_and_the_table_scores_what_built() {
        let dir = std::env::temp_dir().join(format!("xtask-mutants-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("caught.txt"), "a\nb\nc\n\n").unwrap();
        std::fs::write(
            dir.join("missed.txt"),
            "src/x.rs:1:1: replace f -> bool with true\n",
        )
        .unwrap();
        std::fs::write(dir.join("unviable.txt"), "u\nv\n").unwrap();
        let o = read(&dir, "strata-keys", Some("1/4"));
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(
            o,
            Outcome {
                krate: "strata-keys".to_owned(),
                shard: Some("1/4".to_owned()),
                caught: 3,
                missed: vec!["src/x.rs:1:1: replace f -> bool with true".to_owned()],
                timeouts: 0,
                unviable: 2,
            }
        );
        // 3 killed of 4 that built; the unviable ones do not count.
        assert_eq!(o.score(), Some(75.0));
        let table = render(&[o]);
        assert!(
            table.contains("| strata-keys | 1/4 | 6 | 3 | 0 | 1 | 2 | 75.0% |"),
            "{table}"
        );
        assert!(
            table.contains("missed in strata-keys:\n- src/x.rs:1:1: replace f -> bool with true")
        );
    }
}
