//! code-sous: a function platform's records (`code-sous-kvrocks-storage.md`)
//! on any engine.
//!
//! Keys are the document's `cs:` text keys ([`keys`]), values its JSON
//! records ([`records`]), bundles real tar archives ([`Bundle`]). Each
//! operation is one serializable transaction of the store, where the
//! document used a Lua script: publish takes the next version from the
//! counter and writes the version's metadata and bundle (and moves an
//! alias) in one commit; an alias only ever points at an existing version;
//! an activation reaches exactly one terminal status (a second terminal
//! update is refused with [`CodeSousError::AlreadyTerminal`]); a schedule or
//! worker and its index set change together. Drafts expire after 24 hours
//! and activations after 7 days (configurable), judged by the store's
//! clock the same way on every engine and removed by the store's sweeper
//! ([`CodeSous::sweep_expired`]); an expired record is never returned.
//!
//! ```
//! use strata_engine::MemEngine;
//! use strata_code_sous::{Bundle, CodeSous, CodeSousConfig, FunctionId, NewFunction};
//! use strata_store::Store;
//!
//! let options = CodeSous::<MemEngine>::store_options();
//! let store = Store::open(MemEngine::open(options.keyspace_specs())?, options)?;
//! let cs = CodeSous::new(store, CodeSousConfig::default(), Box::new(strata_engine::SeededRng::new(7)));
//! let f = FunctionId::new("t_abc123", "payments", "reconcile");
//! cs.create_function(&f, &NewFunction::js())?;
//! let bundle = Bundle::new("export default () => 1;", r#"{"name":"reconcile"}"#);
//! let v1 = cs.publish(&f, &bundle, &serde_json::json!({}), Some("prod"))?;
//! assert_eq!(v1.version, 1);
//! assert_eq!(cs.alias(&f, "prod")?.map(|a| a.version), Some(1));
//! assert_eq!(cs.bundle(&f, 1)?, Some(bundle));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![cfg_attr(docsrs, feature(doc_cfg))]

pub mod bundle;
pub mod keys;
pub mod records;

use std::collections::BTreeMap;
use std::sync::Mutex;

use base64::Engine as _;
use strata_codec::Limits;
use strata_engine::{Engine, Rng};
use strata_keys::UlidGenerator;
use strata_store::{RetryPolicy, Store, StoreError, StoreOptions, SweepReport};

pub use bundle::{Bundle, REQUIRED_FILES, sha256_hex};
use keys::{
    ActivationKey, AliasKey, BundleKey, DraftKey, FunctionKey, LogChunkKey, LogIndexKey,
    ScheduleIndexKey, ScheduleKey, VersionKey, VersionSeqKey, WorkerIndexKey, WorkerKey,
};

mod activations;
mod functions;
mod index_sets;

pub use records::{
    ActivationRecord, ActivationStatus, AliasRecord, BadChunkRuns, ChunkSet, DraftRecord,
    FunctionMeta, FunctionRef, NameSet, ScheduleRecord, VersionMeta, VersionRef, WorkerRecord,
};

/// Milliseconds in a day.
const DAY_MS: u64 = 24 * 60 * 60 * 1000;

