//! Typed keys against the raw libraries on the same data.
//!
//! `cargo bench -p strata-keys` prints, before criterion's own report:
//! allocation counts for packing into a reused buffer, and an interleaved
//! A/B table (raw, ours, raw, ours, ...) with the median ratio ours/raw and
//! its min–max over the rounds. Criterion then times each side on its own.

use std::alloc::System;
use std::hint::black_box;

use criterion::{Criterion, criterion_group};
use stats_alloc::{INSTRUMENTED_SYSTEM, Region, StatsAlloc};
use strata_keys::Key;
use strata_keys::tuple::{self, Uuid};

#[path = "../../bench-support/ab.rs"]
mod ab;
use ab::ab;

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

const ACTOR: usize = 3;
const KIND: usize = 7;

/// The key types under test.
mod decl {
    use super::{ACTOR, KIND};
    use strata_keys::tuple::Uuid;
    use strata_keys::{raw_key, tuple_key};

    /// A 4-element key: two discriminants around two fields.
    #[derive(Debug, Clone, PartialEq)]
    pub struct Key4 {
        pub actor_id: Uuid,
        pub ts: i64,
    }
    tuple_key! {
        Key4 -> () = (ACTOR, {actor_id}, {ts}, KIND);
    }

    /// `[9, 1, tag, u32_be(chunk)]`.
    #[derive(Debug, Clone, PartialEq, Eq, Hash)]
    pub struct Chunk {
        pub tag: u8,
        pub chunk: u32,
    }
    raw_key! {
        Chunk -> () = ([9, 1], {tag}, {chunk});
    }
}
use decl::{Chunk, Key4};

const N: usize = 1024;

/// Seeded data, the same bytes for both sides.
struct Data {
    keys: Vec<Key4>,
    packed: Vec<Vec<u8>>,
    chunks: Vec<Chunk>,
    packed_chunks: Vec<Vec<u8>>,
}

fn data() -> Data {
    let mut state = 0x5EED_u64;
    let mut next = || {
        // splitmix64
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    };
    let keys: Vec<Key4> = (0..N)
        .map(|_| Key4 {
            actor_id: Uuid::from_u64_pair(next(), next()),
            ts: i64::try_from(next() >> 24).unwrap(),
        })
        .collect();
    let packed: Vec<Vec<u8>> = keys.iter().map(|k| k.pack().unwrap()).collect();
    let chunks: Vec<Chunk> = (0..N)
        .map(|_| {
            let r = next();
            Chunk {
                tag: (r & 3) as u8,
                chunk: (r >> 32) as u32,
            }
        })
        .collect();
    let packed_chunks: Vec<Vec<u8>> = chunks.iter().map(|c| c.pack().unwrap()).collect();
    // Both sides must do the same work: identical bytes in and out.
    for (k, b) in keys.iter().zip(&packed) {
        assert_eq!(&tuple::pack(&(ACTOR, k.actor_id, k.ts, KIND)), b);
        let (a, id, ts, kind) = tuple::unpack::<(usize, Uuid, i64, usize)>(b).unwrap();
        assert_eq!((a, id, ts, kind), (ACTOR, k.actor_id, k.ts, KIND));
    }
    for (c, b) in chunks.iter().zip(&packed_chunks) {
        let mut hand = vec![9, 1, c.tag];
        hand.extend_from_slice(&c.chunk.to_be_bytes());
        assert_eq!(&hand, b);
    }
    Data {
        keys,
        packed,
        chunks,
        packed_chunks,
    }
}

fn raw_pack(d: &Data, buf: &mut Vec<u8>) {
    for k in &d.keys {
        buf.clear();
        tuple::pack_into(&(ACTOR, k.actor_id, k.ts, KIND), buf);
        black_box(&buf);
    }
}

fn ours_pack(d: &Data, buf: &mut Vec<u8>) {
    for k in &d.keys {
        buf.clear();
        k.pack_into(buf).unwrap();
        black_box(&buf);
    }
}

fn raw_unpack(d: &Data) {
    for b in &d.packed {
        black_box(tuple::unpack::<(usize, Uuid, i64, usize)>(b).unwrap());
    }
}

fn ours_unpack(d: &Data) {
    for b in &d.packed {
        black_box(Key4::unpack(b).unwrap());
    }
}

