//! The NoKV metadata workload: one mount, random mkdir, create, link,
//! unlink, rename (some planned, overtaken by another command, then
//! executed), setattr, body writes, pins, GC drains, prunes (dedupe rows
//! kept 4 simulated seconds), path-index lookups and replays of
//! acknowledged commands, on a faulty engine with crashes.
//!
//! Oracles, read from the store's rows after every step (not through the
//! module's own reads):
//! - every dentry names an existing inode, and the parent index holds
//!   exactly the dentries;
//! - every inode's link count is the number of dentries naming it;
//! - no directory cycle: from every directory, the parent links reach the
//!   root;
//! - a verified path-index hit names the inode a walk of the path finds;
//! - a replayed command (the same request id and command) is answered
//!   with its first outcome, or refused as expired once its dedupe row is
//!   pruned, and changes nothing: a finished command never runs twice;
//! - each directory's watch log replays to its current entries.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use strata_codec::Limits;
use strata_engine::{Engine, Rng};
use strata_keys::KeyRange;
use strata_keys::tuple;
use strata_schemas::nokv::keys::{DentryKey, InodeKey, ManifestKey, ParentKey};
use strata_schemas::nokv::{
    CommandKind, Dentry, Executed, FileType, InodeAttr, ManifestRow, MemBlobs, MetaMutation,
    MetadataCommand, Nokv, NokvConfig, NokvError, Outcome, PathHit, ROOT, WatchEvent,
};
use strata_store::{Scan, StoreOptions};

use crate::faults::FaultyEngine;
use crate::run::{Driven, Frame, RunOptions, SeedReport, Violation, drive, driven_on_store, fail};
use crate::targets::Target;

const M: u64 = 1;
const NAMES: [&str; 5] = ["a", "b", "c", "d", "e"];
const PATHS: [&str; 4] = ["/a", "/a/b", "/b/c", "/c/a/d"];

type Fs<E> = Nokv<FaultyEngine<E>>;

/// A command under request id `id` that would visibly change the namespace
/// if it applied (it removes the root's `a`): a replay of an executed id
/// must be answered with the first outcome instead.
fn probe(id: &str, outcome: Outcome) -> MetadataCommand {
    MetadataCommand {
        mount: M,
        request_id: id.to_owned(),
        kind: CommandKind::Unlink,
        read_version: 0,
        predicates: Vec::new(),
        mutations: vec![MetaMutation::DeleteDentry(ROOT, "a".into())],
        watch: vec![(
            ROOT,
            WatchEvent::Unbound {
                parent: ROOT,
                name: "a".into(),
            },
        )],
        outcome,
    }
}

/// The rows of the namespace, read straight from the store.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Rows {
    inodes: BTreeMap<u64, InodeAttr>,
    dentries: BTreeMap<(u64, String), Dentry>,
    parents: BTreeSet<(u64, u64, String)>,
}

struct NokvRun {
    /// The seed's draws, clock, trace and counts.
    frame: Frame,
    options: StoreOptions,
    blobs: Arc<MemBlobs>,
    next_request: u64,
    /// Acknowledged commands and their outcomes, for replays (forgotten at
    /// a crash, which may take unsynced ones with it).
    acknowledged: Vec<(MetadataCommand, Outcome)>,
}

impl NokvRun {
    fn open<E: Target>(&mut self, engine: FaultyEngine<E>) -> Fs<E> {
        let store = crate::run::open_store(
            engine,
            &self.options,
            self.frame.clock.clone(),
            &mut self.frame.rng,
        );
        let config = NokvConfig {
            chunk_bytes: 8,
            // Short, so that replays meet pruned dedupe rows.
            dedupe_retention_ms: 4_000,
            ..NokvConfig::default()
        };
        Nokv::open(store, self.blobs.clone(), config)
            .unwrap_or_else(|e| unreachable!("the history space is declared: {e}"))
    }

    fn request(&mut self) -> String {
        self.next_request += 1;
        format!("r{}", self.next_request)
    }

