//! Time to live: expiry on read, the expiry index, the sweeper.

use strata_codec::Limits;
use strata_engine::Clock;
use strata_store::Scan;

use crate::common::{self, BlobKey, Doc, DocKey};
use crate::engine_tests;
use crate::on_every_engine;

fn doc(i: u8) -> Doc {
    Doc {
        title: format!("{i}"),
        body: vec![i; 8],
    }
}

engine_tests! {
    fn expired_values_read_as_absent_at_the_clock_reading() {
        on_every_engine!(common::options(Limits::FOUNDATIONDB), |store, clock| {
            let k = DocKey { actor: 1, id: 1 };
            store.put_with_ttl(&k, &doc(1), 1_000).unwrap();
            clock.advance(999);
            assert_eq!(store.get(&k).unwrap(), Some(doc(1)));
            let scan = Scan::all();
            assert_eq!(store.scan::<DocKey>(&scan).unwrap().items.len(), 1);
            clock.advance(1);
            assert_eq!(store.get(&k).unwrap(), None, "expired from expires_at on");
            assert!(store.scan::<DocKey>(&scan).unwrap().items.is_empty());
            // A transaction sees it absent too, and may write over it.
            let wrote = store.transact(|tx| tx.put_if_absent(&k, &doc(2))).unwrap();
            assert!(wrote);
            assert_eq!(store.get(&k).unwrap(), Some(doc(2)));
            common::assert_quota_exact(&store);
        });
    }
}

engine_tests! {
    fn the_sweeper_removes_expired_values_with_their_chunks_index_and_quota() {
        let limits = Limits {
            max_value_bytes: 200,
            max_batch_entries: 8,
            ..Limits::FOUNDATIONDB
        };
        on_every_engine!(common::options(limits), |store, clock| {
            for id in 0..20 {
                store
                    .put_with_ttl(&DocKey { actor: 1, id }, &doc(1), 1_000 + id * 10)
                    .unwrap();
            }
            store
                .put_with_ttl(&BlobKey { actor: 1, id: 1 }, &vec![4; 700], 500)
                .unwrap();
            store.put(&DocKey { actor: 1, id: 100 }, &doc(9)).unwrap();
            // Overwritten without a TTL: its index entry is stale.
            store
                .put_with_ttl(&DocKey { actor: 1, id: 101 }, &doc(9), 10)
                .unwrap();
            store.put(&DocKey { actor: 1, id: 101 }, &doc(9)).unwrap();
            assert_eq!(
                common::system_rows_tagged(&store, "x"),
                21,
                "the overwrite removed its entry"
            );
            assert!(common::system_rows_tagged(&store, "c") > 0);

            // Nothing has expired yet.
            let report = store.sweep_expired(None).unwrap();
            assert_eq!((report.removed, report.commits), (0, 0));

            clock.advance(1_095); // the blob and ids 0..=9 have expired
            let report = store.sweep_expired(None).unwrap();
            assert_eq!(report.removed, 11);
            assert_eq!(report.resume, None);
            assert!(report.commits >= 2, "limit-respecting batches: {report:?}");
            assert_eq!(
                common::system_rows_tagged(&store, "c"),
                0,
                "the blob's chunks are gone"
            );
            assert_eq!(common::system_rows_tagged(&store, "x"), 10);
            common::assert_quota_exact(&store);

            // With a commit budget the sweep stops and resumes.
            clock.advance(1_000);
            let first = store.sweep_expired(Some(1)).unwrap();
            assert_eq!(first.commits, 1);
            let cursor = first.resume.clone().expect("stopped by the budget");
            let rest = store.sweep_from(Some(cursor), None).unwrap();
            assert_eq!(first.removed + rest.removed, 10);
            assert_eq!(common::system_rows_tagged(&store, "x"), 0);
            assert_eq!(
                store.get(&DocKey { actor: 1, id: 100 }).unwrap(),
                Some(doc(9))
            );
            assert_eq!(
                store.get(&DocKey { actor: 1, id: 101 }).unwrap(),
                Some(doc(9))
            );
            common::assert_quota_exact(&store);
            let usage = store.quota_usage(&common::scope(1)).unwrap();
            assert!(usage > 0);
        });
    }
}

