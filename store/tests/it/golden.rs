//! On-disk compatibility: small databases written by this version, one per
//! embedded engine, with every row kind the store writes (inline values, a
//! chunked value's manifest and chunks, an expiring value and its expiry
//! index row, quota counters, an atomic counter, a versionstamped key), are
//! committed under `tests/golden/`. Every later version must open them and
//! read exactly the rows listed in `tests/golden/rows.txt` and the typed
//! values below: a format change is then deliberate, versioned, and shows
//! here.
//!
//! To write them again (a deliberate format change, with a new format
//! version): `cargo test -p strata-store --test it golden::write_golden_databases -- --ignored`.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use strata_codec::Limits;
use strata_engine::{Compact, Engine, RangeSpec, Snapshot};
use strata_engine_redb::{RedbEngine, RedbOptions};
use strata_engine_rocks::{RocksEngine, RocksOptions};
use strata_keys::tuple::Versionstamp;
use strata_store::Store;

use crate::common::{self, BlobKey, CountKey, Doc, DocKey, EventKey, TempDir};

fn golden() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden")
}

fn options() -> strata_store::StoreOptions {
    common::options(Limits {
        max_value_bytes: 100,
        ..Limits::FOUNDATIONDB
    })
}

fn doc(i: u8) -> Doc {
    Doc {
        title: format!("golden {i}"),
        body: vec![i; 5],
    }
}

fn blob() -> Vec<u8> {
    (0..350u32).map(|i| (i % 251) as u8).collect()
}

/// The writes of the golden databases, the same on every engine.
fn fill<E: Engine>(store: &Store<E>) {
    store.put(&DocKey { actor: 1, id: 1 }, &doc(1)).unwrap();
    store.put(&DocKey { actor: 1, id: 2 }, &doc(2)).unwrap();
    store
        .put_with_ttl(&DocKey { actor: 2, id: 1 }, &doc(3), 86_400_000)
        .unwrap();
    store.put(&BlobKey { actor: 1, id: 1 }, &blob()).unwrap();
    store
        .add(
            &CountKey {
                actor: 1,
                name: "hits".into(),
            },
            42,
        )
        .unwrap();
    store
        .transact(|tx| {
            tx.put_versionstamped(
                &EventKey {
                    stamp: Versionstamp::incomplete(0),
                },
                &"event".to_owned(),
            )
        })
        .unwrap();
    store.engine().sync().unwrap();
}

/// Every row of every keyspace, one line each: keyspace, key, value in hex.
fn rows<E: Engine>(engine: &E) -> String {
    let snap = engine.snapshot().unwrap();
    let mut out = String::new();
    for ks in engine.keyspaces().handles() {
        let name = &engine.keyspaces().spec(ks).unwrap().name;
        for row in snap.range(ks, RangeSpec::all()).unwrap() {
            let (k, v) = row.unwrap();
            writeln!(out, "{name} {} {}", hex(&k), hex(&v)).unwrap();
        }
    }
    out
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().fold(String::new(), |mut s, b| {
        write!(s, "{b:02x}").unwrap();
        s
    })
}

use strata_test_support::copy_dir;

/// The typed reads every version must answer the same.
fn check_typed<E: Engine>(store: &Store<E>) {
    assert_eq!(
        store.get(&DocKey { actor: 1, id: 1 }).unwrap(),
        Some(doc(1))
    );
    assert_eq!(
        store.get(&DocKey { actor: 1, id: 2 }).unwrap(),
        Some(doc(2))
    );
    let expiring = store
        .get_with_expiry(&DocKey { actor: 2, id: 1 })
        .unwrap()
        .unwrap();
    assert_eq!(
        (expiring.value, expiring.expires_at),
        (doc(3), Some(common::T0 + 86_400_000))
    );
    assert_eq!(
        store.get(&BlobKey { actor: 1, id: 1 }).unwrap(),
        Some(blob())
    );
    assert_eq!(
        store
            .counter(&CountKey {
                actor: 1,
                name: "hits".into()
            })
            .unwrap(),
        42
    );
    common::assert_quota_exact(store);
}

#[test]
fn databases_written_by_format_1_read_identically() {
    let want = std::fs::read_to_string(golden().join("rows.txt")).unwrap();
    {
        let dir = TempDir::new();
        std::fs::copy(golden().join("redb-v1.redb"), dir.0.join("db.redb")).unwrap();
        let engine = RedbEngine::open(
            dir.0.join("db.redb"),
            options().keyspace_specs(),
            RedbOptions::default(),
        )
        .unwrap();
        assert_eq!(rows(&engine), want, "redb rows");
        let (store, _clock) = common::store_on(engine, options());
        check_typed(&store);
    }
    {
        let dir = TempDir::new();
        copy_dir(&golden().join("rocks-v1"), &dir.0.join("rocks"));
        let engine = RocksEngine::open(
            dir.0.join("rocks"),
            options().keyspace_specs(),
            RocksOptions::default(),
        )
        .unwrap();
        assert_eq!(rows(&engine), want, "RocksDB rows");
        let (store, _clock) = common::store_on(engine, options());
        check_typed(&store);
    }
}

/// Writes the golden databases and their row listing (run by hand, on a
/// deliberate format change).
#[test]
#[ignore = "writes the golden databases; run by hand on a format change"]
fn write_golden_databases() {
    let dir = golden();
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let redb = RedbEngine::open(
        dir.join("redb-v1.redb"),
        options().keyspace_specs(),
        RedbOptions::default(),
    )
    .unwrap();
    let (store, _clock) = common::store_on(redb, options());
    fill(&store);
    let listing = rows(store.engine());
    drop(store);
    let rocks = RocksEngine::open(
        dir.join("rocks-v1"),
        options().keyspace_specs(),
        RocksOptions::default(),
    )
    .unwrap();
    let (store, _clock) = common::store_on(rocks, options());
    fill(&store);
    assert_eq!(
        rows(store.engine()),
        listing,
        "both engines hold the same rows"
    );
    store.engine().compact().unwrap();
    drop(store);
    // RocksDB's informational logs are not part of the database.
    for entry in std::fs::read_dir(dir.join("rocks-v1")).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        if name.starts_with("LOG") {
            std::fs::remove_file(dir.join("rocks-v1").join(name)).unwrap();
        }
    }
    std::fs::write(dir.join("rows.txt"), listing).unwrap();
}
