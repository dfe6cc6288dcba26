//! Integration tests of strata-outbox, on `MemEngine`, `RedbEngine` and
//! `RocksEngine`.

#![allow(clippy::too_many_lines)]

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use strata_codec::{Limits, value};
use strata_engine::{Durability, Engine, ManualClock, MemEngine, SeededRng};
use strata_keys::tuple_key;
use strata_outbox::{Delivery, Outbox, OutboxConfig, OutboxError, Topic};
use strata_store::{Store, StoreOptions};

mod delivery;
mod failures;
mod kill;
mod metrics;
mod processes;
mod worker;
mod worker_loop;

/// An order event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Event {
    pub(crate) order: u64,
    pub(crate) note: String,
}
value!(Event: postcard, version = 1);

/// The data an event describes: `("order", id)`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct OrderKey {
    pub(crate) id: u64,
}
tuple_key! {
    OrderKey -> String = ("order", {id});
}

pub(crate) fn limits() -> Limits {
    Limits {
        max_key_bytes: 128,
        max_value_bytes: 512,
        max_batch_entries: 16,
        max_batch_bytes: 16_384,
        quota_bytes: 1 << 20,
    }
}

pub(crate) fn options(durability: Durability) -> StoreOptions {
    Outbox::<MemEngine>::declare(StoreOptions::new(limits())).durability(durability)
}

pub(crate) fn config() -> OutboxConfig {
    let mut c = OutboxConfig::default();
    c.max_attempts = 3;
    c.base_backoff_ms = 100;
    c.max_backoff_ms = 1_000;
    c.lease_ms = 5_000;
    c.sync_interval_ms = 0;
    c
}

pub(crate) use strata_test_support::{T0, mem, postgres, redb, rocks};

/// Runs the body on a fresh store of each engine, with an outbox (inside
/// [`engine_tests!`], on the test's engine alone).
#[macro_export]
macro_rules! on_every_engine {
    ($durability:expr, |$store:ident, $outbox:ident, $clock:ident| $body:block) => {{
        use strata_test_support::{EngineKind, runs};
        if runs(EngineKind::Mem) {
            let ($store, $clock, _dir) = $crate::mem($crate::options($durability));
            let $outbox = $crate::outbox(&$store, &$clock);
            $body
        }
        if runs(EngineKind::Redb) {
            let ($store, $clock, _dir) = $crate::redb($crate::options($durability));
            let $outbox = $crate::outbox(&$store, &$clock);
            $body
        }
        if runs(EngineKind::Rocks) {
            let ($store, $clock, _dir) = $crate::rocks($crate::options($durability));
            let $outbox = $crate::outbox(&$store, &$clock);
            $body
        }
        if runs(EngineKind::Postgres) {
            let ($store, $clock, _server) = $crate::postgres($crate::options($durability));
            let $outbox = $crate::outbox(&$store, &$clock);
            $body
        }
    }};
}

/// One test per engine (`name::mem`, `name::redb`, `name::rocks`,
/// `name::postgres`) for each function given.
#[macro_export]
macro_rules! engine_tests {
    ($($t:tt)*) => {
        strata_test_support::engine_tests!([mem, redb, rocks, postgres] $($t)*);
    };
}

pub(crate) fn outbox<'s, E: Engine>(
    store: &'s Store<E>,
    clock: &Arc<ManualClock>,
) -> Outbox<'s, E> {
    Outbox::new(store, config(), clock.clone(), Box::new(SeededRng::new(7))).unwrap()
}

pub(crate) fn topic() -> Topic<Event> {
    Topic::new("orders").unwrap()
}

pub(crate) fn event(order: u64) -> Event {
    Event {
        order,
        note: format!("order {order}"),
    }
}

/// How many times an event was handled: `("handled", order)`, for the
/// tests that kill processes (its count as text).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct HandledKey {
    pub(crate) order: u64,
}
tuple_key! {
    HandledKey -> String = ("handled", {order});
}

/// A worker's handler: one more handling of the event, counted in its row
/// in the acknowledging transaction.
pub(crate) fn count_handling<E: Engine>(
    tx: &mut strata_store::Tx<'_, E>,
    d: &Delivery<Event>,
) -> Result<(), strata_outbox::HandlerError> {
    let key = HandledKey {
        order: d.entry.order,
    };
    let times: u32 = tx.get(&key)?.map_or(Ok(0), |t| t.parse())?;
    tx.put(&key, &(times + 1).to_string())?;
    Ok(())
}

/// The orders handled, in order, each checked to have been handled once
/// (`context` names the moment in a failure).
pub(crate) fn handled_once<E: Engine>(store: &Store<E>, context: &str) -> Vec<u64> {
    let view = store.read().unwrap();
    let prefix = strata_keys::tuple::pack(&("handled",));
    let range = strata_keys::KeyRange::tuple_prefix(&prefix);
    let mut handled = Vec::new();
    for row in view
        .scan::<HandledKey>(&strata_store::Scan::range_of(range))
        .unwrap()
    {
        let (key, times) = row.unwrap();
        assert_eq!(
            times, "1",
            "{context}: order {} handled {times} times",
            key.order
        );
        handled.push(key.order);
    }
    handled
}

/// Writes order `id` and pushes its event in one transaction.
pub(crate) fn place<E: Engine>(outbox: &Outbox<'_, E>, id: u64, key: Option<&[u8]>) {
    let store = outbox.store();
    store
        .transact(|tx| {
            tx.put(&OrderKey { id }, &format!("order {id}"))?;
            match key {
                Some(k) => outbox.push_keyed(tx, &topic(), k, &event(id))?,
                None => outbox.push(tx, &topic(), &event(id))?,
            }
            Ok::<_, OutboxError>(())
        })
        .unwrap();
}

/// The order numbers of deliveries.
pub(crate) fn orders(d: &[Delivery<Event>]) -> Vec<u64> {
    d.iter().map(|d| d.entry.order).collect()
}

/// Acknowledges every delivery, each in its own transaction.
pub(crate) fn ack_all<E: Engine>(
    outbox: &Outbox<'_, E>,
    lease: &strata_outbox::Lease,
    d: &[Delivery<Event>],
) {
    for d in d {
        outbox
            .store()
            .transact(|tx| outbox.ack(tx, lease, d.position))
            .unwrap();
    }
}

#[test]
fn the_outbox_needs_its_spaces() {
    let options = StoreOptions::new(limits());
    let (store, clock, _d) = mem(options);
    assert!(matches!(
        Outbox::new(&store, config(), clock, Box::new(SeededRng::new(1))),
        Err(OutboxError::NotDeclared)
    ));
    assert!(matches!(
        Topic::<Event>::new(""),
        Err(OutboxError::BadName { what: "topic", .. })
    ));
}
