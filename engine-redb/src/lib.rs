//! The Strata engine contract on [redb](https://docs.rs/redb), an embedded
//! copy-on-write B-tree store.
//!
//! Each declared keyspace is a redb table of byte keys and byte values
//! (byte order is tuple order); a meta table holds the commit version. A
//! snapshot is a redb read transaction; a commit is one write transaction
//! that checks the predicates, applies the mutations and stores the new
//! version, then commits.
//!
//! ```
//! use strata_engine::{Commit, Durability, Engine, KeyspaceSpec, Profile, Snapshot};
//! use strata_engine_redb::{RedbEngine, RedbOptions};
//!
//! let dir = std::env::temp_dir().join(format!("strata-redb-doc-{}", std::process::id()));
//! std::fs::create_dir_all(&dir)?;
//! let path = dir.join("db.redb");
//! let specs = vec![KeyspaceSpec::new("kv", Profile::PointLookup)];
//! let engine = RedbEngine::open(&path, specs.clone(), RedbOptions::default())?;
//! let kv = engine.keyspace("kv")?;
//! engine.commit(Commit::new().put(kv, b"k".to_vec(), b"v".to_vec()).durability(Durability::Buffered))?;
//! engine.sync()?;
//! drop(engine);
//!
//! // A reopened engine issues new handles: obtain them again by name.
//! let engine = RedbEngine::open(&path, specs, RedbOptions::default())?;
//! let kv = engine.keyspace("kv")?;
//! assert_eq!(engine.snapshot()?.get(kv, b"k")?.as_deref(), Some(&b"v"[..]));
//! # drop(engine);
//! # std::fs::remove_dir_all(&dir)?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Durability
//!
//! | level | redb | after a process kill | after a power loss |
//! |---|---|---|---|
//! | `Immediate` | `Durability::Immediate`: fsync before return | kept | kept |
//! | `Buffered` | `Durability::None`: written without fsync | may be lost (a suffix) | may be lost (a suffix) |
//! | `sync()` | an empty `Immediate` commit | every earlier commit kept | every earlier commit kept |
//!
//! redb makes a non-durable commit durable only through a later durable
//! one, so after any crash the database is at the last durable commit or a
//! later commit: never a hole, never half a commit. `durable_version()` is
//! the version of the last `Immediate` commit or `sync()` (or of the state
//! found at open). A commit whose redb `commit()` fails is reported as
//! `OutcomeUnknown`: it may become durable.
//!
//! # Keyspaces across reopen
//!
//! Opening with a different keyspace set creates tables for new names and
//! leaves tables of names no longer declared on disk, untouched and
//! unreachable through the engine.
#![cfg_attr(docsrs, feature(doc_cfg))]

pub mod powerloss;

use std::ops::Bound;
use std::path::Path;

use redb::{
    Database, ReadOnlyDatabase, ReadableDatabase, ReadableTable, ReadableTableMetadata,
    StorageBackend, TableDefinition, TableHandle,
};
use strata_engine::implement::{
    self, GroupCommitter, GroupFailed, GroupResults, Op, Reads, Sequencer,
};
use strata_engine::{BackendPanic, ReopenRequired};
use strata_engine::{
    Backup, BackupInfo, CapabilityError, Commit, CommitError, CommitInfo, Compact, Durability,
    Engine, EngineError, GroupStats, Integrity, IntegrityReport, Keyspace, KeyspaceSpec,
    KeyspaceStats, Keyspaces, RangeSpec, ReadError, Snapshot, Statistics,
};

pub use powerloss::PowerLossBackend;

/// The most commits one group holds.
const MAX_GROUP: usize = 256;

const META: TableDefinition<'static, &str, u64> = TableDefinition::new("strata.meta");
const VERSION: &str = "version";

