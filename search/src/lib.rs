//! A tantivy full-text index fed by the transactional outbox of
//! [`strata-outbox`](strata_outbox): derived state that is always the
//! projection of durable store data at a known position, never ahead of it,
//! and checkable against it.
//!
//! - [`IndexSpec`] declares, once per indexed key type, how a typed row
//!   becomes a [`Document`] (text fields with a tokenizer and a boost,
//!   string fields for filters, a time for ranges).
//! - [`IndexSpec::put`], [`IndexSpec::insert`] and [`IndexSpec::delete`]
//!   write a row *and* its change entry in the caller's transaction: the
//!   change reaches the index if and only if the row's commit happened.
//!   An insert (a row that did not exist) is indexed without the
//!   `delete_term` of an upsert.
//! - An [`Indexer`] consumes the changes in commit order (durable commits
//!   only), commits documents and its checkpoint in one tantivy commit,
//!   syncs the index directory, and only then acknowledges the outbox.
//! - [`Indexer::search`] runs BM25 queries with filters and time ranges and
//!   tells, per hit, whether the store row still matches the document;
//!   [`Indexer::verify`] compares the whole index with the store;
//!   [`Indexer::rebuild`] and [`Indexer::open_rebuilt`] rebuild it from a
//!   snapshot of the store.
//!
//! See the README for an example and what is not built yet.
#![cfg_attr(docsrs, feature(doc_cfg))]

mod change;
mod error;
mod indexer;
pub mod inspect;
pub mod metrics;
pub mod prelude;
mod runner;
mod spec;

use std::ops::Bound;
use std::sync::Arc;

use strata_codec::Value;
use strata_engine::Engine;
use strata_keys::Key;
use strata_outbox::{Outbox, Position, Topic};
use strata_store::Tx;

/// The tantivy this crate is built on (its types appear in
/// [`Location::Shared`]).
pub use tantivy;

pub use crate::change::Change;
pub use crate::error::{MAX_QUERY_NESTING, MappingError, QueryError, SearchError};
pub(crate) use crate::error::{check_files, check_nesting, reading};
pub use crate::indexer::{Indexer, IndexerConfig, Location, Merging, Step};
pub use crate::runner::{IndexReport, IndexRunner};
pub use crate::spec::{Document, IndexSpec};

/// This crate's README example, compiled and run as a doctest.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

/// The outbox topic of index `name` is `search.<name>`.
pub const TOPIC_PREFIX: &str = "search.";

