//! The named conformance cases: point operations, ranges, snapshots,
//! predicates, versionstamps, counters, durability, the crash contract,
//! typed errors and statistics, one file per family. Each panics naming
//! what broke. This file holds the helpers they share.

// Test code: short names (`e` engine, `a`/`b` keyspaces, `s` snapshot) read
// better in the assertions than long ones.
#![allow(clippy::many_single_char_names, clippy::type_complexity)]

use std::ops::Bound;

use strata_engine::{
    Commit, CommitError, Durability, Engine, EngineError, Keyspace, KeyspaceSpec, Mutation,
    MutationError, Predicate, PredicateError, Profile, RangeSpec, ReadError, Rng, SeededRng,
    Snapshot, StampAt, Statistics,
};

use crate::Harness;

mod errors;
mod isolation;
mod lifecycle;
mod points;
mod stamps;

pub use errors::{foreign_handles_are_refused, stats, typed_errors};
pub use isolation::{
    commit_groups, concurrent_commits, predicates_are_the_atomicity_fence, snapshot_isolation,
    snapshot_isolation_under_concurrent_commits,
};
pub use lifecycle::{
    crash_contract, durability_across_reopen, keyspaces_across_reopen, raise_version,
};
pub use points::{
    bounds_and_limits, delete_range, point_ops, range_order_is_byte_order, reverse_ranges,
};
pub use stamps::{counters, inverted_versionstamps_sort_newest_first, versionstamps_order_commits};

pub(crate) fn specs() -> Vec<KeyspaceSpec> {
    vec![
        KeyspaceSpec::new("a", Profile::PointLookup),
        KeyspaceSpec::new("b", Profile::Queue),
    ]
}

pub(crate) fn ks<E: Engine>(e: &E, name: &str) -> Keyspace {
    e.keyspace(name).expect("declared keyspace")
}

/// The value of `key` in a snapshot, checked to be what
/// [`Engine::get_latest`] reads on its own too.
fn get<E: Engine>(e: &E, ks: Keyspace, key: &[u8]) -> Option<Vec<u8>> {
    let in_snapshot = e.snapshot().expect("snapshot").get(ks, key).expect("get");
    let latest = e.get_latest(ks, key).expect("get_latest");
    assert_eq!(
        latest, in_snapshot,
        "get_latest reads what a snapshot reads"
    );
    in_snapshot
}

fn scan<S: Snapshot>(s: &S, ks: Keyspace, range: RangeSpec) -> Vec<(Vec<u8>, Vec<u8>)> {
    s.range(ks, range)
        .expect("range")
        .collect::<Result<_, _>>()
        .expect("range item")
}

/// The rows of `range` in `ks` read by the lending cursor twice: stepped
/// (`next_row`, each row copied out before the next step), and in its own
/// loop (`try_for_each_row`) broken off on row `stop`, then one row
/// stepped, then the loop again to the end.
pub(crate) fn cursor_rows<S: Snapshot>(
    s: &S,
    ks: Keyspace,
    range: &RangeSpec,
    stop: usize,
) -> Result<(Vec<(Vec<u8>, Vec<u8>)>, Vec<(Vec<u8>, Vec<u8>)>), ReadError> {
    use std::ops::ControlFlow;
    use strata_engine::RowCursor;
    let mut rows = s.cursor(ks, range.clone())?;
    let mut stepped = Vec::new();
    while let Some(row) = rows.next_row() {
        let (k, v) = row?;
        stepped.push((k.to_vec(), v.to_vec()));
    }
    let mut rows = s.cursor(ks, range.clone())?;
    let mut looped = Vec::new();
    let first = rows.try_for_each_row(|k, v| {
        if looped.len() == stop {
            return ControlFlow::Break((k.to_vec(), v.to_vec()));
        }
        looped.push((k.to_vec(), v.to_vec()));
        ControlFlow::Continue(())
    })?;
    if let ControlFlow::Break(row) = first {
        // The row `f` broke on: the loop goes on after it.
        looped.push(row);
        if let Some(row) = rows.next_row() {
            let (k, v) = row?;
            looped.push((k.to_vec(), v.to_vec()));
        }
        let rest = rows.try_for_each_row(|k, v| {
            looped.push((k.to_vec(), v.to_vec()));
            ControlFlow::<()>::Continue(())
        })?;
        assert_eq!(rest, ControlFlow::Continue(()), "a loop that never breaks");
    }
    Ok((stepped, looped))
}

fn all<E: Engine>(e: &E, ks: Keyspace) -> Vec<(Vec<u8>, Vec<u8>)> {
    scan(&e.snapshot().expect("snapshot"), ks, RangeSpec::all())
}

fn commit<E: Engine>(e: &E, c: Commit) -> u64 {
    e.commit(c).expect("commit").version
}
