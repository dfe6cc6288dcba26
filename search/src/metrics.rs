//! The indexer's metrics, through the [`metrics`] facade (names in the
//! README's "Metrics" section); label `index`, the index's name.

/// Index commits (documents and checkpoint together).
pub const COMMITS: &str = "strata_search_commits_total";
/// Changes (upserts and deletes) committed to the index.
pub const CHANGES: &str = "strata_search_changes_total";
/// The commit version of the index's checkpoint (gauge).
pub const CHECKPOINT: &str = "strata_search_checkpoint_version";
/// Commit versions between the store's durable version and the index's
/// checkpoint at its last commit (gauge): how far the index is behind.
pub const LAG_VERSIONS: &str = "strata_search_lag_versions";

/// Every name above.
pub const ALL: &[&str] = &[COMMITS, CHANGES, CHECKPOINT, LAG_VERSIONS];

#[allow(clippy::cast_precision_loss)] // versions far below 2^52
pub(crate) fn committed(index: &str, changes: usize, checkpoint: u64, durable: u64) {
    let index = index.to_owned();
    metrics::counter!(COMMITS, "index" => index.clone()).increment(1);
    metrics::counter!(CHANGES, "index" => index.clone()).increment(changes as u64);
    metrics::gauge!(CHECKPOINT, "index" => index.clone()).set(checkpoint as f64);
    metrics::gauge!(LAG_VERSIONS, "index" => index).set(durable.saturating_sub(checkpoint) as f64);
}
