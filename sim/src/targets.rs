//! The engines a run can drive, and how each is opened, crashed and
//! restarted.

use strata_engine::{
    Commit, CommitError, CommitInfo, Engine, EngineError, KeyspaceSpec, Keyspaces, MemEngine,
    ReadError, Rng,
};
use strata_engine_redb::{PowerLossBackend, RedbEngine, RedbOptions};

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

/// Storage an engine reopens from: what survives a crash of the engine
/// using it, and how to open the engine on it.
pub trait Disk: Sized + Send + Sync {
    /// The engine on this storage.
    type Engine: Engine;
    /// Fresh, empty storage.
    fn fresh() -> Self;
    /// Opens the engine with `specs`.
    fn open(&self, specs: Vec<KeyspaceSpec>) -> Self::Engine;
    /// What survives a crash of the engine (the engine is still open).
    #[must_use]
    fn crash(&self, rng: &mut dyn Rng) -> Self;
}

/// An engine on a [`Disk`]: a crash drops the engine and reopens it on what
/// the disk kept; a clean restart reopens it on the same disk.
pub struct OnDisk<D: Disk> {
    engine: D::Engine,
    disk: D,
    specs: Vec<KeyspaceSpec>,
}

impl<D: Disk> OnDisk<D> {
    fn reopen(disk: D, specs: Vec<KeyspaceSpec>) -> Self {
        Self {
            engine: disk.open(specs.clone()),
            disk,
            specs,
        }
    }
}

impl<D: Disk> Target for OnDisk<D> {
    fn fresh(specs: Vec<KeyspaceSpec>) -> Self {
        Self::reopen(D::fresh(), specs)
    }
}

impl<D: Disk> Restart for OnDisk<D> {
    fn crash_restart(self, rng: &mut dyn Rng) -> Self {
        let survivor = self.disk.crash(rng);
        drop(self.engine);
        Self::reopen(survivor, self.specs)
    }

    fn clean_restart(self) -> Self {
        drop(self.engine);
        Self::reopen(self.disk, self.specs)
    }
}

impl<D: Disk> Engine for OnDisk<D> {
    type Snapshot<'e>
        = <D::Engine as Engine>::Snapshot<'e>
    where
        Self: 'e;

    fn keyspaces(&self) -> &Keyspaces {
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
}

/// redb on an in-memory disk that loses power at every crash: the synced
/// image survives, unsynced writes survive in part, possibly torn.
pub type RedbTarget = OnDisk<PowerLossBackend>;

impl Disk for PowerLossBackend {
    type Engine = RedbEngine;

    fn fresh() -> Self {
        PowerLossBackend::new()
    }

    fn open(&self, specs: Vec<KeyspaceSpec>) -> RedbEngine {
        RedbEngine::open_with_backend(self.clone(), specs, RedbOptions::default())
            .unwrap_or_else(|e| panic!("redb failed to reopen after a crash: {e}"))
    }

    fn crash(&self, rng: &mut dyn Rng) -> Self {
        self.power_loss(rng)
    }
}

#[cfg(feature = "rocks")]
pub use rocks::{RocksDir, RocksTarget};

#[cfg(feature = "rocks")]
mod rocks {
    use std::sync::Arc;

    use super::{Disk, KeyspaceSpec, OnDisk, Rng};

    /// RocksDB in a temporary directory; a crash is a process kill (the
    /// engine is dropped without a sync and reopened: what reached the WAL
    /// survives).
    pub type RocksTarget = OnDisk<RocksDir>;

    /// A temporary directory, removed when the last engine using it goes.
    #[derive(Clone)]
    pub struct RocksDir(Arc<TempDir>);

    struct TempDir(std::path::PathBuf);

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    impl Disk for RocksDir {
        type Engine = strata_engine_rocks::RocksEngine;

        fn fresh() -> Self {
            use std::sync::atomic::{AtomicU64, Ordering};
            static RUNS: AtomicU64 = AtomicU64::new(0);
            let n = RUNS.fetch_add(1, Ordering::SeqCst);
            let path =
                std::env::temp_dir().join(format!("strata-sim-rocks-{}-{n}", std::process::id()));
            let _ = std::fs::remove_dir_all(&path);
            Self(Arc::new(TempDir(path)))
        }

        fn open(&self, specs: Vec<KeyspaceSpec>) -> Self::Engine {
            strata_engine_rocks::RocksEngine::open(
                self.0.0.join("db"),
                specs,
                strata_engine_rocks::RocksOptions::default(),
            )
            .unwrap_or_else(|e| panic!("RocksDB failed to reopen: {e}"))
        }

        fn crash(&self, _rng: &mut dyn Rng) -> Self {
            // A process kill: the files stay as they are.
            self.clone()
        }
    }
}
