//! Actor KV on a store: the engine's physical bytes (written out by hand
//! from the public source's encoders, see `physical.rs`: rivet-dev/rivet's
//! `pegboard/src/keys/actor_kv.rs` at `3149f982b6b5ec49ba09658cfcc6cad801b5eec8`,
//! `pegboard/src/actor_kv/mod.rs` at `0d63b291932d6ece1a491ce6147823bcd6828917`,
//! `util-id/src/lib.rs` at `173e6ba9f3ce2696d2bd10cd2de7620aeb1ac712`), both layouts,
//! the operations, limits, the exact quota, lists and migration, on every
//! engine. The client helpers are in `actor_kv_client.rs`.

#![allow(
    clippy::cast_possible_truncation,
    clippy::cast_possible_wrap,
    clippy::cast_sign_loss,
    clippy::type_complexity,
    clippy::too_many_lines
)]

use std::collections::BTreeMap;

use strata_engine::{Engine, KeyspaceSpec};
use strata_keys::KeyRange;
use strata_schemas::actor_kv::client::WriteBuffer;
use strata_schemas::actor_kv::{
    ActorId, ActorKv, ActorKvConfig, ActorKvError, DataProblem, KvMetadata, Layout, ListOptions,
    ListQuery, LogicalKey, PhysicalLayout, ROWS_SPACE,
};
use strata_store::Store;

use crate::actor_kv_client::{actor, metadata_bytes, subspace_bytes};
use crate::{START_MS, store_on};

fn specs() -> Vec<KeyspaceSpec> {
    ActorKv::<strata_engine::MemEngine>::store_options().keyspace_specs()
}

fn config(layout: PhysicalLayout) -> ActorKvConfig {
    ActorKvConfig {
        layout,
        quota_bytes: 1 << 30,
        version: b"2.0.33".to_vec(),
    }
}

fn open<E: Engine>(engine: E, config: ActorKvConfig) -> ActorKv<E> {
    let (store, _clock) = store_on(engine, ActorKv::<E>::store_options());
    ActorKv::open(store, config).unwrap()
}

fn with(prefix: &[u8], tail: &[u8]) -> Vec<u8> {
    let mut v = prefix.to_vec();
    v.extend_from_slice(tail);
    v
}

fn raw_rows<E: Engine>(kv: &ActorKv<E>) -> Vec<(Vec<u8>, Vec<u8>)> {
    let space = kv.store().space(ROWS_SPACE).unwrap();
    let mut tx = kv.store().begin();
    tx.snapshot_scan_in(&space, &KeyRange::prefix(&[]), None, false)
        .unwrap()
        .rows
}

pub(crate) fn value(n: usize, seed: u8) -> Vec<u8> {
    (0..n).map(|i| (i as u8).wrapping_mul(31) ^ seed).collect()
}

fn user(key: &[u8]) -> Vec<u8> {
    LogicalKey::UserKv { key: key.to_vec() }.encode(Layout::Unversioned)
}

/// A compatible-layout put writes exactly the engine's rows: for key
/// `[4, 'a', 0x00, 'b']` the wrapper `0x05 0x01 0x04 'a' 0x00 0xFF 'b' 0x00
/// 0x00`, two data rows `(DATA=0x15 0x04, 0x14)` and `(DATA, 0x15 0x01)`
/// (10,000 bytes then 2,000), and the metadata row `(METADATA=0x15 0x2C)`
/// holding the BARE metadata.
fn compatible_rows_are_the_engines_bytes<E: Engine>(engine: E) {
    let kv = open(engine, config(PhysicalLayout::Compatible));
    let v = value(12_000, 7);
    kv.put(actor(), &[(vec![4, b'a', 0, b'b'], v.clone())])
        .unwrap();
    let base = with(
        &subspace_bytes(),
        &[0x05, 0x01, 0x04, b'a', 0x00, 0xFF, b'b', 0x00, 0x00],
    );
    let expected = vec![
        (with(&base, &[0x15, 0x04, 0x14]), v[..10_000].to_vec()),
        (with(&base, &[0x15, 0x04, 0x15, 0x01]), v[10_000..].to_vec()),
        (with(&base, &[0x15, 0x2C]), metadata_bytes()),
    ];
    assert_eq!(raw_rows(&kv), expected);
    assert_eq!(kv.usage(actor()).unwrap(), 4 + 2 + 12_000);
}

