//! NoKV file-system metadata (`nokv-metadata-schema.md`): inode and dentry
//! records as the namespace's truth, every change a [`MetadataCommand`]
//! executed as one commit whose predicates are its atomicity fence.
//!
//! **Built:** every family of the document ([`keys`]), the command
//! boundary with request-id dedupe in the same commit, watch events
//! written in the same commit with the commit's versionstamp, history rows
//! keyed by inverted commit version (the engine's
//! [`StampAt::KeyInverted`](strata_engine::StampAt::KeyInverted)) written
//! only while a snapshot pin is live, pins with leases and reads at the
//! pinned version, mkdir, create, lookup, getattr, readdirplus, setattr,
//! link, unlink, rename (over an existing target, across directories,
//! refusing to move a directory under itself), file bodies as chunk
//! manifests over a [`BlobStore`], the path index verified component by
//! component against the dentry generations (a stale hit falls back to
//! the walk and is repaired), the GC queue and its drain, and retention of
//! dedupe rows, watch events, expired pins and history below the oldest
//! pin.
//!
//! The example (`examples/examples/nokv.rs`, crate `strata-examples`) walks through them on redb; the
//! simulation's NoKV workload checks the namespace's invariants under
//! faults (`sim/src/nokv.rs`).
//!
//! # How a change runs
//!
//! An operation reads what it needs at one snapshot (the command's
//! `read_version`) and plans a command: its mutations, and predicates on
//! everything the plan depended on (the parent directories' generations,
//! the dentries it read, the mount's allocation counters, the ancestor
//! chain a rename checked for cycles). [`Nokv::execute`] then runs the
//! command in one serializable transaction: a replayed request id returns
//! the first outcome and applies nothing; a command planned below the
//! mount's dedupe floor (raised as dedupe rows are pruned) is refused with
//! [`NokvError::PlanExpired`], so a resent command never runs twice, even
//! past the dedupe retention; a failed predicate applies
//! nothing ([`NokvError::PredicateFailed`]; the operations re-plan a few
//! times before giving up); otherwise the mutations, the history rows, the
//! watch events and the dedupe row commit together.
#![cfg_attr(docsrs, feature(doc_cfg))]

//!
//! # Map
//!
//! This file holds the module's types and [`Nokv`]'s opening and mounts;
//! `namespace.rs` the operations on names and attributes (each planned as
//! a command), `commands.rs` running a [`MetadataCommand`], `body.rs` file
//! bodies, `paths.rs` the path index, `pins.rs` pins, history reads, the
//! GC queue and retention, `watch.rs` watch logs, `check.rs` the whole
//! namespace checked ([`Nokv::check`]), `keys.rs` the record families.
pub mod keys;
mod planted;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

use serde::{Deserialize, Serialize};
use strata_engine::{Engine, Profile};
use strata_keys::KeyRange;
use strata_keys::tuple;
use strata_keys::tuple::Versionstamp;
use strata_store::{Scan, Space, Store, StoreError, StoreOptions, Tx};

pub use check::{BodyCheck, NamespaceCheck, NamespaceProblem, check_namespace, mounts};
pub use keys::{
    BODY_SUMMARY, Block, BodySummary, Dentry, FileType, GcEntry, InodeAttr, InodeId, ManifestRow,
    Mount, MountId, ParentLink, PathEntry, Projection, ROOT, SnapshotPin, Upload, WatchEvent,
    WatchRecord,
};
use keys::{DentryKey, InodeKey, MountKey, ParentKey};

mod body;
mod check;
mod commands;
mod namespace;
mod paths;
mod pins;
mod watch;

pub(crate) use self::watch::{history_prefix, stamp_version};

/// The raw space of history rows.
pub const HISTORY_SPACE: &str = "nokv_hist";

