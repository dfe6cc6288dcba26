//! NoKV under real process kills, on redb and RocksDB files with file
//! bodies in a directory of objects: a child process runs a script of
//! file-system commands (directories, files created, written in chunks,
//! renamed over others, hard-linked, unlinked) and drains the body GC
//! queue now and then, until the parent kills it with SIGKILL at a random
//! moment. The next child runs the script again from its start with the
//! same request ids, as a client resending what it could not confirm.
//!
//! After each kill, on the real files: `Nokv::check` finds nothing; the
//! namespace is the script's after every acknowledged command, and
//! perhaps the one in flight;
//! every file reads back whole; hard links share one inode whose link
//! count is its names; each dentry's projection matches its inode. At the
//! end a child runs the script to its end and drains the GC queue, and
//! the uploads of writes killed before their command are collected: the
//! objects left are exactly those the live files' manifests name.
//!
//! The oracle is a model of the script kept by this file (paths, file
//! identities and contents), not the module's planner.

#![cfg(unix)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use strata_engine::{Durability, Engine, ManualClock, Rng, SeededRng};
use strata_engine_redb::RedbEngine;
use strata_engine_rocks::RocksEngine;
use strata_schemas::nokv::{
    BlobError, BlobStore, FileType, InodeId, Nokv, NokvConfig, NokvError, Projection, ROOT,
};
use strata_store::{Store, StoreOptions};

use crate::TempDir;

const CHILD: &str = "STRATA_NOKV_KILL_DIR";
const CHILD_CLOCK: &str = "STRATA_NOKV_KILL_CLOCK";
const CHILD_FINISH: &str = "STRATA_NOKV_KILL_FINISH";
pub(crate) const MOUNT: u64 = 1;
const STEPS: usize = 400;
pub(crate) const CHUNK: usize = 512;
/// 2024-10-27; each round two minutes later.
const T0: u64 = 1_730_000_000_000;

/// Bodies as files of a directory, an object's name escaped into one file
/// name; written to a temporary file and renamed, so a kill leaves an
/// object whole or absent.
struct FileBlobs(PathBuf);

impl FileBlobs {
    fn path(&self, key: &str) -> PathBuf {
        self.0.join(key.replace('/', "_"))
    }

    fn names(&self) -> BTreeSet<String> {
        std::fs::read_dir(&self.0)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|n| Path::new(n).extension().is_none())
            .collect()
    }
}

impl BlobStore for FileBlobs {
    fn put(&self, key: &str, bytes: &[u8]) -> Result<(), BlobError> {
        let path = self.path(key);
        let tmp = path.with_extension("tmp");
        std::fs::write(&tmp, bytes)?;
        std::fs::rename(tmp, path)?;
        Ok(())
    }

    fn get(&self, key: &str) -> Result<Option<Vec<u8>>, BlobError> {
        match std::fs::read(self.path(key)) {
            Ok(b) => Ok(Some(b)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    fn delete(&self, key: &str) -> Result<(), BlobError> {
        match std::fs::remove_file(self.path(key)) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e.into()),
            _ => Ok(()),
        }
    }
}

/// One step of the script; paths are `/`-separated from the root ("" is
/// the root itself).
#[derive(Debug, Clone)]
pub(crate) enum Step {
    Mkdir(String),
    Create(String),
    /// The body is [`body`] of the step's number.
    Write(String),
    Rename(String, String),
    Link(String, String),
    Unlink(String),
    /// Not a command: `drain_gc`.
    Gc,
}

/// The namespace as the script leaves it.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Model {
    pub(crate) dirs: BTreeSet<String>,
    /// Path → file identity (the step that created it).
    pub(crate) files: BTreeMap<String, usize>,
    /// File identity → (its body, the step that wrote it).
    pub(crate) bodies: BTreeMap<usize, (Vec<u8>, Option<usize>)>,
}

pub(crate) fn body(step: usize) -> Vec<u8> {
    let len = (step * 397) % 2_000;
    (0..len)
        .map(|i| u8::try_from((step * 31 + i * 7) % 251).unwrap())
        .collect()
}

pub(crate) fn split(path: &str) -> (&str, &str) {
    path.rsplit_once('/').unwrap_or(("", path))
}

