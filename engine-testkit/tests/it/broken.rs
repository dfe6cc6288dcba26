//! The suite checked from the other side: each case must fail on an engine
//! that breaks what it claims to check. An engine that passes every case is
//! only evidence if a case that checked nothing would be noticed; these
//! engines, `MemEngine` with one flaw each, are how it is noticed.

use std::panic::{AssertUnwindSafe, catch_unwind};

use strata_engine::{
    CapabilityError, Commit, CommitError, CommitInfo, Engine, EngineError, KeyspaceSpec,
    KeyspaceStats, Keyspaces, MemEngine, Mutation, RangeSpec, ReadError, Rng, Snapshot, Statistics,
};
use strata_engine_testkit::{Harness, suite};

/// One way to break the contract.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Flaw {
    /// A commit loses its last put.
    DropsLastPut,
    /// A commit checks none of its predicates.
    IgnoresPredicates,
    /// Range deletes do nothing.
    DeleteRangeIsNoop,
    /// A counter add adds twice the delta.
    AddsTwice,
    /// A versionstamped put is written with its key as given (no stamp).
    NoStamps,
    /// A reopen comes back empty.
    ForgetsOnReopen,
    /// A crash loses everything, durable or not.
    CrashLosesAll,
    /// Ranges come back in reverse of what was asked.
    RangesBackwards,
    /// Range limits are ignored.
    IgnoresLimits,
    /// A snapshot reads the latest state, not its own.
    SnapshotsSeeLatest,
}

/// `MemEngine` with a flaw.
struct Broken {
    inner: MemEngine,
    flaw: Flaw,
}

impl Broken {
    fn commit_of(&self, mut commit: Commit) -> Commit {
        match self.flaw {
            Flaw::DropsLastPut => {
                if let Some(i) = commit
                    .mutations
                    .iter()
                    .rposition(|m| matches!(m, Mutation::Put { .. }))
                {
                    commit.mutations.remove(i);
                }
            }
            Flaw::IgnoresPredicates => commit.predicates.clear(),
            Flaw::DeleteRangeIsNoop => commit
                .mutations
                .retain(|m| !matches!(m, Mutation::DeleteRange { .. })),
            Flaw::AddsTwice => {
                for m in &mut commit.mutations {
                    if let Mutation::Add { delta, .. } = m {
                        *delta = delta.wrapping_mul(2);
                    }
                }
            }
            Flaw::NoStamps => {
                for m in &mut commit.mutations {
                    if let Mutation::PutVersionstamped { ks, key, value, .. } = m {
                        *m = Mutation::Put {
                            ks: *ks,
                            key: std::mem::take(key),
                            value: std::mem::take(value),
                        };
                    }
                }
            }
            _ => {}
        }
        commit
    }
}

/// A snapshot of a broken engine.
struct BrokenSnapshot<'e> {
    engine: &'e Broken,
    own: <MemEngine as Engine>::Snapshot<'e>,
}

impl Snapshot for BrokenSnapshot<'_> {
    type Range<'s>
        = std::vec::IntoIter<Result<(Vec<u8>, Vec<u8>), ReadError>>
    where
        Self: 's;

    type Cursor<'s>
        = strata_engine::Lent<Self::Range<'s>>
    where
        Self: 's;

    fn version(&self) -> Result<u64, ReadError> {
        self.own.version()
    }

    fn get(&self, ks: strata_engine::Keyspace, key: &[u8]) -> Result<Option<Vec<u8>>, ReadError> {
        if self.engine.flaw == Flaw::SnapshotsSeeLatest {
            return self.engine.inner.snapshot()?.get(ks, key);
        }
        self.own.get(ks, key)
    }

    fn range(
        &self,
        ks: strata_engine::Keyspace,
        mut range: RangeSpec,
    ) -> Result<Self::Range<'_>, ReadError> {
        let flaw = self.engine.flaw;
        if flaw == Flaw::IgnoresLimits {
            range.limit = None;
        }
        if flaw == Flaw::RangesBackwards {
            range.reverse = !range.reverse;
        }
        let rows: Vec<_> = if flaw == Flaw::SnapshotsSeeLatest {
            let latest = self.engine.inner.snapshot()?;
            latest.range(ks, range)?.collect()
        } else {
            self.own.range(ks, range)?.collect()
        };
        Ok(rows.into_iter())
    }

    fn cursor(
        &self,
        ks: strata_engine::Keyspace,
        range: RangeSpec,
    ) -> Result<Self::Cursor<'_>, ReadError> {
        self.range(ks, range).map(strata_engine::Lent::new)
    }
}

impl Engine for Broken {
    type Snapshot<'e> = BrokenSnapshot<'e>;

    fn keyspaces(&self) -> &Keyspaces {
        self.inner.keyspaces()
    }

    fn snapshot(&self) -> Result<BrokenSnapshot<'_>, ReadError> {
        Ok(BrokenSnapshot {
            engine: self,
            own: self.inner.snapshot()?,
        })
    }

    fn commit(&self, commit: Commit) -> Result<CommitInfo, CommitError> {
        self.inner.commit(self.commit_of(commit))
    }

    fn commit_group(&self, commits: Vec<Commit>) -> Vec<Result<CommitInfo, CommitError>> {
        self.inner
            .commit_group(commits.into_iter().map(|c| self.commit_of(c)).collect())
    }

    fn sync(&self) -> Result<u64, EngineError> {
        self.inner.sync()
    }

    fn durable_version(&self) -> u64 {
        self.inner.durable_version()
    }

    fn last_version(&self) -> u64 {
        self.inner.last_version()
    }
}

