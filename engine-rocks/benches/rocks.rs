//! `RocksEngine` against the raw rocksdb API on the same data: one-put
//! commits (synced WAL and not), get, and a 1,000-entry range scan; then
//! `RocksEngine` against `RedbEngine` on the same operations; plus the
//! machine's fsync floor. Interleaved A/B first, then criterion.

#![allow(clippy::many_single_char_names, clippy::too_many_lines)]

use std::hint::black_box;
use std::io::Write;

use criterion::{Criterion, criterion_group};
use rocksdb::{DB, Options, ReadOptions, WriteBatch, WriteOptions};
use strata_engine::{
    Commit, Compact as _, Durability, Engine, Keyspace, KeyspaceSpec, Profile, RangeSpec, Rng,
    RowCursor, SeededRng, Snapshot,
};
use strata_engine_redb::{RedbEngine, RedbOptions};
use strata_engine_rocks::{RocksEngine, RocksOptions};

#[path = "../../bench-support/ab.rs"]
mod ab;
use ab::ab;

const N: usize = 10_000;

struct Setup {
    raw: DB,
    ours: RocksEngine,
    ks: Keyspace,
    redb: RedbEngine,
    rks: Keyspace,
    keys: Vec<Vec<u8>>,
    value: Vec<u8>,
    dir: ab::BenchDir,
}

fn setup() -> Setup {
    let dir = ab::BenchDir::new("rocks");
    let mut rng = SeededRng::new(0x5EED);
    let mut keys: Vec<Vec<u8>> = (0..N)
        .map(|_| [b"user/".as_slice(), &rng.next_u64().to_be_bytes()].concat())
        .collect();
    keys.sort();
    let value = vec![0xAB; 100];
    // The raw database configured as ours configures a `General`
    // keyspace: the same memtable size, and a block cache of the same size
    // (RocksDB's own default is half of ours).
    let defaults = RocksOptions::default();
    let mut o = Options::default();
    o.create_if_missing(true);
    o.set_write_buffer_size(defaults.write_buffer_bytes);
    let mut table = rocksdb::BlockBasedOptions::default();
    table.set_block_cache(&rocksdb::Cache::new_lru_cache(defaults.block_cache_bytes));
    o.set_block_based_table_factory(&table);
    let raw = DB::open(&o, dir.join("raw")).unwrap();
    let specs = vec![KeyspaceSpec::new("a", Profile::General)];
    let ours = RocksEngine::open(dir.join("ours"), specs.clone(), RocksOptions::default()).unwrap();
    let redb = RedbEngine::open(dir.join("redb.redb"), specs, RedbOptions::default()).unwrap();
    let (ks, rks) = (ours.keyspace("a").unwrap(), redb.keyspace("a").unwrap());
    for chunk in keys.chunks(1_000) {
        let mut batch = WriteBatch::default();
        // Each engine takes only handles it issued.
        let (mut c, mut rc) = (Commit::new(), Commit::new());
        for k in chunk {
            batch.put(k, &value);
            c = c.put(ks, k.clone(), value.clone());
            rc = rc.put(rks, k.clone(), value.clone());
        }
        raw.write(batch).unwrap();
        ours.commit(c).unwrap();
        redb.commit(rc).unwrap();
    }
    Setup {
        raw,
        ours,
        ks,
        redb,
        rks,
        keys,
        value,
        dir,
    }
}

fn raw_put(s: &Setup, k: &[u8], sync: bool) {
    let mut wo = WriteOptions::default();
    wo.set_sync(sync);
    let mut batch = WriteBatch::default();
    batch.put(k, &s.value);
    s.raw.write_opt(batch, &wo).unwrap();
}

fn put<E: Engine>(e: &E, ks: Keyspace, k: &[u8], v: &[u8], sync: bool) {
    let d = if sync {
        Durability::Immediate
    } else {
        Durability::Buffered
    };
    e.commit(Commit::new().put(ks, k.to_vec(), v.to_vec()).durability(d))
        .unwrap();
}

fn raw_get(s: &Setup, k: &[u8]) -> Option<Vec<u8>> {
    let snap = s.raw.snapshot();
    snap.get(k).unwrap()
}

