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
//!
//! # Map
//!
//! This file holds [`RocksEngine`], [`RocksOptions`] and the `Engine`
//! impl; one concept per file beside it: `open.rs` (column families per
//! keyspace, opening read-only, stored keyspaces), `mark.rs` (the durable
//! mark, [`RolledBack`], [`MarkDamaged`]), `write.rs` (commit groups in
//! one write batch), `read.rs` ([`RocksSnapshot`], [`RocksRange`]),
//! `capability.rs` (statistics, tickers, backup, integrity, compaction),
//! `error.rs` (RocksDB's errors mapped to the contract's).
#![cfg_attr(docsrs, feature(doc_cfg))]

use rocksdb::{ColumnFamily, DB, Options, ReadOptions, WriteBatch, WriteOptions};
use strata_engine::implement::{GroupCommitter, Sequencer};
use strata_engine::{
    Commit, CommitError, CommitInfo, Engine, EngineError, Keyspace, Keyspaces, ReadError,
};

mod capability;
mod error;
mod mark;
mod open;
mod read;
mod write;

pub(crate) use self::error::{
    backend, commit_err, engine_err, is_corruption, missing, read_err, write_failure,
};
pub use self::mark::{MarkDamaged, RolledBack};
pub(crate) use self::mark::{read_mark, write_mark};
pub use self::read::{RocksRange, RocksSnapshot};
pub(crate) use self::read::{read_options, rocks_bounds};
pub(crate) use self::write::{MAX_GROUP, wal_sync};

const META: &str = "strata.meta";
const VERSION: &[u8] = b"version";

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
    /// The write options of every commit's batch (the WAL written, not
    /// synced: the group committer syncs), made once.
    write_options: WriteOptions,
    /// The read options of a read of the latest state (a commit's
    /// predicates, [`Engine::get_latest`]), made once: made for each read,
    /// they cost about a twentieth of the read. Boxed: they are 104 bytes,
    /// and an engine is often a variant of an enum beside another.
    read_options: Box<ReadOptions>,
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

    /// A read of the latest state, with no RocksDB snapshot taken and
    /// released around it (each takes the database's mutex). A commit is
    /// one write batch, applied whole, so the row is as some commit left
    /// it, as a snapshot's read is.
    fn get_latest(&self, ks: Keyspace, key: &[u8]) -> Result<Option<Vec<u8>>, ReadError> {
        let Some(cf) = self.family(ks) else {
            return Err(ReadError::UnknownKeyspace(ks));
        };
        self.db
            .get_cf_opt(cf, key, &self.read_options)
            .map_err(read_err)
    }

    fn commit(&self, commit: Commit) -> Result<CommitInfo, CommitError> {
        self.keyspaces.check_commit(&commit)?;
        self.group.commit(
            commit,
            |mut g| self.write_group(&mut g),
            |v| self.sync_wal_through(v),
        )
    }

    fn commit_group(&self, commits: Vec<Commit>) -> Vec<Result<CommitInfo, CommitError>> {
        self.group.commit_all(
            &self.keyspaces,
            commits,
            |mut g| self.write_group(&mut g),
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

/// This crate's README example, compiled and run as a doctest.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

impl RocksEngine {
    fn family(&self, ks: Keyspace) -> Option<&ColumnFamily> {
        self.keyspaces
            .index_of(ks)
            .and_then(|i| self.db.cf_handle(&self.families[i]))
    }

    /// The column family of `ks`, for a commit. (The error is made only
    /// when the family is missing: made eagerly by `ok_or` and dropped,
    /// it cost each row of a commit.)
    fn commit_family(&self, ks: Keyspace) -> Result<&ColumnFamily, CommitError> {
        match self.family(ks) {
            Some(cf) => Ok(cf),
            None => Err(CommitError::UnknownKeyspace(ks)),
        }
    }

    fn meta(&self) -> Result<&ColumnFamily, strata_engine::BackendError> {
        self.db.cf_handle(META).ok_or_else(|| missing(META))
    }
}
