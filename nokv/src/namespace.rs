//! The namespace: lookups, directories and files created, attributes set, links made and removed, renames planned and run.

use strata_engine::Engine;
use strata_keys::KeyRange;
use strata_keys::tuple;
use strata_store::{Scan, Tx};

use super::keys::DentryKey;

#[allow(clippy::wildcard_imports)]
use super::*;

impl Mount {
    /// A fresh dentry generation: the next inode number doubles as the
    /// mount's change counter, so generations are unique in the mount.
    pub(crate) fn generation_counter(&self) -> u64 {
        self.next_inode
    }
}

impl<E: Engine> Nokv<E> {
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

    pub(crate) fn new_node(
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
            Self::touch_dir(tx, mount, parent, dir, now, &mut cmd)?;
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
                .ok_or_else(|| NokvError::NotFound(Missing::Inode(inode)))?;
            let mut cmd = Self::command(tx, mount, request_id, CommandKind::SetAttr)?;
            cmd.predicates = vec![MetaPredicate::InodeGeneration(inode, Some(attr.generation))];
            if strata_engine::fault_point!("setattr-without-generation") {
                cmd.predicates.clear();
            }
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
                .ok_or_else(|| NokvError::NotFound(Missing::Inode(inode)))?;
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
            Self::touch_dir(tx, mount, parent, dir, now, &mut cmd)?;
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
            let d = tx.get(&dentry_key(mount, parent, name))?.ok_or_else(|| {
                NokvError::NotFound(Missing::Entry {
                    parent,
                    name: name.to_owned(),
                })
            })?;
            let mut cmd = Self::command(tx, mount, request_id, CommandKind::Unlink)?;
            cmd.predicates = vec![
                MetaPredicate::InodeGeneration(parent, Some(dir.generation)),
                MetaPredicate::Dentry(parent, name.to_owned(), Some((d.child, d.generation))),
            ];
            cmd.mutations.extend([
                MetaMutation::DeleteDentry(parent, name.to_owned()),
                MetaMutation::DeleteParent(d.child, parent, name.to_owned()),
            ]);
            Self::touch_dir(tx, mount, parent, dir, now, &mut cmd)?;
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
        if strata_engine::fault_point!("rename-stale-predicate") {
            planted::keep_only_counter(&mut cmd);
        }
        Ok(cmd)
    }

    #[allow(clippy::too_many_lines)] // the rename's cases, in order
    pub(crate) fn rename_plan(
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
            let src = tx.get(&dentry_key(mount, from, name))?.ok_or_else(|| {
                NokvError::NotFound(Missing::Entry {
                    parent: from,
                    name: name.to_owned(),
                })
            })?;
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
                    let d = tx.get(&dentry_key(mount, p, &n))?.ok_or_else(|| {
                        NokvError::NotFound(Missing::Entry {
                            parent: p,
                            name: n.clone(),
                        })
                    })?;
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
                        .ok_or_else(|| NokvError::NotFound(Missing::Inode(d.child)))?;
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
            // What the moved name shows: the file's attributes, which
            // change only when the target was another name of it.
            let mut projection = src.projection.clone();
            if let Some(d) = &dst {
                cmd.mutations
                    .push(MetaMutation::DeleteParent(d.child, to, to_name.to_owned()));
                if d.child == src.child {
                    // The file loses one of its two names.
                    let attr = tx
                        .get(&inode_key(mount, d.child))?
                        .ok_or_else(|| NokvError::NotFound(Missing::Inode(d.child)))?;
                    cmd.predicates.push(MetaPredicate::InodeGeneration(
                        d.child,
                        Some(attr.generation),
                    ));
                    let next = InodeAttr {
                        link_count: attr.link_count - 1,
                        generation: attr.generation + 1,
                        ..attr
                    };
                    // Its other names show the new link count (not these
                    // two: the source goes, the target is rewritten below
                    // with it).
                    let skip = [(from, name.to_owned()), (to, to_name.to_owned())];
                    Self::reproject_skipping(tx, mount, d.child, &next, &mut cmd, &skip)?;
                    projection = Projection::of(&next);
                    cmd.mutations.push(MetaMutation::PutInode(d.child, next));
                } else {
                    cmd.outcome.released = Self::drop_link(tx, mount, d.child, &mut cmd)?;
                }
            }
            let moved = Dentry {
                generation,
                projection,
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
            ]);
            Self::touch_dir(tx, mount, from, src_dir, now, &mut cmd)?;
            if to != from {
                Self::touch_dir(tx, mount, to, dst_dir, now, &mut cmd)?;
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

    pub(crate) fn is_empty_dir(
        tx: &mut Tx<'_, E>,
        mount: MountId,
        dir: InodeId,
    ) -> Result<bool, NokvError> {
        let prefix = tuple::pack(&("nokv", "dentry", mount, dir));
        let page =
            tx.scan::<DentryKey>(&Scan::range_of(KeyRange::tuple_prefix(&prefix)).limit(1))?;
        Ok(page.items.is_empty())
    }
}
