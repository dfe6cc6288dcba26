//! `RedbEngine` against the raw redb API on the same data: one-put commits
//! (durable and not), get, and a 1,000-entry range scan; plus the machine's
//! fsync floor (4 KiB append + fdatasync). Interleaved A/B first (see
//! `bench-support/ab.rs`), then criterion.

#![allow(clippy::many_single_char_names)]

use std::hint::black_box;
use std::io::Write;

use criterion::{Criterion, criterion_group};
use redb::{Database, ReadableDatabase, TableDefinition};
use strata_engine::{
    Commit, Durability, Engine, Keyspace, KeyspaceSpec, Profile, RangeSpec, Rng, RowCursor,
    SeededRng, Snapshot,
};
use strata_engine_redb::{RedbEngine, RedbOptions};

#[path = "../../bench-support/ab.rs"]
mod ab;
use ab::ab;

const N: usize = 10_000;
const RAW: TableDefinition<'static, &[u8], &[u8]> = TableDefinition::new("raw");

struct Setup {
    raw: Database,
    ours: RedbEngine,
    ks: Keyspace,
    keys: Vec<Vec<u8>>,
    value: Vec<u8>,
    dir: ab::BenchDir,
}

fn setup() -> Setup {
    let dir = ab::BenchDir::new("redb");
    let mut rng = SeededRng::new(0x5EED);
    let mut keys: Vec<Vec<u8>> = (0..N)
        .map(|_| [b"user/".as_slice(), &rng.next_u64().to_be_bytes()].concat())
        .collect();
    keys.sort();
    let value = vec![0xAB; 100];
    let raw = Database::create(dir.join("raw.redb")).unwrap();
    let ours = RedbEngine::open(
        dir.join("ours.redb"),
        vec![KeyspaceSpec::new("a", Profile::General)],
        RedbOptions::default(),
    )
    .unwrap();
    let ks = ours.keyspace("a").unwrap();
    // Both sides load the same rows in the same ten transactions.
    for chunk in keys.chunks(1_000) {
        let txn = raw.begin_write().unwrap();
        {
            let mut t = txn.open_table(RAW).unwrap();
            for k in chunk {
                t.insert(k.as_slice(), value.as_slice()).unwrap();
            }
        }
        txn.commit().unwrap();
    }
    for chunk in keys.chunks(1_000) {
        let mut c = Commit::new();
        for k in chunk {
            c = c.put(ks, k.clone(), value.clone());
        }
        ours.commit(c).unwrap();
    }
    Setup {
        raw,
        ours,
        ks,
        keys,
        value,
        dir,
    }
}

fn raw_put(s: &Setup, k: &[u8], durable: bool) {
    let mut txn = s.raw.begin_write().unwrap();
    txn.set_durability(if durable {
        redb::Durability::Immediate
    } else {
        redb::Durability::None
    })
    .unwrap();
    txn.open_table(RAW)
        .unwrap()
        .insert(k, s.value.as_slice())
        .unwrap();
    txn.commit().unwrap();
}

fn ours_put(s: &Setup, k: &[u8], durable: bool) {
    let d = if durable {
        Durability::Immediate
    } else {
        Durability::Buffered
    };
    s.ours
        .commit(
            Commit::new()
                .put(s.ks, k.to_vec(), s.value.clone())
                .durability(d),
        )
        .unwrap();
}

fn raw_get(s: &Setup, k: &[u8]) -> Option<Vec<u8>> {
    let txn = s.raw.begin_read().unwrap();
    let t = txn.open_table(RAW).unwrap();
    t.get(k).unwrap().map(|g| g.value().to_vec())
}

fn ours_get(s: &Setup, k: &[u8]) -> Option<Vec<u8>> {
    s.ours.snapshot().unwrap().get(s.ks, k).unwrap()
}

fn raw_scan(s: &Setup, from: &[u8]) -> usize {
    let txn = s.raw.begin_read().unwrap();
    let t = txn.open_table(RAW).unwrap();
    let mut n = 0;
    for row in t.range::<&[u8]>(from..).unwrap().take(1_000) {
        let (k, v) = row.unwrap();
        black_box((k.value().to_vec(), v.value().to_vec()));
        n += 1;
    }
    n
}

