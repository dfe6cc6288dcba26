//! The outbox against the raw engine contract, buffered, on redb and
//! RocksDB: ingest of 1 KiB events each written with one outbox entry
//! (about 64 bytes) in the same commit through the store, against the same
//! events committed alone through the engine, and against the raw engine
//! committing the same two rows (issue 40's target); then the drain throughput of
//! one consumer and the lag a steady producer leaves. Interleaved A/B
//! first, then criterion.

#![allow(
    clippy::too_many_lines,
    clippy::many_single_char_names,
    clippy::cast_precision_loss
)]

use std::hint::black_box;
use std::sync::Arc;

use criterion::{Criterion, criterion_group};
use strata_codec::Limits;
use strata_engine::{
    Commit, Durability, Engine, Keyspace, Mutation, SeededRng, StampAt, SystemClock,
};
use strata_engine_redb::{RedbEngine, RedbOptions};
use strata_engine_rocks::{RocksEngine, RocksOptions};
use strata_keys::{tuple, tuple_key};
use strata_outbox::{Outbox, OutboxConfig, OutboxError, Start, Topic};
use strata_store::{Store, StoreOptions};

#[path = "../../bench-support/ab.rs"]
mod ab;
use ab::ab;

/// An event row: `("ev", id)`. The raw side writes the same packed keys
/// (`ev`), so both sides' rows have one layout and land in the same part
/// of the tree: in each pair the raw side takes the even ids and ours the
/// odd ones from one base, so both always append at the right end. (A raw
/// side appending at the end while ours inserts in the middle of the tree
/// made redb write twice the pages: a difference of key placement, not of
/// the store.)
#[derive(Debug, Clone, PartialEq)]
struct EventKey {
    id: u64,
}
tuple_key! {
    EventKey -> Vec<u8> = ("ev", {id});
}

fn options() -> StoreOptions {
    Outbox::<strata_engine::MemEngine>::declare(StoreOptions::new(Limits::FOUNDATIONDB))
        .durability(Durability::Buffered)
        .verify_checksums(true)
}

fn outbox<E: Engine>(store: &Store<E>) -> Outbox<'_, E> {
    let mut c = OutboxConfig::default();
    c.sync_interval_ms = 0;
    Outbox::new(store, c, Arc::new(SystemClock), Box::new(SeededRng::new(1))).unwrap()
}

/// The packed key of event `id`, as the store packs `EventKey { id }`.
fn ev(id: u64) -> Vec<u8> {
    tuple::pack(&("ev", id))
}

/// The entry: about 64 bytes with its envelope and row overhead.
fn entry(id: u64) -> Vec<u8> {
    let mut e = id.to_be_bytes().to_vec();
    e.resize(40, 0x11);
    e
}

/// The raw engine committing the two rows an ingest writes: event `id`,
/// and a 64-byte row under a versionstamped key in the outbox's keyspace
/// (as an entry is written).
fn raw_two_rows<E: Engine>(engine: &E, data: Keyspace, entries: Keyspace, event: &[u8], id: u64) {
    let mut stamped = b"entry/".to_vec();
    stamped.extend_from_slice(&[0; 10]);
    engine
        .commit(
            Commit::new()
                .put(data, ev(id), event.to_vec())
                .mutate(Mutation::PutVersionstamped {
                    ks: entries,
                    key: stamped,
                    value: vec![0x11; 64],
                    at: StampAt::Key(6),
                })
                .durability(Durability::Buffered),
        )
        .unwrap();
}

