//! Commit versions for engines that number their own commits.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

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
}

/// A commit in progress: holds the commit lock until it is dropped (the
/// commit then took no version) or [`Sequence::committed`].
#[derive(Debug)]
pub struct Sequence<'s> {
    seq: &'s Sequencer,
    guard: MutexGuard<'s, u64>,
}

impl Sequencer {
    /// Starts after `recovered`, the last version found in storage, which
    /// is durable.
    pub fn new(recovered: u64) -> Self {
        Self {
            lock: Mutex::new(recovered),
            last: AtomicU64::new(recovered),
            durable: AtomicU64::new(recovered),
        }
    }

    /// Waits for the commit lock and returns the commit it serialises.
    pub fn begin(&self) -> Sequence<'_> {
        Sequence {
            seq: self,
            guard: self.lock.lock().unwrap_or_else(PoisonError::into_inner),
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

    /// Records that every version up to `version` is durable (an engine
    /// that learns it some other way).
    pub fn mark_durable(&self, version: u64) {
        self.durable.fetch_max(version, Ordering::SeqCst);
    }
}

impl Sequence<'_> {
    /// The version this commit gets.
    pub fn version(&self) -> u64 {
        *self.guard + 1
    }

    /// The commit was applied (and is durable when `durable`): takes its
    /// version and releases the lock.
    pub fn committed(mut self, durable: bool) -> CommitInfo {
        let version = *self.guard + 1;
        *self.guard = version;
        self.seq.last.store(version, Ordering::SeqCst);
        if durable {
            self.seq.durable.fetch_max(version, Ordering::SeqCst);
        }
        CommitInfo { version, durable }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
