//! Agent memory under real process kills, on redb and RocksDB files: a
//! child process ingests a conversation log (now and then a tool output
//! past the value limit, stored in chunks), segments it from the event
//! topic (segments and grips written in the transaction that finishes the
//! events), trims the finished entries and keeps a search index on disk
//! caught up, until the parent kills it with SIGKILL at a random moment.
//! The next child starts the log again from its first event, as a client
//! that does not know what reached the store resends everything.
//!
//! After each kill, on the real files: `verify` finds nothing; the events
//! stored are a prefix of the log reaching past every acknowledged one,
//! each as written; the segments' grips cover a prefix of the log, each
//! event once, each grip quoting its events' text; what is not covered is
//! exactly what the topic still owes the segmenter; the index on disk
//! opens, catches up and holds one document per node and grip, none stale.
//! At the end a child runs the log to its end and drains the topic: every
//! event stored once and segmented once, the topic trimmed.
//!
//! The oracle is the log itself (generated here) and the grips' event
//! references, mapped onto it by this file.

#![cfg(unix)]

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use strata_engine::{Durability, Engine, ManualClock, Rng, SeededRng};
use strata_engine_redb::RedbEngine;
use strata_engine_rocks::RocksEngine;
use strata_outbox::{Outbox, OutboxConfig};
use strata_schemas::agent_memory::{
    AgentMemory, EVENT_TOPIC, Event, EventType, Level, MemoryError, SegmentRule, search_spec,
    segments, verify,
};
use strata_search::{Indexer, IndexerConfig, Location};
use strata_store::{Store, StoreOptions};

use crate::TempDir;
use crate::agent_memory::{T, id_at};
use crate::agent_memory_scale::segment_into;

/// Set in the child: the directory of its database and index.
const CHILD: &str = "STRATA_AM_KILL_DIR";
/// The child's clock reading (each round later than the last, past the
/// leases the killed child held).
const CHILD_CLOCK: &str = "STRATA_AM_KILL_CLOCK";
/// Set in the child of the last round: run the log to its end and drain.
const CHILD_FINISH: &str = "STRATA_AM_KILL_FINISH";
/// Longer than the outbox's lease term (30 s).
const LEASE_GAP: u64 = 120_000;
const EVENTS: usize = 360;
const SEGMENTER: &str = "segmenter";

/// The log: turns of 20 to 600 bytes a few seconds to an hour apart, a
/// tool output of 120,000 bytes (past the 100,000-byte limit) every 61st.
fn log() -> Vec<Event> {
    let mut rng = SeededRng::new(0xA6E7_4111);
    let mut at = T;
    (0..EVENTS)
        .map(|n| {
            at += match rng.below(40) {
                0 => 3_600_000,
                _ => 1_000 + rng.below(30_000),
            };
            let len = if n % 61 == 60 {
                120_000
            } else {
                20 + usize::try_from(rng.below(580)).unwrap()
            };
            let text: String = (0..len)
                .map(|i| char::from(b'a' + u8::try_from((i * 7 + n) % 26).unwrap()))
                .collect();
            let n32 = u32::try_from(n).unwrap();
            Event {
                event_type: if n % 3 == 2 {
                    EventType::ToolResult
                } else {
                    EventType::UserMessage
                },
                metadata: BTreeMap::from([("n".to_owned(), n.to_string())]),
                agent: (n % 4 == 0).then(|| "claude".to_owned()),
                event_id: id_at(at, n32),
                session_id: format!("s{}", n / 100),
                timestamp_ms: at,
                role: if n % 2 == 0 { "user" } else { "assistant" }.into(),
                text,
            }
        })
        .collect()
}

fn options() -> StoreOptions {
    AgentMemory::<strata_engine::MemEngine>::declare(StoreOptions::new(
        strata_codec::Limits::FOUNDATIONDB,
    ))
    .durability(Durability::Immediate)
}

fn open_redb(dir: &Path) -> RedbEngine {
    crate::redb_in(options().keyspace_specs(), dir)
}

fn open_rocks(dir: &Path) -> RocksEngine {
    crate::rocks_in(options().keyspace_specs(), dir)
}

fn open_store<E: Engine>(engine: E, clock: &Arc<ManualClock>, seed: u64) -> Store<E> {
    Store::open_with(
        engine,
        options(),
        clock.clone(),
        Box::new(SeededRng::new(seed)),
    )
    .unwrap()
}

