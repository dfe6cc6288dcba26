//! Typed point operations, scans with limits and cursors, chunked values.

use strata_codec::Limits;
use strata_engine::Engine;
use strata_keys::{Key, KeyRange, tuple};
use strata_store::{Scan, Store, StoreError};

use crate::common::{self, ACTOR, BlobKey, Doc, DocKey, NoteKey};
use crate::engine_tests;
use crate::on_every_engine;

fn doc(i: u64) -> Doc {
    Doc {
        title: format!("doc {i}"),
        body: vec![u8::try_from(i % 251).unwrap(); 16],
    }
}

fn docs_of(actor: u64) -> Scan {
    Scan::range_of(KeyRange::tuple_prefix(&tuple::pack(&(ACTOR, actor, "doc"))))
}

engine_tests! {
    fn put_get_overwrite_delete() {
        on_every_engine!(common::options(Limits::FOUNDATIONDB), |store, _clock| {
            let k = DocKey { actor: 1, id: 1 };
            assert_eq!(store.get(&k).unwrap(), None);
            store.put(&k, &doc(1)).unwrap();
            assert_eq!(store.get(&k).unwrap(), Some(doc(1)));
            store.put(&k, &doc(2)).unwrap();
            assert_eq!(store.get(&k).unwrap(), Some(doc(2)));
            store.delete(&k).unwrap();
            assert_eq!(store.get(&k).unwrap(), None);
            common::assert_quota_exact(&store);
            assert_eq!(store.quota_usage(&common::scope(1)).unwrap(), 0);
        });
    }
}

engine_tests! {
    fn scans_page_with_cursor_and_more_in_both_directions() {
        on_every_engine!(common::options(Limits::FOUNDATIONDB), |store, _clock| {
            for id in 0..10 {
                store.put(&DocKey { actor: 1, id }, &doc(id)).unwrap();
            }
            store.put(&DocKey { actor: 2, id: 0 }, &doc(99)).unwrap();
            for reverse in [false, true] {
                let mut scan = docs_of(1).limit(3);
                if reverse {
                    scan = scan.reverse();
                }
                let mut ids = Vec::new();
                let mut pages = 0;
                loop {
                    let page = store.scan::<DocKey>(&scan).unwrap();
                    pages += 1;
                    assert!(page.items.len() <= 3);
                    ids.extend(page.items.iter().map(|(k, v)| {
                        assert_eq!(*v, doc(k.id));
                        k.id
                    }));
                    match page.next(&scan) {
                        Some(next) => scan = next,
                        None => break,
                    }
                }
                let mut want: Vec<u64> = (0..10).collect();
                if reverse {
                    want.reverse();
                }
                assert_eq!(ids, want, "reverse = {reverse}");
                assert_eq!(pages, 4, "3 + 3 + 3 + 1, the last without more");
            }
            // An exact fit says no more.
            let page = store.scan::<DocKey>(&docs_of(1).limit(10)).unwrap();
            assert_eq!((page.items.len(), page.more), (10, false));
        });
    }
}

#[test]
fn a_scan_streams_and_reports_more_after_the_limit() {
    let (store, _clock) = common::mem(common::options(Limits::FOUNDATIONDB));
    for id in 0..5 {
        store.put(&DocKey { actor: 1, id }, &doc(id)).unwrap();
    }
    let view = store.read().unwrap();
    let mut it = view.scan::<DocKey>(&docs_of(1).limit(2)).unwrap();
    assert_eq!(it.next().unwrap().unwrap().0.id, 0);
    assert_eq!(it.next().unwrap().unwrap().0.id, 1);
    assert!(it.next().is_none());
    assert!(it.more());
    assert_eq!(
        it.cursor().unwrap().key_bytes(),
        DocKey { actor: 1, id: 1 }.pack().unwrap()
    );
}

engine_tests! {
    fn a_row_of_another_key_type_in_a_scan_is_an_error() {
        on_every_engine!(common::options(Limits::FOUNDATIONDB), |store, _clock| {
            store.put(&DocKey { actor: 1, id: 1 }, &doc(1)).unwrap();
            store
                .put(&NoteKey { actor: 1, id: 1 }, &"note".to_owned())
                .unwrap();
            let err = store.scan::<DocKey>(&docs_of(1)).unwrap_err();
            assert!(
                matches!(
                    err,
                    StoreError::Key {
                        key_type: "DocKey",
                        ..
                    }
                ),
                "{err:?}"
            );
            // Each type reads its own row.
            assert_eq!(
                store.get(&NoteKey { actor: 1, id: 1 }).unwrap().as_deref(),
                Some("note")
            );
        });
    }
}

