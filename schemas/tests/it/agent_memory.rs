//! Agent memory on every engine: the document's keys, idempotent events
//! with their outbox entry, time ranges, TOC versions and the hierarchy,
//! grips and provenance, search through the outbox-fed index, stats.

#![allow(clippy::too_many_lines)]

use std::sync::Arc;

use strata_engine::{Engine, KeyspaceSpec, ManualClock, SeededRng};
use strata_keys::KeyRange;
use strata_outbox::{Outbox, OutboxConfig, Start};
use strata_schemas::agent_memory::{
    AgentMemory, EVENT_TOPIC, EVENTS, Event, EventRef, Found, GRIPS, Grip, Level, MemoryError,
    TOC_LATEST, TOC_NODES, TocBullet, TocNode, event_key, latest_key, node_grip_key, search_spec,
    toc_key,
};
use strata_search::{Indexer, IndexerConfig, Location};
use strata_store::{Store, StoreOptions};

use crate::store_on;

/// 2024-01-29 15:00:00 UTC.
pub(crate) const T: u64 = 1_706_540_400_000;

pub(crate) fn specs() -> Vec<KeyspaceSpec> {
    AgentMemory::<strata_engine::MemEngine>::declare(StoreOptions::new(
        strata_codec::Limits::FOUNDATIONDB,
    ))
    .keyspace_specs()
}

pub(crate) fn options() -> StoreOptions {
    AgentMemory::<strata_engine::MemEngine>::declare(StoreOptions::new(
        strata_codec::Limits::FOUNDATIONDB,
    ))
}

/// The ULID of time `at` whose random part is `n` (the keys crate's
/// encoder; the event keys' bytes are checked against hand-worked text in
/// `keys_are_the_original_crates_for_the_ulids_time`).
pub(crate) fn id_at(at: u64, n: u32) -> String {
    strata_keys::Ulid::from_parts(at, u128::from(n))
        .unwrap()
        .to_string()
}

/// Event `n`, its id minted at `at` (as the original's ingest does).
pub(crate) fn event(n: u32, at: u64) -> Event {
    Event {
        event_type: strata_schemas::agent_memory::EventType::UserMessage,
        metadata: std::collections::BTreeMap::new(),
        agent: None,
        event_id: id_at(at, n),
        session_id: "s1".into(),
        timestamp_ms: at,
        role: if n.is_multiple_of(2) {
            "user"
        } else {
            "assistant"
        }
        .into(),
        text: format!("message {n}"),
    }
}

fn raw_keys<E: Engine>(store: &Store<E>, space: &str) -> Vec<String> {
    let s = store.space(space).unwrap();
    let mut tx = store.begin();
    tx.snapshot_scan_in(&s, &KeyRange::prefix(&[]), None, false)
        .unwrap()
        .rows
        .into_iter()
        .map(|(k, _)| String::from_utf8(k).unwrap())
        .collect()
}

/// The outbox of `store` with the test's clock and a seeded generator.
pub(crate) fn outbox_on<'s, E: Engine>(
    store: &'s Store<E>,
    clock: &Arc<ManualClock>,
    seed: u64,
) -> Outbox<'s, E> {
    Outbox::new(
        store,
        OutboxConfig::default(),
        clock.clone(),
        Box::new(SeededRng::new(seed)),
    )
    .unwrap()
}

fn node(id: &str, level: Level, title: &str, keywords: &[&str]) -> TocNode {
    TocNode {
        salience: strata_schemas::agent_memory::Salience::default(),
        contributing_agents: Vec::new(),
        node_id: id.into(),
        level,
        title: title.into(),
        bullets: vec![TocBullet {
            text: format!("{title}, in short"),
            grip_ids: Vec::new(),
        }],
        keywords: keywords.iter().map(|k| (*k).to_owned()).collect(),
        child_node_ids: Vec::new(),
        start_ms: T,
        end_ms: T + 3_600_000,
        version: 0,
    }
}

