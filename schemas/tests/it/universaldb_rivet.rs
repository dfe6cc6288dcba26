//! UniversalDB against Rivet's own bytes: real key types of the pegboard
//! (`engine/packages/pegboard/src/keys/actor.rs` in rivet-dev/rivet at
//! commit `1c0b6d3c94017632b830661ff5e8509339656557`), declared relative
//! to the `(RIVET, PEGBOARD)` subspace as Rivet declares them, stored in
//! the raw format (`FormalKey` bytes), and compared with vectors written
//! out by hand from the FoundationDB tuple specification and that file's
//! `serialize` functions; the prelude's constant list (`universaldb/src/
//! utils/keys.rs` at commit `0a07455d95180af07f14a9d61be7735115ed415a`);
//! Rivet's `Id` (`util-id/src/lib.rs`) as an element, a value and text.

use strata_engine::{Engine, KeyspaceSpec, MemEngine};
use strata_keys::{KeyRange, Subspace, tuple, tuple_key, tuple_prefix};
use strata_schemas::formal_key;
use strata_schemas::universaldb::keys::{
    self, ACTOR, CONNECTABLE, CREATE_TS, DATA, HIBERNATING_REQUEST, NAME, PEGBOARD, RIVET, VERSION,
    WORKFLOW_ID,
};
use strata_schemas::universaldb::{
    Database, Enveloped, FormalKey, Id, IdError, Isolation, RAW_SPACE, Raw, RawValueError, SPACE,
    UdbError,
};
use strata_store::Store;

#[derive(Debug, Clone, PartialEq)]
pub struct CreateTsKey {
    pub actor_id: Id,
}
#[derive(Debug, Clone, PartialEq)]
pub struct WorkflowIdKey {
    pub actor_id: Id,
}
#[derive(Debug, Clone, PartialEq)]
pub struct NameKey {
    pub actor_id: Id,
}
#[derive(Debug, Clone, PartialEq)]
pub struct ConnectableKey {
    pub actor_id: Id,
}
#[derive(Debug, Clone, PartialEq)]
pub struct VersionKey {
    pub actor_id: Id,
}
#[derive(Debug, Clone, PartialEq)]
pub struct HibernatingRequestKey {
    pub actor_id: Id,
    pub last_ping_ts: i64,
    pub gateway_id: Vec<u8>,
    pub request_id: Vec<u8>,
}
#[derive(Debug, Clone, PartialEq)]
pub struct HibernatingRequestSubspaceKey {
    pub actor_id: Id,
    pub last_ping_ts: Option<i64>,
}
tuple_key! {
    CreateTsKey -> i64 = (ACTOR, DATA, {actor_id}, CREATE_TS);
    WorkflowIdKey -> Id = (ACTOR, DATA, {actor_id}, WORKFLOW_ID);
    NameKey -> String = (ACTOR, DATA, {actor_id}, NAME);
    ConnectableKey -> () = (ACTOR, DATA, {actor_id}, CONNECTABLE);
    VersionKey -> u32 = (ACTOR, DATA, {actor_id}, VERSION);
    HibernatingRequestKey -> () = (ACTOR, HIBERNATING_REQUEST, {actor_id}, {last_ping_ts}, {gateway_id}, {request_id});
}
tuple_prefix! {
    HibernatingRequestSubspaceKey = (ACTOR, HIBERNATING_REQUEST, {actor_id}, ?{last_ping_ts});
}
formal_key!(
    CreateTsKey,
    WorkflowIdKey,
    NameKey,
    ConnectableKey,
    VersionKey,
    HibernatingRequestKey
);

/// The actor of every vector: UUID `00112233-…-eeff`, label `0x0A0B`.
fn actor() -> Id {
    Id::v1(0x0011_2233_4455_6677_8899_AABB_CCDD_EEFF, 0x0A0B)
}

/// The id's tuple bytes by hand: code `0x40`, version 1, UUID, label.
const ACTOR_ELEMENT: [u8; 20] = [
    0x40, 0x01, 0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xAA, 0xBB, 0xCC, 0xDD,
    0xEE, 0xFF, 0x0A, 0x0B,
];

/// `prefix ++ ACTOR_ELEMENT ++ suffix`.
fn with_actor(prefix: &[u8], suffix: &[u8]) -> Vec<u8> {
    [prefix, &ACTOR_ELEMENT[..], suffix].concat()
}

