//! The consume loop: a lease on the outbox consumer, entries polled and
//! applied, the index committed with its checkpoint, then acknowledged.

use std::sync::atomic::Ordering;

use strata_codec::Value;
use strata_engine::Engine;
use strata_keys::Key;
use strata_outbox::{Lease, OutboxError, Position};
use tantivy::directory::Directory;
use tantivy::indexer::UserOperation;
use tantivy::{TantivyDocument, Term};

use crate::SearchError;
use crate::change::{Change, body_hash};
use crate::spec::{Fields, IndexSpec};
use strata_engine::ErrorChain;

#[allow(clippy::wildcard_imports)]
use super::*;

/// The document of one row.
pub(crate) fn document<K: Key>(
    spec: &IndexSpec<K>,
    fields: &Fields,
    key_bytes: &[u8],
    key: &K,
    value: &K::Value,
    body: &[u8],
    version: u64,
) -> Result<TantivyDocument, SearchError> {
    let mapped = (spec.map)(key, value);
    spec.check_document(&mapped)?;
    // Room for every value at once (tantivy copies them into one buffer,
    // which would otherwise grow several times a document).
    let bytes = key_bytes.len()
        + mapped
            .text
            .iter()
            .chain(&mapped.strings)
            .map(|(_, v)| v.len() + 16)
            .sum::<usize>()
        + 64;
    let mut doc = TantivyDocument::with_capacity(bytes);
    doc.add_bytes(fields.key, key_bytes);
    doc.add_u64(fields.hash, body_hash(body));
    doc.add_u64(fields.version, version);
    // Every field the document names is declared (checked above).
    for (name, text) in &mapped.text {
        if let Some(i) = spec.text.iter().position(|t| t.name == *name) {
            doc.add_text(fields.text[i].0, text.as_ref());
        }
    }
    for (name, s) in &mapped.strings {
        if let Some(i) = spec.strings.iter().position(|f| f == name) {
            doc.add_text(fields.strings[i], s.as_ref());
        }
    }
    if let (Some(ms), Some(field)) = (mapped.time_ms, fields.time) {
        doc.add_u64(field, ms);
    }
    Ok(doc)
}

/// A change to apply at an entry's position; `None`: an entry naming no
/// row, passed.
pub(crate) type Fed = (Position, Option<Change>);

/// Operations handed to tantivy's indexing thread at once.
pub(crate) const HAND_OVER: usize = 32;

