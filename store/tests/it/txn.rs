//! Transactions: read-your-writes, conflicts and retries, snapshot reads,
//! counters, compare-and-set, versionstamps, and a serializability check.

use proptest::prelude::*;
use strata_codec::Limits;
use strata_engine::{Clock, Engine};
use strata_keys::tuple::Versionstamp;
use strata_keys::{KeyRange, tuple};
use strata_store::{Expiry, RetryPolicy, Scan, StoreError};

use crate::common::{self, ACTOR, CountKey, Doc, DocKey, EventKey};
use crate::engine_tests;
use crate::on_every_engine;

fn doc(i: u64) -> Doc {
    Doc {
        title: format!("{i}"),
        body: Vec::new(),
    }
}

fn n(i: u64) -> CountKey {
    CountKey {
        actor: 1,
        name: format!("c{i}"),
    }
}

engine_tests! {
    fn a_transaction_reads_at_one_version() {
        on_every_engine!(common::options(Limits::FOUNDATIONDB), |store, _clock| {
            let first = store.put(&DocKey { actor: 1, id: 1 }, &doc(1)).unwrap();
            let mut tx = store.begin();
            assert_eq!(tx.read_version().unwrap(), first.version);
            let second = store.put(&DocKey { actor: 1, id: 2 }, &doc(2)).unwrap();
            assert!(second.version > first.version);
            assert_eq!(tx.read_version().unwrap(), first.version, "its snapshot's");
            assert_eq!(tx.get(&DocKey { actor: 1, id: 2 }).unwrap(), None);
            assert_eq!(store.begin().read_version().unwrap(), second.version);
        });
    }
}

engine_tests! {
    fn reads_see_the_transactions_own_writes() {
        on_every_engine!(common::options(Limits::FOUNDATIONDB), |store, _clock| {
            store.put(&DocKey { actor: 1, id: 2 }, &doc(2)).unwrap();
            store
                .transact(|tx| {
                    tx.put(&DocKey { actor: 1, id: 1 }, &doc(1))?;
                    tx.delete(&DocKey { actor: 1, id: 2 })?;
                    tx.put(&DocKey { actor: 1, id: 3 }, &doc(3))?;
                    assert_eq!(tx.get(&DocKey { actor: 1, id: 1 })?, Some(doc(1)));
                    assert_eq!(tx.get(&DocKey { actor: 1, id: 2 })?, None);
                    let page = tx.scan::<DocKey>(&Scan::range_of(KeyRange::tuple_prefix(
                        &tuple::pack(&(ACTOR, 1u64, "doc")),
                    )))?;
                    let ids: Vec<u64> = page.items.iter().map(|(k, _)| k.id).collect();
                    assert_eq!(ids, vec![1, 3]);
                    tx.add(&n(1), 4)?;
                    tx.add(&n(1), 3)?;
                    assert_eq!(tx.counter(&n(1))?, 7);
                    Ok::<_, StoreError>(())
                })
                .unwrap();
            assert_eq!(store.counter(&n(1)).unwrap(), 7);
        });
    }
}

engine_tests! {
    fn a_conflicting_transaction_is_retried_and_sees_the_new_value() {
        on_every_engine!(common::options(Limits::FOUNDATIONDB), |store, clock| {
            let k = DocKey { actor: 1, id: 1 };
            store.put(&k, &doc(0)).unwrap();
            let start = clock.now_ms();
            let mut runs = 0;
            store
                .transact(|tx| {
                    runs += 1;
                    let v = tx.get(&k)?.unwrap();
                    if runs == 1 {
                        // Another writer commits between our read and our commit.
                        store.put(&k, &doc(100)).unwrap();
                    }
                    let next: u64 = v.title.parse().unwrap();
                    tx.put(&k, &doc(next + 1))?;
                    Ok::<_, StoreError>(())
                })
                .unwrap();
            assert_eq!(runs, 2);
            assert_eq!(store.get(&k).unwrap(), Some(doc(101)), "no lost update");
            assert!(
                clock.now_ms() > start,
                "the retry waited on the injected clock"
            );
        });
    }
}

