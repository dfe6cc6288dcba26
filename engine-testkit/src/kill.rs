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
/// # Panics
/// On a broken promise, naming the round.
pub fn sigkill_rounds<E: Engine>(
    test: &str,
    durability: Durability,
    rounds: u64,
    open: impl Fn(&std::path::Path, Vec<KeyspaceSpec>) -> E,
) {
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};

    const WRITER: &str = "STRATA_KILL_WRITER";
    let specs = || {
        vec![
            KeyspaceSpec::new("a", Profile::General),
            KeyspaceSpec::new("b", Profile::AppendOnly),
        ]
    };
    if let Ok(path) = std::env::var(WRITER) {
        // The child: commit forever, printing each acknowledgement.
        let e = open(std::path::Path::new(&path), specs());
        let (a, b) = (e.keyspace("a").unwrap(), e.keyspace("b").unwrap());
        let start = e.last_version();
        for i in start + 1..start + 1_000_000 {
            let v = i.to_be_bytes().to_vec();
            let c = Commit::new()
                .put(a, v.clone(), vec![1; 700])
                .put(b, v, vec![2; 700])
                .durability(durability);
            e.commit(c).expect("child commit");
            println!("ack {i}");
        }
        return;
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
    let mut acked_total = 0;
    for round in 0..rounds {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args(["--exact", test, "--nocapture"])
            .env(WRITER, &path)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn writer");
        let wanted = 1 + rng.below(60);
        let mut acked: Vec<u64> = Vec::new();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let ack = |line: &str| {
            line.strip_prefix("ack ")
                .and_then(|n| n.parse::<u64>().ok())
        };
        while acked.len() < usize::try_from(wanted).unwrap() {
            let Some(Ok(line)) = lines.next() else { break };
            acked.extend(ack(&line));
        }
        // A random moment: right away, or after a short while of writing.
        std::thread::sleep(std::time::Duration::from_micros(rng.below(3_000)));
        child.kill().expect("SIGKILL");
        let _ = child.wait();
        // Acknowledgements printed before the kill count too.
        acked.extend(lines.map_while(Result::ok).filter_map(|l| ack(&l)));
        let e = open(&path, specs());
        let (a, b) = (e.keyspace("a").unwrap(), e.keyspace("b").unwrap());
        let snap = e.snapshot().unwrap();
        for i in &acked {
            let k = i.to_be_bytes();
            assert!(
                snap.get(a, &k).unwrap().is_some() && snap.get(b, &k).unwrap().is_some(),
                "round {round}: acknowledged commit {i} lost"
            );
        }
        let keys = |ks| -> Vec<Vec<u8>> {
            snap.range(ks, RangeSpec::all())
                .unwrap()
                .map(|r| r.unwrap().0)
                .collect()
        };
        let (ka, kb) = (keys(a), keys(b));
        assert_eq!(ka, kb, "round {round}: a commit is there by half");
        assert_eq!(
            e.last_version(),
            ka.len() as u64,
            "round {round}: versions count commits"
        );
        acked_total += acked.len();
    }
    let _ = std::fs::remove_dir_all(&dir);
    println!("{rounds} kills, {acked_total} acknowledged commits checked");
}
