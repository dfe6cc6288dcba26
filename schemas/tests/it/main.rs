//! The schemas' tests: each system on `MemEngine`, `RedbEngine` and
//! `RocksEngine`, with the same cases.

#![allow(clippy::missing_panics_doc, missing_docs)]

mod actor_kv;
mod actor_kv_client;
mod actor_kv_kill;
mod actor_kv_store;
mod agent_memory;
mod agent_memory_kill;
mod agent_memory_resend;
mod agent_memory_scale;
mod agent_memory_verify;
mod code_sous;
mod code_sous_growth;
mod nokv;
mod nokv_check;
mod nokv_history;
mod nokv_kill;
mod nokv_uploads;
mod universaldb;
mod universaldb_rivet;

use std::path::PathBuf;
use std::sync::Arc;

use strata_engine::{Engine, KeyspaceSpec, ManualClock, MemEngine, SeededRng};
use strata_engine_redb::{RedbEngine, RedbOptions};
use strata_engine_rocks::{RocksEngine, RocksOptions};
use strata_store::{Store, StoreOptions};

/// A temporary directory, removed when dropped.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> Self {
        use std::sync::atomic::{AtomicU64, Ordering};
        static N: AtomicU64 = AtomicU64::new(0);
        let dir = std::env::temp_dir().join(format!(
            "strata-schemas-{tag}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::SeqCst)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Self(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The clock every test store reads: 2024-10-27, moved by hand.
pub const START_MS: u64 = 1_730_000_000_000;

/// A store on `engine` with a manual clock at [`START_MS`].
pub fn store_on<E: Engine>(engine: E, options: StoreOptions) -> (Store<E>, Arc<ManualClock>) {
    let clock = Arc::new(ManualClock::new(START_MS));
    let store = Store::open_with(engine, options, clock.clone(), Box::new(SeededRng::new(3)))
        .expect("store opens");
    (store, clock)
}

pub fn mem(specs: Vec<KeyspaceSpec>, _dir: &TempDir) -> MemEngine {
    MemEngine::open(specs).unwrap()
}

pub fn redb(specs: Vec<KeyspaceSpec>, dir: &TempDir) -> RedbEngine {
    redb_in(specs, &dir.0)
}

pub fn rocks(specs: Vec<KeyspaceSpec>, dir: &TempDir) -> RocksEngine {
    rocks_in(specs, &dir.0)
}

/// A redb engine on the file `db.redb` of `dir` (opened again by the
/// process-kill tests).
pub fn redb_in(specs: Vec<KeyspaceSpec>, dir: &std::path::Path) -> RedbEngine {
    RedbEngine::open(dir.join("db.redb"), specs, RedbOptions::default()).unwrap()
}

/// A RocksDB engine in the directory `rocks` of `dir`.
pub fn rocks_in(specs: Vec<KeyspaceSpec>, dir: &std::path::Path) -> RocksEngine {
    RocksEngine::open(dir.join("rocks"), specs, RocksOptions::default()).unwrap()
}

/// The test run's PostgreSQL server (the one `cargo xtask test` shares, or
/// one for this process, kept while the handle lives).
pub fn postgres_server() -> Arc<strata_engine_postgres::testing::TestServer> {
    strata_engine_postgres::testing::TestServer::shared()
        .unwrap_or_else(|e| panic!("no PostgreSQL server for the tests: {e}"))
}

/// An engine on a new database of `server`.
pub fn postgres(
    specs: Vec<KeyspaceSpec>,
    server: &strata_engine_postgres::testing::TestServer,
) -> strata_engine_postgres::PostgresEngine {
    let config = server.database("schemas").unwrap();
    strata_engine_postgres::PostgresEngine::open(
        config,
        specs,
        strata_engine_postgres::PostgresOptions::default(),
    )
    .unwrap()
}

/// Runs the generic `case::<E>(engine)` on a fresh engine of each kind
/// (inside `engine_tests!`, on the test's engine alone), with the file's
/// keyspaces from `specs()`.
#[macro_export]
macro_rules! each_engine {
    ($case:path, $specs:path) => {{
        use strata_test_support::{EngineKind, runs};
        let tag = stringify!($case).rsplit(' ').next().unwrap_or("case");
        if runs(EngineKind::Mem) {
            let dir = $crate::TempDir::new(tag);
            $case($crate::mem($specs(), &dir));
        }
        if runs(EngineKind::Redb) {
            let dir = $crate::TempDir::new(tag);
            $case($crate::redb($specs(), &dir));
        }
        if runs(EngineKind::Rocks) {
            let dir = $crate::TempDir::new(tag);
            $case($crate::rocks($specs(), &dir));
        }
        if runs(EngineKind::Postgres) {
            let server = $crate::postgres_server();
            $case($crate::postgres($specs(), &server));
        }
    }};
}

/// One test per engine (`case::mem`, `case::redb`, `case::rocks`,
/// `case::postgres`) for each generic `case::<E>(engine)` named, through
/// `strata_test_support::engine_tests!` (the module `case` sits beside the
/// function `case`: they live in different namespaces).
#[macro_export]
macro_rules! on_each_engine {
    ($($case:ident),* $(,)?) => {
        strata_test_support::engine_tests!(
            [mem, redb, rocks, postgres]
            $( fn $case() { $crate::each_engine!(super::$case, super::specs) } )*
        );
    };
}
