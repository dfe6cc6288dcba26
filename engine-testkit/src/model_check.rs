//! The model check: random sequences of commits and reads, on the engine
//! and on the [`Model`], must agree.

// Test code: short names read better in the assertions.
#![allow(clippy::many_single_char_names)]

use std::ops::Bound;

use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use strata_engine::{
    Commit, Durability, Engine, Keyspace, Keyspaces, Mutation, Predicate, RangeSpec, ReadError,
    Snapshot, StampAt,
};

use crate::cases::specs;
use crate::model::{Model, ModelError};
use crate::{Harness, remap};

/// One step of the model check.
#[derive(Debug, Clone)]
enum Step {
    Commit(Commit),
    Get(Keyspace, Vec<u8>),
    Range(Keyspace, RangeSpec),
    /// A clean shutdown and reopen: everything committed is still there,
    /// and versions go on from where they were.
    Reopen,
}

/// Steps name keyspaces by handles of a template set; they are remapped
/// to each engine's own handles when run.
fn step_strategy(template: &Keyspaces) -> impl Strategy<Value = Step> {
    let (a, b) = (
        template.at(0).expect("two keyspaces"),
        template.at(1).expect("two keyspaces"),
    );
    let ks = prop_oneof![Just(a), Just(b)];
    let key = prop::collection::vec(
        prop_oneof![Just(0u8), Just(1), Just(0xFF), Just(b'k')],
        0..3,
    );
    let value = prop::collection::vec(any::<u8>(), 0..4);
    let bound = prop_oneof![
        key.clone().prop_map(Bound::Included),
        key.clone().prop_map(Bound::Excluded),
        Just(Bound::Unbounded)
    ];
    let range = (
        bound.clone(),
        bound,
        any::<bool>(),
        prop::option::of(0usize..4),
    )
        .prop_map(|(start, end, reverse, limit)| RangeSpec {
            start,
            end,
            reverse,
            limit,
        });
    let predicate = prop_oneof![
        (ks.clone(), key.clone()).prop_map(|(ks, key)| Predicate::Exists { ks, key }),
        (ks.clone(), key.clone()).prop_map(|(ks, key)| Predicate::Absent { ks, key }),
        (ks.clone(), key.clone(), prop::option::of(value.clone()))
            .prop_map(|(ks, key, value)| Predicate::ValueEquals { ks, key, value }),
        (ks.clone(), range.clone()).prop_map(|(ks, range)| Predicate::RangeEmpty { ks, range }),
    ];
    let mutation = prop_oneof![
        4 => (ks.clone(), key.clone(), value.clone()).prop_map(|(ks, key, value)| Mutation::Put { ks, key, value }),
        2 => (ks.clone(), key.clone()).prop_map(|(ks, key)| Mutation::Delete { ks, key }),
        1 => (ks.clone(), range.clone()).prop_map(|(ks, range)| Mutation::DeleteRange { ks, range }),
        2 => (ks.clone(), key.clone(), -3i64..3).prop_map(|(ks, key, delta)| Mutation::Add { ks, key, delta }),
        1 => (ks.clone(), prop::collection::vec(any::<u8>(), 0..14), 0usize..6).prop_map(|(ks, key, o)| Mutation::PutVersionstamped { ks, value: Vec::new(), at: StampAt::Key(o), key }),
        1 => (ks.clone(), prop::collection::vec(any::<u8>(), 0..14), 0usize..6).prop_map(|(ks, key, o)| Mutation::PutVersionstamped { ks, value: Vec::new(), at: StampAt::KeyInverted(o), key }),
        1 => (ks.clone(), key.clone(), prop::collection::vec(any::<u8>(), 0..14), 0usize..6).prop_map(|(ks, key, value, o)| Mutation::PutVersionstamped { ks, key, value, at: StampAt::Value(o) }),
    ];
    let commit = (
        prop::collection::vec(predicate, 0..2),
        prop::collection::vec(mutation, 0..4),
        any::<bool>(),
    )
        .prop_map(|(predicates, mutations, buffered)| Commit {
            predicates,
            mutations,
            durability: if buffered {
                Durability::Buffered
            } else {
                Durability::Immediate
            },
        });
    prop_oneof![
        3 => commit.prop_map(Step::Commit),
        1 => (ks.clone(), key).prop_map(|(ks, k)| Step::Get(ks, k)),
        1 => (ks, range).prop_map(|(ks, r)| Step::Range(ks, r)),
        1 => Just(Step::Reopen),
    ]
}

/// `e`'s handle at the position of `ks`: handles change at a reopen, so
/// they are looked up each time.
fn own<E: Engine>(e: &E, ks: &Keyspace) -> Keyspace {
    e.keyspaces().at(ks.index()).expect("declared")
}

