//! Agent memory at the sizes users feed it: values past the value limit
//! (an event of half a megabyte, a node with thousands of children, a
//! grip quoting a whole tool output) stored and read back; and a generated
//! log of 5,000 events consumed from the event topic by a segmenter, every
//! event, node and grip checked.

#![allow(clippy::too_many_lines)] // each case one walk through, in order

use std::collections::{BTreeMap, BTreeSet};

use strata_engine::{Engine, RangeSpec, SeededRng, Snapshot};
use strata_keys::KeyRange;
use strata_schemas::agent_memory::{
    AgentMemory, EVENT_TOPIC, EVENTS, Event, EventRef, Grip, Level, MemoryProblem, SegmentRule,
    TOC_NODES, TocBullet, TocNode, calendar_chain, day_id, event_key, parent_id, search_spec,
    segments, verify,
};
use strata_search::{Indexer, IndexerConfig, Location};

use crate::agent_memory::{T, id_at, options, outbox_on, specs};
use crate::store_on;

fn reference(e: &Event) -> EventRef {
    EventRef {
        timestamp_ms: e.timestamp_ms,
        event_id: e.event_id.clone(),
    }
}

/// Keys of the data keyspace under the tuple prefix `prefix` (packed
/// here by the tuple layer, not by the module).
fn data_keys<E: Engine>(store: &strata_store::Store<E>, prefix: &[u8]) -> Vec<Vec<u8>> {
    let data = store.engine().keyspace("data").unwrap();
    let range = KeyRange::tuple_prefix(prefix);
    let snap = store.engine().snapshot().unwrap();
    snap.range(data, RangeSpec::half_open(range.start, range.end.unwrap()))
        .unwrap()
        .map(|r| r.unwrap().0)
        .collect()
}

/// Values spilled past the limit: their rows under `("am", "spill")` in
/// the data keyspace (a chunked value's manifest; its chunks are in the
/// system keyspace).
fn spill_rows<E: Engine>(store: &strata_store::Store<E>) -> usize {
    data_keys(store, &strata_keys::tuple::pack(&("am", "spill"))).len()
}