/// `(RIVET, PEGBOARD, ACTOR, DATA)` by hand: 0 is `0x14`, small positive
/// integers `0x15 n`.
const PEGBOARD_ACTOR_DATA: [u8; 7] = [0x14, 0x15, 0x03, 0x15, 0x20, 0x15, 0x04];

fn pegboard() -> Subspace {
    Subspace::new(&(RIVET, PEGBOARD))
}

fn specs() -> Vec<KeyspaceSpec> {
    Database::<MemEngine, Raw>::declare(Database::<MemEngine>::store_options()).keyspace_specs()
}

fn raw_db<E: Engine>(engine: E) -> Database<E, Raw> {
    let options = Database::<E, Raw>::declare(Database::<E>::store_options());
    Database::open_raw(Store::open(engine, options).unwrap()).unwrap()
}

/// Every row of the raw space, as stored.
fn raw_rows<E: Engine>(db: &Database<E, Raw>) -> Vec<(Vec<u8>, Vec<u8>)> {
    db.run("all", |tx| {
        tx.get_ranges_keyvalues(&KeyRange::prefix(&[]), Isolation::Snapshot, None, false)
    })
    .unwrap()
    .into_iter()
    .map(|e| (e.key, e.value))
    .collect()
}

/// Rivet's key and value bytes for each key type, written by hand.
fn vectors() -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut v = vec![
        // CreateTsKey: CREATE_TS = 15; the value i64 big-endian.
        (
            with_actor(&PEGBOARD_ACTOR_DATA, &[0x15, 0x0F]),
            vec![0x00, 0x00, 0x01, 0x92, 0xCC, 0x09, 0x14, 0x00],
        ),
        // WorkflowIdKey: WORKFLOW_ID = 20; the value the id's 19 bytes.
        (
            with_actor(&PEGBOARD_ACTOR_DATA, &[0x15, 0x14]),
            vec![
                0x01, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x77, 0x00, 0x02,
            ],
        ),
        // NameKey: NAME = 19; the value UTF-8.
        (
            with_actor(&PEGBOARD_ACTOR_DATA, &[0x15, 0x13]),
            b"counter".to_vec(),
        ),
        // ConnectableKey: CONNECTABLE = 42; the value empty.
        (with_actor(&PEGBOARD_ACTOR_DATA, &[0x15, 0x2A]), vec![]),
        // VersionKey: VERSION = 59; the value u32 big-endian.
        (
            with_actor(&PEGBOARD_ACTOR_DATA, &[0x15, 0x3B]),
            vec![0, 0, 0, 7],
        ),
    ];
    // HibernatingRequestKey: (ACTOR, HIBERNATING_REQUEST = 40, id, 1000 as
    // `0x16 03 E8`, the ids as byte strings with 0x00 escaped as 00 FF).
    v.push((
        with_actor(
            &[0x14, 0x15, 0x03, 0x15, 0x20, 0x15, 0x28],
            &[
                0x16, 0x03, 0xE8, 0x01, 0xAB, 0x00, 0xFF, 0xCD, 0x00, 0x01, 0x00, 0xFF, 0x00,
            ],
        ),
        vec![],
    ));
    v.sort();
    v
}

