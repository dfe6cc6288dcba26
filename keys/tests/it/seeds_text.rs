//! Delimited text keys of `agent-memory-storage-architecture.md` and
//! `code-sous-kvrocks-storage.md`, byte for byte, and the delimiter rule.

use std::collections::BTreeSet;

use strata_keys::text::{Escaped, Spanning};
use strata_keys::ulid::UlidError;
use strata_keys::{Key, KeyError, TextProblem, Ulid, text_key};

text_key! {
    /// `evt:{ts:013}:{ulid}` with a typed ULID.
    pub struct EventKey { ts: u64, id: Ulid } -> Vec<u8> = ("evt:" {ts:013} ":" {id});
    /// The same layout with the id kept as text, as the document's example needs.
    pub struct EventKeyText { ts: u64, id: String } -> Vec<u8> = ("evt:" {ts:013} ":" {id});
    /// `toc:{node_id}:v{ver:06}`.
    pub struct TocKey { node_id: Spanning, ver: u32 } -> Vec<u8> = ("toc:" {node_id} ":v" {ver:06});
    /// `latest:{node_id}`: no literal follows, so the id may hold `:`.
    pub struct LatestKey { node_id: String } -> u64 = ("latest:" {node_id});
    /// `node:{node_id}:{grip_id}` as the document writes it.
    pub struct GripIndexKey { node_id: String, grip_id: String } -> () = ("node:" {node_id} ":" {grip_id});
    /// The same with escaped ids: unambiguous.
    pub struct GripIndexKeyEscaped { node_id: Escaped, grip_id: Escaped } -> () = ("node:" {node_id} ":" {grip_id});
    /// `outbox:{seq:020}`.
    pub struct OutboxKey { seq: u64 } -> Vec<u8> = ("outbox:" {seq:020});
    /// `grip:{timestamp_ms:013}:{random_suffix}`.
    pub struct GripId { timestamp_ms: u64, suffix: String } -> () = ("grip:" {timestamp_ms:013} ":" {suffix});
}

mod kvrocks {
    use strata_keys::text_key;

    text_key! {
        /// `cs:fn:{tenant}:{namespace}:{function}:meta`
        pub struct FnMeta { tenant: String, namespace: String, function: String } -> Vec<u8>
            = ("cs:fn:" {tenant} ":" {namespace} ":" {function} ":meta");
        /// `cs:fn:{tenant}:{namespace}:{function}:version_seq`
        pub struct FnVersionSeq { tenant: String, namespace: String, function: String } -> i64
            = ("cs:fn:" {tenant} ":" {namespace} ":" {function} ":version_seq");
        /// `cs:fn:{tenant}:{namespace}:{function}:draft:{draft_id}`
        pub struct FnDraft { tenant: String, namespace: String, function: String, draft_id: String } -> Vec<u8>
            = ("cs:fn:" {tenant} ":" {namespace} ":" {function} ":draft:" {draft_id});
        /// `cs:fn:{tenant}:{namespace}:{function}:ver:{version}:meta`
        pub struct VersionMeta { tenant: String, namespace: String, function: String, version: u64 } -> Vec<u8>
            = ("cs:fn:" {tenant} ":" {namespace} ":" {function} ":ver:" {version} ":meta");
        /// `cs:fn:{tenant}:{namespace}:{function}:ver:{version}:bundle`
        pub struct VersionBundle { tenant: String, namespace: String, function: String, version: u64 } -> Vec<u8>
            = ("cs:fn:" {tenant} ":" {namespace} ":" {function} ":ver:" {version} ":bundle");
        /// `cs:fn:{tenant}:{namespace}:{function}:alias:{alias}`
        pub struct Alias { tenant: String, namespace: String, function: String, alias: String } -> Vec<u8>
            = ("cs:fn:" {tenant} ":" {namespace} ":" {function} ":alias:" {alias});
        /// `cs:schedule:{tenant}:{namespace}:{schedule}:meta`
        pub struct ScheduleMeta { tenant: String, namespace: String, schedule: String } -> Vec<u8>
            = ("cs:schedule:" {tenant} ":" {namespace} ":" {schedule} ":meta");
        /// `cs:schedule:{tenant}:{namespace}:index`
        pub struct ScheduleIndex { tenant: String, namespace: String } -> Vec<u8>
            = ("cs:schedule:" {tenant} ":" {namespace} ":index");
        /// `cs:cadence:{tenant}:{namespace}:worker:{name}:meta`
        pub struct WorkerMeta { tenant: String, namespace: String, name: String } -> Vec<u8>
            = ("cs:cadence:" {tenant} ":" {namespace} ":worker:" {name} ":meta");
        /// `cs:cadence:{tenant}:{namespace}:workers:index`
        pub struct WorkersIndex { tenant: String, namespace: String } -> Vec<u8>
            = ("cs:cadence:" {tenant} ":" {namespace} ":workers:index");
        /// `cs:act:{tenant}:{activation_id}:meta`
        pub struct ActivationMeta { tenant: String, activation_id: String } -> Vec<u8>
            = ("cs:act:" {tenant} ":" {activation_id} ":meta");
        /// `cs:log:{tenant}:{activation_id}:{chunk}`
        pub struct LogChunk { tenant: String, activation_id: String, chunk: u32 } -> Vec<u8>
            = ("cs:log:" {tenant} ":" {activation_id} ":" {chunk});
        /// `cs:log:{tenant}:{activation_id}:chunks`
        pub struct LogChunks { tenant: String, activation_id: String } -> Vec<u8>
            = ("cs:log:" {tenant} ":" {activation_id} ":chunks");
    }
}

