//! Server crashes (`SIGKILL` of every server process) during commits of
//! both durability levels, a commit whose reply is lost, and a failover to
//! a synchronous standby. Each test runs its own server.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use strata_engine::{
    Commit, CommitError, Durability, Engine, KeyspaceSpec, Mutation, Profile, RangeSpec, Rng,
    SeededRng, Snapshot, StampAt,
};
use strata_engine_postgres::testing::TestServer;
use strata_engine_postgres::{PostgresEngine, PostgresOptions};

fn specs() -> Vec<KeyspaceSpec> {
    vec![
        KeyspaceSpec::new("log", Profile::Queue),
        KeyspaceSpec::new("kv", Profile::General),
    ]
}

/// A commit of one versionstamped row: the row's key is the commit's
/// version, so the rows present say which commits survived.
fn stamped(e: &PostgresEngine, durability: Durability) -> Result<u64, CommitError> {
    let log = e.keyspace("log").unwrap();
    e.commit(
        Commit::new()
            .mutate(Mutation::PutVersionstamped {
                ks: log,
                key: vec![0; 10],
                value: vec![u8::from(durability == Durability::Immediate); 100],
                at: StampAt::Key(0),
            })
            .durability(durability),
    )
    .map(|i| i.version)
}

/// The versions whose rows are there, in key order.
fn present(e: &PostgresEngine) -> (u64, Vec<u64>) {
    let s = e.snapshot().expect("snapshot after restart");
    let rows = s
        .range(e.keyspace("log").unwrap(), RangeSpec::all())
        .unwrap()
        .map(|r| {
            let k = r.unwrap().0;
            u64::from_be_bytes(k[..8].try_into().unwrap())
        })
        .collect();
    (s.version().unwrap(), rows)
}

/// Rounds of: two threads commit (one `Immediate`, one `Buffered`), then
/// the buffered one alone, then every server process is killed at once.
/// After the restart (the same engine reconnects) the rows are exactly the
/// commits `1..=m` for the database's version `m` (a lost suffix, no hole),
/// and every acknowledged `Immediate` commit is among them. The log writer
/// is slowed (10 s) so the buffered commits after the last durable one are
/// really in danger: the test checks that some were lost.
#[test]
fn a_server_crash_loses_at_most_a_suffix_of_buffered_commits() {
    let server = TestServer::start_with(&["wal_writer_delay = 10000ms"]).expect("a private server");
    let config = server.database("crash").unwrap();
    let e = PostgresEngine::open(config, specs(), PostgresOptions::default()).unwrap();
    let mut rng = SeededRng::new(7);
    let mut lost_buffered = 0u64;
    for round in 0..3 {
        let durable_acked = Mutex::new(Vec::new());
        let buffered_acked = Mutex::new(Vec::new());
        let stop_immediate = AtomicBool::new(false);
        let stop = AtomicBool::new(false);
        std::thread::scope(|s| {
            s.spawn(|| {
                while !stop_immediate.load(Ordering::SeqCst) {
                    if let Ok(v) = stamped(&e, Durability::Immediate) {
                        durable_acked.lock().unwrap().push(v);
                    }
                }
            });
            s.spawn(|| {
                while !stop.load(Ordering::SeqCst) {
                    match stamped(&e, Durability::Buffered) {
                        Ok(v) => buffered_acked.lock().unwrap().push(v),
                        // The server is gone: wait for the round to end.
                        Err(_) => std::thread::sleep(Duration::from_millis(20)),
                    }
                }
            });
            std::thread::sleep(Duration::from_millis(200 + rng.below(300)));
            stop_immediate.store(true, Ordering::SeqCst);
            std::thread::sleep(Duration::from_millis(100 + rng.below(100)));
            server.kill().expect("kill the server");
            std::thread::sleep(Duration::from_millis(100));
            stop.store(true, Ordering::SeqCst);
        });
        server.restart().expect("restart after the crash");
        let (m, rows) = present(&e);
        let expect: Vec<u64> = (1..=m).collect();
        assert_eq!(
            rows, expect,
            "round {round}: the rows are not the commits 1..={m}"
        );
        let durable = durable_acked.into_inner().unwrap();
        let newest = durable.iter().copied().max().unwrap_or(0);
        assert!(
            !durable.is_empty(),
            "round {round}: no durable commit was made"
        );
        assert!(
            newest <= m,
            "round {round}: acknowledged durable commit {newest} lost (only {m} there)"
        );
        let buffered = buffered_acked.into_inner().unwrap();
        lost_buffered += buffered.iter().filter(|v| **v > m).count() as u64;
        // The engine goes on after the restart, from the recovered version.
        let next = stamped(&e, Durability::Immediate).expect("a commit after the restart");
        assert_eq!(
            next,
            m + 1,
            "round {round}: versions go on from the recovered one"
        );
    }
    println!("3 crashes, {lost_buffered} acknowledged buffered commits lost");
    assert!(
        lost_buffered > 0,
        "no buffered commit was at risk: the test proves nothing about the suffix"
    );
}

