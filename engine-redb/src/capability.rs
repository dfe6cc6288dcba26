//! Statistics, backup, integrity checks and compaction.

use std::path::Path;

use redb::{Database, ReadableDatabase, ReadableTable, ReadableTableMetadata};
use strata_engine::{
    Backup, BackupInfo, CapabilityError, Compact, EngineError, Integrity, IntegrityReport,
    KeyspaceStats, Statistics,
};

#[allow(clippy::wildcard_imports)]
use super::*;

impl Statistics for RedbEngine {
    /// Exact entry counts; bytes are redb's stored bytes of each table
    /// (pages in use, an estimate of key and value bytes).
    fn stats(&self) -> Result<Vec<KeyspaceStats>, CapabilityError> {
        guarded(
            "statistics",
            |b| CapabilityError::Engine(EngineError::Corrupt(b)),
            || self.stats_inner(),
        )
    }
}

impl RedbEngine {
    pub(crate) fn stats_inner(&self) -> Result<Vec<KeyspaceStats>, CapabilityError> {
        let err = |e: redb::Error| CapabilityError::Backend(backend(e));
        let txn = self.db.begin_read().map_err(|e| err(e.into()))?;
        self.keyspaces
            .specs()
            .iter()
            .zip(&self.tables)
            .map(|(spec, t)| {
                let table = txn.open_table(def(t)).map_err(|e| err(e.into()))?;
                Ok(KeyspaceStats {
                    name: spec.name.clone(),
                    entries: table.len().map_err(|e| err(e.into()))?,
                    entries_exact: true,
                    bytes: table.stats().map_err(|e| err(e.into()))?.stored_bytes(),
                    bytes_exact: false,
                })
            })
            .collect()
    }
}

impl Backup for RedbEngine {
    /// Copies a consistent image of the database to a new file at `path`,
    /// while the engine stays open: one read transaction is copied table by
    /// table into a new database, committed durably. It costs a full read
    /// of the data and a full write of the copy; commits proceed meanwhile
    /// and are not in the copy.
    ///
    /// # Errors
    /// The redb error as [`CapabilityError::Backend`].
    fn backup(&self, path: &Path) -> Result<BackupInfo, CapabilityError> {
        guarded(
            "a backup",
            |b| CapabilityError::Engine(EngineError::Corrupt(b)),
            || self.backup_inner(path),
        )
    }
}

impl RedbEngine {
    pub(crate) fn backup_inner(&self, path: &Path) -> Result<BackupInfo, CapabilityError> {
        let err = |e: redb::Error| CapabilityError::Backend(backend(e));
        let read = self.db.begin_read().map_err(|e| err(e.into()))?;
        let copy = Database::create(path).map_err(|e| err(e.into()))?;
        let txn = copy.begin_write().map_err(|e| err(e.into()))?;
        let version = {
            let meta = read.open_table(META).map_err(|e| err(e.into()))?;
            let version = meta
                .get(VERSION)
                .map_err(|e| err(e.into()))?
                .map_or(0, |g| g.value());
            txn.open_table(META)
                .map_err(|e| err(e.into()))?
                .insert(VERSION, version)
                .map_err(|e| err(e.into()))?;
            for t in &self.tables {
                let src = read.open_table(def(t)).map_err(|e| err(e.into()))?;
                let mut dst = txn.open_table(def(t)).map_err(|e| err(e.into()))?;
                for row in src.iter().map_err(|e| err(e.into()))? {
                    let (k, v) = row.map_err(|e| err(e.into()))?;
                    dst.insert(k.value(), v.value())
                        .map_err(|e| err(e.into()))?;
                }
            }
            version
        };
        txn.commit().map_err(|e| err(e.into()))?;
        Ok(BackupInfo::at(Some(version)))
    }
}

impl Integrity for RedbEngine {
    /// redb's own check: every page reachable from the file's roots
    /// against the checksum its parent keeps (XXH3-128), on a copy of the
    /// file beside it (redb checks only through a writable handle, which
    /// repairs, and this must write nothing to the database). The copy of
    /// a file in use was not closed cleanly, so opening it runs redb's
    /// repair, which falls back to the previous commit if the last one is
    /// damaged: a copy whose version is below this engine's durable
    /// version fails too. Counts nothing (`checked: None`).
    ///
    /// # Errors
    /// `Corrupt` when damaged; [`CapabilityError::Unsupported`] on a custom
    /// storage backend; the copy's I/O errors as `Backend`.
    fn check_integrity(&self) -> Result<IntegrityReport, CapabilityError> {
        let Some(path) = &self.path else {
            return Err(CapabilityError::Unsupported {
                engine: "RedbEngine",
                capability: "integrity checks",
                why: "the engine runs on a custom storage backend, not a file",
            });
        };
        let corrupt = |b| CapabilityError::Engine(EngineError::Corrupt(b));
        let name = path
            .file_name()
            .map_or_else(|| "redb".into(), |n| n.to_string_lossy().into_owned());
        let copy_name = format!(".{name}.check-{}", std::process::id());
        let mut copy = path.with_file_name(&copy_name);
        if std::fs::copy(path, &copy).is_err() {
            // A read-only directory: the temporary one instead.
            let _ = std::fs::remove_file(&copy);
            copy = std::env::temp_dir().join(&copy_name);
            std::fs::copy(path, &copy).map_err(|e| CapabilityError::Backend(Box::new(e)))?;
        }
        let durable = self.seq.durable();
        let result = guarded("an integrity check", corrupt, || {
            let fail = |why: String| corrupt(Box::new(IntegrityFailed(why)));
            let mut db = Database::builder()
                .create(&copy)
                .map_err(|e| CapabilityError::Engine(engine_err(e)))?;
            match db.check_integrity() {
                Ok(true) => {}
                Ok(false) => return Err(fail("damaged pages (redb repaired its copy)".into())),
                Err(e) => return Err(CapabilityError::Engine(engine_err(e))),
            }
            let txn = db
                .begin_read()
                .map_err(|e| CapabilityError::Engine(engine_err(e)))?;
            let version = read_version(&txn)?;
            if version < durable {
                return Err(fail(format!(
                    "the last intact commit is version {version}, below the durable version {durable}"
                )));
            }
            Ok(IntegrityReport::checked(None))
        });
        let _ = std::fs::remove_file(&copy);
        result
    }
}

impl Compact for RedbEngine {
    /// Unsupported while open: redb compacts a database only with
    /// exclusive access (`Database::compact` takes `&mut`), and commits and
    /// snapshots share this engine. [`RedbEngine::compact_file`] compacts a
    /// database no engine has open.
    fn compact(&self) -> Result<(), CapabilityError> {
        Err(CapabilityError::Unsupported {
            engine: "RedbEngine",
            capability: "compaction",
            why: "redb compacts only with exclusive access to the database",
        })
    }
}