#[test]
fn corrupt_rows_are_typed_errors() {
    let (store, _clock) = common::mem(common::options(Limits::FOUNDATIONDB));
    let k = DocKey { actor: 1, id: 1 };
    let (data, _) = store.keyspaces();
    for bytes in [
        &b""[..],
        &[0xE1][..],
        &[0xE1, 1, 0, 1, 2, 0, 0, 0, 0][..],
        &[0x00; 40][..],
    ] {
        store
            .engine()
            .commit(strata_engine::Commit::new().put(data, k.pack().unwrap(), bytes.to_vec()))
            .unwrap();
        let err = store.get(&k).unwrap_err();
        assert!(
            matches!(err, StoreError::Decode { .. }),
            "{bytes:02x?}: {err:?}"
        );
    }
}

/// Another postcard value at version 1: its envelope opens as a `Doc`'s
/// would (codec and version agree), its body does not decode as one.
#[derive(serde::Serialize, serde::Deserialize)]
struct Tiny {
    x: u8,
}
strata_codec::value!(Tiny: postcard, version = 1);

/// A scan that goes on past its error items learns each failed row's key
/// (`ScanIter::next_naming_row`): a damaged checksum, a body that does not
/// decode, a key of another type.
#[test]
fn a_scan_going_on_past_errors_names_the_row_of_each() {
    let (store, _clock) = common::mem(common::options(Limits::FOUNDATIONDB));
    let (data, _) = store.keyspaces();
    let put_row = |key: Vec<u8>, row: Vec<u8>| {
        store
            .engine()
            .commit(strata_engine::Commit::new().put(data, key, row))
            .unwrap();
    };
    for id in 1..=6 {
        store.put(&DocKey { actor: 1, id }, &doc(id)).unwrap();
    }
    // 2: a stored byte flipped (the checksum no longer holds).
    let two = DocKey { actor: 1, id: 2 }.pack().unwrap();
    let mut row = strata_engine::Snapshot::get(&store.engine().snapshot().unwrap(), data, &two)
        .unwrap()
        .unwrap();
    *row.last_mut().unwrap() ^= 0x01;
    put_row(two.clone(), row);
    // 4: a checksummed envelope whose body is no `Doc`.
    let four = DocKey { actor: 1, id: 4 }.pack().unwrap();
    let mut envelope = Vec::new();
    strata_codec::encode(
        &Tiny { x: 200 },
        &four,
        strata_codec::EncodeOptions::default(),
        &mut envelope,
    )
    .unwrap();
    put_row(four.clone(), envelope);
    // After 5: a note, whose key does not unpack as a `DocKey`.
    let note = NoteKey { actor: 1, id: 5 };
    store.put(&note, &"a note".to_owned()).unwrap();

    let view = store.read().unwrap();
    let mut scan = view.scan::<DocKey>(&docs_of(1)).unwrap();
    let (mut good, mut failed) = (Vec::new(), Vec::new());
    while let Some(entry) = scan.next_naming_row() {
        match entry {
            Ok((key, value)) => {
                assert_eq!(value, doc(key.id));
                good.push(key.id);
            }
            Err((e, row)) => failed.push((format!("{e}"), row)),
        }
    }
    assert_eq!(good, [1, 3, 5, 6]);
    let keys: Vec<_> = failed.iter().map(|(_, k)| k.clone()).collect();
    assert_eq!(
        keys,
        [Some(two), Some(four), Some(note.pack().unwrap())],
        "{failed:?}"
    );
}

