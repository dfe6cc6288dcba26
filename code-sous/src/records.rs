//! The JSON values, with the field names of the code-sous storage
//! document.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use serde_json::Value as Json;
use strata_codec::value;

/// The function record (`…:meta`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FunctionMeta {
    /// Tenant id.
    pub tenant: String,
    /// Namespace within the tenant.
    pub namespace: String,
    /// Function name.
    pub name: String,
    /// Runtime (`cs-js`).
    pub runtime: String,
    /// Entry file in the bundle (`function.js`).
    pub entry: String,
    /// Exported handler (`default`).
    pub handler: String,
    /// Creation time, Unix milliseconds.
    pub created_at_ms: u64,
    /// Deletion time when deleted (a deleted function keeps its record).
    pub deleted_at_ms: Option<u64>,
}

/// A draft (`…:draft:{draft_id}`): the files of a bundle not yet
/// published, expiring after 24 hours.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DraftRecord {
    /// `drf_` and a ULID.
    pub draft_id: String,
    /// SHA-256 of the canonical bundle of `files`, lower-case hex.
    pub sha256: String,
    /// File name to contents, base64 (standard alphabet, padded).
    pub files: BTreeMap<String, String>,
    /// Creation time, Unix milliseconds.
    pub created_at_ms: u64,
    /// When the draft expires, Unix milliseconds (also the row's expiry).
    pub expires_at_ms: u64,
}

/// A version's metadata (`…:ver:{version}:meta`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VersionMeta {
    /// Version number, from 1.
    pub version: u64,
    /// SHA-256 of the bundle, lower-case hex.
    pub sha256: String,
    /// Free-form configuration of this version.
    pub config: Json,
    /// Publication time, Unix milliseconds.
    pub published_at_ms: u64,
}

/// An alias (`…:alias:{alias}`): a name for one version.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AliasRecord {
    /// Alias name.
    pub alias: String,
    /// The version it points at (always an existing one).
    pub version: u64,
    /// Last update, Unix milliseconds.
    pub updated_at_ms: u64,
}

/// What a schedule or worker invokes: a function by alias.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FunctionRef {
    /// Function name.
    pub function: String,
    /// Alias name.
    pub alias: String,
}

/// A schedule (`cs:schedule:…:{schedule}:meta`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScheduleRecord {
    /// Schedule name (the key's `{schedule}`).
    pub name: String,
    /// Period in seconds.
    pub every_seconds: u64,
    /// What to do when a run is still going (`skip`, say).
    pub overlap_policy: String,
    /// The function invoked.
    #[serde(rename = "ref")]
    pub target: FunctionRef,
    /// Payload passed to each run.
    pub payload: Json,
    /// Whether it runs.
    pub enabled: bool,
    /// Creation time, Unix milliseconds.
    pub created_at_ms: u64,
}

/// A Cadence worker binding (`cs:cadence:…:worker:{name}:meta`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkerRecord {
    /// Binding name (the key's `{name}`).
    pub name: String,
    /// Cadence domain.
    pub domain: String,
    /// Cadence task list.
    pub tasklist: String,
    /// Worker identity.
    pub worker_id: String,
    /// Activity type to the function it runs.
    pub activity_map: BTreeMap<String, FunctionRef>,
    /// Pollers by kind.
    pub pollers: BTreeMap<String, u64>,
    /// Limits by name.
    pub limits: BTreeMap<String, u64>,
    /// Whether it polls.
    pub enabled: bool,
}

/// Which version an activation ran.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VersionRef {
    /// The alias it was invoked through, if any.
    pub alias: Option<String>,
    /// The version it ran.
    pub version: u64,
}

/// An activation's status. `queued` and `running` can change; the others
/// are terminal, and an activation reaches exactly one of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ActivationStatus {
    /// Accepted, not started.
    Queued,
    /// Started, not finished.
    Running,
    /// Finished with a result.
    Success,
    /// Finished with an error.
    Error,
    /// Stopped at its time limit.
    Timeout,
    /// Cancelled before it finished.
    Cancelled,
}

impl ActivationStatus {
    /// Whether no further status may follow.
    pub fn is_terminal(self) -> bool {
        !matches!(self, Self::Queued | Self::Running)
    }
}

/// An activation (`cs:act:{tenant}:{activation_id}:meta`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ActivationRecord {
    /// Its id (the key's `{activation_id}`).
    pub activation_id: String,
    /// Tenant id.
    pub tenant: String,
    /// Namespace of the function.
    pub namespace: String,
    /// Function name.
    pub function: String,
    /// The version run.
    #[serde(rename = "ref")]
    pub target: VersionRef,
    /// What triggered it (`{"type": "http"}`, say).
    pub trigger: Json,
    /// Current status.
    pub status: ActivationStatus,
    /// Start, Unix milliseconds.
    pub start_ms: u64,
    /// End, once terminal.
    pub end_ms: Option<u64>,
    /// `end_ms - start_ms`, once terminal.
    pub duration_ms: Option<u64>,
    /// Whether the stored result was cut.
    pub result_truncated: bool,
    /// The error, for a failed activation.
    pub error: Option<String>,
}

