//! code-sous records that grow with use, stored past the value limit;
//! and a log appended to and an activation ended by two workers at once.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::json;
use strata_engine::{Engine, SeededRng, Snapshot as _};
use strata_schemas::code_sous::keys::LogChunkKey;
use strata_schemas::code_sous::{
    ActivationRecord, ActivationStatus, Bundle, CodeSous, CodeSousConfig, CodeSousError,
    FunctionRef, NewFunction, ScheduleRecord, WorkerRecord,
};

use crate::code_sous::{DAY, activation, f, s, specs};
use crate::{START_MS, store_on};

/// What grows with use grows past the value limit without failing (here
/// a limit of 2,000 bytes, with chunks of 500, for speed): a log appended
/// to a thousand times, an ending whose error is a long
/// stack trace (the activation record), a namespace with hundreds of
/// schedules and workers (their index sets), a log chunk configured
/// larger than the limit, a schedule's payload, a worker's activity map, a
/// draft of a large bundle, a version's configuration; each reads back
/// whole, and the log and record expire with their activation.
#[allow(clippy::too_many_lines)] // one walk through each record that grows
fn records_that_grow_past_the_value_limit_are_stored<E: Engine>(engine: E) {
    let limits = strata_codec::Limits {
        max_value_bytes: 2_000,
        ..strata_codec::Limits::FOUNDATIONDB
    };
    let mut options = CodeSous::<E>::store_options().chunk_size(500);
    options.limits = limits;
    let (store, clock) = store_on(engine, options);
    let config = CodeSousConfig {
        log_chunk_bytes: 5_000,
        ..CodeSousConfig::default()
    };
    let cs = CodeSous::new(store, config, Box::new(SeededRng::new(11)));
    cs.start_activation(&activation("a1")).unwrap();
    let mut log = String::new();
    for i in 0..1_000 {
        let line = format!("line {i}\n");
        cs.append_log("t_abc123", "a1", &line).unwrap();
        log.push_str(&line);
    }
    // One append of 12,000 bytes: three chunks of 5,000 bytes at most,
    // each past the limit.
    let wide_line = "x".repeat(12_000);
    assert_eq!(
        cs.append_log("t_abc123", "a1", &wide_line).unwrap(),
        [1_000, 1_001, 1_002]
    );
    log.push_str(&wide_line);
    assert_eq!(cs.read_log("t_abc123", "a1").unwrap(), log);
    let trace = "at frame\n".repeat(1_000);
    let done = cs
        .finish_activation(
            "t_abc123",
            "a1",
            ActivationStatus::Error,
            START_MS + 5,
            Some(&trace),
            false,
        )
        .unwrap();
    assert_eq!(done.error.as_deref(), Some(trace.as_str()));
    assert_eq!(
        cs.activation("t_abc123", "a1")
            .unwrap()
            .unwrap()
            .error
            .as_deref(),
        Some(trace.as_str())
    );
    let schedule = |i: u32| crate::code_sous::schedule(&format!("schedule-{i:04}"));
    for i in 0..300 {
        cs.create_schedule("t_abc123", "payments", &schedule(i))
            .unwrap();
    }
    let names = cs.schedules("t_abc123", "payments").unwrap();
    assert_eq!(names.len(), 300);
    assert_eq!(names[299], "schedule-0299");
    // A schedule's payload, a draft of a large bundle, a version's
    // configuration: each past the limit.
    let big = ScheduleRecord {
        payload: json!({ "rows": "r".repeat(5_000) }),
        ..schedule(300)
    };
    cs.create_schedule("t_abc123", "payments", &big).unwrap();
    assert_eq!(
        cs.schedule("t_abc123", "payments", &big.name).unwrap(),
        Some(big)
    );
    // A worker mapping hundreds of activities, and hundreds of workers.
    let worker = |i: u32, activities: u32| WorkerRecord {
        name: format!("worker-{i:04}"),
        domain: s("payments"),
        tasklist: s("payments-activities"),
        worker_id: format!("cs-payments-{i}"),
        activity_map: (0..activities)
            .map(|a| {
                let target = FunctionRef {
                    function: format!("activity-{a}"),
                    alias: s("prod"),
                };
                (format!("activity-{a}"), target)
            })
            .collect(),
        pollers: BTreeMap::new(),
        limits: BTreeMap::new(),
        enabled: true,
    };
    let wide = worker(0, 200);
    cs.create_worker("t_abc123", "payments", &wide).unwrap();
    assert_eq!(
        cs.worker("t_abc123", "payments", &wide.name).unwrap(),
        Some(wide)
    );
    for i in 1..300 {
        cs.create_worker("t_abc123", "payments", &worker(i, 1))
            .unwrap();
    }
    assert_eq!(cs.workers("t_abc123", "payments").unwrap().len(), 300);
    cs.create_function(&f(), &NewFunction::js()).unwrap();
    let large = Bundle::new("// ".repeat(3_000), "{}");
    let draft = cs.create_draft(&f(), &large).unwrap();
    assert_eq!(cs.draft_bundle(&f(), &draft.draft_id).unwrap(), large);
    let config = json!({ "env": "e".repeat(4_000) });
    let v = cs
        .publish_draft(&f(), &draft.draft_id, &config, Some("prod"))
        .unwrap();
    assert_eq!(cs.version(&f(), v.version).unwrap().unwrap().config, config);
    assert_eq!(cs.bundle(&f(), v.version).unwrap(), Some(large));
    // The log and the record expire with the activation, chunks and all.
    clock.advance(7 * DAY + 1);
    assert!(cs.activation("t_abc123", "a1").unwrap().is_none());
    assert_eq!(cs.read_log("t_abc123", "a1").unwrap(), "");
    cs.sweep_expired().unwrap();
    let report = cs.store().verify().unwrap();
    assert!(report.problems.is_empty(), "{:?}", report.problems);
}

