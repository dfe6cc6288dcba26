//! File bodies: written to the blob store before the command that names them, read back, released to the GC queue.

use strata_engine::Engine;
use strata_keys::KeyRange;
use strata_keys::tuple;
use strata_store::{Scan, Tx};

use strata_keys::tuple::Versionstamp;
use strata_store::StoreError;

use super::keys::{ManifestKey, Upload, UploadKey};

#[allow(clippy::wildcard_imports)]
use super::*;

impl<E: Engine> Nokv<E> {
    /// Replaces file `inode`'s body with `bytes`: an upload record
    /// committed first, the chunks stored in the object store, then one
    /// command writing the new manifest generation and the size, queueing
    /// the old blocks for GC and deleting the upload record. A request id
    /// already executed returns its first outcome and stores nothing.
    ///
    /// The objects are named after the write's request id and the version
    /// of the commit that recorded the upload, so each call stores its own
    /// (a call that fails cannot take another's objects with it). When the
    /// command does not apply (it fails, or a copy of the request ran
    /// first), the objects are deleted before this returns; when the
    /// process dies first, [`Nokv::collect_uploads`] deletes them once the
    /// upload is older than [`NokvConfig::upload_grace_ms`]. A command that
    /// comes after its upload was collected is refused
    /// ([`NokvError::UploadAbandoned`]).
    ///
    /// # Errors
    /// [`NokvError::NotFound`], [`NokvError::IsADirectory`],
    /// [`NokvError::Blob`], [`NokvError::UploadAbandoned`], a store error.
    pub fn write(
        &self,
        mount: MountId,
        request_id: &str,
        inode: InodeId,
        bytes: &[u8],
    ) -> Result<Executed, NokvError> {
        // A replay writes no objects: the first execution's may have been
        // replaced and collected since, and would be stored again with
        // nothing naming them.
        if let Some(outcome) = self.replayed(mount, request_id)? {
            return Ok(Executed::Replayed(outcome));
        }
        // What the command would refuse anyway is refused before anything
        // is stored (the command checks again).
        match self.getattr(mount, inode)? {
            None => return Err(NokvError::NotFound(Missing::Inode(inode))),
            Some(a) if a.file_type == FileType::Dir => return Err(NokvError::IsADirectory(inode)),
            Some(_) => {}
        }
        let size = self.config.chunk_bytes.max(1);
        let chunks: Vec<&[u8]> = bytes.chunks(size).collect();
        let ((), recorded) = self.store.transact_info(|tx| {
            // Durable before any object is stored, whatever the store's
            // default: a crash must not forget objects already stored.
            tx.set_durability(strata_engine::Durability::Immediate);
            let upload = Upload {
                request_id: request_id.to_owned(),
                inode,
                objects: chunks.len() as u64,
                at_ms: tx.now_ms(),
                abandoned: false,
            };
            tx.put_versionstamped(
                &UploadKey {
                    mount,
                    stamp: Versionstamp::incomplete(0),
                },
                &upload,
            )
        })?;
        // A commit with a write always reports its version.
        let version = recorded
            .ok_or(NokvError::Store(StoreError::NoVersionstamp {
                key_type: "UploadKey",
            }))?
            .version;
        let stamp = upload_stamp(version);
        let names: Vec<String> = (0..chunks.len() as u64)
            .map(|i| object_name(mount, inode, request_id, version, i))
            .collect();
        let uploaded = names
            .iter()
            .zip(&chunks)
            .try_for_each(|(name, chunk)| self.blobs.put(name, chunk).map_err(NokvError::Blob));
        let (written, surely_not_applied) = match uploaded {
            Ok(()) => {
                let written = self.write_command(mount, request_id, inode, bytes, &names, &stamp);
                let not_applied = match &written {
                    Ok(Executed::Applied(..)) => return written,
                    Ok(Executed::Replayed(_)) | Err(NokvError::UploadAbandoned { .. }) => true,
                    Err(_) => false,
                };
                (written, not_applied)
            }
            Err(e) => (Err(e), true),
        };
        // Not applied, or not known to be: the objects go now, unless the
        // command applied (its commit deleted the record). When this
        // upload was collected while it ran (it outlived the grace), the
        // objects stored after the collection are this call's to delete.
        let cleaned = self.abandon_upload(mount, stamp).and_then(|_| {
            if surely_not_applied {
                for name in &names {
                    self.blobs.delete(name).map_err(NokvError::Blob)?;
                }
            }
            Ok(())
        });
        if let Err(e) = cleaned {
            tracing::warn!(
                error = %strata_engine::ErrorChain(&e),
                request_id,
                "the objects of a write not applied were not all deleted; collect_uploads will"
            );
        }
        written
    }

