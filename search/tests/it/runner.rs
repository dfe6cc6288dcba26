//! The indexer on its own thread: caught up by commits, searched while it
//! runs, stopped with its last changes committed and acknowledged, its
//! lease given up; waiting while another indexer holds the index.

use std::sync::Arc;
use std::time::Duration;

use strata_engine::Durability;
use strata_outbox::Outbox;
use strata_search::{IndexRunner, Location, Query};

use crate::{NoteKey, T0, indexer_config, note, outbox_config, spec};

fn hits(runner: &IndexRunner<NoteKey>, text: &str, want: usize) -> usize {
    for _ in 0..1_000 {
        let n = runner.search(&Query::new(text)).unwrap().hits.len();
        if n == want {
            return n;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    runner.search(&Query::new(text)).unwrap().hits.len()
}

#[test]
fn a_runner_keeps_the_index_caught_up_and_stops_cleanly() {
    let (store, clock, _dir) = crate::mem(crate::options(Durability::Immediate));
    let store = Arc::new(store);
    let mut config = indexer_config();
    config.commit_docs = 1;
    let ob = Outbox::open(&store, outbox_config()).unwrap();
    // Another indexer holds the index at first: the runner waits for it.
    let mut other = crate::indexer_in_memory(&ob, &clock);
    other.catch_up().unwrap();
    let runner = IndexRunner::start(
        store.clone(),
        spec(),
        Location::Memory,
        config,
        outbox_config(),
        Duration::from_millis(20),
    );
    let s = spec();
    for id in 1..=5 {
        store
            .transact(|tx| s.put(&ob, tx, &NoteKey { id }, &note("kept", "x", "info", T0)))
            .unwrap();
    }
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(
        runner.search(&Query::new("kept")).unwrap().hits.len(),
        0,
        "held off while the other indexer holds the lease"
    );
    other.close().unwrap();
    assert_eq!(hits(&runner, "kept", 5), 5);
    store
        .transact(|tx| s.put(&ob, tx, &NoteKey { id: 6 }, &note("late", "x", "info", T0)))
        .unwrap();
    assert_eq!(hits(&runner, "late", 1), 1);
    let report = runner.shutdown().unwrap();
    assert_eq!(report.received, 6);
    assert!(report.commits >= 2, "{report:?}");
    assert!(report.searches >= 3, "{report:?}");
    // Everything acknowledged, the lease given up: another takes over at
    // once, with nothing left to receive.
    assert_eq!(
        ob.lag("search.notes", "notes").unwrap().entries,
        0,
        "acknowledged through the last entry"
    );
    assert!(ob.acquire("search.notes", "notes", "next").is_ok());
    drop(clock);
}
