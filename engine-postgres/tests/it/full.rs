//! A full disk under the server: its data directory on a small tmpfs,
//! filled but for a few MiB while the engine commits.

use std::time::Duration;

use strata_engine::{
    Commit, CommitError, Durability, Engine, KeyspaceSpec, Profile, RangeSpec, Snapshot,
};
use strata_engine_postgres::testing::TestServer;
use strata_engine_postgres::{PostgresEngine, PostgresOptions};
use strata_engine_testkit::{Mount, fill, may_mount_tmpfs};

/// Row `i`: its number, then 4 KiB that do not compress (so the server's
/// files grow by about that much a row, TOAST or not).
fn row(i: u64) -> Vec<u8> {
    let mut x = i.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut v = i.to_be_bytes().to_vec();
    while v.len() < 4_096 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        v.extend_from_slice(&x.to_le_bytes());
    }
    v
}

/// On a 200 MiB tmpfs filled but for 6 MiB, the engine commits 4 KiB rows,
/// every other one `Immediate`, until the server fails one (a refused
/// extension of a file is an `ERROR`; a log segment it cannot create is a
/// `PANIC` and the server restarts, or stops if it cannot recover). The
/// failure is a typed error; acknowledged commits read while the disk is
/// full (when the server answers); once space returns (and the server is
/// started again if it stopped), the same engine commits again, and the
/// rows are the commits `1..=p` and the one retried, `p` reaching every
/// acknowledged `Immediate` commit (buffered ones after it may go, as in a
/// crash), every row unchanged.
#[test]
fn a_full_disk_is_an_error_and_keeps_every_durable_commit() {
    if !may_mount_tmpfs() {
        println!("skipped: no tmpfs to fill (needs root)");
        return;
    }
    let mount = Mount::new("pg", 200).expect("mount a tmpfs");
    let server = TestServer::start_under(mount.path(), &[]).expect("a server on the tmpfs");
    let config = server.database("full").unwrap();
    let e = PostgresEngine::open(
        config,
        vec![KeyspaceSpec::new("a", Profile::General)],
        PostgresOptions::default(),
    )
    .unwrap();
    let a = e.keyspace("a").unwrap();
    let filler = mount.path().join("filler");
    fill(&filler, 6 << 20).expect("fill the tmpfs");
    let put = |i: u64, durability: Durability| {
        e.commit(
            Commit::new()
                .put(a, i.to_be_bytes().to_vec(), row(i))
                .durability(durability),
        )
    };
    let (mut acked, mut last_immediate, mut i) = (0u64, 0u64, 0u64);
    let failure = loop {
        i += 1;
        assert!(i < 100_000, "6 MiB took 100,000 commits of 4 KiB");
        let durability = if i.is_multiple_of(2) {
            Durability::Immediate
        } else {
            Durability::Buffered
        };
        match put(i, durability) {
            Ok(_) => {
                acked = i;
                if durability == Durability::Immediate {
                    last_immediate = i;
                }
            }
            Err(err) => break err,
        }
    };
    assert!(
        matches!(
            failure,
            CommitError::Backend(_) | CommitError::OutcomeUnknown(_)
        ),
        "a full disk gave {failure:?}"
    );
    assert!(acked > 100, "only {acked} commits before the disk filled");
    println!(
        "{acked} commits, then: {}",
        strata_engine::ErrorChain(&failure)
    );
    // What was acknowledged reads while the disk is full, if the server
    // answers at all.
    if let Ok(snap) = e.snapshot() {
        for k in [1, acked / 2, last_immediate] {
            if let Ok(v) = snap.get(a, &k.to_be_bytes()) {
                assert_eq!(v, Some(row(k)), "commit {k} reads wrong on a full disk");
            }
        }
    }
    // Space returns; a server that stopped (it could not recover on a full
    // disk) is started again, as its operator would.
    std::fs::remove_file(&filler).unwrap();
    let mut retried = put(i, Durability::Immediate);
    for _ in 0..60 {
        if retried.is_ok() {
            break;
        }
        let _ = server.restart();
        std::thread::sleep(Duration::from_millis(500));
        retried = put(i, Durability::Immediate);
    }
    retried.unwrap_or_else(|err| panic!("no commit once space returned: {err}"));
    let snap = e.snapshot().unwrap();
    let mut ids = Vec::new();
    for r in snap.range(a, RangeSpec::all()).unwrap() {
        let (k, v) = r.unwrap();
        let n = u64::from_be_bytes(k.as_slice().try_into().unwrap());
        assert!(v == row(n), "commit {n} reads wrong after the disk filled");
        ids.push(n);
    }
    assert_eq!(ids.last(), Some(&i), "the commit retried is missing");
    let p = ids.len() as u64 - 1;
    assert!(
        ids[..ids.len() - 1].iter().copied().eq(1..=p),
        "the commits there are not a prefix"
    );
    assert!(
        p >= last_immediate,
        "immediate commit {last_immediate} lost: only commits up to {p} are there"
    );
    println!("{p} commits kept of {acked} acknowledged ({last_immediate} the last immediate)");
    drop(snap);
    drop(e);
    server.stop();
}

