//! NoKV metadata on every engine: the namespace operations, the command
//! boundary (dedupe, predicates), watch events, pins and history, the path
//! index, bodies and the GC queue, retention.

#![allow(clippy::many_single_char_names)]

use std::collections::BTreeMap;
use std::sync::Arc;

use strata_engine::{Engine, KeyspaceSpec, ManualClock};
use strata_keys::KeyRange;
use strata_schemas::nokv::{
    BlobStore, CommandKind, Executed, FileType, HISTORY_SPACE, MemBlobs, MetaMutation,
    MetaPredicate, MetadataCommand, Nokv, NokvConfig, NokvError, Outcome, PathHit, PinProblem,
    ROOT, WatchEvent,
};

use strata_schemas::nokv::keys::ManifestKey;

use crate::{START_MS, store_on};

pub(crate) const M: u64 = 7;

pub(crate) fn specs() -> Vec<KeyspaceSpec> {
    Nokv::<strata_engine::MemEngine>::store_options().keyspace_specs()
}

pub(crate) struct Fs<E: Engine> {
    pub(crate) nokv: Nokv<E>,
    pub(crate) blobs: Arc<MemBlobs>,
    pub(crate) clock: Arc<ManualClock>,
}

pub(crate) fn open<E: Engine>(engine: E) -> Fs<E> {
    let (store, clock) = store_on(engine, Nokv::<E>::store_options());
    let blobs = Arc::new(MemBlobs::default());
    let config = NokvConfig {
        chunk_bytes: 4,
        watch_keep_per_scope: 3,
        ..NokvConfig::default()
    };
    let fs = Nokv::open(store, blobs.clone(), config).unwrap();
    fs.create_mount(M, "").unwrap();
    Fs {
        nokv: fs,
        blobs,
        clock,
    }
}

pub(crate) fn created(e: &Executed) -> u64 {
    e.outcome().inode.expect("an inode")
}

fn names<E: Engine>(fs: &Nokv<E>, dir: u64) -> Vec<String> {
    fs.readdirplus(M, dir)
        .unwrap()
        .into_iter()
        .map(|(n, _)| n)
        .collect()
}

fn history_rows<E: Engine>(fs: &Nokv<E>) -> usize {
    let space = fs.store().space(HISTORY_SPACE).unwrap();
    let mut tx = fs.store().begin();
    tx.snapshot_scan_in(&space, &KeyRange::prefix(&[]), None, false)
        .unwrap()
        .rows
        .len()
}

/// mkdir, create, lookup and readdirplus (names in order, each with its
/// inode projection); refused names and places.
fn namespace_basics<E: Engine>(engine: E) {
    let Fs { nokv: fs, .. } = open(engine);
    let docs = created(&fs.mkdir(M, "r1", ROOT, "docs", 0o750).unwrap());
    let b = created(&fs.create(M, "r2", docs, "b.txt", 0o640).unwrap());
    let a = created(&fs.create(M, "r3", docs, "a.txt", 0o600).unwrap());
    assert_ne!(a, b);
    assert_eq!(names(&fs, docs), ["a.txt", "b.txt"]);
    let listing = fs.readdirplus(M, docs).unwrap();
    assert_eq!(listing[0].1.child, a);
    assert_eq!(listing[0].1.projection.mode, 0o600);
    assert_eq!(listing[1].1.projection.link_count, 1);
    assert_eq!(
        fs.lookup(M, ROOT, "docs").unwrap().unwrap().file_type,
        FileType::Dir
    );
    assert_eq!(fs.getattr(M, b).unwrap().unwrap().mode, 0o640);
    assert!(matches!(
        fs.create(M, "r4", docs, "a.txt", 0o600),
        Err(NokvError::Exists { .. })
    ));
    for bad in ["", ".", "..", "x/y", "n\0"] {
        assert!(matches!(
            fs.create(M, "r5", docs, bad, 0o600),
            Err(NokvError::InvalidName { .. })
        ));
    }
    assert!(matches!(
        fs.create(M, "r6", a, "x", 0o600),
        Err(NokvError::NotADirectory(_))
    ));
    assert!(matches!(
        fs.mkdir(M, "r7", 999, "x", 0o700),
        Err(NokvError::NotFound(_))
    ));
}

