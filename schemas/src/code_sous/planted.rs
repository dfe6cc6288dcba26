//! code-sous's planted bugs (feature `planted-bugs`): deliberate mistakes
//! the simulation must catch, switched off in every normal build and kept
//! apart from the real logic (mutation testing skips `planted.rs`).

use strata_engine::Engine;

use super::CodeSous;

/// Deliberate mistakes the simulation must catch.
#[cfg(feature = "planted-bugs")]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PlantedBug {
    /// `set_alias` does not check that the version exists.
    AliasUnchecked,
    /// `finish_activation` accepts a second terminal status.
    SecondEndingAccepted,
    /// Drafts are written without their expiry.
    DraftNeverExpires,
    /// `start_activation` starts a record past its retention (a replay of
    /// an activation that ran and expired starts it again).
    StartAfterRetention,
}

#[cfg(feature = "planted-bugs")]
impl PlantedBug {
    /// Every planted bug.
    pub const ALL: [Self; 4] = [
        Self::AliasUnchecked,
        Self::SecondEndingAccepted,
        Self::DraftNeverExpires,
        Self::StartAfterRetention,
    ];

    /// Its name on the command line.
    pub const fn name(self) -> &'static str {
        match self {
            Self::AliasUnchecked => "alias-unchecked",
            Self::SecondEndingAccepted => "second-ending-accepted",
            Self::DraftNeverExpires => "draft-never-expires",
            Self::StartAfterRetention => "start-after-retention",
        }
    }

    /// The bug with this name.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|b| b.name() == name)
    }
}

impl<E: Engine> CodeSous<E> {
    /// Plants `bug` (call it again after rebuilding the records).
    #[cfg(feature = "planted-bugs")]
    pub fn plant(&mut self, bug: Option<PlantedBug>) {
        self.planted = bug;
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
