//! The conformance suite of the Strata engine contract, the reference
//! model, and the process-kill test.
//!
//! **Not semver-stable**: cases are added and tightened as the contract is
//! pinned down. Third-party engines are welcome to run it.
//!
//! An engine crate implements [`Harness`] (open a fresh engine, reopen it
//! after a clean shutdown, and crash it where it can) and expands the suite
//! into named `#[test]`s with [`conformance_tests!`]:
//!
//! ```ignore
//! strata_engine_testkit::conformance_tests!(MyHarness::new());
//! ```
//!
//! Each case panics with a message naming what broke. The [`Model`] is the
//! plain reference the model check (and the simulation) compares engines
//! with: the contract's semantics written as simply as possible,
//! independent of `MemEngine`'s code and of the shared resolver.
#![cfg_attr(docsrs, feature(doc_cfg))]

mod cases;
mod disk_full;
mod kill;
mod model;
mod model_check;

use strata_engine::{Commit, Engine, KeyspaceSpec, Keyspaces, Mutation, Predicate, Rng};

pub use crate::disk_full::{DiskFullReport, Mount, disk_full, fill, may_mount_tmpfs};
pub use crate::kill::{KillReport, sigkill_rounds, sigkill_rounds_losing_unsynced};
pub use crate::model::{Model, ModelError};

/// The cases by name, as [`conformance_tests!`] calls them.
pub mod suite {
    pub use crate::cases::{
        bounds_and_limits, commit_groups, concurrent_commits, counters, crash_contract,
        delete_range, durability_across_reopen, foreign_handles_are_refused,
        inverted_versionstamps_sort_newest_first, keyspaces_across_reopen, point_ops,
        predicates_are_the_atomicity_fence, raise_version, range_order_is_byte_order,
        reverse_ranges, snapshot_isolation, snapshot_isolation_under_concurrent_commits, stats,
        typed_errors, versionstamps_order_commits,
    };
    pub use crate::model_check::model_check;
}

/// How the suite drives an engine.
pub trait Harness {
    /// The engine under test.
    type Engine: Engine + strata_engine::Statistics;
    /// A fresh, empty engine with these keyspaces.
    fn open(&mut self, keyspaces: &[KeyspaceSpec]) -> Self::Engine;
    /// A clean shutdown, then a reopen with the same keyspaces.
    fn reopen(&mut self, engine: Self::Engine) -> Self::Engine;
    /// A crash and restart, where the engine supports simulating one: the
    /// restarted engine may lose any suffix of the commits not yet durable,
    /// as `rng` chooses. `None` when unsupported (the crash tests then
    /// check nothing and say so).
    fn crash(&mut self, engine: Self::Engine, rng: &mut dyn Rng) -> Option<Self::Engine> {
        let _ = (engine, rng);
        None
    }
    /// A clean shutdown, then a reopen with other keyspaces (some added,
    /// some dropped, in another order), where the harness can: `None`
    /// when unsupported (the case then checks nothing and says so).
    fn reopen_with(
        &mut self,
        engine: Self::Engine,
        keyspaces: &[KeyspaceSpec],
    ) -> Option<Self::Engine> {
        let _ = (engine, keyspaces);
        None
    }
}

/// Expands the whole suite into `#[test]` functions, one per case, named
/// as the functions of [`suite`]. `$harness` is evaluated once per test.
#[macro_export]
macro_rules! conformance_tests {
    ($harness:expr) => {
        $crate::conformance_tests!(@tests $harness;
            point_ops, range_order_is_byte_order, reverse_ranges, bounds_and_limits,
            delete_range, snapshot_isolation, snapshot_isolation_under_concurrent_commits,
            predicates_are_the_atomicity_fence, concurrent_commits, commit_groups,
            versionstamps_order_commits, inverted_versionstamps_sort_newest_first, counters,
            durability_across_reopen, raise_version, keyspaces_across_reopen, crash_contract, typed_errors,
            foreign_handles_are_refused, stats, model_check);
    };
    (@tests $harness:expr; $($name:ident),*) => {
        $(
            #[test]
            fn $name() {
                $crate::suite::$name($harness);
            }
        )*
    };
}