fn report<E: Engine>(name: &str, engine: &E) {
    let store = Store::open(engine, options()).unwrap();
    let (data, _) = store.keyspaces();
    let ob = outbox(&store);
    let topic: Topic<Vec<u8>> = Topic::new("events").unwrap();
    ob.register("events", "drain", Start::End).unwrap();
    let event = vec![0xAB; 1024];
    // Ours: event `id` and its outbox entry, in one store transaction.
    let ingest = |id: u64| {
        store
            .transact(|tx| {
                tx.put(&EventKey { id }, &event)?;
                ob.push(tx, &topic, &entry(id))?;
                Ok::<_, OutboxError>(())
            })
            .unwrap();
    };
    let (mut i, mut j) = (1u64 << 40, (1u64 << 40) + 1);
    ab::section(name);
    ab(
        "ingest: a 1 KiB event with its outbox entry (store) vs the event alone (engine)",
        7,
        2_000,
        1,
        || {
            i += 2;
            engine
                .commit(
                    Commit::new()
                        .put(data, ev(i), event.clone())
                        .durability(Durability::Buffered),
                )
                .unwrap();
        },
        || {
            j += 2;
            ingest(j);
        },
    );
    // Issue 40 item 1: the same two rows committed by the raw engine (the
    // event, and a 64-byte row under a versionstamped key in the outbox's
    // keyspace, as an entry is written).
    let entries = engine.keyspace(strata_outbox::ENTRIES).unwrap();
    let (mut i, mut j) = (1u64 << 43, (1u64 << 43) + 1);
    let same_rows = ab(
        "ingest: event + outbox entry (store) vs the same two rows (engine)",
        15,
        2_000,
        1,
        || {
            i += 2;
            raw_two_rows(engine, data, entries, &event, i);
        },
        || {
            j += 2;
            ingest(j);
        },
    );
    ab::against(
        "event + outbox entry / the raw engine committing the same two rows",
        same_rows.ratio,
        1.10,
    );
    breakdown(engine, &store, &event);
    drain(name, &store, &ob, &topic);
    poll_rows(engine, &ob, &topic);
}

/// A poll's cost per entry: a consumer that has finished nothing polls the
/// topic's first 256 entries (read-ahead, nothing acknowledged), against
/// the raw engine lending the same 256 rows of the entries keyspace (a
/// snapshot and a cursor, each row's length read).
fn poll_rows<E: Engine>(engine: &E, ob: &Outbox<'_, &E>, topic: &Topic<Vec<u8>>) {
    use strata_engine::{RangeSpec, RowCursor, Snapshot};
    ob.register("events", "reader", Start::Beginning).unwrap();
    let lease = ob.acquire("events", "reader", "bench").unwrap();
    let entries = engine.keyspace(strata_outbox::ENTRIES).unwrap();
    let first = ob
        .poll_after(&lease, topic, strata_outbox::Position::START, 256)
        .unwrap();
    assert_eq!(first.len(), 256, "the drain left 256 entries to poll");
    ab(
        "poll: 256 entries (outbox) vs the same rows lent by the raw engine",
        15,
        200,
        256,
        || {
            let snap = engine.snapshot().unwrap();
            let mut rows = snap.cursor(entries, RangeSpec::all()).unwrap();
            let mut bytes = 0;
            for _ in 0..256 {
                let (k, v) = rows.next_row().unwrap().unwrap();
                bytes += k.len() + v.len();
            }
            black_box(bytes);
        },
        || {
            let got = ob
                .poll_after(&lease, topic, strata_outbox::Position::START, 256)
                .unwrap();
            black_box(got.len());
        },
    );
}

/// Where the ingest time goes: the store's cost for the event alone, and
/// what a second small row costs the raw engine, in the outbox's keyspace
/// and in the event's own keyspace far from the events.
fn breakdown<E: Engine>(engine: &E, store: &Store<&E>, event: &[u8]) {
    let (data, _) = store.keyspaces();
    let entries = engine.keyspace(strata_outbox::ENTRIES).unwrap();
    let raw_event = |i: u64| {
        Commit::new()
            .put(data, ev(i), event.to_vec())
            .durability(Durability::Buffered)
    };
    let (mut i, mut j) = (1u64 << 41, (1u64 << 41) + 1);
    ab(
        "  the event through the store vs the raw event",
        7,
        2_000,
        1,
        || {
            i += 2;
            engine.commit(raw_event(i)).unwrap();
        },
        || {
            j += 2;
            store
                .transact(|tx| tx.put(&EventKey { id: j }, &event.to_vec()))
                .unwrap();
        },
    );
    let mut base = 1u64 << 42;
    for (label, ks) in [
        (
            "  raw: the event plus a 64-byte row in the outbox's keyspace vs the event alone",
            entries,
        ),
        (
            "  raw: the event plus a 64-byte row in the event's keyspace, away from the events, vs the event alone",
            data,
        ),
    ] {
        let (mut i, mut j) = (base, base + 1);
        base <<= 1;
        ab(
            label,
            7,
            2_000,
            1,
            || {
                i += 2;
                engine.commit(raw_event(i)).unwrap();
            },
            || {
                j += 2;
                let commit = raw_event(j).put(ks, tuple::pack(&("zz", j)), vec![0x11; 64]);
                engine.commit(commit).unwrap();
            },
        );
    }
}

