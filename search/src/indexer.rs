//! The indexer: an outbox consumer that applies changes to a tantivy index
//! and commits its checkpoint inside the index's own commit.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use strata_codec::Value;
use strata_engine::{Clock, Engine};
use strata_keys::Key;
use strata_outbox::{Lease, Outbox, OutboxError, Position, Start, Topic};
use tantivy::collector::{DocSetCollector, TopDocs};
use tantivy::directory::{Directory, MmapDirectory, RamDirectory};
use tantivy::indexer::UserOperation;
use tantivy::query::{AllQuery, BooleanQuery, Occur, QueryParser, RangeQuery, TermQuery};
use tantivy::schema::{IndexRecordOption, Value as _};
use tantivy::snippet::SnippetGenerator;
use tantivy::{Index, IndexReader, IndexWriter, ReloadPolicy, TantivyDocument, Term};

use crate::change::{Change, body_hash};
use crate::spec::{Fields, IndexSpec};
use crate::{Freshness, Hit, Query, Rebuilt, Results, SearchError, Verified};

/// The prefix of the checkpoint this crate writes as a tantivy commit's
/// payload: `strata-search/1 VERSION.ORDER`.
const PAYLOAD: &str = "strata-search/1 ";

/// Where an index keeps its files.
#[derive(Debug, Clone)]
pub enum Location {
    /// A directory of its own (created if missing), apart from the
    /// engine's files. It holds generations of the index (`gen-1`,
    /// `gen-2`, ... after each [`Indexer::rebuild`]) and a file `CURRENT`
    /// naming the one in use, replaced atomically (written, synced,
    /// renamed, and the directory synced).
    Dir(PathBuf),
    /// In memory, lost when dropped: for tests and examples.
    Memory,
    /// In memory, shared by the clones of one `RamDirectory`: an indexer
    /// opened again on a clone finds what the last one committed (for
    /// simulations of an indexer's crash).
    Shared(RamDirectory),
}

/// How an [`Indexer`] runs.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct IndexerConfig {
    /// The outbox lease holder's name, shown by `LeaseHeld` errors and the
    /// tool. It decides nothing: a lease belongs to the indexer that took
    /// it, so two indexers with one name never both hold the index.
    pub holder: String,
    /// Entries per outbox poll (default 256).
    pub batch: usize,
    /// Commit the index after this many changes (default 1,000)...
    pub commit_docs: usize,
    /// ...or this many bytes of changed values (default 8 MiB)...
    pub commit_bytes: usize,
    /// ...or when the oldest uncommitted change is this old, in clock
    /// milliseconds (default 1,000).
    pub commit_interval_ms: u64,
    /// tantivy indexing threads (default: half the cores, at least one and
    /// at most four; one on a 2-core machine).
    pub threads: usize,
    /// tantivy's memory budget over all threads (default 24 MiB a thread;
    /// tantivy needs at least 15 MB a thread).
    pub memory_bytes: usize,
    /// How segments are merged (default [`Merging::Log`]).
    pub merging: Merging,
    /// A deliberate mistake for the simulation (feature `planted-bugs`
    /// only).
    #[cfg(feature = "planted-bugs")]
    pub planted: Option<PlantedBug>,
}

/// How tantivy merges the segments its commits write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Merging {
    /// tantivy's log-merge policy (its default), on background threads:
    /// segments of similar size are merged as commits add them.
    #[default]
    Log,
    /// Never: every commit adds a segment, and searches slow down as they
    /// pile up. For a bulk load that is merged later, or a measurement of
    /// the feed alone.
    Never,
}

/// Deliberate mistakes the simulation must catch (feature `planted-bugs`,
/// which normal builds never enable).
#[cfg(feature = "planted-bugs")]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PlantedBug {
    /// The outbox is acknowledged as soon as entries are applied, before
    /// the index commits them.
    AckBeforeIndexCommit,
    /// A put adds its document without deleting the row's old one.
    UpsertWithoutDelete,
    /// Entries of commits that are not durable yet are indexed.
    IndexNonDurable,
    /// A rebuild indexes its snapshot without syncing the engine first, so
    /// its checkpoint can be ahead of what a crash keeps.
    RebuildWithoutSync,
}

#[cfg(feature = "planted-bugs")]
impl PlantedBug {
    /// Every planted bug.
    pub const ALL: [Self; 4] = [
        Self::AckBeforeIndexCommit,
        Self::UpsertWithoutDelete,
        Self::IndexNonDurable,
        Self::RebuildWithoutSync,
    ];

