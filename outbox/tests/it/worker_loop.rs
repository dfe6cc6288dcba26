//! A worker's loop driven by hand (`WorkerLoop`), one turn at a time on
//! the test's clock: copies sharing a consumer, retention, the lease kept
//! at half time, the wait for a retry.

use std::time::Duration;

use strata_engine::{MemEngine, SeededRng};
use strata_outbox::{Delivery, Outbox, WorkerConfig};

use crate::worker::{mailer_loop, mailer_store};
use crate::{Event, event, topic};

/// A worker loop driven by hand: a copy under the same holder name waits
/// while the first holds the consumer, takes over once it finishes, and a
/// set stop ends a turn before the entry in hand.
#[test]
fn worker_loops_driven_by_hand_share_one_consumer_in_turn() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use strata_outbox::{Turn, WorkerLoop};

    let (clock, store, cfg) = mailer_store();
    let outbox = Outbox::new(&store, cfg, clock.clone(), Box::new(SeededRng::new(2))).unwrap();
    let push = |orders: std::ops::RangeInclusive<u64>| {
        for id in orders {
            store
                .transact(|tx| outbox.push(tx, &topic(), &event(id)))
                .unwrap();
        }
    };
    push(1..=3);
    let mut wc = WorkerConfig::new("same-name");
    wc.outbox = cfg;
    wc.batch = 2;
    wc.idle_wait = Duration::from_millis(70);
    let start = |seed: u64| {
        WorkerLoop::new(
            &store,
            clock.clone(),
            Box::new(SeededRng::new(seed)),
            topic(),
            "mailer",
            wc.clone(),
        )
        .unwrap()
    };
    let (mut first, mut second) = (start(3), start(4));
    let mut handled: Vec<(u8, u64)> = Vec::new();
    let by = |who: u8| {
        move |_tx: &mut strata_store::Tx<'_, MemEngine>, d: &Delivery<Event>| {
            Ok::<_, strata_outbox::HandlerError>((who, d.entry.order))
        }
    };
    let go = AtomicBool::new(false);
    let turn = |w: &mut WorkerLoop<'_, MemEngine, Event>, who: u8, out: &mut Vec<(u8, u64)>| {
        let f = by(who);
        w.turn(
            &mut |tx: &mut strata_store::Tx<'_, MemEngine>, d: &Delivery<Event>| {
                out.push(f(tx, d)?);
                Ok(())
            },
            &go,
        )
        .unwrap()
    };
    // A batch of two, then the third entry.
    assert_eq!(turn(&mut first, 1, &mut handled), Turn::Again);
    assert_eq!(handled, [(1, 1), (1, 2)]);
    // The copy with the same name waits: the lease is the first's.
    let seen = store.last_commit_seen();
    assert_eq!(
        turn(&mut second, 2, &mut handled),
        Turn::Wait {
            seen,
            wait: Duration::from_millis(70)
        }
    );
    assert_eq!(turn(&mut first, 1, &mut handled), Turn::Again);
    assert_eq!(handled.len(), 3);
    // Nothing due: the first waits too, for a commit after the last one.
    let Turn::Wait { seen, wait } = turn(&mut first, 1, &mut handled) else {
        panic!("nothing to do, yet no wait");
    };
    assert_eq!(
        (seen, wait),
        (store.last_commit_seen(), Duration::from_millis(70))
    );
    assert_eq!(first.report().handled, 3);
    assert_eq!(first.report().batches, 2);
    // The first stops and gives the lease up: the second takes over at
    // once, without the lease running out.
    assert_eq!(first.finish().handled, 3);
    push(4..=4);
    assert_eq!(turn(&mut second, 2, &mut handled), Turn::Again);
    assert_eq!(handled.last(), Some(&(2, 4)));
    // A stop set before the turn: the batch is polled, nothing handled.
    push(5..=5);
    go.store(true, Ordering::SeqCst);
    assert_eq!(turn(&mut second, 2, &mut handled), Turn::Again);
    assert_eq!(handled.len(), 4);
    go.store(false, Ordering::SeqCst);
    assert_eq!(turn(&mut second, 2, &mut handled), Turn::Again);
    assert_eq!(handled.last(), Some(&(2, 5)));
    assert_eq!(second.report().handled, 2);
    assert_eq!(second.store_failures(), 0);
    assert!(format!("{second:?}").contains("holds_lease: true"));
}

/// Retention: a trim that leaves more behind (one commit's worth at a
/// time) goes on at the next turn, not after `trim_every_ms`.
#[test]
fn a_worker_trims_a_long_backlog_one_commit_a_turn_until_done() {
    use std::sync::atomic::AtomicBool;
    let (clock, store, cfg) = mailer_store();
    let outbox = Outbox::new(&store, cfg, clock.clone(), Box::new(SeededRng::new(2))).unwrap();
    for id in 1..=40 {
        store
            .transact(|tx| outbox.push(tx, &topic(), &event(id)))
            .unwrap();
    }
    let mut wc = WorkerConfig::new("trimmer");
    wc.outbox = cfg;
    wc.batch = 64;
    wc.retention_ms = Some(0);
    wc.trim_every_ms = 60_000;
    let mut work = mailer_loop(&store, &clock, wc);
    let go = AtomicBool::new(false);
    let mut handler = |_tx: &mut strata_store::Tx<'_, MemEngine>, _d: &Delivery<Event>| Ok(());
    // The first turn trims nothing (nothing passed yet) and handles all.
    work.turn(&mut handler, &go).unwrap();
    assert_eq!((work.report().handled, work.report().trimmed), (40, 0));
    // Not before `trim_every_ms`.
    work.turn(&mut handler, &go).unwrap();
    assert_eq!(work.report().trimmed, 0);
    clock.advance(60_001);
    // Then a commit of at most 16 entries (the batch entry limit) a turn,
    // the clock standing still, until none is left.
    let mut trimmed = Vec::new();
    for _ in 0..5 {
        work.turn(&mut handler, &go).unwrap();
        trimmed.push(work.report().trimmed);
    }
    assert_eq!(trimmed.last(), Some(&40), "{trimmed:?}");
    assert!(trimmed[0] < 40 && trimmed[0] > 0, "{trimmed:?}");
    assert_eq!(outbox.lag("orders", "mailer").unwrap().entries, 0);
}