/// Why an operation failed. Nothing of a failed operation is written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CodeSousError {
    /// The store failed (a key with a `:` in a name field is a
    /// [`StoreError::Key`]).
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The function already exists.
    #[error("function {0} already exists")]
    FunctionExists(FunctionId),
    /// No such function (or it was deleted).
    #[error("no function {0}")]
    NoSuchFunction(FunctionId),
    /// The function has no such version.
    #[error("function {function} has no version {version}")]
    NoSuchVersion {
        /// Which function (tenant/namespace/name).
        function: String,
        /// The version asked for.
        version: u64,
    },
    /// No such draft, or it expired.
    #[error("no draft {draft_id}")]
    NoSuchDraft {
        /// The draft asked for.
        draft_id: String,
    },
    /// A schedule or worker of that name exists.
    #[error("{kind} {name} already exists")]
    Exists {
        /// `schedule` or `worker`.
        kind: &'static str,
        /// The name taken.
        name: String,
    },
    /// No such activation, or it expired.
    #[error("no activation {id}")]
    NoSuchActivation {
        /// The activation asked for.
        id: String,
    },
    /// An activation of that id exists.
    #[error("activation {id} already exists")]
    ActivationExists {
        /// The activation.
        id: String,
    },
    /// A start whose record is past its retention
    /// ([`CodeSousConfig::activation_ttl_ms`] from its `start_ms`): it may
    /// be a replay of an activation that ran and expired, so it is refused,
    /// never started again.
    #[error(
        "activation {id} started at {start_ms} is past its retention (it expired by {expired_at}): \
         not started again"
    )]
    ActivationExpired {
        /// The activation.
        id: String,
        /// Its start time, as the record gives it.
        start_ms: u64,
        /// When a record started then has expired.
        expired_at: u64,
    },
    /// The activation already reached a terminal status.
    #[error("activation {id} already ended as {status:?}")]
    AlreadyTerminal {
        /// The activation.
        id: String,
        /// Its terminal status.
        status: ActivationStatus,
    },
    /// A status that is not allowed here (a terminal one to start, a
    /// non-terminal one to finish).
    #[error("status {0:?} is not allowed here")]
    WrongStatus(ActivationStatus),
    /// No draft id could be made at this clock reading.
    #[error("no draft id could be made at this clock reading")]
    DraftId(#[source] strata_keys::UlidError),
    /// A bundle or draft whose files are not exactly `function.js` and
    /// `manifest.json`, or a malformed tar archive or base64 file.
    #[error(transparent)]
    BadBundle(#[from] BundleError),
}

/// What is wrong with a bundle or a draft ([`CodeSousError::BadBundle`]).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BundleError {
    /// A required file is missing.
    #[error("the bundle has no {file}")]
    Missing {
        /// The file's name.
        file: &'static str,
    },
    /// A file other than the required ones.
    #[error("the bundle holds the unexpected file {file:?}")]
    Unexpected {
        /// The file's name.
        file: String,
    },
    /// A file twice in one archive.
    #[error("the bundle's archive holds {file:?} twice")]
    Twice {
        /// The file's name.
        file: String,
    },
    /// An archive entry that is not a regular file.
    #[error("the bundle's archive holds an entry that is not a regular file")]
    NotAFile,
    /// An archive entry whose name is not UTF-8.
    #[error("the bundle's archive holds a file name that is not UTF-8")]
    NameNotUtf8,
    /// The tar archive does not read (or could not be written).
    #[error("the bundle's tar archive does not read")]
    Tar(#[source] std::io::Error),
    /// A draft's file is not valid base64.
    #[error("the draft's file {file:?} is not valid base64")]
    Base64 {
        /// The file's name.
        file: String,
        /// What the decoder said.
        #[source]
        source: base64::DecodeError,
    },
    /// A draft's files do not hash to the SHA-256 it was created with.
    #[error("draft {draft_id} does not match its sha256")]
    Sha256Mismatch {
        /// The draft.
        draft_id: String,
    },
}

/// Names a function: tenant, namespace, function name.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FunctionId {
    /// Tenant id.
    pub tenant: String,
    /// Namespace within the tenant.
    pub namespace: String,
    /// Function name.
    pub name: String,
}

impl FunctionId {
    /// The function `name` in `namespace` of `tenant`.
    pub fn new(tenant: &str, namespace: &str, name: &str) -> Self {
        Self {
            tenant: tenant.to_owned(),
            namespace: namespace.to_owned(),
            name: name.to_owned(),
        }
    }

    fn key(&self) -> FunctionKey {
        FunctionKey {
            tenant: self.tenant.clone(),
            namespace: self.namespace.clone(),
            function: self.name.clone(),
        }
    }

    fn seq(&self) -> VersionSeqKey {
        VersionSeqKey {
            tenant: self.tenant.clone(),
            namespace: self.namespace.clone(),
            function: self.name.clone(),
        }
    }

    fn version(&self, version: u64) -> VersionKey {
        VersionKey {
            tenant: self.tenant.clone(),
            namespace: self.namespace.clone(),
            function: self.name.clone(),
            version,
        }
    }

    fn bundle(&self, version: u64) -> BundleKey {
        BundleKey {
            tenant: self.tenant.clone(),
            namespace: self.namespace.clone(),
            function: self.name.clone(),
            version,
        }
    }

    fn alias(&self, alias: &str) -> AliasKey {
        AliasKey {
            tenant: self.tenant.clone(),
            namespace: self.namespace.clone(),
            function: self.name.clone(),
            alias: alias.to_owned(),
        }
    }

