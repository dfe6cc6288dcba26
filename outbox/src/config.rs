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
}

impl Default for OutboxConfig {
    fn default() -> Self {
        Self {
            max_attempts: 5,
            base_backoff_ms: 100,
            max_backoff_ms: 60_000,
            lease_ms: 30_000,
            sync_interval_ms: 50,
        }
    }
}