/// The original crate's key bytes (SpillwaveSolutions/agent-memory:
/// `crates/memory-storage/src/keys.rs` at commit
/// `3d8c6e0e876ad9b41a1ff24fd982d9ffe5913379`, `db.rs` at
/// `136fb085b0d689999bc2be58625a6314ca6c2b29`), written out by hand: an
/// event is keyed by the time inside its ULID (`EventKey::from_event_id`).
#[test]
fn keys_are_the_original_crates_for_the_ulids_time() {
    // `01HNVX2X7Q`: the ULID's 48-bit time, 1,707,112,232,183 ms
    // (Crockford base 32 worked out by hand).
    let id = "01HNVX2X7Q0000000000000000";
    assert_eq!(
        event_key(id).unwrap(),
        "evt:1707112232183:01HNVX2X7Q0000000000000000"
    );
    // Crockford's text is read in either case; the key is canonical.
    assert_eq!(
        event_key("01hnvx2x7q0000000000000000").unwrap(),
        "evt:1707112232183:01HNVX2X7Q0000000000000000"
    );
    // TOC versions, latest pointers and the grip index:
    // `toc:{node}:v{ver:06}`, `latest:{node}`, `node:{node}:{grip}`.
    assert_eq!(toc_key("toc:year:2024", 12), "toc:year:2024:v000012");
    assert_eq!(latest_key("toc:year:2024"), "latest:toc:year:2024");
    assert_eq!(
        node_grip_key("toc:year:2024", "g1"),
        "node:toc:year:2024:g1"
    );
}

/// The document's key formats, byte for byte.
#[test]
fn keys_have_the_documents_formats() {
    // Time 5 ms: `0000000005` in Crockford base 32.
    assert_eq!(
        event_key("000000000500000000000000ZZ").unwrap(),
        "evt:0000000000005:000000000500000000000000ZZ"
    );
    assert!(matches!(
        event_key("not-a-ulid"),
        Err(MemoryError::Invalid { .. })
    ));
    // 9,999,999,999,999 ms is `09317757ZZ` in Crockford base 32 (worked
    // out with Python's integer arithmetic); one more, `0931775800`,
    // needs 14 digits.
    assert_eq!(
        event_key("09317757ZZ0000000000000000").unwrap(),
        "evt:9999999999999:09317757ZZ0000000000000000"
    );
    assert!(matches!(
        event_key("09317758000000000000000000"),
        Err(MemoryError::Invalid { .. })
    ));
    assert_eq!(
        toc_key("toc:day:2024-01-29", 3),
        "toc:day:2024-01-29:v000003"
    );
    assert_eq!(
        latest_key("toc:day:2024-01-29"),
        "latest:toc:day:2024-01-29"
    );
    assert_eq!(
        node_grip_key("toc:day:2024-01-29", "grip:1706540400000:test123"),
        "node:toc:day:2024-01-29:grip:1706540400000:test123"
    );
}

/// An event is written once with its outbox entry; a retry writes
/// nothing; two concurrent writers of one event: one commits, the other
/// conflicts.
fn events_are_idempotent_with_their_outbox_entry<E: Engine>(engine: E) {
    let (store, clock) = store_on(engine, options());
    let outbox = outbox_on(&store, &clock, 1);
    outbox
        .register(EVENT_TOPIC, "segmenter", Start::Beginning)
        .unwrap();
    let mem = AgentMemory::open(&store, &outbox).unwrap();
    assert!(mem.put_event(&event(1, T)).unwrap());
    assert!(
        !mem.put_event(&event(1, T)).unwrap(),
        "a retry writes nothing"
    );
    // A retry whose timestamp was derived again, or whose id is spelled in
    // lower case, is the same event.
    let mut later = event(1, T);
    later.timestamp_ms = T + 250;
    later.text = "message 1, resent".into();
    assert!(!mem.put_event(&later).unwrap(), "a retry at another time");
    later.event_id = later.event_id.to_ascii_lowercase();
    assert!(!mem.put_event(&later).unwrap(), "a retry in lower case");
    // Two transactions that both saw the event absent.
    let e2 = event(2, T + 1);
    let mut a = store.begin();
    let mut b = store.begin();
    assert!(mem.put_event_tx(&mut a, &e2).unwrap());
    assert!(mem.put_event_tx(&mut b, &e2).unwrap());
    a.commit().unwrap();
    let err = b.commit().unwrap_err();
    assert!(err.is_conflict(), "{err:?}");
    assert_eq!(
        raw_keys(&store, EVENTS),
        [
            format!("evt:1706540400000:{}", id_at(T, 1)),
            format!("evt:1706540400001:{}", id_at(T + 1, 2))
        ]
    );
    store.engine().sync().unwrap();
    let lease = outbox.acquire(EVENT_TOPIC, "segmenter", "w").unwrap();
    let entries = outbox.poll(&lease, mem.event_topic(), 10).unwrap();
    let keys: Vec<String> = entries.into_iter().map(|d| d.entry.key).collect();
    assert_eq!(keys, raw_keys(&store, EVENTS), "one outbox entry per event");
    // Found by its id alone.
    assert_eq!(mem.event(&id_at(T, 1)).unwrap().unwrap().text, "message 1");
    assert_eq!(mem.event(&id_at(T + 1, 2)).unwrap().unwrap(), e2);
    assert_eq!(mem.event(&id_at(T, 7)).unwrap(), None);
    assert!(matches!(
        mem.event("nope"),
        Err(MemoryError::Invalid { .. })
    ));
}

