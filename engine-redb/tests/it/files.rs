//! On real files: reopen, keyspace changes, backup, options.

use strata_engine::{
    Backup, Commit, Durability, Engine, EngineError, KeyspaceSpec, Profile, RangeSpec, Snapshot,
    Statistics,
};
use strata_engine_redb::{RedbEngine, RedbOptions};

struct TempDir(std::path::PathBuf);

impl TempDir {
    fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("strata-redb-{name}-{}", std::process::id()));
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

fn specs(names: &[&str]) -> Vec<KeyspaceSpec> {
    names
        .iter()
        .map(|n| KeyspaceSpec::new(*n, Profile::General))
        .collect()
}

fn keys(e: &RedbEngine, name: &str) -> Vec<Vec<u8>> {
    let ks = e.keyspace(name).unwrap();
    e.snapshot()
        .unwrap()
        .range(ks, RangeSpec::all())
        .unwrap()
        .map(|r| r.unwrap().0)
        .collect()
}

#[test]
fn reopen_keeps_data_and_versions_and_handles_new_keyspaces() {
    let dir = TempDir::new("reopen");
    let path = dir.0.join("db.redb");
    let e = RedbEngine::open(&path, specs(&["a", "b"]), RedbOptions::default()).unwrap();
    let (a, b) = (e.keyspace("a").unwrap(), e.keyspace("b").unwrap());
    e.commit(Commit::new().put(a, b"x".to_vec(), b"1".to_vec()).put(
        b,
        b"y".to_vec(),
        b"2".to_vec(),
    ))
    .unwrap();
    let v = e
        .commit(
            Commit::new()
                .put(a, b"z".to_vec(), b"3".to_vec())
                .durability(Durability::Buffered),
        )
        .unwrap()
        .version;
    assert_eq!(e.sync().unwrap(), v);
    drop(e);
    // Reopen with "b" dropped and "c" added.
    let e = RedbEngine::open(&path, specs(&["c", "a"]), RedbOptions::default()).unwrap();
    assert_eq!(keys(&e, "a"), [b"x".to_vec(), b"z".to_vec()]);
    assert!(keys(&e, "c").is_empty());
    assert!(matches!(
        e.keyspace("b"),
        Err(EngineError::UnknownKeyspaceName(_))
    ));
    assert_eq!((e.last_version(), e.durable_version()), (v, v));
    drop(e);
    // "b" is still on disk.
    let e = RedbEngine::open(&path, specs(&["b"]), RedbOptions::default()).unwrap();
    assert_eq!(keys(&e, "b"), [b"y".to_vec()]);
    assert!(matches!(
        RedbEngine::open(
            dir.0.join("dup.redb"),
            specs(&["x", "x"]),
            RedbOptions::default()
        ),
        Err(EngineError::DuplicateKeyspace(_))
    ));
}

#[test]
fn backup_is_a_consistent_copy_taken_while_open() {
    let dir = TempDir::new("backup");
    let e = RedbEngine::open(
        dir.0.join("db.redb"),
        specs(&["a"]),
        RedbOptions {
            cache_bytes: 1 << 20,
            repair: false,
        },
    )
    .unwrap();
    let a = e.keyspace("a").unwrap();
    for i in 0..100u32 {
        e.commit(
            Commit::new()
                .put(a, i.to_be_bytes().to_vec(), vec![7; 100])
                .durability(Durability::Buffered),
        )
        .unwrap();
    }
    let info = e.backup(&dir.0.join("copy.redb")).unwrap();
    assert_eq!(info.version, Some(100));
    e.commit(Commit::new().put(a, b"after".to_vec(), b"x".to_vec()))
        .unwrap();
    let copy = RedbEngine::open(
        dir.0.join("copy.redb"),
        specs(&["a"]),
        RedbOptions::default(),
    )
    .unwrap();
    assert_eq!(
        keys(&copy, "a").len(),
        100,
        "the copy has the state at the backup, not later commits"
    );
    assert_eq!(copy.last_version(), 100);
    let stats = e.stats().unwrap();
    assert_eq!(stats[0].entries, 101);
    assert!(stats[0].entries_exact);
}
