//! Time to live: expiry on read, the expiry index, the sweeper.

use strata_codec::Limits;
use strata_engine::{Clock, Engine};
use strata_store::Scan;

use crate::common::{self, BlobKey, Doc, DocKey};
use crate::on_every_engine;

fn doc(i: u8) -> Doc {
    Doc {
        title: format!("{i}"),
        body: vec![i; 8],
    }
}

#[test]
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

#[test]
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
        let _ = (store.engine().last_version(), clock.now_ms());
    });
}

#[test]
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
