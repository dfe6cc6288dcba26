//! Commit versions for engines that number their own commits.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};

use crate::contract::CommitInfo;

/// The version bookkeeping of an embedded engine: serialises commits,
/// hands each the next version, and tracks the last committed and the last
/// durable version.
///
/// An engine recovers the last committed version from its storage at open
/// and starts a sequencer there; every commit runs between [`Sequencer::begin`]
/// and [`Sequence::committed`], so versions grow by one per applied commit
/// and the next version needs no read. (A server engine takes its versions
/// from the server instead.)
///
/// ```
/// use strata_engine::implement::Sequencer;
///
/// let seq = Sequencer::new(7);
/// let s = seq.begin();
/// assert_eq!(s.version(), 8);
/// let info = s.committed(false);
/// assert_eq!((info.version, info.durable), (8, false));
/// assert_eq!((seq.last(), seq.durable()), (8, 7));
/// assert_eq!(seq.sync(|| Ok::<(), ()>(())), Ok(8));
/// assert_eq!(seq.durable(), 8);
/// ```
#[derive(Debug)]
pub struct Sequencer {
    /// The last committed version; held for a whole commit.
    lock: Mutex<u64>,
    last: AtomicU64,
    durable: AtomicU64,
    /// A [`Sequencer::sync_through`] is in flight.
    syncing: Mutex<bool>,
    synced: Condvar,
}

/// A commit (or a group of commits) in progress: holds the commit lock
/// until it is dropped (the versions it took are then given back) or
/// published by [`Sequence::committed`] or [`Sequence::publish`].
#[derive(Debug)]
pub struct Sequence<'s> {
    seq: &'s Sequencer,
    guard: MutexGuard<'s, u64>,
    /// Versions taken by the commits of this group so far.
    taken: u64,
}

impl Sequencer {
    /// Starts after `recovered`, the last version found in storage, which
    /// is durable.
    pub fn new(recovered: u64) -> Self {
        Self {
            lock: Mutex::new(recovered),
            last: AtomicU64::new(recovered),
            durable: AtomicU64::new(recovered),
            syncing: Mutex::new(false),
            synced: Condvar::new(),
        }
    }

    /// Waits for the commit lock and returns the commit it serialises.
    pub fn begin(&self) -> Sequence<'_> {
        Sequence {
            seq: self,
            guard: self.lock.lock().unwrap_or_else(PoisonError::into_inner),
            taken: 0,
        }
    }

    /// The last committed version.
    pub fn last(&self) -> u64 {
        self.last.load(Ordering::SeqCst)
    }

    /// The last version known durable.
    pub fn durable(&self) -> u64 {
        self.durable.load(Ordering::SeqCst)
    }

    /// Runs `make_durable` under the commit lock, so no commit interleaves;
    /// when it succeeds, every committed version is durable.
    ///
    /// # Errors
    /// `make_durable`'s error; the durable version is then unchanged.
    pub fn sync<E>(&self, make_durable: impl FnOnce() -> Result<(), E>) -> Result<u64, E> {
        let last = self.lock.lock().unwrap_or_else(PoisonError::into_inner);
        make_durable()?;
        self.durable.fetch_max(*last, Ordering::SeqCst);
        Ok(self.durable())
    }

    /// Makes `version` durable without holding the commit lock, so commits
    /// go on while it syncs, for engines whose sync can run beside writes
    /// (RocksDB's WAL sync). Concurrent callers share syncs: one runs
    /// `make_durable` at a time, covering every commit published before it
    /// started; the others wait for it and return at once if it covered
    /// them, or run the next one. Returns the durable version.
    ///
    /// `make_durable` must make durable every commit published (by
    /// [`Sequence::publish`]) before it is called.
    ///
    /// # Errors
    /// `make_durable`'s error; the durable version is then unchanged.
    pub fn sync_through<E>(
        &self,
        version: u64,
        make_durable: impl FnOnce() -> Result<(), E>,
    ) -> Result<u64, E> {
        let mut syncing = self.syncing.lock().unwrap_or_else(PoisonError::into_inner);
        loop {
            if self.durable() >= version {
                return Ok(self.durable());
            }
            if !*syncing {
                break;
            }
            syncing = self
                .synced
                .wait(syncing)
                .unwrap_or_else(PoisonError::into_inner);
        }
        *syncing = true;
        drop(syncing);
        let target = self.last();
        let result = make_durable();
        if result.is_ok() {
            self.durable.fetch_max(target, Ordering::SeqCst);
        }
        *self.syncing.lock().unwrap_or_else(PoisonError::into_inner) = false;
        self.synced.notify_all();
        result.map(|()| self.durable())
    }

    /// Records that every version up to `version` is durable (an engine
    /// that learns it some other way).
    pub fn mark_durable(&self, version: u64) {
        self.durable.fetch_max(version, Ordering::SeqCst);
    }
}

