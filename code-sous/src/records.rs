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
/// document's sorted set, scored by chunk number): a JSON array.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ChunkSet(pub BTreeSet<u64>);

value!(FunctionMeta: json, version = 1);
value!(DraftRecord: json, version = 1);
value!(VersionMeta: json, version = 1);
value!(AliasRecord: json, version = 1);
value!(ScheduleRecord: json, version = 1);
value!(WorkerRecord: json, version = 1);
value!(ActivationRecord: json, version = 1);
value!(NameSet: json, version = 1);
value!(ChunkSet: json, version = 1);
