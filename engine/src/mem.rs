//! `MemEngine`: the in-memory reference engine (see its docs).

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::{Arc, Mutex, PoisonError, RwLock};

use crate::capability::{Backup, BackupInfo, CapabilityError, Compact, KeyspaceStats, Statistics};
use crate::contract::{Commit, CommitInfo, Durability, Engine, RangeSpec, Snapshot};
use crate::error::{CommitError, EngineError, ReadError};
use crate::group::{GroupCommitter, GroupResults, GroupStats};
use crate::inject::Rng;
use crate::keyspace::{Keyspace, KeyspaceSpec, Keyspaces};
use crate::resolve::{self, Reads};
use crate::sequence::Sequencer;

mod planted;
use planted::Overlaid;

/// The most commits one group holds.
const MAX_GROUP: usize = 256;

type Value = Arc<[u8]>;
/// Versions of one key, oldest first; `None` is a deletion.
type Versions = Vec<(u64, Option<Value>)>;

/// A resolved change, as replayed onto the durable image.
#[derive(Debug, Clone)]
enum Op {
    Put(usize, Vec<u8>, Value),
    Delete(usize, Vec<u8>),
    DeleteRange(usize, RangeSpec),
}

/// The durable state of a [`MemEngine`]: what survives a restart.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemImage {
    specs: Vec<KeyspaceSpec>,
    maps: Vec<BTreeMap<Vec<u8>, Value>>,
    version: u64,
}

impl MemImage {
    /// The version of the last commit in the image.
    pub fn version(&self) -> u64 {
        self.version
    }

    /// The keyspaces the image holds, in declaration order.
    pub fn keyspaces(&self) -> &[KeyspaceSpec] {
        &self.specs
    }

    /// The image with another set of keyspaces: keyspaces kept by name keep
    /// their data, new ones start empty, dropped ones are discarded.
    #[must_use]
    pub fn with_keyspaces(self, specs: Vec<KeyspaceSpec>) -> Self {
        let mut old: BTreeMap<String, BTreeMap<Vec<u8>, Value>> = self
            .specs
            .into_iter()
            .map(|s| s.name)
            .zip(self.maps)
            .collect();
        let maps = specs
            .iter()
            .map(|s| old.remove(&s.name).unwrap_or_default())
            .collect();
        Self {
            specs,
            maps,
            version: self.version,
        }
    }

    fn apply(&mut self, op: &Op) {
        match op {
            Op::Put(ks, k, v) => {
                self.maps[*ks].insert(k.clone(), v.clone());
            }
            Op::Delete(ks, k) => {
                self.maps[*ks].remove(k);
            }
            Op::DeleteRange(ks, r) => self.maps[*ks].retain(|k, _| !r.contains(k)),
        }
    }
}

struct State {
    maps: Vec<BTreeMap<Vec<u8>, Versions>>,
    /// The version snapshots see: the last commit applied to `maps`.
    version: u64,
    durable: MemImage,
    /// Commits after `durable.version`, in order.
    pending: Vec<(u64, Vec<Op>)>,
}

/// The in-memory reference engine.
///
/// Every keyspace is a `BTreeMap` from key to its versions, so snapshots are
/// consistent without copying (multi-version; versions no snapshot can see
/// are pruned when their key is next written). Beside the live state it
/// keeps what a crash needs: a durable image (the state at
/// [`Engine::durable_version`]) and the ordered list of commits not yet
/// synced. [`MemEngine::crash`] keeps a prefix of those, chosen by an
/// injected [`Rng`], exactly the outcomes the crash contract allows; opening
/// the resulting [`MemImage`] with [`MemEngine::from_image`] models the
/// restart.
pub struct MemEngine {
    keyspaces: Keyspaces,
    /// Numbers commits and tracks the durable version; taken before
    /// `state`'s lock.
    seq: Sequencer,
    /// Groups concurrent commits.
    group: GroupCommitter,
    state: RwLock<State>,
    /// Versions of live snapshots, with counts.
    live: Mutex<BTreeMap<u64, usize>>,
}

