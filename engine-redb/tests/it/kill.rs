//! Process kill (the shared test of the conformance module): a child
//! commits with `Immediate` durability and is killed with SIGKILL at random
//! moments; every acknowledged commit must survive, none by half.

use std::path::Path;

use strata_engine::{Durability, KeyspaceSpec};
use strata_engine_redb::{RedbEngine, RedbOptions};
use strata_engine_testkit::{may_mount_tmpfs, sigkill_rounds};

/// Kill rounds in the default suite; more with `STRATA_KILL_ROUNDS`.
const ROUNDS: u64 = 12;

fn open(path: &Path, specs: Vec<KeyspaceSpec>) -> RedbEngine {
    RedbEngine::open(path, specs, RedbOptions::default()).expect("open")
}

/// The rounds the kill test makes: `ROUNDS`, or `STRATA_KILL_ROUNDS`.
fn rounds() -> u64 {
    std::env::var("STRATA_KILL_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(ROUNDS)
}

#[test]
fn sigkill_loses_no_acknowledged_immediate_commit() {
    let report = sigkill_rounds(
        "kill::sigkill_loses_no_acknowledged_immediate_commit",
        Durability::Immediate,
        ROUNDS,
        open,
    );
    // The kills ran: every round waited for an acknowledgement, and every
    // acknowledged commit (a new one each) is there at the end.
    assert_eq!(report.rounds, rounds(), "{report:?}");
    assert!(report.acknowledged >= report.rounds, "{report:?}");
    assert!(report.last_version >= report.acknowledged, "{report:?}");
    assert_eq!(report.lost, 0, "{report:?}");
    // This child neither syncs nor pauses: it commits until killed.
    assert_eq!((report.syncs, report.paused), (0, 0), "{report:?}");
}

/// A full disk (a filled tmpfs; skipped, saying so, without root): typed
/// errors, nothing acknowledged lost, commits again once space returns.
#[test]
fn a_full_disk_refuses_typed_and_loses_nothing() {
    let report = strata_engine_testkit::disk_full("redb", |path, specs| {
        RedbEngine::open(path, specs, RedbOptions::default())
    });
    println!("{report:?}");
    // Skipped exactly when this process may not mount a tmpfs.
    assert_eq!(report.is_some(), may_mount_tmpfs(), "{report:?}");
    if let Some(r) = report {
        // The disk filled within the 4 MiB given back: some 4 KiB commits,
        // never more than fit.
        assert!(r.acknowledged > 0, "{r:?}");
        assert!(r.acknowledged * 4096 <= 4 << 20, "{r:?}");
        // Commits alternate buffered and immediate: at most the one
        // buffered commit after the last immediate one may be lost.
        assert!(r.buffered_lost <= 1, "{r:?}");
        assert!(!r.mount_point.exists(), "the tmpfs was left behind: {r:?}");
    }
}
