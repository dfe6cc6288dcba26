//! The actor-KV logical key tree of `actor-kv-structure.md`, reproduced
//! byte for byte: first as the document gives it (`[5] ++ u64_be(id)`), then
//! in the later versioned form where a version byte follows the namespace
//! byte (`[5, 1, 2] ++ u64_be(id)`), and the physical storage envelope.

use strata_keys::tuple::{self, Element, OwnedElement};
use strata_keys::{Key, KeyError, Subspace, raw_key, tuple_key};

/// The document's tree, one type per node.
mod v0 {
    use super::{OwnedElement, raw_key, tuple_key};

    /// `[1]` persisted actor data.
    #[derive(Debug, Clone, PartialEq, Eq, Hash)]
    pub struct PersistData {}
    /// `[2] ++ utf8(conn_id)`.
    #[derive(Debug, Clone, PartialEq, Eq, Hash)]
    pub struct Connection {
        pub conn_id: String,
    }
    /// `[3]` inspector token.
    #[derive(Debug, Clone, PartialEq, Eq, Hash)]
    pub struct InspectorToken {}
    /// `[4] ++ user_key`.
    #[derive(Debug, Clone, PartialEq, Eq, Hash)]
    pub struct UserKv {
        pub user_key: Vec<u8>,
    }
    /// `[5] ++ u64_be(message_id)`.
    #[derive(Debug, Clone, PartialEq, Eq, Hash)]
    pub struct QueueMessage {
        pub message_id: u64,
    }
    /// `[6]` queue metadata.
    #[derive(Debug, Clone, PartialEq, Eq, Hash)]
    pub struct QueueMetadata {}
    /// `[9, 0, file_tag]` SQLite file metadata.
    #[derive(Debug, Clone, PartialEq, Eq, Hash)]
    pub struct SqliteMeta {
        pub file_tag: u8,
    }
    /// `[9, 1, file_tag, u32_be(chunk_index)]` SQLite page chunk.
    #[derive(Debug, Clone, PartialEq, Eq, Hash)]
    pub struct SqliteChunk {
        pub file_tag: u8,
        pub chunk_index: u32,
    }
    raw_key! {
        PersistData -> Vec<u8> = ([1]);
        Connection -> Vec<u8> = ([2], ..{conn_id});
        InspectorToken -> String = ([3]);
        UserKv -> Vec<u8> = ([4], ..{user_key});
        QueueMessage -> Vec<u8> = ([5], {message_id});
        QueueMetadata -> Vec<u8> = ([6]);
        SqliteMeta -> Vec<u8> = ([9, 0], {file_tag});
        SqliteChunk -> Vec<u8> = ([9, 1], {file_tag}, {chunk_index});
    }

    /// `[7] ++ pack(1, name_index)`: workflow name registry.
    #[derive(Debug, Clone, PartialEq)]
    pub struct WorkflowName {
        pub name_index: u64,
    }
    /// `[7] ++ pack(2, ...location_segments)`: workflow history.
    #[derive(Debug, Clone, PartialEq)]
    pub struct WorkflowHistory {
        pub location: Vec<OwnedElement>,
    }
    /// `[7] ++ pack(3, field)`: workflow metadata field (1 state .. 5 input).
    #[derive(Debug, Clone, PartialEq)]
    pub struct WorkflowField {
        pub field: u16,
    }
    /// `[7] ++ pack(4, entry_id)`: workflow entry metadata.
    #[derive(Debug, Clone, PartialEq)]
    pub struct WorkflowEntry {
        pub entry_id: String,
    }
    /// `[8] ++ pack(1, bucket_start_sec, chunk_id)`: a chunk of trace data.
    #[derive(Debug, Clone, PartialEq)]
    pub struct TraceChunk {
        pub bucket_start_sec: u64,
        pub chunk_id: u64,
    }
    tuple_key! {
        WorkflowName -> String = ([7], 1, {name_index});
        WorkflowHistory -> Vec<u8> = ([7], 2, ..{location});
        WorkflowField -> Vec<u8> = ([7], 3, {field});
        WorkflowEntry -> Vec<u8> = ([7], 4, {entry_id});
        TraceChunk -> Vec<u8> = ([8], 1, {bucket_start_sec}, {chunk_id});
    }

