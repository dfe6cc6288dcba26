//! Process kill: a child process commits and reports each acknowledged
//! commit; the parent kills it with SIGKILL at a random moment, reopens,
//! and checks every acknowledged commit is there and none by half. With
//! `Immediate` durability (synced WAL) and with `Buffered` (WAL written,
//! not synced: a process kill must lose nothing either).

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use strata_engine::{
    Commit, Durability, Engine, KeyspaceSpec, Profile, RangeSpec, Rng, SeededRng, Snapshot,
};
use strata_engine_rocks::{RocksEngine, RocksOptions};

use crate::TempDir;

/// Kill rounds per durability level in the default suite; more with
/// `STRATA_KILL_ROUNDS`.
const ROUNDS: u64 = 10;
const WRITER: &str = "STRATA_ROCKS_KILL_WRITER";

fn specs() -> Vec<KeyspaceSpec> {
    vec![
        KeyspaceSpec::new("a", Profile::General),
        KeyspaceSpec::new("b", Profile::AppendOnly),
    ]
}

fn writer(path: &str, durability: Durability, test: &str) {
    let _ = test;
    let e = RocksEngine::open(path, specs(), RocksOptions::default()).expect("child open");
    let (a, b) = (e.keyspace("a").unwrap(), e.keyspace("b").unwrap());
    let start = e.last_version();
    for i in start + 1..start + 100_000 {
        let v = i.to_be_bytes().to_vec();
        let c = Commit::new()
            .put(a, v.clone(), vec![1; 700])
            .put(b, v, vec![2; 700])
            .durability(durability);
        e.commit(c).expect("child commit");
        println!("ack {i}");
    }
}

fn kill_rounds(test: &str, durability: Durability) {
    if let Ok(path) = std::env::var(WRITER) {
        writer(&path, durability, test);
        return;
    }
    let rounds = std::env::var("STRATA_KILL_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(ROUNDS);
    let dir = TempDir::new("kill");
    let path = dir.0.join("db");
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
        while acked.len() < usize::try_from(wanted).unwrap() {
            let Some(Ok(line)) = lines.next() else { break };
            if let Some(rest) = line.strip_prefix("ack ") {
                acked.push(rest.parse().unwrap());
            }
        }
        std::thread::sleep(std::time::Duration::from_micros(rng.below(3_000)));
        child.kill().expect("SIGKILL");
        let _ = child.wait();
        for line in lines.map_while(Result::ok) {
            if let Some(rest) = line.strip_prefix("ack ") {
                acked.push(rest.parse().unwrap());
            }
        }
        let e =
            RocksEngine::open(&path, specs(), RocksOptions::default()).expect("reopen after kill");
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
            .range(a, RangeSpec::all())
            .unwrap()
            .map(|r| r.unwrap().0)
            .collect();
        let kb: Vec<Vec<u8>> = snap
            .range(b, RangeSpec::all())
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
    println!("{rounds} kills, {acked_total} acknowledged commits checked");
}

#[test]
fn sigkill_loses_no_acknowledged_immediate_commit() {
    kill_rounds(
        "kill::sigkill_loses_no_acknowledged_immediate_commit",
        Durability::Immediate,
    );
}

#[test]
fn sigkill_loses_no_acknowledged_buffered_commit() {
    kill_rounds(
        "kill::sigkill_loses_no_acknowledged_buffered_commit",
        Durability::Buffered,
    );
}