/// Two workers appending to one activation's log at once, and two ending
/// it: every line in the log once, each worker's lines in its order, the
/// chunk numbers gap-free; exactly one ending wins.
fn concurrent_appends_and_endings_keep_the_log_whole<E: Engine + Sync>(engine: E) {
    let store = strata_store::Store::open_with(
        engine,
        CodeSous::<E>::store_options(),
        Arc::new(strata_engine::SystemClock),
        Box::new(SeededRng::new(3)),
    )
    .unwrap();
    let cs = CodeSous::new(
        store,
        CodeSousConfig::default(),
        Box::new(SeededRng::new(11)),
    );
    let start = strata_engine::Clock::now_ms(&strata_engine::SystemClock);
    cs.start_activation(&ActivationRecord {
        start_ms: start,
        ..activation("a1")
    })
    .unwrap();
    let wins = std::sync::atomic::AtomicU32::new(0);
    std::thread::scope(|scope| {
        for w in 0..2 {
            let (cs, wins) = (&cs, &wins);
            scope.spawn(move || {
                for i in 0..60 {
                    cs.append_log("t_abc123", "a1", &format!("w{w} line {i}\n"))
                        .unwrap();
                }
                match cs.finish_activation(
                    "t_abc123",
                    "a1",
                    ActivationStatus::Success,
                    start + 5,
                    None,
                    false,
                ) {
                    Ok(_) => {
                        wins.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    }
                    Err(CodeSousError::AlreadyTerminal { .. }) => {}
                    Err(e) => panic!("ending: {e}"),
                }
            });
        }
    });
    assert_eq!(wins.into_inner(), 1, "exactly one ending wins");
    let log = cs.read_log("t_abc123", "a1").unwrap();
    for w in 0..2 {
        let mine: Vec<&str> = log
            .lines()
            .filter(|l| l.starts_with(&format!("w{w} ")))
            .collect();
        let want: Vec<String> = (0..60).map(|i| format!("w{w} line {i}")).collect();
        assert_eq!(mine, want, "worker {w}'s lines, once each, in order");
    }
    assert_eq!(
        crate::code_sous::log_chunks(&cs, "a1"),
        (0..120).collect::<Vec<u64>>()
    );
}

/// The stored row of data key `key`, read from the engine.
fn stored<E: Engine>(cs: &CodeSous<E>, key: &[u8]) -> Option<Vec<u8>> {
    let engine = cs.store().engine();
    let data = engine.keyspace("data").unwrap();
    engine.snapshot().unwrap().get(data, key).unwrap()
}