impl std::fmt::Debug for MemEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemEngine")
            .field("keyspaces", &self.keyspaces.specs())
            .finish_non_exhaustive()
    }
}

impl MemEngine {
    /// An empty engine with these keyspaces.
    ///
    /// # Errors
    /// [`EngineError::DuplicateKeyspace`].
    pub fn open(specs: Vec<KeyspaceSpec>) -> Result<Self, EngineError> {
        let image = MemImage {
            maps: vec![BTreeMap::new(); specs.len()],
            specs,
            version: 0,
        };
        Self::from_image(image)
    }

    /// An engine restarted from a durable image.
    ///
    /// # Errors
    /// [`EngineError::DuplicateKeyspace`].
    pub fn from_image(image: MemImage) -> Result<Self, EngineError> {
        let keyspaces = Keyspaces::new(image.specs.clone())?;
        let maps = image
            .maps
            .iter()
            .map(|m| {
                m.iter()
                    .map(|(k, v)| (k.clone(), vec![(image.version, Some(v.clone()))]))
                    .collect()
            })
            .collect();
        let mut engine = Self {
            keyspaces,
            seq: Sequencer::new(image.version),
            group: GroupCommitter::new(MAX_GROUP),
            state: RwLock::new(State {
                maps,
                version: image.version,
                durable: image,
                pending: Vec::new(),
            }),
            live: Mutex::new(BTreeMap::new()),
        };
        if crate::fault_point!("stamp-reused-after-restart") {
            engine.resume_one_version_low();
        }
        Ok(engine)
    }

    /// A clean shutdown: everything committed is kept.
    pub fn close(self) -> MemImage {
        let mut state = self
            .state
            .into_inner()
            .unwrap_or_else(PoisonError::into_inner);
        sync_state(&mut state);
        state.durable
    }

    /// A crash: keeps the durable image plus a prefix of the unsynced
    /// commits whose length `rng` chooses uniformly (possibly none, possibly
    /// all), as the crash contract allows.
    pub fn crash(self, rng: &mut dyn Rng) -> MemImage {
        let pending = self.pending_commits();
        let keep = usize::try_from(rng.below(pending as u64 + 1)).unwrap_or(0);
        self.crash_keeping(keep)
    }

    /// A crash keeping exactly the first `keep` unsynced commits (all of
    /// them if `keep` is larger).
    pub fn crash_keeping(self, keep: usize) -> MemImage {
        let half = crate::fault_point!("crash-keeps-half-commit");
        let state = self
            .state
            .into_inner()
            .unwrap_or_else(PoisonError::into_inner);
        let mut image = state.durable;
        for (version, ops) in state.pending.iter().take(keep) {
            for op in ops {
                image.apply(op);
            }
            image.version = *version;
        }
        if half {
            planted::keep_half_commit(&mut image, state.pending.get(keep));
        }
        image
    }

    /// Makes the first `keep` unsynced commits durable (all of them if
    /// `keep` is larger), as a sync interrupted part-way would, and returns
    /// the durable version: for fault injection, which then reports the
    /// sync as failed. A later crash keeps at least these.
    pub fn sync_partially(&self, keep: usize) -> u64 {
        let version = {
            let mut state = self.write();
            let n = keep.min(state.pending.len());
            let moved: Vec<(u64, Vec<Op>)> = state.pending.drain(..n).collect();
            for (version, ops) in &moved {
                for op in ops {
                    state.durable.apply(op);
                }
                state.durable.version = *version;
            }
            state.durable.version
        };
        self.seq.mark_durable(version);
        version
    }

    /// How many commit groups this engine wrote since it opened, and how
    /// many commits they held (see [`Engine::commit_group`]): with
    /// `Immediate` commits, `commits / groups` is the number of commits
    /// per durable write.
    pub fn group_stats(&self) -> GroupStats {
        self.group.stats()
    }