/// Events by time range: oldest or newest first, paged, the end excluded.
fn events_page_through_a_time_range<E: Engine>(engine: E) {
    let (store, clock) = store_on(engine, options());
    let outbox = outbox_on(&store, &clock, 1);
    let mem = AgentMemory::open(&store, &outbox).unwrap();
    for n in 0..10u32 {
        mem.put_event(&event(n, T + u64::from(n) * 1_000)).unwrap();
    }
    let texts = |p: &strata_schemas::agent_memory::EventPage| -> Vec<String> {
        p.events.iter().map(|e| e.text.clone()).collect()
    };
    // [T + 2s, T + 7s): events 2..=6.
    let (start, end) = (T + 2_000, T + 7_000);
    let first = mem.events(start, end, false, 3, None).unwrap();
    assert_eq!(texts(&first), ["message 2", "message 3", "message 4"]);
    assert!(first.more);
    let last = first.events.last().unwrap();
    let after = event_key(&last.event_id).unwrap();
    let second = mem.events(start, end, false, 3, Some(&after)).unwrap();
    assert_eq!(texts(&second), ["message 5", "message 6"]);
    assert!(!second.more);
    let newest = mem.events(start, end, true, 2, None).unwrap();
    assert_eq!(texts(&newest), ["message 6", "message 5"]);
    let last = newest.events.last().unwrap();
    let after = event_key(&last.event_id).unwrap();
    let older = mem.events(start, end, true, 10, Some(&after)).unwrap();
    assert_eq!(texts(&older), ["message 4", "message 3", "message 2"]);
    assert!(
        mem.events(end, start, false, 10, None)
            .unwrap()
            .events
            .is_empty()
    );
}