engine_tests! {
    fn retries_run_out_with_the_attempt_count_and_the_last_conflict() {
        let options = common::options(Limits::FOUNDATIONDB).retry(RetryPolicy {
            max_attempts: 3,
            base_backoff_ms: 5,
            max_backoff_ms: 10,
        });
        on_every_engine!(options.clone(), |store, _clock| {
            let k = DocKey { actor: 1, id: 1 };
            let mut i = 0;
            let err = store
                .transact(|tx| {
                    i += 1;
                    // The read pins the key (so the put below conflicts)
                    // and sees the previous attempt's write.
                    let seen = tx.get(&k)?;
                    assert_eq!(seen, (i > 1).then(|| doc(i - 1)));
                    store.put(&k, &doc(i)).unwrap();
                    tx.put(&k, &doc(0))?;
                    Ok::<_, StoreError>(())
                })
                .unwrap_err();
            match err {
                StoreError::RetriesExhausted { attempts, last } => {
                    assert_eq!(attempts, 3);
                    assert!(last.is_conflict());
                }
                other => panic!("{other:?}"),
            }
            assert_eq!(store.get(&k).unwrap(), Some(doc(3)));
        });
    }
}

engine_tests! {
    fn snapshot_reads_and_blind_writes_do_not_conflict() {
        on_every_engine!(common::options(Limits::FOUNDATIONDB), |store, _clock| {
            let k = DocKey { actor: 9, id: 1 };
            let other = DocKey { actor: 9, id: 2 };
            store.put(&k, &doc(1)).unwrap();
            let mut tx = store.begin();
            assert_eq!(tx.snapshot_get(&k).unwrap(), Some(doc(1)));
            store.put(&k, &doc(2)).unwrap();
            tx.put(&other, &doc(3)).unwrap();
            tx.commit().unwrap();
            assert_eq!(store.get(&other).unwrap(), Some(doc(3)));

            // The same with a serializable read conflicts.
            let mut tx = store.begin();
            assert_eq!(tx.get(&k).unwrap(), Some(doc(2)));
            store.put(&k, &doc(4)).unwrap();
            tx.put(&other, &doc(5)).unwrap();
            assert!(tx.commit().unwrap_err().is_conflict());
            assert_eq!(store.get(&other).unwrap(), Some(doc(3)));
        });
    }
}

engine_tests! {
    fn a_range_read_conflicts_with_an_insert_into_the_range() {
        on_every_engine!(common::options(Limits::FOUNDATIONDB), |store, _clock| {
            let range = Scan::range_of(KeyRange::tuple_prefix(&tuple::pack(&(ACTOR, 1u64, "doc"))));
            store.put(&DocKey { actor: 1, id: 1 }, &doc(1)).unwrap();
            store.put(&DocKey { actor: 1, id: 5 }, &doc(5)).unwrap();
            // A phantom between two rows read.
            let mut tx = store.begin();
            assert_eq!(tx.scan::<DocKey>(&range).unwrap().items.len(), 2);
            store.put(&DocKey { actor: 1, id: 3 }, &doc(3)).unwrap();
            tx.put(&DocKey { actor: 2, id: 0 }, &doc(0)).unwrap();
            assert!(tx.commit().unwrap_err().is_conflict());
            // Past the end of a limited scan is not read, so no conflict.
            let mut tx = store.begin();
            let page = tx.scan::<DocKey>(&range.clone().limit(1)).unwrap();
            assert!(page.more);
            store.put(&DocKey { actor: 1, id: 9 }, &doc(9)).unwrap();
            tx.put(&DocKey { actor: 2, id: 0 }, &doc(0)).unwrap();
            tx.commit().unwrap();
        });
    }
}

engine_tests! {
    fn compare_and_set_and_put_if_absent() {
        on_every_engine!(common::options(Limits::FOUNDATIONDB), |store, _clock| {
            let k = DocKey { actor: 1, id: 1 };
            assert!(store.transact(|tx| tx.put_if_absent(&k, &doc(1))).unwrap());
            assert!(!store.transact(|tx| tx.put_if_absent(&k, &doc(2))).unwrap());
            assert!(
                !store
                    .transact(|tx| tx.compare_and_set(&k, Some(&doc(9)), Some(&doc(3))))
                    .unwrap()
            );
            assert!(
                store
                    .transact(|tx| tx.compare_and_set(&k, Some(&doc(1)), Some(&doc(3))))
                    .unwrap()
            );
            assert_eq!(store.get(&k).unwrap(), Some(doc(3)));
            assert!(
                store
                    .transact(|tx| tx.compare_and_set(&k, Some(&doc(3)), None))
                    .unwrap()
            );
            assert_eq!(store.get(&k).unwrap(), None);
        });
    }
}