    /// Its name on the command line.
    pub const fn name(self) -> &'static str {
        match self {
            Self::AckBeforeIndexCommit => "ack-before-index-commit",
            Self::UpsertWithoutDelete => "upsert-without-delete",
            Self::IndexNonDurable => "index-non-durable",
            Self::RebuildWithoutSync => "rebuild-without-sync",
        }
    }

    /// The bug with this name.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|b| b.name() == name)
    }
}

impl IndexerConfig {
    /// Defaults for lease holder `holder`.
    pub fn new(holder: impl Into<String>) -> Self {
        let cores = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
        let threads = (cores / 2).clamp(1, 4);
        Self {
            holder: holder.into(),
            batch: 256,
            commit_docs: 1_000,
            commit_bytes: 8 << 20,
            commit_interval_ms: 1_000,
            threads,
            memory_bytes: threads * (24 << 20),
            merging: Merging::Log,
            #[cfg(feature = "planted-bugs")]
            planted: None,
        }
    }
}

/// What one [`Indexer::step`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Step {
    /// Entries received from the outbox and applied.
    pub received: usize,
    /// Whether the outbox was acknowledged for a commit of the index that
    /// had not been (a crash or failure came between the two).
    pub late_ack: bool,
    /// Whether the index committed (and the outbox was acknowledged).
    pub committed: bool,
}

/// An outbox consumer keeping a tantivy index of the rows of `K`.
///
/// Every entry is applied in commit order: a put replaces the row's
/// document (`delete_term` on `_key`, then add), a delete removes it. The
/// position of the last applied entry is written as the payload of the
/// index's own commit, so documents and checkpoint are atomic; the index
/// directory is then synced, and only after that is the outbox consumer
/// acknowledged. On open, indexing resumes from the payload: entries the
/// outbox delivers again at or below it are acknowledged without being
/// applied twice. The index reads nothing but the entries (which only
/// reach it once their commit is durable), so it is never ahead of the
/// durable store.
pub struct Indexer<'o, 's, E: Engine, K: Key> {
    outbox: &'o Outbox<'s, E>,
    spec: IndexSpec<K>,
    topic: Topic<Change>,
    /// The topic consumed: `topic`'s name, or the service's own.
    source: String,
    config: IndexerConfig,
    clock: Arc<dyn Clock>,
    index: Index,
    writer: IndexWriter,
    reader: IndexReader,
    /// A commit since the reader last reloaded: the next search reloads
    /// it (a reload per commit would cost every batch, searched or not).
    reload_due: AtomicBool,
    fields: Fields,
    lease: Option<Lease>,
    /// The position committed in the index.
    checkpoint: Position,
    /// The last position applied to the writer (at or after `checkpoint`).
    applied: Position,
    pending_docs: usize,
    pending_bytes: usize,
    /// Clock reading at the first uncommitted change.
    pending_since: Option<u64>,
    location: Location,
    /// The generation in use (`None` in memory).
    generation: Option<u64>,
}

impl<E: Engine, K: Key> std::fmt::Debug for Indexer<'_, '_, E, K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Indexer")
            .field("index", &self.spec.name)
            .field("checkpoint", &self.checkpoint)
            .field("applied", &self.applied)
            .finish_non_exhaustive()
    }
}

