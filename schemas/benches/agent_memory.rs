//! Agent-memory ingest: first against the original crate's ingest
//! rewritten on rust-rocksdb ([`Original`]), then against the raw engine
//! contract, on redb and RocksDB, buffered and immediate: `put_event` (the
//! duplicate check as the commit's predicate, a JSON envelope with its
//! checksum, the outbox entry with its versionstamp, one commit) against
//! the raw engine writing the same two rows (the event made and
//! serialized to JSON as ours is, and a 64-byte entry) in one commit.
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

/// Event `n`: about 350 bytes as JSON (the original's measure), a ULID
/// of its own.
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
            "the quick brown fox jumps over the lazy dog ".repeat(5)
        ),
    }
}

/// The original crate's ingest (SpillwaveSolutions/agent-memory,
/// `memory-storage`'s `Storage::put_event` and what its service does
/// before calling it), rewritten here on rust-rocksdb, the version our
/// engine uses: its options (universal compaction, four background jobs;
/// the events family zstd-compressed, the outbox family FIFO), the event
/// and its outbox entry serialized as JSON, the event's key made as its
/// code makes it (the id parsed by the `ulid` crate), a read of that key
/// (its duplicate check, outside any transaction), then one write batch
/// of the two rows with the default write options (the WAL written, not
/// synced). Built from its own source it ran at 1.05x of this on the
/// same events (the figure); its source cannot be fetched here.
struct Original {
    db: rocksdb::DB,
    sequence: std::sync::atomic::AtomicU64,
}

impl Original {
    fn open(path: &std::path::Path) -> Self {
        use rocksdb::{ColumnFamilyDescriptor, DBCompactionStyle, Options};
        let mut db = Options::default();
        db.create_if_missing(true);
        db.create_missing_column_families(true);
        db.set_compaction_style(DBCompactionStyle::Universal);
        db.set_max_background_jobs(4);
        let mut events = Options::default();
        events.set_compression_type(rocksdb::DBCompressionType::Zstd);
        let mut outbox = Options::default();
        outbox.set_compaction_style(DBCompactionStyle::Fifo);
        outbox.set_fifo_compaction_options(&rocksdb::FifoCompactOptions::default());
        let families = [
            ("events", events),
            ("toc_nodes", Options::default()),
            ("toc_latest", Options::default()),
            ("grips", Options::default()),
            ("outbox", outbox),
            ("checkpoints", Options::default()),
        ]
        .map(|(name, o)| ColumnFamilyDescriptor::new(name, o));
        Self {
            db: rocksdb::DB::open_cf_descriptors(&db, path, families).unwrap(),
            sequence: std::sync::atomic::AtomicU64::new(0),
        }
    }

    /// Returns whether the event was new.
    fn put_event(&self, event: &Event) -> bool {
        #[derive(serde::Serialize)]
        struct Entry<'a> {
            event_id: &'a str,
            timestamp_ms: u64,
            action: &'static str,
        }
        let bytes = serde_json::to_vec(event).unwrap();
        let entry = serde_json::to_vec(&Entry {
            event_id: &event.event_id,
            timestamp_ms: event.timestamp_ms,
            action: "index_event",
        })
        .unwrap();
        let events = self.db.cf_handle("events").unwrap();
        let outbox = self.db.cf_handle("outbox").unwrap();
        // Its key as its own code makes it: the id parsed by the `ulid`
        // crate, then the time inside the ULID and the ULID, formatted.
        let ulid: ulid::Ulid = event.event_id.parse().unwrap();
        let key = format!("evt:{:013}:{ulid}", ulid.timestamp_ms());
        if self.db.get_cf(&events, key.as_bytes()).unwrap().is_some() {
            return false;
        }
        let n = self
            .sequence
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let mut batch = rocksdb::WriteBatch::default();
        batch.put_cf(&events, key.as_bytes(), bytes);
        batch.put_cf(&outbox, format!("outbox:{n:020}").as_bytes(), entry);
        self.db.write(batch).unwrap();
        true
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

/// The one figure users compare: 100,000 events (10 rounds of 10,000 a
/// side, interleaved), ours on RocksDB against the original's ingest.
fn against_the_original(rocks: &RocksEngine, dir: &std::path::Path) {
    // Both sides key an event alike (the original's way of making the key
    // against ours).
    let e = event(1);
    let theirs: ulid::Ulid = e.event_id.parse().unwrap();
    assert_eq!(
        strata_schemas::agent_memory::event_key(&e.event_id).unwrap(),
        format!("evt:{:013}:{theirs}", theirs.timestamp_ms())
    );
    let store = Store::open(rocks, options(Durability::Buffered)).unwrap();
    let ob = outbox(&store);
    let mem = AgentMemory::open(&store, &ob).unwrap();
    let original = Original::open(&dir.join("original"));
    let (mut i, mut j) = (1u64 << 45, 1u64 << 46);
    ab::section("rocks, Buffered: against the original");
    let r = ab(
        "put_event vs the original's ingest (its options, JSON, duplicate read, two-row batch)",
        10,
        10_000,
        1,
        || {
            i += 1;
            assert!(original.put_event(&event(i)));
        },
        || {
            j += 1;
            assert!(mem.put_event(&event(j)).unwrap());
        },
    );
    ab::note(&format!(
        "against the original: {:.0} events/s ours, {:.0} events/s the original's; ours at {:.2}x its speed (target >= 1.0x: {})",
        1e9 / r.ours_ns,
        1e9 / r.raw_ns,
        r.raw_ns / r.ours_ns,
        if r.raw_ns / r.ours_ns >= 1.0 {
            "met"
        } else {
            "missed"
        }
    ));
}

fn report<E: Engine>(name: &str, engine: &E, durability: Durability) {
    let store = Store::open(engine, options(durability)).unwrap();
    let ob = outbox(&store);
    let mem = AgentMemory::open(&store, &ob).unwrap();
    let events_ks = engine.keyspace(EVENTS).unwrap();
    let entries_ks = engine.keyspace(ENTRIES).unwrap();
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
            // The event made and serialized as ours is (only the storage
            // differs between the sides).
            let value = serde_json::to_vec(&event(i)).unwrap();
            let key = format!("evt:{:013}:{i:026}", 1_706_540_400_000u64);
            engine
                .commit(
                    Commit::new()
                        .put(events_ks, key.into_bytes(), value)
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
    dir: tempdir::Dir,
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
        dir: tempdir::Dir(dir),
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
                            serde_json::to_vec(&event(i)).unwrap(),
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

/// Whether the section `name` runs: all, or those `STRATA_AM_ONLY` names
/// (a comma-separated list such as `original,rocks/Buffered`).
fn wanted(name: &str) -> bool {
    std::env::var("STRATA_AM_ONLY").map_or(true, |only| only.split(',').any(|w| w == name))
}

fn main() {
    ab::run(
        || {
            if wanted("original") {
                let e = engines("original");
                against_the_original(&e.rocks, &e.dir.0);
            }
            for durability in [Durability::Buffered, Durability::Immediate] {
                let e = engines(&format!("{durability:?}"));
                if wanted(&format!("redb/{durability:?}")) {
                    report("redb", &e.redb, durability);
                }
                if wanted(&format!("rocks/{durability:?}")) {
                    report("rocks", &e.rocks, durability);
                }
            }
        },
        benches,
    );
}