impl Statistics for Broken {
    fn stats(&self) -> Result<Vec<KeyspaceStats>, CapabilityError> {
        self.inner.stats()
    }
}

struct BrokenHarness(Flaw);

impl Harness for BrokenHarness {
    type Engine = Broken;

    fn open(&mut self, keyspaces: &[KeyspaceSpec]) -> Broken {
        Broken {
            inner: MemEngine::open(keyspaces.to_vec()).expect("open"),
            flaw: self.0,
        }
    }

    fn reopen(&mut self, engine: Broken) -> Broken {
        let image = engine.inner.close();
        let inner = if self.0 == Flaw::ForgetsOnReopen {
            MemEngine::open(image.keyspaces().to_vec())
        } else {
            MemEngine::from_image(image)
        };
        Broken {
            inner: inner.expect("reopen"),
            flaw: self.0,
        }
    }

    fn crash(&mut self, engine: Broken, rng: &mut dyn Rng) -> Option<Broken> {
        let image = engine.inner.crash(rng);
        let inner = if self.0 == Flaw::CrashLosesAll {
            MemEngine::open(image.keyspaces().to_vec())
        } else {
            MemEngine::from_image(image)
        };
        Some(Broken {
            inner: inner.expect("restart"),
            flaw: self.0,
        })
    }

    fn reopen_with(&mut self, engine: Broken, keyspaces: &[KeyspaceSpec]) -> Option<Broken> {
        let image = engine.inner.close().with_keyspaces(keyspaces.to_vec());
        let inner = if self.0 == Flaw::ForgetsOnReopen {
            MemEngine::open(keyspaces.to_vec())
        } else {
            MemEngine::from_image(image)
        };
        Some(Broken {
            inner: inner.expect("reopen"),
            flaw: self.0,
        })
    }
}

/// `case` must fail (panic) on an engine with `flaw`.
fn fails(name: &str, case: fn(BrokenHarness), flaw: Flaw) {
    let caught = catch_unwind(AssertUnwindSafe(|| case(BrokenHarness(flaw))));
    assert!(
        caught.is_err(),
        "the suite's case {name} passed on an engine whose flaw is {flaw:?}: it checks nothing of it"
    );
}

/// A case of the suite, by name, and the flaw it must find.
type Case = (&'static str, fn(BrokenHarness), Flaw);

#[test]
fn each_case_fails_on_an_engine_that_breaks_what_it_checks() {
    let cases: [Case; 16] = [
        ("point_ops", suite::point_ops, Flaw::DropsLastPut),
        (
            "range_order_is_byte_order",
            suite::range_order_is_byte_order,
            Flaw::RangesBackwards,
        ),
        (
            "reverse_ranges",
            suite::reverse_ranges,
            Flaw::RangesBackwards,
        ),
        (
            "bounds_and_limits",
            suite::bounds_and_limits,
            Flaw::IgnoresLimits,
        ),
        ("delete_range", suite::delete_range, Flaw::DeleteRangeIsNoop),
        (
            "snapshot_isolation",
            suite::snapshot_isolation,
            Flaw::SnapshotsSeeLatest,
        ),
        (
            "snapshot_isolation_under_concurrent_commits",
            suite::snapshot_isolation_under_concurrent_commits,
            Flaw::SnapshotsSeeLatest,
        ),
        (
            "predicates_are_the_atomicity_fence",
            suite::predicates_are_the_atomicity_fence,
            Flaw::IgnoresPredicates,
        ),
        (
            "concurrent_commits",
            suite::concurrent_commits,
            Flaw::IgnoresPredicates,
        ),
        ("commit_groups", suite::commit_groups, Flaw::DropsLastPut),
        (
            "versionstamps_order_commits",
            suite::versionstamps_order_commits,
            Flaw::NoStamps,
        ),
        (
            "inverted_versionstamps_sort_newest_first",
            suite::inverted_versionstamps_sort_newest_first,
            Flaw::NoStamps,
        ),
        ("counters", suite::counters, Flaw::AddsTwice),
        (
            "durability_across_reopen",
            suite::durability_across_reopen,
            Flaw::ForgetsOnReopen,
        ),
        (
            "keyspaces_across_reopen",
            suite::keyspaces_across_reopen,
            Flaw::ForgetsOnReopen,
        ),
        ("crash_contract", suite::crash_contract, Flaw::CrashLosesAll),
    ];
    // The panics are expected: keep their messages out of the output.
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let mut passed = Vec::new();
    for (name, case, flaw) in cases {
        if catch_unwind(AssertUnwindSafe(|| fails(name, case, flaw))).is_err() {
            passed.push(format!("{name} ({flaw:?})"));
        }
    }
    std::panic::set_hook(hook);
    assert!(
        passed.is_empty(),
        "cases that passed on an engine breaking what they check: {passed:?}"
    );
}

/// The wrapper with a flaw these cases never meet passes them: the
/// failures above come from the flaws, not from the wrapper.
#[test]
fn the_wrapper_passes_where_its_flaw_is_not_met() {
    suite::point_ops(BrokenHarness(Flaw::NoStamps));
    suite::range_order_is_byte_order(BrokenHarness(Flaw::NoStamps));
    suite::reverse_ranges(BrokenHarness(Flaw::NoStamps));
    suite::bounds_and_limits(BrokenHarness(Flaw::NoStamps));
    suite::snapshot_isolation(BrokenHarness(Flaw::NoStamps));
    suite::counters(BrokenHarness(Flaw::NoStamps));
    suite::delete_range(BrokenHarness(Flaw::NoStamps));
    suite::durability_across_reopen(BrokenHarness(Flaw::NoStamps));
}
