//! Several real processes on one PostgreSQL database: three producers
//! pushing events while two consumer processes run a worker each for the
//! same consumer (as a service started twice would), the system clock
//! and short leases between them, and processes killed with SIGKILL at
//! random moments (a producer inside a commit, the lease holder inside a
//! handler's). Every event a producer committed is handled exactly once:
//! none lost to commits becoming visible out of version order across
//! connections, none applied twice by two workers or by a worker taking
//! over from a killed one.
//!
//! The oracle is independent of the outbox's code: each producer counts
//! its events in a tally written in the event's own transaction, and
//! each handling adds one to the event's row.

#![cfg(unix)]

use std::process::{Child, Stdio};
use std::sync::Arc;
use std::time::Duration;

use strata_engine::{Durability, Rng, SeededRng, SystemClock, SystemRng};
use strata_engine_postgres::testing::TestServer;
use strata_engine_postgres::{PostgresEngine, PostgresOptions};
use strata_outbox::{Delivery, Outbox, OutboxConfig, OutboxError, Start, Worker, WorkerConfig};
use strata_store::Store;

use crate::{Event, config, count_handling, event, handled_once, options, topic};

/// Set in a child: `producer N` or `consumer N`, then `|` and the
/// connection string of the test's database.
const CHILD: &str = "STRATA_OUTBOX_PG_CHILD";
const TEST: &str = "processes::producers_and_consumers_in_processes_handle_each_event_once";
const CONSUMER: &str = "billing";
const PRODUCERS: u64 = 3;
/// Order numbers of producer `p` start at `p * BLOCK`.
const BLOCK: u64 = 1_000_000;

#[derive(Debug, Clone, PartialEq)]
struct TallyKey {
    producer: u64,
}

strata_keys::tuple_key! {
    TallyKey -> i64 = ("tally", {producer});
}

/// An outbox on `store` with the system's clock and randomness.
fn outbox_on(store: &Store<PostgresEngine>) -> Outbox<'_, PostgresEngine> {
    Outbox::new(
        store,
        outbox_config(),
        Arc::new(SystemClock),
        Box::new(SystemRng::new()),
    )
    .unwrap()
}

/// Leases of 300 ms: a killed holder's is taken over quickly.
fn outbox_config() -> OutboxConfig {
    let mut c = config();
    c.lease_ms = 300;
    c.base_backoff_ms = 0;
    c.max_backoff_ms = 0;
    c
}

fn open(conninfo: &str) -> Arc<Store<PostgresEngine>> {
    let pg = conninfo.parse().expect("the parent's connection string");
    let o = options(Durability::Immediate);
    let engine = PostgresEngine::open(pg, o.keyspace_specs(), PostgresOptions::default())
        .expect("the child's engine");
    Arc::new(
        Store::open_with(engine, o, Arc::new(SystemClock), Box::new(SystemRng::new()))
            .expect("the child's store"),
    )
}

/// A child's life: produce events, or consume them, until killed.
fn child(spec: &str) {
    let (role, conninfo) = spec.split_once('|').expect("a child's spec");
    let store = open(conninfo);
    let (kind, n) = role.split_once(' ').unwrap();
    let n: u64 = n.parse().unwrap();
    if kind == "producer" {
        let outbox = outbox_on(&store);
        let tally = TallyKey { producer: n };
        loop {
            let order = store
                .transact(|tx| {
                    let k = u64::try_from(tx.counter(&tally)?).unwrap();
                    outbox.push(tx, &topic(), &event(n * BLOCK + k))?;
                    tx.add(&tally, 1)?;
                    Ok::<_, OutboxError>(k)
                })
                .expect("a producer's commit");
            println!("ack {order}");
        }
    }
    let mut wc = WorkerConfig::new(format!("consumer {n}"));
    wc.batch = 4;
    wc.idle_wait = Duration::from_millis(5);
    wc.outbox = outbox_config();
    wc.retention_ms = None;
    let worker = Worker::start(
        store,
        topic(),
        CONSUMER,
        wc,
        Box::new(|tx, d: &Delivery<Event>| count_handling(tx, d)),
    );
    // Until killed.
    let _worker = worker;
    loop {
        std::thread::sleep(Duration::from_secs(1));
    }
}

fn spawn(role: &str, server: &TestServer, dbname: &str) -> Child {
    let spec = format!("{role}|{}", server.conninfo(dbname));
    strata_test_support::spawn_self(TEST, &[(CHILD, &spec)], Stdio::null())
}

fn kill(mut child: Child) {
    child.kill().expect("SIGKILL");
    let _ = child.wait();
}