/// Rows as the engine writes them (put by hand into the space) read back
/// through every operation.
fn rows_the_engine_wrote_read_back<E: Engine>(engine: E) {
    let kv = open(engine, config(PhysicalLayout::Compatible));
    let space = kv.store().space(ROWS_SPACE).unwrap();
    let v = value(20_001, 3);
    let base = with(&subspace_bytes(), &[0x05, 0x01, b'k', 0x00, 0x00]);
    let mut tx = kv.store().begin();
    tx.put_in(&space, with(&base, &[0x15, 0x2C]), metadata_bytes())
        .unwrap();
    tx.put_in(
        &space,
        with(&base, &[0x15, 0x04, 0x14]),
        v[..10_000].to_vec(),
    )
    .unwrap();
    tx.put_in(
        &space,
        with(&base, &[0x15, 0x04, 0x15, 0x01]),
        v[10_000..20_000].to_vec(),
    )
    .unwrap();
    tx.put_in(
        &space,
        with(&base, &[0x15, 0x04, 0x15, 0x02]),
        v[20_000..].to_vec(),
    )
    .unwrap();
    tx.commit().unwrap();
    let got = kv.get(actor(), &[b"k".to_vec(), b"j".to_vec()]).unwrap();
    let entry = got[0].clone().expect("the engine's entry reads");
    assert_eq!(entry.value, v);
    assert_eq!(
        entry.metadata,
        KvMetadata {
            version: b"2.0.33".to_vec(),
            update_ts: START_MS as i64
        }
    );
    assert!(got[1].is_none());
    let page = kv
        .list(actor(), &ListQuery::All, &ListOptions::default())
        .unwrap();
    assert_eq!(page.entries, vec![entry.clone()]);
    assert_eq!(kv.recount(actor()).unwrap(), 3 + 20_001);
    // Nothing charged the engine's rows; a recharge sets the usage to the
    // recount.
    assert_eq!(kv.usage(actor()).unwrap(), 0);
    assert_eq!(kv.recharge(actor()).unwrap(), 3 + 20_001);
    assert_eq!(kv.usage(actor()).unwrap(), 3 + 20_001);
    // The engine's empty value: a metadata row and no data rows.
    let empty = with(&subspace_bytes(), &[0x05, 0x01, b'e', 0x00, 0x00]);
    let mut tx = kv.store().begin();
    tx.put_in(&space, with(&empty, &[0x15, 0x2C]), metadata_bytes())
        .unwrap();
    tx.commit().unwrap();
    let got = kv.get(actor(), &[b"e".to_vec()]).unwrap();
    assert_eq!(got[0].as_ref().map(|e| e.value.len()), Some(0));
    let page = kv
        .list(actor(), &ListQuery::All, &ListOptions::default())
        .unwrap();
    assert_eq!(
        page.entries
            .iter()
            .map(|e| e.key.clone())
            .collect::<Vec<_>>(),
        vec![b"e".to_vec(), b"k".to_vec()]
    );
    assert_eq!(kv.recharge(actor()).unwrap(), 3 + 20_001 + 3);
}

/// An empty value is a value, as the engine takes it: written (in the
/// compatible layout, as one metadata row and no data rows), read, listed,
/// charged, migrated.
fn empty_values_are_values<E: Engine>(engine: E) {
    let kv = open(engine, config(PhysicalLayout::Compatible));
    let a = actor();
    kv.put(a, &[(b"e".to_vec(), Vec::new()), (b"f".to_vec(), vec![1])])
        .unwrap();
    let rows = raw_rows(&kv);
    let base = with(&subspace_bytes(), &[0x05, 0x01, b'e', 0x00, 0x00]);
    assert_eq!(
        rows.iter().filter(|(k, _)| k.starts_with(&base)).count(),
        1,
        "the metadata row only"
    );
    let got = kv.get(a, &[b"e".to_vec()]).unwrap();
    assert_eq!(got[0].as_ref().map(|e| e.value.clone()), Some(Vec::new()));
    assert_eq!(kv.usage(a).unwrap(), kv.recount(a).unwrap());
    kv.migrate_all(a, PhysicalLayout::Native, 10).unwrap();
    let got = kv.get(a, &[b"e".to_vec(), b"f".to_vec()]).unwrap();
    assert_eq!(got[0].as_ref().map(|e| e.value.clone()), Some(Vec::new()));
    assert_eq!(got[1].as_ref().map(|e| e.value.clone()), Some(vec![1]));
    let page = kv
        .list(a, &ListQuery::All, &ListOptions::default())
        .unwrap();
    assert_eq!(page.entries.len(), 2);
    assert_eq!(kv.usage(a).unwrap(), kv.recount(a).unwrap());
}

/// Native entries round-trip at every size around the chunk boundary;
/// small ones are one row, large ones a manifest plus data rows.
fn native_entries_round_trip_in_checksummed_rows<E: Engine>(engine: E) {
    let kv = open(engine, config(PhysicalLayout::Native));
    let sizes = [1usize, 9_000, 10_000, 30_000, 131_072];
    let entries: Vec<_> = sizes
        .iter()
        .enumerate()
        .map(|(i, n)| (user(&[i as u8]), value(*n, i as u8)))
        .collect();
    kv.put(actor(), &entries).unwrap();
    let keys: Vec<_> = entries.iter().map(|(k, _)| k.clone()).collect();
    let got = kv.get(actor(), &keys).unwrap();
    for ((k, v), e) in entries.iter().zip(&got) {
        let e = e.as_ref().unwrap();
        assert_eq!((&e.key, &e.value), (k, v));
        assert_eq!(e.metadata.version, b"2.0.33");
        assert_eq!(e.metadata.update_ts, START_MS as i64);
    }
    // Rows per entry: 1 up to about 10,000 bytes with its header, then a
    // manifest and ceil(envelope / 10,000) data rows.
    let rows = raw_rows(&kv);
    let mut per_key: BTreeMap<u8, usize> = BTreeMap::new();
    for (k, _) in &rows {
        // subspace, 0x05 0x01, then the user key [4, i].
        *per_key.entry(k[subspace_bytes().len() + 3]).or_default() += 1;
    }
    assert_eq!(per_key[&0], 1);
    assert_eq!(per_key[&1], 1);
    assert_eq!(
        per_key[&2], 3,
        "10,000 bytes plus a header do not fit a row"
    );
    assert_eq!(per_key[&3], 5);
    assert_eq!(per_key[&4], 15);
    let total: u64 = sizes.iter().map(|n| 2 + 2 + *n as u64).sum();
    assert_eq!(kv.usage(actor()).unwrap(), total);
    assert_eq!(kv.recount(actor()).unwrap(), total);
}

