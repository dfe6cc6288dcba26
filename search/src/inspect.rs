//! An index read without its mapping, for tools (`strata search`,
//! `strata info`): its position, size and queries over its text fields,
//! each hit's freshness checked against the store's raw row. The catalog
//! entry [`Indexer::open`](crate::Indexer::open) records says where an
//! index lives.

use std::path::{Path, PathBuf};

use crate::QueryError;
use strata_engine::Engine;
use strata_keys::tuple;
use strata_outbox::Position;
use strata_store::{CatalogEntry, ReadView};
use tantivy::collector::TopDocs;
use tantivy::directory::MmapDirectory;
use tantivy::query::QueryParser;
use tantivy::schema::{Field, FieldType, Value as _};
use tantivy::snippet::SnippetGenerator;
use tantivy::{Index, IndexReader, ReloadPolicy, TantivyDocument};

use crate::change::body_hash;
use crate::indexer::{CURRENT, generation_name, parse_payload};
use crate::spec::HASH_FIELD;
use crate::{Freshness, SearchError};

/// The catalog kind of a search index: name the index's, detail the tuple
/// `(topic, consumer, location)`, location the index directory's absolute
/// path, or `""` for an index in memory.
pub const CATALOG_INDEX: &str = "search.index";

/// An index as the store's catalog describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CatalogIndex {
    /// The index's name.
    pub name: String,
    /// The outbox topic that feeds it.
    pub topic: String,
    /// Its outbox consumer.
    pub consumer: String,
    /// Its directory (`None`: it lived in memory).
    pub dir: Option<PathBuf>,
}

/// The search indexes a catalog lists.
pub fn catalog_indexes(catalog: &[CatalogEntry]) -> Vec<CatalogIndex> {
    catalog
        .iter()
        .filter(|e| e.kind == CATALOG_INDEX)
        .filter_map(|e| {
            let (topic, consumer, location) =
                tuple::unpack::<(String, String, String)>(&e.detail).ok()?;
            Some(CatalogIndex {
                name: e.name.clone(),
                topic,
                consumer,
                dir: (!location.is_empty()).then(|| PathBuf::from(location)),
            })
        })
        .collect()
}

/// An index directory opened for reading only: no generation is made, no
/// writer taken, nothing but tantivy's reader lock file written.
pub struct IndexFiles {
    index: Index,
    reader: IndexReader,
    generation: u64,
    checkpoint: Position,
    key: Field,
    hash: Field,
    version: Field,
    text: Vec<Field>,
}

impl std::fmt::Debug for IndexFiles {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IndexFiles")
            .field("generation", &self.generation)
            .field("checkpoint", &self.checkpoint)
            .finish_non_exhaustive()
    }
}

/// One hit of [`IndexFiles::query`].
#[derive(Debug, Clone, PartialEq)]
pub struct RawHit {
    /// The store key (packed) of the row the document was made from.
    pub key: Vec<u8>,
    /// BM25 score, without the mapping's boosts.
    pub score: f32,
    /// The version of the commit that wrote the indexed value.
    pub version: u64,
    /// A fragment of the first text field around the matched terms.
    pub snippet: String,
    hash: u64,
}

impl RawHit {
    /// Whether the store's row at this hit's key still holds the value
    /// the document was made from, read raw (no key type needed).
    ///
    /// # Errors
    /// A store failure, or a row whose envelope does not read.
    pub fn freshness<E: Engine>(&self, view: &ReadView<'_, E>) -> Result<Freshness, SearchError> {
        let Some(raw) = view.raw(&self.key)? else {
            return Ok(Freshness::Vanished);
        };
        let header =
            strata_codec::Header::read(&raw.envelope).map_err(|source| SearchError::Value {
                key_type: "a row read raw",
                source,
            })?;
        Ok(if body_hash(&raw.envelope[header.len..]) == self.hash {
            Freshness::Current
        } else {
            Freshness::Changed
        })
    }
}

impl IndexFiles {
    /// Opens the current generation of the index directory `root` (as
    /// [`Location::Dir`](crate::Location::Dir) names it).
    ///
    /// # Errors
    /// [`SearchError::Io`] when there is no index (`CURRENT` missing);
    /// [`SearchError::Current`] for a damaged `CURRENT`,
    /// [`SearchError::Payload`] for a damaged checkpoint;
    /// [`SearchError::Schema`] for an index this crate did not make,
    /// [`SearchError::OlderFormat`] for one an older version made;
    /// tantivy failures; [`SearchError::Checksum`] for files that fail
    /// their checksums (every file is read and checked first),
    /// [`SearchError::Damaged`] when tantivy panicked on damaged files.
    pub fn open(root: &Path) -> Result<Self, SearchError> {
        crate::reading("opening the index", || Self::open_unguarded(root))
    }

