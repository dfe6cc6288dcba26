//! The reference storage designs (five seed documents kept beside this
//! repository), built on the
//! Strata toolkit's public API (keys, codec, store, engines), one cargo
//! feature each, so a user picks the system they need:
//!
//! | feature | module | system |
//! |---|---|---|
//! | `code-sous` | [`code_sous`] | a function platform's records on a Redis-protocol store (`code-sous-kvrocks-storage.md`) |
//! | `universaldb` | [`universaldb`] | typed tuple keys and transactions of a database layer over FoundationDB (`universaldb-keys.md`) |
//! | `actor-kv` | [`actor_kv`] | an actor runtime's per-actor keyspaces (`actor-kv-structure.md`) |
//! | `nokv` | [`nokv`] | a file system's metadata service (`nokv-metadata-schema.md`) |
//! | `agent-memory` | [`agent_memory`] | conversation memory for agents with an outbox-fed search index (`agent-memory-storage-architecture.md`) | The crate README says what each module adds to its document.
#![cfg_attr(docsrs, feature(doc_cfg))]

#[cfg(feature = "actor-kv")]
pub mod actor_kv;
#[cfg(feature = "agent-memory")]
pub mod agent_memory;
#[cfg(feature = "code-sous")]
pub mod code_sous;
#[cfg(feature = "nokv")]
pub mod nokv;
#[cfg(any(feature = "actor-kv", feature = "universaldb"))]
pub mod rivet_id;
#[cfg(feature = "universaldb")]
pub mod universaldb;

/// This crate's README example, compiled and run as a doctest.
#[cfg(all(
    doctest,
    feature = "actor-kv",
    feature = "agent-memory",
    feature = "code-sous",
    feature = "nokv",
    feature = "universaldb"
))]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