/// Options of [`RedbEngine::open`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RedbOptions {
    /// redb's page cache, in bytes (default 64 MiB).
    pub cache_bytes: usize,
    /// Whether to repair a database that was not closed cleanly (default
    /// yes). When `false`, such a database fails to open instead.
    pub repair: bool,
    /// Whether opening runs redb's integrity check (default yes): every
    /// page against the checksum its parent keeps, and the last intact
    /// commit against the file's own version, as
    /// [`Integrity::check_integrity`] does, on a copy of the file beside
    /// it (or in the temporary directory when that one is read-only), so
    /// nothing is written to the database. redb does not check pages when
    /// it reads them: with this off, a damaged page that still parses can
    /// make a read miss a row or return another (Strata's envelope CRC
    /// catches a changed value, not a row whose key moved). The cost is a
    /// copy and a read of the whole file at each open (measured about
    /// 1.5 s for a 544 MiB file on the test machine, against under 1 ms
    /// without); turn it off for large files whose integrity the
    /// application checks on its own schedule.
    pub verify_at_open: bool,
}

impl Default for RedbOptions {
    fn default() -> Self {
        Self {
            cache_bytes: 64 << 20,
            repair: true,
            verify_at_open: true,
        }
    }
}

/// A commit, sync or version change asked of an engine opened with
/// [`RedbEngine::open_read_only`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpenedReadOnly;

impl std::fmt::Display for OpenedReadOnly {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the database was opened read-only")
    }
}

impl std::error::Error for OpenedReadOnly {}

/// A database that is not one of this engine's (no `strata.meta` table),
/// found by [`RedbEngine::open_read_only`] or [`RedbEngine::stored_keyspaces`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotStrata(pub String);

impl std::fmt::Display for NotStrata {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "not a Strata database: {}", self.0)
    }
}

impl std::error::Error for NotStrata {}

/// The database, writable or opened read-only.
enum Db {
    Writable(Database),
    ReadOnly(ReadOnlyDatabase),
}

impl Db {
    fn begin_read(&self) -> Result<redb::ReadTransaction, redb::TransactionError> {
        match self {
            Self::Writable(db) => db.begin_read(),
            Self::ReadOnly(db) => db.begin_read(),
        }
    }

    fn begin_write(&self) -> Result<redb::WriteTransaction, strata_engine::BackendError> {
        match self {
            Self::Writable(db) => db
                .begin_write()
                .map_err(|e| stopped(backend(redb::Error::from(e)))),
            Self::ReadOnly(_) => Err(Box::new(OpenedReadOnly)),
        }
    }
}

/// The engine contract on redb. See the [crate docs](crate).
pub struct RedbEngine {
    db: Db,
    /// The file, where the engine was opened on one.
    path: Option<std::path::PathBuf>,
    keyspaces: Keyspaces,
    tables: Vec<String>,
    /// Serialises commits (as redb serialises write transactions anyway),
    /// so the next version needs no read of the meta table.
    seq: Sequencer,
    /// Groups concurrent commits into one write transaction.
    group: GroupCommitter,
}

impl std::fmt::Debug for RedbEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedbEngine")
            .field("keyspaces", &self.keyspaces.specs())
            .finish_non_exhaustive()
    }
}

fn backend<E: std::error::Error + Send + Sync + 'static>(e: E) -> strata_engine::BackendError {
    Box::new(e)
}

/// redb's error as the source of a contract error, and whether it says
/// the file is damaged.
fn classify(e: impl Into<redb::Error>) -> (bool, strata_engine::BackendError) {
    let e: redb::Error = e.into();
    (matches!(e, redb::Error::Corrupted(_)), Box::new(e))
}

fn read_err(e: impl Into<redb::Error>) -> ReadError {
    match classify(e) {
        (true, b) => ReadError::Corrupt(b),
        (false, b) => ReadError::Backend(b),
    }
}

fn commit_err(e: impl Into<redb::Error>) -> CommitError {
    match classify(e) {
        (true, b) => CommitError::Corrupt(b),
        (false, b) => CommitError::Backend(stopped(b)),
    }
}

