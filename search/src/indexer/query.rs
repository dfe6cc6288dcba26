//! Searching the index, and its counts.

use std::ops::Bound;
use std::sync::atomic::Ordering;

use strata_codec::Value;
use strata_engine::Engine;
use strata_keys::Key;
use tantivy::collector::TopDocs;
use tantivy::query::{AllQuery, BooleanQuery, Occur, QueryParser, RangeQuery, TermQuery};
use tantivy::schema::{IndexRecordOption, Value as _};
use tantivy::snippet::SnippetGenerator;
use tantivy::{TantivyDocument, Term};

use crate::change::body_hash;
use crate::{Freshness, Hit, Query, QueryError, Results, SearchError};

#[allow(clippy::wildcard_imports)]
use super::*;

impl<E, K> Indexer<'_, '_, E, K>
where
    E: Engine,
    K: Key + 'static,
    K::Value: Value,
{
    /// Searches the committed index. Each hit's row is read from the store
    /// to report whether the document still matches it.
    ///
    /// # Errors
    /// [`SearchError::Query`]; [`SearchError::Damaged`]; tantivy and store
    /// failures.
    pub fn search(&self, query: &Query) -> Result<Results<K>, SearchError> {
        crate::reading("searching the index", || self.search_unguarded(query))
    }

    fn search_unguarded(&self, query: &Query) -> Result<Results<K>, SearchError> {
        let searcher = self.searcher()?;
        if query.limit == 0 {
            return Ok(Results {
                checkpoint: self.checkpoint,
                hits: Vec::new(),
            });
        }
        let mut parts: Vec<(Occur, Box<dyn tantivy::query::Query>)> = Vec::new();
        let text_fields: Vec<_> = self.fields.text.iter().map(|(f, _)| *f).collect();
        if !query.text.trim().is_empty() {
            crate::check_nesting(&query.text)?;
            let mut parser = QueryParser::for_index(&self.index, text_fields.clone());
            for (field, boost) in &self.fields.text {
                parser.set_field_boost(*field, *boost);
            }
            let parsed = parser
                .parse_query(&query.text)
                .map_err(|source| QueryError::Parse {
                    text: query.text.clone(),
                    source,
                })?;
            parts.push((Occur::Must, parsed));
        }
        for (name, value) in &query.filters {
            let i = self
                .spec
                .strings
                .iter()
                .position(|f| f == name)
                .ok_or_else(|| QueryError::NoStringField {
                    field: name.clone(),
                })?;
            let term = Term::from_field_text(self.fields.strings[i], value);
            parts.push((
                Occur::Must,
                Box::new(TermQuery::new(term, IndexRecordOption::Basic)),
            ));
        }
        if let Some((start, end)) = &query.time {
            let field = self.fields.time.ok_or(QueryError::NoTime)?;
            let bound = |b: &Bound<u64>| match b {
                Bound::Included(v) => Bound::Included(Term::from_field_u64(field, *v)),
                Bound::Excluded(v) => Bound::Excluded(Term::from_field_u64(field, *v)),
                Bound::Unbounded => Bound::Unbounded,
            };
            parts.push((
                Occur::Must,
                Box::new(RangeQuery::new(bound(start), bound(end))),
            ));
        }
        if parts.is_empty() {
            parts.push((Occur::Must, Box::new(AllQuery)));
        }
        let combined = BooleanQuery::new(parts);
        let top = searcher.search(
            &combined,
            &TopDocs::with_limit(query.limit).order_by_score(),
        )?;
        let snippets = match self.fields.text.first() {
            Some((field, _)) if !query.text.trim().is_empty() => {
                Some(SnippetGenerator::create(&searcher, &combined, *field)?)
            }
            _ => None,
        };
        let store = self.outbox.store();
        let mut hits = Vec::with_capacity(top.len());
        for (score, address) in top {
            let doc: TantivyDocument = searcher.doc(address)?;
            let (key_bytes, hash, version) = self.identity(&doc)?;
            let key = K::unpack(&key_bytes).map_err(|source| SearchError::Key {
                key_type: K::NAME,
                source,
            })?;
            let freshness = match store.get(&key)? {
                None => Freshness::Vanished,
                Some(current) => {
                    if body_hash(&crate::body_of(&current)?) == hash {
                        Freshness::Current
                    } else {
                        Freshness::Changed
                    }
                }
            };
            hits.push(Hit {
                key,
                score,
                snippet: snippets
                    .as_ref()
                    .map(|g| g.snippet_from_doc(&doc).fragment().to_owned())
                    .unwrap_or_default(),
                version,
                freshness,
            });
        }
        Ok(Results {
            checkpoint: self.checkpoint,
            hits,
        })
    }

    pub(crate) fn identity(
        &self,
        doc: &TantivyDocument,
    ) -> Result<(Vec<u8>, u64, u64), SearchError> {
        let missing = |field| SearchError::Document { field };
        let key = doc
            .get_first(self.fields.key)
            .and_then(|v| v.as_bytes())
            .ok_or_else(|| missing("_key"))?
            .to_vec();
        let hash = doc
            .get_first(self.fields.hash)
            .and_then(|v| v.as_u64())
            .ok_or_else(|| missing(crate::spec::HASH_FIELD))?;
        let version = doc
            .get_first(self.fields.version)
            .and_then(|v| v.as_u64())
            .ok_or_else(|| missing("_version"))?;
        Ok((key, hash, version))
    }

    /// Number of documents visible to searches: those of the last commit.
    ///
    /// # Errors
    /// tantivy failures reloading the reader after a commit.
    pub fn documents(&self) -> Result<u64, SearchError> {
        Ok(self.searcher()?.num_docs())
    }

    /// Segments in the index as its last commit or merge left it: each
    /// commit adds one, merges (see [`Merging`]) combine them.
    ///
    /// # Errors
    /// The index's metadata does not read.
    pub fn segments(&self) -> Result<usize, SearchError> {
        Ok(self.index.searchable_segment_metas()?.len())
    }

    /// A searcher of the last commit, reloading the reader first if a
    /// commit came since.
    pub(crate) fn searcher(&self) -> Result<tantivy::Searcher, SearchError> {
        crate::reading("reloading the index's reader", || {
            if self.reload_due.swap(false, Ordering::AcqRel)
                && let Err(e) = self.reader.reload()
            {
                self.reload_due.store(true, Ordering::Release);
                return Err(e.into());
            }
            Ok(self.reader.searcher())
        })
    }
}
