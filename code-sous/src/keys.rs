//! The `cs:` keys, exactly as the code-sous storage document writes them.
//!
//! Every name field (`tenant`, `namespace`, `function`, `draft_id`,
//! `alias`, `schedule`, `name`, `activation_id`) is text without the
//! delimiter `:`; a name holding one is refused when the key is packed
//! ([`strata_keys::KeyError`]), so no key of one family can be read as
//! another's. Numbers (`version`, `chunk`) are decimal without padding, as
//! the document writes them.

use strata_keys::text_key;

use super::records::{
    ActivationRecord, AliasRecord, DraftRecord, FunctionMeta, NameSet, ScheduleRecord, VersionMeta,
    WorkerRecord,
};

/// `cs:fn:{tenant}:{namespace}:{function}:meta`: the function record.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FunctionKey {
    /// Tenant id.
    pub tenant: String,
    /// Namespace within the tenant.
    pub namespace: String,
    /// Function name.
    pub function: String,
}

/// `cs:fn:{tenant}:{namespace}:{function}:version_seq`: the version
/// counter, incremented at publish.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct VersionSeqKey {
    /// Tenant id.
    pub tenant: String,
    /// Namespace within the tenant.
    pub namespace: String,
    /// Function name.
    pub function: String,
}

/// `cs:fn:{tenant}:{namespace}:{function}:draft:{draft_id}`: a draft,
/// expiring after 24 hours.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct DraftKey {
    /// Tenant id.
    pub tenant: String,
    /// Namespace within the tenant.
    pub namespace: String,
    /// Function name.
    pub function: String,
    /// `drf_` and a ULID.
    pub draft_id: String,
}

/// `cs:fn:{tenant}:{namespace}:{function}:ver:{version}:meta`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct VersionKey {
    /// Tenant id.
    pub tenant: String,
    /// Namespace within the tenant.
    pub namespace: String,
    /// Function name.
    pub function: String,
    /// Version number, from 1.
    pub version: u64,
}

/// `cs:fn:{tenant}:{namespace}:{function}:ver:{version}:bundle`: the tar
/// archive, split into chunk rows by the store when large.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct BundleKey {
    /// Tenant id.
    pub tenant: String,
    /// Namespace within the tenant.
    pub namespace: String,
    /// Function name.
    pub function: String,
    /// Version number, from 1.
    pub version: u64,
}

/// `cs:fn:{tenant}:{namespace}:{function}:alias:{alias}`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct AliasKey {
    /// Tenant id.
    pub tenant: String,
    /// Namespace within the tenant.
    pub namespace: String,
    /// Function name.
    pub function: String,
    /// Alias name (`prod`, say).
    pub alias: String,
}

/// `cs:schedule:{tenant}:{namespace}:{schedule}:meta`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ScheduleKey {
    /// Tenant id.
    pub tenant: String,
    /// Namespace within the tenant.
    pub namespace: String,
    /// Schedule name.
    pub schedule: String,
}

/// `cs:schedule:{tenant}:{namespace}:index`: the set of schedule names,
/// one row (see [`NameSet`]).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ScheduleIndexKey {
    /// Tenant id.
    pub tenant: String,
    /// Namespace within the tenant.
    pub namespace: String,
}

/// `cs:cadence:{tenant}:{namespace}:worker:{name}:meta`: a Cadence worker
/// binding.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct WorkerKey {
    /// Tenant id.
    pub tenant: String,
    /// Namespace within the tenant.
    pub namespace: String,
    /// Worker binding name.
    pub name: String,
}

/// `cs:cadence:{tenant}:{namespace}:workers:index`: the set of worker
/// names, one row.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct WorkerIndexKey {
    /// Tenant id.
    pub tenant: String,
    /// Namespace within the tenant.
    pub namespace: String,
}

/// `cs:act:{tenant}:{activation_id}:meta`: an activation, expiring after
/// 7 days by default.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ActivationKey {
    /// Tenant id.
    pub tenant: String,
    /// The activation's id (a UUID in the document).
    pub activation_id: String,
}

/// `cs:log:{tenant}:{activation_id}:{chunk}`: one chunk of an activation's
/// log, UTF-8.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct LogChunkKey {
    /// Tenant id.
    pub tenant: String,
    /// The activation whose log this is.
    pub activation_id: String,
    /// Chunk number, from 0.
    pub chunk: u64,
}

/// `cs:log:{tenant}:{activation_id}:chunks`: the ordered set of an
/// activation's chunk numbers, one row.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct LogIndexKey {
    /// Tenant id.
    pub tenant: String,
    /// The activation whose log this is.
    pub activation_id: String,
}

text_key! {
    FunctionKey -> FunctionMeta = ("cs:fn:", {tenant}, ":", {namespace}, ":", {function}, ":meta");
    VersionSeqKey -> i64 = ("cs:fn:", {tenant}, ":", {namespace}, ":", {function}, ":version_seq");
    DraftKey -> chunked DraftRecord = ("cs:fn:", {tenant}, ":", {namespace}, ":", {function}, ":draft:", {draft_id});
    VersionKey -> chunked VersionMeta = ("cs:fn:", {tenant}, ":", {namespace}, ":", {function}, ":ver:", {version}, ":meta");
    BundleKey -> chunked Vec<u8> = ("cs:fn:", {tenant}, ":", {namespace}, ":", {function}, ":ver:", {version}, ":bundle");
    AliasKey -> AliasRecord = ("cs:fn:", {tenant}, ":", {namespace}, ":", {function}, ":alias:", {alias});
    ScheduleKey -> chunked ScheduleRecord = ("cs:schedule:", {tenant}, ":", {namespace}, ":", {schedule}, ":meta");
    ScheduleIndexKey -> chunked NameSet = ("cs:schedule:", {tenant}, ":", {namespace}, ":index");
    WorkerKey -> chunked WorkerRecord = ("cs:cadence:", {tenant}, ":", {namespace}, ":worker:", {name}, ":meta");
    WorkerIndexKey -> chunked NameSet = ("cs:cadence:", {tenant}, ":", {namespace}, ":workers:index");
    ActivationKey -> chunked ActivationRecord = ("cs:act:", {tenant}, ":", {activation_id}, ":meta");
    LogChunkKey -> chunked String = ("cs:log:", {tenant}, ":", {activation_id}, ":", {chunk});
    LogIndexKey -> chunked ChunkSet = ("cs:log:", {tenant}, ":", {activation_id}, ":chunks");
}

use super::records::ChunkSet;
