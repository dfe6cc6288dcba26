//! RocksDB's errors turned into the contract's.

use strata_engine::{CommitError, EngineError, ReadError};

pub(crate) fn backend(e: rocksdb::Error) -> strata_engine::BackendError {
    Box::new(e)
}

pub(crate) fn is_corruption(e: &rocksdb::Error) -> bool {
    e.kind() == rocksdb::ErrorKind::Corruption
}

/// A failed write: an I/O error (a full disk) stops RocksDB's writes
/// until the database is reopened (it keeps answering with the same
/// error, even once space is freed), so it says so as [`ReopenRequired`].
pub(crate) fn write_failure(e: rocksdb::Error) -> strata_engine::BackendError {
    if e.kind() == rocksdb::ErrorKind::IOError {
        Box::new(strata_engine::ReopenRequired::new("RocksEngine", e))
    } else {
        backend(e)
    }
}

pub(crate) fn read_err(e: rocksdb::Error) -> ReadError {
    if is_corruption(&e) {
        ReadError::Corrupt(backend(e))
    } else {
        ReadError::Backend(backend(e))
    }
}

pub(crate) fn commit_err(e: rocksdb::Error) -> CommitError {
    if is_corruption(&e) {
        CommitError::Corrupt(backend(e))
    } else {
        CommitError::Backend(backend(e))
    }
}

pub(crate) fn engine_err(e: rocksdb::Error) -> EngineError {
    if is_corruption(&e) {
        EngineError::Corrupt(backend(e))
    } else {
        EngineError::Backend(backend(e))
    }
}

/// A column family the engine created at open is gone: the database was
/// changed underneath it.
#[derive(Debug, thiserror::Error)]
#[error("column family {0:?} is missing from the open database")]
pub(crate) struct MissingFamily(String);

pub(crate) fn missing(name: &str) -> strata_engine::BackendError {
    Box::new(MissingFamily(name.to_owned()))
}
