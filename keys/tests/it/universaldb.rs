//! The examples of `universaldb-keys.md` written with `tuple_key!` and
//! `tuple_prefix!`: a key type tied to its value type, discriminant checks
//! during a scan over a shared prefix, and a subspace key with an optional
//! trailing `create_ts`.

use std::collections::BTreeMap;

use strata_keys::tuple::{self, Uuid, Versionstamp};
use strata_keys::{Key, KeyError, Subspace, tuple_key, tuple_prefix};

use crate::hex;

// The document's constants come from a prelude of `usize`s; these values
// stand in for them. The layout, not the numbers, is under test.
const ACTOR: usize = 12;
const DATA: usize = 3;
const NAMESPACE: usize = 40;
const WORKFLOW_ID: usize = 7;
const CREATE_TS: usize = 8;
const NAME: usize = 9;
const QUEUE: usize = 50;

/// `(ACTOR, DATA, actor_id, WORKFLOW_ID)` with an `i64` value.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkflowIdKey {
    pub actor_id: Uuid,
}
/// `(ACTOR, DATA, actor_id, CREATE_TS)`.
#[derive(Debug, Clone, PartialEq)]
pub struct CreateTsKey {
    pub actor_id: Uuid,
}
/// `(ACTOR, DATA, actor_id, NAME)` with a string value.
#[derive(Debug, Clone, PartialEq)]
pub struct NameKey {
    pub actor_id: Uuid,
}
/// `(NAMESPACE, namespace_id, name, create_ts, actor_id)`: an index by name and creation time.
#[derive(Debug, Clone, PartialEq)]
pub struct ByNameKey {
    pub namespace_id: Uuid,
    pub name: String,
    pub create_ts: i64,
    pub actor_id: Uuid,
}
/// `(QUEUE, versionstamp)`: a queue entry ordered by commit.
#[derive(Debug, Clone, PartialEq)]
pub struct QueueEntry {
    pub stamp: Versionstamp,
}
/// Two versionstamps: packable, but not as a versionstamped key.
#[derive(Debug, Clone, PartialEq)]
pub struct TwoStamps {
    pub a: Versionstamp,
    pub b: Versionstamp,
}
tuple_key! {
    WorkflowIdKey -> i64 = (ACTOR, DATA, {actor_id}, WORKFLOW_ID);
    CreateTsKey -> i64 = (ACTOR, DATA, {actor_id}, CREATE_TS);
    NameKey -> String = (ACTOR, DATA, {actor_id}, NAME);
    ByNameKey -> () = (NAMESPACE, {namespace_id}, {name}, {create_ts}, {actor_id});
    QueueEntry -> Vec<u8> = (QUEUE, {stamp});
    TwoStamps -> () = (QUEUE, {a}, {b});
}

/// `(NAMESPACE, namespace_id, name, [create_ts])`: the document's
/// `MySubspaceKey` with its optional trailing field.
#[derive(Debug, Clone, PartialEq)]
pub struct ByNameSubspace {
    pub namespace_id: Uuid,
    pub name: String,
    pub create_ts: Option<i64>,
}
/// Two optional fields, to test the gap rule.
#[derive(Debug, Clone, PartialEq)]
pub struct TwoOptional {
    pub a: Option<i64>,
    pub b: Option<i64>,
}
tuple_prefix! {
    ByNameSubspace = (NAMESPACE, {namespace_id}, {name}, ?{create_ts});
    TwoOptional = (NAMESPACE, ?{a}, ?{b});
}

impl ByNameKey {
    /// The helper the document recommends: a prefix built from the key's fields.
    fn subspace(namespace_id: Uuid, name: &str) -> ByNameSubspace {
        ByNameSubspace {
            namespace_id,
            name: name.to_owned(),
            create_ts: None,
        }
    }
}

fn actor(n: u128) -> Uuid {
    Uuid::from_u128(n)
}

#[test]
fn key_bytes_equal_the_tuple_layer() {
    let key = WorkflowIdKey {
        actor_id: actor(0xAB),
    };
    let bytes = key.pack().expect("tuple keys always pack");
    assert_eq!(bytes, tuple::pack(&(ACTOR, DATA, actor(0xAB), WORKFLOW_ID)));
    assert_eq!(
        hex(&bytes),
        "15 0c 15 03 30 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 ab 15 07"
    );
    assert_eq!(WorkflowIdKey::unpack(&bytes).expect("own bytes"), key);
    assert_eq!(<WorkflowIdKey as Key>::NAME, "WorkflowIdKey");
}

