//! The namespace checked whole ([`Nokv::check`]): every dentry against its
//! inode and parent-index row, every inode's link count against the names
//! it has, every inode reached from the root, every body's manifest against
//! its summary; in one snapshot.

use std::collections::{BTreeMap, BTreeSet};

use strata_engine::Engine;
use strata_keys::KeyRange;
use strata_keys::tuple;
use strata_store::Scan;

use super::keys::{DentryKey, InodeKey, ManifestKey, MountKey, ParentKey, UploadKey};

#[allow(clippy::wildcard_imports)]
use super::*;

/// Something [`Nokv::check`] found wrong in a mount's namespace.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum NamespaceProblem {
    /// A dentry names an inode that is not stored.
    Dangling {
        /// The directory holding the dentry.
        parent: InodeId,
        /// The dentry's name in that directory.
        name: String,
        /// The inode it names.
        child: InodeId,
    },
    /// A dentry in an inode that is not a stored directory.
    NotInADirectory {
        /// The inode holding the dentry.
        parent: InodeId,
        /// The dentry's name in it.
        name: String,
    },
    /// A dentry whose file type or projection is not its inode's.
    StaleProjection {
        /// The directory holding the dentry.
        parent: InodeId,
        /// The dentry's name in that directory.
        name: String,
    },
    /// A dentry without its parent-index row, or with a row of another
    /// dentry generation.
    NoParentRow {
        /// The directory holding the dentry.
        parent: InodeId,
        /// The dentry's name in that directory.
        name: String,
    },
    /// A parent-index row whose dentry is not there.
    OrphanParentRow {
        /// The inode it says has the name.
        child: InodeId,
        /// The directory it says holds the name.
        parent: InodeId,
        /// The name it gives the inode there.
        name: String,
    },
    /// An inode whose link count is not the number of dentries naming it
    /// (a directory's is one).
    LinkCount {
        /// The inode whose count is off.
        inode: InodeId,
        /// Its recorded link count.
        recorded: u64,
        /// Dentries naming it.
        names: u64,
    },
    /// A directory with more than one name.
    DirectoryNamedTwice {
        /// The directory named twice.
        inode: InodeId,
        /// Dentries naming it.
        names: u64,
    },
    /// An inode the walk from the root does not reach: named by no dentry,
    /// or only from a directory cut off from the root (a cycle).
    Unreachable {
        /// The inode left out of the tree.
        inode: InodeId,
    },
    /// A file's manifest that does not add up to its body's summary.
    Body {
        /// The file.
        inode: InodeId,
        /// What is wrong.
        problem: BodyProblem,
    },
}

impl std::fmt::Display for NamespaceProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Dangling {
                parent,
                name,
                child,
            } => write!(
                f,
                "dentry {parent}/{name:?} names inode {child}, which is not stored"
            ),
            Self::NotInADirectory { parent, name } => write!(
                f,
                "dentry {parent}/{name:?} is in an inode that is not a stored directory"
            ),
            Self::StaleProjection { parent, name } => write!(
                f,
                "dentry {parent}/{name:?} shows another type or projection than its inode's"
            ),
            Self::NoParentRow { parent, name } => write!(
                f,
                "dentry {parent}/{name:?} has no parent-index row of its generation"
            ),
            Self::OrphanParentRow {
                child,
                parent,
                name,
            } => write!(
                f,
                "parent-index row of inode {child} at {parent}/{name:?} without its dentry"
            ),
            Self::LinkCount {
                inode,
                recorded,
                names,
            } => write!(
                f,
                "inode {inode} records {recorded} links and has {names} names"
            ),
            Self::DirectoryNamedTwice { inode, names } => {
                write!(f, "directory {inode} has {names} names")
            }
            Self::Unreachable { inode } => {
                write!(f, "inode {inode} is not reached from the root")
            }
            Self::Body { inode, problem } => write!(f, "inode {inode}'s body: {problem}"),
        }
    }
}

/// What [`Nokv::check`] read and found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NamespaceCheck {
    /// Inodes read (the root included).
    pub inodes: u64,
    /// Dentries read.
    pub dentries: u64,
    /// Everything wrong, in the order found: dentries, parent-index rows,
    /// link counts, the walk from the root, bodies.
    pub problems: Vec<NamespaceProblem>,
    /// Upload records of the mount: objects stored for a write whose
    /// command has not applied yet, or never will (its writer died, or
    /// outlived the grace). Not a problem: [`Nokv::collect_uploads`]
    /// deletes their objects once older than
    /// [`NokvConfig::upload_grace_ms`]; until then the objects are stored
    /// and named by no file.
    pub uploads: u64,
    /// When the oldest of them began, milliseconds since the Unix epoch
    /// (the store's clock); `None` without any.
    pub oldest_upload_ms: Option<u64>,
}

impl NamespaceCheck {
    /// Nothing wrong.
    pub fn is_ok(&self) -> bool {
        self.problems.is_empty()
    }
}