/// TOC versions: consecutive, the latest pointer moved with each, the
/// document's keys; the hierarchy with child links, idempotent; segments
/// under their day.
fn toc_versions_and_the_hierarchy<E: Engine>(engine: E) {
    let (store, clock) = store_on(engine, options());
    let outbox = outbox_on(&store, &clock, 1);
    let mem = AgentMemory::open(&store, &outbox).unwrap();
    let day = mem.ensure_hierarchy(T).unwrap();
    assert_eq!(day, "toc:day:2024-01-29");
    // The original's ids; ISO week 5 of 2024 runs from 29 January to 4
    // February, so it sits under February (its Thursday's month).
    assert_eq!(
        mem.toc_node("toc:year:2024")
            .unwrap()
            .unwrap()
            .child_node_ids,
        ["toc:month:2024:02"]
    );
    assert_eq!(
        mem.toc_node("toc:month:2024:02")
            .unwrap()
            .unwrap()
            .child_node_ids,
        ["toc:week:2024:W05"]
    );
    let week = mem.toc_node("toc:week:2024:W05").unwrap().unwrap();
    assert_eq!(week.child_node_ids, std::slice::from_ref(&day));
    // Calendar spans: Monday 2024-01-29 00:00 UTC to the next Monday.
    assert_eq!(
        (week.title.as_str(), week.start_ms, week.end_ms),
        ("Week 5 of 2024", 1_706_486_400_000, 1_707_091_200_000)
    );
    assert_eq!(mem.toc_node("toc:month:2024:01").unwrap(), None);
    mem.ensure_hierarchy(T + 60_000).unwrap();
    assert_eq!(
        mem.toc_node(&day).unwrap().unwrap().version,
        1,
        "nothing new"
    );
    // The next day joins the same week and month: they gain a version.
    mem.ensure_hierarchy(T + 86_400_000).unwrap();
    let week = mem.toc_node("toc:week:2024:W05").unwrap().unwrap();
    assert_eq!(week.version, 2);
    assert_eq!(
        week.child_node_ids,
        [day.clone(), "toc:day:2024-01-30".into()]
    );
    assert_eq!(
        mem.toc_node("toc:month:2024:02").unwrap().unwrap().version,
        1
    );
    // Nodes by level, with a time filter, and children, by span.
    let days = |start, end| -> Vec<String> {
        mem.toc_nodes_by_level(Level::Day, start, end)
            .unwrap()
            .into_iter()
            .map(|n| n.node_id)
            .collect()
    };
    assert_eq!(days(None, None), [day.as_str(), "toc:day:2024-01-30"]);
    // 2024-01-30 00:00 UTC: the first day ends there.
    assert_eq!(days(Some(1_706_572_800_000), None), ["toc:day:2024-01-30"]);
    assert_eq!(days(None, Some(1_706_572_800_000)), [day.as_str()]);
    assert!(days(Some(1_706_659_200_000), None).is_empty());
    // A day that began before the filter's start and ends after it meets
    // the filter (one millisecond before midnight, and mid-afternoon).
    for start in [1_706_572_799_999, T] {
        assert_eq!(
            days(Some(start), None),
            [day.as_str(), "toc:day:2024-01-30"],
            "from {start}"
        );
    }
    let children: Vec<String> = mem
        .child_nodes("toc:week:2024:W05")
        .unwrap()
        .into_iter()
        .map(|n| n.node_id)
        .collect();
    assert_eq!(children, [day.as_str(), "toc:day:2024-01-30"]);
    assert!(mem.child_nodes("toc:week:2024:W06").unwrap().is_empty());
    // A week a day of another year sits in: 2021-01-03 is in week 53 of
    // 2020, under December 2020.
    mem.ensure_hierarchy(1_609_675_200_000).unwrap();
    assert_eq!(
        mem.toc_node("toc:month:2020:12")
            .unwrap()
            .unwrap()
            .child_node_ids,
        ["toc:week:2020:W53"]
    );
    let years: Vec<String> = mem
        .toc_nodes_by_level(Level::Year, None, None)
        .unwrap()
        .into_iter()
        .map(|n| n.node_id)
        .collect();
    assert_eq!(years, ["toc:year:2020", "toc:year:2024"]);
    // A segment under its day.
    let seg = node(
        "toc:segment:2024-01-29:abc",
        Level::Segment,
        "Auth work",
        &["jwt"],
    );
    assert_eq!(mem.put_segment(&seg).unwrap(), 1);
    let d = mem.toc_node(&day).unwrap().unwrap();
    assert_eq!(
        (d.version, d.child_node_ids.clone()),
        (2, vec![seg.node_id.clone()])
    );
    // Versions of one node, and the document's keys.
    let mut again = seg.clone();
    again.title = "Auth work, revised".into();
    assert_eq!(mem.put_toc_node(&again).unwrap(), 2);
    let versions = mem.toc_versions(&seg.node_id).unwrap();
    assert_eq!(
        versions.iter().map(|v| v.version).collect::<Vec<_>>(),
        [1, 2]
    );
    assert_eq!(
        mem.toc_node(&seg.node_id).unwrap().unwrap().title,
        "Auth work, revised"
    );
    assert!(raw_keys(&store, TOC_NODES).contains(&"toc:segment:2024-01-29:abc:v000002".to_owned()));
    let latest = store.space(TOC_LATEST).unwrap();
    let mut tx = store.begin();
    assert_eq!(
        tx.snapshot_get_in(&latest, b"latest:toc:segment:2024-01-29:abc")
            .unwrap(),
        Some(vec![0, 0, 0, 2])
    );
    for bad in ["day:2024", "toc:", "toc:day:"] {
        assert!(matches!(
            mem.put_toc_node(&node(bad, Level::Day, "x", &[])),
            Err(MemoryError::Invalid { .. })
        ));
    }
    // A node whose id extends another's with `:v...` keeps its versions
    // apart; ids ending in digits are fine.
    mem.put_toc_node(&node("toc:x:a", Level::Segment, "a", &[]))
        .unwrap();
    mem.put_toc_node(&node("toc:x:a:vx", Level::Segment, "ax", &[]))
        .unwrap();
    mem.put_toc_node(&node("toc:x:a:v1", Level::Segment, "a1", &[]))
        .unwrap();
    assert_eq!(mem.toc_versions("toc:x:a").unwrap().len(), 1);
    assert_eq!(mem.toc_versions("toc:x:a:v1").unwrap()[0].title, "a1");
    // The search projection carries the node's level.
    let projected = store
        .get(&strata_schemas::agent_memory::SearchDocKey {
            doc_id: seg.node_id.clone(),
        })
        .unwrap()
        .unwrap();
    assert_eq!(
        (projected.doc_type.as_str(), projected.level.as_str()),
        ("toc_node", "segment")
    );
    assert_eq!(projected.keywords, "jwt");
    assert!(matches!(
        mem.put_segment(&node("toc:day:2024-01-29", Level::Day, "x", &[])),
        Err(MemoryError::Invalid { .. })
    ));
    // A segment's id names the day it starts on.
    assert!(matches!(
        mem.put_segment(&node("toc:segment:2024-01-30:x", Level::Segment, "x", &[])),
        Err(MemoryError::Invalid { .. })
    ));
}

