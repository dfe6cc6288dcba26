//! The process-kill test shared by engines that persist to files.

// Test code: short names read better in the assertions.
#![allow(clippy::many_single_char_names)]

use strata_engine::{
    Commit, Durability, Engine, KeyspaceSpec, Profile, RangeSpec, Rng, SeededRng, Snapshot,
};

/// The process-kill test, for engines that persist to files: this test
/// binary runs itself again as a child (the test named `test`, with
/// `STRATA_KILL_WRITER` set to the database path) that commits pairs of rows
/// to keyspaces `a` and `b` with `durability` and prints each
/// acknowledgement; the parent kills it with SIGKILL after a random number
/// of acknowledgements and a random pause, reopens with `open`, and checks
/// that every acknowledged commit is there, that none is there by half,
/// and that the version counts the commits. `rounds` kills, or
/// `STRATA_KILL_ROUNDS`.
///
/// Call it from a `#[test]` named `test` (its full path, as `--exact`
/// takes it): in the child the same call becomes the writer.
///
/// Returns what the kills saw, for the caller to check that they really
/// ran (in the child, which never returns, nothing is checked).
///
/// # Panics
/// On a broken promise, naming the round.
pub fn sigkill_rounds<E: Engine>(
    test: &str,
    durability: Durability,
    rounds: u64,
    open: impl Fn(&std::path::Path, Vec<KeyspaceSpec>) -> E,
) -> KillReport {
    let report = kill_rounds(test, Kept::Acknowledged(durability), rounds, open);
    assert_eq!(report.lost, 0, "acknowledged commits were lost");
    report
}

/// What the kills of [`sigkill_rounds`] and
/// [`sigkill_rounds_losing_unsynced`] saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KillReport {
    /// Kills made (the `rounds` asked for, or `STRATA_KILL_ROUNDS`).
    pub rounds: u64,
    /// Acknowledgements the child printed before its kills, in all: at
    /// least one a round (the parent waits for a random number from 1 to
    /// 60 before it kills).
    pub acknowledged: u64,
    /// Acknowledged commits missing after the reopens, in all (only an
    /// engine losing unsynced commits may have any).
    pub lost: u64,
    /// The commits found after the last reopen: every commit of every
    /// round that survived, as each round goes on from the last.
    pub last_version: u64,
    /// Syncs the child acknowledged before its kills, in all (only
    /// [`sigkill_rounds_losing_unsynced`]'s child syncs: one after each
    /// `sync_every`-th commit, so their count follows from the commits).
    pub syncs: u64,
    /// Rounds in which the child stopped at the commit asked for and was
    /// killed waiting, its buffered commits still in the process (only
    /// [`sigkill_rounds_losing_unsynced`]'s: every other round, the first
    /// included).
    pub paused: u64,
}

/// The process-kill test for an engine whose buffered commits a process
/// kill may lose: the child commits with `Buffered` durability and calls
/// `sync()` after every `sync_every`-th commit, printing each
/// acknowledgement and each sync. After each kill the parent checks the
/// lost-suffix half of the contract: the commits there are exactly the
/// first `m` (no hole, none by half), `m` reaches at least the last commit
/// a sync acknowledged, and the version is `m`. Returns how many
/// acknowledged commits the kills lost in all, so that the caller can
/// check the engine really loses them (else the test proves nothing about
/// the suffix), in [`KillReport::lost`].
///
/// # Panics
/// On a broken promise, naming the round.
pub fn sigkill_rounds_losing_unsynced<E: Engine>(
    test: &str,
    sync_every: u64,
    rounds: u64,
    open: impl Fn(&std::path::Path, Vec<KeyspaceSpec>) -> E,
) -> KillReport {
    kill_rounds(test, Kept::Synced { sync_every }, rounds, open)
}

/// What a kill must keep.
#[derive(Debug, Clone, Copy)]
enum Kept {
    /// Every acknowledged commit, committed with this durability.
    Acknowledged(Durability),
    /// Every commit up to the last acknowledged sync (commits buffered,
    /// a sync after every `sync_every`-th).
    Synced { sync_every: u64 },
}