impl<'o, 's, E, K> Indexer<'o, 's, E, K>
where
    E: Engine,
    K: Key + 'static,
    K::Value: Value,
{
    /// Opens (or creates) the index of `spec` at `location` and registers
    /// its outbox consumer (named after the index, starting at the
    /// beginning of the topic) if it is new.
    ///
    /// # Errors
    /// [`SearchError::Behind`] when the outbox consumer has acknowledged
    /// more than the index holds; [`SearchError::MappingChanged`] when the
    /// index was built with another mapping (both: open it with
    /// [`Indexer::open_rebuilt`]); [`SearchError::Payload`]; tantivy, I/O
    /// and store failures.
    pub fn open(
        outbox: &'o Outbox<'s, E>,
        spec: IndexSpec<K>,
        location: &Location,
        config: IndexerConfig,
        clock: Arc<dyn Clock>,
    ) -> Result<Self, SearchError> {
        let (schema, fields) = spec.schema();
        let topic = spec.topic();
        let source = spec.source_topic();
        // Everything is checked before anything is written: a refused open
        // creates no directory, registers nothing, moves no catalog entry.
        let acknowledged = match outbox.checkpoint(&source, &spec.name) {
            Ok(p) => p,
            Err(OutboxError::UnknownConsumer { .. }) => Position::START,
            Err(e) => return Err(e.into()),
        };
        let (existing, generation) = match location {
            Location::Dir(root) => match peek_generation(root)? {
                Some(g) if root.join(generation_name(g)).is_dir() => {
                    (Some(generation_dir(root, g, false)?), Some(g))
                }
                Some(g) => (None, Some(g)),
                None => (None, None),
            },
            Location::Memory => (None, None),
            Location::Shared(ram) => (Some(Box::new(ram.clone()) as Box<dyn Directory>), None),
        };
        let existing = match existing {
            Some(directory)
                if Index::exists(&*directory).map_err(tantivy::TantivyError::from)? =>
            {
                let index = Index::open(directory)?;
                if index.schema() != schema {
                    return Err(SearchError::MappingChanged {
                        index: spec.name.clone(),
                    });
                }
                Some(index)
            }
            _ => None,
        };
        let checkpoint = match &existing {
            Some(index) => match index.load_metas()?.payload {
                None => Position::START,
                Some(p) => parse_payload(&p)?,
            },
            None => Position::START,
        };
        if acknowledged > checkpoint {
            return Err(SearchError::Behind {
                index: checkpoint,
                outbox: acknowledged,
            });
        }
        let (index, generation) = match (existing, location) {
            (Some(index), _) => (index, generation),
            (None, Location::Dir(root)) => {
                let g = current_generation(root)?;
                let directory = generation_dir(root, g, false)?;
                (
                    Index::create(directory, schema, tantivy::IndexSettings::default())?,
                    Some(g),
                )
            }
            (None, Location::Memory) => (
                Index::create(
                    RamDirectory::create(),
                    schema,
                    tantivy::IndexSettings::default(),
                )?,
                None,
            ),
            (None, Location::Shared(ram)) => (
                Index::create(ram.clone(), schema, tantivy::IndexSettings::default())?,
                None,
            ),
        };
        let writer = writer(&index, &config)?;
        let reader = index
            .reader_builder()
            .reload_policy(ReloadPolicy::Manual)
            .try_into()?;
        outbox.register(&source, &spec.name, Start::Beginning)?;
        record(outbox, &spec.name, &source, location)?;
        tracing::debug!(index = spec.name, %checkpoint, "search index opened");
        Ok(Self {
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
            lease: None,
            checkpoint,
            applied: checkpoint,
            pending_docs: 0,
            pending_bytes: 0,
            pending_since: None,
            location: location.clone(),
            generation,
        })
    }

    /// Stops this indexer cleanly: gives up its outbox lease (see
    /// [`Outbox::release`]), so another process (`strata search verify`,
    /// a new service instance) can take the index over at once instead of
    /// after the lease expires. Uncommitted changes are dropped, as when
    /// the indexer is simply dropped; they are applied again by the next
    /// indexer.
    ///
    /// # Errors
    /// A store failure (the lease then expires on its own).
    pub fn close(mut self) -> Result<(), SearchError> {
        if let Some(lease) = self.lease.take() {
            self.outbox.release(&lease)?;
        }
        Ok(())
    }

    /// The position committed in the index: every entry at or below it is
    /// in the index, none above it is visible to searches.
    pub fn checkpoint(&self) -> Position {
        self.checkpoint
    }

    /// The mapping.
    pub fn spec(&self) -> &IndexSpec<K> {
        &self.spec
    }

    fn lease(&mut self) -> Result<Lease, SearchError> {
        let now = self.clock.now_ms();
        match &self.lease {
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
                self.lease = Some(l.clone());
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
                Err(e @ (SearchError::Decode(_) | SearchError::Mapping(_))) => {
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
                        error = %e,
                        "a change that does not index: dead-lettered"
                    );
                    match self.outbox.dead_letter(&lease, *position, &e.to_string()) {
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
        #[cfg(feature = "planted-bugs")]
        if self.bug(PlantedBug::AckBeforeIndexCommit) && !batch.is_empty() {
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
    fn poll_changes(&self, lease: &Lease, max: usize) -> Result<Vec<Fed>, SearchError> {
        #[cfg(feature = "planted-bugs")]
        let batch = if self.bug(PlantedBug::IndexNonDurable) {
            self.outbox
                .planted_poll_beyond_durable(lease, &self.topic, self.applied, max)?
        } else {
            self.outbox
                .poll_after(lease, &self.topic, self.applied, max)?
        };
        #[cfg(not(feature = "planted-bugs"))]
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
    fn poll_feed(
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
                            &format!("row {} does not read: {e}", K::NAME),
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

    fn dead_letter_entry(
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

    /// Whether `bug` is planted.
    #[cfg(feature = "planted-bugs")]
    fn bug(&self, bug: PlantedBug) -> bool {
        self.config.planted == Some(bug)
    }

    fn due(&self) -> bool {
        self.pending_docs >= self.config.commit_docs
            || self.pending_bytes >= self.config.commit_bytes
            || self.pending_since.is_some_and(|t| {
                self.clock.now_ms().saturating_sub(t) >= self.config.commit_interval_ms
            })
    }

    /// Adds the operations of one change to `ops`.
    fn apply(
        &mut self,
        change: &Change,
        version: u64,
        ops: &mut Vec<UserOperation>,
    ) -> Result<(), SearchError> {
        // The document first: a change that does not decode adds nothing,
        // not even its delete.
        let doc = match &change.value {
            Some((schema_version, body)) => {
                let key = K::unpack(&change.key)
                    .map_err(|e| SearchError::Decode(format!("key of {}: {e}", K::NAME)))?;
                let value = K::Value::decode_body(*schema_version, body)
                    .map_err(|e| SearchError::Decode(format!("value of {}: {e}", K::NAME)))?;
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
        #[cfg(feature = "planted-bugs")]
        let delete =
            !change.fresh && (change.value.is_none() || !self.bug(PlantedBug::UpsertWithoutDelete));
        #[cfg(not(feature = "planted-bugs"))]
        let delete = !change.fresh;
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
        let mut prepared = self.writer.prepare_commit()?;
        prepared.set_payload(&format!("{PAYLOAD}{}", self.applied));
        prepared.commit()?;
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

    fn acknowledge(&self, lease: &Lease) -> Result<(), SearchError> {
        let at = self.checkpoint;
        if at == Position::START {
            return Ok(());
        }
        self.outbox
            .store()
            .transact(|tx| self.outbox.ack_through(tx, lease, at))?;
        Ok(())
    }

    /// Searches the committed index. Each hit's row is read from the store
    /// to report whether the document still matches it.
    ///
    /// # Errors
    /// [`SearchError::Query`]; tantivy and store failures.
    pub fn search(&self, query: &Query) -> Result<Results<K>, SearchError> {
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
            let mut parser = QueryParser::for_index(&self.index, text_fields.clone());
            for (field, boost) in &self.fields.text {
                parser.set_field_boost(*field, *boost);
            }
            let parsed = parser
                .parse_query(&query.text)
                .map_err(|e| SearchError::Query(e.to_string()))?;
            parts.push((Occur::Must, parsed));
        }
        for (name, value) in &query.filters {
            let i = self
                .spec
                .strings
                .iter()
                .position(|f| f == name)
                .ok_or_else(|| SearchError::Query(format!("no string field {name:?}")))?;
            let term = Term::from_field_text(self.fields.strings[i], value);
            parts.push((
                Occur::Must,
                Box::new(TermQuery::new(term, IndexRecordOption::Basic)),
            ));
        }
        if let Some((start, end)) = &query.time {
            let field = self
                .fields
                .time
                .ok_or_else(|| SearchError::Query("this index has no time".into()))?;
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
            let key = K::unpack(&key_bytes)
                .map_err(|e| SearchError::Decode(format!("key of {}: {e}", K::NAME)))?;
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

    fn identity(&self, doc: &TantivyDocument) -> Result<(Vec<u8>, u64, u64), SearchError> {
        let missing = |what| SearchError::Decode(format!("a document without {what}"));
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

    /// Compares the index with the store: syncs the engine, catches up with
    /// every durable entry, then compares the documents with the rows of
    /// `K` in a snapshot at the same point (retrying while writers move the
    /// store on): missing, extra and stale documents.
    ///
    /// # Errors
    /// As [`Indexer::catch_up`]; a row that does not decode.
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
            for_each_row::<E, K>(&view, |bytes, _, _, body| {
                expected.insert(bytes, body_hash(&body));
                Ok(())
            })?;
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
            return Ok(differences(
                version,
                self.checkpoint,
                &expected,
                &indexed,
                duplicates,
            ));
        }
    }

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
            self.lease,
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
    fn rebuild_from(
        outbox: &'o Outbox<'s, E>,
        spec: IndexSpec<K>,
        config: IndexerConfig,
        clock: Arc<dyn Clock>,
        location: Location,
        generation: Option<u64>,
        old: Option<(IndexWriter, IndexReader, Index)>,
        lease: Option<Lease>,
    ) -> Result<(Self, Rebuilt), SearchError> {
        let topic = spec.topic();
        let started = clock.now_ms();
        let store = outbox.store();
        // The snapshot first, then a sync: everything it holds is durable.
        let view = store.read()?;
        let version = view.version()?;
        #[cfg(feature = "planted-bugs")]
        let skip_sync = config.planted == Some(PlantedBug::RebuildWithoutSync);
        #[cfg(not(feature = "planted-bugs"))]
        let skip_sync = false;
        if !skip_sync {
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
        let documents = index_rows(&view, &spec, &fields, &writer, version)?;
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
                version,
                elapsed_ms,
            },
        ))
    }

    /// The generation in use (`None` for an index in memory).
    pub fn generation(&self) -> Option<u64> {
        self.generation
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
    fn searcher(&self) -> Result<tantivy::Searcher, SearchError> {
        if self.reload_due.swap(false, Ordering::AcqRel)
            && let Err(e) = self.reader.reload()
        {
            self.reload_due.store(true, Ordering::Release);
            return Err(e.into());
        }
        Ok(self.reader.searcher())
    }
}

/// The index writer `config` asks for, its memory raised to the 15 MB a
/// thread tantivy requires.
fn writer(index: &Index, config: &IndexerConfig) -> Result<IndexWriter, SearchError> {
    let threads = config.threads.max(1);
    let writer: IndexWriter =
        index.writer_with_num_threads(threads, config.memory_bytes.max(threads * 15_000_000))?;
    match config.merging {
        Merging::Log => {}
        Merging::Never => writer.set_merge_policy(Box::new(tantivy::indexer::NoMergePolicy)),
    }
    Ok(writer)
}

/// Adds a document for every row of `K` in `view` to `writer`.
fn index_rows<E: Engine, K>(
    view: &strata_store::ReadView<'_, E>,
    spec: &IndexSpec<K>,
    fields: &Fields,
    writer: &IndexWriter,
    version: u64,
) -> Result<u64, SearchError>
where
    K: Key,
    K::Value: Value,
{
    let mut documents = 0u64;
    for_each_row(view, |key_bytes, key, value, body| {
        writer.add_document(document(
            spec, fields, &key_bytes, &key, &value, &body, version,
        )?)?;
        documents += 1;
        Ok(())
    })?;
    Ok(documents)
}

/// Calls `f` with every row of `K` in `view`: its packed key, key, value
/// and the value's body.
/// What differs between the documents `indexed` and the rows `expected`
/// (each by key, with the hash of its value's body).
pub(crate) fn differences(
    store_version: u64,
    checkpoint: Position,
    expected: &BTreeMap<Vec<u8>, u64>,
    indexed: &BTreeMap<Vec<u8>, u64>,
    duplicates: BTreeSet<Vec<u8>>,
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
        .filter(|k| !expected.contains_key(*k))
        .cloned()
        .collect();
    report
}

pub(crate) fn for_each_row<E: Engine, K>(
    view: &strata_store::ReadView<'_, E>,
    mut f: impl FnMut(Vec<u8>, K, K::Value, Vec<u8>) -> Result<(), SearchError>,
) -> Result<(), SearchError>
where
    K: Key,
    K::Value: Value,
{
    let scan = strata_store::Scan::all().skip_other_types();
    for row in view.scan::<K>(&scan)? {
        let (key, value) = row?;
        let body = crate::body_of(&value)?;
        f(crate::packed(&key)?, key, value, body)?;
    }
    Ok(())
}

/// The document of one row.
fn document<K: Key>(
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
type Fed = (Position, Option<Change>);

pub(crate) const CURRENT: &str = "CURRENT";

/// Operations handed to tantivy's indexing thread at once.
const HAND_OVER: usize = 32;

pub(crate) fn generation_name(g: u64) -> String {
    format!("gen-{g}")
}

/// The generation `CURRENT` names in `root` (created as generation 1 when
/// the directory is new).
fn current_generation(root: &std::path::Path) -> Result<u64, SearchError> {
    std::fs::create_dir_all(root)?;
    if let Some(g) = peek_generation(root)? {
        return Ok(g);
    }
    switch_generation(root, 1)?;
    Ok(1)
}

/// The generation `CURRENT` names, `None` when there is none yet (nothing
/// is created).
fn peek_generation(root: &std::path::Path) -> Result<Option<u64>, SearchError> {
    match std::fs::read_to_string(root.join(CURRENT)) {
        Ok(text) => text
            .trim()
            .strip_prefix("gen-")
            .and_then(|n| n.parse().ok())
            .map(Some)
            .ok_or_else(|| SearchError::Payload(format!("{CURRENT} holds {text:?}"))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// Replaces the index in the shared directory `shared` by the one in
/// `fresh`: the old index's files removed, the new one's copied in. Done
/// in one call, so no indexer of this process sees it half-way.
fn replace_shared(shared: &RamDirectory, fresh: &RamDirectory) -> Result<(), SearchError> {
    if Index::exists(shared).map_err(tantivy::TantivyError::from)? {
        let files = Index::open(shared.clone())?
            .directory()
            .list_managed_files();
        for file in files
            .iter()
            .map(PathBuf::as_path)
            .chain([Path::new("meta.json"), Path::new(".managed.json")])
        {
            match shared.delete(file) {
                Ok(()) | Err(tantivy::directory::error::DeleteError::FileDoesNotExist(_)) => {}
                Err(e) => return Err(SearchError::Io(std::io::Error::other(e))),
            }
        }
    }
    fresh.persist(shared)?;
    Ok(())
}

/// The directory of generation `g`, emptied first when `fresh`.
fn generation_dir(
    root: &std::path::Path,
    g: u64,
    fresh: bool,
) -> Result<Box<dyn Directory>, SearchError> {
    let dir = root.join(generation_name(g));
    if fresh && dir.exists() {
        std::fs::remove_dir_all(&dir)?;
    }
    std::fs::create_dir_all(&dir)?;
    let mmap = MmapDirectory::open(&dir)
        .map_err(|e| SearchError::Tantivy(tantivy::TantivyError::from(e)))?;
    Ok(Box::new(mmap))
}

/// Points `CURRENT` at generation `g`: a new file written and synced, then
/// renamed over the old one, then the directory synced so the rename
/// survives a power cut.
fn switch_generation(root: &std::path::Path, g: u64) -> Result<(), SearchError> {
    use std::io::Write;
    let tmp = root.join("CURRENT.tmp");
    let mut file = std::fs::File::create(&tmp)?;
    file.write_all(generation_name(g).as_bytes())?;
    file.sync_all()?;
    drop(file);
    std::fs::rename(&tmp, root.join(CURRENT))?;
    std::fs::File::open(root)?.sync_all()?;
    Ok(())
}

fn remove_generations_but(root: &std::path::Path, keep: u64) -> Result<(), SearchError> {
    let keep = generation_name(keep);
    for entry in std::fs::read_dir(root)? {
        let entry = entry?;
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name.starts_with("gen-") && name != keep {
            std::fs::remove_dir_all(entry.path())?;
        }
    }
    Ok(())
}

/// Describes the index in the store's catalog (see
/// [`CATALOG_INDEX`](crate::inspect::CATALOG_INDEX)), when it is not
/// already: a read, and a commit the first time.
fn record<E: Engine>(
    outbox: &Outbox<'_, E>,
    name: &str,
    topic: &str,
    location: &Location,
) -> Result<(), SearchError> {
    let dir = match location {
        Location::Dir(root) => std::fs::canonicalize(root)?.to_string_lossy().into_owned(),
        Location::Memory | Location::Shared(_) => String::new(),
    };
    let detail = strata_keys::tuple::pack(&(topic, name, dir.as_str()));
    let store = outbox.store();
    let kind = crate::inspect::CATALOG_INDEX;
    let known = store
        .catalog()?
        .into_iter()
        .any(|e| e.kind == kind && e.name == name && e.detail == detail);
    if !known {
        store.transact(|tx| tx.catalog_put(kind, name, 1, &detail))?;
    }
    Ok(())
}

pub(crate) fn parse_payload(payload: &str) -> Result<Position, SearchError> {
    let bad = || SearchError::Payload(payload.to_owned());
    let rest = payload.strip_prefix(PAYLOAD).ok_or_else(bad)?;
    let (version, order) = rest.split_once('.').ok_or_else(bad)?;
    Ok(Position {
        version: version.parse().map_err(|_| bad())?,
        order: order.parse().map_err(|_| bad())?,
    })
}
