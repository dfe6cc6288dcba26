//! NoKV's pins read the namespace as it was, checked against a model: the
//! kill test's script of 400 steps (files created, written, renamed over
//! others, hard-linked, unlinked) runs in one process with a pin taken
//! every 40 steps; afterwards, and again after `prune`, every pin resolves
//! each path of the model as it stood at the pin (through `lookup_at`
//! from the root, name by name) to an inode whose `getattr_at` gives the
//! model's size and link count, names of one file share one inode, and a
//! name the model did not have then is absent.
//!
//! And two clients sending that script at once, with the same request
//! ids (each resending what the other may have sent), apply each command
//! once: the namespace is the model's at the end, and the objects left
//! after the GC queue drains are exactly those the live files name.

use std::collections::BTreeMap;
use std::sync::Arc;

use strata_engine::Engine;
use strata_schemas::nokv::{FileType, InodeId, MemBlobs, Nokv, NokvConfig, ROOT};

use crate::nokv_kill::{
    CHUNK, Found, MOUNT, Model, matches, models, run_step, script, split, walk,
};
use crate::store_on;

fn specs() -> Vec<strata_engine::KeyspaceSpec> {
    Nokv::<strata_engine::MemEngine>::store_options().keyspace_specs()
}

/// Resolves `path` at pin `pin`, name by name from the root.
fn resolve<E: Engine>(fs: &Nokv<E>, pin: &str, path: &str) -> Option<(InodeId, FileType)> {
    if path.is_empty() {
        return Some((ROOT, FileType::Dir));
    }
    let (dir, name) = split(path);
    let (parent, kind) = resolve(fs, pin, dir)?;
    assert_eq!(kind, FileType::Dir, "{pin}: {dir} is not a directory");
    fs.lookup_at(MOUNT, pin, parent, name)
        .unwrap()
        .map(|d| (d.child, d.file_type))
}

/// Whether pin `pin` reads as `model`, against the paths of `later` too
/// (absent then unless the model had them); the first difference.
fn reads_as<E: Engine>(
    fs: &Nokv<E>,
    pin: &str,
    model: &Model,
    later: &Model,
) -> Result<(), String> {
    for dir in &model.dirs {
        match resolve(fs, pin, dir) {
            Some((_, FileType::Dir)) => {}
            other => return Err(format!("{pin}: directory {dir:?} reads as {other:?}")),
        }
    }
    let mut inode_of: BTreeMap<&str, InodeId> = BTreeMap::new();
    for (path, id) in &model.files {
        let Some((inode, kind)) = resolve(fs, pin, path) else {
            return Err(format!("{pin}: {path} is missing"));
        };
        if kind == FileType::Dir {
            return Err(format!("{pin}: {path} reads as a directory"));
        }
        let attr = fs
            .getattr_at(MOUNT, pin, inode)
            .unwrap()
            .ok_or_else(|| format!("{pin}: {path}'s inode {inode} is missing"))?;
        let names = model.files.values().filter(|&&i| i == *id).count() as u64;
        let size = model.bodies[id].0.len() as u64;
        if (attr.size, attr.link_count) != (size, names) {
            return Err(format!(
                "{pin}: {path}: size {} and {} links, the model's {size} and {names}",
                attr.size, attr.link_count
            ));
        }
        inode_of.insert(path, inode);
    }
    for (p, ip) in &inode_of {
        for (q, iq) in &inode_of {
            if (ip == iq) != (model.files[*p] == model.files[*q]) {
                return Err(format!("{pin}: {p} and {q}: inodes {ip} and {iq}"));
            }
        }
    }
    for path in later.files.keys() {
        if !model.files.contains_key(path) && resolve(fs, pin, path).is_some() {
            return Err(format!("{pin}: {path} did not exist then"));
        }
    }
    Ok(())
}

