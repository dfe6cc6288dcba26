//! Group commit: concurrent commits share one write, and one durable write
//! when any of them asks for it.
//!
//! A thread that commits while another is writing does not wait for the
//! commit lock: it queues its commit and waits, yielding the processor a
//! bounded number of times before it sleeps. When the writer (the
//! *leader*) is done, the first queued thread to wake becomes the next
//! leader and takes every commit queued behind it as one group, which the
//! engine writes in order: each commit's predicates are checked against the
//! state including the group's earlier commits, a commit that fails fails
//! alone, versions are consecutive over the commits applied, and the group
//! is made durable once. Each caller wakes with its own result. A thread
//! that finds nobody writing and nobody queued writes its commit at once,
//! as a group of one, with no queueing and no wake-up.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};

use crate::contract::{Commit, CommitInfo, Durability};
use crate::error::{BackendError, CommitError};
use crate::keyspace::Keyspaces;

/// One result per commit of a group, in the group's order.
pub type GroupResults = Vec<Result<CommitInfo, CommitError>>;

/// Why a commit of a group failed when the group as a whole failed: the
/// message of the error that stopped the group. The commit that met the
/// error carries the error itself; the others carry this.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("its commit group failed: {0}")]
pub struct GroupFailed(pub String);

impl GroupFailed {
    /// A definite failure of a group member (nothing of it applied), caused
    /// by `cause`.
    pub fn not_applied(cause: &dyn std::fmt::Display) -> CommitError {
        CommitError::Backend(Box::new(Self(cause.to_string())))
    }

    /// An unknown outcome of a group member (the group's write failed after
    /// it may have reached storage), caused by `cause`.
    pub fn unknown(cause: &dyn std::fmt::Display) -> CommitError {
        CommitError::OutcomeUnknown(Box::new(Self(cause.to_string())))
    }
}

/// How many groups a [`GroupCommitter`] wrote, how many commits they held
/// and how many durable writes (syncs) the engine made for them:
/// `commits / syncs` is the number of commits per durable write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct GroupStats {
    /// Groups written.
    pub groups: u64,
    /// Commits in them.
    pub commits: u64,
    /// Durable writes the engine made for commits (a durable group, a WAL
    /// sync covering one or more groups); not those of `Engine::sync`.
    pub syncs: u64,
}

/// The queue of commits waiting for the leader: a thread that commits
/// while another writes queues its commit, and the next leader writes the
/// queue as one group (see [`Engine::commit_group`](crate::Engine::commit_group)).
///
/// ```
/// use strata_engine::implement::{GroupCommitter, GroupResults};
/// use strata_engine::{Commit, CommitInfo};
///
/// let committer = GroupCommitter::new(64);
/// // The engine's group writer: here, versions 1, 2, 3... in order.
/// let next = std::sync::atomic::AtomicU64::new(0);
/// let write = |group: Vec<Commit>| -> GroupResults {
///     group
///         .iter()
///         .map(|_| Ok(CommitInfo { version: next.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1, durable: true }))
///         .collect()
/// };
/// let versions: Vec<u64> = std::thread::scope(|s| {
///     let hs: Vec<_> = (0..4).map(|_| s.spawn(|| committer.commit(Commit::new(), &write, Ok).map(|i| i.version))).collect();
///     hs.into_iter().map(|h| h.join().unwrap().unwrap()).collect()
/// });
/// let mut sorted = versions.clone();
/// sorted.sort_unstable();
/// assert_eq!(sorted, [1, 2, 3, 4]);
/// assert_eq!(committer.stats().commits, 4);
/// ```
#[derive(Debug)]
pub struct GroupCommitter {
    queue: Mutex<Queue>,
    max_group: usize,
    groups: AtomicU64,
    commits: AtomicU64,
    syncs: AtomicU64,
}

#[derive(Debug, Default)]
struct Queue {
    /// Commits waiting for a leader, oldest first, with the slot their
    /// caller sleeps on (none for the leader's own commit).
    waiting: VecDeque<(Commit, Option<Arc<Slot>>)>,
    /// A leader is writing a group, or has been chosen and is waking.
    leading: bool,
    /// The size of the last group written.
    last_group: usize,
    /// Commits still expected back from the callers of the last group:
    /// its size, less the commits queued since.
    returning: usize,
}

