//! What a piece of code recorded through the `metrics` facade, for the
//! tests of the crates that emit metrics; included with
//! `#[path = ...] mod metrics_capture;`.

// Each including test crate uses a part of it.
#![allow(dead_code)]

use metrics_util::debugging::{DebugValue, DebuggingRecorder};

/// One recorded metric: its name, its labels as `key=value` in order, and
/// its value.
#[derive(Debug, PartialEq)]
pub struct Recorded {
    pub name: String,
    pub labels: Vec<String>,
    pub value: DebugValue,
}

/// Runs `f` with a recorder of this thread only and returns what it
/// recorded, with `f`'s result.
pub fn capture<T>(f: impl FnOnce() -> T) -> (T, Vec<Recorded>) {
    let local = DebuggingRecorder::new();
    let snapshotter = local.snapshotter();
    let out = metrics::with_local_recorder(&local, f);
    let seen = snapshotter
        .snapshot()
        .into_vec()
        .into_iter()
        .map(|(key, _, _, value)| Recorded {
            name: key.key().name().to_owned(),
            labels: key
                .key()
                .labels()
                .map(|l| format!("{}={}", l.key(), l.value()))
                .collect(),
            value,
        })
        .collect();
    (out, seen)
}

/// The counter `name` with exactly `labels` (0 when never incremented).
pub fn counter(recorded: &[Recorded], name: &str, labels: &[&str]) -> u64 {
    recorded
        .iter()
        .filter(|r| r.name == name && r.labels == labels)
        .map(|r| match r.value {
            DebugValue::Counter(n) => n,
            _ => 0,
        })
        .sum()
}

/// The gauge `name` with exactly `labels`.
pub fn gauge(recorded: &[Recorded], name: &str, labels: &[&str]) -> Option<f64> {
    recorded
        .iter()
        .find(|r| r.name == name && r.labels == labels)
        .and_then(|r| match &r.value {
            DebugValue::Gauge(v) => Some(v.into_inner()),
            _ => None,
        })
}

/// The values the histogram `name` recorded.
pub fn histogram(recorded: &[Recorded], name: &str) -> Vec<f64> {
    recorded
        .iter()
        .filter(|r| r.name == name)
        .flat_map(|r| match &r.value {
            DebugValue::Histogram(v) => v.iter().map(|x| x.into_inner()).collect(),
            _ => Vec::new(),
        })
        .collect()
}
