//! Several processes on one database, and connections the server drops.

use std::process::{Command, Stdio};

use strata_engine::{
    Commit, Durability, Engine, KeyspaceSpec, Mutation, Profile, RangeSpec, Snapshot, StampAt,
};
use strata_engine_postgres::{PostgresEngine, PostgresOptions};

const CHILD: &str = "STRATA_PG_CHILD";
const COMMITS: u64 = 150;

fn specs() -> Vec<KeyspaceSpec> {
    vec![
        KeyspaceSpec::new("rows", Profile::General),
        KeyspaceSpec::new("log", Profile::Queue),
    ]
}

/// Writer `id`'s commit number `i`: a row of its own, the shared counter
/// and a versionstamped log entry; returns its version.
fn logged_commit(e: &PostgresEngine, id: u8, i: u64, durability: Durability) -> u64 {
    let (rows, log) = (e.keyspace("rows").unwrap(), e.keyspace("log").unwrap());
    e.commit(
        Commit::new()
            .durability(durability)
            .put(rows, [&[id][..], &i.to_be_bytes()].concat(), vec![id])
            .mutate(Mutation::Add {
                ks: rows,
                key: b"count".to_vec(),
                delta: 1,
            })
            .mutate(Mutation::PutVersionstamped {
                ks: log,
                key: [&b"e"[..], &[0; 10]].concat(),
                value: [&[id][..], &i.to_be_bytes()].concat(),
                at: StampAt::Key(1),
            }),
    )
    .expect("a writer's commit")
    .version
}

/// One writer process: `COMMITS` commits, printing each one's version.
fn child(config: &str, id: u8) {
    let e =
        PostgresEngine::connect(config, specs(), PostgresOptions::default()).expect("child open");
    for i in 0..COMMITS {
        let durability = if i % 3 == 0 {
            Durability::Immediate
        } else {
            Durability::Buffered
        };
        println!("v {} {id} {i}", logged_commit(&e, id, i, durability));
    }
}

/// Two processes commit in a loop on one database, with this process
/// committing too: no version is given twice, none is skipped, no write is
/// lost, and the log's versionstamps are the versions each commit was told.
#[test]
fn two_processes_commit_without_duplicates_or_losses() {
    if let Ok(spec) = std::env::var(CHILD) {
        let (id, config) = spec.split_once(' ').expect("id and config");
        child(config, id.parse().expect("id"));
        return;
    }
    let (server, config, e) = super::open("processes", specs(), PostgresOptions::default());
    let dbname = config.get_dbname().expect("dbname").to_owned();
    let url = format!(
        "host={} port={} user={} dbname={dbname}",
        server.socket_dir().display(),
        strata_engine_postgres::testing::PORT,
        strata_engine_postgres::testing::USER
    );
    let children: Vec<_> = (1..=2u8)
        .map(|id| {
            Command::new(std::env::current_exe().unwrap())
                .args([
                    "--exact",
                    "processes::two_processes_commit_without_duplicates_or_losses",
                    "--nocapture",
                ])
                .env(CHILD, format!("{id} {url}"))
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit())
                .spawn()
                .expect("spawn a writer")
        })
        .collect();
    let (rows, log) = (e.keyspace("rows").unwrap(), e.keyspace("log").unwrap());
    // (version, writer, i) of every commit, this process's as writer 0.
    let mut told: Vec<(u64, u8, u64)> = Vec::new();
    for i in 0..COMMITS {
        let version = logged_commit(&e, 0, i, Durability::Buffered);
        told.push((version, 0, i));
    }
    for c in children {
        let out = c.wait_with_output().expect("writer output");
        assert!(out.status.success(), "a writer process failed");
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            let mut f = line
                .strip_prefix("v ")
                .map(|l| l.split(' ').map(|n| n.parse::<u64>().unwrap()));
            if let Some(f) = f.as_mut() {
                let (v, id, i) = (f.next().unwrap(), f.next().unwrap(), f.next().unwrap());
                told.push((v, u8::try_from(id).unwrap(), i));
            }
        }
    }
    let total = 3 * COMMITS;
    assert_eq!(told.len() as u64, total, "every commit reported");
    let mut versions: Vec<u64> = told.iter().map(|t| t.0).collect();
    versions.sort_unstable();
    versions.dedup();
    assert_eq!(versions.len() as u64, total, "a version was given twice");
    assert_eq!(
        versions.last().copied(),
        Some(versions[0] + total - 1),
        "versions have a gap"
    );
    let synced = e.sync().unwrap();
    assert_eq!(
        synced,
        versions[0] + total - 1,
        "the database's version is the last commit's"
    );
    let s = e.snapshot().unwrap();
    assert_eq!(
        s.get(rows, b"count").unwrap(),
        Some((i64::try_from(total).unwrap()).to_le_bytes().to_vec())
    );
    let n_rows = s.range(rows, RangeSpec::all()).unwrap().count() as u64;
    assert_eq!(n_rows, total + 1, "every row and the counter");
    // The log in key order is the commits in version order, each entry
    // stamped with the version its writer was told.
    told.sort_unstable();
    let entries: Vec<(Vec<u8>, Vec<u8>)> = s
        .range(log, RangeSpec::all())
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(entries.len() as u64, total);
    for ((key, value), (v, id, i)) in entries.iter().zip(&told) {
        assert_eq!(key[1..9], v.to_be_bytes(), "stamp of commit {v}");
        assert_eq!(key[9..11], [0, 0]);
        assert_eq!(value[..], [&[*id][..], &i.to_be_bytes()].concat()[..]);
    }
}

