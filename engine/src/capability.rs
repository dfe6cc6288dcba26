//! Capabilities beyond the contract: statistics, backup, compaction,
//! integrity checks.
//!
//! Each is a small trait next to [`Engine`](crate::Engine). An engine
//! implements the ones it can; where a capability makes no sense for it, it
//! still implements the trait and answers [`CapabilityError::Unsupported`],
//! so layers above (the store, the command-line tool, the schemas) can
//! require the traits generically and report the answer.

use std::path::Path;

use crate::error::{BackendError, EngineError};

/// Size of one keyspace.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct KeyspaceStats {
    /// Keyspace name.
    pub name: String,
    /// Number of entries (or an estimate).
    pub entries: u64,
    /// Whether `entries` is exact.
    pub entries_exact: bool,
    /// Bytes of keys and values (or an estimate).
    pub bytes: u64,
    /// Whether `bytes` is exact.
    pub bytes_exact: bool,
}

/// Why a capability call failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CapabilityError {
    /// This engine does not offer the capability.
    #[error("{engine} does not support {capability}: {why}")]
    Unsupported {
        /// The engine's type name.
        engine: &'static str,
        /// What was asked for: `backup`, `compaction`, `statistics`.
        capability: &'static str,
        /// Why not, for the user.
        why: &'static str,
    },
    /// The engine failed.
    #[error(transparent)]
    Engine(#[from] EngineError),
    /// The backend failed.
    #[error("backend failed")]
    Backend(#[source] BackendError),
}

/// Sizes per keyspace.
pub trait Statistics {
    /// Size per keyspace, in declaration order.
    ///
    /// # Errors
    /// A backend failure.
    fn stats(&self) -> Result<Vec<KeyspaceStats>, CapabilityError>;
}

/// What a backup holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct BackupInfo {
    /// The commit version the copy is consistent at, where the engine
    /// knows it (`None`: consistent at one point the engine cannot name).
    pub version: Option<u64>,
}

impl BackupInfo {
    /// A backup consistent at `version`, if known.
    pub const fn at(version: Option<u64>) -> Self {
        Self { version }
    }
}

/// An online copy of the whole database.
pub trait Backup {
    /// Writes a consistent copy to `path` (a new file or directory, as the
    /// engine stores itself) while the engine stays open; the engine opens
    /// the copy like any database of its kind.
    ///
    /// # Errors
    /// [`CapabilityError::Unsupported`], or a backend failure.
    fn backup(&self, path: &Path) -> Result<BackupInfo, CapabilityError>;
}

/// What an integrity check read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct IntegrityReport {
    /// Entries (rows, pages: the engine says which in its docs) whose
    /// checksums were verified, where the engine counts them.
    pub checked: Option<u64>,
}

impl IntegrityReport {
    /// A check that verified `checked` entries, if counted.
    pub const fn checked(checked: Option<u64>) -> Self {
        Self { checked }
    }
}

/// The engine's own check of what it stored (page or block checksums),
/// beside the layers' checks of their rows.
pub trait Integrity {
    /// Verifies every checksum the engine keeps over the data of the
    /// database as it is now.
    ///
    /// # Errors
    /// [`CapabilityError::Engine`] with [`EngineError::Corrupt`] when the
    /// stored data is damaged; [`CapabilityError::Unsupported`], or a
    /// backend failure.
    fn check_integrity(&self) -> Result<IntegrityReport, CapabilityError>;
}

/// Space reclamation on demand.
pub trait Compact {
    /// Compacts the whole database now.
    ///
    /// # Errors
    /// [`CapabilityError::Unsupported`], or a backend failure.
    fn compact(&self) -> Result<(), CapabilityError>;
}

impl<E: Statistics + ?Sized> Statistics for &E {
    fn stats(&self) -> Result<Vec<KeyspaceStats>, CapabilityError> {
        (**self).stats()
    }
}

impl<E: Backup + ?Sized> Backup for &E {
    fn backup(&self, path: &Path) -> Result<BackupInfo, CapabilityError> {
        (**self).backup(path)
    }
}

impl<E: Integrity + ?Sized> Integrity for &E {
    fn check_integrity(&self) -> Result<IntegrityReport, CapabilityError> {
        (**self).check_integrity()
    }
}

impl<E: Compact + ?Sized> Compact for &E {
    fn compact(&self) -> Result<(), CapabilityError> {
        (**self).compact()
    }
}
