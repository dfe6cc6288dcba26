//! The reference engine's planted bugs (feature `planted-bugs`): deliberate
//! mistakes the simulation must catch. They are switched off in normal
//! builds, and kept apart from the engine's real logic so that mutation
//! testing (which skips files named `planted.rs`) measures that logic only.

#[cfg(feature = "planted-bugs")]
use std::sync::PoisonError;

use super::{MemEngine, MemImage, Op, StateReads};
use crate::contract::RangeSpec;
use crate::error::CommitError;
use crate::keyspace::Keyspace;
use crate::resolve::{self, Reads};
#[cfg(feature = "planted-bugs")]
use crate::sequence::Sequencer;

#[cfg(feature = "planted-bugs")]
/// Deliberate mistakes the simulation must catch (feature `planted-bugs`,
/// which normal builds never enable).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PlantedBug {
    /// A crash keeps the first half of the first lost commit's changes.
    CrashKeepsHalfCommit,
    /// A restart resumes one version too low, so a versionstamp repeats.
    StampReusedAfterRestart,
    /// Predicates are checked against the state after the commit's own
    /// mutations instead of before them.
    PredicateAfterMutations,
    /// `durable_version` reports the last commit, durable or not.
    DurableVersionAhead,
    /// `durable_version` reports one version less than is durable.
    DurableVersionBehind,
    /// An immediate commit is applied but not made durable, and is
    /// acknowledged as not durable.
    ImmediateNotDurable,
    /// A range read includes its excluded end key.
    RangeEndInclusive,
    /// A snapshot's point reads see commits made after it.
    SnapshotSeesLaterCommits,
    /// A range delete keeps the first key of its range.
    DeleteRangeKeepsStart,
    /// `sync` leaves the last pending commit out of the durable image but
    /// reports it durable.
    SyncDropsLastPending,
    /// In a group of several commits, a commit refused by a predicate
    /// still takes a version, so the group's versions have a gap.
    GroupRefusedTakesVersion,
}

#[cfg(feature = "planted-bugs")]
impl PlantedBug {
    /// Every planted bug.
    pub const ALL: [Self; 11] = [
        Self::CrashKeepsHalfCommit,
        Self::StampReusedAfterRestart,
        Self::PredicateAfterMutations,
        Self::DurableVersionAhead,
        Self::DurableVersionBehind,
        Self::ImmediateNotDurable,
        Self::RangeEndInclusive,
        Self::SnapshotSeesLaterCommits,
        Self::DeleteRangeKeepsStart,
        Self::SyncDropsLastPending,
        Self::GroupRefusedTakesVersion,
    ];

    /// Its name on the command line.
    pub const fn name(self) -> &'static str {
        match self {
            Self::CrashKeepsHalfCommit => "crash-keeps-half-commit",
            Self::StampReusedAfterRestart => "stamp-reused-after-restart",
            Self::PredicateAfterMutations => "predicate-after-mutations",
            Self::DurableVersionAhead => "durable-version-ahead",
            Self::DurableVersionBehind => "durable-version-behind",
            Self::ImmediateNotDurable => "immediate-not-durable",
            Self::RangeEndInclusive => "range-end-inclusive",
            Self::SnapshotSeesLaterCommits => "snapshot-sees-later-commits",
            Self::DeleteRangeKeepsStart => "delete-range-keeps-start",
            Self::SyncDropsLastPending => "sync-drops-last-pending",
            Self::GroupRefusedTakesVersion => "group-refused-takes-version",
        }
    }

    /// The bug with this name.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|b| b.name() == name)
    }
}

impl MemEngine {
    /// Plants `bug` in this engine (call it again after every restart).
    #[cfg(feature = "planted-bugs")]
    pub fn plant(&mut self, bug: Option<PlantedBug>) {
        self.planted = bug;
        if bug == Some(PlantedBug::StampReusedAfterRestart) {
            let state = self.state.get_mut().unwrap_or_else(PoisonError::into_inner);
            let durable = state.version;
            state.version = state.version.saturating_sub(1);
            self.seq = Sequencer::new(state.version);
            self.seq.mark_durable(durable);
        }
    }

    /// Whether the planted bug named `name` is active (never, in normal
    /// builds).
    #[allow(clippy::unused_self)]
    pub(super) fn planted(&self, name: &str) -> bool {
        #[cfg(feature = "planted-bugs")]
        {
            self.planted.is_some_and(|b| b.name() == name)
        }
        #[cfg(not(feature = "planted-bugs"))]
        {
            let _ = name;
            false
        }
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
