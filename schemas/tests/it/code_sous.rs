//! code-sous: the document's keys and JSON, tar bundles, the atomic
//! operations and TTL, on every engine.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::json;
use strata_engine::{Engine, KeyspaceSpec, ManualClock, SeededRng};
use strata_keys::Key;
use strata_schemas::code_sous::keys::{
    ActivationKey, AliasKey, BundleKey, DraftKey, FunctionKey, LogChunkKey, LogIndexKey,
    ScheduleIndexKey, ScheduleKey, VersionKey, VersionSeqKey, WorkerIndexKey, WorkerKey,
};
use strata_schemas::code_sous::{
    ActivationRecord, ActivationStatus, Bundle, CodeSous, CodeSousConfig, CodeSousError,
    FunctionId, FunctionMeta, FunctionRef, NewFunction, ScheduleRecord, VersionRef, WorkerRecord,
    sha256_hex,
};

use crate::{START_MS, store_on};

pub(crate) const DAY: u64 = 24 * 60 * 60 * 1000;

pub(crate) fn specs() -> Vec<KeyspaceSpec> {
    CodeSous::<strata_engine::MemEngine>::store_options().keyspace_specs()
}

fn open<E: Engine>(engine: E, config: CodeSousConfig) -> (CodeSous<E>, Arc<ManualClock>) {
    let (store, clock) = store_on(engine, CodeSous::<E>::store_options());
    (
        CodeSous::new(store, config, Box::new(SeededRng::new(11))),
        clock,
    )
}

pub(crate) fn s(x: &str) -> String {
    x.to_owned()
}

pub(crate) fn f() -> FunctionId {
    FunctionId::new("t_abc123", "payments", "reconcile")
}

fn bundle(n: u32) -> Bundle {
    Bundle::new(
        format!("export default () => {n};"),
        format!(r#"{{"name":"reconcile","n":{n}}}"#),
    )
}

pub(crate) fn activation(id: &str) -> ActivationRecord {
    ActivationRecord {
        activation_id: s(id),
        tenant: s("t_abc123"),
        namespace: s("payments"),
        function: s("reconcile"),
        target: VersionRef {
            alias: Some(s("prod")),
            version: 17,
        },
        trigger: json!({"type": "http"}),
        status: ActivationStatus::Running,
        start_ms: START_MS,
        end_ms: None,
        duration_ms: None,
        result_truncated: false,
        error: None,
    }
}

/// Every key as the document spells it.
#[test]
#[allow(clippy::too_many_lines)]
fn keys_are_the_documents_bytes() {
    let (t, n, fun) = (s("t_abc123"), s("payments"), s("reconcile"));
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (
            FunctionKey {
                tenant: t.clone(),
                namespace: n.clone(),
                function: fun.clone(),
            }
            .pack()
            .unwrap(),
            "cs:fn:t_abc123:payments:reconcile:meta",
        ),
        (
            VersionSeqKey {
                tenant: t.clone(),
                namespace: n.clone(),
                function: fun.clone(),
            }
            .pack()
            .unwrap(),
            "cs:fn:t_abc123:payments:reconcile:version_seq",
        ),
        (
            DraftKey {
                tenant: t.clone(),
                namespace: n.clone(),
                function: fun.clone(),
                draft_id: s("drf_01H"),
            }
            .pack()
            .unwrap(),
            "cs:fn:t_abc123:payments:reconcile:draft:drf_01H",
        ),
        (
            VersionKey {
                tenant: t.clone(),
                namespace: n.clone(),
                function: fun.clone(),
                version: 17,
            }
            .pack()
            .unwrap(),
            "cs:fn:t_abc123:payments:reconcile:ver:17:meta",
        ),
        (
            BundleKey {
                tenant: t.clone(),
                namespace: n.clone(),
                function: fun.clone(),
                version: 17,
            }
            .pack()
            .unwrap(),
            "cs:fn:t_abc123:payments:reconcile:ver:17:bundle",
        ),
        (
            AliasKey {
                tenant: t.clone(),
                namespace: n.clone(),
                function: fun.clone(),
                alias: s("prod"),
            }
            .pack()
            .unwrap(),
            "cs:fn:t_abc123:payments:reconcile:alias:prod",
        ),
        (
            ScheduleKey {
                tenant: t.clone(),
                namespace: n.clone(),
                schedule: s("reconcile_30s"),
            }
            .pack()
            .unwrap(),
            "cs:schedule:t_abc123:payments:reconcile_30s:meta",
        ),
        (
            ScheduleIndexKey {
                tenant: t.clone(),
                namespace: n.clone(),
            }
            .pack()
            .unwrap(),
            "cs:schedule:t_abc123:payments:index",
        ),
        (
            WorkerKey {
                tenant: t.clone(),
                namespace: n.clone(),
                name: s("payments-activities"),
            }
            .pack()
            .unwrap(),
            "cs:cadence:t_abc123:payments:worker:payments-activities:meta",
        ),
        (
            WorkerIndexKey {
                tenant: t.clone(),
                namespace: n.clone(),
            }
            .pack()
            .unwrap(),
            "cs:cadence:t_abc123:payments:workers:index",
        ),
        (
            ActivationKey {
                tenant: t.clone(),
                activation_id: s("6f1c"),
            }
            .pack()
            .unwrap(),
            "cs:act:t_abc123:6f1c:meta",
        ),
        (
            LogChunkKey {
                tenant: t.clone(),
                activation_id: s("6f1c"),
                chunk: 3,
            }
            .pack()
            .unwrap(),
            "cs:log:t_abc123:6f1c:3",
        ),
        (
            LogIndexKey {
                tenant: t.clone(),
                activation_id: s("6f1c"),
            }
            .pack()
            .unwrap(),
            "cs:log:t_abc123:6f1c:chunks",
        ),
    ];
    for (got, want) in cases {
        assert_eq!(String::from_utf8(got).unwrap(), want);
    }
    // A name with the delimiter would make keys ambiguous: refused.
    assert!(
        FunctionKey {
            tenant: s("t:1"),
            namespace: n.clone(),
            function: fun.clone()
        }
        .pack()
        .is_err()
    );
    // A schedule named `index` and the index itself stay apart.
    let named_index = ScheduleKey {
        tenant: t.clone(),
        namespace: n.clone(),
        schedule: s("index"),
    }
    .pack()
    .unwrap();
    assert!(ScheduleIndexKey::unpack(&named_index).is_err());
    assert!(LogChunkKey::unpack(b"cs:log:t_abc123:6f1c:chunks").is_err());
}