/// Grips, their node index (moved with the grip), provenance; search over
/// nodes and grips from the outbox-fed index, content read from the store;
/// stats and checkpoints.
fn grips_search_and_stats<E: Engine>(engine: E) {
    let (store, clock) = store_on(engine, options());
    let outbox = outbox_on(&store, &clock, 1);
    let mem = AgentMemory::open(&store, &outbox).unwrap();
    for n in 0..6u32 {
        mem.put_event(&event(n, T + u64::from(n))).unwrap();
    }
    let seg = node(
        "toc:segment:2024-01-29:abc",
        Level::Segment,
        "Authentication design",
        &["jwt", "oauth"],
    );
    mem.put_segment(&seg).unwrap();
    let grip = Grip {
        salience: strata_schemas::agent_memory::Salience::default(),
        grip_id: "grip:1706540400001:test123".into(),
        excerpt: "we agreed to rotate refresh tokens".into(),
        start: EventRef {
            timestamp_ms: T + 1,
            event_id: id_at(T + 1, 1),
        },
        end: EventRef {
            timestamp_ms: T + 3,
            event_id: id_at(T + 3, 3),
        },
        source: "segmenter".into(),
        toc_node_id: Some(seg.node_id.clone()),
    };
    mem.put_grip(&grip).unwrap();
    assert_eq!(
        mem.grips_for_node(&seg.node_id).unwrap(),
        std::slice::from_ref(&grip)
    );
    let texts: Vec<String> = mem
        .provenance(&grip.grip_id)
        .unwrap()
        .into_iter()
        .map(|e| e.text)
        .collect();
    assert_eq!(texts, ["message 1", "message 2", "message 3"]);
    // Moved to the day node: the old index row goes.
    let moved = Grip {
        toc_node_id: Some("toc:day:2024-01-29".into()),
        ..grip.clone()
    };
    mem.put_grip(&moved).unwrap();
    assert!(mem.grips_for_node(&seg.node_id).unwrap().is_empty());
    assert_eq!(
        mem.grips_for_node("toc:day:2024-01-29").unwrap(),
        std::slice::from_ref(&moved)
    );
    assert!(matches!(
        mem.provenance("grip:0:none"),
        Err(MemoryError::NoSuchGrip { .. })
    ));
    // Search: the index is fed by the outbox.
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
    let hits = mem.search(&indexer, "oauth", None, 10).unwrap();
    assert_eq!(hits.len(), 1);
    assert_eq!(hits[0].doc_id, seg.node_id);
    assert!(matches!(&hits[0].content, Some(Found::Toc(t)) if t.title == "Authentication design"));
    let hits = mem
        .search(&indexer, "refresh tokens", Some("grip"), 10)
        .unwrap();
    assert_eq!(hits.len(), 1);
    assert_eq!(hits[0].content, Some(Found::Grip(moved.clone())));
    assert!(
        mem.search(&indexer, "refresh", Some("toc_node"), 10)
            .unwrap()
            .is_empty()
    );
    assert!(indexer.verify().unwrap().is_exact());
    let mut indexer = mem.rebuild_index(indexer).unwrap();
    assert_eq!(mem.search(&indexer, "oauth", None, 10).unwrap().len(), 1);
    assert!(indexer.verify().unwrap().is_exact());
    // Stats and checkpoints.
    mem.set_checkpoint("segmenter", b"evt:1706540400005")
        .unwrap();
    assert_eq!(
        mem.checkpoint("segmenter").unwrap().as_deref(),
        Some(&b"evt:1706540400005"[..])
    );
    let stats = mem.stats().unwrap();
    let rows: std::collections::BTreeMap<&str, u64> = stats.rows.into_iter().collect();
    assert_eq!(rows["am.events"], 6);
    assert_eq!(rows["am.grips"], 2, "the grip and its index row");
    assert_eq!(
        rows[strata_schemas::agent_memory::CHECKPOINTS],
        1,
        "the job's, not the outbox's"
    );
    assert_eq!(rows["am.toc_latest"], 5, "year, month, week, day, segment");
    // A grip deleted: its row, its index row and its document go.
    assert!(mem.delete_grip(&moved.grip_id).unwrap());
    assert!(!mem.delete_grip(&moved.grip_id).unwrap(), "already gone");
    assert_eq!(mem.grip(&moved.grip_id).unwrap(), None);
    assert!(mem.grips_for_node("toc:day:2024-01-29").unwrap().is_empty());
    assert!(raw_keys(&store, GRIPS).is_empty());
    store.engine().sync().unwrap();
    indexer.catch_up().unwrap();
    assert!(
        mem.search(&indexer, "refresh tokens", Some("grip"), 10)
            .unwrap()
            .is_empty()
    );
    assert!(indexer.verify().unwrap().is_exact());
}