impl Model {
    fn apply(&mut self, n: usize, step: &Step) {
        match step {
            Step::Mkdir(p) => {
                self.dirs.insert(p.clone());
            }
            Step::Create(p) => {
                self.files.insert(p.clone(), n);
                self.bodies.insert(n, (Vec::new(), None));
            }
            Step::Write(p) => {
                let id = self.files[p];
                self.bodies.insert(id, (body(n), Some(n)));
            }
            Step::Rename(from, to) => {
                let id = self.files.remove(from).unwrap();
                self.files.insert(to.clone(), id);
            }
            Step::Link(from, to) => {
                let id = self.files[from];
                self.files.insert(to.clone(), id);
            }
            Step::Unlink(p) => {
                self.files.remove(p);
            }
            Step::Gc => {}
        }
        let live: BTreeSet<usize> = self.files.values().copied().collect();
        self.bodies.retain(|id, _| live.contains(id));
    }
}

/// The script, valid step by step against its own model.
pub(crate) fn script() -> Vec<Step> {
    let mut rng = SeededRng::new(0x40C5_4111);
    let mut model = Model::default();
    model.dirs.insert(String::new());
    let mut steps = vec![
        Step::Mkdir("a".into()),
        Step::Mkdir("b".into()),
        Step::Mkdir("a/c".into()),
    ];
    for (n, s) in steps.iter().enumerate() {
        model.apply(n, s);
    }
    let dirs: Vec<String> = model.dirs.iter().cloned().collect();
    while steps.len() < STEPS {
        let n = steps.len();
        let files: Vec<String> = model.files.keys().cloned().collect();
        let pick = |rng: &mut SeededRng, v: &[String]| {
            v[usize::try_from(rng.below(v.len() as u64)).unwrap()].clone()
        };
        let fresh = |rng: &mut SeededRng| {
            let d = pick(rng, &dirs);
            if d.is_empty() {
                format!("f{n}")
            } else {
                format!("{d}/f{n}")
            }
        };
        let step = match rng.below(20) {
            _ if files.len() < 3 => Step::Create(fresh(&mut rng)),
            0..=3 => Step::Create(fresh(&mut rng)),
            4..=9 => Step::Write(pick(&mut rng, &files)),
            10..=11 => Step::Rename(pick(&mut rng, &files), fresh(&mut rng)),
            12 => {
                // Over another file, which loses that name, or over
                // another name of the same file, which keeps one.
                let from = pick(&mut rng, &files);
                let to = pick(&mut rng, &files);
                if from == to {
                    Step::Gc
                } else {
                    Step::Rename(from, to)
                }
            }
            13..=14 => Step::Link(pick(&mut rng, &files), fresh(&mut rng)),
            15..=17 => Step::Unlink(pick(&mut rng, &files)),
            _ => Step::Gc,
        };
        model.apply(n, &step);
        steps.push(step);
    }
    steps
}

/// The model after each number of steps (`models[k]`: after `k`).
pub(crate) fn models(script: &[Step]) -> Vec<Model> {
    let mut m = Model::default();
    m.dirs.insert(String::new());
    let mut out = vec![m.clone()];
    for (n, s) in script.iter().enumerate() {
        m.apply(n, s);
        out.push(m.clone());
    }
    out
}

fn options() -> StoreOptions {
    Nokv::<strata_engine::MemEngine>::store_options().durability(Durability::Immediate)
}

fn open_redb(dir: &Path) -> RedbEngine {
    crate::redb_in(options().keyspace_specs(), dir)
}

fn open_rocks(dir: &Path) -> RocksEngine {
    crate::rocks_in(options().keyspace_specs(), dir)
}

fn open_fs<E: Engine>(engine: E, dir: &Path, now: u64) -> (Nokv<E>, Arc<FileBlobs>) {
    let clock = Arc::new(ManualClock::new(now));
    let store = Store::open_with(engine, options(), clock, Box::new(SeededRng::new(now))).unwrap();
    let blobs = Arc::new(FileBlobs(dir.join("blobs")));
    std::fs::create_dir_all(&blobs.0).unwrap();
    // Shorter than a round's clock step, so that at the end every upload a
    // killed child left is past it.
    let config = NokvConfig {
        chunk_bytes: CHUNK,
        upload_grace_ms: 60_000,
        ..NokvConfig::default()
    };
    (Nokv::open(store, blobs.clone(), config).unwrap(), blobs)
}

/// The child: the script from its start, each step acknowledged on
/// standard output once done (durably: `Immediate`).
fn run_script<E: Engine>(engine: E, dir: &Path, now: u64, finish: bool) {
    let (fs, _) = open_fs(engine, dir, now);
    match fs.create_mount(MOUNT, "") {
        Ok(()) | Err(NokvError::Exists { .. }) => {}
        Err(e) => panic!("{e}"),
    }
    // Path → inode, from the commands' outcomes (a replay returns the
    // first outcome, so this is the same in every child).
    let mut inodes: BTreeMap<String, InodeId> = BTreeMap::from([(String::new(), ROOT)]);
    for (n, step) in script().iter().enumerate() {
        run_step(&fs, &mut inodes, n, step);
        println!("ack {n}");
    }
    if finish {
        while fs.drain_gc(MOUNT, 64).unwrap() > 0 {}
        println!("done");
    } else {
        loop {
            std::thread::sleep(Duration::from_secs(1));
        }
    }
}

