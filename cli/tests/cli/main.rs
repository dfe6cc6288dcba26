//! The `strata` binary run against databases these tests create on redb
//! and RocksDB: every command's output (text and `--json`), `verify`
//! passing on a clean database and catching planted damage, clear errors
//! for what is not a database or is held by another process.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use assert_cmd::Command;
use serde::{Deserialize, Serialize};
use serde_json::Value as Json;
use strata_codec::{Limits, value};
use strata_engine::{
    Clock, Commit, Engine, ManualClock, Mutation, RangeSpec, SeededRng, Snapshot, SystemClock,
};
use strata_engine_redb::{RedbEngine, RedbOptions};
use strata_engine_rocks::{RocksEngine, RocksOptions};
use strata_keys::{tuple, tuple_key};
use strata_outbox::{Outbox, OutboxConfig, Start, Topic};
use strata_store::{Store, StoreOptions};

mod copy;
mod edges;
mod inspect;
mod search;
mod verify;
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Note {
    title: String,
    stars: u32,
}
value!(Note: json, version = 2);

#[derive(Debug, Clone, PartialEq)]
struct NoteKey {
    user: u64,
    id: u64,
}

#[derive(Debug, Clone, PartialEq)]
struct BlobKey {
    user: u64,
}

#[derive(Debug, Clone, PartialEq)]
struct CountKey {
    user: u64,
}
tuple_key! {
    NoteKey -> Note = ("note", {user}, {id});
    BlobKey -> Vec<u8> = ("blob", {user});
    CountKey -> i64 = ("count", {user});
}

/// A directory removed when dropped.
struct Dir(PathBuf);