/// redb's "previous I/O error" (it refuses every write after one failed,
/// until reopened) as [`ReopenRequired`]; any other error as it is.
fn stopped(b: strata_engine::BackendError) -> strata_engine::BackendError {
    let previous = b
        .downcast_ref::<redb::Error>()
        .is_some_and(|e| matches!(e, redb::Error::PreviousIo));
    if previous {
        Box::new(ReopenRequired::new("RedbEngine", b))
    } else {
        b
    }
}

fn engine_err(e: impl Into<redb::Error>) -> EngineError {
    match classify(e) {
        (true, b) => EngineError::Corrupt(b),
        (false, b) => EngineError::Backend(b),
    }
}

/// Runs a call into redb, which panics on some damaged files (an
/// `unreachable!`, a slice out of range) rather than returning an error:
/// a panic becomes [`BackendPanic`], reported as damaged data.
fn guarded<T, E>(
    operation: &'static str,
    corrupt: impl FnOnce(strata_engine::BackendError) -> E,
    f: impl FnOnce() -> Result<T, E>,
) -> Result<T, E> {
    BackendPanic::catch(operation, f).unwrap_or_else(|p| Err(corrupt(Box::new(p))))
}

fn def(name: &str) -> TableDefinition<'_, &'static [u8], &'static [u8]> {
    TableDefinition::new(name)
}

/// Bounds that select nothing (start above end, or equal with one side
/// excluded) are answered without asking redb.
fn is_empty(start: &Bound<Vec<u8>>, end: &Bound<Vec<u8>>) -> bool {
    match (start, end) {
        (Bound::Included(s), Bound::Included(e)) => s > e,
        (Bound::Included(s) | Bound::Excluded(s), Bound::Included(e) | Bound::Excluded(e)) => {
            s >= e
        }
        _ => false,
    }
}