/// Runs step `n` of the script as request `r{n}`, keeping `inodes` (path
/// → inode, from the commands' outcomes) up to date.
pub(crate) fn run_step<E: Engine>(
    fs: &Nokv<E>,
    inodes: &mut BTreeMap<String, InodeId>,
    n: usize,
    step: &Step,
) {
    let rid = format!("r{n}");
    let at = |inodes: &BTreeMap<String, InodeId>, p: &str| -> (InodeId, String) {
        let (d, name) = split(p);
        (inodes[d], name.to_owned())
    };
    match step {
        Step::Mkdir(p) | Step::Create(p) => {
            let (parent, name) = at(inodes, p);
            let done = if matches!(step, Step::Mkdir(_)) {
                fs.mkdir(MOUNT, &rid, parent, &name, 0o755)
            } else {
                fs.create(MOUNT, &rid, parent, &name, 0o644)
            }
            .unwrap();
            inodes.insert(p.clone(), done.outcome().inode.unwrap());
        }
        Step::Write(p) => {
            fs.write(MOUNT, &rid, inodes[p], &body(n)).unwrap();
        }
        Step::Rename(from, to) => {
            let (fd, fname) = at(inodes, from);
            let (td, tname) = at(inodes, to);
            fs.rename(MOUNT, &rid, fd, &fname, td, &tname).unwrap();
            let inode = inodes.remove(from).unwrap();
            inodes.insert(to.clone(), inode);
        }
        Step::Link(from, to) => {
            let (td, tname) = at(inodes, to);
            fs.link(MOUNT, &rid, inodes[from], td, &tname).unwrap();
            inodes.insert(to.clone(), inodes[from]);
        }
        Step::Unlink(p) => {
            let (d, name) = at(inodes, p);
            fs.unlink(MOUNT, &rid, d, &name).unwrap();
            inodes.remove(p);
        }
        Step::Gc => {
            fs.drain_gc(MOUNT, 16).unwrap();
        }
    }
}

/// The namespace read from the store: directories, and each file's path
/// with its inode, link count and body.
#[derive(Debug, Default)]
pub(crate) struct Found {
    pub(crate) dirs: BTreeSet<String>,
    pub(crate) files: BTreeMap<String, (InodeId, u64, Vec<u8>)>,
}

pub(crate) fn walk<E: Engine>(
    fs: &Nokv<E>,
    dir: InodeId,
    path: &str,
    found: &mut Found,
    round: usize,
) {
    found.dirs.insert(path.to_owned());
    for (name, d) in fs.readdirplus(MOUNT, dir).unwrap() {
        let p = if path.is_empty() {
            name.clone()
        } else {
            format!("{path}/{name}")
        };
        let attr = fs.getattr(MOUNT, d.child).unwrap().unwrap_or_else(|| {
            panic!(
                "round {round}: {p} names inode {} that is not stored",
                d.child
            )
        });
        assert_eq!(d.file_type, attr.file_type, "round {round}: {p}");
        assert_eq!(
            d.projection,
            Projection::of(&attr),
            "round {round}: {p}'s projection"
        );
        if attr.file_type == FileType::Dir {
            walk(fs, d.child, &p, found, round);
        } else {
            let bytes = fs.read(MOUNT, d.child).unwrap();
            assert_eq!(attr.size, bytes.len() as u64, "round {round}: {p}");
            found.files.insert(p, (d.child, attr.link_count, bytes));
        }
    }
}

/// Whether the store's namespace is `model`'s; the first difference.
pub(crate) fn matches(found: &Found, model: &Model) -> Result<(), String> {
    if found.dirs != model.dirs {
        return Err(format!("dirs {:?}, model {:?}", found.dirs, model.dirs));
    }
    let paths: BTreeSet<&String> = found.files.keys().collect();
    let want: BTreeSet<&String> = model.files.keys().collect();
    if paths != want {
        return Err(format!("files {paths:?}, model {want:?}"));
    }
    for (p, (inode, links, bytes)) in &found.files {
        let id = model.files[p];
        if *bytes != model.bodies[&id].0 {
            return Err(format!(
                "{p}: {} bytes, not the model's {}",
                bytes.len(),
                model.bodies[&id].0.len()
            ));
        }
        let names = model.files.values().filter(|&&i| i == id).count();
        if *links != names as u64 {
            return Err(format!("{p}: link count {links}, {names} names"));
        }
        for (q, (other, _, _)) in &found.files {
            if (other == inode) != (model.files[q] == id) {
                return Err(format!("{p} and {q}: inodes {inode} and {other}"));
            }
        }
    }
    Ok(())
}

