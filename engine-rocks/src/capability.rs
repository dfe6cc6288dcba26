//! Statistics, tickers and properties, backup, integrity checks and compaction.

use std::path::Path;

use rocksdb::{ColumnFamily, ReadOptions};
use strata_engine::{
    Backup, BackupInfo, CapabilityError, Compact, EngineError, GroupStats, Integrity,
    IntegrityReport, KeyspaceStats, Statistics,
};

#[allow(clippy::wildcard_imports)]
use super::*;

impl Integrity for RocksEngine {
    /// Reads every entry of the meta and every declared keyspace's column
    /// family with block checksums verified (and the block cache
    /// bypassed): damage in any SST block read is found. Counts the
    /// entries read.
    ///
    /// # Errors
    /// `Corrupt` when a checksum fails; other RocksDB errors as `Backend`.
    fn check_integrity(&self) -> Result<IntegrityReport, CapabilityError> {
        let mut checked = 0u64;
        let names = std::iter::once(META.to_owned()).chain(self.families.iter().cloned());
        for name in names {
            let cf = self
                .db
                .cf_handle(&name)
                .ok_or_else(|| CapabilityError::Backend(missing(&name)))?;
            let mut ro = ReadOptions::default();
            ro.set_verify_checksums(true);
            ro.fill_cache(false);
            let mut it = self.db.raw_iterator_cf_opt(cf, ro);
            it.seek_to_first();
            while it.valid() {
                checked += 1;
                it.next();
            }
            it.status()
                .map_err(|e| CapabilityError::Engine(engine_err(e)))?;
        }
        Ok(IntegrityReport::checked(Some(checked)))
    }
}

impl Statistics for RocksEngine {
    /// RocksDB's estimates: `rocksdb.estimate-num-keys` and
    /// `rocksdb.estimate-live-data-size` per column family (not exact).
    fn stats(&self) -> Result<Vec<KeyspaceStats>, CapabilityError> {
        self.keyspaces
            .specs()
            .iter()
            .zip(&self.families)
            .map(|(spec, name)| {
                let cf = self
                    .db
                    .cf_handle(name)
                    .ok_or_else(|| CapabilityError::Backend(missing(name)))?;
                Ok(KeyspaceStats {
                    name: spec.name.clone(),
                    entries: self.property(cf, rocksdb::properties::ESTIMATE_NUM_KEYS)?,
                    entries_exact: false,
                    bytes: self.property(cf, rocksdb::properties::ESTIMATE_LIVE_DATA_SIZE)?,
                    bytes_exact: false,
                })
            })
            .collect()
    }
}

impl Backup for RocksEngine {
    /// An online backup: a RocksDB checkpoint in the new directory `path`
    /// (hard links to the live SST files where the file system allows,
    /// plus a copy of the WAL tail), consistent at one point and taken
    /// while the engine stays open. Open it with [`RocksEngine::open`].
    ///
    /// # Errors
    /// The RocksDB error as [`CapabilityError::Backend`].
    fn backup(&self, path: &Path) -> Result<BackupInfo, CapabilityError> {
        // Commits wait while the checkpoint is taken (hard links and a
        // memtable flush), so the copy is at exactly the last commit. The
        // held commit slot is dropped unused: it takes no version.
        let held = self.seq.begin();
        let version = held.version() - 1;
        let checkpoint = rocksdb::checkpoint::Checkpoint::new(&self.db)
            .map_err(|e| CapabilityError::Backend(backend(e)))?;
        checkpoint
            .create_checkpoint(path)
            .map_err(|e| CapabilityError::Backend(backend(e)))?;
        drop(held);
        Ok(BackupInfo::at(Some(version)))
    }
}

impl Compact for RocksEngine {
    /// Compacts every column family fully (RocksDB's `compact_range` over
    /// all keys), the meta family included.
    fn compact(&self) -> Result<(), CapabilityError> {
        for name in self.families.iter().map(String::as_str).chain([META]) {
            let cf = self
                .db
                .cf_handle(name)
                .ok_or_else(|| CapabilityError::Backend(missing(name)))?;
            self.db.compact_range_cf(cf, None::<&[u8]>, None::<&[u8]>);
        }
        Ok(())
    }
}

impl RocksEngine {
    /// How many commit groups this engine wrote since it opened, and how
    /// many commits they held (see [`Engine::commit_group`]): with
    /// `Immediate` commits, `commits / groups` is the number of commits
    /// per WAL sync.
    pub fn group_stats(&self) -> GroupStats {
        self.group.stats()
    }

    /// RocksDB's own count for the ticker `name` since this engine opened
    /// (`rocksdb.wal.synced`: log syncs; `rocksdb.wal.bytes`: bytes
    /// written to the log; the names are RocksDB's), or `None` when the
    /// engine does not collect statistics ([`RocksOptions::statistics`])
    /// or RocksDB has no ticker of that name.
    ///
    /// ```
    /// use strata_engine::{Commit, Durability, Engine, KeyspaceSpec, Profile};
    /// use strata_engine_rocks::{RocksEngine, RocksOptions};
    ///
    /// let dir = std::env::temp_dir().join(format!("strata-rocks-ticker-{}", std::process::id()));
    /// let options = RocksOptions { statistics: true, ..RocksOptions::default() };
    /// let engine = RocksEngine::open(&dir, vec![KeyspaceSpec::new("data", Profile::PointLookup)], options)?;
    /// let data = engine.keyspace("data")?;
    /// engine.commit(Commit::new().put(data, b"k".to_vec(), b"v".to_vec()).durability(Durability::Immediate))?;
    /// assert!(engine.ticker("rocksdb.wal.synced") >= Some(1));
    /// assert_eq!(engine.ticker("no.such.ticker"), None);
    /// # drop(engine);
    /// # std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn ticker(&self, name: &str) -> Option<u64> {
        let options = self.statistics.as_ref()?;
        let ticker = rocksdb::statistics::Ticker::iter().find(|t| t.name() == name)?;
        Some(options.get_ticker_count(*ticker))
    }

    /// A RocksDB integer property of a keyspace's column family.
    pub(crate) fn property(
        &self,
        cf: &ColumnFamily,
        name: &rocksdb::properties::PropName,
    ) -> Result<u64, EngineError> {
        Ok(self
            .db
            .property_int_value_cf(cf, name)
            .map_err(engine_err)?
            .unwrap_or(0))
    }

    /// Pending compaction bytes of each keyspace (RocksDB's estimate).
    ///
    /// # Errors
    /// The RocksDB error as [`EngineError::Backend`].
    pub fn pending_compaction_bytes(&self) -> Result<Vec<u64>, EngineError> {
        self.families
            .iter()
            .map(|name| {
                let cf = self
                    .db
                    .cf_handle(name)
                    .ok_or_else(|| EngineError::Backend(missing(name)))?;
                self.property(cf, rocksdb::properties::ESTIMATE_PENDING_COMPACTION_BYTES)
            })
            .collect()
    }
}
