//! The full-disk test shared by engines that persist to files.

// Test code: short names read better in the assertions.
#![allow(clippy::many_single_char_names)]

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use strata_engine::{
    Commit, CommitError, Durability, Engine, EngineError, KeyspaceSpec, Profile, RangeSpec,
    Snapshot,
};

/// What [`disk_full`] saw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiskFullReport {
    /// Commits acknowledged before the disk filled.
    pub acknowledged: u64,
    /// Acknowledged `Buffered` commits not there after the reopen (a
    /// suffix, as a crash may lose).
    pub buffered_lost: u64,
    /// Whether the engine took commits again, once space returned,
    /// without being reopened.
    pub resumed_in_place: bool,
    /// The error of the commit tried in place once space returned, if it
    /// failed.
    pub error_in_place: Option<String>,
    /// Where the tmpfs was mounted (unmounted and removed when the test
    /// returns).
    pub mount_point: PathBuf,
}

/// Whether this process may mount a tmpfs: it holds `CAP_SYS_ADMIN`
/// (bit 21 of `CapEff` in `/proc/self/status`), as root in a normal
/// container does. [`disk_full`] runs exactly when this is true (and the
/// `mount` program is there), so a test can tell a run from a skip.
#[must_use]
pub fn may_mount_tmpfs() -> bool {
    const CAP_SYS_ADMIN: u32 = 21;
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            let caps = status
                .lines()
                .find_map(|l| l.strip_prefix("CapEff:"))?
                .trim()
                .to_owned();
            u64::from_str_radix(&caps, 16).ok()
        })
        .is_some_and(|caps| caps >> CAP_SYS_ADMIN & 1 == 1)
}

/// A small tmpfs mounted for a test (which needs root: see
/// [`may_mount_tmpfs`]), unmounted and removed on drop: a file system a
/// test can fill ([`fill`]).
#[derive(Debug)]
pub struct Mount(PathBuf);

impl Mount {
    /// Mounts a tmpfs of `mib` MiB on a new directory named after `name`.
    ///
    /// # Errors
    /// `mount` missing or refusing (its message).
    pub fn new(name: &str, mib: u64) -> Result<Self, String> {
        let dir = std::env::temp_dir().join(format!("strata-full-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={mib}M"), "tmpfs"])
            .arg(&dir)
            .output()
            .map_err(|e| format!("cannot run mount: {e}"))?;
        if !out.status.success() {
            let _ = std::fs::remove_dir(&dir);
            return Err(String::from_utf8_lossy(&out.stderr).trim().to_owned());
        }
        Ok(Self(dir))
    }
}

impl Mount {
    /// Where it is mounted.
    #[must_use]
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
        let _ = std::fs::remove_dir(&self.0);
    }
}