fn roundtrip<K: Key + PartialEq + std::fmt::Debug>(key: &K, text: &str) {
    let bytes = key
        .pack()
        .unwrap_or_else(|e| panic!("packing {key:?}: {e}"));
    assert_eq!(String::from_utf8_lossy(&bytes), text);
    assert_eq!(&K::unpack(text.as_bytes()).expect("unpack"), key);
}

#[test]
fn agent_memory_examples() {
    // The document's example id has 24 characters, not a ULID's 26: a text
    // layout reproduces it, the typed layout refuses it with a typed error.
    let seed = "evt:1706540400000:01HPXYZ123456789ABCDEFGH";
    roundtrip(
        &EventKeyText {
            ts: 1_706_540_400_000,
            id: "01HPXYZ123456789ABCDEFGH".into(),
        },
        seed,
    );
    match EventKey::unpack(seed.as_bytes()) {
        Err(KeyError::Truncated { needed: 2, .. }) => {}
        other => panic!("expected a truncated ULID, got {other:?}"),
    }
    match EventKey::unpack(b"evt:1706540400000:01HPXYZ123456789ABCDEFGHIJ") {
        Err(KeyError::TextField {
            field: "id",
            problem: TextProblem::Ulid(UlidError::Character { byte: b'I', .. }),
            ..
        }) => {}
        other => panic!("expected a bad ULID character, got {other:?}"),
    }
    let id = Ulid::from_parts(1_706_540_400_000, 42).unwrap();
    roundtrip(
        &EventKey {
            ts: 1_706_540_400_000,
            id,
        },
        "evt:1706540400000:01HNAVQZC0000000000000001A",
    );

    roundtrip(
        &TocKey {
            node_id: Spanning("day:2024-01-29".into()),
            ver: 3,
        },
        "toc:day:2024-01-29:v000003",
    );
    roundtrip(
        &LatestKey {
            node_id: "toc:day:2024-01-29".into(),
        },
        "latest:toc:day:2024-01-29",
    );
    roundtrip(&OutboxKey { seq: 42 }, "outbox:00000000000000000042");
    roundtrip(
        &GripId {
            timestamp_ms: 1_706_540_400_000,
            suffix: "k3j9".into(),
        },
        "grip:1706540400000:k3j9",
    );
}