/// What [`Nokv::check_bodies`] read and found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BodyCheck {
    /// Files with a body, read.
    pub files: u64,
    /// Bytes of the bodies that read whole.
    pub bytes: u64,
    /// The files whose body does not read, with why, in inode order.
    pub problems: Vec<(InodeId, BodyProblem)>,
}

impl BodyCheck {
    /// Every body read whole.
    pub fn is_ok(&self) -> bool {
        self.problems.is_empty()
    }
}

impl<E: Engine> Nokv<E> {
    /// Checks mount `mount`'s namespace: see [`check_namespace`].
    ///
    /// # Errors
    /// As [`check_namespace`].
    pub fn check(&self, mount: MountId) -> Result<NamespaceCheck, NokvError> {
        check_namespace(&self.store, mount)
    }

    /// Reads every file body of mount `mount` as [`Nokv::read`] does, each
    /// object fetched from the object store and checked against its
    /// manifest: the scrub [`check_namespace`] does not do. A file whose
    /// body does not read is listed with its [`BodyProblem`]; a file
    /// removed while the check runs is passed over. Holds one body in
    /// memory at a time.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use strata_engine::MemEngine;
    /// use strata_nokv::{BlobStore, BodyProblem, MemBlobs, Nokv, NokvConfig, ROOT};
    /// use strata_store::Store;
    ///
    /// let options = Nokv::<MemEngine>::store_options();
    /// let store = Store::open(MemEngine::open(options.keyspace_specs())?, options)?;
    /// let blobs = Arc::new(MemBlobs::default());
    /// let fs = Nokv::open(store, blobs.clone(), NokvConfig::default())?;
    /// fs.create_mount(1, "")?;
    /// let f = fs.create(1, "c1", ROOT, "notes.txt", 0o644)?.outcome().inode.unwrap();
    /// fs.write(1, "w1", f, b"hello")?;
    /// assert!(fs.check_bodies(1)?.is_ok());
    /// // An object lost from the object store:
    /// blobs.delete(&blobs.keys()[0]).map_err(|e| e.to_string())?;
    /// let check = fs.check_bodies(1)?;
    /// assert!(matches!(&check.problems[..], [(i, BodyProblem::MissingObject(_))] if *i == f));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// [`NokvError::Blob`] (the object store failed), a store error.
    pub fn check_bodies(&self, mount: MountId) -> Result<BodyCheck, NokvError> {
        let files: Vec<InodeId> = self
            .store
            .read()?
            .scan::<InodeKey>(&Scan::range_of(KeyRange::tuple_prefix(&tuple::pack(&(
                "nokv", "inode", mount,
            )))))?
            .filter_map(|r| match r {
                Ok((k, attr)) => attr.body.is_some().then_some(Ok(k.inode)),
                Err(e) => Some(Err(e)),
            })
            .collect::<Result<_, _>>()?;
        let mut out = BodyCheck::default();
        for inode in files {
            match self.read(mount, inode) {
                Ok(bytes) => {
                    out.files += 1;
                    out.bytes += bytes.len() as u64;
                }
                Err(NokvError::Body { inode, problem }) => {
                    out.files += 1;
                    out.problems.push((inode, problem));
                }
                Err(NokvError::NotFound(_)) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(out)
    }
}

/// The mounts stored in `store` (opened with [`Nokv::declare`]d options),
/// in order.
///
/// # Errors
/// A store error, or a mount row that does not decode.
pub fn mounts<E: Engine>(store: &Store<E>) -> Result<Vec<MountId>, NokvError> {
    let scan = Scan::range_of(KeyRange::tuple_prefix(&tuple::pack(&("nokv", "mount"))));
    Ok(store
        .read()?
        .scan::<MountKey>(&scan)?
        .map(|r| r.map(|(k, _)| k.mount))
        .collect::<Result<_, _>>()?)
}

/// Checks mount `mount`'s namespace in `store` (opened with
/// [`Nokv::declare`]d options) in one snapshot: each dentry names
/// a stored inode of its file type, shows its inode's projection, sits
/// in a stored directory and has its parent-index row (and each row its
/// dentry); each inode's link count is its names (a directory has one);
/// every inode is reached from the root; each file's manifest adds up
/// to its body's summary. Also counts the mount's upload records (not
/// problems; see [`NamespaceCheck::uploads`]). Objects in the object
/// store are not read ([`Nokv::read`] checks them). Holds the mount's
/// inodes, dentries and parent rows in memory.
///
/// # Errors
/// A store error, or a row that does not decode.
#[allow(clippy::too_many_lines)] // one pass per family, in order
pub fn check_namespace<E: Engine>(
    store: &Store<E>,
    mount: MountId,
) -> Result<NamespaceCheck, NokvError> {
    let view = store.read()?;
    let family =
        |name: &str| Scan::range_of(KeyRange::tuple_prefix(&tuple::pack(&("nokv", name, mount))));
    let inodes: BTreeMap<InodeId, InodeAttr> = view
        .scan::<InodeKey>(&family("inode"))?
        .map(|r| r.map(|(k, v)| (k.inode, v)))
        .collect::<Result<_, _>>()?;
    let dentries: Vec<(DentryKey, Dentry)> = view
        .scan::<DentryKey>(&family("dentry"))?
        .collect::<Result<_, _>>()?;
    let parents: BTreeMap<(InodeId, InodeId, String), u64> = view
        .scan::<ParentKey>(&family("parent"))?
        .map(|r| r.map(|(k, v)| ((k.child, k.parent, k.name), v.dentry_generation)))
        .collect::<Result<_, _>>()?;
    let mut out = NamespaceCheck {
        inodes: inodes.len() as u64,
        dentries: dentries.len() as u64,
        ..NamespaceCheck::default()
    };
    for row in view.scan::<UploadKey>(&family("upload"))? {
        let (_, upload) = row?;
        out.uploads += 1;
        out.oldest_upload_ms = Some(
            out.oldest_upload_ms
                .map_or(upload.at_ms, |at| at.min(upload.at_ms)),
        );
    }
    let mut names: BTreeMap<InodeId, u64> = BTreeMap::new();
    let mut children: BTreeMap<InodeId, Vec<InodeId>> = BTreeMap::new();
    let mut seen_links: BTreeSet<(InodeId, InodeId, String)> = BTreeSet::new();
    for (k, d) in &dentries {
        let (parent, name) = (k.parent, k.name.clone());
        match inodes.get(&parent) {
            Some(p) if p.file_type == FileType::Dir => {}
            _ => out.problems.push(NamespaceProblem::NotInADirectory {
                parent,
                name: name.clone(),
            }),
        }
        match inodes.get(&d.child) {
            None => out.problems.push(NamespaceProblem::Dangling {
                parent,
                name: name.clone(),
                child: d.child,
            }),
            Some(attr) => {
                *names.entry(d.child).or_default() += 1;
                children.entry(parent).or_default().push(d.child);
                if attr.file_type != d.file_type || Projection::of(attr) != d.projection {
                    out.problems.push(NamespaceProblem::StaleProjection {
                        parent,
                        name: name.clone(),
                    });
                }
            }
        }
        if parents.get(&(d.child, parent, name.clone())) != Some(&d.generation) {
            out.problems.push(NamespaceProblem::NoParentRow {
                parent,
                name: name.clone(),
            });
        }
        seen_links.insert((d.child, parent, name));
    }
    for (child, parent, name) in parents.keys() {
        if !seen_links.contains(&(*child, *parent, name.clone())) {
            out.problems.push(NamespaceProblem::OrphanParentRow {
                child: *child,
                parent: *parent,
                name: name.clone(),
            });
        }
    }
    for (&inode, attr) in &inodes {
        let n = names.get(&inode).copied().unwrap_or(0);
        if inode == ROOT {
            continue;
        }
        if attr.file_type == FileType::Dir && n > 1 {
            out.problems
                .push(NamespaceProblem::DirectoryNamedTwice { inode, names: n });
        } else if n > 0 && attr.link_count != n {
            out.problems.push(NamespaceProblem::LinkCount {
                inode,
                recorded: attr.link_count,
                names: n,
            });
        }
    }
    // The walk from the root, each directory entered once.
    let mut reached = BTreeSet::from([ROOT]);
    let mut stack = vec![ROOT];
    while let Some(dir) = stack.pop() {
        for &child in children.get(&dir).map_or(&[][..], Vec::as_slice) {
            let is_dir = inodes
                .get(&child)
                .is_some_and(|a| a.file_type == FileType::Dir);
            if reached.insert(child) && is_dir {
                stack.push(child);
            }
        }
    }
    for &inode in inodes.keys() {
        if !reached.contains(&inode) {
            out.problems.push(NamespaceProblem::Unreachable { inode });
        }
    }
    for (&inode, attr) in &inodes {
        let Some(body) = &attr.body else { continue };
        let prefix = tuple::pack(&("nokv", "manifest", mount, inode, body.manifest_generation));
        let (mut chunks, mut bytes) = (0u64, 0u64);
        let mut problem = None;
        for row in view.scan::<ManifestKey>(&Scan::range_of(KeyRange::tuple_prefix(&prefix)))? {
            let (k, row) = row?;
            match row {
                ManifestRow::Chunk(blocks) if k.chunk == chunks => {
                    bytes += blocks.iter().map(|b| b.size).sum::<u64>();
                    chunks += 1;
                }
                ManifestRow::Summary(_) if k.chunk == BODY_SUMMARY => {}
                _ => {
                    problem = Some(BodyProblem::OutOfPlace(k.chunk));
                    break;
                }
            }
        }
        let problem = problem.or_else(|| {
            (chunks != body.chunks || bytes != body.size).then_some(BodyProblem::Size {
                chunks,
                bytes,
                want_chunks: body.chunks,
                want_bytes: body.size,
            })
        });
        if let Some(problem) = problem {
            out.problems.push(NamespaceProblem::Body { inode, problem });
        }
    }
    Ok(out)
}