    /// The command of a `write` whose objects, `names`, are stored.
    fn write_command(
        &self,
        mount: MountId,
        request_id: &str,
        inode: InodeId,
        bytes: &[u8],
        names: &[String],
        stamp: &Versionstamp,
    ) -> Result<Executed, NokvError> {
        let size = self.config.chunk_bytes.max(1);
        let objects: Vec<(&String, &[u8])> = names.iter().zip(bytes.chunks(size)).collect();
        self.replanned(mount, request_id, |tx| {
            let now = tx.now_ms();
            let attr = tx
                .get(&inode_key(mount, inode))?
                .ok_or_else(|| NokvError::NotFound(Missing::Inode(inode)))?;
            if attr.file_type == FileType::Dir {
                return Err(NokvError::IsADirectory(inode));
            }
            let mut cmd = Self::command(tx, mount, request_id, CommandKind::Write)?;
            cmd.predicates = vec![
                MetaPredicate::InodeGeneration(inode, Some(attr.generation)),
                MetaPredicate::UploadPending(stamp.clone()),
            ];
            if !strata_engine::fault_point!("upload-record-kept") {
                cmd.mutations.push(MetaMutation::ClearUpload(stamp.clone()));
            }
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
                        object: (*key).clone(),
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
    /// The inode and its manifest are read in one snapshot. A body
    /// replaced meanwhile can have its objects collected by
    /// [`Nokv::drain_gc`] before they are fetched: a read that then finds
    /// an object missing or a manifest gone reads again when the file's
    /// body has changed since (a few times), and reports the problem only
    /// when the body it read is still the file's.
    ///
    /// # Errors
    /// [`NokvError::Body`] for a missing or damaged chunk,
    /// [`NokvError::Blob`], a store error.
    pub fn read(&self, mount: MountId, inode: InodeId) -> Result<Vec<u8>, NokvError> {
        let mut attempts = 0;
        loop {
            attempts += 1;
            let view = self.store.read()?;
            let Some(attr) = view.get(&inode_key(mount, inode))? else {
                return Err(NokvError::NotFound(Missing::Inode(inode)));
            };
            let Some(body) = attr.body else {
                return Ok(Vec::new());
            };
            let prefix = tuple::pack(&("nokv", "manifest", mount, inode, body.manifest_generation));
            let rows = view
                .scan::<ManifestKey>(&Scan::range_of(KeyRange::tuple_prefix(&prefix)))?
                .collect::<Result<Vec<_>, _>>()?;
            drop(view);
            match self.assemble(inode, &body, rows) {
                Err(NokvError::Body { .. })
                    if attempts < READS
                        && self
                            .getattr(mount, inode)?
                            .and_then(|a| a.body)
                            .is_none_or(|now| {
                                now.manifest_generation != body.manifest_generation
                            }) => {}
                other => return other,
            }
        }
    }

    /// The body `body` of `inode` from its manifest `rows`, each object
    /// fetched and checked.
    fn assemble(
        &self,
        inode: InodeId,
        body: &BodySummary,
        rows: Vec<(ManifestKey, ManifestRow)>,
    ) -> Result<Vec<u8>, NokvError> {
        let bad = |problem| NokvError::Body { inode, problem };
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
                            .ok_or_else(|| bad(BodyProblem::MissingObject(b.object.clone())))?;
                        if bytes.len() as u64 != b.size || crc32fast::hash(&bytes) != b.digest {
                            return Err(bad(BodyProblem::ObjectMismatch(b.object.clone())));
                        }
                        out.extend_from_slice(&bytes);
                    }
                    chunk += 1;
                }
                ManifestRow::Summary(_) if k.chunk == BODY_SUMMARY => {}
                _ => return Err(bad(BodyProblem::OutOfPlace(k.chunk))),
            }
        }
        if chunk != body.chunks || out.len() as u64 != body.size {
            return Err(bad(BodyProblem::Size {
                chunks: chunk,
                bytes: out.len() as u64,
                want_chunks: body.chunks,
                want_bytes: body.size,
            }));
        }
        Ok(out)
    }

    /// Deletes the objects of uploads no command will name: those given
    /// up already, and those older than [`NokvConfig::upload_grace_ms`]
    /// by the store's clock (a process that died between its upload and
    /// its command), at most `max` uploads, oldest first. Returns how many
    /// were collected. An upload is marked given up in a commit of its
    /// own before its objects are deleted, so the command that would name
    /// them, if it still comes, is refused ([`NokvError::UploadAbandoned`]).
    ///
    /// # Errors
    /// [`NokvError::Blob`] (the upload stays recorded, given up, and is
    /// collected again), a store error.
    pub fn collect_uploads(&self, mount: MountId, max: usize) -> Result<usize, NokvError> {
        // The uploads due, read first: the snapshot is not held while they
        // are collected (on a server, it would hold a connection).
        let due: Vec<Versionstamp> = {
            let view = self.store.read()?;
            let now = view.now_ms();
            let prefix = tuple::pack(&("nokv", "upload", mount));
            let mut due = Vec::new();
            for row in view.scan::<UploadKey>(&Scan::range_of(KeyRange::tuple_prefix(&prefix)))? {
                if due.len() >= max {
                    break;
                }
                let (key, upload) = row?;
                if upload.abandoned
                    || now.saturating_sub(upload.at_ms) >= self.config.upload_grace_ms
                {
                    due.push(key.stamp);
                }
            }
            due
        };
        let mut done = 0;
        for stamp in due {
            if self.abandon_upload(mount, stamp)? {
                done += 1;
            }
        }
        Ok(done)
    }

    /// Gives up the upload recorded at `stamp`: marks it abandoned (one
    /// commit), deletes its objects, then its record. Returns false when
    /// there is no record (its command applied, or it was collected).
    fn abandon_upload(&self, mount: MountId, stamp: Versionstamp) -> Result<bool, NokvError> {
        let key = UploadKey { mount, stamp };
        let Some(upload) = self.store.transact(|tx| {
            // Durable before any object goes: a crash that lost the mark
            // would let the command that names them apply.
            tx.set_durability(strata_engine::Durability::Immediate);
            let Some(mut upload) = tx.get(&key)? else {
                return Ok::<_, StoreError>(None);
            };
            if !upload.abandoned {
                upload.abandoned = true;
                tx.put(&key, &upload)?;
            }
            Ok(Some(upload))
        })?
        else {
            return Ok(false);
        };
        let version = stamp_version(&key.stamp);
        for i in 0..upload.objects {
            let name = object_name(mount, upload.inode, &upload.request_id, version, i);
            self.blobs.delete(&name).map_err(NokvError::Blob)?;
        }
        self.store.delete(&key)?;
        tracing::debug!(
            mount,
            request_id = upload.request_id,
            objects = upload.objects,
            "upload collected"
        );
        Ok(true)
    }

    /// Deletes a body's manifest rows and queues its blocks for GC.
    pub(crate) fn release_body(
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
}

/// How many times [`Nokv::read`] reads a body that was replaced while it
/// read.
const READS: u32 = 8;

/// The name of object `i` of the write `request_id` to `inode` whose
/// upload was recorded at commit `version`.
fn object_name(mount: MountId, inode: InodeId, request_id: &str, version: u64, i: u64) -> String {
    format!("{mount}/{inode}/{request_id}/{version}/{i}")
}

/// The versionstamp of the one stamped row of the commit at `version`:
/// the version and the row's order in the commit (0), big-endian, then
/// the user version 0.
pub(crate) fn upload_stamp(version: u64) -> Versionstamp {
    let mut tr = [0u8; 10];
    tr[..8].copy_from_slice(&version.to_be_bytes());
    Versionstamp::complete(tr, 0)
}

/// The commit version inside `stamp`.
pub(crate) fn stamp_version(stamp: &Versionstamp) -> u64 {
    let mut v = [0u8; 8];
    v.copy_from_slice(&stamp.transaction_version()[..8]);
    u64::from_be_bytes(v)
}
