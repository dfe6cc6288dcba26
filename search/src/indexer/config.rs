//! Where an index lives and how its indexer runs: `Location`,
//! `IndexerConfig`, `Merging`.

use std::path::PathBuf;

use tantivy::directory::RamDirectory;
use tantivy::{Index, IndexWriter};

use crate::SearchError;

/// Where an index keeps its files.
#[derive(Debug, Clone)]
pub enum Location {
    /// A directory of its own (created if missing), apart from the
    /// engine's files. It holds generations of the index (`gen-1`,
    /// `gen-2`, ... after each [`Indexer::rebuild`](crate::Indexer::rebuild)) and a file `CURRENT`
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

/// How an [`Indexer`](crate::Indexer) runs.
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
    /// Check every file of the committed segments of an existing index
    /// against its checksum (the CRC-32 tantivy writes in each file's
    /// footer) when the index is opened: a damaged file is refused with
    /// [`SearchError::Checksum`] before tantivy reads it. Unchecked,
    /// tantivy reading damaged bytes panics (caught:
    /// [`SearchError::Damaged`]) or aborts the process, which nothing
    /// catches: a panic in its writer's delete pass, which runs on a rayon
    /// pool, or an allocation of a length read from the damage in a
    /// release build. Costs one read of the whole index per open. Default
    /// `true`; turn it off only for an index too large to read at each
    /// open, on storage you trust.
    pub verify_at_open: bool,
    /// Give the outbox lease back when the indexer is dropped, as
    /// [`Indexer::close`](crate::Indexer::close) does: one store commit
    /// in the drop, whose failure is only logged (the lease then expires
    /// on its own). Off, a dropped indexer keeps the index's lease until it
    /// expires, as a crashed process does (for simulating one). Default
    /// `true`.
    pub release_on_drop: bool,
    /// For an [`IndexRunner`](crate::IndexRunner): the store failures in
    /// a row it waits out (failures to reach the engine,
    /// [`SearchError::is_transient`](crate::SearchError::is_transient),
    /// each followed by a doubling wait) before it stops with the next
    /// one, as the outbox's `WorkerConfig::max_store_failures` bounds a
    /// worker's. `None` (the default): any outage is waited out.
    pub max_store_failures: Option<u32>,
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
            verify_at_open: true,
            release_on_drop: true,
            max_store_failures: None,
        }
    }
}

/// The index writer `config` asks for, its memory raised to the 15 MB a
/// thread tantivy requires.
pub(crate) fn writer(index: &Index, config: &IndexerConfig) -> Result<IndexWriter, SearchError> {
    let threads = config.threads.max(1);
    let writer: IndexWriter =
        index.writer_with_num_threads(threads, config.memory_bytes.max(threads * 15_000_000))?;
    match config.merging {
        Merging::Log => {}
        Merging::Never => writer.set_merge_policy(Box::new(tantivy::indexer::NoMergePolicy)),
    }
    Ok(writer)
}
