//! The outbox's metrics, through the [`metrics`] facade (names in the
//! README's "Metrics" section); labels `topic` and `consumer`.

use crate::Lag;

/// Durable entries a consumer has not finished, as last measured by
/// [`Outbox::lag`](crate::Outbox::lag) (gauge). Measuring reads every
/// waiting entry, so nothing measures it on its own: call `lag` from a
/// monitoring thread at the interval you want (`strata info` does once).
pub const LAG_ENTRIES: &str = "strata_outbox_lag_entries";
/// Age of the oldest of them, in seconds (gauge).
pub const LAG_OLDEST_SECONDS: &str = "strata_outbox_lag_oldest_seconds";
/// Failed deliveries that will be retried.
pub const FAILURES: &str = "strata_outbox_failures_total";
/// Entries moved to the dead letters.
pub const DEAD_LETTERS: &str = "strata_outbox_dead_letters_total";
/// Entries trimmed (label `topic` only).
pub const TRIMMED: &str = "strata_outbox_trimmed_total";

/// Every name above.
pub const ALL: &[&str] = &[
    LAG_ENTRIES,
    LAG_OLDEST_SECONDS,
    FAILURES,
    DEAD_LETTERS,
    TRIMMED,
];

#[allow(clippy::cast_precision_loss)] // counts far below 2^52
pub(crate) fn lag(topic: &str, consumer: &str, lag: Lag) {
    let labels = [
        ("topic", topic.to_owned()),
        ("consumer", consumer.to_owned()),
    ];
    metrics::gauge!(LAG_ENTRIES, &labels).set(lag.entries as f64);
    metrics::gauge!(LAG_OLDEST_SECONDS, &labels).set(lag.oldest_age_ms as f64 / 1e3);
}

pub(crate) fn failed(topic: &str, consumer: &str, dead: bool) {
    let labels = [
        ("topic", topic.to_owned()),
        ("consumer", consumer.to_owned()),
    ];
    if dead {
        metrics::counter!(DEAD_LETTERS, &labels).increment(1);
    } else {
        metrics::counter!(FAILURES, &labels).increment(1);
    }
}

pub(crate) fn trimmed(topic: &str, entries: u64) {
    metrics::counter!(TRIMMED, "topic" => topic.to_owned()).increment(entries);
}