engine_tests! {
    fn large_values_of_a_chunked_type_round_trip_and_leave_no_stale_chunks() {
        let limits = Limits {
            max_value_bytes: 1_000,
            ..Limits::FOUNDATIONDB
        };
        on_every_engine!(common::options(limits), |store, _clock| {
            let k = BlobKey { actor: 1, id: 1 };
            let big: Vec<u8> = (0..5_500u32)
                .map(|i| u8::try_from(i * 7 % 256).unwrap())
                .collect();
            store.put(&k, &big).unwrap();
            assert_eq!(store.get(&k).unwrap(), Some(big.clone()));
            assert_eq!(
                common::system_rows_tagged(&store, "c"),
                6,
                "5,500 bytes + header in 1,000-byte chunks"
            );
            common::assert_quota_exact(&store);

            // Smaller but still chunked: the extra chunks go.
            let mid = vec![3u8; 2_500];
            store.put(&k, &mid).unwrap();
            assert_eq!(store.get(&k).unwrap(), Some(mid));
            assert_eq!(common::system_rows_tagged(&store, "c"), 3);
            common::assert_quota_exact(&store);

            // Inline again: every chunk goes.
            store.put(&k, &vec![1u8; 10]).unwrap();
            assert_eq!(store.get(&k).unwrap(), Some(vec![1u8; 10]));
            assert_eq!(common::system_rows_tagged(&store, "c"), 0);

            store.put(&k, &big).unwrap();
            store.delete(&k).unwrap();
            assert_eq!(store.get(&k).unwrap(), None);
            assert_eq!(common::system_rows_tagged(&store, "c"), 0);
            common::assert_quota_exact(&store);
            assert_eq!(store.quota_usage(&common::scope(1)).unwrap(), 0);

            // Scans assemble chunked values too.
            store.put(&k, &big).unwrap();
            store
                .put(&BlobKey { actor: 1, id: 2 }, &vec![9u8; 3])
                .unwrap();
            let page = store
                .scan::<BlobKey>(&Scan::range_of(KeyRange::tuple_prefix(&tuple::pack(&(
                    ACTOR, 1u64, "blob",
                )))))
                .unwrap();
            assert_eq!(
                page.items,
                vec![
                    (k.clone(), big.clone()),
                    (BlobKey { actor: 1, id: 2 }, vec![9u8; 3])
                ]
            );
        });
    }
}

engine_tests! {
    fn a_value_too_large_for_a_type_that_is_not_chunked_is_refused_and_nothing_is_written() {
        let limits = Limits {
            max_value_bytes: 100,
            ..Limits::FOUNDATIONDB
        };
        on_every_engine!(common::options(limits), |store, _clock| {
            let k = DocKey { actor: 1, id: 1 };
            let small = doc(1);
            store.put(&k, &small).unwrap();
            let version = store.engine().last_version();
            let big = Doc {
                title: "big".into(),
                body: vec![0; 100],
            };
            let err = store.put(&k, &big).unwrap_err();
            assert!(
                matches!(
                    err,
                    StoreError::ValueTooLarge {
                        key_type: "DocKey",
                        max: 100,
                        ..
                    }
                ),
                "{err:?}"
            );
            assert_eq!(store.engine().last_version(), version, "no commit");
            assert_eq!(store.get(&k).unwrap(), Some(small));
        });
    }
}

#[test]
fn a_chunk_missing_from_storage_is_a_typed_error() {
    let limits = Limits {
        max_value_bytes: 500,
        ..Limits::FOUNDATIONDB
    };
    let (store, _clock) = common::mem(common::options(limits));
    let k = BlobKey { actor: 1, id: 1 };
    store.put(&k, &vec![5u8; 2_000]).unwrap();
    let (_, system) = store.keyspaces();
    let second = common::system_rows(&store)
        .into_iter()
        .filter(|(key, _)| key.starts_with(&tuple::pack(&("c",))))
        .nth(1)
        .unwrap()
        .0;
    store
        .engine()
        .commit(strata_engine::Commit::new().delete(system, second))
        .unwrap();
    let err = store.get(&k).unwrap_err();
    assert!(matches!(err, StoreError::Chunk { .. }), "{err:?}");
}

#[test]
fn without_checksum_verification_a_value_under_the_wrong_key_goes_unseen() {
    let (verified, _c) = common::mem(common::options(Limits::FOUNDATIONDB));
    let (unverified, _c2) =
        common::mem(common::options(Limits::FOUNDATIONDB).verify_checksums(false));
    for store in [&verified, &unverified] {
        let (data, _) = store.keyspaces();
        store.put(&DocKey { actor: 1, id: 1 }, &doc(1)).unwrap();
        let row = {
            use strata_engine::Snapshot;
            store
                .engine()
                .snapshot()
                .unwrap()
                .get(data, &DocKey { actor: 1, id: 1 }.pack().unwrap())
                .unwrap()
                .unwrap()
        };
        store
            .engine()
            .commit(strata_engine::Commit::new().put(
                data,
                DocKey { actor: 1, id: 2 }.pack().unwrap(),
                row,
            ))
            .unwrap();
    }
    assert!(matches!(
        verified.get(&DocKey { actor: 1, id: 2 }),
        Err(StoreError::Decode { .. })
    ));
    assert_eq!(
        unverified.get(&DocKey { actor: 1, id: 2 }).unwrap(),
        Some(doc(1))
    );
}

