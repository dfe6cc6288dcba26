//! The engine's own errors, and redb's errors turned into the contract's.

use strata_engine::{BackendPanic, ReopenRequired};
use strata_engine::{CommitError, EngineError, ReadError};

/// A commit, sync or version change asked of an engine opened with
/// [`RedbEngine::open_read_only`](crate::RedbEngine::open_read_only).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpenedReadOnly;

impl std::fmt::Display for OpenedReadOnly {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the database was opened read-only")
    }
}

impl std::error::Error for OpenedReadOnly {}

/// A database that is not one of this engine's (no `strata.meta` table),
/// found by [`RedbEngine::open_read_only`](crate::RedbEngine::open_read_only) or [`RedbEngine::stored_keyspaces`](crate::RedbEngine::stored_keyspaces).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotStrata(pub String);

impl std::fmt::Display for NotStrata {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "not a Strata database: {}", self.0)
    }
}

impl std::error::Error for NotStrata {}

pub(crate) fn backend<E: std::error::Error + Send + Sync + 'static>(
    e: E,
) -> strata_engine::BackendError {
    Box::new(e)
}

/// redb's error as the source of a contract error, and whether it says
/// the file is damaged.
pub(crate) fn classify(e: impl Into<redb::Error>) -> (bool, strata_engine::BackendError) {
    let e: redb::Error = e.into();
    (matches!(e, redb::Error::Corrupted(_)), Box::new(e))
}

pub(crate) fn read_err(e: impl Into<redb::Error>) -> ReadError {
    match classify(e) {
        (true, b) => ReadError::Corrupt(b),
        (false, b) => ReadError::Backend(b),
    }
}

pub(crate) fn commit_err(e: impl Into<redb::Error>) -> CommitError {
    match classify(e) {
        (true, b) => CommitError::Corrupt(b),
        (false, b) => CommitError::Backend(stopped(b)),
    }
}

/// redb's "previous I/O error" (it refuses every write after one failed,
/// until reopened) as [`ReopenRequired`]; any other error as it is.
pub(crate) fn stopped(b: strata_engine::BackendError) -> strata_engine::BackendError {
    let previous = b
        .downcast_ref::<redb::Error>()
        .is_some_and(|e| matches!(e, redb::Error::PreviousIo));
    if previous {
        Box::new(ReopenRequired::new("RedbEngine", b))
    } else {
        b
    }
}

pub(crate) fn engine_err(e: impl Into<redb::Error>) -> EngineError {
    match classify(e) {
        (true, b) => EngineError::Corrupt(b),
        (false, b) => EngineError::Backend(b),
    }
}

/// Runs a call into redb, which panics on some damaged files (an
/// `unreachable!`, a slice out of range) rather than returning an error:
/// a panic becomes [`BackendPanic`], reported as damaged data.
pub(crate) fn guarded<T, E>(
    operation: &'static str,
    corrupt: impl FnOnce(strata_engine::BackendError) -> E,
    f: impl FnOnce() -> Result<T, E>,
) -> Result<T, E> {
    BackendPanic::catch(operation, f).unwrap_or_else(|p| Err(corrupt(Box::new(p))))
}

/// Why redb's integrity check failed, in words.
#[derive(Debug)]
pub struct IntegrityFailed(pub(crate) String);

impl std::fmt::Display for IntegrityFailed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "redb's integrity check failed: {}", self.0)
    }
}

impl std::error::Error for IntegrityFailed {}
