//! The engines a run can drive, and how each is opened, crashed and
//! restarted.

use strata_engine::{
    Commit, CommitError, CommitInfo, Engine, EngineError, KeyspaceSpec, KeyspaceStats, MemEngine,
    ReadError, Rng,
};
use strata_engine_redb::{PowerLossBackend, RedbEngine, RedbOptions, RedbSnapshot};

use crate::faults::Restart;

/// An engine the simulation can run.
pub trait Target: Restart {
    /// A fresh, empty engine with these keyspaces.
    fn fresh(specs: Vec<KeyspaceSpec>) -> Self;
    /// Enables the planted bug `name` (only the reference engine has any,
    /// and only with the `planted-bugs` feature); other engines ignore it.
    #[must_use]
    fn plant(self, name: &str) -> Self {
        let _ = name;
        self
    }
}

impl Target for MemEngine {
    fn fresh(specs: Vec<KeyspaceSpec>) -> Self {
        MemEngine::open(specs).unwrap_or_else(|e| unreachable!("{e}"))
    }

    #[cfg(feature = "planted-bugs")]
    fn plant(mut self, name: &str) -> Self {
        MemEngine::plant(&mut self, strata_engine::PlantedBug::from_name(name));
        self
    }
}

/// redb on an in-memory disk that loses power at every crash: the synced
/// image survives, unsynced writes survive in part, possibly torn.
pub struct RedbTarget {
    engine: RedbEngine,
    disk: PowerLossBackend,
    specs: Vec<KeyspaceSpec>,
}

impl RedbTarget {
    fn reopen(disk: PowerLossBackend, specs: Vec<KeyspaceSpec>) -> Self {
        let engine =
            RedbEngine::open_with_backend(disk.clone(), specs.clone(), RedbOptions::default())
                .unwrap_or_else(|e| panic!("redb failed to reopen after a crash: {e}"));
        Self {
            engine,
            disk,
            specs,
        }
    }
}

impl Target for RedbTarget {
    fn fresh(specs: Vec<KeyspaceSpec>) -> Self {
        Self::reopen(PowerLossBackend::new(), specs)
    }
}

impl Restart for RedbTarget {
    fn crash_restart(self, rng: &mut dyn Rng) -> Self {
        let survivor = self.disk.power_loss(rng);
        drop(self.engine);
        Self::reopen(survivor, self.specs)
    }

    fn clean_restart(self) -> Self {
        drop(self.engine);
        Self::reopen(self.disk, self.specs)
    }
}

impl Engine for RedbTarget {
    type Snapshot<'e> = RedbSnapshot<'e>;

    fn keyspaces(&self) -> &[KeyspaceSpec] {
        self.engine.keyspaces()
    }
    fn snapshot(&self) -> Result<RedbSnapshot<'_>, ReadError> {
        self.engine.snapshot()
    }
    fn commit(&self, commit: Commit) -> Result<CommitInfo, CommitError> {
        self.engine.commit(commit)
    }
    fn sync(&self) -> Result<u64, EngineError> {
        self.engine.sync()
    }
    fn durable_version(&self) -> u64 {
        self.engine.durable_version()
    }
    fn last_version(&self) -> u64 {
        self.engine.last_version()
    }
    fn stats(&self) -> Result<Vec<KeyspaceStats>, EngineError> {
        self.engine.stats()
    }
}

#[cfg(feature = "rocks")]
pub use rocks::RocksTarget;

#[cfg(feature = "rocks")]
mod rocks {
    use super::{
        Commit, CommitError, CommitInfo, Engine, EngineError, KeyspaceSpec, KeyspaceStats,
        ReadError, Restart, Rng, Target,
    };

    /// RocksDB in a temporary directory; a crash is a process kill (the engine
    /// is dropped without a sync and reopened: what reached the WAL survives).
    pub struct RocksTarget {
        engine: strata_engine_rocks::RocksEngine,
        dir: std::sync::Arc<TempDir>,
        specs: Vec<KeyspaceSpec>,
    }

    /// A directory removed when the last run using it ends.
    struct TempDir(std::path::PathBuf);

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    impl RocksTarget {
        fn reopen(dir: std::sync::Arc<TempDir>, specs: Vec<KeyspaceSpec>) -> Self {
            let engine = strata_engine_rocks::RocksEngine::open(
                dir.0.join("db"),
                specs.clone(),
                strata_engine_rocks::RocksOptions::default(),
            )
            .unwrap_or_else(|e| panic!("RocksDB failed to reopen: {e}"));
            Self { engine, dir, specs }
        }
    }

    impl Target for RocksTarget {
        fn fresh(specs: Vec<KeyspaceSpec>) -> Self {
            use std::sync::atomic::{AtomicU64, Ordering};
            static RUNS: AtomicU64 = AtomicU64::new(0);
            let n = RUNS.fetch_add(1, Ordering::SeqCst);
            let path =
                std::env::temp_dir().join(format!("strata-sim-rocks-{}-{n}", std::process::id()));
            let _ = std::fs::remove_dir_all(&path);
            Self::reopen(std::sync::Arc::new(TempDir(path)), specs)
        }
    }

    impl Restart for RocksTarget {
        fn crash_restart(self, _rng: &mut dyn Rng) -> Self {
            drop(self.engine);
            Self::reopen(self.dir, self.specs)
        }

        fn clean_restart(self) -> Self {
            drop(self.engine);
            Self::reopen(self.dir, self.specs)
        }
    }

    impl Engine for RocksTarget {
        type Snapshot<'e> = strata_engine_rocks::RocksSnapshot<'e>;

        fn keyspaces(&self) -> &[KeyspaceSpec] {
            self.engine.keyspaces()
        }
        fn snapshot(&self) -> Result<Self::Snapshot<'_>, ReadError> {
            self.engine.snapshot()
        }
        fn commit(&self, commit: Commit) -> Result<CommitInfo, CommitError> {
            self.engine.commit(commit)
        }
        fn sync(&self) -> Result<u64, EngineError> {
            self.engine.sync()
        }
        fn durable_version(&self) -> u64 {
            self.engine.durable_version()
        }
        fn last_version(&self) -> u64 {
            self.engine.last_version()
        }
        fn stats(&self) -> Result<Vec<KeyspaceStats>, EngineError> {
            self.engine.stats()
        }
    }
}
