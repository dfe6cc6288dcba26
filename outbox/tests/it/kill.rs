//! Real process kills above the engine: a child process places orders
//! (every third one large enough to be stored in chunks, every fifth with
//! a time to live), each with its event and a tally of orders placed, in
//! one transaction under a quota, while a worker of the same process handles the events (a row per
//! event counting its handlings, written in the acknowledging transaction)
//! and trims what it handled, until the parent kills it with SIGKILL at a
//! random moment: inside a producer's commit, a handler's, a trim's. After
//! each kill, on the real files: `verify` finds nothing (quota counters,
//! chunks, expiry index), the orders are exactly the committed ones, each
//! whole, no event was handled twice; at the end a worker drains the
//! topic and every committed order's event is handled exactly once.
//!
//! The oracle is independent of the store's and the outbox's code: the
//! committed orders are `0..tally` (the tally is written in each order's
//! transaction), and an order's value is a pattern of its number.

#![cfg(unix)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use strata_codec::Limits;
use strata_engine::{Durability, Engine, ManualClock, MemEngine, Rng, SeededRng};
use strata_engine_redb::{RedbEngine, RedbOptions};
use strata_engine_rocks::{RocksEngine, RocksOptions};
use strata_outbox::{Delivery, Outbox, OutboxError, Start, Worker, WorkerConfig};
use strata_store::{Store, StoreOptions};

use crate::{Event, T0, config, count_handling, event, handled_once, topic};

/// Set in the child: the directory of its database.
const CHILD: &str = "STRATA_OUTBOX_KILL_DIR";
/// The child's clock reading at start (each round later than the last).
const CHILD_CLOCK: &str = "STRATA_OUTBOX_KILL_CLOCK";
/// Longer than the outbox's lease term in these tests (5 s).
const LEASE_GAP: u64 = 60_000;
/// Order numbers map onto this many rows, so later orders overwrite
/// earlier ones (chunked over inline, inline over chunked).
const ROWS: u64 = 40;
const CONSUMER: &str = "kill";

#[derive(Debug, Clone, PartialEq)]
struct PlacedKey {
    account: u64,
    row: u64,
}

#[derive(Debug, Clone, PartialEq)]
struct TallyKey {
    name: String,
}

strata_keys::tuple_key! {
    PlacedKey -> chunked Vec<u8> = ("placed", {account}, {row});
    TallyKey -> i64 = ("tally", {name});
}

fn tally() -> TallyKey {
    TallyKey {
        name: "orders".into(),
    }
}

fn row_of(order: u64) -> PlacedKey {
    PlacedKey {
        account: order % 3,
        row: order % ROWS,
    }
}

/// Order `order`'s value: its number, then a pattern of it; 1,500 bytes
/// (eight chunks) for every third order, 40 to 139 bytes for the others.
fn value_of(order: u64) -> Vec<u8> {
    let len = if order.is_multiple_of(3) {
        1_500
    } else {
        40 + usize::try_from(order % 100).unwrap()
    };
    let mut v = order.to_be_bytes().to_vec();
    v.extend((8..len).map(|k| u8::try_from((order * 31 + k as u64) % 251).unwrap()));
    v
}

fn options() -> StoreOptions {
    Outbox::<MemEngine>::declare(StoreOptions::new(Limits {
        max_key_bytes: 128,
        max_value_bytes: 512,
        max_batch_entries: 64,
        max_batch_bytes: 64 << 10,
        quota_bytes: 1 << 20,
    }))
    .durability(Durability::Immediate)
    .quota_scope_tuple_prefix(2)
    .chunk_size(200)
}

fn open<E: Engine>(engine: E, clock: &Arc<ManualClock>, seed: u64) -> Store<E> {
    Store::open_with(
        engine,
        options(),
        clock.clone(),
        Box::new(SeededRng::new(seed)),
    )
    .unwrap()
}

fn open_redb(dir: &Path) -> RedbEngine {
    RedbEngine::open(
        dir.join("db.redb"),
        options().keyspace_specs(),
        RedbOptions::default(),
    )
    .unwrap()
}

fn open_rocks(dir: &Path) -> RocksEngine {
    RocksEngine::open(
        dir.join("rocks"),
        options().keyspace_specs(),
        RocksOptions::default(),
    )
    .unwrap()
}

/// A worker handling events: each handling adds one to the event's row,
/// in the transaction that acknowledges it.
fn worker<E: Engine + Send + Sync + 'static>(
    store: &Arc<Store<E>>,
    clock: &Arc<ManualClock>,
    seed: u64,
) -> Worker {
    let mut wc = WorkerConfig::new("kill");
    wc.batch = 4;
    wc.idle_wait = Duration::from_millis(2);
    wc.outbox = config();
    // Trim what was handled at every turn: kills land in trims too.
    wc.retention_ms = Some(0);
    wc.trim_every_ms = 0;
    Worker::spawn(
        store.clone(),
        clock.clone(),
        Box::new(SeededRng::new(seed)),
        topic(),
        CONSUMER,
        wc,
        Box::new(|tx, d: &Delivery<Event>| count_handling(tx, d)),
    )
}

