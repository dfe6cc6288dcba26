//! The indexer: an outbox consumer that applies changes to a tantivy index
//! and commits its checkpoint inside the index's own commit.
//!
//! This file holds [`Indexer`] itself (opening, closing, its checkpoint)
//! and the catalog record; one concept per file beside it:
//!
//! | file | what |
//! |---|---|
//! | `config.rs` | [`Location`], [`IndexerConfig`], [`Merging`], the index writer |
//! | `feed.rs` | the consume loop: lease, poll, apply, commit with the checkpoint, acknowledge |
//! | `query.rs` | searching, and the index's counts |
//! | `verify.rs` | the index checked against the store's rows |
//! | `rebuild.rs` | a rebuild from a store snapshot into a new generation |
//! | `generations.rs` | generation directories and the switch between them |

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use strata_codec::Value;
use strata_engine::{Clock, Engine};
use strata_keys::Key;
use strata_outbox::{Lease, Outbox, OutboxError, Position, Start, Topic};
use tantivy::directory::{Directory, RamDirectory};
use tantivy::{Index, IndexReader, IndexWriter, ReloadPolicy};

use crate::SearchError;
use crate::change::Change;
use crate::spec::{Fields, IndexSpec};

mod config;
mod feed;
mod generations;
mod query;
mod rebuild;
mod verify;

pub(crate) use self::config::writer;
pub use self::config::{IndexerConfig, Location, Merging};
pub(crate) use self::feed::document;
pub(crate) use self::generations::{
    CURRENT, current_generation, generation_dir, generation_name, peek_generation,
    remove_generations_but, replace_shared, switch_generation,
};
pub(crate) use self::verify::{differences, for_each_row};

/// The prefix of the checkpoint this crate writes as a tantivy commit's
/// payload: `strata-search/1 VERSION.ORDER`.
const PAYLOAD: &str = "strata-search/1 ";

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
    /// The outbox lease, given back when the indexer is dropped.
    lease: Held<'o, 's, E>,
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

/// An indexer's outbox lease, given back when dropped (unless
/// [`IndexerConfig::release_on_drop`] is off): an indexer dropped on an
/// error path, a `?` after [`Indexer::open`] included, lets the next one
/// take the index over at once instead of after the lease expires. Its own
/// type, so the indexer's fields can still move (a rebuild moves them into
/// the new indexer, the lease with them).
pub(crate) struct Held<'o, 's, E: Engine> {
    outbox: &'o Outbox<'s, E>,
    current: Option<Lease>,
    release_on_drop: bool,
}

impl<'o, 's, E: Engine> Held<'o, 's, E> {
    fn new(outbox: &'o Outbox<'s, E>, current: Option<Lease>, config: &IndexerConfig) -> Self {
        Self {
            outbox,
            current,
            release_on_drop: config.release_on_drop,
        }
    }
}

impl<E: Engine> Drop for Held<'_, '_, E> {
    fn drop(&mut self) {
        if !self.release_on_drop {
            return;
        }
        if let Some(lease) = self.current.take() {
            match self.outbox.release(&lease) {
                Ok(()) => tracing::debug!(
                    consumer = lease.consumer(),
                    "a dropped indexer gave its lease back"
                ),
                Err(e) => tracing::warn!(
                    consumer = lease.consumer(),
                    error = %strata_engine::ErrorChain(&e),
                    "a dropped indexer's lease was not given back; it expires on its own"
                ),
            }
        }
    }
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
    let bad = || SearchError::Payload {
        found: payload.to_owned(),
    };
    let rest = payload.strip_prefix(PAYLOAD).ok_or_else(bad)?;
    let (version, order) = rest.split_once('.').ok_or_else(bad)?;
    Ok(Position {
        version: version.parse().map_err(|_| bad())?,
        order: order.parse().map_err(|_| bad())?,
    })
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
    /// [`Indexer::open_rebuilt`]); [`SearchError::Payload`],
    /// [`SearchError::Current`]; [`SearchError::Checksum`] and
    /// [`SearchError::Damaged`] for damaged files (rebuild it:
    /// [`Indexer::open_rebuilt`]); tantivy, I/O and store failures.
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
        // tantivy reads the index's files from here on: a panic of its on
        // a damaged file is `SearchError::Damaged`.
        let (index, generation, checkpoint, writer, reader) =
            crate::reading("opening the index", || {
                open_index(
                    existing,
                    generation,
                    schema,
                    &spec.name,
                    acknowledged,
                    location,
                    &config,
                )
            })?;
        outbox.register(&source, &spec.name, Start::Beginning)?;
        record(outbox, &spec.name, &source, location)?;
        tracing::debug!(index = spec.name, %checkpoint, "search index opened");
        let lease = Held::new(outbox, None, &config);
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
            lease,
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
    /// after the lease expires. Uncommitted changes are dropped; they are
    /// applied again by the next indexer. Dropping the indexer does the
    /// same ([`IndexerConfig::release_on_drop`]) but can only log a
    /// failure; `close` returns it.
    ///
    /// # Errors
    /// A store failure (the lease then expires on its own).
    pub fn close(mut self) -> Result<(), SearchError> {
        if let Some(lease) = self.lease.current.take() {
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
}

/// What an opened index is made of: the index, its generation, its
/// checkpoint, its writer and its reader.
type Opened = (Index, Option<u64>, Position, IndexWriter, IndexReader);

/// The index in `existing` (or a new one at `location`), its checkpoint
/// checked against the consumer's `acknowledged`, with its writer and
/// reader: the part of [`Indexer::open`] that reads the index's files.
fn open_index(
    existing: Option<Box<dyn Directory>>,
    generation: Option<u64>,
    schema: tantivy::schema::Schema,
    name: &str,
    acknowledged: Position,
    location: &Location,
    config: &IndexerConfig,
) -> Result<Opened, SearchError> {
    let existing = match existing {
        Some(directory) if Index::exists(&*directory).map_err(tantivy::TantivyError::from)? => {
            let index = Index::open(directory)?;
            if index.schema() != schema {
                return Err(SearchError::MappingChanged {
                    index: name.to_owned(),
                });
            }
            if config.verify_at_open {
                crate::check_files(&index)?;
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
    let writer = writer(&index, config)?;
    let reader = index
        .reader_builder()
        .reload_policy(ReloadPolicy::Manual)
        .try_into()?;
    Ok((index, generation, checkpoint, writer, reader))
}