    fn open_unguarded(root: &Path) -> Result<Self, SearchError> {
        let current = std::fs::read_to_string(root.join(CURRENT))?;
        let generation: u64 = current
            .trim()
            .strip_prefix("gen-")
            .and_then(|n| n.parse().ok())
            .ok_or_else(|| SearchError::Current {
                found: current.clone(),
            })?;
        let dir = MmapDirectory::open(root.join(generation_name(generation)))
            .map_err(|e| SearchError::Tantivy(tantivy::TantivyError::from(e)))?;
        let index = Index::open(dir)?;
        crate::check_files(&index)?;
        let checkpoint = match index.load_metas()?.payload {
            None => Position::START,
            Some(p) => parse_payload(&p)?,
        };
        let schema = index.schema();
        let field = |name: &'static str| {
            schema
                .get_field(name)
                .map_err(|_| SearchError::Schema { field: name })
        };
        if schema.get_field(HASH_FIELD).is_err() && schema.get_field("_hash").is_ok() {
            return Err(SearchError::OlderFormat);
        }
        let (key, hash, version) = (field("_key")?, field(HASH_FIELD)?, field("_version")?);
        let text = schema
            .fields()
            .filter(|(_, entry)| {
                !entry.name().starts_with('_')
                    && matches!(entry.field_type(), FieldType::Str(o) if o.get_indexing_options().is_some_and(|i| i.tokenizer() != "raw"))
            })
            .map(|(f, _)| f)
            .collect();
        let reader = index
            .reader_builder()
            .reload_policy(ReloadPolicy::Manual)
            .try_into()?;
        Ok(Self {
            index,
            reader,
            generation,
            checkpoint,
            key,
            hash,
            version,
            text,
        })
    }

    /// The position committed in the index.
    pub fn checkpoint(&self) -> Position {
        self.checkpoint
    }

    /// The generation in use (`CURRENT`).
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Documents in the index.
    pub fn documents(&self) -> u64 {
        self.reader.searcher().num_docs()
    }

    /// Compares the index's documents with the rows of `K` in `view`, read
    /// only: missing, extra, stale and duplicate documents, as
    /// [`Indexer::verify`](crate::Indexer::verify) reports them, without
    /// catching up first. Meaningful when the index has every change the
    /// view holds (its consumer has no lag); otherwise the changes it has
    /// not applied show as differences. `spec` names the key type; the
    /// comparison is by key and value hash, so its mapping is not run.
    ///
    /// # Errors
    /// A store failure, tantivy failures, [`SearchError::Damaged`] (the
    /// index's own files; a store row that does not decode is reported in
    /// [`Verified::damaged`](crate::Verified::damaged)).
    pub fn compare<E, K>(
        &self,
        view: &ReadView<'_, E>,
        _spec: &crate::IndexSpec<K>,
    ) -> Result<crate::Verified, SearchError>
    where
        E: Engine,
        K: strata_keys::Key,
        K::Value: strata_codec::Value,
    {
        let mut expected = std::collections::BTreeMap::new();
        let mut damaged = Vec::new();
        crate::indexer::for_each_row::<E, K>(view, Some(&mut damaged), |bytes, _, _, body| {
            expected.insert(bytes, body_hash(&body));
            Ok(())
        })?;
        let (indexed, duplicates) = crate::reading("reading the index's documents", || {
            let searcher = self.reader.searcher();
            let mut indexed = std::collections::BTreeMap::new();
            let mut duplicates = std::collections::BTreeSet::new();
            for address in searcher.search(
                &tantivy::query::AllQuery,
                &tantivy::collector::DocSetCollector,
            )? {
                let doc: TantivyDocument = searcher.doc(address)?;
                let key = doc
                    .get_first(self.key)
                    .and_then(|v| v.as_bytes())
                    .ok_or(SearchError::Document { field: "_key" })?
                    .to_vec();
                let hash = doc
                    .get_first(self.hash)
                    .and_then(|v| v.as_u64())
                    .ok_or(SearchError::Document { field: HASH_FIELD })?;
                if indexed.insert(key.clone(), hash).is_some() {
                    duplicates.insert(key);
                }
            }
            Ok((indexed, duplicates))
        })?;
        Ok(crate::indexer::differences(
            view.version()?,
            self.checkpoint,
            &expected,
            &indexed,
            duplicates,
            damaged,
        ))
    }

    /// The best `limit` documents for `text` (tantivy's query syntax) over
    /// every text field, best first.
    ///
    /// # Errors
    /// [`SearchError::Query`]; tantivy failures, [`SearchError::Damaged`].
    pub fn query(&self, text: &str, limit: usize) -> Result<Vec<RawHit>, SearchError> {
        crate::reading("searching the index", || self.query_unguarded(text, limit))
    }

    fn query_unguarded(&self, text: &str, limit: usize) -> Result<Vec<RawHit>, SearchError> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        crate::check_nesting(text)?;
        let searcher = self.reader.searcher();
        let parser = QueryParser::for_index(&self.index, self.text.clone());
        let query = parser
            .parse_query(text)
            .map_err(|source| QueryError::Parse {
                text: text.to_owned(),
                source,
            })?;
        let snippets = match self.text.first() {
            Some(f) => Some(SnippetGenerator::create(&searcher, &*query, *f)?),
            None => None,
        };
        let top = searcher.search(&*query, &TopDocs::with_limit(limit).order_by_score())?;
        let mut hits = Vec::with_capacity(top.len());
        for (score, address) in top {
            let doc: TantivyDocument = searcher.doc(address)?;
            let missing = |field| SearchError::Document { field };
            hits.push(RawHit {
                key: doc
                    .get_first(self.key)
                    .and_then(|v| v.as_bytes())
                    .ok_or_else(|| missing("_key"))?
                    .to_vec(),
                hash: doc
                    .get_first(self.hash)
                    .and_then(|v| v.as_u64())
                    .ok_or_else(|| missing(HASH_FIELD))?,
                version: doc
                    .get_first(self.version)
                    .and_then(|v| v.as_u64())
                    .ok_or_else(|| missing("_version"))?,
                score,
                snippet: snippets
                    .as_ref()
                    .map(|g| g.snippet_from_doc(&doc).fragment().to_owned())
                    .unwrap_or_default(),
            });
        }
        Ok(hits)
    }
}