crate::on_each_engine!(
    events_are_idempotent_with_their_outbox_entry,
    events_page_through_a_time_range,
    toc_versions_and_the_hierarchy,
    grips_search_and_stats,
);

/// Stats with the engine's sizes and the outbox lag; an online backup that
/// opens as a database with every event; compaction.
fn backup_stats_and_compaction<E, F>(engine: E, dir: &crate::TempDir, compacts: bool, reopen: F)
where
    E: Engine + strata_engine::Backup + strata_engine::Compact + strata_engine::Statistics,
    F: Fn(&std::path::Path) -> E,
{
    let (store, clock) = store_on(engine, options());
    let outbox = outbox_on(&store, &clock, 1);
    outbox
        .register(EVENT_TOPIC, "segmenter", Start::Beginning)
        .unwrap();
    let mem = AgentMemory::open(&store, &outbox).unwrap();
    for n in 0..5u32 {
        mem.put_event(&event(n, T + u64::from(n))).unwrap();
    }
    store.engine().sync().unwrap();
    let stats = mem.stats_with("segmenter").unwrap();
    assert_eq!(stats.outbox_lag, Some(5));
    let disk = stats.disk.unwrap();
    let events = disk.iter().find(|(name, _, _)| name == EVENTS).unwrap();
    // RocksDB estimates (0 before a flush); redb counts exactly.
    assert!(!events.2 || events.1 > 0, "{disk:?}");
    let copy = dir.0.join("backup");
    mem.backup(&copy).unwrap();
    match mem.compact() {
        Ok(()) => assert!(compacts),
        Err(MemoryError::Engine(strata_engine::CapabilityError::Unsupported { .. })) => {
            assert!(!compacts, "redb compacts only with exclusive access");
        }
        Err(e) => panic!("{e}"),
    }
    mem.put_event(&event(9, T + 9)).unwrap();
    let (copied, clock2) = store_on(reopen(&copy), options());
    let outbox2 = outbox_on(&copied, &clock2, 2);
    let restored = AgentMemory::open(&copied, &outbox2).unwrap();
    let page = restored.events(T, T + 100, false, 100, None).unwrap();
    assert_eq!(page.events.len(), 5, "the copy is as of the backup");
    assert_eq!(
        mem.events(T, T + 100, false, 100, None)
            .unwrap()
            .events
            .len(),
        6
    );
}

#[test]
fn backup_stats_and_compaction_on_redb() {
    let dir = crate::TempDir::new("am-backup-redb");
    let engine = crate::redb(specs(), &dir);
    backup_stats_and_compaction(engine, &dir, false, |p| {
        strata_engine_redb::RedbEngine::open(p, specs(), strata_engine_redb::RedbOptions::default())
            .unwrap()
    });
}

#[test]
fn backup_stats_and_compaction_on_rocks() {
    let dir = crate::TempDir::new("am-backup-rocks");
    let engine = crate::rocks(specs(), &dir);
    backup_stats_and_compaction(engine, &dir, true, |p| {
        strata_engine_rocks::RocksEngine::open(
            p,
            specs(),
            strata_engine_rocks::RocksOptions::default(),
        )
        .unwrap()
    });
}