#[test]
fn a_scan_over_a_shared_prefix_never_decodes_the_wrong_type() {
    let mut store: BTreeMap<Vec<u8>, &str> = BTreeMap::new();
    for n in 1..=3 {
        store.insert(
            WorkflowIdKey { actor_id: actor(n) }.pack().unwrap(),
            "workflow",
        );
        store.insert(
            CreateTsKey { actor_id: actor(n) }.pack().unwrap(),
            "create_ts",
        );
        store.insert(NameKey { actor_id: actor(n) }.pack().unwrap(), "name");
    }
    let all_actors = Subspace::new(&(ACTOR, DATA));
    let range = all_actors.tuple_range();
    let mut workflows = 0;
    let mut refused = 0;
    for (key, kind) in store.range(range.start.clone()..range.end.clone().unwrap()) {
        match WorkflowIdKey::unpack(key) {
            Ok(k) => {
                assert_eq!(
                    *kind, "workflow",
                    "decoded a {kind} row as a workflow key: {k:?}"
                );
                workflows += 1;
            }
            Err(KeyError::Discriminant { key: name, offset }) => {
                assert_ne!(*kind, "workflow");
                assert_eq!(name, "WorkflowIdKey");
                // The discriminant is the fourth element, after 2 + 2 + 17 bytes.
                assert_eq!(offset, 21);
                refused += 1;
            }
            Err(other) => panic!("unexpected error {other}"),
        }
    }
    assert_eq!((workflows, refused), (3, 6));
}

#[test]
fn subspace_key_with_optional_trailing_create_ts() {
    let ns = actor(77);
    let rows: Vec<ByNameKey> = [
        ("alpha", 5),
        ("alpha", 9),
        ("beta", 1),
        ("alphabet", 2),
        ("alpha\0x", 3),
    ]
    .into_iter()
    .map(|(name, ts)| ByNameKey {
        namespace_id: ns,
        name: name.to_owned(),
        create_ts: ts,
        actor_id: actor(u128::try_from(ts).unwrap()),
    })
    .collect();

    let by_name = ByNameKey::subspace(ns, "alpha");
    assert_eq!(
        by_name.pack().unwrap(),
        tuple::pack(&(NAMESPACE, ns, "alpha"))
    );
    let range = by_name.range().unwrap();
    let hits: Vec<&ByNameKey> = rows
        .iter()
        .filter(|k| range.contains(&k.pack().unwrap()))
        .collect();
    // "alphabet" is not under "alpha": the string element is terminated; nor
    // is "alpha\0x", whose escaped NUL shares the prefix bytes.
    assert_eq!(hits.len(), 2);
    assert!(hits.iter().all(|k| k.name == "alpha"));

    let exact = ByNameSubspace {
        create_ts: Some(9),
        ..by_name.clone()
    };
    assert_eq!(
        exact.pack().unwrap(),
        tuple::pack(&(NAMESPACE, ns, "alpha", 9_i64))
    );
    let range = exact.range().unwrap();
    let hits: Vec<_> = rows
        .iter()
        .filter(|k| range.contains(&k.pack().unwrap()))
        .collect();
    assert_eq!(hits.len(), 1);
    assert_eq!(hits[0].create_ts, 9);

    // Keys read back relative to the prefix's subspace.
    let sub = by_name.subspace().unwrap();
    let rel = sub.pack(&(5_i64, actor(5)));
    assert_eq!(rel, rows[0].pack().unwrap());
    let (ts, id): (i64, Uuid) = sub.unpack(&rel).unwrap();
    assert_eq!((ts, id), (5, actor(5)));
}

#[test]
fn optional_fields_must_not_leave_a_gap() {
    let ok = TwoOptional {
        a: Some(1),
        b: Some(2),
    };
    assert_eq!(ok.pack().unwrap(), tuple::pack(&(NAMESPACE, 1_i64, 2_i64)));
    let only_a = TwoOptional {
        a: Some(1),
        b: None,
    };
    assert_eq!(only_a.pack().unwrap(), tuple::pack(&(NAMESPACE, 1_i64)));
    let gap = TwoOptional {
        a: None,
        b: Some(2),
    };
    let mut buf = vec![0xEE];
    match gap.pack_into(&mut buf) {
        Err(KeyError::OptionalFieldGap { key, field }) => {
            assert_eq!((key, field), ("TwoOptional", "b"));
        }
        other => panic!("expected a gap error, got {other:?}"),
    }
    assert_eq!(buf, [0xEE], "a failed pack leaves the buffer as it was");
}

