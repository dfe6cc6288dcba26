//! The actor KV on an embedded redb database: an actor's logical keys
//! (user KV, queue, workflow, SQLite), puts within the engine's limits
//! (one refused with a typed error), a chunked value, lists with a `more`
//! flag, the exact quota with an overwrite near it, the client planners,
//! and a migration of the actor to the engine-compatible layout.
//!
//! `cargo run -p strata-examples --example actor_kv [DIR]`

use strata_engine_redb::{RedbEngine, RedbOptions};
use strata_schemas::actor_kv::client::{WriteBuffer, plan_sqlite_write, queue_message};
use strata_schemas::actor_kv::{
    ActorId, ActorKv, ActorKvConfig, ActorKvError, Layout, ListOptions, ListQuery, LogicalKey,
    PhysicalLayout, SqliteFile, WorkflowField,
};
use strata_store::Store;

#[allow(clippy::too_many_lines)] // one walk through, in order
fn main() -> Result<(), Box<dyn std::error::Error>> {
    let given = std::env::args().nth(1);
    let dir = given.clone().map_or_else(
        || std::env::temp_dir().join(format!("strata-actor-kv-{}", std::process::id())),
        std::path::PathBuf::from,
    );
    std::fs::create_dir_all(&dir)?;
    let options = ActorKv::<RedbEngine>::store_options();
    let engine = RedbEngine::open(
        dir.join("actors.redb"),
        options.keyspace_specs(),
        RedbOptions::default(),
    )?;
    let config = ActorKvConfig {
        quota_bytes: 400_000,
        ..ActorKvConfig::default()
    };
    let kv = ActorKv::open(Store::open(engine, options)?, config)?;
    let actor = ActorId::v1(0x5EED_0000_0000_0000_0000_0000_0000_0001, 1);
    let layout = Layout::Unversioned;
    println!("database: {}", dir.join("actors.redb").display());

    // User KV, the persisted state and a workflow field, in one put.
    let user = |k: &str| {
        LogicalKey::UserKv {
            key: k.as_bytes().to_vec(),
        }
        .encode(layout)
    };
    kv.put(
        actor,
        &[
            (user("profile/name"), b"ada".to_vec()),
            (user("profile/avatar"), vec![7; 40_000]),
            (
                LogicalKey::PersistData.encode(layout),
                b"{\"count\":1}".to_vec(),
            ),
            (
                LogicalKey::WorkflowField(WorkflowField::State).encode(layout),
                b"running".to_vec(),
            ),
        ],
    )?;
    let avatar = kv.get(actor, &[user("profile/avatar")])?;
    println!(
        "avatar: {} bytes (stored in 10,000-byte rows), usage {} of {} bytes",
        avatar[0].as_ref().map_or(0, |e| e.value.len()),
        kv.usage(actor)?,
        kv.config().quota_bytes
    );

    // The engine's limits, checked before anything is written.
    let refused = kv.put(actor, &[(user("huge"), vec![0; 200_000])]);
    if let Err(ActorKvError::ValueTooLarge { len, max, .. }) = &refused {
        println!("refused: a {len}-byte value (limit {max})");
    }
    let message = queue_message(1, layout, vec![0; 1 << 20]);
    println!("a 1 MiB queue message: {}", message.unwrap_err());

    // A list page with an honest `more`, and the next page after it.
    let prefix = ListQuery::Prefix(user("profile/"));
    let first = ListOptions {
        limit: Some(1),
        ..ListOptions::default()
    };
    let page = kv.list(actor, &prefix, &first)?;
    println!(
        "list profile/: {:?}, more = {}",
        String::from_utf8_lossy(&page.entries[0].key[1..]),
        page.more
    );
    if let Some(next) = page.next(&first) {
        let rest = kv.list(actor, &prefix, &next)?;
        println!(
            "next page: {:?}, more = {}",
            String::from_utf8_lossy(&rest.entries[0].key[1..]),
            rest.more
        );
    }

    // A SQLite write of 300 pages: planned into requests within the
    // limits, the file's metadata in the last one.
    let pages: Vec<_> = (0..300u32).map(|i| (i, vec![1; 1_000])).collect();
    let requests = plan_sqlite_write(
        SqliteFile::Main,
        layout,
        pages,
        300u64.to_be_bytes().to_vec(),
    )?;
    println!("SQLite: 300 pages in {} requests", requests.len());
    for request in &requests {
        kv.put(actor, request)?;
    }

    // The quota: near the limit, a new entry does not fit, but an
    // overwrite that shrinks or keeps the size does.
    let usage = kv.usage(actor)?;
    let left = usize::try_from(kv.config().quota_bytes - usage)?;
    println!("usage {usage}, {left} bytes left");
    let too_big = kv.put(actor, &[(user("extra"), vec![1; left])]);
    println!("a new {left}-byte value: {}", too_big.unwrap_err());
    kv.put(
        actor,
        &[(user("profile/avatar"), vec![8; 40_000 + left - 100])],
    )?;
    println!("avatar overwritten in place: usage {}", kv.usage(actor)?);

    // A write buffer (a workflow's dirty state): entries leave it only
    // once their commit succeeded.
    let mut buffer = WriteBuffer::new();
    buffer.put(
        LogicalKey::WorkflowField(WorkflowField::Output).encode(layout),
        b"done".to_vec(),
    )?;
    buffer.delete(LogicalKey::WorkflowField(WorkflowField::State).encode(layout))?;
    let flushed = buffer.flush(&kv, actor)?;
    println!(
        "flushed {} entries in {} requests; dirty = {}",
        flushed.entries,
        flushed.requests,
        buffer.is_dirty()
    );

    // Move the actor to the engine's own layout, 50 entries per commit.
    let migrated = kv.migrate_all(actor, PhysicalLayout::Compatible, 50)?;
    println!(
        "migrated {migrated} entries to {:?}; recount {} = usage {}",
        kv.layout(actor)?.0,
        kv.recount(actor)?,
        kv.usage(actor)?
    );

    drop(kv);
    if given.is_none() {
        std::fs::remove_dir_all(&dir)?;
    }
    Ok(())
}
