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
//! holds the contract, the [`Clock`] and [`Rng`] injection used by every
//! crate above it, the in-memory reference engine [`MemEngine`], and, behind
//! the `conformance` feature, the conformance suite that every engine runs.
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

pub mod contract;
pub mod error;
pub mod inject;
pub mod mem;
pub mod model;
pub mod resolve;

#[cfg(feature = "conformance")]
pub mod conformance;

pub use contract::{
    Commit, CommitInfo, Durability, Engine, Keyspace, KeyspaceSpec, KeyspaceStats, Mutation,
    Predicate, Profile, RangeSpec, Snapshot, StampAt, strinc,
};
pub use error::{BackendError, CommitError, EngineError, MutationError, ReadError};
pub use inject::{Clock, ManualClock, Rng, SeededRng, SystemClock, SystemRng};
#[cfg(feature = "planted-bugs")]
pub use mem::PlantedBug;
pub use mem::{MemEngine, MemImage, MemSnapshot};
pub use model::{Model, ModelError};

/// This crate's README example, compiled and run as a doctest.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
