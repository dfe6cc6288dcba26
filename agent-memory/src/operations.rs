//! Operations: job checkpoints, search, the index rebuilt, statistics, backup and compaction.

#[allow(clippy::wildcard_imports)]
use super::*;

impl<'s, E: Engine> AgentMemory<'s, E> {
    /// Job `job`'s checkpoint.
    ///
    /// # Errors
    /// A store error.
    pub fn checkpoint(&self, job: &str) -> Result<Option<Vec<u8>>, MemoryError> {
        let mut tx = self.store.begin();
        Ok(tx.snapshot_get_in(&self.checkpoints, format!("checkpoint:{job}").as_bytes())?)
    }

    /// Sets job `job`'s checkpoint.
    ///
    /// # Errors
    /// A store error.
    pub fn set_checkpoint(&self, job: &str, state: &[u8]) -> Result<(), MemoryError> {
        self.store.transact(|tx| {
            tx.put_in(
                &self.checkpoints,
                format!("checkpoint:{job}").into_bytes(),
                state.to_vec(),
            )?;
            Ok::<_, MemoryError>(())
        })
    }

    /// BM25 search of `text` over TOC nodes and grips (optionally one
    /// `doc_type`, `toc_node` or `grip`) through `indexer`, at most `limit`
    /// hits, each with its full content read from the store.
    ///
    /// # Errors
    /// A search or store error.
    pub fn search(
        &self,
        indexer: &Indexer<'_, '_, E, SearchDocKey>,
        text: &str,
        doc_type: Option<&str>,
        limit: usize,
    ) -> Result<Vec<SearchHit>, MemoryError> {
        let mut query = Query::new(text).limit(limit);
        if let Some(t) = doc_type {
            query = query.filter("doc_type", t);
        }
        let results = indexer.search(&query)?;
        results
            .hits
            .into_iter()
            .map(|hit| {
                let id = hit.key.doc_id;
                let content = if id.starts_with("grip:") {
                    self.grip(&id)?.map(Found::Grip)
                } else {
                    self.toc_node(&id)?.map(Found::Toc)
                };
                Ok(SearchHit {
                    doc_id: id,
                    score: hit.score,
                    content,
                })
            })
            .collect()
    }

    /// `rebuild-index`: rebuilds `indexer`'s index from the store's
    /// projection rows at one snapshot into a new generation, switched
    /// atomically (see [`Indexer::rebuild`]); returns the new indexer.
    ///
    /// # Errors
    /// A search or store error (the indexer is consumed either way).
    pub fn rebuild_index<'o>(
        &self,
        indexer: Indexer<'o, 's, E, SearchDocKey>,
    ) -> Result<Indexer<'o, 's, E, SearchDocKey>, MemoryError> {
        Ok(indexer.rebuild()?.0)
    }

    /// Rows per agent-memory space (events, TOC versions, latest pointers,
    /// grips with their index rows, job checkpoints), counted at one
    /// snapshot.
    ///
    /// # Errors
    /// A store error.
    pub fn stats(&self) -> Result<Stats, MemoryError> {
        let mut tx = self.store.begin();
        let mut rows = Vec::new();
        for (name, space, prefix) in [
            (EVENTS, self.events, &b""[..]),
            (TOC_NODES, self.toc, b""),
            (TOC_LATEST, self.latest, b""),
            (GRIPS, self.grips, b""),
            (CHECKPOINTS, self.checkpoints, b"checkpoint:"),
        ] {
            let n = tx
                .snapshot_scan_in(&space, &KeyRange::prefix(prefix), None, false)?
                .rows
                .len();
            rows.push((name, n as u64));
        }
        Ok(Stats {
            rows,
            disk: None,
            outbox_lag: None,
        })
    }

    /// [`AgentMemory::stats`], with the engine's sizes per keyspace and
    /// the event topic's lag for `consumer`.
    ///
    /// # Errors
    /// A store, outbox or engine error.
    pub fn stats_with(&self, consumer: &str) -> Result<Stats, MemoryError>
    where
        E: strata_engine::Statistics,
    {
        let mut stats = self.stats()?;
        let disk = self.store.engine().stats()?;
        stats.disk = Some(
            disk.into_iter()
                .map(|k| (k.name, k.bytes, k.bytes_exact))
                .collect(),
        );
        stats.outbox_lag = Some(self.outbox.lag(EVENT_TOPIC, consumer)?.entries);
        Ok(stats)
    }

    /// An online, consistent copy of the whole database (every keyspace,
    /// the outbox's included) at `path`, which the engine opens like any
    /// database of its kind. The search index is not copied: rebuild it
    /// from the copy ([`strata_search::Indexer::rebuild`]).
    ///
    /// # Errors
    /// [`MemoryError::Engine`] (also when the engine offers no backup).
    pub fn backup(&self, path: &std::path::Path) -> Result<Option<u64>, MemoryError>
    where
        E: strata_engine::Backup,
    {
        self.store
            .engine()
            .backup(path)
            .map(|info| info.version)
            .map_err(MemoryError::from)
    }

    /// Compacts the database now (the events' space included; the outbox's
    /// space is a queue, trimmed by the outbox, never by age or size).
    ///
    /// # Errors
    /// [`MemoryError::Engine`] (also when the engine offers no compaction).
    pub fn compact(&self) -> Result<(), MemoryError>
    where
        E: strata_engine::Compact,
    {
        Ok(self.store.engine().compact()?)
    }
}
