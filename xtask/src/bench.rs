//! `cargo xtask bench`: every crate's benchmark, one table of ratios.
//!
//! Each bench's interleaved A/B report (`bench-support/ab.rs`) records its
//! comparisons in the file named by `STRATA_AB_OUT`, one line each:
//! `ab<TAB>section<TAB>name<TAB>raw ns<TAB>ours ns<TAB>ratio<TAB>min<TAB>max`,
//! and its other figures as `note<TAB>section<TAB>text`. This runs the
//! benches one after another (criterion's own measurements only with
//! `--full`), reads those files, and prints one markdown table with the
//! machine's load before and after each crate.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The benches, by package and bench target, in dependency order.
const BENCHES: &[(&str, &str)] = &[
    ("strata-keys", "keys"),
    ("strata-codec", "codec"),
    ("strata-engine", "engine"),
    ("strata-engine-redb", "redb"),
    ("strata-engine-rocks", "rocks"),
    ("strata-engine-postgres", "postgres"),
    ("strata-store", "store"),
    ("strata-outbox", "outbox"),
    ("strata-search", "search"),
    ("strata-schemas", "agent_memory"),
];

/// One A/B comparison as a bench recorded it.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub section: String,
    pub name: String,
    pub raw_ns: f64,
    pub ours_ns: f64,
    pub ratio: f64,
    pub min: f64,
    pub max: f64,
}

/// What one crate's bench recorded, and the load around it.
#[derive(Debug, Default)]
pub struct CrateResult {
    pub package: String,
    pub rows: Vec<Row>,
    pub notes: Vec<String>,
    pub load_before: Option<String>,
    pub load_after: Option<String>,
    pub failed: Option<String>,
}

/// Reads the lines a bench recorded; lines that do not parse are skipped
/// (and counted in the returned number).
pub fn parse(text: &str) -> (Vec<Row>, Vec<String>, usize) {
    let (mut rows, mut notes, mut bad) = (Vec::new(), Vec::new(), 0);
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let f: Vec<&str> = line.split('\t').collect();
        match f.as_slice() {
            ["ab", section, name, raw, ours, ratio, min, max] => {
                let nums: Option<Vec<f64>> = [raw, ours, ratio, min, max]
                    .iter()
                    .map(|n| n.parse().ok())
                    .collect();
                match nums.as_deref() {
                    Some(&[raw_ns, ours_ns, ratio, min, max]) => rows.push(Row {
                        section: (*section).to_owned(),
                        name: (*name).to_owned(),
                        raw_ns,
                        ours_ns,
                        ratio,
                        min,
                        max,
                    }),
                    _ => bad += 1,
                }
            }
            // The text says what it measured (a bench names the engine in
            // it where it matters).
            ["note", _section, text] => notes.push(text.trim().to_owned()),
            _ => bad += 1,
        }
    }
    (rows, notes, bad)
}

/// A time in nanoseconds, readably.
fn time(ns: f64) -> String {
    if ns >= 1_000_000.0 {
        format!("{:.2} ms", ns / 1_000_000.0)
    } else if ns >= 1_000.0 {
        format!("{:.2} µs", ns / 1_000.0)
    } else {
        format!("{ns:.1} ns")
    }
}

/// The markdown report of `results`.
pub fn render(results: &[CrateResult], cores: usize) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "## cargo xtask bench ({cores} cores; time ratio ours / raw: median of interleaved rounds, min–max)\n"
    );
    let _ = writeln!(
        out,
        "| crate | section | comparison | raw | ours | ours / raw | min–max |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|---|---|");
    for r in results {
        for row in &r.rows {
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {} | {:.2} | {:.2}–{:.2} |",
                r.package,
                row.section,
                row.name.replace('|', "\\|"),
                time(row.raw_ns),
                time(row.ours_ns),
                row.ratio,
                row.min,
                row.max
            );
        }
        if let Some(why) = &r.failed {
            let _ = writeln!(out, "| {} | | **failed**: {why} | | | | |", r.package);
        }
    }
    let _ = writeln!(out, "\nLoad average (1 min) before → after each crate:");
    for r in results {
        let _ = writeln!(
            out,
            "- {}: {} → {}",
            r.package,
            r.load_before.as_deref().unwrap_or("?"),
            r.load_after.as_deref().unwrap_or("?")
        );
    }
    let notes: Vec<_> = results
        .iter()
        .flat_map(|r| r.notes.iter().map(move |n| (&r.package, n)))
        .collect();
    if !notes.is_empty() {
        let _ = writeln!(out, "\nOther figures:");
        for (package, n) in notes {
            let _ = writeln!(out, "- {package}: {n}");
        }
    }
    out
}

