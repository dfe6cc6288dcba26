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

/// A shared store over a `MemEngine` that refuses reads on request.
fn refusing_store()
-> Arc<strata_store::Store<strata_test_support::Refusing<strata_engine::MemEngine>>> {
    let options = crate::options(Durability::Immediate);
    let engine = strata_test_support::Refusing::new(
        strata_engine::MemEngine::open(options.keyspace_specs()).unwrap(),
    );
    Arc::new(strata_test_support::store_on(engine, options).0)
}

/// A store that cannot reach its engine for a while (three reads
/// refused, as while a server restarts, at each point of the runner's
/// steps in turn, while it idles and while it indexes): the runner waits
/// it out, and every note written before, during and after is indexed.
/// (Before, the first failure ended the runner for good.)
#[test]
fn a_runner_waits_out_store_failures() {
    for pass in 0..8 {
        let store = refusing_store();
        let ob = Outbox::open(&store, outbox_config()).unwrap();
        let s = spec();
        // The test's own writes meet the refusals too: tried again.
        let put = |id: u64| {
            for _ in 0..10 {
                match store
                    .transact(|tx| s.put(&ob, tx, &NoteKey { id }, &note("kept", "x", "info", T0)))
                {
                    Ok(()) => return,
                    Err(e) if e.is_transient() => {}
                    Err(e) => panic!("{e}"),
                }
            }
            panic!("note {id} not written");
        };
        put(1);
        let mut config = indexer_config();
        config.commit_docs = 1;
        let runner = IndexRunner::start(
            store.clone(),
            spec(),
            Location::Memory,
            config,
            outbox_config(),
            Duration::from_millis(2),
        );
        assert_eq!(hits(&runner, "kept", 1), 1, "pass {pass}");
        store.engine().refuse_reads_after(pass, 3);
        put(2);
        put(3);
        for _ in 0..500 {
            if store.engine().read_refusals_left() == 0 {
                break;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        assert_eq!(store.engine().read_refusals_left(), 0, "pass {pass}");
        assert_eq!(
            hits(&runner, "kept", 3),
            3,
            "pass {pass}: the runner went on"
        );
        assert!(!runner.is_finished(), "pass {pass}");
        // Its next step after the last wait answers: the count is 0.
        for _ in 0..500 {
            if runner.store_failures() == 0 {
                break;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        assert_eq!(
            runner.store_failures(),
            0,
            "pass {pass}: the outage is over"
        );
        // Entries a failed step applied are in the index but not in the
        // report's count.
        let report = runner.shutdown().unwrap();
        assert!(
            (1..=3).contains(&report.received),
            "pass {pass}: {report:?}"
        );
    }
}

/// With `max_store_failures`, a runner stops at the failure past the
/// bound: a limit of 2 waits out two refused reads and ends on the third,
/// which `shutdown` returns; without the bound the same outage is waited
/// out.
#[test]
fn a_runner_ends_past_its_store_failure_bound() {
    for (bound, ends) in [(Some(2), true), (Some(5), false), (None, false)] {
        let store = refusing_store();
        let mut config = indexer_config();
        config.max_store_failures = bound;
        let runner = IndexRunner::start(
            store.clone(),
            spec(),
            Location::Memory,
            config,
            outbox_config(),
            Duration::from_millis(2),
        );
        assert_eq!(hits(&runner, "nothing", 0), 0);
        // Three reads in a row refused, from the runner's next one.
        store.engine().refuse_reads_after(0, 3);
        for _ in 0..1_000 {
            if store.engine().read_refusals_left() == 0 && (runner.is_finished() || !ends) {
                break;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        assert_eq!(store.engine().read_refusals_left(), 0, "{bound:?}");
        if ends {
            for _ in 0..500 {
                if runner.is_finished() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(2));
            }
            assert!(runner.is_finished(), "{bound:?}: it ended");
            let err = runner.shutdown().unwrap_err();
            assert!(err.is_transient(), "{bound:?}: {err}");
        } else {
            std::thread::sleep(Duration::from_millis(50));
            assert!(!runner.is_finished(), "{bound:?}: it waits the outage out");
            runner.shutdown().unwrap();
        }
    }
}

/// A runner whose index does not open ends at once: a health check sees
/// it, and `shutdown` says why.
#[test]
fn a_runner_that_cannot_open_is_finished() {
    let (store, _clock, dir) = crate::mem(crate::options(Durability::Immediate));
    let root = dir.0.join("index");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(root.join("CURRENT"), "not a generation").unwrap();
    let runner = IndexRunner::start(
        Arc::new(store),
        spec(),
        Location::Dir(root),
        indexer_config(),
        outbox_config(),
        Duration::from_millis(2),
    );
    for _ in 0..500 {
        if runner.is_finished() {
            break;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    assert!(runner.is_finished());
    assert!(matches!(
        runner.shutdown(),
        Err(strata_search::SearchError::Current { .. })
    ));
}

/// An idle runner sleeps: the commits of its own step (its lease renewed)
/// are not commits to wake for. (They were: the runner took the last
/// commit seen before its step, and an idle runner stepped, and renewed
/// its lease, in a busy loop.)
#[test]
fn an_idle_runner_sleeps_instead_of_stepping_in_a_loop() {
    let (store, clock, _dir) = crate::mem(crate::options(Durability::Immediate));
    let store = Arc::new(store);
    let before = store.last_commit_seen();
    let runner = IndexRunner::start(
        store.clone(),
        spec(),
        Location::Memory,
        indexer_config(),
        outbox_config(),
        Duration::from_secs(5),
    );
    std::thread::sleep(Duration::from_millis(300));
    let commits = store.last_commit_seen() - before;
    runner.shutdown().unwrap();
    // Opening (its consumer and lease), one step, then a five-second
    // sleep.
    assert!(
        commits <= 4,
        "an idle runner made {commits} commits in 300 ms"
    );
    drop(clock);
}