/// Why a NoKV operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum NokvError {
    /// No such mount.
    #[error("no mount {0}")]
    NoMount(MountId),
    /// A name, path or inode that does not exist.
    #[error("not found: {0}")]
    NotFound(Missing),
    /// The name is taken.
    #[error("{name:?} exists in directory {parent}")]
    Exists {
        /// The directory.
        parent: InodeId,
        /// The name that is taken.
        name: String,
    },
    /// A directory was needed.
    #[error("inode {0} is not a directory")]
    NotADirectory(InodeId),
    /// A file was needed.
    #[error("inode {0} is a directory")]
    IsADirectory(InodeId),
    /// A directory to remove or replace has entries.
    #[error("directory {0} is not empty")]
    NotEmpty(InodeId),
    /// A rename would move a directory under itself.
    #[error("moving directory {0} there would put it under itself")]
    WouldCreateCycle(InodeId),
    /// A name that is empty, `.`, `..` or holds `/` or NUL.
    #[error("invalid name {name:?}")]
    InvalidName {
        /// The name given.
        name: String,
    },
    /// The command's plan was read at a version below the mount's dedupe
    /// floor: a command that old may be a replay whose dedupe row was
    /// pruned ([`NokvConfig::dedupe_retention_ms`]), so it is refused,
    /// never applied again. Nothing was applied; plan it again.
    #[error(
        "request {request_id}: its plan was read at version {read_version}, below the mount's \
         dedupe floor {floor} (it may have run already and its dedupe row been pruned): plan it again"
    )]
    PlanExpired {
        /// The command's request id.
        request_id: String,
        /// The version its plan was read at.
        read_version: u64,
        /// The mount's floor.
        floor: u64,
    },
    /// A `write` came after its upload was given up (it took longer than
    /// [`NokvConfig::upload_grace_ms`] from upload to command, and
    /// [`Nokv::collect_uploads`] deleted its objects): nothing was
    /// applied; write again.
    #[error("request {request_id}: its upload was collected before its command; nothing applied")]
    UploadAbandoned {
        /// The write's request id.
        request_id: String,
    },
    /// A predicate of the command did not hold: nothing was applied.
    #[error("predicate {index} did not hold: {predicate:?}")]
    PredicateFailed {
        /// Which predicate.
        index: usize,
        /// The predicate, as the command gave it.
        predicate: MetaPredicate,
    },
    /// The snapshot pin is unknown, expired or not ready.
    #[error("snapshot {snapshot:?} is not usable: {problem}")]
    Pin {
        /// The pin's name.
        snapshot: String,
        /// Why not.
        problem: PinProblem,
    },
    /// A body's chunk does not match its manifest.
    #[error("body of inode {inode}: {problem}")]
    Body {
        /// The file.
        inode: InodeId,
        /// What is wrong.
        problem: BodyProblem,
    },
    /// A row of a pinned snapshot's history does not decode.
    #[error("a history row of the snapshot does not decode")]
    History(#[source] strata_codec::DecodeError),
    /// The object store failed.
    #[error("the object store failed")]
    Blob(#[source] BlobError),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// What was not found ([`NokvError::NotFound`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Missing {
    /// No such inode.
    Inode(InodeId),
    /// No entry of this name in the directory.
    Entry {
        /// The directory.
        parent: InodeId,
        /// The name looked up in it.
        name: String,
    },
    /// A path that does not resolve.
    Path(String),
}

impl std::fmt::Display for Missing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Inode(i) => write!(f, "inode {i}"),
            Self::Entry { parent, name } => write!(f, "{name:?} in {parent}"),
            Self::Path(p) => write!(f, "path {p:?}"),
        }
    }
}

/// Why a snapshot pin is not usable ([`NokvError::Pin`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum PinProblem {
    /// No pin of that name.
    Unknown,
    /// Its lease has ended.
    Ended,
    /// It has no read version yet.
    NotReady,
}

impl std::fmt::Display for PinProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Unknown => "no such pin",
            Self::Ended => "its lease has ended",
            Self::NotReady => "not ready",
        })
    }
}

/// What is wrong with a file's body ([`NokvError::Body`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum BodyProblem {
    /// An object the manifest names is not in the object store.
    MissingObject(String),
    /// An object's size or CRC-32 differs from the manifest's.
    ObjectMismatch(String),
    /// A manifest row where its chunk number does not belong.
    OutOfPlace(u64),
    /// The chunks read do not add up to the body's summary.
    Size {
        /// Chunks read.
        chunks: u64,
        /// Bytes read.
        bytes: u64,
        /// Chunks the summary gives.
        want_chunks: u64,
        /// Bytes the summary gives.
        want_bytes: u64,
    },
}