impl Dir {
    fn new(name: &str) -> Self {
        let p = std::env::temp_dir().join(format!("strata-cli-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        Self(p)
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn options() -> StoreOptions {
    let limits = Limits {
        max_value_bytes: 300,
        ..Limits::FOUNDATIONDB.with_quota(1 << 30)
    };
    Outbox::<RedbEngine>::declare(
        StoreOptions::new(limits)
            .chunked::<BlobKey>()
            .chunk_size(128)
            .quota_scope_tuple_prefix(2),
    )
}

#[derive(Clone, Copy, Debug)]
enum Which {
    Redb,
    Rocks,
}

fn open_engine(which: Which, path: &Path) -> Box<dyn Fn() -> Either> {
    let path = path.to_owned();
    Box::new(move || match which {
        Which::Redb => Either::Redb(
            RedbEngine::open(&path, options().keyspace_specs(), RedbOptions::default()).unwrap(),
        ),
        Which::Rocks => Either::Rocks(
            RocksEngine::open(&path, options().keyspace_specs(), RocksOptions::default()).unwrap(),
        ),
    })
}

enum Either {
    Redb(RedbEngine),
    Rocks(RocksEngine),
}

/// Writes the test database: two notes, a chunked blob (450 bytes in 4
/// chunks), a note expiring in an hour, an expired one, three outbox
/// entries, a consumer that finished one and dead-lettered none.
fn fill<E: Engine>(engine: E) {
    // The tool reads expiry with the system clock: this store writes with
    // the same time.
    let clock = Arc::new(ManualClock::new(SystemClock.now_ms()));
    let store = Store::open_with(
        engine,
        options(),
        clock.clone(),
        Box::new(SeededRng::new(1)),
    )
    .unwrap();
    store.publish_catalog().unwrap();
    let outbox = Outbox::new(
        &store,
        OutboxConfig::default(),
        clock.clone(),
        Box::new(SeededRng::new(2)),
    )
    .unwrap();
    let topic: Topic<String> = Topic::new("notes").unwrap();
    outbox
        .register("notes", "indexer", Start::Beginning)
        .unwrap();
    for id in 1..=2 {
        store
            .transact(|tx| {
                tx.put(
                    &NoteKey { user: 7, id },
                    &Note {
                        title: format!("note {id}"),
                        stars: u32::try_from(id).unwrap(),
                    },
                )?;
                outbox.push(tx, &topic, &format!("put {id}"))?;
                Ok::<_, strata_outbox::OutboxError>(())
            })
            .unwrap();
    }
    store.put(&BlobKey { user: 7 }, &vec![0xAB; 450]).unwrap();
    store
        .put_with_ttl(
            &NoteKey { user: 8, id: 1 },
            &Note {
                title: "soon".into(),
                stars: 0,
            },
            3_600_000,
        )
        .unwrap();
    store
        .put_with_ttl(
            &NoteKey { user: 8, id: 2 },
            &Note {
                title: "gone".into(),
                stars: 0,
            },
            1,
        )
        .unwrap();
    store
        .transact(|tx| {
            outbox.push(tx, &topic, &"third".to_owned())?;
            Ok::<_, strata_outbox::OutboxError>(())
        })
        .unwrap();
    store.engine().sync().unwrap();
}

/// Consumers "mailer" (its first two entries dead) and "audit" (its first
/// entry dead), giving up at the first failure.
fn dead_letters<E: Engine>(engine: E) {
    let store = Store::open(engine, options()).unwrap();
    let mut config = OutboxConfig::default();
    config.max_attempts = 1;
    let outbox = Outbox::new(
        &store,
        config,
        Arc::new(SystemClock),
        Box::new(SeededRng::new(4)),
    )
    .unwrap();
    let topic: Topic<String> = Topic::new("notes").unwrap();
    for (consumer, n) in [("mailer", 2), ("audit", 1)] {
        outbox
            .register("notes", consumer, Start::Beginning)
            .unwrap();
        let lease = outbox.acquire("notes", consumer, "test").unwrap();
        let got = outbox.poll(&lease, &topic, n).unwrap();
        for d in &got {
            let failed = outbox.fail(&lease, d.position, "smtp down").unwrap();
            assert_eq!(failed, strata_outbox::Failed::DeadLettered);
        }
        outbox.release(&lease).unwrap();
    }
}

fn create(which: Which, dir: &Dir) -> PathBuf {
    let path = match which {
        Which::Redb => dir.0.join("db.redb"),
        Which::Rocks => dir.0.join("rocks"),
    };
    match open_engine(which, &path)() {
        Either::Redb(e) => fill(e),
        Either::Rocks(e) => fill(e),
    }
    path
}

fn strata() -> Command {
    Command::cargo_bin("strata").unwrap()
}

fn run(args: &[&str]) -> (i32, String, String) {
    let out = strata().args(args).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn json(args: &[&str]) -> Json {
    let mut all = vec!["--json"];
    all.extend_from_slice(args);
    let (code, out, err) = run(&all);
    assert_eq!(code, 0, "{args:?}: {err}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{args:?}: {e}: {out}"))
}

fn p(path: &Path) -> &str {
    path.to_str().unwrap()
}

/// The rows of a keyspace, for a planted change to pick from.
type Rows<'a> = &'a dyn Fn(strata_engine::Keyspace) -> Vec<(Vec<u8>, Vec<u8>)>;

/// Damages the database at `db` with `m` (keyspace by name).
fn plant(
    which: Which,
    db: &Path,
    keyspace: &str,
    m: impl Fn(strata_engine::Keyspace, Rows<'_>) -> Mutation,
) {
    fn go<E: Engine>(
        e: &E,
        keyspace: &str,
        m: &dyn Fn(strata_engine::Keyspace, Rows<'_>) -> Mutation,
    ) {
        let ks = e.keyspace(keyspace).unwrap();
        let rows = |k| {
            e.snapshot()
                .unwrap()
                .range(k, RangeSpec::all())
                .unwrap()
                .collect::<Result<Vec<_>, _>>()
                .unwrap()
        };
        e.commit(Commit::new().mutate(m(ks, &rows))).unwrap();
    }
    match open_engine(which, db)() {
        Either::Redb(e) => go(&e, keyspace, &m),
        Either::Rocks(e) => go(&e, keyspace, &m),
    }
}
