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

pub mod keys;
mod planted;

#[cfg(feature = "planted-bugs")]
pub use planted::{PLANTED, plant};

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

use serde::{Deserialize, Serialize};
use strata_engine::{Engine, Profile};
use strata_keys::tuple::{self, Versionstamp};
use strata_keys::{Key, KeyRange};
use strata_store::{Scan, Space, Store, StoreError, StoreOptions, Tx};

pub use keys::{
    BODY_SUMMARY, Block, BodySummary, Dentry, FileType, GcEntry, InodeAttr, InodeId, ManifestRow,
    Mount, MountId, ParentLink, PathEntry, Projection, ROOT, SnapshotPin, WatchEvent, WatchRecord,
};
use keys::{
    Dedupe, DedupeFloor, DedupeFloorKey, DedupeKey, DentryKey, GcKey, InodeKey, ManifestKey,
    MountKey, ParentKey, PathKey, PinKey, WatchKey,
};

/// The raw space of history rows.
pub const HISTORY_SPACE: &str = "nokv_hist";

/// Why a NoKV operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum NokvError {
    /// No such mount.
    #[error("no mount {0}")]
    NoMount(MountId),
    /// A name or inode that does not exist.
    #[error("not found: {0}")]
    NotFound(String),
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
    #[error("invalid name {0:?}")]
    InvalidName(String),
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
    /// A predicate of the command did not hold: nothing was applied.
    #[error("predicate {index} failed: {why}")]
    PredicateFailed {
        /// Which predicate.
        index: usize,
        /// What it found.
        why: String,
    },
    /// The snapshot pin is unknown, expired or not ready.
    #[error("snapshot {0:?} is not usable: {1}")]
    Pin(String, &'static str),
    /// A body's chunk does not match its manifest.
    #[error("body of inode {inode}: {why}")]
    Body {
        /// The file.
        inode: InodeId,
        /// What is wrong.
        why: String,
    },
    /// The object store failed.
    #[error("object store: {0}")]
    Blob(String),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

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
    /// The store's failure, as text.
    fn put(&self, key: &str, bytes: &[u8]) -> Result<(), String>;
    /// The bytes under `key`.
    ///
    /// # Errors
    /// The store's failure, as text.
    fn get(&self, key: &str) -> Result<Option<Vec<u8>>, String>;
    /// Deletes `key` (absent is fine).
    ///
    /// # Errors
    /// The store's failure, as text.
    fn delete(&self, key: &str) -> Result<(), String>;
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
    fn put(&self, key: &str, bytes: &[u8]) -> Result<(), String> {
        self.lock().insert(key.to_owned(), bytes.to_vec());
        Ok(())
    }

    fn get(&self, key: &str) -> Result<Option<Vec<u8>>, String> {
        Ok(self.lock().get(key).cloned())
    }

    fn delete(&self, key: &str) -> Result<(), String> {
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
}

impl Default for NokvConfig {
    fn default() -> Self {
        Self {
            dedupe_retention_ms: 24 * 60 * 60 * 1000,
            watch_retention_ms: 60 * 60 * 1000,
            watch_keep_per_scope: 10_000,
            chunk_bytes: 64 * 1024,
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

const REPLANS: usize = 4;

fn name_ok(name: &str) -> Result<(), NokvError> {
    if name.is_empty() || name == "." || name == ".." || name.contains(['/', '\0']) {
        return Err(NokvError::InvalidName(name.to_owned()));
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

    // --- reads ---

    /// The inode's attributes.
    ///
    /// # Errors
    /// A store error.
    pub fn getattr(&self, mount: MountId, inode: InodeId) -> Result<Option<InodeAttr>, NokvError> {
        Ok(self.store.get(&inode_key(mount, inode))?)
    }

    /// The dentry `name` in `parent`.
    ///
    /// # Errors
    /// A store error.
    pub fn lookup(
        &self,
        mount: MountId,
        parent: InodeId,
        name: &str,
    ) -> Result<Option<Dentry>, NokvError> {
        Ok(self.store.get(&dentry_key(mount, parent, name))?)
    }

    /// Every entry of directory `dir` with its inode projection: one prefix
    /// scan of the dentries, in name order.
    ///
    /// # Errors
    /// A store error.
    pub fn readdirplus(&self, mount: MountId, dir: InodeId) -> Result<Vec<DirEntry>, NokvError> {
        let prefix = tuple::pack(&("nokv", "dentry", mount, dir));
        let view = self.store.read()?;
        let entries = view
            .scan::<DentryKey>(&Scan::range_of(KeyRange::tuple_prefix(&prefix)))?
            .map(|r| r.map(|(k, d)| (k.name, d)))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(entries)
    }

    /// The directories and names linking `inode` (the parent index).
    ///
    /// # Errors
    /// A store error.
    pub fn links(
        &self,
        mount: MountId,
        inode: InodeId,
    ) -> Result<Vec<(InodeId, String)>, NokvError> {
        let mut tx = self.store.begin();
        Ok(links_of(&mut tx, mount, inode)?)
    }

    // --- operations ---

    /// Makes directory `name` in `parent`.
    ///
    /// # Errors
    /// [`NokvError::Exists`], [`NokvError::NotADirectory`],
    /// [`NokvError::InvalidName`], a store error.
    pub fn mkdir(
        &self,
        mount: MountId,
        request_id: &str,
        parent: InodeId,
        name: &str,
        mode: u32,
    ) -> Result<Executed, NokvError> {
        self.new_node(mount, request_id, parent, name, mode, FileType::Dir)
    }

    /// Creates file `name` in `parent`.
    ///
    /// # Errors
    /// As [`Nokv::mkdir`].
    pub fn create(
        &self,
        mount: MountId,
        request_id: &str,
        parent: InodeId,
        name: &str,
        mode: u32,
    ) -> Result<Executed, NokvError> {
        self.new_node(mount, request_id, parent, name, mode, FileType::File)
    }

    fn new_node(
        &self,
        mount: MountId,
        request_id: &str,
        parent: InodeId,
        name: &str,
        mode: u32,
        file_type: FileType,
    ) -> Result<Executed, NokvError> {
        name_ok(name)?;
        let kind = match file_type {
            FileType::Dir => CommandKind::Mkdir,
            FileType::File => CommandKind::Create,
        };
        self.replanned(mount, request_id, |tx| {
            let (m, now) = (mount_of(tx, mount)?, tx.now_ms());
            let dir = dir_of(tx, mount, parent)?;
            if tx.get(&dentry_key(mount, parent, name))?.is_some() {
                return Err(NokvError::Exists {
                    parent,
                    name: name.to_owned(),
                });
            }
            let inode = m.next_inode;
            let attr = InodeAttr {
                file_type,
                mode,
                size: 0,
                mtime_ms: now,
                link_count: 1,
                generation: 1,
                body: None,
            };
            let generation = m.generation_counter();
            let dentry = Dentry {
                child: inode,
                file_type,
                generation,
                projection: Projection::of(&attr),
            };
            let mut cmd = Self::command(tx, mount, request_id, kind)?;
            cmd.predicates = vec![
                MetaPredicate::MountCounter(m.next_inode),
                MetaPredicate::InodeGeneration(parent, Some(dir.generation)),
                MetaPredicate::Dentry(parent, name.to_owned(), None),
            ];
            cmd.mutations = vec![
                MetaMutation::PutMount(Mount {
                    next_inode: inode + 1,
                    ..m
                }),
                MetaMutation::PutInode(inode, attr),
                MetaMutation::PutInode(parent, touched(dir, now)),
                MetaMutation::PutDentry(parent, name.to_owned(), dentry),
                MetaMutation::PutParent(
                    inode,
                    parent,
                    name.to_owned(),
                    ParentLink {
                        dentry_generation: generation,
                    },
                ),
            ];
            cmd.watch = vec![(
                parent,
                WatchEvent::Bound {
                    parent,
                    name: name.to_owned(),
                    child: inode,
                },
            )];
            cmd.outcome.inode = Some(inode);
            Ok(cmd)
        })
    }

    /// Sets `inode`'s mode, and its mtime to now; every dentry's
    /// projection follows in the same commit.
    ///
    /// # Errors
    /// [`NokvError::NotFound`], a store error.
    pub fn setattr(
        &self,
        mount: MountId,
        request_id: &str,
        inode: InodeId,
        mode: u32,
    ) -> Result<Executed, NokvError> {
        self.replanned(mount, request_id, |tx| {
            let now = tx.now_ms();
            let attr = tx
                .get(&inode_key(mount, inode))?
                .ok_or_else(|| NokvError::NotFound(format!("inode {inode}")))?;
            let mut cmd = Self::command(tx, mount, request_id, CommandKind::SetAttr)?;
            cmd.predicates = vec![MetaPredicate::InodeGeneration(inode, Some(attr.generation))];
            planted::setattr_predicates(&mut cmd);
            let next = InodeAttr {
                mode,
                mtime_ms: now,
                generation: attr.generation + 1,
                ..attr
            };
            Self::changed(tx, mount, inode, next, &mut cmd)?;
            Ok(cmd)
        })
    }

    /// Links file `inode` as `name` in `parent`.
    ///
    /// # Errors
    /// [`NokvError::IsADirectory`] for a directory, [`NokvError::Exists`],
    /// [`NokvError::NotFound`], a store error.
    pub fn link(
        &self,
        mount: MountId,
        request_id: &str,
        inode: InodeId,
        parent: InodeId,
        name: &str,
    ) -> Result<Executed, NokvError> {
        name_ok(name)?;
        self.replanned(mount, request_id, |tx| {
            let now = tx.now_ms();
            let m = mount_of(tx, mount)?;
            let dir = dir_of(tx, mount, parent)?;
            let attr = tx
                .get(&inode_key(mount, inode))?
                .ok_or_else(|| NokvError::NotFound(format!("inode {inode}")))?;
            if attr.file_type == FileType::Dir {
                return Err(NokvError::IsADirectory(inode));
            }
            if tx.get(&dentry_key(mount, parent, name))?.is_some() {
                return Err(NokvError::Exists {
                    parent,
                    name: name.to_owned(),
                });
            }
            let mut cmd = Self::command(tx, mount, request_id, CommandKind::Link)?;
            let generation = m.generation_counter();
            cmd.predicates = vec![
                MetaPredicate::MountCounter(m.next_inode),
                MetaPredicate::InodeGeneration(parent, Some(dir.generation)),
                MetaPredicate::InodeGeneration(inode, Some(attr.generation)),
                MetaPredicate::Dentry(parent, name.to_owned(), None),
            ];
            let next = InodeAttr {
                link_count: attr.link_count + 1,
                generation: attr.generation + 1,
                ..attr
            };
            cmd.mutations.push(MetaMutation::PutMount(Mount {
                next_inode: m.next_inode + 1,
                ..m
            }));
            Self::reproject(tx, mount, inode, &next, &mut cmd)?;
            cmd.mutations.extend([
                MetaMutation::PutInode(inode, next.clone()),
                MetaMutation::PutInode(parent, touched(dir, now)),
                MetaMutation::PutDentry(
                    parent,
                    name.to_owned(),
                    Dentry {
                        child: inode,
                        file_type: FileType::File,
                        generation,
                        projection: Projection::of(&next),
                    },
                ),
                MetaMutation::PutParent(
                    inode,
                    parent,
                    name.to_owned(),
                    ParentLink {
                        dentry_generation: generation,
                    },
                ),
            ]);
            cmd.watch.push((
                parent,
                WatchEvent::Bound {
                    parent,
                    name: name.to_owned(),
                    child: inode,
                },
            ));
            cmd.outcome.inode = Some(inode);
            Ok(cmd)
        })
    }

    /// Removes `name` from `parent` (a directory only when empty). The
    /// inode goes with its last link, its body's blocks to the GC queue.
    ///
    /// # Errors
    /// [`NokvError::NotFound`], [`NokvError::NotEmpty`], a store error.
    pub fn unlink(
        &self,
        mount: MountId,
        request_id: &str,
        parent: InodeId,
        name: &str,
    ) -> Result<Executed, NokvError> {
        self.replanned(mount, request_id, |tx| {
            let now = tx.now_ms();
            let dir = dir_of(tx, mount, parent)?;
            let d = tx
                .get(&dentry_key(mount, parent, name))?
                .ok_or_else(|| NokvError::NotFound(format!("{name:?} in {parent}")))?;
            let mut cmd = Self::command(tx, mount, request_id, CommandKind::Unlink)?;
            cmd.predicates = vec![
                MetaPredicate::InodeGeneration(parent, Some(dir.generation)),
                MetaPredicate::Dentry(parent, name.to_owned(), Some((d.child, d.generation))),
            ];
            cmd.mutations.extend([
                MetaMutation::PutInode(parent, touched(dir, now)),
                MetaMutation::DeleteDentry(parent, name.to_owned()),
                MetaMutation::DeleteParent(d.child, parent, name.to_owned()),
            ]);
            cmd.watch.push((
                parent,
                WatchEvent::Unbound {
                    parent,
                    name: name.to_owned(),
                },
            ));
            cmd.outcome.released = Self::drop_link(tx, mount, d.child, &mut cmd)?;
            cmd.outcome.inode = Some(d.child);
            Ok(cmd)
        })
    }

    /// Moves `name` in `from` to `to_name` in `to`, atomically, replacing a
    /// file or an empty directory there; a directory is never moved under
    /// itself.
    ///
    /// # Errors
    /// [`NokvError::NotFound`], [`NokvError::WouldCreateCycle`],
    /// [`NokvError::NotEmpty`], [`NokvError::IsADirectory`] (a file over a
    /// directory), [`NokvError::NotADirectory`] (a directory over a file),
    /// [`NokvError::InvalidName`], a store error.
    pub fn rename(
        &self,
        mount: MountId,
        request_id: &str,
        from: InodeId,
        name: &str,
        to: InodeId,
        to_name: &str,
    ) -> Result<Executed, NokvError> {
        name_ok(to_name)?;
        self.replanned(mount, request_id, |tx| {
            Self::rename_plan(tx, mount, request_id, (from, name), (to, to_name))
        })
    }

    /// The command [`Nokv::rename`] would execute, planned at the current
    /// state, for a caller that executes it later with [`Nokv::execute`]
    /// (its predicates then refuse it if anything it read has changed).
    ///
    /// # Errors
    /// As [`Nokv::rename`].
    pub fn plan_rename(
        &self,
        mount: MountId,
        request_id: &str,
        from: InodeId,
        name: &str,
        to: InodeId,
        to_name: &str,
    ) -> Result<MetadataCommand, NokvError> {
        name_ok(to_name)?;
        let mut tx = self.store.begin();
        let mut cmd = Self::rename_plan(&mut tx, mount, request_id, (from, name), (to, to_name))?;
        planted::stale_rename(&mut cmd);
        Ok(cmd)
    }

    #[allow(clippy::too_many_lines)] // the rename's cases, in order
    fn rename_plan(
        tx: &mut Tx<'_, E>,
        mount: MountId,
        request_id: &str,
        (from, name): (InodeId, &str),
        (to, to_name): (InodeId, &str),
    ) -> Result<MetadataCommand, NokvError> {
        {
            let now = tx.now_ms();
            let m = mount_of(tx, mount)?;
            let src_dir = dir_of(tx, mount, from)?;
            let dst_dir = dir_of(tx, mount, to)?;
            let src = tx
                .get(&dentry_key(mount, from, name))?
                .ok_or_else(|| NokvError::NotFound(format!("{name:?} in {from}")))?;
            let mut cmd = Self::command(tx, mount, request_id, CommandKind::Rename)?;
            cmd.outcome.inode = Some(src.child);
            if from == to && name == to_name {
                return Ok(cmd);
            }
            let dst = tx.get(&dentry_key(mount, to, to_name))?;
            cmd.predicates = vec![
                MetaPredicate::MountCounter(m.next_inode),
                MetaPredicate::InodeGeneration(from, Some(src_dir.generation)),
                MetaPredicate::InodeGeneration(to, Some(dst_dir.generation)),
                MetaPredicate::Dentry(from, name.to_owned(), Some((src.child, src.generation))),
                MetaPredicate::Dentry(
                    to,
                    to_name.to_owned(),
                    dst.as_ref().map(|d| (d.child, d.generation)),
                ),
            ];
            if src.file_type == FileType::Dir {
                // Walk up from the target directory: the source must not be
                // on the way to the root. Each step is a predicate.
                let mut at = to;
                while at != ROOT {
                    if at == src.child {
                        return Err(NokvError::WouldCreateCycle(src.child));
                    }
                    let up = links_of(tx, mount, at)?;
                    let Some((p, n)) = up.into_iter().next() else {
                        break;
                    };
                    let d = tx
                        .get(&dentry_key(mount, p, &n))?
                        .ok_or_else(|| NokvError::NotFound(format!("{n:?} in {p}")))?;
                    cmd.predicates
                        .push(MetaPredicate::Dentry(p, n, Some((d.child, d.generation))));
                    at = p;
                }
                if to == src.child {
                    return Err(NokvError::WouldCreateCycle(src.child));
                }
            }
            if let Some(d) = &dst {
                if d.child == src.child {
                    // Two names of one file: the source name goes.
                } else if d.file_type == FileType::Dir {
                    if src.file_type != FileType::Dir {
                        return Err(NokvError::IsADirectory(d.child));
                    }
                    let target = tx
                        .get(&inode_key(mount, d.child))?
                        .ok_or_else(|| NokvError::NotFound(format!("inode {}", d.child)))?;
                    if !Self::is_empty_dir(tx, mount, d.child)? {
                        return Err(NokvError::NotEmpty(d.child));
                    }
                    cmd.predicates.push(MetaPredicate::InodeGeneration(
                        d.child,
                        Some(target.generation),
                    ));
                } else if src.file_type == FileType::Dir {
                    return Err(NokvError::NotADirectory(d.child));
                }
            }
            let generation = m.generation_counter();
            cmd.mutations.push(MetaMutation::PutMount(Mount {
                next_inode: m.next_inode + 1,
                ..m
            }));
            if let Some(d) = &dst {
                cmd.mutations
                    .push(MetaMutation::DeleteParent(d.child, to, to_name.to_owned()));
                if d.child == src.child {
                    // The file loses one of its two names.
                    let attr = tx
                        .get(&inode_key(mount, d.child))?
                        .ok_or_else(|| NokvError::NotFound(format!("inode {}", d.child)))?;
                    cmd.predicates.push(MetaPredicate::InodeGeneration(
                        d.child,
                        Some(attr.generation),
                    ));
                    let next = InodeAttr {
                        link_count: attr.link_count - 1,
                        generation: attr.generation + 1,
                        ..attr
                    };
                    cmd.mutations.push(MetaMutation::PutInode(d.child, next));
                } else {
                    cmd.outcome.released = Self::drop_link(tx, mount, d.child, &mut cmd)?;
                }
            }
            let moved = Dentry {
                generation,
                ..src.clone()
            };
            cmd.mutations.extend([
                MetaMutation::DeleteDentry(from, name.to_owned()),
                MetaMutation::DeleteParent(src.child, from, name.to_owned()),
                MetaMutation::PutDentry(to, to_name.to_owned(), moved),
                MetaMutation::PutParent(
                    src.child,
                    to,
                    to_name.to_owned(),
                    ParentLink {
                        dentry_generation: generation,
                    },
                ),
                MetaMutation::PutInode(from, touched(src_dir.clone(), now)),
            ]);
            if to != from {
                cmd.mutations
                    .push(MetaMutation::PutInode(to, touched(dst_dir, now)));
            }
            cmd.watch.extend([
                (
                    from,
                    WatchEvent::Unbound {
                        parent: from,
                        name: name.to_owned(),
                    },
                ),
                (
                    to,
                    WatchEvent::Bound {
                        parent: to,
                        name: to_name.to_owned(),
                        child: src.child,
                    },
                ),
            ]);
            Ok(cmd)
        }
    }

    /// Replaces file `inode`'s body with `bytes`: chunks stored in the
    /// object store first, then one command writing the new manifest
    /// generation and the size, and queueing the old blocks for GC.
    ///
    /// # Errors
    /// [`NokvError::NotFound`], [`NokvError::IsADirectory`],
    /// [`NokvError::Blob`], a store error.
    pub fn write(
        &self,
        mount: MountId,
        request_id: &str,
        inode: InodeId,
        bytes: &[u8],
    ) -> Result<Executed, NokvError> {
        let size = self.config.chunk_bytes.max(1);
        // Objects are named by request, so a replay or re-plan rewrites the
        // same names and a failed command leaves at most one set behind.
        let objects: Vec<(String, &[u8])> = bytes
            .chunks(size)
            .enumerate()
            .map(|(i, c)| (format!("{mount}/{inode}/{request_id}/{i}"), c))
            .collect();
        for (key, chunk) in &objects {
            self.blobs.put(key, chunk).map_err(NokvError::Blob)?;
        }
        self.replanned(mount, request_id, |tx| {
            let now = tx.now_ms();
            let attr = tx
                .get(&inode_key(mount, inode))?
                .ok_or_else(|| NokvError::NotFound(format!("inode {inode}")))?;
            if attr.file_type == FileType::Dir {
                return Err(NokvError::IsADirectory(inode));
            }
            let mut cmd = Self::command(tx, mount, request_id, CommandKind::Write)?;
            cmd.predicates = vec![MetaPredicate::InodeGeneration(inode, Some(attr.generation))];
            let generation = attr.body.as_ref().map_or(1, |b| b.manifest_generation + 1);
            if let Some(old) = &attr.body {
                Self::release_body(tx, mount, inode, old, &mut cmd)?;
            }
            let summary = BodySummary {
                manifest_generation: generation,
                size: bytes.len() as u64,
                chunks: objects.len() as u64,
            };
            for (i, (key, chunk)) in objects.iter().enumerate() {
                cmd.mutations.push(MetaMutation::PutManifest(
                    inode,
                    generation,
                    i as u64,
                    ManifestRow::Chunk(vec![Block {
                        object: key.clone(),
                        size: chunk.len() as u64,
                        digest: crc32fast::hash(chunk),
                    }]),
                ));
            }
            cmd.mutations.push(MetaMutation::PutManifest(
                inode,
                generation,
                BODY_SUMMARY,
                ManifestRow::Summary(summary.clone()),
            ));
            let next = InodeAttr {
                size: summary.size,
                mtime_ms: now,
                generation: attr.generation + 1,
                body: Some(summary),
                ..attr
            };
            Self::changed(tx, mount, inode, next, &mut cmd)?;
            Ok(cmd)
        })
    }

    /// File `inode`'s body, every chunk checked against its manifest.
    ///
    /// # Errors
    /// [`NokvError::Body`] for a missing or damaged chunk,
    /// [`NokvError::Blob`], a store error.
    pub fn read(&self, mount: MountId, inode: InodeId) -> Result<Vec<u8>, NokvError> {
        let Some(attr) = self.getattr(mount, inode)? else {
            return Err(NokvError::NotFound(format!("inode {inode}")));
        };
        let Some(body) = attr.body else {
            return Ok(Vec::new());
        };
        let prefix = tuple::pack(&("nokv", "manifest", mount, inode, body.manifest_generation));
        let rows = self
            .store
            .read()?
            .scan::<ManifestKey>(&Scan::range_of(KeyRange::tuple_prefix(&prefix)))?
            .collect::<Result<Vec<_>, _>>()?;
        let bad = |why: String| NokvError::Body { inode, why };
        let mut out = Vec::with_capacity(usize::try_from(body.size).unwrap_or(0));
        let mut chunk = 0;
        for (k, row) in rows {
            match row {
                ManifestRow::Chunk(blocks) if k.chunk == chunk => {
                    for b in blocks {
                        let bytes = self
                            .blobs
                            .get(&b.object)
                            .map_err(NokvError::Blob)?
                            .ok_or_else(|| bad(format!("object {} is missing", b.object)))?;
                        if bytes.len() as u64 != b.size || crc32fast::hash(&bytes) != b.digest {
                            return Err(bad(format!("object {} does not match", b.object)));
                        }
                        out.extend_from_slice(&bytes);
                    }
                    chunk += 1;
                }
                ManifestRow::Summary(_) if k.chunk == BODY_SUMMARY => {}
                _ => return Err(bad(format!("manifest row {} out of place", k.chunk))),
            }
        }
        if chunk != body.chunks || out.len() as u64 != body.size {
            return Err(bad(format!(
                "{chunk} chunks and {} bytes where the summary says {} and {}",
                out.len(),
                body.chunks,
                body.size
            )));
        }
        Ok(out)
    }

    // --- the path index ---

    /// Indexes `path` (`/a/b/c`, from the root) in `workspace`, with the
    /// dentry generation of every component.
    ///
    /// # Errors
    /// [`NokvError::NotFound`] when the path does not resolve; a store
    /// error.
    pub fn index_path(
        &self,
        mount: MountId,
        workspace: &str,
        path: &str,
    ) -> Result<InodeId, NokvError> {
        let (inode, components) = self.walk(mount, path)?;
        let m = self
            .store
            .get(&MountKey { mount })?
            .ok_or(NokvError::NoMount(mount))?;
        let (parent, generation) = components.last().map_or((ROOT, 0), |(p, _, g)| (*p, *g));
        self.store.put(
            &PathKey {
                mount,
                workspace: workspace.to_owned(),
                path: path.to_owned(),
            },
            &PathEntry {
                inode,
                parent,
                dentry_generation: generation,
                root_epoch: m.generation,
                components,
            },
        )?;
        Ok(inode)
    }

    /// Resolves `path` through the index, verified against the dentries of
    /// every component; a stale or missing entry falls back to the walk
    /// and is repaired.
    ///
    /// # Errors
    /// [`NokvError::NotFound`] when the path does not resolve; a store
    /// error.
    pub fn lookup_path(
        &self,
        mount: MountId,
        workspace: &str,
        path: &str,
    ) -> Result<PathHit, NokvError> {
        let key = PathKey {
            mount,
            workspace: workspace.to_owned(),
            path: path.to_owned(),
        };
        if let Some(entry) = self.store.get(&key)? {
            if self.verified(mount, &entry)? {
                return Ok(PathHit::Index(entry.inode));
            }
            let inode = self.index_path(mount, workspace, path)?;
            return Ok(PathHit::Walk(inode, true));
        }
        let (inode, _) = self.walk(mount, path)?;
        Ok(PathHit::Walk(inode, false))
    }

    fn verified(&self, mount: MountId, entry: &PathEntry) -> Result<bool, NokvError> {
        let view = self.store.read()?;
        let Some(m) = view.get(&MountKey { mount })? else {
            return Ok(false);
        };
        if m.generation != entry.root_epoch {
            return Ok(false);
        }
        let mut expect = ROOT;
        for (parent, name, generation) in &entry.components {
            if *parent != expect {
                return Ok(false);
            }
            match view.get(&dentry_key(mount, *parent, name))? {
                Some(d) if d.generation == *generation => expect = d.child,
                _ => return Ok(false),
            }
        }
        Ok(expect == entry.inode)
    }

    /// Resolves `path` from the root through the dentries.
    fn walk(&self, mount: MountId, path: &str) -> Result<(InodeId, Vec<Component>), NokvError> {
        let view = self.store.read()?;
        let mut at = ROOT;
        let mut components = Vec::new();
        for name in path.split('/').filter(|s| !s.is_empty()) {
            let d = view
                .get(&dentry_key(mount, at, name))?
                .ok_or_else(|| NokvError::NotFound(path.to_owned()))?;
            components.push((at, name.to_owned(), d.generation));
            at = d.child;
        }
        Ok((at, components))
    }

    // --- pins and history ---

    /// Pins a snapshot of the mount for `lease_ms`: reads through it see
    /// the mount as of the pin's commit, served from history rows that
    /// every later change writes while the pin is live.
    ///
    /// # Errors
    /// [`NokvError::Exists`] for a pin of that id; a store error.
    pub fn pin(&self, mount: MountId, snapshot: &str, lease_ms: u64) -> Result<u64, NokvError> {
        let key = PinKey {
            mount,
            snapshot: snapshot.to_owned(),
        };
        let ((), info) = self.store.transact_info(|tx| {
            if tx.get(&key)?.is_some() {
                return Err(NokvError::Exists {
                    parent: 0,
                    name: format!("snapshot {snapshot}"),
                });
            }
            let now = tx.now_ms();
            tx.put(
                &key,
                &SnapshotPin {
                    root: ROOT,
                    read_version: None,
                    lease_until_ms: now + lease_ms,
                },
            )?;
            Ok::<_, NokvError>(())
        })?;
        let version = info.map(|i| i.version).unwrap_or_default();
        self.store.transact(|tx| {
            if let Some(pin) = tx.get(&key)? {
                tx.put(
                    &key,
                    &SnapshotPin {
                        read_version: Some(version),
                        ..pin
                    },
                )?;
            }
            Ok::<_, NokvError>(())
        })?;
        Ok(version)
    }

    /// Ends a pin.
    ///
    /// # Errors
    /// A store error.
    pub fn unpin(&self, mount: MountId, snapshot: &str) -> Result<(), NokvError> {
        self.store.delete(&PinKey {
            mount,
            snapshot: snapshot.to_owned(),
        })?;
        Ok(())
    }

    /// Inode `inode` as of pin `snapshot`.
    ///
    /// # Errors
    /// [`NokvError::Pin`] for an unknown, expired or unready pin; a store
    /// error.
    pub fn getattr_at(
        &self,
        mount: MountId,
        snapshot: &str,
        inode: InodeId,
    ) -> Result<Option<InodeAttr>, NokvError> {
        self.at_pin(mount, snapshot, &inode_key(mount, inode))
    }

    /// Dentry `name` in `parent` as of pin `snapshot`.
    ///
    /// # Errors
    /// As [`Nokv::getattr_at`].
    pub fn lookup_at(
        &self,
        mount: MountId,
        snapshot: &str,
        parent: InodeId,
        name: &str,
    ) -> Result<Option<Dentry>, NokvError> {
        self.at_pin(mount, snapshot, &dentry_key(mount, parent, name))
    }

    fn at_pin<K>(
        &self,
        mount: MountId,
        snapshot: &str,
        key: &K,
    ) -> Result<Option<K::Value>, NokvError>
    where
        K: Key + 'static,
        K::Value: strata_codec::Value,
    {
        let mut tx = self.store.begin();
        let now = tx.now_ms();
        let pin = tx
            .get(&PinKey {
                mount,
                snapshot: snapshot.to_owned(),
            })?
            .ok_or(NokvError::Pin(snapshot.to_owned(), "no such pin"))?;
        if pin.lease_until_ms <= now {
            return Err(NokvError::Pin(snapshot.to_owned(), "its lease has ended"));
        }
        let version = pin
            .read_version
            .ok_or(NokvError::Pin(snapshot.to_owned(), "not ready"))?;
        let packed = key.pack().map_err(|source| StoreError::Key {
            key_type: K::NAME,
            source,
        })?;
        let prefix = history_prefix(K::NAME, &packed);
        // History rows of changes after the pin sort first (inverted
        // versions below the pin's); the oldest of them holds the value
        // the pin sees.
        let mut bound = prefix.clone();
        bound.extend(version.to_be_bytes().iter().map(|b| !b));
        let range = KeyRange {
            start: prefix,
            end: Some(bound),
        };
        let page = tx.snapshot_scan_in(&self.hist, &range, Some(1), true)?;
        match page.rows.into_iter().next() {
            None => Ok(tx.get(key)?),
            Some((_, row)) => {
                let previous: Vec<u8> =
                    strata_codec::decode(&[], &row).map_err(|e| NokvError::Body {
                        inode: 0,
                        why: format!("history row: {e}"),
                    })?;
                match previous.split_first() {
                    Some((0, _)) | None => Ok(None),
                    Some((_, envelope)) => Ok(Some(
                        strata_codec::decode(&packed, envelope).map_err(|e| NokvError::Body {
                            inode: 0,
                            why: format!("history value: {e}"),
                        })?,
                    )),
                }
            }
        }
    }

    // --- GC and retention ---

    /// Deletes up to `max` queued blocks from the object store, in enqueue
    /// order, each row removed after its object; returns how many.
    ///
    /// # Errors
    /// [`NokvError::Blob`] (the row stays queued), a store error.
    pub fn drain_gc(&self, mount: MountId, max: usize) -> Result<usize, NokvError> {
        let prefix = tuple::pack(&("nokv", "gc", mount));
        let page = self
            .store
            .scan::<GcKey>(&Scan::range_of(KeyRange::tuple_prefix(&prefix)).limit(max))?;
        let mut done = 0;
        for (key, entry) in page.items {
            self.blobs.delete(&entry.object).map_err(NokvError::Blob)?;
            self.store.delete(&key)?;
            done += 1;
        }
        Ok(done)
    }

    /// Prunes what no reader needs: dedupe rows past their retention,
    /// watch events past their age or beyond the per-scope count (never
    /// those newer than the oldest live pin), expired pins, and history
    /// rows at or below the oldest live pin's version (all of them when no
    /// pin is live).
    ///
    /// # Errors
    /// A store error.
    pub fn prune(&self, mount: MountId) -> Result<Pruned, NokvError> {
        let mut out = Pruned::default();
        let view = self.store.read()?;
        let now = view.now_ms();
        let pins = view
            .scan::<PinKey>(&Scan::range_of(KeyRange::tuple_prefix(&tuple::pack(&(
                "nokv", "pin", mount,
            )))))?
            .collect::<Result<Vec<_>, _>>()?;
        let mut floor: Option<u64> = None;
        for (k, pin) in &pins {
            if pin.lease_until_ms <= now {
                self.store.delete(k)?;
                out.pins += 1;
            } else {
                let v = pin.read_version.unwrap_or(0);
                floor = Some(floor.map_or(v, |f| f.min(v)));
            }
        }
        let dedupes = view
            .scan::<DedupeKey>(&Scan::range_of(KeyRange::tuple_prefix(&tuple::pack(&(
                "nokv", "dedupe", mount,
            )))))?
            .collect::<Result<Vec<_>, _>>()?;
        let expired: Vec<(DedupeKey, Dedupe)> = dedupes
            .into_iter()
            .filter(|(_, d)| d.at_ms.saturating_add(self.config.dedupe_retention_ms) <= now)
            .collect();
        // Each batch of rows goes in one commit with the floor raised past
        // their plans: no moment when a row is gone and its replay allowed.
        for batch in expired.chunks(64) {
            let floor_key = DedupeFloorKey { mount };
            self.store.transact(|tx| {
                let mut floor = tx.get(&floor_key)?.map_or(0, |f| f.below);
                for (k, d) in batch {
                    tx.delete(k)?;
                    floor = floor.max(d.read_version.saturating_add(1));
                }
                if !planted::prune_without_floor() {
                    tx.put(&floor_key, &DedupeFloor { below: floor })?;
                }
                Ok::<_, StoreError>(())
            })?;
            out.dedupe += batch.len();
        }
        let events = view
            .scan::<WatchKey>(&Scan::range_of(KeyRange::tuple_prefix(&tuple::pack(&(
                "nokv", "watch", mount,
            )))))?
            .collect::<Result<Vec<_>, _>>()?;
        let mut per_scope: BTreeMap<InodeId, Vec<(WatchKey, u64)>> = BTreeMap::new();
        for (k, r) in events {
            per_scope.entry(k.scope).or_default().push((k, r.at_ms));
        }
        for keys in per_scope.values() {
            let excess = keys.len().saturating_sub(self.config.watch_keep_per_scope);
            for (i, (k, at_ms)) in keys.iter().enumerate() {
                let version = stamp_version(&k.stamp);
                let needed = floor.is_some_and(|f| version > f);
                let old = at_ms.saturating_add(self.config.watch_retention_ms) <= now;
                if (i < excess || old) && !needed {
                    self.store.delete(k)?;
                    out.watch += 1;
                }
            }
        }
        // History: rows whose commit is at or below the floor.
        let mut tx = self.store.begin();
        let rows = tx.snapshot_scan_in(&self.hist, &KeyRange::prefix(&[]), None, false)?;
        drop(tx);
        let stale: Vec<Vec<u8>> = rows
            .rows
            .into_iter()
            .filter(|(k, _)| {
                k.len() >= 10 && {
                    let inv = &k[k.len() - 10..k.len() - 2];
                    let mut v = [0u8; 8];
                    for (d, s) in v.iter_mut().zip(inv) {
                        *d = !s;
                    }
                    floor.is_none_or(|f| u64::from_be_bytes(v) <= f)
                }
            })
            .map(|(k, _)| k)
            .collect();
        for chunk in stale.chunks(1_000) {
            self.store.transact(|tx| {
                for k in chunk {
                    tx.delete_in(&self.hist, k.clone())?;
                }
                Ok::<_, StoreError>(())
            })?;
            out.history += chunk.len();
        }
        Ok(out)
    }

    /// The watch events of `scope`, oldest first, with their commit
    /// versions.
    ///
    /// # Errors
    /// A store error.
    pub fn watch_events(
        &self,
        mount: MountId,
        scope: InodeId,
    ) -> Result<Vec<(u64, WatchEvent)>, NokvError> {
        let prefix = tuple::pack(&("nokv", "watch", mount, scope));
        Ok(self
            .store
            .read()?
            .scan::<WatchKey>(&Scan::range_of(KeyRange::tuple_prefix(&prefix)))?
            .map(|r| r.map(|(k, r)| (stamp_version(&k.stamp), r.event)))
            .collect::<Result<Vec<_>, _>>()?)
    }

    // --- the command boundary ---

    /// Executes `cmd` as one commit: a replayed request id returns the
    /// first outcome and applies nothing; every predicate must hold or
    /// nothing applies; mutations, history rows (while a pin is live),
    /// watch events and the dedupe row commit together.
    ///
    /// # Errors
    /// [`NokvError::PredicateFailed`]; a store error.
    pub fn execute(&self, cmd: &MetadataCommand) -> Result<Executed, NokvError> {
        let (executed, info) = self.store.transact_info(|tx| self.execute_in(tx, cmd))?;
        if planted::dedupe_apart()
            && let Executed::Applied(o, _) = &executed
        {
            self.store.put(
                &DedupeKey {
                    mount: cmd.mount,
                    request: cmd.request_id.clone(),
                },
                &Dedupe {
                    outcome: o.clone(),
                    at_ms: self.store.read()?.now_ms(),
                    read_version: cmd.read_version,
                },
            )?;
        }
        Ok(match executed {
            Executed::Applied(o, _) => Executed::Applied(o, info.map(|i| i.version)),
            replayed @ Executed::Replayed(_) => replayed,
        })
    }

    fn execute_in(&self, tx: &mut Tx<'_, E>, cmd: &MetadataCommand) -> Result<Executed, NokvError> {
        let mount = cmd.mount;
        let dedupe = DedupeKey {
            mount,
            request: cmd.request_id.clone(),
        };
        if let Some(d) = tx.get(&dedupe)? {
            return Ok(Executed::Replayed(d.outcome));
        }
        if let Some(floor) = tx.get(&DedupeFloorKey { mount })?
            && cmd.read_version < floor.below
        {
            return Err(NokvError::PlanExpired {
                request_id: cmd.request_id.clone(),
                read_version: cmd.read_version,
                floor: floor.below,
            });
        }
        for (index, p) in cmd.predicates.iter().enumerate() {
            let fail = |why: String| NokvError::PredicateFailed { index, why };
            match p {
                MetaPredicate::InodeGeneration(inode, want) => {
                    let got = tx.get(&inode_key(mount, *inode))?.map(|a| a.generation);
                    if got != *want {
                        return Err(fail(format!("inode {inode} generation {got:?}")));
                    }
                }
                MetaPredicate::Dentry(parent, name, want) => {
                    let got = tx
                        .get(&dentry_key(mount, *parent, name))?
                        .map(|d| (d.child, d.generation));
                    if got != *want {
                        return Err(fail(format!("dentry {name:?} in {parent}: {got:?}")));
                    }
                }
                MetaPredicate::MountCounter(next) => {
                    let got = tx.get(&MountKey { mount })?.map(|m| m.next_inode);
                    if got != Some(*next) {
                        return Err(fail(format!("mount counter {got:?}")));
                    }
                }
            }
        }
        let pinned = Self::live_pins(tx, mount)?;
        for m in &cmd.mutations {
            self.apply(tx, mount, m, pinned)?;
        }
        let now = tx.now_ms();
        for (i, (scope, event)) in cmd.watch.iter().enumerate() {
            tx.put_versionstamped(
                &WatchKey {
                    mount,
                    scope: *scope,
                    stamp: Versionstamp::incomplete(u16::try_from(i).unwrap_or(u16::MAX)),
                },
                &WatchRecord {
                    at_ms: now,
                    event: event.clone(),
                },
            )?;
        }
        if !planted::dedupe_apart() {
            tx.put(
                &dedupe,
                &Dedupe {
                    outcome: cmd.outcome.clone(),
                    at_ms: tx.now_ms(),
                    read_version: cmd.read_version,
                },
            )?;
        }
        Ok(Executed::Applied(cmd.outcome.clone(), None))
    }

    fn apply(
        &self,
        tx: &mut Tx<'_, E>,
        mount: MountId,
        m: &MetaMutation,
        pinned: bool,
    ) -> Result<(), NokvError> {
        match m {
            MetaMutation::PutMount(v) => tx.put(&MountKey { mount }, v)?,
            MetaMutation::PutInode(inode, attr) => {
                let key = inode_key(mount, *inode);
                self.remember(tx, &key, pinned)?;
                tx.put(&key, attr)?;
            }
            MetaMutation::DeleteInode(inode) => {
                let key = inode_key(mount, *inode);
                self.remember(tx, &key, pinned)?;
                tx.delete(&key)?;
            }
            MetaMutation::PutDentry(parent, name, d) => {
                let key = dentry_key(mount, *parent, name);
                self.remember(tx, &key, pinned)?;
                tx.put(&key, d)?;
            }
            MetaMutation::DeleteDentry(parent, name) => {
                let key = dentry_key(mount, *parent, name);
                self.remember(tx, &key, pinned)?;
                tx.delete(&key)?;
            }
            MetaMutation::PutParent(child, parent, name, link) => tx.put(
                &ParentKey {
                    mount,
                    child: *child,
                    parent: *parent,
                    name: name.clone(),
                },
                link,
            )?,
            MetaMutation::DeleteParent(child, parent, name) => tx.delete(&ParentKey {
                mount,
                child: *child,
                parent: *parent,
                name: name.clone(),
            })?,
            MetaMutation::PutManifest(inode, generation, chunk, row) => tx.put(
                &ManifestKey {
                    mount,
                    inode: *inode,
                    generation: *generation,
                    chunk: *chunk,
                },
                row,
            )?,
            MetaMutation::DeleteManifest(inode, generation, chunk) => tx.delete(&ManifestKey {
                mount,
                inode: *inode,
                generation: *generation,
                chunk: *chunk,
            })?,
            MetaMutation::PutPath(workspace, path, entry) => tx.put(
                &PathKey {
                    mount,
                    workspace: workspace.clone(),
                    path: path.clone(),
                },
                entry,
            )?,
            MetaMutation::EnqueueGc(inode, generation, chunk, block, entry) => {
                tx.put_versionstamped(
                    &GcKey {
                        mount,
                        stamp: Versionstamp::incomplete(0),
                        inode: *inode,
                        generation: *generation,
                        chunk: *chunk,
                        block: *block,
                    },
                    entry,
                )?;
            }
        }
        Ok(())
    }

    /// Writes the history row of `key` (its value before this command)
    /// when a pin is live and the command has not yet written one for it.
    fn remember<K>(&self, tx: &mut Tx<'_, E>, key: &K, pinned: bool) -> Result<(), NokvError>
    where
        K: Key + 'static,
        K::Value: strata_codec::Value,
    {
        if !pinned {
            return Ok(());
        }
        let packed = key.pack().map_err(|source| StoreError::Key {
            key_type: K::NAME,
            source,
        })?;
        let mut row_key = history_prefix(K::NAME, &packed);
        let at = row_key.len();
        row_key.extend_from_slice(&[0; 10]);
        // A key written twice by one command gets two rows of one commit;
        // the first (order 0, sorting last among them) holds the value
        // before the command, which is the one a pin reads.
        let previous = tx.snapshot_get(key)?;
        let mut body = Vec::new();
        match previous {
            None => body.push(0),
            Some(v) => {
                body.push(1);
                strata_codec::encode(
                    &v,
                    &packed,
                    strata_codec::EncodeOptions::default(),
                    &mut body,
                )
                .map_err(|source| StoreError::Encode {
                    key_type: K::NAME,
                    source,
                })?;
            }
        }
        let mut envelope = Vec::new();
        strata_codec::encode_keyless(&body, None, &mut envelope).map_err(|source| {
            StoreError::Encode {
                key_type: K::NAME,
                source,
            }
        })?;
        tx.put_inverted_stamped_in(&self.hist, row_key, at, envelope)?;
        Ok(())
    }

    fn live_pins(tx: &mut Tx<'_, E>, mount: MountId) -> Result<bool, NokvError> {
        let now = tx.now_ms();
        let prefix = tuple::pack(&("nokv", "pin", mount));
        let page = tx.scan::<PinKey>(&Scan::range_of(KeyRange::tuple_prefix(&prefix)))?;
        Ok(page.items.iter().any(|(_, p)| p.lease_until_ms > now))
    }

    /// A command of `kind` planned at this transaction's snapshot.
    fn command(
        tx: &mut Tx<'_, E>,
        mount: MountId,
        request_id: &str,
        kind: CommandKind,
    ) -> Result<MetadataCommand, NokvError> {
        Ok(MetadataCommand {
            mount,
            request_id: request_id.to_owned(),
            kind,
            read_version: tx.read_version()?,
            predicates: Vec::new(),
            mutations: Vec::new(),
            watch: Vec::new(),
            outcome: Outcome {
                inode: None,
                released: None,
            },
        })
    }

    /// Plans with `plan` at a fresh snapshot and executes, re-planning when
    /// a predicate failed because something changed in between.
    fn replanned(
        &self,
        mount: MountId,
        request_id: &str,
        mut plan: impl FnMut(&mut Tx<'_, E>) -> Result<MetadataCommand, NokvError>,
    ) -> Result<Executed, NokvError> {
        let mut attempt = 0;
        loop {
            attempt += 1;
            // A replay returns the first outcome before anything is
            // planned: its plan may no longer make sense (the name it
            // created exists now).
            if let Some(d) = self.store.get(&DedupeKey {
                mount,
                request: request_id.to_owned(),
            })? {
                return Ok(Executed::Replayed(d.outcome));
            }
            let mut tx = self.store.begin();
            let cmd = plan(&mut tx)?;
            drop(tx);
            match self.execute(&cmd) {
                Err(NokvError::PredicateFailed { .. }) if attempt < REPLANS => {}
                other => return other,
            }
        }
    }

    /// `inode` becomes `next`: every dentry's projection follows, the
    /// inode is written, its scope is told, and the command returns it.
    fn changed(
        tx: &mut Tx<'_, E>,
        mount: MountId,
        inode: InodeId,
        next: InodeAttr,
        cmd: &mut MetadataCommand,
    ) -> Result<(), NokvError> {
        Self::reproject(tx, mount, inode, &next, cmd)?;
        cmd.watch.push((
            inode,
            WatchEvent::Changed {
                inode,
                generation: next.generation,
            },
        ));
        cmd.mutations.push(MetaMutation::PutInode(inode, next));
        cmd.outcome.inode = Some(inode);
        Ok(())
    }

    /// Every dentry of `inode` gets its new projection (hard links
    /// included, through the parent index).
    fn reproject(
        tx: &mut Tx<'_, E>,
        mount: MountId,
        inode: InodeId,
        next: &InodeAttr,
        cmd: &mut MetadataCommand,
    ) -> Result<(), NokvError> {
        for (parent, name) in links_of(tx, mount, inode)? {
            if let Some(d) = tx.get(&dentry_key(mount, parent, &name))? {
                cmd.predicates.push(MetaPredicate::Dentry(
                    parent,
                    name.clone(),
                    Some((d.child, d.generation)),
                ));
                cmd.mutations.push(MetaMutation::PutDentry(
                    parent,
                    name,
                    Dentry {
                        projection: Projection::of(next),
                        ..d
                    },
                ));
            }
        }
        Ok(())
    }

    /// One link of `inode` goes: its count drops, and at zero the inode
    /// and its body go (blocks to the GC queue). Returns the inode when
    /// released.
    fn drop_link(
        tx: &mut Tx<'_, E>,
        mount: MountId,
        inode: InodeId,
        cmd: &mut MetadataCommand,
    ) -> Result<Option<InodeId>, NokvError> {
        let attr = tx
            .get(&inode_key(mount, inode))?
            .ok_or_else(|| NokvError::NotFound(format!("inode {inode}")))?;
        cmd.predicates
            .push(MetaPredicate::InodeGeneration(inode, Some(attr.generation)));
        if attr.file_type == FileType::Dir && !Self::is_empty_dir(tx, mount, inode)? {
            return Err(NokvError::NotEmpty(inode));
        }
        if attr.link_count > 1 {
            let next = InodeAttr {
                link_count: attr.link_count - 1,
                generation: attr.generation + 1,
                ..attr
            };
            Self::reproject_except(tx, mount, inode, &next, cmd)?;
            cmd.mutations.push(MetaMutation::PutInode(inode, next));
            return Ok(None);
        }
        if let Some(body) = &attr.body {
            Self::release_body(tx, mount, inode, body, cmd)?;
        }
        cmd.mutations.push(MetaMutation::DeleteInode(inode));
        Ok(Some(inode))
    }

    /// As [`Nokv::reproject`], for the links the command does not delete.
    fn reproject_except(
        tx: &mut Tx<'_, E>,
        mount: MountId,
        inode: InodeId,
        next: &InodeAttr,
        cmd: &mut MetadataCommand,
    ) -> Result<(), NokvError> {
        let deleted: Vec<(InodeId, String)> = cmd
            .mutations
            .iter()
            .filter_map(|m| match m {
                MetaMutation::DeleteDentry(p, n) => Some((*p, n.clone())),
                _ => None,
            })
            .collect();
        let mut extra = MetadataCommand {
            mutations: Vec::new(),
            predicates: Vec::new(),
            ..cmd.clone()
        };
        Self::reproject(tx, mount, inode, next, &mut extra)?;
        for m in extra.mutations {
            if let MetaMutation::PutDentry(p, n, _) = &m
                && deleted.contains(&(*p, n.clone()))
            {
                continue;
            }
            cmd.mutations.push(m);
        }
        cmd.predicates.extend(extra.predicates);
        Ok(())
    }

    /// Deletes a body's manifest rows and queues its blocks for GC.
    fn release_body(
        tx: &mut Tx<'_, E>,
        mount: MountId,
        inode: InodeId,
        body: &BodySummary,
        cmd: &mut MetadataCommand,
    ) -> Result<(), NokvError> {
        let prefix = tuple::pack(&("nokv", "manifest", mount, inode, body.manifest_generation));
        let page = tx.scan::<ManifestKey>(&Scan::range_of(KeyRange::tuple_prefix(&prefix)))?;
        for (k, row) in page.items {
            if let ManifestRow::Chunk(blocks) = row {
                for (i, b) in blocks.into_iter().enumerate() {
                    cmd.mutations.push(MetaMutation::EnqueueGc(
                        inode,
                        k.generation,
                        k.chunk,
                        i as u64,
                        GcEntry {
                            object: b.object,
                            size: b.size,
                            digest: b.digest,
                        },
                    ));
                }
            }
            cmd.mutations
                .push(MetaMutation::DeleteManifest(inode, k.generation, k.chunk));
        }
        Ok(())
    }

    fn is_empty_dir(tx: &mut Tx<'_, E>, mount: MountId, dir: InodeId) -> Result<bool, NokvError> {
        let prefix = tuple::pack(&("nokv", "dentry", mount, dir));
        let page =
            tx.scan::<DentryKey>(&Scan::range_of(KeyRange::tuple_prefix(&prefix)).limit(1))?;
        Ok(page.items.is_empty())
    }
}

impl Mount {
    /// A fresh dentry generation: the next inode number doubles as the
    /// mount's change counter, so generations are unique in the mount.
    fn generation_counter(&self) -> u64 {
        self.next_inode
    }
}

/// `dir` with its generation bumped and mtime set: its entries changed.
fn touched(dir: InodeAttr, now: u64) -> InodeAttr {
    InodeAttr {
        generation: dir.generation + 1,
        mtime_ms: now,
        ..dir
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
        .ok_or_else(|| NokvError::NotFound(format!("inode {dir}")))?;
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

/// `("h", family, key length, key)`: a history row's key before its
/// inverted stamp.
fn history_prefix(family: &str, key: &[u8]) -> Vec<u8> {
    tuple::pack(&("h", family, key.len() as u64, key))
}

/// The commit version in a complete versionstamp.
fn stamp_version(stamp: &Versionstamp) -> u64 {
    let b = stamp.transaction_version();
    let mut v = [0u8; 8];
    v.copy_from_slice(&b[..8]);
    u64::from_be_bytes(v)
}