/// Values past the 100,000-byte limit keep their keys and read back whole;
/// a grip rewritten small, or deleted, leaves no spilled rows; the search
/// projection indexes the start of a long text.
fn values_past_the_limit_are_stored_and_read_back<E: Engine>(engine: E) {
    let (store, clock) = store_on(engine, options());
    let outbox = outbox_on(&store, &clock, 1);
    let mem = AgentMemory::open(&store, &outbox).unwrap();
    // A tool output of 500,000 bytes, with a word of its own at the start.
    let big = Event {
        event_type: strata_schemas::agent_memory::EventType::UserMessage,
        metadata: std::collections::BTreeMap::new(),
        agent: None,
        event_id: id_at(T, 1),
        session_id: "s".into(),
        timestamp_ms: T,
        role: "tool".into(),
        // Words placed about the search projection's cut at 32 KiB
        // (32,768 bytes): "okapiword" ends before it, "tapirword" starts
        // after it.
        text: format!(
            "zebraword {} okapiword {} tapirword {}",
            "0123456789".repeat(3_270),
            "0123456789".repeat(10),
            "0123456789".repeat(46_700)
        ),
    };
    assert_eq!(big.text.find(" okapiword"), Some(32_710));
    assert!(big.text.find("tapirword").unwrap() > 32_768);
    assert!(mem.put_event(&big).unwrap());
    assert!(!mem.put_event(&big).unwrap(), "a retry writes nothing");
    assert_eq!(mem.event(&big.event_id).unwrap().as_ref(), Some(&big));
    let page = mem.events(T, T + 1, false, 10, None).unwrap();
    assert_eq!(page.events, std::slice::from_ref(&big));
    // A segment with 5,000 bullets and a day with 3,000 children.
    let seg = TocNode {
        salience: strata_schemas::agent_memory::Salience::default(),
        contributing_agents: Vec::new(),
        node_id: "toc:segment:2024-01-29:big".into(),
        level: Level::Segment,
        title: "quaggaword and more".into(),
        bullets: (0..5_000)
            .map(|i| TocBullet {
                text: format!("bullet {i} about the long history of this conversation"),
                grip_ids: vec![format!("grip:{T:013}:g{i}")],
            })
            .collect(),
        // Keywords about their projection's cut at 8 KiB (8,192 bytes):
        // "gnuword", then fillers of 10 bytes with "elandword" at 8,108
        // and "ibexword" at 8,308.
        keywords: std::iter::once("gnuword".to_owned())
            .chain((0..1_000).map(|i| match i {
                810 => "elandword".to_owned(),
                830 => "ibexword".to_owned(),
                i => format!("filler{i:03}"),
            }))
            .collect(),
        child_node_ids: Vec::new(),
        start_ms: T,
        end_ms: T + 1,
        version: 0,
    };
    assert_eq!(seg.keywords.join(" ").find("elandword"), Some(8_108));
    assert_eq!(seg.keywords.join(" ").find("ibexword"), Some(8_308));
    assert_eq!(mem.put_segment(&seg).unwrap(), 1);
    let read = mem.toc_node(&seg.node_id).unwrap().unwrap();
    assert_eq!((read.bullets.len(), read.version), (5_000, 1));
    assert_eq!(read.bullets[4_999], seg.bullets[4_999]);
    let mut day = mem.toc_node("toc:day:2024-01-29").unwrap().unwrap();
    day.child_node_ids
        .extend((0..3_000).map(|i| format!("toc:segment:2024-01-29:{i:026}")));
    mem.put_toc_node(&day).unwrap();
    assert_eq!(
        mem.toc_node("toc:day:2024-01-29")
            .unwrap()
            .unwrap()
            .child_node_ids
            .len(),
        3_001
    );
    assert_eq!(mem.toc_versions(&seg.node_id).unwrap().len(), 1);
    // A grip quoting the whole output, linked to the segment.
    let grip = Grip {
        salience: strata_schemas::agent_memory::Salience::default(),
        grip_id: format!("grip:{T:013}:big"),
        excerpt: big.text.clone(),
        start: reference(&big),
        end: reference(&big),
        source: "test".into(),
        toc_node_id: Some(seg.node_id.clone()),
    };
    mem.put_grip(&grip).unwrap();
    assert_eq!(mem.grip(&grip.grip_id).unwrap().as_ref(), Some(&grip));
    assert_eq!(
        mem.grips_for_node(&seg.node_id).unwrap(),
        std::slice::from_ref(&grip)
    );
    assert_eq!(
        mem.provenance(&grip.grip_id).unwrap(),
        std::slice::from_ref(&big)
    );
    // Spilled: the event, the segment, the day's third version (3,001
    // children) and the grip; nothing else is past the limit.
    let spilled = spill_rows(&store);
    assert_eq!(spilled, 4);
    let check = verify(&store).unwrap();
    assert!(check.is_ok(), "{:?}", check.problems);
    assert_eq!(check.spilled, 4, "every spilled value read back");
    // Search finds the words at the start of the long texts.
    store.engine().sync().unwrap();
    let mut indexer = Indexer::open(
        &outbox,
        search_spec().unwrap(),
        &Location::Memory,
        IndexerConfig::new("idx"),
        clock.clone(),
    )
    .unwrap();
    indexer.catch_up().unwrap();
    let hits = mem.search(&indexer, "zebraword", None, 10).unwrap();
    assert_eq!(hits.len(), 1);
    assert_eq!(hits[0].doc_id, grip.grip_id);
    let hits = mem.search(&indexer, "quaggaword", None, 10).unwrap();
    assert_eq!(hits.len(), 1);
    assert_eq!(hits[0].doc_id, seg.node_id);
    // Up to the cuts, and not past them.
    let found = |word: &str| -> Vec<String> {
        mem.search(&indexer, word, None, 10)
            .unwrap()
            .into_iter()
            .map(|h| h.doc_id)
            .collect()
    };
    assert_eq!(found("okapiword"), std::slice::from_ref(&grip.grip_id));
    assert!(found("tapirword").is_empty());
    assert_eq!(found("elandword"), std::slice::from_ref(&seg.node_id));
    assert!(found("ibexword").is_empty());
    // Rewritten small, the grip's spilled rows go with the old value; so
    // do a deleted grip's.
    let small = Grip {
        excerpt: "short now".into(),
        ..grip.clone()
    };
    mem.put_grip(&small).unwrap();
    assert_eq!(mem.grip(&grip.grip_id).unwrap(), Some(small));
    let after_rewrite = spill_rows(&store);
    assert_eq!(after_rewrite, 3);
    mem.put_grip(&grip).unwrap();
    assert_eq!(spill_rows(&store), spilled);
    assert!(mem.delete_grip(&grip.grip_id).unwrap());
    assert_eq!(spill_rows(&store), after_rewrite);
    assert!(verify(&store).unwrap().is_ok());
    // A pointer whose spilled value is gone is reported, not followed
    // into a panic.
    let data = store.engine().keyspace("data").unwrap();
    let prefix = strata_keys::tuple::pack(&("am", "spill", "am.events"));
    let mut commit = strata_engine::Commit::new();
    for k in data_keys(&store, &prefix) {
        commit = commit.delete(data, k);
    }
    store.engine().commit(commit).unwrap();
    assert!(mem.event(&big.event_id).is_err());
    let check = verify(&store).unwrap();
    assert_eq!(check.problems.len(), 1, "{:?}", check.problems);
    assert!(
        check.problems[0]
            .to_string()
            .contains("points at a value past the limit that is not stored"),
        "{}",
        check.problems[0]
    );
    // A pointer row removed behind the module's back: its spilled value
    // is left over, and reported.
    let toc = store.space(TOC_NODES).unwrap();
    store
        .transact(|tx| tx.delete_in(&toc, b"toc:day:2024-01-29:v000003".to_vec()))
        .unwrap();
    let check = verify(&store).unwrap();
    assert!(
        check.problems.iter().any(|p| matches!(
            p,
            MemoryProblem::SpillOrphaned { space, key }
                if space == TOC_NODES && key == "toc:day:2024-01-29:v000003"
        )),
        "{:?}",
        check.problems
    );
}

