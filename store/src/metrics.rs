//! The store's metrics, emitted through the [`metrics`] facade: nothing
//! is recorded until the application installs a recorder (an exporter).
//! The names are listed in the README's "Metrics" section.

use metrics::{Key, Level, Metadata};
use strata_engine::{Commit, Mutation};

use crate::StoreError;

/// Commits the store made.
pub const COMMITS: &str = "strata_store_commits_total";
/// Seconds from planning a commit to the engine's answer (histogram).
pub const COMMIT_SECONDS: &str = "strata_store_commit_seconds";
/// Rows (mutations) per commit (histogram).
pub const COMMIT_ROWS: &str = "strata_store_commit_rows";
/// Key and value bytes per commit (histogram).
pub const COMMIT_BYTES: &str = "strata_store_commit_bytes";
/// Commits refused by a changed read (a predicate).
pub const CONFLICTS: &str = "strata_store_conflicts_total";
/// Transactions run again after a conflict.
pub const RETRIES: &str = "strata_store_retries_total";
/// Writes refused by a limit before anything was written, label `limit`:
/// `key`, `value`, `batch_entries`, `batch_bytes`, `quota` (the sweeper's
/// and the bulk writer's own refusals too, which they answer by splitting
/// their commits).
pub const LIMIT_REFUSALS: &str = "strata_store_limit_refusals_total";
/// A scope's usage over its quota after each commit that grows it, as
/// planned (histogram of ratios, 1.0 = full).
pub const QUOTA_USAGE: &str = "strata_store_quota_usage_ratio";
/// Expired values the sweeper removed.
pub const SWEEP_REMOVED: &str = "strata_store_sweep_removed_total";
/// Stale expiry index entries the sweeper removed.
pub const SWEEP_STALE: &str = "strata_store_sweep_stale_total";
/// Commits the sweeper made.
pub const SWEEP_COMMITS: &str = "strata_store_sweep_commits_total";

/// Every name above, for documentation and tests.
pub const ALL: &[&str] = &[
    COMMITS,
    COMMIT_SECONDS,
    COMMIT_ROWS,
    COMMIT_BYTES,
    CONFLICTS,
    RETRIES,
    LIMIT_REFUSALS,
    QUOTA_USAGE,
    SWEEP_REMOVED,
    SWEEP_STALE,
    SWEEP_COMMITS,
];

/// Rows and key and value bytes of a commit.
pub(crate) fn size_of(commit: &Commit) -> (usize, usize) {
    let bytes = commit
        .mutations
        .iter()
        .map(|m| match m {
            Mutation::Put { key, value, .. } | Mutation::PutVersionstamped { key, value, .. } => {
                key.len() + value.len()
            }
            Mutation::Delete { key, .. } | Mutation::Add { key, .. } => key.len() + 8,
            _ => 0,
        })
        .sum();
    (commit.mutations.len(), bytes)
}

/// The keys of the metrics every commit records, made once: the `metrics`
/// macros build a key named by a constant (rather than a literal) at each
/// call, hashing its name, which cost a one-put commit on RocksDB about
/// 0.8 % of its time with no recorder installed.
static COMMITS_KEY: Key = Key::from_static_name(COMMITS);
static COMMIT_SECONDS_KEY: Key = Key::from_static_name(COMMIT_SECONDS);
static COMMIT_ROWS_KEY: Key = Key::from_static_name(COMMIT_ROWS);
static COMMIT_BYTES_KEY: Key = Key::from_static_name(COMMIT_BYTES);
/// Where they come from, as the macros would say it.
static COMMIT_METADATA: Metadata<'static> =
    Metadata::new(module_path!(), Level::INFO, Some(module_path!()));

#[allow(clippy::cast_precision_loss)] // sizes and durations far below 2^52
pub(crate) fn committed(micros: u64, rows: usize, bytes: usize) {
    let meta = &COMMIT_METADATA;
    // One look-up of the recorder (a thread-local, then the global) for
    // the four.
    metrics::with_recorder(|r| {
        r.register_counter(&COMMITS_KEY, meta).increment(1);
        r.register_histogram(&COMMIT_SECONDS_KEY, meta)
            .record(micros as f64 / 1e6);
        r.register_histogram(&COMMIT_ROWS_KEY, meta)
            .record(rows as f64);
        r.register_histogram(&COMMIT_BYTES_KEY, meta)
            .record(bytes as f64);
    });
}

/// Counts a failed commit by its kind.
pub(crate) fn failed(e: &StoreError) {
    if e.is_conflict() {
        metrics::counter!(CONFLICTS).increment(1);
    }
}

/// Counts a limit refusal (when the error is made).
pub(crate) fn refused(limit: strata_codec::Limit) {
    let name = match limit {
        strata_codec::Limit::KeyBytes => "key",
        strata_codec::Limit::ValueBytes => "value",
        strata_codec::Limit::BatchEntries => "batch_entries",
        strata_codec::Limit::BatchBytes => "batch_bytes",
        _ => "quota",
    };
    metrics::counter!(LIMIT_REFUSALS, "limit" => name).increment(1);
}

pub(crate) fn retried() {
    metrics::counter!(RETRIES).increment(1);
}

#[allow(clippy::cast_precision_loss)]
pub(crate) fn quota_usage(used_after: u64, quota: u64) {
    if quota > 0 {
        metrics::histogram!(QUOTA_USAGE).record(used_after as f64 / quota as f64);
    }
}

pub(crate) fn swept(removed: u64, stale: u64) {
    metrics::counter!(SWEEP_REMOVED).increment(removed);
    metrics::counter!(SWEEP_STALE).increment(stale);
    metrics::counter!(SWEEP_COMMITS).increment(1);
}
