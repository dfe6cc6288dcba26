//! Chunk planning and assembly, the tuple layout, and every
//! way a chunk set can be wrong.

use std::borrow::Cow;
use std::collections::BTreeMap;

use strata_codec::{
    ChunkError, ChunkLayout, ChunkPlanner, DecodeError, EncodeOptions, Limits, Previous, Stale,
    TupleChunkLayout, decode, encode,
};
use strata_keys::{Subspace, tuple};

use crate::{envelope_of_len, hex};

const METADATA: i64 = 1;
const DATA: i64 = 2;

/// 10,000-byte chunks, every value chunked, in the tuple layout.
fn planner() -> ChunkPlanner<TupleChunkLayout> {
    let layout = TupleChunkLayout::new(Subspace::new(&(1_i64, 2_i64)), METADATA, DATA).unwrap();
    ChunkPlanner::new(layout, 10_000).unwrap().always_chunked()
}

/// Applies a plan to an ordered map standing in for an engine.
fn apply(store: &mut BTreeMap<Vec<u8>, Vec<u8>>, plan: &strata_codec::WritePlan<'_>) {
    for stale in &plan.deletes {
        match stale {
            Stale::Key(k) => {
                store.remove(k);
            }
            Stale::Range(r) => {
                let doomed: Vec<Vec<u8>> =
                    store.keys().filter(|k| r.contains(k)).cloned().collect();
                for k in doomed {
                    store.remove(&k);
                }
            }
        }
    }
    for row in &plan.puts {
        store.insert(row.key.clone(), row.value.to_vec());
    }
}

/// Reads a value back the way a store would: metadata row, then a range scan.
fn read<L: ChunkLayout>(
    store: &BTreeMap<Vec<u8>, Vec<u8>>,
    p: &ChunkPlanner<L>,
    key: &[u8],
) -> Result<Vec<u8>, ChunkError> {
    let meta = store.get(&p.meta_key(key)).expect("metadata row");
    let range = p.layout().chunks_from(key, 0);
    let rows = store.range(range.into_bounds());
    p.assemble(key, meta, rows).map(Cow::into_owned)
}

#[test]
fn tuple_layout_rows_are_the_documented_tuples() {
    let p = planner();
    let key = b"\x04a";
    let value = envelope_of_len(25_000, 1);
    let plan = p.plan_write(key, &value, Previous::Absent).unwrap();
    let keys: Vec<String> = plan.puts.iter().map(|r| hex(&r.key)).collect();
    assert_eq!(
        keys,
        [
            "15 01 15 02 01 04 61 00 15 01",
            "15 01 15 02 01 04 61 00 15 02 14",
            "15 01 15 02 01 04 61 00 15 02 15 01",
            "15 01 15 02 01 04 61 00 15 02 15 02",
        ]
    );
    // The same keys built directly with the tuple layer.
    let sub = Subspace::new(&(1_i64, 2_i64));
    assert_eq!(plan.puts[0].key, sub.pack(&(&key[..], METADATA)));
    assert_eq!(plan.puts[3].key, sub.pack(&(&key[..], DATA, 2_u32)));
    let lens: Vec<usize> = plan.puts[1..].iter().map(|r| r.value.len()).collect();
    assert_eq!(lens, [10_000, 10_000, 5_000]);
    assert_eq!(p.chunk_size(), 10_000);
    assert!(plan.deletes.is_empty());
    // Chunks borrow from the value: planning copies nothing.
    assert!(
        plan.puts[1..]
            .iter()
            .all(|r| matches!(r.value, Cow::Borrowed(_)))
    );

    let mut store = BTreeMap::new();
    apply(&mut store, &plan);
    assert_eq!(read(&store, &p, key).unwrap(), value);
    assert_eq!(
        plan.stored_bytes(),
        plan.puts
            .iter()
            .map(|r| (r.key.len() + r.value.len()) as u64)
            .sum::<u64>()
    );
    assert!(TupleChunkLayout::new(Subspace::all(), 3, 3).is_err());
}

#[test]
fn small_and_empty_values_in_the_tuple_layout_always_chunked() {
    let p = planner();
    let tiny = envelope_of_len(9, 0);
    let one = p.plan_write(b"k", &tiny, Previous::Absent).unwrap();
    assert_eq!(
        one.puts.len(),
        2,
        "metadata plus one chunk, as the document stores it"
    );
    let empty = p.plan_write(b"k", b"", Previous::Absent);
    assert!(matches!(
        empty,
        Err(ChunkError::NotAnEnvelope(DecodeError::Truncated { .. }))
    ));
    assert!(matches!(
        p.plan_write(b"k", b"not an envelope", Previous::Absent),
        Err(ChunkError::NotAnEnvelope(DecodeError::UnknownFormat { .. }))
    ));
    let manifest = one.puts[0].value.to_vec();
    assert!(matches!(
        p.plan_write(b"k", &manifest, Previous::Absent),
        Err(ChunkError::NotAnEnvelope(DecodeError::Chunked))
    ));
    let mut store = BTreeMap::new();
    apply(&mut store, &one);
    assert_eq!(read(&store, &p, b"k").unwrap(), tiny);
}

