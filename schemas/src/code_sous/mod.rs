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
//! use strata_schemas::code_sous::{Bundle, CodeSous, CodeSousConfig, FunctionId, NewFunction};
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

pub mod bundle;
pub mod keys;
mod planted;
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
#[cfg(feature = "planted-bugs")]
pub use planted::PlantedBug;
pub use records::{
    ActivationRecord, ActivationStatus, AliasRecord, ChunkSet, DraftRecord, FunctionMeta,
    FunctionRef, NameSet, ScheduleRecord, VersionMeta, VersionRef, WorkerRecord,
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
    #[cfg(feature = "planted-bugs")]
    planted: Option<PlantedBug>,
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
            #[cfg(feature = "planted-bugs")]
            planted: None,
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

    // ---- functions ----

    /// Creates the function record.
    ///
    /// # Errors
    /// [`CodeSousError::FunctionExists`] (a deleted function's record
    /// stays, so its name is taken).
    pub fn create_function(
        &self,
        f: &FunctionId,
        how: &NewFunction,
    ) -> Result<FunctionMeta, CodeSousError> {
        self.store.transact(|tx| {
            let meta = FunctionMeta {
                tenant: f.tenant.clone(),
                namespace: f.namespace.clone(),
                name: f.name.clone(),
                runtime: how.runtime.clone(),
                entry: how.entry.clone(),
                handler: how.handler.clone(),
                created_at_ms: tx.now_ms(),
                deleted_at_ms: None,
            };
            if !tx.put_if_absent(&f.key(), &meta)? {
                return Err(CodeSousError::FunctionExists(f.clone()));
            }
            Ok(meta)
        })
    }

    /// The function record, deleted or not.
    ///
    /// # Errors
    /// A store failure.
    pub fn function(&self, f: &FunctionId) -> Result<Option<FunctionMeta>, CodeSousError> {
        Ok(self.store.get(&f.key())?)
    }

    /// Marks the function deleted (`deleted_at_ms`); its versions stay.
    /// Publishing to it is then refused.
    ///
    /// # Errors
    /// [`CodeSousError::NoSuchFunction`], also when already deleted.
    pub fn delete_function(&self, f: &FunctionId) -> Result<FunctionMeta, CodeSousError> {
        self.store.transact(|tx| {
            let mut meta = live_function(tx.get(&f.key())?, f)?;
            meta.deleted_at_ms = Some(tx.now_ms());
            tx.put(&f.key(), &meta)?;
            Ok(meta)
        })
    }

    // ---- drafts ----

    /// Stores `bundle` as a draft of `f`, expiring after the draft time to
    /// live; returns it with its new id (`drf_` and a ULID).
    ///
    /// # Errors
    /// [`CodeSousError::NoSuchFunction`].
    pub fn create_draft(
        &self,
        f: &FunctionId,
        bundle: &Bundle,
    ) -> Result<DraftRecord, CodeSousError> {
        let sha256 = bundle.sha256()?;
        let files: BTreeMap<String, String> = bundle
            .files()
            .iter()
            .map(|(name, bytes)| {
                (
                    name.clone(),
                    base64::engine::general_purpose::STANDARD.encode(bytes),
                )
            })
            .collect();
        self.store.transact(|tx| {
            live_function(tx.get(&f.key())?, f)?;
            let now = tx.now_ms();
            let draft_id = self.draft_id(now)?;
            let draft = DraftRecord {
                draft_id: draft_id.clone(),
                sha256: sha256.clone(),
                files: files.clone(),
                created_at_ms: now,
                expires_at_ms: now.saturating_add(self.config.draft_ttl_ms),
            };
            if self.planted("draft-never-expires") {
                tx.put(&f.draft(&draft_id), &draft)?;
            } else {
                tx.put_expiring_at(&f.draft(&draft_id), &draft, draft.expires_at_ms)?;
            }
            Ok(draft)
        })
    }

    /// A draft that has not expired.
    ///
    /// # Errors
    /// A store failure.
    pub fn draft(
        &self,
        f: &FunctionId,
        draft_id: &str,
    ) -> Result<Option<DraftRecord>, CodeSousError> {
        Ok(self.store.get(&f.draft(draft_id))?)
    }

    /// The bundle of a draft.
    ///
    /// # Errors
    /// [`CodeSousError::NoSuchDraft`]; [`CodeSousError::BadBundle`] when
    /// its files do not decode or do not match its SHA-256.
    pub fn draft_bundle(&self, f: &FunctionId, draft_id: &str) -> Result<Bundle, CodeSousError> {
        let draft = self
            .draft(f, draft_id)?
            .ok_or_else(|| CodeSousError::NoSuchDraft {
                draft_id: draft_id.to_owned(),
            })?;
        draft_to_bundle(&draft)
    }

    fn draft_id(&self, now: u64) -> Result<String, CodeSousError> {
        let mut ids = self
            .ids
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let (generator, rng) = &mut *ids;
        let ulid = generator
            .generate(now, || {
                (u128::from(rng.next_u64()) << 64) | u128::from(rng.next_u64())
            })
            .map_err(CodeSousError::DraftId)?;
        let text = ulid.to_text();
        Ok(format!("drf_{}", String::from_utf8_lossy(&text)))
    }

    // ---- versions ----

    /// Publishes `bundle` as the function's next version, in one commit:
    /// increments `version_seq`, writes the version's metadata and bundle,
    /// and moves `alias` to it when given.
    ///
    /// # Errors
    /// [`CodeSousError::NoSuchFunction`] (also for a deleted function).
    pub fn publish(
        &self,
        f: &FunctionId,
        bundle: &Bundle,
        config: &serde_json::Value,
        alias: Option<&str>,
    ) -> Result<Published, CodeSousError> {
        let tar = bundle.to_tar()?;
        let sha256 = sha256_hex(&tar);
        self.store.transact(|tx| {
            live_function(tx.get(&f.key())?, f)?;
            let next = tx.increment(&f.seq(), 1)?;
            let version = u64::try_from(next).unwrap_or(0);
            let now = tx.now_ms();
            let meta = VersionMeta {
                version,
                sha256: sha256.clone(),
                config: config.clone(),
                published_at_ms: now,
            };
            tx.put(&f.version(version), &meta)?;
            tx.put(&f.bundle(version), &tar)?;
            if let Some(alias) = alias {
                tx.put(
                    &f.alias(alias),
                    &AliasRecord {
                        alias: alias.to_owned(),
                        version,
                        updated_at_ms: now,
                    },
                )?;
            }
            Ok(Published { version, meta })
        })
    }

    /// Publishes a draft's bundle (see [`CodeSous::publish`]); the draft
    /// stays until it expires.
    ///
    /// # Errors
    /// As [`CodeSous::publish`] and [`CodeSous::draft_bundle`].
    pub fn publish_draft(
        &self,
        f: &FunctionId,
        draft_id: &str,
        config: &serde_json::Value,
        alias: Option<&str>,
    ) -> Result<Published, CodeSousError> {
        let bundle = self.draft_bundle(f, draft_id)?;
        self.publish(f, &bundle, config, alias)
    }

    /// A version's metadata.
    ///
    /// # Errors
    /// A store failure.
    pub fn version(
        &self,
        f: &FunctionId,
        version: u64,
    ) -> Result<Option<VersionMeta>, CodeSousError> {
        Ok(self.store.get(&f.version(version))?)
    }

    /// A version's bundle, read from its tar archive.
    ///
    /// # Errors
    /// [`CodeSousError::BadBundle`] if the stored archive does not read.
    pub fn bundle(&self, f: &FunctionId, version: u64) -> Result<Option<Bundle>, CodeSousError> {
        self.store
            .get(&f.bundle(version))?
            .map(|tar| Bundle::from_tar(&tar))
            .transpose()
    }

    /// The last version published (0 before the first).
    ///
    /// # Errors
    /// A store failure.
    pub fn last_version(&self, f: &FunctionId) -> Result<u64, CodeSousError> {
        Ok(u64::try_from(self.store.counter(&f.seq())?).unwrap_or(0))
    }

    // ---- aliases ----

    /// Points `alias` at `version`, which must exist: one commit.
    ///
    /// # Errors
    /// [`CodeSousError::NoSuchVersion`].
    pub fn set_alias(
        &self,
        f: &FunctionId,
        alias: &str,
        version: u64,
    ) -> Result<AliasRecord, CodeSousError> {
        let unchecked = self.planted("alias-unchecked");
        self.store.transact(|tx| {
            if !unchecked && tx.get(&f.version(version))?.is_none() {
                return Err(CodeSousError::NoSuchVersion {
                    function: f.to_string(),
                    version,
                });
            }
            let record = AliasRecord {
                alias: alias.to_owned(),
                version,
                updated_at_ms: tx.now_ms(),
            };
            tx.put(&f.alias(alias), &record)?;
            Ok(record)
        })
    }

    /// An alias.
    ///
    /// # Errors
    /// A store failure.
    pub fn alias(&self, f: &FunctionId, alias: &str) -> Result<Option<AliasRecord>, CodeSousError> {
        Ok(self.store.get(&f.alias(alias))?)
    }

    // ---- schedules and workers ----

    /// Creates a schedule and adds its name to the namespace's index set,
    /// in one commit.
    ///
    /// # Errors
    /// [`CodeSousError::Exists`].
    pub fn create_schedule(
        &self,
        tenant: &str,
        namespace: &str,
        schedule: &ScheduleRecord,
    ) -> Result<(), CodeSousError> {
        let (key, index) = schedule_keys(tenant, namespace, &schedule.name);
        self.create_indexed("schedule", &key, &index, schedule, &schedule.name)
    }

    /// Deletes a schedule and removes it from the index set, in one
    /// commit. Returns whether it existed.
    ///
    /// # Errors
    /// A store failure.
    pub fn delete_schedule(
        &self,
        tenant: &str,
        namespace: &str,
        name: &str,
    ) -> Result<bool, CodeSousError> {
        let (key, index) = schedule_keys(tenant, namespace, name);
        self.delete_indexed(&key, &index, name)
    }

    /// A schedule.
    ///
    /// # Errors
    /// A store failure.
    pub fn schedule(
        &self,
        tenant: &str,
        namespace: &str,
        name: &str,
    ) -> Result<Option<ScheduleRecord>, CodeSousError> {
        Ok(self.store.get(&schedule_keys(tenant, namespace, name).0)?)
    }

    /// The names in the namespace's schedule index, sorted.
    ///
    /// # Errors
    /// A store failure.
    pub fn schedules(&self, tenant: &str, namespace: &str) -> Result<Vec<String>, CodeSousError> {
        self.names(&schedule_keys(tenant, namespace, "").1)
    }

    /// Creates a worker binding and adds it to the namespace's index set,
    /// in one commit.
    ///
    /// # Errors
    /// [`CodeSousError::Exists`].
    pub fn create_worker(
        &self,
        tenant: &str,
        namespace: &str,
        worker: &WorkerRecord,
    ) -> Result<(), CodeSousError> {
        let (key, index) = worker_keys(tenant, namespace, &worker.name);
        self.create_indexed("worker", &key, &index, worker, &worker.name)
    }

    /// Deletes a worker binding and removes it from the index set, in one
    /// commit. Returns whether it existed.
    ///
    /// # Errors
    /// A store failure.
    pub fn delete_worker(
        &self,
        tenant: &str,
        namespace: &str,
        name: &str,
    ) -> Result<bool, CodeSousError> {
        let (key, index) = worker_keys(tenant, namespace, name);
        self.delete_indexed(&key, &index, name)
    }

    /// A worker binding.
    ///
    /// # Errors
    /// A store failure.
    pub fn worker(
        &self,
        tenant: &str,
        namespace: &str,
        name: &str,
    ) -> Result<Option<WorkerRecord>, CodeSousError> {
        Ok(self.store.get(&worker_keys(tenant, namespace, name).0)?)
    }

    /// The names in the namespace's worker index, sorted.
    ///
    /// # Errors
    /// A store failure.
    pub fn workers(&self, tenant: &str, namespace: &str) -> Result<Vec<String>, CodeSousError> {
        self.names(&worker_keys(tenant, namespace, "").1)
    }

    /// Writes `record` at `key` unless it exists, and adds `name` to the
    /// set at `index`, in one commit.
    fn create_indexed<K, I>(
        &self,
        kind: &'static str,
        key: &K,
        index: &I,
        record: &K::Value,
        name: &str,
    ) -> Result<(), CodeSousError>
    where
        K: strata_keys::Key + 'static,
        K::Value: strata_codec::Value,
        I: strata_keys::Key<Value = NameSet> + 'static,
    {
        self.store.transact(|tx| {
            if !tx.put_if_absent(key, record)? {
                return Err(CodeSousError::Exists {
                    kind,
                    name: name.to_owned(),
                });
            }
            let mut names = tx.get(index)?.unwrap_or_default();
            names.0.insert(name.to_owned());
            tx.put(index, &names)?;
            Ok(())
        })
    }

    /// Deletes `key` and removes `name` from the set at `index`, in one
    /// commit; whether `key` existed.
    fn delete_indexed<K, I>(&self, key: &K, index: &I, name: &str) -> Result<bool, CodeSousError>
    where
        K: strata_keys::Key + 'static,
        K::Value: strata_codec::Value,
        I: strata_keys::Key<Value = NameSet> + 'static,
    {
        self.store.transact(|tx| {
            let existed = tx.get(key)?.is_some();
            tx.delete(key)?;
            remove_name(tx, index, name)?;
            Ok(existed)
        })
    }

    /// The names of the set at `index`, sorted.
    fn names<I>(&self, index: &I) -> Result<Vec<String>, CodeSousError>
    where
        I: strata_keys::Key<Value = NameSet> + 'static,
    {
        Ok(self
            .store
            .get(index)?
            .map(|s| s.0.into_iter().collect())
            .unwrap_or_default())
    }

    // ---- activations and logs ----

    /// Records a new activation (status `queued` or `running`), expiring
    /// after the activation time to live. A record whose `start_ms` is a
    /// whole time to live ago or more is refused: it may be a replay of an
    /// activation that ran, ended and expired, which must not start again.
    ///
    /// # Errors
    /// [`CodeSousError::WrongStatus`] for a terminal status,
    /// [`CodeSousError::ActivationExists`],
    /// [`CodeSousError::ActivationExpired`].
    pub fn start_activation(&self, activation: &ActivationRecord) -> Result<(), CodeSousError> {
        if activation.status.is_terminal() {
            return Err(CodeSousError::WrongStatus(activation.status));
        }
        let key = activation_key(&activation.tenant, &activation.activation_id);
        let expired_at = activation
            .start_ms
            .saturating_add(self.config.activation_ttl_ms);
        self.store.transact(|tx| {
            if tx.get(&key)?.is_some() {
                return Err(CodeSousError::ActivationExists {
                    id: activation.activation_id.clone(),
                });
            }
            if expired_at <= tx.now_ms() && !self.planted("start-after-retention") {
                return Err(CodeSousError::ActivationExpired {
                    id: activation.activation_id.clone(),
                    start_ms: activation.start_ms,
                    expired_at,
                });
            }
            tx.put_with_ttl(&key, activation, self.config.activation_ttl_ms)?;
            Ok(())
        })
    }

    /// Ends an activation with the terminal `status` at `end_ms`, by
    /// compare-and-set on the record it read: exactly one terminal update
    /// wins; the record keeps its expiry.
    ///
    /// # Errors
    /// [`CodeSousError::WrongStatus`] for a non-terminal status,
    /// [`CodeSousError::NoSuchActivation`],
    /// [`CodeSousError::AlreadyTerminal`].
    pub fn finish_activation(
        &self,
        tenant: &str,
        activation_id: &str,
        status: ActivationStatus,
        end_ms: u64,
        error: Option<&str>,
        result_truncated: bool,
    ) -> Result<ActivationRecord, CodeSousError> {
        if !status.is_terminal() {
            return Err(CodeSousError::WrongStatus(status));
        }
        let key = activation_key(tenant, activation_id);
        self.store.transact(|tx| {
            let current = tx
                .get(&key)?
                .ok_or_else(|| CodeSousError::NoSuchActivation {
                    id: activation_id.to_owned(),
                })?;
            if current.status.is_terminal() && !self.planted("second-ending-accepted") {
                return Err(CodeSousError::AlreadyTerminal {
                    id: activation_id.to_owned(),
                    status: current.status,
                });
            }
            let mut done = current.clone();
            done.status = status;
            done.end_ms = Some(end_ms);
            done.duration_ms = Some(end_ms.saturating_sub(current.start_ms));
            done.error = error.map(str::to_owned);
            done.result_truncated = result_truncated;
            if !tx.compare_and_set(&key, Some(&current), Some(&done))? {
                // The transaction read `current`; a change since is a
                // conflict the store retries, so this does not happen.
                return Err(CodeSousError::NoSuchActivation {
                    id: activation_id.to_owned(),
                });
            }
            Ok(done)
        })
    }

    /// An activation that has not expired.
    ///
    /// # Errors
    /// A store failure.
    pub fn activation(
        &self,
        tenant: &str,
        activation_id: &str,
    ) -> Result<Option<ActivationRecord>, CodeSousError> {
        Ok(self.store.get(&activation_key(tenant, activation_id))?)
    }

    /// Appends `text` to an activation's log: chunks of at most
    /// [`CodeSousConfig::log_chunk_bytes`] (split on character
    /// boundaries) after the last one, and their numbers in the log's
    /// index, in one commit; chunks and index expire with the activation.
    /// Returns the numbers written.
    ///
    /// # Errors
    /// [`CodeSousError::NoSuchActivation`].
    pub fn append_log(
        &self,
        tenant: &str,
        activation_id: &str,
        text: &str,
    ) -> Result<Vec<u64>, CodeSousError> {
        let index = LogIndexKey {
            tenant: tenant.to_owned(),
            activation_id: activation_id.to_owned(),
        };
        let pieces = split_utf8(text, self.config.log_chunk_bytes.max(4));
        self.store.transact(|tx| {
            let activation = tx
                .get_with_expiry(&activation_key(tenant, activation_id))?
                .ok_or_else(|| CodeSousError::NoSuchActivation {
                    id: activation_id.to_owned(),
                })?;
            let expires = activation.expires_at;
            let mut chunks = tx.get(&index)?.unwrap_or_default();
            let first = chunks.0.last().map_or(0, |last| last + 1);
            let mut written = Vec::new();
            for (piece, chunk) in pieces.iter().zip(first..) {
                let key = LogChunkKey {
                    tenant: tenant.to_owned(),
                    activation_id: activation_id.to_owned(),
                    chunk,
                };
                put_expiring(tx, &key, &(*piece).to_owned(), expires)?;
                chunks.0.insert(chunk);
                written.push(chunk);
            }
            put_expiring(tx, &index, &chunks, expires)?;
            Ok(written)
        })
    }

    /// An activation's whole log, its chunks in order.
    ///
    /// # Errors
    /// A store failure.
    pub fn read_log(&self, tenant: &str, activation_id: &str) -> Result<String, CodeSousError> {
        let view = self.store.read()?;
        let index = LogIndexKey {
            tenant: tenant.to_owned(),
            activation_id: activation_id.to_owned(),
        };
        let mut log = String::new();
        for chunk in view.get(&index)?.unwrap_or_default().0 {
            if let Some(text) = view.get(&LogChunkKey {
                tenant: tenant.to_owned(),
                activation_id: activation_id.to_owned(),
                chunk,
            })? {
                log.push_str(&text);
            }
        }
        Ok(log)
    }

    /// Removes expired drafts, activations and logs (the store's sweeper):
    /// deterministic for a state and a clock reading. Reads never return
    /// an expired record, swept or not.
    ///
    /// # Errors
    /// A store failure.
    pub fn sweep_expired(&self) -> Result<SweepReport, CodeSousError> {
        Ok(self.store.sweep_expired(None)?)
    }
}