/// The commonest commit, a put in one keyspace, goes as one prepared call
/// of its table's procedure, which commits the row and then the flush
/// write itself. Rounds of 30 puts, one thread, every third `Immediate`,
/// then every server process is killed: after the restart the round's puts
/// present are a prefix of those made (a lost suffix, no hole) holding
/// every acknowledged `Immediate` one, and some buffered ones after the
/// last of those were really lost.
#[test]
fn one_call_durable_puts_survive_a_server_crash() {
    let server = TestServer::start_with(&["wal_writer_delay = 10000ms"]).expect("a private server");
    let config = server.database("crash_call").unwrap();
    let e = PostgresEngine::open(config, specs(), PostgresOptions::default()).unwrap();
    let kv = e.keyspace("kv").unwrap();
    let key = |round: u32, i: u32| format!("r{round}-{i:03}").into_bytes();
    let mut lost_buffered = 0;
    for round in 0..3u32 {
        let mut durable = Vec::new();
        let mut made = 0;
        for i in 0..30u32 {
            let d = if i % 3 == 0 {
                Durability::Immediate
            } else {
                Durability::Buffered
            };
            let info = e
                .commit(
                    Commit::new()
                        .put(kv, key(round, i), i.to_be_bytes().to_vec())
                        .durability(d),
                )
                .expect("a put before the crash");
            assert_eq!(info.durable, d == Durability::Immediate);
            if info.durable {
                durable.push(i);
            }
            made = i + 1;
        }
        server.kill().expect("kill the server");
        server.restart().expect("restart after the crash");
        let s = e.snapshot().expect("a snapshot after the restart");
        let present: Vec<u32> = (0..made)
            .filter(|i| s.get(kv, &key(round, *i)).unwrap().is_some())
            .collect();
        let n = u32::try_from(present.len()).unwrap();
        assert_eq!(
            present,
            (0..n).collect::<Vec<_>>(),
            "round {round}: the puts there are not a prefix"
        );
        let last_durable = *durable.last().unwrap();
        assert!(
            last_durable < n,
            "round {round}: acknowledged durable put {last_durable} lost (only {n} there)"
        );
        lost_buffered += made - n;
    }
    assert!(
        lost_buffered > 0,
        "no buffered put was at risk: the test proves nothing about the flush"
    );
}

/// A way to commit one stamped row, returning its version.
type Way = fn(&PostgresEngine, Durability) -> Result<u64, CommitError>;

/// A stamped commit that also requires a key absent: it reads, so it takes
/// the general way (version lock first, writes with the `COMMIT`).
fn stamped_checked(e: &PostgresEngine, durability: Durability) -> Result<u64, CommitError> {
    let log = e.keyspace("log").unwrap();
    e.commit(
        Commit::new()
            .require(strata_engine::Predicate::Absent {
                ks: log,
                key: b"never".to_vec(),
            })
            .mutate(Mutation::PutVersionstamped {
                ks: log,
                key: vec![0; 10],
                value: vec![1; 100],
                at: StampAt::Key(0),
            })
            .durability(durability),
    )
    .map(|i| i.version)
}