/// Fills the rest of the file system with a new file at `path`, then
/// gives back `spare` bytes of it (remove the file to give back the rest).
///
/// # Errors
/// The file not created, cut or synced.
pub fn fill(path: &Path, spare: u64) -> std::io::Result<()> {
    let mut f = std::fs::File::create(path)?;
    let block = vec![0x5A; 1 << 16];
    let mut written = 0u64;
    loop {
        match f.write(&block) {
            Ok(0) => break,
            Ok(n) => written += n as u64,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
    let _ = f.flush();
    f.set_len(written.saturating_sub(spare))?;
    f.sync_all()
}

/// The full-disk test, for engines that persist to files. On a 48 MiB
/// tmpfs (mounted by the test, which needs root; without it the test says
/// so and returns `None`) filled but for 4 MiB, it commits 4 KiB rows,
/// every other one `Immediate`, until a commit fails, and checks:
///
/// - the failure is a typed error ([`CommitError::Backend`] or
///   [`CommitError::OutcomeUnknown`]), never a panic or a wrong success;
/// - every acknowledged commit still reads, unchanged, while the disk is
///   full;
/// - once space returns, the engine takes commits again, in place or, if
///   it cannot, after a reopen (the report says which), its error then a
///   [`ReopenRequired`](strata_engine::ReopenRequired) that says so;
/// - after a reopen, the commits there are a prefix of those attempted,
///   with no hole, reaching every acknowledged `Immediate` commit (the
///   buffered ones after it may be lost, as in a crash), then the retried
///   one; every row unchanged.
///
/// # Panics
/// On a broken promise.
pub fn disk_full<E: Engine>(
    name: &str,
    open: impl Fn(&Path, Vec<KeyspaceSpec>) -> Result<E, EngineError>,
) -> Option<DiskFullReport> {
    let mount = match Mount::new(name, 48) {
        Ok(m) => m,
        Err(why) => {
            println!("disk_full: skipped, no tmpfs to fill: {why}");
            return None;
        }
    };
    let specs = || vec![KeyspaceSpec::new("a", Profile::General)];
    let db = mount.0.join("db");
    let filler = mount.0.join("filler");
    let e = open(&db, specs()).expect("open on an empty tmpfs");
    let a = e.keyspace("a").unwrap();
    fill(&filler, 4 << 20).expect("fill the tmpfs");
    let row = |i: u64| {
        let mut v = i.to_be_bytes().to_vec();
        v.resize(4096, u8::try_from(i % 251).unwrap());
        v
    };
    let (mut acked, mut last_immediate) = (0u64, 0u64);
    let mut i = 0u64;
    let failure = loop {
        i += 1;
        assert!(i < 1_000_000, "4 MiB took a million 4 KiB commits");
        let durability = if i.is_multiple_of(2) {
            Durability::Immediate
        } else {
            Durability::Buffered
        };
        let c = Commit::new()
            .put(a, i.to_be_bytes().to_vec(), row(i))
            .durability(durability);
        match e.commit(c) {
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
    println!("disk_full: {acked} commits, then: {failure}");
    // Nothing acknowledged is lost while the disk is full.
    if let Ok(snap) = e.snapshot() {
        for k in [1, acked / 2, acked].into_iter().filter(|k| *k > 0) {
            if let Ok(v) = snap.get(a, &k.to_be_bytes()) {
                assert_eq!(v, Some(row(k)), "commit {k} reads wrong on a full disk");
            }
        }
    }
    // Space returns.
    std::fs::remove_file(&filler).unwrap();
    let retry = |e: &E, i: u64| {
        let a = e.keyspace("a").unwrap();
        e.commit(
            Commit::new()
                .put(a, i.to_be_bytes().to_vec(), row(i))
                .durability(Durability::Immediate),
        )
    };
    let in_place = retry(&e, i);
    let resumed_in_place = in_place.is_ok();
    if let Err(err) = &in_place {
        // An engine that cannot go on in place says so, typed.
        assert!(
            strata_engine::ReopenRequired::in_chain(err),
            "after space returned a commit failed without saying the engine must be reopened: {err}"
        );
    }
    let error_in_place = in_place.err().map(|e| e.to_string());
    drop(e);
    let e = open(&db, specs()).expect("reopen once space returned");
    if !resumed_in_place {
        retry(&e, i).expect("a commit once space returned and the engine reopened");
    }
    let p = check_prefix(&e, &row, i, last_immediate);
    let buffered_lost = acked - p.min(acked);
    Some(DiskFullReport {
        acknowledged: acked,
        buffered_lost,
        resumed_in_place,
        error_in_place,
        mount_point: mount.0.clone(),
    })
}

/// After the reopen: commits `1..=p` for some `p` reaching every
/// acknowledged immediate commit (the buffered ones after it may go, as in
/// a crash: a full disk may leave the engine only a reopen), then the
/// retried commit `i`, every row unchanged. Returns `p`.
fn check_prefix<E: Engine>(
    e: &E,
    row: &impl Fn(u64) -> Vec<u8>,
    i: u64,
    last_immediate: u64,
) -> u64 {
    let a = e.keyspace("a").unwrap();
    let snap = e.snapshot().unwrap();
    let mut ids: Vec<u64> = Vec::new();
    for r in snap.range(a, RangeSpec::all()).unwrap() {
        let (k, v) = r.unwrap();
        let n = u64::from_be_bytes(k.as_slice().try_into().expect("an 8-byte key"));
        assert_eq!(v, row(n), "commit {n} reads wrong after the disk filled");
        ids.push(n);
    }
    assert_eq!(
        ids.last(),
        Some(&i),
        "the commit retried once space returned is missing"
    );
    let prefix = &ids[..ids.len() - 1];
    let p = prefix.len() as u64;
    assert!(
        prefix.iter().copied().eq(1..=p),
        "after the disk filled, the commits there are not a prefix: {:?}…",
        &prefix[..prefix.len().min(5)]
    );
    assert!(
        p >= last_immediate,
        "immediate commit {last_immediate} lost: only commits up to {p} are there"
    );
    p
}
