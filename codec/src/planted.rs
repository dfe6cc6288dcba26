//! Deliberate mistakes for the simulation to catch (feature `planted-bugs`,
//! which normal builds never enable). The codec is pure functions, so the
//! bug in force is per thread: a simulated run plants it on the thread that
//! runs it, and other threads (other tests) are unaffected.

use std::cell::Cell;

/// A planted codec bug.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PlantedBug {
    /// Envelopes are written without their expiry.
    ExpiryNotEncoded,
    /// A chunked write leaves out its last chunk row.
    LastChunkDropped,
}

impl PlantedBug {
    /// Every planted bug.
    pub const ALL: [Self; 2] = [Self::ExpiryNotEncoded, Self::LastChunkDropped];

    /// Its name on the command line.
    pub const fn name(self) -> &'static str {
        match self {
            Self::ExpiryNotEncoded => "expiry-not-encoded",
            Self::LastChunkDropped => "last-chunk-dropped",
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
