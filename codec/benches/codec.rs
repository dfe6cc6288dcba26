//! Envelopes and chunking against the raw libraries on the same data.
//!
//! `cargo bench -p strata-codec` prints an interleaved A/B table first (see
//! `bench-support/ab.rs`), then criterion's report:
//!
//! - envelope encode and decode of a ~256-byte struct, checksum included,
//!   against plain postcard into and out of a reused buffer;
//! - chunk plan plus reassembly of a 1 MiB value (10,000-byte chunks, CRC-32C
//!   over the whole value both ways) against one `memcpy` of 1 MiB.

use std::hint::black_box;

use criterion::{Criterion, criterion_group};
use serde::{Deserialize, Serialize};
use strata_codec::{
    ChunkLayout, ChunkPlanner, EncodeOptions, Previous, TupleChunkLayout, decode, encode, value,
};
use strata_keys::Subspace;

#[path = "../../bench-support/ab.rs"]
mod ab;
use ab::ab;

/// A record of about 256 encoded bytes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Record {
    id: u64,
    created_ms: u64,
    name: String,
    tags: Vec<String>,
    payload: Vec<u8>,
    score: i32,
    active: bool,
}
value!(Record: postcard, version = 1);

const KEY: &[u8] = b"\x15\x01\x15\x02\x01actor-42\x00\x15\x07";

fn record() -> Record {
    Record {
        id: 0x0123_4567_89AB_CDEF,
        created_ms: 1_730_000_000_000,
        name: "reconcile-payments-worker-000042".into(),
        tags: ["billing", "eu-west-1", "priority-high", "retry-3"]
            .iter()
            .map(|s| (*s).to_owned())
            .collect(),
        payload: (0..150).map(|i: u32| (i * 7 % 251) as u8).collect(),
        score: -1_234,
        active: true,
    }
}

fn raw_encode(r: &Record, buf: &mut Vec<u8>) {
    buf.clear();
    let out = postcard::to_extend(r, std::mem::take(buf)).unwrap();
    *buf = out;
    black_box(&buf);
}

fn ours_encode(r: &Record, buf: &mut Vec<u8>) {
    buf.clear();
    encode(r, KEY, EncodeOptions::default(), buf).unwrap();
    black_box(&buf);
}

fn planner() -> ChunkPlanner<TupleChunkLayout> {
    let layout =
        TupleChunkLayout::new(Subspace::new(&(1_i64, 2_i64, 3_i64, 42_u64)), 1, 2).unwrap();
    ChunkPlanner::new(layout, 10_000).unwrap().always_chunked()
}

/// Plans the rows of `value` and assembles them again, as a write and a read
/// would; the rows are handed over as borrowed slices, as an engine would
/// receive them.
fn chunk_roundtrip(p: &ChunkPlanner<TupleChunkLayout>, value: &[u8], out: &mut Vec<u8>) -> usize {
    let plan = p.plan_write(b"blob", value, Previous::Absent).unwrap();
    let meta = &plan.puts[0].value;
    let rows = plan.puts[1..].iter().map(|r| (&r.key, &r.value));
    out.clear();
    p.assemble_into(b"blob", meta, rows, out).unwrap();
    black_box(out.len())
}

