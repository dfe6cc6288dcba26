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
        Err(EngineError::UnknownKeyspaceName { .. })
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
        Err(EngineError::DuplicateKeyspace { .. })
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
            verify_at_open: true,
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

/// The offset of `needle` in `haystack` (the first one).
fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// A byte flipped inside a stored value: opened as by default, the file is
/// refused (`RedbOptions::verify_at_open`); opened without that, redb
/// reads it back flipped (it checks page checksums only in its integrity
/// check), and its integrity check, run by `Integrity::check_integrity` on
/// a copy, finds it as `Corrupt`, writing nothing to the file. The same
/// file undamaged passes.
type Opener = fn(
    &std::path::Path,
    Vec<strata_engine::KeyspaceSpec>,
    RedbOptions,
) -> Result<RedbEngine, EngineError>;

#[test]
fn the_integrity_check_finds_a_byte_that_reads_find_silently() {
    use strata_engine::{CapabilityError, Integrity};
    let dir = TempDir::new("integrity");
    let path = dir.0.join("db.redb");
    let marker = b"VALUE-MARKER-0123456789-abcdefghij";
    {
        let e = RedbEngine::open(&path, specs(&["a"]), RedbOptions::default()).unwrap();
        let a = e.keyspace("a").unwrap();
        for i in 0u32..50 {
            let mut v = marker.to_vec();
            v.extend_from_slice(&i.to_be_bytes());
            e.commit(
                Commit::new()
                    .put(a, i.to_be_bytes().to_vec(), v)
                    .durability(Durability::Immediate),
            )
            .unwrap();
        }
    }
    let clean = RedbEngine::open_read_only(&path, specs(&["a"]), RedbOptions::default()).unwrap();
    assert!(
        clean.check_integrity().is_ok(),
        "an undamaged file fails the check"
    );
    drop(clean);
    let mut bytes = std::fs::read(&path).unwrap();
    let at = find(&bytes, marker).expect("the value is in the file") + 3;
    bytes[at] ^= 0x01;
    std::fs::write(&path, &bytes).unwrap();
    // Opened as by default, it is refused, typed, and nothing is written:
    // read-only by the check at open; for writing, by redb's own open
    // (which checks the commit slot it is about to use) or the check.
    let openers: [(Opener, &str); 2] = [
        (
            |p, s, o| RedbEngine::open_read_only(p, s, o),
            "integrity check",
        ),
        (|p, s, o| RedbEngine::open(p, s, o), "corrupt"),
    ];
    for (open, by) in openers {
        match open(&path, specs(&["a"]), RedbOptions::default()) {
            Err(EngineError::Corrupt(err)) => {
                assert!(err.to_string().to_lowercase().contains(by), "{err}");
            }
            Err(other) => panic!("refused, but not as corrupt: {other}"),
            Ok(_) => panic!("a damaged file opened with the check at open"),
        }
        if by == "integrity check" {
            assert!(
                std::fs::read(&path).unwrap() == bytes,
                "the read-only open wrote to the file"
            );
        }
    }
    // redb's own writable open marks the file it refuses; put the
    // damaged bytes back for what follows.
    std::fs::write(&path, &bytes).unwrap();
    let skip = RedbOptions {
        verify_at_open: false,
        ..RedbOptions::default()
    };
    let e = RedbEngine::open_read_only(&path, specs(&["a"]), skip).unwrap();
    let a = e.keyspace("a").unwrap();
    // Why the check exists: the read itself does not notice.
    let damaged = (0u32..50).any(|i| {
        let v = e.snapshot().unwrap().get(a, &i.to_be_bytes()).unwrap();
        v.is_some_and(|v| !v.starts_with(marker))
    });
    assert!(damaged, "the flipped byte is in no value read");
    match e.check_integrity() {
        Err(CapabilityError::Engine(EngineError::Corrupt(err))) => println!("found: {err}"),
        other => panic!("the damage was not found: {other:?}"),
    }
    drop(e);
    assert_eq!(
        std::fs::read(&path).unwrap(),
        bytes,
        "the check wrote to the file"
    );
    let leftovers = std::fs::read_dir(&dir.0).unwrap().count();
    assert_eq!(leftovers, 1, "the check's copy was left behind");
}

