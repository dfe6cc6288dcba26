//! Metadata commands: planned against a read version, executed in one commit with their dedupe row, replanned when overtaken.

use strata_engine::Engine;
use strata_keys::Key;
use strata_keys::tuple::Versionstamp;
use strata_store::{StoreError, Tx};

use super::keys::{
    Dedupe, DedupeFloorKey, DedupeKey, GcKey, ManifestKey, MountKey, ParentKey, PathKey, UploadKey,
    WatchKey,
};

#[allow(clippy::wildcard_imports)]
use super::*;

pub(crate) const REPLANS: usize = 4;

/// `dir` with its generation bumped and mtime set: its entries changed.
pub(crate) fn touched(dir: InodeAttr, now: u64) -> InodeAttr {
    InodeAttr {
        generation: dir.generation + 1,
        mtime_ms: now,
        ..dir
    }
}

impl<E: Engine> Nokv<E> {
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
        if strata_engine::fault_point!("dedupe-separate-commit")
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

    pub(crate) fn execute_in(
        &self,
        tx: &mut Tx<'_, E>,
        cmd: &MetadataCommand,
    ) -> Result<Executed, NokvError> {
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
            let fail = || NokvError::PredicateFailed {
                index,
                predicate: p.clone(),
            };
            match p {
                MetaPredicate::InodeGeneration(inode, want) => {
                    let got = tx.get(&inode_key(mount, *inode))?.map(|a| a.generation);
                    if got != *want {
                        return Err(fail());
                    }
                }
                MetaPredicate::Dentry(parent, name, want) => {
                    let got = tx
                        .get(&dentry_key(mount, *parent, name))?
                        .map(|d| (d.child, d.generation));
                    if got != *want {
                        return Err(fail());
                    }
                }
                MetaPredicate::MountCounter(next) => {
                    let got = tx.get(&MountKey { mount })?.map(|m| m.next_inode);
                    if got != Some(*next) {
                        return Err(fail());
                    }
                }
                // Not a re-plan's matter: a collected upload stays so.
                MetaPredicate::UploadPending(stamp) => {
                    let key = UploadKey {
                        mount,
                        stamp: stamp.clone(),
                    };
                    if tx.get(&key)?.is_none_or(|u| u.abandoned) {
                        return Err(NokvError::UploadAbandoned {
                            request_id: cmd.request_id.clone(),
                        });
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
        if !strata_engine::fault_point!("dedupe-separate-commit") {
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

    pub(crate) fn apply(
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
            MetaMutation::ClearUpload(stamp) => tx.delete(&UploadKey {
                mount,
                stamp: stamp.clone(),
            })?,
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
    pub(crate) fn remember<K>(
        &self,
        tx: &mut Tx<'_, E>,
        key: &K,
        pinned: bool,
    ) -> Result<(), NokvError>
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

    /// A command of `kind` planned at this transaction's snapshot.
    pub(crate) fn command(
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
    /// The first outcome of `request_id` when it was executed (within the
    /// dedupe retention).
    pub(crate) fn replayed(
        &self,
        mount: MountId,
        request_id: &str,
    ) -> Result<Option<Outcome>, NokvError> {
        Ok(self
            .store
            .get(&DedupeKey {
                mount,
                request: request_id.to_owned(),
            })?
            .map(|d| d.outcome))
    }

    pub(crate) fn replanned(
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
            // created exists now). The dedupe row is read in the plan's
            // snapshot, so a first execution that commits meanwhile (the
            // same request sent twice at once) is seen with its effects,
            // not met as an `Exists` or a `NotFound` of the plan.
            let mut tx = self.store.begin();
            let dedupe = DedupeKey {
                mount,
                request: request_id.to_owned(),
            };
            if let Some(d) = tx.snapshot_get(&dedupe)? {
                return Ok(Executed::Replayed(d.outcome));
            }
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
    pub(crate) fn changed(
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

    /// Directory `dir` (read as `attr`) has an entry added or removed:
    /// its generation and mtime move on ([`touched`]) and its dentry's
    /// projection follows, so that its parent's `readdirplus` shows what
    /// `getattr` does.
    pub(crate) fn touch_dir(
        tx: &mut Tx<'_, E>,
        mount: MountId,
        dir: InodeId,
        attr: InodeAttr,
        now: u64,
        cmd: &mut MetadataCommand,
    ) -> Result<(), NokvError> {
        let next = touched(attr, now);
        Self::reproject_except(tx, mount, dir, &next, cmd)?;
        cmd.mutations.push(MetaMutation::PutInode(dir, next));
        Ok(())
    }

    /// Every dentry of `inode` gets its new projection (hard links
    /// included, through the parent index).
    pub(crate) fn reproject(
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
    pub(crate) fn drop_link(
        tx: &mut Tx<'_, E>,
        mount: MountId,
        inode: InodeId,
        cmd: &mut MetadataCommand,
    ) -> Result<Option<InodeId>, NokvError> {
        let attr = tx
            .get(&inode_key(mount, inode))?
            .ok_or_else(|| NokvError::NotFound(Missing::Inode(inode)))?;
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
    pub(crate) fn reproject_except(
        tx: &mut Tx<'_, E>,
        mount: MountId,
        inode: InodeId,
        next: &InodeAttr,
        cmd: &mut MetadataCommand,
    ) -> Result<(), NokvError> {
        Self::reproject_skipping(tx, mount, inode, next, cmd, &[])
    }

    /// As [`Nokv::reproject`], for the links the command does not delete
    /// and not those in `skip`.
    pub(crate) fn reproject_skipping(
        tx: &mut Tx<'_, E>,
        mount: MountId,
        inode: InodeId,
        next: &InodeAttr,
        cmd: &mut MetadataCommand,
        skip: &[(InodeId, String)],
    ) -> Result<(), NokvError> {
        let deleted: Vec<(InodeId, String)> = cmd
            .mutations
            .iter()
            .filter_map(|m| match m {
                MetaMutation::DeleteDentry(p, n) => Some((*p, n.clone())),
                _ => None,
            })
            .chain(skip.iter().cloned())
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
}
