//! The extension seam: declared spaces, their rows in transactions (reads
//! pinned, writes under the limits and quota), versionstamped rows, and the
//! catalog. On every engine.

use strata_codec::Limits;
use strata_engine::{CommitError, Engine, Profile, RangeSpec, RowCursor, Snapshot};
use strata_keys::KeyRange;
use strata_keys::tuple::{self, Versionstamp};
use strata_store::{RowKind, StoreError, StoreOptions};

use crate::common::{self, scope};
use crate::engine_tests;
use crate::on_every_engine;

fn limits() -> Limits {
    Limits {
        max_key_bytes: 32,
        max_value_bytes: 64,
        max_batch_entries: 4,
        max_batch_bytes: 1_000,
        quota_bytes: 100,
    }
}

fn options() -> StoreOptions {
    common::options(limits())
        .space("ext.queue", Profile::Queue)
        .charged_space("ext.charged", Profile::General)
}

/// The raw rows of engine keyspace `name`, read without the store.
fn raw<E: Engine>(e: &E, name: &str) -> Vec<(Vec<u8>, Vec<u8>)> {
    let snap = e.snapshot().unwrap();
    snap.range(e.keyspace(name).unwrap(), RangeSpec::all())
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

engine_tests! {
    fn space_rows_commit_with_the_transaction_and_read_back() {
        on_every_engine!(options(), |store, _clock| {
            let q = store.space("ext.queue").unwrap();
            assert!(!q.is_charged());
            assert!(matches!(
                store.space("nope"),
                Err(StoreError::UnknownSpace { name }) if name == "nope"
            ));
            store
                .transact(|tx| {
                    tx.put_in(&q, b"a".to_vec(), b"1".to_vec())?;
                    tx.put_in(&q, b"c".to_vec(), b"3".to_vec())?;
                    // Own writes are seen.
                    assert_eq!(tx.get_in(&q, b"a")?.as_deref(), Some(&b"1"[..]));
                    Ok::<_, StoreError>(())
                })
                .unwrap();
            // In the engine keyspace named as declared, bytes as given.
            assert_eq!(
                raw(store.engine(), "ext.queue"),
                vec![
                    (b"a".to_vec(), b"1".to_vec()),
                    (b"c".to_vec(), b"3".to_vec())
                ]
            );
            // Scans merge stored rows with the transaction's own writes, in
            // either direction, and stop at the limit.
            store
                .transact(|tx| {
                    tx.put_in(&q, b"b".to_vec(), b"2".to_vec())?;
                    tx.delete_in(&q, b"c".to_vec())?;
                    let all = KeyRange {
                        start: Vec::new(),
                        end: None,
                    };
                    let page = tx.scan_in(&q, &all, None, false)?;
                    assert_eq!(
                        page.rows,
                        vec![
                            (b"a".to_vec(), b"1".to_vec()),
                            (b"b".to_vec(), b"2".to_vec())
                        ]
                    );
                    assert!(!page.more);
                    let page = tx.scan_in(&q, &all, Some(1), true)?;
                    assert_eq!(page.rows, vec![(b"b".to_vec(), b"2".to_vec())]);
                    assert!(page.more);
                    Ok::<_, StoreError>(())
                })
                .unwrap();
            assert_eq!(
                raw(store.engine(), "ext.queue"),
                vec![
                    (b"a".to_vec(), b"1".to_vec()),
                    (b"b".to_vec(), b"2".to_vec())
                ]
            );
        });
    }
}

type Rows = Vec<(Vec<u8>, Vec<u8>)>;

/// Every row `tx.snapshot_cursor_in` lends, copied.
fn lent<E: Engine>(
    tx: &mut strata_store::Tx<'_, E>,
    q: &strata_store::Space,
    range: &KeyRange,
    reverse: bool,
) -> Result<Rows, StoreError> {
    let mut rows = tx.snapshot_cursor_in(q, range, reverse)?;
    let mut out = Vec::new();
    while let Some(row) = rows.next_row() {
        let (k, v) = row?;
        out.push((k.to_vec(), v.to_vec()));
    }
    Ok(out)
}

fn rows(list: &[(&str, &str)]) -> Rows {
    list.iter()
        .map(|(k, v)| (k.as_bytes().to_vec(), v.as_bytes().to_vec()))
        .collect()
}

engine_tests! {
    fn a_space_cursor_lends_the_rows_with_the_transactions_own_writes() {
        on_every_engine!(options(), |store, _clock| {
            let q = store.space("ext.queue").unwrap();
            let charged = store.space("ext.charged").unwrap();
            store
                .transact(|tx| {
                    for (k, v) in [("a", "1"), ("c", "3"), ("e", "5"), ("g", "7")] {
                        tx.put_in(&q, k.into(), v.into())?;
                    }
                    Ok::<_, StoreError>(())
                })
                .unwrap();
            // Rows of another space never show.
            store
                .transact(|tx| tx.put_in(&charged, b"b".to_vec(), b"other".to_vec()))
                .unwrap();
            let all = KeyRange::prefix(&[]);
            let mut tx = store.begin();
            // Nothing of the transaction's own: the stored rows, either way,
            // and a bounded range.
            assert_eq!(
                lent(&mut tx, &q, &all, false).unwrap(),
                rows(&[("a", "1"), ("c", "3"), ("e", "5"), ("g", "7")])
            );
            assert_eq!(
                lent(&mut tx, &q, &all, true).unwrap(),
                rows(&[("g", "7"), ("e", "5"), ("c", "3"), ("a", "1")])
            );
            let middle = KeyRange {
                start: b"b".to_vec(),
                end: Some(b"f".to_vec()),
            };
            assert_eq!(
                lent(&mut tx, &q, &middle, false).unwrap(),
                rows(&[("c", "3"), ("e", "5")])
            );
            {
                let cursor = tx.snapshot_cursor_in(&q, &middle, false).unwrap();
                assert!(format!("{cursor:?}").contains("engine's rows"), "{cursor:?}");
            }
            // A write outside the range changes nothing in it (the
            // engine's rows are still lent as they are).
            tx.put_in(&q, b"h".to_vec(), b"8".to_vec()).unwrap();
            {
                let cursor = tx.snapshot_cursor_in(&q, &middle, true).unwrap();
                assert!(format!("{cursor:?}").contains("engine's rows"), "{cursor:?}");
            }
            assert_eq!(
                lent(&mut tx, &q, &middle, true).unwrap(),
                rows(&[("e", "5"), ("c", "3")])
            );
            // Own writes in the range: a new row, a replaced one, a deleted
            // one.
            tx.put_in(&q, b"d".to_vec(), b"4".to_vec()).unwrap();
            tx.put_in(&q, b"e".to_vec(), b"55".to_vec()).unwrap();
            tx.delete_in(&q, b"c".to_vec()).unwrap();
            assert_eq!(
                lent(&mut tx, &q, &middle, false).unwrap(),
                rows(&[("d", "4"), ("e", "55")])
            );
            assert_eq!(
                lent(&mut tx, &q, &all, true).unwrap(),
                rows(&[("h", "8"), ("g", "7"), ("e", "55"), ("d", "4"), ("a", "1")])
            );
            // A reader that stops early: the first row only. (Its
            // `Debug` says it merges: the transaction wrote in the range.)
            {
                let mut cursor = tx.snapshot_cursor_in(&q, &all, false).unwrap();
                assert!(format!("{cursor:?}").contains("merged"), "{cursor:?}");
                let (k, v) = cursor.next_row().unwrap().unwrap();
                assert_eq!((k, v), (&b"a"[..], &b"1"[..]));
            }
            // A range whose start is above its end is refused.
            let inverted = KeyRange {
                start: b"z".to_vec(),
                end: Some(b"a".to_vec()),
            };
            assert!(tx.snapshot_cursor_in(&q, &inverted, false).is_err());
            // Nothing read through the cursor is pinned: another
            // transaction's write into the range does not fail this one.
            store
                .transact(|t| t.put_in(&q, b"b".to_vec(), b"2".to_vec()))
                .unwrap();
            tx.commit().unwrap();
            assert_eq!(
                raw(store.engine(), "ext.queue"),
                rows(&[("a", "1"), ("b", "2"), ("d", "4"), ("e", "55"), ("g", "7"), ("h", "8")])
            );
        });
    }
}

engine_tests! {
    fn a_space_read_conflicts_with_a_concurrent_write() {
        on_every_engine!(options(), |store, _clock| {
            let q = store.space("ext.queue").unwrap();
            let mut reader = store.begin();
            assert_eq!(reader.get_in(&q, b"k").unwrap(), None);
            let range = KeyRange::prefix(b"r");
            assert!(
                reader
                    .scan_in(&q, &range, None, false)
                    .unwrap()
                    .rows
                    .is_empty()
            );
            reader.put_in(&q, b"mine".to_vec(), b"x".to_vec()).unwrap();
            // Another transaction writes into what the reader examined.
            store
                .transact(|tx| tx.put_in(&q, b"r1".to_vec(), b"y".to_vec()))
                .unwrap();
            let err = reader.commit().unwrap_err();
            assert!(err.is_conflict(), "{err}");
            // Nothing of the reader's was written.
            assert_eq!(raw(store.engine(), "ext.queue").len(), 1);
            // A snapshot read pins nothing.
            let mut blind = store.begin();
            assert_eq!(blind.snapshot_get_in(&q, b"k").unwrap(), None);
            blind.put_in(&q, b"blind".to_vec(), b"z".to_vec()).unwrap();
            store
                .transact(|tx| tx.put_in(&q, b"k".to_vec(), b"v".to_vec()))
                .unwrap();
            assert!(blind.commit().is_ok());
        });
    }
}

engine_tests! {
    fn an_expected_absence_is_checked_at_commit_without_a_read() {
        on_every_engine!(options(), |store, _clock| {
            let q = store.space("ext.queue").unwrap();
            let insert = |key: &[u8], value: &[u8]| {
                let mut tx = store.begin();
                tx.expect_absent_in(&q, key).unwrap();
                // What the commit will require: absent.
                assert_eq!(tx.get_in(&q, key).unwrap(), None);
                tx.put_in(&q, key.to_vec(), value.to_vec()).unwrap();
                tx
            };
            // Two inserts of one key begun together: the first commits,
            // the second is refused and writes nothing.
            let (first, second) = (insert(b"a", b"1"), insert(b"a", b"2"));
            first.commit().unwrap();
            let err = second.commit().unwrap_err();
            assert!(err.is_conflict(), "{err}");
            assert_eq!(raw(store.engine(), "ext.queue"), [(b"a".to_vec(), b"1".to_vec())]);
            // Expected absent after reading the row present: refused.
            let mut tx = store.begin();
            assert_eq!(tx.get_in(&q, b"a").unwrap(), Some(b"1".to_vec()));
            tx.expect_absent_in(&q, b"a").unwrap();
            tx.put_in(&q, b"b".to_vec(), b"3".to_vec()).unwrap();
            assert!(tx.commit().unwrap_err().is_conflict());
            // Read absent, then expected absent, and another row: commits.
            let mut tx = store.begin();
            assert_eq!(tx.get_in(&q, b"c").unwrap(), None);
            tx.expect_absent_in(&q, b"c").unwrap();
            tx.put_in(&q, b"c".to_vec(), b"4".to_vec()).unwrap();
            tx.commit().unwrap();
            // The row removed in between: the absence holds again.
            store.transact(|tx| tx.delete_in(&q, b"a".to_vec())).unwrap();
            insert(b"a", b"5").commit().unwrap();
            assert_eq!(
                raw(store.engine(), "ext.queue"),
                [
                    (b"a".to_vec(), b"5".to_vec()),
                    (b"c".to_vec(), b"4".to_vec())
                ]
            );
        });
    }
}

engine_tests! {
    fn space_rows_are_refused_at_the_limits_before_anything_is_written() {
        on_every_engine!(options(), |store, _clock| {
            let q = store.space("ext.queue").unwrap();
            let mut tx = store.begin();
            // A key of 33 bytes: refused at once.
            let err = tx.put_in(&q, vec![b'k'; 33], Vec::new()).unwrap_err();
            assert!(
                matches!(&err, StoreError::Limit { row: Some(r), .. } if r.kind == RowKind::Space),
                "{err:?}"
            );
            // A value of 65 bytes: refused at once.
            assert!(tx.put_in(&q, b"k".to_vec(), vec![0; 65]).is_err());
            // Five rows: the batch entry limit is 4, refused at commit.
            for i in 0..5u8 {
                tx.put_in(&q, vec![i], Vec::new()).unwrap();
            }
            assert!(matches!(
                tx.commit(),
                Err(StoreError::Limit { row: None, .. })
            ));
            assert!(raw(store.engine(), "ext.queue").is_empty());
        });
    }
}

engine_tests! {
    fn a_charged_space_counts_against_the_quota_exactly() {
        on_every_engine!(options(), |store, _clock| {
            let c = store.space("ext.charged").unwrap();
            assert!(c.is_charged());
            // A key in actor 3's scope: (ACTOR, 3, "ext").
            let key = tuple::pack(&(common::ACTOR, 3u64, "ext"));
            store
                .transact(|tx| tx.put_in(&c, key.clone(), vec![1; 40]))
                .unwrap();
            let used = (key.len() + 40) as u64;
            assert_eq!(store.quota_usage(&scope(3)).unwrap(), used);
            common::assert_quota_exact(&store);
            // An overwrite charges the difference.
            store
                .transact(|tx| tx.put_in(&c, key.clone(), vec![1; 30]))
                .unwrap();
            assert_eq!(
                store.quota_usage(&scope(3)).unwrap(),
                (key.len() + 30) as u64
            );
            // Growth past the quota of 100 (38 + 72) is refused, nothing
            // written.
            let big = tuple::pack(&(common::ACTOR, 3u64, "big"));
            let err = store
                .transact(|tx| tx.put_in(&c, big.clone(), vec![2; 64]))
                .unwrap_err();
            assert!(matches!(err, StoreError::Quota { .. }), "{err:?}");
            assert_eq!(raw(store.engine(), "ext.charged").len(), 1);
            common::assert_quota_exact(&store);
            // A delete frees it all.
            store.transact(|tx| tx.delete_in(&c, key.clone())).unwrap();
            assert_eq!(store.quota_usage(&scope(3)).unwrap(), 0);
            // The uncharged space charges nothing.
            let q = store.space("ext.queue").unwrap();
            store
                .transact(|tx| tx.put_in(&q, key.clone(), vec![1; 60]))
                .unwrap();
            assert_eq!(store.quota_usage(&scope(3)).unwrap(), 0);
        });
    }
}

engine_tests! {
    fn versionstamped_space_rows_sort_in_commit_order() {
        on_every_engine!(options(), |store, _clock| {
            let q = store.space("ext.queue").unwrap();
            let mut versions = Vec::new();
            for i in 0..3u8 {
                let mut key = Vec::new();
                // ("t", stamp): the stamp's 10 bytes start after 02 74 00 33.
                tuple::pack_into(&("t", Versionstamp::incomplete(0)), &mut key);
                let ((), info) = store
                    .transact_info(|tx| tx.put_versionstamped_in(&q, key.clone(), 4, vec![i]))
                    .unwrap();
                versions.push(info.unwrap().version);
            }
            let rows = raw(store.engine(), "ext.queue");
            assert_eq!(rows.len(), 3);
            for (j, (k, v)) in rows.iter().enumerate() {
                assert_eq!(*v, vec![u8::try_from(j).unwrap()], "commit order");
                // The commit version, big-endian, where the placeholder was.
                assert_eq!(k[4..12], versions[j].to_be_bytes());
            }
            // A stamp that does not fit the key is refused.
            let mut tx = store.begin();
            assert!(matches!(
                tx.put_versionstamped_in(&q, vec![0; 12], 3, Vec::new()),
                Err(StoreError::BadStampOffset { offset: 3, len: 12 })
            ));
        });
    }
}

engine_tests! {
    fn inverted_stamped_space_rows_sort_newest_first() {
        on_every_engine!(options(), |store, _clock| {
            let q = store.space("ext.queue").unwrap();
            let mut versions = Vec::new();
            for i in 0..3u8 {
                // "h/" then ten placeholder bytes then the row's own suffix.
                let key = [&b"h/"[..], &[0; 10], &[i]].concat();
                let ((), info) = store
                    .transact_info(|tx| tx.put_inverted_stamped_in(&q, key.clone(), 2, vec![i]))
                    .unwrap();
                versions.push(info.unwrap().version);
            }
            let rows = raw(store.engine(), "ext.queue");
            let values: Vec<u8> = rows.iter().map(|(_, v)| v[0]).collect();
            assert_eq!(values, [2, 1, 0], "the newest commit first");
            for (k, v) in &rows {
                let version = versions[usize::from(v[0])];
                let inverted: Vec<u8> = version.to_be_bytes().iter().map(|b| 255 - b).collect();
                assert_eq!(k[2..10], inverted[..], "the version, every bit flipped");
                assert_eq!(k[10..12], [0xFF, 0xFF], "order 0, flipped");
            }
            let mut tx = store.begin();
            assert!(matches!(
                tx.put_inverted_stamped_in(&q, vec![0; 12], 3, Vec::new()),
                Err(StoreError::BadStampOffset { offset: 3, len: 12 })
            ));
        });
    }
}

#[test]
fn a_space_handle_of_another_engine_is_refused() {
    let (a, _c) = common::mem(options());
    let (b, _d) = common::mem(options());
    let qa = a.space("ext.queue").unwrap();
    let err = b
        .transact(|tx| tx.put_in(&qa, b"k".to_vec(), b"v".to_vec()))
        .unwrap_err();
    assert!(
        matches!(err, StoreError::Commit(CommitError::UnknownKeyspace(_))),
        "{err:?}"
    );
    assert!(raw(b.engine(), "ext.queue").is_empty());
}

engine_tests! {
    fn the_catalog_describes_the_keyspaces_and_what_crates_record() {
        on_every_engine!(options(), |store, _clock| {
            // Opening wrote nothing.
            assert!(store.catalog().unwrap().is_empty());
            assert!(store.publish_catalog().unwrap());
            // Idempotent: nothing differs, no commit.
            let before = store.engine().last_version();
            assert!(!store.publish_catalog().unwrap());
            assert_eq!(store.engine().last_version(), before);
            store
                .transact(|tx| tx.catalog_put("topic", "orders", 2, b"detail"))
                .unwrap();
            let entries: Vec<(String, String, u64, Vec<u8>)> = store
                .catalog()
                .unwrap()
                .into_iter()
                .map(|e| (e.kind, e.name, e.version, e.detail))
                .collect();
            let keyspace = |name: &str, role: &str, profile: &str| {
                (
                    "keyspace".to_owned(),
                    name.to_owned(),
                    1,
                    tuple::pack(&(role, profile)),
                )
            };
            assert_eq!(
                entries,
                vec![
                    keyspace("data", "data", "point-lookup"),
                    // A charged space says so.
                    (
                        "keyspace".to_owned(),
                        "ext.charged".to_owned(),
                        1,
                        tuple::pack(&("space", "general", true)),
                    ),
                    keyspace("ext.queue", "space", "queue"),
                    keyspace("strata.system", "system", "general"),
                    (
                        "topic".to_owned(),
                        "orders".to_owned(),
                        2,
                        b"detail".to_vec()
                    ),
                ]
            );
            // The rows are the documented layout: ("k", kind, name) ->
            // (version, detail), in the system keyspace.
            let row = raw(store.engine(), "strata.system")
                .into_iter()
                .find(|(k, _)| *k == tuple::pack(&("k", "topic", "orders")))
                .unwrap();
            assert_eq!(row.1, tuple::pack(&(2u64, &b"detail"[..])));
        });
    }
}
