//! A damaged write-ahead log: a record damaged in the middle is refused
//! (`EngineError::Corrupt`), never opened silently at an earlier state that
//! lacks acknowledged durable commits; a record cut short at the end, as a
//! crash leaves it, is dropped; `accept_wal_loss` opens the damaged one at
//! the state before the damage, on request.

use std::path::{Path, PathBuf};

use strata_engine::{
    Commit, Durability, Engine, EngineError, KeyspaceSpec, Profile, RangeSpec, Snapshot,
};
use strata_engine_rocks::{RocksEngine, RocksOptions};

use crate::TempDir;

/// Commits the child writes, each `Immediate`.
const COMMITS: u64 = 200;

fn specs() -> Vec<KeyspaceSpec> {
    vec![KeyspaceSpec::new("a", Profile::General)]
}

/// Run as a child process by the test below: writes the commits, then
/// exits without closing the database (no destructor runs), so everything
/// is in the WAL alone, as after a process kill.
#[test]
fn wal_child() {
    let Some(path) = std::env::var_os("STRATA_WAL_CHILD") else {
        return;
    };
    let e = RocksEngine::open(&path, specs(), RocksOptions::default()).unwrap();
    let a = e.keyspace("a").unwrap();
    for i in 1..=COMMITS {
        e.commit(
            Commit::new()
                .put(
                    a,
                    i.to_be_bytes().to_vec(),
                    vec![u8::try_from(i % 251).unwrap(); 64],
                )
                .durability(Durability::Immediate),
        )
        .unwrap();
    }
    std::process::exit(0);
}

/// A database of [`COMMITS`] acknowledged durable commits, in the WAL only.
fn written(dir: &Path) -> PathBuf {
    let db = dir.join("db");
    let status = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "damage::wal_child", "--nocapture"])
        .env("STRATA_WAL_CHILD", &db)
        .status()
        .unwrap();
    assert!(status.success());
    db
}

/// The WAL file (the only `.log` file).
fn wal(db: &Path) -> PathBuf {
    let logs: Vec<PathBuf> = std::fs::read_dir(db)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "log"))
        .collect();
    assert_eq!(logs.len(), 1, "{logs:?}");
    logs.into_iter().next().unwrap()
}

fn rows(e: &RocksEngine) -> u64 {
    let a = e.keyspace("a").unwrap();
    e.snapshot()
        .unwrap()
        .range(a, RangeSpec::all())
        .unwrap()
        .count() as u64
}

#[test]
fn a_wal_damaged_in_the_middle_is_refused_not_rolled_back() {
    let dir = TempDir::new("wal-damage");
    let db = written(&dir.0);
    // A copy left alone opens with every commit (the control).
    let control = dir.0.join("control");
    std::fs::create_dir(&control).unwrap();
    for entry in std::fs::read_dir(&db).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), control.join(entry.file_name())).unwrap();
    }
    let log = wal(&db);
    let mut bytes = std::fs::read(&log).unwrap();
    let at = bytes.len() / 2;
    bytes[at] ^= 0x10;
    std::fs::write(&log, &bytes).unwrap();
    for read_only in [false, true] {
        let opened = if read_only {
            RocksEngine::open_read_only(&db, specs(), RocksOptions::default())
        } else {
            RocksEngine::open(&db, specs(), RocksOptions::default())
        };
        match opened {
            Err(EngineError::Corrupt(e)) => println!("refused: {e}"),
            Err(other) => panic!("read-only {read_only}: not a corruption error: {other:?}"),
            Ok(e) => panic!(
                "read-only {read_only}: opened at version {} with {} of {COMMITS} durable commits",
                e.last_version(),
                rows(&e)
            ),
        }
    }
    // Refusing wrote nothing: the damaged file is as it was.
    assert_eq!(std::fs::read(&log).unwrap(), bytes);
    // On request, it opens at the state before the damage.
    let accepting = RocksOptions {
        accept_wal_loss: true,
        ..RocksOptions::default()
    };
    let e = RocksEngine::open(&db, specs(), accepting).unwrap();
    let (v, n) = (e.last_version(), rows(&e));
    assert!(v < COMMITS && n == v, "version {v}, {n} rows");
    drop(e);
    let e = RocksEngine::open(&control, specs(), RocksOptions::default()).unwrap();
    assert_eq!((e.last_version(), rows(&e)), (COMMITS, COMMITS));
}

#[test]
fn a_wal_cut_short_at_the_end_opens_without_its_last_record() {
    let dir = TempDir::new("wal-torn");
    let db = written(&dir.0);
    let log = wal(&db);
    let len = std::fs::metadata(&log).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&log)
        .unwrap()
        .set_len(len - 20)
        .unwrap();
    let e = RocksEngine::open(&db, specs(), RocksOptions::default()).unwrap();
    assert_eq!((e.last_version(), rows(&e)), (COMMITS - 1, COMMITS - 1));
}

