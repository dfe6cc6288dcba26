//! `RedbEngine` runs the conformance suite (on a power-loss backend, so the
//! crash-contract test cuts power), then redb-specific tests.

#![allow(clippy::many_single_char_names, clippy::type_complexity)]

use strata_engine::{KeyspaceSpec, Rng};
use strata_engine_redb::{PowerLossBackend, RedbEngine, RedbOptions};
use strata_engine_testkit::Harness;

mod edges;
mod files;
mod kill;
mod power;

/// Opens each engine on its own in-memory disk that can lose power.
#[derive(Default)]
pub struct RedbHarness {
    disk: PowerLossBackend,
    specs: Vec<KeyspaceSpec>,
}

impl Harness for RedbHarness {
    type Engine = RedbEngine;

    fn open(&mut self, keyspaces: &[KeyspaceSpec]) -> RedbEngine {
        self.disk = PowerLossBackend::new();
        self.specs = keyspaces.to_vec();
        RedbEngine::open_with_backend(
            self.disk.clone(),
            self.specs.clone(),
            RedbOptions::default(),
        )
        .expect("open")
    }

    fn reopen(&mut self, engine: RedbEngine) -> RedbEngine {
        drop(engine);
        RedbEngine::open_with_backend(
            self.disk.clone(),
            self.specs.clone(),
            RedbOptions::default(),
        )
        .expect("reopen")
    }

    fn reopen_with(
        &mut self,
        engine: RedbEngine,
        keyspaces: &[KeyspaceSpec],
    ) -> Option<RedbEngine> {
        self.specs = keyspaces.to_vec();
        Some(self.reopen(engine))
    }

    fn crash(&mut self, engine: RedbEngine, rng: &mut dyn Rng) -> Option<RedbEngine> {
        // The disk as power loss leaves it, taken before the engine can
        // shut down cleanly.
        let survivor = self.disk.power_loss(rng);
        drop(engine);
        self.disk = survivor;
        Some(
            RedbEngine::open_with_backend(
                self.disk.clone(),
                self.specs.clone(),
                RedbOptions::default(),
            )
            .expect("restart after power loss"),
        )
    }
}

strata_engine_testkit::conformance_tests!(RedbHarness::default());
