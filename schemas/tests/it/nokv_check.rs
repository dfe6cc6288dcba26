//! NoKV's namespace checked whole (`check_namespace`), against damage
//! written behind the module's back; and directories renamed under one
//! another by four threads at once, which stay one tree.

use std::collections::BTreeMap;

use strata_engine::Engine;
use strata_schemas::nokv::{NokvError, ROOT};

use crate::nokv::{Fs, M, created, open, specs};

/// Directories renamed under one another by four threads at once (each
/// move to a random directory, some of which would close a cycle): the
/// namespace stays one tree. Every directory is reached from the root
/// exactly once, its parent index names the place the walk found it, and
/// every refusal is one a rename may give. (Every command of a mount
/// takes the mount's counter, so these renames serialise on it; the walk
/// up from the target, a predicate per step, is what fences a plan that
/// another command overtakes, which the simulation checks.)
fn concurrent_renames_keep_one_tree<E: Engine + Sync>(engine: E) {
    const DIRS: u64 = 8;
    let Fs { nokv: fs, .. } = open(engine);
    let dirs: Vec<u64> = (0..DIRS)
        .map(|i| {
            created(
                &fs.mkdir(M, &format!("m{i}"), ROOT, &format!("d{i}"), 0o755)
                    .unwrap(),
            )
        })
        .collect();
    let moved = std::sync::atomic::AtomicU64::new(0);
    std::thread::scope(|scope| {
        for t in 0..4u64 {
            let (fs, dirs, moved) = (&fs, &dirs, &moved);
            scope.spawn(move || {
                use strata_engine::Rng;
                let mut rng = strata_engine::SeededRng::new(t);
                for n in 0..150 {
                    let i = usize::try_from(rng.below(DIRS)).unwrap();
                    let x = dirs[i];
                    let to = match rng.below(DIRS + 1) {
                        DIRS => ROOT,
                        j => dirs[usize::try_from(j).unwrap()],
                    };
                    let Some((from, name)) = fs.links(M, x).unwrap().into_iter().next() else {
                        panic!("directory {x} has no parent");
                    };
                    match fs.rename(M, &format!("t{t}-{n}"), from, &name, to, &format!("d{i}")) {
                        Ok(_) => {
                            moved.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        }
                        Err(
                            NokvError::WouldCreateCycle(_)
                            | NokvError::NotFound(_)
                            | NokvError::PredicateFailed { .. },
                        ) => {}
                        Err(e) => panic!("rename of {x} into {to}: {e}"),
                    }
                }
            });
        }
    });
    assert!(
        moved.load(std::sync::atomic::Ordering::Relaxed) > 20,
        "renames went through"
    );
    // One tree: each directory reached once from the root, at the place
    // its parent index names.
    let mut seen = BTreeMap::new();
    let mut stack = vec![ROOT];
    while let Some(dir) = stack.pop() {
        for (name, d) in fs.readdirplus(M, dir).unwrap() {
            assert!(
                seen.insert(d.child, (dir, name.clone())).is_none(),
                "{} reached twice",
                d.child
            );
            assert!(
                seen.len() <= dirs.len(),
                "more entries than directories: a cycle"
            );
            assert_eq!(
                d.projection,
                strata_schemas::nokv::Projection::of(&fs.getattr(M, d.child).unwrap().unwrap())
            );
            stack.push(d.child);
        }
    }
    assert_eq!(
        seen.len(),
        dirs.len(),
        "every directory reached from the root"
    );
    let report = fs.check(M).unwrap();
    assert!(report.is_ok(), "{:?}", report.problems);
    for (x, place) in &seen {
        assert_eq!(
            fs.links(M, *x).unwrap(),
            std::slice::from_ref(place),
            "directory {x}'s parent index"
        );
    }
}

