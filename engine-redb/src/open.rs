//! Opening a database: checked at open, read-only, its stored keyspaces,
//! compacting a closed file.

use std::path::Path;

use redb::{Database, ReadableDatabase, ReadableTable, StorageBackend, TableHandle};
use strata_engine::implement::{GroupCommitter, Sequencer};
use strata_engine::{CapabilityError, EngineError, Integrity, KeyspaceSpec, Keyspaces};

#[allow(clippy::wildcard_imports)]
use super::*;

/// The table of each declared keyspace, in order.
pub(crate) fn tables_of(keyspaces: &Keyspaces) -> Vec<String> {
    (0..keyspaces.len())
        .filter_map(|i| keyspaces.storage_name(i))
        .collect()
}

/// The version in the meta table of `txn`'s database; [`NotStrata`] when
/// there is no meta table.
pub(crate) fn read_version(txn: &redb::ReadTransaction) -> Result<u64, EngineError> {
    let meta = match txn.open_table(META) {
        Ok(meta) => meta,
        Err(redb::TableError::TableDoesNotExist(_)) => {
            return Err(EngineError::Backend(Box::new(NotStrata(
                "no strata.meta table".to_owned(),
            ))));
        }
        Err(e) => return Err(engine_err(e)),
    };
    meta.get(VERSION)
        .map_err(engine_err)
        .map(|v| v.map_or(0, |g| g.value()))
}

impl RedbEngine {
    /// Opens (creating if needed) the database at `path` with these
    /// keyspaces.
    ///
    /// # Errors
    /// [`EngineError::DuplicateKeyspace`], or the redb error as
    /// [`EngineError::Backend`].
    pub fn open(
        path: impl AsRef<Path>,
        specs: Vec<KeyspaceSpec>,
        options: RedbOptions,
    ) -> Result<Self, EngineError> {
        let path = path.as_ref();
        let engine = guarded("open", EngineError::Corrupt, || {
            let db = Self::builder(options).create(path).map_err(engine_err)?;
            Self::init(db, specs, Some(path.to_owned()))
        })?;
        engine.verified_at_open(options)
    }

    /// The engine, once [`RedbOptions::verify_at_open`] is satisfied.
    pub(crate) fn verified_at_open(self, options: RedbOptions) -> Result<Self, EngineError> {
        if !options.verify_at_open || self.path.is_none() {
            return Ok(self);
        }
        match self.check_integrity() {
            Ok(_) => Ok(self),
            Err(CapabilityError::Engine(EngineError::Corrupt(b))) => Err(EngineError::Corrupt(
                Box::new(IntegrityFailed(format!("at open: {b}"))),
            )),
            Err(CapabilityError::Engine(e)) => Err(e),
            Err(CapabilityError::Backend(e)) => Err(EngineError::Backend(e)),
            Err(other) => Err(EngineError::Backend(Box::new(other))),
        }
    }

    /// Opens the database on a custom storage backend (for power-loss
    /// tests, see [`PowerLossBackend`]).
    ///
    /// # Errors
    /// As [`RedbEngine::open`].
    pub fn open_with_backend(
        storage: impl StorageBackend,
        specs: Vec<KeyspaceSpec>,
        options: RedbOptions,
    ) -> Result<Self, EngineError> {
        guarded("open", EngineError::Corrupt, || {
            let db = Self::builder(options)
                .create_with_backend(storage)
                .map_err(engine_err)?;
            Self::init(db, specs, None)
        })
    }

    /// Opens the existing database at `path` without writing to it: reads
    /// and snapshots work, commits and syncs fail with [`OpenedReadOnly`]
    /// as the backend error. Every keyspace in `specs` must exist. redb
    /// refuses a database another process has open for writing
    /// (`DatabaseAlreadyOpen`), and one that was not closed cleanly (it
    /// needs a writable open to repair it).
    ///
    /// # Errors
    /// [`EngineError::Backend`] with the redb error, [`NotStrata`], or
    /// the missing keyspace's table error.
    pub fn open_read_only(
        path: impl AsRef<Path>,
        specs: Vec<KeyspaceSpec>,
        options: RedbOptions,
    ) -> Result<Self, EngineError> {
        let path = path.as_ref();
        guarded("open", EngineError::Corrupt, || {
            Self::open_read_only_inner(path, specs, options)
        })?
        .verified_at_open(options)
    }

