//! NoKV's record families: every key a tuple under `("nokv", family,
//! mount, ...)`, ordered so that each listing the document implies is one
//! range scan (a directory's entries, an inode's links and manifest, a
//! scope's watch events in commit order, the GC queue in enqueue order).

use serde::{Deserialize, Serialize};
use strata_keys::tuple::Versionstamp;
use strata_keys::tuple_key;

/// A mount's id.
pub type MountId = u64;
/// An inode's id within its mount.
pub type InodeId = u64;
/// The root directory's inode.
pub const ROOT: InodeId = 1;
/// The chunk index of a manifest's body summary row.
pub const BODY_SUMMARY: u64 = u64::MAX;

/// What an inode is: the document's file types this module handles.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum FileType {
    /// A directory.
    Dir,
    /// A regular file.
    File,
}

/// `mount`: options, root inode, generation, and the next inode number.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mount {
    /// The root directory's inode.
    pub root: InodeId,
    /// Bumped when the mount is reset.
    pub generation: u64,
    /// The next inode number to hand out.
    pub next_inode: InodeId,
    /// Free-form mount options.
    pub options: String,
}

/// A file body's summary: its size and chunking.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BodySummary {
    /// The manifest generation holding the chunks.
    pub manifest_generation: u64,
    /// Bytes of the body.
    pub size: u64,
    /// Chunks of the body.
    pub chunks: u64,
}

/// `inode_current`: attributes, link count, body summary, generation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InodeAttr {
    /// Directory or file.
    pub file_type: FileType,
    /// Permission bits.
    pub mode: u32,
    /// Bytes of the body (0 for a directory).
    pub size: u64,
    /// Last change of the body, milliseconds since the Unix epoch.
    pub mtime_ms: u64,
    /// Dentries naming the inode.
    pub link_count: u64,
    /// Bumped by every change of the inode.
    pub generation: u64,
    /// The current body, for a written file.
    pub body: Option<BodySummary>,
}

/// The part of an inode a dentry carries, so that ReadDirPlus is one
/// prefix scan of the dentries.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Projection {
    /// Permission bits.
    pub mode: u32,
    /// Bytes of the body.
    pub size: u64,
    /// Last change of the body.
    pub mtime_ms: u64,
    /// Dentries naming the inode.
    pub link_count: u64,
}

impl Projection {
    /// The projection of `attr`.
    pub fn of(attr: &InodeAttr) -> Self {
        Self {
            mode: attr.mode,
            size: attr.size,
            mtime_ms: attr.mtime_ms,
            link_count: attr.link_count,
        }
    }
}

/// `dentry_current`: child inode, file type, dentry generation, inode
/// projection.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Dentry {
    /// The inode it names.
    pub child: InodeId,
    /// Its type.
    pub file_type: FileType,
    /// Bumped whenever the name is bound to another inode (or rebound).
    pub generation: u64,
    /// The inode's attributes as of the last change.
    pub projection: Projection,
}

/// A chunk's block descriptor in the object store.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Block {
    /// The object's key.
    pub object: String,
    /// Bytes.
    pub size: u64,
    /// CRC-32 of the bytes.
    pub digest: u32,
}

/// `manifest_current`: the body summary at [`BODY_SUMMARY`], or a
/// chunk's blocks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ManifestRow {
    /// The summary row.
    Summary(BodySummary),
    /// A chunk's blocks.
    Chunk(Vec<Block>),
}

/// `parent_index`: link metadata.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ParentLink {
    /// The dentry's generation when the link was made.
    pub dentry_generation: u64,
}

/// `path_index`: a derived accelerator, verified before use.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PathEntry {
    /// The inode the path named when indexed.
    pub inode: InodeId,
    /// The parent directory of the last component.
    pub parent: InodeId,
    /// The last component's dentry generation when indexed.
    pub dentry_generation: u64,
    /// The mount generation when indexed.
    pub root_epoch: u64,
    /// Every component from the root: its directory, name and dentry
    /// generation when indexed (verification reads each dentry).
    pub components: Vec<(InodeId, String, u64)>,
}

/// What a watcher of a scope is told, in commit order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum WatchEvent {
    /// `name` in `parent` now names `child`.
    Bound {
        /// The directory.
        parent: InodeId,
        /// The entry's name in that directory.
        name: String,
        /// The inode it names.
        child: InodeId,
    },
    /// `name` in `parent` names nothing now.
    Unbound {
        /// The directory.
        parent: InodeId,
        /// The entry's name in that directory.
        name: String,
    },
    /// An inode's attributes or body changed.
    Changed {
        /// The inode whose attributes or body changed.
        inode: InodeId,
        /// Its new generation.
        generation: u64,
    },
}

