//! `PostgresEngine` runs the conformance suite on a real PostgreSQL server
//! (the run's shared server, one database per test), then tests of what is
//! PostgreSQL's own: long keys, streaming ranges, dropped connections,
//! several processes on one database, server crashes and a failover.

#![allow(clippy::many_single_char_names)]

use std::sync::Arc;

use strata_engine::KeyspaceSpec;
use strata_engine_postgres::testing::TestServer;
use strata_engine_postgres::{PostgresEngine, PostgresOptions};
use strata_engine_testkit::Harness;

mod crash;
mod full;
mod functions;
mod keys;
mod lost;
mod processes;
mod queued;
mod tls;

/// The run's shared server; a test that cannot have one fails and says why.
pub fn server() -> Arc<TestServer> {
    TestServer::shared().unwrap_or_else(|e| panic!("no PostgreSQL server for the tests: {e}"))
}

/// A new database on the shared server, and the engine open on it.
pub fn open(
    label: &str,
    specs: Vec<KeyspaceSpec>,
    options: PostgresOptions,
) -> (Arc<TestServer>, postgres::Config, PostgresEngine) {
    let s = server();
    let config = s.database(label).expect("a test database");
    let e = PostgresEngine::open(config.clone(), specs, options).expect("open");
    (s, config, e)
}

/// Each engine on a new database of the shared server.
pub struct PgHarness {
    server: Arc<TestServer>,
    config: Option<postgres::Config>,
    specs: Vec<KeyspaceSpec>,
}

impl Default for PgHarness {
    fn default() -> Self {
        Self {
            server: server(),
            config: None,
            specs: Vec::new(),
        }
    }
}

impl PgHarness {
    fn engine(&self) -> PostgresEngine {
        let config = self.config.clone().expect("opened first");
        PostgresEngine::open(config, self.specs.clone(), PostgresOptions::default()).expect("open")
    }
}

impl Harness for PgHarness {
    type Engine = PostgresEngine;

    fn open(&mut self, keyspaces: &[KeyspaceSpec]) -> PostgresEngine {
        self.config = Some(
            self.server
                .database("conformance")
                .expect("a test database"),
        );
        self.specs = keyspaces.to_vec();
        self.engine()
    }

    fn reopen(&mut self, engine: PostgresEngine) -> PostgresEngine {
        drop(engine);
        self.engine()
    }

    fn reopen_with(
        &mut self,
        engine: PostgresEngine,
        keyspaces: &[KeyspaceSpec],
    ) -> Option<PostgresEngine> {
        drop(engine);
        self.specs = keyspaces.to_vec();
        Some(self.engine())
    }

    // No `crash`: the shared server serves other tests at the same time.
    // `crash.rs` kills private servers instead.
}

strata_engine_testkit::conformance_tests!(PgHarness::default());

/// `stored_keyspaces` lists every keyspace of the catalogue, sorted,
/// whatever the last open declared, and refuses a database that is no
/// Strata store.
#[test]
fn stored_keyspaces_are_listed_from_the_catalogue() {
    use strata_engine::{EngineError, Profile};
    use strata_engine_postgres::ServerError;
    let (s, config, e) = open(
        "stored",
        vec![
            KeyspaceSpec::new("zeta", Profile::General),
            KeyspaceSpec::new("alpha", Profile::Queue),
        ],
        PostgresOptions::default(),
    );
    drop(e);
    assert_eq!(
        PostgresEngine::stored_keyspaces(&config).unwrap(),
        ["alpha".to_owned(), "zeta".to_owned()]
    );
    // Reopened with another: all three.
    let e = PostgresEngine::open(
        config.clone(),
        vec![KeyspaceSpec::new("mid", Profile::General)],
        PostgresOptions::default(),
    )
    .expect("reopen");
    drop(e);
    assert_eq!(
        PostgresEngine::stored_keyspaces(&config).unwrap(),
        ["alpha".to_owned(), "mid".to_owned(), "zeta".to_owned()]
    );
    let empty = s.database("stored-none").expect("a test database");
    match PostgresEngine::stored_keyspaces(&empty) {
        Err(EngineError::Backend(b)) => assert!(
            matches!(
                b.downcast_ref::<ServerError>(),
                Some(ServerError::NotStrata)
            ),
            "{b}"
        ),
        other => panic!("a database without Strata's tables: {other:?}"),
    }
}
