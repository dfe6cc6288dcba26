//! Agent memory on an embedded redb database: ingest a JSON-lines
//! conversation (one event per line: `session_id`, `timestamp_ms`, `role`,
//! `text`; or the original agent-memory's hook format, `hook_event_name`,
//! `session_id`, `message`, ...), let a segmenter consume the event topic and build the TOC
//! (bounded segments under their days, a grip per pair of turns), index
//! them through the outbox, and answer a search query with content read
//! from the store.
//!
//! `cargo run -p strata-examples --example agent_memory [FILE.jsonl] [DIR]`
//!
//! Without a file (or with `-`) it writes a short sample conversation
//! first. Given a DIR, the database (`memory.redb`) and the index stay
//! there, for `strata info DIR/memory.redb` and the other commands.

use std::io::BufRead;
use std::sync::Arc;

use serde::Deserialize;
use strata_engine::{Clock, Engine, Rng, SeededRng, SystemClock};
use strata_engine_redb::{RedbEngine, RedbOptions};
use strata_keys::UlidGenerator;
use strata_outbox::{Outbox, OutboxConfig};
use strata_schemas::agent_memory::{
    AgentMemory, Event, EventRef, EventType, Found, Grip, HookEvent, Level, SegmentRule, TocBullet,
    TocNode, day_id, segments,
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

/// The consumer of the event topic that makes segments.
const SEGMENTER: &str = "segmenter";

/// At most this many characters of text in a bullet or a grip's excerpt.
const BULLET_CHARS: usize = 60;
const EXCERPT_CHARS: usize = 280;

/// Writes one segment over `events` (a bounded run from
/// [`segments`]) in `tx`: a grip per pair of turns, a bullet per grip,
/// the segment under its day. Its id is its first event's, so a
/// redelivered run writes the same segment and grips again (a new version,
/// no duplicate). Returns the segment's id.
fn write_segment<E: Engine>(
    memory: &AgentMemory<'_, E>,
    tx: &mut strata_store::Tx<'_, E>,
    events: &[Event],
) -> Result<String, strata_schemas::agent_memory::MemoryError> {
    let (first, last) = (&events[0], &events[events.len() - 1]);
    let segment_id = format!(
        "{}:{}",
        day_id(first.timestamp_ms).replace("toc:day:", "toc:segment:"),
        first.event_id
    );
    let reference = |e: &Event| EventRef {
        timestamp_ms: e.timestamp_ms,
        event_id: e.event_id.clone(),
    };
    let mut bullets = Vec::new();
    for (i, pair) in events.chunks(2).enumerate() {
        let excerpt: String = pair
            .iter()
            .map(|e| e.text.as_str())
            .collect::<Vec<_>>()
            .join(" / ")
            .chars()
            .take(EXCERPT_CHARS)
            .collect();
        let grip = Grip {
            salience: strata_schemas::agent_memory::Salience::default(),
            grip_id: format!("grip:{:013}:{}-{i}", pair[0].timestamp_ms, first.event_id),
            excerpt: excerpt.clone(),
            start: reference(&pair[0]),
            end: reference(&pair[pair.len() - 1]),
            source: SEGMENTER.into(),
            toc_node_id: Some(segment_id.clone()),
        };
        memory.put_grip_tx(tx, &grip)?;
        bullets.push(TocBullet {
            text: excerpt.chars().take(BULLET_CHARS).collect(),
            grip_ids: vec![grip.grip_id],
        });
    }
    let title: String = first.text.chars().take(BULLET_CHARS).collect();
    memory.put_segment_tx(
        tx,
        &TocNode {
            salience: strata_schemas::agent_memory::Salience::default(),
            contributing_agents: Vec::new(),
            node_id: segment_id.clone(),
            level: Level::Segment,
            title,
            bullets,
            keywords: Vec::new(),
            child_node_ids: Vec::new(),
            start_ms: first.timestamp_ms,
            end_ms: last.timestamp_ms + 1,
            version: 0,
        },
    )?;
    Ok(segment_id)
}

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

    // The segmenter consumes the event topic from its first entry.
    memory.register_consumer(SEGMENTER, true)?;

    // Ingest: one event per line, each with a ULID of its own time.
    let mut ids = UlidGenerator::new();
    let mut rng = SeededRng::new(11);
    let mut written = 0;
    for line in std::io::BufReader::new(std::fs::File::open(&path)?).lines() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        // The original's hook format, or this example's own.
        let event = if line.contains("\"hook_event_name\"") {
            HookEvent::parse(&line)?.to_event(clock.now_ms(), u128::from(rng.next_u64()))?
        } else {
            let l: Line = serde_json::from_str(&line)?;
            let id = ids.generate(l.timestamp_ms, || u128::from(rng.next_u64()))?;
            let event_type = match l.role.as_str() {
                "assistant" => EventType::AssistantMessage,
                "tool" => EventType::ToolResult,
                _ => EventType::UserMessage,
            };
            Event::new(
                id.to_string(),
                l.session_id,
                l.timestamp_ms,
                event_type,
                l.role,
                l.text,
            )
        };
        written += usize::from(memory.put_event(&event)?);
    }
    println!("ingested {written} events from {}", path.display());

    // The segmenter: new events from the topic (durable entries only), a
    // page at a time, split into bounded segments (30 minutes of silence,
    // 64 events or 16 KiB of text), each under its day with a grip per
    // pair of turns, written in the commit that finishes their entries;
    // then the finished entries trimmed.
    store.engine().sync()?;
    let lease = outbox.acquire(
        strata_schemas::agent_memory::EVENT_TOPIC,
        SEGMENTER,
        "example",
    )?;
    let mut made = Vec::new();
    loop {
        let batch = memory.new_events(&lease, 1_000)?;
        let Some(through) = batch.last().map(|n| n.position) else {
            break;
        };
        let events: Vec<Event> = batch.into_iter().map(|n| n.event).collect();
        let ids = store.transact(|tx| {
            let mut ids = Vec::new();
            for range in segments(&events, SegmentRule::default()) {
                ids.push(write_segment(&memory, tx, &events[range])?);
            }
            memory.finish_events(tx, &lease, through)?;
            Ok::<_, strata_schemas::agent_memory::MemoryError>(ids)
        })?;
        made.extend(ids);
    }
    store.engine().sync()?;
    let trimmed = memory.trim_events(0)?;
    println!(
        "segmented into {} segments; {trimmed} topic entries trimmed",
        made.len()
    );
    let Some(first) = made.first() else {
        println!("no events");
        return Ok(());
    };
    let segment = memory
        .toc_node(first)?
        .ok_or("the first segment is not stored")?;
    let day = day_id(segment.start_ms);
    let children = memory.child_nodes(&day)?.len();
    println!("TOC: {day} has {children} segments");
    println!(
        "grips under {}: {}",
        segment.node_id,
        memory.grips_for_node(&segment.node_id)?.len()
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