#[test]
fn chunk_counts_at_the_chunk_size_boundary() {
    let p = planner();
    for (len, chunks) in [
        (9_999, 1),
        (10_000, 1),
        (10_001, 2),
        (19_999, 2),
        (20_000, 2),
        (20_001, 3),
    ] {
        let v = envelope_of_len(len, 2);
        let plan = p.plan_write(b"k", &v, Previous::Absent).unwrap();
        assert_eq!(plan.puts.len() - 1, chunks, "{len} bytes");
        let mut store = BTreeMap::new();
        apply(&mut store, &plan);
        assert_eq!(read(&store, &p, b"k").unwrap(), v, "{len} bytes");
    }
    // An inline planner keeps values up to the chunk size in one row.
    let inline =
        ChunkPlanner::new(TupleChunkLayout::new(Subspace::all(), 0, 1).unwrap(), 100).unwrap();
    assert_eq!(
        inline
            .plan_write(b"k", &envelope_of_len(100, 0), Previous::Absent)
            .unwrap()
            .puts
            .len(),
        1
    );
    assert_eq!(
        inline
            .plan_write(b"k", &envelope_of_len(101, 0), Previous::Absent)
            .unwrap()
            .puts
            .len(),
        3
    );
    let tiny = inline.clone().inline_up_to(10);
    assert_eq!(
        tiny.plan_write(b"k", &envelope_of_len(11, 0), Previous::Absent)
            .unwrap()
            .puts
            .len(),
        2
    );
    assert!(matches!(
        ChunkPlanner::new(TupleChunkLayout::new(Subspace::all(), 0, 1).unwrap(), 0),
        Err(ChunkError::InvalidChunkSize)
    ));
}

#[test]
fn a_value_of_the_actor_kv_limit_fits_one_batch() {
    let p = planner();
    let limits = Limits::ACTOR_KV;
    // The largest logical value: its envelope is the value limit.
    let value = envelope_of_len(limits.max_value_bytes, 3);
    let plan = p.plan_write(&[4; 100], &value, Previous::Unknown).unwrap();
    let size = plan.check(&limits).unwrap();
    assert_eq!(
        size.entries,
        1 + 14 + 1,
        "metadata, 14 chunks, one range delete"
    );
    assert!(size.bytes < limits.max_batch_bytes);
}

#[test]
fn overwriting_with_a_smaller_value_deletes_the_stale_chunks() {
    let p = planner();
    let mut store = BTreeMap::new();
    apply(
        &mut store,
        &p.plan_write(b"k", &envelope_of_len(45_000, 4), Previous::Absent)
            .unwrap(),
    );
    apply(
        &mut store,
        &p.plan_write(b"other", &envelope_of_len(30_000, 5), Previous::Absent)
            .unwrap(),
    );
    let before = store.len();
    assert_eq!(before, 6 + 4);

    let meta = store.get(&p.meta_key(b"k")).cloned();
    let previous = p.previous(b"k", meta.as_deref()).unwrap();
    assert_eq!(previous, Previous::Chunked { chunk_count: 5 });
    let smaller = envelope_of_len(12_000, 6);
    let plan = p.plan_write(b"k", &smaller, previous).unwrap();
    let deleted: Vec<Vec<u8>> = plan
        .deletes
        .iter()
        .map(|s| match s {
            Stale::Key(k) => k.clone(),
            Stale::Range(_) => panic!("exact deletes when the old count is known"),
        })
        .collect();
    let expected: Vec<Vec<u8>> = (2..5)
        .map(|i| {
            let mut k = Vec::new();
            p.layout().chunk_key(b"k", i, &mut k);
            k
        })
        .collect();
    assert_eq!(deleted, expected);
    apply(&mut store, &plan);
    assert_eq!(
        store.len(),
        3 + 4,
        "no stale chunk of `k` remains; `other` untouched"
    );
    assert_eq!(read(&store, &p, b"k").unwrap(), smaller);
    assert_eq!(
        read(&store, &p, b"other").unwrap(),
        envelope_of_len(30_000, 5)
    );

    // Without knowing the old value, one range delete does the same.
    let mut blind = BTreeMap::new();
    apply(
        &mut blind,
        &p.plan_write(b"k", &envelope_of_len(45_000, 4), Previous::Absent)
            .unwrap(),
    );
    apply(
        &mut blind,
        &p.plan_write(b"other", &envelope_of_len(30_000, 5), Previous::Absent)
            .unwrap(),
    );
    apply(
        &mut blind,
        &p.plan_write(b"k", &smaller, Previous::Unknown).unwrap(),
    );
    assert_eq!(blind, store);

    // Deleting removes every row of the value.
    let meta = store.get(&p.meta_key(b"k")).cloned();
    for stale in p.plan_delete(b"k", p.previous(b"k", meta.as_deref()).unwrap()) {
        let Stale::Key(k) = stale else {
            panic!("exact")
        };
        store.remove(&k);
    }
    assert_eq!(store.len(), 4);
}

