//! Batch limits, the non-atomic bulk writer, exact quota.

use strata_codec::{Limit, Limits, stored_size};
use strata_engine::{Commit, Engine};
use strata_keys::Key;
use strata_store::{BulkCursor, RowKind, StoreError, StoreOptions};

use crate::common::{self, BlobKey, Doc, DocKey};
use crate::engine_tests;
use crate::on_every_engine;

fn doc(n: usize) -> Doc {
    Doc {
        title: String::new(),
        body: vec![7; n],
    }
}

engine_tests! {
    fn an_atomic_commit_over_a_limit_is_refused_before_anything_is_written() {
        let limits = Limits {
            max_batch_entries: 4,
            max_batch_bytes: 2_000,
            ..Limits::FOUNDATIONDB
        };
        // With a quota scope (the old rows are read) and without (blind
        // puts, planned without reading).
        let blind: fn(Limits) -> StoreOptions = StoreOptions::new;
        for options in [common::options, blind] {
            on_every_engine!(options(limits), |store, _clock| {
                let before = store.engine().last_version();
                // Five entries.
                let err = store
                    .transact(|tx| {
                        for id in 0..5 {
                            tx.put(&DocKey { actor: 1, id }, &doc(1))?;
                        }
                        Ok::<_, StoreError>(())
                    })
                    .unwrap_err();
                assert!(
                    matches!(err, StoreError::Limit { source: e, row: None } if e.limit == Limit::BatchEntries && e.size == 5 && e.max == 4),
                    "{err:?}"
                );
                // Four entries over the byte limit.
                let err = store
                    .transact(|tx| {
                        for id in 0..4 {
                            tx.put(&DocKey { actor: 1, id }, &doc(600))?;
                        }
                        Ok::<_, StoreError>(())
                    })
                    .unwrap_err();
                assert!(
                    matches!(err, StoreError::Limit { source: e, row: None } if e.limit == Limit::BatchBytes),
                    "{err:?}"
                );
                assert_eq!(store.engine().last_version(), before, "nothing committed");
                assert_eq!(store.get(&DocKey { actor: 1, id: 0 }).unwrap(), None);
                // Exactly at the limit passes.
                store
                    .transact(|tx| {
                        for id in 0..4 {
                            tx.put(&DocKey { actor: 1, id }, &doc(1))?;
                        }
                        Ok::<_, StoreError>(())
                    })
                    .unwrap();
            });
        }
    }
}

#[test]
fn a_key_over_the_key_limit_is_refused() {
    let limits = Limits {
        max_key_bytes: 8,
        ..Limits::FOUNDATIONDB
    };
    let (store, _clock) = common::mem(common::options(limits));
    let err = store.put(&DocKey { actor: 1, id: 1 }, &doc(1)).unwrap_err();
    let key = DocKey { actor: 1, id: 1 }.pack().unwrap();
    match &err {
        StoreError::Limit {
            source,
            row: Some(row),
        } => {
            assert_eq!(
                (source.limit, source.size, source.max),
                (Limit::KeyBytes, key.len() as u64, 8)
            );
            assert_eq!(
                (row.key_type, row.kind, &row.key),
                (Some("DocKey"), RowKind::Value, &key)
            );
        }
        other => panic!("{other:?}"),
    }
    assert!(
        err.to_string()
            .contains("value row of a write of DocKey at key"),
        "{err}"
    );
}

engine_tests! {
    /// A chunk row's key is the value's key plus a suffix: a key that fits may
    /// make a chunk row that does not. The error says so, naming the key the
    /// user wrote, its type, and that it was a chunk row.
    fn a_chunk_row_over_the_key_limit_names_the_users_key() {
        let k = BlobKey { actor: 1, id: 1 };
        let key = k.pack().unwrap();
        // The key fits with two bytes to spare; its chunk rows' keys do not.
        let max_key = key.len() + 2;
        let limits = Limits {
            max_key_bytes: max_key,
            max_value_bytes: 100,
            ..Limits::FOUNDATIONDB
        };
        on_every_engine!(common::options(limits), |store, _clock| {
            let err = store.put(&k, &vec![1; 1_000]).unwrap_err();
            match &err {
                StoreError::Limit {
                    source,
                    row: Some(row),
                } => {
                    assert_eq!(source.limit, Limit::KeyBytes);
                    assert_eq!(source.max, max_key as u64);
                    assert!(source.size > max_key as u64, "{source}");
                    assert_eq!(
                        (row.key_type, row.kind, &row.key),
                        (Some("BlobKey"), RowKind::Chunk, &key)
                    );
                }
                other => panic!("{other:?}"),
            }
            let text = err.to_string();
            assert!(text.contains("chunk row of a write of BlobKey"), "{text}");
            assert_eq!(store.get(&k).unwrap(), None, "nothing written");
        });
    }
}

