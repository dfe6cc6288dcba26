//! The search index against raw tantivy, on redb and RocksDB (buffered):
//! the outbox→index feed (entries already pushed; the indexer polls,
//! decodes, maps, upserts and commits every 1,000 documents with its
//! checkpoint, then acknowledges) against raw tantivy adding the same
//! documents with the same commit cadence; then query latency over 100,000
//! documents, one and two terms, ours (with the freshness check of each
//! hit against the store) and raw. Interleaved A/B first, then criterion.

#![allow(clippy::cast_precision_loss, clippy::too_many_lines)]

use std::sync::Arc;

use criterion::{Criterion, criterion_group};
use serde::{Deserialize, Serialize};
use strata_codec::{Limits, value};
use strata_engine::{Durability, Engine, Rng, SeededRng, SystemClock};
use strata_engine_redb::{RedbEngine, RedbOptions};
use strata_engine_rocks::{RocksEngine, RocksOptions};
use strata_keys::tuple_key;
use strata_outbox::{Outbox, OutboxConfig};
use strata_search::{Document, IndexSpec, Indexer, IndexerConfig, Location, Query};
use strata_store::{Store, StoreOptions};
use tantivy::collector::TopDocs;
use tantivy::query::QueryParser;
use tantivy::schema::{STORED, STRING, Schema, TEXT};
use tantivy::{Index, IndexWriter, TantivyDocument};

#[path = "../../bench-support/ab.rs"]
mod ab;
use ab::ab;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Note {
    text: String,
    kind: String,
}
value!(Note: postcard, version = 1);

#[derive(Debug, Clone, PartialEq)]
struct NoteKey {
    id: u64,
}
tuple_key! {
    NoteKey -> Note = ("note", {id});
}

const COMMIT_EVERY: usize = 1_000;
const WORDS: u64 = 2_000;

fn word(rng: &mut SeededRng) -> String {
    // Skewed towards low numbers, as words of a language are.
    let a = rng.below(WORDS);
    let b = rng.below(WORDS);
    format!("w{}", a.min(b))
}

fn note(rng: &mut SeededRng) -> Note {
    let text = (0..24).map(|_| word(rng)).collect::<Vec<_>>().join(" ");
    Note {
        text,
        kind: format!("k{}", rng.below(4)),
    }
}

fn spec() -> IndexSpec<NoteKey> {
    IndexSpec::new("notes", |_k: &NoteKey, n: &Note| {
        Document::new()
            .text("text", n.text.clone())
            .string("kind", n.kind.clone())
    })
    .unwrap()
    .text("text", 1.0)
    .unwrap()
    .string("kind")
    .unwrap()
}

fn options() -> StoreOptions {
    Outbox::<strata_engine::MemEngine>::declare(StoreOptions::new(Limits::FOUNDATIONDB))
        .durability(Durability::Buffered)
}

fn indexer_config() -> IndexerConfig {
    let mut c = IndexerConfig::new("bench");
    c.threads = 1;
    c.commit_docs = COMMIT_EVERY;
    c.commit_bytes = usize::MAX;
    c.commit_interval_ms = u64::MAX;
    c
}

/// Raw tantivy with the same fields (text and kind, and an id).
struct Raw {
    index: Index,
    writer: IndexWriter,
    text: tantivy::schema::Field,
    kind: tantivy::schema::Field,
    id: tantivy::schema::Field,
}

fn raw() -> Raw {
    let mut b = Schema::builder();
    let id = b.add_u64_field("id", STORED);
    let text = b.add_text_field("text", TEXT | STORED);
    let kind = b.add_text_field("kind", STRING | STORED);
    let index = Index::create_in_ram(b.build());
    let writer = index.writer_with_num_threads(1, 24 << 20).unwrap();
    Raw {
        index,
        writer,
        text,
        kind,
        id,
    }
}

