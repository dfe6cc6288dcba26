//! Process kill (the shared test of the conformance module): a child
//! commits with `Immediate` durability and is killed with SIGKILL at random
//! moments; every acknowledged commit must survive, none by half.

use std::path::Path;

use strata_engine::{Durability, KeyspaceSpec};
use strata_engine_redb::{RedbEngine, RedbOptions};
use strata_engine_testkit::sigkill_rounds;

/// Kill rounds in the default suite; more with `STRATA_KILL_ROUNDS`.
const ROUNDS: u64 = 12;

fn open(path: &Path, specs: Vec<KeyspaceSpec>) -> RedbEngine {
    RedbEngine::open(path, specs, RedbOptions::default()).expect("open")
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

/// A full disk (a filled tmpfs; skipped, saying so, without root): typed
/// errors, nothing acknowledged lost, commits again once space returns.
#[test]
fn a_full_disk_refuses_typed_and_loses_nothing() {
    let report = strata_engine_testkit::disk_full("redb", |path, specs| {
        RedbEngine::open(path, specs, RedbOptions::default())
    });
    println!("{report:?}");
}