fn get<E: Engine>(e: &E, ks: Keyspace, k: &[u8]) -> Option<Vec<u8>> {
    e.snapshot().unwrap().get(ks, k).unwrap()
}

/// The native iterator over the 1,000 rows from `from`, each given to
/// `row` in place.
fn raw_rows(s: &Setup, from: &[u8], mut row: impl FnMut(&[u8], &[u8])) -> usize {
    let snap = s.raw.snapshot();
    let mut ro = ReadOptions::default();
    ro.set_iterate_lower_bound(from.to_vec());
    let mut it = snap.raw_iterator_opt(ro);
    it.seek_to_first();
    let mut n = 0;
    while it.valid() && n < 1_000 {
        let (k, v) = it.item().unwrap();
        row(k, v);
        n += 1;
        it.next();
    }
    n
}

/// The native iterator, each row copied out (as the owned range does).
fn raw_scan(s: &Setup, from: &[u8]) -> usize {
    raw_rows(s, from, |k, v| {
        black_box((k.to_vec(), v.to_vec()));
    })
}

/// The native iterator, each row read in place (no copy).
fn raw_scan_in_place(s: &Setup, from: &[u8]) -> usize {
    raw_rows(s, from, |k, v| {
        black_box((k, v));
    })
}

/// The contract's lending cursor, each row read in place.
fn lent_scan<E: Engine>(e: &E, ks: Keyspace, from: &[u8]) -> usize {
    let snap = e.snapshot().unwrap();
    let range = RangeSpec {
        start: std::ops::Bound::Included(from.to_vec()),
        ..RangeSpec::all()
    }
    .limit(1_000);
    let mut rows = snap.cursor(ks, range).unwrap();
    let mut n = 0;
    while let Some(row) = rows.next_row() {
        black_box(row.unwrap());
        n += 1;
    }
    n
}

fn scan<E: Engine>(e: &E, ks: Keyspace, from: &[u8]) -> usize {
    let snap = e.snapshot().unwrap();
    let range = RangeSpec {
        start: std::ops::Bound::Included(from.to_vec()),
        ..RangeSpec::all()
    }
    .limit(1_000);
    let mut n = 0;
    for row in snap.range(ks, range).unwrap() {
        black_box(row.unwrap());
        n += 1;
    }
    n
}

fn ab_report(s: &Setup) {
    ab::section("RocksEngine vs the rocksdb API");
    println!(
        "interleaved A/B, rounds in pairs (raw first, then ours first), medians per operation, ratio over the pairs (raw = rocksdb API, ours = RocksEngine):"
    );
    let (mut i, mut j) = (0, 0);
    let next = |i: &mut usize| {
        *i = (*i + 7_919) % N;
        s.keys[*i].clone()
    };
    let mut file = std::fs::File::create(s.dir.join("fsync.bin")).unwrap();
    let block = vec![7u8; 4096];
    let floor = ab::floor("fsync floor (4 KiB append + fdatasync)", 3, 100, || {
        file.write_all(&block).unwrap();
        file.sync_data().unwrap();
    });
    let durable = ab(
        "commit, synced WAL",
        7,
        100,
        1,
        || raw_put(s, &next(&mut i), true),
        || put(&s.ours, s.ks, &next(&mut j), &s.value, true),
    );
    ab::note(&format!(
        "  durable commit / fsync: raw {:.2}, ours {:.2}",
        durable.raw_ns / floor,
        durable.ours_ns / floor
    ));
    ab(
        "commit, buffered",
        7,
        5_000,
        1,
        || raw_put(s, &next(&mut i), false),
        || put(&s.ours, s.ks, &next(&mut j), &s.value, false),
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
            black_box(get(&s.ours, s.ks, &next(&mut j)));
        },
    );
    // Both databases compacted before their scans: the commits above
    // left every row in the memtables (10,000 keys), where a scan reads
    // about 160 ns a row on either side and what our cursor adds hides in
    // it; from table files a row is about 50 ns.
    s.raw.compact_range(None::<&[u8]>, None::<&[u8]>);
    s.ours.compact().unwrap();
    let from = s.keys[N / 3].clone();
    assert_eq!(raw_scan(s, &from), scan(&s.ours, s.ks, &from));
    ab(
        "scan 1,000 entries",
        7,
        50,
        1_000,
        || {
            raw_scan(s, &from);
        },
        || {
            scan(&s.ours, s.ks, &from);
        },
    );
    assert_eq!(raw_scan_in_place(s, &from), lent_scan(&s.ours, s.ks, &from));
    let lent = ab(
        "scan 1,000, lent",
        15,
        50,
        1_000,
        || {
            raw_scan_in_place(s, &from);
        },
        || {
            lent_scan(&s.ours, s.ks, &from);
        },
    );
    ab::against("lending scan / native iterator", lent.ratio, 1.05);
    ab::section("RocksEngine (raw column) vs RedbEngine (ours column)");
    ab(
        "commit, durable",
        7,
        100,
        1,
        || put(&s.ours, s.ks, &next(&mut i), &s.value, true),
        || put(&s.redb, s.rks, &next(&mut j), &s.value, true),
    );
    ab(
        "commit, buffered",
        7,
        2_000,
        1,
        || put(&s.ours, s.ks, &next(&mut i), &s.value, false),
        || put(&s.redb, s.rks, &next(&mut j), &s.value, false),
    );
    ab(
        "get",
        7,
        20_000,
        1,
        || {
            black_box(get(&s.ours, s.ks, &next(&mut i)));
        },
        || {
            black_box(get(&s.redb, s.rks, &next(&mut j)));
        },
    );
    ab(
        "scan 1,000 entries",
        7,
        50,
        1_000,
        || {
            scan(&s.ours, s.ks, &from);
        },
        || {
            scan(&s.redb, s.rks, &from);
        },
    );
}