#[test]
fn a_missing_keyspace_and_a_corrupt_counter_are_typed_errors() {
    let engine = strata_engine::MemEngine::open(vec![strata_engine::KeyspaceSpec::new(
        "data",
        strata_engine::Profile::General,
    )])
    .unwrap();
    let err = strata_store::Store::open(engine, common::options(Limits::FOUNDATIONDB)).unwrap_err();
    assert!(
        matches!(err, StoreError::Engine(strata_engine::EngineError::UnknownKeyspaceName { name: ref n }) if n == "strata.system"),
        "{err:?}"
    );

    let (store, _clock) = common::mem(common::options(Limits::FOUNDATIONDB));
    let (data, _) = store.keyspaces();
    let k = common::CountKey {
        actor: 1,
        name: "n".into(),
    };
    store
        .engine()
        .commit(strata_engine::Commit::new().put(data, k.pack().unwrap(), vec![1, 2, 3]))
        .unwrap();
    assert!(matches!(
        store.counter(&k),
        Err(StoreError::BadCounter { len: 3 })
    ));
    assert!(matches!(
        store.transact(|tx| tx.counter(&k)),
        Err(StoreError::BadCounter { len: 3 })
    ));
}

#[test]
fn a_chunk_size_of_zero_is_an_invalid_option_at_open() {
    let options = common::options(Limits::FOUNDATIONDB).chunk_size(0);
    let engine = strata_engine::MemEngine::open(options.keyspace_specs()).unwrap();
    let err = Store::open(engine, options).expect_err("refused");
    assert!(
        matches!(
            err,
            StoreError::InvalidOptions {
                option: "chunk_size",
                ..
            }
        ),
        "{err:?}"
    );
}

engine_tests! {
    /// A key type declared `-> chunked` is chunked without a store option.
    fn a_key_type_declared_chunked_needs_no_store_option() {
        use strata_keys::tuple_key;

        #[derive(Debug, Clone, PartialEq)]
        struct Bundle {
            id: u64,
        }
        tuple_key! {
            Bundle -> chunked Vec<u8> = ("bundle", {id});
        }
        let limits = Limits {
            max_value_bytes: 200,
            ..Limits::FOUNDATIONDB
        };
        // No `.chunked::<Bundle>()` here.
        on_every_engine!(strata_store::StoreOptions::new(limits), |store, _clock| {
            let big: Vec<u8> = (0..2_000u32).map(|i| (i % 251) as u8).collect();
            store.put(&Bundle { id: 1 }, &big).unwrap();
            assert_eq!(store.get(&Bundle { id: 1 }).unwrap(), Some(big));
            let chunks = common::system_rows(&store)
                .into_iter()
                .filter(|(k, _)| k.starts_with(&tuple::pack(&("c",))))
                .count();
            assert!(chunks >= 10, "{chunks} chunk rows");
        });
    }
}

/// A counter read through a view is the snapshot's: totals and the rows
/// they count agree, whatever commits after the view was taken.
#[test]
fn a_view_reads_counters_at_its_snapshot() {
    let (store, _clock) = common::mem(common::options(Limits::FOUNDATIONDB));
    let hits = common::CountKey {
        actor: 1,
        name: "hits".into(),
    };
    store.add(&hits, 2).unwrap();
    let view = store.read().unwrap();
    store.add(&hits, 5).unwrap();
    assert_eq!(view.counter(&hits).unwrap(), 2);
    assert_eq!(store.read().unwrap().counter(&hits).unwrap(), 7);
    assert_eq!(store.counter(&hits).unwrap(), 7);
    let absent = common::CountKey {
        actor: 1,
        name: "misses".into(),
    };
    assert_eq!(view.counter(&absent).unwrap(), 0);
}

