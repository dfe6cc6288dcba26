//! A full disk under the server: its data directory on a small tmpfs,
//! filled but for a few MiB while the engine commits.

use std::path::PathBuf;
use std::time::Duration;

use strata_engine::{
    Commit, CommitError, Durability, Engine, Keyspace, KeyspaceSpec, Profile, RangeSpec, Snapshot,
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

/// A value of about 1.9 KiB that does not compress, numbered `j`: small
/// enough to stay in the row (no TOAST), so rewriting one row grows the
/// log, not the table (the server prunes the row's old versions in place).
fn small(j: u64) -> Vec<u8> {
    let mut v = row(j);
    v.truncate(1_900);
    v
}

/// An engine on a server whose data directory is on a 200 MiB tmpfs,
/// the tmpfs filled but for some MiB. Fields drop in order: the engine,
/// the server, then the mount.
struct Full {
    e: PostgresEngine,
    a: Keyspace,
    server: TestServer,
    /// The file filling the tmpfs: removed when space is to return.
    filler: PathBuf,
    _mount: Mount,
}

impl Full {
    /// `None` (said on stdout) without the right to mount a tmpfs.
    fn new(name: &str, spare_mib: u64) -> Option<Self> {
        if !may_mount_tmpfs() {
            println!("skipped: no tmpfs to fill (needs root)");
            return None;
        }
        let mount = Mount::new(name, 200).expect("mount a tmpfs");
        let server = TestServer::start_under(mount.path(), &[]).expect("a server on the tmpfs");
        let config = server.database(name).unwrap();
        let e = PostgresEngine::open(
            config,
            vec![KeyspaceSpec::new("a", Profile::General)],
            PostgresOptions::default(),
        )
        .unwrap();
        let a = e.keyspace("a").unwrap();
        let filler = mount.path().join("filler");
        fill(&filler, spare_mib << 20).expect("fill the tmpfs");
        Some(Self {
            e,
            a,
            server,
            filler,
            _mount: mount,
        })
    }

    /// Gives the space back, then runs `attempt` until it succeeds, the
    /// server started again between tries (it stops when it cannot
    /// recover on the full disk, as its operator would start it): 60 tries
    /// half a second apart.
    fn space_back<T, Err: std::fmt::Display>(
        &self,
        mut attempt: impl FnMut() -> Result<T, Err>,
    ) -> T {
        std::fs::remove_file(&self.filler).unwrap();
        let mut result = attempt();
        for _ in 0..60 {
            if result.is_ok() {
                break;
            }
            // Refused while the server runs (it restarted by itself):
            // the next attempt is what is checked.
            let _ = self.server.restart();
            std::thread::sleep(Duration::from_millis(500));
            result = attempt();
        }
        result.unwrap_or_else(|err| panic!("nothing once space returned: {err}"))
    }
}

/// Commits `put(n, durability)` for `n` = 1, 2, … (every other one
/// `Immediate`) until one fails, which must be a typed error: that
/// error, the last `n` tried and the last `Immediate` one acknowledged.
fn until_refused(
    most: u64,
    put: impl Fn(u64, Durability) -> Result<strata_engine::CommitInfo, CommitError>,
) -> (CommitError, u64, u64) {
    let (mut last_immediate, mut n) = (0, 0);
    let failure = loop {
        n += 1;
        assert!(n < most, "{most} commits and the disk is not full");
        let durability = if n.is_multiple_of(2) {
            Durability::Immediate
        } else {
            Durability::Buffered
        };
        match put(n, durability) {
            Ok(_) if durability == Durability::Immediate => last_immediate = n,
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
        "{n} commits tried, then: {}",
        strata_engine::ErrorChain(&failure)
    );
    (failure, n, last_immediate)
}

/// On a tmpfs filled but for 6 MiB, the engine commits 4 KiB rows, every
/// other one `Immediate`, until the server cannot extend a table file (an
/// `ERROR`: `Backend`). Acknowledged commits read while the disk is full
/// (when the server answers); once space returns the same engine commits
/// again, and the rows are the commits `1..=p` and the one retried, `p`
/// reaching every acknowledged `Immediate` commit (buffered ones after it
/// may go, as in a crash), every row unchanged.
#[test]
fn a_full_disk_is_an_error_and_keeps_every_durable_commit() {
    let Some(full) = Full::new("full", 6) else {
        return;
    };
    let (e, a) = (&full.e, full.a);
    let put = |i: u64, durability: Durability| {
        e.commit(
            Commit::new()
                .put(a, i.to_be_bytes().to_vec(), row(i))
                .durability(durability),
        )
    };
    let (_, i, last_immediate) = until_refused(100_000, put);
    assert!(i > 100, "only {i} commits before the disk filled");
    // What was acknowledged reads while the disk is full, if the server
    // answers at all.
    if let Ok(snap) = e.snapshot() {
        for k in [1, i / 2, last_immediate] {
            if let Ok(v) = snap.get(a, &k.to_be_bytes()) {
                assert_eq!(v, Some(row(k)), "commit {k} reads wrong on a full disk");
            }
        }
    }
    full.space_back(|| put(i, Durability::Immediate));
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
    println!("{p} commits kept ({last_immediate} the last immediate)");
}

/// The log that cannot grow: one row rewritten on a tmpfs filled but for
/// 8 MiB, until the server needs a new 16 MiB log segment it cannot
/// create (a `PANIC`: every connection dropped, the server restarting or
/// stopping; the commit in flight `OutcomeUnknown`). Once space returns
/// and the server runs, the row holds a commit between the last
/// acknowledged `Immediate` one and the last tried, whole, and the same
/// engine commits again.
#[test]
fn a_log_that_cannot_grow_is_an_error_and_keeps_every_durable_commit() {
    let Some(full) = Full::new("wal", 8) else {
        return;
    };
    let (e, a) = (&full.e, full.a);
    let put = |j: u64, durability: Durability| {
        e.commit(
            Commit::new()
                .put(a, b"hot".to_vec(), small(j))
                .durability(durability),
        )
    };
    let (_, j, last_immediate) = until_refused(200_000, put);
    assert!(
        last_immediate > 1_000,
        "only {last_immediate} commits before the log filled"
    );
    // Read once the server answers again (recovered, or started again).
    let held = full.space_back(|| {
        let v = e.snapshot()?.get(a, b"hot")?.expect("the row");
        Ok::<_, strata_engine::ReadError>(u64::from_be_bytes(v[..8].try_into().unwrap()))
    });
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
    put(j + 1, Durability::Immediate).expect("a commit once space returned");
    assert_eq!(
        e.snapshot().unwrap().get(a, b"hot").unwrap(),
        Some(small(j + 1)),
        "the commit made once space returned"
    );
}
