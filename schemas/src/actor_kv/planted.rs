//! The actor KV's planted bugs (feature `planted-bugs`), for the
//! simulation to catch, switched per thread and kept apart from the real
//! logic (mutation testing skips `planted.rs`):
//!
//! - `overwrite-charged-gross`: an overwrite is charged the new value's
//!   whole size instead of the growth (the document's conservative quota,
//!   and a usage that drifts from the rows);
//! - `list-more-dropped`: a list reports no more entries when the limit
//!   cut it short (the document's silent truncation).

#[cfg(feature = "planted-bugs")]
thread_local! {
    static ACTIVE: std::cell::Cell<Option<&'static str>> = const { std::cell::Cell::new(None) };
}

#[cfg(feature = "planted-bugs")]
fn active(name: &str) -> bool {
    ACTIVE.with(|c| c.get() == Some(name))
}

/// The old size an overwrite subtracts.
pub(super) fn charged_old(old: u64) -> u64 {
    #[cfg(feature = "planted-bugs")]
    if active("overwrite-charged-gross") {
        return 0;
    }
    old
}

/// The `more` flag a list reports.
pub(super) fn list_more(more: bool) -> bool {
    #[cfg(feature = "planted-bugs")]
    if active("list-more-dropped") {
        return false;
    }
    more
}

/// The module's planted bugs, by name.
#[cfg(feature = "planted-bugs")]
pub const PLANTED: [&str; 2] = ["overwrite-charged-gross", "list-more-dropped"];

/// Plants the bug named `name` on this thread (`None`, or a name not in
/// [`PLANTED`], removes it).
#[cfg(feature = "planted-bugs")]
pub fn plant(name: Option<&str>) {
    let found = name.and_then(|n| PLANTED.iter().copied().find(|p| *p == n));
    ACTIVE.with(|c| c.set(found));
}
