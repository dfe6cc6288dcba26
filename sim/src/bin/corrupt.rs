//! `cargo xtask corrupt`: real database files damaged at random, then
//! read, on every embedded engine.
//!
//! Each round builds a small database on real files (redb: one file;
//! RocksDB: a directory, its rows left in the write-ahead log or compacted
//! into table files, as the seed decides), closes it cleanly, damages its
//! bytes (bits flipped, a 4 KiB page zeroed, a file cut short, in a file
//! the seed picks), then reads it the way a careful application does: open,
//! the engine's own integrity check ([`Integrity`]), then every row by
//! point read and by scan, each value an envelope whose CRC-32 covers its
//! key. Every outcome is one of: refused with a typed error (at open, by
//! the check, or by a read), or every read right. Two failures are counted
//! and must stay at zero: a panic that reaches the caller, and a wrong read
//! (a value that differs, a row missing or extra) after the open and the
//! check passed. Wrong reads when the check is skipped are counted too
//! (reported, not failed: that is what the check is for).
//!
//! Everything comes from one seed: a failure prints the seed and the round.

#![allow(clippy::cast_possible_truncation)]

use std::collections::BTreeMap;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use strata_codec::{EncodeOptions, decode, encode};
use strata_engine::{
    Commit, Compact, Durability, Engine, Integrity, KeyspaceSpec, Profile, RangeSpec, Rng,
    SeededRng, Snapshot,
};
use strata_engine_redb::{RedbEngine, RedbOptions};
use strata_engine_rocks::{RocksEngine, RocksOptions};

/// Rows of each database.
const ROWS: u32 = 120;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Redb,
    Rocks,
}

/// How one damaged database read.
#[derive(Debug, Default, Clone, Copy)]
struct Tally {
    damaged: u64,
    refused_at_open: u64,
    found_by_check: u64,
    refused_by_a_read: u64,
    all_reads_right: u64,
    /// Wrong reads after the open and the check passed (must be 0).
    wrong_after_check: u64,
    /// Databases where reading without any check (redb's check at open
    /// turned off, no integrity check) would have read wrong.
    wrong_without_check: u64,
    /// Panics that reached the caller (must be 0).
    panics: u64,
}

fn key(row: u32) -> Vec<u8> {
    let mut k = b"row/".to_vec();
    k.extend_from_slice(&row.to_be_bytes());
    k
}

/// The value of `row` in round `round`: deterministic bytes.
fn payload(round: u64, row: u32) -> Vec<u8> {
    let mut rng = SeededRng::new(round.wrapping_mul(1_000_003) ^ u64::from(row));
    let len = 20 + rng.below(200) as usize;
    (0..len).map(|_| rng.next_u64() as u8).collect()
}

fn specs() -> Vec<KeyspaceSpec> {
    vec![KeyspaceSpec::new("data", Profile::General)]
}

/// Writes the rows in commits of ten, each `Immediate`.
fn fill<E: Engine>(e: &E, round: u64) {
    let ks = e.keyspace("data").expect("the keyspace");
    for first in (0..ROWS).step_by(10) {
        let mut c = Commit::new().durability(Durability::Immediate);
        for row in first..(first + 10).min(ROWS) {
            let mut v = Vec::new();
            encode(
                &payload(round, row),
                &key(row),
                EncodeOptions::default(),
                &mut v,
            )
            .expect("an envelope");
            c = c.put(ks, key(row), v);
        }
        e.commit(c).expect("a commit on a fresh database");
    }
}

fn build(kind: Kind, at: &Path, round: u64, rng: &mut SeededRng) -> PathBuf {
    match kind {
        Kind::Redb => {
            let path = at.join("db.redb");
            let e = RedbEngine::open(&path, specs(), RedbOptions::default()).expect("open");
            fill(&e, round);
            path
        }
        Kind::Rocks => {
            let path = at.join("db");
            let options = RocksOptions {
                write_buffer_bytes: 1 << 20,
                block_cache_bytes: 1 << 20,
                ..RocksOptions::default()
            };
            let e = RocksEngine::open(&path, specs(), options).expect("open");
            fill(&e, round);
            if rng.chance(0.5) {
                e.compact().expect("compaction");
            }
            path
        }
    }
}

