//! Agent memory on an embedded redb database: ingest a JSON-lines
//! conversation (one event per line: `session_id`, `timestamp_ms`, `role`,
//! `text`), build the day's TOC with a segment and grips over the events,
//! index them through the outbox, and answer a search query with content
//! read from the store.
//!
//! `cargo run -p strata-examples --example agent_memory [FILE.jsonl] [DIR]`
//!
//! Without a file (or with `-`) it writes a short sample conversation
//! first. Given a DIR, the database (`memory.redb`) and the index stay
//! there, for `strata info DIR/memory.redb` and the other commands.

use std::io::BufRead;
use std::sync::Arc;

use serde::Deserialize;
use strata_engine::{Engine, Rng, SeededRng, SystemClock};
use strata_engine_redb::{RedbEngine, RedbOptions};
use strata_keys::UlidGenerator;
use strata_outbox::{Outbox, OutboxConfig};
use strata_schemas::agent_memory::{
    AgentMemory, Event, EventRef, Found, Grip, Level, TocBullet, TocNode, day_id,
};
use strata_search::{Indexer, IndexerConfig, Location};
use strata_store::{Store, StoreOptions};

#[derive(Deserialize)]
struct Line {
    session_id: String,
    timestamp_ms: u64,
    role: String,
    text: String,
}

const SAMPLE: &str = r#"{"session_id":"s1","timestamp_ms":1706540400000,"role":"user","text":"How should we store refresh tokens?"}
{"session_id":"s1","timestamp_ms":1706540410000,"role":"assistant","text":"Rotate refresh tokens on every use and keep only a hash of each."}
{"session_id":"s1","timestamp_ms":1706540420000,"role":"user","text":"And the access tokens?"}
{"session_id":"s1","timestamp_ms":1706540430000,"role":"assistant","text":"Short-lived JWTs, fifteen minutes, signed with a rotating key."}
{"session_id":"s1","timestamp_ms":1706544000000,"role":"user","text":"Next: the deploy pipeline fails on the migration step."}
{"session_id":"s1","timestamp_ms":1706544010000,"role":"assistant","text":"Run migrations before the new binaries start, in a separate job."}
"#;

#[allow(clippy::too_many_lines)] // one walk through, in order
fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let file = args.next().filter(|f| f != "-");
    let given_dir = args.next();
    let dir = given_dir.clone().map_or_else(
        || std::env::temp_dir().join(format!("strata-agent-memory-{}", std::process::id())),
        std::path::PathBuf::from,
    );
    std::fs::create_dir_all(&dir)?;
    let path = if let Some(f) = &file {
        std::path::PathBuf::from(f)
    } else {
        let p = dir.join("conversation.jsonl");
        std::fs::write(&p, SAMPLE)?;
        p
    };

    let options =
        AgentMemory::<RedbEngine>::declare(StoreOptions::new(strata_codec::Limits::FOUNDATIONDB));
    let engine = RedbEngine::open(
        dir.join("memory.redb"),
        options.keyspace_specs(),
        RedbOptions::default(),
    )?;
    let clock = Arc::new(SystemClock);
    let store = Store::open(engine, options)?;
    let outbox = Outbox::new(
        &store,
        OutboxConfig::default(),
        clock.clone(),
        Box::new(SeededRng::new(7)),
    )?;
    let memory = AgentMemory::open(&store, &outbox)?;

    // Ingest: one event per line, each with a ULID of its own time.
    let mut ids = UlidGenerator::new();
    let mut rng = SeededRng::new(11);
    let mut refs = Vec::new();
    let mut written = 0;
    for line in std::io::BufReader::new(std::fs::File::open(&path)?).lines() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        let l: Line = serde_json::from_str(&line)?;
        let id = ids.generate(l.timestamp_ms, || u128::from(rng.next_u64()))?;
        let event = Event {
            event_id: id.to_string(),
            session_id: l.session_id,
            timestamp_ms: l.timestamp_ms,
            role: l.role,
            text: l.text,
        };
        written += usize::from(memory.put_event(&event)?);
        refs.push((
            EventRef {
                timestamp_ms: event.timestamp_ms,
                event_id: event.event_id.clone(),
            },
            event.text,
        ));
    }
    println!("ingested {written} events from {}", path.display());
    let (Some((first, _)), Some((last, _))) = (refs.first(), refs.last()) else {
        println!("no events");
        return Ok(());
    };

    // A segment over the whole conversation, with one grip per pair of
    // turns, under the day's node (the year, month and week made too).
    let segment_id = format!(
        "{}:s1",
        day_id(first.timestamp_ms).replace("toc:day:", "toc:segment:")
    );
    let mut grips = Vec::new();
    for (i, pair) in refs.chunks(2).enumerate() {
        let (start, _) = &pair[0];
        let end = &pair.last().unwrap_or(&pair[0]).0;
        let grip = Grip {
            grip_id: format!("grip:{:013}:g{i}", start.timestamp_ms),
            excerpt: pair
                .iter()
                .map(|(_, t)| t.as_str())
                .collect::<Vec<_>>()
                .join(" / "),
            start: start.clone(),
            end: end.clone(),
            source: "example".into(),
            toc_node_id: Some(segment_id.clone()),
        };
        memory.put_grip(&grip)?;
        grips.push(grip);
    }
    let segment = TocNode {
        node_id: segment_id.clone(),
        level: Level::Segment,
        title: "Token storage and the deploy pipeline".into(),
        bullets: grips
            .iter()
            .map(|g| TocBullet {
                text: g.excerpt.chars().take(60).collect(),
                grip_ids: vec![g.grip_id.clone()],
            })
            .collect(),
        keywords: vec![
            "tokens".into(),
            "jwt".into(),
            "deploy".into(),
            "migrations".into(),
        ],
        child_node_ids: Vec::new(),
        start_ms: first.timestamp_ms,
        end_ms: last.timestamp_ms + 1,
        version: 0,
    };
    memory.put_segment(&segment)?;
    let day = memory
        .toc_node(&day_id(first.timestamp_ms))?
        .map(|d| d.child_node_ids)
        .unwrap_or_default();
    println!("TOC: {} has children {day:?}", day_id(first.timestamp_ms));
    println!(
        "grips under the segment: {}",
        memory.grips_for_node(&segment_id)?.len()
    );

    // Index through the outbox (durable entries only), then search.
    store.engine().sync()?;
    let mut indexer = Indexer::open(
        &outbox,
        strata_schemas::agent_memory::search_spec()?,
        &Location::Dir(dir.join("index")),
        IndexerConfig::new("example"),
        clock,
    )?;
    indexer.catch_up()?;
    for hit in memory.search(&indexer, "refresh tokens", None, 5)? {
        match &hit.content {
            Some(Found::Grip(g)) => {
                let events = memory.provenance(&g.grip_id)?;
                println!(
                    "hit {:.2} grip {}: {:?} ({} events)",
                    hit.score,
                    g.grip_id,
                    g.excerpt.chars().take(50).collect::<String>(),
                    events.len()
                );
            }
            Some(Found::Toc(t)) => {
                println!("hit {:.2} TOC node {}: {}", hit.score, t.node_id, t.title);
            }
            None => println!("hit {:.2} {} (gone from the store)", hit.score, hit.doc_id),
        }
    }
    println!("stats: {:?}", memory.stats()?.rows);

    // Closed, not just dropped: its lease is released, so `strata search`
    // can take the index over at once.
    indexer.close()?;
    drop(memory);
    drop(outbox);
    drop(store);
    if given_dir.is_none() {
        std::fs::remove_dir_all(&dir)?;
    }
    Ok(())
}