fn criterion_benches(c: &mut Criterion) {
    let s = setup();
    let mut g = c.benchmark_group("get");
    g.bench_function("raw", |b| b.iter(|| raw_get(&s, &s.keys[N / 2])));
    g.bench_function("ours", |b| b.iter(|| get(&s.ours, s.ks, &s.keys[N / 2])));
    g.finish();
    let from = s.keys[N / 3].clone();
    let mut g = c.benchmark_group("scan_1000");
    g.bench_function("raw", |b| b.iter(|| raw_scan(&s, &from)));
    g.bench_function("ours", |b| b.iter(|| scan(&s.ours, s.ks, &from)));
    g.bench_function("raw_in_place", |b| b.iter(|| raw_scan_in_place(&s, &from)));
    g.bench_function("ours_lent", |b| b.iter(|| lent_scan(&s.ours, s.ks, &from)));
    g.finish();
}

criterion_group! {
    name = benches;
    config = ab::criterion_config(30);
    targets = criterion_benches
}

/// Concurrent durable writers: commits per second for 1 to 16 writers;
/// then at 1, 4 and 16 writers against native RocksDB with the same
/// threads, each putting its keys with a synced WAL (RocksDB groups them
/// in its own write path): the target is at least its rate.
fn writers(s: &Setup) {
    let value = vec![0xCD; 100];
    let commit = |n, each, first| {
        strata_engine_testkit::commit_in_parallel(&s.ours, s.ks, n, each, first, &value);
    };
    let g = || s.ours.group_stats();
    ab::section("RocksEngine's durable writers vs native RocksDB's");
    ab::writers(commit, || (g().syncs, g().commits));
    ab::writers_against(
        "vs native RocksDB's synced puts (target <= 1.0: at least its rate)",
        1024,
        [Some(1.0); 3],
        |n, each, first| raw_writers(&s.raw, n, each, first, &value),
        commit,
        || (g().syncs, g().commits),
    );
}

/// `writers` threads each putting `each` new keys (from `first` on, as
/// `commit_in_parallel` numbers them) with a synced WAL, on the raw DB.
fn raw_writers(db: &DB, writers: u64, each: u64, first: u64, value: &[u8]) {
    std::thread::scope(|scope| {
        for t in 0..writers {
            scope.spawn(move || {
                let mut wo = WriteOptions::default();
                wo.set_sync(true);
                for i in 0..each {
                    let key = (first + t * each + i).to_be_bytes();
                    db.put_opt(key, value, &wo).unwrap();
                }
            });
        }
    });
}

fn main() {
    ab::run(
        || {
            let s = setup();
            ab_report(&s);
            writers(&s);
        },
        benches,
    );
}