/// Every file under `path` (itself, for a file).
fn files(path: &Path) -> Vec<PathBuf> {
    if path.is_file() {
        return vec![path.to_owned()];
    }
    let mut out: Vec<PathBuf> = std::fs::read_dir(path)
        .expect("the database directory")
        .map(|e| e.expect("an entry").path())
        .filter(|p| p.is_file() && std::fs::metadata(p).is_ok_and(|m| m.len() > 0))
        .collect();
    out.sort();
    out
}

/// Damages one file of the database; says how.
fn damage(path: &Path, rng: &mut SeededRng) -> String {
    let all = files(path);
    let file = &all[rng.below(all.len() as u64) as usize];
    let mut bytes = std::fs::read(file).expect("read the file");
    let len = bytes.len();
    let name = file
        .file_name()
        .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
    let how = match rng.below(10) {
        0..=5 => {
            let n = 1 + rng.below(8);
            for _ in 0..n {
                let at = rng.below(len as u64) as usize;
                bytes[at] ^= 1 << rng.below(8);
            }
            format!("{n} bits flipped in {name}")
        }
        6..=8 => {
            let page = rng.below(len.div_ceil(4096) as u64) as usize * 4096;
            let end = (page + 4096).min(len);
            bytes[page..end].fill(0);
            format!("page at {page} of {name} zeroed")
        }
        _ => {
            let at = rng.below(len as u64) as usize;
            bytes.truncate(at);
            format!("{name} cut to {at} of {len} bytes")
        }
    };
    std::fs::write(file, &bytes).expect("write the file");
    how
}

/// What the reads of one database found.
#[derive(Debug, PartialEq, Eq)]
enum Read {
    /// A typed error on the way.
    Refused,
    AllRight,
    /// A value, a missing row or an extra row wrong (described).
    Wrong(String),
}

/// Reads every row by point read and by scan, checking each value.
fn read_all<E: Engine>(e: &E, round: u64) -> Read {
    let Ok(ks) = e.keyspace("data") else {
        return Read::Refused;
    };
    let Ok(snap) = e.snapshot() else {
        return Read::Refused;
    };
    for row in 0..ROWS {
        let k = key(row);
        match snap.get(ks, &k) {
            Err(_) => return Read::Refused,
            Ok(None) => return Read::Wrong(format!("row {row} missing")),
            Ok(Some(v)) => match decode::<Vec<u8>>(&k, &v) {
                Err(_) => return Read::Refused,
                Ok(p) if p != payload(round, row) => {
                    return Read::Wrong(format!("row {row} reads another value"));
                }
                Ok(_) => {}
            },
        }
    }
    let Ok(range) = snap.range(ks, RangeSpec::all()) else {
        return Read::Refused;
    };
    let mut seen = BTreeMap::new();
    for r in range {
        let Ok((k, v)) = r else {
            return Read::Refused;
        };
        let Ok(p) = decode::<Vec<u8>>(&k, &v) else {
            return Read::Refused;
        };
        seen.insert(k, p);
    }
    let want: BTreeMap<Vec<u8>, Vec<u8>> = (0..ROWS)
        .map(|row| (key(row), payload(round, row)))
        .collect();
    if seen == want {
        Read::AllRight
    } else {
        Read::Wrong(format!(
            "a scan read {} rows, not the {ROWS} written",
            seen.len()
        ))
    }
}

/// Opens, checks and reads one damaged database, filling `t`.
fn judge<E: Engine + Integrity>(
    opened: Result<E, strata_engine::EngineError>,
    round: u64,
    t: &mut Tally,
) -> Option<String> {
    let Ok(e) = opened else {
        t.refused_at_open += 1;
        return None;
    };
    if e.check_integrity().is_err() {
        t.found_by_check += 1;
        return None;
    }
    match read_all(&e, round) {
        Read::Refused => t.refused_by_a_read += 1,
        Read::AllRight => t.all_reads_right += 1,
        Read::Wrong(what) => {
            t.wrong_after_check += 1;
            return Some(what);
        }
    }
    None
}

