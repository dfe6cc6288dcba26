//! Long keys in byte order, the key limit, and ranges read in batches.

use std::ops::Bound;

use strata_engine::{
    Commit, CommitError, Engine, KeyspaceSpec, Mutation, MutationError, Predicate, Profile,
    RangeSpec, Snapshot,
};
use strata_engine_postgres::layout::INDEXED_PREFIX;
use strata_engine_postgres::{MAX_KEY_BYTES, MAX_VALUE_BYTES, PostgresOptions};

fn keys_of(e: &strata_engine_postgres::PostgresEngine, range: RangeSpec) -> Vec<Vec<u8>> {
    let ks = e.keyspace("k").unwrap();
    e.snapshot()
        .unwrap()
        .range(ks, range)
        .unwrap()
        .map(|r| r.unwrap().0)
        .collect()
}

/// Keys around the indexed prefix's end and up to the maximum, many sharing
/// a whole prefix, come back in byte order, forward and reverse, within
/// bounds that fall in the unindexed part.
#[test]
fn long_keys_sort_and_bound_as_bytes() {
    let (_s, _c, e) = super::open(
        "long_keys",
        vec![KeyspaceSpec::new("k", Profile::General)],
        PostgresOptions {
            range_batch: 3,
            ..PostgresOptions::default()
        },
    );
    let ks = e.keyspace("k").unwrap();
    let p = INDEXED_PREFIX;
    let shared = vec![0x41u8; p];
    let with = |tail: &[u8]| [&shared[..], tail].concat();
    let mut keys = vec![
        vec![0x41; p - 1],
        shared.clone(),
        with(&[0x00]),
        with(&[0x00, 0x00]),
        with(&[0x01]),
        with(&vec![0x7F; 8_000]),
        with(&[0xFF]),
        vec![0x41; MAX_KEY_BYTES],
        with(&vec![0xFF; MAX_KEY_BYTES - p]),
        vec![0x42],
        vec![0x40; p + 10],
    ];
    let mut c = Commit::new();
    for (i, k) in keys.iter().enumerate() {
        c = c.put(ks, k.clone(), vec![u8::try_from(i).unwrap()]);
    }
    e.commit(c).unwrap();
    // The expected order, from Rust's byte-slice order (not from the engine).
    keys.sort();
    assert_eq!(keys_of(&e, RangeSpec::all()), keys);
    let mut rev = keys.clone();
    rev.reverse();
    assert_eq!(keys_of(&e, RangeSpec::all().reversed()), rev);
    // Bounds inside the rows sharing the whole prefix.
    let range = RangeSpec {
        start: Bound::Excluded(with(&[0x00])),
        end: Bound::Included(with(&vec![0x7F; 8_000])),
        reverse: false,
        limit: None,
    };
    let expect: Vec<Vec<u8>> = keys.iter().filter(|k| range.contains(k)).cloned().collect();
    assert_eq!(expect.len(), 4);
    assert_eq!(keys_of(&e, range.clone()), expect);
    assert_eq!(
        keys_of(&e, range.clone().reversed().limit(2)),
        expect.iter().rev().take(2).cloned().collect::<Vec<_>>()
    );
    // Point reads, predicates and deletes of long keys.
    let long = with(&vec![0x7F; 8_000]);
    let s = e.snapshot().unwrap();
    assert_eq!(s.get(ks, &long).unwrap(), Some(vec![5]));
    assert_eq!(
        s.get(ks, &with(&vec![0x7F; 7_999])).unwrap(),
        None,
        "a key sharing the long key's start is another key"
    );
    drop(s);
    e.commit(
        Commit::new()
            .require(Predicate::ValueEquals {
                ks,
                key: long.clone(),
                value: Some(vec![5]),
            })
            .delete(ks, long.clone()),
    )
    .unwrap();
    e.commit(Commit::new().mutate(Mutation::DeleteRange {
        ks,
        range: RangeSpec::prefix(&shared),
    }))
    .unwrap();
    let left: Vec<Vec<u8>> = keys
        .iter()
        .filter(|k| !k.starts_with(&shared))
        .cloned()
        .collect();
    assert_eq!(keys_of(&e, RangeSpec::all()), left);
}