/// `check` finds each kind of damage to the namespace's rows, written
/// behind the module's back, and nothing on the namespace before.
#[allow(clippy::too_many_lines)] // one damage after another, each undone
fn check_finds_what_is_wrong_with_the_namespace<E: Engine>(engine: E) {
    use strata_schemas::nokv::NamespaceProblem as P;
    use strata_schemas::nokv::keys::{DentryKey, InodeKey, ManifestKey, ParentKey};
    let Fs { nokv: fs, .. } = open(engine);
    let d = created(&fs.mkdir(M, "m1", ROOT, "d", 0o755).unwrap());
    let e = created(&fs.mkdir(M, "m2", d, "e", 0o755).unwrap());
    let f = created(&fs.create(M, "c1", d, "f", 0o644).unwrap());
    fs.link(M, "l1", f, ROOT, "g").unwrap();
    fs.write(M, "w1", f, b"twelve bytes").unwrap();
    let g = created(&fs.create(M, "c2", e, "h", 0o644).unwrap());
    let clean = fs.check(M).unwrap();
    assert!(clean.is_ok(), "{:?}", clean.problems);
    assert_eq!((clean.inodes, clean.dentries), (5, 5));
    let store = fs.store();
    let check = || fs.check(M).unwrap().problems;
    let dentry = |parent, name: &str| DentryKey {
        mount: M,
        parent,
        name: name.into(),
    };
    let parent_row = |child, parent, name: &str| ParentKey {
        mount: M,
        child,
        parent,
        name: name.into(),
    };
    // A parent-index row gone.
    let row = store.get(&parent_row(f, ROOT, "g")).unwrap().unwrap();
    store.delete(&parent_row(f, ROOT, "g")).unwrap();
    assert_eq!(
        check(),
        [P::NoParentRow {
            parent: ROOT,
            name: "g".into()
        }]
    );
    // One of another dentry generation (the name's earlier life).
    let older = strata_schemas::nokv::ParentLink {
        dentry_generation: row.dentry_generation - 1,
    };
    store.put(&parent_row(f, ROOT, "g"), &older).unwrap();
    assert_eq!(
        check(),
        [P::NoParentRow {
            parent: ROOT,
            name: "g".into()
        }]
    );
    store.put(&parent_row(f, ROOT, "g"), &row).unwrap();
    // A link count off by one: the inode's, and so the projections.
    let attr = fs.getattr(M, f).unwrap().unwrap();
    let off = strata_schemas::nokv::InodeAttr {
        link_count: 3,
        ..attr.clone()
    };
    store.put(&InodeKey { mount: M, inode: f }, &off).unwrap();
    assert_eq!(
        check(),
        [
            P::StaleProjection {
                parent: ROOT,
                name: "g".into()
            },
            P::StaleProjection {
                parent: d,
                name: "f".into()
            },
            P::LinkCount {
                inode: f,
                recorded: 3,
                names: 2
            },
        ]
    );
    store.put(&InodeKey { mount: M, inode: f }, &attr).unwrap();
    // A dentry naming no inode.
    let mut stray = store.get(&dentry(d, "f")).unwrap().unwrap();
    stray.child = 99;
    store.put(&dentry(d, "x"), &stray).unwrap();
    assert_eq!(
        check(),
        [
            P::Dangling {
                parent: d,
                name: "x".into(),
                child: 99
            },
            P::NoParentRow {
                parent: d,
                name: "x".into()
            },
        ]
    );
    store.delete(&dentry(d, "x")).unwrap();
    // A dentry under a file.
    store.put(&dentry(f, "inside"), &stray).unwrap();
    assert_eq!(
        check(),
        [
            P::NotInADirectory {
                parent: f,
                name: "inside".into()
            },
            P::Dangling {
                parent: f,
                name: "inside".into(),
                child: 99
            },
            P::NoParentRow {
                parent: f,
                name: "inside".into()
            },
        ]
    );
    store.delete(&dentry(f, "inside")).unwrap();
    // A directory's dentry gone: it and what is under it cut off.
    let cut = store.get(&dentry(d, "e")).unwrap().unwrap();
    store.delete(&dentry(d, "e")).unwrap();
    assert_eq!(
        check(),
        [
            P::OrphanParentRow {
                child: e,
                parent: d,
                name: "e".into()
            },
            P::Unreachable { inode: e },
            P::Unreachable { inode: g },
        ]
    );
    store.put(&dentry(d, "e"), &cut).unwrap();
    // A directory under itself, and named twice.
    store.put(&dentry(e, "loop"), &cut).unwrap();
    let problems = check();
    assert!(
        problems.contains(&P::DirectoryNamedTwice { inode: e, names: 2 }),
        "{problems:?}"
    );
    store.delete(&dentry(e, "loop")).unwrap();
    // A block's size changed in the manifest, then a chunk gone.
    let body = fs.getattr(M, f).unwrap().unwrap().body.unwrap();
    let chunk = ManifestKey {
        mount: M,
        inode: f,
        generation: body.manifest_generation,
        chunk: 1,
    };
    let strata_schemas::nokv::ManifestRow::Chunk(mut grown) = store.get(&chunk).unwrap().unwrap()
    else {
        panic!("chunk 1 is a chunk row");
    };
    grown[0].size += 1;
    store
        .put(&chunk, &strata_schemas::nokv::ManifestRow::Chunk(grown))
        .unwrap();
    assert!(
        matches!(&check()[..], [P::Body { inode, problem: strata_schemas::nokv::BodyProblem::Size { chunks: 3, bytes: 13, want_chunks: 3, want_bytes: 12 } }] if *inode == f),
        "{:?}",
        check()
    );
    store.delete(&chunk).unwrap();
    assert!(
        matches!(&check()[..], [P::Body { inode, problem: strata_schemas::nokv::BodyProblem::OutOfPlace(2) }] if *inode == f),
        "{:?}",
        check()
    );
}

crate::on_each_engine!(
    check_finds_what_is_wrong_with_the_namespace,
    concurrent_renames_keep_one_tree,
);
