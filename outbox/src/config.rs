//! The outbox's configuration and where a consumer starts.

/// Where a new consumer starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Start {
    /// With the first entry still in the topic.
    Beginning,
    /// After every entry committed so far.
    End,
    /// With the entries of commits after `version`.
    AfterVersion(u64),
}

/// How consumers retry and poll.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct OutboxConfig {
    /// Attempts before an entry is dead-lettered (at least 1; default 5).
    pub max_attempts: u32,
    /// Backoff after the first failure, in ms (default 100).
    pub base_backoff_ms: u64,
    /// Largest backoff, in ms (default 60,000).
    pub max_backoff_ms: u64,
    /// How long a lease lasts without renewal, in ms (default 30,000).
    pub lease_ms: u64,
    /// Under buffered durability, a poll syncs the engine when an entry of
    /// its topic waits for durability and this outbox's last sync is this
    /// old (default 50 ms).
    pub sync_interval_ms: u64,
    /// A deliberate mistake for the simulation to catch (feature
    /// `planted-bugs` only).
    #[cfg(feature = "planted-bugs")]
    pub planted: Option<PlantedBug>,
}

/// Deliberate mistakes the simulation must catch (feature `planted-bugs`,
/// which normal builds never enable).
#[cfg(feature = "planted-bugs")]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PlantedBug {
    /// The entry's position comes from a counter read (without a
    /// predicate) before the commit, not from the commit's versionstamp:
    /// concurrent producers take the same number and one entry replaces
    /// the other.
    SequenceFromCounter,
    /// Acknowledging an entry moves the checkpoint to it even past
    /// unfinished entries before it.
    CheckpointPastFailed,
    /// Polling reads up to the last commit, durable or not, and never
    /// syncs.
    PollBeyondDurable,
    /// Trimming cuts at the highest checkpoint instead of the lowest.
    TrimIgnoresSlowest,
    /// The lease belongs to a holder name (a second worker with the name
    /// shares it) and acknowledging a finished entry succeeds: two workers
    /// named alike apply entries twice.
    SharedHolderName,
    /// A failed entry waiting for its retry holds nothing back: the later
    /// entries of its ordering key are delivered before it.
    FailedHoldsNothing,
    /// A failed entry waiting for its retry holds back every ordering key:
    /// the poll stops at it.
    FailedHoldsEveryKey,
    /// A poll delivers again entries finished beyond the checkpoint
    /// (acknowledged or dead-lettered out of order).
    FinishedRedelivered,
    /// Taking a lease reads the lease row without a predicate: two workers
    /// taking a free consumer at once both get it, with one token.
    LeaseReadNotPinned,
    /// Releasing a lease ends it at the current millisecond, where its
    /// holder's renewal still accepts it: renewed in that millisecond, a
    /// released lease runs again (the bug the interleaved workload found).
    ReleaseRenewable,
}

#[cfg(feature = "planted-bugs")]
impl PlantedBug {
    /// Every planted bug.
    pub const ALL: [Self; 10] = [
        Self::SequenceFromCounter,
        Self::CheckpointPastFailed,
        Self::PollBeyondDurable,
        Self::TrimIgnoresSlowest,
        Self::SharedHolderName,
        Self::FailedHoldsNothing,
        Self::FailedHoldsEveryKey,
        Self::FinishedRedelivered,
        Self::LeaseReadNotPinned,
        Self::ReleaseRenewable,
    ];

    /// Its name on the command line.
    pub const fn name(self) -> &'static str {
        match self {
            Self::SequenceFromCounter => "sequence-from-counter",
            Self::CheckpointPastFailed => "checkpoint-past-failed",
            Self::PollBeyondDurable => "poll-beyond-durable",
            Self::TrimIgnoresSlowest => "trim-ignores-slowest",
            Self::SharedHolderName => "shared-holder-name",
            Self::FailedHoldsNothing => "failed-holds-nothing",
            Self::FailedHoldsEveryKey => "failed-holds-every-key",
            Self::FinishedRedelivered => "finished-redelivered",
            Self::LeaseReadNotPinned => "lease-read-not-pinned",
            Self::ReleaseRenewable => "release-renewable",
        }
    }

    /// The bug with this name.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|b| b.name() == name)
    }
}

impl Default for OutboxConfig {
    fn default() -> Self {
        Self {
            max_attempts: 5,
            base_backoff_ms: 100,
            max_backoff_ms: 60_000,
            lease_ms: 30_000,
            sync_interval_ms: 50,
            #[cfg(feature = "planted-bugs")]
            planted: None,
        }
    }
}
