//! The planted bugs of every crate, in one catalogue: what `cargo xtask sim
//! --plant all` searches, and the seeds recorded to catch each, which the
//! default test run replays (cheap) instead of searching.

use crate::run::{EngineKind, RunOptions, Workload, run_seed};

/// A planted bug: its name, the workload that must catch it, the engine it
/// runs on, and the seed recorded to catch it (with the default options and
/// 400 steps).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Planted {
    /// The name `--plant` takes.
    pub name: &'static str,
    /// The workload whose oracles must catch it.
    pub workload: Workload,
    /// The engine it is planted in or must be run on.
    pub engine: EngineKind,
    /// A seed known to catch it.
    pub seed: u64,
}

/// Every planted bug of the crates above the engines and of the reference
/// engine, with its recorded seed (on `MemEngine`).
pub const PLANTED: &[Planted] = &[
    p("crash-keeps-half-commit", Workload::Engine, 0),
    p("stamp-reused-after-restart", Workload::Engine, 0),
    p("predicate-after-mutations", Workload::Engine, 0),
    p("durable-version-ahead", Workload::Engine, 0),
    p("durable-version-behind", Workload::Engine, 0),
    p("immediate-not-durable", Workload::Engine, 0),
    p("quota-ignores-overwrite", Workload::Store, 0),
    p("stale-chunks-survive", Workload::Store, 0),
    p("expired-still-visible", Workload::Store, 0),
    p("reads-not-pinned", Workload::Store, 0),
    p("batch-limit-unchecked", Workload::Store, 0),
    p("scan-gaps-not-pinned", Workload::Store, 0),
    p("cas-drops-expiry", Workload::Store, 0),
    p("range-end-inclusive", Workload::Engine, 1),
    p("snapshot-sees-later-commits", Workload::Engine, 0),
    p("delete-range-keeps-start", Workload::Engine, 0),
    p("sync-drops-last-pending", Workload::Engine, 1),
    p("group-refused-takes-version", Workload::Engine, 0),
    p("counter-add-not-charged", Workload::Store, 0),
    p("sweep-too-early", Workload::Store, 1),
    p("cursor-after-first-row", Workload::Store, 0),
    p("bulk-cursor-past-failure", Workload::Store, 3),
    p("unread-row-not-indexed", Workload::Store, 0),
    p("sorted-set-move-keeps-old-score", Workload::Store, 0),
    p("unknown-outcome-retried", Workload::Store, 7),
    p("expiry-not-encoded", Workload::Store, 0),
    p("last-chunk-dropped", Workload::Store, 0),
    p("sequence-from-counter", Workload::Outbox, 0),
    p("checkpoint-past-failed", Workload::Outbox, 0),
    p("poll-beyond-durable", Workload::Outbox, 1),
    p("trim-ignores-slowest", Workload::Outbox, 0),
    p("shared-holder-name", Workload::Outbox, 0),
    p("failed-holds-nothing", Workload::Outbox, 0),
    p("failed-holds-every-key", Workload::Outbox, 5),
    p("finished-redelivered", Workload::Outbox, 0),
    p("worker-handles-past-a-failure", Workload::Worker, 0),
    p("worker-waits-for-its-own-commit", Workload::Worker, 0),
    p("alias-unchecked", Workload::CodeSous, 0),
    p("second-ending-accepted", Workload::CodeSous, 0),
    p("draft-never-expires", Workload::CodeSous, 0),
    p("start-after-retention", Workload::CodeSous, 0),
    p("serializable-reads-unpinned", Workload::UniversalDb, 0),
    p("overwrite-charged-gross", Workload::ActorKv, 0),
    p("list-more-dropped", Workload::ActorKv, 0),
    p("rename-stale-predicate", Workload::Nokv, 0),
    p("dedupe-separate-commit", Workload::Nokv, 0),
    p("prune-without-floor", Workload::Nokv, 0),
    p("gc-drain-before-durable", Workload::Nokv, 0),
    p("upload-record-kept", Workload::Nokv, 0),
    p("memory-read-then-write", Workload::AgentMemory, 0),
    p("memory-sequence-from-counter", Workload::AgentMemory, 0),
    p("memory-resend-announced", Workload::AgentMemory, 0),
    p("memory-key-from-caller-time", Workload::AgentMemory, 0),
    p("spill-cut-to-limit", Workload::AgentMemory, 0),
    p("ack-before-index-commit", Workload::Search, 0),
    p("upsert-without-delete", Workload::Search, 0),
    p("index-non-durable", Workload::Search, 1),
    p("rebuild-without-sync", Workload::Search, 1),
    p("cas-read-not-pinned", Workload::Interleave, 0),
    p("counter-read-not-pinned", Workload::Interleave, 0),
    p("quota-read-not-pinned", Workload::Interleave, 2),
    p("lease-read-not-pinned", Workload::Interleave, 0),
    p("release-renewable", Workload::Interleave, 0),
    p("setattr-without-generation", Workload::Interleave, 3),
    p("toc-latest-unpinned", Workload::Interleave, 0),
];

/// The planted bugs of the RocksDB engine (feature `rocks`), with their
/// recorded seeds on RocksDB.
#[cfg(feature = "rocks")]
pub const PLANTED_ROCKS: &[Planted] = &[Planted {
    engine: EngineKind::Rocks,
    ..p("wal-flushed-not-synced", Workload::Engine, 0)
}];

/// Every planted bug this build can run: [`PLANTED`], and
/// `PLANTED_ROCKS` with the feature `rocks`.
pub fn catalogue() -> Vec<Planted> {
    let all = PLANTED.to_vec();
    #[cfg(feature = "rocks")]
    let all = [all, PLANTED_ROCKS.to_vec()].concat();
    all
}

const fn p(name: &'static str, workload: Workload, seed: u64) -> Planted {
    Planted {
        name,
        workload,
        engine: EngineKind::Mem,
        seed,
    }
}

/// How a search for one planted bug went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hunt {
    /// The bug searched for.
    pub bug: Planted,
    /// The first seed whose run caught it, if any.
    pub caught_at: Option<u64>,
    /// Seeds run.
    pub seeds: u64,
}

/// Runs `bug` on seeds `from..from + within` until one catches it.
pub fn hunt(bug: Planted, from: u64, within: u64, ops: usize) -> Hunt {
    let mut seeds = 0;
    let mut caught_at = None;
    for seed in from..from.saturating_add(within) {
        seeds += 1;
        let options = RunOptions {
            plant: Some(bug.name.to_owned()),
            workload: bug.workload,
            engine: bug.engine,
            ..RunOptions::new(seed, ops)
        };
        if run_seed(&options).violation.is_some() {
            caught_at = Some(seed);
            break;
        }
    }
    Hunt {
        bug,
        caught_at,
        seeds,
    }
}