#[test]
fn inline_after_chunked_removes_all_chunks() {
    let p =
        ChunkPlanner::new(TupleChunkLayout::new(Subspace::all(), 0, 1).unwrap(), 1_000).unwrap();
    let mut store = BTreeMap::new();
    apply(
        &mut store,
        &p.plan_write(b"k", &envelope_of_len(3_500, 7), Previous::Absent)
            .unwrap(),
    );
    assert_eq!(store.len(), 5);
    let prev = p
        .previous(b"k", store.get(&p.meta_key(b"k")).map(Vec::as_slice))
        .unwrap();
    let small = envelope_of_len(12, 1);
    apply(&mut store, &p.plan_write(b"k", &small, prev).unwrap());
    assert_eq!(store.len(), 1);
    let meta = &store[&p.meta_key(b"k")];
    assert_eq!(p.read_meta(b"k", meta).unwrap(), None);
    assert!(
        matches!(p.assemble(b"k", meta, std::iter::empty::<(Vec<u8>, Vec<u8>)>()).unwrap(), Cow::Borrowed(b) if *b == small[..])
    );
    assert_eq!(p.previous(b"k", Some(meta)).unwrap(), Previous::Inline);
    assert_eq!(p.previous(b"k", None).unwrap(), Previous::Absent);
}

#[test]
fn a_chunked_envelope_decodes_after_assembly() {
    let p = planner();
    let text = "x".repeat(50_000);
    let mut env = Vec::new();
    encode(&text, b"log/1", EncodeOptions::default(), &mut env).unwrap();
    let mut store = BTreeMap::new();
    apply(
        &mut store,
        &p.plan_write(b"log/1", &env, Previous::Absent).unwrap(),
    );
    let meta = &store[&p.meta_key(b"log/1")];
    assert!(matches!(
        decode::<String>(b"log/1", meta),
        Err(DecodeError::Chunked)
    ));
    let whole = read(&store, &p, b"log/1").unwrap();
    assert_eq!(decode::<String>(b"log/1", &whole).unwrap(), text);
}

#[test]
fn a_chunk_manifest_carries_the_values_expiry() {
    let p = planner();
    let mut env = Vec::new();
    let options = EncodeOptions {
        checksum: true,
        expires_at: Some(1_700_000_000_123),
    };
    encode(&"y".repeat(25_000), b"k", options, &mut env).unwrap();
    let plan = p.plan_write(b"k", &env, Previous::Absent).unwrap();
    let (header, _) = strata_codec::verify(b"k", &plan.puts[0].value).unwrap();
    assert!(header.chunked);
    assert_eq!(header.expires_at, Some(1_700_000_000_123));
    assert!(header.is_expired(1_700_000_000_123) && !header.is_expired(1_700_000_000_122));
}

/// The rows of a 3-chunk value, to break in every way.
fn rows() -> (
    ChunkPlanner<TupleChunkLayout>,
    Vec<u8>,
    Vec<(Vec<u8>, Vec<u8>)>,
) {
    let p = planner();
    let value = envelope_of_len(25_000, 8);
    let plan = p.plan_write(b"k", &value, Previous::Absent).unwrap();
    let meta = plan.puts[0].value.to_vec();
    let chunks = plan.puts[1..]
        .iter()
        .map(|r| (r.key.clone(), r.value.to_vec()))
        .collect();
    (p, meta, chunks)
}

