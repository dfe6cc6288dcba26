//! Property tests: roundtrip of arbitrary serde values under each codec, no
//! panic on arbitrary or mutated bytes, chunk roundtrip for sizes up to
//! several MiB.

use std::collections::BTreeMap;

use proptest::prelude::*;
use serde::{Deserialize, Serialize};
use strata_codec::{
    ChecksumCheck, ChunkLayout, ChunkPlanner, DecodeOptions, EncodeOptions, Header, Manifest,
    Previous, TupleChunkLayout, decode, decode_with, encode, value, verify,
};
use strata_keys::Subspace;

use crate::{envelope_of_len, filler};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
enum Kind {
    Unit,
    Small(u8),
    Named { text: String, n: i64 },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Arb {
    a: u64,
    b: i32,
    text: String,
    list: Vec<u16>,
    maybe: Option<bool>,
    kind: Kind,
    pairs: Vec<(u8, String)>,
    bytes: Vec<u8>,
    f: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
struct AsPostcard(Arb);
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
struct AsJson(Arb);
value!(AsPostcard: postcard, version = 3);
value!(AsJson: json, version = 3);

fn kind() -> impl Strategy<Value = Kind> {
    prop_oneof![
        Just(Kind::Unit),
        any::<u8>().prop_map(Kind::Small),
        (".{0,8}", any::<i64>()).prop_map(|(text, n)| Kind::Named { text, n }),
    ]
}

fn arb() -> impl Strategy<Value = Arb> {
    (
        (
            any::<u64>(),
            any::<i32>(),
            ".{0,16}",
            proptest::collection::vec(any::<u16>(), 0..8),
        ),
        (
            any::<Option<bool>>(),
            kind(),
            proptest::collection::vec((any::<u8>(), ".{0,4}"), 0..4),
        ),
        (
            proptest::collection::vec(any::<u8>(), 0..32),
            -1e300..1e300f64,
        ),
    )
        .prop_map(
            |((a, b, text, list), (maybe, kind, pairs), (bytes, f))| Arb {
                a,
                b,
                text,
                list,
                maybe,
                kind,
                pairs,
                bytes,
                f,
            },
        )
}

fn options() -> impl Strategy<Value = EncodeOptions> {
    (any::<bool>(), any::<Option<u64>>()).prop_map(|(checksum, expires_at)| EncodeOptions {
        checksum,
        expires_at,
    })
}

fn enc<T: strata_codec::Value>(v: &T, key: &[u8], o: EncodeOptions) -> Vec<u8> {
    let mut out = Vec::new();
    encode(v, key, o, &mut out).unwrap();
    out
}

fn planner(chunk: usize) -> ChunkPlanner<TupleChunkLayout> {
    let layout = TupleChunkLayout::new(Subspace::new(&("actor", 7_i64)), 0, 1).unwrap();
    ChunkPlanner::new(layout, chunk).unwrap().always_chunked()
}

fn chunk_roundtrip(len: usize, chunk: usize, seed: u64) -> Result<(), TestCaseError> {
    let value = envelope_of_len(len, seed);
    let p = planner(chunk);
    let plan = p.plan_write(b"key", &value, Previous::Absent).unwrap();
    prop_assert_eq!(plan.puts.len() - 1, value.len().div_ceil(chunk));
    for (i, row) in plan.puts[1..].iter().enumerate() {
        let due = if i + 2 == plan.puts.len() {
            len - chunk * i
        } else {
            chunk
        };
        prop_assert_eq!(row.value.len(), due);
    }
    let stored: u64 = plan
        .puts
        .iter()
        .map(|r| (r.key.len() + r.value.len()) as u64)
        .sum();
    prop_assert_eq!(plan.stored_bytes(), stored);
    let store: BTreeMap<Vec<u8>, Vec<u8>> = plan
        .puts
        .iter()
        .map(|r| (r.key.clone(), r.value.to_vec()))
        .collect();
    let range = p.layout().chunks_from(b"key", 0);
    let rows = store.range(range.into_bounds());
    let back = p
        .assemble(b"key", &store[&p.meta_key(b"key")], rows)
        .unwrap();
    prop_assert!(back.as_ref() == value.as_slice());
    Ok(())
}

proptest! {
    #![proptest_config(crate::proptest_cases::cases(256))]

    #[test]
    fn serde_values_roundtrip_under_postcard_and_json(v in arb(), key in proptest::collection::vec(any::<u8>(), 0..16), o in options()) {
        let p = AsPostcard(v.clone());
        prop_assert_eq!(decode::<AsPostcard>(&key, &enc(&p, &key, o)).unwrap(), p);
        let j = AsJson(v);
        prop_assert_eq!(decode::<AsJson>(&key, &enc(&j, &key, o)).unwrap(), j);
    }

    #[test]
    fn raw_values_roundtrip(v in proptest::collection::vec(any::<u8>(), 0..300), s in ".{0,40}", o in options()) {
        prop_assert_eq!(decode::<Vec<u8>>(b"k", &enc(&v, b"k", o)).unwrap(), v);
        prop_assert_eq!(decode::<String>(b"k", &enc(&s, b"k", o)).unwrap(), s.clone());
        let header = Header::read(&enc(&s, b"k", o)).unwrap();
        prop_assert_eq!(header.expires_at, o.expires_at);
        prop_assert_eq!(header.checksum.is_some(), o.checksum);
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
        let _ = Header::read(&bytes);
        let _ = verify(b"k", &bytes);
        let _ = decode::<AsPostcard>(b"k", &bytes);
        let _ = decode::<AsJson>(b"k", &bytes);
        let _ = decode::<Vec<u8>>(b"k", &bytes);
        let _ = decode::<String>(b"k", &bytes);
        let _ = Manifest::from_bytes(&bytes);
        let p = planner(7);
        let _ = p.read_meta(b"k", &bytes);
        let _ = p.assemble(b"k", &bytes, [(bytes.clone(), bytes.clone())]);
    }

    #[test]
    fn arbitrary_bodies_behind_a_valid_header_never_panic(codec in 0u8..3, version in 0u16..5, body in proptest::collection::vec(any::<u8>(), 0..64)) {
        let mut bytes = vec![0xE1, codec];
        bytes.extend_from_slice(&version.to_be_bytes());
        bytes.push(0);
        bytes.extend_from_slice(&body);
        let _ = decode::<AsPostcard>(b"k", &bytes);
        let _ = decode::<AsJson>(b"k", &bytes);
        let _ = decode::<String>(b"k", &bytes);
    }

    #[test]
    fn a_mutated_checksummed_envelope_never_decodes_to_another_value(v in arb(), at in any::<usize>(), xor in 1u8..=255) {
        let p = AsPostcard(v);
        let mut bytes = enc(&p, b"k", EncodeOptions::default());
        let i = at % bytes.len();
        bytes[i] ^= xor;
        let strict = DecodeOptions::checksum(ChecksumCheck::Require);
        if let Ok((back, _)) = decode_with::<AsPostcard>(b"k", &bytes, strict) {
            prop_assert_eq!(back, p);
        }
    }

    #[test]
    fn chunks_roundtrip_small_sizes(len in 5usize..200, chunk in 1usize..40, seed in any::<u64>()) {
        chunk_roundtrip(len, chunk, seed)?;
    }

    #[test]
    fn chunks_roundtrip_around_every_boundary(extra in 0usize..3, k in 1usize..4, seed in any::<u64>()) {
        // chunk size -1 / +0 / +1 times k, for 10,000-byte chunks.
        chunk_roundtrip(10_000 * k + extra - 1, 10_000, seed)?;
    }
}

proptest! {
    #![proptest_config(crate::proptest_cases::cases(12))]

    #[test]
    fn chunks_roundtrip_up_to_several_mib(len in 5usize..(4 << 20), chunk in prop_oneof![Just(10_000usize), 1_000usize..200_000], seed in any::<u64>()) {
        chunk_roundtrip(len, chunk, seed)?;
    }
}

#[test]
fn filler_is_deterministic() {
    assert_eq!(filler(10, 1), filler(10, 1));
    assert_ne!(filler(10, 1), filler(10, 2));
}
