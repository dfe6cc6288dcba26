//! Actor KV's client helpers (batch planning, SQLite pages, queue
//! messages and traces) and the identifiers and metadata as the engine
//! encodes them: pure functions, no store.

#![allow(clippy::cast_possible_truncation, clippy::cast_possible_wrap)]

use strata_schemas::actor_kv::client::{
    plan_deletes, plan_puts, plan_sqlite_write, queue_message, trace_chunks,
};
use strata_schemas::actor_kv::{
    ActorId, ActorKvConfig, ActorKvError, KvMetadata, Layout, SqliteFile,
};

use super::actor_kv_store::value;
use crate::START_MS;

#[test]
fn batches_are_planned_within_the_limits() {
    // 300 small entries: 128, 128, 44.
    let many: Vec<_> = (0..300u32)
        .map(|i| (i.to_be_bytes().to_vec(), vec![1; 10]))
        .collect();
    let sizes: Vec<usize> = plan_puts(many).unwrap().iter().map(Vec::len).collect();
    assert_eq!(sizes, [128, 128, 44]);
    // A payload of exactly 976 KiB is one request: 7 x (3 + 124,928) +
    // (3 + 124,904) = 999,424.
    let exact: Vec<_> = (0..7u8)
        .map(|i| (vec![i], vec![1; 124_928]))
        .chain([(vec![9], vec![1; 124_904])])
        .collect();
    assert_eq!(plan_puts(exact).unwrap().len(), 1);
    assert_eq!(
        strata_schemas::actor_kv::limits::DEFAULT_QUOTA,
        10_737_418_240
    );
    assert_eq!(ActorKvConfig::default().quota_bytes, 10_737_418_240);
    // By payload: 131,072-byte values with 1-byte keys (131,075 each): 7
    // fit 976 KiB (917,525), 8 do not (1,048,600).
    let big: Vec<_> = (0..20u8).map(|i| (vec![i], vec![1; 131_072])).collect();
    let sizes: Vec<usize> = plan_puts(big).unwrap().iter().map(Vec::len).collect();
    assert_eq!(sizes, [7, 7, 6]);
    // A key written twice goes to a later request, which wins.
    let twice = vec![
        (b"a".to_vec(), vec![1]),
        (b"b".to_vec(), vec![1]),
        (b"a".to_vec(), vec![2]),
    ];
    let planned = plan_puts(twice).unwrap();
    assert_eq!(planned.len(), 2);
    assert_eq!(planned[1], vec![(b"a".to_vec(), vec![2])]);
    // An entry that fits no request is a typed error naming it.
    let bad = vec![(b"a".to_vec(), vec![1]), (b"b".to_vec(), vec![1; 131_073])];
    assert!(matches!(
        plan_puts(bad),
        Err(ActorKvError::ValueTooLarge { index: 1, .. })
    ));
    let keys: Vec<Vec<u8>> = (0..257u32).map(|i| i.to_be_bytes().to_vec()).collect();
    let sizes: Vec<usize> = plan_deletes(&keys).unwrap().iter().map(Vec::len).collect();
    assert_eq!(sizes, [128, 128, 1]);
    assert!(matches!(
        plan_deletes(&[vec![0; 2_047]]),
        Err(ActorKvError::KeyTooLarge { index: 0, .. })
    ));
}

#[test]
fn sqlite_pages_are_planned_with_the_metadata_last() {
    // 300 pages of 4,096 bytes: keys [9, 1, 0, u32_be] of 7 bytes count
    // 9; 128 pages make 525,440 bytes, so requests hold 128, 128, then
    // 44 pages and the metadata.
    let pages: Vec<_> = (0..300u32).map(|i| (i, vec![i as u8; 4_096])).collect();
    let planned =
        plan_sqlite_write(SqliteFile::Main, Layout::Unversioned, pages, vec![7; 16]).unwrap();
    let sizes: Vec<usize> = planned.iter().map(Vec::len).collect();
    assert_eq!(sizes, [128, 128, 45]);
    let last = planned.last().unwrap().last().unwrap();
    assert_eq!(last, &(vec![9, 0, 0], vec![7; 16]));
    assert_eq!(planned[0][1].0, vec![9, 1, 0, 0, 0, 0, 1]);
    // Large pages split by payload: 64 KiB pages count 65,545 bytes, 15
    // make 983,175 and 16 would be over 999,424; the 6-byte metadata joins
    // the last 15 pages.
    let pages: Vec<_> = (0..30u32).map(|i| (i, vec![1; 65_536])).collect();
    let planned = plan_sqlite_write(SqliteFile::Wal, Layout::Unversioned, pages, vec![1]).unwrap();
    let sizes: Vec<usize> = planned.iter().map(Vec::len).collect();
    assert_eq!(sizes, [15, 16]);
}