impl<E, K> Indexer<'_, '_, E, K>
where
    E: Engine,
    K: Key + 'static,
    K::Value: Value,
{
    pub(crate) fn lease(&mut self) -> Result<Lease, SearchError> {
        let now = self.clock.now_ms();
        match &self.lease.current {
            // Renewed with a margin: an expired lease is refused at the
            // acknowledgement, after the index committed.
            Some(l) if l.expires_ms() > now.saturating_add(1_000) => Ok(l.clone()),
            held => {
                // This indexer's own lease is renewed; a lease it lost (or
                // never had) is acquired, and refused while another runs,
                // whatever that one's holder name.
                let renewed = match held {
                    Some(l) => match self.outbox.renew(l) {
                        Ok(l) => Some(l),
                        Err(OutboxError::StaleLease { .. }) => None,
                        Err(e) => return Err(e.into()),
                    },
                    None => None,
                };
                let l = match renewed {
                    Some(l) => l,
                    None => {
                        self.outbox
                            .acquire(&self.source, &self.spec.name, &self.config.holder)?
                    }
                };
                self.lease.current = Some(l.clone());
                Ok(l)
            }
        }
    }

    /// Polls one batch of durable entries, applies it, and commits when the
    /// cadence says so. An entry that can never become a document (its
    /// value does not decode, or the mapping names an undeclared field) is
    /// moved to the outbox's dead letters of the index's consumer (listed
    /// by `strata outbox DB dead search.NAME NAME`, counted by the outbox's
    /// dead-letter metric) and indexing goes on.
    ///
    /// # Errors
    /// Outbox, store and tantivy failures.
    pub fn step(&mut self) -> Result<Step, SearchError> {
        let lease = self.lease()?;
        // Entries up to `applied` are in the writer (committed or not):
        // read after them. After a restart `applied` is the committed
        // checkpoint, and entries the outbox has not seen acknowledged come
        // again only if they are above it.
        let mut late_ack = false;
        let acknowledged = self.outbox.checkpoint(&self.source, &self.spec.name)?;
        if acknowledged < self.checkpoint && self.applied == self.checkpoint {
            // A crash (or a failure) between the index commit and the
            // acknowledgement: acknowledge now.
            self.acknowledge(&lease)?;
            late_ack = true;
        }
        let max = self.config.batch.max(1);
        let (received, batch) = if let Some(feed) = self.spec.feed.clone() {
            self.poll_feed(&lease, &feed, max)?
        } else {
            let batch = self.poll_changes(&lease, max)?;
            (batch.len(), batch)
        };
        let mut step = Step {
            received,
            late_ack,
            committed: false,
        };
        // Changes go to tantivy a few at a time, in order: one hand-over
        // to its indexing thread for several documents instead of one each
        // (each may wake that thread), yet soon enough that it starts on
        // the first while the rest are mapped.
        let mut ops = Vec::with_capacity(2 * HAND_OVER);
        for (position, change) in &batch {
            let Some(change) = change else {
                // An entry that names no row: passed.
                self.applied = *position;
                continue;
            };
            match self.apply(change, position.version, &mut ops) {
                Ok(()) => {}
                // An entry that can never become a document (its value
                // does not decode, its mapping names an undeclared field)
                // is dead-lettered, so that it does not hold the index up.
                Err(
                    e @ (SearchError::Key { .. }
                    | SearchError::Value { .. }
                    | SearchError::Mapping(_)),
                ) => {
                    // The key's old document goes: the row no longer
                    // holds what it says (`verify` reports it missing).
                    if !change.fresh {
                        ops.push(UserOperation::Delete(Term::from_field_bytes(
                            self.fields.key,
                            &change.key,
                        )));
                        self.pending_docs += 1;
                        self.pending_since
                            .get_or_insert_with(|| self.clock.now_ms());
                    }
                    tracing::warn!(
                        index = self.spec.name,
                        position = %position,
                        error = %ErrorChain(&e),
                        "a change that does not index: dead-lettered"
                    );
                    match self
                        .outbox
                        .dead_letter(&lease, *position, &ErrorChain(&e).to_string())
                    {
                        // One entry naming several rows: dead already.
                        Ok(()) | Err(OutboxError::AlreadyFinished(_)) => {}
                        Err(failed) => {
                            self.writer.run(ops)?;
                            return Err(failed.into());
                        }
                    }
                }
                Err(e) => {
                    self.writer.run(ops)?;
                    return Err(e);
                }
            }
            self.applied = *position;
            if ops.len() >= HAND_OVER {
                self.writer.run(ops.drain(..))?;
            }
        }
        self.writer.run(ops)?;
        if strata_engine::fault_point!("ack-before-index-commit") && !batch.is_empty() {
            let at = self.applied;
            self.outbox
                .store()
                .transact(|tx| self.outbox.ack_through(tx, &lease, at))?;
        }
        if self.due() {
            step.committed = self.commit()?;
        }
        Ok(step)
    }

    /// The next changes of the index's own topic (`search.NAME`).
    pub(crate) fn poll_changes(&self, lease: &Lease, max: usize) -> Result<Vec<Fed>, SearchError> {
        // (The planted bug `index-non-durable` is switched in the outbox's
        // poll.)
        let batch = self
            .outbox
            .poll_after(lease, &self.topic, self.applied, max)?;
        Ok(batch
            .into_iter()
            .map(|d| (d.position, Some(d.entry)))
            .collect())
    }

    /// The next entries of the service's topic feeding the index, as the
    /// changes of the rows they name, read at a snapshot taken before a
    /// sync (every row it holds is durable). Returns the number of entries
    /// and their changes (`None`: an entry naming no row). An entry that
    /// does not decode, or names a row that does not, is dead-lettered
    /// (with that row's document deleted).
    pub(crate) fn poll_feed(
        &self,
        lease: &Lease,
        feed: &crate::spec::Feed<K>,
        max: usize,
    ) -> Result<(usize, Vec<Fed>), SearchError> {
        let entries = self
            .outbox
            .poll_raw_after(lease, &feed.topic, self.applied, max)?;
        if entries.is_empty() {
            return Ok((0, Vec::new()));
        }
        let store = self.outbox.store();
        let view = store.read()?;
        store
            .engine()
            .sync()
            .map_err(strata_store::StoreError::from)?;
        let mut out = Vec::with_capacity(entries.len());
        for d in &entries {
            let keys = match (feed.rows)(&d.entry) {
                Ok(keys) => keys,
                Err(why) => {
                    self.dead_letter_entry(lease, d.position, &format!("does not decode: {why}"))?;
                    out.push((d.position, None));
                    continue;
                }
            };
            if keys.is_empty() {
                out.push((d.position, None));
            }
            for key in keys {
                let key_bytes = crate::packed(&key)?;
                let value = match view.get::<K>(&key) {
                    Ok(Some(v)) => Some((K::Value::VERSION, crate::body_of(&v)?)),
                    Ok(None) => None,
                    Err(e) => {
                        self.dead_letter_entry(
                            lease,
                            d.position,
                            &format!("row {} does not read: {}", K::NAME, ErrorChain(&e)),
                        )?;
                        None
                    }
                };
                out.push((
                    d.position,
                    Some(Change {
                        key: key_bytes,
                        value,
                        fresh: false,
                    }),
                ));
            }
        }
        Ok((entries.len(), out))
    }

    pub(crate) fn dead_letter_entry(
        &self,
        lease: &Lease,
        position: Position,
        why: &str,
    ) -> Result<(), SearchError> {
        tracing::warn!(index = self.spec.name, %position, why, "an entry that does not index: dead-lettered");
        match self.outbox.dead_letter(lease, position, why) {
            Ok(()) | Err(OutboxError::AlreadyFinished(_)) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// Steps until the outbox has nothing more to deliver, then commits:
    /// the index then holds every durable entry.
    ///
    /// # Errors
    /// As [`Indexer::step`].
    pub fn catch_up(&mut self) -> Result<Position, SearchError> {
        loop {
            let step = self.step()?;
            if step.received == 0 {
                break;
            }
        }
        self.commit()?;
        Ok(self.checkpoint)
    }

    pub(crate) fn due(&self) -> bool {
        self.pending_docs >= self.config.commit_docs
            || self.pending_bytes >= self.config.commit_bytes
            || self.pending_since.is_some_and(|t| {
                self.clock.now_ms().saturating_sub(t) >= self.config.commit_interval_ms
            })
    }

    /// Adds the operations of one change to `ops`.
    pub(crate) fn apply(
        &mut self,
        change: &Change,
        version: u64,
        ops: &mut Vec<UserOperation>,
    ) -> Result<(), SearchError> {
        // The document first: a change that does not decode adds nothing,
        // not even its delete.
        let doc = match &change.value {
            Some((schema_version, body)) => {
                let key = K::unpack(&change.key).map_err(|source| SearchError::Key {
                    key_type: K::NAME,
                    source,
                })?;
                let value = K::Value::decode_body(*schema_version, body).map_err(|source| {
                    SearchError::Value {
                        key_type: K::NAME,
                        source,
                    }
                })?;
                Some(document(
                    &self.spec,
                    &self.fields,
                    &change.key,
                    &key,
                    &value,
                    body,
                    version,
                )?)
            }
            None => None,
        };
        // A fresh row has no document to replace.
        let delete = !change.fresh
            && (change.value.is_none() || !strata_engine::fault_point!("upsert-without-delete"));
        if delete {
            ops.push(UserOperation::Delete(Term::from_field_bytes(
                self.fields.key,
                &change.key,
            )));
        }
        if let (Some(doc), Some((_, body))) = (doc, &change.value) {
            ops.push(UserOperation::Add(doc));
            self.pending_bytes += body.len();
        }
        self.pending_docs += 1;
        self.pending_since
            .get_or_insert_with(|| self.clock.now_ms());
        Ok(())
    }

    /// Commits what was applied: documents and checkpoint in one tantivy
    /// commit, the directory synced, readers reloaded, then the outbox
    /// acknowledged. Returns whether there was anything to commit.
    ///
    /// # Errors
    /// tantivy, I/O and outbox failures. A failure after the index commit
    /// leaves the acknowledgement to the next step.
    pub fn commit(&mut self) -> Result<bool, SearchError> {
        if self.applied == self.checkpoint {
            return Ok(false);
        }
        let payload = format!("{PAYLOAD}{}", self.applied);
        crate::reading("committing the index", || {
            let mut prepared = self.writer.prepare_commit()?;
            prepared.set_payload(&payload);
            prepared.commit()?;
            Ok(())
        })?;
        self.index.directory().sync_directory()?;
        self.checkpoint = self.applied;
        crate::metrics::committed(
            &self.spec.name,
            self.pending_docs,
            self.checkpoint.version,
            self.outbox.store().engine().durable_version(),
        );
        self.pending_docs = 0;
        self.pending_bytes = 0;
        self.pending_since = None;
        self.reload_due.store(true, Ordering::Release);
        tracing::debug!(index = self.spec.name, checkpoint = %self.checkpoint, "search index committed");
        let lease = self.lease()?;
        self.acknowledge(&lease)?;
        Ok(true)
    }

    pub(crate) fn acknowledge(&self, lease: &Lease) -> Result<(), SearchError> {
        let at = self.checkpoint;
        if at == Position::START {
            return Ok(());
        }
        self.outbox
            .store()
            .transact(|tx| self.outbox.ack_through(tx, lease, at))?;
        Ok(())
    }
}