engine_tests! {
    /// A compare-and-set's commit depends on the value it compared: a
    /// change committed between its read and its commit refuses it (else
    /// the change is overwritten unseen), with either expiry rule.
    fn a_compare_and_set_conflicts_with_a_change_after_its_read() {
        on_every_engine!(common::options(Limits::FOUNDATIONDB), |store, _clock| {
            let k = DocKey { actor: 1, id: 1 };
            store.put(&k, &doc(1)).unwrap();
            for (i, keep) in [(10, true), (20, false)] {
                let mut tx = store.begin();
                let set = if keep {
                    tx.compare_and_set(&k, Some(&doc(i - 9)), Some(&doc(i)))
                } else {
                    tx.compare_and_set_with(&k, Some(&doc(i - 9)), Some(&doc(i)), Expiry::Never)
                };
                assert!(set.unwrap(), "the value compared was there");
                store.put(&k, &doc(i + 1)).unwrap();
                let e = tx.commit().unwrap_err();
                assert!(e.is_conflict(), "{e}");
                assert_eq!(store.get(&k).unwrap(), Some(doc(i + 1)), "the other change stands");
            }
            // A refused compare-and-set read too: a transaction that went on
            // from its refusal conflicts with a change of what it compared.
            // (In another quota scope: nothing else joins the two.)
            let other = DocKey { actor: 2, id: 2 };
            let mut tx = store.begin();
            assert!(!tx.compare_and_set(&k, Some(&doc(5)), Some(&doc(6))).unwrap());
            tx.put(&other, &doc(7)).unwrap();
            store.put(&k, &doc(5)).unwrap();
            let e = tx.commit().unwrap_err();
            assert!(e.is_conflict(), "{e}");
            assert_eq!(store.get(&other).unwrap(), None, "nothing of it applied");
        });
    }
}

engine_tests! {
    fn concurrent_counter_adds_do_not_conflict() {
        on_every_engine!(common::options(Limits::FOUNDATIONDB), |store, _clock| {
            let mut a = store.begin();
            let mut b = store.begin();
            a.add(&n(1), 2).unwrap();
            b.add(&n(1), 3).unwrap();
            a.commit().unwrap();
            b.commit().unwrap();
            assert_eq!(store.counter(&n(1)).unwrap(), 5);
            common::assert_quota_exact(&store);
        });
    }
}

engine_tests! {
    fn increments_hand_out_each_value_once() {
        // Threads retry through many conflicts, without waiting.
        let options = common::options(Limits::FOUNDATIONDB).retry(RetryPolicy {
            max_attempts: 1_000,
            base_backoff_ms: 0,
            max_backoff_ms: 1,
        });
        on_every_engine!(options.clone(), |store, _clock| {
            assert_eq!(store.increment(&n(2), 1).unwrap(), 1);
            assert_eq!(store.increment(&n(2), 1).unwrap(), 2);
            assert_eq!(store.increment(&n(2), 10).unwrap(), 12);
            // Two transactions incrementing one counter: the second conflicts.
            let mut a = store.begin();
            let mut b = store.begin();
            assert_eq!(a.increment(&n(2), 1).unwrap(), 13);
            assert_eq!(b.increment(&n(2), 1).unwrap(), 13);
            a.commit().unwrap();
            assert!(
                b.commit().unwrap_err().is_conflict(),
                "13 is handed out once"
            );
            // On four threads through retried transactions: 1..=40 exactly.
            let mut got: Vec<i64> = std::thread::scope(|s| {
                let handles: Vec<_> = (0..4)
                    .map(|_| {
                        s.spawn(|| {
                            (0..10)
                                .map(|_| store.increment(&n(3), 1).unwrap())
                                .collect::<Vec<_>>()
                        })
                    })
                    .collect();
                handles
                    .into_iter()
                    .flat_map(|h| h.join().unwrap())
                    .collect()
            });
            got.sort_unstable();
            assert_eq!(got, (1..=40).collect::<Vec<_>>());
            common::assert_quota_exact(&store);
        });
    }
}

