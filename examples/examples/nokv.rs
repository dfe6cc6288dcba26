//! NoKV file-system metadata on an embedded redb database: a mount, a few
//! directories and files, a body in chunks, ReadDirPlus, a replayed
//! command, a rename refused because it would move a directory under
//! itself, a snapshot pin read after changes, the path index, the watch
//! log and the GC queue.
//!
//! `cargo run -p strata-examples --example nokv [DIR]`

use std::sync::Arc;

use strata_engine_redb::{RedbEngine, RedbOptions};
use strata_schemas::nokv::{Executed, MemBlobs, Nokv, NokvConfig, NokvError, ROOT};
use strata_store::Store;

fn inode(e: &Executed) -> u64 {
    e.outcome().inode.unwrap_or_default()
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let given = std::env::args().nth(1);
    let dir = given.clone().map_or_else(
        || std::env::temp_dir().join(format!("strata-nokv-{}", std::process::id())),
        std::path::PathBuf::from,
    );
    std::fs::create_dir_all(&dir)?;
    let options = Nokv::<RedbEngine>::store_options();
    let engine = RedbEngine::open(
        dir.join("meta.redb"),
        options.keyspace_specs(),
        RedbOptions::default(),
    )?;
    let blobs = Arc::new(MemBlobs::default());
    let config = NokvConfig {
        chunk_bytes: 16,
        ..NokvConfig::default()
    };
    let fs = Nokv::open(Store::open(engine, options)?, blobs.clone(), config)?;
    println!("database: {}", dir.join("meta.redb").display());
    let m = 1;
    fs.create_mount(m, "example")?;

    let proj = inode(&fs.mkdir(m, "req-1", ROOT, "project", 0o755)?);
    let src = inode(&fs.mkdir(m, "req-2", proj, "src", 0o755)?);
    let main = inode(&fs.create(m, "req-3", src, "main.rs", 0o644)?);
    fs.write(m, "req-4", main, b"fn main() { println!(\"hello\"); }")?;
    println!(
        "wrote main.rs: {} bytes in {} chunks of 16",
        fs.getattr(m, main)?.map_or(0, |a| a.size),
        blobs.keys().len()
    );
    for (name, entry) in fs.readdirplus(m, src)? {
        println!(
            "readdirplus src: {name} -> inode {} ({:?}, {} bytes, mode {:o})",
            entry.child, entry.file_type, entry.projection.size, entry.projection.mode
        );
    }

    // A command replayed with its request id is answered, not applied.
    let again = fs.create(m, "req-3", src, "main.rs", 0o644)?;
    println!("replaying req-3: {again:?}");

    // A directory never moves under itself.
    match fs.rename(m, "req-5", ROOT, "project", src, "loop") {
        Err(NokvError::WouldCreateCycle(d)) => {
            println!("rename refused: {d} would be under itself");
        }
        other => println!("rename: {other:?}"),
    }

    // A pin sees the namespace as of its commit.
    fs.pin(m, "before-rename", 60_000)?;
    fs.rename(m, "req-6", src, "main.rs", proj, "main.rs")?;
    println!(
        "after the rename: src/main.rs now {:?}; through the pin {:?}",
        fs.lookup(m, src, "main.rs")?.map(|d| d.child),
        fs.lookup_at(m, "before-rename", src, "main.rs")?
            .map(|d| d.child)
    );

    // The path index, verified against the dentries.
    fs.index_path(m, "ws", "/project/main.rs")?;
    println!(
        "path /project/main.rs: {:?}",
        fs.lookup_path(m, "ws", "/project/main.rs")?
    );

    // The watch log of the project directory, in commit order.
    for (version, event) in fs.watch_events(m, proj)? {
        println!("watch project @{version}: {event:?}");
    }

    // Removing the file queues its blocks; the GC drains them.
    fs.unlink(m, "req-7", proj, "main.rs")?;
    println!(
        "unlinked; {} blocks queued and drained",
        fs.drain_gc(m, 100)?
    );
    fs.unpin(m, "before-rename")?;
    println!("pruned: {:?}", fs.prune(m)?);
    // Uploads of writes that never reached their command (a writer that
    // died between the two) are collected once past their grace: none
    // here, every write applied.
    println!("uploads collected: {}", fs.collect_uploads(m, 100)?);

    drop(fs);
    if given.is_none() {
        std::fs::remove_dir_all(&dir)?;
    }
    Ok(())
}