#[test]
fn the_grip_index_example_is_ambiguous_and_is_refused() {
    // `node:toc:day:2024-01-29:grip:123` splits two ways; the document's
    // layout cannot say which. Plain text fields refuse the delimiter...
    let seed = GripIndexKey {
        node_id: "toc:day:2024-01-29".into(),
        grip_id: "grip:123".into(),
    };
    let mut buf = b"keep".to_vec();
    match seed.pack_into(&mut buf) {
        Err(KeyError::TextField {
            field: "node_id",
            problem: TextProblem::ContainsDelimiter { byte: b':' },
            ..
        }) => {}
        other => panic!("expected a delimiter error, got {other:?}"),
    }
    assert_eq!(buf, b"keep", "nothing is written on error");
    // ...and reading the seed's bytes fails instead of guessing a split.
    assert!(GripIndexKey::unpack(b"node:toc:day:2024-01-29:grip:123").is_err());
    // Escaped ids keep both values and one split.
    roundtrip(
        &GripIndexKeyEscaped {
            node_id: Escaped("toc:day:2024-01-29".into()),
            grip_id: Escaped("grip:123".into()),
        },
        "node:toc%3Aday%3A2024-01-29:grip%3A123",
    );
}

#[test]
fn time_range_of_the_event_example() {
    let at = |ts: u64| {
        EventKey {
            ts,
            id: Ulid::from_parts(ts, 7).unwrap(),
        }
        .pack()
        .unwrap()
    };
    let keys: BTreeSet<Vec<u8>> = [
        1_706_525_900_000,
        1_706_525_999_000,
        1_706_526_000_000,
        1_706_526_030_000,
        1_706_526_120_000,
        1_706_527_700_000,
        1_706_527_800_000,
        1_706_527_900_000,
    ]
    .into_iter()
    .map(at)
    .collect();
    let start = format!("evt:{:013}:", 1_706_526_000_000_u64).into_bytes();
    let end = format!("evt:{:013}:", 1_706_527_800_000_u64).into_bytes();
    let hits: Vec<u64> = keys
        .range(start..end)
        .map(|k| EventKey::unpack(k).unwrap().ts)
        .collect();
    assert_eq!(
        hits,
        [
            1_706_526_000_000,
            1_706_526_030_000,
            1_706_526_120_000,
            1_706_527_700_000
        ]
    );
}

#[test]
fn toc_versions_sort_by_number() {
    let key = |ver| {
        TocKey {
            node_id: Spanning("day:2024-01-29".into()),
            ver,
        }
        .pack()
        .unwrap()
    };
    let ordered: Vec<Vec<u8>> = [1, 2, 9, 10, 99, 100, 999_999]
        .into_iter()
        .map(key)
        .collect();
    let mut sorted = ordered.clone();
    sorted.sort();
    assert_eq!(sorted, ordered);
    // A Spanning field may not hold its terminator.
    let bad = TocKey {
        node_id: Spanning("day:v2".into()),
        ver: 1,
    };
    assert!(matches!(
        bad.pack(),
        Err(KeyError::TextField {
            problem: TextProblem::ContainsTerminator { terminator: ":v" },
            ..
        })
    ));
    // A field may end in the terminator's first byte: `a:` + `:v` is
    // still split right after `a:`.
    let edge = TocKey {
        node_id: Spanning("a:".into()),
        ver: 1,
    };
    let bytes = edge.pack().unwrap();
    assert_eq!(bytes, b"toc:a::v000001");
    assert_eq!(TocKey::unpack(&bytes).unwrap(), edge);
    // Too many digits for the padding is refused, not widened.
    assert!(matches!(
        TocKey {
            node_id: Spanning("n".into()),
            ver: 1_000_000
        }
        .pack(),
        Err(KeyError::TextField {
            problem: TextProblem::TooWide {
                digits: 7,
                width: 6
            },
            ..
        })
    ));
}

