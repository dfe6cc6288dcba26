//! The Strata engine contract on [RocksDB](https://rocksdb.org), through the
//! `rocksdb` crate.
//!
//! Each declared keyspace is a column family, tuned by its profile; a meta
//! column family holds the commit version. A snapshot is a RocksDB snapshot
//! and ranges stream from raw iterators with bounds. Commits are serialised
//! by the engine: predicates and counters read the latest state inside the
//! critical section, then one `WriteBatch` across column families carries
//! every change and the new version.
//!
//! ```
//! use strata_engine::{Commit, Durability, Engine, KeyspaceSpec, Profile, Snapshot};
//! use strata_engine_rocks::{RocksEngine, RocksOptions};
//!
//! let dir = std::env::temp_dir().join(format!("strata-rocks-doc-{}", std::process::id()));
//! let specs = vec![
//!     KeyspaceSpec::new("events", Profile::AppendOnly),
//!     KeyspaceSpec::new("outbox", Profile::Queue),
//! ];
//! let engine = RocksEngine::open(&dir, specs, RocksOptions::default())?;
//! let events = engine.keyspace("events")?;
//! engine.commit(Commit::new().put(events, b"e1".to_vec(), b"x".to_vec()).durability(Durability::Buffered))?;
//! assert_eq!(engine.sync()?, 1);
//! assert_eq!(engine.snapshot()?.get(events, b"e1")?.as_deref(), Some(&b"x"[..]));
//! # drop(engine);
//! # std::fs::remove_dir_all(&dir)?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Profiles
//!
//! | profile | column family options |
//! |---|---|
//! | `AppendOnly` | universal compaction, zstd |
//! | `PointLookup` | leveled compaction, bloom filter (10 bits per key) |
//! | `Queue` | leveled compaction; never FIFO, which deletes data by size |
//! | `General` | RocksDB defaults |
//!
//! Every family shares one LRU block cache ([`RocksOptions::block_cache_bytes`],
//! default 64 MiB) and uses [`RocksOptions::write_buffer_bytes`] per memtable
//! (default 64 MiB).
//!
//! # Durability
//!
//! | level | RocksDB | after a process kill | after a power loss |
//! |---|---|---|---|
//! | `Immediate` | WAL write, then a WAL sync shared with concurrent commits | kept | kept |
//! | `Buffered` | WAL write without sync | kept (the WAL is in the OS's buffers) | a suffix may be lost |
//! | `Buffered`, [`RocksOptions::manual_wal_flush`] | WAL record kept in the process until a sync | a suffix may be lost | a suffix may be lost |
//! | `sync()` | `flush_wal(true)`: syncs the WAL | every earlier commit kept | every earlier commit kept |
//!
//! RocksDB recovers its WAL in order; a record cut short at the very end
//! (a crash in the middle of a write) is dropped, so a crash loses a
//! suffix, never a hole; a batch is one WAL record, never half applied. A
//! record damaged anywhere else (bit rot, a bad sector) makes the open fail
//! with [`EngineError::Corrupt`] instead of opening silently at an earlier
//! state, which would lose acknowledged durable commits;
//! [`RocksOptions::accept_wal_loss`] opens it at that earlier state, on
//! request. `durable_version()` is the version of the last immediate
//! commit or `sync()` (or of the state found at open).
//!
//! # Keyspaces across reopen
//!
//! Column families are created on first use. Opening with a different set
//! opens every family the database has (RocksDB requires it) but exposes
//! only the declared ones; families no longer declared stay on disk,
//! untouched.
#![cfg_attr(docsrs, feature(doc_cfg))]

use std::ops::Bound;
use std::path::Path;

use rocksdb::{
    BlockBasedOptions, Cache, ColumnFamily, ColumnFamilyDescriptor, DB, DBCompactionStyle,
    DBCompressionType, DBRecoveryMode, Options, ReadOptions, WriteBatch, WriteOptions,
};
use strata_engine::implement::{
    self, GroupCommitter, GroupFailed, GroupResults, Op, Reads, Sequencer,
};
use strata_engine::{
    Backup, BackupInfo, CapabilityError, Commit, CommitError, CommitInfo, Compact, Engine,
    EngineError, GroupStats, Integrity, IntegrityReport, Keyspace, KeyspaceSpec, KeyspaceStats,
    Keyspaces, Mutation, Profile, RangeSpec, ReadError, Snapshot, Statistics,
};