fn schedule_keys(tenant: &str, namespace: &str, name: &str) -> (ScheduleKey, ScheduleIndexKey) {
    (
        ScheduleKey {
            tenant: tenant.to_owned(),
            namespace: namespace.to_owned(),
            schedule: name.to_owned(),
        },
        ScheduleIndexKey {
            tenant: tenant.to_owned(),
            namespace: namespace.to_owned(),
        },
    )
}

fn worker_keys(tenant: &str, namespace: &str, name: &str) -> (WorkerKey, WorkerIndexKey) {
    (
        WorkerKey {
            tenant: tenant.to_owned(),
            namespace: namespace.to_owned(),
            name: name.to_owned(),
        },
        WorkerIndexKey {
            tenant: tenant.to_owned(),
            namespace: namespace.to_owned(),
        },
    )
}

fn activation_key(tenant: &str, activation_id: &str) -> ActivationKey {
    ActivationKey {
        tenant: tenant.to_owned(),
        activation_id: activation_id.to_owned(),
    }
}

/// The record of a function that exists and is not deleted.
fn live_function(
    meta: Option<FunctionMeta>,
    f: &FunctionId,
) -> Result<FunctionMeta, CodeSousError> {
    match meta {
        Some(meta) if meta.deleted_at_ms.is_none() => Ok(meta),
        _ => Err(CodeSousError::NoSuchFunction(f.clone())),
    }
}

