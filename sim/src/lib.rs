//! Deterministic simulation of Strata.
//!
//! One `u64` seed decides everything in a run: the workload of several
//! simulated clients (interleaved step by step on one thread), the faults
//! and their probabilities, and the simulated clock. Nothing reads wall
//! time, thread-local randomness or hash-map order, so a seed replays the
//! same trace, which [`run::SeedReport::trace_hash`] lets anyone check.
//!
//! - [`faults`]: the fault model and [`faults::FaultyEngine`], a wrapper
//!   around any engine of the contract; crashes go through
//!   [`faults::Restart`].
//! - [`run`]: the engine workload and its oracle, which compares every
//!   result with [`strata_engine_testkit::Model`] and checks the crash contract
//!   after every crash.
//! - [`store`]: the store workload (transactions, limits, quota, TTL,
//!   chunks) and its oracles.
//! - [`outbox`]: the outbox workload (producers, consumers with failing
//!   handlers, take-overs, trimming) and its ledger.
//! - [`interleave`]: concurrent transactions of the store, the outbox and
//!   NoKV interleaved step by step, checked for serializability.
//! - [`search`]: the search workload (notes and their index changes, an
//!   indexer that crashes) and its projection oracles.
//!
//! The command is `cargo xtask sim`; see the crate README.

pub mod actor_kv;
pub mod agent_memory;
pub mod code_sous;
mod engine_oracle;
mod engine_workload;
pub mod faults;
pub mod interleave;
pub mod nokv;
pub mod outbox;
#[cfg(feature = "planted-bugs")]
pub mod planted;
pub mod run;
pub mod search;
pub mod store;
pub mod targets;
pub mod universaldb;
pub mod worker;

pub use engine_workload::run_seed_on;
pub use faults::{FaultClass, FaultConfig, FaultCounters, FaultyEngine, Restart};
pub use run::{EngineKind, RunOptions, SeedReport, Violation, Workload, run_seed, run_workloads};
pub use targets::{Harnessed, PowerLossHarness, RedbTarget, Target};
#[cfg(feature = "rocks")]
pub use targets::{RocksHarness, RocksTarget};