#[test]
fn queue_messages_and_traces_respect_the_value_limit() {
    let (key, v) = queue_message(258, Layout::Versioned(1), vec![1; 131_072]).unwrap();
    assert_eq!(key, [5, 1, 0, 0, 0, 0, 0, 0, 1, 2]);
    assert_eq!(v.len(), 131_072);
    // The runtime's default 1 MiB message is refused, typed.
    assert!(matches!(
        queue_message(1, Layout::Unversioned, vec![1; 1 << 20]),
        Err(ActorKvError::ValueTooLarge {
            len: 1_048_576,
            max: 131_072,
            ..
        })
    ));
    let data = value(300_000, 5);
    let chunks = trace_chunks(1_700_000_000, 4, Layout::Unversioned, &data);
    let lens: Vec<usize> = chunks.iter().map(|(_, v)| v.len()).collect();
    assert_eq!(lens, [131_072, 131_072, 37_856]);
    assert_eq!(
        chunks[1].0,
        [8, 0x15, 1, 0x18, 0x65, 0x53, 0xF1, 0x00, 0x15, 5]
    );
    let joined: Vec<u8> = chunks.into_iter().flat_map(|(_, v)| v).collect();
    assert_eq!(joined, data);
}

#[test]
fn actor_ids_and_metadata_encode_as_the_engine_does() {
    let id = actor();
    assert_eq!(id.uuid(), 0x0011_2233_4455_6677_8899_AABB_CCDD_EEFF);
    assert_eq!(id.label(), 0x0A0B);
    assert_eq!(&id.bytes()[..], &subspace_bytes()[7..]);
    assert_eq!(
        strata_schemas::actor_kv::physical::subspace(id),
        subspace_bytes()
    );
    let m = KvMetadata {
        version: b"2.0.33".to_vec(),
        update_ts: START_MS as i64,
    };
    assert_eq!(m.to_bare(), metadata_bytes());
    assert_eq!(KvMetadata::from_bare(&metadata_bytes()), Some(m));
    // A 200-byte version has a two-byte uvarint length: 0xC8 0x01.
    let long = KvMetadata {
        version: vec![b'v'; 200],
        update_ts: -1,
    };
    let bare = long.to_bare();
    assert_eq!(&bare[..2], &[0xC8, 0x01]);
    assert_eq!(&bare[202..], &[0xFF; 8]);
    assert_eq!(KvMetadata::from_bare(&bare), Some(long));
    for bad in [&[][..], &[5, b'a'], &[0, 1, 2, 3, 4, 5, 6, 7], &[0x80]] {
        assert_eq!(KvMetadata::from_bare(bad), None, "{bad:?}");
    }
    // A length of eleven varint bytes is refused without overflowing.
    let mut long_len = vec![0x80; 10];
    long_len.push(0x01);
    long_len.extend_from_slice(&[0; 8]);
    assert_eq!(KvMetadata::from_bare(&long_len), None);
}

/// UUID 0x00112233_44556677_8899AABB_CCDDEEFF, label 0x0A0B.
pub(crate) fn actor() -> ActorId {
    ActorId::v1(0x0011_2233_4455_6677_8899_AABB_CCDD_EEFF, 0x0A0B)
}

/// The actor's subspace as the engine packs it, written out by hand:
/// `0x14` (RIVET = 0), `0x15 0x03` (PEGBOARD = 3), `0x15 0x48` (ACTOR_KV =
/// 72), then the id: code `0x40`, version `1`, 16 UUID bytes, the label.
pub(crate) fn subspace_bytes() -> Vec<u8> {
    let mut b = vec![0x14, 0x15, 0x03, 0x15, 0x48, 0x40, 0x01];
    b.extend_from_slice(&[
        0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xAA, 0xBB, 0xCC, 0xDD, 0xEE,
        0xFF,
    ]);
    b.extend_from_slice(&[0x0A, 0x0B]);
    b
}

/// `KvMetadata { version: "2.0.33", update_ts: START_MS }` in BARE: a
/// one-byte length 6, the bytes, and 1,730,000,000,000 as 8 little-endian
/// bytes (0x0000_0192_CC09_1400).
pub(crate) fn metadata_bytes() -> Vec<u8> {
    let mut b = vec![6];
    b.extend_from_slice(b"2.0.33");
    b.extend_from_slice(&[0x00, 0x14, 0x09, 0xCC, 0x92, 0x01, 0x00, 0x00]);
    b
}