#[cfg(feature = "planted-bugs")]
pub mod planted;

/// Whether a flush of the log where durability is promised syncs it
/// (always, unless a planted bug says otherwise).
fn wal_sync() -> bool {
    #[cfg(feature = "planted-bugs")]
    if planted::active(planted::PlantedBug::WalFlushedNotSynced) {
        return false;
    }
    true
}

/// The most commits one group holds.
const MAX_GROUP: usize = 256;

const META: &str = "strata.meta";
const VERSION: &[u8] = b"version";

/// The file in the database directory that holds the highest version
/// known durable at the last open or clean close: the version, then its
/// complement (so damage to the file itself is seen), 8 bytes each.
const DURABLE_MARK: &str = "STRATA-DURABLE";

/// The database opened at an earlier state than one it had reached
/// durably: a damaged or cut write-ahead log or manifest lost commits that
/// RocksDB's recovery could not see were there.
#[derive(Debug, thiserror::Error)]
#[error(
    "the database recovers only to version {found}, but version {durable} was durable when it \
     was last opened or closed: commits were lost to damage (RocksOptions::accept_wal_loss \
     opens it anyway)"
)]
pub struct RolledBack {
    /// The version RocksDB recovered.
    pub found: u64,
    /// The version the mark holds.
    pub durable: u64,
}

/// The durable mark's file is itself damaged.
#[derive(Debug, thiserror::Error)]
#[error("the durable-version mark {DURABLE_MARK} is damaged")]
pub struct MarkDamaged;

fn read_mark(dir: &Path) -> Result<Option<u64>, EngineError> {
    let bytes = match std::fs::read(dir.join(DURABLE_MARK)) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(EngineError::Backend(Box::new(e))),
    };
    let word = |at: usize| {
        bytes
            .get(at..at + 8)
            .and_then(|b| <[u8; 8]>::try_from(b).ok())
            .map(u64::from_be_bytes)
    };
    match (bytes.len(), word(0), word(8)) {
        (16, Some(v), Some(not)) if v == !not => Ok(Some(v)),
        _ => Err(EngineError::Corrupt(Box::new(MarkDamaged))),
    }
}

/// Writes the mark: a new file, synced, renamed over the old one, the
/// directory synced.
fn write_mark(dir: &Path, version: u64) -> std::io::Result<()> {
    use std::io::Write as _;
    let tmp = dir.join(format!("{DURABLE_MARK}.tmp"));
    let mut f = std::fs::File::create(&tmp)?;
    f.write_all(&version.to_be_bytes())?;
    f.write_all(&(!version).to_be_bytes())?;
    f.sync_all()?;
    std::fs::rename(&tmp, dir.join(DURABLE_MARK))?;
    std::fs::File::open(dir)?.sync_all()
}

/// Options of [`RocksEngine::open`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RocksOptions {
    /// Shared LRU block cache, in bytes (default 64 MiB).
    pub block_cache_bytes: usize,
    /// Memtable size per column family, in bytes (default 64 MiB).
    pub write_buffer_bytes: usize,
    /// Keep the WAL records of `Buffered` commits in RocksDB's in-process
    /// buffer until a `sync()` or an `Immediate` commit writes them out
    /// (RocksDB's `manual_wal_flush`; the buffer also goes out when full or
    /// at a clean close). Buffered commits cost no system call, and a
    /// process kill, not only a power loss, may lose a suffix of them.
    /// Default `false`: a process kill loses nothing acknowledged.
    pub manual_wal_flush: bool,
    /// Open a database whose write-ahead log is damaged in the middle at
    /// the state before the damage (RocksDB's point-in-time recovery),
    /// losing every commit after it, acknowledged durable or not. Default
    /// `false`: such a database is refused with [`EngineError::Corrupt`]
    /// (RocksDB's `TolerateCorruptedTailRecords` recovery, which accepts
    /// only a record cut short at the very end, as a crash leaves it). Set
    /// it only to recover what can be recovered, knowingly.
    pub accept_wal_loss: bool,
    /// Collect RocksDB's statistics (its tickers, such as
    /// `rocksdb.wal.synced` or `rocksdb.bytes.written`), read with
    /// [`RocksEngine::ticker`]. They cost a few per cent of throughput.
    /// Default `false`.
    pub statistics: bool,
}