    /// Workflow field numbers (the tuple layer packs no `u8`, hence `u16`).
    pub const STATE: u16 = 1;
    pub const OUTPUT: u16 = 2;
    pub const ERROR: u16 = 3;
    pub const VERSION: u16 = 4;
    pub const INPUT: u16 = 5;

    /// SQLite file tags.
    pub const MAIN: u8 = 0;
    pub const JOURNAL: u8 = 1;
    pub const WAL: u8 = 2;
    pub const SHM: u8 = 3;
}

/// The versioned form: a version byte (1) after each namespace byte; queue
/// messages at `[5, 1, 2]` as the runtime later wrote them.
mod v1 {
    use super::raw_key;

    /// `[1, 1]`.
    #[derive(Debug, Clone, PartialEq, Eq, Hash)]
    pub struct PersistData {}
    /// `[4, 1] ++ user_key`.
    #[derive(Debug, Clone, PartialEq, Eq, Hash)]
    pub struct UserKv {
        pub user_key: Vec<u8>,
    }
    /// `[5, 1, 1]` queue metadata, beside the messages.
    #[derive(Debug, Clone, PartialEq, Eq, Hash)]
    pub struct QueueMetadata {}
    /// `[5, 1, 2] ++ u64_be(message_id)`.
    #[derive(Debug, Clone, PartialEq, Eq, Hash)]
    pub struct QueueMessage {
        pub message_id: u64,
    }
    /// `[9, 1, 1, file_tag, u32_be(chunk_index)]`.
    #[derive(Debug, Clone, PartialEq, Eq, Hash)]
    pub struct SqliteChunk {
        pub file_tag: u8,
        pub chunk_index: u32,
    }
    raw_key! {
        PersistData -> Vec<u8> = ([1, 1]);
        UserKv -> Vec<u8> = ([4, 1], ..{user_key});
        QueueMetadata -> Vec<u8> = ([5, 1, 1]);
        QueueMessage -> Vec<u8> = ([5, 1, 2], {message_id});
        SqliteChunk -> Vec<u8> = ([9, 1, 1], {file_tag}, {chunk_index});
    }
}

fn pack<K: Key>(k: &K) -> Vec<u8> {
    k.pack().expect("raw and tuple keys always pack")
}

#[test]
fn document_layout_byte_for_byte() {
    use v0::*;
    assert_eq!(pack(&PersistData {}), [1]);
    assert_eq!(
        pack(&Connection {
            conn_id: "c-7".into()
        }),
        b"\x02c-7"
    );
    assert_eq!(pack(&InspectorToken {}), [3]);
    assert_eq!(
        pack(&UserKv {
            user_key: b"k\xff".to_vec()
        }),
        b"\x04k\xff"
    );
    assert_eq!(
        pack(&QueueMessage {
            message_id: 0x0102_0304_0506_0708
        }),
        [5, 1, 2, 3, 4, 5, 6, 7, 8]
    );
    assert_eq!(pack(&QueueMetadata {}), [6]);
    assert_eq!(pack(&SqliteMeta { file_tag: WAL }), [9, 0, 2]);
    assert_eq!(
        pack(&SqliteChunk {
            file_tag: JOURNAL,
            chunk_index: 258
        }),
        [9, 1, 1, 0, 0, 1, 2]
    );
    // Workflow and traces: the namespace byte, then a packed tuple.
    assert_eq!(pack(&WorkflowName { name_index: 3 }), [7, 0x15, 1, 0x15, 3]);
    assert_eq!(pack(&WorkflowField { field: STATE }), [7, 0x15, 3, 0x15, 1]);
    assert_eq!(pack(&WorkflowField { field: INPUT }), [7, 0x15, 3, 0x15, 5]);
    assert_eq!(
        pack(&WorkflowEntry {
            entry_id: "e1".into()
        }),
        [7, 0x15, 4, 0x02, b'e', b'1', 0]
    );
    let history = WorkflowHistory {
        location: vec![
            Element::Int(0).into(),
            Element::String("loop".into()).into(),
            Element::Int(2).into(),
        ],
    };
    let mut want = vec![7];
    want.extend(tuple::pack(&(2, 0, "loop", 2)));
    assert_eq!(pack(&history), want);
    assert_eq!(WorkflowHistory::unpack(&want).unwrap(), history);
    assert_eq!(
        pack(&TraceChunk {
            bucket_start_sec: 1_706_540_400,
            chunk_id: 0
        }),
        [8, 0x15, 1, 0x18, 0x65, 0xb7, 0xbd, 0x70, 0x14]
    );
    let _ = (MAIN, SHM, OUTPUT, ERROR, VERSION);
}