/// The server ends every connection of the engine: the next snapshot and
/// commit connect anew; a snapshot whose connection died fails its reads
/// with a typed error.
#[test]
fn dropped_connections_are_reestablished() {
    let (server, config, e) = super::open("dropped", specs(), PostgresOptions::default());
    let rows = e.keyspace("rows").unwrap();
    e.commit(Commit::new().put(rows, b"a".to_vec(), b"1".to_vec()))
        .unwrap();
    let old = e.snapshot().unwrap();
    let dbname = config.get_dbname().unwrap();
    server
        .admin(&format!(
            "SELECT pg_terminate_backend(pid, 10000) FROM pg_stat_activity WHERE datname = '{dbname}'"
        ))
        .unwrap();
    assert!(matches!(
        old.get(rows, b"a"),
        Err(strata_engine::ReadError::Backend(_))
    ));
    drop(old);
    let v = e
        .commit(Commit::new().put(rows, b"b".to_vec(), b"2".to_vec()))
        .unwrap()
        .version;
    let s = e.snapshot().unwrap();
    assert_eq!(s.version().unwrap(), v);
    assert_eq!(s.get(rows, b"a").unwrap().as_deref(), Some(&b"1"[..]));
    assert_eq!(s.get(rows, b"b").unwrap().as_deref(), Some(&b"2"[..]));
    drop(s);
    // Every idle session ended again: a read on its own finds its pooled
    // connection dead and sends its statement again on a new one.
    server
        .admin(&format!(
            "SELECT pg_terminate_backend(pid, 10000) FROM pg_stat_activity WHERE datname = '{dbname}'"
        ))
        .unwrap();
    assert_eq!(
        e.get_latest(rows, b"b").unwrap().as_deref(),
        Some(&b"2"[..])
    );
    assert_eq!(e.get_latest(rows, b"none").unwrap(), None);
}