    /// Number of commits not yet durable.
    pub fn pending_commits(&self) -> usize {
        self.read().pending.len()
    }

    /// Number of key versions held in memory, deletion markers included.
    /// Old versions are dropped as keys are rewritten once no live
    /// snapshot can read them, so with no snapshot open each key written
    /// holds one; this shows that memory is reclaimed.
    pub fn retained_versions(&self) -> usize {
        self.read()
            .maps
            .iter()
            .flat_map(BTreeMap::values)
            .map(Vec::len)
            .sum()
    }

    /// Writes a group of commits in order, each applied or refused alone,
    /// and syncs once if an applied one is `Immediate`.
    fn write_group(&self, commits: Vec<Commit>) -> GroupResults {
        let mut sequence = self.seq.begin();
        let mut state = self.write();
        let mut immediate = false;
        let gap = commits.len() > 1 && crate::fault_point!("group-refused-takes-version");
        let outcomes: Vec<Result<u64, CommitError>> = commits
            .into_iter()
            .map(|commit| {
                let version = sequence.version();
                let durability = commit.durability;
                if let Err(e) = self.apply_one(&mut state, version, commit) {
                    if gap && matches!(e, CommitError::Conflict { .. }) {
                        sequence.take();
                    }
                    return Err(e);
                }
                immediate |= durability == Durability::Immediate;
                Ok(sequence.take())
            })
            .collect();
        let durable = immediate && !crate::fault_point!("immediate-not-durable");
        if durable {
            sync_state(&mut state);
            self.group.count_sync();
        }
        if sequence.taken() > 0 {
            sequence.publish(durable);
        }
        outcomes
            .into_iter()
            .map(|r| r.map(|version| CommitInfo { version, durable }))
            .collect()
    }