/// A watch log row: the event and when it was written (for retention by
/// age).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WatchRecord {
    /// Milliseconds since the Unix epoch, by the store's clock.
    pub at_ms: u64,
    /// What happened.
    pub event: WatchEvent,
}

/// `snapshot_pin`: a snapshot with a lease.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapshotPin {
    /// The root it was taken of.
    pub root: InodeId,
    /// The version reads through the pin see (the pin's own commit), once
    /// known.
    pub read_version: Option<u64>,
    /// When the lease ends, milliseconds since the Unix epoch.
    pub lease_until_ms: u64,
}

/// `gc_queue`: a block no longer referenced, to delete from the object
/// store.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GcEntry {
    /// The object's key.
    pub object: String,
    /// Bytes.
    pub size: u64,
    /// CRC-32 of the bytes.
    pub digest: u32,
}

/// An upload under way: a body's objects being stored before the
/// `write` command that names them. Recorded before the first object is
/// stored and deleted by that command's commit, so a record still there
/// names objects nothing may ever reference: a write that failed, or a
/// process that died between its upload and its command
/// ([`Nokv::collect_uploads`](super::Nokv::collect_uploads) deletes them).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Upload {
    /// The write's request id.
    pub request_id: String,
    /// The file written.
    pub inode: InodeId,
    /// How many objects: `0..objects` in their names.
    pub objects: u64,
    /// When the upload began, milliseconds since the Unix epoch (the
    /// store's clock).
    pub at_ms: u64,
    /// Given up: its objects are being deleted, and the command that
    /// would name them is refused.
    pub abandoned: bool,
}

/// A command's recorded outcome, for replays.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Dedupe {
    /// What the command returned.
    pub outcome: super::Outcome,
    /// When it ran, milliseconds since the Unix epoch (for retention).
    pub at_ms: u64,
    /// The version the command's plan was read at
    /// ([`MetadataCommand::read_version`](super::MetadataCommand::read_version)):
    /// pruning the row raises the mount's [`DedupeFloor`] past it.
    pub read_version: u64,
}

/// A dedupe row as version 1 wrote it (no plan version): read as plan
/// version 0, so pruning it does not raise the floor.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DedupeV1 {
    /// What the command returned.
    pub outcome: super::Outcome,
    /// When it ran.
    pub at_ms: u64,
}

impl From<DedupeV1> for Dedupe {
    fn from(old: DedupeV1) -> Self {
        Self {
            outcome: old.outcome,
            at_ms: old.at_ms,
            read_version: 0,
        }
    }
}

/// Below which plan version a mount refuses commands
/// ([`NokvError::PlanExpired`](super::NokvError::PlanExpired)): one more
/// than the highest plan version of a pruned dedupe row, so a replay whose
/// row is gone can never apply again.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct DedupeFloor {
    /// Commands read at a version below this are refused.
    pub below: u64,
}

strata_codec::value!(Mount: postcard, version = 1);
strata_codec::value!(InodeAttr: postcard, version = 1);
strata_codec::value!(Dentry: postcard, version = 1);
strata_codec::value!(ManifestRow: postcard, version = 1);
strata_codec::value!(ParentLink: postcard, version = 1);
strata_codec::value!(PathEntry: postcard, version = 1);
strata_codec::value!(WatchRecord: postcard, version = 1);
strata_codec::value!(SnapshotPin: postcard, version = 1);
strata_codec::value!(GcEntry: postcard, version = 1);
strata_codec::value!(DedupeV1: postcard, version = 1);
strata_codec::value!(Dedupe: postcard, version = 2, migrate { 1 => DedupeV1 });
strata_codec::value!(DedupeFloor: postcard, version = 1);
strata_codec::value!(Upload: postcard, version = 1);