/// A replayed request id returns the first outcome and applies nothing; a
/// failed predicate applies nothing, dedupe row included.
fn commands_dedupe_and_fence<E: Engine>(engine: E) {
    let Fs { nokv: fs, .. } = open(engine);
    let first = fs.create(M, "same", ROOT, "f", 0o600).unwrap();
    assert!(matches!(first, Executed::Applied(_, Some(_))));
    let again = fs.create(M, "same", ROOT, "g", 0o600).unwrap();
    assert_eq!(again, Executed::Replayed(first.outcome().clone()));
    assert_eq!(names(&fs, ROOT), ["f"], "the replay applied nothing");
    // The very same request, whose plan would now fail (the name exists):
    // still the first outcome.
    assert_eq!(
        fs.create(M, "same", ROOT, "f", 0o600).unwrap(),
        Executed::Replayed(first.outcome().clone())
    );
    // A hand-built command whose second predicate fails.
    let cmd = MetadataCommand {
        mount: M,
        request_id: "fenced".into(),
        kind: CommandKind::Unlink,
        read_version: 0,
        predicates: vec![
            MetaPredicate::Dentry(ROOT, "f".into(), Some((created(&first), u64::MAX))),
            MetaPredicate::Dentry(ROOT, "nope".into(), None),
        ],
        mutations: vec![MetaMutation::DeleteDentry(ROOT, "f".into())],
        watch: vec![(
            ROOT,
            WatchEvent::Unbound {
                parent: ROOT,
                name: "f".into(),
            },
        )],
        outcome: Outcome {
            inode: None,
            released: None,
        },
    };
    assert!(matches!(
        fs.execute(&cmd),
        Err(NokvError::PredicateFailed { index: 0, .. })
    ));
    assert_eq!(names(&fs, ROOT), ["f"]);
    let events = fs.watch_events(M, ROOT).unwrap();
    assert_eq!(events.len(), 1, "only the create's event");
    // With true predicates the same command applies, once.
    let d = fs.lookup(M, ROOT, "f").unwrap().unwrap();
    let good = MetadataCommand {
        predicates: vec![MetaPredicate::Dentry(
            ROOT,
            "f".into(),
            Some((d.child, d.generation)),
        )],
        ..cmd
    };
    assert!(matches!(fs.execute(&good).unwrap(), Executed::Applied(..)));
    assert!(matches!(fs.execute(&good).unwrap(), Executed::Replayed(_)));
    assert!(names(&fs, ROOT).is_empty());
}

/// Hard links: counts, the projection of every name, and the inode and its
/// body released with the last link, blocks drained from the object store.
fn links_projections_and_gc<E: Engine>(engine: E) {
    let Fs {
        nokv: fs,
        blobs,
        clock,
    } = open(engine);
    let dir = created(&fs.mkdir(M, "d", ROOT, "d", 0o755).unwrap());
    let f = created(&fs.create(M, "c", ROOT, "f", 0o600).unwrap());
    assert_eq!(fs.getattr(M, f).unwrap().unwrap().generation, 1);
    fs.link(M, "l", f, dir, "g").unwrap();
    let linked = fs.getattr(M, f).unwrap().unwrap();
    assert_eq!((linked.link_count, linked.generation), (2, 2));
    // The link took a dentry generation of its own: the next name gets
    // another.
    fs.create(M, "c2", dir, "other", 0o600).unwrap();
    assert_ne!(
        fs.lookup(M, dir, "g").unwrap().unwrap().generation,
        fs.lookup(M, dir, "other").unwrap().unwrap().generation
    );
    fs.unlink(M, "c3", dir, "other").unwrap();
    clock.advance(5_000);
    fs.setattr(M, "s", f, 0o644).unwrap();
    let set = fs.getattr(M, f).unwrap().unwrap();
    assert_eq!((set.generation, set.mtime_ms), (3, START_MS + 5_000));
    for (parent, name) in [(ROOT, "f"), (dir, "g")] {
        let p = fs.lookup(M, parent, name).unwrap().unwrap().projection;
        assert_eq!((p.mode, p.link_count), (0o644, 2), "{name}");
    }
    let mut links = fs.links(M, f).unwrap();
    links.sort();
    assert_eq!(links, [(ROOT, "f".to_owned()), (dir, "g".to_owned())]);
    assert!(matches!(
        fs.link(M, "l2", dir, ROOT, "dd"),
        Err(NokvError::IsADirectory(_))
    ));
    fs.write(M, "w", f, b"hello world").unwrap();
    assert_eq!(fs.read(M, f).unwrap(), b"hello world");
    assert_eq!(blobs.keys().len(), 3, "three 4-byte chunks");
    let gen_before = fs.getattr(M, f).unwrap().unwrap().generation;
    let u = fs.unlink(M, "u1", ROOT, "f").unwrap();
    assert_eq!(u.outcome().released, None);
    assert_eq!(
        fs.getattr(M, f).unwrap().unwrap().generation,
        gen_before + 1,
        "losing a name changes the inode"
    );
    let p = fs.lookup(M, dir, "g").unwrap().unwrap().projection;
    assert_eq!(p.link_count, 1, "the remaining name's projection follows");
    let u = fs.unlink(M, "u2", dir, "g").unwrap();
    assert_eq!(u.outcome().released, Some(f));
    assert!(fs.getattr(M, f).unwrap().is_none());
    assert_eq!(
        blobs.keys().len(),
        3,
        "blocks stay until the GC drains them"
    );
    assert_eq!(fs.drain_gc(M, 2).unwrap(), 2);
    assert_eq!(fs.drain_gc(M, 10).unwrap(), 1);
    assert!(blobs.keys().is_empty());
    assert_eq!(fs.drain_gc(M, 10).unwrap(), 0);
    // A directory goes only when empty.
    let sub = created(&fs.mkdir(M, "m2", dir, "sub", 0o755).unwrap());
    assert!(matches!(
        fs.unlink(M, "u3", ROOT, "d"),
        Err(NokvError::NotEmpty(x)) if x == dir
    ));
    fs.unlink(M, "u4", dir, "sub").unwrap();
    assert!(fs.getattr(M, sub).unwrap().is_none());
    fs.unlink(M, "u5", ROOT, "d").unwrap();
    assert!(names(&fs, ROOT).is_empty());
}