    /// Checks and applies one commit as `version`, or nothing.
    fn apply_one(
        &self,
        state: &mut State,
        version: u64,
        commit: Commit,
    ) -> Result<(), CommitError> {
        let Commit {
            predicates,
            mutations,
            durability: _,
        } = commit;
        let late = crate::fault_point!("predicate-after-mutations");
        let resolved = {
            let mut reads = StateReads { state };
            if !late {
                resolve::check_predicates(&predicates, &mut reads)?;
            }
            let ops = resolve::resolve(version, &mutations, &mut reads)?;
            if late {
                let mut overlaid = Overlaid {
                    base: StateReads { state },
                    ops: &ops,
                };
                resolve::check_predicates(&predicates, &mut overlaid)?;
            }
            ops
        };
        let ops: Vec<Op> = resolved
            .into_iter()
            .map(|op| match op {
                resolve::Op::Put(ks, k, v) => Op::Put(ks.index(), k, Value::from(v)),
                resolve::Op::Delete(ks, k) => Op::Delete(ks.index(), k),
                resolve::Op::DeleteRange(ks, r) => Op::DeleteRange(ks.index(), r),
            })
            .collect();
        let min_live = self.min_live(version);
        let keep_start = crate::fault_point!("delete-range-keeps-start");
        for op in &ops {
            let (ks, keys): (usize, Vec<Vec<u8>>) = match op {
                Op::Put(ks, k, v) => {
                    let versions = state.maps[*ks].entry(k.clone()).or_default();
                    versions.push((version, Some(v.clone())));
                    prune(versions, min_live);
                    continue;
                }
                Op::Delete(ks, k) => (*ks, vec![k.clone()]),
                Op::DeleteRange(ks, r) => {
                    let map = &state.maps[*ks];
                    let mut keys: Vec<Vec<u8>> = within(map, &r.start, &r.end)
                        .map(|(k, _)| k.clone())
                        .collect();
                    if keep_start
                        && let Some(i) = keys.iter().position(|k| {
                            map.get(k)
                                .is_some_and(|v| visible(v, state.version).is_some())
                        })
                    {
                        keys.remove(i);
                    }
                    (*ks, keys)
                }
            };
            let map = &mut state.maps[ks];
            for k in keys {
                let Some(versions) = map.get_mut(&k) else {
                    continue;
                };
                if versions.last().is_some_and(|(_, v)| v.is_some()) {
                    versions.push((version, None));
                }
                prune(versions, min_live);
                // A lone deletion no live snapshot predates: drop the key.
                if matches!(versions.as_slice(), [(v, None)] if *v <= min_live) {
                    map.remove(&k);
                }
            }
        }
        state.version = version;
        state.pending.push((version, ops));
        Ok(())
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, State> {
        self.state.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, State> {
        self.state.write().unwrap_or_else(PoisonError::into_inner)
    }

    /// The oldest version a live snapshot reads, or `next` when none is
    /// live (no snapshot can then read below the commit being applied).
    fn min_live(&self, next: u64) -> u64 {
        let live = self.live.lock().unwrap_or_else(PoisonError::into_inner);
        live.keys().next().copied().unwrap_or(next).min(next)
    }
}

fn sync_state(state: &mut State) {
    for (version, ops) in state.pending.drain(..) {
        for op in &ops {
            state.durable.apply(op);
        }
        state.durable.version = version;
    }
}

/// The part of `map` within the bounds. `BTreeMap::range` panics on a
/// start above the end or on equal excluded bounds; such bounds select
/// nothing here.
fn within<'m, V>(
    map: &'m BTreeMap<Vec<u8>, V>,
    start: &Bound<Vec<u8>>,
    end: &Bound<Vec<u8>>,
) -> impl DoubleEndedIterator<Item = (&'m Vec<u8>, &'m V)> + 'm {
    let empty = match (start, end) {
        (Bound::Included(s), Bound::Included(e)) => s > e,
        (Bound::Included(s) | Bound::Excluded(s), Bound::Included(e) | Bound::Excluded(e)) => {
            s >= e
        }
        _ => false,
    };
    // A stand-in valid range when the real one is empty; its items are
    // filtered out.
    let bounds = if empty {
        (Bound::Included(Vec::new()), Bound::Included(Vec::new()))
    } else {
        (start.clone(), end.clone())
    };
    map.range(bounds).filter(move |_| !empty)
}

/// The value visible at `version`.
fn visible(versions: &Versions, version: u64) -> Option<&Value> {
    versions
        .iter()
        .rev()
        .find(|(v, _)| *v <= version)
        .and_then(|(_, value)| value.as_ref())
}

/// Drops versions no snapshot at `min_live` or later can see.
fn prune(versions: &mut Versions, min_live: u64) {
    if let Some(keep_from) = versions.iter().rposition(|(v, _)| *v <= min_live) {
        versions.drain(..keep_from);
    }
}

/// Reads of the latest state, for the shared commit logic.
struct StateReads<'a> {
    state: &'a State,
}

impl Reads for StateReads<'_> {
    fn get(&mut self, ks: Keyspace, key: &[u8]) -> Result<Option<Vec<u8>>, CommitError> {
        Ok(self.state.maps[ks.index()]
            .get(key)
            .and_then(|v| visible(v, self.state.version))
            .map(|v| v.to_vec()))
    }

    fn any_in(&mut self, ks: Keyspace, range: &RangeSpec) -> Result<bool, CommitError> {
        Ok(
            within(&self.state.maps[ks.index()], &range.start, &range.end)
                .any(|(_, v)| visible(v, self.state.version).is_some()),
        )
    }
}

impl Engine for MemEngine {
    type Snapshot<'e> = MemSnapshot<'e>;

    fn keyspaces(&self) -> &Keyspaces {
        &self.keyspaces
    }