fn hand_pack(d: &Data, buf: &mut Vec<u8>) {
    for c in &d.chunks {
        buf.clear();
        buf.extend_from_slice(&[9, 1, c.tag]);
        buf.extend_from_slice(&c.chunk.to_be_bytes());
        black_box(&buf);
    }
}

fn ours_raw_pack(d: &Data, buf: &mut Vec<u8>) {
    for c in &d.chunks {
        buf.clear();
        c.pack_into(buf).unwrap();
        black_box(&buf);
    }
}

fn hand_unpack(d: &Data) {
    for b in &d.packed_chunks {
        let ok = b.len() == 7 && b[..2] == [9, 1];
        assert!(ok);
        black_box((b[2], u32::from_be_bytes([b[3], b[4], b[5], b[6]])));
    }
}

fn ours_raw_unpack(d: &Data) {
    for b in &d.packed_chunks {
        black_box(Chunk::unpack(b).unwrap());
    }
}

/// Allocations made by `f` after one warm-up call.
fn allocations(mut f: impl FnMut()) -> usize {
    f();
    let region = Region::new(GLOBAL);
    f();
    region.change().allocations
}

fn alloc_report(d: &Data) {
    let mut buf = Vec::with_capacity(64);
    println!("allocations per {N} operations (reused buffer):");
    let rows = [
        ("tuple pack, raw", allocations(|| raw_pack(d, &mut buf))),
        ("tuple pack, ours", allocations(|| ours_pack(d, &mut buf))),
        ("tuple unpack, raw", allocations(|| raw_unpack(d))),
        ("tuple unpack, ours", allocations(|| ours_unpack(d))),
        (
            "raw layout pack, hand",
            allocations(|| hand_pack(d, &mut buf)),
        ),
        (
            "raw layout pack, ours",
            allocations(|| ours_raw_pack(d, &mut buf)),
        ),
        (
            "raw layout unpack, ours",
            allocations(|| ours_raw_unpack(d)),
        ),
    ];
    for (name, n) in rows {
        println!("  {name:<26} {n}");
    }
}

fn ab_report(d: &Data) {
    let (rounds, reps, n) = (9, 200, u32::try_from(N).unwrap_or(u32::MAX));
    println!(
        "interleaved A/B, rounds in pairs (raw first, then ours first), medians per operation, ratio over the pairs:"
    );
    let mut b1 = Vec::with_capacity(64);
    let mut b2 = Vec::with_capacity(64);
    let pack = (|| raw_pack(d, &mut b1), || ours_pack(d, &mut b2));
    ab("tuple pack", rounds, reps, n, pack.0, pack.1);
    ab(
        "tuple unpack",
        rounds,
        reps,
        n,
        || raw_unpack(d),
        || ours_unpack(d),
    );
    let layout = (|| hand_pack(d, &mut b1), || ours_raw_pack(d, &mut b2));
    ab("raw layout pack", rounds, reps, n, layout.0, layout.1);
    let unpack = (|| hand_unpack(d), || ours_raw_unpack(d));
    ab("raw layout unpack", rounds, reps, n, unpack.0, unpack.1);
}

fn criterion_benches(c: &mut Criterion) {
    let d = data();
    let mut buf = Vec::with_capacity(64);
    let mut g = c.benchmark_group("tuple_pack_1024");
    g.bench_function("raw", |b| b.iter(|| raw_pack(&d, &mut buf)));
    g.bench_function("ours", |b| b.iter(|| ours_pack(&d, &mut buf)));
    g.finish();
    let mut g = c.benchmark_group("tuple_unpack_1024");
    g.bench_function("raw", |b| b.iter(|| raw_unpack(&d)));
    g.bench_function("ours", |b| b.iter(|| ours_unpack(&d)));
    g.finish();
    let mut g = c.benchmark_group("raw_layout_pack_1024");
    g.bench_function("hand", |b| b.iter(|| hand_pack(&d, &mut buf)));
    g.bench_function("ours", |b| b.iter(|| ours_raw_pack(&d, &mut buf)));
    g.finish();
    let mut g = c.benchmark_group("raw_layout_unpack_1024");
    g.bench_function("hand", |b| b.iter(|| hand_unpack(&d)));
    g.bench_function("ours", |b| b.iter(|| ours_raw_unpack(&d)));
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
            let d = data();
            alloc_report(&d);
            ab_report(&d);
        },
        benches,
    );
}