#[test]
fn missing_extra_reordered_foreign_and_corrupt_chunks_are_typed_errors() {
    let (p, meta, chunks) = rows();
    let go = |rows: Vec<(Vec<u8>, Vec<u8>)>| p.assemble(b"k", &meta, rows);
    assert_eq!(go(chunks.clone()).unwrap().len(), 25_000);

    let mut missing_middle = chunks.clone();
    missing_middle.remove(1);
    assert!(matches!(
        go(missing_middle),
        Err(ChunkError::MissingChunk { index: 1 })
    ));
    assert!(matches!(
        go(chunks[..2].to_vec()),
        Err(ChunkError::MissingChunk { index: 2 })
    ));

    let mut duplicated = chunks.clone();
    duplicated.insert(2, chunks[1].clone());
    assert!(matches!(
        go(duplicated),
        Err(ChunkError::OutOfOrder {
            expected: 2,
            found: 1
        })
    ));
    let reordered = vec![chunks[0].clone(), chunks[2].clone(), chunks[1].clone()];
    assert!(matches!(
        go(reordered),
        Err(ChunkError::MissingChunk { index: 1 })
    ));

    let mut extra = chunks.clone();
    let mut stale_key = Vec::new();
    p.layout().chunk_key(b"k", 3, &mut stale_key);
    extra.push((stale_key, vec![0; 10]));
    assert!(matches!(
        go(extra),
        Err(ChunkError::ExtraChunk { index: 3, count: 3 })
    ));

    let mut foreign = chunks.clone();
    foreign[1].0 = Subspace::new(&(9_i64,)).pack(&(1_i64,));
    assert!(matches!(go(foreign), Err(ChunkError::ForeignRow)));

    let mut short = chunks.clone();
    short[0].1.pop();
    assert!(matches!(
        go(short),
        Err(ChunkError::ChunkLength {
            index: 0,
            len: 9_999,
            expected: 10_000
        })
    ));

    let mut flipped = chunks.clone();
    flipped[2].1[17] ^= 0x40;
    assert!(matches!(go(flipped), Err(ChunkError::Checksum { .. })));

    let mut bad_meta = meta.clone();
    let last = bad_meta.len() - 1;
    bad_meta[last] ^= 1;
    assert!(matches!(
        p.assemble(b"k", &bad_meta, chunks.clone()),
        Err(ChunkError::Meta(DecodeError::ChecksumMismatch { .. }))
    ));
    // Under another logical key the manifest's checksum fails.
    assert!(matches!(
        p.assemble(b"j", &meta, chunks),
        Err(ChunkError::Meta(_))
    ));
}

#[test]
fn manifest_bytes_are_checked() {
    use strata_codec::Manifest;
    let m = Manifest {
        total_len: 25_000,
        chunk_count: 3,
        chunk_size: 10_000,
        checksum: 7,
    };
    assert_eq!(Manifest::from_bytes(&m.to_bytes()).unwrap(), m);
    assert_eq!(
        hex(&m.to_bytes()),
        "00 00 00 00 00 00 61 a8 00 00 00 03 00 00 27 10 00 00 00 07"
    );
    let wrong_count = Manifest {
        chunk_count: 4,
        ..m
    };
    assert!(matches!(
        Manifest::from_bytes(&wrong_count.to_bytes()),
        Err(ChunkError::BadManifest)
    ));
    let zero_size = Manifest { chunk_size: 0, ..m };
    assert!(matches!(
        Manifest::from_bytes(&zero_size.to_bytes()),
        Err(ChunkError::BadManifest)
    ));
    assert!(matches!(
        Manifest::from_bytes(&[0; 19]),
        Err(ChunkError::BadManifest)
    ));
    let _ = tuple::pack(&(1_i64,));
}

#[test]
fn assemble_into_appends_to_a_reused_buffer_and_restores_it_on_error() {
    let (p, meta, chunks) = rows();
    let mut out = b"prefix".to_vec();
    p.assemble_into(b"k", &meta, chunks.clone(), &mut out)
        .unwrap();
    assert_eq!(out.len(), 6 + 25_000);
    assert_eq!(&out[..6], b"prefix");
    let whole = p.assemble(b"k", &meta, chunks.clone()).unwrap();
    assert_eq!(&out[6..], whole.as_ref());

    let mut broken = chunks;
    broken[2].1[0] ^= 1;
    let mut out = b"keep".to_vec();
    assert!(matches!(
        p.assemble_into(b"k", &meta, broken, &mut out),
        Err(ChunkError::Checksum { .. })
    ));
    assert_eq!(out, b"keep");

    // An inline value is copied.
    let inline =
        ChunkPlanner::new(TupleChunkLayout::new(Subspace::all(), 0, 1).unwrap(), 100).unwrap();
    let small = envelope_of_len(20, 9);
    let plan = inline.plan_write(b"k", &small, Previous::Absent).unwrap();
    let mut out = Vec::new();
    inline
        .assemble_into(
            b"k",
            &plan.puts[0].value,
            std::iter::empty::<(Vec<u8>, Vec<u8>)>(),
            &mut out,
        )
        .unwrap();
    assert_eq!(out, small);
}
