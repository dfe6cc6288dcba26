//! `RocksEngine` runs the conformance suite (a crash is a process kill:
//! close without sync, reopen), then RocksDB-specific tests.

#![allow(clippy::many_single_char_names)]

use strata_engine::{KeyspaceSpec, Rng};
use strata_engine_rocks::{RocksEngine, RocksOptions};
use strata_engine_testkit::Harness;

mod damage;
mod files;
mod kill;

/// A temporary directory removed on drop.
pub struct TempDir(pub std::path::PathBuf);

impl TempDir {
    /// A fresh directory named after `name` and a counter.
    pub fn new(name: &str) -> Self {
        use std::sync::atomic::{AtomicU64, Ordering};
        static N: AtomicU64 = AtomicU64::new(0);
        let n = N.fetch_add(1, Ordering::SeqCst);
        let dir =
            std::env::temp_dir().join(format!("strata-rocks-{name}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("temp dir");
        Self(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Opens each engine in its own directory.
#[derive(Default)]
pub struct RocksHarness {
    dir: Option<TempDir>,
    specs: Vec<KeyspaceSpec>,
}

impl RocksHarness {
    fn path(&self) -> std::path::PathBuf {
        self.dir
            .as_ref()
            .map(|d| d.0.join("db"))
            .unwrap_or_default()
    }
}

impl Harness for RocksHarness {
    type Engine = RocksEngine;

    fn open(&mut self, keyspaces: &[KeyspaceSpec]) -> RocksEngine {
        self.dir = Some(TempDir::new("suite"));
        self.specs = keyspaces.to_vec();
        RocksEngine::open(self.path(), self.specs.clone(), RocksOptions::default()).expect("open")
    }

    fn reopen(&mut self, engine: RocksEngine) -> RocksEngine {
        drop(engine);
        RocksEngine::open(self.path(), self.specs.clone(), RocksOptions::default()).expect("reopen")
    }

    fn reopen_with(
        &mut self,
        engine: RocksEngine,
        keyspaces: &[KeyspaceSpec],
    ) -> Option<RocksEngine> {
        self.specs = keyspaces.to_vec();
        Some(self.reopen(engine))
    }

    /// A process kill: the engine goes without a sync; what RocksDB wrote
    /// to its WAL survives (power loss is not simulated here).
    fn crash(&mut self, engine: RocksEngine, _rng: &mut dyn Rng) -> Option<RocksEngine> {
        drop(engine);
        Some(
            RocksEngine::open(self.path(), self.specs.clone(), RocksOptions::default())
                .expect("restart"),
        )
    }
}

strata_engine_testkit::conformance_tests!(RocksHarness::default());
