//! `agent_memory::verify`: the whole agent-memory database read back, each
//! kind of damage planted by hand (raw rows written beside the module) and
//! the report compared problem by problem.

#![allow(clippy::too_many_lines)] // one walk through the damage, in order

use strata_codec::EncodeOptions;
use strata_engine::Engine;
use strata_schemas::agent_memory::{
    AgentMemory, EVENTS, Event, EventRef, GRIPS, Grip, Inconsistency, Level, MemoryCheck,
    MemoryProblem, TOC_LATEST, TOC_NODES, TocNode, verify,
};
use strata_store::Store;

use crate::agent_memory::{T, options, outbox_on, specs};
use crate::store_on;

/// Event `n`, a second after event `n - 1`.
fn event(n: u32) -> Event {
    crate::agent_memory::event(n, T + u64::from(n) * 1_000)
}

fn segment(suffix: &str) -> TocNode {
    TocNode {
        salience: strata_schemas::agent_memory::Salience::default(),
        contributing_agents: Vec::new(),
        node_id: format!("toc:segment:2024-01-29:{suffix}"),
        level: Level::Segment,
        title: format!("segment {suffix}"),
        bullets: Vec::new(),
        keywords: Vec::new(),
        child_node_ids: Vec::new(),
        start_ms: T,
        end_ms: T + 60_000,
        version: 0,
    }
}

fn grip(n: u32, node: Option<&str>) -> Grip {
    let at = |e: &Event| EventRef {
        timestamp_ms: e.timestamp_ms,
        event_id: e.event_id.clone(),
    };
    Grip {
        salience: strata_schemas::agent_memory::Salience::default(),
        grip_id: format!("grip:{T:013}:g{n}"),
        excerpt: format!("excerpt {n}"),
        start: at(&event(0)),
        end: at(&event(1)),
        source: "test".into(),
        toc_node_id: node.map(str::to_owned),
    }
}

/// Writes raw rows into `space` beside the module (`None` deletes).
fn raw<E: Engine>(store: &Store<E>, space: &str, rows: &[(&str, Option<Vec<u8>>)]) {
    let s = store.space(space).unwrap();
    store
        .transact(|tx| {
            for (k, v) in rows {
                match v {
                    Some(v) => tx.put_in(&s, k.as_bytes().to_vec(), v.clone())?,
                    None => tx.delete_in(&s, k.as_bytes().to_vec())?,
                }
            }
            Ok::<_, strata_store::StoreError>(())
        })
        .unwrap();
}

fn raw_get<E: Engine>(store: &Store<E>, space: &str, key: &str) -> Vec<u8> {
    let s = store.space(space).unwrap();
    let mut tx = store.begin();
    tx.snapshot_get_in(&s, key.as_bytes()).unwrap().unwrap()
}

/// The codec's envelope of `value` bound to `key` (the codec, not the
/// module, builds it).
fn envelope<T: strata_codec::Value>(value: &T, key: &str) -> Vec<u8> {
    let mut out = Vec::new();
    strata_codec::encode(value, key.as_bytes(), EncodeOptions::default(), &mut out).unwrap();
    out
}

