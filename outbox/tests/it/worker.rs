//! The worker: a handler on its own thread, woken by commits.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use strata_engine::{ManualClock, MemEngine, SeededRng};
use strata_outbox::{Delivery, Outbox, OutboxConfig, OutboxError, Start, Worker, WorkerConfig};
use strata_store::Store;
use strata_test_support::{Refusal, Refusing};

use crate::{Event, OrderKey, T0, config, event, options, topic};

#[test]
fn a_worker_handles_every_entry_once_with_its_writes_and_stops_cleanly() {
    let clock = Arc::new(ManualClock::new(T0));
    let store = shared_store(&clock);
    let mut cfg = config();
    // Retry at once: the test's clock does not move.
    cfg.base_backoff_ms = 0;
    cfg.max_backoff_ms = 0;
    {
        let outbox = Outbox::new(&store, cfg, clock.clone(), Box::new(SeededRng::new(2))).unwrap();
        outbox
            .register("orders", "mailer", Start::Beginning)
            .unwrap();
    }
    let mut tries: BTreeMap<u64, u32> = BTreeMap::new();
    let mut wc = WorkerConfig::new("w1");
    wc.outbox = cfg;
    let worker = spawn_mailer(
        &store,
        &clock,
        wc,
        Box::new(move |tx, d: &Delivery<Event>| {
            let n = tries.entry(d.entry.order).or_default();
            *n += 1;
            // Entry 5 fails on its first attempt only.
            if d.entry.order == 5 && *n == 1 {
                return Err("first attempt fails".into());
            }
            tx.put(
                &OrderKey {
                    id: 1_000 + d.entry.order,
                },
                &"mailed".to_owned(),
            )?;
            Ok(())
        }),
    );
    assert_eq!(format!("{worker:?}"), "Worker { stopping: false, .. }");
    // Producers commit after the worker started: it wakes on the commits.
    {
        let outbox = Outbox::new(&store, cfg, clock.clone(), Box::new(SeededRng::new(4))).unwrap();
        for id in 1..=20 {
            store
                .transact(|tx| {
                    outbox.push_keyed(tx, &topic(), &[u8::try_from(id % 3).unwrap()], &event(id))
                })
                .map_err(|e: OutboxError| e)
                .unwrap();
        }
    }
    assert_eq!(
        mailed_within_5_s(&store, 20),
        20,
        "every entry handled, with its write"
    );
    let report = worker.shutdown().unwrap();
    assert_eq!(report.handled, 20);
    assert_eq!(report.failed, 1);
    assert_eq!(report.dead_lettered, 0);
    // Nothing is owed.
    let outbox = Outbox::new(&store, cfg, clock, Box::new(SeededRng::new(5))).unwrap();
    assert_eq!(outbox.lag("orders", "mailer").unwrap().entries, 0);
    // The worker gave its lease up: another holder takes over at once,
    // though the clock has not moved past the lease's expiry.
    assert!(outbox.acquire("orders", "mailer", "w2").is_ok());
}

#[derive(Debug, Clone, PartialEq)]
struct HandledKey {
    order: u64,
}
strata_keys::tuple_key! {
    HandledKey -> i64 = ("handled", {order});
}