/// Bodies: chunked, read back checked; an overwrite moves to a new
/// manifest generation and queues the old blocks.
fn bodies_are_manifests<E: Engine>(engine: E) {
    let Fs {
        nokv: fs, blobs, ..
    } = open(engine);
    let f = created(&fs.create(M, "c", ROOT, "f", 0o600).unwrap());
    assert_eq!(fs.read(M, f).unwrap(), b"");
    fs.write(M, "w1", f, b"0123456789").unwrap();
    let attr = fs.getattr(M, f).unwrap().unwrap();
    assert_eq!(attr.size, 10);
    let body = attr.body.unwrap();
    assert_eq!((body.manifest_generation, body.chunks), (1, 3));
    fs.write(M, "w2", f, b"abc").unwrap();
    assert_eq!(fs.read(M, f).unwrap(), b"abc");
    assert_eq!(
        fs.getattr(M, f)
            .unwrap()
            .unwrap()
            .body
            .unwrap()
            .manifest_generation,
        2
    );
    assert_eq!(fs.drain_gc(M, 100).unwrap(), 3);
    // One object left: `{mount}/{inode}/{request}/{upload version}/{chunk}`.
    let left = blobs.keys();
    assert_eq!(left.len(), 1, "{left:?}");
    let parts: Vec<&str> = left[0].split('/').collect();
    assert_eq!(
        (parts[0], parts[1], parts[2], parts[4]),
        (M.to_string().as_str(), f.to_string().as_str(), "w2", "0"),
        "{left:?}"
    );
    assert!(
        parts.len() == 5 && parts[3].parse::<u64>().is_ok(),
        "{left:?}"
    );
    // A damaged object is a typed error.
    blobs.put(&left[0], b"abd").unwrap();
    assert!(matches!(fs.read(M, f), Err(NokvError::Body { .. })));
    blobs.delete(&left[0]).unwrap();
    assert!(matches!(fs.read(M, f), Err(NokvError::Body { .. })));
}