    fn rows<E: Target>(fs: &Fs<E>) -> Option<Rows> {
        let view = fs.store().read().ok()?;
        let scan = |family: &str| {
            Scan::range_of(KeyRange::tuple_prefix(&tuple::pack(&("nokv", family, M))))
        };
        let inodes = view
            .scan::<InodeKey>(&scan("inode"))
            .ok()?
            .map(|r| r.map(|(k, v)| (k.inode, v)))
            .collect::<Result<BTreeMap<_, _>, _>>()
            .ok()?;
        let dentries = view
            .scan::<DentryKey>(&scan("dentry"))
            .ok()?
            .map(|r| r.map(|(k, v)| ((k.parent, k.name), v)))
            .collect::<Result<BTreeMap<_, _>, _>>()
            .ok()?;
        let parents = view
            .scan::<ParentKey>(&scan("parent"))
            .ok()?
            .map(|r| r.map(|(k, _)| (k.child, k.parent, k.name)))
            .collect::<Result<BTreeSet<_>, _>>()
            .ok()?;
        Some(Rows {
            inodes,
            dentries,
            parents,
        })
    }

    fn pick<T: Clone>(&mut self, items: &[T]) -> Option<T> {
        if items.is_empty() {
            return None;
        }
        let i = usize::try_from(self.frame.rng.below(items.len() as u64)).unwrap_or(0);
        items.get(i).cloned()
    }

    fn note(&mut self, step: usize, what: &str, r: &Result<Executed, NokvError>) {
        match r {
            Ok(e) => {
                self.frame.commits += 1;
                self.frame.trace.event(step, format!("{what}: {e:?}"));
            }
            Err(e) => self.frame.trace.event(step, format!("{what} failed: {e}")),
        }
    }

    #[allow(clippy::too_many_lines)] // one arm per operation
    fn act<E: Target>(&mut self, fs: &Fs<E>, step: usize) -> Result<(), Violation> {
        let Some(rows) = Self::rows(fs) else {
            return Ok(());
        };
        let dirs: Vec<u64> = rows
            .inodes
            .iter()
            .filter(|(_, a)| a.file_type == FileType::Dir)
            .map(|(i, _)| *i)
            .collect();
        let files: Vec<u64> = rows
            .inodes
            .iter()
            .filter(|(_, a)| a.file_type == FileType::File)
            .map(|(i, _)| *i)
            .collect();
        let entries: Vec<(u64, String)> = rows.dentries.keys().cloned().collect();
        let name = NAMES[usize::try_from(self.frame.rng.below(5)).unwrap_or(0)];
        let roll = self.frame.rng.below(100);
        if roll < 15 {
            let dir = self.pick(&dirs).unwrap_or(ROOT);
            let id = self.request();
            let r = fs.mkdir(M, &id, dir, name, 0o755);
            self.note(step, "mkdir", &r);
            self.settle(fs, step, &id, r, &rows)?;
        } else if roll < 30 {
            let dir = self.pick(&dirs).unwrap_or(ROOT);
            let id = self.request();
            let r = fs.create(M, &id, dir, name, 0o644);
            self.note(step, "create", &r);
            self.settle(fs, step, &id, r, &rows)?;
        } else if roll < 38 {
            if let (Some(f), Some(dir)) = (self.pick(&files), self.pick(&dirs)) {
                let id = self.request();
                let r = fs.link(M, &id, f, dir, name);
                self.note(step, "link", &r);
                self.settle(fs, step, &id, r, &rows)?;
            }
        } else if roll < 50 {
            if let Some((parent, n)) = self.pick(&entries) {
                let id = self.request();
                let r = fs.unlink(M, &id, parent, &n);
                self.note(step, "unlink", &r);
                self.settle(fs, step, &id, r, &rows)?;
            }
        } else if roll < 65 {
            if let (Some((from, n)), Some(to)) = (self.pick(&entries), self.pick(&dirs)) {
                let id = self.request();
                let r = fs.rename(M, &id, from, &n, to, name);
                self.note(step, "rename", &r);
                self.settle(fs, step, &id, r, &rows)?;
            }
        } else if roll < 73 {
            // A rename planned, overtaken by an unlink or another rename of
            // the same name, then executed: refused or consistent.
            if let (Some((from, n)), Some(to)) = (self.pick(&entries), self.pick(&dirs))
                && let Ok(plan) = fs.plan_rename(M, &self.request(), from, &n, to, name)
            {
                let other = self.request();
                let r = if self.frame.rng.chance(0.5) {
                    fs.unlink(M, &other, from, &n)
                } else {
                    let away = NAMES[usize::try_from(self.frame.rng.below(5)).unwrap_or(0)];
                    fs.rename(M, &other, from, &n, ROOT, away)
                };
                self.note(step, "overtaking change", &r);
                let r = fs.execute(&plan);
                self.note(step, "stale rename", &r);
            }
        } else if roll < 78 {
            if let Some(f) = self.pick(&files) {
                let id = self.request();
                let r = fs.setattr(M, &id, f, 0o600);
                self.note(step, "setattr", &r);
                self.settle(fs, step, &id, r, &rows)?;
            }
        } else if roll < 84 {
            if let Some(f) = self.pick(&files) {
                let id = self.request();
                let len = usize::try_from(self.frame.rng.below(30)).unwrap_or(0);
                let r = fs.write(M, &id, f, &vec![7; len]);
                self.note(step, "write", &r);
            }
        } else if roll < 87 {
            if self.frame.rng.chance(0.5) {
                let r = fs.drain_gc(M, 10);
                self.frame.trace.event(step, format!("drain gc: {r:?}"));
            } else {
                // Dedupe rows past their retention go: a replay of theirs
                // must then be refused, never applied.
                let r = fs.prune(M);
                self.frame.trace.event(step, format!("prune: {r:?}"));
            }
        } else if roll < 90 {
            let r = fs.pin(M, &format!("p{step}"), 5_000);
            self.frame.trace.event(step, format!("pin: {r:?}"));
        } else if roll < 94 {
            self.replay(fs, step)?;
        } else if roll < 97 {
            self.paths(fs, step)?;
        } else {
            match fs.store().engine().sync() {
                Ok(v) => self.frame.trace.event(step, format!("sync: durable {v}")),
                Err(e) => self.frame.trace.event(step, format!("sync failed: {e}")),
            }
        }
        Ok(())
    }