fn as_slices(range: &RangeSpec) -> (Bound<&[u8]>, Bound<&[u8]>) {
    (
        range.start.as_ref().map(Vec::as_slice),
        range.end.as_ref().map(Vec::as_slice),
    )
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
    fn verified_at_open(self, options: RedbOptions) -> Result<Self, EngineError> {
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

    fn open_read_only_inner(
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

    fn stored_inner(path: &Path) -> Result<Vec<String>, EngineError> {
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
    /// [`Compact`] implementation). Returns whether it compacted anything.
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

    fn compact_inner(path: &Path) -> Result<bool, CapabilityError> {
        let err = |e: redb::Error| CapabilityError::Backend(backend(e));
        let mut db = Database::open(path).map_err(|e| err(e.into()))?;
        {
            let txn = db.begin_read().map_err(|e| err(e.into()))?;
            read_version(&txn).map_err(CapabilityError::Engine)?;
        }
        db.compact().map_err(|e| err(e.into()))
    }

    fn builder(options: RedbOptions) -> redb::Builder {
        let mut builder = Database::builder();
        builder.set_cache_size(options.cache_bytes);
        if !options.repair {
            builder.set_repair_callback(redb::RepairSession::abort);
        }
        builder
    }

    fn init(
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

    /// How many commit groups this engine wrote since it opened, and how
    /// many commits they held (see [`Engine::commit_group`]): with
    /// `Immediate` commits, `commits / groups` is the number of commits
    /// per durable write.
    pub fn group_stats(&self) -> GroupStats {
        self.group.stats()
    }

    fn table_name(&self, ks: Keyspace) -> Option<&str> {
        self.keyspaces.index_of(ks).map(|i| self.tables[i].as_str())
    }

    fn open_table<'t>(
        &self,
        txn: &'t redb::WriteTransaction,
        ks: Keyspace,
    ) -> Result<RedbTable<'t>, CommitError> {
        let name = self
            .table_name(ks)
            .ok_or(CommitError::UnknownKeyspace(ks))?;
        txn.open_table(def(name)).map_err(commit_err)
    }

    /// Applies resolved changes inside the write transaction. Each table is opened once per commit, when first
    /// touched: opening one looks it up in redb's table tree, and dropping
    /// it writes its root back, so a commit of many rows would otherwise pay
    /// that for each row.
    fn apply(&self, txn: &redb::WriteTransaction, ops: &[Op]) -> Result<(), CommitError> {
        let io = |e: redb::StorageError| commit_err(e);
        let mut open: Vec<Option<RedbTable<'_>>> = std::iter::repeat_with(|| None)
            .take(self.tables.len())
            .collect();
        for op in ops {
            match op {
                Op::Put(ks, key, value) => {
                    self.table_in(&mut open, txn, *ks)?
                        .insert(key.as_slice(), value.as_slice())
                        .map_err(io)?;
                }
                Op::Delete(ks, key) => {
                    self.table_in(&mut open, txn, *ks)?
                        .remove(key.as_slice())
                        .map_err(io)?;
                }
                Op::DeleteRange(ks, range) => {
                    let t = self.table_in(&mut open, txn, *ks)?;
                    if !is_empty(&range.start, &range.end) {
                        t.retain_in::<&[u8], _>(as_slices(range), |_, _| false)
                            .map_err(io)?;
                    }
                }
            }
        }
        Ok(())
    }

    /// Writes a group of commits in one write transaction: each commit's
    /// predicates read the transaction, so they see the group's earlier
    /// commits; a commit refused by a predicate or an invalid mutation
    /// writes nothing and fails alone; the version record is written once,
    /// for the last commit; the transaction is durable when an applied
    /// commit is `Immediate`. A failure while writing aborts the whole
    /// transaction, so every commit of the group fails (none applied).
    fn write_group(&self, commits: &[Commit]) -> GroupResults {
        let n = commits.len();
        let mut sequence = self.seq.begin();
        let txn = match self.db.begin_write() {
            Ok(txn) => txn,
            Err(e) => {
                // The first commit keeps the error itself (its chain says
                // whether the engine must be reopened); the others its text.
                let later: Vec<_> = (1..n).map(|_| Err(GroupFailed::not_applied(&e))).collect();
                let mut out = vec![Err(CommitError::Backend(e))];
                out.extend(later);
                return out;
            }
        };
        let mut outcomes: Vec<Result<u64, CommitError>> = Vec::with_capacity(n);
        let mut immediate = false;
        for (i, commit) in commits.iter().enumerate() {
            let version = sequence.version();
            let checked = {
                let mut reads = TxnReads {
                    engine: self,
                    txn: &txn,
                };
                implement::check_predicates(&commit.predicates, &mut reads)
                    .and_then(|()| implement::resolve(version, &commit.mutations, &mut reads))
            };
            let written = match checked {
                // A read failed: the transaction is suspect.
                Err(e @ CommitError::Backend(_)) => Err(e),
                // Refused; nothing of it was written.
                Err(e) => {
                    outcomes.push(Err(e));
                    continue;
                }
                Ok(ops) => self.apply(&txn, &ops),
            };
            if let Err(e) = written {
                // The transaction may hold part of this commit: abort it
                // (dropped unused) and fail the whole group.
                drop(txn);
                return abandon(outcomes, i, e, n);
            }
            immediate |= commit.durability == Durability::Immediate;
            outcomes.push(Ok(sequence.take()));
        }
        if sequence.taken() == 0 {
            // Every commit was refused: nothing to write.
            return infos(outcomes, false);
        }
        let finish = || -> Result<(), redb::Error> {
            let mut txn = txn;
            txn.set_durability(if immediate {
                redb::Durability::Immediate
            } else {
                redb::Durability::None
            })?;
            {
                let mut meta = txn.open_table(META)?;
                meta.insert(VERSION, sequence.version() - 1)?;
            }
            txn.commit()?;
            Ok(())
        };
        match finish() {
            Ok(()) => {
                sequence.publish(immediate);
                if immediate {
                    self.group.count_sync();
                }
                infos(outcomes, immediate)
            }
            // The commit of the transaction may or may not have reached
            // storage: every applied commit's outcome is unknown.
            Err(e) => outcomes
                .into_iter()
                .map(|r| r.and_then(|_| Err(GroupFailed::unknown(&e))))
                .collect(),
        }
    }

    /// [`RedbEngine::write_group`] with a panic inside redb reported as
    /// damaged data for every commit of the group (its transaction was
    /// dropped unfinished, so nothing of it was applied).
    fn write_group_guarded(&self, commits: &[Commit]) -> GroupResults {
        match BackendPanic::catch("a commit", || self.write_group(commits)) {
            Ok(results) => results,
            Err(p) => {
                let msg = p.to_string();
                let mut out = vec![Err(CommitError::Corrupt(Box::new(p)))];
                out.extend((1..commits.len()).map(|_| Err(GroupFailed::not_applied(&msg))));
                out
            }
        }
    }

    /// `ks`'s table among those `open` in this commit, opened now if it is
    /// not yet.
    fn table_in<'o, 't>(
        &self,
        open: &'o mut [Option<RedbTable<'t>>],
        txn: &'t redb::WriteTransaction,
        ks: Keyspace,
    ) -> Result<&'o mut RedbTable<'t>, CommitError> {
        let slot = self
            .keyspaces
            .index_of(ks)
            .and_then(|i| open.get_mut(i))
            .ok_or(CommitError::UnknownKeyspace(ks))?;
        if slot.is_none() {
            *slot = Some(self.open_table(txn, ks)?);
        }
        slot.as_mut().ok_or(CommitError::UnknownKeyspace(ks))
    }
}

/// The table of each declared keyspace, in order.
fn tables_of(keyspaces: &Keyspaces) -> Vec<String> {
    (0..keyspaces.len())
        .filter_map(|i| keyspaces.storage_name(i))
        .collect()
}

/// The version in the meta table of `txn`'s database; [`NotStrata`] when
/// there is no meta table.
fn read_version(txn: &redb::ReadTransaction) -> Result<u64, EngineError> {
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

/// The results of a written group.
fn infos(outcomes: Vec<Result<u64, CommitError>>, durable: bool) -> GroupResults {
    outcomes
        .into_iter()
        .map(|r| r.map(|version| CommitInfo { version, durable }))
        .collect()
}

/// The results of a group whose transaction was aborted when commit
/// `failed` met `error`: that commit carries the error; the ones before it
/// that were applied, and all after it, failed with the group (nothing of
/// them is stored); those refused before keep their own error.
fn abandon(
    outcomes: Vec<Result<u64, CommitError>>,
    failed: usize,
    error: CommitError,
    n: usize,
) -> GroupResults {
    let mut results: GroupResults = outcomes
        .into_iter()
        .map(|r| r.and_then(|_| Err(GroupFailed::not_applied(&error))))
        .collect();
    debug_assert_eq!(results.len(), failed);
    let later: Vec<_> = (failed + 1..n)
        .map(|_| Err(GroupFailed::not_applied(&error)))
        .collect();
    results.push(Err(error));
    results.extend(later);
    results
}

/// A keyspace's table, open in a write transaction.
type RedbTable<'t> = redb::Table<'t, &'static [u8], &'static [u8]>;

/// Reads of the latest state inside a write transaction.
struct TxnReads<'a> {
    engine: &'a RedbEngine,
    txn: &'a redb::WriteTransaction,
}

impl Reads for TxnReads<'_> {
    fn get(&mut self, ks: Keyspace, key: &[u8]) -> Result<Option<Vec<u8>>, CommitError> {
        let t = self.engine.open_table(self.txn, ks)?;
        let value = t.get(key).map_err(commit_err)?;
        Ok(value.map(|g| g.value().to_vec()))
    }

    fn any_in(&mut self, ks: Keyspace, range: &RangeSpec) -> Result<bool, CommitError> {
        if is_empty(&range.start, &range.end) {
            return Ok(false);
        }
        let t = self.engine.open_table(self.txn, ks)?;
        let mut rows = t.range::<&[u8]>(as_slices(range)).map_err(commit_err)?;
        Ok(rows.next().is_some())
    }
}