fn open_index<'o, 's, E: Engine>(
    outbox: &'o Outbox<'s, E>,
    dir: &Path,
    clock: &Arc<ManualClock>,
    holder: &str,
) -> Indexer<'o, 's, E, strata_schemas::agent_memory::SearchDocKey> {
    Indexer::open(
        outbox,
        search_spec().unwrap(),
        &Location::Dir(dir.join("index")),
        IndexerConfig::new(holder),
        clock.clone(),
    )
    .unwrap()
}

/// One turn of the segmenter: up to `max` new events, segmented and
/// finished in one transaction. Returns how many it took.
fn segment_turn<E: Engine>(
    store: &Store<E>,
    mem: &AgentMemory<'_, E>,
    lease: &strata_outbox::Lease,
    max: usize,
) -> usize {
    let batch = mem.new_events(lease, max).unwrap();
    let Some(through) = batch.last().map(|n| n.position) else {
        return 0;
    };
    let events: Vec<Event> = batch.into_iter().map(|n| n.event).collect();
    let runs = segments(&events, SegmentRule::default());
    store
        .transact(|tx| {
            for r in &runs {
                segment_into(mem, tx, &events[r.clone()])?;
            }
            mem.finish_events(tx, lease, through)?;
            Ok::<_, MemoryError>(())
        })
        .unwrap();
    events.len()
}

/// The child: the log from its first event, each acknowledged on
/// standard output once `put_event` returned (durably: `Immediate`),
/// segmenting, trimming and indexing between events; killed by the
/// parent, or, when told to finish, running to the end and draining.
fn ingest<E: Engine>(engine: E, dir: &Path, now: u64, finish: bool) {
    let clock = Arc::new(ManualClock::new(now));
    let store = open_store(engine, &clock, now);
    let outbox = crate::agent_memory::outbox_on(&store, &clock, now);
    let mem = AgentMemory::open(&store, &outbox).unwrap();
    mem.register_consumer(SEGMENTER, true).unwrap();
    let lease = outbox
        .acquire(EVENT_TOPIC, SEGMENTER, &format!("child-{now}"))
        .unwrap();
    let mut indexer = open_index(&outbox, dir, &clock, &format!("index-{now}"));
    let mut rng = SeededRng::new(now);
    for (n, e) in log().iter().enumerate() {
        mem.put_event(e).unwrap();
        println!("ack {n}");
        match rng.below(24) {
            0..=2 => {
                segment_turn(
                    &store,
                    &mem,
                    &lease,
                    1 + usize::try_from(rng.below(40)).unwrap(),
                );
            }
            3 => {
                mem.trim_events(0).unwrap();
            }
            4 => {
                indexer.catch_up().unwrap();
            }
            _ => {}
        }
    }
    if finish {
        while segment_turn(&store, &mem, &lease, 50) > 0 {}
        mem.trim_events(0).unwrap();
        indexer.catch_up().unwrap();
        indexer.close().unwrap();
        println!("done");
    } else {
        // Wait for the kill with the work in hand.
        loop {
            std::thread::sleep(Duration::from_secs(1));
        }
    }
}