crate::on_each_engine!(values_past_the_limit_are_stored_and_read_back);

/// A value exactly at the limit stays in its row; one byte more is
/// spilled.
#[test]
fn a_value_at_the_limit_stays_in_place_and_one_byte_more_spills() {
    let (store, clock) = store_on(strata_engine::MemEngine::open(specs()).unwrap(), options());
    let outbox = outbox_on(&store, &clock, 1);
    let mem = AgentMemory::open(&store, &outbox).unwrap();
    let events = store.space(EVENTS).unwrap();
    let row = |e: &Event| {
        let key = event_key(&e.event_id).unwrap();
        store
            .begin()
            .snapshot_get_in(&events, key.as_bytes())
            .unwrap()
            .unwrap()
    };
    let with_text = |n: u32, len: usize| Event {
        event_type: strata_schemas::agent_memory::EventType::UserMessage,
        metadata: BTreeMap::new(),
        agent: None,
        event_id: id_at(T, n),
        session_id: "s".into(),
        timestamp_ms: T,
        role: "tool".into(),
        text: "a".repeat(len),
    };
    // The envelope's size beyond the text, from a small event (the same
    // for any length of plain text).
    let probe = with_text(1, 1_000);
    assert!(mem.put_event(&probe).unwrap());
    let overhead = row(&probe).len() - 1_000;
    let max = store.options().limits.max_value_bytes;
    let exact = with_text(2, max - overhead);
    assert!(mem.put_event(&exact).unwrap());
    assert_eq!(row(&exact).len(), max, "stored as it is");
    assert_eq!(spill_rows(&store), 0);
    let over = with_text(3, max - overhead + 1);
    assert!(mem.put_event(&over).unwrap());
    assert_eq!(row(&over), b"\xF5strata.am.spilled.v1", "a pointer");
    assert_eq!(spill_rows(&store), 1);
    for e in [&probe, &exact, &over] {
        assert_eq!(mem.event(&e.event_id).unwrap().as_ref(), Some(e));
    }
}