fn ab_report() {
    let r = record();
    let mut probe = Vec::new();
    raw_encode(&r, &mut probe);
    let raw_len = probe.len();
    ours_encode(&r, &mut probe);
    println!(
        "record: {raw_len} bytes as postcard, {} as an envelope with checksum",
        probe.len()
    );
    let raw_bytes = postcard::to_allocvec(&r).unwrap();
    let env = probe.clone();
    assert_eq!(decode::<Record>(KEY, &env).unwrap(), r);
    assert_eq!(postcard::from_bytes::<Record>(&raw_bytes).unwrap(), r);

    println!(
        "interleaved A/B, rounds in pairs (raw first, then ours first), medians per operation, ratio over the pairs:"
    );
    let (mut b1, mut b2) = (Vec::with_capacity(512), Vec::with_capacity(512));
    let enc = (|| raw_encode(&r, &mut b1), || ours_encode(&r, &mut b2));
    ab("envelope encode", 9, 200_000, 1, enc.0, enc.1);
    let dec = (
        || {
            black_box(postcard::from_bytes::<Record>(black_box(&raw_bytes)).unwrap());
        },
        || {
            black_box(decode::<Record>(KEY, black_box(&env)).unwrap());
        },
    );
    ab("envelope decode", 9, 200_000, 1, dec.0, dec.1);

    let p = planner();
    let mut value = Vec::new();
    let blob: Vec<u8> = (0..(1 << 20) - 5).map(|i: u32| (i % 253) as u8).collect();
    encode(
        &blob,
        b"blob",
        EncodeOptions {
            checksum: false,
            expires_at: None,
        },
        &mut value,
    )
    .unwrap();
    assert_eq!(value.len(), 1 << 20);
    let mut dst = vec![0u8; value.len()];
    let copy = || {
        dst.copy_from_slice(black_box(&value));
        black_box(&dst);
    };
    let mut out = Vec::with_capacity(value.len());
    let report = ab("1 MiB chunk+assemble", 9, 50, 1, copy, || {
        chunk_roundtrip(&p, &value, &mut out);
    });
    println!(
        "  throughput vs memcpy: {:.2}x ({:.1} GB/s against {:.1} GB/s), all in cache",
        1.0 / report.ratio,
        f64::from(1u32 << 20) / report.ours_ns,
        f64::from(1u32 << 20) / report.raw_ns,
    );

    // The same with the data out of cache: 48 distinct 1 MiB values, one
    // per call in turn, so each call reads memory as a real read would.
    let values: Vec<Vec<u8>> = (0..48_u8)
        .map(|i| {
            let mut v = value.clone();
            v[100] = i;
            v
        })
        .collect();
    let mut dsts = vec![vec![0u8; value.len()]; 48];
    let (mut i, mut j) = (0, 0);
    let cold_copy = || {
        i = (i + 1) % values.len();
        dsts[i].copy_from_slice(black_box(&values[i]));
        black_box(&dsts[i]);
    };
    let mut outs: Vec<Vec<u8>> = (0..48).map(|_| Vec::with_capacity(value.len())).collect();
    let cold = ab("1 MiB, out of cache", 9, 48, 1, cold_copy, || {
        j = (j + 1) % values.len();
        chunk_roundtrip(&p, &values[j], &mut outs[j]);
    });
    println!(
        "  throughput vs memcpy: {:.2}x ({:.1} GB/s against {:.1} GB/s), out of cache",
        1.0 / cold.ratio,
        f64::from(1u32 << 20) / cold.ours_ns,
        f64::from(1u32 << 20) / cold.raw_ns,
    );
    let _ = p.layout().chunks_from(b"blob", 0);
}

fn criterion_benches(c: &mut Criterion) {
    let r = record();
    let raw_bytes = postcard::to_allocvec(&r).unwrap();
    let mut env = Vec::new();
    encode(&r, KEY, EncodeOptions::default(), &mut env).unwrap();
    let mut buf = Vec::with_capacity(512);
    let mut g = c.benchmark_group("encode_256b");
    g.bench_function("raw_postcard", |b| b.iter(|| raw_encode(&r, &mut buf)));
    g.bench_function("envelope", |b| b.iter(|| ours_encode(&r, &mut buf)));
    g.finish();
    let mut g = c.benchmark_group("decode_256b");
    g.bench_function("raw_postcard", |b| {
        b.iter(|| postcard::from_bytes::<Record>(black_box(&raw_bytes)).unwrap());
    });
    g.bench_function("envelope", |b| {
        b.iter(|| decode::<Record>(KEY, black_box(&env)).unwrap());
    });
    g.finish();

    let p = planner();
    let blob: Vec<u8> = (0..(1 << 20) - 5).map(|i: u32| (i % 253) as u8).collect();
    let mut value = Vec::new();
    encode(
        &blob,
        b"blob",
        EncodeOptions {
            checksum: false,
            expires_at: None,
        },
        &mut value,
    )
    .unwrap();
    let mut dst = vec![0u8; value.len()];
    let mut g = c.benchmark_group("chunk_1mib");
    g.throughput(criterion::Throughput::Bytes(value.len() as u64));
    g.bench_function("memcpy", |b| {
        b.iter(|| dst.copy_from_slice(black_box(&value)));
    });
    let mut out = Vec::with_capacity(value.len());
    g.bench_function("plan_and_assemble", |b| {
        b.iter(|| chunk_roundtrip(&p, &value, &mut out));
    });
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
            ab_report();
        },
        benches,
    );
}