fn rows_are_rivets_bytes<E: Engine>(engine: E) {
    let db = raw_db(engine);
    let a = actor();
    let workflow = Id::v1(0x77, 2);
    let sub = pegboard();
    db.run("write", |tx| {
        let mut tx = tx.with_subspace(&sub);
        tx.write(&CreateTsKey { actor_id: a }, &1_730_000_000_000)?;
        tx.write(&WorkflowIdKey { actor_id: a }, &workflow)?;
        tx.write(&NameKey { actor_id: a }, &"counter".to_string())?;
        tx.write(&ConnectableKey { actor_id: a }, &())?;
        tx.write(&VersionKey { actor_id: a }, &7)?;
        tx.write(
            &HibernatingRequestKey {
                actor_id: a,
                last_ping_ts: 1000,
                gateway_id: vec![0xAB, 0x00, 0xCD],
                request_id: vec![0x00],
            },
            &(),
        )
    })
    .unwrap();
    assert_eq!(raw_rows(&db), vectors());

    // And back: each read, and each row decoded as its own type only.
    let read = db
        .run("read", |tx| {
            let mut tx = tx.with_subspace(&sub);
            Ok((
                tx.read(&CreateTsKey { actor_id: a }, Isolation::Serializable)?,
                tx.read(&WorkflowIdKey { actor_id: a }, Isolation::Snapshot)?,
                tx.read(&NameKey { actor_id: a }, Isolation::Snapshot)?,
                tx.read(&VersionKey { actor_id: a }, Isolation::Snapshot)?,
            ))
        })
        .unwrap();
    assert_eq!(read, (1_730_000_000_000, workflow, "counter".into(), 7));
    let hibernating = HibernatingRequestSubspaceKey {
        actor_id: a,
        last_ping_ts: None,
    };
    let range = KeyRange::tuple_prefix(&[sub.bytes(), &hibernating.pack().unwrap()].concat());
    let found = db
        .run("hibernating", |tx| {
            let mut tx = tx.with_subspace(&sub);
            let rows = tx.get_ranges_keyvalues(&range, Isolation::Serializable, None, false)?;
            rows.iter()
                .map(|e| tx.read_entry::<HibernatingRequestKey>(e))
                .collect::<Result<Vec<_>, _>>()
        })
        .unwrap();
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].0.gateway_id, [0xAB, 0x00, 0xCD]);
    assert_eq!(found[0].0.last_ping_ts, 1000);
    // A row read outside its subspace does not decode.
    let create_ts_row = db
        .run("rows", |tx| {
            tx.get_ranges_keyvalues(&sub.tuple_range(), Isolation::Snapshot, Some(1), false)
        })
        .unwrap();
    let outside = db.run("outside", |tx| {
        tx.read_entry::<CreateTsKey>(&create_ts_row[0])
    });
    assert!(matches!(outside, Err(UdbError::Key { .. })), "{outside:?}");
}

/// Rows Rivet wrote, put in raw: read as Rivet reads them; a value of the
/// wrong width is a typed error naming the key, never a wrong value.
fn rows_rivet_wrote_read_back<E: Engine>(engine: E) {
    let db = raw_db(engine);
    let space = db.store().space(RAW_SPACE).unwrap();
    let mut tx = db.store().begin();
    for (k, v) in vectors() {
        tx.put_in(&space, k, v).unwrap();
    }
    let short_ts = with_actor(&PEGBOARD_ACTOR_DATA, &[0x15, 0x0F]);
    tx.commit().unwrap();
    let sub = pegboard();
    let a = actor();
    let ts = db
        .run("read", |tx| {
            tx.with_subspace(&sub)
                .read(&CreateTsKey { actor_id: a }, Isolation::Snapshot)
        })
        .unwrap();
    assert_eq!(ts, 1_730_000_000_000);
    let connectable = db.run("read", |tx| {
        tx.with_subspace(&sub)
            .read_opt(&ConnectableKey { actor_id: a }, Isolation::Snapshot)
    });
    assert_eq!(connectable.unwrap(), Some(()));

    let mut tx = db.store().begin();
    tx.put_in(&space, short_ts.clone(), vec![1, 2, 3]).unwrap();
    tx.commit().unwrap();
    let err = db
        .run("read", |tx| {
            tx.with_subspace(&sub)
                .read(&CreateTsKey { actor_id: a }, Isolation::Snapshot)
        })
        .unwrap_err();
    match err {
        UdbError::RawValue {
            key,
            source: RawValueError::Width { expected, found },
            ..
        } => assert_eq!((key, expected, found), (short_ts, 8, 3)),
        other => panic!("{other:?}"),
    }
}

/// The two formats never read each other's rows: they live in different
/// spaces, and an enveloped database sees nothing a raw one wrote.
fn formats_are_kept_apart<E: Engine>(engine: E) {
    let options = Database::<E, Raw>::declare(Database::<E>::store_options());
    let store = Store::open(engine, options).unwrap();
    let raw = Database::open_raw(store).unwrap();
    let key = NameKey { actor_id: actor() };
    raw.run("w", |tx| tx.write(&key, &"raw".to_string()))
        .unwrap();
    let enveloped: Database<E, Enveloped> = Database::open(raw.into_store()).unwrap();
    let seen = enveloped
        .run("r", |tx| {
            tx.get_ranges_keyvalues(&KeyRange::prefix(&[]), Isolation::Snapshot, None, false)
        })
        .unwrap();
    assert!(seen.is_empty());
    assert_eq!((SPACE, RAW_SPACE), ("udb", "udb_raw"));
}

