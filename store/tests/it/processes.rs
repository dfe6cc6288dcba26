//! Several real processes writing one store on one PostgreSQL database:
//! three writers putting (some chunked, some with a time to live) and
//! deleting values of two quota scopes held near their quota, and a
//! sweeper removing what expired, on the system clock, one of them killed
//! with SIGKILL and started again four times at random moments (a server
//! of the test's own, so other tests' load does not drown it). Afterwards `verify`
//! finds nothing (quota counters equal to a recount, chunks whole, the
//! expiry index matching), and every value is one a writer wrote, whole.
//!
//! The oracle is independent of the store's code: each value carries its
//! own length and a pattern of a number it holds.

#![cfg(unix)]

use std::process::{Child, Stdio};
use std::sync::Arc;
use std::time::Duration;

use strata_codec::Limits;
use strata_engine::{Rng, SeededRng, SystemClock, SystemRng};
use strata_engine_postgres::testing::TestServer;
use strata_engine_postgres::{PostgresEngine, PostgresOptions};
use strata_keys::KeyRange;
use strata_store::{Scan, Store, StoreError, StoreOptions};

use crate::common::{self, BlobKey};

/// Set in a child: `writer N` or `sweeper`, then `|` and the connection
/// string of the test's database.
const CHILD: &str = "STRATA_STORE_PG_CHILD";
const TEST: &str = "processes::writers_and_a_sweeper_in_processes_keep_the_store_whole";

/// Values past 200 bytes are chunked (chunks of 100); each actor's scope
/// holds 6,000 bytes, so the writers meet the quota.
fn options() -> StoreOptions {
    common::options(Limits {
        max_value_bytes: 200,
        ..Limits::FOUNDATIONDB.with_quota(6_000)
    })
    .chunk_size(100)
}

/// A value holding `nonce` and its own length, then a pattern of the nonce.
fn value(nonce: u64, len: usize) -> Vec<u8> {
    let mut v = nonce.to_be_bytes().to_vec();
    v.extend_from_slice(&u32::try_from(len).unwrap().to_be_bytes());
    v.extend((12..len.max(12)).map(|k| u8::try_from((nonce + k as u64) % 253).unwrap()));
    v
}

/// Whether `v` is a value [`value`] made, whole.
fn whole(v: &[u8]) -> bool {
    v.len() >= 12 && {
        let nonce = u64::from_be_bytes(v[..8].try_into().unwrap());
        let len = u32::from_be_bytes(v[8..12].try_into().unwrap()) as usize;
        v == value(nonce, len)
    }
}

fn open(conninfo: &str) -> Store<PostgresEngine> {
    let pg = conninfo.parse().expect("the parent's connection string");
    let o = options();
    let engine = PostgresEngine::open(pg, o.keyspace_specs(), PostgresOptions::default())
        .expect("an engine on the test database");
    Store::open_with(engine, o, Arc::new(SystemClock), Box::new(SystemRng::new()))
        .expect("a store on the test database")
}

/// A child's life: write, or sweep, until killed.
fn child(spec: &str) {
    let (role, conninfo) = spec.split_once('|').expect("a child's spec");
    let store = open(conninfo);
    if role == "sweeper" {
        loop {
            settle(role, || store.sweep_expired(Some(4)).map(|_| ()));
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    let n: u64 = role.strip_prefix("writer ").unwrap().parse().unwrap();
    let mut rng = SystemRng::new();
    let mut nonce = n << 48 | rng.below(1 << 40);
    loop {
        nonce += 1;
        let key = BlobKey {
            actor: rng.below(2),
            id: rng.below(12),
        };
        let kind = rng.below(10);
        let len = 12 + usize::try_from(rng.below(700)).unwrap();
        let ttl = 20 + rng.below(80);
        settle(role, || match kind {
            0..=1 => store.delete(&key).map(|_| ()),
            2..=3 => store
                .put_with_ttl(&key, &value(nonce, len), ttl)
                .map(|_| ()),
            _ => store.put(&key, &value(nonce, len)).map(|_| ()),
        });
    }
}

/// Runs a write or a sweep to its end: done, or refused by a full scope
/// or by contention past the retry policy (nothing changed). A failure to
/// reach the server (processes open and drop connections while others
/// are killed) is tried again, up to three times; any other error ends
/// the child, which the parent sees.
fn settle(role: &str, mut op: impl FnMut() -> Result<(), StoreError>) {
    for _ in 0..3 {
        match op() {
            Ok(()) | Err(StoreError::Quota { .. } | StoreError::RetriesExhausted { .. }) => return,
            Err(StoreError::Read(strata_engine::ReadError::Backend(e))) => {
                eprintln!("{role}: {e}; again");
            }
            Err(e) if e.is_outcome_unknown() => eprintln!("{role}: {e}; again"),
            Err(e) => panic!("{role}: {e}"),
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("{role}: three failures in a row");
}

fn spawn(role: &str, server: &TestServer, dbname: &str) -> Child {
    let spec = format!("{role}|{}", server.conninfo(dbname));
    strata_test_support::spawn_self(TEST, &[(CHILD, &spec)], Stdio::null())
}

/// Kills `child`, which must still be running (one that ended by itself
/// met an error it should not have).
fn kill(role: &str, mut child: Child) {
    assert!(
        child.try_wait().unwrap().is_none(),
        "{role} ended by itself"
    );
    child.kill().expect("SIGKILL");
    let _ = child.wait();
}

#[test]
fn writers_and_a_sweeper_in_processes_keep_the_store_whole() {
    if let Ok(spec) = std::env::var(CHILD) {
        child(&spec);
        return;
    }
    let server = TestServer::start().expect("a PostgreSQL server");
    let config = server.database("processes").unwrap();
    let dbname = config.get_dbname().unwrap().to_owned();
    let store = open(&server.conninfo(&dbname));
    let roles = ["writer 0", "writer 1", "writer 2", "sweeper"];
    let mut children: Vec<Child> = roles.iter().map(|r| spawn(r, &server, &dbname)).collect();
    let mut rng = SeededRng::new(0x5705_E000);
    for _ in 0..4 {
        std::thread::sleep(Duration::from_millis(200 + rng.below(200)));
        // One of them killed mid-work and started again.
        let i = usize::try_from(rng.below(roles.len() as u64)).unwrap();
        let replacement = spawn(roles[i], &server, &dbname);
        kill(roles[i], std::mem::replace(&mut children[i], replacement));
    }
    std::thread::sleep(Duration::from_millis(300));
    for (role, c) in roles.iter().zip(children) {
        kill(role, c);
    }
    // The children did work: commits by the hundred (the store's version
    // counts every commit of every process).
    let commits = store.read().unwrap().version().unwrap();
    assert!(commits > 200, "only {commits} commits in all");
    let report = store.verify().unwrap();
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    common::assert_quota_exact(&store);
    let view = store.read().unwrap();
    let mut values = 0;
    for actor in 0..2u64 {
        let prefix = strata_keys::tuple::pack(&(common::ACTOR, actor, "blob"));
        for row in view
            .scan::<BlobKey>(&Scan::range_of(KeyRange::tuple_prefix(&prefix)))
            .unwrap()
        {
            let (key, v) = row.unwrap();
            assert!(
                whole(&v),
                "{key:?} holds {} bytes of no value written",
                v.len()
            );
            values += 1;
        }
        let used = store.quota_usage(&common::scope(actor)).unwrap();
        assert!(used <= 6_000, "actor {actor} uses {used} bytes of 6,000");
    }
    println!("{commits} commits; {values} values left, every one whole; verify clean");
}