/// The stored event is the original's JSON (`Event::to_bytes` of
/// SpillwaveSolutions/agent-memory, `crates/memory-types/src/event.rs`,
/// field for field, written out by hand) inside the envelope; the
/// original's JSON without `metadata` and `agent` (its older events)
/// reads.
#[test]
fn events_are_the_originals_json() {
    use strata_schemas::agent_memory::EventType;
    let (store, clock) = store_on(strata_engine::MemEngine::open(specs()).unwrap(), options());
    let outbox = outbox_on(&store, &clock, 1);
    let mem = AgentMemory::open(&store, &outbox).unwrap();
    let event = Event::new(
        "01HN4QXKN6YWXVKZ3JMHP4BCDE",
        "session-123",
        1_704_067_200_000,
        EventType::UserMessage,
        "user",
        "Hello, world!",
    );
    assert!(mem.put_event(&event).unwrap());
    let space = store.space(EVENTS).unwrap();
    let mut tx = store.begin();
    let key = event_key(&event.event_id).unwrap();
    let row = tx.snapshot_get_in(&space, key.as_bytes()).unwrap().unwrap();
    let original = br#"{"event_id":"01HN4QXKN6YWXVKZ3JMHP4BCDE","session_id":"session-123","timestamp":1704067200000,"event_type":"user_message","role":"user","text":"Hello, world!","metadata":{},"agent":null}"#;
    assert!(row.ends_with(original), "{}", String::from_utf8_lossy(&row));
    let older = r#"{"event_id":"01HN4QXKN6YWXVKZ3JMHP4BCDE","session_id":"session-123","timestamp":1704067200000,"event_type":"tool_result","role":"tool","text":"x"}"#;
    let read: Event = serde_json::from_str(older).unwrap();
    assert_eq!(
        (read.event_type, read.metadata.len(), read.agent),
        (EventType::ToolResult, 0, None)
    );
    // Grips and nodes written before the original recorded salience read
    // with its defaults; the fields sit in the record's own JSON.
    let grip = r#"{"grip_id":"grip:1:a","excerpt":"e","start":{"timestamp_ms":1,"event_id":"x"},"end":{"timestamp_ms":1,"event_id":"x"},"source":"s","toc_node_id":null}"#;
    let read: Grip = serde_json::from_str(grip).unwrap();
    assert_eq!(
        (
            read.salience.salience_score,
            read.salience.memory_kind,
            read.salience.is_pinned
        ),
        (
            0.5,
            strata_schemas::agent_memory::MemoryKind::Observation,
            false
        )
    );
    let pinned = grip.replace(
        r#""toc_node_id":null"#,
        r#""toc_node_id":null,"salience_score":0.9,"memory_kind":"preference","is_pinned":true"#,
    );
    let read: Grip = serde_json::from_str(&pinned).unwrap();
    assert_eq!(
        (
            read.salience.salience_score,
            read.salience.memory_kind,
            read.salience.is_pinned
        ),
        (
            0.9,
            strata_schemas::agent_memory::MemoryKind::Preference,
            true
        )
    );
    assert!(serde_json::to_string(&read).unwrap().ends_with(
        r#""toc_node_id":null,"salience_score":0.9,"memory_kind":"preference","is_pinned":true}"#
    ));
    // The eight kinds, by the original's names.
    let kinds = [
        (EventType::SessionStart, "session_start"),
        (EventType::UserMessage, "user_message"),
        (EventType::AssistantMessage, "assistant_message"),
        (EventType::ToolResult, "tool_result"),
        (EventType::AssistantStop, "assistant_stop"),
        (EventType::SubagentStart, "subagent_start"),
        (EventType::SubagentStop, "subagent_stop"),
        (EventType::SessionEnd, "session_end"),
    ];
    for (kind, name) in kinds {
        assert_eq!(serde_json::to_string(&kind).unwrap(), format!("\"{name}\""));
    }
}

/// `put_event_only` stores an event without announcing it: nothing on
/// the topic, and a later `put_event` of it writes nothing either.
fn events_stored_without_their_entry<E: Engine>(engine: E) {
    let (store, clock) = store_on(engine, options());
    let outbox = outbox_on(&store, &clock, 1);
    let mem = AgentMemory::open(&store, &outbox).unwrap();
    let quiet = event(1, T);
    assert!(mem.put_event_only(&quiet).unwrap());
    assert!(!mem.put_event_only(&quiet).unwrap());
    assert!(!mem.put_event(&quiet).unwrap(), "already stored");
    assert_eq!(mem.event(&quiet.event_id).unwrap(), Some(quiet));
    assert!(outbox.topics().unwrap().is_empty(), "no entry");
    assert!(mem.put_event(&event(2, T + 1)).unwrap());
    let topics = outbox.topics().unwrap();
    assert_eq!(
        topics
            .iter()
            .map(|t| (t.topic.as_str(), t.entries))
            .collect::<Vec<_>>(),
        [(EVENT_TOPIC, 1)]
    );
}

crate::on_each_engine!(events_stored_without_their_entry);

