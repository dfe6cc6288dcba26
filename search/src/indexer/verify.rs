//! Checking the index against the store's rows.

use std::collections::{BTreeMap, BTreeSet};

use strata_codec::Value;
use strata_engine::Engine;
use strata_keys::Key;
use strata_outbox::Position;
use tantivy::TantivyDocument;
use tantivy::collector::DocSetCollector;
use tantivy::query::AllQuery;

use crate::change::body_hash;
use crate::{SearchError, Verified};

#[allow(clippy::wildcard_imports)]
use super::*;

/// What differs between the documents `indexed` and the rows `expected`
/// (each by key, with the hash of its value's body), the rows `damaged`
/// (their values do not decode) set apart: their documents cannot be
/// compared, and are not extra.
pub(crate) fn differences(
    store_version: u64,
    checkpoint: Position,
    expected: &BTreeMap<Vec<u8>, u64>,
    indexed: &BTreeMap<Vec<u8>, u64>,
    duplicates: BTreeSet<Vec<u8>>,
    damaged: Vec<Vec<u8>>,
) -> Verified {
    let mut report = Verified {
        store_version,
        checkpoint,
        documents: indexed.len(),
        rows: expected.len(),
        missing: Vec::new(),
        extra: Vec::new(),
        stale: Vec::new(),
        duplicates: duplicates.into_iter().collect(),
        damaged: Vec::new(),
    };
    for (key, hash) in expected {
        match indexed.get(key) {
            None => report.missing.push(key.clone()),
            Some(h) if h != hash => report.stale.push(key.clone()),
            Some(_) => {}
        }
    }
    report.extra = indexed
        .keys()
        .filter(|k| !expected.contains_key(*k) && damaged.binary_search(k).is_err())
        .cloned()
        .collect();
    report.damaged = damaged;
    report
}

/// Runs `f` on every row of `K` in `view`: its packed key, key, value
/// and encoded body. A row whose value does not decode (damaged: its
/// checksum, body or chunks) ends the walk with its error, unless
/// `damaged` is given: its key is then added there (in key order) and the
/// row left out.
pub(crate) fn for_each_row<E: Engine, K>(
    view: &strata_store::ReadView<'_, E>,
    mut damaged: Option<&mut Vec<Vec<u8>>>,
    mut f: impl FnMut(Vec<u8>, K, K::Value, Vec<u8>) -> Result<(), SearchError>,
) -> Result<(), SearchError>
where
    K: Key,
    K::Value: Value,
{
    let scan = strata_store::Scan::all().skip_other_types();
    let mut rows = view.scan::<K>(&scan)?;
    while let Some(row) = rows.next_naming_row() {
        let (key, value) = match (row, damaged.as_deref_mut()) {
            (Ok(row), _) => row,
            (
                Err((
                    e @ (strata_store::StoreError::Decode { .. }
                    | strata_store::StoreError::Chunk { .. }),
                    Some(row),
                )),
                Some(keys),
            ) => {
                tracing::warn!(
                    key_type = K::NAME,
                    error = %strata_engine::ErrorChain(&e),
                    "a row that does not decode: left out"
                );
                keys.push(row);
                continue;
            }
            (Err((e, _)), _) => return Err(e.into()),
        };
        let body = crate::body_of(&value)?;
        f(crate::packed(&key)?, key, value, body)?;
    }
    Ok(())
}

impl<E, K> Indexer<'_, '_, E, K>
where
    E: Engine,
    K: Key + 'static,
    K::Value: Value,
{
    /// Compares the index with the store: syncs the engine, catches up with
    /// every durable entry, then compares the documents with the rows of
    /// `K` in a snapshot at the same point (retrying while writers move the
    /// store on): missing, extra and stale documents.
    ///
    /// A row of `K` whose value does not decode (damaged: its checksum,
    /// body or chunks) does not stop the comparison: its key is reported
    /// in [`Verified::damaged`], its document (if any) not compared.
    ///
    /// # Errors
    /// As [`Indexer::catch_up`].
    pub fn verify(&mut self) -> Result<Verified, SearchError> {
        let store = self.outbox.store();
        let mut attempts = 0;
        loop {
            attempts += 1;
            store
                .engine()
                .sync()
                .map_err(strata_store::StoreError::from)?;
            let durable = store.engine().durable_version();
            self.catch_up()?;
            let view = store.read()?;
            let version = view.version()?;
            if version > durable && attempts < 5 {
                continue;
            }
            let mut expected: BTreeMap<Vec<u8>, u64> = BTreeMap::new();
            let mut damaged = Vec::new();
            for_each_row::<E, K>(&view, Some(&mut damaged), |bytes, _, _, body| {
                expected.insert(bytes, body_hash(&body));
                Ok(())
            })?;
            let (indexed, duplicates) = crate::reading("reading the index's documents", || {
                let searcher = self.searcher()?;
                let mut indexed: BTreeMap<Vec<u8>, u64> = BTreeMap::new();
                let mut duplicates = BTreeSet::new();
                for address in searcher.search(&AllQuery, &DocSetCollector)? {
                    let doc: TantivyDocument = searcher.doc(address)?;
                    let (key, hash, _) = self.identity(&doc)?;
                    if indexed.insert(key.clone(), hash).is_some() {
                        duplicates.insert(key);
                    }
                }
                Ok((indexed, duplicates))
            })?;
            return Ok(differences(
                version,
                self.checkpoint,
                &expected,
                &indexed,
                duplicates,
                damaged,
            ));
        }
    }
}