/// A set of names stored as one row (the document's Redis sets): a JSON
/// array, sorted, without duplicates.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(transparent)]
pub struct NameSet(pub BTreeSet<String>);

/// The chunk numbers of a log, in order, stored as one row (the
/// document's sorted set, scored by chunk number): runs of consecutive
/// numbers, so a log's set stays a few bytes however long the log grows
/// (chunks are appended one after the last) and an append rewrites a
/// row of constant size.
///
/// At rest (schema version 2) a JSON array of inclusive `[first, last]`
/// runs, ascending, apart by at least one missing number: `{0..=4999}`
/// is `[[0,4999]]`, `{0, 1, 7}` is `[[0,1],[7,7]]`. A set of another
/// form is refused when read (one spelling per set). Version 1, the
/// numbers one by one (`[0,1,2]`), is still read.
///
/// ```
/// use strata_code_sous::ChunkSet;
///
/// let mut set: ChunkSet = [0, 1, 2, 7].into_iter().collect();
/// set.insert(3);
/// assert_eq!(set.runs(), [(0, 3), (7, 7)]);
/// assert_eq!(set.iter().collect::<Vec<_>>(), [0, 1, 2, 3, 7]);
/// assert_eq!((set.len(), set.last()), (5, Some(7)));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(try_from = "Vec<(u64, u64)>", into = "Vec<(u64, u64)>")]
pub struct ChunkSet {
    runs: Vec<(u64, u64)>,
}

impl ChunkSet {
    /// An empty set.
    pub fn new() -> Self {
        Self::default()
    }

    /// The runs of consecutive numbers, `(first, last)` inclusive, in
    /// order.
    pub fn runs(&self) -> &[(u64, u64)] {
        &self.runs
    }

    /// Adds `chunk`; false when it was there already.
    pub fn insert(&mut self, chunk: u64) -> bool {
        // The first run that ends at or after `chunk - 1`: the only one
        // `chunk` can join (or sit in).
        let at = self
            .runs
            .partition_point(|&(_, last)| last.saturating_add(1) < chunk);
        match self.runs.get(at).copied() {
            Some((first, last)) if first <= chunk && chunk <= last => false,
            Some((first, last)) if last.checked_add(1) == Some(chunk) => {
                // Joins this run at its end, and the next run when that
                // starts right after.
                match self.runs.get(at + 1).copied() {
                    Some((next_first, next_last)) if next_first.checked_sub(1) == Some(chunk) => {
                        self.runs[at] = (first, next_last);
                        self.runs.remove(at + 1);
                    }
                    _ => self.runs[at].1 = chunk,
                }
                true
            }
            Some((first, last)) if first.checked_sub(1) == Some(chunk) => {
                self.runs[at] = (chunk, last);
                true
            }
            _ => {
                self.runs.insert(at, (chunk, chunk));
                true
            }
        }
    }

    /// Whether `chunk` is in the set.
    pub fn contains(&self, chunk: u64) -> bool {
        let at = self.runs.partition_point(|&(_, last)| last < chunk);
        self.runs.get(at).is_some_and(|&(first, _)| first <= chunk)
    }

    /// The numbers, ascending.
    pub fn iter(&self) -> impl Iterator<Item = u64> + '_ {
        self.runs.iter().flat_map(|&(first, last)| first..=last)
    }

    /// How many numbers the set holds.
    pub fn len(&self) -> u64 {
        self.runs.iter().fold(0u64, |n, &(first, last)| {
            n.saturating_add((last - first).saturating_add(1))
        })
    }

    /// Whether the set is empty.
    pub fn is_empty(&self) -> bool {
        self.runs.is_empty()
    }

    /// The largest number.
    pub fn last(&self) -> Option<u64> {
        self.runs.last().map(|&(_, last)| last)
    }
}

impl FromIterator<u64> for ChunkSet {
    fn from_iter<I: IntoIterator<Item = u64>>(iter: I) -> Self {
        let mut set = Self::new();
        for chunk in iter {
            set.insert(chunk);
        }
        set
    }
}

/// Why a stored chunk set was refused: its runs are not in the one
/// spelling [`ChunkSet`] writes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "chunk set run {index} {run:?} is not after the one before by a gap, or ends before it starts"
)]
pub struct BadChunkRuns {
    /// The run's position in the array.
    pub index: usize,
    /// The run as stored, `(first, last)`.
    pub run: (u64, u64),
}

impl TryFrom<Vec<(u64, u64)>> for ChunkSet {
    type Error = BadChunkRuns;

    fn try_from(runs: Vec<(u64, u64)>) -> Result<Self, Self::Error> {
        let mut before: Option<u64> = None;
        for (index, &(first, last)) in runs.iter().enumerate() {
            // After the run before, by at least one missing number.
            let apart = before.is_none_or(|b| b.checked_add(1).is_some_and(|next| first > next));
            if first > last || !apart {
                return Err(BadChunkRuns {
                    index,
                    run: (first, last),
                });
            }
            before = Some(last);
        }
        Ok(Self { runs })
    }
}

impl From<ChunkSet> for Vec<(u64, u64)> {
    fn from(set: ChunkSet) -> Self {
        set.runs
    }
}