/// Where a queued caller sleeps until its result is in, or it is chosen
/// to lead the next group.
#[derive(Debug, Default)]
struct Slot {
    state: Mutex<SlotState>,
    wake: Condvar,
    /// The caller sleeps on `wake` (written and read under `state`'s
    /// lock): only then does [`Slot::set`] wake it. A caller still
    /// yielding sees the new state at its next turn, and the leader saves
    /// a system call per caller of its group.
    sleeping: std::sync::atomic::AtomicBool,
}

#[derive(Debug, Default)]
enum SlotState {
    #[default]
    Waiting,
    /// Lead the next group.
    Lead,
    Done(Result<CommitInfo, CommitError>),
}

impl Slot {
    fn set(&self, state: SlotState) {
        let mut guard = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        *guard = state;
        let sleeping = self.sleeping.load(Ordering::Relaxed);
        drop(guard);
        if sleeping {
            self.wake.notify_one();
        }
    }
}

impl GroupCommitter {
    /// A committer whose groups hold at most `max_group` commits (at
    /// least one).
    pub fn new(max_group: usize) -> Self {
        Self {
            queue: Mutex::new(Queue::default()),
            max_group: max_group.max(1),
            groups: AtomicU64::new(0),
            commits: AtomicU64::new(0),
            syncs: AtomicU64::new(0),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Groups and commits written so far.
    pub fn stats(&self) -> GroupStats {
        GroupStats {
            groups: self.groups.load(Ordering::Relaxed),
            commits: self.commits.load(Ordering::Relaxed),
            syncs: self.syncs.load(Ordering::Relaxed),
        }
    }

    /// Counts a durable write the engine made for commits (see
    /// [`GroupStats::syncs`]).
    pub fn count_sync(&self) {
        self.syncs.fetch_add(1, Ordering::Relaxed);
    }

    /// Commits `commit` in a group written by `write`, which must return
    /// one result per commit it is given, in order (a missing result is
    /// reported as an unknown outcome). Returns this commit's result.
    ///
    /// `write` may leave the group's `Immediate` commits not yet durable
    /// (applied, with `durable: false`): the leader then hands the lead on
    /// first, so the next group is written while this one syncs, and calls
    /// `sync(v)`, which must make every commit up to version `v` durable
    /// and return the durable version, before it hands out the results. A
    /// failed sync makes those commits' outcomes unknown.
    ///
    /// # Errors
    /// The commit's own error from `write`, or an unknown outcome when
    /// `sync` failed.
    pub fn commit<W, S>(&self, commit: Commit, write: W, sync: S) -> Result<CommitInfo, CommitError>
    where
        W: Fn(Vec<Commit>) -> GroupResults,
        S: Fn(u64) -> Result<u64, BackendError>,
    {
        let mut queue = self.lock();
        queue.returning = queue.returning.saturating_sub(1);
        if !queue.leading {
            // Without a leader the queue is empty (a leader hands the lead
            // on while anyone waits), so this commit is the group's first.
            debug_assert!(queue.waiting.is_empty());
            queue.leading = true;
            if queue.last_group <= 1 {
                // Alone, as far as anyone can tell: write at once.
                drop(queue);
                // No slot: its result is the leader's own.
                return self
                    .run(vec![commit], Vec::new(), &write, &sync)
                    .unwrap_or_else(|| Err(missing()));
            }
            queue.waiting.push_back((commit, None));
            return self.lead(queue, &write, &sync);
        }
        let slot = Arc::new(Slot::default());
        queue.waiting.push_back((commit, Some(Arc::clone(&slot))));
        drop(queue);
        let mut state = slot.state.lock().unwrap_or_else(PoisonError::into_inner);
        let mut yields = 0;
        loop {
            match std::mem::take(&mut *state) {
                SlotState::Waiting if yields < WAIT_YIELDS => {
                    yields += 1;
                    drop(state);
                    std::thread::yield_now();
                    state = slot.state.lock().unwrap_or_else(PoisonError::into_inner);
                }
                SlotState::Waiting => {
                    slot.sleeping.store(true, Ordering::Relaxed);
                    state = slot
                        .wake
                        .wait(state)
                        .unwrap_or_else(PoisonError::into_inner);
                }
                SlotState::Done(result) => return result,
                SlotState::Lead => {
                    drop(state);
                    let result = self.lead(self.lock(), &write, &sync);
                    // This caller's commit was at the front, so in the
                    // group it led: its result is in its slot (`result`
                    // only says so).
                    let mut state = slot.state.lock().unwrap_or_else(PoisonError::into_inner);
                    return match std::mem::take(&mut *state) {
                        SlotState::Done(own) => own,
                        _ => result,
                    };
                }
            }
        }
    }

    /// Leads one group: the commits queued, up to the limit, from the
    /// front, where the caller's own commit is (without a slot when it
    /// started leading, in its slot when chosen). Returns the result of
    /// the commit without a slot; a chosen leader finds its own in its
    /// slot.
    fn lead<'c, W, S>(
        &'c self,
        mut queue: MutexGuard<'c, Queue>,
        write: &W,
        sync: &S,
    ) -> Result<CommitInfo, CommitError>
    where
        W: Fn(Vec<Commit>) -> GroupResults,
        S: Fn(u64) -> Result<u64, BackendError>,
    {
        // The callers of the last group are on their way back with their
        // next commits, as a rule: give them the processor for a moment so
        // they join this group instead of forming the next one (without
        // this, groups alternate between the callers of the last two
        // groups and are half as large). No clock: a bounded number of
        // yields.
        for _ in 0..YIELDS {
            if queue.returning == 0 || queue.waiting.len() >= self.max_group {
                break;
            }
            drop(queue);
            std::thread::yield_now();
            queue = self.lock();
        }
        let n = queue.waiting.len().min(self.max_group);
        let (group, slots): (Vec<Commit>, Vec<Option<Arc<Slot>>>) =
            queue.waiting.drain(..n).unzip();
        drop(queue);
        tracing::trace!(commits = group.len(), "leading a commit group");
        self.run(group, slots, write, sync)
            .unwrap_or_else(|| Err(missing()))
    }

    /// Writes one group as its leader, hands the lead on, syncs if the
    /// writer left that to us, and hands out the results. Returns the
    /// result of the commit without a slot, if there is one.
    fn run<W, S>(
        &self,
        group: Vec<Commit>,
        slots: Vec<Option<Arc<Slot>>>,
        write: &W,
        sync: &S,
    ) -> Option<Result<CommitInfo, CommitError>>
    where
        W: Fn(Vec<Commit>) -> GroupResults,
        S: Fn(u64) -> Result<u64, BackendError>,
    {
        let immediate = immediate_flags(&group);
        let mut lead = Lead {
            committer: self,
            size: group.len(),
            slots,
            passed: false,
        };
        let results = self.write(group, write);
        let through = unsynced(&results, &immediate);
        lead.pass(through.is_some());
        let results = settle(results, &immediate, through, sync);
        lead.hand_out(results)
    }

    /// Writes `commits` as one group now, from one caller: what
    /// [`crate::Engine::commit_group`] does, with `write` and `sync` as in
    /// [`GroupCommitter::commit`]. Commits that fail the keyspace check of
    /// `keyspaces` fail alone and are not written.
    pub fn commit_all<W, S>(
        &self,
        keyspaces: &Keyspaces,
        commits: Vec<Commit>,
        write: W,
        sync: S,
    ) -> GroupResults
    where
        W: Fn(Vec<Commit>) -> GroupResults,
        S: Fn(u64) -> Result<u64, BackendError>,
    {
        let mut results: Vec<Option<Result<CommitInfo, CommitError>>> = Vec::new();
        let mut valid = Vec::new();
        for commit in commits {
            match keyspaces.check_commit(&commit) {
                Ok(()) => {
                    results.push(None);
                    valid.push(commit);
                }
                Err(e) => results.push(Some(Err(e))),
            }
        }
        let immediate = immediate_flags(&valid);
        let written = if valid.is_empty() {
            Vec::new()
        } else {
            self.write(valid, &write)
        };
        let through = unsynced(&written, &immediate);
        let mut written = settle(written, &immediate, through, &sync).into_iter();
        results
            .into_iter()
            .map(|r| r.unwrap_or_else(|| written.next().unwrap_or_else(|| Err(missing()))))
            .collect()
    }

    fn write<W>(&self, group: Vec<Commit>, write: &W) -> GroupResults
    where
        W: Fn(Vec<Commit>) -> GroupResults,
    {
        let n = group.len();
        let mut results = write(group);
        // Exactly one result a commit: extra ones dropped, missing ones
        // unknown outcomes.
        results.resize_with(n, || Err(missing()));
        self.groups.fetch_add(1, Ordering::Relaxed);
        self.commits.fetch_add(n as u64, Ordering::Relaxed);
        results
    }
}

/// Which of `group`'s commits are `Immediate`, for [`unsynced`] and
/// [`settle`]: empty when none is (a group of buffered commits allocates
/// nothing for it, and [`unsynced`] finds nothing to sync).
fn immediate_flags(group: &[Commit]) -> Vec<bool> {
    let immediate = |c: &Commit| c.durability == Durability::Immediate;
    if group.iter().any(immediate) {
        group.iter().map(immediate).collect()
    } else {
        Vec::new()
    }
}

/// The highest version among the applied `Immediate` commits the writer
/// left not durable, if any.
fn unsynced(results: &GroupResults, immediate: &[bool]) -> Option<u64> {
    results
        .iter()
        .zip(immediate)
        .filter_map(|(r, &imm)| match r {
            Ok(info) if imm && !info.durable => Some(info.version),
            _ => None,
        })
        .max()
}

/// Syncs through `through` when the writer left that to the committer:
/// then every applied commit at or below the durable version is durable;
/// on a failed sync the `Immediate` ones have an unknown outcome (written,
/// not known durable) and the others stay applied, not durable.
fn settle<S>(
    results: GroupResults,
    immediate: &[bool],
    through: Option<u64>,
    sync: &S,
) -> GroupResults
where
    S: Fn(u64) -> Result<u64, BackendError>,
{
    let Some(through) = through else {
        return results;
    };
    match sync(through) {
        Ok(durable) => results
            .into_iter()
            .map(|r| {
                r.map(|info| CommitInfo {
                    durable: info.durable || info.version <= durable,
                    ..info
                })
            })
            .collect(),
        Err(e) => results
            .into_iter()
            .zip(immediate)
            .map(|(r, &imm)| match r {
                Ok(_) if imm => Err(GroupFailed::unknown(&e)),
                other => other,
            })
            .collect(),
    }
}

/// How many times a new leader yields, at most, for the last group's
/// callers to queue their next commits.
const YIELDS: usize = 64;

/// How many times a queued caller yields, at most, before it sleeps. A
/// group's callers all wait through its durable write and must all come
/// back with their next commits before the next group fills: woken from a
/// sleep, each costs a wake-up on the critical path; yielding, most see
/// their result at their next turn. No clock: a bounded number of yields
/// (a few hundred microseconds on a busy machine, less on an idle one),
/// then a sleep, so a long sync costs no more processor than that. Issue
/// 40's writers table, redb, 16 writers: 0.55–0.61 of the group-commit
/// ceiling sleeping at once, 0.72–0.76 yielding first; 0.78–0.97 (over
/// 4,096 commits) since a caller still yielding is not sent a wake-up
/// ([`Slot::set`]).
const WAIT_YIELDS: usize = 400;

fn missing() -> CommitError {
    GroupFailed::unknown(&"the group writer returned no result for this commit")
}

/// A leader's turn. [`Lead::pass`] chooses the next leader (the oldest
/// queued caller, if any) and wakes it; [`Lead::hand_out`] gives each
/// queued caller of the group its result. If the writer panics, dropping
/// the turn does both, each caller getting an unknown outcome.
struct Lead<'c> {
    committer: &'c GroupCommitter,
    /// Commits in the group.
    size: usize,
    /// The queued callers' slots, in the group's order; `None`, or no
    /// slot at all past the end (a group of one written at once), for the
    /// leader's own commit.
    slots: Vec<Option<Arc<Slot>>>,
    passed: bool,
}

