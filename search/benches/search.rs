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
use strata_search::{Document, IndexSpec, Indexer, IndexerConfig, Location, Merging, Query};
use strata_store::{Store, StoreOptions};
use tantivy::collector::TopDocs;
use tantivy::query::QueryParser;
use tantivy::schema::{INDEXED, STORED, STRING, Schema, TEXT};
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
/// The indexer's poll batch: a divisor of `COMMIT_EVERY`, so it commits
/// after exactly as many documents as the raw side.
const BATCH: usize = 250;
const _: () = assert!(COMMIT_EVERY.is_multiple_of(BATCH));
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
            .text("text", &n.text)
            .string("kind", &n.kind)
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

fn indexer_config(merging: Merging) -> IndexerConfig {
    let mut c = IndexerConfig::new("bench");
    c.merging = merging;
    c.threads = 1;
    c.batch = BATCH;
    c.commit_docs = COMMIT_EVERY;
    c.commit_bytes = usize::MAX;
    c.commit_interval_ms = u64::MAX;
    c
}

/// Raw tantivy indexing the same documents as ours: the packed store key
/// (indexed, to find a document again), the body's hash and a version
/// (stored), the text and the kind.
struct Raw {
    index: Index,
    writer: IndexWriter,
    key: tantivy::schema::Field,
    hash: tantivy::schema::Field,
    version: tantivy::schema::Field,
    text: tantivy::schema::Field,
    kind: tantivy::schema::Field,
}

fn raw(merging: Merging) -> Raw {
    let mut b = Schema::builder();
    let key = b.add_bytes_field("_key", INDEXED | STORED);
    let hash = b.add_u64_field("_xxh3", STORED);
    let version = b.add_u64_field("_version", STORED);
    let text = b.add_text_field("text", TEXT | STORED);
    let kind = b.add_text_field("kind", STRING | STORED);
    let index = Index::create_in_ram(b.build());
    let writer: IndexWriter = index.writer_with_num_threads(1, 24 << 20).unwrap();
    if merging == Merging::Never {
        writer.set_merge_policy(Box::new(tantivy::indexer::NoMergePolicy));
    }
    Raw {
        index,
        writer,
        key,
        hash,
        version,
        text,
        kind,
    }
}

/// A document of the raw side, its key and hash computed beforehand.
struct RawDoc {
    key: Vec<u8>,
    hash: u64,
}

impl Raw {
    /// Adds (after deleting the key's document when `upsert`) and commits
    /// at the cadence; `at` counts documents.
    fn feed(&mut self, at: &mut usize, docs: &[(RawDoc, &Note)], upsert: bool) {
        for (doc, n) in docs {
            if upsert {
                self.writer
                    .delete_term(tantivy::Term::from_field_bytes(self.key, &doc.key));
            }
            let mut d = TantivyDocument::default();
            d.add_bytes(self.key, &doc.key);
            d.add_u64(self.hash, doc.hash);
            d.add_u64(self.version, *at as u64);
            d.add_text(self.text, &n.text);
            d.add_text(self.kind, &n.kind);
            self.writer.add_document(d).unwrap();
            *at += 1;
            if at.is_multiple_of(COMMIT_EVERY) {
                self.writer.commit().unwrap();
            }
        }
    }
}

fn raw_docs(notes: &[Note], first_id: u64) -> Vec<(RawDoc, &Note)> {
    notes
        .iter()
        .zip(first_id..)
        .map(|(n, id)| {
            let mut body = Vec::new();
            strata_codec::Value::encode_body(n, &mut body).unwrap();
            let hash = xxhash_rust::xxh3::xxh3_64(&body);
            let key = strata_keys::Key::pack(&NoteKey { id }).unwrap();
            (RawDoc { key, hash }, n)
        })
        .collect()
}

/// Pushes one entry per note (ids from `first_id`), 100 to a commit,
/// through `insert` (rows that are new) or `put` (rows that exist).
fn push<E: Engine>(
    store: &Store<E>,
    ob: &Outbox<'_, E>,
    notes: &[Note],
    first_id: u64,
    insert: bool,
) {
    let s = spec();
    for (c, chunk) in notes.chunks(100).enumerate() {
        store
            .transact(|tx| {
                for (n, id) in chunk.iter().zip(first_id + c as u64 * 100..) {
                    if insert {
                        assert!(s.insert(ob, tx, &NoteKey { id }, n)?);
                    } else {
                        s.put(ob, tx, &NoteKey { id }, n)?;
                    }
                }
                Ok::<_, strata_search::SearchError>(())
            })
            .unwrap();
    }
    store.engine().sync().unwrap();
}