engine_tests! {
    fn versionstamped_keys_sort_in_commit_order() {
        on_every_engine!(common::options(Limits::FOUNDATIONDB), |store, _clock| {
            let mut versions = Vec::new();
            for i in 0..3 {
                let ((), info) = store
                    .transact_info(|tx| {
                        tx.put_versionstamped(
                            &EventKey {
                                stamp: Versionstamp::incomplete(0),
                            },
                            &format!("e{i}"),
                        )
                    })
                    .unwrap();
                versions.push(info.unwrap().version);
            }
            let page = store
                .scan::<EventKey>(&Scan::range_of(KeyRange::tuple_prefix(&tuple::pack(&(
                    "event",
                )))))
                .unwrap();
            let got: Vec<(u64, String)> = page
                .items
                .into_iter()
                .map(|(k, v)| {
                    (
                        u64::from_be_bytes(k.stamp.as_bytes()[..8].try_into().unwrap()),
                        v,
                    )
                })
                .collect();
            assert_eq!(
                got,
                versions
                    .iter()
                    .enumerate()
                    .map(|(i, v)| (*v, format!("e{i}")))
                    .collect::<Vec<_>>()
            );
            let before = store.engine().last_version();
            let err = store
                .transact(|tx| {
                    tx.put_versionstamped(
                        &EventKey {
                            stamp: Versionstamp::complete([0; 10], 0),
                        },
                        &String::new(),
                    )
                })
                .unwrap_err();
            assert!(matches!(err, StoreError::NoVersionstamp { .. }), "{err:?}");
            assert_eq!(
                store.engine().last_version(),
                before,
                "nothing was committed"
            );
        });
    }
}

/// One step of a generated transaction over keys 0..4 of actor 1.
#[derive(Debug, Clone)]
enum Step {
    Read(u64),
    ScanAll,
    Write(u64),
    Delete(u64),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        (0..4u64).prop_map(Step::Read),
        Just(Step::ScanAll),
        (0..4u64).prop_map(Step::Write),
        (0..4u64).prop_map(Step::Delete),
    ]
}

/// What a transaction observed: each read's result, in order.
type Observed = Vec<Vec<(u64, String)>>;

/// Runs `steps` of transaction `t` against `get`/`scan`/`put`/`del` closures.
fn run_steps(
    t: usize,
    steps: &[Step],
    mut get: impl FnMut(u64) -> Option<String>,
    mut scan: impl FnMut() -> Vec<(u64, String)>,
    mut put: impl FnMut(u64, String),
    mut del: impl FnMut(u64),
) -> Observed {
    let mut seen = Vec::new();
    for (i, s) in steps.iter().enumerate() {
        match s {
            Step::Read(k) => seen.push(get(*k).map(|v| (*k, v)).into_iter().collect()),
            Step::ScanAll => seen.push(scan()),
            Step::Write(k) => {
                // The value written depends on what was read so far.
                put(
                    *k,
                    format!("t{t}s{i}r{}", seen.iter().map(Vec::len).sum::<usize>()),
                );
            }
            Step::Delete(k) => del(*k),
        }
    }
    seen
}