/// Renames: within and across directories, over a file (released), over an
/// empty directory, never over a non-empty one, never a directory under
/// itself; two names of one file.
fn renames<E: Engine>(engine: E) {
    let Fs { nokv: fs, .. } = open(engine);
    let a = created(&fs.mkdir(M, "1", ROOT, "a", 0o755).unwrap());
    let b = created(&fs.mkdir(M, "2", a, "b", 0o755).unwrap());
    let c = created(&fs.mkdir(M, "3", b, "c", 0o755).unwrap());
    let x = created(&fs.create(M, "4", ROOT, "x", 0o600).unwrap());
    let y = created(&fs.create(M, "5", c, "y", 0o600).unwrap());
    // A directory under itself, or under its own descendant.
    for (i, target) in [a, b, c].into_iter().enumerate() {
        assert!(
            matches!(
                fs.rename(M, &format!("cyc{i}"), ROOT, "a", target, "moved"),
                Err(NokvError::WouldCreateCycle(d)) if d == a
            ),
            "into {target}"
        );
    }
    assert!(matches!(
        fs.rename(M, "cyc3", a, "b", c, "b2"),
        Err(NokvError::WouldCreateCycle(_))
    ));
    // Across directories, then over an existing file.
    fs.rename(M, "6", ROOT, "x", b, "x2").unwrap();
    assert_eq!(fs.lookup(M, b, "x2").unwrap().unwrap().child, x);
    assert!(fs.lookup(M, ROOT, "x").unwrap().is_none());
    assert_eq!(fs.links(M, x).unwrap(), [(b, "x2".to_owned())]);
    let r = fs.rename(M, "7", c, "y", b, "x2").unwrap();
    assert_eq!(r.outcome().released, Some(x));
    assert!(fs.getattr(M, x).unwrap().is_none());
    assert_eq!(fs.lookup(M, b, "x2").unwrap().unwrap().child, y);
    // A directory over a non-empty directory, then over an empty one.
    let e = created(&fs.mkdir(M, "8", ROOT, "e", 0o755).unwrap());
    fs.create(M, "9", e, "keep", 0o600).unwrap();
    assert!(matches!(
        fs.rename(M, "10", b, "c", ROOT, "e"),
        Err(NokvError::NotEmpty(d)) if d == e
    ));
    fs.unlink(M, "11", e, "keep").unwrap();
    fs.rename(M, "12", b, "c", ROOT, "e").unwrap();
    assert_eq!(fs.lookup(M, ROOT, "e").unwrap().unwrap().child, c);
    assert!(fs.getattr(M, e).unwrap().is_none());
    // A file over a directory and a directory over a file are refused.
    assert!(matches!(
        fs.rename(M, "13", b, "x2", ROOT, "a"),
        Err(NokvError::IsADirectory(_))
    ));
    assert!(matches!(
        fs.rename(M, "14", ROOT, "e", b, "x2"),
        Err(NokvError::NotADirectory(_))
    ));
    // Two names of one file: renaming one over the other leaves one.
    fs.link(M, "15", y, ROOT, "y1").unwrap();
    fs.rename(M, "16", ROOT, "y1", b, "x2").unwrap();
    assert!(fs.lookup(M, ROOT, "y1").unwrap().is_none());
    assert_eq!(fs.getattr(M, y).unwrap().unwrap().link_count, 1);
    assert_eq!(names(&fs, ROOT), ["a", "e"]);
    assert_eq!(names(&fs, b), ["x2"]);
}

/// A rename planned, then overtaken by another change, is refused by its
/// predicates when executed: nothing applies.
fn a_stale_plan_is_refused<E: Engine>(engine: E) {
    let Fs { nokv: fs, .. } = open(engine);
    let d = created(&fs.mkdir(M, "1", ROOT, "d", 0o755).unwrap());
    fs.create(M, "2", ROOT, "f", 0o600).unwrap();
    let plan = fs.plan_rename(M, "3", ROOT, "f", d, "g").unwrap();
    assert_eq!(plan.kind, CommandKind::Rename);
    assert_eq!(
        plan.read_version,
        fs.store().read().unwrap().version().unwrap(),
        "planned at the current version"
    );
    fs.unlink(M, "4", ROOT, "f").unwrap();
    assert!(matches!(
        fs.execute(&plan),
        Err(NokvError::PredicateFailed { .. })
    ));
    assert!(names(&fs, d).is_empty());
    // Planned and executed with nothing in between, it applies.
    fs.create(M, "5", ROOT, "f", 0o600).unwrap();
    let plan = fs.plan_rename(M, "6", ROOT, "f", d, "g").unwrap();
    assert!(matches!(fs.execute(&plan).unwrap(), Executed::Applied(..)));
    assert_eq!(names(&fs, d), ["g"]);
}

/// The watch log of a directory replays to its entries.
fn the_watch_log_replays_to_the_state<E: Engine>(engine: E) {
    let Fs { nokv: fs, .. } = open(engine);
    let d = created(&fs.mkdir(M, "1", ROOT, "d", 0o755).unwrap());
    let f = created(&fs.create(M, "2", d, "f", 0o600).unwrap());
    fs.create(M, "3", d, "g", 0o600).unwrap();
    fs.rename(M, "4", d, "g", d, "h").unwrap();
    fs.link(M, "5", f, d, "f2").unwrap();
    fs.unlink(M, "6", d, "f").unwrap();
    let events = fs.watch_events(M, d).unwrap();
    let mut replay: BTreeMap<String, u64> = BTreeMap::new();
    let mut last = 0;
    for (version, e) in events {
        assert!(version >= last, "commit order");
        last = version;
        match e {
            WatchEvent::Bound { name, child, .. } => {
                replay.insert(name, child);
            }
            WatchEvent::Unbound { name, .. } => {
                replay.remove(&name);
            }
            WatchEvent::Changed { .. } => {}
        }
    }
    let now: BTreeMap<String, u64> = fs
        .readdirplus(M, d)
        .unwrap()
        .into_iter()
        .map(|(n, e)| (n, e.child))
        .collect();
    assert_eq!(replay, now);
}