    /// After a command: an acknowledged one is kept for a later replay; a
    /// failed one that nevertheless changed the namespace (an unknown
    /// outcome that applied) must have its dedupe row, so a replay of its
    /// id is answered, not applied.
    fn settle<E: Target>(
        &mut self,
        fs: &Fs<E>,
        step: usize,
        id: &str,
        r: Result<Executed, NokvError>,
        before: &Rows,
    ) -> Result<(), Violation> {
        match r {
            Ok(Executed::Applied(outcome, Some(_))) => {
                self.acknowledged
                    .push((probe(id, outcome.clone()), outcome));
            }
            Err(_) => {
                if Self::rows(fs).is_some_and(|after| after != *before) {
                    // Planned now, so the dedupe floor (which refuses old
                    // plans) cannot hide a missing dedupe row.
                    let probe = MetadataCommand {
                        read_version: fs.store().last_version(),
                        ..probe(
                            id,
                            Outcome {
                                inode: None,
                                released: None,
                            },
                        )
                    };
                    match fs.execute(&probe) {
                        Ok(Executed::Replayed(_)) | Err(_) => {}
                        Ok(applied) => {
                            return Err(fail(
                                step,
                                format!(
                                    "{id} failed but applied, and a replay of it applied again: {applied:?}"
                                ),
                            ));
                        }
                    }
                }
            }
            Ok(_) => {}
        }
        Ok(())
    }

    fn replay<E: Target>(&mut self, fs: &Fs<E>, step: usize) -> Result<(), Violation> {
        let Some((cmd, outcome)) = self.pick(&self.acknowledged.clone()) else {
            return Ok(());
        };
        let before = Self::rows(fs);
        match fs.execute(&cmd) {
            Ok(Executed::Replayed(o)) if o == outcome => {}
            Ok(other) => {
                return Err(fail(
                    step,
                    format!(
                        "replaying {} was not answered with its first outcome: {other:?}",
                        cmd.request_id
                    ),
                ));
            }
            // Its dedupe row was pruned: refused as too old, never applied.
            Err(e @ NokvError::PlanExpired { .. }) => {
                self.frame.trace.event(step, format!("replay refused: {e}"));
            }
            Err(e) => {
                self.frame.trace.event(step, format!("replay failed: {e}"));
                return Ok(());
            }
        }
        let after = Self::rows(fs);
        if before.is_some() && after.is_some() && before != after {
            return Err(fail(
                step,
                format!("replaying {} changed the namespace", cmd.request_id),
            ));
        }
        self.frame
            .trace
            .event(step, format!("replay {}: first outcome", cmd.request_id));
        Ok(())
    }