/// The original's hook format, mapped as its hook handler maps it (kind,
/// role, text, metadata, agent), and the event's id minted at its time.
#[test]
fn hook_events_map_as_the_original_maps_them() {
    use strata_schemas::agent_memory::{EventType, HookEvent};
    let table = [
        ("SessionStart", EventType::SessionStart, "system"),
        ("UserPromptSubmit", EventType::UserMessage, "user"),
        (
            "AssistantResponse",
            EventType::AssistantMessage,
            "assistant",
        ),
        ("PreToolUse", EventType::ToolResult, "tool"),
        ("PostToolUse", EventType::ToolResult, "tool"),
        ("Stop", EventType::SessionEnd, "system"),
        ("SessionEnd", EventType::SessionEnd, "system"),
        ("SubagentStart", EventType::SubagentStart, "system"),
        ("SubagentStop", EventType::SubagentStop, "system"),
        ("SomethingNew", EventType::UserMessage, "user"),
    ];
    for (name, kind, role) in table {
        let line = format!(r#"{{"hook_event_name":"{name}","session_id":"s","message":"m"}}"#);
        let e = HookEvent::parse(&line).unwrap().to_event(T, 9).unwrap();
        assert_eq!((e.event_type, e.role.as_str()), (kind, role), "{name}");
        assert_eq!((e.text.as_str(), e.timestamp_ms), ("m", T), "{name}");
        assert_eq!(e.event_id, id_at(T, 9));
    }
    // A message wins over the tool input; without either, no text; cwd
    // and the tool name in the metadata, the agent kept; the hook's own
    // time (2024-01-29 15:00:00.250 UTC) in the event and its id.
    let e = HookEvent::parse(
        r#"{"hook_event_name":"PreToolUse","session_id":"s","tool_name":"Bash","tool_input":{"command":"ls"},"cwd":"/w","agent":"opencode","timestamp":"2024-01-29T15:00:00.250Z","extra":1}"#,
    )
    .unwrap()
    .to_event(5, 1)
    .unwrap();
    assert_eq!(e.text, r#"{"command":"ls"}"#);
    assert_eq!(e.timestamp_ms, T + 250);
    assert_eq!(e.event_id, id_at(T + 250, 1));
    assert_eq!(
        e.metadata.into_iter().collect::<Vec<_>>(),
        [
            ("cwd".to_owned(), "/w".to_owned()),
            ("tool_name".to_owned(), "Bash".to_owned())
        ]
    );
    assert_eq!(e.agent.as_deref(), Some("opencode"));
    let e = HookEvent::parse(r#"{"hook_event_name":"Stop","session_id":"s"}"#)
        .unwrap()
        .to_event(T, 1)
        .unwrap();
    assert_eq!((e.text.as_str(), e.metadata.len(), e.agent), ("", 0, None));
    for bad in [
        r#"{"session_id":"s"}"#,
        r#"{"hook_event_name":"Stop"}"#,
        "not json",
    ] {
        assert!(
            matches!(HookEvent::parse(bad), Err(MemoryError::Invalid { .. })),
            "{bad}"
        );
    }
    let late =
        HookEvent::parse(r#"{"hook_event_name":"Stop","session_id":"s","timestamp":"yesterday"}"#)
            .unwrap();
    assert!(matches!(
        late.to_event(T, 1),
        Err(MemoryError::Invalid { .. })
    ));
}

/// Two writers of one segment, the second committing between the first's
/// read of the latest version and its commit: the first is refused (the
/// latest pointer it read is a predicate), so versions are never written
/// twice; run again, it writes the next version.
#[test]
fn a_segment_written_concurrently_gets_the_next_version() {
    let (store, clock) = store_on(strata_engine::MemEngine::open(specs()).unwrap(), options());
    let outbox = outbox_on(&store, &clock, 1);
    let mem = AgentMemory::open(&store, &outbox).unwrap();
    let seg = node("toc:segment:2024-01-29:c", Level::Segment, "first", &[]);
    assert_eq!(mem.put_segment(&seg).unwrap(), 1);
    let mut slow = store.begin();
    let second = node("toc:segment:2024-01-29:c", Level::Segment, "second", &[]);
    assert_eq!(mem.put_segment_tx(&mut slow, &second).unwrap(), 2);
    let third = node("toc:segment:2024-01-29:c", Level::Segment, "third", &[]);
    assert_eq!(mem.put_segment(&third).unwrap(), 2);
    let err = slow.commit().unwrap_err();
    assert!(err.is_conflict(), "{err}");
    assert_eq!(mem.put_segment(&second).unwrap(), 3);
    let titles: Vec<(u32, String)> = mem
        .toc_versions(&seg.node_id)
        .unwrap()
        .into_iter()
        .map(|n| (n.version, n.title))
        .collect();
    assert_eq!(
        titles,
        [
            (1, "first".to_owned()),
            (2, "third".to_owned()),
            (3, "second".to_owned())
        ]
    );
}