/// The JSON field names are the document's (compared as JSON values with
/// the document's examples).
#[test]
fn records_have_the_documents_json() {
    let meta = FunctionMeta {
        tenant: s("t_abc123"),
        namespace: s("payments"),
        name: s("reconcile"),
        runtime: s("cs-js"),
        entry: s("function.js"),
        handler: s("default"),
        created_at_ms: 1_730_000_000_000,
        deleted_at_ms: None,
    };
    assert_eq!(
        serde_json::to_value(&meta).unwrap(),
        json!({"tenant": "t_abc123", "namespace": "payments", "name": "reconcile", "runtime": "cs-js",
               "entry": "function.js", "handler": "default", "created_at_ms": 1_730_000_000_000u64,
               "deleted_at_ms": null})
    );
    let schedule = ScheduleRecord {
        name: s("reconcile_30s"),
        every_seconds: 30,
        overlap_policy: s("skip"),
        target: FunctionRef {
            function: s("reconcile"),
            alias: s("prod"),
        },
        payload: json!({"source": "schedule"}),
        enabled: true,
        created_at_ms: 1_730_000_000_000,
    };
    assert_eq!(
        serde_json::to_value(&schedule).unwrap(),
        json!({"name": "reconcile_30s", "every_seconds": 30, "overlap_policy": "skip",
               "ref": {"function": "reconcile", "alias": "prod"}, "payload": {"source": "schedule"},
               "enabled": true, "created_at_ms": 1_730_000_000_000u64})
    );
    let worker = WorkerRecord {
        name: s("payments-activities"),
        domain: s("payments"),
        tasklist: s("payments-activities"),
        worker_id: s("cs-payments-01"),
        activity_map: BTreeMap::from([(
            s("SousInvokeActivity"),
            FunctionRef {
                function: s("reconcile"),
                alias: s("prod"),
            },
        )]),
        pollers: BTreeMap::from([(s("activity"), 8)]),
        limits: BTreeMap::from([(s("max_inflight_tasks"), 256)]),
        enabled: true,
    };
    assert_eq!(
        serde_json::to_value(&worker).unwrap(),
        json!({"name": "payments-activities", "domain": "payments", "tasklist": "payments-activities",
               "worker_id": "cs-payments-01",
               "activity_map": {"SousInvokeActivity": {"function": "reconcile", "alias": "prod"}},
               "pollers": {"activity": 8}, "limits": {"max_inflight_tasks": 256}, "enabled": true})
    );
    let mut done = activation("uuid");
    done.status = ActivationStatus::Success;
    done.end_ms = Some(1_730_000_000_012);
    done.duration_ms = Some(12);
    assert_eq!(
        serde_json::to_value(&done).unwrap(),
        json!({"activation_id": "uuid", "tenant": "t_abc123", "namespace": "payments", "function": "reconcile",
               "ref": {"alias": "prod", "version": 17}, "trigger": {"type": "http"}, "status": "success",
               "start_ms": 1_730_000_000_000u64, "end_ms": 1_730_000_000_012u64, "duration_ms": 12,
               "result_truncated": false, "error": null})
    );
    // The document's activation parses as ours.
    let theirs: ActivationRecord = serde_json::from_value(json!({
        "activation_id": "uuid", "tenant": "t_abc123", "namespace": "payments", "function": "reconcile",
        "ref": {"alias": "prod", "version": 17}, "trigger": {"type": "http"}, "status": "success",
        "start_ms": 1_730_000_000_000u64, "end_ms": 1_730_000_000_012u64, "duration_ms": 12,
        "result_truncated": false, "error": null}))
    .unwrap();
    assert_eq!(theirs, done);
}