impl Default for RocksOptions {
    fn default() -> Self {
        Self {
            block_cache_bytes: 64 << 20,
            write_buffer_bytes: 64 << 20,
            manual_wal_flush: false,
            accept_wal_loss: false,
            statistics: false,
        }
    }
}

/// The engine contract on RocksDB. See the [crate docs](crate).
pub struct RocksEngine {
    db: DB,
    keyspaces: Keyspaces,
    families: Vec<String>,
    /// Serialises commits and numbers them.
    seq: Sequencer,
    /// Groups concurrent commits under one WAL sync.
    group: GroupCommitter,
    /// The directory, where the durable mark is written at a clean close
    /// (`None` when opened read-only).
    mark_dir: Option<std::path::PathBuf>,
    /// The options the database was opened with, when they collect
    /// statistics ([`RocksOptions::statistics`]).
    statistics: Option<Options>,
}

impl Drop for RocksEngine {
    /// A clean close syncs the log and records the version as durable
    /// (the file `STRATA-DURABLE`); a failure only leaves the older mark.
    fn drop(&mut self) {
        if let Some(dir) = &self.mark_dir
            && self.db.flush_wal(true).is_ok()
            && let Err(e) = write_mark(dir, self.seq.last())
        {
            tracing::warn!(error = %e, "the durable mark was not written at close");
        }
    }
}

impl std::fmt::Debug for RocksEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RocksEngine")
            .field("keyspaces", &self.keyspaces.specs())
            .finish_non_exhaustive()
    }
}

fn backend(e: rocksdb::Error) -> strata_engine::BackendError {
    Box::new(e)
}

fn is_corruption(e: &rocksdb::Error) -> bool {
    e.kind() == rocksdb::ErrorKind::Corruption
}

/// A failed write: an I/O error (a full disk) stops RocksDB's writes
/// until the database is reopened (it keeps answering with the same
/// error, even once space is freed), so it says so as [`ReopenRequired`].
fn write_failure(e: rocksdb::Error) -> strata_engine::BackendError {
    if e.kind() == rocksdb::ErrorKind::IOError {
        Box::new(strata_engine::ReopenRequired::new("RocksEngine", e))
    } else {
        backend(e)
    }
}

fn read_err(e: rocksdb::Error) -> ReadError {
    if is_corruption(&e) {
        ReadError::Corrupt(backend(e))
    } else {
        ReadError::Backend(backend(e))
    }
}

fn commit_err(e: rocksdb::Error) -> CommitError {
    if is_corruption(&e) {
        CommitError::Corrupt(backend(e))
    } else {
        CommitError::Backend(backend(e))
    }
}

