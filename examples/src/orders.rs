//! An orders service on redb, as a new user builds it: orders and their
//! lines in one transaction, a per-customer quota, a cart that expires, an
//! `orders` outbox topic written in the same transaction, a [`Worker`]
//! keeping per-customer totals exactly once, and a search index over the
//! orders' notes. The system clock and randomness, a real file.
//!
//! `cargo run -p strata-examples --example orders [DIR]` runs [`run`] and
//! prints what it did; then the tool inspects what it left:
//!
//! ```text
//! strata info DIR/orders.redb
//! strata verify DIR/orders.redb
//! strata outbox DIR/orders.redb list
//! strata search DIR/orders.redb query orders "gift"
//! strata backup DIR/orders.redb DIR/orders.backup
//! ```
//!
//! Holder names: a lease belongs to the worker that took it, so two
//! workers given the same holder name (a restart while the old process
//! still runs) never both hold the consumer. Before 2026-11-27 a lease
//! belonged to its holder name, and two such workers applied entries twice.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use strata_engine_redb::{RedbEngine, RedbOptions};
// One import for the store, the outbox and search.
use strata_search::prelude::*;

/// An order as stored: who placed it, its sum, its note.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Order {
    /// The customer who placed it.
    pub customer: u64,
    /// The sum of its lines, in cents.
    pub total_cents: u64,
    /// What the customer wrote (indexed for search).
    pub note: String,
}
value!(Order: postcard, version = 1);

/// A line of an order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Line {
    /// What was bought.
    pub sku: String,
    /// How many.
    pub quantity: u32,
    /// The price of one, in cents.
    pub price_cents: u64,
}
value!(Line: postcard, version = 1);

/// A customer's cart: what they put in it, until it expires.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Cart {
    /// The SKUs in it.
    pub skus: Vec<String>,
}
value!(Cart: postcard, version = 1);

/// What the `orders` topic carries: an order was placed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Placed {
    /// The order's number.
    pub order: u64,
    /// The customer who placed it.
    pub customer: u64,
    /// Its total, in cents.
    pub total_cents: u64,
}
value!(Placed: postcard, version = 1);

/// `("c", customer, "order", order)`: every row of a customer shares the
/// prefix `("c", customer)`, the quota scope.
#[derive(Debug, Clone, PartialEq)]
pub struct OrderKey {
    /// The customer who placed it.
    pub customer: u64,
    /// The order's number.
    pub order: u64,
}

/// `("c", customer, "line", order, line)`.
#[derive(Debug, Clone, PartialEq)]
pub struct LineKey {
    /// The customer who placed the order.
    pub customer: u64,
    /// The order's number.
    pub order: u64,
    /// The line's number in the order.
    pub line: u32,
}

/// `("c", customer, "cart")`.
#[derive(Debug, Clone, PartialEq)]
pub struct CartKey {
    /// Whose cart it is.
    pub customer: u64,
}

/// `("c", customer, "total")`: the customer's total spend in cents, a
/// counter kept by the worker.
#[derive(Debug, Clone, PartialEq)]
pub struct TotalKey {
    /// Whose spend it counts.
    pub customer: u64,
}

tuple_key! {
    OrderKey -> Order = ("c", {customer}, "order", {order});
    LineKey -> Line = ("c", {customer}, "line", {order}, {line});
    CartKey -> Cart = ("c", {customer}, "cart");
    TotalKey -> Counter = ("c", {customer}, "total");
}

/// The topic the orders are announced on.
pub const TOPIC: &str = "orders";
/// The consumer keeping the totals.
pub const TOTALS: &str = "totals";
/// Bytes each customer may store.
pub const QUOTA_BYTES: u64 = 64 * 1024;
/// How long a cart lives without an order, in milliseconds.
pub const CART_TTL_MS: u64 = 30 * 60 * 1_000;