/// A bundle is a real ustar archive, read here by hand, byte by byte; the
/// same files always give the same bytes; SHA-256 is the standard one.
#[test]
fn bundles_are_canonical_tar_archives() {
    let b = Bundle::new("export default 1;", "{}");
    let tar = b.to_tar().unwrap();
    assert_eq!(
        tar,
        Bundle::new("export default 1;", "{}").to_tar().unwrap()
    );
    // First header: name, size in octal, type '0', "ustar" magic.
    let name = |at: usize| {
        String::from_utf8(
            tar[at..at + 100]
                .split(|&c| c == 0)
                .next()
                .unwrap()
                .to_vec(),
        )
        .unwrap()
    };
    let size = |at: usize| {
        let field = std::str::from_utf8(&tar[at + 124..at + 135])
            .unwrap()
            .trim_matches(|c: char| c == '\0' || c == ' ');
        usize::from_str_radix(field, 8).unwrap()
    };
    assert_eq!(name(0), "function.js");
    assert_eq!(size(0), 17);
    assert_eq!(tar[156], b'0');
    assert_eq!(&tar[257..262], b"ustar");
    assert_eq!(&tar[512..529], b"export default 1;");
    // Second header after the 512-byte-padded body.
    assert_eq!(name(1024), "manifest.json");
    assert_eq!(size(1024), 2);
    assert_eq!(&tar[1536..1538], b"{}");
    assert_eq!(Bundle::from_tar(&tar).unwrap(), b);
    assert!(matches!(
        Bundle::from_tar(&tar[..700]),
        Err(CodeSousError::BadBundle(_))
    ));
    assert!(matches!(
        Bundle::from_files(BTreeMap::from([(s("function.js"), vec![1])])),
        Err(CodeSousError::BadBundle(_))
    ));
    // FIPS 180-2's example.
    assert_eq!(
        sha256_hex(b"abc"),
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    );
    assert_eq!(b.sha256().unwrap(), sha256_hex(&tar));
}

