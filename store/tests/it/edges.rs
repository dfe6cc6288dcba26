//! Edges that mutation testing found untested: error messages, the bulk
//! writer's narrowing, retry backoff, commit notifications, catalog
//! profile names, the clock and durability a transaction uses.

use std::time::Duration;

use strata_codec::{Limit, LimitExceeded, Limits};
use strata_engine::{Clock, CommitError, Durability, Engine, Profile};
use strata_store::{LimitedRow, RetryPolicy, RowKind, StoreError, StoreOptions};
use strata_test_support::{Refusal, Refusing};

use strata_keys::Key;

use crate::common::{self, Doc, DocKey, T0};

fn doc(n: usize) -> Doc {
    Doc {
        title: String::new(),
        body: vec![7; n],
    }
}

#[test]
fn error_messages_show_keys_escaped_and_cut_with_their_length() {
    let row = |key: Vec<u8>| StoreError::Limit {
        source: LimitExceeded {
            limit: Limit::KeyBytes,
            size: 300,
            max: 256,
        },
        row: Some(LimitedRow {
            key_type: Some("DocKey"),
            kind: RowKind::Value,
            key,
        }),
    };
    // 48 bytes are shown whole; one more and the key is cut, with its
    // length. Bytes that are no tuple and no text are escaped.
    let short = row(b"a\x00".iter().copied().cycle().take(48).collect()).to_string();
    assert!(
        short.contains(&format!(
            "at key b\"{}\" breaks a limit",
            "a\\x00".repeat(24)
        )),
        "{short}"
    );
    let long = row(vec![b'z'; 49]).to_string();
    assert!(
        long.contains(&format!("at key \"{}\"… (49 bytes) breaks", "z".repeat(48))),
        "{long}"
    );
    // A tuple key reads as the tool prints it.
    let tuple = row(strata_keys::tuple::pack(&("doc", 7))).to_string();
    assert_eq!(
        tuple,
        r#"the value row of a write of DocKey at key ("doc", 7) breaks a limit; nothing was written"#
    );
    assert!(long.contains("of a write of DocKey"), "{long}");
    // The limit itself is the source, told once by the chain.
    let chain = strata_engine::ErrorChain(&row(b"k".to_vec())).to_string();
    assert_eq!(
        chain,
        "the value row of a write of DocKey at key \"k\" breaks a limit; nothing was written: \
         key size (bytes) limit exceeded: 300 > 256"
    );

    let quota = StoreError::Quota {
        scope: vec![1, 2],
        used: 10,
        requested: 5,
        limit: 12,
        key_type: None,
        key: b"n".to_vec(),
    };
    assert_eq!(
        quota.to_string(),
        "quota of scope b\"\\x01\\x02\" exceeded: 10 bytes used, 5 more requested, limit 12; first grown by a write of a counter at key \"n\""
    );
    let quota = StoreError::Quota {
        scope: vec![1, 2],
        used: 10,
        requested: 5,
        limit: 12,
        key_type: Some("DocKey"),
        key: b"n".to_vec(),
    };
    assert!(
        quota
            .to_string()
            .ends_with("first grown by a write of DocKey at key \"n\"")
    );

    let unknown = StoreError::Commit(CommitError::OutcomeUnknown("lost reply".into()));
    let failed = StoreError::Commit(CommitError::Backend("disk".into()));
    assert!(unknown.is_outcome_unknown() && !failed.is_outcome_unknown());
}