#[test]
fn versionstamped_key_reports_where_the_stamp_goes() {
    let key = QueueEntry {
        stamp: Versionstamp::incomplete(4),
    };
    let mut buf = b"prefix".to_vec();
    let at = key
        .pack_into_versionstamped(&mut buf)
        .unwrap()
        .expect("an incomplete versionstamp");
    // The tuple layer's own convention appends the same offset (LE u32).
    let mut reference = b"prefix".to_vec();
    tuple::pack_into_with_versionstamp(&(QUEUE, Versionstamp::incomplete(4)), &mut reference);
    let (packed, offset) = reference.split_at(reference.len() - 4);
    assert_eq!(buf, packed);
    assert_eq!(at, u32::from_le_bytes(offset.try_into().unwrap()) as usize);
    assert_eq!(&buf[at..at + 10], &[0xFF; 10]);

    let complete = QueueEntry {
        stamp: Versionstamp::complete([0, 0, 0, 0, 0, 0, 0, 9, 0, 0], 4),
    };
    assert_eq!(
        complete.pack_into_versionstamped(&mut Vec::new()).unwrap(),
        None
    );

    let two = TwoStamps {
        a: Versionstamp::incomplete(0),
        b: Versionstamp::incomplete(1),
    };
    let mut buf = vec![1, 2];
    assert!(matches!(
        two.pack_into_versionstamped(&mut buf),
        Err(KeyError::MultipleVersionstamps { key: "TwoStamps" })
    ));
    assert_eq!(buf, [1, 2]);
}

/// A stamp slot fixed in the layout: `("stamp\0ed", <incomplete 7>, id)`.
#[derive(Debug, Clone, PartialEq)]
struct FixedStamp {
    id: u64,
}
const STAMP_NAME: &str = "stamp\0ed";
tuple_key! {
    FixedStamp -> () = (STAMP_NAME, Versionstamp::incomplete(7), {id});
}

#[test]
fn constant_elements_pack_as_the_tuple_layer_does_every_time() {
    // Constants are packed once and copied after: the first pack and the
    // later ones must all equal the tuple layer's own encoding of the
    // whole tuple, the stamp's place included.
    for id in [0u64, 1, 300, u64::MAX] {
        let mut reference = b"p".to_vec();
        tuple::pack_into_with_versionstamp(
            &(STAMP_NAME, Versionstamp::incomplete(7), id),
            &mut reference,
        );
        let (packed, offset) = reference.split_at(reference.len() - 4);
        for _ in 0..2 {
            let mut buf = b"p".to_vec();
            let at = FixedStamp { id }
                .pack_into_versionstamped(&mut buf)
                .unwrap()
                .expect("the constant stamp is incomplete");
            assert_eq!(buf, packed, "id {id}");
            assert_eq!(at, u32::from_le_bytes(offset.try_into().unwrap()) as usize);
            assert_eq!(&buf[at..at + 10], &[0xFF; 10]);
        }
    }
    // The string constant's NUL is escaped, as the tuple layer does.
    let bytes = FixedStamp { id: 5 }.pack().unwrap();
    assert!(bytes.starts_with(b"\x02stamp\x00\xFFed\x00"), "{bytes:?}");
}

/// The macros' helper behind the test above: a constant's bytes and its
/// stamp's place, as the tuple layer packs it alone.
#[test]
fn a_constant_is_packed_with_its_stamps_place() {
    use strata_keys::__private::{element_depth, pack_const_once};
    use strata_keys::tuple::VersionstampOffset;

    let (bytes, offset) = pack_const_once(&"a\0b", element_depth()).expect("packs");
    assert_eq!(bytes, tuple::pack(&("a\0b",)));
    assert_eq!(offset, VersionstampOffset::None { size: 6 });
    let (bytes, offset) =
        pack_const_once(&Versionstamp::incomplete(7), element_depth()).expect("packs");
    assert_eq!(bytes[0], 0x33, "the versionstamp's type code");
    assert_eq!(&bytes[1..11], &[0xFF; 10]);
    assert_eq!(offset, VersionstampOffset::OneIncomplete { offset: 1 });
}