    fn paths<E: Target>(&mut self, fs: &Fs<E>, step: usize) -> Result<(), Violation> {
        let path = PATHS[usize::try_from(self.frame.rng.below(4)).unwrap_or(0)];
        if self.frame.rng.chance(0.5) {
            let r = fs.index_path(M, "ws", path);
            self.frame.trace.event(step, format!("index {path}: {r:?}"));
            return Ok(());
        }
        let Ok(hit) = fs.lookup_path(M, "ws", path) else {
            return Ok(());
        };
        let Some(rows) = Self::rows(fs) else {
            return Ok(());
        };
        let mut at = Some(ROOT);
        for part in path.split('/').filter(|p| !p.is_empty()) {
            at = at.and_then(|dir| rows.dentries.get(&(dir, part.to_owned())).map(|d| d.child));
        }
        let found = match hit {
            PathHit::Index(i) | PathHit::Walk(i, _) => i,
        };
        if at != Some(found) {
            return Err(fail(
                step,
                format!("path {path} resolved to {hit:?}; the dentries say {at:?}"),
            ));
        }
        self.frame.checks += 1;
        Ok(())
    }

    fn check<E: Target>(&mut self, fs: &Fs<E>, step: usize) -> Result<(), Violation> {
        let Some(rows) = Self::rows(fs) else {
            return Ok(());
        };
        let mut counts: BTreeMap<u64, u64> = BTreeMap::new();
        for ((parent, name), d) in &rows.dentries {
            if !rows.inodes.contains_key(&d.child) {
                return Err(fail(
                    step,
                    format!(
                        "dentry {name:?} in {parent} names missing inode {}",
                        d.child
                    ),
                ));
            }
            *counts.entry(d.child).or_default() += 1;
        }
        let from_dentries: BTreeSet<(u64, u64, String)> = rows
            .dentries
            .iter()
            .map(|((p, n), d)| (d.child, *p, n.clone()))
            .collect();
        if from_dentries != rows.parents {
            return Err(fail(
                step,
                "the parent index differs from the dentries".into(),
            ));
        }
        for (inode, attr) in &rows.inodes {
            let links = if *inode == ROOT {
                1
            } else {
                counts.get(inode).copied().unwrap_or(0)
            };
            if attr.link_count != links {
                return Err(fail(
                    step,
                    format!(
                        "inode {inode} has link count {} but {links} names",
                        attr.link_count
                    ),
                ));
            }
        }
        // Every directory reaches the root through its parent links.
        let up: BTreeMap<u64, u64> = rows.parents.iter().map(|(c, p, _)| (*c, *p)).collect();
        for (inode, attr) in &rows.inodes {
            if attr.file_type != FileType::Dir {
                continue;
            }
            let mut at = *inode;
            let mut steps = 0;
            while at != ROOT {
                let Some(p) = up.get(&at) else {
                    return Err(fail(step, format!("directory {inode} is detached")));
                };
                at = *p;
                steps += 1;
                if steps > rows.inodes.len() {
                    return Err(fail(step, format!("directory {inode} is in a cycle")));
                }
            }
        }
        // Each directory's watch log replays to its entries (on some
        // steps: the logs grow with the run).
        self.frame.checks += 1;
        if !self.frame.rng.chance(0.2) {
            return Ok(());
        }
        for (inode, attr) in &rows.inodes {
            if attr.file_type != FileType::Dir {
                continue;
            }
            let Ok(events) = fs.watch_events(M, *inode) else {
                continue;
            };
            let mut replay: BTreeMap<String, u64> = BTreeMap::new();
            for (_, e) in events {
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
            let now: BTreeMap<String, u64> = rows
                .dentries
                .iter()
                .filter(|((p, _), _)| p == inode)
                .map(|((_, n), d)| (n.clone(), d.child))
                .collect();
            if replay != now {
                return Err(fail(
                    step,
                    format!("directory {inode}'s watch log replays to {replay:?}, not {now:?}"),
                ));
            }
        }
        Ok(())
    }
}

impl<E: Target> Driven<E> for NokvRun {
    driven_on_store!(Fs<E>);