impl std::fmt::Display for BodyProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::MissingObject(o) => write!(f, "object {o} is missing"),
            Self::ObjectMismatch(o) => write!(f, "object {o} does not match"),
            Self::OutOfPlace(c) => write!(f, "manifest row {c} out of place"),
            Self::Size {
                chunks,
                bytes,
                want_chunks,
                want_bytes,
            } => write!(
                f,
                "{chunks} chunks and {bytes} bytes where the summary says {want_chunks} and {want_bytes}"
            ),
        }
    }
}

/// An object store's failure ([`BlobStore`]).
pub type BlobError = Box<dyn std::error::Error + Send + Sync>;

/// What a command returned, recorded for replays.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Outcome {
    /// The inode the command created or acted on.
    pub inode: Option<InodeId>,
    /// An inode a rename replaced or an unlink released (link count 0).
    pub released: Option<InodeId>,
}

/// What a command may require.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MetaPredicate {
    /// The inode's generation is this, or it is absent (`None`).
    InodeGeneration(InodeId, Option<u64>),
    /// The dentry names this inode with this generation, or is absent.
    Dentry(InodeId, String, Option<(InodeId, u64)>),
    /// The mount's counters are these (`next_inode`, `generation` of the
    /// mount record as read).
    MountCounter(InodeId),
    /// The upload recorded at this stamp is there and not given up (a
    /// `write`'s objects; refused as [`NokvError::UploadAbandoned`]).
    UploadPending(Versionstamp),
}

/// One change of a command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MetaMutation {
    /// Write the mount record.
    PutMount(Mount),
    /// Write an inode.
    PutInode(InodeId, InodeAttr),
    /// Remove an inode's record.
    DeleteInode(InodeId),
    /// Write a dentry.
    PutDentry(InodeId, String, Dentry),
    /// Remove a name from a directory.
    DeleteDentry(InodeId, String),
    /// Write a parent-index row (child, parent, name).
    PutParent(InodeId, InodeId, String, ParentLink),
    /// Delete a parent-index row.
    DeleteParent(InodeId, InodeId, String),
    /// Write a manifest row (inode, generation, chunk).
    PutManifest(InodeId, u64, u64, ManifestRow),
    /// Delete a manifest row.
    DeleteManifest(InodeId, u64, u64),
    /// Write a path-index row (workspace, path).
    PutPath(String, String, PathEntry),
    /// Queue a block for deletion (inode, generation, chunk, block).
    EnqueueGc(InodeId, u64, u64, u64, GcEntry),
    /// Delete the upload record at this stamp: its objects are named now.
    ClearUpload(Versionstamp),
}

/// What a command is, for traces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommandKind {
    /// A new directory.
    Mkdir,
    /// A new file.
    Create,
    /// Changed attributes.
    SetAttr,
    /// A new name for a file.
    Link,
    /// A name removed.
    Unlink,
    /// A name moved.
    Rename,
    /// A file body replaced.
    Write,
    /// A path indexed.
    IndexPath,
}

/// A metadata change as one unit: the document's command boundary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetadataCommand {
    /// The mount it changes.
    pub mount: MountId,
    /// The caller's id for it: a replay returns the first outcome.
    pub request_id: String,
    /// What it is.
    pub kind: CommandKind,
    /// The version its plan was read at.
    pub read_version: u64,
    /// What must hold at commit, or nothing applies.
    pub predicates: Vec<MetaPredicate>,
    /// The changes, applied in order.
    pub mutations: Vec<MetaMutation>,
    /// The watch projection: (scope, event) pairs written with the commit.
    pub watch: Vec<(InodeId, WatchEvent)>,
    /// What it returns.
    pub outcome: Outcome,
}