crate::on_each_engine!(
    rows_are_rivets_bytes,
    rows_rivet_wrote_read_back,
    formats_are_kept_apart,
);

/// Serialization on its own, without a database: the key type's bytes.
#[test]
fn formal_keys_serialize_as_rivet() {
    let a = actor();
    assert_eq!(
        CreateTsKey { actor_id: a }.serialize(&-1).unwrap(),
        [0xFF; 8]
    );
    assert_eq!(
        VersionKey { actor_id: a }.serialize(&0x0102_0304).unwrap(),
        [1, 2, 3, 4]
    );
    assert!(
        ConnectableKey { actor_id: a }
            .serialize(&())
            .unwrap()
            .is_empty()
    );
    // Rivet's reads of `()` ignore the bytes.
    assert_eq!(
        ConnectableKey { actor_id: a }.deserialize(b"x").unwrap(),
        ()
    );
    assert!(matches!(
        NameKey { actor_id: a }.deserialize(&[0xFF]),
        Err(RawValueError::Utf8(_))
    ));
    assert!(matches!(
        WorkflowIdKey { actor_id: a }.deserialize(&[2; 19]),
        Err(RawValueError::Id(IdError::UnsupportedVersion(2)))
    ));
}

/// The id: its tuple element, value bytes and text, by hand.
#[test]
fn ids_are_rivets() {
    let id = actor();
    assert_eq!(tuple::pack(&(id,)), ACTOR_ELEMENT);
    assert_eq!(id.as_bytes()[..], ACTOR_ELEMENT[1..]);
    assert_eq!(
        (id.uuid(), id.label()),
        (0x0011_2233_4455_6677_8899_AABB_CCDD_EEFF, 0x0A0B)
    );
    // Text: the 19 bytes as a little-endian number, 30 base-36 digits,
    // least significant first (worked out by hand with big integers).
    assert_eq!(id.to_string(), "dt6e6o4y5qoohovo86s7mxeh3b3j60");
    assert_eq!("DT6E6O4Y5QOOHOVO86S7MXEH3B3J60".parse::<Id>().unwrap(), id);
    assert_eq!(Id::default().to_string(), "100000000000000000000000000000");
    assert_eq!(
        "dt6e6o4y5qoohovo86s7mxeh3b3j6".parse::<Id>(),
        Err(IdError::Length {
            expected: 30,
            found: 29
        })
    );
    assert_eq!("2000".parse::<Id>(), Err(IdError::UnsupportedVersion(2)));
    assert_eq!("10-0".parse::<Id>(), Err(IdError::Digit('-')));
    assert_eq!("10".parse::<Id>(), Err(IdError::TooShort));
    assert_eq!(
        "zzzzzzzzzzzzzzzzzzzzzzzzzzzzz1".parse::<Id>(),
        Err(IdError::UnsupportedVersion(
            u8::try_from((36_u32.pow(4) - 1) % 256).unwrap()
        ))
    );
    // Unpacking checks the code, the version and the length.
    let mut wrong_version = ACTOR_ELEMENT.to_vec();
    wrong_version[1] = 2;
    assert!(tuple::unpack::<(Id,)>(&wrong_version).is_err());
    assert!(tuple::unpack::<(Id,)>(&ACTOR_ELEMENT[..19]).is_err());
    let mut wrong_code = ACTOR_ELEMENT.to_vec();
    wrong_code[0] = 0x41;
    assert!(tuple::unpack::<(Id,)>(&wrong_code).is_err());
    assert_eq!(tuple::unpack::<(Id,)>(&ACTOR_ELEMENT).unwrap(), (id,));
    // Actor KV's id is the same type.
    let actor_kv: strata_schemas::actor_kv::ActorId = id;
    assert_eq!(actor_kv.bytes(), id.bytes());
}