    fn crashed(&mut self) {
        self.acknowledged.clear();
    }

    fn step(&mut self, fs: &Fs<E>, step: usize) -> Result<(), Violation> {
        if self.frame.rng.chance(0.05) {
            self.frame.clock.advance(self.frame.rng.below(3_000));
        }
        self.act(fs, step)?;
        self.check(fs, step)
    }
}

/// Runs the NoKV workload of one seed on engine `E`.
pub fn run_nokv_seed_on<E: Target>(options: &RunOptions) -> SeedReport {
    let mut frame = Frame::new(options, 0x0F5E_0000_0000_0000, 1_730_000_000_000);
    let config = frame.faults;
    let store_options = crate::run::schema_options(
        &mut frame.rng,
        Nokv::<strata_engine::MemEngine>::declare(StoreOptions::new(Limits::FOUNDATIONDB)),
    );
    let mut run = NokvRun {
        options: store_options.clone(),
        blobs: Arc::new(MemBlobs::default()),
        next_request: 0,
        acknowledged: Vec::new(),
        frame,
    };
    run.frame.trace.event(
        0,
        format!(
            "nokv seed {} faults {config:?} durability {:?}",
            options.seed, store_options.durability
        ),
    );
    let engine = run.frame.engine::<E>(store_options.keyspace_specs());
    let mut violation = None;
    {
        let quiet = crate::run::quiet_store(&engine, &store_options, run.frame.clock.clone());
        let quiet = Nokv::open(quiet, run.blobs.clone(), NokvConfig::default())
            .unwrap_or_else(|e| unreachable!("{e}"));
        let made = quiet.create_mount(M, "").and_then(|()| {
            quiet
                .store()
                .engine()
                .sync()
                .map(|_| ())
                .map_err(|e| NokvError::Store(strata_store::StoreError::Engine(e)))
        });
        if let Err(e) = made {
            violation = Some(fail(
                0,
                format!("creating the mount without faults failed: {e}"),
            ));
        }
    }
    let fs = run.open(engine);
    let (fs, found) = if violation.is_some() {
        (Some(fs), None)
    } else {
        drive(&mut run, fs, options.ops)
    };
    violation = violation.or(found);
    let faults = fs
        .as_ref()
        .map(|f| f.store().engine().counters())
        .unwrap_or_default();
    if violation.is_none()
        && let Some(fs) = fs
    {
        violation = run.objects_named(fs, options.ops + 1).err();
    }
    run.frame.report("nokv", options.seed, faults, violation)
}

impl NokvRun {
    /// The objects the mount's manifest rows name (`None` when they could
    /// not be read).
    fn named_objects<E: Engine>(fs: &Nokv<E>) -> Option<BTreeSet<String>> {
        let view = fs.store().read().ok()?;
        let prefix = tuple::pack(&("nokv", "manifest", M));
        let mut named = BTreeSet::new();
        for row in view
            .scan::<ManifestKey>(&Scan::range_of(KeyRange::tuple_prefix(&prefix)))
            .ok()?
        {
            if let ManifestRow::Chunk(blocks) = row.ok()?.1 {
                named.extend(blocks.into_iter().map(|b| b.object));
            }
        }
        Some(named)
    }

    /// Syncs the engine and empties the GC queue, without faults: what is
    /// queued then is durable, and a drain takes what comes next.
    fn empty_gc_queue<E: Target>(&mut self, fs: &Fs<E>, step: usize) {
        let quiet =
            crate::run::quiet_store(fs.store().engine(), &self.options, self.frame.clock.clone());
        let quiet = Nokv::open(quiet, self.blobs.clone(), NokvConfig::default())
            .unwrap_or_else(|e| unreachable!("the history space is declared: {e}"));
        let emptied = quiet
            .store()
            .engine()
            .sync()
            .map_err(|e| NokvError::Store(e.into()))
            .and_then(|_| {
                let mut n = 0;
                loop {
                    match quiet.drain_gc(M, 64)? {
                        0 => return Ok(n),
                        k => n += k,
                    }
                }
            });
        self.frame
            .trace
            .event(step, format!("synced, GC queue emptied: {emptied:?}"));
    }