/// A pin sees the mount as of its commit, through history rows written only
/// while it is live; its lease ends; pruning keeps what live pins need.
fn pins_read_history<E: Engine>(engine: E) {
    let Fs {
        nokv: fs, clock, ..
    } = open(engine);
    let f = created(&fs.create(M, "1", ROOT, "f", 0o600).unwrap());
    assert_eq!(history_rows(&fs), 0, "no pin, no history");
    fs.pin(M, "snap", 60_000).unwrap();
    fs.setattr(M, "2", f, 0o644).unwrap();
    fs.setattr(M, "3", f, 0o444).unwrap();
    fs.rename(M, "4", ROOT, "f", ROOT, "g").unwrap();
    fs.create(M, "5", ROOT, "new", 0o600).unwrap();
    assert!(history_rows(&fs) > 0);
    assert_eq!(fs.getattr_at(M, "snap", f).unwrap().unwrap().mode, 0o600);
    assert_eq!(fs.getattr(M, f).unwrap().unwrap().mode, 0o444);
    assert_eq!(
        fs.lookup_at(M, "snap", ROOT, "f").unwrap().unwrap().child,
        f
    );
    assert!(fs.lookup_at(M, "snap", ROOT, "g").unwrap().is_none());
    assert!(fs.lookup_at(M, "snap", ROOT, "new").unwrap().is_none());
    // A later pin sees the later state.
    fs.pin(M, "later", 60_000).unwrap();
    fs.setattr(M, "6", f, 0o400).unwrap();
    assert_eq!(fs.getattr_at(M, "later", f).unwrap().unwrap().mode, 0o444);
    assert_eq!(fs.getattr_at(M, "snap", f).unwrap().unwrap().mode, 0o600);
    assert!(matches!(
        fs.getattr_at(M, "none", f),
        Err(NokvError::Pin {
            problem: PinProblem::Unknown,
            ..
        })
    ));
    // Pruning with both pins live keeps their history.
    fs.prune(M).unwrap();
    assert_eq!(fs.getattr_at(M, "snap", f).unwrap().unwrap().mode, 0o600);
    // The lease ends: the pin is refused, then pruned with all history.
    clock.advance(60_001);
    assert!(matches!(
        fs.getattr_at(M, "snap", f),
        Err(NokvError::Pin {
            problem: PinProblem::Ended,
            ..
        })
    ));
    let pruned = fs.prune(M).unwrap();
    assert_eq!(pruned.pins, 2);
    assert!(pruned.history > 0);
    assert_eq!(history_rows(&fs), 0);
    fs.setattr(M, "7", f, 0o600).unwrap();
    assert_eq!(history_rows(&fs), 0, "no pin, no history");
    // A pin released, another taken after more changes: pruning removes
    // the history at or below the live pin's version and keeps the rest.
    fs.pin(M, "old", 60_000).unwrap();
    fs.setattr(M, "8", f, 0o640).unwrap();
    fs.unpin(M, "old").unwrap();
    fs.pin(M, "new", 60_000).unwrap();
    fs.setattr(M, "9", f, 0o660).unwrap();
    let before = history_rows(&fs);
    let pruned = fs.prune(M).unwrap();
    // The setattr under the released pin wrote two rows (the inode, and
    // its dentry's projection); the one under the live pin two more.
    assert_eq!(pruned.history, 2, "the change made under the released pin");
    assert_eq!(history_rows(&fs), before - 2);
    assert_eq!(history_rows(&fs), 2);
    assert_eq!(fs.getattr_at(M, "new", f).unwrap().unwrap().mode, 0o640);
    assert_eq!(fs.getattr(M, f).unwrap().unwrap().mode, 0o660);
}

/// A pin's lease ends at its last millisecond: from then on no history is
/// written for it and reads through it are refused.
fn a_pin_ends_with_its_lease<E: Engine>(engine: E) {
    let Fs {
        nokv: fs, clock, ..
    } = open(engine);
    let f = created(&fs.create(M, "1", ROOT, "f", 0o600).unwrap());
    fs.pin(M, "short", 1_000).unwrap();
    clock.advance(999);
    fs.setattr(M, "2", f, 0o640).unwrap();
    let rows = history_rows(&fs);
    assert!(rows > 0, "written while the lease runs");
    clock.advance(1);
    fs.setattr(M, "3", f, 0o644).unwrap();
    assert_eq!(history_rows(&fs), rows, "nothing once the lease has ended");
    assert!(matches!(
        fs.getattr_at(M, "short", f),
        Err(NokvError::Pin {
            problem: PinProblem::Ended,
            ..
        })
    ));
}