fn publishes_number_versions_and_move_aliases<E: Engine>(engine: E) {
    let (cs, _) = open(engine, CodeSousConfig::default());
    assert!(matches!(
        cs.publish(&f(), &bundle(0), &json!({}), None),
        Err(CodeSousError::NoSuchFunction(_))
    ));
    cs.create_function(&f(), &NewFunction::js()).unwrap();
    assert!(matches!(
        cs.create_function(&f(), &NewFunction::js()),
        Err(CodeSousError::FunctionExists(_))
    ));
    let v1 = cs
        .publish(&f(), &bundle(1), &json!({"memory_mb": 128}), Some("prod"))
        .unwrap();
    let v2 = cs.publish(&f(), &bundle(2), &json!({}), None).unwrap();
    let v3 = cs
        .publish(&f(), &bundle(3), &json!({}), Some("canary"))
        .unwrap();
    assert_eq!((v1.version, v2.version, v3.version), (1, 2, 3));
    assert_eq!(cs.last_version(&f()).unwrap(), 3);
    for (v, n) in [(1, 1), (2, 2), (3, 3)] {
        let meta = cs.version(&f(), v).unwrap().unwrap();
        assert_eq!(meta.version, v);
        assert_eq!(meta.published_at_ms, START_MS);
        let stored = cs.bundle(&f(), v).unwrap().unwrap();
        assert_eq!(stored, bundle(n));
        assert_eq!(meta.sha256, sha256_hex(&bundle(n).to_tar().unwrap()));
    }
    assert_eq!(
        cs.version(&f(), 1).unwrap().unwrap().config,
        json!({"memory_mb": 128})
    );
    assert_eq!(cs.alias(&f(), "prod").unwrap().unwrap().version, 1);
    assert_eq!(cs.alias(&f(), "canary").unwrap().unwrap().version, 3);
    // An alias only points at an existing version; a refused move changes
    // nothing.
    assert!(matches!(
        cs.set_alias(&f(), "prod", 4),
        Err(CodeSousError::NoSuchVersion { version: 4, .. })
    ));
    assert_eq!(cs.alias(&f(), "prod").unwrap().unwrap().version, 1);
    assert_eq!(cs.set_alias(&f(), "prod", 2).unwrap().version, 2);
    assert_eq!(cs.alias(&f(), "prod").unwrap().unwrap().version, 2);
    // A deleted function takes no more versions; the counter is untouched.
    cs.delete_function(&f()).unwrap();
    assert!(matches!(
        cs.publish(&f(), &bundle(4), &json!({}), None),
        Err(CodeSousError::NoSuchFunction(_))
    ));
    assert_eq!(cs.last_version(&f()).unwrap(), 3);
    assert!(cs.version(&f(), 4).unwrap().is_none());
    assert!(cs.function(&f()).unwrap().unwrap().deleted_at_ms.is_some());
}