/// redb's iterator, each row read in place from its guards (no copy).
fn raw_scan_in_place(s: &Setup, from: &[u8]) -> usize {
    let txn = s.raw.begin_read().unwrap();
    let t = txn.open_table(RAW).unwrap();
    let mut n = 0;
    for row in t.range::<&[u8]>(from..).unwrap().take(1_000) {
        let (k, v) = row.unwrap();
        black_box((k.value(), v.value()));
        n += 1;
    }
    n
}

/// A scan of 1,000 rows from a key, returning how many it read.
type ScanFn = fn(&Setup, &[u8]) -> usize;

/// The contract's lending cursor, each row read in place.
fn lent_scan(s: &Setup, from: &[u8]) -> usize {
    let snap = s.ours.snapshot().unwrap();
    let range = thousand_from(from);
    let mut rows = snap.cursor(s.ks, range).unwrap();
    let mut n = 0;
    while let Some(row) = rows.next_row() {
        black_box(row.unwrap());
        n += 1;
    }
    n
}

/// The keys from `from` on, 1,000 at most.
fn thousand_from(from: &[u8]) -> RangeSpec {
    RangeSpec {
        start: std::ops::Bound::Included(from.to_vec()),
        ..RangeSpec::all()
    }
    .limit(1_000)
}

/// The contract's lending cursor running its own loop
/// ([`RowCursor::try_for_each_row`]: one panic guard for the scan, not
/// one per row), each row read in place.
fn looped_scan(s: &Setup, from: &[u8]) -> usize {
    strata_engine_testkit::count_looped(&s.ours.snapshot().unwrap(), s.ks, thousand_from(from))
}

fn ours_scan(s: &Setup, from: &[u8]) -> usize {
    let snap = s.ours.snapshot().unwrap();
    let range = thousand_from(from);
    let mut n = 0;
    for row in snap.range(s.ks, range).unwrap() {
        black_box(row.unwrap());
        n += 1;
    }
    n
}

/// A 4 KiB append and `fdatasync`: the floor of any durable commit here.
fn fsync_floor(file: &mut std::fs::File, block: &[u8]) {
    file.write_all(block).unwrap();
    file.sync_data().unwrap();
}

fn ab_report(s: &Setup) {
    ab::section("RedbEngine vs the redb API");
    println!(
        "interleaved A/B, rounds in pairs (raw first, then ours first), medians per operation, ratio over the pairs:"
    );
    let (mut i, mut j) = (0, 0);
    let next = |i: &mut usize| {
        *i = (*i + 7_919) % N;
        s.keys[*i].clone()
    };
    let mut file = std::fs::File::create(s.dir.join("fsync.bin")).unwrap();
    let block = vec![7u8; 4096];
    let floor = ab::floor("fsync floor (4 KiB append + fdatasync)", 3, 100, || {
        fsync_floor(&mut file, &block);
    });
    let durable = ab(
        "commit, durable",
        7,
        100,
        1,
        || raw_put(s, &next(&mut i), true),
        || ours_put(s, &next(&mut j), true),
    );
    ab::note(&format!(
        "  durable commit / fsync: raw {:.2}, ours {:.2}",
        durable.raw_ns / floor,
        durable.ours_ns / floor
    ));
    ab(
        "commit, non-durable",
        7,
        2_000,
        1,
        || raw_put(s, &next(&mut i), false),
        || ours_put(s, &next(&mut j), false),
    );
    ab(
        "get",
        7,
        20_000,
        1,
        || {
            black_box(raw_get(s, &next(&mut i)));
        },
        || {
            black_box(ours_get(s, &next(&mut j)));
        },
    );
    let from = s.keys[N / 3].clone();
    assert_eq!(raw_scan(s, &from), ours_scan(s, &from));
    ab(
        "scan 1,000 entries",
        7,
        50,
        1_000,
        || {
            raw_scan(s, &from);
        },
        || {
            ours_scan(s, &from);
        },
    );
    // The lending cursor stepped row by row, then running its own loop,
    // each against redb's iterator.
    for (what, rounds, ours, against) in [
        (
            "scan 1,000, lent",
            15,
            lent_scan as ScanFn,
            "lending scan / native iterator",
        ),
        (
            "scan 1,000, lent in the cursor's own loop",
            16,
            looped_scan,
            "lending scan, the cursor's own loop / native iterator",
        ),
    ] {
        assert_eq!(raw_scan_in_place(s, &from), ours(s, &from));
        let r = ab(
            what,
            rounds,
            50,
            1_000,
            || {
                raw_scan_in_place(s, &from);
            },
            || {
                ours(s, &from);
            },
        );
        ab::against(against, r.ratio, 1.05);
    }
}