    fn draft(&self, draft_id: &str) -> DraftKey {
        DraftKey {
            tenant: self.tenant.clone(),
            namespace: self.namespace.clone(),
            function: self.name.clone(),
            draft_id: draft_id.to_owned(),
        }
    }
}

impl std::fmt::Display for FunctionId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}/{}", self.tenant, self.namespace, self.name)
    }
}

/// How a new function runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewFunction {
    /// Runtime (`cs-js`).
    pub runtime: String,
    /// Entry file (`function.js`).
    pub entry: String,
    /// Exported handler (`default`).
    pub handler: String,
}

impl NewFunction {
    /// The document's example: `cs-js`, `function.js`, `default`.
    pub fn js() -> Self {
        Self {
            runtime: "cs-js".into(),
            entry: "function.js".into(),
            handler: "default".into(),
        }
    }
}

/// Times to live, and the size of log chunks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CodeSousConfig {
    /// A draft's time to live (the document: 24 hours).
    pub draft_ttl_ms: u64,
    /// An activation's time to live, and its log's (the document: 7 days
    /// by default).
    pub activation_ttl_ms: u64,
    /// Most bytes of one log chunk row (default 64 KiB); an append longer
    /// than this writes several chunks, split on character boundaries.
    pub log_chunk_bytes: usize,
}

impl Default for CodeSousConfig {
    fn default() -> Self {
        Self {
            draft_ttl_ms: DAY_MS,
            activation_ttl_ms: 7 * DAY_MS,
            log_chunk_bytes: 64 << 10,
        }
    }
}

/// A published version.
#[derive(Debug, Clone, PartialEq)]
pub struct Published {
    /// Its number.
    pub version: u64,
    /// Its metadata as written.
    pub meta: VersionMeta,
}

/// The code-sous records on a store. See the [module docs](self).
pub struct CodeSous<E: Engine> {
    store: Store<E>,
    config: CodeSousConfig,
    ids: Mutex<(UlidGenerator, Box<dyn Rng>)>,
}

impl<E: Engine> std::fmt::Debug for CodeSous<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CodeSous")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl<E: Engine> CodeSous<E> {
    /// The store options the records need: FoundationDB's limits (bundles
    /// larger than the value limit are chunked by the store), and up to 32
    /// attempts of a conflicting transaction, since publishes to one
    /// function all increment its `version_seq`.
    pub fn store_options() -> StoreOptions {
        StoreOptions::new(Limits::FOUNDATIONDB).retry(RetryPolicy {
            max_attempts: 32,
            ..RetryPolicy::default()
        })
    }

    /// The records on `store` as [`CodeSous::new`] makes them, with the
    /// store described in its catalog for tools (`strata info`, `verify`;
    /// a commit the first time only).
    ///
    /// # Errors
    /// A store failure writing the catalog.
    pub fn open(
        store: Store<E>,
        config: CodeSousConfig,
        rng: Box<dyn Rng>,
    ) -> Result<Self, CodeSousError> {
        store.publish_catalog()?;
        Ok(Self::new(store, config, rng))
    }

    /// The records on `store` (opened with [`CodeSous::store_options`] or
    /// options like them), with `config`; `rng` makes draft ids. Writes
    /// nothing: [`CodeSous::open`] also describes the store in its catalog.
    pub fn new(store: Store<E>, config: CodeSousConfig, rng: Box<dyn Rng>) -> Self {
        Self {
            store,
            config,
            ids: Mutex::new((UlidGenerator::new(), rng)),
        }
    }

    /// The store underneath.
    pub fn store(&self) -> &Store<E> {
        &self.store
    }

    /// The store, given back (to restart its engine, say).
    pub fn into_store(self) -> Store<E> {
        self.store
    }

    /// The configuration.
    pub fn config(&self) -> CodeSousConfig {
        self.config
    }
}

#[cfg(test)]
mod tests {
    use super::activations::split_utf8;

    #[test]
    fn text_splits_on_character_boundaries() {
        assert!(split_utf8("", 4).is_empty());
        assert_eq!(split_utf8("abcdefghij", 4), ["abcd", "efgh", "ij"]);
        // "é" is two bytes: a cut never falls inside it.
        assert_eq!(split_utf8("aéé", 4), ["aé", "é"]);
        assert_eq!(split_utf8("€€", 4), ["€", "€"]);
    }
}

/// This crate's README example, compiled and run as a doctest.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