/// The layers above take the store's clock and a generator drawn from its
/// own: the same clock, and the same numbers from stores seeded alike.
#[test]
fn the_store_lends_its_clock_and_seeds_generators_from_its_own() {
    use strata_engine::{Engine, ManualClock, MemEngine, SeededRng};
    let open = |seed| {
        let options = common::options(Limits::FOUNDATIONDB);
        let clock = std::sync::Arc::new(ManualClock::new(1_000));
        let store = Store::open_with(
            MemEngine::open(options.keyspace_specs()).unwrap(),
            options,
            clock.clone(),
            Box::new(SeededRng::new(seed)),
        )
        .unwrap();
        (store, clock)
    };
    let (a, clock) = open(7);
    let (b, _) = open(7);
    let (c, _) = open(8);
    let draw = |s: &Store<MemEngine>| s.fork_rng().next_u64();
    assert_eq!(draw(&a), draw(&b));
    assert_ne!(draw(&a), draw(&c));
    assert_ne!(
        a.fork_rng().next_u64(),
        a.fork_rng().next_u64(),
        "each fork new"
    );
    clock.advance(500);
    assert_eq!(a.clock().now_ms(), 1_500);
    assert_eq!(a.last_version(), a.engine().last_version());
    a.put(&DocKey { actor: 1, id: 1 }, &doc(1)).unwrap();
    assert_eq!(a.last_version(), a.engine().last_version());
    assert!(a.last_version() > b.last_version());
}

fn blobs_of(actor: u64) -> Scan {
    Scan::range_of(KeyRange::tuple_prefix(&tuple::pack(&(
        ACTOR, actor, "blob",
    ))))
}

/// The blob `id`: `len` bytes that differ from one blob to the next.
fn blob(id: u64, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| u8::try_from((i as u64 * 31 + id * 7) % 256).unwrap())
        .collect()
}

engine_tests! {
    fn a_scan_lends_inline_and_chunked_values_and_pages_as_its_iterator() {
        let limits = Limits {
            max_value_bytes: 1_000,
            ..Limits::FOUNDATIONDB
        };
        on_every_engine!(common::options(limits), |store, clock| {
            // Blobs 0..6 of increasing size: 3 and 5 chunked; 4 expires.
            let lens = [0, 10, 300, 2_500, 40, 5_500, 20];
            for (id, len) in (0u64..6).zip(lens) {
                let k = BlobKey { actor: 1, id };
                if id == 4 {
                    store.put_with_ttl(&k, &blob(id, len), 100).unwrap();
                } else {
                    store.put(&k, &blob(id, len)).unwrap();
                }
            }
            store.put_with_ttl(&BlobKey { actor: 1, id: 6 }, &blob(6, 20), 10_000).unwrap();
            store.put(&BlobKey { actor: 2, id: 0 }, &blob(99, 20)).unwrap();
            clock.advance(100);
            let expiry_of_6 = store
                .get_with_expiry(&BlobKey { actor: 1, id: 6 })
                .unwrap()
                .unwrap()
                .expires_at;
            assert!(expiry_of_6.is_some());

            for reverse in [false, true] {
                let mut scan = blobs_of(1).limit(2);
                if reverse {
                    scan = scan.reverse();
                }
                let mut seen = Vec::new();
                let mut pages = 0;
                loop {
                    let view = store.read().unwrap();
                    let mut it = view.scan::<BlobKey>(&scan).unwrap();
                    it.try_for_each_lent(|key, value| {
                        let len = lens[usize::try_from(key.id).unwrap()];
                        assert_eq!(value.body(), &blob(key.id, len)[..], "blob {}", key.id);
                        assert_eq!(value.decode().unwrap(), value.body());
                        assert_eq!(value.version(), 1);
                        let want_expiry = if key.id == 6 { expiry_of_6 } else { None };
                        assert_eq!(value.expires_at(), want_expiry, "blob {}", key.id);
                        seen.push(key.id);
                        Ok::<_, StoreError>(())
                    })
                    .unwrap();
                    pages += 1;
                    // The paging state is the iterator's: the same page
                    // read by the iterator says the same.
                    let page = store.scan::<BlobKey>(&scan).unwrap();
                    assert_eq!(it.more(), page.more);
                    assert_eq!(it.cursor(), page.cursor);
                    if !it.more() {
                        break;
                    }
                    scan = page.next(&scan).unwrap();
                }
                let mut want = vec![0, 1, 2, 3, 5, 6];
                if reverse {
                    want.reverse();
                }
                assert_eq!(seen, want, "reverse = {reverse}: blob 4 expired");
                assert_eq!(pages, 3, "reverse = {reverse}");
            }

            // Lent and decoded entries mix in one scan.
            let view = store.read().unwrap();
            let mut it = view.scan::<BlobKey>(&blobs_of(1)).unwrap();
            assert_eq!(it.next().unwrap().unwrap(), (BlobKey { actor: 1, id: 0 }, blob(0, 0)));
            let mut lent = Vec::new();
            let stopped = it.try_for_each_lent(|key, value| {
                lent.push((key.id, value.body().len()));
                if key.id == 3 { Err(Stop::Enough) } else { Ok(()) }
            });
            assert_eq!(stopped, Err(Stop::Enough));
            assert_eq!(lent, vec![(1, 10), (2, 300), (3, 2_500)]);
            assert_eq!(
                it.cursor().unwrap().key_bytes(),
                BlobKey { actor: 1, id: 3 }.pack().unwrap(),
                "after the entry the callback stopped on"
            );
            assert_eq!(it.next().unwrap().unwrap(), (BlobKey { actor: 1, id: 5 }, blob(5, 5_500)));
        });
    }
}