/// The child: places orders until killed, printing each acknowledged one,
/// a worker handling their events meanwhile.
fn place_until_killed<E: Engine + Send + Sync + 'static>(engine: E, now: u64) {
    let clock = Arc::new(ManualClock::new(now));
    let store = Arc::new(open(engine, &clock, now));
    let outbox = Outbox::new(
        &store,
        config(),
        clock.clone(),
        Box::new(SeededRng::new(now)),
    )
    .unwrap();
    outbox
        .register(topic().name(), CONSUMER, Start::Beginning)
        .unwrap();
    let _worker = worker(&store, &clock, now + 1);
    loop {
        let order = store
            .transact(|tx| {
                let order = u64::try_from(tx.counter(&tally())?).unwrap();
                // Every fifth with a time to live (a day): an entry in the
                // expiry index, removed when a later order overwrites it.
                if order.is_multiple_of(5) {
                    tx.put_with_ttl(&row_of(order), &value_of(order), 86_400_000)?;
                } else {
                    tx.put(&row_of(order), &value_of(order))?;
                }
                outbox.push(tx, &topic(), &event(order))?;
                tx.add(&tally(), 1)?;
                Ok::<_, OutboxError>(order)
            })
            .expect("the child's commit");
        println!("ack {order}");
    }
}

/// Checks the store after a kill, against the orders `0..tally`: returns
/// the tally and the orders handled.
fn check<E: Engine>(store: &Store<E>, acked: Option<u64>, round: u64) -> (u64, Vec<u64>) {
    let report = store.verify().unwrap();
    assert!(
        report.problems.is_empty(),
        "round {round}: {:?}",
        report.problems
    );
    let placed = u64::try_from(store.counter(&tally()).unwrap()).unwrap();
    if let Some(acked) = acked {
        assert!(
            acked < placed,
            "round {round}: order {acked} acknowledged, {placed} there"
        );
    }
    // Each row holds the last committed order that maps onto it, whole.
    for row in 0..ROWS {
        for account in 0..3 {
            let key = PlacedKey { account, row };
            let last = (0..placed).rev().find(|&o| row_of(o) == key);
            let found = store.get(&key).unwrap();
            let number = found.as_deref().map(|v| {
                v.get(..8)
                    .map(|n| u64::from_be_bytes(n.try_into().unwrap()))
            });
            assert!(
                found == last.map(value_of),
                "round {round}: {key:?} holds {number:?} ({} bytes), not order {last:?} whole ({placed} placed)",
                found.as_ref().map_or(0, Vec::len)
            );
        }
    }
    // No event handled twice, none that was not committed.
    let handled = handled_once(store, &format!("round {round}"));
    if let Some(last) = handled.last() {
        assert!(*last < placed, "round {round}: order {last} never placed");
    }
    (placed, handled)
}

/// The kill rounds on the engine `open_engine` opens in a directory.
fn kill_rounds<E: Engine + Send + Sync + 'static>(test: &str, open_engine: fn(&Path) -> E) {
    if let Ok(dir) = std::env::var(CHILD) {
        let now = std::env::var(CHILD_CLOCK)
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(T0);
        place_until_killed(open_engine(Path::new(&dir)), now);
        return;
    }
    let rounds = strata_test_support::kill_rounds(8) as u64;
    let dir = tempdir(test);
    let mut rng = SeededRng::new(0x0B0C_4111);
    let (mut pending_at_kill, mut handled_at_kill) = (0, 0);
    for round in 0..rounds {
        let wanted = 1 + rng.below(80);
        let clock = (T0 + 2 * round * LEASE_GAP).to_string();
        let dir_text = dir.to_string_lossy();
        let env = [(CHILD, &*dir_text), (CHILD_CLOCK, &*clock)];
        let mut count = 0;
        let pause = Duration::from_micros(rng.below(4_000));
        let acked = strata_test_support::kill_child_after(
            test,
            &env,
            |_| {
                count += 1;
                count >= wanted
            },
            pause,
        );
        assert!(
            acked.is_some(),
            "round {round}: the child acknowledged nothing"
        );
        let clock = Arc::new(ManualClock::new(T0 + (2 * round + 1) * LEASE_GAP));
        let store = open(open_engine(&dir), &clock, round);
        let (placed, handled) = check(&store, acked, round);
        pending_at_kill += placed - u64::try_from(handled.len()).unwrap();
        handled_at_kill += u64::try_from(handled.len()).unwrap();
        // The next child continues from here.
    }
    // The kills landed with work in hand on both sides.
    assert!(handled_at_kill > 0, "the worker never ran before a kill");
    assert!(pending_at_kill > 0, "no kill left events to handle");
    // A worker of the parent's drains the topic: every committed order's
    // event handled exactly once.
    let clock = Arc::new(ManualClock::new(T0 + 2 * rounds * LEASE_GAP));
    let store = Arc::new(open(open_engine(&dir), &clock, rounds));
    let w = worker(&store, &clock, rounds);
    let outbox = Outbox::new(&store, config(), clock.clone(), Box::new(SeededRng::new(9))).unwrap();
    // Up to 20 s of 5 ms waits.
    let mut waits = 0;
    while outbox.lag(topic().name(), CONSUMER).unwrap().entries > 0 {
        waits += 1;
        assert!(waits < 4_000, "the topic does not drain");
        std::thread::sleep(Duration::from_millis(5));
    }
    w.shutdown().unwrap();
    let (placed, handled) = check(&store, None, rounds);
    assert_eq!(handled, (0..placed).collect::<Vec<_>>());
    println!("{rounds} kills; {placed} orders placed, each handled once");
    drop(store);
    let _ = std::fs::remove_dir_all(&dir);
}

fn tempdir(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "strata-outbox-kill-{}-{}",
        std::process::id(),
        test.replace(':', "_")
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn redb_orders_and_their_events_survive_kills() {
    kill_rounds(
        "kill::redb_orders_and_their_events_survive_kills",
        open_redb,
    );
}

#[test]
fn rocks_orders_and_their_events_survive_kills() {
    kill_rounds(
        "kill::rocks_orders_and_their_events_survive_kills",
        open_rocks,
    );
}
