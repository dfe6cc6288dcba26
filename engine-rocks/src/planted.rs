//! Deliberate mistakes for the simulation to catch (feature `planted-bugs`,
//! which normal builds never enable). The bug in force is per thread: a
//! simulated run plants it on the thread that runs it (which is the thread
//! that commits and syncs), and other threads (other tests) are unaffected.

use std::cell::Cell;

/// A planted RocksDB engine bug.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PlantedBug {
    /// The log is flushed to the operating system instead of synced
    /// (`flush_wal(false)`) where a commit or `sync()` must be made durable:
    /// a process kill loses nothing, a power cut loses what was reported
    /// durable.
    WalFlushedNotSynced,
}

impl PlantedBug {
    /// Every planted bug.
    pub const ALL: [Self; 1] = [Self::WalFlushedNotSynced];

    /// Its name on the command line.
    pub const fn name(self) -> &'static str {
        match self {
            Self::WalFlushedNotSynced => "wal-flushed-not-synced",
        }
    }

    /// The bug with this name.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|b| b.name() == name)
    }
}

thread_local! {
    static PLANTED: Cell<Option<PlantedBug>> = const { Cell::new(None) };
}

/// Plants `bug` on this thread (`None` removes it).
pub fn plant(bug: Option<PlantedBug>) {
    PLANTED.with(|p| p.set(bug));
}

/// Whether `bug` is planted on this thread.
pub(crate) fn active(bug: PlantedBug) -> bool {
    PLANTED.with(|p| p.get() == Some(bug))
}