/// A sound database verifies with exact counts; then each kind of damage
/// is reported, and nothing else.
fn verify_reports_each_kind_of_damage<E: Engine>(engine: E) {
    let (store, clock) = store_on(engine, options());
    let outbox = outbox_on(&store, &clock, 1);
    let mem = AgentMemory::open(&store, &outbox).unwrap();
    for n in 0..4 {
        mem.put_event(&event(n)).unwrap();
    }
    let seg = segment("a");
    mem.put_segment(&seg).unwrap();
    mem.put_toc_node(&seg).unwrap();
    mem.put_grip(&grip(1, Some(&seg.node_id))).unwrap();
    mem.put_grip(&grip(2, None)).unwrap();
    // 4 events; year, month, week, day (two versions: the segment added)
    // and the segment (two): 7 versions of 5 nodes; 2 grips, 1 index row.
    assert_eq!(
        verify(&store).unwrap(),
        MemoryCheck {
            events: 4,
            toc_versions: 7,
            nodes: 5,
            grips: 2,
            index_rows: 1,
            spilled: 0,
            problems: Vec::new(),
        }
    );

    let e1 = event(1);
    let k1 = format!("evt:{:013}:{}", T + 1_000, e1.event_id);
    let k2 = format!("evt:{:013}:{}", T + 2_000, event(2).event_id);
    let k3 = format!("evt:{:013}:{}", T + 3_000, event(3).event_id);
    // A flipped byte in an event; event 1's row copied under event 2's key
    // (the envelope binds the key); event 1 re-enveloped under event 3's key.
    let mut flipped = raw_get(&store, EVENTS, &k1);
    let last = flipped.len() - 1;
    flipped[last] ^= 0x01;
    let e0 = event(0);
    let k0 = format!("evt:{T:013}:{}", e0.event_id);
    raw(
        &store,
        EVENTS,
        &[
            (&k0, Some(flipped)),
            (&k2, Some(raw_get(&store, EVENTS, &k1))),
            (&k3, Some(envelope(&e1, &k3))),
        ],
    );
    // Latest pointers: the segment's set back to 1 (2 stored), the day's
    // to 3 bytes, the week's to a version never written; the month's gone.
    raw(
        &store,
        TOC_LATEST,
        &[
            ("latest:toc:segment:2024-01-29:a", Some(vec![0, 0, 0, 1])),
            ("latest:toc:day:2024-01-29", Some(vec![0, 0, 2])),
            ("latest:toc:week:2024:W05", Some(vec![0, 0, 0, 9])),
            ("latest:toc:month:2024:02", None),
        ],
    );
    // A TOC version stored under another version's key.
    let year = mem.toc_node("toc:year:2024").unwrap().unwrap();
    raw(
        &store,
        TOC_NODES,
        &[(
            "toc:year:2024:v000007",
            Some(envelope(&year, "toc:year:2024:v000007")),
        )],
    );
    // The linked grip's index row gone; an index row of an unknown grip;
    // one naming the unlinked grip under a node.
    let g1 = grip(1, None).grip_id;
    let g2 = grip(2, None).grip_id;
    let g9 = format!("grip:{T:013}:g9");
    raw(
        &store,
        GRIPS,
        &[
            (&format!("node:{}:{g1}", seg.node_id), None),
            (&format!("node:{}:{g9}", seg.node_id), Some(Vec::new())),
            (&format!("node:toc:day:2024-01-29:{g2}"), Some(Vec::new())),
        ],
    );
    // A grip stored under another grip's key (its envelope sealed for
    // that key, so it decodes).
    let g7 = format!("grip:{T:013}:g7");
    raw(&store, GRIPS, &[(&g7, Some(envelope(&grip(2, None), &g7)))]);
    let check = verify(&store).unwrap();
    let problems: Vec<String> = check
        .problems
        .iter()
        .map(|p| match p {
            // The codec's own words are not this test's to fix.
            MemoryProblem::Undecodable { space, key, .. } => format!("undecodable {space} {key}"),
            other => format!("{other:?}"),
        })
        .collect();
    let expected = [
        format!("undecodable am.events {k0}"),
        format!("undecodable am.events {k2}"),
        format!(
            "{:?}",
            MemoryProblem::MisKeyed {
                space: EVENTS,
                key: k3.clone(),
                expected: k1.clone(),
            }
        ),
        format!(
            "{:?}",
            MemoryProblem::MisKeyed {
                space: TOC_NODES,
                key: "toc:year:2024:v000007".into(),
                expected: "toc:year:2024:v000001".into(),
            }
        ),
        format!(
            "{:?}",
            MemoryProblem::Pointer {
                key: "latest:toc:day:2024-01-29".into(),
                problem: Inconsistency::PointerNotFourBytes,
            }
        ),
        format!(
            "{:?}",
            MemoryProblem::PointerBehind {
                node_id: "toc:segment:2024-01-29:a".into(),
                pointer: 1,
                highest: 2,
            }
        ),
        format!(
            "{:?}",
            MemoryProblem::Pointer {
                key: "latest:toc:week:2024:W05".into(),
                problem: Inconsistency::VersionNotStored(9),
            }
        ),
        format!(
            "{:?}",
            MemoryProblem::NoPointer {
                node_id: "toc:month:2024:02".into(),
            }
        ),
        format!(
            "{:?}",
            MemoryProblem::MisKeyed {
                space: GRIPS,
                key: g7.clone(),
                expected: g2.clone(),
            }
        ),
        format!(
            "{:?}",
            MemoryProblem::IndexRowDangling {
                key: format!("node:toc:day:2024-01-29:{g2}"),
            }
        ),
        format!(
            "{:?}",
            MemoryProblem::IndexRowDangling {
                key: format!("node:{}:{g9}", seg.node_id),
            }
        ),
        format!(
            "{:?}",
            MemoryProblem::IndexRowMissing {
                grip_id: g1.clone(),
                node_id: seg.node_id.clone(),
            }
        ),
    ];
    assert_eq!(problems, expected);
    assert_eq!(
        (
            check.events,
            check.toc_versions,
            check.nodes,
            check.grips,
            check.index_rows
        ),
        (4, 8, 4, 3, 2)
    );
    assert!(!check.is_ok());
    // The report's words name the row.
    assert_eq!(
        check.problems[5].to_string(),
        "am.toc_latest \"latest:toc:segment:2024-01-29:a\": points at version 1, below the stored version 2"
    );
    assert_eq!(
        check.problems[11].to_string(),
        format!("am.grips {g1:?}: linked to \"toc:segment:2024-01-29:a\" without its index row")
    );
}

crate::on_each_engine!(verify_reports_each_kind_of_damage);
