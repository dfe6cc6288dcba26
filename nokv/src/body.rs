//! File bodies: written to the blob store before the command that names them, read back, released to the GC queue.

use strata_engine::Engine;
use strata_keys::KeyRange;
use strata_keys::tuple;
use strata_store::{Scan, Tx};

use super::keys::ManifestKey;

#[allow(clippy::wildcard_imports)]
use super::*;

impl<E: Engine> Nokv<E> {
    /// Replaces file `inode`'s body with `bytes`: chunks stored in the
    /// object store first, then one command writing the new manifest
    /// generation and the size, and queueing the old blocks for GC. A
    /// request id already executed returns its first outcome and stores
    /// nothing.
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
        // A replay writes no objects: the first execution's may have been
        // replaced and collected since, and would be stored again with
        // nothing naming them.
        if let Some(outcome) = self.replayed(mount, request_id)? {
            return Ok(Executed::Replayed(outcome));
        }
        let size = self.config.chunk_bytes.max(1);
        // Objects are named by request, so a re-plan, or a retry of a
        // command that did not commit, rewrites the same names and a
        // failed command leaves at most one set behind.
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
                .ok_or_else(|| NokvError::NotFound(Missing::Inode(inode)))?;
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
            return Err(NokvError::NotFound(Missing::Inode(inode)));
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