fn load_average() -> Option<String> {
    std::fs::read_to_string("/proc/loadavg")
        .ok()?
        .split_whitespace()
        .next()
        .map(str::to_owned)
}

fn results_dir() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("../target"),
        PathBuf::from,
    );
    target.join("strata-bench")
}

/// The simulation's package: `-p strata-sim` times `cargo xtask sim`.
const SIM: &str = "strata-sim";

/// The time of `cargo xtask sim` with its default seeds (every workload),
/// built first so that only the run is timed; recorded as notes: the
/// seconds against the 60 s target, and the simulation's own table of
/// seeds per workload.
#[allow(clippy::disallowed_methods)] // the wall time is the figure
fn sim_figure() -> CrateResult {
    const TARGET_SECS: f64 = 60.0;
    let mut result = CrateResult {
        package: SIM.to_owned(),
        load_before: load_average(),
        ..CrateResult::default()
    };
    let cargo = |args: &[&str]| {
        let mut all = vec!["--locked", "--quiet", "-p", SIM];
        all.splice(0..0, args.iter().copied());
        let mut cmd = Command::new(crate::cargo());
        cmd.args(all);
        cmd
    };
    println!("$ cargo build --release --locked --quiet -p {SIM}");
    match cargo(&["build", "--release"]).status() {
        Ok(s) if s.success() => {}
        Ok(s) => {
            result.failed = Some(format!("its build exited with {s}"));
            return result;
        }
        Err(e) => {
            result.failed = Some(format!("could not start cargo: {e}"));
            return result;
        }
    }
    println!("$ cargo run --release --locked --quiet -p {SIM} (timed)");
    let started = std::time::Instant::now();
    let output = cargo(&["run", "--release"]).output();
    let secs = started.elapsed().as_secs_f64();
    result.load_after = load_average();
    match output {
        Ok(o) if o.status.success() => {
            let verdict = if secs <= TARGET_SECS { "met" } else { "missed" };
            result.notes.push(format!(
                "`cargo xtask sim` (default seeds, every workload), once built: {secs:.1} s (target <= {TARGET_SECS} s: {verdict})"
            ));
            let text = String::from_utf8_lossy(&o.stdout);
            // The table, through the summary line after it.
            let mut table = text.lines().skip_while(|l| !l.contains("per workload"));
            for l in table.by_ref() {
                result.notes.push(format!("`{}`", l.trim_end()));
                if l.starts_with("sim:") {
                    break;
                }
            }
        }
        Ok(o) => result.failed = Some(format!("exited with {}", o.status)),
        Err(e) => result.failed = Some(format!("could not start cargo: {e}")),
    }
    result
}