engine_tests! {
    fn a_value_rewritten_before_the_sweep_is_kept() {
        on_every_engine!(common::options(Limits::FOUNDATIONDB), |store, clock| {
            let k = DocKey { actor: 1, id: 1 };
            store.put_with_ttl(&k, &doc(1), 100).unwrap();
            // Rewritten with a later expiry: the old entry goes, a new one comes.
            store.put_with_ttl(&k, &doc(2), 10_000).unwrap();
            assert_eq!(common::system_rows_tagged(&store, "x"), 1);
            clock.advance(200);
            let report = store.sweep_expired(None).unwrap();
            assert_eq!(report.removed, 0);
            assert_eq!(store.get(&k).unwrap(), Some(doc(2)));
        });
    }
}

engine_tests! {
    /// Each replacing write says what happens to the expiry, and does it: a
    /// plain put clears it, `Keep` and compare-and-set keep it (the activation
    /// of the code-sous seed, created with a 7-day TTL and finished by
    /// compare-and-set, still expires), `At` and `After` set it; reads return it.
    fn replacing_writes_do_what_they_say_with_the_expiry() {
        use strata_store::{Expiring, Expiry};

        const DAY: u64 = 86_400_000;
        on_every_engine!(common::options(Limits::FOUNDATIONDB), |store, clock| {
            let t0 = clock.now_ms();
            let k = DocKey { actor: 1, id: 1 };
            store.put_with_ttl(&k, &doc(1), 7 * DAY).unwrap();
            let at = t0 + 7 * DAY;
            assert_eq!(
                store.get_with_expiry(&k).unwrap(),
                Some(Expiring {
                    value: doc(1),
                    expires_at: Some(at)
                })
            );
            // Finished by compare-and-set: the expiry stays.
            assert!(
                store
                    .compare_and_set(&k, Some(&doc(1)), Some(&doc(2)))
                    .unwrap()
            );
            assert_eq!(
                store.get_with_expiry(&k).unwrap().unwrap().expires_at,
                Some(at)
            );
            // A refused compare-and-set changes nothing.
            assert!(
                !store
                    .compare_and_set(&k, Some(&doc(1)), Some(&doc(3)))
                    .unwrap()
            );
            // Keep, explicitly, inside a transaction that also reads it back.
            store
                .transact(|tx| {
                    tx.put_with(&k, &doc(4), Expiry::Keep)?;
                    let seen = tx.get_with_expiry(&k)?.unwrap();
                    assert_eq!((seen.value, seen.expires_at), (doc(4), Some(at)));
                    Ok::<_, strata_store::StoreError>(())
                })
                .unwrap();
            // Absolute and relative expiries.
            store.put_with(&k, &doc(5), Expiry::At(t0 + DAY)).unwrap();
            assert_eq!(
                store.get_with_expiry(&k).unwrap().unwrap().expires_at,
                Some(t0 + DAY)
            );
            store.put_with(&k, &doc(6), Expiry::After(500)).unwrap();
            assert_eq!(
                store.get_with_expiry(&k).unwrap().unwrap().expires_at,
                Some(t0 + 500)
            );
            // A compare-and-set that chooses: no expiry from now on.
            store
                .transact(|tx| tx.compare_and_set_with(&k, Some(&doc(6)), Some(&doc(7)), Expiry::Never))
                .unwrap();
            assert_eq!(store.get_with_expiry(&k).unwrap().unwrap().expires_at, None);
            // A plain put clears an expiry; Keep over a value without one keeps none.
            store.put_with_ttl(&k, &doc(8), DAY).unwrap();
            store.put(&k, &doc(9)).unwrap();
            assert_eq!(store.get_with_expiry(&k).unwrap().unwrap().expires_at, None);
            store.put_with(&k, &doc(10), Expiry::Keep).unwrap();
            assert_eq!(store.get_with_expiry(&k).unwrap().unwrap().expires_at, None);
            // Keep over an expired value keeps nothing: the new value lives on.
            store.put_with_ttl(&k, &doc(11), 100).unwrap();
            clock.advance(100);
            assert_eq!(store.get(&k).unwrap(), None);
            store.put_with(&k, &doc(12), Expiry::Keep).unwrap();
            assert_eq!(
                store.get_with_expiry(&k).unwrap(),
                Some(Expiring {
                    value: doc(12),
                    expires_at: None
                })
            );
            // Keep over the transaction's own write keeps that write's
            // expiry while it is ahead of the clock, and none once the
            // clock has reached it (as over a stored value).
            let own = DocKey { actor: 1, id: 3 };
            let now = clock.now_ms();
            for (n, at, kept) in [(1, now + 10, Some(now + 10)), (3, now, None)] {
                store
                    .transact(|tx| {
                        tx.put_with(&own, &doc(n), Expiry::At(at))?;
                        tx.put_with(&own, &doc(n + 1), Expiry::Keep)?;
                        Ok::<_, strata_store::StoreError>(())
                    })
                    .unwrap();
                assert_eq!(
                    store.get_with_expiry(&own).unwrap(),
                    Some(Expiring {
                        value: doc(n + 1),
                        expires_at: kept
                    }),
                    "an own write expiring at {at}, the clock at {now}"
                );
            }
            // The activation kept by compare-and-set expires and is swept.
            let act = DocKey { actor: 1, id: 2 };
            store.put_with_ttl(&act, &doc(1), DAY).unwrap();
            store
                .compare_and_set(&act, Some(&doc(1)), Some(&doc(2)))
                .unwrap();
            clock.advance(DAY);
            assert_eq!(store.get(&act).unwrap(), None, "expired after its TTL");
            let swept = store.sweep_expired(None).unwrap();
            assert!(swept.removed >= 1, "{swept:?}");
            common::assert_quota_exact(&store);
        });
    }
}

