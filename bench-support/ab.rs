//! Interleaved A/B timing shared by the crates' criterion benches, included
//! with `#[path = "../../bench-support/ab.rs"] mod ab;` (a source file, not a
//! crate). It follows `BENCHMARKS.md`: raw and ours alternate round by round,
//! the side that goes first alternates too, and the report is the median
//! ratio ours/raw with its min–max.

use std::time::{Duration, Instant};

/// One A/B comparison's medians and ratio range. Each bench reads the
/// fields it reports.
#[allow(dead_code)]
#[derive(Debug, Clone, Copy)]
pub struct Report {
    /// Median time per operation of the raw side, in nanoseconds.
    pub raw_ns: f64,
    /// Median time per operation of our side, in nanoseconds.
    pub ours_ns: f64,
    /// Median of the per-round ratios ours/raw.
    pub ratio: f64,
    /// Smallest per-round ratio.
    pub min: f64,
    /// Largest per-round ratio.
    pub max: f64,
}

/// Times `f` over `reps` calls.
#[allow(clippy::disallowed_methods)] // a benchmark measures wall time
fn time(reps: u32, f: &mut impl FnMut()) -> Duration {
    let start = Instant::now();
    for _ in 0..reps {
        f();
    }
    start.elapsed()
}

/// The median: the middle value, or the mean of the two middle values of
/// an even count.
fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    let mid = v.len() / 2;
    if v.len().is_multiple_of(2) {
        f64::midpoint(v[mid - 1], v[mid])
    } else {
        v[mid]
    }
}

/// The ratio of rounds that alternate which side goes first (even rounds
/// raw first, odd rounds ours first), as the median and min–max over
/// pairs of rounds, each pair the geometric mean of its two ratios.
///
/// A side can pay for going second (it runs on the state the first left:
/// a memtable about to flush, pages to write back) or gain from it (warm
/// caches). Alternating cancels that only if each raw-first round is
/// weighed with an ours-first one: the median of an odd number of
/// per-round ratios falls among the rounds of the majority order, and
/// measured position effects then decide the figure (ours first 0.97–0.99
/// against raw first 1.07–1.11 on the outbox bench's line of the event
/// alone on redb, 1.03–1.06 against 1.21–1.25 on RocksDB). A trailing
/// unpaired round is left out.
pub fn paired(ratios: &[f64]) -> (f64, f64, f64) {
    let mut pairs: Vec<f64> = ratios
        .chunks_exact(2)
        .map(|p| (p[0] * p[1]).sqrt())
        .collect();
    let min = pairs.iter().copied().fold(f64::INFINITY, f64::min);
    let max = pairs.iter().copied().fold(0.0, f64::max);
    (median(&mut pairs), min, max)
}

