//! What NoKV's planted bugs do where it takes more than a line (their
//! fault points are in the module's code; see `strata_engine::faults`).
//! Kept apart from the real logic: mutation testing skips `planted.rs`.

use super::{MetaPredicate, MetadataCommand};

/// Bug `rename-stale-predicate`: a planned rename keeps only its mount
/// counter predicate, so executing it later checks nothing more than the
/// plan's own, stale, read.
pub(super) fn keep_only_counter(cmd: &mut MetadataCommand) {
    cmd.predicates
        .retain(|p| matches!(p, MetaPredicate::MountCounter(_)));
}
