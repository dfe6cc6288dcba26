//! What the reference engine's planted bugs do where it takes more than a
//! line (their fault points are in the engine's code; see
//! [`crate::faults`]). Kept apart from the engine's real logic so that
//! mutation testing (which skips files named `planted.rs`) measures that
//! logic only.

use std::sync::PoisonError;

use super::{MemEngine, MemImage, Op, StateReads};
use crate::contract::RangeSpec;
use crate::error::CommitError;
use crate::keyspace::Keyspace;
use crate::resolve::{self, Reads};
use crate::sequence::Sequencer;

impl MemEngine {
    /// Bug `stamp-reused-after-restart`: the restarted engine resumes one
    /// version below its durable one, so its next commit repeats a
    /// versionstamp.
    pub(super) fn resume_one_version_low(&mut self) {
        let state = self.state.get_mut().unwrap_or_else(PoisonError::into_inner);
        let durable = state.version;
        state.version = state.version.saturating_sub(1);
        self.seq = Sequencer::new(state.version);
        self.seq.mark_durable(durable);
    }
}

/// Reads that see a commit's own resolved mutations: only for the planted
/// bug that checks predicates too late.
pub(super) struct Overlaid<'a> {
    pub(super) base: StateReads<'a>,
    pub(super) ops: &'a [resolve::Op],
}

impl Reads for Overlaid<'_> {
    fn get(&mut self, ks: Keyspace, key: &[u8]) -> Result<Option<Vec<u8>>, CommitError> {
        resolve::read_through(self.ops, &mut self.base, ks, key)
    }

    fn any_in(&mut self, ks: Keyspace, range: &RangeSpec) -> Result<bool, CommitError> {
        self.base.any_in(ks, range)
    }
}

/// Bug `crash-keeps-half-commit`: applies the first half of the changes of
/// `lost` (the first commit a crash loses) to `image`.
pub(super) fn keep_half_commit(image: &mut MemImage, lost: Option<&(u64, Vec<Op>)>) {
    if let Some((version, ops)) = lost.filter(|(_, o)| o.len() >= 2) {
        for op in &ops[..ops.len() / 2] {
            image.apply(op);
        }
        image.version = *version;
    }
}
