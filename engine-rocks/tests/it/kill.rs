//! Process kill (the shared test of the conformance module): SIGKILL at
//! random moments; every acknowledged commit must survive, none by half.
//! With `Immediate` durability (synced WAL) and with `Buffered` (WAL
//! written, not synced: a process kill must lose nothing either).

use std::path::Path;

use strata_engine::{Durability, KeyspaceSpec};
use strata_engine_rocks::{RocksEngine, RocksOptions};
use strata_engine_testkit::sigkill_rounds;

/// Kill rounds per durability level in the default suite; more with
/// `STRATA_KILL_ROUNDS`.
const ROUNDS: u64 = 10;

fn open(path: &Path, specs: Vec<KeyspaceSpec>) -> RocksEngine {
    RocksEngine::open(path, specs, RocksOptions::default()).expect("open")
}

#[test]
fn sigkill_loses_no_acknowledged_immediate_commit() {
    sigkill_rounds(
        "kill::sigkill_loses_no_acknowledged_immediate_commit",
        Durability::Immediate,
        ROUNDS,
        open,
    );
}

#[test]
fn sigkill_loses_no_acknowledged_buffered_commit() {
    sigkill_rounds(
        "kill::sigkill_loses_no_acknowledged_buffered_commit",
        Durability::Buffered,
        ROUNDS,
        open,
    );
}