#[test]
fn kvrocks_keys_byte_for_byte() {
    use kvrocks::*;
    let (t, ns, f) = ("t_abc123", "payments", "reconcile");
    let s = |x: &str| x.to_owned();
    roundtrip(
        &FnMeta {
            tenant: s(t),
            namespace: s(ns),
            function: s(f),
        },
        "cs:fn:t_abc123:payments:reconcile:meta",
    );
    roundtrip(
        &FnVersionSeq {
            tenant: s(t),
            namespace: s(ns),
            function: s(f),
        },
        "cs:fn:t_abc123:payments:reconcile:version_seq",
    );
    roundtrip(
        &FnDraft {
            tenant: s(t),
            namespace: s(ns),
            function: s(f),
            draft_id: s("drf_01H"),
        },
        "cs:fn:t_abc123:payments:reconcile:draft:drf_01H",
    );
    roundtrip(
        &VersionMeta {
            tenant: s(t),
            namespace: s(ns),
            function: s(f),
            version: 17,
        },
        "cs:fn:t_abc123:payments:reconcile:ver:17:meta",
    );
    roundtrip(
        &VersionBundle {
            tenant: s(t),
            namespace: s(ns),
            function: s(f),
            version: 17,
        },
        "cs:fn:t_abc123:payments:reconcile:ver:17:bundle",
    );
    roundtrip(
        &Alias {
            tenant: s(t),
            namespace: s(ns),
            function: s(f),
            alias: s("prod"),
        },
        "cs:fn:t_abc123:payments:reconcile:alias:prod",
    );
    roundtrip(
        &ScheduleMeta {
            tenant: s(t),
            namespace: s(ns),
            schedule: s("reconcile_30s"),
        },
        "cs:schedule:t_abc123:payments:reconcile_30s:meta",
    );
    roundtrip(
        &ScheduleIndex {
            tenant: s(t),
            namespace: s(ns),
        },
        "cs:schedule:t_abc123:payments:index",
    );
    roundtrip(
        &WorkerMeta {
            tenant: s(t),
            namespace: s(ns),
            name: s("payments-activities"),
        },
        "cs:cadence:t_abc123:payments:worker:payments-activities:meta",
    );
    roundtrip(
        &WorkersIndex {
            tenant: s(t),
            namespace: s(ns),
        },
        "cs:cadence:t_abc123:payments:workers:index",
    );
    roundtrip(
        &ActivationMeta {
            tenant: s(t),
            activation_id: s("uuid"),
        },
        "cs:act:t_abc123:uuid:meta",
    );
    roundtrip(
        &LogChunk {
            tenant: s(t),
            activation_id: s("uuid"),
            chunk: 3,
        },
        "cs:log:t_abc123:uuid:3",
    );
    roundtrip(
        &LogChunks {
            tenant: s(t),
            activation_id: s("uuid"),
        },
        "cs:log:t_abc123:uuid:chunks",
    );
}

/// Under one tenant every kvrocks key type reads only its own keys: the
/// `:meta` of a version is not a function `reconcile:ver:17`'s `:meta`.
#[test]
fn no_kvrocks_key_decodes_as_another_type() {
    use kvrocks::*;
    type Decoder = fn(&[u8]) -> bool;
    fn ok<K: Key>(b: &[u8]) -> bool {
        K::unpack(b).is_ok()
    }
    let cases: [(&str, Decoder); 13] = [
        ("cs:fn:t:n:f:meta", ok::<FnMeta>),
        ("cs:fn:t:n:f:version_seq", ok::<FnVersionSeq>),
        ("cs:fn:t:n:f:draft:d", ok::<FnDraft>),
        ("cs:fn:t:n:f:ver:17:meta", ok::<VersionMeta>),
        ("cs:fn:t:n:f:ver:17:bundle", ok::<VersionBundle>),
        ("cs:fn:t:n:f:alias:prod", ok::<Alias>),
        ("cs:schedule:t:n:s:meta", ok::<ScheduleMeta>),
        ("cs:schedule:t:n:index", ok::<ScheduleIndex>),
        ("cs:cadence:t:n:worker:w:meta", ok::<WorkerMeta>),
        ("cs:cadence:t:n:workers:index", ok::<WorkersIndex>),
        ("cs:act:t:a:meta", ok::<ActivationMeta>),
        ("cs:log:t:a:3", ok::<LogChunk>),
        ("cs:log:t:a:chunks", ok::<LogChunks>),
    ];
    for (i, (bytes, _)) in cases.iter().enumerate() {
        for (j, (_, decode)) in cases.iter().enumerate() {
            assert_eq!(decode(bytes.as_bytes()), i == j, "decoder {j} on {bytes}");
        }
    }
}