#[test]
fn versioned_layout_byte_for_byte() {
    assert_eq!(pack(&v1::PersistData {}), [1, 1]);
    assert_eq!(
        pack(&v1::UserKv {
            user_key: b"a".to_vec()
        }),
        [4, 1, b'a']
    );
    assert_eq!(pack(&v1::QueueMetadata {}), [5, 1, 1]);
    assert_eq!(
        pack(&v1::QueueMessage { message_id: 42 }),
        [5, 1, 2, 0, 0, 0, 0, 0, 0, 0, 42]
    );
    assert_eq!(
        pack(&v1::SqliteChunk {
            file_tag: v0::MAIN,
            chunk_index: 1
        }),
        [9, 1, 1, 0, 0, 0, 0, 1]
    );
    // A v0 queue message is not a v1 one and vice versa.
    let old = pack(&v0::QueueMessage { message_id: 42 });
    assert!(matches!(
        v1::QueueMessage::unpack(&old),
        Err(KeyError::Discriminant { .. } | KeyError::Truncated { .. })
    ));
    let new = pack(&v1::QueueMessage { message_id: 42 });
    assert!(matches!(
        v0::QueueMessage::unpack(&new),
        Err(KeyError::TrailingBytes { count: 2, .. })
    ));
}

/// Every key type of the tree decodes its own bytes and refuses every other
/// type's bytes with an error: the decode matrix is the identity.
#[test]
fn no_key_decodes_as_another_type() {
    use v0::*;
    type Decoder = fn(&[u8]) -> bool;
    fn ok<K: Key>(b: &[u8]) -> bool {
        K::unpack(b).is_ok()
    }
    let cases: Vec<(&str, Vec<u8>, Decoder)> = vec![
        ("persist", pack(&PersistData {}), ok::<PersistData>),
        (
            "conn",
            pack(&Connection {
                conn_id: "c".into(),
            }),
            ok::<Connection>,
        ),
        ("token", pack(&InspectorToken {}), ok::<InspectorToken>),
        ("user", pack(&UserKv { user_key: vec![1] }), ok::<UserKv>),
        (
            "queue",
            pack(&QueueMessage { message_id: 1 }),
            ok::<QueueMessage>,
        ),
        ("queue-meta", pack(&QueueMetadata {}), ok::<QueueMetadata>),
        (
            "sqlite-meta",
            pack(&SqliteMeta { file_tag: 1 }),
            ok::<SqliteMeta>,
        ),
        (
            "sqlite-chunk",
            pack(&SqliteChunk {
                file_tag: 1,
                chunk_index: 1,
            }),
            ok::<SqliteChunk>,
        ),
        (
            "wf-name",
            pack(&WorkflowName { name_index: 1 }),
            ok::<WorkflowName>,
        ),
        (
            "wf-history",
            pack(&WorkflowHistory {
                location: vec![Element::Int(1).into()],
            }),
            ok::<WorkflowHistory>,
        ),
        (
            "wf-field",
            pack(&WorkflowField { field: VERSION }),
            ok::<WorkflowField>,
        ),
        (
            "wf-entry",
            pack(&WorkflowEntry {
                entry_id: "x".into(),
            }),
            ok::<WorkflowEntry>,
        ),
        (
            "trace",
            pack(&TraceChunk {
                bucket_start_sec: 1,
                chunk_id: 1,
            }),
            ok::<TraceChunk>,
        ),
    ];
    for (name, bytes, _) in &cases {
        for (other, _, decode) in &cases {
            assert_eq!(
                decode(bytes),
                name == other,
                "{other} decoding the bytes of {name}"
            );
        }
    }
}