/// How a command ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Executed {
    /// Applied now, at this commit version (`None` when it wrote nothing).
    Applied(Outcome, Option<u64>),
    /// A replay: the first execution's outcome; nothing applied.
    Replayed(Outcome),
}

impl Executed {
    /// The outcome either way.
    pub fn outcome(&self) -> &Outcome {
        match self {
            Self::Applied(o, _) | Self::Replayed(o) => o,
        }
    }
}

/// Where file bodies live: an object store this module does not
/// implement. Objects are written before the command that references
/// them commits, and deleted only by [`Nokv::drain_gc`].
pub trait BlobStore: Send + Sync {
    /// Stores `bytes` under `key`.
    ///
    /// # Errors
    /// The store's failure.
    fn put(&self, key: &str, bytes: &[u8]) -> Result<(), BlobError>;
    /// The bytes under `key`.
    ///
    /// # Errors
    /// The store's failure.
    fn get(&self, key: &str) -> Result<Option<Vec<u8>>, BlobError>;
    /// Deletes `key` (absent is fine).
    ///
    /// # Errors
    /// The store's failure.
    fn delete(&self, key: &str) -> Result<(), BlobError>;
}

/// An in-memory [`BlobStore`] for tests and examples.
#[derive(Debug, Default)]
pub struct MemBlobs {
    objects: Mutex<BTreeMap<String, Vec<u8>>>,
}

impl MemBlobs {
    /// The keys stored.
    pub fn keys(&self) -> Vec<String> {
        self.lock().keys().cloned().collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Vec<u8>>> {
        self.objects.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl BlobStore for MemBlobs {
    fn put(&self, key: &str, bytes: &[u8]) -> Result<(), BlobError> {
        self.lock().insert(key.to_owned(), bytes.to_vec());
        Ok(())
    }

    fn get(&self, key: &str) -> Result<Option<Vec<u8>>, BlobError> {
        Ok(self.lock().get(key).cloned())
    }

    fn delete(&self, key: &str) -> Result<(), BlobError> {
        self.lock().remove(key);
        Ok(())
    }
}

/// Retention and lease settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NokvConfig {
    /// Dedupe rows older than this are pruned. A replay after it is
    /// refused with [`NokvError::PlanExpired`], never applied again: the
    /// prune raises the mount's floor past the pruned commands' plan
    /// versions in the commit that deletes their rows.
    pub dedupe_retention_ms: u64,
    /// Watch events older than this are pruned.
    pub watch_retention_ms: u64,
    /// At most this many watch events are kept per scope.
    pub watch_keep_per_scope: usize,
    /// Bytes of body per chunk.
    pub chunk_bytes: usize,
    /// An upload older than this whose `write` command has not applied
    /// is collected by [`Nokv::collect_uploads`] (its objects deleted, the
    /// command refused if it comes): longer than any write takes from its
    /// first object to its command.
    pub upload_grace_ms: u64,
}

impl Default for NokvConfig {
    fn default() -> Self {
        Self {
            dedupe_retention_ms: 24 * 60 * 60 * 1000,
            watch_retention_ms: 60 * 60 * 1000,
            watch_keep_per_scope: 10_000,
            chunk_bytes: 64 * 1024,
            upload_grace_ms: 60 * 60 * 1000,
        }
    }
}

/// An entry of a directory listing: name, dentry (with the inode
/// projection).
pub type DirEntry = (String, Dentry);

/// How a path was resolved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathHit {
    /// The index's entry, verified against every component's dentry.
    Index(InodeId),
    /// Walked from the root (the index had nothing, or a stale entry,
    /// which was repaired when `repaired`).
    Walk(InodeId, bool),
}

/// What [`Nokv::prune`] removed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Pruned {
    /// Dedupe rows.
    pub dedupe: usize,
    /// Watch events.
    pub watch: usize,
    /// Expired pins.
    pub pins: usize,
    /// History rows.
    pub history: usize,
}

/// One part of a verified path-index entry: the parent, the name and the
/// dentry generation.
type Component = (InodeId, String, u64);

/// The NoKV metadata service on a store.
pub struct Nokv<E: Engine> {
    store: Store<E>,
    hist: Space,
    blobs: Arc<dyn BlobStore>,
    config: NokvConfig,
}

