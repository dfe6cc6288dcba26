//! `MemEngine`, the reference engine, runs the whole suite; the model and
//! `remap` are checked on their own.

use strata_engine::{KeyspaceSpec, MemEngine, Rng};
use strata_engine_testkit::Harness;

mod broken;
mod model;

/// Drives `MemEngine` for the suite: reopen is a clean close, crash drops a
/// suffix of unsynced commits chosen by the rng.
pub struct MemHarness;

impl Harness for MemHarness {
    type Engine = MemEngine;

    fn open(&mut self, keyspaces: &[KeyspaceSpec]) -> MemEngine {
        MemEngine::open(keyspaces.to_vec()).expect("open")
    }

    fn reopen(&mut self, engine: MemEngine) -> MemEngine {
        MemEngine::from_image(engine.close()).expect("reopen")
    }

    fn crash(&mut self, engine: MemEngine, rng: &mut dyn Rng) -> Option<MemEngine> {
        Some(MemEngine::from_image(engine.crash(rng)).expect("restart"))
    }

    fn reopen_with(&mut self, engine: MemEngine, keyspaces: &[KeyspaceSpec]) -> Option<MemEngine> {
        Some(
            MemEngine::from_image(engine.close().with_keyspaces(keyspaces.to_vec()))
                .expect("reopen"),
        )
    }
}

strata_engine_testkit::conformance_tests!(MemHarness);

/// `commit_in_parallel` writes exactly keys `first..first + writers *
/// commits`, each once, durably, with the value given.
#[test]
fn parallel_writers_write_each_key_once() {
    use strata_engine::{Engine, Profile, RangeSpec, Snapshot};
    let e = MemEngine::open(vec![KeyspaceSpec::new("a", Profile::General)]).expect("open");
    let ks = e.keyspace("a").expect("keyspace");
    strata_engine_testkit::commit_in_parallel(&e, ks, 3, 4, 10, b"v");
    let rows: Vec<(Vec<u8>, Vec<u8>)> = e
        .snapshot()
        .expect("snapshot")
        .range(ks, RangeSpec::all())
        .expect("range")
        .collect::<Result<_, _>>()
        .expect("rows");
    let want: Vec<(Vec<u8>, Vec<u8>)> = (10u64..22)
        .map(|k| (k.to_be_bytes().to_vec(), b"v".to_vec()))
        .collect();
    assert_eq!(rows, want);
    assert_eq!(e.last_version(), 12, "one commit a key");
    assert_eq!(e.durable_version(), 12);
}
