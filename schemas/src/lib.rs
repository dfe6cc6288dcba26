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
#[doc(inline)]
pub use strata_actor_kv as actor_kv;
#[cfg(feature = "agent-memory")]
#[doc(inline)]
pub use strata_agent_memory as agent_memory;
#[cfg(feature = "code-sous")]
#[doc(inline)]
pub use strata_code_sous as code_sous;
#[cfg(feature = "nokv")]
#[doc(inline)]
pub use strata_nokv as nokv;
#[cfg(feature = "universaldb")]
#[doc(inline)]
pub use strata_universaldb as universaldb;
#[cfg(feature = "universaldb")]
pub use strata_universaldb::formal_key;
#[cfg(any(feature = "actor-kv", feature = "universaldb"))]
#[doc(inline)]
pub use strata_universaldb::rivet_id;

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
