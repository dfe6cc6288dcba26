//! Agent-memory ingest against the raw engine contract, on redb and
//! RocksDB, buffered and immediate: `put_event` (the duplicate check as a
//! read in the transaction, a JSON envelope with its checksum, the outbox
//! entry with its versionstamp, one commit) against the raw engine writing
//! the same two rows (the event's bytes and a 64-byte entry) in one commit.
//! Then the whole pipeline's pace: events with a grip every ten (the grip's
//! search projection rides the outbox), indexed by an indexer catching up
//! at the end. Interleaved A/B first, then criterion.

#![allow(clippy::cast_precision_loss)]

use std::sync::Arc;

use criterion::{Criterion, criterion_group};
use strata_codec::Limits;
use strata_engine::{Commit, Durability, Engine, SystemClock};
use strata_engine_redb::{RedbEngine, RedbOptions};
use strata_engine_rocks::{RocksEngine, RocksOptions};
use strata_outbox::{ENTRIES, Outbox, OutboxConfig};
use strata_schemas::agent_memory::{AgentMemory, EVENTS, Event, EventRef, Grip, search_spec};
use strata_search::{Indexer, IndexerConfig, Location};
use strata_store::{Store, StoreOptions};

#[path = "../../bench-support/ab.rs"]
mod ab;
use ab::ab;

fn options(durability: Durability) -> StoreOptions {
    AgentMemory::<strata_engine::MemEngine>::declare(StoreOptions::new(Limits::FOUNDATIONDB))
        .durability(durability)
}

/// Event `n`: about 200 bytes of text, a ULID of its own.
fn event(n: u64) -> Event {
    Event {
        event_type: strata_schemas::agent_memory::EventType::UserMessage,
        metadata: std::collections::BTreeMap::new(),
        agent: None,
        event_id: format!("01HNVX2X7Q{n:016}"),
        session_id: "session-1".into(),
        timestamp_ms: 1_706_540_400_000 + n,
        role: "user".into(),
        text: format!(
            "message {n}: {}",
            "the quick brown fox jumps over the lazy dog ".repeat(4)
        ),
    }
}

fn outbox<E: Engine>(store: &Store<E>) -> Outbox<'_, E> {
    let mut c = OutboxConfig::default();
    c.sync_interval_ms = 0;
    Outbox::new(
        store,
        c,
        Arc::new(SystemClock),
        Box::new(strata_engine::SeededRng::new(1)),
    )
    .unwrap()
}

fn report<E: Engine>(name: &str, engine: &E, durability: Durability) {
    let store = Store::open(engine, options(durability)).unwrap();
    let ob = outbox(&store);
    let mem = AgentMemory::open(&store, &ob).unwrap();
    let events_ks = engine.keyspace(EVENTS).unwrap();
    let entries_ks = engine.keyspace(ENTRIES).unwrap();
    let raw_value = serde_json::to_vec(&event(0)).unwrap();
    let (mut i, mut j) = (0u64, 1u64 << 40);
    ab::section(&format!("{name}, {durability:?}"));
    ab(
        "put_event (event + outbox entry, duplicate check) vs the raw engine writing both rows",
        7,
        if durability == Durability::Immediate {
            100
        } else {
            1_000
        },
        1,
        || {
            i += 1;
            let key = format!("evt:{:013}:{i:026}", 1_706_540_400_000u64);
            engine
                .commit(
                    Commit::new()
                        .put(events_ks, key.into_bytes(), raw_value.clone())
                        .put(entries_ks, i.to_be_bytes().to_vec(), vec![0x11; 64])
                        .durability(durability),
                )
                .unwrap();
        },
        || {
            j += 1;
            mem.put_event(&event(j)).unwrap();
        },
    );
    pipeline(name, &store, &ob, &mem, durability);
}