/// The path index: a hit verified against every component; after an
/// ancestor is renamed and the path rebuilt, the stale entry falls back to
/// the walk and is repaired.
fn the_path_index_is_verified<E: Engine>(engine: E) {
    let Fs { nokv: fs, .. } = open(engine);
    let a = created(&fs.mkdir(M, "1", ROOT, "a", 0o755).unwrap());
    let b = created(&fs.create(M, "2", a, "b", 0o600).unwrap());
    assert_eq!(fs.index_path(M, "ws", "/a/b").unwrap(), b);
    assert_eq!(fs.lookup_path(M, "ws", "/a/b").unwrap(), PathHit::Index(b));
    // /a moves away and a new /a/b appears: the index entry still names b,
    // whose own dentry is unchanged; the ancestor's is not.
    fs.rename(M, "3", ROOT, "a", ROOT, "old").unwrap();
    let a2 = created(&fs.mkdir(M, "4", ROOT, "a", 0o755).unwrap());
    let b2 = created(&fs.create(M, "5", a2, "b", 0o600).unwrap());
    assert_eq!(
        fs.lookup_path(M, "ws", "/a/b").unwrap(),
        PathHit::Walk(b2, true)
    );
    assert_eq!(fs.lookup_path(M, "ws", "/a/b").unwrap(), PathHit::Index(b2));
    assert_eq!(
        fs.lookup_path(M, "ws", "/old/b").unwrap(),
        PathHit::Walk(b, false)
    );
    assert!(matches!(
        fs.lookup_path(M, "ws", "/none"),
        Err(NokvError::NotFound(_))
    ));
}

/// Retention: dedupe rows after their time (a resent command is then
/// refused as expired, never applied again; a new plan under an old id
/// applies), watch events beyond the per-scope count.
fn retention_prunes_what_no_reader_needs<E: Engine>(engine: E) {
    let Fs {
        nokv: fs, clock, ..
    } = open(engine);
    for i in 0..5 {
        fs.create(M, &format!("c{i}"), ROOT, &format!("f{i}"), 0o600)
            .unwrap();
    }
    assert_eq!(fs.watch_events(M, ROOT).unwrap().len(), 5);
    let pruned = fs.prune(M).unwrap();
    assert_eq!(pruned.watch, 2, "three kept per scope");
    assert_eq!(pruned.dedupe, 0);
    let kept: Vec<String> = fs
        .watch_events(M, ROOT)
        .unwrap()
        .into_iter()
        .filter_map(|(_, e)| match e {
            WatchEvent::Bound { name, .. } => Some(name),
            _ => None,
        })
        .collect();
    assert_eq!(kept, ["f2", "f3", "f4"], "the newest");
    // An hour on, the three kept are past their age (no pin needs them):
    // only the new event stays.
    clock.advance(60 * 60 * 1000);
    fs.create(M, "late", ROOT, "late", 0o600).unwrap();
    assert_eq!(fs.prune(M).unwrap().watch, 3);
    assert_eq!(fs.watch_events(M, ROOT).unwrap().len(), 1);
    // A command with no predicate (nothing in it refuses a second run but
    // its dedupe row), run once.
    let unlink_late = MetadataCommand {
        mount: M,
        request_id: "unlink-late".into(),
        kind: CommandKind::Unlink,
        read_version: fs.store().last_version(),
        predicates: Vec::new(),
        mutations: vec![MetaMutation::DeleteDentry(ROOT, "late".into())],
        watch: Vec::new(),
        outcome: Outcome {
            inode: None,
            released: None,
        },
    };
    assert!(matches!(
        fs.execute(&unlink_late).unwrap(),
        Executed::Applied(..)
    ));
    fs.create(M, "late2", ROOT, "late", 0o600).unwrap();
    assert!(matches!(
        fs.execute(&unlink_late).unwrap(),
        Executed::Replayed(_)
    ));
    clock.advance(23 * 60 * 60 * 1000);
    assert_eq!(fs.prune(M).unwrap().dedupe, 5);
    clock.advance(2 * 60 * 60 * 1000);
    assert_eq!(fs.prune(M).unwrap().dedupe, 3, "late, unlink-late, late2");
    // Its dedupe row is gone; resent, it is refused, and "late" (created
    // again since) stays.
    match fs.execute(&unlink_late) {
        Err(NokvError::PlanExpired {
            request_id,
            read_version,
            floor,
        }) => {
            assert_eq!(request_id, "unlink-late");
            assert_eq!(read_version, unlink_late.read_version);
            assert!(floor > read_version, "{floor}");
        }
        other => panic!("a resent command after its retention: {other:?}"),
    }
    assert!(names(&fs, ROOT).contains(&"late".to_owned()));
    // A live pin keeps the events after it, however old or many.
    let d = created(&fs.mkdir(M, "w0", ROOT, "w", 0o755).unwrap());
    fs.create(M, "w1", d, "before", 0o600).unwrap();
    let pinned = fs.pin(M, "keep", 10 * 60 * 60 * 1000).unwrap();
    for i in 0..5 {
        fs.create(M, &format!("w{}", i + 2), d, &format!("after{i}"), 0o600)
            .unwrap();
    }
    clock.advance(2 * 60 * 60 * 1000);
    let pruned = fs.prune(M).unwrap();
    let kept = fs.watch_events(M, d).unwrap();
    assert_eq!(kept.len(), 5, "{pruned:?}: the five after the pin");
    assert!(kept.iter().all(|(v, _)| *v > pinned));
    // The request id is forgotten: the same id applies again.
    assert!(matches!(
        fs.create(M, "c0", ROOT, "again", 0o600).unwrap(),
        Executed::Applied(..)
    ));
}