/// A byte flipped inside an SST file's data: the integrity check (every
/// entry read with block checksums verified) finds it as `Corrupt`.
#[test]
fn the_integrity_check_finds_a_damaged_table_file() {
    use strata_engine::{CapabilityError, Integrity};
    let dir = TempDir::new("sst-damage");
    let db = dir.0.join("db");
    let options = RocksOptions {
        write_buffer_bytes: 1 << 20,
        ..RocksOptions::default()
    };
    {
        let e = RocksEngine::open(&db, specs(), options).unwrap();
        let a = e.keyspace("a").unwrap();
        for i in 0u64..2_000 {
            e.commit(Commit::new().put(a, i.to_be_bytes().to_vec(), vec![0x5A; 100]))
                .unwrap();
        }
        assert!(e.check_integrity().unwrap().checked.unwrap() >= 2_000);
        // Into table files.
        strata_engine::Compact::compact(&e).unwrap();
    }
    let ssts: Vec<PathBuf> = std::fs::read_dir(&db)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "sst"))
        .collect();
    assert!(!ssts.is_empty());
    let biggest = ssts
        .iter()
        .max_by_key(|p| std::fs::metadata(p).unwrap().len())
        .unwrap();
    let mut bytes = std::fs::read(biggest).unwrap();
    let at = bytes.len() / 3;
    bytes[at] ^= 0x40;
    std::fs::write(biggest, &bytes).unwrap();
    match RocksEngine::open(&db, specs(), RocksOptions::default()) {
        // Paranoid checks may already refuse it at open.
        Err(EngineError::Corrupt(err)) => println!("refused at open: {err}"),
        Err(other) => panic!("not a corruption error: {other:?}"),
        Ok(e) => match e.check_integrity() {
            Err(CapabilityError::Engine(EngineError::Corrupt(err))) => println!("found: {err}"),
            other => panic!("the damage was not found: {other:?}"),
        },
    }
}

/// A database closed cleanly, then its log cut in the middle (a damaged
/// disk, a bad copy): RocksDB alone would take the cut for a crash's torn
/// tail and open at an earlier state; the durable mark written at the
/// clean close makes the open fail with `EngineError::Corrupt` instead. A
/// damaged mark fails the open too; `accept_wal_loss` opens it anyway.
#[test]
fn a_log_cut_after_a_clean_close_is_refused_by_the_durable_mark() {
    let dir = TempDir::new("mark");
    let db = dir.0.join("db");
    {
        let e = RocksEngine::open(&db, specs(), RocksOptions::default()).unwrap();
        let a = e.keyspace("a").unwrap();
        for i in 1..=COMMITS {
            e.commit(Commit::new().put(a, i.to_be_bytes().to_vec(), vec![7; 64]))
                .unwrap();
        }
    }
    let log = wal(&db);
    let len = std::fs::metadata(&log).unwrap().len();
    assert!(len > 1_000, "the rows are in the log ({len} bytes)");
    std::fs::OpenOptions::new()
        .write(true)
        .open(&log)
        .unwrap()
        .set_len(len / 2)
        .unwrap();
    match RocksEngine::open(&db, specs(), RocksOptions::default()) {
        Err(EngineError::Corrupt(e)) => {
            assert!(
                e.to_string().contains(&format!("{COMMITS} was durable")),
                "{e}"
            );
        }
        Err(other) => panic!("not a corruption error: {other:?}"),
        Ok(e) => panic!("opened at version {} of {COMMITS}", e.last_version()),
    }
    assert!(matches!(
        RocksEngine::open_read_only(&db, specs(), RocksOptions::default()),
        Err(EngineError::Corrupt(_))
    ));
    let mark = db.join("STRATA-DURABLE");
    let good = std::fs::read(&mark).unwrap();
    let mut bad = good.clone();
    bad[3] ^= 1;
    std::fs::write(&mark, &bad).unwrap();
    assert!(matches!(
        RocksEngine::open(&db, specs(), RocksOptions::default()),
        Err(EngineError::Corrupt(_))
    ));
    std::fs::write(&mark, &good).unwrap();
    let accepting = RocksOptions {
        accept_wal_loss: true,
        ..RocksOptions::default()
    };
    let e = RocksEngine::open(&db, specs(), accepting).unwrap();
    assert!(e.last_version() < COMMITS);
    assert_eq!(rows(&e), e.last_version());
}

/// The durable mark is read whole or refused: a mark whose complement word
/// does not match its version (the version itself intact) is damaged, and a
/// mark that cannot be read (a directory in its place) is an error, not a
/// database without a mark.
#[test]
fn a_mark_is_read_whole_or_refused() {
    let dir = TempDir::new("mark-whole");
    let db = dir.0.join("db");
    {
        let e = RocksEngine::open(&db, specs(), RocksOptions::default()).unwrap();
        let a = e.keyspace("a").unwrap();
        e.commit(Commit::new().put(a, b"k".to_vec(), b"v".to_vec()))
            .unwrap();
    }
    let mark = db.join("STRATA-DURABLE");
    let good = std::fs::read(&mark).unwrap();
    assert_eq!(good.len(), 16);
    // The version's complement, one bit off: the version word still reads
    // as the database's durable version.
    let mut bad = good.clone();
    bad[12] ^= 1;
    std::fs::write(&mark, &bad).unwrap();
    match RocksEngine::open(&db, specs(), RocksOptions::default()) {
        Err(EngineError::Corrupt(e)) => assert!(e.to_string().contains("mark"), "{e}"),
        Err(other) => panic!("not a corruption error: {other:?}"),
        Ok(e) => panic!("opened with a damaged mark at version {}", e.last_version()),
    }
    // A directory where the mark should be: reading it fails, and the open
    // says so rather than taking the database for one without a mark.
    std::fs::remove_file(&mark).unwrap();
    std::fs::create_dir(&mark).unwrap();
    assert!(matches!(
        RocksEngine::open(&db, specs(), RocksOptions::default()),
        Err(EngineError::Backend(_))
    ));
    // A read-only open writes no mark: the failed read alone refuses it.
    assert!(matches!(
        RocksEngine::open_read_only(&db, specs(), RocksOptions::default()),
        Err(EngineError::Backend(_))
    ));
    std::fs::remove_dir(&mark).unwrap();
    std::fs::write(&mark, &good).unwrap();
    let e = RocksEngine::open(&db, specs(), RocksOptions::default()).unwrap();
    assert_eq!(e.last_version(), 1);
}