/// The prelude's constants, transcribed from the source's list (value and
/// name): every one present with that value and name, nothing else.
#[test]
fn every_prelude_constant_has_rivets_value() {
    const LIST: &str = "0 rivet 1 gasoline 2 kv 3 pegboard 4 data 5 workflow 6 signal 7 body \
        8 lease 9 tag 10 input 11 output 12 wake_signal 13 wake_deadline 14 ack_ts 15 create_ts \
        16 silence_ts 17 pending 18 ray_id 19 name 20 workflow_id 21 wake 22 sub_workflow \
        23 worker 24 last_ping_ts 25 metrics_lock 26 error 27 wake_sub_workflow_id \
        28 by_name_and_tag 29 has_wake_condition 30 worker_id 31 dbs 32 actor 33 by_name \
        34 default 35 remaining_memory 36 remaining_cpu 37 total_memory 38 total_cpu \
        39 namespace 40 hibernating_request 41 display_name 42 connectable 43 sleep_ts \
        44 metadata 45 compressed_data 46 runner 47 runner_alloc_idx 48 remaining_slots \
        49 total_slots 50 state 51 runner_id 52 namespace_id \
        53 pending_actor_by_runner_name_selector 54 container 55 history 56 active \
        57 forgotten 58 event_type 59 version 61 signal_id 62 sub_workflow_id 63 iteration \
        64 deadline_ts 65 sleep_state 66 inner_event_type 67 all 68 by_name_and_key \
        69 destroy_ts 70 epoxy 71 peer_state 72 actor_kv 73 stop_ts 74 drain_ts 75 last_rtt \
        76 connected_ts 77 expired_ts 78 key 79 value 80 committed_value 81 optimistic_cache \
        82 optimistic_cached_value 83 reservation 84 instance 85 log 86 entry 87 key_instance \
        88 instance_number 89 replica 90 config 91 metric 92 current_ballot \
        93 instance_ballot 94 serverless 95 desired_slots 96 by_variant 97 acl 98 token \
        99 secret 106 protocol_version 107 last_command_idx 108 command \
        109 runner_name_selector 110 backfill 111 complete";
    let words: Vec<&str> = LIST.split_whitespace().collect();
    let expected: Vec<(usize, &str)> = words
        .chunks(2)
        .map(|p| (p[0].parse().unwrap(), p[1]))
        .collect();
    assert_eq!(expected.len(), 105);
    assert_eq!(keys::KEY_NAMES, expected.as_slice());
    for &(value, name) in &expected {
        assert_eq!(keys::name_of(value), Some(name));
        assert_eq!(keys::by_name(name), Some(value));
    }
    for unused in [60, 100, 105, 112] {
        assert_eq!(keys::name_of(unused), None);
    }
    // A few by their constants, so a constant and its table cannot drift.
    assert_eq!(
        [
            RIVET,
            PEGBOARD,
            ACTOR,
            DATA,
            CREATE_TS,
            NAME,
            WORKFLOW_ID,
            CONNECTABLE,
            VERSION
        ],
        [0, 3, 32, 4, 15, 19, 20, 42, 59]
    );
    assert_eq!(
        [keys::ACTOR_KV, keys::METADATA, keys::COMPLETE, keys::SECRET],
        [72, 44, 111, 99]
    );
}

/// A range over a bare prefix starts at the prefix itself (a row whose key
/// is exactly the prefix is in it); FoundationDB's and Rivet's
/// `Subspace::range()` starts at `prefix ++ 0x00` and leaves it out.
#[test]
fn ranges_start_at_the_prefix_itself() {
    let sub = pegboard();
    let ours = sub.tuple_range();
    let fdb_start = [sub.bytes(), &[0x00]].concat();
    let fdb_end = [sub.bytes(), &[0xFF]].concat();
    assert_eq!(ours.start, sub.bytes());
    assert_eq!(ours.end.as_deref(), Some(fdb_end.as_slice()));
    // The prefix itself: in ours, not in FoundationDB's.
    assert!(ours.contains(sub.bytes()));
    assert!(sub.bytes() < fdb_start.as_slice());
    // A key packed below the subspace: in both.
    let key = sub.pack(&(ACTOR,));
    assert!(ours.contains(&key));
    assert!(key.as_slice() >= fdb_start.as_slice() && key.as_slice() < fdb_end.as_slice());
}