/// A chunk set as schema version 1 wrote it: the numbers one by one.
#[derive(Debug, Deserialize)]
#[serde(transparent)]
struct ChunkSetV1(BTreeSet<u64>);

impl From<ChunkSetV1> for ChunkSet {
    fn from(old: ChunkSetV1) -> Self {
        old.0.into_iter().collect()
    }
}

value!(FunctionMeta: json, version = 1);
value!(DraftRecord: json, version = 1);
value!(VersionMeta: json, version = 1);
value!(AliasRecord: json, version = 1);
value!(ScheduleRecord: json, version = 1);
value!(WorkerRecord: json, version = 1);
value!(ActivationRecord: json, version = 1);
value!(NameSet: json, version = 1);
value!(ChunkSet: json, version = 2, migrate { 1 => ChunkSetV1 });

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use proptest::prelude::*;

    use super::ChunkSet;

    /// Runs of `set`, worked out here from its numbers one by one.
    fn runs_of(set: &BTreeSet<u64>) -> Vec<(u64, u64)> {
        let mut runs: Vec<(u64, u64)> = Vec::new();
        for &n in set {
            match runs.last_mut() {
                Some(run) if run.1 + 1 == n => run.1 = n,
                _ => runs.push((n, n)),
            }
        }
        runs
    }

    proptest! {
        /// Inserted in any order, the set holds what a plain ordered set
        /// holds, in the one spelling, and says so in JSON.
        #[test]
        fn inserts_match_an_ordered_set(numbers in prop::collection::vec(0u64..40, 0..60)) {
            let mut set = ChunkSet::new();
            let mut model = BTreeSet::new();
            for n in numbers {
                prop_assert_eq!(set.insert(n), model.insert(n));
                let want = runs_of(&model);
                prop_assert_eq!(set.runs(), want.as_slice());
            }
            prop_assert_eq!(set.iter().collect::<Vec<_>>(), model.iter().copied().collect::<Vec<_>>());
            prop_assert_eq!(set.len(), model.len() as u64);
            prop_assert_eq!(set.last(), model.last().copied());
            prop_assert_eq!(set.is_empty(), model.is_empty());
            for n in 0..42 {
                prop_assert_eq!(set.contains(n), model.contains(&n));
            }
            let json = serde_json::to_string(&set).unwrap();
            let want: Vec<String> = runs_of(&model).iter().map(|(a, b)| format!("[{a},{b}]")).collect();
            prop_assert_eq!(&json, &format!("[{}]", want.join(",")));
            prop_assert_eq!(serde_json::from_str::<ChunkSet>(&json).unwrap(), set);
        }
    }

    #[test]
    fn only_the_one_spelling_is_read() {
        let read = |json: &str| {
            serde_json::from_str::<ChunkSet>(json).map(|s| s.iter().collect::<Vec<_>>())
        };
        assert_eq!(read("[]").unwrap(), Vec::<u64>::new());
        assert_eq!(read("[[0,2],[4,4]]").unwrap(), [0, 1, 2, 4]);
        assert_eq!(
            read("[[18446744073709551614,18446744073709551615]]")
                .unwrap()
                .len(),
            2
        );
        // A run ending before it starts, runs out of order, overlapping
        // or touching (two spellings of one set), a bad shape.
        for bad in [
            "[[3,2]]",
            "[[4,5],[0,1]]",
            "[[0,3],[2,5]]",
            "[[0,1],[2,3]]",
            "[[0,1],[1,1]]",
            "[[0,18446744073709551615],[0,0]]",
            "[0,1,2]",
            "[[0]]",
            "{}",
        ] {
            assert!(read(bad).is_err(), "{bad} was read");
        }
        // The error names the run.
        let e = serde_json::from_str::<ChunkSet>("[[0,1],[5,9],[7,8]]").unwrap_err();
        assert!(e.to_string().contains("run 2 (7, 8)"), "{e}");
    }

    #[test]
    fn the_first_layout_is_read_through_its_migration() {
        use strata_codec::Value;
        // Version 1's body: every number one by one.
        let set = ChunkSet::decode_body(1, b"[0,1,2,5]").unwrap();
        assert_eq!(set.runs(), [(0, 2), (5, 5)]);
        assert!(ChunkSet::decode_body(3, b"[]").is_err());
        assert_eq!(
            ChunkSet::decode_body(2, b"[[1,3]]").unwrap().runs(),
            [(1, 3)]
        );
    }

    #[test]
    fn the_largest_numbers_do_not_overflow() {
        let mut set = ChunkSet::new();
        assert!(set.insert(u64::MAX));
        assert!(set.insert(0));
        assert!(set.insert(u64::MAX - 1));
        assert!(!set.insert(u64::MAX));
        assert_eq!(set.runs(), [(0, 0), (u64::MAX - 1, u64::MAX)]);
        assert_eq!(set.len(), 3);
        assert!(set.contains(u64::MAX) && !set.contains(1));
        let whole = serde_json::from_str::<ChunkSet>("[[0,18446744073709551615]]").unwrap();
        assert_eq!(whole.len(), u64::MAX, "saturates");
    }
}