/// Two workers under one holder name (a restart while the old process
/// still runs, a name copied from the docs): one holds the consumer at a
/// time, and every entry's effect commits exactly once.
#[test]
fn two_workers_with_one_holder_name_apply_each_entry_once() {
    const ENTRIES: u64 = 300;
    let (clock, store, cfg) = mailer_store();
    let outbox = Outbox::new(&store, cfg, clock.clone(), Box::new(SeededRng::new(2))).unwrap();
    let workers: Vec<Worker> = (0..2)
        .map(|i| {
            let mut wc = WorkerConfig::new("orders-worker");
            wc.outbox = cfg;
            wc.batch = 7;
            Worker::spawn(
                store.clone(),
                clock.clone(),
                Box::new(SeededRng::new(10 + i)),
                topic(),
                "mailer",
                wc,
                Box::new(move |tx, d: &Delivery<Event>| {
                    tx.add(
                        &HandledKey {
                            order: d.entry.order,
                        },
                        1,
                    )?;
                    Ok(())
                }),
            )
        })
        .collect();
    for id in 1..=ENTRIES {
        store
            .transact(|tx| outbox.push(tx, &topic(), &event(id)))
            .unwrap();
    }
    for _ in 0..2_000 {
        if outbox.lag("orders", "mailer").unwrap().entries == 0 {
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(outbox.lag("orders", "mailer").unwrap().entries, 0);
    let handled: u64 = workers
        .into_iter()
        .map(|w| w.shutdown().unwrap().handled)
        .sum();
    assert_eq!(handled, ENTRIES, "each entry handled by one worker, once");
    for order in 1..=ENTRIES {
        assert_eq!(
            store.counter(&HandledKey { order }).unwrap(),
            1,
            "entry {order}"
        );
    }
}

/// Ten entries of `orders`, pushed at `T0`, handled by a worker that keeps
/// them one second and trims at most every `trim_every_ms`: the store and
/// the worker, once every entry is handled.
fn ten_handled_with_retention(
    clock: &Arc<ManualClock>,
    trim_every_ms: u64,
) -> (Arc<Store<MemEngine>>, Worker) {
    let store = shared_store(clock);
    let cfg = config();
    let outbox = Outbox::new(&store, cfg, clock.clone(), Box::new(SeededRng::new(2))).unwrap();
    outbox
        .register("orders", "mailer", Start::Beginning)
        .unwrap();
    for id in 1..=10 {
        store
            .transact(|tx| outbox.push(tx, &topic(), &event(id)))
            .unwrap();
    }
    let mut wc = WorkerConfig::new("w");
    wc.outbox = cfg;
    wc.idle_wait = Duration::from_millis(5);
    wc.retention_ms = Some(1_000);
    wc.trim_every_ms = trim_every_ms;
    let worker = spawn_mailer(
        &store,
        clock,
        wc,
        Box::new(|_tx, _d: &Delivery<Event>| Ok(())),
    );
    for _ in 0..500 {
        if outbox.lag("orders", "mailer").unwrap().entries == 0 {
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    drop(outbox);
    (store, worker)
}

/// The entries of `orders` still there, once they are `want` (or after
/// 2.5 s of waiting for it).
fn entries_left(store: &Store<MemEngine>, clock: &Arc<ManualClock>, want: u64) -> u64 {
    let outbox = Outbox::new(store, config(), clock.clone(), Box::new(SeededRng::new(5))).unwrap();
    let left = || {
        outbox
            .lag_after("orders", strata_outbox::Position::START)
            .unwrap()
            .entries
    };
    for _ in 0..500 {
        if left() == want {
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    left()
}

/// A worker trims its topic under its retention: entries every consumer
/// passed go, a consumer's unfinished ones stay.
#[test]
fn a_worker_trims_what_every_consumer_passed() {
    let clock = Arc::new(ManualClock::new(T0));
    let (store, worker) = ten_handled_with_retention(&clock, 0);
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(
        entries_left(&store, &clock, 10),
        10,
        "younger than the retention: kept"
    );
    clock.advance(1_000);
    assert_eq!(
        entries_left(&store, &clock, 0),
        0,
        "every entry passed and old enough: trimmed"
    );
    let report = worker.shutdown().unwrap();
    assert_eq!((report.handled, report.trimmed), (10, 10));
}

/// Trims come at most every `trim_every_ms`: entries old enough wait for
/// the next one, which comes exactly that long after the last.
#[test]
fn a_worker_trims_at_its_cadence() {
    let clock = Arc::new(ManualClock::new(T0));
    let (store, worker) = ten_handled_with_retention(&clock, 60_000);
    // The first turn's trim found nothing old enough. Old enough now, but
    // a minute has not passed since: kept, however many turns go by.
    clock.advance(1_000);
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(
        entries_left(&store, &clock, 10),
        10,
        "trimmed before its time"
    );
    // A minute to the millisecond after the last trim: the next one.
    clock.advance(59_000);
    assert_eq!(
        entries_left(&store, &clock, 0),
        0,
        "not trimmed at its time"
    );
    assert_eq!(worker.shutdown().unwrap().trimmed, 10);
}

/// A store on `MemEngine` with the outbox's spaces, shared with workers.
/// How many of orders 1..=`n` a handler has mailed (its row written),
/// once all are or after 5 seconds.
fn mailed_within_5_s<E: strata_engine::Engine>(store: &Store<E>, n: u64) -> usize {
    let mailed = || {
        (1..=n)
            .filter(|id| store.get(&OrderKey { id: 1_000 + id }).unwrap().is_some())
            .count()
    };
    for _ in 0..500 {
        if mailed() == usize::try_from(n).unwrap() {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    mailed()
}

/// A shared store at [`T0`] with consumer `mailer` registered on
/// `orders`, and the tests' outbox settings.
pub(crate) fn mailer_store() -> (Arc<ManualClock>, Arc<Store<MemEngine>>, OutboxConfig) {
    let clock = Arc::new(ManualClock::new(T0));
    let store = shared_store(&clock);
    let cfg = config();
    Outbox::new(&store, cfg, clock.clone(), Box::new(SeededRng::new(2)))
        .unwrap()
        .register("orders", "mailer", Start::Beginning)
        .unwrap();
    (clock, store, cfg)
}

/// A worker of `mailer` on its own thread, its generator seeded with 3.
fn spawn_mailer<E: strata_engine::Engine + Send + Sync + 'static>(
    store: &Arc<Store<E>>,
    clock: &Arc<ManualClock>,
    wc: WorkerConfig,
    handler: Box<strata_outbox::Handler<E, Event>>,
) -> Worker {
    Worker::spawn(
        store.clone(),
        clock.clone(),
        Box::new(SeededRng::new(3)),
        topic(),
        "mailer",
        wc,
        handler,
    )
}

/// A worker loop of `mailer` driven by hand.
pub(crate) fn mailer_loop<'s>(
    store: &'s Store<MemEngine>,
    clock: &Arc<ManualClock>,
    wc: WorkerConfig,
) -> strata_outbox::WorkerLoop<'s, MemEngine, Event> {
    strata_outbox::WorkerLoop::new(
        store,
        clock.clone(),
        Box::new(SeededRng::new(3)),
        topic(),
        "mailer",
        wc,
    )
    .unwrap()
}

fn shared_store(clock: &Arc<ManualClock>) -> Arc<Store<MemEngine>> {
    store_over(clock, |engine| engine)
}

/// A shared store on `wrap` of a `MemEngine`.
fn store_over<E: strata_engine::Engine>(
    clock: &Arc<ManualClock>,
    wrap: impl FnOnce(MemEngine) -> E,
) -> Arc<Store<E>> {
    let opts = options(strata_engine::Durability::Immediate);
    Arc::new(
        Store::open_with(
            wrap(MemEngine::open(opts.keyspace_specs()).unwrap()),
            opts,
            clock.clone(),
            Box::new(SeededRng::new(1)),
        )
        .unwrap(),
    )
}

/// A worker's lease taken through conflicts beyond the store's own
/// retries: the worker keeps trying and handles every entry. Backend
/// failures are waited out too, up to `max_store_failures` in a row: a
/// few of them (a server restarting), and the worker goes on and handles
/// every entry; past the limit it ends with the error. (Found by the
/// mutation run: the guard that tells conflicts from failures, made
/// `true` or `false`, passed every test; and it let contention end the
/// worker, whose acquisition returns the store's `RetriesExhausted`, not
/// a conflict.)
#[test]
fn a_worker_waits_out_conflicts_and_store_failures_and_ends_past_the_limit() {
    let clock = Arc::new(ManualClock::new(T0));
    let store = store_over(&clock, Refusing::new);
    let cfg = config();
    {
        let outbox = Outbox::new(&store, cfg, clock.clone(), Box::new(SeededRng::new(2))).unwrap();
        outbox
            .register("orders", "mailer", Start::Beginning)
            .unwrap();
        for id in 1..=3 {
            store
                .transact(|tx| outbox.push(tx, &topic(), &event(id)))
                .map_err(|e: OutboxError| e)
                .unwrap();
        }
    }
    let spawn = |holder: &str, max_store_failures: Option<u32>| {
        let mut wc = WorkerConfig::new(holder);
        wc.outbox = cfg;
        wc.idle_wait = Duration::from_millis(2);
        wc.max_store_failures = max_store_failures;
        spawn_mailer(
            &store,
            &clock,
            wc,
            Box::new(|tx, d: &Delivery<Event>| {
                tx.put(
                    &OrderKey {
                        id: 1_000 + d.entry.order,
                    },
                    &"mailed".to_owned(),
                )?;
                Ok(())
            }),
        )
    };
    // 25 conflicts: the store tries each transaction 10 times, so the
    // worker's first two acquisitions fail with a conflict.
    store.engine().refuse_next(25, Refusal::Conflict);
    let worker = spawn("w1", Some(0));
    assert_eq!(
        mailed_within_5_s(&store, 3),
        3,
        "every entry handled after the conflicts"
    );
    assert_eq!(store.engine().refusals_left(), 0);
    assert_eq!(worker.shutdown().unwrap().handled, 3);

    // Failing for good, unbounded: the worker runs on, counting the
    // failures in a row; once the store answers, the count is 0 again.
    store.engine().refuse_next(u32::MAX, Refusal::Backend);
    let waiting = spawn("w-waiting", None);
    for _ in 0..500 {
        if waiting.store_failures() >= 3 {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(waiting.store_failures() >= 3 && !waiting.is_finished());
    store.engine().refuse_next(0, Refusal::Backend);
    for _ in 0..500 {
        if waiting.store_failures() == 0 {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(waiting.store_failures(), 0, "the outage is over");
    assert_eq!(waiting.shutdown().unwrap().handled, 0);

    // Six failing commits (the acquisition, then an acknowledgement):
    // waited out by default, and three more entries handled.
    {
        let outbox = Outbox::new(&store, cfg, clock.clone(), Box::new(SeededRng::new(4))).unwrap();
        for id in 4..=6 {
            store
                .transact(|tx| outbox.push(tx, &topic(), &event(id)))
                .map_err(|e: OutboxError| e)
                .unwrap();
        }
    }
    store.engine().refuse_next(6, Refusal::Backend);
    let worker = spawn("w2", None);
    assert_eq!(
        mailed_within_5_s(&store, 6),
        6,
        "every entry handled after the failures"
    );
    assert_eq!(store.engine().refusals_left(), 0);
    assert_eq!(worker.shutdown().unwrap().handled, 3);

    // The backend fails from now on: after two failures waited out, the
    // third ends the worker with the error, which its shutdown returns.
    // Every commit refused as `how` for a worker allowed `most` failures
    // in a row: the commits it tried once it stopped, and its error.
    let refused = |how: Refusal, holder: &str, most: Option<u32>| {
        store.engine().refuse_next(u32::MAX, how);
        let worker = spawn(holder, most);
        for _ in 0..500 {
            if store.engine().refusals_left() < u32::MAX {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        std::thread::sleep(Duration::from_millis(100));
        let tried = u32::MAX - store.engine().refusals_left();
        // Ended: a health check sees it before `shutdown` says why.
        assert!(worker.is_finished(), "{holder} still runs");
        (tried, worker.shutdown().unwrap_err())
    };
    let (tried, err) = refused(Refusal::Backend, "w3", Some(2));
    assert_eq!(
        tried, 3,
        "three commits tried: two failures waited out, the third ended it"
    );
    assert!(
        matches!(&err, OutboxError::Store(e) if !e.is_conflict()),
        "{err:?}"
    );
    assert!(
        strata_engine::ErrorChain(&err)
            .to_string()
            .contains("refused by the test"),
        "{err:?}"
    );

    // An engine that must be reopened is no failure to wait out: the
    // first ends the worker, whatever the limit.
    let (tried, err) = refused(Refusal::Reopen, "w4", None);
    assert_eq!(tried, 1, "one commit tried");
    assert!(
        matches!(&err, OutboxError::Store(e) if strata_engine::ReopenRequired::in_chain(e)),
        "{err:?}"
    );
}

/// One read refused at each point of a worker's turns in turn (its
/// lease's, its poll's, a failure's record, its acknowledgement's, an idle
/// poll's): waited out
/// by default, the worker handles every entry and runs on; allowed no
/// failure, it ends with the error wherever the read fell. (The guards of
/// the poll's and the acknowledgement's errors, made `true` or `false`,
/// passed every other test: those paths read, and only commits were
/// refused; so did the failure record's.)
#[test]
fn a_worker_waits_out_a_failed_read_wherever_it_falls() {
    for pass in 0..10 {
        for most in [None, Some(0)] {
            let clock = Arc::new(ManualClock::new(T0));
            let store = store_over(&clock, Refusing::new);
            let mut cfg = config();
            // A failed entry is retried at once: the clock does not move.
            cfg.base_backoff_ms = 0;
            cfg.max_backoff_ms = 0;
            let outbox =
                Outbox::new(&store, cfg, clock.clone(), Box::new(SeededRng::new(2))).unwrap();
            outbox
                .register("orders", "mailer", Start::Beginning)
                .unwrap();
            for id in 1..=3 {
                store
                    .transact(|tx| outbox.push(tx, &topic(), &event(id)))
                    .map_err(|e: OutboxError| e)
                    .unwrap();
            }
            let mut wc = WorkerConfig::new("reader");
            wc.outbox = cfg;
            wc.idle_wait = Duration::from_millis(2);
            wc.max_store_failures = most;
            // No trims: every read the worker makes is one whose failure
            // counts.
            wc.retention_ms = None;
            store.engine().refuse_reads_after(pass, 1);
            let worker = spawn_mailer(
                &store,
                &clock,
                wc,
                // Each entry fails its first delivery: its failure is
                // recorded (a read and a commit of their own) before it is
                // handled.
                Box::new(move |tx, d: &Delivery<Event>| {
                    if d.attempt == 1 {
                        return Err("first delivery".into());
                    }
                    tx.put(
                        &OrderKey {
                            id: 1_000 + d.entry.order,
                        },
                        &"mailed".to_owned(),
                    )?;
                    Ok(())
                }),
            );
            // The worker reads on (an idle one polls every 2 ms) until the
            // refusal is spent; the test reads nothing before.
            for _ in 0..500 {
                if store.engine().read_refusals_left() == 0 {
                    break;
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            assert_eq!(store.engine().read_refusals_left(), 0, "pass {pass}");
            std::thread::sleep(Duration::from_millis(50));
            if most.is_some() {
                assert!(worker.is_finished(), "pass {pass}: still runs");
                let err = worker.shutdown().unwrap_err();
                assert!(
                    strata_engine::ErrorChain(&err)
                        .to_string()
                        .contains("read refused by the test"),
                    "pass {pass}: {err:?}"
                );
            } else {
                assert_eq!(mailed_within_5_s(&store, 3), 3, "pass {pass}");
                assert!(!worker.is_finished(), "pass {pass}: ended");
                assert_eq!(worker.store_failures(), 0, "pass {pass}");
                assert_eq!(worker.shutdown().unwrap().handled, 3, "pass {pass}");
            }
        }
    }
}

/// An outbox on `store` allowing one attempt per entry, consumer `mailer`
/// of `orders` registered from the beginning; and its configuration.
fn mailer_outbox<'s>(
    store: &'s Store<MemEngine>,
    clock: &Arc<ManualClock>,
) -> (Outbox<'s, MemEngine>, OutboxConfig) {
    let mut cfg = config();
    cfg.max_attempts = 1;
    let outbox = Outbox::new(store, cfg, clock.clone(), Box::new(SeededRng::new(2))).unwrap();
    outbox
        .register("orders", "mailer", Start::Beginning)
        .unwrap();
    (outbox, cfg)
}

/// A handler that always fails, with one attempt allowed: every entry
/// becomes a dead letter, and the report counts them and the batches.
#[test]
fn a_worker_reports_its_dead_letters_and_batches() {
    let clock = Arc::new(ManualClock::new(T0));
    let store = shared_store(&clock);
    let (outbox, cfg) = mailer_outbox(&store, &clock);
    for id in 1..=4 {
        store
            .transact(|tx| outbox.push(tx, &topic(), &event(id)))
            .unwrap();
    }
    let worker = mailer(
        &store,
        &clock,
        cfg,
        Box::new(|_tx, _d: &Delivery<Event>| Err("never works".into())),
    );
    drained(&outbox);
    let report = worker.shutdown().unwrap();
    assert_eq!(
        (report.handled, report.failed, report.dead_lettered),
        (0, 4, 4)
    );
    assert!(report.batches >= 1 && report.batches <= 4, "{report:?}");
    let dead = outbox.dead_letters("orders", "mailer").unwrap();
    assert_eq!(dead.len(), 4);
    assert!(dead.iter().all(|d| d.error == "never works"), "{dead:?}");
}

/// A worker of consumer `mailer` running `handler`, waking every 10 ms.
fn mailer(
    store: &Arc<Store<MemEngine>>,
    clock: &Arc<ManualClock>,
    cfg: strata_outbox::OutboxConfig,
    handler: Box<strata_outbox::Handler<MemEngine, Event>>,
) -> Worker {
    let mut wc = WorkerConfig::new("w");
    wc.outbox = cfg;
    wc.idle_wait = Duration::from_millis(10);
    spawn_mailer(store, clock, wc, handler)
}

/// Waits (up to 2.5 s) until `mailer` owes nothing.
fn drained(outbox: &Outbox<'_, MemEngine>) {
    for _ in 0..500 {
        if outbox.lag("orders", "mailer").unwrap().entries == 0 {
            return;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Dropping a worker stops its thread: entries pushed afterwards stay
/// unhandled.
#[test]
fn a_dropped_worker_handles_nothing_more() {
    let (clock, store, cfg) = mailer_store();
    let outbox = Outbox::new(&store, cfg, clock.clone(), Box::new(SeededRng::new(2))).unwrap();
    let handled = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let seen = handled.clone();
    let mut wc = WorkerConfig::new("w");
    wc.outbox = cfg;
    wc.idle_wait = Duration::from_millis(5);
    let worker = spawn_mailer(
        &store,
        &clock,
        wc,
        Box::new(move |_tx, _d: &Delivery<Event>| {
            seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            Ok(())
        }),
    );
    store
        .transact(|tx| outbox.push(tx, &topic(), &event(1)))
        .unwrap();
    for _ in 0..500 {
        if handled.load(std::sync::atomic::Ordering::SeqCst) == 1 {
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(handled.load(std::sync::atomic::Ordering::SeqCst), 1);
    drop(worker);
    store
        .transact(|tx| outbox.push(tx, &topic(), &event(2)))
        .unwrap();
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(
        handled.load(std::sync::atomic::Ordering::SeqCst),
        1,
        "a dropped worker handled an entry"
    );
    assert_eq!(outbox.lag("orders", "mailer").unwrap().entries, 1);
}

/// A handler that fails with an error longer than a row, on entries whose
/// rows are at the value limit: the worker gives each up (its dead letter
/// whole, the error cut) and goes on, instead of ending at the limit and
/// meeting the same entry at every restart.
#[test]
fn a_worker_gives_up_on_entries_at_the_limit_failing_with_long_errors() {
    let clock = Arc::new(ManualClock::new(T0));
    let store = shared_store(&clock);
    let (outbox, cfg) = mailer_outbox(&store, &clock);
    // Notes of zeros and letters, as long as a push takes.
    let note = |n: usize| -> String {
        (0..n)
            .map(|i| if i % 2 == 0 { '\0' } else { 'q' })
            .collect()
    };
    let mut n = 600;
    let pushed = |id: u64, n: usize| {
        store.transact(|tx| {
            outbox.push(
                tx,
                &topic(),
                &Event {
                    order: id,
                    note: note(n),
                },
            )
        })
    };
    while pushed(1, n).is_err() {
        n -= 1;
    }
    pushed(2, n).unwrap();
    pushed(3, 1).unwrap();
    let worker = mailer(
        &store,
        &clock,
        cfg,
        Box::new(|tx, d: &Delivery<Event>| {
            if d.entry.order == 3 {
                tx.put(&OrderKey { id: 3 }, &"mailed".to_owned())?;
                return Ok(());
            }
            Err(format!("cannot mail {}: {}", d.entry.order, "!".repeat(3_000)).into())
        }),
    );
    drained(&outbox);
    assert!(!worker.is_finished(), "the worker is still running");
    let report = worker.shutdown().unwrap();
    assert_eq!(
        (report.handled, report.failed, report.dead_lettered),
        (1, 2, 2)
    );
    let dead = outbox.dead_letters("orders", "mailer").unwrap();
    let kept: Vec<(u64, bool)> = dead
        .iter()
        .map(|d| {
            let e: Event = strata_codec::decode(&[], &d.envelope).unwrap();
            (
                e.order,
                e.note == note(n)
                    && d.error.starts_with("cannot mail")
                    && d.error.ends_with(" (cut)"),
            )
        })
        .collect();
    assert_eq!(kept, [(1, true), (2, true)]);
    assert_eq!(
        store.get(&OrderKey { id: 3 }).unwrap().as_deref(),
        Some("mailed")
    );
}

/// An idle worker sleeps: its own lease renewal is not a commit to wake
/// for. (It was: each turn took the last commit seen before renewing the
/// lease, the renewal's commit ended the wait at once, and an idle worker
/// renewed its lease in a busy loop, a commit each time.)
#[test]
fn an_idle_worker_sleeps_instead_of_renewing_its_lease_in_a_loop() {
    let (clock, store, cfg) = mailer_store();
    let before = store.last_commit_seen();
    let mut wc = WorkerConfig::new("idle");
    wc.outbox = cfg;
    wc.idle_wait = Duration::from_secs(5);
    let worker = spawn_mailer(
        &store,
        &clock,
        wc,
        Box::new(|_tx, _d: &Delivery<Event>| Ok(())),
    );
    std::thread::sleep(Duration::from_millis(300));
    let commits = store.last_commit_seen() - before;
    worker.shutdown().unwrap();
    // The lease taken (and a trim with nothing to trim, at most), then a
    // five-second sleep.
    assert!(
        commits <= 2,
        "an idle worker made {commits} commits in 300 ms"
    );
}
