//! UniversalDB's programming model on an embedded redb database: the
//! document's keys as one declaration each, a named transaction, typed
//! reads and writes, a range read over a prefix shared by three key types
//! (the foreign rows refused by `read_entry`), a subspace with an optional
//! trailing `create_ts`, and a serializable read that conflicts.
//!
//! `cargo run -p strata-examples --example universaldb [DIR]`

use serde::{Deserialize, Serialize};
use strata_engine_redb::{RedbEngine, RedbOptions};
use strata_keys::tuple::{self, Uuid};
use strata_keys::{Key, KeyRange, tuple_key, tuple_prefix};
use strata_schemas::universaldb::keys::{ACTOR, CREATE_TS, DATA, NAMESPACE, WORKFLOW_ID};
use strata_schemas::universaldb::{Database, Isolation, UdbError};
use strata_store::Store;

/// A workflow's id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
struct WorkflowId(u128);
/// A creation time, Unix milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
struct CreateTs(i64);
strata_codec::value!(WorkflowId: postcard, version = 1);
strata_codec::value!(CreateTs: postcard, version = 1);

/// `(ACTOR, DATA, actor_id, WORKFLOW_ID)`.
#[derive(Debug, Clone, PartialEq)]
struct WorkflowIdKey {
    actor_id: Uuid,
}
/// `(ACTOR, DATA, actor_id, CREATE_TS)`.
#[derive(Debug, Clone, PartialEq)]
struct CreateTsKey {
    actor_id: Uuid,
}
/// `(NAMESPACE, namespace_id, name, create_ts, actor_id)`.
#[derive(Debug, Clone, PartialEq)]
struct ByNameKey {
    namespace_id: Uuid,
    name: String,
    create_ts: i64,
    actor_id: Uuid,
}
tuple_key! {
    WorkflowIdKey -> WorkflowId = (ACTOR, DATA, {actor_id}, WORKFLOW_ID);
    CreateTsKey -> CreateTs = (ACTOR, DATA, {actor_id}, CREATE_TS);
    ByNameKey -> WorkflowId = (NAMESPACE, {namespace_id}, {name}, {create_ts}, {actor_id});
}
/// `(NAMESPACE, namespace_id, name, [create_ts])`.
#[derive(Debug, Clone, PartialEq)]
struct ByNameSubspace {
    namespace_id: Uuid,
    name: String,
    create_ts: Option<i64>,
}
tuple_prefix! {
    ByNameSubspace = (NAMESPACE, {namespace_id}, {name}, ?{create_ts});
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let given = std::env::args().nth(1);
    let dir = given.clone().map_or_else(
        || std::env::temp_dir().join(format!("strata-udb-{}", std::process::id())),
        std::path::PathBuf::from,
    );
    std::fs::create_dir_all(&dir)?;
    let options = Database::<RedbEngine>::store_options();
    let engine = RedbEngine::open(
        dir.join("udb.redb"),
        options.keyspace_specs(),
        RedbOptions::default(),
    )?;
    let db = Database::open(Store::open(engine, options)?)?;
    let ns = Uuid::from_u128(0x100);

    db.run("create_actors", |tx| {
        for n in 1..=3u128 {
            let actor_id = Uuid::from_u128(n);
            let ts = 1_730_000_000_000 + i64::try_from(n % 2).unwrap_or(0);
            tx.write(&WorkflowIdKey { actor_id }, &WorkflowId(n * 1000))?;
            tx.write(&CreateTsKey { actor_id }, &CreateTs(ts))?;
            tx.write(
                &ByNameKey {
                    namespace_id: ns,
                    name: "counter".into(),
                    create_ts: ts,
                    actor_id,
                },
                &WorkflowId(n * 1000),
            )?;
        }
        Ok(())
    })?;
    println!(
        "WorkflowIdKey(1) packs to {:02x?}",
        WorkflowIdKey {
            actor_id: Uuid::from_u128(1)
        }
        .pack()?
    );

    db.run("list_create_ts", |tx| {
        let range = KeyRange::tuple_prefix(&tuple::pack(&(ACTOR, DATA)));
        let entries = tx.get_ranges_keyvalues(&range, Isolation::Snapshot, None, false)?;
        let mut refused = 0;
        for entry in &entries {
            match tx.read_entry::<CreateTsKey>(entry) {
                Ok((key, ts)) => println!("actor {} created at {}", key.actor_id, ts.0),
                Err(UdbError::Key { .. }) => refused += 1,
                Err(e) => return Err(e),
            }
        }
        println!(
            "{} rows under (ACTOR, DATA), {refused} of another key type refused",
            entries.len()
        );
        Ok(())
    })?;

    for create_ts in [None, Some(1_730_000_000_001)] {
        let sub = ByNameSubspace {
            namespace_id: ns,
            name: "counter".into(),
            create_ts,
        };
        let n = db.run("by_name", |tx| {
            let range = KeyRange::tuple_prefix(&sub.pack().map_err(|source| UdbError::Key {
                key_type: "ByNameSubspace",
                source,
            })?);
            Ok(tx
                .get_ranges_keyvalues(&range, Isolation::Serializable, None, false)?
                .len())
        })?;
        println!("actors named counter, create_ts {create_ts:?}: {n}");
    }

    let key = CreateTsKey {
        actor_id: Uuid::from_u128(1),
    };
    let mut reader = db.begin();
    let seen = reader.ops().read(&key, Isolation::Serializable)?;
    let mut writer = db.begin();
    writer.ops().write(&key, &CreateTs(seen.0 + 1))?;
    writer.commit()?;
    reader.ops().write(
        &CreateTsKey {
            actor_id: Uuid::from_u128(9),
        },
        &seen,
    )?;
    match reader.commit() {
        Err(e) => println!("the serializable reader conflicts: {e}"),
        Ok(_) => println!("unexpected: the reader committed"),
    }
    drop(db);
    if given.is_none() {
        std::fs::remove_dir_all(&dir)?;
    }
    Ok(())
}