/// Damage is a typed error in the native layout: a flipped bit in a data
/// row or in an inline row, a row copied under another actor.
fn native_damage_is_a_typed_error<E: Engine>(engine: E) {
    let kv = open(engine, config(PhysicalLayout::Native));
    kv.put(
        actor(),
        &[
            (user(b"big"), value(25_000, 1)),
            (user(b"small"), value(10, 2)),
        ],
    )
    .unwrap();
    let space = kv.store().space(ROWS_SPACE).unwrap();
    let rows = raw_rows(&kv);
    let other = ActorId::v1(5, 5);
    let mut tx = kv.store().begin();
    for (k, v) in &rows {
        let mut v = v.clone();
        let last = v.len() - 1;
        v[last] ^= 0x10;
        tx.put_in(&space, k.clone(), v).unwrap();
        // The same undamaged row under another actor's subspace.
        let mut moved = subspace_bytes();
        moved.truncate(7);
        moved.extend_from_slice(&other.bytes());
        moved.extend_from_slice(&k[subspace_bytes().len()..]);
        tx.put_in(
            &space,
            moved,
            rows.iter().find(|(x, _)| x == k).unwrap().1.clone(),
        )
        .unwrap();
    }
    tx.commit().unwrap();
    for key in [user(b"big"), user(b"small")] {
        for who in [actor(), other] {
            assert!(
                matches!(
                    kv.get(who, std::slice::from_ref(&key)),
                    Err(ActorKvError::Corrupt { .. })
                ),
                "{key:?} of {who:?}"
            );
        }
    }
}