#[allow(clippy::too_many_lines)] // a round's steps read best in order
fn kill_rounds<E: Engine>(
    test: &str,
    kept: Kept,
    rounds: u64,
    open: impl Fn(&std::path::Path, Vec<KeyspaceSpec>) -> E,
) -> KillReport {
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};

    const WRITER: &str = "STRATA_KILL_WRITER";
    const PAUSE: &str = "STRATA_KILL_PAUSE_AT";
    let specs = || {
        vec![
            KeyspaceSpec::new("a", Profile::General),
            KeyspaceSpec::new("b", Profile::AppendOnly),
        ]
    };
    if let Ok(path) = std::env::var(WRITER) {
        let pause_at = std::env::var(PAUSE).ok().and_then(|n| n.parse().ok());
        write_until_killed(&open(std::path::Path::new(&path), specs()), kept, pause_at);
        unreachable!("the writer commits until it is killed");
    }
    let rounds = std::env::var("STRATA_KILL_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(rounds);
    let dir = std::env::temp_dir().join(format!(
        "strata-kill-{}-{}",
        std::process::id(),
        test.replace(':', "_")
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("db");
    let mut rng = SeededRng::new(0x00C0_FFEE);
    let (mut acked_total, mut lost_total, mut last_version) = (0, 0, 0);
    let (mut syncs_total, mut paused_total) = (0, 0);
    for round in 0..rounds {
        let wanted = 1 + rng.below(60);
        // With buffered commits, every other round the child stops after
        // `wanted` commits and waits to be killed, its commits since the
        // last sync still in the process: a kill at a random moment mostly
        // lands in a sync, which writes them out.
        let pause = matches!(kept, Kept::Synced { .. }) && round % 2 == 0;
        let mut command = Command::new(std::env::current_exe().unwrap());
        command
            .args(["--exact", test, "--nocapture"])
            .env(WRITER, &path);
        if pause {
            command.env(PAUSE, wanted.to_string());
        }
        let mut child = command
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn writer");
        let mut acked: Vec<u64> = Vec::new();
        let (mut synced, mut syncs) = (0, 0);
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let mut read = |line: &str, acked: &mut Vec<u64>| {
            let number = |prefix: &str| {
                line.strip_prefix(prefix)
                    .and_then(|n| n.parse::<u64>().ok())
            };
            acked.extend(number("ack "));
            if let Some(n) = number("synced ") {
                synced = synced.max(n);
                syncs += 1;
            }
        };
        while acked.len() < usize::try_from(wanted).unwrap() {
            let Some(Ok(line)) = lines.next() else { break };
            read(&line, &mut acked);
        }
        if pause {
            while let Some(Ok(line)) = lines.next() {
                if line == "paused" {
                    paused_total += 1;
                    break;
                }
                read(&line, &mut acked);
            }
        } else {
            // A random moment: right away, or after a short while of writing.
            std::thread::sleep(std::time::Duration::from_micros(rng.below(3_000)));
        }
        child.kill().expect("SIGKILL");
        let _ = child.wait();
        // Lines printed before the kill count too.
        for line in lines.map_while(Result::ok) {
            read(&line, &mut acked);
        }
        let e = open(&path, specs());
        let m = check_prefix(round, &e);
        last_version = m;
        let newest = acked.iter().copied().max().unwrap_or(0);
        match kept {
            Kept::Acknowledged(_) => {
                assert!(
                    newest <= m,
                    "round {round}: acknowledged commit {newest} lost (only {m} there)"
                );
            }
            Kept::Synced { .. } => {
                assert!(
                    synced <= m,
                    "round {round}: commit {synced}, made durable by an acknowledged sync, lost (only {m} there)"
                );
                lost_total += newest.saturating_sub(m);
            }
        }
        acked_total += acked.len() as u64;
        syncs_total += syncs;
    }
    let _ = std::fs::remove_dir_all(&dir);
    println!(
        "{rounds} kills ({paused_total} while paused), {acked_total} acknowledged commits checked, {syncs_total} syncs, {lost_total} unsynced ones lost"
    );
    KillReport {
        rounds,
        acknowledged: acked_total,
        lost: lost_total,
        last_version,
        syncs: syncs_total,
        paused: paused_total,
    }
}

/// The child: commits forever, printing each acknowledgement and sync.
fn write_until_killed<E: Engine>(e: &E, kept: Kept, pause_at: Option<u64>) {
    let (a, b) = (e.keyspace("a").unwrap(), e.keyspace("b").unwrap());
    let durability = match kept {
        Kept::Acknowledged(d) => d,
        Kept::Synced { .. } => Durability::Buffered,
    };
    let start = e.last_version();
    for i in start + 1..start + 1_000_000 {
        let v = i.to_be_bytes().to_vec();
        let c = Commit::new()
            .put(a, v.clone(), vec![1; 700])
            .put(b, v, vec![2; 700])
            .durability(durability);
        e.commit(c).expect("child commit");
        println!("ack {i}");
        if let Kept::Synced { sync_every } = kept
            && i % sync_every.max(1) == 0
        {
            let synced = e.sync().expect("child sync");
            println!("synced {synced}");
        }
        if pause_at == Some(i - start) {
            println!("paused");
            loop {
                std::thread::sleep(std::time::Duration::from_secs(1));
            }
        }
    }
}

/// Checks that keyspaces `a` and `b` of `e` hold exactly commits `1..=m`
/// (no hole, none by half) and that the version is `m`; returns `m`.
fn check_prefix<E: Engine>(round: u64, e: &E) -> u64 {
    let snap = e.snapshot().unwrap();
    let keys = |name| -> Vec<Vec<u8>> {
        snap.range(e.keyspace(name).unwrap(), RangeSpec::all())
            .unwrap()
            .map(|r| r.unwrap().0)
            .collect()
    };
    let (ka, kb) = (keys("a"), keys("b"));
    let version = e.last_version();
    assert_eq!(ka, kb, "round {round}: a commit is there by half");
    let m = ka.len() as u64;
    for (j, k) in ka.iter().enumerate() {
        assert_eq!(
            k.as_slice(),
            (j as u64 + 1).to_be_bytes(),
            "round {round}: commit {} is missing while later ones are there (a hole)",
            j + 1
        );
    }
    assert_eq!(version, m, "round {round}: versions count commits");
    m
}