    fn snapshot(&self) -> Result<MemSnapshot<'_>, ReadError> {
        // Register under the state lock so no commit prunes in between.
        let state = self.read();
        let version = state.version;
        *self
            .live
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(version)
            .or_insert(0) += 1;
        drop(state);
        Ok(MemSnapshot {
            engine: self,
            version,
        })
    }

    fn commit(&self, commit: Commit) -> Result<CommitInfo, CommitError> {
        self.keyspaces.check_commit(&commit)?;
        // Groups are durable when written: nothing is left to sync.
        self.group
            .commit(commit, |g| self.write_group(g), |_| Ok(self.seq.durable()))
    }

    fn commit_group(&self, commits: Vec<Commit>) -> Vec<Result<CommitInfo, CommitError>> {
        self.group.commit_all(
            &self.keyspaces,
            commits,
            |g| self.write_group(g),
            |_| Ok(self.seq.durable()),
        )
    }

    fn sync(&self) -> Result<u64, EngineError> {
        let drop_last = crate::fault_point!("sync-drops-last-pending");
        self.seq.sync(|| {
            let mut state = self.write();
            let last = if drop_last { state.pending.pop() } else { None };
            sync_state(&mut state);
            state.pending.extend(last);
            Ok(())
        })
    }

    fn durable_version(&self) -> u64 {
        if crate::fault_point!("durable-version-ahead") {
            return self.seq.last();
        }
        if crate::fault_point!("durable-version-behind") {
            return self.seq.durable().saturating_sub(1);
        }
        self.seq.durable()
    }

    fn last_version(&self) -> u64 {
        self.seq.last()
    }
}

impl Statistics for MemEngine {
    /// Exact counts of live entries and of key and value bytes.
    fn stats(&self) -> Result<Vec<KeyspaceStats>, CapabilityError> {
        let state = self.read();
        Ok(self
            .keyspaces
            .specs()
            .iter()
            .zip(&state.maps)
            .map(|(spec, map)| {
                let (mut entries, mut bytes) = (0, 0);
                for (k, v) in map {
                    if let Some(value) = visible(v, state.version) {
                        entries += 1;
                        bytes += (k.len() + value.len()) as u64;
                    }
                }
                KeyspaceStats {
                    name: spec.name.clone(),
                    entries,
                    entries_exact: true,
                    bytes,
                    bytes_exact: true,
                }
            })
            .collect())
    }
}

impl Backup for MemEngine {
    /// Unsupported: the engine has no files. [`MemEngine::close`] gives its
    /// image.
    fn backup(&self, _path: &std::path::Path) -> Result<BackupInfo, CapabilityError> {
        Err(CapabilityError::Unsupported {
            engine: "MemEngine",
            capability: "backup",
            why: "an in-memory engine has no files; close() returns its image",
        })
    }
}

impl crate::capability::Integrity for MemEngine {
    /// Unsupported: the engine keeps no checksums (nothing is stored
    /// outside the process).
    fn check_integrity(&self) -> Result<crate::capability::IntegrityReport, CapabilityError> {
        Err(CapabilityError::Unsupported {
            engine: "MemEngine",
            capability: "integrity checks",
            why: "an in-memory engine stores nothing to damage",
        })
    }
}

impl Compact for MemEngine {
    /// Unsupported: old versions are pruned as keys are written; there is
    /// nothing else to reclaim.
    fn compact(&self) -> Result<(), CapabilityError> {
        Err(CapabilityError::Unsupported {
            engine: "MemEngine",
            capability: "compaction",
            why: "old versions are pruned on write; nothing else to reclaim",
        })
    }
}

/// A consistent view of a [`MemEngine`].
pub struct MemSnapshot<'e> {
    engine: &'e MemEngine,
    version: u64,
}

impl std::fmt::Debug for MemSnapshot<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemSnapshot")
            .field("version", &self.version)
            .finish()
    }
}

