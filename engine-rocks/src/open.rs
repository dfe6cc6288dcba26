//! Opening a database: column families per keyspace, checked against the
//! durable mark, read-only, stored keyspaces.

use std::path::Path;

use rocksdb::{
    BlockBasedOptions, Cache, ColumnFamilyDescriptor, DB, DBCompactionStyle, DBCompressionType,
    DBRecoveryMode, Options,
};
use strata_engine::implement::{GroupCommitter, Sequencer};
use strata_engine::{EngineError, KeyspaceSpec, Keyspaces, Profile};

#[allow(clippy::wildcard_imports)]
use super::*;

pub(crate) fn family_options(profile: Profile, options: &RocksOptions, cache: &Cache) -> Options {
    let mut o = Options::default();
    o.set_write_buffer_size(options.write_buffer_bytes);
    let mut table = BlockBasedOptions::default();
    table.set_block_cache(cache);
    match profile {
        Profile::AppendOnly => {
            o.set_compaction_style(DBCompactionStyle::Universal);
            o.set_compression_type(DBCompressionType::Zstd);
        }
        Profile::PointLookup => {
            o.set_compaction_style(DBCompactionStyle::Level);
            table.set_bloom_filter(10.0, false);
        }
        Profile::Queue => o.set_compaction_style(DBCompactionStyle::Level),
        _ => {}
    }
    o.set_block_based_table_factory(&table);
    o
}

impl RocksEngine {
    /// Opens (creating if needed) the database in directory `path`.
    ///
    /// # Errors
    /// [`EngineError::DuplicateKeyspace`], or the RocksDB error as
    /// [`EngineError::Backend`].
    pub fn open(
        path: impl AsRef<Path>,
        specs: Vec<KeyspaceSpec>,
        options: RocksOptions,
    ) -> Result<Self, EngineError> {
        Self::open_mode(path.as_ref(), specs, &options, false)
    }

    /// Opens the existing database in directory `path` without writing to
    /// it (RocksDB's read-only mode, which takes no lock, so another
    /// process may have it open): reads and snapshots see the state at
    /// open, including its unflushed log; commits and syncs fail with
    /// RocksDB's "not supported in read-only mode" as the backend error.
    /// Every keyspace in `specs` must exist.
    ///
    /// # Errors
    /// The RocksDB error as [`EngineError::Backend`] (a directory that is
    /// no database, a missing column family).
    pub fn open_read_only(
        path: impl AsRef<Path>,
        specs: Vec<KeyspaceSpec>,
        options: RocksOptions,
    ) -> Result<Self, EngineError> {
        Self::open_mode(path.as_ref(), specs, &options, true)
    }

    /// The keyspaces stored in the database in directory `path` (column
    /// families this engine made, declared at the last open or not), by
    /// name, in order. Reads only the manifest.
    ///
    /// # Errors
    /// The RocksDB error as [`EngineError::Backend`] (no database there).
    pub fn stored_keyspaces(path: impl AsRef<Path>) -> Result<Vec<String>, EngineError> {
        let families = DB::list_cf(&Options::default(), path.as_ref()).map_err(engine_err)?;
        if !families.iter().any(|f| f == META) {
            return Err(EngineError::Backend(missing(META)));
        }
        let mut names: Vec<String> = families
            .iter()
            .filter_map(|f| f.strip_prefix("ks.").map(str::to_owned))
            .collect();
        names.sort();
        Ok(names)
    }

    pub(crate) fn open_mode(
        path: &Path,
        specs: Vec<KeyspaceSpec>,
        options: &RocksOptions,
        read_only: bool,
    ) -> Result<Self, EngineError> {
        let keyspaces = Keyspaces::new(specs)?;
        let cache = Cache::new_lru_cache(options.block_cache_bytes);
        let mut db_options = Options::default();
        db_options.create_if_missing(true);
        db_options.create_missing_column_families(true);
        db_options.set_manual_wal_flush(options.manual_wal_flush);
        db_options.set_wal_recovery_mode(if options.accept_wal_loss {
            DBRecoveryMode::PointInTime
        } else {
            DBRecoveryMode::TolerateCorruptedTailRecords
        });
        db_options.set_paranoid_checks(true);
        if options.statistics {
            db_options.enable_statistics();
        }
        let families: Vec<String> = (0..keyspaces.len())
            .filter_map(|i| keyspaces.storage_name(i))
            .collect();
        let existing = DB::list_cf(&db_options, path).unwrap_or_default();
        let mut descriptors = vec![ColumnFamilyDescriptor::new(META, Options::default())];
        for (spec, name) in keyspaces.specs().iter().zip(&families) {
            descriptors.push(ColumnFamilyDescriptor::new(
                name,
                family_options(spec.profile, options, &cache),
            ));
        }
        for name in existing {
            if name != META && !families.contains(&name) {
                descriptors.push(ColumnFamilyDescriptor::new(name, Options::default()));
            }
        }
        let db = if read_only {
            db_options.create_if_missing(false);
            db_options.create_missing_column_families(false);
            DB::open_cf_descriptors_read_only(&db_options, path, descriptors, false)
        } else {
            DB::open_cf_descriptors(&db_options, path, descriptors)
        }
        .map_err(engine_err)?;
        let version = {
            let meta = db
                .cf_handle(META)
                .ok_or_else(|| EngineError::Backend(missing(META)))?;
            db.get_cf(meta, VERSION)
                .map_err(engine_err)?
                .and_then(|v| <[u8; 8]>::try_from(v.as_slice()).ok())
                .map_or(0, u64::from_be_bytes)
        };
        // A damaged or cut log or manifest can make RocksDB recover to an
        // earlier state without a word: the mark says how far the database
        // had durably got when it was last opened or closed.
        if let Some(durable) = read_mark(path)?
            && version < durable
            && !options.accept_wal_loss
        {
            return Err(EngineError::Corrupt(Box::new(RolledBack {
                found: version,
                durable,
            })));
        }
        let mark_dir = if read_only {
            None
        } else {
            write_mark(path, version).map_err(|e| EngineError::Backend(Box::new(e)))?;
            Some(path.to_owned())
        };
        Ok(Self {
            db,
            keyspaces,
            families,
            seq: Sequencer::new(version),
            group: GroupCommitter::new(MAX_GROUP),
            mark_dir,
            statistics: options.statistics.then_some(db_options),
            write_options: rocksdb::WriteOptions::default(),
            read_options: Box::default(),
        })
    }
}
