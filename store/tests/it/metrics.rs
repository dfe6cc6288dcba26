//! The store's metrics, captured from the `metrics` facade.

use strata_codec::Limits;
use strata_store::metrics as m;

use crate::common::{self, Doc, DocKey};

#[path = "../../../test-support/metrics.rs"]
mod metrics_capture;
use metrics_capture::{capture, counter, histogram};

fn doc(n: usize) -> Doc {
    Doc {
        title: String::new(),
        body: vec![1; n],
    }
}

#[test]
fn commits_conflicts_retries_refusals_quota_and_sweeps_are_counted() {
    let limits = Limits {
        max_value_bytes: 1_000,
        ..Limits::FOUNDATIONDB.with_quota(10_000)
    };
    let (store, clock) = common::mem(common::options(limits));
    let ((), rec) = capture(|| {
        store.put(&DocKey { actor: 1, id: 1 }, &doc(100)).unwrap();
        store.put(&DocKey { actor: 1, id: 2 }, &doc(200)).unwrap();
        // A conflict: the first attempt's read changes under it.
        let mut attempt = 0;
        store
            .transact(|tx| {
                attempt += 1;
                let _ = tx.get(&DocKey { actor: 2, id: 1 })?;
                if attempt == 1 {
                    store.put(&DocKey { actor: 2, id: 1 }, &doc(10)).unwrap();
                }
                tx.put(&DocKey { actor: 2, id: 1 }, &doc(20))
            })
            .unwrap();
        // Refused before anything is written: a value over the limit, and
        // growth over the quota.
        let refused = store
            .put(&DocKey { actor: 3, id: 1 }, &doc(5_000))
            .unwrap_err();
        assert!(matches!(
            refused,
            strata_store::StoreError::ValueTooLarge { .. }
        ));
        assert!(store.put(&DocKey { actor: 1, id: 3 }, &doc(900)).is_ok());
        for id in 4..20 {
            let _ = store.put(&DocKey { actor: 1, id }, &doc(900));
        }
        store
            .put_with_ttl(&DocKey { actor: 4, id: 1 }, &doc(10), 5)
            .unwrap();
        clock.advance(10);
        let swept = store.sweep_expired(None).unwrap();
        assert_eq!(swept.removed, 1);
    });
    // 2 puts, the conflicting put and the retried commit, the 900-byte
    // puts that fit (id 3 and as many as the quota allows), the TTL put and
    // the sweep's commit.
    let commits = counter(&rec, m::COMMITS, &[]);
    let quota_refused = counter(&rec, m::LIMIT_REFUSALS, &["limit=quota"]);
    assert_eq!(counter(&rec, m::LIMIT_REFUSALS, &["limit=value"]), 1);
    assert!(quota_refused >= 1, "{rec:?}");
    assert_eq!(commits, 2 + 2 + (1 + 16 - quota_refused) + 1 + 1);
    assert_eq!(counter(&rec, m::CONFLICTS, &[]), 1);
    assert_eq!(counter(&rec, m::RETRIES, &[]), 1);
    assert_eq!(counter(&rec, m::SWEEP_REMOVED, &[]), 1);
    assert_eq!(counter(&rec, m::SWEEP_COMMITS, &[]), 1);
    let rows = histogram(&rec, m::COMMIT_ROWS);
    assert_eq!(rows.len() as u64, commits);
    // A scoped put writes its row and its scope's counter.
    assert!((rows[0] - 2.0).abs() < f64::EPSILON, "{rows:?}");
    let bytes = histogram(&rec, m::COMMIT_BYTES);
    assert!(bytes[1] > bytes[0] + 99.0, "{bytes:?}");
    assert_eq!(histogram(&rec, m::COMMIT_SECONDS).len() as u64, commits);
    let usage = histogram(&rec, m::QUOTA_USAGE);
    assert!(!usage.is_empty());
    assert!(usage.iter().all(|r| *r > 0.0 && *r <= 1.0), "{usage:?}");
    assert!(
        usage.iter().any(|r| *r > 0.9),
        "the quota filled up: {usage:?}"
    );
    assert!(
        m::ALL.iter().all(|n| n.starts_with("strata_store_")),
        "names are the documented ones"
    );
}

/// A clock whose every reading of microseconds is 250 later than the
/// one before.
struct Ticking(std::sync::atomic::AtomicU64);

impl strata_engine::Clock for Ticking {
    fn now_ms(&self) -> u64 {
        self.now_us() / 1_000
    }

    fn now_us(&self) -> u64 {
        self.0.fetch_add(250, std::sync::atomic::Ordering::Relaxed)
    }

    fn sleep_ms(&self, _ms: u64) {}
}

#[test]
fn a_commits_latency_is_recorded_in_seconds() {
    let options = common::options(Limits::FOUNDATIONDB);
    let engine = strata_engine::MemEngine::open(options.keyspace_specs()).unwrap();
    let clock = std::sync::Arc::new(Ticking(std::sync::atomic::AtomicU64::new(1_000_000)));
    let store = strata_store::Store::open_with(
        engine,
        options,
        clock,
        Box::new(strata_engine::SeededRng::new(1)),
    )
    .unwrap();
    let ((), rec) = capture(|| {
        store.put(&DocKey { actor: 1, id: 1 }, &doc(10)).unwrap();
    });
    // The commit read the clock before planning and after the engine's
    // answer: one tick apart, 250 µs.
    let seconds = histogram(&rec, m::COMMIT_SECONDS);
    assert_eq!(seconds.len(), 1, "{rec:?}");
    assert!((seconds[0] - 0.000_25).abs() < 1e-12, "{seconds:?}");
}