// The physical envelope: every logical key is wrapped as a tuple element
// under the actor's subspace. Constant values stand in for the engine's.
const RIVET: i64 = 1;
const PEGBOARD: i64 = 2;
const ACTOR_KV: i64 = 3;
const METADATA: i64 = 1;
const DATA: i64 = 2;

/// `(KeyWrapper(logical_key), METADATA)`.
#[derive(Debug, Clone, PartialEq)]
pub struct EnvelopeMeta {
    pub key: Vec<u8>,
}
/// `(KeyWrapper(logical_key), DATA, chunk_index)`: 10,000-byte chunks.
#[derive(Debug, Clone, PartialEq)]
pub struct EnvelopeChunk {
    pub key: Vec<u8>,
    pub chunk: u64,
}
tuple_key! {
    EnvelopeMeta -> Vec<u8> = ({key}, METADATA);
    EnvelopeChunk -> Vec<u8> = ({key}, DATA, {chunk});
}

#[test]
fn physical_envelope_keeps_each_logical_key_apart() {
    let actor = Subspace::new(&(RIVET, PEGBOARD, ACTOR_KV, 99_u64));
    // Logical keys where one is a prefix of the other, and one ends in 0xFF.
    let short = pack(&v0::UserKv {
        user_key: b"a".to_vec(),
    });
    let long = pack(&v0::UserKv {
        user_key: b"a\x00\xff".to_vec(),
    });
    let mut rows = Vec::new();
    for logical in [&short, &long] {
        rows.push(
            actor
                .pack_key(&EnvelopeMeta {
                    key: logical.clone(),
                })
                .unwrap(),
        );
        for chunk in 0..3 {
            rows.push(
                actor
                    .pack_key(&EnvelopeChunk {
                        key: logical.clone(),
                        chunk,
                    })
                    .unwrap(),
            );
        }
    }
    let mut sorted = rows.clone();
    sorted.sort();
    assert_eq!(
        sorted, rows,
        "metadata first, then chunks in order, key by key"
    );

    // The tuple range of one wrapped key holds its rows and no other key's.
    let of_short = actor.subspace(&(short.clone(),));
    let in_range: Vec<_> = rows
        .iter()
        .filter(|r| of_short.tuple_range().contains(r))
        .collect();
    assert_eq!(in_range.len(), 4);
    // The byte-prefix range would also take the rows of `long`: its wrapped
    // form escapes the NUL as `00 FF` and so starts with the same bytes.
    let by_bytes = rows.iter().filter(|r| of_short.range().contains(r)).count();
    assert_eq!(by_bytes, 8);
    for row in in_range {
        let meta = actor.unpack_key::<EnvelopeMeta>(row);
        let chunk = actor.unpack_key::<EnvelopeChunk>(row);
        assert!(
            meta.is_ok() != chunk.is_ok(),
            "exactly one type reads each row"
        );
        let key = meta
            .map(|m| m.key)
            .or_else(|_| chunk.map(|c| c.key))
            .unwrap();
        assert_eq!(key, short);
    }
}
