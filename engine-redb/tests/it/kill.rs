//! Process kill: a child process commits with `Immediate` durability and
//! reports each acknowledged commit; the parent kills it with SIGKILL at a
//! random moment, reopens the database, and checks that every acknowledged
//! commit is there and that no commit is there by half.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use strata_engine::{Commit, Durability, Engine, KeyspaceSpec, Profile, Rng, SeededRng, Snapshot};
use strata_engine_redb::{RedbEngine, RedbOptions};

/// Kill rounds in the default suite; more with `STRATA_KILL_ROUNDS`.
const ROUNDS: u64 = 12;
const WRITER: &str = "STRATA_REDB_KILL_WRITER";

fn specs() -> Vec<KeyspaceSpec> {
    vec![
        KeyspaceSpec::new("a", Profile::General),
        KeyspaceSpec::new("b", Profile::General),
    ]
}

/// The child's role: commit pairs of rows forever, printing each ack.
fn writer(path: &str) {
    let e = RedbEngine::open(path, specs(), RedbOptions::default()).expect("child open");
    let (a, b) = (e.keyspace("a").unwrap(), e.keyspace("b").unwrap());
    let start = e.last_version();
    for i in start + 1..start + 100_000 {
        let v = i.to_be_bytes().to_vec();
        let c = Commit::new()
            .put(a, v.clone(), vec![1; 700])
            .put(b, v, vec![2; 700])
            .durability(Durability::Immediate);
        let info = e.commit(c).expect("child commit");
        println!("ack {} {}", i, info.version);
    }
}

#[test]
fn sigkill_loses_no_acknowledged_immediate_commit() {
    if let Ok(path) = std::env::var(WRITER) {
        writer(&path);
        return;
    }
    let rounds = std::env::var("STRATA_KILL_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(ROUNDS);
    let dir = std::env::temp_dir().join(format!("strata-redb-kill-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("db.redb");
    let mut rng = SeededRng::new(0x00C0_FFEE);
    let mut acked_total = 0;
    for round in 0..rounds {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "kill::sigkill_loses_no_acknowledged_immediate_commit",
                "--nocapture",
            ])
            .env(WRITER, &path)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn writer");
        let wanted = 1 + rng.below(40);
        let mut acked = Vec::new();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        while acked.len() < usize::try_from(wanted).unwrap() {
            let Some(Ok(line)) = lines.next() else { break };
            if let Some(rest) = line.strip_prefix("ack ") {
                let i: u64 = rest.split(' ').next().unwrap().parse().unwrap();
                acked.push(i);
            }
        }
        // A random moment: right away, or after a short while of writing.
        std::thread::sleep(std::time::Duration::from_micros(rng.below(3_000)));
        child.kill().expect("SIGKILL");
        let _ = child.wait();
        // Acks printed before the kill also count.
        for line in lines.map_while(Result::ok) {
            if let Some(rest) = line.strip_prefix("ack ") {
                acked.push(rest.split(' ').next().unwrap().parse().unwrap());
            }
        }
        let e =
            RedbEngine::open(&path, specs(), RedbOptions::default()).expect("reopen after kill");
        let (a, b) = (e.keyspace("a").unwrap(), e.keyspace("b").unwrap());
        let snap = e.snapshot().unwrap();
        for i in &acked {
            let k = i.to_be_bytes();
            assert!(
                snap.get(a, &k).unwrap().is_some() && snap.get(b, &k).unwrap().is_some(),
                "round {round}: acknowledged commit {i} lost"
            );
        }
        let ka: Vec<Vec<u8>> = snap
            .range(a, strata_engine::RangeSpec::all())
            .unwrap()
            .map(|r| r.unwrap().0)
            .collect();
        let kb: Vec<Vec<u8>> = snap
            .range(b, strata_engine::RangeSpec::all())
            .unwrap()
            .map(|r| r.unwrap().0)
            .collect();
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