/// The state after a kill, checked against the log: returns how many
/// events are stored and how many segmented.
fn check<E: Engine>(
    engine: E,
    dir: &Path,
    log: &[Event],
    acked: Option<usize>,
    now: u64,
    round: usize,
) -> (usize, usize) {
    let clock = Arc::new(ManualClock::new(now));
    let store = open_store(engine, &clock, now);
    let outbox = crate::agent_memory::outbox_on(&store, &clock, now);
    let mem = AgentMemory::open(&store, &outbox).unwrap();
    let report = verify(&store).unwrap();
    assert!(report.is_ok(), "round {round}: {:?}", report.problems);
    // The events stored: a prefix of the log, past every acknowledged one.
    let mut stored = 0;
    for (n, e) in log.iter().enumerate() {
        if let Some(found) = mem.event(&e.event_id).unwrap() {
            assert_eq!(
                stored, n,
                "round {round}: event {n} stored, {stored} missing"
            );
            assert!(found == *e, "round {round}: event {n} not as written");
            stored += 1;
        }
    }
    if let Some(acked) = acked {
        assert!(
            stored > acked,
            "round {round}: event {acked} acknowledged, {stored} stored"
        );
    }
    assert_eq!(
        report.events, stored as u64,
        "round {round}: rows beyond the log"
    );
    // The segments' grips, mapped onto the log: each event once.
    let index_of: BTreeMap<&str, usize> = log
        .iter()
        .enumerate()
        .map(|(n, e)| (e.event_id.as_str(), n))
        .collect();
    let mut covered = vec![0u32; log.len()];
    let mut grips = 0;
    let nodes = mem.toc_nodes_by_level(Level::Segment, None, None).unwrap();
    for node in &nodes {
        for g in mem.grips_for_node(&node.node_id).unwrap() {
            grips += 1;
            let (a, b) = (
                index_of[g.start.event_id.as_str()],
                index_of[g.end.event_id.as_str()],
            );
            assert!(
                b == a || b == a + 1,
                "round {round}: grip {} spans {a}..={b}",
                g.grip_id
            );
            let quoted: Vec<&str> = log[a..=b]
                .iter()
                .map(|e| &e.text[..e.text.len().min(100)])
                .collect();
            assert_eq!(
                g.excerpt,
                quoted.join(" / "),
                "round {round}: grip {}",
                g.grip_id
            );
            for c in &mut covered[a..=b] {
                *c += 1;
            }
        }
    }
    let segmented = covered.iter().take_while(|&&c| c == 1).count();
    assert!(
        covered[segmented..].iter().all(|&c| c == 0),
        "round {round}: events segmented twice, or not in order (event: times): {:?}",
        covered
            .iter()
            .enumerate()
            .skip(segmented)
            .filter(|(_, c)| **c > 0)
            .collect::<Vec<_>>()
    );
    assert_eq!(
        report.grips, grips,
        "round {round}: grips outside the segments"
    );
    // What the topic owes the segmenter is exactly what is not segmented.
    let owed = outbox.lag(EVENT_TOPIC, SEGMENTER).unwrap().entries;
    assert_eq!(
        usize::try_from(owed).unwrap(),
        stored - segmented,
        "round {round}: {stored} stored, {segmented} segmented"
    );
    // The index opens on what the kill left, catches up and matches.
    let mut indexer = open_index(&outbox, dir, &clock, &format!("check-{round}"));
    let v = indexer.verify().unwrap();
    assert!(
        v.missing.is_empty() && v.extra.is_empty() && v.stale.is_empty() && v.duplicates.is_empty(),
        "round {round}: {v:?}"
    );
    assert_eq!(
        v.documents as u64,
        report.nodes + report.grips,
        "round {round}: one document per node and grip"
    );
    indexer.close().unwrap();
    (stored, segmented)
}

fn kill_rounds<E: Engine>(test: &str, open_engine: fn(&Path) -> E) {
    if let Ok(dir) = std::env::var(CHILD) {
        let now = std::env::var(CHILD_CLOCK).unwrap().parse().unwrap();
        let finish = std::env::var(CHILD_FINISH).is_ok();
        ingest(open_engine(Path::new(&dir)), Path::new(&dir), now, finish);
        return;
    }
    let rounds = strata_test_support::kill_rounds(10);
    let log = log();
    let dir = TempDir::new("am-kill");
    let dir_text = dir.0.to_string_lossy().into_owned();
    let mut rng = SeededRng::new(0x0A11_4111);
    let (mut stored, mut segmented_at_kill, mut owed_at_kill) = (0, 0, 0);
    for round in 0..=rounds {
        let finish = round == rounds;
        let clock = (T + 2 * (round as u64 + 1) * LEASE_GAP).to_string();
        let mut env = vec![(CHILD, dir_text.as_str()), (CHILD_CLOCK, clock.as_str())];
        if finish {
            env.push((CHILD_FINISH, "1"));
        }
        // Kill once the child has gone some way past what is stored.
        let wanted = stored + 1 + usize::try_from(rng.below((EVENTS / rounds) as u64 * 2)).unwrap();
        let wanted = u64::try_from(wanted.min(EVENTS - 1)).unwrap();
        let pause = Duration::from_micros(rng.below(6_000));
        let acked = strata_test_support::child_round(test, &env, finish, wanted, pause);
        assert!(
            acked.is_some(),
            "round {round}: the child acknowledged nothing"
        );
        let now = T + (2 * (round as u64 + 1) + 1) * LEASE_GAP;
        let segmented;
        (stored, segmented) = check(open_engine(&dir.0), &dir.0, &log, acked, now, round);
        if finish {
            assert_eq!(
                (stored, segmented),
                (EVENTS, EVENTS),
                "the log ingested and segmented"
            );
        } else {
            segmented_at_kill += segmented;
            owed_at_kill += stored - segmented;
        }
    }
    // The kills landed with work on both sides of the topic.
    assert!(
        segmented_at_kill > 0,
        "the segmenter never ran before a kill"
    );
    assert!(owed_at_kill > 0, "no kill left events to segment");
    // Every finished entry trimmed at the end.
    let clock = Arc::new(ManualClock::new(T + 4 * (rounds as u64 + 2) * LEASE_GAP));
    let store = open_store(open_engine(&dir.0), &clock, 1);
    let outbox = crate::agent_memory::outbox_on(&store, &clock, 1);
    assert!(
        outbox
            .topics()
            .unwrap()
            .iter()
            .all(|t| t.topic != EVENT_TOPIC),
        "the finished entries are trimmed"
    );
    println!("{rounds} kills; {stored} events, each stored and segmented once");
}

