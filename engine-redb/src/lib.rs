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
//!
//! # Map
//!
//! This file holds [`RedbEngine`], [`RedbOptions`] and the `Engine` impl;
//! one concept per file beside it: `open.rs` (opening and checking a
//! file), `write.rs` (commit groups), `read.rs` ([`RedbSnapshot`],
//! [`RedbRange`]), `capability.rs` (statistics, backup, integrity,
//! compaction), `error.rs` ([`OpenedReadOnly`], [`NotStrata`],
//! [`IntegrityFailed`], and redb's errors mapped to the contract's),
//! `powerloss.rs` ([`PowerLossBackend`]).
#![cfg_attr(docsrs, feature(doc_cfg))]

pub mod powerloss;

use redb::{Database, ReadOnlyDatabase, ReadableDatabase, TableDefinition};
use strata_engine::implement::{GroupCommitter, Sequencer};
use strata_engine::{Commit, CommitError, CommitInfo, Engine, EngineError, Keyspaces, ReadError};

mod capability;
mod error;
mod open;
mod read;
mod write;

pub use self::error::{IntegrityFailed, NotStrata, OpenedReadOnly};
pub(crate) use self::error::{backend, commit_err, engine_err, guarded, read_err, stopped};
pub(crate) use self::open::read_version;
pub use self::read::{RedbRange, RedbSnapshot};
pub(crate) use self::read::{as_slices, is_empty};
pub(crate) use self::write::MAX_GROUP;

pub use powerloss::PowerLossBackend;

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
    /// [`Integrity::check_integrity`](strata_engine::Integrity::check_integrity) does, on a copy of the file beside
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

fn def(name: &str) -> TableDefinition<'_, &'static [u8], &'static [u8]> {
    TableDefinition::new(name)
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

/// This crate's README example, compiled and run as a doctest.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