engine_tests! {
    /// The chunk rows a delete or an overwrite removes are rows that were
    /// written under the key limit: removing them is never refused for
    /// their keys, not even when they go as one range (whose two bounds
    /// together are longer than the limit).
    fn a_chunked_value_with_a_long_key_can_be_overwritten_and_deleted() {
        let k = BlobKey { actor: 1, id: 1 };
        let key = k.pack().unwrap();
        let limits = Limits {
            max_key_bytes: 2 * key.len() + 8,
            max_value_bytes: 100,
            ..Limits::FOUNDATIONDB
        };
        on_every_engine!(common::options(limits), |store, _clock| {
            store.put(&k, &vec![1; 1_000]).unwrap();
            assert!(common::system_rows_tagged(&store, "c") >= 10);
            store.put(&k, &vec![2; 500]).unwrap();
            assert_eq!(store.get(&k).unwrap(), Some(vec![2; 500]));
            store.transact(|tx| tx.delete(&k)).unwrap();
            assert_eq!(store.get(&k).unwrap(), None);
            assert_eq!(common::system_rows_tagged(&store, "c"), 0, "no chunk left");
            // A damaged row is overwritten by clearing its whole chunk
            // range: one range delete, its bounds longer together than
            // the key limit.
            store.put(&k, &vec![3; 1_000]).unwrap();
            let data = store.engine().keyspace("data").unwrap();
            let mut row = store.engine().get_latest(data, &key).unwrap().unwrap();
            let last = row.len() - 1;
            row[last] ^= 0x40;
            store
                .engine()
                .commit(Commit::new().put(data, key.clone(), row))
                .unwrap();
            assert!(store.get(&k).is_err(), "the row is damaged");
            store.put(&k, &vec![4; 50]).unwrap();
            assert_eq!(store.get(&k).unwrap(), Some(vec![4; 50]));
            assert_eq!(common::system_rows_tagged(&store, "c"), 0, "the chunks went with it");
        });
    }
}

engine_tests! {
    fn a_chunked_value_larger_than_a_batch_is_refused_whole() {
        let limits = Limits {
            max_value_bytes: 1_000,
            max_batch_bytes: 10_000,
            ..Limits::FOUNDATIONDB
        };
        on_every_engine!(common::options(limits), |store, _clock| {
            let k = BlobKey { actor: 1, id: 1 };
            let err = store.put(&k, &vec![1; 20_000]).unwrap_err();
            assert!(
                matches!(err, StoreError::Limit { source: e, row: None } if e.limit == Limit::BatchBytes),
                "{err:?}"
            );
            assert_eq!(common::system_rows_tagged(&store, "c"), 0);
            assert_eq!(store.get(&k).unwrap(), None);
        });
    }
}

engine_tests! {
    fn the_bulk_writer_splits_into_limit_respecting_commits_and_resumes_after_a_failure() {
        let limits = Limits {
            max_batch_entries: 10,
            ..Limits::FOUNDATIONDB
        }
        .with_quota(3_000);
        on_every_engine!(common::options(limits), |store, _clock| {
            let mut bulk = store.bulk_non_atomic();
            for id in 0..35 {
                bulk.put(&DocKey { actor: 1, id }, &doc(10)).unwrap();
            }
            let before = store.engine().last_version();
            let report = bulk.apply().unwrap();
            assert_eq!((report.entries, report.commits), (35, 4));
            assert_eq!(store.engine().last_version(), before + 4);
            for id in 0..35 {
                assert_eq!(store.get(&DocKey { actor: 1, id }).unwrap(), Some(doc(10)));
            }
            common::assert_quota_exact(&store);

            // Actor 2 runs out of quota part-way: the cursor says where.
            let mut bulk = store.bulk_non_atomic();
            for id in 0..100 {
                bulk.put(&DocKey { actor: 2, id }, &doc(100)).unwrap();
            }
            let err = bulk.apply().unwrap_err();
            assert!(matches!(err.source, StoreError::Quota { .. }), "{err:?}");
            let next = err.cursor.next;
            assert!(next > 0 && next < 100, "{next}");
            for id in 0..100 {
                let present = store.get(&DocKey { actor: 2, id }).unwrap().is_some();
                assert_eq!(
                    present,
                    usize::try_from(id).unwrap() < next,
                    "entry {id}: committed exactly before the cursor"
                );
            }
            common::assert_quota_exact(&store);
            // Free space, then resume from the cursor.
            let mut freeing = store.bulk_non_atomic();
            for id in 0..next as u64 {
                freeing.delete(&DocKey { actor: 2, id }).unwrap();
            }
            freeing.apply().unwrap();
            let report = bulk.apply_from(BulkCursor { next }).unwrap_err();
            assert!(report.cursor.next > next, "progress after resuming");
            common::assert_quota_exact(&store);
        });
    }
}

