//! Real process kills: a child process writes notes through the store and
//! indexes them on disk (redb and an index directory), rebuilding the index
//! now and then, until the parent kills it with SIGKILL at a random moment
//! (between adds and commits, between an index commit and its outbox
//! acknowledgement, inside a rebuild); after each kill the index must
//! open (never behind its outbox consumer), sit between the consumer's
//! checkpoint and the durable store, and after catching up equal the store.

#![cfg(unix)]

use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::sync::Arc;

use strata_engine::{Durability, Engine, ManualClock, Rng, SeededRng};
use strata_engine_redb::{RedbEngine, RedbOptions};
use strata_outbox::Position;
use strata_search::{Indexer, IndexerConfig, Location};
use strata_store::Store;

use crate::{Dir, NoteKey, T0, note, options, outbox, outbox_config, spec};

const CHILD: &str = "STRATA_SEARCH_KILL_DIR";
/// The child's clock reading at start (each round later than the last).
const CHILD_CLOCK: &str = "STRATA_SEARCH_KILL_CLOCK";
/// Longer than the outbox's lease term (30 s).
const LEASE_GAP: u64 = 60_000;
const TEST: &str = "kill::the_indexer_survives_kills_at_random_moments";

fn open_store(dir: &std::path::Path) -> Store<RedbEngine> {
    let o = options(Durability::Immediate);
    let engine = RedbEngine::open(
        dir.join("db.redb"),
        o.keyspace_specs(),
        RedbOptions::default(),
    )
    .unwrap();
    Store::open_with(
        engine,
        o,
        Arc::new(ManualClock::new(T0)),
        Box::new(SeededRng::new(1)),
    )
    .unwrap()
}

fn config() -> IndexerConfig {
    let mut c = IndexerConfig::new("kill");
    c.threads = 1;
    c.batch = 2;
    c.commit_docs = 3;
    c
}

/// The child: writes, updates and deletes notes and indexes them, printing
/// each acknowledged commit, until killed.
fn write_and_index_until_killed(dir: &std::path::Path, now: u64) {
    let store = open_store(dir);
    let clock = Arc::new(ManualClock::new(now));
    let ob = outbox(&store, &clock, outbox_config());
    let s = spec();
    let mut ix = Indexer::open(
        &ob,
        spec(),
        &Location::Dir(dir.join("index")),
        config(),
        clock.clone(),
    )
    .expect("the index opens");
    let start = store.engine().last_version();
    for i in start..start + 1_000_000 {
        let id = i % 23;
        store
            .transact(|tx| {
                if i % 7 == 0 {
                    s.delete(&ob, tx, &NoteKey { id })
                } else {
                    s.put(
                        &ob,
                        tx,
                        &NoteKey { id },
                        &note("kill", &format!("round {i}"), "info", T0),
                    )
                }
            })
            .expect("child commit");
        println!("ack {i}");
        ix.step().expect("child index step");
        // Now and then a rebuild, so that kills land in one too.
        if i % 17 == 16 {
            ix = ix.rebuild().expect("child rebuild").0;
        }
    }
}

#[test]
fn the_indexer_survives_kills_at_random_moments() {
    if let Ok(dir) = std::env::var(CHILD) {
        let now = std::env::var(CHILD_CLOCK)
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(T0);
        write_and_index_until_killed(std::path::Path::new(&dir), now);
        return;
    }
    let rounds: u64 = std::env::var("STRATA_KILL_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(10);
    let dir = Dir::new();
    let mut rng = SeededRng::new(0x5EA_7C4);
    let mut checked = 0;
    for round in 0..rounds {
        let wanted = 1 + rng.below(60);
        let clock = (T0 + 2 * round * LEASE_GAP).to_string();
        let dir_text = dir.0.to_string_lossy();
        let mut child = strata_test_support::spawn_self(
            TEST,
            &[(CHILD, &dir_text), (CHILD_CLOCK, &clock)],
            Stdio::piped(),
        );
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let mut acked = 0;
        while acked < wanted {
            let Some(Ok(line)) = lines.next() else { break };
            if line.starts_with("ack ") {
                acked += 1;
            }
        }
        std::thread::sleep(std::time::Duration::from_micros(rng.below(5_000)));
        child.kill().expect("SIGKILL");
        let status = child.wait().expect("reap the child");
        assert!(
            !status.success(),
            "round {round}: the child ended by itself"
        );

        let store = open_store(&dir.0);
        // Later than the killed child's lease: a killed holder's lease is
        // waited out, whatever its holder name.
        let clock = Arc::new(ManualClock::new(T0 + (2 * round + 1) * LEASE_GAP));
        let ob = outbox(&store, &clock, outbox_config());
        let acknowledged = ob
            .checkpoint("search.notes", "notes")
            .unwrap_or(Position::START);
        let mut ix = Indexer::open(
            &ob,
            spec(),
            &Location::Dir(dir.0.join("index")),
            config(),
            clock.clone(),
        )
        .unwrap_or_else(|e| panic!("round {round}: the index does not open: {e}"));
        let at = ix.checkpoint();
        assert!(
            at >= acknowledged,
            "round {round}: index at {at}, outbox acknowledged {acknowledged}"
        );
        assert!(
            at.version <= store.engine().durable_version(),
            "round {round}: index at {at} is ahead of the durable store"
        );
        let report = ix.verify().unwrap();
        assert!(report.is_exact(), "round {round}: {report:?}");
        // At most the generation in use and one a kill left unfinished or
        // not yet removed.
        let generations = std::fs::read_dir(dir.0.join("index"))
            .unwrap()
            .filter(|e| {
                e.as_ref()
                    .is_ok_and(|e| e.file_name().to_string_lossy().starts_with("gen-"))
            })
            .count();
        assert!(
            (1..=2).contains(&generations),
            "round {round}: {generations} generations"
        );
        checked += report.documents;
        ix.close().unwrap();
        // The next child continues from here.
    }
    println!("{rounds} kills; {checked} documents checked against the store");
}