/// Removes `name` from the set at `index` (deleting the row when empty).
fn remove_name<E, K>(
    tx: &mut strata_store::Tx<'_, E>,
    index: &K,
    name: &str,
) -> Result<(), StoreError>
where
    E: Engine,
    K: strata_keys::Key<Value = NameSet> + 'static,
{
    let Some(mut names) = tx.get(index)? else {
        return Ok(());
    };
    if names.0.remove(name) {
        if names.0.is_empty() {
            tx.delete(index)?;
        } else {
            tx.put(index, &names)?;
        }
    }
    Ok(())
}

/// Writes `value` expiring at `at` (never, for `None`).
fn put_expiring<E, K>(
    tx: &mut strata_store::Tx<'_, E>,
    key: &K,
    value: &K::Value,
    at: Option<u64>,
) -> Result<(), StoreError>
where
    E: Engine,
    K: strata_keys::Key + 'static,
    K::Value: strata_codec::Value,
{
    match at {
        Some(at) => tx.put_expiring_at(key, value, at),
        None => tx.put(key, value),
    }
}

/// `text` in pieces of at most `max` bytes, cut on character boundaries
/// (none for empty text).
fn split_utf8(text: &str, max: usize) -> Vec<&str> {
    let mut pieces = Vec::new();
    let mut rest = text;
    while !rest.is_empty() {
        let mut cut = rest.len().min(max);
        while !rest.is_char_boundary(cut) {
            cut -= 1;
        }
        let (piece, tail) = rest.split_at(cut);
        pieces.push(piece);
        rest = tail;
    }
    pieces
}

