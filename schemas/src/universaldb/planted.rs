//! The UniversalDB module's planted bug (feature `planted-bugs`):
//! serializable reads that pin nothing, for the simulation to catch. It is
//! switched per thread (the simulation runs a seed on one thread), and
//! kept apart from the real logic (mutation testing skips `planted.rs`).

#[cfg(feature = "planted-bugs")]
thread_local! {
    static UNPINNED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Whether serializable reads are planted to pin nothing on this thread.
pub(super) fn reads_unpinned() -> bool {
    #[cfg(feature = "planted-bugs")]
    {
        UNPINNED.with(std::cell::Cell::get)
    }
    #[cfg(not(feature = "planted-bugs"))]
    {
        false
    }
}

/// The module's planted bugs, by name.
#[cfg(feature = "planted-bugs")]
pub const PLANTED: [&str; 1] = ["serializable-reads-unpinned"];

/// Plants (or removes) the bug `serializable-reads-unpinned` on this
/// thread.
#[cfg(feature = "planted-bugs")]
pub fn plant_unpinned_reads(on: bool) {
    UNPINNED.with(|c| c.set(on));
}