impl Engine for RedbEngine {
    type Snapshot<'e> = RedbSnapshot<'e>;

    fn keyspaces(&self) -> &Keyspaces {
        &self.keyspaces
    }

    fn snapshot(&self) -> Result<RedbSnapshot<'_>, ReadError> {
        let txn = guarded("a snapshot", ReadError::Corrupt, || {
            self.db.begin_read().map_err(read_err)
        })?;
        Ok(RedbSnapshot {
            engine: self,
            txn,
            version: std::sync::OnceLock::new(),
        })
    }

    fn commit(&self, commit: Commit) -> Result<CommitInfo, CommitError> {
        self.keyspaces.check_commit(&commit)?;
        // Groups are durable when written: nothing is left to sync.
        self.group.commit(
            commit,
            |g| self.write_group_guarded(&g),
            |_| Ok(self.seq.durable()),
        )
    }

    fn commit_group(&self, commits: Vec<Commit>) -> Vec<Result<CommitInfo, CommitError>> {
        self.group.commit_all(
            &self.keyspaces,
            commits,
            |g| self.write_group_guarded(&g),
            |_| Ok(self.seq.durable()),
        )
    }

    fn sync(&self) -> Result<u64, EngineError> {
        let err = |e: redb::Error| engine_err(e);
        guarded("a sync", EngineError::Corrupt, || {
            self.seq.sync(|| {
                let mut txn = self.db.begin_write().map_err(EngineError::Backend)?;
                txn.set_durability(redb::Durability::Immediate)
                    .map_err(|e| err(e.into()))?;
                txn.commit().map_err(|e| err(e.into()))
            })
        })
    }

    /// One durable write transaction that stores the raised version.
    fn raise_version(&self, at_least: u64) -> Result<u64, strata_engine::Error> {
        guarded(
            "raising the version",
            |b| CommitError::Corrupt(b).into(),
            || self.raise_inner(at_least),
        )
    }

    fn durable_version(&self) -> u64 {
        self.seq.durable()
    }

    fn last_version(&self) -> u64 {
        self.seq.last()
    }
}