/// How a test's callback stops a lending scan.
#[derive(Debug, PartialEq)]
enum Stop {
    Enough,
    Store(String),
}

impl From<StoreError> for Stop {
    fn from(e: StoreError) -> Self {
        Self::Store(e.to_string())
    }
}

#[test]
fn a_lending_scan_refuses_what_its_iterator_refuses_before_the_callback_sees_it() {
    let (verified, _c) = common::mem(common::options(Limits::FOUNDATIONDB));
    let (unverified, _c2) =
        common::mem(common::options(Limits::FOUNDATIONDB).verify_checksums(false));
    for store in [&verified, &unverified] {
        let (data, _) = store.keyspaces();
        store
            .put(&BlobKey { actor: 1, id: 0 }, &blob(0, 8))
            .unwrap();
        let stored = |key: Vec<u8>| {
            use strata_engine::Snapshot;
            store
                .engine()
                .snapshot()
                .unwrap()
                .get(data, &key)
                .unwrap()
                .unwrap()
        };
        // Blob 1: a document's envelope (postcard, its checksum right)
        // under a blob's key.
        let mut doc_row = Vec::new();
        strata_codec::encode(
            &doc(1),
            &BlobKey { actor: 1, id: 1 }.pack().unwrap(),
            strata_codec::EncodeOptions::default(),
            &mut doc_row,
        )
        .unwrap();
        // Blob 2: blob 0's row copied under another key (the checksum
        // covers the key).
        let moved = stored(BlobKey { actor: 1, id: 0 }.pack().unwrap());
        store
            .engine()
            .commit(
                strata_engine::Commit::new()
                    .put(data, BlobKey { actor: 1, id: 1 }.pack().unwrap(), doc_row)
                    .put(data, BlobKey { actor: 1, id: 2 }.pack().unwrap(), moved),
            )
            .unwrap();
    }
    let lend = |store: &Store<strata_engine::MemEngine>, scan: &Scan| {
        let view = store.read().unwrap();
        let mut seen = Vec::new();
        let result = view
            .scan::<BlobKey>(scan)
            .unwrap()
            .try_for_each_lent(|key, value| {
                seen.push((key.id, value.body().to_vec()));
                Ok::<_, StoreError>(())
            });
        (seen, result)
    };
    for store in [&verified, &unverified] {
        let (seen, result) = lend(store, &blobs_of(1));
        assert_eq!(seen, vec![(0, blob(0, 8))]);
        let err = result.unwrap_err();
        assert!(
            matches!(
                err,
                StoreError::Decode {
                    key_type: "BlobKey",
                    source: strata_codec::DecodeError::WrongCodec { .. }
                }
            ),
            "{err:?}"
        );
    }
    let after_the_doc = blobs_of(1).after(strata_store::Cursor::after(
        BlobKey { actor: 1, id: 1 }.pack().unwrap(),
    ));
    let (seen, result) = lend(&verified, &after_the_doc);
    assert!(seen.is_empty());
    assert!(
        matches!(
            result,
            Err(StoreError::Decode {
                source: strata_codec::DecodeError::ChecksumMismatch { .. },
                ..
            })
        ),
        "{result:?}"
    );
    let (seen, result) = lend(&unverified, &after_the_doc);
    result.unwrap();
    assert_eq!(seen, vec![(2, blob(0, 8))], "unverified: lent as stored");
}