/// The feed A/B with both sides merging as `merging` says, then (with
/// `queries`) query latency.
fn report<E: Engine>(name: &str, engine: &E, merging: Merging, queries: bool) {
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
    // A multiple of the commit cadence (and so of the poll batch): each
    // side's round ends with a commit, which waits for tantivy's indexing
    // thread. A round that ended between commits would leave documents
    // queued to that thread, indexed during the other side's round: work
    // its own timing misses, and a load on the other's.
    let per_call = 5 * COMMIT_EVERY;
    // Even: `ab` runs one more round for an odd count (as many rounds
    // start with each side), and the entries are pushed for these.
    let rounds = 16usize;
    let calls = u32::try_from(per_call).unwrap();
    // Every entry a feed consumes is pushed (and synced) beforehand; the
    // raw side gets the same documents. First new rows (`insert`), then
    // an update of each (`put`).
    let mut rng = SeededRng::new(7);
    let notes: Vec<Note> = (0..per_call * rounds).map(|_| note(&mut rng)).collect();
    let updates: Vec<Note> = (0..per_call * rounds).map(|_| note(&mut rng)).collect();
    push(&store, &ob, &notes, 0, true);
    let mut ix = Indexer::open(
        &ob,
        spec(),
        &Location::Memory,
        indexer_config(merging),
        Arc::new(SystemClock),
    )
    .unwrap();
    let mut r = raw(merging);
    let (mut ours_at, mut raw_at) = (0usize, 0usize);
    let ours = |ix: &mut Indexer<'_, '_, &E, NoteKey>, at: &mut usize| {
        let target = *at + per_call;
        while *at < target {
            let received = ix.step().unwrap().received;
            assert!(received > 0, "the feed ran out of entries");
            *at += received;
        }
    };
    let merges = match merging {
        Merging::Never => "no merging",
        _ => "tantivy's merging",
    };
    ab::section(&format!("{name}, {merges}"));
    let docs = raw_docs(&notes, 0);
    ab(
        "feed of new rows: inserts through the outbox into the index (ours) vs raw tantivy adds of the same documents, commits every 1,000",
        rounds,
        1,
        calls,
        || {
            let from = raw_at;
            r.feed(&mut raw_at, &docs[from..from + per_call], false);
        },
        || ours(&mut ix, &mut ours_at),
    );
    ix.commit().unwrap();
    r.writer.commit().unwrap();
    push(&store, &ob, &updates, 0, false);
    let docs = raw_docs(&updates, 0);
    let (mut ours_at, mut raw_at) = (0usize, 0usize);
    ab(
        "feed of updates: puts through the outbox into the index (ours) vs raw tantivy upserts (delete_term, add), commits every 1,000",
        rounds,
        1,
        calls,
        || {
            let mut at = per_call * rounds + raw_at;
            r.feed(&mut at, &docs[raw_at..raw_at + per_call], true);
            raw_at += per_call;
        },
        || ours(&mut ix, &mut ours_at),
    );
    ix.commit().unwrap();
    r.writer.commit().unwrap();
    // What an upsert costs tantivy itself, on two fresh raw indexes.
    let (mut adds, mut upserts) = (raw(merging), raw(merging));
    let docs = raw_docs(&notes, 0);
    let (mut a_at, mut u_at) = (0usize, 0usize);
    ab(
        "  tantivy alone: upserts vs adds of new documents",
        rounds,
        1,
        calls,
        || {
            let from = a_at;
            adds.feed(&mut a_at, &docs[from..from + per_call], false);
        },
        || {
            let from = u_at;
            upserts.feed(&mut u_at, &docs[from..from + per_call], true);
        },
    );
    // A control: raw tantivy against itself, the same adds on two fresh
    // indexes. Its spread is the measurement's own (with merging on, the
    // background merges landing in the other side's rounds).
    let (mut one, mut two) = (raw(merging), raw(merging));
    let (mut one_at, mut two_at) = (0usize, 0usize);
    ab(
        "  control: raw tantivy vs itself, the same adds on two indexes",
        rounds,
        1,
        calls,
        || {
            let from = one_at;
            one.feed(&mut one_at, &docs[from..from + per_call], false);
        },
        || {
            let from = two_at;
            two.feed(&mut two_at, &docs[from..from + per_call], false);
        },
    );

    if !queries {
        return;
    }
    // Query latency over 100,000 documents.
    let more = 100_000 - notes.len();
    let mut rng = SeededRng::new(8);
    let rest: Vec<Note> = (0..more).map(|_| note(&mut rng)).collect();
    push(&store, &ob, &rest, notes.len() as u64, true);
    // The raw index gets the same documents.
    let mut at = 0;
    r.feed(&mut at, &raw_docs(&rest, notes.len() as u64), false);
    r.writer.commit().unwrap();
    ix.catch_up().unwrap();
    assert_eq!(ix.documents().unwrap(), 100_000);
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
        ab::note(&format!(
            "{name}: {terms}-term queries over 100,000 documents, top 10: ours (snippets, each hit checked against the store) median {:.0} µs, p99 {:.0} µs; raw tantivy ({} documents, scores only) median {:.0} µs, p99 {:.0} µs",
            ours.0,
            ours.1,
            searcher.num_docs(),
            theirs.0,
            theirs.1
        ));
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
        indexer_config(Merging::Log),
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
            // Without merges first: what the feed costs itself. Merges are
            // tantivy's own work, the same on both sides, but run on
            // background threads into the other side's rounds.
            for merging in [Merging::Never, Merging::Log] {
                let e = engines();
                report("redb", &e.redb, merging, merging == Merging::Log);
                report("rocks", &e.rocks, merging, merging == Merging::Log);
            }
        },
        benches,
    );
}
