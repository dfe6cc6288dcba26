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