/// A label as first stored (schema version 1).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
struct LabelV1 {
    text: String,
}

/// A label now (version 2): read from version 1 through `From`.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
struct Label {
    text: String,
    pinned: bool,
}

impl From<LabelV1> for Label {
    fn from(old: LabelV1) -> Self {
        Self {
            text: old.text,
            pinned: false,
        }
    }
}

strata_codec::value!(LabelV1: json, version = 1);
strata_codec::value!(Label: json, version = 2, migrate { 1 => LabelV1 });

#[derive(Debug, Clone, PartialEq)]
struct LabelKey {
    id: u64,
}

strata_keys::tuple_key! {
    LabelKey -> Label = ("label", {id});
}

#[test]
fn a_lent_value_says_its_schema_version_and_decodes_through_the_migration() {
    let (store, _clock) = common::mem(common::options(Limits::FOUNDATIONDB));
    let (data, _) = store.keyspaces();
    let first = LabelKey { id: 1 }.pack().unwrap();
    let mut old = Vec::new();
    strata_codec::encode(
        &LabelV1 { text: "old".into() },
        &first,
        strata_codec::EncodeOptions::default(),
        &mut old,
    )
    .unwrap();
    store
        .engine()
        .commit(strata_engine::Commit::new().put(data, first, old))
        .unwrap();
    let new = Label {
        text: "new".into(),
        pinned: true,
    };
    store.put(&LabelKey { id: 2 }, &new).unwrap();

    let view = store.read().unwrap();
    let mut seen = Vec::new();
    let mut shown = Vec::new();
    view.scan::<LabelKey>(&Scan::range_of(KeyRange::tuple_prefix(&tuple::pack(&(
        "label",
    )))))
    .unwrap()
    .try_for_each_lent(|key, value| {
        shown.push(format!("{value:?}"));
        let body = String::from_utf8(value.body().to_vec()).unwrap();
        seen.push((key.id, value.version(), body, value.decode()?));
        Ok::<_, StoreError>(())
    })
    .unwrap();
    let migrated = Label {
        text: "old".into(),
        pinned: false,
    };
    assert_eq!(
        seen,
        vec![
            (1, 1, r#"{"text":"old"}"#.to_owned(), migrated),
            (2, 2, r#"{"text":"new","pinned":true}"#.to_owned(), new),
        ]
    );
    assert_eq!(
        shown[0],
        r#"LentValue { key_type: "LabelKey", version: 1, expires_at: None, body_len: 14, .. }"#
    );
}

#[test]
fn a_chunk_manifest_under_another_key_is_refused_by_its_checksum_even_unverified() {
    let limits = Limits {
        max_value_bytes: 500,
        ..Limits::FOUNDATIONDB
    };
    for verify in [true, false] {
        let (store, _clock) = common::mem(common::options(limits).verify_checksums(verify));
        let (data, _) = store.keyspaces();
        let (one, two) = (BlobKey { actor: 1, id: 1 }, BlobKey { actor: 1, id: 2 });
        store.put(&one, &blob(1, 2_000)).unwrap();
        store.put(&two, &blob(2, 2_000)).unwrap();
        let manifest = {
            use strata_engine::Snapshot;
            let snap = store.engine().snapshot().unwrap();
            snap.get(data, &one.pack().unwrap()).unwrap().unwrap()
        };
        store
            .engine()
            .commit(strata_engine::Commit::new().put(data, two.pack().unwrap(), manifest))
            .unwrap();
        let is_checksum = |e: &StoreError| {
            matches!(
                e,
                StoreError::Decode {
                    source: strata_codec::DecodeError::ChecksumMismatch { .. },
                    ..
                }
            )
        };
        let err = store.get(&two).unwrap_err();
        assert!(is_checksum(&err), "verify = {verify}: {err:?}");
        let view = store.read().unwrap();
        let mut seen = Vec::new();
        let err = view
            .scan::<BlobKey>(&blobs_of(1))
            .unwrap()
            .try_for_each_lent(|key, value| {
                seen.push((key.id, value.body().to_vec()));
                Ok::<_, StoreError>(())
            })
            .unwrap_err();
        assert!(is_checksum(&err), "verify = {verify}: {err:?}");
        assert_eq!(seen, vec![(1, blob(1, 2_000))]);
    }
}
