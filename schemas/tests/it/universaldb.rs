//! UniversalDB: the document's keys as one declaration each, typed reads
//! and writes, range reads that refuse foreign rows, subspaces with an
//! optional trailing field, serializable against snapshot reads, and named
//! retried transactions, on every engine.

use serde::{Deserialize, Serialize};
use strata_engine::{Engine, KeyspaceSpec};
use strata_keys::tuple::{self, Uuid};
use strata_keys::{Key, KeyRange, tuple_key, tuple_prefix};
use strata_schemas::universaldb::keys::{ACTOR, CREATE_TS, DATA, NAME, NAMESPACE, WORKFLOW_ID};
use strata_schemas::universaldb::{Database, Isolation, SPACE, UdbError};
use strata_store::{Store, StoreError};

/// A workflow's id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkflowId(pub u128);
/// A creation time, Unix milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct CreateTs(pub i64);
/// An actor's name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ActorName(pub String);
strata_codec::value!(WorkflowId: postcard, version = 1);
strata_codec::value!(CreateTs: postcard, version = 1);
strata_codec::value!(ActorName: postcard, version = 1);

/// `(ACTOR, DATA, actor_id, WORKFLOW_ID)`.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkflowIdKey {
    pub actor_id: Uuid,
}
/// `(ACTOR, DATA, actor_id, CREATE_TS)`.
#[derive(Debug, Clone, PartialEq)]
pub struct CreateTsKey {
    pub actor_id: Uuid,
}
/// `(ACTOR, DATA, actor_id, NAME)`.
#[derive(Debug, Clone, PartialEq)]
pub struct NameKey {
    pub actor_id: Uuid,
}
/// `(NAMESPACE, namespace_id, name, create_ts, actor_id)`.
#[derive(Debug, Clone, PartialEq)]
pub struct ByNameKey {
    pub namespace_id: Uuid,
    pub name: String,
    pub create_ts: i64,
    pub actor_id: Uuid,
}
tuple_key! {
    WorkflowIdKey -> WorkflowId = (ACTOR, DATA, {actor_id}, WORKFLOW_ID);
    CreateTsKey -> CreateTs = (ACTOR, DATA, {actor_id}, CREATE_TS);
    NameKey -> ActorName = (ACTOR, DATA, {actor_id}, NAME);
    ByNameKey -> WorkflowId = (NAMESPACE, {namespace_id}, {name}, {create_ts}, {actor_id});
}

/// The document's `MySubspaceKey`: `(NAMESPACE, namespace_id, name, [create_ts])`.
#[derive(Debug, Clone, PartialEq)]
pub struct ByNameSubspace {
    pub namespace_id: Uuid,
    pub name: String,
    pub create_ts: Option<i64>,
}
tuple_prefix! {
    ByNameSubspace = (NAMESPACE, {namespace_id}, {name}, ?{create_ts});
}

fn specs() -> Vec<KeyspaceSpec> {
    Database::<strata_engine::MemEngine>::store_options().keyspace_specs()
}

fn db<E: Engine>(engine: E) -> Database<E> {
    Database::open(Store::open(engine, Database::<E>::store_options()).unwrap()).unwrap()
}

fn actor(n: u128) -> Uuid {
    Uuid::from_u128(n)
}