/// The generated log: 5,000 events over four days, turns of 20 to 2,000
/// bytes, now and then a tool output of 150,000 bytes, silences of a few
/// seconds to three hours.
fn log() -> Vec<Event> {
    let mut rng = SeededRng::new(41);
    let mut at = T;
    (0..5_000u32)
        .map(|n| {
            use strata_engine::Rng;
            at += match rng.below(100) {
                0 => 3 * 3_600_000,
                1..=9 => 45 * 60_000,
                _ => 1_000 + rng.below(60_000),
            };
            let len = if rng.below(500) == 0 {
                150_000
            } else {
                20 + usize::try_from(rng.below(2_000)).unwrap()
            };
            let text: String = (0..len)
                .map(|i| char::from(b'a' + u8::try_from((i + n as usize) % 26).unwrap()))
                .collect();
            Event {
                event_type: strata_schemas::agent_memory::EventType::UserMessage,
                metadata: std::collections::BTreeMap::new(),
                agent: None,
                event_id: id_at(at, n),
                session_id: format!("s{}", n / 700),
                timestamp_ms: at,
                role: if n % 2 == 0 { "user" } else { "assistant" }.into(),
                text,
            }
        })
        .collect()
}

/// The segmenter of the test: one segment per run from `segments`, a grip
/// per pair of turns, the segment's id and the grips' from its first
/// event; returns (segment id, its events' indexes).
pub(crate) fn segment_into<E: Engine>(
    mem: &AgentMemory<'_, E>,
    tx: &mut strata_store::Tx<'_, E>,
    events: &[Event],
) -> Result<String, strata_schemas::agent_memory::MemoryError> {
    let first = &events[0];
    let id = format!(
        "{}:{}",
        day_id(first.timestamp_ms).replace("toc:day:", "toc:segment:"),
        first.event_id
    );
    let mut bullets = Vec::new();
    for (i, pair) in events.chunks(2).enumerate() {
        let grip = Grip {
            salience: strata_schemas::agent_memory::Salience::default(),
            grip_id: format!("grip:{:013}:{}-{i}", pair[0].timestamp_ms, first.event_id),
            excerpt: pair
                .iter()
                .map(|e| &e.text[..e.text.len().min(100)])
                .collect::<Vec<_>>()
                .join(" / "),
            start: reference(&pair[0]),
            end: reference(&pair[pair.len() - 1]),
            source: "segmenter".into(),
            toc_node_id: Some(id.clone()),
        };
        mem.put_grip_tx(tx, &grip)?;
        bullets.push(TocBullet {
            text: grip.excerpt.chars().take(60).collect(),
            grip_ids: vec![grip.grip_id],
        });
    }
    mem.put_segment_tx(
        tx,
        &TocNode {
            salience: strata_schemas::agent_memory::Salience::default(),
            contributing_agents: Vec::new(),
            node_id: id.clone(),
            level: Level::Segment,
            title: format!("{} events", events.len()),
            bullets,
            keywords: Vec::new(),
            child_node_ids: Vec::new(),
            start_ms: first.timestamp_ms,
            end_ms: events[events.len() - 1].timestamp_ms + 1,
            version: 0,
        },
    )?;
    Ok(id)
}