impl<K> IndexSpec<K>
where
    K: Key + 'static,
    K::Value: Value,
{
    /// Feeds the index from a topic of the service's own instead of
    /// `search.NAME`, so that the rows need one outbox entry, not two: each
    /// entry of `topic` names, through `rows`, the rows of `K` it changed,
    /// and the indexer reads them from the store (a row that is gone takes
    /// its document with it). The index is a consumer of `topic`, named
    /// after the index.
    ///
    /// The service writes its rows with the store (`tx.put`, `tx.delete`)
    /// and pushes its entry in the same transaction; this spec's `put`,
    /// `insert` and `delete` are refused (they would write entries nobody
    /// reads). The rows are read at a snapshot taken before a sync, so the
    /// index never holds a value whose commit is not durable; it may hold
    /// a value newer than the entry that named it (a later entry names the
    /// row again). An entry that does not decode as `T`, or whose row does
    /// not decode, is dead-lettered.
    ///
    /// ```
    /// # use serde::{Deserialize, Serialize};
    /// # use strata_codec::{value, Limits};
    /// # use strata_engine::MemEngine;
    /// # use strata_keys::tuple_key;
    /// # use strata_outbox::{Outbox, OutboxConfig, Topic};
    /// # use strata_search::{Document, IndexSpec, Indexer, IndexerConfig, Location, Query};
    /// # use strata_store::{Store, StoreOptions};
    /// # #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    /// # struct Order { note: String }
    /// # value!(Order: postcard, version = 1);
    /// # #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    /// # struct Placed { order: u64 }
    /// # value!(Placed: postcard, version = 1);
    /// # #[derive(Debug, Clone, PartialEq)]
    /// # struct OrderKey { order: u64 }
    /// # tuple_key! { OrderKey -> Order = ("order", {order}); }
    /// # let options = Outbox::<MemEngine>::declare(StoreOptions::new(Limits::FOUNDATIONDB));
    /// # let store = Store::open(MemEngine::open(options.keyspace_specs())?, options)?;
    /// let outbox = Outbox::open(&store, OutboxConfig::default())?;
    /// let placed: Topic<Placed> = Topic::new("orders")?;
    /// let spec = IndexSpec::new("notes", |_: &OrderKey, o: &Order| {
    ///     Document::new().text("note", &o.note)
    /// })?
    /// .text("note", 1.0)?
    /// .fed_by(&placed, |p: &Placed| vec![OrderKey { order: p.order }]);
    /// store.transact(|tx| {
    ///     tx.put(&OrderKey { order: 1 }, &Order { note: "a gift".into() })?;
    ///     outbox.push(tx, &placed, &Placed { order: 1 })
    /// })?;
    /// let mut ix = Indexer::open(&outbox, spec, &Location::Memory,
    ///     IndexerConfig::new("notes"), store.clock())?;
    /// ix.catch_up()?;
    /// assert_eq!(ix.search(&Query::new("gift"))?.hits.len(), 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn fed_by<T: Value + 'static>(
        mut self,
        topic: &Topic<T>,
        rows: impl Fn(&T) -> Vec<K> + Send + Sync + 'static,
    ) -> Self {
        self.feed = Some(spec::Feed {
            topic: topic.name().to_owned(),
            rows: Arc::new(move |envelope| {
                let entry = strata_codec::decode::<T>(&[], envelope)
                    .map_err(|e| strata_engine::ErrorChain(&e).to_string())?;
                Ok(rows(&entry))
            }),
        });
        self
    }

    /// The name of the topic the index consumes: `search.NAME`, or the
    /// service's own (see [`IndexSpec::fed_by`]).
    pub fn source_topic(&self) -> String {
        self.feed
            .as_ref()
            .map_or_else(|| self.topic().name().to_owned(), |f| f.topic.clone())
    }

    /// Refuses this spec's own writes when a service's topic feeds it.
    fn own_writes(&self) -> Result<(), SearchError> {
        match &self.feed {
            None => Ok(()),
            Some(f) => Err(MappingError::FedByTopic {
                index: self.name.clone(),
                topic: f.topic.clone(),
            }
            .into()),
        }
    }

    /// The outbox topic that feeds this index.
    pub fn topic(&self) -> Topic<Change> {
        // The name was checked when the spec was made; a topic name only
        // needs 1 to 64 bytes, which the prefix keeps within 71.
        Topic::new(&format!("{TOPIC_PREFIX}{}", self.name)).unwrap_or_else(|_| {
            unreachable!("index names are at most 64 bytes and topic names at most 64")
        })
    }

    /// Writes `value` at `key` in `tx` and the change for the index in the
    /// same commit.
    ///
    /// # Errors
    /// [`SearchError::Mapping`] when the mapping makes of `value` a
    /// document naming an undeclared field (or a time the spec does not
    /// declare); the store's errors for the put and the entry (limits,
    /// encoding). Nothing is written then.
    pub fn put<E: Engine>(
        &self,
        outbox: &Outbox<'_, E>,
        tx: &mut Tx<'_, E>,
        key: &K,
        value: &K::Value,
    ) -> Result<(), SearchError> {
        self.own_writes()?;
        self.check(key, value)?;
        let change = Self::change(key, value, false)?;
        tx.put(key, value)?;
        outbox.push(tx, &self.topic(), &change)?;
        Ok(())
    }

    /// The change of a put of `value` at `key`.
    fn change(key: &K, value: &K::Value, fresh: bool) -> Result<Change, SearchError> {
        Ok(Change {
            key: packed(key)?,
            value: Some((K::Value::VERSION, body_of(value)?)),
            fresh,
        })
    }

    /// Writes `value` at `key` in `tx` if the key holds no value, and the
    /// change for the index in the same commit; returns whether it wrote.
    /// The key is read in the transaction, so a concurrent write of it
    /// makes the commit retry or conflict like any read.
    ///
    /// For rows written once (events, log records): the indexer knows the
    /// index holds no document for the key and adds one without the
    /// `delete_term` of an upsert, which costs tantivy a term lookup in
    /// every segment at commit. This relies on every row of `K` being
    /// written and deleted through this spec (a row deleted behind its
    /// back leaves its document, and an insert at that key then adds a
    /// second one) and on `K` not expiring.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use serde::{Deserialize, Serialize};
    /// # use strata_codec::{value, Limits};
    /// # use strata_engine::{MemEngine, SeededRng, SystemClock};
    /// # use strata_keys::tuple_key;
    /// # use strata_outbox::{Outbox, OutboxConfig};
    /// # use strata_search::{Document, IndexSpec, SearchError};
    /// # use strata_store::{Store, StoreOptions};
    /// # #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    /// # struct Event { text: String }
    /// # value!(Event: postcard, version = 1);
    /// # #[derive(Debug, Clone, PartialEq)]
    /// # struct EventKey { id: u64 }
    /// # tuple_key! { EventKey -> Event = ("event", {id}); }
    /// # let options = Outbox::<MemEngine>::declare(StoreOptions::new(Limits::FOUNDATIONDB));
    /// # let store = Store::open(MemEngine::open(options.keyspace_specs())?, options)?;
    /// # let outbox = Outbox::new(&store, OutboxConfig::default(), Arc::new(SystemClock), Box::new(SeededRng::new(1)))?;
    /// let spec = IndexSpec::new("events", |_: &EventKey, e: &Event| {
    ///     Document::new().text("text", &e.text)
    /// })?
    /// .text("text", 1.0)?;
    /// let first = Event { text: "disk full".into() };
    /// let wrote = store.transact(|tx| spec.insert(&outbox, tx, &EventKey { id: 1 }, &first))?;
    /// assert!(wrote);
    /// // The key holds a value now: nothing is written, no change recorded.
    /// let again = Event { text: "other".into() };
    /// let wrote = store.transact(|tx| spec.insert(&outbox, tx, &EventKey { id: 1 }, &again))?;
    /// assert!(!wrote);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// As [`IndexSpec::put`], plus the read's errors.
    pub fn insert<E: Engine>(
        &self,
        outbox: &Outbox<'_, E>,
        tx: &mut Tx<'_, E>,
        key: &K,
        value: &K::Value,
    ) -> Result<bool, SearchError> {
        self.own_writes()?;
        self.check(key, value)?;
        let change = Self::change(key, value, true)?;
        if !tx.put_if_absent(key, value)? {
            return Ok(false);
        }
        outbox.push(tx, &self.topic(), &change)?;
        Ok(true)
    }

    /// Deletes `key` in `tx` and records the change for the index in the
    /// same commit.
    ///
    /// # Errors
    /// As [`IndexSpec::put`].
    pub fn delete<E: Engine>(
        &self,
        outbox: &Outbox<'_, E>,
        tx: &mut Tx<'_, E>,
        key: &K,
    ) -> Result<(), SearchError> {
        self.own_writes()?;
        let key_bytes = packed(key)?;
        tx.delete(key)?;
        outbox.push(
            tx,
            &self.topic(),
            &Change {
                key: key_bytes,
                value: None,
                fresh: false,
            },
        )?;
        Ok(())
    }
}

