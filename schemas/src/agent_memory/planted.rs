//! Agent memory's planted bugs (feature `planted-bugs`): the document's
//! own two flaws, for the simulation to catch, switched per thread:
//!
//! - `memory-read-then-write`: `put_event` checks for the event with a
//!   snapshot read (no predicate) before writing, so two concurrent
//!   writers of one event both write it and both push an outbox entry;
//! - `memory-sequence-from-counter`: [`super::outbox_config`] makes the
//!   outbox take each entry's sequence from a counter read before the
//!   write, so concurrent writers take the same number and one entry
//!   replaces the other (a consumer never sees it);
//! - `toc-latest-unpinned`: a TOC node's next version is numbered from the
//!   latest pointer read without a predicate, so two concurrent writers of
//!   one node take the same version and one overwrites the other;
//! - `memory-resend-announced`: a put of an event already stored (a client
//!   resending after a lost reply) writes no row but pushes another outbox
//!   entry, so the event arrives twice.

#[cfg(feature = "planted-bugs")]
thread_local! {
    static ACTIVE: std::cell::Cell<Option<&'static str>> = const { std::cell::Cell::new(None) };
}

#[cfg(feature = "planted-bugs")]
fn active(name: &str) -> bool {
    ACTIVE.with(|c| c.get() == Some(name))
}

/// Whether the duplicate check reads without a predicate.
pub(super) fn read_then_write() -> bool {
    #[cfg(feature = "planted-bugs")]
    if active("memory-read-then-write") {
        return true;
    }
    false
}

/// Whether a put of a stored event still pushes an outbox entry.
pub(super) fn resend_announced() -> bool {
    #[cfg(feature = "planted-bugs")]
    if active("memory-resend-announced") {
        return true;
    }
    false
}

/// Whether a TOC node's latest pointer is read without a predicate.
pub(super) fn toc_latest_unpinned() -> bool {
    #[cfg(feature = "planted-bugs")]
    if active("toc-latest-unpinned") {
        return true;
    }
    false
}

/// The outbox configuration, with its counter sequencing when planted.
pub(super) fn outbox_config(config: strata_outbox::OutboxConfig) -> strata_outbox::OutboxConfig {
    #[cfg(feature = "planted-bugs")]
    if active("memory-sequence-from-counter") {
        let mut config = config;
        config.planted = Some(strata_outbox::PlantedBug::SequenceFromCounter);
        return config;
    }
    config
}

/// The module's planted bugs, by name.
#[cfg(feature = "planted-bugs")]
pub const PLANTED: [&str; 4] = [
    "memory-read-then-write",
    "memory-sequence-from-counter",
    "toc-latest-unpinned",
    "memory-resend-announced",
];

/// Plants the bug named `name` on this thread (`None`, or a name not in
/// [`PLANTED`], removes it).
#[cfg(feature = "planted-bugs")]
pub fn plant(name: Option<&str>) {
    let found = name.and_then(|n| PLANTED.iter().copied().find(|p| *p == n));
    ACTIVE.with(|c| c.set(found));
}