/// What a scan of a damaged file gave: the rows read before it ended, and
/// how it ended (`None`: at the range's end; otherwise whether the error
/// was redb's panic caught).
type Scanned = (Vec<(Vec<u8>, Vec<u8>)>, Option<bool>);

fn caught_panic(e: &strata_engine::ReadError) -> bool {
    matches!(e, strata_engine::ReadError::Corrupt(inner) if inner.is::<strata_engine::BackendPanic>())
}

/// A byte flipped in many places of a redb file opened without the check
/// at open: the cursor's own loop (`try_for_each_row`, one panic guard for
/// the whole scan) and its steps (`next_row`, a guard each) give the same
/// rows and end the same way, and no panic of redb's gets out of either.
/// Some flips must make redb panic inside the loop, or the sweep tests
/// nothing of its guard.
#[test]
fn a_damaged_file_scanned_in_one_loop_ends_as_stepped_and_never_panics() {
    use std::ops::ControlFlow;
    use strata_engine::{BackendPanic, RowCursor};
    BackendPanic::quiet_caught();
    let dir = TempDir::new("loop-damage");
    let path = dir.0.join("db.redb");
    {
        let e = RedbEngine::open(&path, specs(&["a"]), RedbOptions::default()).unwrap();
        let a = e.keyspace("a").unwrap();
        let mut c = Commit::new().durability(Durability::Immediate);
        for i in 0u32..400 {
            c = c.put(a, i.to_be_bytes().to_vec(), vec![i.to_be_bytes()[3]; 60]);
        }
        e.commit(c).unwrap();
    }
    let clean = std::fs::read(&path).unwrap();
    let damaged = dir.0.join("damaged.redb");
    let skip = RedbOptions {
        verify_at_open: false,
        ..RedbOptions::default()
    };
    let (mut trials, mut caught) = (0, 0);
    let places: Vec<usize> = (0..clean.len()).filter(|&at| clean[at] != 0).collect();
    for &at in places.iter().step_by(places.len() / 600 + 1) {
        let mut bytes = clean.clone();
        bytes[at] ^= 0x5A;
        std::fs::write(&damaged, &bytes).unwrap();
        let Ok(Ok(e)) =
            std::panic::catch_unwind(|| RedbEngine::open_read_only(&damaged, specs(&["a"]), skip))
        else {
            continue;
        };
        let Ok(a) = e.keyspace("a") else { continue };
        let Ok(snap) = e.snapshot() else { continue };
        let looped = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| -> Scanned {
            let Ok(mut rows) = snap.cursor(a, RangeSpec::all()) else {
                return (Vec::new(), Some(false));
            };
            let mut got = Vec::new();
            let end = rows.try_for_each_row(|k, v| {
                got.push((k.to_vec(), v.to_vec()));
                ControlFlow::<()>::Continue(())
            });
            (got, end.err().map(|e| caught_panic(&e)))
        }));
        let stepped = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| -> Scanned {
            let Ok(mut rows) = snap.cursor(a, RangeSpec::all()) else {
                return (Vec::new(), Some(false));
            };
            let mut got = Vec::new();
            while let Some(row) = rows.next_row() {
                match row {
                    Ok((k, v)) => got.push((k.to_vec(), v.to_vec())),
                    Err(e) => return (got, Some(caught_panic(&e))),
                }
            }
            (got, None)
        }));
        let (Ok(looped), Ok(stepped)) = (looped, stepped) else {
            panic!("byte {at}: a panic of redb's got out of a scan");
        };
        assert_eq!(looped, stepped, "byte {at}: the loop and the steps differ");
        if looped.1 == Some(true) {
            println!(
                "byte {at}: redb panicked after {} rows, caught",
                looped.0.len()
            );
        }
        trials += 1;
        caught += usize::from(looped.1 == Some(true));
    }
    assert!(trials > 100, "only {trials} damaged files opened");
    assert!(
        caught > 0,
        "no flip made redb panic in a scan ({trials} files): the sweep tests nothing of the guard"
    );
}
