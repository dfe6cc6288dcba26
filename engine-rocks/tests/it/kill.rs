//! Process kill (the shared test of the conformance module): SIGKILL at
//! random moments; every acknowledged commit must survive, none by half.
//! With `Immediate` durability (synced WAL) and with `Buffered` (WAL
//! written, not synced: a process kill must lose nothing either); and with
//! `manual_wal_flush`, where a kill loses the buffered commits since the
//! last sync: only a suffix, never a synced one, and really some.

use std::path::Path;

use strata_engine::{Durability, KeyspaceSpec};
use strata_engine_rocks::{RocksEngine, RocksOptions};
use strata_engine_testkit::{
    KillReport, may_mount_tmpfs, sigkill_rounds, sigkill_rounds_losing_unsynced,
};

/// Kill rounds per durability level in the default suite; more with
/// `STRATA_KILL_ROUNDS`.
const ROUNDS: u64 = 10;

/// Checks that the kills of `report` ran: the rounds asked for (`ROUNDS`,
/// or `STRATA_KILL_ROUNDS`), an acknowledgement at least in each, and,
/// where nothing acknowledged may be lost, every one there at the end.
fn check_ran(report: &KillReport, none_lost: bool) {
    let rounds = std::env::var("STRATA_KILL_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(ROUNDS);
    assert_eq!(report.rounds, rounds, "{report:?}");
    assert!(report.acknowledged >= report.rounds, "{report:?}");
    if none_lost {
        assert_eq!(report.lost, 0, "{report:?}");
        assert!(report.last_version >= report.acknowledged, "{report:?}");
        // This child neither syncs nor pauses: it commits until killed.
        assert_eq!((report.syncs, report.paused), (0, 0), "{report:?}");
    }
}

fn open(path: &Path, specs: Vec<KeyspaceSpec>) -> RocksEngine {
    RocksEngine::open(path, specs, RocksOptions::default()).expect("open")
}

#[test]
fn sigkill_loses_no_acknowledged_immediate_commit() {
    let report = sigkill_rounds(
        "kill::sigkill_loses_no_acknowledged_immediate_commit",
        Durability::Immediate,
        ROUNDS,
        open,
    );
    check_ran(&report, true);
}

#[test]
fn sigkill_loses_no_acknowledged_buffered_commit() {
    let report = sigkill_rounds(
        "kill::sigkill_loses_no_acknowledged_buffered_commit",
        Durability::Buffered,
        ROUNDS,
        open,
    );
    check_ran(&report, true);
}

#[test]
fn sigkill_with_manual_wal_flush_loses_only_an_unsynced_suffix() {
    let report = sigkill_rounds_losing_unsynced(
        "kill::sigkill_with_manual_wal_flush_loses_only_an_unsynced_suffix",
        7,
        ROUNDS,
        |path: &Path, specs| {
            let options = RocksOptions {
                manual_wal_flush: true,
                ..RocksOptions::default()
            };
            RocksEngine::open(path, specs, options).expect("open")
        },
    );
    // The buffered commits after the last sync are in the process only, so
    // kills lose some: else this test would not exercise the suffix.
    check_ran(&report, false);
    assert!(
        report.lost > 0,
        "{ROUNDS} kills lost no unsynced buffered commit"
    );
    // The child paused in every other round, the first included, and synced
    // after every seventh commit: in a round of `a` acknowledged commits
    // (consecutive numbers) at most `a / 7 + 1` multiples of seven, at least
    // `a / 7 - 1` of whose syncs were printed before the kill.
    assert_eq!(report.paused, report.rounds.div_ceil(2), "{report:?}");
    assert!(
        report.syncs * 7 <= report.acknowledged + 7 * report.rounds,
        "more syncs than every seventh commit: {report:?}"
    );
    assert!(
        report.syncs * 7 + 14 * report.rounds >= report.acknowledged,
        "fewer syncs than every seventh commit: {report:?}"
    );
}

/// A full disk (a filled tmpfs; skipped, saying so, without root): typed
/// errors, nothing acknowledged lost, commits again once space returns.
#[test]
fn a_full_disk_refuses_typed_and_loses_nothing() {
    let report = strata_engine_testkit::disk_full("rocks", |path, specs| {
        let options = RocksOptions {
            block_cache_bytes: 8 << 20,
            write_buffer_bytes: 1 << 20,
            ..RocksOptions::default()
        };
        RocksEngine::open(path, specs, options)
    });
    println!("{report:?}");
    // The WAL of a buffered commit is in the OS before it is acknowledged:
    // a full disk loses none.
    assert_eq!(report.is_some(), may_mount_tmpfs(), "{report:?}");
    if let Some(r) = report {
        assert_eq!(r.buffered_lost, 0, "{r:?}");
        assert!(r.acknowledged > 0, "{r:?}");
        assert!(!r.mount_point.exists(), "the tmpfs was left behind: {r:?}");
    }
}