/// The compatible layout's structural checks: a missing data row, a short
/// data row before the last, a metadata row with trailing bytes.
fn compatible_structure_is_checked<E: Engine>(engine: E) {
    let kv = open(engine, config(PhysicalLayout::Compatible));
    kv.put(actor(), &[(b"k".to_vec(), value(25_000, 1))])
        .unwrap();
    let space = kv.store().space(ROWS_SPACE).unwrap();
    let base = with(&subspace_bytes(), &[0x05, 0x01, b'k', 0x00, 0x00]);
    let damage: [&dyn Fn(&mut strata_store::Tx<'_, E>); 3] = [
        &|tx| {
            tx.delete_in(&space, with(&base, &[0x15, 0x04, 0x15, 0x01]))
                .unwrap();
        },
        &|tx| {
            tx.put_in(&space, with(&base, &[0x15, 0x04, 0x14]), vec![1; 9_999])
                .unwrap();
        },
        &|tx| {
            let mut m = metadata_bytes();
            m.push(0);
            tx.put_in(&space, with(&base, &[0x15, 0x2C]), m).unwrap();
        },
    ];
    for (i, hurt) in damage.iter().enumerate() {
        let mut tx = kv.store().begin();
        hurt(&mut tx);
        tx.commit().unwrap();
        assert!(
            matches!(
                kv.get(actor(), &[b"k".to_vec()]),
                Err(ActorKvError::Corrupt { .. })
            ),
            "damage {i}"
        );
        // Rewrite the entry whole before the next damage: a corrupt entry
        // cannot be overwritten (its size is unknown), so restore the rows.
        let mut tx = kv.store().begin();
        let fresh = value(25_000, 1);
        tx.put_in(
            &space,
            with(&base, &[0x15, 0x04, 0x14]),
            fresh[..10_000].to_vec(),
        )
        .unwrap();
        tx.put_in(
            &space,
            with(&base, &[0x15, 0x04, 0x15, 0x01]),
            fresh[10_000..20_000].to_vec(),
        )
        .unwrap();
        tx.put_in(&space, with(&base, &[0x15, 0x2C]), metadata_bytes())
            .unwrap();
        tx.commit().unwrap();
        assert_eq!(
            kv.get(actor(), &[b"k".to_vec()]).unwrap()[0]
                .as_ref()
                .unwrap()
                .value,
            fresh
        );
    }
}

/// Every limit as the engine counts it, refused before anything is
/// written.
fn limits_are_refused_before_writing<E: Engine>(engine: E) {
    let kv = open(engine, config(PhysicalLayout::Native));
    let e = |k: Vec<u8>, v: Vec<u8>| (k, v);
    // 2,046 bytes count 2,048: the largest key.
    kv.put(actor(), &[e(vec![1; 2_046], vec![1])]).unwrap();
    let before = kv.usage(actor()).unwrap();
    assert_eq!(before, 2_048 + 1);
    let cases: Vec<(Vec<(Vec<u8>, Vec<u8>)>, fn(&ActorKvError) -> bool)> = vec![
        (vec![e(vec![1; 2_047], vec![1])], |e| {
            matches!(
                e,
                ActorKvError::KeyTooLarge {
                    index: 0,
                    len: 2_049,
                    max: 2_048
                }
            )
        }),
        (vec![e(b"a".to_vec(), vec![1; 131_073])], |e| {
            matches!(
                e,
                ActorKvError::ValueTooLarge {
                    len: 131_073,
                    max: 131_072,
                    ..
                }
            )
        }),
        (
            (0..129u32)
                .map(|i| e(i.to_be_bytes().to_vec(), vec![1]))
                .collect(),
            |e| {
                matches!(
                    e,
                    ActorKvError::TooManyKeys {
                        count: 129,
                        max: 128
                    }
                )
            },
        ),
        (
            // 8 values of 124,928 bytes with 3-byte keys: 999,448 > 999,424.
            (0..8u8).map(|i| e(vec![i], vec![1; 124_928])).collect(),
            |e| {
                matches!(
                    e,
                    ActorKvError::PayloadTooLarge {
                        bytes: 999_448,
                        max: 999_424
                    }
                )
            },
        ),
        (
            vec![e(b"a".to_vec(), vec![1]), e(b"a".to_vec(), vec![2])],
            |e| matches!(e, ActorKvError::DuplicateKey { index: 1 }),
        ),
    ];
    for (i, (entries, expected)) in cases.into_iter().enumerate() {
        let err = kv.put(actor(), &entries).unwrap_err();
        assert!(expected(&err), "case {i}: {err:?}");
        assert_eq!(kv.usage(actor()).unwrap(), before, "case {i} wrote");
    }
    // The largest payload that fits: 999,424 exactly.
    let fits: Vec<_> = (0..7u8)
        .map(|i| e(vec![i], vec![1; 124_928]))
        .chain([e(vec![9], vec![1; 124_928 - 24])])
        .collect();
    kv.put(actor(), &fits).unwrap();
    assert_eq!(kv.usage(actor()).unwrap(), before + 999_424);
    // Gets and deletes have the same key limits.
    let many: Vec<Vec<u8>> = (0..129u32).map(|i| i.to_be_bytes().to_vec()).collect();
    assert!(matches!(
        kv.get(actor(), &many),
        Err(ActorKvError::TooManyKeys { .. })
    ));
    assert!(matches!(
        kv.delete(actor(), &many),
        Err(ActorKvError::TooManyKeys { .. })
    ));
    assert!(matches!(
        kv.get(actor(), &[vec![0; 2_047]]),
        Err(ActorKvError::KeyTooLarge { .. })
    ));
    assert!(matches!(
        kv.list(
            actor(),
            &ListQuery::Prefix(vec![0; 2_047]),
            &ListOptions::default()
        ),
        Err(ActorKvError::KeyTooLarge { .. })
    ));
}

/// The quota charges net growth, exactly, per actor; an overwrite near
/// the quota succeeds when the result fits.
fn quota_is_exact_and_charges_net_growth<E: Engine>(engine: E) {
    let mut cfg = config(PhysicalLayout::Native);
    cfg.quota_bytes = 100_000;
    let kv = open(engine, cfg);
    let a = actor();
    let b = ActorId::v1(9, 9);
    kv.put(a, &[(b"x".to_vec(), vec![1; 60_000])]).unwrap();
    kv.put(a, &[(b"y".to_vec(), vec![1; 39_994])]).unwrap();
    assert_eq!(kv.usage(a).unwrap(), 3 + 60_000 + 3 + 39_994); // 99,000 + 1,000 - 1,000
    // Another actor has its own quota.
    kv.put(b, &[(b"x".to_vec(), vec![1; 90_000])]).unwrap();
    // 3 bytes left: a new 1-byte entry (4 bytes) does not fit...
    let err = kv.put(a, &[(b"z".to_vec(), vec![1])]).unwrap_err();
    assert!(
        matches!(
            err,
            ActorKvError::QuotaExceeded {
                usage: 100_000,
                growth: 4,
                quota: 100_000
            }
        ),
        "{err:?}"
    );
    // ...but growing x in place by 0 and shrinking y does.
    kv.put(
        a,
        &[
            (b"x".to_vec(), vec![2; 60_000]),
            (b"y".to_vec(), vec![2; 10]),
        ],
    )
    .unwrap();
    assert_eq!(kv.usage(a).unwrap(), 3 + 60_000 + 3 + 10);
    // An overwrite growing x by exactly what is left fits.
    let left = 100_000 - (3 + 60_000 + 3 + 10);
    kv.put(a, &[(b"x".to_vec(), vec![3; 60_000 + left as usize])])
        .unwrap();
    assert_eq!(kv.usage(a).unwrap(), 100_000);
    assert!(matches!(
        kv.put(a, &[(b"x".to_vec(), vec![3; 60_001 + left as usize])]),
        Err(ActorKvError::QuotaExceeded { .. })
    ));
    kv.delete(a, &[b"y".to_vec(), b"never".to_vec()]).unwrap();
    assert_eq!(kv.usage(a).unwrap(), 100_000 - 13);
    assert_eq!(kv.recount(a).unwrap(), 100_000 - 13);
    assert_eq!(kv.usage(b).unwrap(), 90_003);
    assert_eq!(kv.recount(b).unwrap(), 90_003);
}

/// Lists by prefix (keys whose next byte is 0xFF included), by range with
/// either end, reversed, and paged with an honest `more`.
fn lists_are_complete_ordered_and_honest<E: Engine>(engine: E) {
    let kv = open(engine, config(PhysicalLayout::Native));
    let a = actor();
    let keys: Vec<Vec<u8>> = vec![
        b"a".to_vec(),
        b"a\x00".to_vec(),
        b"a\x00\x01".to_vec(),
        b"ab".to_vec(),
        b"a\xff".to_vec(),
        b"a\xff\xff".to_vec(),
        b"b".to_vec(),
        vec![0xFF],
    ];
    // Values of 15,000 bytes: each entry is several rows.
    let entries: Vec<_> = keys
        .iter()
        .map(|k| (k.clone(), value(15_000, k[0])))
        .collect();
    kv.put(a, &entries).unwrap();
    kv.put(ActorId::v1(1, 1), &[(b"a".to_vec(), vec![1])])
        .unwrap();
    let list = |q: ListQuery, o: ListOptions| -> (Vec<Vec<u8>>, bool) {
        let p = kv.list(a, &q, &o).unwrap();
        (p.entries.into_iter().map(|e| e.key).collect(), p.more)
    };
    let k = |xs: &[&[u8]]| xs.iter().map(|x| x.to_vec()).collect::<Vec<_>>();
    assert_eq!(
        list(ListQuery::Prefix(b"a".to_vec()), ListOptions::default()),
        (
            k(&[b"a", b"a\x00", b"a\x00\x01", b"ab", b"a\xff", b"a\xff\xff"]),
            false
        )
    );
    assert_eq!(
        list(ListQuery::Prefix(b"a\x00".to_vec()), ListOptions::default()),
        (k(&[b"a\x00", b"a\x00\x01"]), false)
    );
    assert_eq!(
        list(ListQuery::Prefix(b"a\xff".to_vec()), ListOptions::default()),
        (k(&[b"a\xff", b"a\xff\xff"]), false)
    );
    let range = |end: &[u8], exclusive| ListQuery::Range {
        start: b"a\x00".to_vec(),
        end: end.to_vec(),
        exclusive,
    };
    assert_eq!(
        list(range(b"a\xff", true), ListOptions::default()),
        (k(&[b"a\x00", b"a\x00\x01", b"ab"]), false)
    );
    assert_eq!(
        list(range(b"a\xff", false), ListOptions::default()),
        (k(&[b"a\x00", b"a\x00\x01", b"ab", b"a\xff"]), false)
    );
    let reverse = ListOptions {
        reverse: true,
        ..Default::default()
    };
    let mut all = keys.clone();
    all.sort();
    let mut backwards = all.clone();
    backwards.reverse();
    assert_eq!(
        list(ListQuery::All, reverse.clone()),
        (backwards.clone(), false)
    );
    // Paging by 3, forward and reverse: every key once, in order, `more`
    // true exactly until the last page.
    for (options, expected) in [
        (
            ListOptions {
                limit: Some(3),
                ..Default::default()
            },
            all.clone(),
        ),
        (
            ListOptions {
                limit: Some(3),
                ..reverse.clone()
            },
            backwards.clone(),
        ),
    ] {
        let mut seen = Vec::new();
        let mut next = Some(options);
        let mut pages = 0;
        while let Some(o) = next {
            let page = kv.list(a, &ListQuery::All, &o).unwrap();
            pages += 1;
            assert_eq!(page.more, seen.len() + page.entries.len() < expected.len());
            seen.extend(page.entries.iter().map(|e| e.key.clone()));
            next = page.next(&o);
        }
        assert_eq!(seen, expected);
        assert_eq!(pages, 3);
    }
    // A limit equal to the count has no more.
    let exact = kv
        .list(
            a,
            &ListQuery::All,
            &ListOptions {
                limit: Some(8),
                ..Default::default()
            },
        )
        .unwrap();
    assert_eq!((exact.entries.len(), exact.more), (8, false));
}

/// Delete range removes [start, end) and releases the quota.
fn delete_range_removes_the_half_open_range<E: Engine>(engine: E) {
    let kv = open(engine, config(PhysicalLayout::Compatible));
    let a = actor();
    let entries: Vec<_> = (0..20u8).map(|i| (vec![i], value(11_000, i))).collect();
    kv.put(a, &entries).unwrap();
    assert_eq!(kv.delete_range(a, &[5], &[15]).unwrap(), 10);
    assert_eq!(kv.delete_range(a, &[9], &[3]).unwrap(), 0);
    let left: Vec<u8> = kv
        .list(a, &ListQuery::All, &ListOptions::default())
        .unwrap()
        .entries
        .iter()
        .map(|e| e.key[0])
        .collect();
    assert_eq!(left, [0, 1, 2, 3, 4, 15, 16, 17, 18, 19]);
    assert_eq!(kv.usage(a).unwrap(), 10 * (3 + 11_000));
    assert_eq!(kv.recount(a).unwrap(), 10 * (3 + 11_000));
}

/// A migration moves an actor between layouts in bounded, resumable
/// steps; the actor stays readable and writable between them, and the
/// result is the other layout's exact bytes.
fn migration_is_resumable_and_exact<E: Engine>(engine: E) {
    let kv = open(engine, config(PhysicalLayout::Native));
    let a = actor();
    let entries: Vec<_> = (0..7u8)
        .map(|i| (vec![b'k', i], value(12_000, i)))
        .collect();
    kv.put(a, &entries).unwrap();
    let usage = kv.usage(a).unwrap();
    let step = kv.migrate(a, PhysicalLayout::Compatible, 3).unwrap();
    assert_eq!((step.migrated, step.done), (3, false));
    assert_eq!(
        kv.layout(a).unwrap(),
        (PhysicalLayout::Native, Some(PhysicalLayout::Compatible))
    );
    // Another migration target is refused while one runs.
    assert!(matches!(
        kv.migrate(a, PhysicalLayout::Native, 3),
        Err(ActorKvError::MigrationInProgress { .. })
    ));
    // Reads and writes mid-way: a migrated key and one not yet.
    kv.put(
        a,
        &[(vec![b'k', 1], vec![9; 5]), (vec![b'k', 5], vec![8; 5])],
    )
    .unwrap();
    let got = kv
        .get(a, &[vec![b'k', 1], vec![b'k', 5], vec![b'k', 6]])
        .unwrap();
    assert_eq!(got[0].as_ref().unwrap().value, vec![9; 5]);
    assert_eq!(got[1].as_ref().unwrap().value, vec![8; 5]);
    assert_eq!(got[2].as_ref().unwrap().value, value(12_000, 6));
    // "Restart": a new handle on the same store resumes.
    let store: Store<E> = kv.into_store();
    let kv = ActorKv::open(store, config(PhysicalLayout::Native)).unwrap();
    assert_eq!(kv.migrate_all(a, PhysicalLayout::Compatible, 3).unwrap(), 4);
    assert_eq!(kv.layout(a).unwrap(), (PhysicalLayout::Compatible, None));
    // Every entry's rows are now the engine's: the metadata row holds
    // BARE bytes, data rows the raw value.
    let rows = raw_rows(&kv);
    let base = with(&subspace_bytes(), &[0x05, 0x01, b'k', 0x06, 0x00, 0x00]);
    let v6 = value(12_000, 6);
    let of6: Vec<_> = rows
        .iter()
        .filter(|(k, _)| k.starts_with(&base))
        .cloned()
        .collect();
    assert_eq!(
        of6,
        vec![
            (with(&base, &[0x15, 0x04, 0x14]), v6[..10_000].to_vec()),
            (
                with(&base, &[0x15, 0x04, 0x15, 0x01]),
                v6[10_000..].to_vec()
            ),
            (with(&base, &[0x15, 0x2C]), metadata_bytes()),
        ]
    );
    let expected_usage = usage - 2 * (4 + 12_000) + 2 * (4 + 5);
    assert_eq!(kv.usage(a).unwrap(), expected_usage);
    assert_eq!(kv.recount(a).unwrap(), expected_usage);
    // And back.
    assert_eq!(kv.migrate_all(a, PhysicalLayout::Native, 100).unwrap(), 7);
    assert_eq!(
        kv.get(a, &[vec![b'k', 6]]).unwrap()[0]
            .as_ref()
            .unwrap()
            .value,
        v6
    );
    assert!(kv.migrate(a, PhysicalLayout::Native, 1).unwrap().done);
}

/// A write buffer keeps what a failed flush did not commit and writes it
/// on the next flush; nothing leaves the buffer before its commit.
fn a_failed_flush_is_retried_not_wedged<E: Engine>(engine: E) {
    let mut cfg = config(PhysicalLayout::Native);
    cfg.quota_bytes = 60_000;
    let kv = open(engine, cfg.clone());
    let a = actor();
    let mut buffer = WriteBuffer::new();
    for i in 0..200u32 {
        buffer.put(i.to_be_bytes().to_vec(), vec![1; 400]).unwrap();
    }
    buffer.delete(b"gone".to_vec()).unwrap();
    // 200 x 406 bytes is over the quota: the first request (128 x 406 =
    // 51,968 bytes) commits, the second crosses the quota and fails.
    let err = buffer.flush(&kv, a).unwrap_err();
    assert!(matches!(err, ActorKvError::QuotaExceeded { .. }), "{err:?}");
    let stored = kv.usage(a).unwrap();
    assert_eq!(stored, 128 * 406, "the delete and the first put committed");
    assert_eq!(buffer.len(), 200 - 128);
    assert!(buffer.held(&0u32.to_be_bytes()).is_none());
    assert_eq!(
        buffer.held(&199u32.to_be_bytes()),
        Some(Some(&[1u8; 400][..]))
    );
    // With room, the same buffer flushes the rest.
    cfg.quota_bytes = 1 << 20;
    let kv = ActorKv::open(kv.into_store(), cfg).unwrap();
    let done = buffer.flush(&kv, a).unwrap();
    assert_eq!((done.requests, done.entries), (1, 72));
    assert!(!buffer.is_dirty());
    assert_eq!(kv.usage(a).unwrap(), 200 * 406);
}

/// What a missing native chunk is called; an actor's recorded layout
/// outlives a change of the configured default; the accessors; a reverse
/// page continued after a key beyond the range stays in the range; a
/// buffered delete is held and flushed.
fn recorded_layouts_errors_and_edges<E: Engine>(engine: E) {
    let kv = open(engine, config(PhysicalLayout::Native));
    let a = actor();
    kv.put(a, &[(b"big".to_vec(), value(25_000, 4))]).unwrap();
    assert!(format!("{kv:?}").contains("ActorKv"));
    assert_eq!(kv.config().quota_bytes, 1 << 30);
    // Chunk 1 of 3 deleted by hand: named as missing.
    let space = kv.store().space(ROWS_SPACE).unwrap();
    let base = with(
        &subspace_bytes(),
        &[0x05, 0x01, b'b', b'i', b'g', 0x00, 0x00],
    );
    let chunk1 = with(&base, &[0x15, 0x04, 0x15, 0x01]);
    let saved = raw_rows(&kv)
        .into_iter()
        .find(|(k, _)| *k == chunk1)
        .unwrap();
    let mut tx = kv.store().begin();
    tx.delete_in(&space, chunk1.clone()).unwrap();
    tx.commit().unwrap();
    let e = kv.get(a, &[b"big".to_vec()]).unwrap_err();
    let told = strata_engine::ErrorChain(&e).to_string();
    assert!(
        matches!(
            e,
            ActorKvError::Corrupt {
                problem: DataProblem::Chunks,
                ..
            }
        ),
        "{e:?}"
    );
    assert!(told.contains("chunk 1 is missing"), "{told}");
    let mut tx = kv.store().begin();
    tx.put_in(&space, saved.0, saved.1).unwrap();
    tx.commit().unwrap();
    // Reopened with another default layout: the actor keeps its own.
    let kv = ActorKv::open(kv.into_store(), config(PhysicalLayout::Compatible)).unwrap();
    assert_eq!(kv.layout(a).unwrap(), (PhysicalLayout::Native, None));
    assert_eq!(
        kv.get(a, &[b"big".to_vec()]).unwrap()[0]
            .as_ref()
            .unwrap()
            .value,
        value(25_000, 4)
    );
    // An actor never written takes the configured default.
    assert_eq!(
        kv.layout(ActorId::v1(3, 3)).unwrap(),
        (PhysicalLayout::Compatible, None)
    );
    // Reverse, after a key above the range's end: still within the range.
    kv.put(
        a,
        &[
            (b"a".to_vec(), vec![1]),
            (b"c".to_vec(), vec![1]),
            (b"d".to_vec(), vec![1]),
        ],
    )
    .unwrap();
    let page = kv
        .list(
            a,
            &ListQuery::Range {
                start: b"a".to_vec(),
                end: b"c".to_vec(),
                exclusive: true,
            },
            &ListOptions {
                reverse: true,
                after: Some(b"z".to_vec()),
                ..ListOptions::default()
            },
        )
        .unwrap();
    let keys: Vec<_> = page.entries.iter().map(|e| e.key.clone()).collect();
    assert_eq!(keys, [b"big".to_vec(), b"a".to_vec()]);
    // Forward after a key below the start: from the start.
    let page = kv
        .list(
            a,
            &ListQuery::Prefix(b"c".to_vec()),
            &ListOptions {
                after: Some(b"a".to_vec()),
                ..ListOptions::default()
            },
        )
        .unwrap();
    assert_eq!(page.entries.len(), 1);
    // A buffered delete is held, then flushed with its own request.
    let mut buffer = WriteBuffer::new();
    assert!(buffer.is_empty() && !buffer.is_dirty());
    buffer.delete(b"d".to_vec()).unwrap();
    buffer.put(b"e".to_vec(), vec![5]).unwrap();
    assert_eq!(buffer.held(b"d"), Some(None));
    assert!(!buffer.is_empty() && buffer.is_dirty());
    assert!(matches!(
        buffer.delete(vec![0; 2_047]),
        Err(ActorKvError::KeyTooLarge { .. })
    ));
    let flushed = buffer.flush(&kv, a).unwrap();
    assert_eq!((flushed.requests, flushed.entries), (2, 2));
    assert!(buffer.is_empty());
    let got = kv.get(a, &[b"d".to_vec(), b"e".to_vec()]).unwrap();
    assert!(got[0].is_none());
    assert_eq!(got[1].as_ref().unwrap().value, vec![5]);
}

/// A list longer than one internal page of rows is whole; two actors in
/// different layouts keep their own; a get of exactly 128 keys is allowed;
/// an empty or oversized last data row is corrupt.
fn many_rows_two_actors_and_row_sizes<E: Engine>(engine: E) {
    let kv = open(engine, config(PhysicalLayout::Compatible));
    let a = actor();
    // 150 entries of two rows each: 300 rows, more than a 256-row page.
    let entries: Vec<_> = (0..150u32)
        .map(|i| (i.to_be_bytes().to_vec(), vec![1; 10]))
        .collect();
    for chunk in entries.chunks(100) {
        kv.put(a, chunk).unwrap();
    }
    let page = kv
        .list(a, &ListQuery::All, &ListOptions::default())
        .unwrap();
    assert_eq!(page.entries.len(), 150);
    assert!(!page.more);
    assert_eq!(kv.recount(a).unwrap(), 150 * (4 + 2 + 10));
    let reverse = kv
        .list(
            a,
            &ListQuery::All,
            &ListOptions {
                reverse: true,
                ..ListOptions::default()
            },
        )
        .unwrap();
    assert_eq!(reverse.entries.len(), 150);
    assert_eq!(reverse.entries[0].key, 149u32.to_be_bytes());
    let keys: Vec<Vec<u8>> = (0..128u32).map(|i| i.to_be_bytes().to_vec()).collect();
    assert_eq!(kv.get(a, &keys).unwrap().iter().flatten().count(), 128);
    // A second actor moved to the native layout; the first keeps its own.
    let b = ActorId::v1(77, 7);
    kv.put(b, &[(b"k".to_vec(), vec![2; 20_000])]).unwrap();
    kv.migrate_all(b, PhysicalLayout::Native, 10).unwrap();
    assert_eq!(kv.layout(a).unwrap(), (PhysicalLayout::Compatible, None));
    assert_eq!(kv.layout(b).unwrap(), (PhysicalLayout::Native, None));
    assert_eq!(
        kv.get(a, &keys[..1]).unwrap()[0].as_ref().unwrap().value,
        vec![1; 10]
    );
    assert_eq!(
        kv.get(b, &[b"k".to_vec()]).unwrap()[0]
            .as_ref()
            .unwrap()
            .value,
        vec![2; 20_000]
    );
    // The last data row empty, or over 10,000 bytes: corrupt.
    let space = kv.store().space(ROWS_SPACE).unwrap();
    let base = with(
        &subspace_bytes(),
        &[
            0x05, 0x01, 0x00, 0xFF, 0x00, 0xFF, 0x00, 0xFF, 0x00, 0xFF, 0x00, 0x00,
        ],
    );
    for bad in [Vec::new(), vec![1; 10_001]] {
        let mut tx = kv.store().begin();
        tx.put_in(&space, with(&base, &[0x15, 0x04, 0x14]), bad)
            .unwrap();
        tx.commit().unwrap();
        assert!(matches!(
            kv.get(a, &keys[..1]),
            Err(ActorKvError::Corrupt { .. })
        ));
    }
}

/// One unreadable entry in a list is named: the error is `Corrupt` with
/// that entry's key (not another's, not a bare failure), in both layouts
/// and both directions; the entries around it still read one by one.
fn an_unreadable_entry_is_named_in_a_list<E: Engine>(engine: E) {
    let kv = open(engine, config(PhysicalLayout::Compatible));
    let entries: Vec<_> = [b"a", b"b", b"c"]
        .iter()
        .map(|k| (k.to_vec(), vec![k[0]; 20]))
        .collect();
    kv.put(actor(), &entries).unwrap();
    let space = kv.store().space(ROWS_SPACE).unwrap();
    // `b`'s metadata row: one byte too many for a BARE `KvMetadata`.
    let meta_b = with(
        &subspace_bytes(),
        &[0x05, 0x01, b'b', 0x00, 0x00, 0x15, 0x2C],
    );
    let mut damaged = metadata_bytes();
    damaged.push(0);
    let mut tx = kv.store().begin();
    tx.put_in(&space, meta_b, damaged).unwrap();
    tx.commit().unwrap();
    for reverse in [false, true] {
        let listed = kv.list(
            actor(),
            &ListQuery::Prefix(Vec::new()),
            &ListOptions {
                reverse,
                ..ListOptions::default()
            },
        );
        match listed {
            Err(ActorKvError::Corrupt { key, .. }) => assert_eq!(key, b"b", "reverse {reverse}"),
            other => panic!("reverse {reverse}: {other:?}"),
        }
    }
    assert!(matches!(kv.recount(actor()), Err(ActorKvError::Corrupt { key, .. }) if key == b"b"));
    for ok in [b"a", b"c"] {
        let got = kv.get(actor(), &[ok.to_vec()]).unwrap();
        assert_eq!(got[0].as_ref().unwrap().value, vec![ok[0]; 20]);
    }
}

crate::on_each_engine!(
    many_rows_two_actors_and_row_sizes,
    an_unreadable_entry_is_named_in_a_list,
    recorded_layouts_errors_and_edges,
    compatible_rows_are_the_engines_bytes,
    rows_the_engine_wrote_read_back,
    empty_values_are_values,
    native_entries_round_trip_in_checksummed_rows,
    native_damage_is_a_typed_error,
    compatible_structure_is_checked,
    limits_are_refused_before_writing,
    quota_is_exact_and_charges_net_growth,
    lists_are_complete_ordered_and_honest,
    delete_range_removes_the_half_open_range,
    migration_is_resumable_and_exact,
    a_failed_flush_is_retried_not_wedged,
);