/// Code-sous on `engine` with its default configuration, activation
/// `a1` started.
fn started<E: Engine>(engine: E) -> CodeSous<E> {
    let (store, _clock) = store_on(engine, CodeSous::<E>::store_options());
    let cs = CodeSous::new(
        store,
        CodeSousConfig::default(),
        Box::new(SeededRng::new(11)),
    );
    cs.start_activation(&activation("a1")).unwrap();
    cs
}

/// A log appended to a thousand times keeps a chunk set of a few bytes,
/// rewritten at each append: its row at the document's key is the one
/// run `[[0,999]]` in a version-2 envelope (the first layout wrote the
/// thousand numbers, about 4,900 bytes, and each append rewrote them all);
/// the log reads back whole.
fn a_long_log_keeps_its_chunk_set_small<E: Engine>(engine: E) {
    let cs = started(engine);
    let mut log = String::new();
    for i in 0..1_000u64 {
        let line = format!("line {i}\n");
        assert_eq!(cs.append_log("t_abc123", "a1", &line).unwrap(), [i]);
        log.push_str(&line);
    }
    assert_eq!(cs.read_log("t_abc123", "a1").unwrap(), log);
    let row = stored(&cs, b"cs:log:t_abc123:a1:chunks").unwrap();
    assert!(
        row.ends_with(b"[[0,999]]"),
        "{}",
        String::from_utf8_lossy(&row)
    );
    assert!(row.len() < 64, "{} bytes", row.len());
    assert_eq!(strata_codec::Header::read(&row).unwrap().version, 2);
}

/// A log's chunk set as the first layout wrote it (schema version 1, the
/// numbers one by one, here with a gap) is read, and the next append
/// goes after its largest number and rewrites it as runs.
fn a_chunk_set_of_the_first_layout_is_read_and_continued<E: Engine>(engine: E) {
    #[derive(Debug, serde::Serialize, serde::Deserialize)]
    #[serde(transparent)]
    struct FirstLayout(std::collections::BTreeSet<u64>);
    strata_codec::value!(FirstLayout: json, version = 1);
    #[derive(Debug, Clone, PartialEq, Eq, Hash)]
    struct FirstLayoutKey {
        tenant: String,
        activation_id: String,
    }
    strata_keys::text_key! {
        FirstLayoutKey -> chunked FirstLayout = ("cs:log:", {tenant}, ":", {activation_id}, ":chunks");
    }
    let cs = started(engine);
    let old = FirstLayoutKey {
        tenant: s("t_abc123"),
        activation_id: s("a1"),
    };
    cs.store()
        .transact(|tx| {
            for (chunk, text) in [(0, "zero "), (1, "one "), (3, "three ")] {
                tx.put(
                    &LogChunkKey {
                        tenant: s("t_abc123"),
                        activation_id: s("a1"),
                        chunk,
                    },
                    &s(text),
                )?;
            }
            tx.put(&old, &FirstLayout([0, 1, 3].into_iter().collect()))
        })
        .unwrap();
    let row = stored(&cs, b"cs:log:t_abc123:a1:chunks").unwrap();
    assert!(row.ends_with(b"[0,1,3]"), "written in the first layout");
    assert_eq!(cs.read_log("t_abc123", "a1").unwrap(), "zero one three ");
    assert_eq!(cs.append_log("t_abc123", "a1", "four").unwrap(), [4]);
    assert_eq!(
        cs.read_log("t_abc123", "a1").unwrap(),
        "zero one three four"
    );
    let row = stored(&cs, b"cs:log:t_abc123:a1:chunks").unwrap();
    assert!(
        row.ends_with(b"[[0,1],[3,4]]"),
        "{}",
        String::from_utf8_lossy(&row)
    );
    assert_eq!(strata_codec::Header::read(&row).unwrap().version, 2);
}

crate::on_each_engine!(
    a_long_log_keeps_its_chunk_set_small,
    a_chunk_set_of_the_first_layout_is_read_and_continued,
    concurrent_appends_and_endings_keep_the_log_whole,
    records_that_grow_past_the_value_limit_are_stored,
);