engine_tests! {
    /// A chunked value's expiry is kept and read back like any other.
    fn a_chunked_values_expiry_is_read_and_kept() {
        use strata_store::Expiry;

        on_every_engine!(
            common::options(Limits {
                max_value_bytes: 200,
                ..Limits::FOUNDATIONDB
            }),
            |store, clock| {
                let k = BlobKey { actor: 1, id: 1 };
                let big = vec![3; 1_000];
                store
                    .put_with(&k, &big, Expiry::At(clock.now_ms() + 5_000))
                    .unwrap();
                assert_eq!(
                    store.get_with_expiry(&k).unwrap().unwrap().expires_at,
                    Some(clock.now_ms() + 5_000)
                );
                store.put_with(&k, &vec![4; 900], Expiry::Keep).unwrap();
                let got = store.get_with_expiry(&k).unwrap().unwrap();
                assert_eq!(
                    (got.value.len(), got.expires_at),
                    (900, Some(clock.now_ms() + 5_000))
                );
                common::assert_quota_exact(&store);
            }
        );
    }
}

/// A clock that counts its readings.
struct CountingClock {
    inner: strata_engine::ManualClock,
    reads: std::sync::atomic::AtomicUsize,
}

impl Clock for CountingClock {
    fn now_ms(&self) -> u64 {
        self.reads.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        self.inner.now_ms()
    }

    fn sleep_ms(&self, ms: u64) {
        self.inner.sleep_ms(ms);
    }
}

/// A store on `MemEngine` whose clock counts its readings.
fn counting_store() -> (
    strata_store::Store<strata_engine::MemEngine>,
    std::sync::Arc<CountingClock>,
) {
    let options = common::options(Limits::FOUNDATIONDB);
    let engine = strata_engine::MemEngine::open(options.keyspace_specs()).unwrap();
    let clock = std::sync::Arc::new(CountingClock {
        inner: strata_engine::ManualClock::new(common::T0),
        reads: 0.into(),
    });
    let store = strata_store::Store::open_with(
        engine,
        options,
        clock.clone(),
        Box::new(strata_engine::SeededRng::new(1)),
    )
    .unwrap();
    (store, clock)
}