/// `mount`: `("nokv", "mount", mount)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MountKey {
    /// The mount the record belongs to.
    pub mount: MountId,
}
/// `inode_current`: `("nokv", "inode", mount, inode)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InodeKey {
    /// The mount the record belongs to.
    pub mount: MountId,
    /// The inode the record describes.
    pub inode: InodeId,
}
/// `dentry_current`: `("nokv", "dentry", mount, parent, name)`: a
/// directory's entries are one prefix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DentryKey {
    /// The mount the record belongs to.
    pub mount: MountId,
    /// The directory.
    pub parent: InodeId,
    /// The entry's name.
    pub name: String,
}
/// `manifest_current`: `("nokv", "manifest", mount, inode, generation,
/// chunk)`, the summary at chunk [`BODY_SUMMARY`], last.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManifestKey {
    /// The mount the record belongs to.
    pub mount: MountId,
    /// The file.
    pub inode: InodeId,
    /// The manifest generation.
    pub generation: u64,
    /// The chunk, or [`BODY_SUMMARY`].
    pub chunk: u64,
}
/// `parent_index`: `("nokv", "parent", mount, child, parent, name)`: an
/// inode's links are one prefix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParentKey {
    /// The mount the record belongs to.
    pub mount: MountId,
    /// The inode linked.
    pub child: InodeId,
    /// The directory holding the link.
    pub parent: InodeId,
    /// The link's name.
    pub name: String,
}
/// `path_index`: `("nokv", "path", mount, workspace, normalized_path)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathKey {
    /// The mount the record belongs to.
    pub mount: MountId,
    /// The workspace or channel.
    pub workspace: String,
    /// The normalized path (`/a/b`).
    pub path: String,
}
/// `watch_log`: `("nokv", "watch", mount, scope, commit versionstamp)`,
/// the stamp's user version numbering the commit's events.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WatchKey {
    /// The mount the record belongs to.
    pub mount: MountId,
    /// The scope watched (a directory inode).
    pub scope: InodeId,
    /// The commit's versionstamp and the event's number in it.
    pub stamp: Versionstamp,
}
/// `snapshot_pin`: `("nokv", "pin", mount, snapshot_id)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PinKey {
    /// The mount the record belongs to.
    pub mount: MountId,
    /// The snapshot's id, chosen by its creator.
    pub snapshot: String,
}
/// `gc_queue`: `("nokv", "gc", mount, enqueue versionstamp, inode,
/// generation, chunk, block)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GcKey {
    /// The mount the record belongs to.
    pub mount: MountId,
    /// The enqueuing commit.
    pub stamp: Versionstamp,
    /// The file.
    pub inode: InodeId,
    /// Its manifest generation.
    pub generation: u64,
    /// The chunk the block belongs to.
    pub chunk: u64,
    /// The block within the chunk.
    pub block: u64,
}
/// `upload`: `("nokv", "upload", mount, versionstamp)`, an [`Upload`]
/// under way, keyed by the commit that recorded it (whose version is in
/// its objects' names).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UploadKey {
    /// The mount the record belongs to.
    pub mount: MountId,
    /// The recording commit.
    pub stamp: Versionstamp,
}
/// A mount's dedupe floor: `("nokv", "dedupe-floor", mount)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DedupeFloorKey {
    /// The mount whose commands the floor applies to.
    pub mount: MountId,
}
/// Command dedupe: `("nokv", "dedupe", mount, request_id)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DedupeKey {
    /// The mount the record belongs to.
    pub mount: MountId,
    /// The command's request id.
    pub request: String,
}

tuple_key! {
    MountKey -> Mount = ("nokv", "mount", {mount});
    InodeKey -> InodeAttr = ("nokv", "inode", {mount}, {inode});
    DentryKey -> Dentry = ("nokv", "dentry", {mount}, {parent}, {name});
    ManifestKey -> ManifestRow = ("nokv", "manifest", {mount}, {inode}, {generation}, {chunk});
    ParentKey -> ParentLink = ("nokv", "parent", {mount}, {child}, {parent}, {name});
    PathKey -> PathEntry = ("nokv", "path", {mount}, {workspace}, {path});
    WatchKey -> WatchRecord = ("nokv", "watch", {mount}, {scope}, {stamp});
    PinKey -> SnapshotPin = ("nokv", "pin", {mount}, {snapshot});
    GcKey -> GcEntry = ("nokv", "gc", {mount}, {stamp}, {inode}, {generation}, {chunk}, {block});
    DedupeKey -> Dedupe = ("nokv", "dedupe", {mount}, {request});
    UploadKey -> Upload = ("nokv", "upload", {mount}, {stamp});
    DedupeFloorKey -> DedupeFloor = ("nokv", "dedupe-floor", {mount});
}