/// The rows of `range` in `snap` counted through the lending cursor's own
/// loop ([`RowCursor::try_for_each_row`](strata_engine::RowCursor::try_for_each_row)),
/// each row read in place (handed to [`std::hint::black_box`]): the raw
/// side of the benchmarks' scans through the loop.
///
/// # Panics
/// On a failed read.
pub fn count_looped<S: strata_engine::Snapshot>(
    snap: &S,
    ks: strata_engine::Keyspace,
    range: strata_engine::RangeSpec,
) -> usize {
    use strata_engine::RowCursor as _;
    let mut n = 0;
    let flow = snap
        .cursor(ks, range)
        .expect("a cursor over the range")
        .try_for_each_row(|k, v| {
            std::hint::black_box((k, v));
            n += 1;
            std::ops::ControlFlow::<()>::Continue(())
        })
        .expect("the range read whole");
    assert!(flow.is_continue(), "nothing breaks the loop");
    n
}

/// `writers` threads each make `commits` durable (`Immediate`) one-put
/// commits of `value` to `ks`, keys `(first + thread * commits + i)` as
/// 8 big-endian bytes; returns when all are done. For benchmarks of
/// concurrent durable writers (what a group commit would speed up).
///
/// # Panics
/// On a failed commit, or one returned not durable.
pub fn commit_in_parallel<E: Engine + Sync>(
    e: &E,
    ks: strata_engine::Keyspace,
    writers: u64,
    commits: u64,
    first: u64,
    value: &[u8],
) {
    std::thread::scope(|s| {
        for t in 0..writers {
            s.spawn(move || {
                for i in 0..commits {
                    let key = (first + t * commits + i).to_be_bytes();
                    let info = e
                        .commit(
                            Commit::new()
                                .durability(strata_engine::Durability::Immediate)
                                .put(ks, key.to_vec(), value.to_vec()),
                        )
                        .expect("durable commit");
                    assert!(info.durable, "an Immediate commit returned not durable");
                }
            });
        }
    });
}

/// `commit` with every keyspace handle replaced by the handle at the same
/// position in `to`: commits built once (by a generator, against a
/// template set of keyspaces) are replayed on engines opened later.
///
/// # Panics
/// On a position `to` does not have, or a predicate or mutation kind this
/// version of the testkit does not know.
pub fn remap(commit: &Commit, to: &Keyspaces) -> Commit {
    let at = |ks: strata_engine::Keyspace| to.at(ks.index()).expect("keyspace position");
    let predicates = commit
        .predicates
        .iter()
        .map(|p| match p.clone() {
            Predicate::Exists { ks, key } => Predicate::Exists { ks: at(ks), key },
            Predicate::Absent { ks, key } => Predicate::Absent { ks: at(ks), key },
            Predicate::ValueEquals { ks, key, value } => Predicate::ValueEquals {
                ks: at(ks),
                key,
                value,
            },
            Predicate::RangeEmpty { ks, range } => Predicate::RangeEmpty { ks: at(ks), range },
            other => panic!("unknown predicate {other:?}"),
        })
        .collect();
    let mutations = commit
        .mutations
        .iter()
        .map(|m| match m.clone() {
            Mutation::Put { ks, key, value } => Mutation::Put {
                ks: at(ks),
                key,
                value,
            },
            Mutation::Delete { ks, key } => Mutation::Delete { ks: at(ks), key },
            Mutation::DeleteRange { ks, range } => Mutation::DeleteRange { ks: at(ks), range },
            Mutation::Add { ks, key, delta } => Mutation::Add {
                ks: at(ks),
                key,
                delta,
            },
            Mutation::PutVersionstamped {
                ks,
                key,
                value,
                at: stamp,
            } => Mutation::PutVersionstamped {
                ks: at(ks),
                key,
                value,
                at: stamp,
            },
            other => panic!("unknown mutation {other:?}"),
        })
        .collect();
    Commit {
        predicates,
        mutations,
        durability: commit.durability,
    }
}