fn pins_read_the_namespace_as_it_was<E: Engine>(engine: E) {
    let (store, _clock) = store_on(engine, Nokv::<E>::store_options());
    let config = NokvConfig {
        chunk_bytes: CHUNK,
        ..NokvConfig::default()
    };
    let fs = Nokv::open(store, Arc::new(MemBlobs::default()), config).unwrap();
    fs.create_mount(MOUNT, "").unwrap();
    let script = script();
    let models = models(&script);
    let mut inodes = BTreeMap::from([(String::new(), ROOT)]);
    let mut pins = Vec::new();
    for (n, step) in script.iter().enumerate() {
        if n % 40 == 17 {
            fs.pin(MOUNT, &format!("p{n}"), 3_600_000).unwrap();
            pins.push(n);
        }
        run_step(&fs, &mut inodes, n, step);
    }
    let last = &models[script.len()];
    for &n in &pins {
        reads_as(&fs, &format!("p{n}"), &models[n], last).unwrap();
    }
    // Pruning keeps what the live pins read.
    let pruned = fs.prune(MOUNT).unwrap();
    for &n in &pins {
        reads_as(&fs, &format!("p{n}"), &models[n], last)
            .unwrap_or_else(|e| panic!("after pruning {pruned:?}: {e}"));
    }
    // The oldest pin ended: the others still read as they were.
    fs.unpin(MOUNT, &format!("p{}", pins[0])).unwrap();
    fs.prune(MOUNT).unwrap();
    for &n in &pins[1..] {
        reads_as(&fs, &format!("p{n}"), &models[n], last).unwrap();
    }
}

fn two_clients_sending_one_script_apply_it_once<E: Engine + Sync>(engine: E) {
    let (store, _clock) = store_on(engine, Nokv::<E>::store_options());
    let config = NokvConfig {
        chunk_bytes: CHUNK,
        ..NokvConfig::default()
    };
    let blobs = Arc::new(MemBlobs::default());
    let fs = Nokv::open(store, blobs.clone(), config).unwrap();
    fs.create_mount(MOUNT, "").unwrap();
    let script = script();
    std::thread::scope(|scope| {
        for _ in 0..2 {
            let (fs, script) = (&fs, &script);
            scope.spawn(move || {
                let mut inodes = BTreeMap::from([(String::new(), ROOT)]);
                for (n, step) in script.iter().enumerate() {
                    run_step(fs, &mut inodes, n, step);
                }
            });
        }
    });
    let report = fs.check(MOUNT).unwrap();
    assert!(report.is_ok(), "{:?}", report.problems);
    let mut found = Found::default();
    walk(&fs, ROOT, "", &mut found, 0);
    let last = &models(&script)[script.len()];
    matches(&found, last).unwrap();
    while fs.drain_gc(MOUNT, 64).unwrap() > 0 {}
    let mut named = std::collections::BTreeSet::new();
    for (p, (inode, _, bytes)) in &found.files {
        if let (_, Some(step)) = &last.bodies[&last.files[p]] {
            for i in 0..bytes.len().div_ceil(CHUNK) {
                named.insert(format!("{MOUNT}/{inode}/r{step}/{i}"));
            }
        }
    }
    // The copy of a write that did not apply deleted its objects and its
    // upload record before returning.
    assert_eq!(fs.collect_uploads(MOUNT, usize::MAX).unwrap(), 0);
    let kept = without_version(blobs.keys(), '/');
    assert_eq!(kept, named, "objects left over or lost");
}

/// Object names `{mount}{sep}{inode}{sep}{request}{sep}{version}{sep}{chunk}`
/// without the upload's version (which a model of the script cannot
/// know), checking that no two of them differ only by it: one upload's
/// objects a file.
pub(crate) fn without_version(
    names: impl IntoIterator<Item = String>,
    sep: char,
) -> std::collections::BTreeSet<String> {
    let names: Vec<String> = names.into_iter().collect();
    let left: std::collections::BTreeSet<String> = names
        .iter()
        .map(|n| {
            let parts: Vec<&str> = n.split(sep).collect();
            assert!(
                parts.len() == 5 && parts[3].parse::<u64>().is_ok(),
                "an object name: {n}"
            );
            [parts[0], parts[1], parts[2], parts[4]].join(&sep.to_string())
        })
        .collect();
    assert_eq!(
        left.len(),
        names.len(),
        "one upload's objects a file: {names:?}"
    );
    left
}

crate::on_each_engine!(
    pins_read_the_namespace_as_it_was,
    two_clients_sending_one_script_apply_it_once,
);
