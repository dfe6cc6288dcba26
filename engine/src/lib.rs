//! The engine contract of Strata: bytes in, bytes out.
//!
//! An [`Engine`] is opened with a fixed set of named keyspaces, each with a
//! [`Profile`] hint. Reads go through a [`Snapshot`], a consistent view at
//! one commit version with point reads and streaming range iteration. Writes
//! go through one atomic [`Commit`] of [`Predicate`]s and [`Mutation`]s with
//! a [`Durability`] level. The [`Engine`] docs state the whole contract,
//! including the crash contract every engine must meet.
//!
//! This crate knows nothing of RocksDB, redb, key layouts or codecs. It
//! holds the contract, its errors, the capability traits ([`Statistics`],
//! [`Backup`], [`Compact`]), the [`Clock`] and [`Rng`] injection used by
//! every crate above it, the in-memory reference engine [`MemEngine`], and
//! in [`implement`] what engine implementations share. The conformance
//! suite every engine runs is in `strata-engine-testkit`.
//!
//! ```
//! use strata_engine::{Commit, Durability, Engine, KeyspaceSpec, MemEngine, Predicate, Profile, RangeSpec, Snapshot};
//!
//! let engine = MemEngine::open(vec![KeyspaceSpec::new("events", Profile::AppendOnly)])?;
//! let events = engine.keyspace("events")?;
//!
//! let info = engine.commit(
//!     Commit::new()
//!         .require(Predicate::Absent { ks: events, key: b"e1".to_vec() })
//!         .put(events, b"e1".to_vec(), b"hello".to_vec())
//!         .durability(Durability::Buffered),
//! )?;
//! assert!(!info.durable);
//! assert_eq!(engine.sync()?, info.version);
//!
//! let view = engine.snapshot()?;
//! assert_eq!(view.get(events, b"e1")?.as_deref(), Some(&b"hello"[..]));
//! let keys: Vec<Vec<u8>> = view.range(events, RangeSpec::all())?.map(|r| r.map(|(k, _)| k)).collect::<Result<_, _>>()?;
//! assert_eq!(keys, [b"e1".to_vec()]);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![cfg_attr(docsrs, feature(doc_cfg))]

mod capability;
mod contract;
mod error;
pub mod faults;
mod group;
mod inject;
mod keyspace;
mod mem;
mod resolve;
mod sequence;

pub use crate::capability::{
    Backup, BackupInfo, CapabilityError, Compact, Integrity, IntegrityReport, KeyspaceStats,
    Statistics,
};
pub use crate::contract::{
    Commit, CommitInfo, Durability, Engine, Lent, LentRow, Mutation, Predicate, RangeSpec,
    RowCursor, Snapshot, StampAt, strinc,
};
pub use crate::error::{
    BackendError, BackendPanic, CallerCode, CommitError, EngineError, Error, ErrorChain,
    MutationError, PredicateError, ReadError, ReopenRequired, Result,
};
pub use crate::group::GroupStats;
pub use crate::inject::{Clock, ManualClock, Rng, SeededRng, SystemClock, SystemRng};
pub use crate::keyspace::{Keyspace, KeyspaceSpec, Keyspaces, Profile};
pub use crate::mem::{MemEngine, MemImage, MemRange, MemSnapshot};

/// For engine implementers: the commit logic every engine shares, so
/// predicates, counters and versionstamps give the same results everywhere,
/// and the version bookkeeping of engines that number their own commits.
/// An application never needs these.
pub mod implement {
    pub use crate::group::{GroupCommitter, GroupFailed, GroupResults};
    pub use crate::resolve::{Op, Reads, check_predicates, read_through, resolve, stamp_into};
    pub use crate::sequence::{Sequence, Sequencer};
}

/// This crate's README example, compiled and run as a doctest.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