#[test]
fn producers_and_consumers_in_processes_handle_each_event_once() {
    if let Ok(spec) = std::env::var(CHILD) {
        child(&spec);
        return;
    }
    // A server of the test's own: other tests' load on the shared one
    // would be its own source of failures.
    let server = TestServer::start().expect("a PostgreSQL server");
    let config = server.database("processes").unwrap();
    let dbname = config.get_dbname().unwrap().to_owned();
    let store = open(&server.conninfo(&dbname));
    let outbox = outbox_on(&store);
    outbox
        .register(topic().name(), CONSUMER, Start::Beginning)
        .unwrap();
    let mut rng = SeededRng::new(0x9E0C_E55E);
    let pause = |rng: &mut SeededRng, base: u64| {
        std::thread::sleep(Duration::from_millis(base + rng.below(base)));
    };
    let mut consumers = vec![
        spawn("consumer 0", &server, &dbname),
        spawn("consumer 1", &server, &dbname),
    ];
    let mut producers: Vec<Child> = (0..PRODUCERS)
        .map(|p| spawn(&format!("producer {p}"), &server, &dbname))
        .collect();
    // Producers and consumers at work; then one consumer (whichever) and
    // each producer killed at its own moment, a third consumer started.
    pause(&mut rng, 400);
    let victim = usize::try_from(rng.below(2)).unwrap();
    kill(consumers.remove(victim));
    consumers.push(spawn("consumer 2", &server, &dbname));
    for p in producers.drain(..) {
        pause(&mut rng, 100);
        kill(p);
    }
    // The consumers left drain the topic.
    let mut waits = 0;
    while outbox.lag(topic().name(), CONSUMER).unwrap().entries > 0 {
        waits += 1;
        assert!(waits < 1_200, "the topic does not drain in a minute");
        std::thread::sleep(Duration::from_millis(50));
    }
    for c in consumers {
        kill(c);
    }
    let mut want = Vec::new();
    for p in 0..PRODUCERS {
        let placed = u64::try_from(store.counter(&TallyKey { producer: p }).unwrap()).unwrap();
        assert!(placed > 0, "producer {p} committed nothing");
        want.extend((0..placed).map(|k| p * BLOCK + k));
    }
    let handled = handled_once(&store, "after the drain");
    assert_eq!(
        handled.len(),
        want.len(),
        "handled {} events of {} committed",
        handled.len(),
        want.len()
    );
    assert_eq!(handled, want, "the events handled are not those committed");
    println!(
        "{} events from {PRODUCERS} producers, each handled once",
        want.len()
    );
}

/// Two engines on one database, as two processes would have: the second
/// one's durable version lags what the first committed and finished.
/// `lag` through the second counts what is owed (it read the range from
/// the consumer's checkpoint to a durable version below it: the range was
/// refused as invalid), before and after the first finishes the entries.
#[test]
fn lag_through_another_engine_on_the_same_database() {
    let server = TestServer::shared().expect("a PostgreSQL server");
    let config = server.database("lag").unwrap();
    let dbname = config.get_dbname().unwrap().to_owned();
    let conninfo = server.conninfo(&dbname);
    let (first, second) = (open(&conninfo), open(&conninfo));
    let (a, b) = (outbox_on(&first), outbox_on(&second));
    a.register(topic().name(), CONSUMER, Start::Beginning)
        .unwrap();
    let push = |n: u64| {
        first
            .transact(|tx| a.push(tx, &topic(), &event(n)))
            .map_err(|e: OutboxError| e)
            .unwrap();
    };
    for n in 0..5 {
        push(n);
    }
    // Five owed, committed by the first engine only.
    assert_eq!(b.lag(topic().name(), CONSUMER).unwrap().entries, 5);
    let lease = a.acquire(topic().name(), CONSUMER, "first").unwrap();
    for d in a.poll(&lease, &topic(), 10).unwrap() {
        first.transact(|tx| a.ack(tx, &lease, d.position)).unwrap();
    }
    push(5);
    push(6);
    for d in a.poll(&lease, &topic(), 10).unwrap() {
        first.transact(|tx| a.ack(tx, &lease, d.position)).unwrap();
    }
    // The checkpoint is past anything the second engine saw durable.
    assert_eq!(a.lag(topic().name(), CONSUMER).unwrap().entries, 0);
    assert_eq!(b.lag(topic().name(), CONSUMER).unwrap().entries, 0);
    push(7);
    assert_eq!(b.lag(topic().name(), CONSUMER).unwrap().entries, 1);
}