/// A value of about 1.9 KiB that does not compress, numbered `j`: small
/// enough to stay in the row (no TOAST), so rewriting one row grows the
/// log, not the table (the server prunes the row's old versions in place).
fn small(j: u64) -> Vec<u8> {
    let mut v = row(j);
    v.truncate(1_900);
    v
}

/// The log that cannot grow: one row rewritten on a tmpfs filled but for
/// 8 MiB, until the server needs a new 16 MiB log segment it cannot
/// create (a `PANIC`: every connection dropped, the server restarting or
/// stopping). The failure is a typed error (a lost connection mid-commit:
/// the outcome is unknown); once space returns and the server runs, the
/// same engine commits again, and the row holds a commit at or after the
/// last acknowledged `Immediate` one.
#[test]
fn a_log_that_cannot_grow_is_an_error_and_keeps_every_durable_commit() {
    if !may_mount_tmpfs() {
        println!("skipped: no tmpfs to fill (needs root)");
        return;
    }
    let mount = Mount::new("pgwal", 200).expect("mount a tmpfs");
    let server = TestServer::start_under(mount.path(), &[]).expect("a server on the tmpfs");
    let config = server.database("wal").unwrap();
    let e = PostgresEngine::open(
        config,
        vec![KeyspaceSpec::new("a", Profile::General)],
        PostgresOptions::default(),
    )
    .unwrap();
    let a = e.keyspace("a").unwrap();
    let filler = mount.path().join("filler");
    fill(&filler, 8 << 20).expect("fill the tmpfs");
    let put = |j: u64, durability: Durability| {
        e.commit(
            Commit::new()
                .put(a, b"hot".to_vec(), small(j))
                .durability(durability),
        )
    };
    let (mut last_immediate, mut j) = (0u64, 0u64);
    let failure = loop {
        j += 1;
        assert!(j < 200_000, "200,000 commits and the log still grows");
        let durability = if j.is_multiple_of(2) {
            Durability::Immediate
        } else {
            Durability::Buffered
        };
        match put(j, durability) {
            Ok(_) if durability == Durability::Immediate => last_immediate = j,
            Ok(_) => {}
            Err(err) => break err,
        }
    };
    assert!(
        matches!(
            failure,
            CommitError::Backend(_) | CommitError::OutcomeUnknown(_)
        ),
        "a full disk gave {failure:?}"
    );
    println!(
        "{j} commits tried, then: {}",
        strata_engine::ErrorChain(&failure)
    );
    std::fs::remove_file(&filler).unwrap();
    // Read once the server answers again (recovered, started again if it
    // stopped): the row holds a commit at or after the last durable one.
    let read = || -> Option<u64> {
        let v = e.snapshot().ok()?.get(a, b"hot").ok()??;
        Some(u64::from_be_bytes(v[..8].try_into().unwrap()))
    };
    let mut held = read();
    for _ in 0..60 {
        if held.is_some() {
            break;
        }
        let _ = server.restart();
        std::thread::sleep(Duration::from_millis(500));
        held = read();
    }
    let held = held.expect("the server answers once space returned");
    assert!(
        (last_immediate..=j).contains(&held),
        "the row holds commit {held}: the last durable one was {last_immediate}, the last tried {j}"
    );
    assert_eq!(
        e.snapshot().unwrap().get(a, b"hot").unwrap(),
        Some(small(held)),
        "commit {held} is not whole"
    );
    println!("the row holds commit {held} ({last_immediate} the last immediate)");
    let next = j + 1;
    put(next, Durability::Immediate)
        .unwrap_or_else(|err| panic!("no commit once space returned: {err}"));
    let snap = e.snapshot().unwrap();
    let held = snap.get(a, b"hot").unwrap().expect("the row");
    assert_eq!(held, small(next), "the commit made once space returned");
    drop(snap);
    drop(e);
    server.stop();
    assert!(
        last_immediate > 1_000,
        "only {last_immediate} commits before the log filled"
    );
}