/// Events with a grip every ten, then the indexer catching up: events per
/// second of the whole.
#[allow(clippy::disallowed_methods)] // a benchmark measures wall time
fn pipeline<E: Engine>(
    name: &str,
    store: &Store<E>,
    ob: &Outbox<'_, E>,
    mem: &AgentMemory<'_, E>,
    durability: Durability,
) {
    let n: u64 = if durability == Durability::Immediate {
        500
    } else {
        5_000
    };
    let base = 1u64 << 30;
    let start = std::time::Instant::now();
    for k in 0..n {
        let e = event(base + k);
        mem.put_event(&e).unwrap();
        if k % 10 == 9 {
            let at = |m: u64| {
                let e = event(base + m);
                EventRef {
                    timestamp_ms: e.timestamp_ms,
                    event_id: e.event_id,
                }
            };
            mem.put_grip(&Grip {
                salience: strata_schemas::agent_memory::Salience::default(),
                grip_id: format!("grip:{:013}:{k}", e.timestamp_ms),
                excerpt: e.text.clone(),
                start: at(k - 9),
                end: at(k),
                source: "bench".into(),
                toc_node_id: None,
            })
            .unwrap();
        }
    }
    let written = start.elapsed().as_secs_f64();
    store.engine().sync().unwrap();
    let mut indexer = Indexer::open(
        ob,
        search_spec().unwrap(),
        &Location::Memory,
        IndexerConfig::new("bench"),
        Arc::new(SystemClock),
    )
    .unwrap();
    indexer.catch_up().unwrap();
    let total = start.elapsed().as_secs_f64();
    ab::note(&format!(
        "{name}, {durability:?}: {n} events with a grip every ten: {:.0} events/s written, {:.0} events/s with the grips indexed",
        n as f64 / written,
        n as f64 / total
    ));
}

struct Engines {
    redb: RedbEngine,
    rocks: RocksEngine,
    _dir: tempdir::Dir,
}

mod tempdir {
    /// A directory removed when dropped.
    pub struct Dir(pub std::path::PathBuf);
    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

fn engines(tag: &str) -> Engines {
    let dir = std::env::temp_dir().join(format!("strata-bench-am-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let specs = options(Durability::Buffered).keyspace_specs();
    Engines {
        redb: RedbEngine::open(dir.join("redb.redb"), specs.clone(), RedbOptions::default())
            .unwrap(),
        rocks: RocksEngine::open(dir.join("rocks"), specs, RocksOptions::default()).unwrap(),
        _dir: tempdir::Dir(dir),
    }
}

fn criterion_benches(c: &mut Criterion) {
    let e = engines("criterion");
    bench_engine(c, "redb", &e.redb);
    bench_engine(c, "rocks", &e.rocks);
}

fn bench_engine<E: Engine>(c: &mut Criterion, name: &str, engine: &E) {
    let store = Store::open(engine, options(Durability::Buffered)).unwrap();
    let ob = outbox(&store);
    let mem = AgentMemory::open(&store, &ob).unwrap();
    let events_ks = engine.keyspace(EVENTS).unwrap();
    let entries_ks = engine.keyspace(ENTRIES).unwrap();
    let raw_value = serde_json::to_vec(&event(0)).unwrap();
    let (mut i, mut j) = (1u64 << 50, 1u64 << 51);
    let mut g = c.benchmark_group(format!("{name}/put_event"));
    g.bench_function("raw", |b| {
        b.iter(|| {
            i += 1;
            engine
                .commit(
                    Commit::new()
                        .put(
                            events_ks,
                            format!("evt:{i:013}:x").into_bytes(),
                            raw_value.clone(),
                        )
                        .put(entries_ks, i.to_be_bytes().to_vec(), vec![0x11; 64])
                        .durability(Durability::Buffered),
                )
                .unwrap()
        });
    });
    g.bench_function("ours", |b| {
        b.iter(|| {
            j += 1;
            mem.put_event(&event(j)).unwrap();
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
            for durability in [Durability::Buffered, Durability::Immediate] {
                let e = engines(&format!("{durability:?}"));
                report("redb", &e.redb, durability);
                report("rocks", &e.rocks, durability);
            }
        },
        benches,
    );
}
