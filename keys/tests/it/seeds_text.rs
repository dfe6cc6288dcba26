//! Delimited text keys of `agent-memory-storage-architecture.md` and
//! `code-sous-kvrocks-storage.md`, byte for byte, and the delimiter rule.

use std::collections::BTreeSet;

use strata_keys::text::{Escaped, Spanning};
use strata_keys::ulid::UlidError;
use strata_keys::{Key, KeyError, TextProblem, Ulid, text_key};

/// `evt:{ts:013}:{ulid}` with a typed ULID.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct EventKey {
    pub ts: u64,
    pub id: Ulid,
}
/// The same layout with the id kept as text, as the document's example needs.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct EventKeyText {
    pub ts: u64,
    pub id: String,
}
/// `toc:{node_id}:v{ver:06}`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TocKey {
    pub node_id: Spanning,
    pub ver: u32,
}
/// `latest:{node_id}`: no literal follows, so the id may hold `:`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct LatestKey {
    pub node_id: String,
}
/// `node:{node_id}:{grip_id}` as the document writes it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct GripIndexKey {
    pub node_id: String,
    pub grip_id: String,
}
/// The same with escaped ids: unambiguous.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct GripIndexKeyEscaped {
    pub node_id: Escaped,
    pub grip_id: Escaped,
}
/// `outbox:{seq:020}`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct OutboxKey {
    pub seq: u64,
}
/// `grip:{timestamp_ms:013}:{random_suffix}`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct GripId {
    pub timestamp_ms: u64,
    pub suffix: String,
}
text_key! {
    EventKey -> Vec<u8> = ("evt:", {ts:013}, ":", {id});
    EventKeyText -> Vec<u8> = ("evt:", {ts:013}, ":", {id});
    TocKey -> Vec<u8> = ("toc:", {node_id}, ":v", {ver:06});
    LatestKey -> u64 = ("latest:", {node_id});
    GripIndexKey -> () = ("node:", {node_id}, ":", {grip_id});
    GripIndexKeyEscaped -> () = ("node:", {node_id}, ":", {grip_id});
    OutboxKey -> Vec<u8> = ("outbox:", {seq:020});
    GripId -> () = ("grip:", {timestamp_ms:013}, ":", {suffix});
}

mod kvrocks {
    use strata_keys::text_key;

    /// `cs:fn:{tenant}:{namespace}:{function}:meta`
    #[derive(Debug, Clone, PartialEq, Eq, Hash)]
    pub struct FnMeta {
        pub tenant: String,
        pub namespace: String,
        pub function: String,
    }
    /// `cs:fn:{tenant}:{namespace}:{function}:version_seq`
    #[derive(Debug, Clone, PartialEq, Eq, Hash)]
    pub struct FnVersionSeq {
        pub tenant: String,
        pub namespace: String,
        pub function: String,
    }
    /// `cs:fn:{tenant}:{namespace}:{function}:draft:{draft_id}`
    #[derive(Debug, Clone, PartialEq, Eq, Hash)]
    pub struct FnDraft {
        pub tenant: String,
        pub namespace: String,
        pub function: String,
        pub draft_id: String,
    }
    /// `cs:fn:{tenant}:{namespace}:{function}:ver:{version}:meta`
    #[derive(Debug, Clone, PartialEq, Eq, Hash)]
    pub struct VersionMeta {
        pub tenant: String,
        pub namespace: String,
        pub function: String,
        pub version: u64,
    }
    /// `cs:fn:{tenant}:{namespace}:{function}:ver:{version}:bundle`
    #[derive(Debug, Clone, PartialEq, Eq, Hash)]
    pub struct VersionBundle {
        pub tenant: String,
        pub namespace: String,
        pub function: String,
        pub version: u64,
    }
    /// `cs:fn:{tenant}:{namespace}:{function}:alias:{alias}`
    #[derive(Debug, Clone, PartialEq, Eq, Hash)]
    pub struct Alias {
        pub tenant: String,
        pub namespace: String,
        pub function: String,
        pub alias: String,
    }
    /// `cs:schedule:{tenant}:{namespace}:{schedule}:meta`
    #[derive(Debug, Clone, PartialEq, Eq, Hash)]
    pub struct ScheduleMeta {
        pub tenant: String,
        pub namespace: String,
        pub schedule: String,
    }
    /// `cs:schedule:{tenant}:{namespace}:index`
    #[derive(Debug, Clone, PartialEq, Eq, Hash)]
    pub struct ScheduleIndex {
        pub tenant: String,
        pub namespace: String,
    }
    /// `cs:cadence:{tenant}:{namespace}:worker:{name}:meta`
    #[derive(Debug, Clone, PartialEq, Eq, Hash)]
    pub struct WorkerMeta {
        pub tenant: String,
        pub namespace: String,
        pub name: String,
    }
    /// `cs:cadence:{tenant}:{namespace}:workers:index`
    #[derive(Debug, Clone, PartialEq, Eq, Hash)]
    pub struct WorkersIndex {
        pub tenant: String,
        pub namespace: String,
    }
    /// `cs:act:{tenant}:{activation_id}:meta`
    #[derive(Debug, Clone, PartialEq, Eq, Hash)]
    pub struct ActivationMeta {
        pub tenant: String,
        pub activation_id: String,
    }
    /// `cs:log:{tenant}:{activation_id}:{chunk}`
    #[derive(Debug, Clone, PartialEq, Eq, Hash)]
    pub struct LogChunk {
        pub tenant: String,
        pub activation_id: String,
        pub chunk: u32,
    }
    /// `cs:log:{tenant}:{activation_id}:chunks`
    #[derive(Debug, Clone, PartialEq, Eq, Hash)]
    pub struct LogChunks {
        pub tenant: String,
        pub activation_id: String,
    }
    text_key! {
        FnMeta -> Vec<u8> = ("cs:fn:", {tenant}, ":", {namespace}, ":", {function}, ":meta");
        FnVersionSeq -> i64 = ("cs:fn:", {tenant}, ":", {namespace}, ":", {function}, ":version_seq");
        FnDraft -> Vec<u8> = ("cs:fn:", {tenant}, ":", {namespace}, ":", {function}, ":draft:", {draft_id});
        VersionMeta -> Vec<u8> = ("cs:fn:", {tenant}, ":", {namespace}, ":", {function}, ":ver:", {version}, ":meta");
        VersionBundle -> Vec<u8> = ("cs:fn:", {tenant}, ":", {namespace}, ":", {function}, ":ver:", {version}, ":bundle");
        Alias -> Vec<u8> = ("cs:fn:", {tenant}, ":", {namespace}, ":", {function}, ":alias:", {alias});
        ScheduleMeta -> Vec<u8> = ("cs:schedule:", {tenant}, ":", {namespace}, ":", {schedule}, ":meta");
        ScheduleIndex -> Vec<u8> = ("cs:schedule:", {tenant}, ":", {namespace}, ":index");
        WorkerMeta -> Vec<u8> = ("cs:cadence:", {tenant}, ":", {namespace}, ":worker:", {name}, ":meta");
        WorkersIndex -> Vec<u8> = ("cs:cadence:", {tenant}, ":", {namespace}, ":workers:index");
        ActivationMeta -> Vec<u8> = ("cs:act:", {tenant}, ":", {activation_id}, ":meta");
        LogChunk -> Vec<u8> = ("cs:log:", {tenant}, ":", {activation_id}, ":", {chunk});
        LogChunks -> Vec<u8> = ("cs:log:", {tenant}, ":", {activation_id}, ":chunks");
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
