//! Integration tests of strata-search, on `MemEngine`, `RedbEngine` and
//! `RocksEngine`, with in-memory and on-disk index directories.

#![allow(clippy::too_many_lines)]

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use strata_codec::{Limits, value};
use strata_engine::{Durability, Engine, ManualClock, MemEngine, SeededRng};
use strata_keys::tuple_key;
use strata_outbox::{Outbox, OutboxConfig};
use strata_search::{Document, IndexSpec, Indexer, IndexerConfig, Location};
use strata_store::{Store, StoreOptions};

mod crash;
mod damage;
mod fed;
mod full;
mod index;
mod kill;
mod runner;

/// A note of an agent's memory.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Note {
    pub(crate) title: String,
    pub(crate) body: String,
    pub(crate) level: String,
    pub(crate) at_ms: u64,
}
value!(Note: postcard, version = 1);

/// `("note", id)`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct NoteKey {
    pub(crate) id: u64,
}
tuple_key! {
    NoteKey -> Note = ("note", {id});
}

pub(crate) fn note(title: &str, body: &str, level: &str, at_ms: u64) -> Note {
    Note {
        title: title.into(),
        body: body.into(),
        level: level.into(),
        at_ms,
    }
}

/// Notes indexed by title (boost 2) and body, filtered by level, with a time.
pub(crate) fn spec() -> IndexSpec<NoteKey> {
    spec_mapped(|_k: &NoteKey, n: &Note| {
        Document::new()
            .text("title", &n.title)
            .text("body", &n.body)
            .string("level", &n.level)
            .time_ms(n.at_ms)
    })
}

/// The notes' fields (title, body, level, a time) with the mapping `map`.
pub(crate) fn spec_mapped(
    map: impl for<'a> Fn(&NoteKey, &'a Note) -> Document<'a> + Send + Sync + 'static,
) -> IndexSpec<NoteKey> {
    IndexSpec::new("notes", map)
        .unwrap()
        .text("title", 2.0)
        .unwrap()
        .text("body", 1.0)
        .unwrap()
        .string("level")
        .unwrap()
        .with_time()
}

pub(crate) fn options(durability: Durability) -> StoreOptions {
    let limits = Limits {
        max_key_bytes: 256,
        max_value_bytes: 4_096,
        max_batch_entries: 64,
        max_batch_bytes: 65_536,
        quota_bytes: 1 << 20,
    };
    Outbox::<MemEngine>::declare(StoreOptions::new(limits)).durability(durability)
}

pub(crate) fn outbox_config() -> OutboxConfig {
    let mut c = OutboxConfig::default();
    c.sync_interval_ms = 0;
    c
}

pub(crate) fn indexer_config() -> IndexerConfig {
    let mut c = IndexerConfig::new("test");
    c.threads = 1;
    c
}

pub(crate) fn outbox<'s, E: Engine>(
    store: &'s Store<E>,
    clock: &Arc<ManualClock>,
    config: OutboxConfig,
) -> Outbox<'s, E> {
    Outbox::new(store, config, clock.clone(), Box::new(SeededRng::new(2))).unwrap()
}

/// The notes index in memory, with the test configuration.
pub(crate) fn indexer_in_memory<'o, 's, E: Engine>(
    ob: &'o Outbox<'s, E>,
    clock: &Arc<ManualClock>,
) -> Indexer<'o, 's, E, NoteKey> {
    Indexer::open(
        ob,
        spec(),
        &Location::Memory,
        indexer_config(),
        clock.clone(),
    )
    .unwrap()
}

/// The notes index in the directory `root`, with the test configuration.
pub(crate) fn indexer_at<'o, 's, E: Engine>(
    ob: &'o Outbox<'s, E>,
    clock: &Arc<ManualClock>,
    root: &std::path::Path,
) -> Indexer<'o, 's, E, NoteKey> {
    Indexer::open(
        ob,
        spec(),
        &Location::Dir(root.to_path_buf()),
        indexer_config(),
        clock.clone(),
    )
    .unwrap()
}

pub(crate) use strata_test_support::{Dir, T0, mem, redb, rocks};

/// Runs the body on a fresh store of each engine; `$dir` is a scratch
/// directory for the index (inside [`engine_tests!`], on the test's engine
/// alone).
#[macro_export]
macro_rules! on_every_engine {
    ($durability:expr, |$store:ident, $clock:ident, $dir:ident| $body:block) => {{
        use strata_test_support::{EngineKind, runs};
        if runs(EngineKind::Mem) {
            let ($store, $clock, $dir) = $crate::mem($crate::options($durability));
            $body
        }
        if runs(EngineKind::Redb) {
            let ($store, $clock, $dir) = $crate::redb($crate::options($durability));
            $body
        }
        if runs(EngineKind::Rocks) {
            let ($store, $clock, $dir) = $crate::rocks($crate::options($durability));
            $body
        }
    }};
}

/// One test per engine (`name::mem`, `name::redb`, `name::rocks`) for
/// each function given.
#[macro_export]
macro_rules! engine_tests {
    ($($t:tt)*) => {
        strata_test_support::engine_tests!([mem, redb, rocks] $($t)*);
    };
}