/// What can go wrong in the service.
#[derive(Debug, thiserror::Error)]
pub enum OrdersError {
    /// The store refused or failed (a customer over their quota, say).
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The outbox refused or failed.
    #[error(transparent)]
    Outbox(#[from] OutboxError),
    /// The search index refused or failed.
    #[error(transparent)]
    Search(#[from] SearchError),
    /// The engine did not open.
    #[error("the database does not open: {0}")]
    Open(String),
    /// The worker did not catch up in time.
    #[error("the worker did not apply every order within {0:?}")]
    Slow(Duration),
}

/// The store's options: the outbox's spaces, a quota per customer.
pub fn options() -> StoreOptions {
    Outbox::<RedbEngine>::declare(
        StoreOptions::new(Limits::FOUNDATIONDB.with_quota(QUOTA_BYTES)).quota_scope_tuple_prefix(2),
    )
}

/// The search index over the orders' notes, fed by the `orders` topic
/// itself: each `Placed` entry names its order's row, which the indexer
/// reads (one outbox entry per order, not one for the topic and one for the
/// index).
///
/// # Errors
/// None in practice: the names are valid.
pub fn notes_index() -> Result<IndexSpec<OrderKey>, OrdersError> {
    Ok(IndexSpec::new("orders", |_: &OrderKey, o: &Order| {
        Document::new().text("note", &o.note)
    })?
    .text("note", 1.0)?
    .fed_by(&topic()?, |p: &Placed| {
        vec![OrderKey {
            customer: p.customer,
            order: p.order,
        }]
    }))
}

/// The `orders` topic.
///
/// # Errors
/// None in practice: the name is valid.
pub fn topic() -> Result<Topic<Placed>, OutboxError> {
    Topic::new(TOPIC)
}

/// Places an order: its row, its lines and its announcement (which the
/// totals worker and the notes index both consume) commit together or not
/// at all; the customer's cart goes with it. A customer over their quota
/// is refused with nothing written.
///
/// # Errors
/// [`StoreError::Quota`] inside [`OrdersError::Store`]; a store or outbox
/// failure.
pub fn place(
    store: &Store<RedbEngine>,
    outbox: &Outbox<'_, RedbEngine>,
    key: &OrderKey,
    note: &str,
    lines: &[Line],
) -> Result<Order, OrdersError> {
    let order = Order {
        customer: key.customer,
        total_cents: lines
            .iter()
            .map(|l| u64::from(l.quantity) * l.price_cents)
            .sum(),
        note: note.to_owned(),
    };
    let topic = topic()?;
    store.transact(|tx| {
        tx.put(key, &order)?;
        for (i, line) in lines.iter().enumerate() {
            let line_key = LineKey {
                customer: key.customer,
                order: key.order,
                line: u32::try_from(i).unwrap_or(u32::MAX),
            };
            tx.put(&line_key, line)?;
        }
        tx.delete(&CartKey {
            customer: key.customer,
        })?;
        outbox.push(
            tx,
            &topic,
            &Placed {
                order: key.order,
                customer: key.customer,
                total_cents: order.total_cents,
            },
        )?;
        Ok::<_, OrdersError>(())
    })?;
    Ok(order)
}

/// What [`run`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    /// The database file.
    pub path: PathBuf,
    /// Orders placed.
    pub placed: u64,
    /// Orders refused for a customer over their quota.
    pub refused: u64,
    /// Each customer's total as the worker counted it, in cents.
    pub totals: BTreeMap<u64, i64>,
    /// Orders the search for "gift" found.
    pub gift_hits: usize,
    /// Entries the worker handled.
    pub handled: u64,
}

/// The lines of order `n` of the walk: one to three lines, prices that
/// vary, a note saying "gift" for every third order.
pub fn lines_of(n: u64) -> (String, Vec<Line>) {
    let lines = (0..=n % 3)
        .map(|i| Line {
            sku: format!("sku-{}", (n + i) % 7),
            quantity: u32::try_from(1 + i).unwrap_or(1),
            price_cents: 250 + 100 * ((n * 7 + i) % 11),
        })
        .collect();
    let note = if n.is_multiple_of(3) {
        format!("order {n}: a gift, wrap it please")
    } else {
        format!("order {n}: leave at the door")
    };
    (note, lines)
}

/// Opens (or creates) `dir/orders.redb` and walks through the service:
/// `orders` orders spread over `customers` customers (each with a cart
/// first), a worker summing totals, the index caught up and searched, one
/// order too large for its customer's quota refused. Everything stops
/// cleanly: the worker and the indexer give their leases up.
///
/// # Errors
/// A failure of any step (an order over the quota is counted, not an
/// error).
pub fn run(dir: &Path, customers: u64, orders: u64) -> Result<Report, OrdersError> {
    std::fs::create_dir_all(dir).map_err(|e| OrdersError::Open(e.to_string()))?;
    let path = dir.join("orders.redb");
    let options = options();
    let engine = RedbEngine::open(&path, options.keyspace_specs(), RedbOptions::default())
        .map_err(|e| OrdersError::Open(e.to_string()))?;
    // The store holds the clock and randomness (the system's here); the
    // outbox, the worker and the indexer take theirs from it.
    let store = Arc::new(Store::open(engine, options)?);
    store.publish_catalog()?;
    let outbox = Outbox::open(&store, OutboxConfig::default())?;
    outbox.register(TOPIC, TOTALS, Start::Beginning)?;
    let index = notes_index()?;

    let worker = Worker::start(
        store.clone(),
        topic()?,
        TOTALS,
        WorkerConfig::new("orders-totals"),
        Box::new(|tx, d: &Delivery<Placed>| {
            let cents = i64::try_from(d.entry.total_cents)?;
            tx.add(
                &TotalKey {
                    customer: d.entry.customer,
                },
                cents,
            )?;
            Ok(())
        }),
    );

    let mut report = Report {
        path: path.clone(),
        placed: 0,
        refused: 0,
        totals: BTreeMap::new(),
        gift_hits: 0,
        handled: 0,
    };
    let first = store.engine_last_order(customers)?;
    for n in first..first + orders {
        let customer = n % customers.max(1);
        store.put_with_ttl(
            &CartKey { customer },
            &Cart {
                skus: vec![format!("sku-{}", n % 7)],
            },
            CART_TTL_MS,
        )?;
        let (note, lines) = lines_of(n);
        place(
            &store,
            &outbox,
            &OrderKey { customer, order: n },
            &note,
            &lines,
        )?;
        report.placed += 1;
    }
    // An order whose note alone is larger than the customer's quota:
    // refused, nothing written.
    let huge = "x".repeat(usize::try_from(QUOTA_BYTES).unwrap_or(usize::MAX));
    match place(
        &store,
        &outbox,
        &OrderKey {
            customer: 0,
            order: u64::MAX,
        },
        &huge,
        &[],
    ) {
        Err(OrdersError::Store(StoreError::Quota { .. } | StoreError::Limit { .. })) => {
            report.refused += 1;
        }
        Err(e) => return Err(e),
        Ok(_) => {}
    }

    wait_for_totals(&outbox, &*store.clock())?;
    report.handled = worker.shutdown().map_err(OrdersError::Outbox)?.handled;
    let view = store.read()?;
    for customer in 0..customers {
        report
            .totals
            .insert(customer, view.counter(&TotalKey { customer })?);
    }
    drop(view);

    report.gift_hits = search_gifts(&outbox, index, dir)?;
    store.engine().sync().map_err(StoreError::from)?;
    Ok(report)
}

/// Waits (at most 30 s on `clock`) until the totals consumer has nothing
/// left to handle.
fn wait_for_totals(outbox: &Outbox<'_, RedbEngine>, clock: &dyn Clock) -> Result<(), OrdersError> {
    let until = clock.now_ms() + 30_000;
    while outbox.lag(TOPIC, TOTALS)?.entries > 0 {
        if clock.now_ms() > until {
            return Err(OrdersError::Slow(Duration::from_secs(30)));
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    Ok(())
}

/// Catches the notes index up in `dir/index` and counts the orders whose
/// note says "gift"; closes the indexer (its lease given up).
fn search_gifts(
    outbox: &Outbox<'_, RedbEngine>,
    index: IndexSpec<OrderKey>,
    dir: &Path,
) -> Result<usize, OrdersError> {
    let mut indexer = Indexer::open(
        outbox,
        index,
        &Location::Dir(dir.join("index")),
        IndexerConfig::new("orders-indexer"),
        outbox.clock(),
    )?;
    indexer.catch_up()?;
    let hits = indexer
        .search(&Query::new("gift").limit(10_000))?
        .hits
        .len();
    indexer.close()?;
    Ok(hits)
}

/// The next order number: one past the highest stored, so running the
/// walk again on the same directory adds orders.
trait LastOrder {
    fn engine_last_order(&self, customers: u64) -> Result<u64, StoreError>;
}

impl LastOrder for Store<RedbEngine> {
    fn engine_last_order(&self, customers: u64) -> Result<u64, StoreError> {
        let mut next = 0;
        let view = self.read()?;
        for customer in 0..customers {
            let scan = Scan::range_of(KeyRange::tuple_prefix(&tuple::pack(&(
                "c", customer, "order",
            ))))
            .reverse()
            .limit(1);
            if let Some(row) = view.scan::<OrderKey>(&scan)?.next() {
                let (k, _) = row?;
                if k.order != u64::MAX {
                    next = next.max(k.order + 1);
                }
            }
        }
        Ok(next)
    }
}