#[test]
fn a_key_error_names_its_key_type_once() {
    let (store, _clock) = common::mem(common::options(Limits::FOUNDATIONDB));
    // A text key whose field holds the literal after it does not pack;
    // the key error names the type, which the store's message does not
    // repeat.
    let key = crate::families::VerMeta {
        function: "a:ver:b".into(),
        version: 1,
    };
    let err = store.put(&key, &doc(1)).unwrap_err();
    let text = strata_engine::ErrorChain(&err).to_string();
    assert!(
        matches!(
            err,
            StoreError::Key {
                key_type: "VerMeta",
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(text.matches("VerMeta").count(), 1, "{text}");
    assert!(text.contains("field `function`"), "{text}");
}

#[test]
fn the_bulk_writer_narrows_its_commits_to_fit_the_batch_limit() {
    // Ten documents of about 230 bytes; a commit may hold 1,000 bytes: the
    // writer tries 16 entries, then 8, then 4, and writes 4 + 4 + 2.
    let limits = Limits {
        max_batch_entries: 16,
        max_batch_bytes: 1_000,
        ..Limits::FOUNDATIONDB
    };
    let (store, _clock) = common::mem(common::options(limits));
    let mut bulk = store.bulk_non_atomic();
    assert!(bulk.is_empty());
    for id in 0..10 {
        bulk.put(&DocKey { actor: 1, id }, &doc(200)).unwrap();
    }
    assert_eq!(bulk.len(), 10);
    assert!(!bulk.is_empty());
    let report = bulk.apply().unwrap();
    assert_eq!((report.entries, report.commits), (10, 3));
    for id in 0..10 {
        assert!(store.get(&DocKey { actor: 1, id }).unwrap().is_some());
    }
    // One entry alone over the batch limit is refused, not retried forever.
    let mut one = store.bulk_non_atomic();
    one.put(&DocKey { actor: 2, id: 0 }, &doc(2_000)).unwrap();
    let err = one.apply().unwrap_err();
    assert_eq!(err.cursor.next, 0);
    assert!(
        matches!(&err.source, StoreError::Limit { source, row: None } if source.limit == Limit::BatchBytes),
        "{err:?}"
    );
}

#[test]
fn retries_wait_within_the_backoff_bounds() {
    let retry = RetryPolicy {
        max_attempts: 6,
        base_backoff_ms: 100,
        max_backoff_ms: 1_000,
    };
    let options = common::options(Limits::FOUNDATIONDB).retry(retry);
    let (store, _clock) = common::mem(options);
    let key = DocKey { actor: 1, id: 1 };
    store.put(&key, &doc(1)).unwrap();
    let mut seen = Vec::new();
    store
        .transact(|tx| {
            seen.push(tx.now_ms());
            tx.get(&key)?;
            if seen.len() < 6 {
                // Another writer changes what this transaction read.
                store.put(&key, &doc(100 + seen.len())).unwrap();
            }
            tx.put(&DocKey { actor: 1, id: 2 }, &doc(1))
        })
        .unwrap();
    assert_eq!(seen.len(), 6);
    assert_eq!(seen[0], T0);
    // After failed attempt n the wait lies in [c / 2, c], with c = 100 ms
    // doubled n - 1 times, at most 1,000 ms.
    for (n, pair) in seen.windows(2).enumerate() {
        let ceiling = (100u64 << n).min(1_000);
        let wait = pair[1] - pair[0];
        assert!(
            (ceiling / 2..=ceiling).contains(&wait),
            "wait {wait} after attempt {} (ceiling {ceiling})",
            n + 1
        );
    }
}

#[test]
fn commits_wake_waiters_and_are_counted() {
    let (owned, _clock) = common::mem(common::options(Limits::FOUNDATIONDB));
    let store = &owned;
    assert_eq!(store.last_commit_seen(), 0);
    // Nothing new: the wait times out with the last version seen.
    assert_eq!(store.wait_for_commit(0, Duration::from_millis(10)), 0);
    let v = store
        .put(&DocKey { actor: 1, id: 1 }, &doc(1))
        .unwrap()
        .version;
    assert_eq!(store.last_commit_seen(), v);
    // A commit already past `after` returns at once.
    assert_eq!(store.wait_for_commit(v - 1, Duration::from_mins(1)), v);
    std::thread::scope(|s| {
        // A wait far longer than the test may take: only the commit's wake
        // ends it in time (at least 30 s of 1 ms naps are allowed).
        let waiter = s.spawn(move || store.wait_for_commit(v, Duration::from_hours(1)));
        std::thread::sleep(Duration::from_millis(20));
        let w = store
            .put(&DocKey { actor: 1, id: 2 }, &doc(1))
            .unwrap()
            .version;
        let mut naps = 0;
        while !waiter.is_finished() && naps < 30_000 {
            std::thread::sleep(Duration::from_millis(1));
            naps += 1;
        }
        let woken = waiter.is_finished();
        store.wake_all(); // so that a failure below does not hang the scope
        assert!(woken, "the commit did not wake the waiter");
        assert_eq!(waiter.join().unwrap(), w, "woken by the commit");
    });
    // `wake_all` releases a waiter with no new commit.
    std::thread::scope(|s| {
        let last = store.last_commit_seen();
        let waiter = s.spawn(move || store.wait_for_commit(last, Duration::from_hours(1)));
        let mut naps = 0;
        while !waiter.is_finished() && naps < 6_000 {
            store.wake_all();
            std::thread::sleep(Duration::from_millis(5));
            naps += 1;
        }
        let woken = waiter.is_finished();
        if !woken {
            // Released by a commit instead, so that the scope ends.
            store.put(&DocKey { actor: 1, id: 3 }, &doc(1)).unwrap();
        }
        assert!(woken, "wake_all did not release the waiter");
        assert_eq!(waiter.join().unwrap(), last);
    });
}

#[test]
fn the_catalog_names_every_profile() {
    let options = StoreOptions::new(Limits::FOUNDATIONDB)
        .space("p", Profile::PointLookup)
        .space("a", Profile::AppendOnly)
        .space("q", Profile::Queue)
        .space("g", Profile::General);
    let (store, _clock) = common::mem(options);
    store.publish_catalog().unwrap();
    let mut profiles: Vec<(String, String)> = store
        .catalog()
        .unwrap()
        .into_iter()
        .filter(|e| ["p", "a", "q", "g"].contains(&e.name.as_str()))
        .map(|e| {
            let (role, profile) =
                strata_keys::tuple::unpack::<(String, String)>(&e.detail).unwrap();
            assert_eq!(role, "space");
            (e.name, profile)
        })
        .collect();
    profiles.sort();
    assert_eq!(
        profiles,
        [
            ("a".into(), "append-only".into()),
            ("g".into(), "general".into()),
            ("p".into(), "point-lookup".into()),
            ("q".into(), "queue".into()),
        ]
    );
}

#[test]
fn a_transaction_uses_the_store_clock_and_its_own_durability() {
    let options = common::options(Limits::FOUNDATIONDB).durability(Durability::Buffered);
    assert!(format!("{options:?}").contains("durability: Buffered"));
    let (store, clock) = common::mem(options);
    assert!(format!("{store:?}").starts_with("Store"));
    assert!(format!("{:?}", store.options()).contains("durability: Buffered"));
    clock.advance(5);
    let view = store.read().unwrap();
    assert_eq!(view.now_ms(), T0 + 5);
    assert_eq!(view.version().unwrap(), store.engine().last_version());
    drop(view);
    // The store's default is buffered: not durable on return...
    let v = store
        .put(&DocKey { actor: 1, id: 1 }, &doc(1))
        .unwrap()
        .version;
    assert!(store.engine().durable_version() < v);
    // ...unless the transaction asks.
    let info = store
        .transact_info(|tx| {
            assert_eq!(tx.now_ms(), T0 + 5);
            tx.set_durability(Durability::Immediate);
            tx.put(&DocKey { actor: 1, id: 2 }, &doc(1))
        })
        .unwrap()
        .1
        .unwrap();
    assert!(store.engine().durable_version() >= info.version);
    let view = store.read().unwrap();
    assert_eq!(view.version().unwrap(), info.version);
}

/// A store whose engine refuses its next commits on request (conflicts,
/// as a concurrent writer would make them fail).
fn conflicting(
    options: StoreOptions,
) -> (
    strata_store::Store<Refusing<strata_engine::MemEngine>>,
    std::sync::Arc<strata_engine::ManualClock>,
) {
    let engine = Refusing::new(strata_engine::MemEngine::open(options.keyspace_specs()).unwrap());
    common::store_on(engine, options)
}

const THREE_TRIES: RetryPolicy = RetryPolicy {
    max_attempts: 3,
    base_backoff_ms: 10,
    max_backoff_ms: 10,
};

#[test]
fn the_bulk_writer_and_the_sweeper_retry_conflicts_then_give_up() {
    let options = common::options(Limits::FOUNDATIONDB).retry(THREE_TRIES);
    let (store, clock) = conflicting(options);
    let mut bulk = store.bulk_non_atomic();
    for id in 0..3 {
        bulk.put_with_ttl(&DocKey { actor: 1, id }, &doc(1), 100)
            .unwrap();
    }
    // Two conflicts, then success: each retry waits 5 to 10 ms.
    store.engine().refuse_next(2, Refusal::Conflict);
    let before = clock.now_ms();
    let report = bulk.apply().unwrap();
    assert_eq!((report.entries, report.commits), (3, 1));
    let waited = clock.now_ms() - before;
    assert!((10..=20).contains(&waited), "waited {waited}");
    // Three conflicts: given up after the third attempt, nothing written.
    let mut more = store.bulk_non_atomic();
    more.put(&DocKey { actor: 1, id: 9 }, &doc(1)).unwrap();
    store.engine().refuse_next(3, Refusal::Conflict);
    let err = more.apply().unwrap_err();
    assert_eq!(err.cursor.next, 0);
    assert!(
        matches!(err.source, StoreError::RetriesExhausted { attempts: 3, .. }),
        "{err:?}"
    );
    assert!(store.get(&DocKey { actor: 1, id: 9 }).unwrap().is_none());

    // The sweeper likewise.
    clock.advance(1_000);
    store.engine().refuse_next(2, Refusal::Conflict);
    let swept = store.sweep_expired(None).unwrap();
    assert_eq!((swept.removed, swept.stale, swept.commits), (3, 0, 1));
    store
        .put_with_ttl(&DocKey { actor: 1, id: 5 }, &doc(1), 1)
        .unwrap();
    clock.advance(10);
    store.engine().refuse_next(3, Refusal::Conflict);
    assert!(matches!(
        store.sweep_expired(None),
        Err(StoreError::RetriesExhausted { attempts: 3, .. })
    ));
    assert_eq!(store.sweep_expired(None).unwrap().removed, 1);
}

#[test]
fn the_sweeper_counts_what_it_removes_in_commits_of_the_batch_size() {
    // Five expired documents, four entries a commit: two commits.
    let limits = Limits {
        max_batch_entries: 4,
        ..Limits::FOUNDATIONDB
    };
    let (store, clock) = common::mem(common::options(limits));
    for id in 0..5 {
        store
            .put_with_ttl(&DocKey { actor: 1, id }, &doc(1), 10)
            .unwrap();
    }
    // One more whose expiry is cleared by a plain put: not swept.
    store
        .put_with_ttl(&DocKey { actor: 1, id: 7 }, &doc(1), 10)
        .unwrap();
    store.put(&DocKey { actor: 1, id: 7 }, &doc(2)).unwrap();
    clock.advance(20);
    let report = store.sweep_expired(None).unwrap();
    assert_eq!(
        (report.removed, report.stale, report.commits),
        (5, 0, 2),
        "{report:?}"
    );
    assert!(store.get(&DocKey { actor: 1, id: 7 }).unwrap().is_some());
    common::assert_quota_exact(&store);
}

#[test]
fn the_quota_audit_reports_each_scope() {
    let (store, _clock) = common::mem(common::options(Limits::FOUNDATIONDB));
    store.put(&DocKey { actor: 1, id: 0 }, &doc(10)).unwrap();
    store.put(&DocKey { actor: 1, id: 1 }, &doc(20)).unwrap();
    store.put(&DocKey { actor: 2, id: 0 }, &doc(5)).unwrap();
    let audit = store.audit_quota().unwrap();
    assert_eq!(
        audit.keys().cloned().collect::<Vec<_>>(),
        [common::scope(1), common::scope(2)]
    );
    for usage in audit.values() {
        assert_eq!(usage.counted, i64::try_from(usage.actual).unwrap());
    }
    // Ten more body bytes in scope 1 than in scope 2's one row, plus a
    // second row: scope 1 holds more.
    assert!(audit[&common::scope(1)].actual > 2 * audit[&common::scope(2)].actual);
}

#[test]
fn a_blind_put_reads_nothing_and_cannot_conflict() {
    // A put of a plain key (not chunked, no quota scope) is blind: another
    // writer changing the same key meanwhile is no conflict, and the
    // transaction runs once.
    let (store, _clock) = common::mem(StoreOptions::new(Limits::FOUNDATIONDB));
    let key = DocKey { actor: 1, id: 1 };
    store.put(&key, &doc(1)).unwrap();
    let mut runs = 0;
    store
        .transact(|tx| {
            runs += 1;
            tx.put(&key, &doc(2))?;
            if runs == 1 {
                store.put(&key, &doc(3)).unwrap();
            }
            Ok::<_, StoreError>(())
        })
        .unwrap();
    assert_eq!(runs, 1);
    assert_eq!(store.get(&key).unwrap(), Some(doc(2)));
}

/// A plain (not chunked) byte value: `("raw", id)`.
#[derive(Debug, Clone, PartialEq)]
struct RawKey {
    id: u64,
}

/// Another type in an actor's scope, sorting after its documents.
#[derive(Debug, Clone, PartialEq)]
struct Later {
    actor: u64,
}
strata_keys::tuple_key! {
    RawKey -> Vec<u8> = ("raw", {id});
    Later -> Vec<u8> = (common::ACTOR, {actor}, "zzz");
}

#[test]
fn a_value_exactly_at_the_value_limit_fits() {
    let limits = Limits {
        max_value_bytes: 200,
        ..Limits::FOUNDATIONDB
    };
    let (store, _clock) = common::mem(StoreOptions::new(limits));
    // The refusal says how large the envelope is: the header's overhead.
    let Err(StoreError::ValueTooLarge { size, max, .. }) =
        store.put(&RawKey { id: 1 }, &vec![0; 300])
    else {
        panic!("300 bytes do not fit in 200")
    };
    assert_eq!(max, 200);
    let overhead = usize::try_from(size).unwrap() - 300;
    let at_limit = 200 - overhead;
    store.put(&RawKey { id: 1 }, &vec![1; at_limit]).unwrap();
    assert_eq!(
        store.get(&RawKey { id: 1 }).unwrap(),
        Some(vec![1; at_limit])
    );
    assert!(matches!(
        store.put(&RawKey { id: 2 }, &vec![1; at_limit + 1]),
        Err(StoreError::ValueTooLarge { size: 201, .. })
    ));
}

#[test]
fn the_quota_error_names_the_first_write_that_grew_the_scope() {
    let limits = Limits {
        quota_bytes: 1_000,
        ..Limits::FOUNDATIONDB
    };
    let (store, _clock) = common::mem(common::options(limits));
    store.put(&DocKey { actor: 1, id: 1 }, &doc(100)).unwrap();
    let err = store
        .transact(|tx| {
            // Same size: does not grow the scope.
            tx.put(&DocKey { actor: 1, id: 1 }, &doc(100))?;
            // These do.
            tx.put(&DocKey { actor: 1, id: 2 }, &doc(900))?;
            tx.put(&DocKey { actor: 1, id: 3 }, &doc(10))
        })
        .unwrap_err();
    match err {
        StoreError::Quota { key_type, key, .. } => {
            assert_eq!(key_type, Some("DocKey"));
            assert_eq!(key, DocKey { actor: 1, id: 2 }.pack().unwrap());
        }
        other => panic!("expected a quota refusal, got {other:?}"),
    }
}

#[test]
fn a_scope_over_a_lowered_quota_still_takes_writes_that_do_not_grow_it() {
    let engine =
        strata_engine::MemEngine::open(common::options(Limits::FOUNDATIONDB).keyspace_specs())
            .unwrap();
    {
        let (store, _clock) = common::store_on(&engine, common::options(Limits::FOUNDATIONDB));
        store.put(&DocKey { actor: 1, id: 1 }, &doc(500)).unwrap();
    }
    let lowered = Limits {
        quota_bytes: 100,
        ..Limits::FOUNDATIONDB
    };
    let (store, _clock) = common::store_on(&engine, common::options(lowered));
    // Same size, then smaller: the scope does not grow; allowed.
    store.put(&DocKey { actor: 1, id: 1 }, &doc(500)).unwrap();
    store.put(&DocKey { actor: 1, id: 1 }, &doc(400)).unwrap();
    // Growing is refused.
    assert!(matches!(
        store.put(&DocKey { actor: 1, id: 2 }, &doc(1)),
        Err(StoreError::Quota { .. })
    ));
    common::assert_quota_exact(&store);
}

#[test]
fn more_means_a_live_row_of_the_type_beyond_the_limit() {
    let (store, clock) = common::mem(common::options(Limits::FOUNDATIONDB));
    store.put(&DocKey { actor: 1, id: 1 }, &doc(1)).unwrap();
    store.put(&DocKey { actor: 1, id: 2 }, &doc(1)).unwrap();
    store
        .put_with_ttl(&DocKey { actor: 1, id: 3 }, &doc(1), 10)
        .unwrap();
    clock.advance(20);
    let view = store.read().unwrap();
    let scan = strata_store::Scan::prefix(&common::scope(1)).limit(2);
    let page = view.scan_page::<DocKey>(&scan).unwrap();
    assert_eq!(page.items.len(), 2);
    assert!(!page.more, "the row after the limit has expired");
    drop(view);
    // A row of another type after the limit: more only when such rows are
    // not skipped.
    store.put(&Later { actor: 1 }, &Vec::new()).unwrap();
    let view = store.read().unwrap();
    let skipping = view
        .scan_page::<DocKey>(&scan.clone().skip_other_types())
        .unwrap();
    assert!(!skipping.more);
    let strict = view.scan_page::<DocKey>(&scan).unwrap();
    assert!(
        strict.more,
        "an unread row of another type is something more"
    );
}

#[test]
fn a_transaction_scans_in_both_directions() {
    let (store, _clock) = common::mem(common::options(Limits::FOUNDATIONDB));
    for id in 1..=3 {
        store.put(&DocKey { actor: 1, id }, &doc(1)).unwrap();
    }
    let scan = strata_store::Scan::prefix(&common::scope(1));
    let ids = |reverse: bool| {
        let s = if reverse {
            scan.clone().reverse()
        } else {
            scan.clone()
        };
        store
            .transact(|tx| tx.scan::<DocKey>(&s))
            .unwrap()
            .items
            .iter()
            .map(|(k, _)| k.id)
            .collect::<Vec<_>>()
    };
    assert_eq!(ids(false), [1, 2, 3]);
    assert_eq!(ids(true), [3, 2, 1]);
}

#[test]
fn a_missing_chunk_is_named_by_its_index() {
    let limits = Limits {
        max_value_bytes: 100,
        ..Limits::FOUNDATIONDB
    };
    let (store, _clock) = common::mem(common::options(limits));
    let key = common::BlobKey { actor: 1, id: 1 };
    store.put(&key, &vec![9; 350]).unwrap();
    // Chunk rows sit in the system keyspace at `("c", key, index)`.
    let (_, system) = store.keyspaces();
    let second = strata_keys::tuple::pack(&("c", key.pack().unwrap(), 1u32));
    store
        .engine()
        .commit(strata_engine::Commit::new().delete(system, second))
        .unwrap();
    match store.get(&key) {
        Err(StoreError::Chunk { source, .. }) => assert!(
            matches!(source, strata_codec::ChunkError::MissingChunk { index: 1 }),
            "{source:?}"
        ),
        other => panic!("expected a chunk error, got {other:?}"),
    }
}

#[test]
fn a_transaction_scan_merges_its_own_writes_in_both_directions() {
    let (store, _clock) = common::mem(common::options(Limits::FOUNDATIONDB));
    for id in [1, 3, 5] {
        store.put(&DocKey { actor: 1, id }, &doc(1)).unwrap();
    }
    let scan = strata_store::Scan::prefix(&common::scope(1));
    let ids = |s: strata_store::Scan| {
        store
            .transact(|tx| {
                tx.put(&DocKey { actor: 1, id: 2 }, &doc(2))?;
                tx.put(&DocKey { actor: 1, id: 4 }, &doc(2))?;
                tx.scan::<DocKey>(&s)
            })
            .unwrap()
            .items
            .iter()
            .map(|(k, _)| k.id)
            .collect::<Vec<_>>()
    };
    assert_eq!(ids(scan.clone()), [1, 2, 3, 4, 5]);
    assert_eq!(ids(scan.clone().reverse()), [5, 4, 3, 2, 1]);
    // A pending write of another type: an error, skipped with
    // `skip_other_types`, and at the limit something more.
    let later = |tx: &mut strata_store::Tx<'_, _>| tx.put(&Later { actor: 1 }, &Vec::new());
    let err = store
        .transact(|tx| {
            later(tx)?;
            tx.scan::<DocKey>(&scan)
        })
        .unwrap_err();
    assert!(matches!(err, StoreError::Key { .. }), "{err:?}");
    let page = store
        .transact(|tx| {
            later(tx)?;
            tx.scan::<DocKey>(&scan.clone().skip_other_types())
        })
        .unwrap();
    // The two documents the first transactions added are stored now.
    assert_eq!((page.items.len(), page.skipped, page.more), (5, 1, false));
    let page = store
        .transact(|tx| {
            later(tx)?;
            tx.scan::<DocKey>(&scan.clone().limit(5))
        })
        .unwrap();
    assert_eq!((page.items.len(), page.more), (5, true));
}

#[test]
fn a_transaction_scan_says_more_only_for_a_live_row_of_its_type() {
    let (store, clock) = common::mem(common::options(Limits::FOUNDATIONDB));
    store.put(&DocKey { actor: 1, id: 1 }, &doc(1)).unwrap();
    store
        .put_with_ttl(&DocKey { actor: 1, id: 2 }, &doc(1), 10)
        .unwrap();
    clock.advance(20);
    let scan = strata_store::Scan::prefix(&common::scope(1)).limit(1);
    let page = store.transact(|tx| tx.scan::<DocKey>(&scan)).unwrap();
    assert_eq!((page.items.len(), page.more), (1, false));
    store.put(&Later { actor: 1 }, &Vec::new()).unwrap();
    let page = store
        .transact(|tx| tx.scan::<DocKey>(&scan.clone().skip_other_types()))
        .unwrap();
    assert_eq!((page.items.len(), page.more), (1, false));
    // Not skipped, the row of another type is something more.
    let page = store.transact(|tx| tx.scan::<DocKey>(&scan)).unwrap();
    assert_eq!((page.items.len(), page.more), (1, true));
}

#[test]
fn a_write_that_does_not_grow_its_scope_does_not_pin_the_quota() {
    // An overwrite of the same size leaves the scope's usage as it is: a
    // concurrent charge to the scope is no conflict for it.
    let (store, _clock) = common::mem(common::options(Limits::FOUNDATIONDB));
    store.put(&DocKey { actor: 1, id: 1 }, &doc(10)).unwrap();
    let mut runs = 0;
    store
        .transact(|tx| {
            runs += 1;
            // A first read fixes the transaction's snapshot before the
            // concurrent charge.
            tx.get(&DocKey { actor: 3, id: 0 })?;
            tx.put(&DocKey { actor: 1, id: 1 }, &doc(10))?;
            if runs == 1 {
                store.put(&DocKey { actor: 1, id: 2 }, &doc(50)).unwrap();
            }
            Ok::<_, StoreError>(())
        })
        .unwrap();
    assert_eq!(runs, 1);
    common::assert_quota_exact(&store);
}

/// Runs `scan` in a transaction while another writer puts `id` between the
/// scan and the commit; returns how many times the transaction ran.
fn runs_with_concurrent_put(
    store: &strata_store::Store<strata_engine::MemEngine>,
    scan: &strata_store::Scan,
    id: u64,
) -> u32 {
    let mut runs = 0;
    store
        .transact(|tx| {
            runs += 1;
            tx.scan::<DocKey>(scan)?;
            if runs == 1 {
                store.put(&DocKey { actor: 1, id }, &doc(9)).unwrap();
            }
            tx.put(&DocKey { actor: 2, id: 0 }, &doc(1))
        })
        .unwrap();
    runs
}

#[test]
fn a_limited_scan_conflicts_only_with_writes_in_what_it_examined() {
    for (reverse, outside, inside) in [(false, 9, 0), (true, 0, 9)] {
        let (store, _clock) = common::mem(common::options(Limits::FOUNDATIONDB));
        for id in 1..=5 {
            store.put(&DocKey { actor: 1, id }, &doc(1)).unwrap();
        }
        let mut scan = strata_store::Scan::prefix(&common::scope(1)).limit(2);
        if reverse {
            scan = scan.reverse();
        }
        // Forward, the scan examined 1..=3: a new 9 is beyond it, a new 0
        // is within. Reverse, the other way round.
        assert_eq!(
            runs_with_concurrent_put(&store, &scan, outside),
            1,
            "reverse {reverse}"
        );
        assert_eq!(
            runs_with_concurrent_put(&store, &scan, inside),
            2,
            "reverse {reverse}"
        );
    }
}

#[test]
fn a_limited_space_scan_conflicts_only_with_writes_in_what_it_examined() {
    let options = StoreOptions::new(Limits::FOUNDATIONDB).space("s", Profile::General);
    let (store, _clock) = common::mem(options);
    let space = store.space("s").unwrap();
    let key = |n: u8| vec![b'k', n];
    store
        .transact(|tx| {
            for n in 1..=5 {
                tx.put_in(&space, key(n), vec![n])?;
            }
            Ok::<_, StoreError>(())
        })
        .unwrap();
    let all = strata_keys::KeyRange::prefix(b"k");
    for (reverse, outside, inside) in [(false, 9, 0), (true, 0, 9)] {
        for (id, want) in [(outside, 1), (inside, 2)] {
            let mut runs = 0;
            store
                .transact(|tx| {
                    runs += 1;
                    let page = tx.scan_in(&space, &all, Some(2), reverse)?;
                    assert!(page.more);
                    if runs == 1 {
                        store
                            .transact(|other| other.put_in(&space, key(id), vec![id]))
                            .unwrap();
                    }
                    tx.put_in(&space, b"other".to_vec(), Vec::new())
                })
                .unwrap();
            assert_eq!(runs, want, "reverse {reverse}, new key {id}");
            store.transact(|tx| tx.delete_in(&space, key(id))).unwrap();
        }
    }
    // A snapshot read of a space row.
    let got = store
        .transact(|tx| tx.snapshot_get_in(&space, &key(3)))
        .unwrap();
    assert_eq!(got, Some(vec![3]));
}

#[test]
fn a_versionstamp_may_end_the_key_and_a_stamped_value_may_fill_the_limit() {
    let options = StoreOptions::new(Limits::FOUNDATIONDB).space("s", Profile::Queue);
    let (store, _clock) = common::mem(options);
    let space = store.space("s").unwrap();
    // The ten stamp bytes are the whole key.
    store
        .transact(|tx| tx.put_versionstamped_in(&space, vec![0; 10], 0, b"v".to_vec()))
        .unwrap();
    assert!(matches!(
        store.transact(|tx| tx.put_versionstamped_in(&space, vec![0; 10], 1, Vec::new())),
        Err(StoreError::BadStampOffset { offset: 1, len: 10 })
    ));
    // A typed stamped value exactly at the value limit fits.
    let limits = Limits {
        max_value_bytes: 100,
        ..Limits::FOUNDATIONDB
    };
    let (store, _clock) = common::mem(common::options(limits));
    let event = common::EventKey {
        stamp: strata_keys::tuple::Versionstamp::incomplete(0),
    };
    let Err(StoreError::ValueTooLarge { size, .. }) =
        store.transact(|tx| tx.put_versionstamped(&event, &"x".repeat(200)))
    else {
        panic!("200 bytes do not fit in 100")
    };
    let at_limit = 100 - (usize::try_from(size).unwrap() - 200);
    store
        .transact(|tx| tx.put_versionstamped(&event, &"x".repeat(at_limit)))
        .unwrap();
    assert!(matches!(
        store.transact(|tx| tx.put_versionstamped(&event, &"x".repeat(at_limit + 1))),
        Err(StoreError::ValueTooLarge { size: 101, .. })
    ));
}

#[test]
fn index_entries_left_by_blind_writes_are_swept_as_stale() {
    // Without a quota scope, a plain key's writes are blind (nothing read),
    // so the expiry entry of the value they replace stays behind: the
    // sweeper removes it, and not the value that replaced it.
    let (store, clock) = common::mem(StoreOptions::new(Limits::FOUNDATIONDB));
    store
        .put_with_ttl(&RawKey { id: 1 }, &b"old".to_vec(), 10)
        .unwrap();
    store
        .put_with_ttl(&RawKey { id: 1 }, &b"new".to_vec(), 1_000)
        .unwrap();
    store
        .put_with_ttl(&RawKey { id: 2 }, &b"gone".to_vec(), 10)
        .unwrap();
    store.delete(&RawKey { id: 2 }).unwrap();
    store
        .transact(|tx| tx.put_expiring_at(&RawKey { id: 3 }, &b"at".to_vec(), T0 + 15))
        .unwrap();
    clock.advance(20);
    let report = store.sweep_expired(None).unwrap();
    assert_eq!((report.removed, report.stale), (1, 2), "{report:?}");
    assert_eq!(store.get(&RawKey { id: 1 }).unwrap(), Some(b"new".to_vec()));
    assert_eq!(store.get(&RawKey { id: 3 }).unwrap(), None);
    // Nothing left to sweep.
    assert_eq!(
        store.sweep_expired(None).unwrap(),
        strata_store::SweepReport::default()
    );
}

#[test]
fn a_sweep_that_cannot_fit_one_removal_is_refused_not_narrowed_forever() {
    let engine =
        strata_engine::MemEngine::open(StoreOptions::new(Limits::FOUNDATIONDB).keyspace_specs())
            .unwrap();
    let long = RawKey { id: u64::MAX };
    {
        let (store, clock) = common::store_on(&engine, StoreOptions::new(Limits::FOUNDATIONDB));
        store.put_with_ttl(&long, &b"v".to_vec(), 10).unwrap();
        clock.advance(20);
    }
    // Reopened with a batch smaller than one removal.
    let tiny = Limits {
        max_batch_bytes: 8,
        ..Limits::FOUNDATIONDB
    };
    let (store, clock) = common::store_on(&engine, StoreOptions::new(tiny));
    clock.advance(20);
    assert!(matches!(
        store.sweep_expired(None),
        Err(StoreError::Limit { row: None, .. })
    ));
}