/// The lease is renewed once half its time is gone, not at every turn (an
/// idle worker commits a renewal every `lease_ms / 2`), and before an
/// entry of a long batch, so that slow handlers keep it.
#[test]
fn a_worker_renews_its_lease_at_half_time_even_inside_a_long_batch() {
    use std::sync::atomic::AtomicBool;
    use strata_outbox::Turn;

    let (clock, store, cfg) = mailer_store();
    assert_eq!(cfg.lease_ms, 5_000);
    let mut wc = WorkerConfig::new("slow");
    wc.outbox = cfg;
    wc.retention_ms = None;
    let mut work = mailer_loop(&store, &clock, wc);
    let go = AtomicBool::new(false);
    // Each entry takes the handler two seconds of the lease's five.
    let mut orders = Vec::new();
    let mut handler = |_tx: &mut strata_store::Tx<'_, MemEngine>, d: &Delivery<Event>| {
        orders.push(d.entry.order);
        clock.advance(2_000);
        Ok(())
    };
    // Taken.
    let before = store.last_commit_seen();
    assert!(matches!(
        work.turn(&mut handler, &go).unwrap(),
        Turn::Wait { .. }
    ));
    let taken = store.last_commit_seen();
    assert!(taken > before);
    // Idle turns with more than half the lease left commit nothing.
    clock.advance(2_499);
    assert!(matches!(
        work.turn(&mut handler, &go).unwrap(),
        Turn::Wait { .. }
    ));
    assert_eq!(store.last_commit_seen(), taken);
    // Half or less left: renewed, one commit.
    clock.advance(1);
    work.turn(&mut handler, &go).unwrap();
    assert_eq!(store.last_commit_seen(), taken + 1);
    // A batch of four slow entries (eight seconds, the lease five): the
    // lease renewed inside it, every entry acknowledged at its first try.
    let outbox = Outbox::new(&store, cfg, clock.clone(), Box::new(SeededRng::new(4))).unwrap();
    for id in 1..=4 {
        store
            .transact(|tx| outbox.push(tx, &topic(), &event(id)))
            .unwrap();
    }
    assert_eq!(work.turn(&mut handler, &go).unwrap(), Turn::Again);
    assert_eq!(orders, [1, 2, 3, 4]);
    assert_eq!(work.report().handled, 4);
    assert_eq!(outbox.lag("orders", "mailer").unwrap().entries, 0);
}

/// An idle worker whose entry failed wakes for its retry: the turn's wait
/// ends by the retry time, not after the whole `idle_wait`.
#[test]
fn an_idle_worker_wakes_for_a_failed_entrys_retry() {
    use std::sync::atomic::AtomicBool;
    use strata_outbox::Turn;

    let (clock, store, cfg) = mailer_store();
    assert_eq!((cfg.base_backoff_ms, cfg.max_backoff_ms), (100, 1_000));
    let outbox = Outbox::new(&store, cfg, clock.clone(), Box::new(SeededRng::new(2))).unwrap();
    store
        .transact(|tx| outbox.push(tx, &topic(), &event(1)))
        .unwrap();
    let mut wc = WorkerConfig::new("retrier");
    wc.outbox = cfg;
    wc.idle_wait = Duration::from_secs(5);
    let mut work = mailer_loop(&store, &clock, wc);
    let go = AtomicBool::new(false);
    let mut tries = 0;
    let mut handler = |_tx: &mut strata_store::Tx<'_, MemEngine>, _d: &Delivery<Event>| {
        tries += 1;
        if tries == 1 {
            return Err("first try fails".into());
        }
        Ok(())
    };
    assert_eq!(work.turn(&mut handler, &go).unwrap(), Turn::Again);
    assert_eq!(work.report().failed, 1);
    // Nothing due: a wait of at most the first backoff (100 ms), not 5 s.
    let Turn::Wait { wait, .. } = work.turn(&mut handler, &go).unwrap() else {
        panic!("nothing due, yet no wait");
    };
    assert!(
        wait > Duration::ZERO && wait <= Duration::from_millis(100),
        "{wait:?}"
    );
    // Once the wait is over the entry is due and handled.
    clock.advance(u64::try_from(wait.as_millis()).unwrap());
    assert_eq!(work.turn(&mut handler, &go).unwrap(), Turn::Again);
    assert_eq!(work.report().handled, 1);
    // Then, nothing left to retry: the whole idle wait.
    let Turn::Wait { wait, .. } = work.turn(&mut handler, &go).unwrap() else {
        panic!("nothing due, yet no wait");
    };
    assert_eq!(wait, Duration::from_secs(5));
}