impl Lead<'_> {
    /// Hands the lead on to the oldest queued caller, or leaves nobody
    /// leading when none waits. `syncing`: the group's callers come back
    /// only after a sync, so the next leader should not wait for them.
    fn pass(&mut self, syncing: bool) {
        if std::mem::replace(&mut self.passed, true) {
            return;
        }
        let next = {
            let mut queue = self.committer.lock();
            // Before any result is out, so every caller coming back
            // counts.
            queue.last_group = self.size.max(1);
            queue.returning = if syncing { 0 } else { queue.last_group };
            match queue.waiting.front() {
                None => {
                    queue.leading = false;
                    None
                }
                // Queued while this group was being written: every queued
                // commit has its caller's slot.
                Some((_, slot)) => slot.clone(),
            }
        };
        if let Some(next) = next {
            next.set(SlotState::Lead);
        }
    }

    /// Gives each queued caller its result; returns the leader's own.
    fn hand_out(&mut self, results: GroupResults) -> Option<Result<CommitInfo, CommitError>> {
        let mut own = None;
        let mut slots = self.slots.drain(..);
        for result in results {
            match slots.next().flatten() {
                Some(slot) => slot.set(SlotState::Done(result)),
                None => own = Some(result),
            }
        }
        own
    }
}

impl Drop for Lead<'_> {
    fn drop(&mut self) {
        // Only on a panic in the writer or the sync: normally `pass` and
        // `hand_out` ran and the slots are drained.
        for slot in self.slots.drain(..).flatten() {
            slot.set(SlotState::Done(Err(GroupFailed::unknown(
                &"the leader of its group panicked",
            ))));
        }
        self.pass(false);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    #[test]
    fn a_lone_commit_is_a_group_of_one() {
        let c = GroupCommitter::new(8);
        let r = c.commit(
            Commit::new().durability(Durability::Buffered),
            |g: Vec<Commit>| {
                assert_eq!(g.len(), 1);
                vec![Ok(CommitInfo {
                    version: 5,
                    durable: false,
                })]
            },
            |_| panic!("a buffered commit needs no sync"),
        );
        assert_eq!(r.map(|i| i.version).ok(), Some(5));
        assert_eq!(
            c.stats(),
            GroupStats {
                groups: 1,
                commits: 1,
                syncs: 0
            }
        );
    }

    #[test]
    fn a_lone_immediate_commit_left_unsynced_is_synced_before_it_returns() {
        let c = GroupCommitter::new(8);
        let synced = AtomicU64::new(0);
        let write = |g: Vec<Commit>| -> GroupResults {
            assert_eq!(g.len(), 1);
            vec![Ok(CommitInfo {
                version: 7,
                durable: false,
            })]
        };
        let sync = |through| {
            synced.store(through, Ordering::SeqCst);
            Ok(through)
        };
        let r = c.commit(Commit::new(), write, sync).unwrap();
        assert_eq!(
            synced.load(Ordering::SeqCst),
            7,
            "synced through its version"
        );
        assert_eq!(
            r,
            CommitInfo {
                version: 7,
                durable: true
            }
        );
        // A failed sync: its outcome is unknown, not a success.
        let r = c.commit(Commit::new(), write, |_| Err("disk gone".into()));
        assert!(matches!(r, Err(CommitError::OutcomeUnknown(_))), "{r:?}");
    }

    #[test]
    fn a_writer_returning_too_few_results_reports_unknown_outcomes() {
        let c = GroupCommitter::new(8);
        let r = c.commit(Commit::new(), |_| Vec::new(), Ok);
        assert!(matches!(r, Err(CommitError::OutcomeUnknown(_))));
        // In a group too: a queued caller whose commit got no result is
        // woken with an unknown outcome, not left waiting. The first write
        // is slow, so the second caller queues behind it.
        let calls = AtomicUsize::new(0);
        let write = |_: Vec<Commit>| -> GroupResults {
            if calls.fetch_add(1, Ordering::SeqCst) == 0 {
                std::thread::sleep(std::time::Duration::from_millis(100));
            }
            Vec::new()
        };
        let results: Vec<bool> = std::thread::scope(|s| {
            let first = s.spawn(|| c.commit(Commit::new(), write, Ok));
            while calls.load(Ordering::SeqCst) == 0 {
                std::thread::yield_now();
            }
            // Two more queue while the first writes: one leads the next
            // group, the other waits in it for its result.
            let more: Vec<_> = (0..2)
                .map(|_| s.spawn(|| c.commit(Commit::new(), write, Ok)))
                .collect();
            std::iter::once(first)
                .chain(more)
                .map(|h| matches!(h.join().unwrap(), Err(CommitError::OutcomeUnknown(_))))
                .collect()
        });
        assert_eq!(results, [true, true, true]);
    }

    fn one_keyspace() -> (Keyspaces, crate::Keyspace) {
        let ks = Keyspaces::new(vec![crate::KeyspaceSpec::new("a", crate::Profile::General)])
            .expect("one keyspace");
        let a = ks.get("a").expect("declared");
        (ks, a)
    }

    /// Threads commit at once through a writer that numbers what it
    /// applies; `deferred`: the writer leaves immediate commits to the
    /// committer's sync. Every caller gets its own result (the key it put
    /// comes back as its version's entry), versions are 1..=n with no gap,
    /// only one group is written at a time, groups respect their limit and
    /// form at all.
    #[allow(clippy::cast_possible_truncation)] // small test counts
    fn threads_commit(deferred: bool) {
        const THREADS: usize = 8;
        const EACH: usize = 60;
        let c = GroupCommitter::new(4);
        let (_, a) = one_keyspace();
        let largest = AtomicUsize::new(0);
        let writing = std::sync::atomic::AtomicBool::new(false);
        // What each version holds: the key of the commit that got it.
        let applied = Mutex::new(Vec::<Vec<u8>>::new());
        let synced = AtomicU64::new(0);
        let write = |g: Vec<Commit>| -> GroupResults {
            assert!(!writing.swap(true, Ordering::SeqCst), "two leaders at once");
            largest.fetch_max(g.len(), Ordering::SeqCst);
            std::thread::sleep(std::time::Duration::from_micros(50));
            let mut log = applied.lock().unwrap();
            let results = g
                .into_iter()
                .map(|commit| match commit.mutations.first() {
                    Some(crate::Mutation::Put { key, .. }) => {
                        log.push(key.clone());
                        Ok(CommitInfo {
                            version: log.len() as u64,
                            durable: !deferred,
                        })
                    }
                    // Empty commits fail alone.
                    _ => Err(CommitError::InvalidMutation {
                        index: 0,
                        reason: crate::error::MutationError::Unsupported,
                    }),
                })
                .collect();
            drop(log);
            writing.store(false, Ordering::SeqCst);
            results
        };
        let sync = |v: u64| -> Result<u64, BackendError> {
            assert!(deferred, "sync called though the writer made all durable");
            let last = applied.lock().unwrap().len() as u64;
            assert!(v <= last, "a sync asked beyond what was written");
            synced.fetch_max(last, Ordering::SeqCst);
            Ok(last)
        };
        let got: Vec<(Vec<u8>, Result<CommitInfo, CommitError>)> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..THREADS)
                .map(|t| {
                    let (c, write, sync) = (&c, &write, &sync);
                    s.spawn(move || {
                        (0..EACH)
                            .map(|i| {
                                let key = vec![t as u8, i as u8];
                                let commit = if (t + i) % 3 == 0 {
                                    Commit::new()
                                } else {
                                    Commit::new().put(a, key.clone(), vec![0])
                                };
                                (key, c.commit(commit, write, sync))
                            })
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            hs.into_iter().flat_map(|h| h.join().unwrap()).collect()
        });
        let log = applied.lock().unwrap().clone();
        let mut versions = Vec::new();
        for (key, result) in &got {
            let failing = (usize::from(key[0]) + usize::from(key[1])) % 3 == 0;
            match result {
                Ok(info) => {
                    assert!(!failing, "{key:?} should have failed");
                    assert!(info.durable, "an immediate commit returned not durable");
                    assert_eq!(
                        log[info.version as usize - 1],
                        *key,
                        "a result went to the wrong caller"
                    );
                    versions.push(info.version);
                }
                Err(e) => assert!(failing, "{key:?} failed: {e}"),
            }
        }
        versions.sort_unstable();
        assert_eq!(versions, (1..=log.len() as u64).collect::<Vec<_>>());
        let stats = c.stats();
        assert_eq!(stats.commits, (THREADS * EACH) as u64);
        assert!(
            largest.load(Ordering::SeqCst) <= 4,
            "a group above its limit"
        );
        assert!(
            stats.groups < stats.commits,
            "eight threads and a slow writer formed no group: {stats:?}"
        );
        if deferred {
            assert_eq!(synced.load(Ordering::SeqCst), log.len() as u64);
        }
    }

    #[test]
    fn concurrent_commits_form_groups_and_each_gets_its_own_result() {
        threads_commit(false);
    }

    #[test]
    fn a_deferred_sync_makes_each_group_durable_before_its_callers_return() {
        threads_commit(true);
    }

    #[test]
    fn a_failed_deferred_sync_leaves_immediate_commits_unknown_and_buffered_ones_applied() {
        let c = GroupCommitter::new(8);
        let (ks, a) = one_keyspace();
        let write = |g: Vec<Commit>| -> GroupResults {
            (1..=g.len() as u64)
                .map(|version| {
                    Ok(CommitInfo {
                        version,
                        durable: false,
                    })
                })
                .collect()
        };
        // An immediate commit, then a buffered one.
        let pair = || {
            vec![
                Commit::new().put(a, vec![1], vec![1]),
                Commit::new()
                    .durability(Durability::Buffered)
                    .put(a, vec![2], vec![2]),
            ]
        };
        let results = c.commit_all(&ks, pair(), write, |_| Err("disk gone".into()));
        assert!(
            matches!(&results[0], Err(CommitError::OutcomeUnknown(e)) if e.to_string().contains("disk gone"))
        );
        assert!(matches!(
            results[1],
            Ok(CommitInfo {
                version: 2,
                durable: false
            })
        ));
        // A sync that covers only the first: the second stays not durable.
        let results = c.commit_all(&ks, pair(), write, |v| {
            assert_eq!(v, 1, "synced through the last immediate commit");
            Ok(1)
        });
        let durable: Vec<bool> = results
            .iter()
            .map(|r| r.as_ref().unwrap().durable)
            .collect();
        assert_eq!(durable, [true, false]);
    }

    #[test]
    fn a_panicking_writer_fails_its_group_and_the_next_commit_proceeds() {
        let c = GroupCommitter::new(8);
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            c.commit(Commit::new(), |_| panic!("writer bug"), Ok)
        }));
        assert!(r.is_err());
        let r = c.commit(
            Commit::new(),
            |_| {
                vec![Ok(CommitInfo {
                    version: 1,
                    durable: true,
                })]
            },
            Ok,
        );
        assert!(r.is_ok(), "the committer stayed locked after a panic");
    }

    #[test]
    fn commit_all_checks_keyspaces_and_keeps_order() {
        let ks = crate::keyspace::Keyspaces::new(vec![crate::KeyspaceSpec::new(
            "a",
            crate::Profile::General,
        )])
        .unwrap();
        let other = crate::keyspace::Keyspaces::new(vec![crate::KeyspaceSpec::new(
            "b",
            crate::Profile::General,
        )])
        .unwrap();
        let (a, foreign) = (ks.get("a").unwrap(), other.get("b").unwrap());
        let c = GroupCommitter::new(8);
        let results = c.commit_all(
            &ks,
            vec![
                Commit::new()
                    .durability(Durability::Buffered)
                    .put(a, vec![1], vec![1]),
                Commit::new().put(foreign, vec![1], vec![1]),
                Commit::new()
                    .durability(Durability::Buffered)
                    .put(a, vec![2], vec![2]),
            ],
            |g| {
                assert_eq!(g.len(), 2, "the foreign commit reached the writer");
                (1..=2)
                    .map(|v| {
                        Ok(CommitInfo {
                            version: v,
                            durable: false,
                        })
                    })
                    .collect()
            },
            |_| panic!("a buffered group needs no sync"),
        );
        let versions: Vec<Option<u64>> = results
            .iter()
            .map(|r| r.as_ref().ok().map(|i| i.version))
            .collect();
        assert_eq!(versions, [Some(1), None, Some(2)]);
        assert!(matches!(results[1], Err(CommitError::UnknownKeyspace(_))));
    }
}
