//! Actor KV: every logical key of the document's tree, byte for byte
//! (the expected bytes written out by hand from the document and the
//! tuple encoding: `0x15 n` a one-byte integer, `0x02 ... 0x00` a string,
//! `0x05 ... 0x00` a nested tuple), both layouts, and the parser.

use strata_schemas::actor_kv::{
    ActorKvError, KeyProblem, Layout, LogicalKey, Segment, SqliteFile, WorkflowField, namespace,
    prefix_range,
};

fn cases() -> Vec<(LogicalKey, Vec<u8>)> {
    vec![
        (LogicalKey::PersistData, vec![1]),
        (
            LogicalKey::Conn {
                conn_id: "c-1".into(),
            },
            vec![2, b'c', b'-', b'1'],
        ),
        (LogicalKey::InspectorToken, vec![3]),
        (LogicalKey::UserKv { key: vec![0xFF, 0] }, vec![4, 0xFF, 0]),
        (
            LogicalKey::QueueMessage { message_id: 258 },
            vec![5, 0, 0, 0, 0, 0, 0, 1, 2],
        ),
        (LogicalKey::QueueMetadata, vec![6]),
        (
            LogicalKey::WorkflowName { name_index: 7 },
            vec![7, 0x15, 1, 0x15, 7],
        ),
        (
            LogicalKey::WorkflowHistory {
                location: vec![
                    Segment::Name(5),
                    Segment::Loop {
                        loop_index: 3,
                        iteration: 4,
                    },
                ],
            },
            vec![7, 0x15, 2, 0x15, 5, 0x05, 0x15, 3, 0x15, 4, 0x00],
        ),
        (
            LogicalKey::WorkflowHistory { location: vec![] },
            vec![7, 0x15, 2],
        ),
        (
            LogicalKey::WorkflowField(WorkflowField::State),
            vec![7, 0x15, 3, 0x15, 1],
        ),
        (
            LogicalKey::WorkflowField(WorkflowField::Input),
            vec![7, 0x15, 3, 0x15, 5],
        ),
        (
            LogicalKey::WorkflowEntryMetadata {
                entry_id: "e1".into(),
            },
            vec![7, 0x15, 4, 0x02, b'e', b'1', 0x00],
        ),
        (
            // 1,700,000,000 = 0x6553F100: four bytes, code 0x18.
            LogicalKey::TraceChunk {
                bucket_start_sec: 1_700_000_000,
                chunk_id: 3,
            },
            vec![8, 0x15, 1, 0x18, 0x65, 0x53, 0xF1, 0x00, 0x15, 3],
        ),
        (LogicalKey::SqliteMetadata(SqliteFile::Wal), vec![9, 0, 2]),
        (
            LogicalKey::SqliteChunk {
                file: SqliteFile::Main,
                chunk_index: 258,
            },
            vec![9, 1, 0, 0, 0, 1, 2],
        ),
    ]
}

#[test]
fn every_logical_key_has_the_documents_bytes_and_parses_back() {
    for (key, bytes) in cases() {
        assert_eq!(key.encode(Layout::Unversioned), bytes, "{key:?}");
        assert_eq!(
            LogicalKey::parse(&bytes, Layout::Unversioned).unwrap(),
            key.clone()
        );
        // The versioned layout: a version byte after the namespace byte.
        let mut versioned = bytes.clone();
        versioned.insert(1, 1);
        assert_eq!(key.encode(Layout::Versioned(1)), versioned, "{key:?}");
        assert_eq!(
            LogicalKey::parse(&versioned, Layout::Versioned(1)).unwrap(),
            key.clone()
        );
    }
    assert_eq!(namespace(5, Layout::Versioned(1)), [5, 1]);
}

#[test]
fn bytes_of_no_key_are_typed_errors() {
    let problem = |bytes: &[u8], layout| match LogicalKey::parse(bytes, layout) {
        Err(ActorKvError::NotAKey { problem }) => problem,
        other => panic!("{bytes:?}: {other:?}"),
    };
    // Each input with where it stops fitting, read off the key tree:
    // namespaces 1 to 9, single-key namespaces 1, 3 and 6, workflow field
    // codes 1 to 5, SQLite file tags 0 to 3.
    let cases: [(&[u8], KeyProblem); 13] = [
        (&[], KeyProblem::Empty),
        (&[0], KeyProblem::UnknownNamespace(0)),
        (&[10], KeyProblem::UnknownNamespace(10)),
        (&[1, 0], KeyProblem::TrailingBytes { namespace: 1 }),
        (&[5, 1, 2], KeyProblem::QueueIdNotEightBytes),
        (&[2, 0xFF], KeyProblem::ConnIdNotUtf8),
        (&[7, 0x15, 3, 0x15, 9], KeyProblem::WorkflowShape),
        (&[7, 0x15, 9], KeyProblem::WorkflowShape),
        (&[7, 0x02, b'x', 0x00], KeyProblem::WorkflowShape),
        (&[8, 0x15, 2, 0x15, 1, 0x15, 1], KeyProblem::TracesShape),
        (&[9, 0, 4], KeyProblem::UnknownSqliteTag(4)),
        (&[9, 1, 0, 1], KeyProblem::SqliteShape),
        (&[9, 2, 0], KeyProblem::SqliteShape),
    ];
    for (bytes, expected) in cases {
        assert_eq!(problem(bytes, Layout::Unversioned), expected, "{bytes:?}");
    }
    assert_eq!(
        problem(&[7, 0x05], Layout::Unversioned),
        KeyProblem::NotATuple
    );
    // A workflow key of 50,000 tuples in one another (damaged): refused as
    // no tuple, not unpacked into a stack overflow.
    let deep = [vec![7u8], vec![0x05; 50_000], vec![0x00; 50_000]].concat();
    assert_eq!(problem(&deep, Layout::Unversioned), KeyProblem::NotATuple);
    // A trace chunk's numbers are unsigned: (1, -1, 0) is refused.
    assert_eq!(
        problem(&[8, 0x15, 1, 0x13, 0xFE, 0x14], Layout::Unversioned),
        KeyProblem::NegativeTraceChunk
    );
    // A versioned key read as another version, or unversioned bytes read
    // as versioned, is refused.
    assert_eq!(
        problem(&[5, 2, 0, 0, 0, 0, 0, 0, 0, 1], Layout::Versioned(1)),
        KeyProblem::NoVersionByte {
            version: 1,
            namespace: 5
        }
    );
    assert_eq!(
        problem(&[1], Layout::Versioned(1)),
        KeyProblem::NoVersionByte {
            version: 1,
            namespace: 1
        }
    );
}

#[test]
fn prefix_ranges_include_keys_whose_next_byte_is_ff() {
    let kv = prefix_range(&namespace(4, Layout::Unversioned));
    let ff = LogicalKey::UserKv {
        key: vec![0xFF, 0xFF],
    }
    .encode(Layout::Unversioned);
    assert!(
        kv.contains(&ff),
        "the document's prefix ++ 0xFF misses this key"
    );
    assert!(!kv.contains(&[5]));
    assert!(!kv.contains(&[3, 0xFF]));
}