    pub(crate) fn open_read_only_inner(
        path: &Path,
        specs: Vec<KeyspaceSpec>,
        options: RedbOptions,
    ) -> Result<Self, EngineError> {
        let db = Self::builder(options)
            .open_read_only(path)
            .map_err(engine_err)?;
        let keyspaces = Keyspaces::new(specs)?;
        let tables = tables_of(&keyspaces);
        let err = |e: redb::Error| engine_err(e);
        let version = {
            let txn = db.begin_read().map_err(|e| err(e.into()))?;
            let version = read_version(&txn)?;
            for t in &tables {
                txn.open_table(def(t)).map_err(|e| err(e.into()))?;
            }
            version
        };
        Ok(Self {
            db: Db::ReadOnly(db),
            path: Some(path.to_owned()),
            keyspaces,
            tables,
            seq: Sequencer::new(version),
            group: GroupCommitter::new(MAX_GROUP),
        })
    }

    /// The keyspaces stored in the database at `path` (tables this engine
    /// made, whether declared at the last open or not), by name, in
    /// order, opened read-only.
    ///
    /// # Errors
    /// As [`RedbEngine::open_read_only`].
    pub fn stored_keyspaces(path: impl AsRef<Path>) -> Result<Vec<String>, EngineError> {
        let path = path.as_ref();
        guarded("open", EngineError::Corrupt, || Self::stored_inner(path))
    }

    pub(crate) fn stored_inner(path: &Path) -> Result<Vec<String>, EngineError> {
        let db = Self::builder(RedbOptions::default())
            .open_read_only(path)
            .map_err(engine_err)?;
        let err = |e: redb::Error| engine_err(e);
        let txn = db.begin_read().map_err(|e| err(e.into()))?;
        read_version(&txn)?;
        let mut names: Vec<String> = txn
            .list_tables()
            .map_err(|e| err(e.into()))?
            .filter_map(|t| t.name().strip_prefix("ks.").map(str::to_owned))
            .collect();
        names.sort();
        Ok(names)
    }

    /// Compacts the database file at `path`, which no engine may have
    /// open: redb compacts only with exclusive access (see the
    /// [`Compact`](strata_engine::Compact) implementation). Returns whether it compacted anything.
    ///
    /// # Errors
    /// The redb error as [`CapabilityError::Backend`] (another process
    /// holding the file: `DatabaseAlreadyOpen`).
    pub fn compact_file(path: impl AsRef<Path>) -> Result<bool, CapabilityError> {
        let path = path.as_ref();
        guarded(
            "compaction",
            |b| CapabilityError::Engine(EngineError::Corrupt(b)),
            || Self::compact_inner(path),
        )
    }

    pub(crate) fn compact_inner(path: &Path) -> Result<bool, CapabilityError> {
        let err = |e: redb::Error| CapabilityError::Backend(backend(e));
        let mut db = Database::open(path).map_err(|e| err(e.into()))?;
        {
            let txn = db.begin_read().map_err(|e| err(e.into()))?;
            read_version(&txn).map_err(CapabilityError::Engine)?;
        }
        db.compact().map_err(|e| err(e.into()))
    }

    pub(crate) fn builder(options: RedbOptions) -> redb::Builder {
        let mut builder = Database::builder();
        builder.set_cache_size(options.cache_bytes);
        if !options.repair {
            builder.set_repair_callback(redb::RepairSession::abort);
        }
        builder
    }

    pub(crate) fn init(
        db: Database,
        specs: Vec<KeyspaceSpec>,
        path: Option<std::path::PathBuf>,
    ) -> Result<Self, EngineError> {
        let keyspaces = Keyspaces::new(specs)?;
        let tables = tables_of(&keyspaces);
        let err = |e: redb::Error| engine_err(e);
        // Create every table (and the meta table) so reads never meet a
        // missing one; this changes no data and no version.
        let txn = db.begin_write().map_err(|e| err(e.into()))?;
        let version = {
            let meta = txn.open_table(META).map_err(|e| err(e.into()))?;
            for t in &tables {
                txn.open_table(def(t)).map_err(|e| err(e.into()))?;
            }
            meta.get(VERSION)
                .map_err(|e| err(e.into()))?
                .map_or(0, |g| g.value())
        };
        txn.commit().map_err(|e| err(e.into()))?;
        Ok(Self {
            db: Db::Writable(db),
            path,
            keyspaces,
            tables,
            seq: Sequencer::new(version),
            group: GroupCommitter::new(MAX_GROUP),
        })
    }
}