fn name_ok(name: &str) -> Result<(), NokvError> {
    if name.is_empty() || name == "." || name == ".." || name.contains(['/', '\0']) {
        return Err(NokvError::InvalidName {
            name: name.to_owned(),
        });
    }
    Ok(())
}

fn inode_key(mount: MountId, inode: InodeId) -> InodeKey {
    InodeKey { mount, inode }
}

fn dentry_key(mount: MountId, parent: InodeId, name: &str) -> DentryKey {
    DentryKey {
        mount,
        parent,
        name: name.to_owned(),
    }
}

fn mount_of<E: Engine>(tx: &mut Tx<'_, E>, mount: MountId) -> Result<Mount, NokvError> {
    tx.get(&MountKey { mount })?
        .ok_or(NokvError::NoMount(mount))
}

fn dir_of<E: Engine>(
    tx: &mut Tx<'_, E>,
    mount: MountId,
    dir: InodeId,
) -> Result<InodeAttr, NokvError> {
    let attr = tx
        .get(&inode_key(mount, dir))?
        .ok_or_else(|| NokvError::NotFound(Missing::Inode(dir)))?;
    if attr.file_type != FileType::Dir {
        return Err(NokvError::NotADirectory(dir));
    }
    Ok(attr)
}

fn links_of<E: Engine>(
    tx: &mut Tx<'_, E>,
    mount: MountId,
    inode: InodeId,
) -> Result<Vec<(InodeId, String)>, StoreError> {
    let prefix = tuple::pack(&("nokv", "parent", mount, inode));
    let page = tx.scan::<ParentKey>(&Scan::range_of(KeyRange::tuple_prefix(&prefix)))?;
    Ok(page
        .items
        .into_iter()
        .map(|(k, _)| (k.parent, k.name))
        .collect())
}

impl<E: Engine> Nokv<E> {
    /// Store options with NoKV's history space.
    pub fn store_options() -> StoreOptions {
        Self::declare(StoreOptions::new(strata_codec::Limits::FOUNDATIONDB))
    }

    /// `options` with NoKV's history space added.
    pub fn declare(options: StoreOptions) -> StoreOptions {
        options.space(HISTORY_SPACE, Profile::General)
    }

    /// NoKV on `store` (opened with [`Nokv::declare`]d options), bodies in
    /// `blobs`.
    ///
    /// # Errors
    /// A store error when the history space was not declared.
    pub fn open(
        store: Store<E>,
        blobs: Arc<dyn BlobStore>,
        config: NokvConfig,
    ) -> Result<Self, NokvError> {
        let hist = store.space(HISTORY_SPACE)?;
        Ok(Self {
            store,
            hist,
            blobs,
            config,
        })
    }

    /// The store underneath.
    pub fn store(&self) -> &Store<E> {
        &self.store
    }

    /// Gives the store back.
    pub fn into_store(self) -> Store<E> {
        self.store
    }

    /// Creates mount `mount` with its root directory (idempotent per
    /// `request_id`).
    ///
    /// # Errors
    /// [`NokvError::Exists`] when the mount exists; a store error.
    pub fn create_mount(&self, mount: MountId, options: &str) -> Result<(), NokvError> {
        let now = self.store.read()?.now_ms();
        self.store.transact(|tx| {
            if tx.get(&MountKey { mount })?.is_some() {
                return Err(NokvError::Exists {
                    parent: 0,
                    name: format!("mount {mount}"),
                });
            }
            tx.put(
                &MountKey { mount },
                &Mount {
                    root: ROOT,
                    generation: 1,
                    next_inode: ROOT + 1,
                    options: options.to_owned(),
                },
            )?;
            tx.put(
                &inode_key(mount, ROOT),
                &InodeAttr {
                    file_type: FileType::Dir,
                    mode: 0o755,
                    size: 0,
                    mtime_ms: now,
                    link_count: 1,
                    generation: 1,
                    body: None,
                },
            )?;
            Ok(())
        })
    }
}

/// This crate's README example, compiled and run as a doctest.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
