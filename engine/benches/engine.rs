//! `MemEngine` against a bare `BTreeMap<Vec<u8>, Vec<u8>>` behind a mutex,
//! on the same seeded data: one-put commit, get, and a 1,000-entry range
//! scan. A baseline for the real engines; no target.

use std::collections::BTreeMap;
use std::hint::black_box;
use std::sync::Mutex;

use criterion::{Criterion, criterion_group};
use strata_engine::{
    Commit, Durability, Engine, Keyspace, KeyspaceSpec, MemEngine, Profile, RangeSpec, Rng,
    SeededRng, Snapshot,
};

#[path = "../../bench-support/ab.rs"]
mod ab;
use ab::ab;

const N: usize = 10_000;

/// The raw side: a map behind a mutex.
type RawMap = Mutex<BTreeMap<Vec<u8>, Vec<u8>>>;

struct Data {
    keys: Vec<Vec<u8>>,
    value: Vec<u8>,
}

fn data() -> Data {
    let mut rng = SeededRng::new(0x5EED);
    let mut keys: Vec<Vec<u8>> = (0..N)
        .map(|_| {
            let mut k = b"user/".to_vec();
            k.extend_from_slice(&rng.next_u64().to_be_bytes());
            k
        })
        .collect();
    keys.sort();
    Data {
        keys,
        value: vec![0xAB; 100],
    }
}

fn setup(d: &Data) -> (RawMap, MemEngine, Keyspace) {
    let map: BTreeMap<Vec<u8>, Vec<u8>> = d
        .keys
        .iter()
        .map(|k| (k.clone(), d.value.clone()))
        .collect();
    let engine = MemEngine::open(vec![KeyspaceSpec::new("a", Profile::General)]).unwrap();
    let ks = engine.keyspace("a").unwrap();
    for chunk in d.keys.chunks(1_000) {
        let mut c = Commit::new();
        for k in chunk {
            c = c.put(ks, k.clone(), d.value.clone());
        }
        engine.commit(c).unwrap();
    }
    (Mutex::new(map), engine, ks)
}

fn raw_scan(map: &RawMap, from: &[u8]) -> usize {
    let map = map.lock().unwrap();
    let mut n = 0;
    for (k, v) in map.range(from.to_vec()..).take(1_000) {
        black_box((k.clone(), v.clone()));
        n += 1;
    }
    n
}

fn ours_scan(engine: &MemEngine, ks: Keyspace, from: &[u8]) -> usize {
    let snap = engine.snapshot().unwrap();
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

fn ab_report(d: &Data) {
    let (map, engine, ks) = setup(d);
    let mut i = 0;
    let mut j = 0;
    let next = |i: &mut usize| {
        *i = (*i + 7_919) % N;
        &d.keys[*i]
    };
    println!(
        "interleaved A/B, rounds in pairs (raw first, then ours first), medians per operation, ratio over the pairs:"
    );
    ab(
        "commit one put",
        9,
        20_000,
        1,
        || {
            let k = next(&mut i);
            map.lock().unwrap().insert(k.clone(), d.value.clone());
        },
        || {
            let k = next(&mut j);
            engine
                .commit(
                    Commit::new()
                        .put(ks, k.clone(), d.value.clone())
                        .durability(Durability::Immediate),
                )
                .unwrap();
        },
    );
    ab(
        "get (new snapshot)",
        9,
        50_000,
        1,
        || {
            black_box(map.lock().unwrap().get(next(&mut i)).cloned());
        },
        || {
            black_box(engine.snapshot().unwrap().get(ks, next(&mut j)).unwrap());
        },
    );
    let snap = engine.snapshot().unwrap();
    ab(
        "get (same snapshot)",
        9,
        50_000,
        1,
        || {
            black_box(map.lock().unwrap().get(next(&mut i)).cloned());
        },
        || {
            black_box(snap.get(ks, next(&mut j)).unwrap());
        },
    );
    drop(snap);
    let from = d.keys[N / 3].clone();
    assert_eq!(raw_scan(&map, &from), ours_scan(&engine, ks, &from));
    ab(
        "scan 1,000 entries",
        9,
        50,
        1000,
        || {
            raw_scan(&map, &from);
        },
        || {
            ours_scan(&engine, ks, &from);
        },
    );
}

fn criterion_benches(c: &mut Criterion) {
    let d = data();
    let (map, engine, ks) = setup(&d);
    let mut i = 0;
    let mut g = c.benchmark_group("commit_one_put");
    g.bench_function("btreemap_mutex", |b| {
        b.iter(|| {
            i = (i + 7_919) % N;
            map.lock()
                .unwrap()
                .insert(d.keys[i].clone(), d.value.clone());
        });
    });
    g.bench_function("mem_engine_immediate", |b| {
        b.iter(|| {
            i = (i + 7_919) % N;
            engine
                .commit(Commit::new().put(ks, d.keys[i].clone(), d.value.clone()))
                .unwrap();
        });
    });
    g.finish();
    let mut g = c.benchmark_group("get");
    g.bench_function("btreemap_mutex", |b| {
        b.iter(|| {
            i = (i + 7_919) % N;
            black_box(map.lock().unwrap().get(&d.keys[i]).cloned());
        });
    });
    g.bench_function("mem_engine", |b| {
        b.iter(|| {
            i = (i + 7_919) % N;
            black_box(engine.snapshot().unwrap().get(ks, &d.keys[i]).unwrap());
        });
    });
    g.finish();
    let from = d.keys[N / 3].clone();
    let mut g = c.benchmark_group("scan_1000");
    g.bench_function("btreemap_mutex", |b| b.iter(|| raw_scan(&map, &from)));
    g.bench_function("mem_engine", |b| b.iter(|| ours_scan(&engine, ks, &from)));
    g.finish();
}

criterion_group! {
    name = benches;
    config = ab::criterion_config(40);
    targets = criterion_benches
}

fn main() {
    ab::run(
        || {
            ab_report(&data());
        },
        benches,
    );
}