fn round(kind: Kind, seed: u64, i: u64, dir: &Path, t: &mut Tally) -> Result<(), String> {
    let at = dir.join(format!("{kind:?}-{i}"));
    let _ = std::fs::remove_dir_all(&at);
    std::fs::create_dir_all(&at).map_err(|e| e.to_string())?;
    let round_id = seed ^ i.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    let mut rng = SeededRng::new(round_id);
    let path = build(kind, &at, round_id, &mut rng);
    let how = damage(&path, &mut rng);
    t.damaged += 1;
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        let mut local = Tally::default();
        // Reads as an application that skips every check would see them:
        // redb opened without its check at open, RocksDB as it opens.
        let unchecked = match kind {
            Kind::Redb => {
                let skip = RedbOptions {
                    verify_at_open: false,
                    ..RedbOptions::default()
                };
                RedbEngine::open_read_only(&path, specs(), skip)
                    .map_or(Read::Refused, |e| read_all(&e, round_id))
            }
            Kind::Rocks => RocksEngine::open(&path, specs(), RocksOptions::default())
                .map_or(Read::Refused, |e| read_all(&e, round_id)),
        };
        if matches!(unchecked, Read::Wrong(_)) {
            local.wrong_without_check += 1;
        }
        // Then as the library opens by default, and with the check.
        let wrong = match kind {
            Kind::Redb => judge(
                RedbEngine::open_read_only(&path, specs(), RedbOptions::default()),
                round_id,
                &mut local,
            ),
            Kind::Rocks => judge(
                RocksEngine::open(&path, specs(), RocksOptions::default()),
                round_id,
                &mut local,
            ),
        };
        (local, wrong)
    }));
    let _ = std::fs::remove_dir_all(&at);
    let Ok((local, wrong)) = outcome else {
        t.panics += 1;
        return Err(format!(
            "{kind:?} round {i} ({how}): a panic reached the caller"
        ));
    };
    t.refused_at_open += local.refused_at_open;
    t.found_by_check += local.found_by_check;
    t.refused_by_a_read += local.refused_by_a_read;
    t.all_reads_right += local.all_reads_right;
    t.wrong_without_check += local.wrong_without_check;
    t.wrong_after_check += local.wrong_after_check;
    wrong.map_or(Ok(()), |what| {
        Err(format!(
            "{kind:?} round {i} ({how}): a wrong read after the check passed: {what}"
        ))
    })
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut databases = 1_000u64;
    let mut seed = 35u64;
    let mut engines = vec![Kind::Redb, Kind::Rocks];
    let mut i = 0;
    while i < args.len() {
        let value = args.get(i + 1);
        match (args[i].as_str(), value) {
            ("--databases", Some(v)) => databases = v.parse().unwrap_or(databases),
            ("--seed", Some(v)) => seed = v.parse().unwrap_or(seed),
            ("--engine", Some(v)) => {
                engines = match v.as_str() {
                    "redb" => vec![Kind::Redb],
                    "rocks" => vec![Kind::Rocks],
                    _ => engines,
                }
            }
            _ => {
                eprintln!("usage: strata-corrupt [--databases N] [--seed S] [--engine redb|rocks]");
                return ExitCode::from(2);
            }
        }
        i += 2;
    }
    // Panics inside the engines are caught there; keep their messages off
    // the report (a panic reaching here is counted and reported below).
    std::panic::set_hook(Box::new(|_| {}));
    let dir = std::env::temp_dir().join(format!("strata-corrupt-{}", std::process::id()));
    let mut failures = Vec::new();
    println!(
        "| engine | damaged | refused at open | found by the integrity check | refused by a read | every read right | wrong reads after the check | panics | would read wrong without the check |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    for kind in engines {
        let mut t = Tally::default();
        for i in 0..databases {
            if let Err(e) = round(kind, seed, i, &dir, &mut t) {
                failures.push(e);
            }
        }
        println!(
            "| {kind:?} | {} | {} | {} | {} | {} | {} | {} | {} |",
            t.damaged,
            t.refused_at_open,
            t.found_by_check,
            t.refused_by_a_read,
            t.all_reads_right,
            t.wrong_after_check,
            t.panics,
            t.wrong_without_check
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
    for f in &failures {
        println!("FAILED: {f} (replay: cargo xtask corrupt --seed {seed})");
    }
    let n = failures.len();
    println!("corrupt: {n} failing rounds");
    if n == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