fn concurrent_publishes_get_distinct_gap_free_versions<E: Engine>(engine: E) {
    // The system clock: conflicting publishes back off in real time (a
    // manual clock's sleep returns at once, and the retries collide).
    let store = strata_store::Store::open(engine, CodeSous::<E>::store_options()).unwrap();
    let cs = CodeSous::new(
        store,
        CodeSousConfig::default(),
        Box::new(SeededRng::new(5)),
    );
    cs.create_function(&f(), &NewFunction::js()).unwrap();
    let mut got: Vec<u64> = std::thread::scope(|sc| {
        let hs: Vec<_> = (0..4u32)
            .map(|t| {
                let cs = &cs;
                sc.spawn(move || {
                    (0..5u32)
                        .map(|i| {
                            cs.publish(&f(), &bundle(t * 10 + i), &json!({}), None)
                                .unwrap()
                                .version
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        hs.into_iter().flat_map(|h| h.join().unwrap()).collect()
    });
    got.sort_unstable();
    assert_eq!(got, (1..=20).collect::<Vec<_>>());
    assert_eq!(cs.last_version(&f()).unwrap(), 20);
}

fn drafts_publish_and_expire_after_a_day<E: Engine>(engine: E) {
    let (cs, clock) = open(engine, CodeSousConfig::default());
    cs.create_function(&f(), &NewFunction::js()).unwrap();
    let draft = cs.create_draft(&f(), &bundle(5)).unwrap();
    assert!(draft.draft_id.starts_with("drf_") && draft.draft_id.len() == 30);
    assert_eq!(draft.expires_at_ms, START_MS + DAY);
    assert_eq!(draft.sha256, sha256_hex(&bundle(5).to_tar().unwrap()));
    assert_eq!(cs.draft_bundle(&f(), &draft.draft_id).unwrap(), bundle(5));
    let v = cs
        .publish_draft(&f(), &draft.draft_id, &json!({}), Some("prod"))
        .unwrap();
    assert_eq!(cs.bundle(&f(), v.version).unwrap().unwrap(), bundle(5));
    clock.set(START_MS + DAY - 1);
    assert!(
        cs.draft(&f(), &draft.draft_id).unwrap().is_some(),
        "a draft lives 24 hours"
    );
    clock.set(START_MS + DAY);
    assert!(
        cs.draft(&f(), &draft.draft_id).unwrap().is_none(),
        "and no longer"
    );
    assert!(matches!(
        cs.publish_draft(&f(), &draft.draft_id, &json!({}), None),
        Err(CodeSousError::NoSuchDraft { .. })
    ));
    assert_eq!(
        cs.sweep_expired().unwrap().removed,
        1,
        "the sweeper removes the draft"
    );
    assert_eq!(cs.sweep_expired().unwrap().removed, 0);
    // Versions never expire.
    assert!(cs.bundle(&f(), v.version).unwrap().is_some());
}

#[allow(clippy::too_many_lines)]
fn an_activation_ends_once<E: Engine>(engine: E) {
    let (cs, clock) = open(engine, CodeSousConfig::default());
    assert!(matches!(
        cs.start_activation(&ActivationRecord {
            status: ActivationStatus::Success,
            ..activation("a1")
        }),
        Err(CodeSousError::WrongStatus(ActivationStatus::Success))
    ));
    cs.start_activation(&activation("a1")).unwrap();
    assert!(matches!(
        cs.start_activation(&activation("a1")),
        Err(CodeSousError::ActivationExists { .. })
    ));
    assert!(matches!(
        cs.finish_activation(
            "t_abc123",
            "a1",
            ActivationStatus::Running,
            START_MS + 5,
            None,
            false
        ),
        Err(CodeSousError::WrongStatus(ActivationStatus::Running))
    ));
    let done = cs
        .finish_activation(
            "t_abc123",
            "a1",
            ActivationStatus::Success,
            START_MS + 12,
            None,
            false,
        )
        .unwrap();
    assert_eq!(
        (done.status, done.end_ms, done.duration_ms),
        (ActivationStatus::Success, Some(START_MS + 12), Some(12))
    );
    let again = cs.finish_activation(
        "t_abc123",
        "a1",
        ActivationStatus::Error,
        START_MS + 20,
        Some("late"),
        false,
    );
    assert!(matches!(
        again,
        Err(CodeSousError::AlreadyTerminal {
            status: ActivationStatus::Success,
            ..
        })
    ));
    assert_eq!(
        cs.activation("t_abc123", "a1").unwrap().unwrap(),
        done,
        "the refused ending wrote nothing"
    );
    assert!(matches!(
        cs.finish_activation(
            "t_abc123",
            "nope",
            ActivationStatus::Error,
            START_MS,
            None,
            false
        ),
        Err(CodeSousError::NoSuchActivation { .. })
    ));
    // Racing endings: exactly one wins.
    cs.start_activation(&activation("a2")).unwrap();
    let outcomes: Vec<bool> = std::thread::scope(|sc| {
        let hs: Vec<_> = [
            ActivationStatus::Success,
            ActivationStatus::Error,
            ActivationStatus::Timeout,
            ActivationStatus::Cancelled,
        ]
        .into_iter()
        .map(|status| {
            let cs = &cs;
            sc.spawn(move || {
                cs.finish_activation("t_abc123", "a2", status, START_MS + 1, None, false)
                    .is_ok()
            })
        })
        .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert_eq!(outcomes.iter().filter(|won| **won).count(), 1);
    assert!(
        cs.activation("t_abc123", "a2")
            .unwrap()
            .unwrap()
            .status
            .is_terminal()
    );
    // Activations live 7 days, finished or not, then go with their logs.
    cs.append_log("t_abc123", "a1", "hello").unwrap();
    clock.set(START_MS + 7 * DAY - 1);
    assert!(cs.activation("t_abc123", "a1").unwrap().is_some());
    assert_eq!(cs.read_log("t_abc123", "a1").unwrap(), "hello");
    clock.set(START_MS + 7 * DAY);
    assert!(cs.activation("t_abc123", "a1").unwrap().is_none());
    assert_eq!(
        cs.read_log("t_abc123", "a1").unwrap(),
        "",
        "the log expires with its activation"
    );
    let swept = cs.sweep_expired().unwrap();
    assert_eq!(
        swept.removed, 4,
        "two activations, a log chunk and its index"
    );
    // A resent start of a1 (ended, expired, swept) does not start it
    // again: its record is past its retention.
    match cs.start_activation(&activation("a1")) {
        Err(CodeSousError::ActivationExpired {
            id,
            start_ms,
            expired_at,
        }) => {
            assert_eq!((id.as_str(), start_ms), ("a1", START_MS));
            assert_eq!(expired_at, START_MS + 7 * DAY);
        }
        other => panic!("a start past its retention: {other:?}"),
    }
    assert!(cs.activation("t_abc123", "a1").unwrap().is_none());
    // One started a millisecond before its retention ends is started.
    let late = ActivationRecord {
        start_ms: START_MS + 1,
        ..activation("a3")
    };
    cs.start_activation(&late).unwrap();
    assert!(cs.activation("t_abc123", "a3").unwrap().is_some());
}

fn logs_append_in_chunks<E: Engine>(engine: E) {
    let config = CodeSousConfig {
        log_chunk_bytes: 8,
        ..CodeSousConfig::default()
    };
    let (cs, _) = open(engine, config);
    assert!(matches!(
        cs.append_log("t_abc123", "none", "x"),
        Err(CodeSousError::NoSuchActivation { .. })
    ));
    cs.start_activation(&activation("a1")).unwrap();
    assert_eq!(
        cs.append_log("t_abc123", "a1", "line one\n").unwrap(),
        [0, 1]
    );
    assert_eq!(
        cs.append_log("t_abc123", "a1", "").unwrap(),
        Vec::<u64>::new()
    );
    // Eight bytes would end inside the three-byte "€": the cut comes before it.
    assert_eq!(cs.append_log("t_abc123", "a1", "ü-ok-€\n").unwrap(), [2, 3]);
    assert_eq!(cs.read_log("t_abc123", "a1").unwrap(), "line one\nü-ok-€\n");
    let chunk = |n| {
        cs.store()
            .get(&LogChunkKey {
                tenant: s("t_abc123"),
                activation_id: s("a1"),
                chunk: n,
            })
            .unwrap()
    };
    assert_eq!(chunk(0).as_deref(), Some("line one"));
    assert_eq!(chunk(1).as_deref(), Some("\n"));
    assert_eq!(
        chunk(2).as_deref(),
        Some("ü-ok-"),
        "cut before a character, not inside"
    );
    assert_eq!(chunk(3).as_deref(), Some("€\n"));
    assert_eq!(log_chunks(&cs, "a1"), [0, 1, 2, 3]);
}

/// The chunk numbers in activation `activation`'s log index (tenant
/// `t_abc123`), read from the store.
pub(crate) fn log_chunks<E: Engine>(cs: &CodeSous<E>, activation: &str) -> Vec<u64> {
    cs.store()
        .get(&LogIndexKey {
            tenant: s("t_abc123"),
            activation_id: s(activation),
        })
        .unwrap()
        .expect("the log has an index")
        .iter()
        .collect()
}

/// A schedule of `reconcile`'s `prod` alias every 30 seconds.
pub(crate) fn schedule(name: &str) -> ScheduleRecord {
    ScheduleRecord {
        name: s(name),
        every_seconds: 30,
        overlap_policy: s("skip"),
        target: FunctionRef {
            function: s("reconcile"),
            alias: s("prod"),
        },
        payload: json!({}),
        enabled: true,
        created_at_ms: START_MS,
    }
}

fn schedules_and_workers_change_with_their_index<E: Engine>(engine: E) {
    let (cs, _) = open(engine, CodeSousConfig::default());
    cs.create_schedule("t_abc123", "payments", &schedule("b"))
        .unwrap();
    cs.create_schedule("t_abc123", "payments", &schedule("a"))
        .unwrap();
    cs.create_schedule("t_abc123", "payments", &schedule("index"))
        .unwrap();
    assert!(matches!(
        cs.create_schedule("t_abc123", "payments", &schedule("a")),
        Err(CodeSousError::Exists {
            kind: "schedule",
            ..
        })
    ));
    assert_eq!(
        cs.schedules("t_abc123", "payments").unwrap(),
        ["a", "b", "index"]
    );
    assert!(cs.delete_schedule("t_abc123", "payments", "b").unwrap());
    assert!(!cs.delete_schedule("t_abc123", "payments", "b").unwrap());
    assert_eq!(
        cs.schedules("t_abc123", "payments").unwrap(),
        ["a", "index"]
    );
    assert!(cs.schedule("t_abc123", "payments", "b").unwrap().is_none());
    assert_eq!(
        cs.schedule("t_abc123", "payments", "index")
            .unwrap()
            .unwrap()
            .name,
        "index"
    );
    assert!(cs.schedules("t_abc123", "other").unwrap().is_empty());
    let worker = |name: &str| WorkerRecord {
        name: s(name),
        domain: s("payments"),
        tasklist: s("payments-activities"),
        worker_id: s("cs-payments-01"),
        activity_map: BTreeMap::new(),
        pollers: BTreeMap::new(),
        limits: BTreeMap::new(),
        enabled: true,
    };
    cs.create_worker("t_abc123", "payments", &worker("w1"))
        .unwrap();
    assert!(matches!(
        cs.create_worker("t_abc123", "payments", &worker("w1")),
        Err(CodeSousError::Exists { kind: "worker", .. })
    ));
    assert_eq!(cs.workers("t_abc123", "payments").unwrap(), ["w1"]);
    assert!(cs.delete_worker("t_abc123", "payments", "w1").unwrap());
    assert!(cs.workers("t_abc123", "payments").unwrap().is_empty());
    // The emptied index row is gone, not an empty set.
    assert!(
        cs.store()
            .get(&WorkerIndexKey {
                tenant: s("t_abc123"),
                namespace: s("payments")
            })
            .unwrap()
            .is_none()
    );
}

crate::on_each_engine!(
    publishes_number_versions_and_move_aliases,
    concurrent_publishes_get_distinct_gap_free_versions,
    drafts_publish_and_expire_after_a_day,
    an_activation_ends_once,
    logs_append_in_chunks,
    schedules_and_workers_change_with_their_index,
);

/// The handle's accessors and names, and the draft ids: `drf_` and a ULID
/// whose time is the store clock's reading and whose 80 random bits come
/// from the injected generator (the low 16 bits of its first draw, then
/// its second draw: SplitMix64 of seed 11, computed here by hand).
#[test]
fn accessors_names_and_draft_ids() {
    let options = CodeSous::<strata_engine::MemEngine>::store_options();
    assert_eq!(
        options.retry.max_attempts, 32,
        "publishes contend on version_seq"
    );
    assert_eq!(options.limits, strata_codec::Limits::FOUNDATIONDB);
    let config = CodeSousConfig {
        log_chunk_bytes: 8,
        ..CodeSousConfig::default()
    };
    let (cs, _) = open(strata_engine::MemEngine::open(specs()).unwrap(), config);
    assert_eq!(cs.config(), config);
    assert!(format!("{cs:?}").contains("log_chunk_bytes: 8"));
    assert_eq!(f().to_string(), "t_abc123/payments/reconcile");
    let b = bundle(1);
    assert_eq!(b.function_js(), b"export default () => 1;");
    assert_eq!(b.manifest_json(), br#"{"name":"reconcile","n":1}"#);
    cs.create_function(&f(), &NewFunction::js()).unwrap();
    let draft = cs.create_draft(&f(), &b).unwrap();
    let splitmix = |state: &mut u64| {
        *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = *state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    };
    let mut state = 11u64;
    let (hi, lo) = (splitmix(&mut state), splitmix(&mut state));
    let random = (u128::from(hi & 0xFFFF) << 64) | u128::from(lo);
    let want = strata_keys::Ulid::from_parts(START_MS, random).unwrap();
    assert_eq!(
        draft.draft_id,
        format!(
            "drf_{}",
            String::from_utf8(want.to_text().to_vec()).unwrap()
        )
    );
    // A worker reads back as written.
    let worker = WorkerRecord {
        name: s("w"),
        domain: s("d"),
        tasklist: s("t"),
        worker_id: s("i"),
        activity_map: BTreeMap::new(),
        pollers: BTreeMap::from([(s("activity"), 2)]),
        limits: BTreeMap::new(),
        enabled: false,
    };
    cs.create_worker("t_abc123", "payments", &worker).unwrap();
    assert_eq!(
        cs.worker("t_abc123", "payments", "w").unwrap(),
        Some(worker)
    );
}
