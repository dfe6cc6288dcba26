//! Commits of concurrent callers of one engine: a commit of puts and
//! deletes in one keyspace made while another is being written is queued,
//! and the queue written as one transaction (one call of the keyspace's
//! procedure); other commits are written at once.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use strata_engine::{
    Commit, CommitError, Durability, Engine, KeyspaceSpec, Predicate, Profile, RangeSpec, Rng,
    SeededRng, Snapshot,
};
use strata_engine_postgres::PostgresOptions;

fn specs() -> Vec<KeyspaceSpec> {
    vec![
        KeyspaceSpec::new("kv", Profile::General),
        KeyspaceSpec::new("other", Profile::General),
    ]
}

const WRITERS: u64 = 8;

/// Runs `each(t)` for `t` in `0..threads`, each on its own thread, the
/// threads started together; their results in thread order.
fn on_threads<T: Send>(threads: u64, each: impl Fn(u64) -> T + Sync) -> Vec<T> {
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let each = &each;
                s.spawn(move || each(t))
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

/// A put's key, durability and result.
type Outcome = (Vec<u8>, Durability, Result<u64, CommitError>);
const EACH: u64 = 40;

/// Eight threads commit 40 puts each, in rounds (each thread one commit a
/// round, released together), every one `Immediate`, each also writing the
/// key `shared` with its own name and now and then deleting its previous
/// key. After each round `shared` holds the value of the round's commit
/// with the highest version (a queue's rows merged in commit order, the
/// last write of a key winning, and its commits given their versions in
/// that order). Afterwards: the versions acknowledged are exactly the next
/// 320, each once; every row is what its commits left; and the commits
/// were written in fewer transactions than commits, each flushing the log
/// once.
#[test]
fn concurrent_puts_are_written_in_queues_at_consecutive_versions() {
    let (_server, _, e) = super::open("queued", specs(), PostgresOptions::default());
    let kv = e.keyspace("kv").unwrap();
    let first = e
        .commit(Commit::new().put(kv, b"start".to_vec(), b"0".to_vec()))
        .unwrap()
        .version;
    let before = e.group_stats();
    let name = |t: u64, i: u64| format!("t{t}-{i:03}").into_bytes();
    let mut acknowledged = Vec::new();
    for i in 0..EACH {
        // A round: each writer one commit, on threads started together.
        let made: Vec<(u64, u64, u64)> = on_threads(WRITERS, |t| {
            let mut c = Commit::new()
                .put(kv, name(t, i), i.to_be_bytes().to_vec())
                .put(kv, b"shared".to_vec(), name(t, i))
                .durability(Durability::Immediate);
            if i % 4 == 3 {
                c = c.delete(kv, name(t, i - 1));
            }
            let info = e.commit(c).expect("a durable put");
            assert!(info.durable, "an Immediate commit not durable");
            (info.version, t, i)
        });
        let (_, t, _) = made.iter().max().unwrap();
        assert_eq!(
            e.snapshot().unwrap().get(kv, b"shared").unwrap(),
            Some(name(*t, i)),
            "round {i}: `shared` is not the last commit's ({made:?})"
        );
        acknowledged.extend(made);
    }
    let mut versions: Vec<u64> = acknowledged.iter().map(|(v, _, _)| *v).collect();
    versions.sort_unstable();
    assert_eq!(
        versions,
        (first + 1..=first + WRITERS * EACH).collect::<Vec<_>>(),
        "each commit its own version, none skipped"
    );
    let s = e.snapshot().unwrap();
    assert_eq!(s.version().unwrap(), first + WRITERS * EACH);
    let rows: BTreeMap<Vec<u8>, Vec<u8>> = s
        .range(kv, RangeSpec::all())
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let mut expected = BTreeMap::new();
    expected.insert(b"start".to_vec(), b"0".to_vec());
    for t in 0..WRITERS {
        for i in 0..EACH {
            if i % 4 != 2 {
                expected.insert(name(t, i), i.to_be_bytes().to_vec());
            }
        }
    }
    let (_, t, i) = acknowledged.iter().max().unwrap();
    expected.insert(b"shared".to_vec(), name(*t, *i));
    assert_eq!(rows, expected);
    let after = e.group_stats();
    let (groups, commits, syncs) = (
        after.groups - before.groups,
        after.commits - before.commits,
        after.syncs - before.syncs,
    );
    assert_eq!(commits, WRITERS * EACH);
    assert!(
        groups < commits,
        "no commit was queued behind another: {groups} groups"
    );
    assert_eq!(syncs, groups, "one flush of the log per queue written");
    assert!(e.durable_version() >= first + WRITERS * EACH);
}

/// Commits of other shapes (puts in two keyspaces, checked commits) made
/// at the same time as queued ones are not queued: each is its own
/// transaction, a commit whose predicate fails is refused alone, and the
/// commits made with it are applied; only the plain puts went through the
/// queue.
#[test]
fn a_refused_commit_queued_with_others_fails_alone() {
    let (_server, _, e) = super::open("queued_refused", specs(), PostgresOptions::default());
    let kv = e.keyspace("kv").unwrap();
    let other = e.keyspace("other").unwrap();
    e.commit(Commit::new().put(kv, b"taken".to_vec(), b"x".to_vec()))
        .unwrap();
    let before = e.group_stats();
    let outcomes: Vec<(u64, u64, Result<u64, CommitError>)> = on_threads(WRITERS, |t| {
        (0..EACH)
            .map(|i| {
                let key = format!("t{t}-{i:03}").into_bytes();
                let c = match (t + i) % 3 {
                    0 => Commit::new().put(kv, key, b"plain".to_vec()),
                    1 => Commit::new().put(kv, key.clone(), b"two".to_vec()).put(
                        other,
                        key,
                        b"two".to_vec(),
                    ),
                    _ => Commit::new()
                        .require(Predicate::Absent {
                            ks: kv,
                            // Every other checked commit asks
                            // for a key that is there.
                            key: if i % 2 == 0 {
                                b"taken".to_vec()
                            } else {
                                b"free".to_vec()
                            },
                        })
                        .put(kv, key, b"checked".to_vec()),
                };
                (t, i, e.commit(c).map(|info| info.version))
            })
            .collect::<Vec<_>>()
    })
    .into_iter()
    .flatten()
    .collect();
    let s = e.snapshot().unwrap();
    let mut versions = Vec::new();
    for (t, i, result) in &outcomes {
        let key = format!("t{t}-{i:03}").into_bytes();
        let refused = (t + i) % 3 == 2 && i % 2 == 0;
        match result {
            Err(CommitError::Conflict { index: 0, .. }) if refused => {
                assert_eq!(s.get(kv, &key).unwrap(), None, "{t}/{i}: refused, written");
            }
            Ok(v) if !refused => {
                versions.push(*v);
                assert!(
                    s.get(kv, &key).unwrap().is_some(),
                    "{t}/{i}: applied, absent"
                );
                assert_eq!(
                    s.get(other, &key).unwrap().is_some(),
                    (t + i) % 3 == 1,
                    "{t}/{i}: the second keyspace"
                );
            }
            other => panic!("{t}/{i}: refused {refused}, got {other:?}"),
        }
    }
    versions.sort_unstable();
    versions.dedup();
    assert_eq!(
        versions.len(),
        outcomes.iter().filter(|(_, _, r)| r.is_ok()).count(),
        "a version given twice"
    );
    assert_eq!(*versions.last().unwrap(), s.version().unwrap());
    assert_eq!(
        e.group_stats().commits - before.commits,
        outcomes.iter().filter(|(t, i, _)| (t + i) % 3 == 0).count() as u64,
        "the plain puts, and they only, were queued"
    );
}

/// Six threads of one engine commit plain puts (three in four
/// `Immediate`), so that they are queued and written together, while the
/// server is killed and restarted, three rounds. Afterwards every put
/// acknowledged durable is there, with its value, and no version was
/// acknowledged durable twice; every put reported not applied is absent
/// (unknown outcomes may go either way); and some commits were queued.
#[test]
fn queued_puts_in_flight_at_a_server_crash_are_settled_as_the_rows_say() {
    let server =
        strata_engine_postgres::testing::TestServer::start_with(&["wal_writer_delay = 10000ms"])
            .expect("a private server");
    let config = server.database("queued_crash").unwrap();
    let e =
        strata_engine_postgres::PostgresEngine::open(config, specs(), PostgresOptions::default())
            .unwrap();
    let kv = e.keyspace("kv").unwrap();
    let before = e.group_stats();
    let outcomes: Mutex<Vec<Outcome>> = Mutex::new(Vec::new());
    let stop = AtomicBool::new(false);
    let mut rng = SeededRng::new(63);
    for round in 0..3u64 {
        stop.store(false, Ordering::SeqCst);
        std::thread::scope(|s| {
            for t in 0..6u64 {
                let (e, outcomes, stop) = (&e, &outcomes, &stop);
                let mut rng = SeededRng::new(round * 10 + t);
                s.spawn(move || {
                    let mut n = 0u64;
                    while !stop.load(Ordering::SeqCst) {
                        let key = format!("r{round}-t{t}-{n:06}").into_bytes();
                        n += 1;
                        let durability = if rng.below(4) == 0 {
                            Durability::Buffered
                        } else {
                            Durability::Immediate
                        };
                        let r = e
                            .commit(
                                Commit::new()
                                    .put(kv, key.clone(), key.clone())
                                    .durability(durability),
                            )
                            .map(|i| i.version);
                        let failed = r.is_err();
                        outcomes.lock().unwrap().push((key, durability, r));
                        if failed {
                            std::thread::sleep(Duration::from_millis(20));
                        }
                    }
                });
            }
            std::thread::sleep(Duration::from_millis(300 + rng.below(300)));
            server.kill().expect("kill the server");
            std::thread::sleep(Duration::from_millis(50));
            server.restart().expect("restart the server");
            std::thread::sleep(Duration::from_millis(1_500));
            stop.store(true, Ordering::SeqCst);
        });
    }
    let s = e.snapshot().unwrap();
    let mut versions = std::collections::BTreeSet::new();
    let (mut durable_ok, mut not_applied, mut unknown) = (0, 0, 0);
    let outcomes = outcomes.into_inner().unwrap();
    for (key, durability, r) in &outcomes {
        let present = s.get(kv, key).unwrap();
        match r {
            Ok(v) if *durability == Durability::Immediate => {
                durable_ok += 1;
                assert!(
                    versions.insert(*v),
                    "version {v} acknowledged durable twice"
                );
                assert_eq!(
                    present.as_deref(),
                    Some(key.as_slice()),
                    "{} acknowledged durable at {v}, not there",
                    String::from_utf8_lossy(key)
                );
            }
            Ok(_) => {}
            Err(CommitError::OutcomeUnknown(_)) => unknown += 1,
            Err(err) => {
                not_applied += 1;
                assert_eq!(
                    present,
                    None,
                    "{} reported not applied ({err}), but there",
                    String::from_utf8_lossy(key)
                );
            }
        }
    }
    let queued = e.group_stats();
    println!(
        "{} commits: {durable_ok} durable acknowledged, {not_applied} not applied, {unknown} unknown; {} groups",
        outcomes.len(),
        queued.groups - before.groups
    );
    assert!(durable_ok > 100, "too few commits to prove anything");
    assert!(
        queued.groups - before.groups < queued.commits - before.commits,
        "no commit was queued"
    );
}

/// Queued puts too large to send together (more than 256 KiB of keys and
/// values in all) are written one after the other, each its own
/// transaction and flush: all applied, each at its own version, the
/// values whole.
#[test]
fn queued_puts_too_large_together_go_one_by_one() {
    let (_server, _, e) = super::open("queued_large", specs(), PostgresOptions::default());
    let kv = e.keyspace("kv").unwrap();
    let before = e.group_stats();
    let value = |t: u64, i: u64| vec![u8::try_from(t * 16 + i).unwrap(); 150 << 10];
    let versions: Vec<u64> = on_threads(4, |t| {
        (0..8u64)
            .map(|i| {
                let info = e
                    .commit(
                        Commit::new()
                            .put(kv, format!("t{t}-{i}").into_bytes(), value(t, i))
                            .durability(Durability::Immediate),
                    )
                    .expect("a durable put");
                assert!(info.durable);
                info.version
            })
            .collect::<Vec<_>>()
    })
    .into_iter()
    .flatten()
    .collect();
    let mut sorted = versions.clone();
    sorted.sort_unstable();
    sorted.dedup();
    assert_eq!(sorted.len(), 32, "a version given twice");
    let s = e.snapshot().unwrap();
    for t in 0..4u64 {
        for i in 0..8u64 {
            assert_eq!(
                s.get(kv, format!("t{t}-{i}").as_bytes()).unwrap(),
                Some(value(t, i)),
                "t{t}-{i}"
            );
        }
    }
    let after = e.group_stats();
    assert_eq!(after.commits - before.commits, 32);
    assert!(
        after.groups - before.groups < 32,
        "no commit was queued behind another"
    );
    assert_eq!(
        after.syncs - before.syncs,
        32,
        "one flush for each, written one by one"
    );
}