/// Checks the store against the models after `acked + 1` steps (and
/// `acked + 2`, the step in flight); returns how many steps it holds.
fn check<E: Engine>(
    engine: E,
    dir: &Path,
    models: &[Model],
    acked: usize,
    now: u64,
    round: usize,
) -> usize {
    let (fs, _) = open_fs(engine, dir, now);
    let report = fs.check(MOUNT).unwrap();
    assert!(report.is_ok(), "round {round}: {:?}", report.problems);
    let mut found = Found::default();
    walk(&fs, ROOT, "", &mut found, round);
    let done = acked + 1;
    match matches(&found, &models[done]) {
        Ok(()) => done,
        Err(first) => match models.get(done + 1).map(|m| matches(&found, m)) {
            Some(Ok(())) => done + 1,
            other => panic!("round {round}: after step {acked}: {first}; with the next: {other:?}"),
        },
    }
}

fn kill_rounds<E: Engine>(test: &str, open_engine: fn(&Path) -> E) {
    if let Ok(dir) = std::env::var(CHILD) {
        let now = std::env::var(CHILD_CLOCK).unwrap().parse().unwrap();
        let finish = std::env::var(CHILD_FINISH).is_ok();
        run_script(open_engine(Path::new(&dir)), Path::new(&dir), now, finish);
        return;
    }
    let rounds = strata_test_support::kill_rounds(10);
    let script = script();
    let models = models(&script);
    let dir = TempDir::new("nokv-kill");
    let dir_text = dir.0.to_string_lossy().into_owned();
    let mut rng = SeededRng::new(0x40C5_0001);
    let mut held = 0;
    for round in 0..=rounds {
        let finish = round == rounds;
        let clock = (T0 + 120_000 * round as u64).to_string();
        let mut env = vec![(CHILD, dir_text.as_str()), (CHILD_CLOCK, clock.as_str())];
        if finish {
            env.push((CHILD_FINISH, "1"));
        }
        let wanted = held + usize::try_from(rng.below((STEPS / rounds) as u64 * 2)).unwrap();
        let wanted = u64::try_from(wanted.min(STEPS - 2)).unwrap();
        let pause = Duration::from_micros(rng.below(3_000));
        let acked = strata_test_support::child_round(test, &env, finish, wanted, pause);
        let acked = acked.unwrap_or_else(|| panic!("round {round}: nothing acknowledged"));
        let now = T0 + 120_000 * round as u64 + 60_000;
        held = check(open_engine(&dir.0), &dir.0, &models, acked, now, round);
    }
    assert_eq!(held, STEPS, "the script ran to its end");
    // The objects left are exactly those the live files' manifests name:
    // `{mount}/{inode}/{request}/{upload version}/{chunk}` of the step that
    // last wrote each.
    let (fs, blobs) = open_fs(
        open_engine(&dir.0),
        &dir.0,
        T0 + 120_000 * (rounds as u64 + 1),
    );
    // Uploads of writes killed before their command: collected.
    fs.collect_uploads(MOUNT, usize::MAX).unwrap();
    let mut found = Found::default();
    walk(&fs, ROOT, "", &mut found, rounds);
    let last = &models[STEPS];
    let mut named = BTreeSet::new();
    for (p, (inode, _, bytes)) in &found.files {
        if let (_, Some(step)) = &last.bodies[&last.files[p]] {
            for i in 0..bytes.len().div_ceil(CHUNK) {
                named.insert(format!("{MOUNT}_{inode}_r{step}_{i}"));
            }
        }
    }
    let left = crate::nokv_history::without_version(blobs.names(), '_');
    assert_eq!(left, named, "objects left over or lost");
    println!("{rounds} kills; {STEPS} steps, the namespace and its objects whole");
}

#[test]
fn redb_namespace_survives_kills() {
    kill_rounds("nokv_kill::redb_namespace_survives_kills", open_redb);
}

#[test]
fn rocks_namespace_survives_kills() {
    kill_rounds("nokv_kill::rocks_namespace_survives_kills", open_rocks);
}