fn engine_err(e: rocksdb::Error) -> EngineError {
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
struct MissingFamily(String);

fn missing(name: &str) -> strata_engine::BackendError {
    Box::new(MissingFamily(name.to_owned()))
}

fn family_options(profile: Profile, options: &RocksOptions, cache: &Cache) -> Options {
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

/// `RangeSpec` bounds as RocksDB's inclusive lower and exclusive upper
/// bound: the least key above `k` is `k ++ 0x00`.
fn rocks_bounds(range: &RangeSpec) -> (Option<Vec<u8>>, Option<Vec<u8>>) {
    let after = |k: &Vec<u8>| {
        let mut next = k.clone();
        next.push(0);
        next
    };
    let lower = match &range.start {
        Bound::Included(k) => Some(k.clone()),
        Bound::Excluded(k) => Some(after(k)),
        Bound::Unbounded => None,
    };
    let upper = match &range.end {
        Bound::Included(k) => Some(after(k)),
        Bound::Excluded(k) => Some(k.clone()),
        Bound::Unbounded => None,
    };
    (lower, upper)
}

fn read_options(range: &RangeSpec) -> (ReadOptions, bool) {
    let (lower, upper) = rocks_bounds(range);
    let empty = matches!((&lower, &upper), (Some(l), Some(u)) if l >= u);
    let mut ro = ReadOptions::default();
    if let Some(l) = lower {
        ro.set_iterate_lower_bound(l);
    }
    if let Some(u) = upper {
        ro.set_iterate_upper_bound(u);
    }
    (ro, empty)
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

    fn open_mode(
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
        })
    }

    fn family(&self, ks: Keyspace) -> Option<&ColumnFamily> {
        self.keyspaces
            .index_of(ks)
            .and_then(|i| self.db.cf_handle(&self.families[i]))
    }

    fn meta(&self) -> Result<&ColumnFamily, strata_engine::BackendError> {
        self.db.cf_handle(META).ok_or_else(|| missing(META))
    }

    /// The write batch of `commit` as `version`: predicates checked and
    /// counters resolved against the latest state (which includes every
    /// commit written before, those of the same group too), plus the
    /// version record.
    fn batch(&self, version: u64, commit: &Commit) -> Result<WriteBatch, CommitError> {
        let mut reads = LatestReads { engine: self };
        implement::check_predicates(&commit.predicates, &mut reads)?;
        let mut batch = WriteBatch::default();
        // Plain puts and deletes need no resolving: write them straight
        // from the commit, without copying keys and values.
        let plain = commit
            .mutations
            .iter()
            .all(|m| matches!(m, Mutation::Put { .. } | Mutation::Delete { .. }));
        let ops = if plain {
            Vec::new()
        } else {
            implement::resolve(version, &commit.mutations, &mut reads)?
        };
        if plain {
            for m in &commit.mutations {
                match m {
                    Mutation::Put { ks, key, value } => batch.put_cf(
                        self.family(*ks).ok_or(CommitError::UnknownKeyspace(*ks))?,
                        key,
                        value,
                    ),
                    Mutation::Delete { ks, key } => batch.delete_cf(
                        self.family(*ks).ok_or(CommitError::UnknownKeyspace(*ks))?,
                        key,
                    ),
                    _ => {}
                }
            }
        }
        for (i, op) in ops.iter().enumerate() {
            match op {
                Op::Put(ks, k, v) => batch.put_cf(
                    self.family(*ks).ok_or(CommitError::UnknownKeyspace(*ks))?,
                    k,
                    v,
                ),
                Op::Delete(ks, k) => batch.delete_cf(
                    self.family(*ks).ok_or(CommitError::UnknownKeyspace(*ks))?,
                    k,
                ),
                Op::DeleteRange(ks, range) => {
                    let cf = self.family(*ks).ok_or(CommitError::UnknownKeyspace(*ks))?;
                    let lower = rocks_bounds(range).0.unwrap_or_default();
                    if let Some(upper) = reads.upper_bound(*ks, range, &ops[..i])?
                        && lower < upper
                    {
                        batch.delete_range_cf(cf, lower, upper);
                    }
                }
            }
        }
        batch.put_cf(
            self.meta().map_err(CommitError::Backend)?,
            VERSION,
            version.to_be_bytes(),
        );
        Ok(batch)
    }

    /// Writes a group of commits in order, each as its own batch and WAL
    /// record (not synced), so each commit's predicates see the earlier
    /// ones; a commit refused by a predicate or an invalid mutation writes
    /// nothing and fails alone. A failed write stops the group: that
    /// commit's outcome is unknown, the later ones were not applied. The
    /// applied commits return not durable: the group committer then syncs
    /// the WAL once for the whole group ([`RocksEngine::sync_wal_through`]),
    /// after handing the commit lock to the next group, whose writes go on
    /// beside the sync.
    fn write_group(&self, commits: &[Commit]) -> GroupResults {
        let n = commits.len();
        let mut sequence = self.seq.begin();
        let mut outcomes: Vec<Result<u64, CommitError>> = Vec::with_capacity(n);
        let wo = WriteOptions::default();
        for (i, commit) in commits.iter().enumerate() {
            let batch = match self.batch(sequence.version(), commit) {
                Ok(batch) => batch,
                Err(e) => {
                    outcomes.push(Err(e));
                    continue;
                }
            };
            if let Err(e) = self.db.write_opt(batch, &wo) {
                // RocksDB may have written the WAL record before failing:
                // unknown. The rest is not attempted.
                let e = write_failure(e);
                let later: Vec<_> = (i + 1..n)
                    .map(|_| Err(GroupFailed::not_applied(&e)))
                    .collect();
                outcomes.push(Err(CommitError::OutcomeUnknown(e)));
                outcomes.extend(later);
                break;
            }
            outcomes.push(Ok(sequence.take()));
        }
        if sequence.taken() > 0 {
            sequence.publish(false);
        }
        outcomes
            .into_iter()
            .map(|r| {
                r.map(|version| CommitInfo {
                    version,
                    durable: false,
                })
            })
            .collect()
    }

    /// Makes every commit up to `version` durable with one WAL sync
    /// (`flush_wal(true)`), shared with concurrent callers, without the
    /// commit lock.
    fn sync_wal_through(&self, version: u64) -> Result<u64, strata_engine::BackendError> {
        self.seq
            .sync_through(version, || {
                self.group.count_sync();
                self.db.flush_wal(wal_sync())
            })
            .map_err(backend)
    }

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
    fn property(
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

/// Reads of the latest state, inside the commit's critical section.
struct LatestReads<'a> {
    engine: &'a RocksEngine,
}

impl Reads for LatestReads<'_> {
    fn get(&mut self, ks: Keyspace, key: &[u8]) -> Result<Option<Vec<u8>>, CommitError> {
        let cf = self
            .engine
            .family(ks)
            .ok_or(CommitError::UnknownKeyspace(ks))?;
        self.engine.db.get_cf(cf, key).map_err(commit_err)
    }

    fn any_in(&mut self, ks: Keyspace, range: &RangeSpec) -> Result<bool, CommitError> {
        let cf = self
            .engine
            .family(ks)
            .ok_or(CommitError::UnknownKeyspace(ks))?;
        let (ro, empty) = read_options(range);
        if empty {
            return Ok(false);
        }
        let mut it = self.engine.db.raw_iterator_cf_opt(cf, ro);
        it.seek_to_first();
        it.status().map_err(commit_err)?;
        Ok(it.valid())
    }
}