fn report<E: Engine>(name: &str, engine: &E) {
    let store = Store::open(engine, options()).unwrap();
    let mut config = OutboxConfig::default();
    config.sync_interval_ms = 0;
    let ob = Outbox::new(
        &store,
        config,
        Arc::new(SystemClock),
        Box::new(SeededRng::new(1)),
    )
    .unwrap();
    let s = spec();
    // A multiple of the indexer's poll batch (256), so each call consumes
    // exactly its share.
    let per_call = 5_120usize;
    let rounds = 5usize;
    // Every entry the feed will consume, pushed beforehand; the raw side
    // gets the same notes.
    let mut rng = SeededRng::new(7);
    let notes: Vec<Note> = (0..per_call * rounds).map(|_| note(&mut rng)).collect();
    for chunk in notes.chunks(100).enumerate() {
        let (c, chunk) = chunk;
        store
            .transact(|tx| {
                for (i, n) in chunk.iter().enumerate() {
                    let id = (c * 100 + i) as u64;
                    s.put(&ob, tx, &NoteKey { id }, n)?;
                }
                Ok::<_, strata_search::SearchError>(())
            })
            .unwrap();
    }
    store.engine().sync().unwrap();
    let mut ix = Indexer::open(
        &ob,
        spec(),
        &Location::Memory,
        indexer_config(),
        Arc::new(SystemClock),
    )
    .unwrap();
    let mut r = raw();
    let (mut ours_at, mut raw_at) = (0usize, 0usize);
    println!("== {name}");
    ab(
        "feed: outbox entries into the index (ours) vs raw tantivy adds, commits every 1,000",
        rounds,
        1,
        u32::try_from(per_call).unwrap(),
        || {
            for n in &notes[raw_at..raw_at + per_call] {
                let mut d = TantivyDocument::default();
                d.add_u64(r.id, raw_at as u64);
                d.add_text(r.text, &n.text);
                d.add_text(r.kind, &n.kind);
                r.writer.add_document(d).unwrap();
                raw_at += 1;
                if raw_at % COMMIT_EVERY == 0 {
                    r.writer.commit().unwrap();
                }
            }
        },
        || {
            let target = ours_at + per_call;
            while ours_at < target {
                let received = ix.step().unwrap().received;
                assert!(received > 0, "the feed ran out of entries");
                ours_at += received;
            }
        },
    );
    ix.commit().unwrap();
    r.writer.commit().unwrap();

    // Query latency over 100,000 documents.
    let more = 100_000 - notes.len();
    assert_eq!(more % 100, 0);
    let mut rng = SeededRng::new(8);
    for c in 0..more / 100 {
        let batch: Vec<Note> = (0..100).map(|_| note(&mut rng)).collect();
        store
            .transact(|tx| {
                for (i, n) in batch.iter().enumerate() {
                    let id = (notes.len() + c * 100 + i) as u64;
                    s.put(&ob, tx, &NoteKey { id }, n)?;
                }
                Ok::<_, strata_search::SearchError>(())
            })
            .unwrap();
        // The raw index gets the same documents.
        for (i, n) in batch.iter().enumerate() {
            let mut d = TantivyDocument::default();
            d.add_u64(r.id, (notes.len() + c * 100 + i) as u64);
            d.add_text(r.text, &n.text);
            d.add_text(r.kind, &n.kind);
            r.writer.add_document(d).unwrap();
        }
    }
    r.writer.commit().unwrap();
    store.engine().sync().unwrap();
    ix.catch_up().unwrap();
    assert_eq!(ix.documents(), 100_000);
    let raw_reader = r.index.reader().unwrap();
    let parser = QueryParser::for_index(&r.index, vec![r.text]);
    for terms in [1, 2] {
        let mut rng = SeededRng::new(9);
        let queries: Vec<String> = (0..500)
            .map(|_| {
                (0..terms)
                    .map(|_| word(&mut rng))
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .collect();
        let ours = latencies(&queries, |q| {
            std::hint::black_box(ix.search(&Query::new(q)).unwrap());
        });
        let searcher = raw_reader.searcher();
        let theirs = latencies(&queries, |q| {
            let parsed = parser.parse_query(q).unwrap();
            std::hint::black_box(
                searcher
                    .search(&parsed, &TopDocs::with_limit(10).order_by_score())
                    .unwrap(),
            );
        });
        println!(
            "{name}: {terms}-term queries over 100,000 documents, top 10: ours (snippets, each hit checked against the store) median {:.0} µs, p99 {:.0} µs; raw tantivy ({} documents, scores only) median {:.0} µs, p99 {:.0} µs",
            ours.0,
            ours.1,
            searcher.num_docs(),
            theirs.0,
            theirs.1
        );
    }
}

/// Median and 99th percentile, in microseconds.
#[allow(clippy::disallowed_methods)] // a benchmark measures wall time
fn latencies(queries: &[String], mut run: impl FnMut(&str)) -> (f64, f64) {
    let mut v: Vec<f64> = queries
        .iter()
        .map(|q| {
            let t = std::time::Instant::now();
            run(q);
            t.elapsed().as_secs_f64() * 1e6
        })
        .collect();
    v.sort_by(f64::total_cmp);
    (v[v.len() / 2], v[v.len() * 99 / 100])
}

struct Engines {
    redb: RedbEngine,
    rocks: RocksEngine,
    _dir: ab::BenchDir,
}

fn engines() -> Engines {
    let dir = ab::BenchDir::new("search");
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
    // Query latency on a small index, per engine's store (the freshness
    // check reads it).
    let e = engines();
    bench_queries(c, "redb", &e.redb);
    bench_queries(c, "rocks", &e.rocks);
}

fn bench_queries<E: Engine>(c: &mut Criterion, name: &str, engine: &E) {
    let store = Store::open(engine, options()).unwrap();
    let ob = Outbox::new(
        &store,
        OutboxConfig::default(),
        Arc::new(SystemClock),
        Box::new(SeededRng::new(1)),
    )
    .unwrap();
    let s = spec();
    let mut rng = SeededRng::new(10);
    for c in 0..100u64 {
        store
            .transact(|tx| {
                for i in 0..100 {
                    s.put(&ob, tx, &NoteKey { id: c * 100 + i }, &note(&mut rng))?;
                }
                Ok::<_, strata_search::SearchError>(())
            })
            .unwrap();
    }
    store.engine().sync().unwrap();
    let mut ix = Indexer::open(
        &ob,
        spec(),
        &Location::Memory,
        indexer_config(),
        Arc::new(SystemClock),
    )
    .unwrap();
    ix.catch_up().unwrap();
    let mut g = c.benchmark_group(format!("{name}/query_10k"));
    g.bench_function("one_term", |b| {
        b.iter(|| ix.search(&Query::new("w7")).unwrap());
    });
    g.bench_function("two_terms", |b| {
        b.iter(|| ix.search(&Query::new("w7 w42")).unwrap());
    });
    g.finish();
}

criterion_group! {
    name = benches;
    config = ab::criterion_config(20);
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
