//! Rebuilding the index from a snapshot of the store into a new generation.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use strata_codec::Value;
use strata_engine::{Clock, Engine};
use strata_keys::Key;
use strata_outbox::{Outbox, Position, Start};
use tantivy::directory::{Directory, RamDirectory};
use tantivy::{Index, IndexReader, IndexWriter, ReloadPolicy};

use crate::spec::{Fields, IndexSpec};
use crate::{Rebuilt, SearchError};

#[allow(clippy::wildcard_imports)]
use super::*;

/// Adds a document for every row of `K` in `view` to `writer`; returns
/// the documents added, the rows left out because their mapping makes
/// no document ([`SearchError::Mapping`]: an undeclared field, a string
/// value too long for one term), as the feed dead-letters such a change,
/// and the rows left out because they do not decode (damaged).
pub(crate) fn index_rows<E: Engine, K>(
    view: &strata_store::ReadView<'_, E>,
    spec: &IndexSpec<K>,
    fields: &Fields,
    writer: &IndexWriter,
    version: u64,
) -> Result<(u64, u64, u64), SearchError>
where
    K: Key,
    K::Value: Value,
{
    let (mut documents, mut skipped, mut damaged) = (0u64, 0u64, Vec::new());
    for_each_row(view, Some(&mut damaged), |key_bytes, key, value, body| {
        match document(spec, fields, &key_bytes, &key, &value, &body, version) {
            Ok(doc) => {
                writer.add_document(doc)?;
                documents += 1;
            }
            Err(e @ SearchError::Mapping(_)) => {
                tracing::warn!(
                    index = spec.name,
                    error = %strata_engine::ErrorChain(&e),
                    "a row that does not index: left out of the rebuild"
                );
                skipped += 1;
            }
            Err(e) => return Err(e),
        }
        Ok(())
    })?;
    Ok((documents, skipped, damaged.len() as u64))
}