/// `cargo xtask bench [--full] [-p PACKAGE]...`.
pub fn run(args: &[String]) -> Result<(), String> {
    let mut full = false;
    let mut only: Vec<String> = Vec::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--full" => full = true,
            "-p" | "--package" => only.push(
                it.next()
                    .ok_or_else(|| "-p needs a package name".to_owned())?
                    .clone(),
            ),
            other => return Err(format!("unknown bench option `{other}`")),
        }
    }
    if let Some(unknown) = only
        .iter()
        .find(|p| *p != SIM && !BENCHES.iter().any(|(name, _)| name == p))
    {
        return Err(format!(
            "no bench in package `{unknown}` (benches: {})",
            BENCHES
                .iter()
                .map(|(p, _)| *p)
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    let chosen: Vec<_> = BENCHES
        .iter()
        .filter(|(p, _)| only.is_empty() || only.iter().any(|o| o == p))
        .collect();
    if chosen
        .iter()
        .any(|(p, _)| !matches!(*p, "strata-keys" | "strata-codec" | "strata-engine"))
    {
        crate::prereq::ensure(&crate::prereq::LIBCLANG)?;
    }
    let dir = results_dir();
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut results = Vec::new();
    for (package, bench) in chosen {
        let file = dir.join(format!("{package}.tsv"));
        let _ = std::fs::remove_file(&file);
        let mut result = CrateResult {
            package: (*package).to_owned(),
            load_before: load_average(),
            ..CrateResult::default()
        };
        let mut cmd = Command::new(crate::cargo());
        cmd.args(["bench", "--locked", "-p", package, "--bench", bench])
            .env("STRATA_AB_OUT", &file);
        if full {
            cmd.env_remove("STRATA_AB_ONLY");
        } else {
            cmd.env("STRATA_AB_ONLY", "1");
        }
        println!("$ cargo bench --locked -p {package} --bench {bench}");
        match cmd.status() {
            Ok(s) if s.success() => {}
            Ok(s) => result.failed = Some(format!("exited with {s}")),
            Err(e) => result.failed = Some(format!("could not start cargo: {e}")),
        }
        result.load_after = load_average();
        let text = std::fs::read_to_string(&file).unwrap_or_default();
        let (rows, notes, bad) = parse(&text);
        if bad > 0 {
            eprintln!("xtask: {bad} line(s) of {} did not parse", file.display());
        }
        if rows.is_empty() && result.failed.is_none() {
            result.failed = Some("recorded no comparison".to_owned());
        }
        result.rows = rows;
        result.notes = notes;
        results.push(result);
    }
    if only.is_empty() || only.iter().any(|o| o == SIM) {
        results.push(sim_figure());
    }
    let cores = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
    let report = render(&results, cores);
    println!("\n{report}");
    let path = dir.join("report.md");
    std::fs::write(&path, &report).map_err(|e| format!("{}: {e}", path.display()))?;
    println!("(also written to {})", path.display());
    match results.iter().find(|r| r.failed.is_some()) {
        Some(r) => Err(format!("the bench of {} failed", r.package)),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_what_the_benches_record() {
        let text = "ab\tredb\tget 1 KiB\t1200.5\t1320.0\t1.1000\t1.0500\t1.2500\n\
                    note\tredb\tredb: drain 150000 entries/s\n\
                    ab\t\tencode\t10.0\t12.0\t1.2000\t1.1000\t1.3000\n\
                    garbage line\n\
                    ab\tx\ty\tnot a number\t1\t1\t1\t1\n";
        let (rows, notes, bad) = parse(text);
        assert_eq!(bad, 2);
        assert_eq!(rows.len(), 2);
        assert_eq!(
            rows[0],
            Row {
                section: "redb".into(),
                name: "get 1 KiB".into(),
                raw_ns: 1200.5,
                ours_ns: 1320.0,
                ratio: 1.1,
                min: 1.05,
                max: 1.25,
            }
        );
        assert_eq!(rows[1].section, "");
        assert_eq!(notes, ["redb: drain 150000 entries/s"]);
    }

    #[test]
    fn renders_one_table_with_loads_failures_and_notes() {
        let results = vec![
            CrateResult {
                package: "strata-store".into(),
                rows: vec![Row {
                    section: "rocks".into(),
                    name: "scan | typed".into(),
                    raw_ns: 950.0,
                    ours_ns: 1_900.0,
                    ratio: 2.0,
                    min: 1.5,
                    max: 2.5,
                }],
                notes: vec!["a rate".into()],
                load_before: Some("0.10".into()),
                load_after: Some("1.90".into()),
                failed: None,
            },
            CrateResult {
                package: "strata-search".into(),
                failed: Some("exited with 101".into()),
                ..CrateResult::default()
            },
        ];
        let md = render(&results, 2);
        assert!(md.contains(
            "| strata-store | rocks | scan \\| typed | 950.0 ns | 1.90 µs | 2.00 | 1.50–2.50 |"
        ));
        assert!(md.contains("| strata-search | | **failed**: exited with 101 |"));
        assert!(md.contains("- strata-store: 0.10 → 1.90"));
        assert!(md.contains("- strata-search: ? → ?"));
        assert!(md.contains("- strata-store: a rate"));
        assert!(md.starts_with("## cargo xtask bench (2 cores"));
    }

    #[test]
    fn times_read_in_their_unit() {
        assert_eq!(time(12.34), "12.3 ns");
        assert_eq!(time(1_500.0), "1.50 µs");
        assert_eq!(time(2_500_000.0), "2.50 ms");
    }
}