/// Random sequences of commits (with predicates, counters, range deletes and
/// versionstamps) and reads give the same results on the engine as on the
/// [`Model`]; failed commits fail with the same error and change nothing.
pub fn model_check<H: Harness>(h: H) {
    let h = std::cell::RefCell::new(h);
    // 64 cases, or `PROPTEST_CASES` for longer runs. Not persisted: the
    // suite runs from other crates' tests; a failure prints its minimal
    // sequence.
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(64);
    let mut runner = TestRunner::new(Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    });
    let template = Keyspaces::new(specs()).expect("template keyspaces");
    let steps = prop::collection::vec(step_strategy(&template), 1..40);
    let result = runner.run(&steps, |steps| {
        let mut e = h.borrow_mut().open(&specs());
        let mut model = Model::new(2);
        for (i, step) in steps.iter().enumerate() {
            match step {
                Step::Commit(c) => {
                    let want = model.commit(c);
                    let got = e.commit(remap(c, e.keyspaces()));
                    match (&want, &got) {
                        (Ok(v), Ok(info)) => {
                            prop_assert_eq!(info.version, *v, "step {}: the commit's version", i);
                        }
                        (Err(w), Err(g)) => {
                            prop_assert_eq!(Some(w.clone()), ModelError::of(g), "step {}", i);
                        }
                        _ => prop_assert!(false, "step {}: model {:?}, engine {:?}", i, want, got),
                    }
                }
                Step::Get(ks, key) => {
                    let got = e
                        .snapshot()
                        .map_err(|e| TestCaseError::fail(e.to_string()))?
                        .get(own(&e, ks), key)
                        .map_err(|e| TestCaseError::fail(e.to_string()))?;
                    prop_assert_eq!(got.as_ref(), model.maps[ks.index()].get(key), "step {}", i);
                }
                Step::Range(ks, r) => {
                    let snap = e
                        .snapshot()
                        .map_err(|e| TestCaseError::fail(e.to_string()))?;
                    match snap.range(own(&e, ks), r.clone()) {
                        Ok(iter) => {
                            let got: Vec<_> = iter
                                .collect::<Result<_, _>>()
                                .map_err(|e| TestCaseError::fail(e.to_string()))?;
                            prop_assert_eq!(got, model.range(ks.index(), r), "step {}", i);
                        }
                        Err(ReadError::InvalidRange) => {
                            prop_assert!(r.validate().is_err(), "step {}", i);
                        }
                        Err(other) => prop_assert!(false, "step {}: {}", i, other),
                    }
                    let want = model.range(ks.index(), r);
                    check_cursors(&snap, own(&e, ks), r, &want, i)?;
                }
                Step::Reopen => {
                    e = h.borrow_mut().reopen(e);
                    prop_assert_eq!(
                        e.last_version(),
                        model.version,
                        "step {}: version after reopen",
                        i
                    );
                    for (index, map) in model.maps.iter().enumerate() {
                        let snap = e
                            .snapshot()
                            .map_err(|e| TestCaseError::fail(e.to_string()))?;
                        let ks = e.keyspaces().at(index).expect("declared");
                        let got: Vec<_> = snap
                            .range(ks, RangeSpec::all())
                            .map_err(|e| TestCaseError::fail(e.to_string()))?
                            .collect::<Result<_, _>>()
                            .map_err(|e| TestCaseError::fail(e.to_string()))?;
                        let want: Vec<_> =
                            map.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
                        prop_assert_eq!(got, want, "step {}: keyspace {} after reopen", i, index);
                    }
                }
            }
        }
        Ok(())
    });
    if let Err(e) = result {
        panic!("model check failed: {e}");
    }
}

/// The lending cursor over `r` in `ks` gives `want`, stepped and in its
/// own loop broken off on row `i % 3` ([`crate::cases::cursor_rows`]).
/// Step `i` of the run.
fn check_cursors<S: Snapshot>(
    snap: &S,
    ks: Keyspace,
    r: &RangeSpec,
    want: &[(Vec<u8>, Vec<u8>)],
    i: usize,
) -> Result<(), TestCaseError> {
    match crate::cases::cursor_rows(snap, ks, r, i % 3) {
        Ok((stepped, looped)) => {
            prop_assert_eq!(stepped, want, "step {}: cursor", i);
            prop_assert_eq!(looped, want, "step {}: loop", i);
        }
        Err(ReadError::InvalidRange) => {
            prop_assert!(r.validate().is_err(), "step {}: cursor", i);
        }
        Err(other) => prop_assert!(false, "step {}: cursor: {}", i, other),
    }
    Ok(())
}