impl<'o, 's, E, K> Indexer<'o, 's, E, K>
where
    E: Engine,
    K: Key + 'static,
    K::Value: Value,
{
    /// Builds a new generation of the index from a snapshot of the store,
    /// switches to it, and catches up from the outbox: for an index that
    /// `verify` found wrong, a changed mapping, or an index directory that
    /// was lost. The snapshot's rows of `K` are indexed (their documents'
    /// `_version` is the snapshot's: their commits are at or before it),
    /// committed with the checkpoint [`Position::end_of`] the snapshot's
    /// version, and the directory synced; then `CURRENT` is switched to the
    /// new generation (searches through this indexer use the old one until
    /// then), older generations are removed, and the entries after the
    /// snapshot are applied. A crash before the switch leaves the old
    /// generation in use; the unfinished one is started over by the next
    /// rebuild, which also removes any generation a crash left behind.
    ///
    /// # Errors
    /// Store, tantivy and I/O failures; the indexer is consumed either way
    /// (open it again after a failure).
    pub fn rebuild(self) -> Result<(Self, Rebuilt), SearchError> {
        let old = (self.writer, self.reader, self.index);
        // The lease goes with the indexer: it is this indexer's to renew.
        Self::rebuild_from(
            self.outbox,
            self.spec,
            self.config,
            self.clock,
            self.location,
            self.generation,
            Some(old),
            Some(self.lease),
        )
    }

    /// Opens the index at `location` by rebuilding it from the store, as
    /// [`Indexer::rebuild`] does, without opening what is there first: for
    /// an index [`Indexer::open`] refuses ([`SearchError::MappingChanged`],
    /// [`SearchError::Behind`], a directory that does not open). A crash
    /// during it leaves the current generation as it was.
    ///
    /// # Errors
    /// As [`Indexer::rebuild`], plus the outbox's for registering the
    /// consumer.
    pub fn open_rebuilt(
        outbox: &'o Outbox<'s, E>,
        spec: IndexSpec<K>,
        location: &Location,
        config: IndexerConfig,
        clock: Arc<dyn Clock>,
    ) -> Result<(Self, Rebuilt), SearchError> {
        let generation = match location {
            Location::Dir(root) => Some(current_generation(root)?),
            Location::Memory | Location::Shared(_) => None,
        };
        let source = spec.source_topic();
        outbox.register(&source, &spec.name, Start::Beginning)?;
        record(outbox, &spec.name, &source, location)?;
        Self::rebuild_from(
            outbox,
            spec,
            config,
            clock,
            location.clone(),
            generation,
            None,
            None,
        )
    }

    /// The rebuild; `old` is the index in use, kept until the new
    /// generation is switched in; `lease` the outbox lease held, if any.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn rebuild_from(
        outbox: &'o Outbox<'s, E>,
        spec: IndexSpec<K>,
        config: IndexerConfig,
        clock: Arc<dyn Clock>,
        location: Location,
        generation: Option<u64>,
        old: Option<(IndexWriter, IndexReader, Index)>,
        lease: Option<Held<'o, 's, E>>,
    ) -> Result<(Self, Rebuilt), SearchError> {
        let topic = spec.topic();
        // Held from here: a failed rebuild gives it back as it drops.
        let lease = lease.unwrap_or_else(|| Held::new(outbox, None, &config));
        let started = clock.now_ms();
        let store = outbox.store();
        // The snapshot first, then a sync: everything it holds is durable.
        let view = store.read()?;
        let version = view.version()?;
        if !strata_engine::fault_point!("rebuild-without-sync") {
            store
                .engine()
                .sync()
                .map_err(strata_store::StoreError::from)?;
        }
        let (schema, fields) = spec.schema();
        let next = generation.map(|g| g + 1);
        let fresh = RamDirectory::create();
        let directory = match (&location, next) {
            (Location::Dir(root), Some(g)) => generation_dir(root, g, true)?,
            _ => Box::new(fresh.clone()) as Box<dyn Directory>,
        };
        let mut index = Index::create(directory, schema, tantivy::IndexSettings::default())?;
        let mut writer = writer(&index, &config)?;
        let (documents, skipped, damaged) = index_rows(&view, &spec, &fields, &writer, version)?;
        drop(view);
        let at = Position::end_of(version);
        let mut prepared = writer.prepare_commit()?;
        prepared.set_payload(&format!("{PAYLOAD}{at}"));
        prepared.commit()?;
        index.directory().sync_directory()?;
        if let (Location::Dir(root), Some(g)) = (&location, next) {
            switch_generation(root, g)?;
        }
        let mut old = old;
        if let Location::Shared(shared) = &location {
            // The shared directory is what the next indexer opens: the new
            // index replaces the old one there (writers gone first, their
            // locks with them), and this indexer goes on over it.
            drop(writer);
            drop(old.take());
            replace_shared(shared, &fresh)?;
            index = Index::open(shared.clone())?;
            writer = self::writer(&index, &config)?;
        }
        drop(old);
        if let (Location::Dir(root), Some(g)) = (&location, next) {
            // The old generation, and any an earlier crash left behind.
            remove_generations_but(root, g)?;
        }
        let reader = index
            .reader_builder()
            .reload_policy(ReloadPolicy::Manual)
            .try_into()?;
        tracing::info!(
            index = spec.name,
            documents,
            skipped,
            damaged,
            version,
            "search index rebuilt"
        );
        let source = spec.source_topic();
        let mut rebuilt = Self {
            outbox,
            spec,
            topic,
            source,
            config,
            clock,
            index,
            writer,
            reader,
            reload_due: AtomicBool::new(false),
            fields,
            lease,
            checkpoint: at,
            applied: at,
            pending_docs: 0,
            pending_bytes: 0,
            pending_since: None,
            location,
            generation: next,
        };
        rebuilt.catch_up()?;
        let elapsed_ms = rebuilt.clock.now_ms().saturating_sub(started);
        Ok((
            rebuilt,
            Rebuilt {
                documents,
                skipped,
                damaged,
                version,
                elapsed_ms,
            },
        ))
    }
}