#[test]
fn a_point_read_reads_the_clock_only_for_a_row_that_expires() {
    use std::sync::atomic::Ordering;
    let (store, clock) = counting_store();
    let (plain, expiring) = (DocKey { actor: 1, id: 1 }, DocKey { actor: 1, id: 2 });
    store.put(&plain, &doc(1)).unwrap();
    store.put_with_ttl(&expiring, &doc(2), 1_000).unwrap();
    let reads = || clock.reads.load(Ordering::SeqCst);

    let before = reads();
    assert_eq!(store.get(&plain).unwrap(), Some(doc(1)));
    assert_eq!(store.get(&DocKey { actor: 9, id: 9 }).unwrap(), None);
    assert_eq!(reads(), before, "no expiry, no clock reading");

    assert_eq!(store.get(&expiring).unwrap(), Some(doc(2)));
    assert_eq!(
        reads(),
        before + 1,
        "an expiry is checked against the clock"
    );
    clock.inner.advance(1_000);
    assert_eq!(store.get(&expiring).unwrap(), None);
    let got = store.get_with_expiry(&plain).unwrap().unwrap();
    assert_eq!((got.value, got.expires_at), (doc(1), None));
    assert_eq!(reads(), before + 2);
}

#[test]
fn a_transaction_reads_the_clock_for_an_expiry_only() {
    use std::sync::atomic::Ordering;
    let (store, clock) = counting_store();
    let reads = || clock.reads.load(Ordering::SeqCst);
    // A commit reads the clock twice: its latency (the metrics).
    let before = reads();
    store.put(&DocKey { actor: 1, id: 1 }, &doc(1)).unwrap();
    assert_eq!(reads(), before + 2, "a write without expiry");
    // A TTL needs the time once, however often the transaction asks.
    let before = reads();
    store
        .transact(|tx| {
            tx.put_with_ttl(&DocKey { actor: 1, id: 2 }, &doc(2), 1_000)?;
            tx.put_with_ttl(&DocKey { actor: 1, id: 3 }, &doc(3), 1_000)?;
            assert_eq!(tx.now_ms(), common::T0);
            Ok::<_, strata_store::StoreError>(())
        })
        .unwrap();
    assert_eq!(
        reads(),
        before + 3,
        "one reading for the TTLs, two for the commit"
    );
    assert_eq!(
        store
            .get_with_expiry(&DocKey { actor: 1, id: 3 })
            .unwrap()
            .unwrap()
            .expires_at,
        Some(common::T0 + 1_000)
    );
}

/// An expired chunked value whose manifest is damaged (its checksum
/// fails) does not stop the sweeper: its index entry goes as stale, the
/// damaged row and its chunks stay for `verify` to report (nothing is
/// deleted on the word of a row that does not read), and the other
/// expired values are removed; a second sweep finds nothing.
#[test]
fn a_damaged_expired_value_does_not_stop_the_sweeper() {
    use strata_engine::{Commit, Engine, Snapshot};
    use strata_keys::Key;
    let limits = Limits {
        max_value_bytes: 200,
        max_batch_entries: 8,
        ..Limits::FOUNDATIONDB
    };
    let (store, clock, _dir) = strata_test_support::mem(common::options(limits));
    let k = BlobKey { actor: 1, id: 1 };
    store.put_with_ttl(&k, &vec![4; 700], 500).unwrap();
    store
        .put_with_ttl(&BlobKey { actor: 1, id: 2 }, &vec![5; 700], 600)
        .unwrap();
    let data = store.engine().keyspace("data").unwrap();
    let key = k.pack().unwrap();
    let mut row = store
        .engine()
        .snapshot()
        .unwrap()
        .get(data, &key)
        .unwrap()
        .unwrap();
    let last = row.len() - 1;
    row[last] ^= 0x40;
    store
        .engine()
        .commit(Commit::new().put(data, key, row))
        .unwrap();
    clock.advance(1_000);
    let r = store.sweep_expired(None).unwrap();
    assert_eq!((r.removed, r.stale, r.resume), (1, 1, None));
    let problems = store.verify().unwrap().problems;
    assert!(
        matches!(&problems[0], strata_store::Problem::Value { key: at, .. } if *at == k.pack().unwrap()),
        "{problems:?}"
    );
    assert_eq!(
        problems.len(),
        5,
        "the row and its four chunks: {problems:?}"
    );
    let again = store.sweep_expired(None).unwrap();
    assert_eq!((again.removed, again.stale), (0, 0));
    let other = BlobKey { actor: 1, id: 2 }.pack().unwrap();
    let snap = store.engine().snapshot().unwrap();
    assert_eq!(
        snap.get(data, &other).unwrap(),
        None,
        "the other one removed"
    );
}