impl LatestReads<'_> {
    /// The exclusive upper bound that covers every key of `range` that
    /// exists now or is put by `ops`: for an unbounded range, one past the
    /// largest such key.
    fn upper_bound(
        &self,
        ks: Keyspace,
        range: &RangeSpec,
        ops: &[Op],
    ) -> Result<Option<Vec<u8>>, CommitError> {
        if let (_, Some(upper)) = rocks_bounds(range) {
            return Ok(Some(upper));
        }
        let cf = self
            .engine
            .family(ks)
            .ok_or(CommitError::UnknownKeyspace(ks))?;
        let mut it = self.engine.db.raw_iterator_cf(cf);
        it.seek_to_last();
        it.status().map_err(commit_err)?;
        let mut max = it.key().map(<[u8]>::to_vec);
        for op in ops {
            if let Op::Put(o, k, _) = op
                && *o == ks
                && max.as_ref().is_none_or(|m| k > m)
            {
                max = Some(k.clone());
            }
        }
        Ok(max.map(|mut k| {
            k.push(0);
            k
        }))
    }
}

impl Engine for RocksEngine {
    type Snapshot<'e> = RocksSnapshot<'e>;

    fn keyspaces(&self) -> &Keyspaces {
        &self.keyspaces
    }

    fn snapshot(&self) -> Result<RocksSnapshot<'_>, ReadError> {
        Ok(RocksSnapshot {
            engine: self,
            snap: self.db.snapshot(),
        })
    }

    fn commit(&self, commit: Commit) -> Result<CommitInfo, CommitError> {
        self.keyspaces.check_commit(&commit)?;
        self.group.commit(
            commit,
            |g| self.write_group(&g),
            |v| self.sync_wal_through(v),
        )
    }

    fn commit_group(&self, commits: Vec<Commit>) -> Vec<Result<CommitInfo, CommitError>> {
        self.group.commit_all(
            &self.keyspaces,
            commits,
            |g| self.write_group(&g),
            |v| self.sync_wal_through(v),
        )
    }

    fn sync(&self) -> Result<u64, EngineError> {
        self.seq.sync(|| {
            self.db.flush_wal(wal_sync()).map_err(|e| {
                if is_corruption(&e) {
                    EngineError::Corrupt(backend(e))
                } else {
                    EngineError::Backend(write_failure(e))
                }
            })
        })
    }

    /// One synced write of the raised version record.
    fn raise_version(&self, at_least: u64) -> Result<u64, strata_engine::Error> {
        let mut sequence = self.seq.begin();
        let to = sequence.raise_to(at_least);
        if to == self.seq.last() {
            drop(sequence);
            return Ok(to);
        }
        let mut batch = WriteBatch::default();
        batch.put_cf(
            self.meta().map_err(CommitError::Backend)?,
            VERSION,
            to.to_be_bytes(),
        );
        let mut wo = WriteOptions::default();
        wo.set_sync(true);
        self.db
            .write_opt(batch, &wo)
            .map_err(|e| CommitError::OutcomeUnknown(backend(e)))?;
        Ok(sequence.publish(true))
    }

    fn durable_version(&self) -> u64 {
        self.seq.durable()
    }

    fn last_version(&self) -> u64 {
        self.seq.last()
    }
}

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