/// The body of `value` as its codec writes it (what documents hash).
pub(crate) fn body_of<V: Value>(value: &V) -> Result<Vec<u8>, SearchError> {
    let mut body = Vec::new();
    value.encode_body(&mut body).map_err(SearchError::Encode)?;
    Ok(body)
}

/// `key` packed as the store packs it.
pub(crate) fn packed<K: Key>(key: &K) -> Result<Vec<u8>, SearchError> {
    key.pack().map_err(|source| SearchError::Key {
        key_type: K::NAME,
        source,
    })
}

/// A search: text over the index's text fields (tantivy's query syntax:
/// terms, `"phrases"`, `field:term`, `+must -not`), exact filters on string
/// fields, a time range, and a result count.
#[derive(Debug, Clone, PartialEq)]
pub struct Query {
    pub(crate) text: String,
    pub(crate) filters: Vec<(String, String)>,
    pub(crate) time: Option<(Bound<u64>, Bound<u64>)>,
    pub(crate) limit: usize,
}

impl Query {
    /// A search for `text` (empty: every document passing the filters),
    /// returning 10 hits.
    pub fn new(text: impl Into<String>) -> Self {
        Self {
            text: text.into(),
            filters: Vec::new(),
            time: None,
            limit: 10,
        }
    }

    /// Only documents whose string field `field` holds `value`.
    #[must_use]
    pub fn filter(mut self, field: &str, value: impl Into<String>) -> Self {
        self.filters.push((field.to_owned(), value.into()));
        self
    }

    /// Only documents whose time lies in the range (milliseconds).
    #[must_use]
    pub fn time(mut self, range: impl std::ops::RangeBounds<u64>) -> Self {
        self.time = Some((range.start_bound().cloned(), range.end_bound().cloned()));
        self
    }

    /// At most `n` hits (0: none).
    #[must_use]
    pub fn limit(mut self, n: usize) -> Self {
        self.limit = n;
        self
    }
}

/// Whether a hit's document still matches its store row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Freshness {
    /// The row holds the value the document was made from.
    Current,
    /// The row changed after the index's checkpoint: the document (and its
    /// snippet) describe an older value. Fetch the row, or wait for the
    /// indexer.
    Changed,
    /// The row is gone (deleted or expired) after the index's checkpoint.
    Vanished,
}