/// A key one byte over the maximum, or an oversized value, is refused
/// before anything is sent: the version does not move and nothing of the
/// commit is there.
#[test]
fn oversized_keys_and_values_are_refused_before_sending() {
    let (_s, _c, e) = super::open(
        "oversized",
        vec![KeyspaceSpec::new("k", Profile::General)],
        PostgresOptions::default(),
    );
    let ks = e.keyspace("k").unwrap();
    let v = e.last_version();
    let too_long = vec![1u8; MAX_KEY_BYTES + 1];
    let err = e
        .commit(Commit::new().put(ks, b"first".to_vec(), b"x".to_vec()).put(
            ks,
            too_long,
            b"x".to_vec(),
        ))
        .unwrap_err();
    assert!(
        matches!(err, CommitError::InvalidMutation { index: 1, reason: MutationError::KeyTooLarge { len, max } } if len == 16_385 && max == 16_384),
        "{err:?}"
    );
    let err = e
        .commit(Commit::new().mutate(Mutation::Add {
            ks,
            key: vec![2u8; MAX_KEY_BYTES + 1],
            delta: 1,
        }))
        .unwrap_err();
    assert!(
        matches!(
            err,
            CommitError::InvalidMutation {
                index: 0,
                reason: MutationError::KeyTooLarge { .. }
            }
        ),
        "{err:?}"
    );
    let big = vec![0u8; MAX_VALUE_BYTES + 1];
    let err = e
        .commit(Commit::new().put(ks, b"big".to_vec(), big))
        .unwrap_err();
    assert!(
        matches!(err, CommitError::InvalidMutation { index: 0, reason: MutationError::ValueTooLarge { max, .. } } if max == 256 << 20),
        "{err:?}"
    );
    assert_eq!(e.last_version(), v);
    assert_eq!(
        e.sync().unwrap(),
        v,
        "the server's version did not move either"
    );
    assert!(keys_of(&e, RangeSpec::all()).is_empty());
    // The maximum itself is stored.
    e.commit(Commit::new().put(ks, vec![3u8; MAX_KEY_BYTES], b"ok".to_vec()))
        .unwrap();
    assert_eq!(keys_of(&e, RangeSpec::all()), [vec![3u8; MAX_KEY_BYTES]]);
}

/// The codec's preset states this engine's maxima.
#[test]
fn the_codec_preset_states_the_engine_maxima() {
    let l = strata_codec::Limits::POSTGRES;
    assert_eq!((l.max_key_bytes, l.max_value_bytes), (16_384, 268_435_456));
    assert_eq!(
        (l.max_key_bytes, l.max_value_bytes),
        (MAX_KEY_BYTES, MAX_VALUE_BYTES)
    );
}

/// 2,500 rows read back in small batches: every row once, in order, in
/// both directions, with limits and bounds cutting batches anywhere.
#[test]
fn ranges_stream_in_batches() {
    let (_s, _c, e) = super::open(
        "batches",
        vec![KeyspaceSpec::new("k", Profile::AppendOnly)],
        PostgresOptions {
            range_batch: 100,
            ..PostgresOptions::default()
        },
    );
    let ks = e.keyspace("k").unwrap();
    let mut c = Commit::new();
    for i in 0..2_500u32 {
        c = c.put(ks, i.to_be_bytes().to_vec(), i.to_le_bytes().to_vec());
    }
    e.commit(c).unwrap();
    let all: Vec<Vec<u8>> = (0..2_500u32).map(|i| i.to_be_bytes().to_vec()).collect();
    let s = e.snapshot().unwrap();
    let v = s.version().unwrap();
    assert!(format!("{s:?}").contains(&format!("version: {v}")), "{s:?}");
    let rows: Vec<(Vec<u8>, Vec<u8>)> = s
        .range(ks, RangeSpec::all())
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(rows.len(), 2_500);
    assert!(
        rows.iter()
            .enumerate()
            .all(|(i, (k, v))| *k == all[i] && *v == u32::try_from(i).unwrap().to_le_bytes())
    );
    let rev: Vec<Vec<u8>> = s
        .range(ks, RangeSpec::all().reversed())
        .unwrap()
        .map(|r| r.unwrap().0)
        .collect();
    assert_eq!(rev, all.iter().rev().cloned().collect::<Vec<_>>());
    let cut = RangeSpec::half_open(
        100u32.to_be_bytes().to_vec(),
        2_000u32.to_be_bytes().to_vec(),
    )
    .limit(1_234);
    let got: Vec<Vec<u8>> = s.range(ks, cut).unwrap().map(|r| r.unwrap().0).collect();
    assert_eq!(got, all[100..1_334]);
    // Two ranges of one snapshot interleaved, while a commit lands: both
    // keep the snapshot's view.
    let mut a = s.range(ks, RangeSpec::all()).unwrap();
    assert!(
        format!("{a:?}").starts_with("PostgresRange { range: RangeSpec"),
        "{a:?}"
    );
    let mut b = s.range(ks, RangeSpec::all().reversed()).unwrap();
    e.commit(
        Commit::new()
            .put(ks, vec![0xFF; 5], vec![])
            .delete(ks, all[0].clone()),
    )
    .unwrap();
    let (mut na, mut nb) = (0, 0);
    loop {
        let x = a.next();
        let y = b.next();
        if x.is_none() && y.is_none() {
            break;
        }
        na += usize::from(x.is_some());
        nb += usize::from(y.is_some());
    }
    assert_eq!((na, nb), (2_500, 2_500));
}