fn hex(bytes: &[u8]) -> String {
    bytes
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The constants are the public source's, and the keys its tuple bytes.
#[test]
fn keys_have_the_tuple_layers_bytes() {
    assert_eq!(
        (ACTOR, DATA, WORKFLOW_ID, CREATE_TS, NAME, NAMESPACE),
        (32, 4, 20, 15, 19, 39)
    );
    let key = WorkflowIdKey {
        actor_id: actor(0xAB),
    }
    .pack()
    .unwrap();
    // 0x15 n: a one-byte integer; 0x30: a UUID and its 16 bytes.
    assert_eq!(
        hex(&key),
        "15 20 15 04 30 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 ab 15 14"
    );
    assert_eq!(key, tuple::pack(&(32usize, 4usize, actor(0xAB), 20usize)));
    let sub = ByNameSubspace {
        namespace_id: actor(1),
        name: "a".into(),
        create_ts: Some(5),
    };
    assert_eq!(
        sub.pack().unwrap(),
        tuple::pack(&(39usize, actor(1), "a", 5i64))
    );
    let bare = ByNameSubspace {
        create_ts: None,
        ..sub
    };
    assert_eq!(bare.pack().unwrap(), tuple::pack(&(39usize, actor(1), "a")));
}

fn reads_writes_and_clears<E: Engine>(engine: E) {
    let db = db(engine);
    let a = actor(1);
    db.run("create", |tx| {
        tx.write(&WorkflowIdKey { actor_id: a }, &WorkflowId(99))?;
        tx.write(&CreateTsKey { actor_id: a }, &CreateTs(1_730_000_000_000))?;
        tx.write(&NameKey { actor_id: a }, &ActorName("counter".into()))
    })
    .unwrap();
    let got = db
        .run("read", |tx| {
            Ok((
                tx.read(&WorkflowIdKey { actor_id: a }, Isolation::Serializable)?,
                tx.read(&CreateTsKey { actor_id: a }, Isolation::Snapshot)?,
                tx.read_opt(&NameKey { actor_id: a }, Isolation::Serializable)?,
            ))
        })
        .unwrap();
    assert_eq!(
        got,
        (
            WorkflowId(99),
            CreateTs(1_730_000_000_000),
            Some(ActorName("counter".into()))
        )
    );
    let missing = db.run("missing", |tx| {
        tx.read(
            &WorkflowIdKey { actor_id: actor(2) },
            Isolation::Serializable,
        )
    });
    assert!(matches!(
        missing,
        Err(UdbError::MissingKey {
            key_type: "WorkflowIdKey",
            ..
        })
    ));
    db.run("clear", |tx| tx.clear(&NameKey { actor_id: a }))
        .unwrap();
    assert_eq!(
        db.run("after", |tx| tx
            .read_opt(&NameKey { actor_id: a }, Isolation::Snapshot))
            .unwrap(),
        None
    );
    // A failed closure writes nothing.
    let failed: Result<(), UdbError> = db.run("fails", |tx| {
        tx.write(&NameKey { actor_id: a }, &ActorName("never".into()))?;
        tx.read(
            &WorkflowIdKey { actor_id: actor(3) },
            Isolation::Serializable,
        )
        .map(|_| ())
    });
    assert!(failed.is_err());
    assert_eq!(
        db.run("still", |tx| tx
            .read_opt(&NameKey { actor_id: a }, Isolation::Snapshot))
            .unwrap(),
        None
    );
}

fn range_reads_refuse_rows_of_another_type<E: Engine>(engine: E) {
    let db = db(engine);
    db.run("fill", |tx| {
        for n in 1..=3 {
            tx.write(&WorkflowIdKey { actor_id: actor(n) }, &WorkflowId(n))?;
            tx.write(
                &CreateTsKey { actor_id: actor(n) },
                &CreateTs(i64::try_from(n).unwrap() * 10),
            )?;
            tx.write(&NameKey { actor_id: actor(n) }, &ActorName(format!("a{n}")))?;
        }
        Ok(())
    })
    .unwrap();
    let (create_ts, foreign) = db
        .run("scan", |tx| {
            let range = KeyRange::tuple_prefix(&tuple::pack(&(ACTOR, DATA)));
            let entries = tx.get_ranges_keyvalues(&range, Isolation::Snapshot, None, false)?;
            assert_eq!(entries.len(), 9);
            let mut found = Vec::new();
            let mut foreign = 0;
            for entry in &entries {
                match tx.read_entry::<CreateTsKey>(entry) {
                    Ok((key, ts)) => found.push((key.actor_id, ts)),
                    Err(UdbError::Key {
                        key_type: "CreateTsKey",
                        ..
                    }) => foreign += 1,
                    Err(e) => return Err(e),
                }
            }
            Ok((found, foreign))
        })
        .unwrap();
    assert_eq!(
        create_ts,
        [
            (actor(1), CreateTs(10)),
            (actor(2), CreateTs(20)),
            (actor(3), CreateTs(30))
        ]
    );
    assert_eq!(
        foreign, 6,
        "the workflow id and name rows are refused, never misread"
    );
    // A damaged value is a typed error.
    let space = db.store().space(SPACE).unwrap();
    let key = NameKey { actor_id: actor(1) }.pack().unwrap();
    db.store()
        .transact(|tx| tx.put_in(&space, key.clone(), b"not an envelope".to_vec()))
        .unwrap();
    let damaged = db.run("damaged", |tx| {
        tx.read(&NameKey { actor_id: actor(1) }, Isolation::Snapshot)
    });
    assert!(matches!(
        damaged,
        Err(UdbError::Decode {
            key_type: "NameKey",
            ..
        })
    ));
}

fn subspaces_with_an_optional_create_ts<E: Engine>(engine: E) {
    let db = db(engine);
    let ns = actor(100);
    let by_name = |name: &str, ts: i64, a: u128| ByNameKey {
        namespace_id: ns,
        name: name.into(),
        create_ts: ts,
        actor_id: actor(a),
    };
    db.run("index", |tx| {
        tx.write(&by_name("counter", 5, 1), &WorkflowId(1))?;
        tx.write(&by_name("counter", 5, 2), &WorkflowId(2))?;
        tx.write(&by_name("counter", 7, 3), &WorkflowId(3))?;
        // A sibling name extending "counter" with a NUL: not in its subspace.
        tx.write(&by_name("counter\0x", 1, 4), &WorkflowId(4))?;
        tx.write(&by_name("other", 5, 5), &WorkflowId(5))
    })
    .unwrap();
    let actors = |sub: ByNameSubspace| {
        db.run("list", |tx| {
            let range = KeyRange::tuple_prefix(&sub.pack().map_err(|source| UdbError::Key {
                key_type: "ByNameSubspace",
                source,
            })?);
            let entries = tx.get_ranges_keyvalues(&range, Isolation::Serializable, None, false)?;
            entries
                .iter()
                .map(|e| tx.read_entry::<ByNameKey>(e).map(|(k, _)| k.actor_id))
                .collect::<Result<Vec<_>, _>>()
        })
        .unwrap()
    };
    assert_eq!(
        actors(ByNameSubspace {
            namespace_id: ns,
            name: "counter".into(),
            create_ts: None
        }),
        [actor(1), actor(2), actor(3)]
    );
    assert_eq!(
        actors(ByNameSubspace {
            namespace_id: ns,
            name: "counter".into(),
            create_ts: Some(5)
        }),
        [actor(1), actor(2)]
    );
    assert!(
        actors(ByNameSubspace {
            namespace_id: ns,
            name: "counter".into(),
            create_ts: Some(6)
        })
        .is_empty()
    );
}

fn serializable_reads_conflict_and_snapshot_reads_do_not<E: Engine>(engine: E) {
    let db = db(engine);
    let (x, y) = (
        CreateTsKey { actor_id: actor(1) },
        CreateTsKey { actor_id: actor(2) },
    );
    db.run("init", |tx| tx.write(&x, &CreateTs(1))).unwrap();
    for (isolation, conflicts) in [
        (Isolation::Serializable, true),
        (Isolation::Snapshot, false),
    ] {
        let mut t1 = db.begin();
        assert_eq!(t1.ops().read(&x, isolation).unwrap(), CreateTs(1));
        let mut t2 = db.begin();
        t2.ops().write(&x, &CreateTs(2)).unwrap();
        t2.commit().unwrap();
        t1.ops().write(&y, &CreateTs(3)).unwrap();
        let result = t1.commit();
        assert_eq!(
            matches!(result, Err(UdbError::Store(StoreError::Commit(_)))),
            conflicts,
            "{isolation:?}: {result:?}"
        );
        db.run("reset", |tx| {
            tx.write(&x, &CreateTs(1))?;
            tx.clear(&y)
        })
        .unwrap();
    }
    // `run` retries a conflicting closure: the second attempt sees the
    // concurrent write.
    let mut attempts = 0;
    let seen = db
        .run("increment", |tx| {
            attempts += 1;
            let v = tx.read(&x, Isolation::Serializable)?;
            if attempts == 1 {
                let mut other = db.begin();
                other.ops().write(&x, &CreateTs(10))?;
                other.commit()?;
            }
            tx.write(&x, &CreateTs(v.0 + 1))?;
            Ok(v)
        })
        .unwrap();
    assert_eq!((attempts, seen), (2, CreateTs(10)));
    assert_eq!(
        db.run("final", |tx| tx.read(&x, Isolation::Snapshot))
            .unwrap(),
        CreateTs(11)
    );
}

crate::on_each_engine!(
    reads_writes_and_clears,
    range_reads_refuse_rows_of_another_type,
    subspaces_with_an_optional_create_ts,
    serializable_reads_conflict_and_snapshot_reads_do_not,
);

#[test]
fn the_handle_names_itself() {
    let db = db(strata_engine::MemEngine::open(specs()).unwrap());
    assert!(format!("{db:?}").starts_with("Database"));
}
