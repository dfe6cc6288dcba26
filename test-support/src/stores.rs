//! A store on each engine for integration tests (the store's, the
//! outbox's, search's): a temporary directory removed on drop, and a store
//! on `MemEngine`, `RedbEngine`, `RocksEngine` or (feature `postgres`)
//! `PostgresEngine` with a manual clock.

use std::sync::Arc;

use strata_engine::{Engine, ManualClock, MemEngine, SeededRng};
#[cfg(feature = "postgres")]
use strata_engine_postgres::testing::TestServer;
#[cfg(feature = "postgres")]
use strata_engine_postgres::{PostgresEngine, PostgresOptions};
use strata_engine_redb::{RedbEngine, RedbOptions};
use strata_engine_rocks::{RocksEngine, RocksOptions};
use strata_store::{Store, StoreOptions};

/// The clock's reading when a store opens.
pub const T0: u64 = 1_700_000_000_000;

/// A fresh temporary directory, removed (with what it holds) on drop.
pub struct Dir(pub std::path::PathBuf);

impl Dir {
    /// A new directory under the system's temporary directory.
    pub fn new() -> Self {
        use std::sync::atomic::{AtomicU64, Ordering};
        static N: AtomicU64 = AtomicU64::new(0);
        let p = std::env::temp_dir().join(format!(
            "strata-test-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&p).unwrap();
        Self(p)
    }
}

impl Default for Dir {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        if let Err(e) = std::fs::remove_dir_all(&self.0) {
            eprintln!("could not remove {}: {e}", self.0.display());
        }
    }
}

/// A store on `engine` with a manual clock at [`T0`].
pub fn store_on<E: Engine>(engine: E, options: StoreOptions) -> (Store<E>, Arc<ManualClock>) {
    let clock = Arc::new(ManualClock::new(T0));
    let store =
        Store::open_with(engine, options, clock.clone(), Box::new(SeededRng::new(1))).unwrap();
    (store, clock)
}

/// A store on a new `MemEngine` (and an empty directory, for the tests
/// that need one beside it).
pub fn mem(options: StoreOptions) -> (Store<MemEngine>, Arc<ManualClock>, Dir) {
    let engine = MemEngine::open(options.keyspace_specs()).unwrap();
    let (s, c) = store_on(engine, options);
    (s, c, Dir::new())
}

/// A store on a new redb database in a temporary directory.
pub fn redb(options: StoreOptions) -> (Store<RedbEngine>, Arc<ManualClock>, Dir) {
    let dir = Dir::new();
    let engine = RedbEngine::open(
        dir.0.join("db.redb"),
        options.keyspace_specs(),
        RedbOptions::default(),
    )
    .unwrap();
    let (s, c) = store_on(engine, options);
    (s, c, dir)
}

/// A store on a new RocksDB database in a temporary directory.
pub fn rocks(options: StoreOptions) -> (Store<RocksEngine>, Arc<ManualClock>, Dir) {
    let dir = Dir::new();
    let engine = RocksEngine::open(
        dir.0.join("rocks"),
        options.keyspace_specs(),
        RocksOptions::default(),
    )
    .unwrap();
    let (s, c) = store_on(engine, options);
    (s, c, dir)
}

/// A store on a new database of the test run's PostgreSQL server (the
/// one `cargo xtask test` shares, or one started for this process); the
/// server handle keeps a private server running while the store lives.
#[cfg(feature = "postgres")]
pub fn postgres(
    options: StoreOptions,
) -> (Store<PostgresEngine>, Arc<ManualClock>, Arc<TestServer>) {
    let server =
        TestServer::shared().unwrap_or_else(|e| panic!("no PostgreSQL server for the tests: {e}"));
    let config = server.database("store").unwrap();
    let engine =
        PostgresEngine::open(config, options.keyspace_specs(), PostgresOptions::default()).unwrap();
    let (s, c) = store_on(engine, options);
    (s, c, server)
}