/// Random ranges (bounds inside and outside shared prefixes, both
/// directions, limits) over keys of which many share the whole indexed
/// prefix, read in batches of 2 to 5 rows, against a sorted map.
#[test]
fn random_ranges_over_shared_prefixes_match_a_sorted_map() {
    use std::collections::BTreeMap;
    use strata_engine::{Rng, SeededRng};
    let (_s, config, e) = super::open(
        "random_ranges",
        vec![KeyspaceSpec::new("k", Profile::General)],
        PostgresOptions::default(),
    );
    let ks = e.keyspace("k").unwrap();
    let mut rng = SeededRng::new(20);
    let prefixes: Vec<Vec<u8>> = (0..3u8).map(|i| vec![b'p' + i; INDEXED_PREFIX]).collect();
    let key = |rng: &mut SeededRng| -> Vec<u8> {
        let mut k = if rng.chance(0.8) {
            prefixes[usize::try_from(rng.below(3)).unwrap()].clone()
        } else {
            vec![
                b'p' + u8::try_from(rng.below(4)).unwrap();
                usize::try_from(rng.below(3)).unwrap() + 1
            ]
        };
        for _ in 0..rng.below(4) {
            k.push(u8::try_from(rng.below(4)).unwrap() * 0x55);
        }
        k
    };
    let mut oracle = BTreeMap::new();
    let mut c = Commit::new();
    for i in 0..120u32 {
        let k = key(&mut rng);
        oracle.insert(k.clone(), i.to_be_bytes().to_vec());
        c = c.put(ks, k, i.to_be_bytes().to_vec());
    }
    e.commit(c).unwrap();
    for batch in 2..=5 {
        let e2 = strata_engine_postgres::PostgresEngine::open(
            config.clone(),
            vec![KeyspaceSpec::new("k", Profile::General)],
            PostgresOptions {
                range_batch: batch,
                ..PostgresOptions::default()
            },
        )
        .unwrap();
        let ks2 = e2.keyspace("k").unwrap();
        let snap = e2.snapshot().unwrap();
        for _ in 0..40 {
            let bound = |rng: &mut SeededRng| match rng.below(3) {
                0 => Bound::Unbounded,
                1 => Bound::Included(key(rng)),
                _ => Bound::Excluded(key(rng)),
            };
            let (start, end) = (bound(&mut rng), bound(&mut rng));
            let range = RangeSpec {
                start,
                end,
                reverse: rng.chance(0.5),
                limit: rng
                    .chance(0.5)
                    .then(|| usize::try_from(rng.below(30)).unwrap()),
            };
            if range.validate().is_err() {
                continue;
            }
            let mut expect: Vec<(Vec<u8>, Vec<u8>)> = oracle
                .iter()
                .filter(|(k, _)| range.contains(k))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            if range.reverse {
                expect.reverse();
            }
            expect.truncate(range.limit.unwrap_or(usize::MAX));
            let got: Vec<(Vec<u8>, Vec<u8>)> = snap
                .range(ks2, range.clone())
                .unwrap()
                .map(Result::unwrap)
                .collect();
            assert_eq!(got, expect, "batch {batch}, {range:?}");
        }
    }
}

/// Keyspace names are data, never SQL: quotes, a NUL, other scripts, case
/// and a long name each get their own table, kept across a reopen with the
/// declarations in another order.
#[test]
fn any_keyspace_name_is_safe_and_kept() {
    let names = [
        "a",
        "A",
        "it's; DROP TABLE strata_meta; --",
        "nul\0inside",
        "ключи/キー",
        &"long".repeat(40),
    ];
    let specs = |order: &[usize]| -> Vec<KeyspaceSpec> {
        order
            .iter()
            .map(|&i| KeyspaceSpec::new(names[i], Profile::General))
            .collect()
    };
    let (_s, config, e) = super::open(
        "names",
        specs(&[0, 1, 2, 3, 4, 5]),
        PostgresOptions::default(),
    );
    for (i, name) in names.iter().enumerate() {
        let ks = e.keyspace(name).unwrap();
        e.commit(Commit::new().put(ks, b"k".to_vec(), vec![u8::try_from(i).unwrap()]))
            .unwrap();
    }
    drop(e);
    let e = strata_engine_postgres::PostgresEngine::open(
        config,
        specs(&[5, 3, 1, 4, 0, 2]),
        PostgresOptions::default(),
    )
    .unwrap();
    let s = e.snapshot().unwrap();
    for (i, name) in names.iter().enumerate() {
        let ks = e.keyspace(name).unwrap();
        assert_eq!(
            s.get(ks, b"k").unwrap(),
            Some(vec![u8::try_from(i).unwrap()]),
            "{name:?}"
        );
    }
    assert_eq!(s.version().unwrap(), 6, "the meta table is intact");
}