/// Runs `rounds` interleaved rounds of `reps` calls per side (one more
/// when `rounds` is odd, so that as many rounds start with each side);
/// each call does `ops_per_call` operations. Prints one line and returns
/// the report, whose ratio is [`paired`]'s.
pub fn ab(
    name: &str,
    rounds: usize,
    reps: u32,
    ops_per_call: u32,
    mut raw: impl FnMut(),
    mut ours: impl FnMut(),
) -> Report {
    let ops = f64::from(reps) * f64::from(ops_per_call);
    let (mut raw_ns, mut ours_ns, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..rounds + rounds % 2 {
        let (r, o) = if round % 2 == 0 {
            let r = time(reps, &mut raw);
            (r, time(reps, &mut ours))
        } else {
            let o = time(reps, &mut ours);
            (time(reps, &mut raw), o)
        };
        raw_ns.push(r.as_secs_f64() * 1e9 / ops);
        ours_ns.push(o.as_secs_f64() * 1e9 / ops);
        ratios.push(o.as_secs_f64() / r.as_secs_f64());
    }
    let (ratio, min, max) = paired(&ratios);
    let report = Report {
        raw_ns: median(&mut raw_ns),
        ours_ns: median(&mut ours_ns),
        ratio,
        min,
        max,
    };
    println!(
        "  {name:<22} raw {:>10.1} ns  ours {:>10.1} ns  ratio {:.2} (min {min:.2}, max {max:.2})",
        report.raw_ns, report.ours_ns, report.ratio,
    );
    record(&format!(
        "ab\t{}\t{}\t{:.1}\t{:.1}\t{:.4}\t{min:.4}\t{max:.4}",
        current_section(),
        name.trim(),
        report.raw_ns,
        report.ours_ns,
        report.ratio,
    ));
    report
}

/// Median time per call of `f` over `rounds` rounds of `reps` calls, in
/// nanoseconds: a reference figure with nothing to compare (a floor such
/// as one fsync). Printed and recorded as a note.
#[allow(dead_code)] // only the engine benches measure a floor
pub fn floor(name: &str, rounds: usize, reps: u32, mut f: impl FnMut()) -> f64 {
    let m = median_ns(rounds, reps, &mut f);
    note(&format!("  {name}: {:.1} µs", m / 1_000.0));
    m
}

/// Median time per call of `f` over `rounds` rounds of `reps` calls, in
/// nanoseconds.
fn median_ns(rounds: usize, reps: u32, f: &mut impl FnMut()) -> f64 {
    let mut ns: Vec<f64> = (0..rounds)
        .map(|_| time(reps, f).as_secs_f64() * 1e9 / f64::from(reps))
        .collect();
    median(&mut ns)
}

/// Commits per second of 1, 2, 4, 8 and 16 concurrent durable writers,
/// each `commit(writers, commits_each, first_key)` making 1,024 commits in
/// all (keys from `first_key` on, new ones each time), with the
/// speed-up over one writer and the commits per durable write, from
/// `syncs()` (durable writes made, commits; the engine's group
/// statistics). Printed and recorded as notes.
#[allow(dead_code)] // only the engine benches run writers
pub fn writers(commit: impl Fn(u64, u64, u64), syncs: impl Fn() -> (u64, u64)) {
    let mut first = 1u64 << 40;
    let mut run = |n: u64, each: u64| {
        commit(n, each, first);
        first += n * each;
    };
    let mut one = None;
    for n in [1u32, 2, 4, 8, 16] {
        let each = 1024 / n;
        let before = syncs();
        let ns = median_ns(3, 1, &mut || run(u64::from(n), u64::from(each)));
        let after = syncs();
        let (g, c) = (after.0 - before.0, after.1 - before.1);
        let per_second = f64::from(n * each) / (ns / 1e9);
        let base = *one.get_or_insert(per_second);
        #[allow(clippy::cast_precision_loss)]
        let per_write = if g == 0 { 0.0 } else { c as f64 / g as f64 };
        note(&format!(
            "  {n} durable writers: {per_second:.0} commits/s ({:.2}x one writer), {per_write:.1} commits per durable write",
            per_second / base
        ));
    }
}

/// Rounds of each side in [`writers_against`]: a durable commit's time is
/// the disk's, which moves by a third from one run to the next; with four
/// rounds the one-writer ratio ranged over 0.99–1.10 in six runs of one
/// build (2026-12-07).
#[allow(dead_code)] // only the engine benches run writers
pub const WRITER_ROUNDS: usize = 12;

/// Concurrent durable writers against an anchor doing the same commits
/// (issue 40's third figure): at 1, 4 and 16 writers, `total` commits
/// made by `anchor(writers, each, first_key)` and by `ours(...)` (keys
/// from `first_key` on, new ones each time), [`WRITER_ROUNDS`] interleaved
/// rounds (the ratio is [`paired`]'s).
/// Recorded as comparisons of the time per commit (a ratio below 1: ours
/// commits faster), with each side's commits per second and our commits
/// per durable write (`syncs()`: durable writes, commits) as a note, and
/// the verdict against `targets` (a time ratio, at 1, 4 and 16 writers;
/// `None` where the issue sets none).
#[allow(dead_code)] // only the engine benches run writers
pub fn writers_against(
    what: &str,
    total: u64,
    targets: [Option<f64>; 3],
    anchor: impl Fn(u64, u64, u64),
    ours: impl Fn(u64, u64, u64),
    syncs: impl Fn() -> (u64, u64),
) {
    let mut first = 1u64 << 41;
    for (n, target) in [1u64, 4, 16].into_iter().zip(targets) {
        let each = total / n;
        let ops = f64::from(u32::try_from(n * each).unwrap_or(u32::MAX));
        let (mut a_ns, mut o_ns, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
        let (mut groups, mut commits) = (0, 0);
        for round in 0..WRITER_ROUNDS {
            let mut side = |f: &dyn Fn(u64, u64, u64)| {
                let mut at = first;
                let d = time(1, &mut || f(n, each, at));
                at += n * each;
                first = at;
                d.as_secs_f64() * 1e9 / ops
            };
            let (a, o) = if round % 2 == 0 {
                let a = side(&anchor);
                let before = syncs();
                let o = side(&ours);
                let after = syncs();
                (groups, commits) = (groups + after.0 - before.0, commits + after.1 - before.1);
                (a, o)
            } else {
                let before = syncs();
                let o = side(&ours);
                let after = syncs();
                (groups, commits) = (groups + after.0 - before.0, commits + after.1 - before.1);
                (side(&anchor), o)
            };
            a_ns.push(a);
            o_ns.push(o);
            ratios.push(o / a);
        }
        let name = format!("{n} durable writers, {what}");
        let (raw_ns, ours_ns) = (median(&mut a_ns), median(&mut o_ns));
        let (ratio, min, max) = paired(&ratios);
        println!(
            "  {name:<22} raw {raw_ns:>10.1} ns  ours {ours_ns:>10.1} ns  ratio {ratio:.2} (min {min:.2}, max {max:.2})"
        );
        record(&format!(
            "ab\t{}\t{name}\t{raw_ns:.1}\t{ours_ns:.1}\t{ratio:.4}\t{min:.4}\t{max:.4}",
            current_section()
        ));
        #[allow(clippy::cast_precision_loss)]
        let per_write = if groups == 0 {
            0.0
        } else {
            commits as f64 / groups as f64
        };
        note(&format!(
            "  {n} durable writers: anchor {:.0} commits/s, ours {:.0} commits/s{}",
            1e9 / raw_ns,
            1e9 / ours_ns,
            if groups == 0 {
                // The engine does not count its durable writes.
                String::new()
            } else {
                format!(", {per_write:.1} of our commits per durable write")
            }
        ));
        if let Some(target) = target {
            against(&name, ratio, target);
        }
    }
}

static SECTION: std::sync::Mutex<String> = std::sync::Mutex::new(String::new());

fn current_section() -> String {
    SECTION.lock().map(|s| s.clone()).unwrap_or_default()
}

/// Starts a section of the report (an engine, say): printed as `== name`
/// and recorded with the comparisons that follow.
#[allow(dead_code)] // only the benches with sections use it
pub fn section(name: &str) {
    println!("== {name}");
    if let Ok(mut s) = SECTION.lock() {
        name.clone_into(&mut s);
    }
}

/// A figure that is not an A/B comparison (a rate, a latency): printed,
/// and recorded for `cargo xtask bench` to list under the table.
#[allow(dead_code)] // only some benches report such figures
pub fn note(text: &str) {
    println!("{text}");
    record(&format!("note\t{}\t{text}", current_section()));
}

/// A ratio against its target (at most `target`): noted with met or
/// missed.
#[allow(dead_code)] // only some benches have targets
pub fn against(what: &str, ratio: f64, target: f64) {
    let verdict = if ratio <= target { "met" } else { "missed" };
    note(&format!(
        "  {what}: {ratio:.2} (target <= {target}: {verdict})"
    ));
}

/// Appends `line` to the file named by `STRATA_AB_OUT`, if set: how
/// `cargo xtask bench` collects every bench's results.
fn record(line: &str) {
    use std::io::Write;
    let Some(path) = std::env::var_os("STRATA_AB_OUT") else {
        return;
    };
    let written = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .and_then(|mut f| writeln!(f, "{}", line.replace('\n', " ")));
    if let Err(e) = written {
        eprintln!(
            "could not record a result in {}: {e}",
            path.to_string_lossy()
        );
    }
}

/// The criterion settings of every Strata bench: a short warm-up and
/// measurement, `samples` samples.
pub fn criterion_config(samples: usize) -> criterion::Criterion {
    criterion::Criterion::default()
        .warm_up_time(std::time::Duration::from_millis(500))
        .measurement_time(std::time::Duration::from_secs(2))
        .sample_size(samples)
}

/// A bench's `main`: the interleaved A/B report, then criterion's
/// `benches` unless `STRATA_AB_ONLY` is set (for a quick ratio check);
/// `STRATA_CRITERION_ONLY` leaves the report out (to time or profile one
/// criterion function alone).
pub fn run(report: impl FnOnce(), benches: impl FnOnce()) {
    if std::env::var_os("STRATA_CRITERION_ONLY").is_none() {
        report();
    }
    if std::env::var_os("STRATA_AB_ONLY").is_some() {
        return;
    }
    benches();
    criterion::Criterion::default()
        .configure_from_args()
        .final_summary();
}

/// A fresh directory for a bench's databases, removed when dropped.
/// Declare it last in a struct so that the engines inside close first.
#[allow(dead_code)] // only the benches that open databases use it
pub struct BenchDir(pub std::path::PathBuf);

#[allow(dead_code)]
impl BenchDir {
    /// `$TMPDIR/strata-<name>-bench-<pid>`, emptied.
    pub fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("strata-{name}-bench-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("bench directory");
        Self(dir)
    }

    /// A path inside it.
    pub fn join(&self, name: &str) -> std::path::PathBuf {
        self.0.join(name)
    }
}

impl Drop for BenchDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