/// An `Immediate` commit waits for a synchronous standby that never
/// comes; its session is ended by the server, so its reply is lost. The
/// engine asks the server what became of the transaction (it committed
/// locally) and reports it applied, with its version, durable once a sync
/// succeeded; it never commits it twice. Both ways a commit can go: one
/// that reads nothing (its version found from its session's row), and one
/// with a predicate.
#[test]
fn a_lost_commit_reply_is_resolved_not_retried() {
    let server = TestServer::start().expect("a private server");
    let config = server.database("lost_reply").unwrap();
    let dbname = config.get_dbname().unwrap().to_owned();
    let e = PostgresEngine::open(config, specs(), PostgresOptions::default()).unwrap();
    let mut versions = vec![stamped(&e, Durability::Immediate).unwrap()];
    let ways: [Way; 2] = [stamped, stamped_checked];
    for (way, commit) in ways.into_iter().enumerate() {
        server
            .admin("ALTER SYSTEM SET synchronous_standby_names = 'nobody_standby'")
            .unwrap();
        server.admin("SELECT pg_reload_conf()").unwrap();
        // The checkpointer takes the new setting up asynchronously.
        std::thread::sleep(Duration::from_secs(1));
        let done = AtomicBool::new(false);
        let result = std::thread::scope(|s| {
            let pending = s.spawn(|| {
                let r = commit(&e, Durability::Immediate);
                done.store(true, Ordering::SeqCst);
                r
            });
            // The commit is waiting for the standby: end its session.
            std::thread::sleep(Duration::from_millis(500));
            assert!(
                !done.load(Ordering::SeqCst),
                "way {way}: the commit did not wait for the standby"
            );
            server
                .admin(&format!(
                    "SELECT pg_terminate_backend(pid, 10000) FROM pg_stat_activity \
                     WHERE datname = '{dbname}' AND wait_event = 'SyncRep'"
                ))
                .unwrap();
            std::thread::sleep(Duration::from_millis(300));
            // Let the sync the engine runs to learn durability through.
            server
                .admin("ALTER SYSTEM RESET synchronous_standby_names")
                .unwrap();
            server.admin("SELECT pg_reload_conf()").unwrap();
            pending.join().unwrap()
        });
        let v = result.unwrap_or_else(|err| panic!("way {way}: not resolved as committed: {err}"));
        assert_eq!(v, versions.last().unwrap() + 1, "way {way}");
        versions.push(v);
        let (m, rows) = present(&e);
        assert_eq!(
            (m, &rows),
            (v, &versions),
            "way {way}: applied once, not retried"
        );
        assert!(e.durable_version() >= v, "way {way}");
    }
}

/// A primary with a synchronous standby on the same machine: `Immediate`
/// commits are acknowledged once the standby has them. The primary is
/// killed, the standby promoted; every acknowledged commit is on it, the
/// engine (configured with both servers, `target_session_attrs=read-write`)
/// reconnects to the new primary, and versions go on without reuse.
#[test]
fn failover_to_a_synchronous_standby_keeps_every_durable_commit() {
    let primary = TestServer::start().expect("a primary");
    let config = primary.database("failover").unwrap();
    let dbname = config.get_dbname().unwrap().to_owned();
    let standby = primary.start_standby().expect("a standby");
    primary
        .admin("ALTER SYSTEM SET synchronous_standby_names = '*'")
        .unwrap();
    primary.admin("SELECT pg_reload_conf()").unwrap();
    let url = format!(
        "host={},{} port={} user={} dbname={dbname} target_session_attrs=read-write connect_timeout=5",
        primary.socket_dir().display(),
        standby.socket_dir().display(),
        strata_engine_postgres::testing::PORT,
        strata_engine_postgres::testing::USER,
    );
    let e = PostgresEngine::connect(&url, specs(), PostgresOptions::default()).unwrap();
    let acked = Mutex::new(Vec::new());
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| {
                while !stop.load(Ordering::SeqCst) {
                    match stamped(&e, Durability::Immediate) {
                        Ok(v) => acked.lock().unwrap().push(v),
                        Err(_) => std::thread::sleep(Duration::from_millis(20)),
                    }
                }
            });
        }
        std::thread::sleep(Duration::from_millis(700));
        primary.kill().expect("kill the primary");
        std::thread::sleep(Duration::from_millis(100));
        stop.store(true, Ordering::SeqCst);
    });
    let acked = acked.into_inner().unwrap();
    assert!(
        acked.len() > 10,
        "too few commits before the failover: {}",
        acked.len()
    );
    standby.promote().expect("promote the standby");
    let newest = *acked.iter().max().unwrap();
    // The engine's pooled connections point at the dead primary.
    let (m, rows) = {
        let mut tries = 0;
        loop {
            match e.snapshot() {
                Ok(_) => break present(&e),
                // The new primary may still be finishing its promotion.
                Err(_) if tries < 20 => {
                    tries += 1;
                    std::thread::sleep(Duration::from_millis(250));
                }
                Err(err) => panic!("no connection to the new primary: {err}"),
            }
        }
    };
    assert_eq!(
        rows,
        (1..=m).collect::<Vec<_>>(),
        "the standby holds commits 1..={m}, no hole"
    );
    assert!(
        newest <= m,
        "acknowledged commit {newest} is not on the standby (it has {m})"
    );
    let next = stamped(&e, Durability::Immediate).expect("a commit on the new primary");
    assert_eq!(next, m + 1, "versions go on, none reused");
    assert!(next > newest);
    drop(primary);
}