/// Generations: every dentry's is unique in the mount, a rename gives the
/// moved name a new one and bumps both directories, a rename onto itself
/// changes nothing, bodies bump the inode's generation and mtime, a
/// damaged manifest is a typed error, and a path whose dentry was rebound
/// (even to the same inode) is repaired rather than served from the index.
fn generations_and_manifests<E: Engine>(engine: E) {
    let Fs {
        nokv: fs, clock, ..
    } = open(engine);
    let d = created(&fs.mkdir(M, "1", ROOT, "d", 0o755).unwrap());
    let e = created(&fs.mkdir(M, "2", ROOT, "e", 0o755).unwrap());
    let f = created(&fs.create(M, "3", d, "f", 0o600).unwrap());
    fs.link(M, "4", f, e, "g").unwrap();
    let before = fs.lookup(M, d, "f").unwrap().unwrap();
    let (dg, eg) = (
        fs.getattr(M, d).unwrap().unwrap().generation,
        fs.getattr(M, e).unwrap().unwrap().generation,
    );
    fs.rename(M, "5", d, "f", e, "h").unwrap();
    let moved = fs.lookup(M, e, "h").unwrap().unwrap();
    assert_eq!(moved.child, f);
    assert_ne!(moved.generation, before.generation, "a new binding");
    assert_eq!(fs.getattr(M, d).unwrap().unwrap().generation, dg + 1);
    assert_eq!(fs.getattr(M, e).unwrap().unwrap().generation, eg + 1);
    // Onto itself: nothing changes.
    let attr = fs.getattr(M, f).unwrap().unwrap();
    fs.rename(M, "6", e, "h", e, "h").unwrap();
    assert_eq!(fs.lookup(M, e, "h").unwrap().unwrap(), moved);
    assert_eq!(fs.getattr(M, f).unwrap().unwrap(), attr);
    // One name of two over the other: the file's generation moves on.
    fs.rename(M, "7", e, "g", e, "h").unwrap();
    let one = fs.getattr(M, f).unwrap().unwrap();
    assert_eq!((one.link_count, one.generation), (1, attr.generation + 1));
    // Every dentry generation in the mount is distinct.
    fs.create(M, "8", d, "n", 0o600).unwrap();
    let mut generations: Vec<u64> = [ROOT, d, e]
        .iter()
        .flat_map(|dir| fs.readdirplus(M, *dir).unwrap())
        .map(|(_, x)| x.generation)
        .collect();
    let count = generations.len();
    generations.sort_unstable();
    generations.dedup();
    assert_eq!(generations.len(), count);
    // A body write bumps the generation and sets mtime.
    clock.advance(7_000);
    fs.write(M, "9", f, b"abcdefghij").unwrap();
    let written = fs.getattr(M, f).unwrap().unwrap();
    assert_eq!(
        (written.generation, written.mtime_ms),
        (one.generation + 1, START_MS + 7_000)
    );
    // A directory's mtime follows its entries.
    fs.create(M, "9b", d, "m", 0o600).unwrap();
    assert_eq!(
        fs.getattr(M, d).unwrap().unwrap().mtime_ms,
        START_MS + 7_000
    );
    // An inode whose size disagrees with its chunks: a typed error.
    let mut wrong = written.clone();
    if let Some(b) = wrong.body.as_mut() {
        b.size += 1;
    }
    let inode_key = strata_schemas::nokv::keys::InodeKey { mount: M, inode: f };
    fs.store().put(&inode_key, &wrong).unwrap();
    assert!(matches!(fs.read(M, f), Err(NokvError::Body { .. })));
    fs.store().put(&inode_key, &written).unwrap();
    // A manifest row missing, or out of place: typed errors.
    let key = |chunk| ManifestKey {
        mount: M,
        inode: f,
        generation: 1,
        chunk,
    };
    let last = fs.store().get(&key(2)).unwrap().unwrap();
    fs.store().delete(&key(2)).unwrap();
    assert!(matches!(fs.read(M, f), Err(NokvError::Body { .. })));
    fs.store().put(&key(3), &last).unwrap();
    assert!(matches!(fs.read(M, f), Err(NokvError::Body { .. })));
    fs.store().delete(&key(3)).unwrap();
    fs.store().put(&key(2), &last).unwrap();
    assert_eq!(fs.read(M, f).unwrap(), b"abcdefghij");
    // A path's dentry rebound to the same inode: repaired, not served.
    assert_eq!(fs.index_path(M, "ws", "/e/h").unwrap(), f);
    fs.rename(M, "10", e, "h", e, "tmp").unwrap();
    fs.rename(M, "11", e, "tmp", e, "h").unwrap();
    assert_eq!(
        fs.lookup_path(M, "ws", "/e/h").unwrap(),
        PathHit::Walk(f, true)
    );
    assert_eq!(fs.lookup_path(M, "ws", "/e/h").unwrap(), PathHit::Index(f));
}