impl RedbEngine {
    fn raise_inner(&self, at_least: u64) -> Result<u64, strata_engine::Error> {
        let err = |e: redb::Error| commit_err(e);
        let mut sequence = self.seq.begin();
        let to = sequence.raise_to(at_least);
        if to == self.seq.last() {
            drop(sequence);
            return Ok(to);
        }
        let mut txn = self.db.begin_write().map_err(CommitError::Backend)?;
        txn.set_durability(redb::Durability::Immediate)
            .map_err(|e| err(e.into()))?;
        {
            let mut meta = txn.open_table(META).map_err(|e| err(e.into()))?;
            meta.insert(VERSION, to).map_err(|e| err(e.into()))?;
        }
        txn.commit()
            .map_err(|e| CommitError::OutcomeUnknown(backend(redb::Error::from(e))))?;
        Ok(sequence.publish(true))
    }
}

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
    fn stats_inner(&self) -> Result<Vec<KeyspaceStats>, CapabilityError> {
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
    fn backup_inner(&self, path: &Path) -> Result<BackupInfo, CapabilityError> {
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

/// Why redb's integrity check failed, in words.
#[derive(Debug)]
pub struct IntegrityFailed(String);

impl std::fmt::Display for IntegrityFailed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "redb's integrity check failed: {}", self.0)
    }
}