#[test]
fn redb_agent_memory_survives_kills() {
    kill_rounds(
        "agent_memory_kill::redb_agent_memory_survives_kills",
        open_redb,
    );
}

#[test]
fn rocks_agent_memory_survives_kills() {
    kill_rounds(
        "agent_memory_kill::rocks_agent_memory_survives_kills",
        open_rocks,
    );
}

/// Two clients ingesting the log at once (each event sent by both) while
/// two others hang segments of their own under the same days: every event
/// stored once with one entry in the topic, each day listing every segment
/// hung under it (none lost to a concurrent version of the day), the
/// calendar chain whole, `verify` clean.
fn concurrent_clients_lose_and_double_nothing<E: Engine + Sync>(engine: E) {
    let store = Store::open_with(
        engine,
        crate::agent_memory::options(),
        Arc::new(strata_engine::SystemClock),
        Box::new(SeededRng::new(1)),
    )
    .unwrap();
    let outbox = Outbox::new(
        &store,
        OutboxConfig::default(),
        Arc::new(strata_engine::SystemClock),
        Box::new(SeededRng::new(2)),
    )
    .unwrap();
    let mem = AgentMemory::open(&store, &outbox).unwrap();
    let log: Vec<Event> = log().into_iter().take(120).collect();
    let segment = |client: usize, i: usize| {
        let e = &log[i];
        strata_schemas::agent_memory::TocNode {
            salience: strata_schemas::agent_memory::Salience::default(),
            contributing_agents: Vec::new(),
            node_id: format!(
                "{}:c{client}-{i}",
                strata_schemas::agent_memory::day_id(e.timestamp_ms)
                    .replace("toc:day:", "toc:segment:")
            ),
            level: Level::Segment,
            title: format!("segment {i} of client {client}"),
            bullets: Vec::new(),
            keywords: Vec::new(),
            child_node_ids: Vec::new(),
            start_ms: e.timestamp_ms,
            end_ms: e.timestamp_ms + 1,
            version: 0,
        }
    };
    let written = std::sync::atomic::AtomicUsize::new(0);
    std::thread::scope(|scope| {
        for _ in 0..2 {
            let (mem, log, written) = (&mem, &log, &written);
            scope.spawn(move || {
                for e in log {
                    if mem.put_event(e).unwrap() {
                        written.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    }
                }
            });
        }
        for client in 0..2 {
            let (mem, segment) = (&mem, &segment);
            scope.spawn(move || {
                for i in (client..120).step_by(3) {
                    mem.put_segment(&segment(client, i)).unwrap();
                }
            });
        }
    });
    assert_eq!(
        written.into_inner(),
        log.len(),
        "each event written by one client"
    );
    let report = verify(&store).unwrap();
    assert!(report.is_ok(), "{:?}", report.problems);
    assert_eq!(report.events, log.len() as u64);
    mem.register_consumer(SEGMENTER, true).unwrap();
    assert_eq!(
        outbox.lag(EVENT_TOPIC, SEGMENTER).unwrap().entries,
        log.len() as u64,
        "one entry per event"
    );
    let mut days: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for client in 0..2 {
        for i in (client..120).step_by(3) {
            let s = segment(client, i);
            days.entry(strata_schemas::agent_memory::day_id(s.start_ms))
                .or_default()
                .push(s.node_id);
        }
    }
    for (day, mut segments) in days {
        let node = mem.toc_node(&day).unwrap().unwrap();
        let mut children = node.child_node_ids.clone();
        children.sort();
        segments.sort();
        assert_eq!(children, segments, "{day}");
        let chain = strata_schemas::agent_memory::calendar_chain(node.start_ms);
        for pair in chain.windows(2) {
            let parent = mem.toc_node(&pair[0].node_id).unwrap().unwrap();
            let listed = parent
                .child_node_ids
                .iter()
                .filter(|c| **c == pair[1].node_id)
                .count();
            assert_eq!(listed, 1, "{} under {}", pair[1].node_id, pair[0].node_id);
        }
    }
}

fn specs() -> Vec<strata_engine::KeyspaceSpec> {
    options().keyspace_specs()
}

crate::on_each_engine!(concurrent_clients_lose_and_double_nothing);