/// What the engine says of itself and does with its sessions: its options
/// and tables, `reconnect` closing idle sessions, connection errors told
/// from statement errors, and the queue profile's table settings.
#[test]
fn sessions_options_and_table_settings() {
    use strata_engine_postgres::is_connection_error;
    let (server, config, e) = super::open(
        "sessions",
        specs(),
        PostgresOptions {
            pool_size: 3,
            ..PostgresOptions::default()
        },
    );
    assert_eq!(e.options().pool_size, 3);
    let debug = format!("{e:?}");
    assert!(
        debug.contains("PostgresEngine") && debug.contains("strata_ks_"),
        "{debug}"
    );
    let rows = e.keyspace("rows").unwrap();
    // Two sessions open at once, then idle in the pool.
    let (a, b) = (e.snapshot().unwrap(), e.snapshot().unwrap());
    drop((a, b));
    e.commit(Commit::new().put(rows, b"k".to_vec(), b"v".to_vec()))
        .unwrap();
    let dbname = config.get_dbname().unwrap().to_owned();
    let mut admin = server.config("postgres").connect(postgres::NoTls).unwrap();
    let sessions = |admin: &mut postgres::Client| -> i64 {
        admin
            .query_one(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = $1",
                &[&dbname],
            )
            .unwrap()
            .get(0)
    };
    assert_eq!(sessions(&mut admin), 2, "two pooled sessions");
    e.reconnect();
    let mut left = sessions(&mut admin);
    for _ in 0..100 {
        if left == 0 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
        left = sessions(&mut admin);
    }
    assert_eq!(left, 0, "reconnect closes idle sessions");
    assert!(e.snapshot().unwrap().get(rows, b"k").unwrap().is_some());
    // A statement's error is not the connection's; a refused connection is.
    let err = admin.batch_execute("SELEC 1").unwrap_err();
    assert!(!is_connection_error(&err), "{err}");
    let mut gone = postgres::Config::new();
    gone.host_path("/nonexistent-strata-socket-dir")
        .user("strata");
    let Err(err) = gone.connect(postgres::NoTls) else {
        panic!("connected to a directory with no server")
    };
    assert!(is_connection_error(&err), "{err}");
    let mut victim = server.config(&dbname).connect(postgres::NoTls).unwrap();
    admin
        .execute(
            "SELECT pg_terminate_backend(pid, 10000) FROM pg_stat_activity WHERE datname = $1",
            &[&dbname],
        )
        .unwrap();
    let err = victim.batch_execute("SELECT 1").unwrap_err();
    assert!(is_connection_error(&err), "{err}");
    // The queue keyspace's table asks autovacuum to come sooner; the
    // general one does not.
    let mut db = server.config(&dbname).connect(postgres::NoTls).unwrap();
    let options: Vec<(Vec<u8>, Option<Vec<String>>)> = db
        .query(
            "SELECT k.name, c.reloptions FROM strata_keyspaces k \
             JOIN pg_class c ON c.relname = 'strata_ks_' || k.id ORDER BY k.name",
            &[],
        )
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    assert_eq!(options.len(), 2);
    assert_eq!(options[0].0, b"log");
    assert!(
        options[0].1.as_ref().is_some_and(|o| o
            .iter()
            .any(|x| x.starts_with("autovacuum_vacuum_scale_factor"))),
        "{options:?}"
    );
    assert_eq!(
        (options[1].0.as_slice(), &options[1].1),
        (&b"rows"[..], &None)
    );
    // Compaction vacuums every keyspace table.
    strata_engine::Compact::compact(&e).unwrap();
    let vacuumed: i64 = db
        .query_one(
            "SELECT count(*) FROM pg_stat_user_tables \
             WHERE relname LIKE 'strata_ks_%' AND vacuum_count > 0",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(vacuumed, 2, "both keyspace tables vacuumed");
}

/// The pool never opens more sessions than its size: with every session
/// held by a snapshot, the next one waits `pool_wait` and fails with a
/// typed error naming the pool, and succeeds once a snapshot is dropped.
#[test]
fn the_pool_is_bounded() {
    let (_server, _config, e) = super::open(
        "pool",
        specs(),
        PostgresOptions {
            pool_size: 2,
            pool_wait: std::time::Duration::from_millis(200),
            ..PostgresOptions::default()
        },
    );
    let a = e.snapshot().unwrap();
    let b = e.snapshot().unwrap();
    let err = e.snapshot().unwrap_err();
    let told = strata_engine::ErrorChain(&err).to_string();
    assert!(
        matches!(err, strata_engine::ReadError::Backend(_)) && told.contains("pool of 2"),
        "{told}"
    );
    drop(a);
    let c = e.snapshot().unwrap();
    assert_eq!(c.version().unwrap(), b.version().unwrap());
    drop((b, c));
    // A waiter gets the session another thread gives back.
    let (_server2, _config2, e) = super::open(
        "pool_wait",
        specs(),
        PostgresOptions {
            pool_size: 1,
            pool_wait: std::time::Duration::from_secs(10),
            ..PostgresOptions::default()
        },
    );
    let held = e.snapshot().unwrap();
    std::thread::scope(|s| {
        s.spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(100));
            drop(held);
        });
        assert!(e.snapshot().is_ok(), "the waiter got the returned session");
    });
}
