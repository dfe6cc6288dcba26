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

/// `count_looped` counts the rows of the range given: its bounds and limit
/// held, in either direction.
#[test]
fn the_looped_count_is_the_ranges_rows() {
    use std::ops::Bound;
    use strata_engine::{Engine, Profile, RangeSpec};
    let e = MemEngine::open(vec![KeyspaceSpec::new("a", Profile::General)]).expect("open");
    let ks = e.keyspace("a").expect("keyspace");
    strata_engine_testkit::commit_in_parallel(&e, ks, 1, 10, 0, b"v");
    let snap = e.snapshot().expect("snapshot");
    let from = |k: u64| RangeSpec {
        start: Bound::Included(k.to_be_bytes().to_vec()),
        ..RangeSpec::all()
    };
    let count = |range| strata_engine_testkit::count_looped(&snap, ks, range);
    assert_eq!(count(RangeSpec::all()), 10);
    assert_eq!(count(from(3)), 7);
    assert_eq!(count(from(3).limit(4)), 4);
    assert_eq!(count(from(8).limit(4)), 2);
    assert_eq!(count(RangeSpec::all().reversed().limit(3)), 3);
    assert_eq!(count(from(10)), 0);
}