impl Sequence<'_> {
    /// The version the next commit of this sequence gets.
    pub fn version(&self) -> u64 {
        *self.guard + self.taken + 1
    }

    /// The next commit of a group was applied: it takes [`Sequence::version`],
    /// returned. Nothing is visible to [`Sequencer::last`] before
    /// [`Sequence::publish`].
    pub fn take(&mut self) -> u64 {
        self.taken += 1;
        *self.guard + self.taken
    }

    /// Raises the version this sequence publishes to at least `version`
    /// (see [`Engine::raise_version`](crate::Engine::raise_version)), taking
    /// no commit's version; returns the version it will publish.
    pub fn raise_to(&mut self, version: u64) -> u64 {
        self.taken = self.taken.max(version.saturating_sub(*self.guard));
        *self.guard + self.taken
    }

    /// The number of versions taken so far.
    pub fn taken(&self) -> u64 {
        self.taken
    }

    /// The commits taken were applied (and are durable when `durable`):
    /// publishes their versions, releases the lock and returns the last
    /// committed version.
    pub fn publish(mut self, durable: bool) -> u64 {
        let last = *self.guard + self.taken;
        *self.guard = last;
        self.seq.last.store(last, Ordering::SeqCst);
        if durable {
            self.seq.durable.fetch_max(last, Ordering::SeqCst);
        }
        last
    }

    /// The commit was applied (and is durable when `durable`): takes its
    /// version and releases the lock.
    pub fn committed(mut self, durable: bool) -> CommitInfo {
        let version = self.take();
        self.publish(durable);
        CommitInfo { version, durable }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raising_skips_versions_and_never_lowers() {
        let seq = Sequencer::new(5);
        let mut s = seq.begin();
        assert_eq!(s.raise_to(3), 5);
        assert_eq!(s.raise_to(40), 40);
        assert_eq!(s.publish(true), 40);
        assert_eq!((seq.last(), seq.durable()), (40, 40));
        assert_eq!(seq.begin().version(), 41);
    }

    #[test]
    fn an_abandoned_commit_takes_no_version() {
        let seq = Sequencer::new(0);
        drop(seq.begin());
        assert_eq!(seq.begin().version(), 1);
        assert_eq!(seq.last(), 0);
    }

    #[test]
    fn durable_follows_durable_commits_and_syncs_only() {
        let seq = Sequencer::new(3);
        assert_eq!(seq.begin().committed(true).version, 4);
        assert_eq!(seq.begin().committed(false).version, 5);
        assert_eq!((seq.last(), seq.durable()), (5, 4));
        assert_eq!(seq.sync(|| Err::<(), _>("disk")), Err("disk"));
        assert_eq!(seq.durable(), 4, "a failed sync changes nothing");
        assert_eq!(seq.sync(|| Ok::<(), ()>(())), Ok(5));
        seq.mark_durable(2);
        assert_eq!(seq.durable(), 5, "durable never goes back");
    }

    #[test]
    fn commits_on_threads_get_distinct_consecutive_versions() {
        let seq = Sequencer::new(0);
        let mut got: Vec<u64> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..4)
                .map(|_| {
                    s.spawn(|| {
                        (0..100)
                            .map(|_| seq.begin().committed(false).version)
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            handles
                .into_iter()
                .flat_map(|h| h.join().unwrap())
                .collect()
        });
        got.sort_unstable();
        assert_eq!(got, (1..=400).collect::<Vec<_>>());
    }

    #[test]
    fn sync_through_covers_what_was_published_before_it_and_shares_syncs() {
        let seq = Sequencer::new(0);
        for _ in 0..3 {
            seq.begin().committed(false);
        }
        let calls = std::sync::atomic::AtomicU64::new(0);
        let count = || {
            calls.fetch_add(1, Ordering::SeqCst);
            Ok::<(), ()>(())
        };
        assert_eq!(
            seq.sync_through(2, count),
            Ok(3),
            "covers every published commit"
        );
        assert_eq!(
            seq.sync_through(3, count),
            Ok(3),
            "already durable: no sync"
        );
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        seq.begin().committed(false);
        assert_eq!(seq.sync_through(4, || Err::<(), _>("disk")), Err("disk"));
        assert_eq!(seq.durable(), 3, "a failed sync changes nothing");
        // Threads asking at once: each returns durable at or above what it
        // asked, with fewer syncs than callers or at most one each.
        for _ in 0..5 {
            seq.begin().committed(false);
        }
        std::thread::scope(|s| {
            for v in 4..=9u64 {
                let (seq, count) = (&seq, &count);
                s.spawn(move || {
                    let got = seq.sync_through(v, count).unwrap();
                    assert!(got >= v);
                });
            }
        });
        assert!(calls.load(Ordering::SeqCst) <= 7);
        assert_eq!(seq.durable(), 9);
    }

    #[test]
    fn a_group_takes_consecutive_versions_and_publishes_them_at_once() {
        let seq = Sequencer::new(10);
        let mut s = seq.begin();
        assert_eq!(s.version(), 11);
        assert_eq!(s.take(), 11);
        assert_eq!(s.version(), 12, "a refused member takes nothing");
        assert_eq!(s.take(), 12);
        assert_eq!(s.taken(), 2);
        assert_eq!(seq.last(), 10, "nothing visible before publishing");
        assert_eq!(s.publish(true), 12);
        assert_eq!((seq.last(), seq.durable()), (12, 12));
        let mut s = seq.begin();
        assert_eq!(s.take(), 13);
        drop(s);
        assert_eq!(seq.last(), 12, "an abandoned group gives its versions back");
        assert_eq!(seq.begin().version(), 13);
        let mut s = seq.begin();
        s.take();
        assert_eq!(s.publish(false), 13);
        assert_eq!((seq.last(), seq.durable()), (13, 12));
    }
}