fn a_log_of_5000_events_is_segmented_from_the_topic_and_checked<E: Engine>(engine: E) {
    let (store, clock) = store_on(engine, options());
    let outbox = outbox_on(&store, &clock, 1);
    let mem = AgentMemory::open(&store, &outbox).unwrap();
    mem.register_consumer("segmenter", true).unwrap();
    let log = log();
    for e in &log {
        assert!(mem.put_event(e).unwrap());
    }
    store.engine().sync().unwrap();
    let lease = outbox.acquire(EVENT_TOPIC, "segmenter", "test").unwrap();
    // Segment id → the events it was made of.
    let mut made: BTreeMap<String, Vec<Event>> = BTreeMap::new();
    let mut delivered = 0;
    loop {
        let batch = mem.new_events(&lease, 700).unwrap();
        let Some(through) = batch.last().map(|n| n.position) else {
            break;
        };
        delivered += batch.len();
        let events: Vec<Event> = batch.into_iter().map(|n| n.event).collect();
        let runs = segments(&events, SegmentRule::default());
        let ids = store
            .transact(|tx| {
                let mut ids = Vec::new();
                for r in &runs {
                    ids.push(segment_into(&mem, tx, &events[r.clone()])?);
                }
                mem.finish_events(tx, &lease, through)?;
                Ok::<_, strata_schemas::agent_memory::MemoryError>(ids)
            })
            .unwrap();
        for (id, r) in ids.into_iter().zip(runs) {
            assert!(made.insert(id, events[r].to_vec()).is_none());
        }
    }
    assert_eq!(delivered, 5_000, "each event delivered once");
    store.engine().sync().unwrap();
    assert_eq!(mem.trim_events(0).unwrap(), 5_000);
    assert!(
        outbox
            .topics()
            .unwrap()
            .iter()
            .all(|t| t.topic != EVENT_TOPIC),
        "the finished entries are trimmed"
    );
    // Every event, by id, as written; each in exactly one segment.
    for e in &log {
        assert_eq!(mem.event(&e.event_id).unwrap().as_ref(), Some(e));
    }
    let covered: Vec<&str> = made
        .values()
        .flatten()
        .map(|e| e.event_id.as_str())
        .collect();
    assert_eq!(covered.len(), 5_000);
    assert_eq!(covered.iter().collect::<BTreeSet<_>>().len(), 5_000);
    // Every segment: its bullets and grips, each grip's provenance the
    // pair it quotes; under its day, the day under its week and so on.
    let mut days: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (id, events) in &made {
        let node = mem.toc_node(id).unwrap().unwrap();
        assert_eq!(node.bullets.len(), events.len().div_ceil(2), "{id}");
        assert_eq!(node.start_ms, events[0].timestamp_ms);
        let grips = mem.grips_for_node(id).unwrap();
        assert_eq!(grips.len(), node.bullets.len(), "{id}");
        for g in &grips {
            let quoted = mem.provenance(&g.grip_id).unwrap();
            let i = events
                .iter()
                .position(|e| e.event_id == g.start.event_id)
                .unwrap();
            assert_eq!(
                quoted,
                events[i..(i + 2).min(events.len())],
                "{}",
                g.grip_id
            );
        }
        assert!(events.len() <= 64);
        days.entry(day_id(node.start_ms))
            .or_default()
            .insert(id.clone());
        let chain = calendar_chain(node.start_ms);
        assert_eq!(parent_id(id).as_deref(), Some(chain[3].node_id.as_str()));
        for pair in chain.windows(2) {
            let parent = mem.toc_node(&pair[0].node_id).unwrap().unwrap();
            assert!(parent.child_node_ids.contains(&pair[1].node_id));
        }
    }
    for (day, segs) in &days {
        let children: BTreeSet<String> = mem
            .child_nodes(day)
            .unwrap()
            .into_iter()
            .map(|n| n.node_id)
            .collect();
        assert_eq!(&children, segs, "{day}");
    }
    let listed: BTreeSet<String> = mem
        .toc_nodes_by_level(Level::Segment, None, None)
        .unwrap()
        .into_iter()
        .map(|n| n.node_id)
        .collect();
    assert_eq!(listed, made.keys().cloned().collect());
    let check = verify(&store).unwrap();
    assert!(check.is_ok(), "{:?}", check.problems);
    assert_eq!(check.events, 5_000);
    let grips: usize = made.values().map(|e| e.len().div_ceil(2)).sum();
    assert_eq!(
        (check.grips, check.index_rows),
        (grips as u64, grips as u64)
    );
}

strata_test_support::engine_tests!(
    [mem, redb, rocks]
    fn a_log_of_5000_events_is_segmented_from_the_topic_and_checked() {
        crate::each_engine!(
            super::a_log_of_5000_events_is_segmented_from_the_topic_and_checked,
            super::specs
        );
    }
);

/// `verify` reads every spilled value, past its first page of 16.
#[test]
fn verify_reads_every_spilled_value() {
    let (store, clock) = store_on(strata_engine::MemEngine::open(specs()).unwrap(), options());
    let outbox = outbox_on(&store, &clock, 1);
    let mem = AgentMemory::open(&store, &outbox).unwrap();
    for n in 0..17 {
        let e = Event {
            event_type: strata_schemas::agent_memory::EventType::ToolResult,
            metadata: BTreeMap::new(),
            agent: None,
            event_id: id_at(T + u64::from(n), n),
            session_id: "s".into(),
            timestamp_ms: T + u64::from(n),
            role: "tool".into(),
            text: "b".repeat(120_000),
        };
        assert!(mem.put_event(&e).unwrap());
    }
    assert_eq!(spill_rows(&store), 17);
    let check = verify(&store).unwrap();
    assert!(check.is_ok(), "{:?}", check.problems);
    assert_eq!(check.spilled, 17);
}