proptest! {
    #![proptest_config(crate::proptest_cases::cases(256))]

    /// Several transactions run interleaved (each opened, then all reading
    /// and writing in a generated order, then committed in a generated
    /// order). Every history must be explained by the serial order of the
    /// commits: replaying the committed transactions one after another on
    /// a plain map gives the same reads and the same final state.
    #[test]
    fn every_history_is_explained_by_a_serial_order(
        txs in prop::collection::vec(prop::collection::vec(step(), 1..6), 2..5),
        order in prop::collection::vec(any::<prop::sample::Index>(), 8),
    ) {
        use std::collections::BTreeMap;
        let (store, _clock) = common::mem(common::options(Limits::FOUNDATIONDB));
        let key = |k: u64| DocKey { actor: 1, id: k };
        let all = Scan::range_of(KeyRange::tuple_prefix(&tuple::pack(&(ACTOR, 1u64, "doc"))));
        store.put(&key(0), &Doc { title: "init".into(), body: Vec::new() }).unwrap();
        let mut open: Vec<_> = (0..txs.len()).map(|_| store.begin()).collect();
        let mut observed: Vec<Observed> = Vec::new();
        for (t, steps) in txs.iter().enumerate() {
            let tx = std::cell::RefCell::new(&mut open[t]);
            observed.push(run_steps(
                t,
                steps,
                |k| tx.borrow_mut().get(&key(k)).unwrap().map(|d| d.title),
                || tx.borrow_mut().scan::<DocKey>(&all).unwrap().items.into_iter().map(|(k, d)| (k.id, d.title)).collect(),
                |k, v| tx.borrow_mut().put(&key(k), &Doc { title: v, body: Vec::new() }).unwrap(),
                |k| tx.borrow_mut().delete(&key(k)).unwrap(),
            ));
        }
        // Commit in a generated order.
        let mut pending: Vec<(usize, _)> = open.into_iter().enumerate().collect();
        // A read-only transaction commits nothing and is serialized at its
        // snapshot, which here precedes every commit; writers serialize in
        // commit order.
        let mut committed = Vec::new();
        let mut read_only = Vec::new();
        let mut o = order.iter().cycle();
        while !pending.is_empty() {
            let i = o.next().unwrap().index(pending.len());
            let (t, tx) = pending.remove(i);
            match tx.commit() {
                Ok(Some(_)) => committed.push(t),
                Ok(None) => read_only.push(t),
                Err(e) => prop_assert!(e.is_conflict(), "{e:?}"),
            }
        }
        read_only.extend(committed);
        let committed = read_only;
        // Replay serially in commit order.
        let mut model: BTreeMap<u64, String> = BTreeMap::from([(0, "init".to_owned())]);
        for &t in &committed {
            let m = std::cell::RefCell::new(&mut model);
            let seen = run_steps(
                t,
                &txs[t],
                |k| m.borrow().get(&k).cloned(),
                || m.borrow().iter().map(|(k, v)| (*k, v.clone())).collect(),
                |k, v| { m.borrow_mut().insert(k, v); },
                |k| { m.borrow_mut().remove(&k); },
            );
            prop_assert_eq!(&seen, &observed[t], "transaction {} read differently serially", t);
        }
        let got: BTreeMap<u64, String> = store.scan::<DocKey>(&all).unwrap().items.into_iter().map(|(k, d)| (k.id, d.title)).collect();
        prop_assert_eq!(got, model);
    }
}

engine_tests! {
    /// Four threads move money between five accounts at once; every transfer
    /// is a retried transaction. The total never changes, and every reader
    /// (snapshot) sees it whole.
    fn concurrent_transfers_on_threads_conserve_money() {
        let options = common::options(Limits::FOUNDATIONDB).retry(RetryPolicy {
            max_attempts: 1_000,
            base_backoff_ms: 0,
            max_backoff_ms: 1,
        });
        on_every_engine!(options.clone(), |store, _clock| {
            let account = |id: u64| DocKey { actor: 100, id };
            for id in 0..5 {
                store.put(&account(id), &doc(100)).unwrap();
            }
            let total = |view: &strata_store::ReadView<'_, _>| -> u64 {
                (0..5)
                    .map(|id| {
                        view.get(&account(id))
                            .unwrap()
                            .unwrap()
                            .title
                            .parse::<u64>()
                            .unwrap()
                    })
                    .sum()
            };
            std::thread::scope(|s| {
                for t in 0..4u64 {
                    let store = &store;
                    s.spawn(move || {
                        for i in 0..100u64 {
                            let (from, to) = ((t + i) % 5, (t + 2 * i + 1) % 5);
                            if from == to {
                                continue;
                            }
                            store
                                .transact(|tx| {
                                    let a: u64 =
                                        tx.get(&account(from))?.unwrap().title.parse().unwrap();
                                    let b: u64 = tx.get(&account(to))?.unwrap().title.parse().unwrap();
                                    let amount = a.min(7);
                                    tx.put(&account(from), &doc(a - amount))?;
                                    tx.put(&account(to), &doc(b + amount))
                                })
                                .unwrap();
                        }
                    });
                }
                s.spawn(|| {
                    for _ in 0..50 {
                        assert_eq!(
                            total(&store.read().unwrap()),
                            500,
                            "a reader saw money in flight"
                        );
                    }
                });
            });
            assert_eq!(total(&store.read().unwrap()), 500);
            common::assert_quota_exact(&store);
        });
    }
}