/// A consistent view: a RocksDB snapshot.
pub struct RocksSnapshot<'e> {
    engine: &'e RocksEngine,
    snap: rocksdb::Snapshot<'e>,
}

impl RocksSnapshot<'_> {
    fn family(&self, ks: Keyspace) -> Result<&ColumnFamily, ReadError> {
        self.engine.family(ks).ok_or(ReadError::UnknownKeyspace(ks))
    }
}

impl Snapshot for RocksSnapshot<'_> {
    type Range<'s>
        = RocksRange<'s>
    where
        Self: 's;

    fn version(&self) -> Result<u64, ReadError> {
        let meta = self.engine.meta().map_err(ReadError::Backend)?;
        Ok(self
            .snap
            .get_cf(meta, VERSION)
            .map_err(read_err)?
            .and_then(|v| <[u8; 8]>::try_from(v.as_slice()).ok())
            .map_or(0, u64::from_be_bytes))
    }

    fn get(&self, ks: Keyspace, key: &[u8]) -> Result<Option<Vec<u8>>, ReadError> {
        let cf = self.family(ks)?;
        self.snap.get_cf(cf, key).map_err(read_err)
    }

    fn range(&self, ks: Keyspace, range: RangeSpec) -> Result<RocksRange<'_>, ReadError> {
        let cf = self.family(ks)?;
        range.validate()?;
        let (ro, empty) = read_options(&range);
        let mut it = self.snap.raw_iterator_cf_opt(cf, ro);
        if range.reverse {
            it.seek_to_last();
        } else {
            it.seek_to_first();
        }
        Ok(RocksRange {
            it,
            reverse: range.reverse,
            remaining: if empty {
                0
            } else {
                range.limit.unwrap_or(usize::MAX)
            },
            started: false,
        })
    }
}

/// A streaming range over a raw RocksDB iterator with bounds.
pub struct RocksRange<'s> {
    it: rocksdb::DBRawIteratorWithThreadMode<'s, DB>,
    reverse: bool,
    remaining: usize,
    started: bool,
}

impl Iterator for RocksRange<'_> {
    type Item = Result<(Vec<u8>, Vec<u8>), ReadError>;

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        if self.remaining == 0 {
            return None;
        }
        if self.started {
            if self.reverse {
                self.it.prev();
            } else {
                self.it.next();
            }
        }
        self.started = true;
        if !self.it.valid() {
            self.remaining = 0;
            return self.it.status().err().map(|e| Err(read_err(e)));
        }
        self.remaining -= 1;
        self.it.item().map(|(k, v)| Ok((k.to_vec(), v.to_vec())))
    }
}

/// This crate's README example, compiled and run as a doctest.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