/// One search result.
#[derive(Debug, Clone, PartialEq)]
pub struct Hit<K> {
    /// The store key of the row the document was made from.
    pub key: K,
    /// BM25 score (with boosts).
    pub score: f32,
    /// A fragment of the first text field around the matched terms (empty
    /// when the query has no text).
    pub snippet: String,
    /// The version of the commit that wrote the indexed value (for a
    /// document made by [`Indexer::rebuild`], the version of the snapshot
    /// it was read at: the row's commit is at or before it).
    pub version: u64,
    /// Whether the store row still holds that value.
    pub freshness: Freshness,
}

/// The hits of a search, best first, and the index position they come from.
#[derive(Debug, Clone, PartialEq)]
pub struct Results<K> {
    /// The index's checkpoint: the results reflect every change at or
    /// below it and none after.
    pub checkpoint: Position,
    /// The best hits, at most the query's limit.
    pub hits: Vec<Hit<K>>,
}

/// What [`Indexer::rebuild`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rebuilt {
    /// Documents indexed from the snapshot.
    pub documents: u64,
    /// Rows left out: their mapping makes no document (a field it did not
    /// declare, a string value too long for one term), as the feed
    /// dead-letters such a change; `verify` reports them missing.
    pub skipped: u64,
    /// Rows left out because their value does not decode (damaged: a
    /// checksum, a body or chunks that do not read). The index is built
    /// from the rest; `verify` of the store names them, and the index's
    /// own `verify` fails on them until they are repaired or deleted.
    pub damaged: u64,
    /// The snapshot's version.
    pub version: u64,
    /// Clock milliseconds from start to the end of catching up.
    pub elapsed_ms: u64,
}

impl Rebuilt {
    /// Documents per second of the clock (the whole count when no time
    /// passed).
    pub fn rate(&self) -> u64 {
        self.documents
            .saturating_mul(1_000)
            .checked_div(self.elapsed_ms)
            .unwrap_or(self.documents)
    }
}

/// What [`Indexer::verify`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verified {
    /// The store snapshot's version.
    pub store_version: u64,
    /// The index's checkpoint.
    pub checkpoint: Position,
    /// Documents in the index.
    pub documents: usize,
    /// Rows of the key type in the store.
    pub rows: usize,
    /// Keys of rows without a document.
    pub missing: Vec<Vec<u8>>,
    /// Keys of documents without a row.
    pub extra: Vec<Vec<u8>>,
    /// Keys whose document was made from another value than the row's.
    pub stale: Vec<Vec<u8>>,
    /// Keys with more than one document.
    pub duplicates: Vec<Vec<u8>>,
    /// Keys of rows of the key type whose values do not decode (damaged:
    /// the checksum, the body or the chunks), in key order: left out of
    /// the comparison (a document of one is neither compared nor extra).
    /// The store's damage, not the index's: `strata verify` says more of
    /// it, and a rebuild leaves such rows out.
    pub damaged: Vec<Vec<u8>>,
}

impl Verified {
    /// Whether the index is exactly the projection of the store: no
    /// difference, and no damaged row (whose projection is unknown).
    pub fn is_exact(&self) -> bool {
        self.missing.is_empty()
            && self.extra.is_empty()
            && self.stale.is_empty()
            && self.duplicates.is_empty()
            && self.damaged.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_report_is_exact_only_when_every_list_is_empty() {
        let exact = Verified {
            store_version: 1,
            checkpoint: Position::START,
            documents: 0,
            rows: 0,
            missing: Vec::new(),
            extra: Vec::new(),
            stale: Vec::new(),
            duplicates: Vec::new(),
            damaged: Vec::new(),
        };
        assert!(exact.is_exact());
        let k = vec![vec![1u8]];
        for (i, field) in ["missing", "extra", "stale", "duplicates", "damaged"]
            .iter()
            .enumerate()
        {
            let mut r = exact.clone();
            match i {
                0 => r.missing.clone_from(&k),
                1 => r.extra.clone_from(&k),
                2 => r.stale.clone_from(&k),
                3 => r.duplicates.clone_from(&k),
                _ => r.damaged.clone_from(&k),
            }
            assert!(!r.is_exact(), "only {field} is not empty");
        }
    }

    #[test]
    fn a_rebuild_rate_is_documents_per_second() {
        let r = |documents, elapsed_ms| {
            Rebuilt {
                documents,
                skipped: 0,
                damaged: 0,
                version: 1,
                elapsed_ms,
            }
            .rate()
        };
        assert_eq!(r(500, 250), 2_000);
        assert_eq!(r(3, 2_000), 1);
        assert_eq!(r(7, 0), 7, "no time passed: the count");
    }
}