/// `readdirplus` shows what `getattr` does: a directory's dentry follows
/// its mtime when its entries change (a create, link, unlink and rename
/// in it), and a rename over another name of the same file leaves the
/// name that stays with the new link count. A resent write whose body was
/// replaced and collected since stores no objects again.
fn projections_follow_and_replays_store_nothing<E: Engine>(engine: E) {
    let Fs {
        nokv: fs,
        blobs,
        clock,
    } = open(engine);
    let mtime = |inode: u64| fs.getattr(M, inode).unwrap().unwrap().mtime_ms;
    let shown = |parent: u64, name: &str| fs.lookup(M, parent, name).unwrap().unwrap().projection;
    let a = created(&fs.mkdir(M, "m1", ROOT, "a", 0o755).unwrap());
    let c = created(&fs.mkdir(M, "m2", a, "c", 0o755).unwrap());
    assert_eq!(shown(ROOT, "a").mtime_ms, START_MS);
    // Each change of a's (or c's) entries, a second later than the last.
    let f = {
        clock.advance(1_000);
        created(&fs.create(M, "c1", a, "f", 0o644).unwrap())
    };
    clock.advance(1_000);
    fs.link(M, "l1", f, c, "g").unwrap();
    clock.advance(1_000);
    fs.rename(M, "r1", a, "f", c, "h").unwrap();
    assert_eq!(mtime(a), START_MS + 3_000);
    assert_eq!(mtime(c), START_MS + 3_000);
    assert_eq!(
        shown(ROOT, "a").mtime_ms,
        START_MS + 3_000,
        "a's dentry follows"
    );
    assert_eq!(
        shown(a, "c").mtime_ms,
        START_MS + 3_000,
        "c's dentry follows"
    );
    // Two names of one file in c: renaming one over the other keeps one.
    assert_eq!((shown(c, "g").link_count, shown(c, "h").link_count), (2, 2));
    clock.advance(1_000);
    fs.rename(M, "r2", c, "g", c, "h").unwrap();
    assert_eq!(names(&fs, c), ["h"]);
    assert_eq!(fs.getattr(M, f).unwrap().unwrap().link_count, 1);
    assert_eq!(shown(c, "h").link_count, 1, "the name that stays follows");
    clock.advance(1_000);
    fs.unlink(M, "u1", c, "h").unwrap();
    assert_eq!(shown(a, "c").mtime_ms, START_MS + 5_000);
    assert_eq!(
        shown(a, "c"),
        strata_schemas::nokv::Projection::of(&fs.getattr(M, c).unwrap().unwrap())
    );
    // A body written, replaced, its old blocks collected; the first write
    // resent: replayed, and no object comes back.
    let w = created(&fs.create(M, "c2", ROOT, "w", 0o644).unwrap());
    fs.write(M, "w1", w, b"first body").unwrap();
    fs.write(M, "w2", w, b"second").unwrap();
    while fs.drain_gc(M, 10).unwrap() > 0 {}
    let kept = blobs.keys();
    assert_eq!(kept.len(), 2, "two 4-byte chunks of the second body");
    assert!(matches!(
        fs.write(M, "w1", w, b"first body").unwrap(),
        Executed::Replayed(_)
    ));
    assert_eq!(blobs.keys(), kept, "the replay stored nothing");
    assert_eq!(fs.read(M, w).unwrap(), b"second");
}

crate::on_each_engine!(
    generations_and_manifests,
    projections_follow_and_replays_store_nothing,
    namespace_basics,
    commands_dedupe_and_fence,
    links_projections_and_gc,
    bodies_are_manifests,
    renames,
    a_stale_plan_is_refused,
    the_watch_log_replays_to_the_state,
    pins_read_history,
    a_pin_ends_with_its_lease,
    the_path_index_is_verified,
    retention_prunes_what_no_reader_needs,
);
