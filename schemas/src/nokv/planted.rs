//! NoKV's planted bugs (feature `planted-bugs`), for the simulation to
//! catch, switched per thread and kept apart from the real logic:
//!
//! - `rename-stale-predicate`: a planned rename carries no predicate on
//!   what it read, so executing it later checks nothing more than the
//!   plan's own, stale, read;
//! - `dedupe-separate-commit`: a command's dedupe row is written in a
//!   commit of its own after the command's, so a lost second commit lets a
//!   replay apply again;
//! - `prune-without-floor`: pruning dedupe rows past their retention
//!   does not raise the mount's dedupe floor, so a replay after it
//!   applies again;
//! - `setattr-without-generation`: a planned setattr carries no predicate
//!   on the inode's generation, so two concurrent setattrs both apply
//!   from one generation (one change is lost) and a setattr planned
//!   before an unlink writes the inode back.

#[cfg(feature = "planted-bugs")]
use super::MetaPredicate;
use super::MetadataCommand;

#[cfg(feature = "planted-bugs")]
thread_local! {
    static ACTIVE: std::cell::Cell<Option<&'static str>> = const { std::cell::Cell::new(None) };
}

#[cfg(feature = "planted-bugs")]
fn active(name: &str) -> bool {
    ACTIVE.with(|c| c.get() == Some(name))
}

/// A planned rename's predicates (all of them, unless planted).
pub(super) fn stale_rename(cmd: &mut MetadataCommand) {
    #[cfg(feature = "planted-bugs")]
    if active("rename-stale-predicate") {
        cmd.predicates
            .retain(|p| matches!(p, MetaPredicate::MountCounter(_)));
    }
    let _ = cmd;
}

/// A planned setattr's predicates (all of them, unless planted).
pub(super) fn setattr_predicates(cmd: &mut MetadataCommand) {
    #[cfg(feature = "planted-bugs")]
    if active("setattr-without-generation") {
        cmd.predicates.clear();
    }
    let _ = cmd;
}

/// Whether the dedupe row goes in a commit of its own.
pub(super) fn dedupe_apart() -> bool {
    #[cfg(feature = "planted-bugs")]
    if active("dedupe-separate-commit") {
        return true;
    }
    false
}

/// Whether pruning leaves the dedupe floor where it was.
pub(super) fn prune_without_floor() -> bool {
    #[cfg(feature = "planted-bugs")]
    if active("prune-without-floor") {
        return true;
    }
    false
}

/// The module's planted bugs, by name.
#[cfg(feature = "planted-bugs")]
pub const PLANTED: [&str; 4] = [
    "rename-stale-predicate",
    "dedupe-separate-commit",
    "prune-without-floor",
    "setattr-without-generation",
];

/// Plants the bug named `name` on this thread (`None`, or a name not in
/// [`PLANTED`], removes it).
#[cfg(feature = "planted-bugs")]
pub fn plant(name: Option<&str>) {
    let found = name.and_then(|n| PLANTED.iter().copied().find(|p| *p == n));
    ACTIVE.with(|c| c.set(found));
}