impl Drop for MemSnapshot<'_> {
    fn drop(&mut self) {
        let mut live = self
            .engine
            .live
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(n) = live.get_mut(&self.version) {
            *n -= 1;
            if *n == 0 {
                live.remove(&self.version);
            }
        }
    }
}

impl MemSnapshot<'_> {
    fn ks(&self, ks: Keyspace) -> Result<usize, ReadError> {
        self.engine.keyspaces.for_read(ks)
    }
}

impl Snapshot for MemSnapshot<'_> {
    type Range<'s>
        = MemRange<'s>
    where
        Self: 's;

    type Cursor<'s>
        = crate::Lent<Self::Range<'s>>
    where
        Self: 's;

    fn version(&self) -> Result<u64, ReadError> {
        Ok(self.version)
    }

    fn get(&self, ks: Keyspace, key: &[u8]) -> Result<Option<Vec<u8>>, ReadError> {
        let ks = self.ks(ks)?;
        let state = self.engine.read();
        let at = if crate::fault_point!("snapshot-sees-later-commits") {
            state.version
        } else {
            self.version
        };
        Ok(state.maps[ks]
            .get(key)
            .and_then(|v| visible(v, at))
            .map(|v| v.to_vec()))
    }

    fn range(&self, ks: Keyspace, mut range: RangeSpec) -> Result<MemRange<'_>, ReadError> {
        let ks = self.ks(ks)?;
        range.validate()?;
        if crate::fault_point!("range-end-inclusive")
            && let Bound::Excluded(end) = &range.end
        {
            range.end = Bound::Included(end.clone());
        }
        Ok(MemRange {
            snapshot: self,
            ks,
            remaining: range.limit.unwrap_or(usize::MAX),
            range,
            buffer: std::collections::VecDeque::new(),
            exhausted: false,
        })
    }

    fn cursor(&self, ks: Keyspace, range: RangeSpec) -> Result<Self::Cursor<'_>, ReadError> {
        self.range(ks, range).map(crate::Lent::new)
    }
}

/// A streaming range over a [`MemSnapshot`]: it reads ahead at most
/// [`MemRange::BATCH`] entries at a time under the read lock, resuming after
/// the last key it read, so a range is never materialised whole.
pub struct MemRange<'s> {
    snapshot: &'s MemSnapshot<'s>,
    ks: usize,
    range: RangeSpec,
    remaining: usize,
    buffer: std::collections::VecDeque<(Vec<u8>, Vec<u8>)>,
    exhausted: bool,
}

impl MemRange<'_> {
    /// Entries read per lock acquisition.
    pub const BATCH: usize = 128;

    fn refill(&mut self) {
        let state = self.snapshot.engine.read();
        let map = &state.maps[self.ks];
        let version = self.snapshot.version;
        let want = self.remaining.min(Self::BATCH);
        let candidates = within(map, &self.range.start, &self.range.end);
        let visible_rows =
            |(k, v): (&Vec<u8>, &Versions)| visible(v, version).map(|v| (k.clone(), v.to_vec()));
        if self.range.reverse {
            self.buffer
                .extend(candidates.rev().filter_map(visible_rows).take(want));
        } else {
            self.buffer
                .extend(candidates.filter_map(visible_rows).take(want));
        }
        self.exhausted = self.buffer.len() < want;
        if let Some((last, _)) = self.buffer.back() {
            if self.range.reverse {
                self.range.end = Bound::Excluded(last.clone());
            } else {
                self.range.start = Bound::Excluded(last.clone());
            }
        }
    }
}

impl Iterator for MemRange<'_> {
    type Item = Result<(Vec<u8>, Vec<u8>), ReadError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.remaining == 0 {
            return None;
        }
        if self.buffer.is_empty() && !self.exhausted {
            self.refill();
        }
        let row = self.buffer.pop_front()?;
        self.remaining -= 1;
        Some(Ok(row))
    }
}