impl std::error::Error for IntegrityFailed {}

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

/// A consistent view: one redb read transaction.
pub struct RedbSnapshot<'e> {
    engine: &'e RedbEngine,
    txn: redb::ReadTransaction,
    /// Read from the meta table on first use: most reads never ask.
    version: std::sync::OnceLock<u64>,
}

impl RedbSnapshot<'_> {
    fn table(
        &self,
        ks: Keyspace,
    ) -> Result<redb::ReadOnlyTable<&'static [u8], &'static [u8]>, ReadError> {
        let name = self
            .engine
            .table_name(ks)
            .ok_or(ReadError::UnknownKeyspace(ks))?;
        self.txn.open_table(def(name)).map_err(read_err)
    }
}

impl Snapshot for RedbSnapshot<'_> {
    type Range<'s>
        = RedbRange
    where
        Self: 's;

    fn version(&self) -> Result<u64, ReadError> {
        if let Some(v) = self.version.get() {
            return Ok(*v);
        }
        guarded("a read", ReadError::Corrupt, || self.version_inner())
    }

    fn get(&self, ks: Keyspace, key: &[u8]) -> Result<Option<Vec<u8>>, ReadError> {
        guarded("a read", ReadError::Corrupt, || self.get_inner(ks, key))
    }

    fn range(&self, ks: Keyspace, range: RangeSpec) -> Result<RedbRange, ReadError> {
        guarded("a range", ReadError::Corrupt, || {
            self.range_inner(ks, &range)
        })
    }
}

impl RedbSnapshot<'_> {
    fn version_inner(&self) -> Result<u64, ReadError> {
        let io = |e: redb::Error| read_err(e);
        let meta = self.txn.open_table(META).map_err(|e| io(e.into()))?;
        let v = meta
            .get(VERSION)
            .map_err(|e| io(e.into()))?
            .map_or(0, |g| g.value());
        Ok(*self.version.get_or_init(|| v))
    }

    fn get_inner(&self, ks: Keyspace, key: &[u8]) -> Result<Option<Vec<u8>>, ReadError> {
        let table = self.table(ks)?;
        let value = table.get(key).map_err(read_err)?;
        Ok(value.map(|g| g.value().to_vec()))
    }

    fn range_inner(&self, ks: Keyspace, range: &RangeSpec) -> Result<RedbRange, ReadError> {
        let table = self.table(ks)?;
        range.validate()?;
        let inner = if is_empty(&range.start, &range.end) {
            None
        } else {
            Some(table.range::<&[u8]>(as_slices(range)).map_err(read_err)?)
        };
        Ok(RedbRange {
            inner,
            reverse: range.reverse,
            remaining: range.limit.unwrap_or(usize::MAX),
        })
    }
}

/// A streaming range: redb's own range iterator, forward or backward.
pub struct RedbRange {
    inner: Option<redb::Range<'static, &'static [u8], &'static [u8]>>,
    reverse: bool,
    remaining: usize,
}

impl Iterator for RedbRange {
    type Item = Result<(Vec<u8>, Vec<u8>), ReadError>;

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        if self.remaining == 0 {
            return None;
        }
        let inner = self.inner.as_mut()?;
        let reverse = self.reverse;
        let row = match BackendPanic::catch("a range", || {
            let row = if reverse {
                inner.next_back()
            } else {
                inner.next()
            }?;
            Some(
                row.map(|(k, v)| (k.value().to_vec(), v.value().to_vec()))
                    .map_err(read_err),
            )
        }) {
            Ok(row) => row?,
            Err(p) => {
                // The iterator's state is not trusted after a panic: end it.
                self.inner = None;
                Err(ReadError::Corrupt(Box::new(p)))
            }
        };
        self.remaining -= 1;
        Some(row)
    }
}

/// This crate's README example, compiled and run as a doctest.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