/// One consumer drains everything pushed so far: entries per second, and
/// the lag left behind a producer of equal pace.
#[allow(clippy::disallowed_methods)] // a benchmark measures wall time
fn drain<E: Engine>(name: &str, store: &Store<E>, ob: &Outbox<'_, E>, topic: &Topic<Vec<u8>>) {
    ob.reset("events", "drain", Start::Beginning).unwrap();
    let lease = ob.acquire("events", "drain", "bench").unwrap();
    let start = std::time::Instant::now();
    let mut n = 0u64;
    loop {
        let batch = ob.poll(&lease, topic, 256).unwrap();
        if batch.is_empty() {
            break;
        }
        store
            .transact(|tx| {
                for d in &batch {
                    ob.ack(tx, &lease, d.position)?;
                }
                Ok::<_, OutboxError>(())
            })
            .unwrap();
        n += batch.len() as u64;
    }
    let secs = start.elapsed().as_secs_f64();
    ab::note(&format!(
        "{name}: drain of {n} entries by one consumer (batches of 256, one acknowledging commit each): {:.0} entries/s",
        n as f64 / secs
    ));
    // A steady producer and the consumer taking turns: the lag after each
    // round of 100 pushes and one poll of 64.
    let mut worst = 0;
    for round in 0..50u64 {
        for k in 0..100u64 {
            store
                .transact(|tx| ob.push(tx, topic, &entry(round * 1_000 + k)))
                .unwrap();
        }
        let batch = ob.poll(&lease, topic, 64).unwrap();
        store
            .transact(|tx| {
                for d in &batch {
                    ob.ack(tx, &lease, d.position)?;
                }
                Ok::<_, OutboxError>(())
            })
            .unwrap();
        worst = worst.max(ob.lag("events", "drain").unwrap().entries);
    }
    ab::note(&format!(
        "{name}: a producer of 100 entries per consumer poll of 64 leaves a lag of up to {worst} entries after 50 rounds"
    ));
    black_box(worst);
}

struct Engines {
    redb: RedbEngine,
    rocks: RocksEngine,
    _dir: ab::BenchDir,
}

fn engines() -> Engines {
    let dir = ab::BenchDir::new("outbox");
    let specs = options().keyspace_specs();
    let redb =
        RedbEngine::open(dir.join("redb.redb"), specs.clone(), RedbOptions::default()).unwrap();
    let rocks = RocksEngine::open(dir.join("rocks"), specs, RocksOptions::default()).unwrap();
    Engines {
        redb,
        rocks,
        _dir: dir,
    }
}

fn criterion_benches(c: &mut Criterion) {
    let e = engines();
    bench_engine(c, "redb", &e.redb);
    bench_engine(c, "rocks", &e.rocks);
}

fn bench_engine<E: Engine>(c: &mut Criterion, name: &str, engine: &E) {
    let store = Store::open(engine, options()).unwrap();
    let data: Keyspace = store.keyspaces().0;
    let ob = outbox(&store);
    let topic: Topic<Vec<u8>> = Topic::new("events").unwrap();
    let event = vec![0xAB; 1024];
    let (mut i, mut j) = (1u64 << 50, 1u64 << 51);
    let mut g = c.benchmark_group(format!("{name}/ingest_1k"));
    g.bench_function("raw", |b| {
        b.iter(|| {
            i += 1;
            engine
                .commit(
                    Commit::new()
                        .put(data, ev(i), event.clone())
                        .durability(Durability::Buffered),
                )
                .unwrap()
        });
    });
    let entries = engine.keyspace(strata_outbox::ENTRIES).unwrap();
    let mut k = 1u64 << 52;
    g.bench_function("raw_two_rows", |b| {
        b.iter(|| {
            k += 1;
            raw_two_rows(engine, data, entries, &event, k);
        });
    });
    g.bench_function("ours", |b| {
        b.iter(|| {
            j += 1;
            store
                .transact(|tx| {
                    tx.put(&EventKey { id: j }, &event)?;
                    ob.push(tx, &topic, &entry(j))?;
                    Ok::<_, OutboxError>(())
                })
                .unwrap();
        });
    });
    g.finish();
}

criterion_group! {
    name = benches;
    config = ab::criterion_config(30);
    targets = criterion_benches
}

fn main() {
    ab::run(
        || {
            let e = engines();
            report("redb", &e.redb);
            report("rocks", &e.rocks);
        },
        benches,
    );
}