/// The bundle of a draft's base64 files, checked against its SHA-256.
fn draft_to_bundle(draft: &DraftRecord) -> Result<Bundle, CodeSousError> {
    let files = draft
        .files
        .iter()
        .map(|(name, b64)| {
            base64::engine::general_purpose::STANDARD
                .decode(b64)
                .map(|bytes| (name.clone(), bytes))
                .map_err(|source| BundleError::Base64 {
                    file: name.clone(),
                    source,
                })
        })
        .collect::<Result<BTreeMap<_, _>, _>>()?;
    let bundle = Bundle::from_files(files)?;
    if bundle.sha256()? != draft.sha256 {
        return Err(BundleError::Sha256Mismatch {
            draft_id: draft.draft_id.clone(),
        }
        .into());
    }
    Ok(bundle)
}

#[cfg(test)]
mod tests {
    use super::split_utf8;

    #[test]
    fn text_splits_on_character_boundaries() {
        assert!(split_utf8("", 4).is_empty());
        assert_eq!(split_utf8("abcdefghij", 4), ["abcd", "efgh", "ij"]);
        // "é" is two bytes: a cut never falls inside it.
        assert_eq!(split_utf8("aéé", 4), ["aé", "é"]);
        assert_eq!(split_utf8("€€", 4), ["€", "€"]);
    }
}
