//! Typed errors of the engine contract.

use thiserror::Error;

use crate::contract::{Keyspace, Predicate};

/// A backend's own error, kept as the source.
pub type BackendError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Why a read failed.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum ReadError {
    /// The handle names no declared keyspace.
    #[error("{0} is not declared")]
    UnknownKeyspace(Keyspace),
    /// The range's start lies above its end.
    #[error("invalid range: start above end")]
    InvalidRange,
    /// The backend failed.
    #[error("backend read failed: {0}")]
    Backend(#[source] BackendError),
}

/// Why a mutation is invalid (the commit then applies nothing).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum MutationError {
    /// A counter holds a value that is not 8 bytes.
    #[error("counter value is {len} bytes, not 8")]
    CounterNotEight {
        /// Its length.
        len: usize,
    },
    /// A versionstamp offset does not leave 10 bytes in the key or value.
    #[error("versionstamp at offset {offset} does not fit in {len} bytes")]
    StampOutOfBounds {
        /// The offset.
        offset: usize,
        /// The key or value length.
        len: usize,
    },
    /// More than 65,536 versionstamped mutations in one commit.
    #[error("more than 65,536 versionstamped mutations in one commit")]
    TooManyStamps,
    /// A range whose start lies above its end.
    #[error("invalid range: start above end")]
    InvalidRange,
    /// A predicate or mutation kind this engine does not know (a newer
    /// contract than the engine implements).
    #[error("not supported by this engine")]
    Unsupported,
}

/// Why a commit failed. Unless the variant says otherwise, **nothing** of
/// the commit was applied.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum CommitError {
    /// Predicate number `index` did not hold.
    #[error("predicate {index} failed: {predicate:?}")]
    Conflict {
        /// Its position in the commit.
        index: usize,
        /// The predicate.
        predicate: Predicate,
    },
    /// A predicate or mutation names an undeclared keyspace.
    #[error("{0} is not declared")]
    UnknownKeyspace(Keyspace),
    /// Predicate number `index` is invalid (a range with its start above its
    /// end).
    #[error("predicate {index} is invalid: {reason}")]
    InvalidPredicate {
        /// Its position in the commit.
        index: usize,
        /// Why.
        reason: MutationError,
    },
    /// Mutation number `index` is invalid.
    #[error("mutation {index} is invalid: {reason}")]
    InvalidMutation {
        /// Its position in the commit.
        index: usize,
        /// Why.
        reason: MutationError,
    },
    /// The backend failed before applying anything.
    #[error("backend failed; the commit was not applied: {0}")]
    Backend(#[source] BackendError),
    /// The backend failed in a way that leaves the outcome unknown: the
    /// commit may or may not have been applied (and may become durable).
    /// Read to find out.
    #[error("commit outcome unknown: {0}")]
    OutcomeUnknown(#[source] BackendError),
}

/// Engine-level failures (open, sync, stats, lookups).
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum EngineError {
    /// No keyspace has this name.
    #[error("no keyspace named {0:?}")]
    UnknownKeyspaceName(String),
    /// Two keyspaces share a name.
    #[error("keyspace {0:?} is declared twice")]
    DuplicateKeyspace(String),
    /// The backend failed.
    #[error("backend failed: {0}")]
    Backend(#[source] BackendError),
}