    /// Rounds of a body replaced and one block drained right before a
    /// crash, on the faulty engine, each on an empty GC queue (so the
    /// drain takes a block the replacement queued, by a commit the crash
    /// may lose); after each, nothing a manifest names may be gone (a
    /// later round could replace that body and hide it).
    fn crash_rounds<E: Target>(&mut self, fs: Fs<E>, step: usize) -> Result<Fs<E>, Violation> {
        let mut fs = fs;
        for _ in 0..8 {
            self.empty_gc_queue(&fs, step);
            if let Some(rows) = Self::rows(&fs) {
                let files: Vec<u64> = rows
                    .inodes
                    .iter()
                    .filter(|(_, a)| a.body.is_some())
                    .map(|(i, _)| *i)
                    .collect();
                if let Some(f) = self.pick(&files) {
                    let id = self.request();
                    let r = fs.write(M, &id, f, b"a last body");
                    self.note(step, "write", &r);
                }
            }
            let r = fs.drain_gc(M, 1);
            self.frame.trace.event(step, format!("drain gc: {r:?}"));
            let engine = fs
                .into_store()
                .into_engine()
                .crash_restart(&mut self.frame.rng);
            self.frame.trace.event(step, "crash and reopen".to_owned());
            fs = self.open(engine);
            // Nothing a manifest names may be gone (a later round could
            // replace that body and hide it).
            if let Some(named) = Self::named_objects(&fs) {
                let stored: BTreeSet<String> = self.blobs.keys().into_iter().collect();
                let lost: Vec<&String> = named.difference(&stored).collect();
                if !lost.is_empty() {
                    return Err(fail(
                        step,
                        format!("named by a manifest but gone after a crash: {lost:?}"),
                    ));
                }
            }
        }
        Ok(fs)
    }

    /// The objects oracle, after a last crash, without faults: once the
    /// uploads are collected (every one of them: a grace of zero) and the
    /// GC queue drained, the object store holds exactly the objects the
    /// manifest rows name. One left over is a leak (an upload or a
    /// released body nothing collects); one missing is a body that no
    /// longer reads (deleted while a durable manifest still names it).
    fn objects_named<E: Target>(&mut self, fs: Fs<E>, step: usize) -> Result<(), Violation> {
        let fs = self.crash_rounds(fs, step)?;
        let engine = fs
            .into_store()
            .into_engine()
            .crash_restart(&mut self.frame.rng);
        self.frame
            .trace
            .event(step, "crash and reopen; the objects checked".to_owned());
        let quiet = crate::run::quiet_store(&engine, &self.options, self.frame.clock.clone());
        let config = NokvConfig {
            upload_grace_ms: 0,
            ..NokvConfig::default()
        };
        let nokv = Nokv::open(quiet, self.blobs.clone(), config)
            .unwrap_or_else(|e| unreachable!("the history space is declared: {e}"));
        let failed = |what: &str, e: NokvError| fail(step, format!("{what} without faults: {e}"));
        let collected = nokv
            .collect_uploads(M, usize::MAX)
            .map_err(|e| failed("collecting uploads", e))?;
        let mut drained = 0;
        loop {
            match nokv.drain_gc(M, 64) {
                Ok(0) => break,
                Ok(n) => drained += n,
                Err(e) => return Err(failed("draining the GC queue", e)),
            }
        }
        let named = Self::named_objects(&nokv).ok_or_else(|| {
            fail(
                step,
                "reading the manifests without faults failed".to_owned(),
            )
        })?;
        let stored: BTreeSet<String> = self.blobs.keys().into_iter().collect();
        self.frame.trace.event(
            step,
            format!(
                "{collected} uploads collected, {drained} blocks drained; {} objects named",
                named.len()
            ),
        );
        if stored != named {
            let left: Vec<&String> = stored.difference(&named).collect();
            let lost: Vec<&String> = named.difference(&stored).collect();
            return Err(fail(
                step,
                format!("objects left over {left:?}; named by a manifest but gone {lost:?}"),
            ));
        }
        // And every body reads whole from them.
        let bodies = nokv
            .check_bodies(M)
            .map_err(|e| failed("reading the bodies", e))?;
        if !bodies.is_ok() {
            return Err(fail(
                step,
                format!("bodies that do not read: {:?}", bodies.problems),
            ));
        }
        Ok(())
    }
}