fn criterion_benches(c: &mut Criterion) {
    let s = setup();
    let mut i = 0;
    let mut next = || {
        i = (i + 7_919) % N;
        s.keys[i].clone()
    };
    let mut g = c.benchmark_group("commit_non_durable");
    g.bench_function("raw", |b| b.iter(|| raw_put(&s, &next(), false)));
    g.finish();
    let mut g = c.benchmark_group("commit_non_durable");
    let mut j = 0;
    g.bench_function("ours", |b| {
        b.iter(|| {
            j = (j + 7_919) % N;
            ours_put(&s, &s.keys[j], false);
        });
    });
    g.finish();
    let mut g = c.benchmark_group("get");
    g.bench_function("raw", |b| b.iter(|| raw_get(&s, &s.keys[N / 2])));
    g.bench_function("ours", |b| b.iter(|| ours_get(&s, &s.keys[N / 2])));
    g.finish();
    let from = s.keys[N / 3].clone();
    let mut g = c.benchmark_group("scan_1000");
    g.bench_function("raw", |b| b.iter(|| raw_scan(&s, &from)));
    g.bench_function("ours", |b| b.iter(|| ours_scan(&s, &from)));
    g.bench_function("raw_in_place", |b| b.iter(|| raw_scan_in_place(&s, &from)));
    g.bench_function("ours_lent", |b| b.iter(|| lent_scan(&s, &from)));
    g.finish();
}

criterion_group! {
    name = benches;
    config = ab::criterion_config(30);
    targets = criterion_benches
}

/// Concurrent durable writers: commits per second for 1 to 16 writers;
/// then at 1, 4 and 16 writers against the group-commit ceiling: one
/// thread submitting the same commits `writers` at a time through
/// `commit_group` (target: at least 0.8 of its rate), over 4,096 commits
/// a side (`STRATA_WRITERS_TOTAL` sets another number: at 512, the
/// groups at both ends of the run and the thread spawns, ours only,
/// weigh as much as the noise).
fn writers(engine: &RedbEngine, ks: Keyspace) {
    let value = vec![0xCD; 100];
    let commit = |n, each, first| {
        strata_engine_testkit::commit_in_parallel(engine, ks, n, each, first, &value);
    };
    let g = || engine.group_stats();
    ab::section("RedbEngine's durable writers vs commit_group");
    ab::writers(commit, || (g().syncs, g().commits));
    ab::writers_against(
        "vs one thread's commit_group of as many (target <= 1.25: 0.8 of its rate)",
        std::env::var("STRATA_WRITERS_TOTAL")
            .ok()
            .and_then(|t| t.parse().ok())
            .unwrap_or(4_096),
        [Some(1.25); 3],
        |n, each, first| grouped(engine, ks, n, each, first, &value),
        commit,
        || (g().syncs, g().commits),
    );
}

/// The same commits `commit_in_parallel` makes with `writers` threads,
/// from one thread: `each` groups of `writers` durable commits, each
/// group through `commit_group`.
fn grouped(engine: &RedbEngine, ks: Keyspace, writers: u64, each: u64, first: u64, value: &[u8]) {
    for i in 0..each {
        let commits = (0..writers)
            .map(|t| {
                Commit::new().durability(Durability::Immediate).put(
                    ks,
                    (first + t * each + i).to_be_bytes().to_vec(),
                    value.to_vec(),
                )
            })
            .collect();
        for result in engine.commit_group(commits) {
            assert!(result.unwrap().durable, "a durable group commit");
        }
    }
}

fn main() {
    ab::run(
        || {
            let s = setup();
            ab_report(&s);
            writers(&s.ours, s.ks);
        },
        benches,
    );
}