engine_tests! {
    fn quota_is_exact_near_the_limit_in_both_directions() {
        // Size the quota from the real bytes of one document.
        let probe = common::options(Limits::FOUNDATIONDB);
        let (sizer, _c) = common::mem(probe);
        sizer.put(&DocKey { actor: 1, id: 1 }, &doc(100)).unwrap();
        let one = sizer.quota_usage(&common::scope(1)).unwrap();
        let key_len = DocKey { actor: 1, id: 1 }.pack().unwrap().len();
        assert!(
            one > stored_size(key_len, 100),
            "envelope bytes are counted too"
        );

        // Room for four documents and 3 bytes.
        let limits = Limits::FOUNDATIONDB.with_quota(4 * one + 3);
        on_every_engine!(common::options(limits), |store, _clock| {
            // Ids 1..=4 pack to keys of one length (0 would be a byte shorter).
            for id in 1..=4 {
                store.put(&DocKey { actor: 1, id }, &doc(100)).unwrap();
            }
            let scope = common::scope(1);
            assert_eq!(store.quota_usage(&scope).unwrap(), 4 * one);
            // An overwrite in place of the same size succeeds at 3 bytes below the quota.
            store.put(&DocKey { actor: 1, id: 2 }, &doc(100)).unwrap();
            // Growing by 3 bytes fits exactly; by 4 does not.
            store.put(&DocKey { actor: 1, id: 4 }, &doc(103)).unwrap();
            assert_eq!(store.quota_usage(&scope).unwrap(), 4 * one + 3);
            // One byte more is refused, even as an overwrite.
            let err = store
                .put(&DocKey { actor: 1, id: 3 }, &doc(101))
                .unwrap_err();
            match err {
                StoreError::Quota {
                    scope: s,
                    used,
                    requested,
                    limit,
                    key_type,
                    key,
                } => {
                    assert_eq!(s, scope);
                    assert_eq!((used, requested, limit), (4 * one + 3, 1, 4 * one + 3));
                    let written = DocKey { actor: 1, id: 3 }.pack().unwrap();
                    assert_eq!((key_type, key), (Some("DocKey"), written));
                }
                other => panic!("{other:?}"),
            }
            // A new key does not fit either; another actor is unaffected.
            assert!(matches!(
                store.put(&DocKey { actor: 1, id: 9 }, &doc(0)).unwrap_err(),
                StoreError::Quota { .. }
            ));
            store.put(&DocKey { actor: 2, id: 9 }, &doc(100)).unwrap();
            // Shrinking is always allowed and frees exactly.
            store.put(&DocKey { actor: 1, id: 4 }, &doc(50)).unwrap();
            assert_eq!(store.quota_usage(&scope).unwrap(), 4 * one - 50);
            store.delete(&DocKey { actor: 1, id: 1 }).unwrap();
            assert_eq!(store.quota_usage(&scope).unwrap(), 3 * one - 50);
            common::assert_quota_exact(&store);
        });
    }
}

engine_tests! {
    fn quota_counts_chunk_rows_and_counters() {
        let limits = Limits {
            max_value_bytes: 300,
            ..Limits::FOUNDATIONDB
        };
        on_every_engine!(common::options(limits), |store, _clock| {
            store
                .put(&BlobKey { actor: 3, id: 1 }, &vec![1; 1_000])
                .unwrap();
            store
                .add(
                    &common::CountKey {
                        actor: 3,
                        name: "n".into(),
                    },
                    5,
                )
                .unwrap();
            store
                .add(
                    &common::CountKey {
                        actor: 3,
                        name: "n".into(),
                    },
                    5,
                )
                .unwrap();
            common::assert_quota_exact(&store);
            // A counter deleted and added to in one transaction: the add
            // makes the row again, charged again.
            let n = common::CountKey {
                actor: 3,
                name: "n".into(),
            };
            store
                .transact(|tx| {
                    tx.delete(&n)?;
                    tx.add(&n, 2)
                })
                .unwrap();
            assert_eq!(store.counter(&n).unwrap(), 2);
            common::assert_quota_exact(&store);
            let usage = store.quota_usage(&common::scope(3)).unwrap();
            assert!(usage > 1_000, "{usage}");
            store.delete(&BlobKey { actor: 3, id: 1 }).unwrap();
            store
                .delete(&common::CountKey {
                    actor: 3,
                    name: "n".into(),
                })
                .unwrap();
            assert_eq!(store.quota_usage(&common::scope(3)).unwrap(), 0);
            common::assert_quota_exact(&store);
        });
    }
}
