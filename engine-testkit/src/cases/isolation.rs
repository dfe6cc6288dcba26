//! Cases of isolation and atomicity: snapshots, concurrent commits, commit
//! groups, predicates.

#![allow(clippy::many_single_char_names, clippy::type_complexity)]

use super::{
    Bound, Commit, CommitError, Durability, Engine, Harness, Keyspace, Mutation, MutationError,
    Predicate, RangeSpec, Snapshot, StampAt, all, commit, get, ks, scan, specs,
};

/// A snapshot shows the state at its version and nothing committed after.
pub fn snapshot_isolation<H: Harness>(mut h: H) {
    let e = h.open(&specs());
    let a = ks(&e, "a");
    commit(
        &e,
        Commit::new().put(a, b"k".to_vec(), b"old".to_vec()).put(
            a,
            b"gone".to_vec(),
            b"x".to_vec(),
        ),
    );
    let before = e.snapshot().expect("snapshot");
    let v = before.version().expect("version");
    commit(
        &e,
        Commit::new()
            .put(a, b"k".to_vec(), b"new".to_vec())
            .delete(a, b"gone".to_vec())
            .put(a, b"added".to_vec(), b"y".to_vec()),
    );
    // A read on its own sees the latest commit, whatever snapshot is open.
    assert_eq!(
        e.get_latest(a, b"k").expect("get_latest").as_deref(),
        Some(&b"new"[..])
    );
    assert_eq!(e.get_latest(a, b"gone").expect("get_latest"), None);
    commit(
        &e,
        Commit::new().mutate(Mutation::DeleteRange {
            ks: a,
            range: RangeSpec::all(),
        }),
    );
    assert_eq!(before.version().expect("version"), v);
    assert_eq!(
        before.get(a, b"k").expect("get").as_deref(),
        Some(&b"old"[..])
    );
    assert_eq!(
        before.get(a, b"gone").expect("get").as_deref(),
        Some(&b"x"[..])
    );
    assert_eq!(before.get(a, b"added").expect("get"), None);
    let keys: Vec<Vec<u8>> = scan(&before, a, RangeSpec::all())
        .into_iter()
        .map(|(k, _)| k)
        .collect();
    assert_eq!(keys, [b"gone".to_vec(), b"k".to_vec()]);
    assert!(all(&e, a).is_empty(), "the latest state has them deleted");
    let after = e.snapshot().expect("snapshot");
    assert!(after.version().expect("version") > v);
}

/// Readers on several threads iterate one snapshot while another thread
/// commits; every reader sees exactly the snapshot's state throughout.
pub fn snapshot_isolation_under_concurrent_commits<H: Harness>(mut h: H) {
    let e = h.open(&specs());
    let a = ks(&e, "a");
    let mut c = Commit::new();
    for i in 0..200u32 {
        c = c.put(a, i.to_be_bytes().to_vec(), b"0".to_vec());
    }
    commit(&e, c);
    let snap = e.snapshot().expect("snapshot");
    // Written out independently: 200 rows, more than any engine reads in
    // one internal batch, in key order.
    let expected: Vec<(Vec<u8>, Vec<u8>)> = (0..200u32)
        .map(|i| (i.to_be_bytes().to_vec(), b"0".to_vec()))
        .collect();
    assert_eq!(scan(&snap, a, RangeSpec::all()), expected);
    let mut backwards = expected.clone();
    backwards.reverse();
    assert_eq!(scan(&snap, a, RangeSpec::all().reversed()), backwards);
    assert_eq!(
        scan(&snap, a, RangeSpec::all().limit(150)),
        expected[..150].to_vec(),
        "a limit past one internal batch"
    );
    std::thread::scope(|s| {
        s.spawn(|| {
            for round in 1..=50u32 {
                let mut c = Commit::new().durability(Durability::Buffered);
                for i in (0..200u32).step_by(7) {
                    c = c.put(a, i.to_be_bytes().to_vec(), round.to_be_bytes().to_vec());
                }
                c = c.delete(a, (round * 3).to_be_bytes().to_vec());
                c = c.put(a, (1_000 + round).to_be_bytes().to_vec(), b"new".to_vec());
                e.commit(c).expect("concurrent commit");
            }
        });
        for _ in 0..2 {
            s.spawn(|| {
                for _ in 0..20 {
                    assert_eq!(
                        scan(&snap, a, RangeSpec::all()),
                        expected,
                        "a snapshot never changes"
                    );
                    assert_eq!(
                        snap.get(a, &5u32.to_be_bytes()).expect("get").as_deref(),
                        Some(&b"0"[..])
                    );
                }
            });
        }
    });
    assert_eq!(scan(&snap, a, RangeSpec::all()), expected);
}

/// Several threads commit at once, durably: every commit is serialised with
/// the others. Versions are distinct and increase in each thread's order;
/// counter additions are neither lost nor doubled; of the threads racing
/// for one key under an `Absent` predicate exactly one wins; a commit whose
/// predicate fails applies nothing; versionstamps sort in version order;
/// each `Immediate` commit is durable when it returns.
#[allow(clippy::too_many_lines)]
pub fn concurrent_commits<H: Harness>(mut h: H) {
    const THREADS: u8 = 8;
    const COMMITS: u8 = 24;
    let e = h.open(&specs());
    let (a, q) = (ks(&e, "a"), ks(&e, "b"));
    let placeholder = || [&b"s/"[..], &[0xFF; 10]].concat();
    // (thread, i, version) of each successful commit, and the failures.
    let results: Vec<(Vec<(u8, u8, u64)>, usize)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..THREADS)
            .map(|t| {
                let e = &e;
                s.spawn(move || {
                    let (mut done, mut refused) = (Vec::new(), 0);
                    for i in 0..COMMITS {
                        let own = vec![b'k', t, i];
                        // Every fourth commit races the others for a slot;
                        // every sixth requires absent the key this thread
                        // wrote two commits before (3, 9, 15 or 21, never a
                        // racer nor refused itself: it exists).
                        let slot = vec![b'r', i / 4];
                        let mut c = Commit::new()
                            .durability(Durability::Immediate)
                            .put(a, own.clone(), vec![t, i])
                            .mutate(Mutation::Add {
                                ks: a,
                                key: b"count".to_vec(),
                                delta: 1,
                            })
                            .mutate(Mutation::PutVersionstamped {
                                ks: q,
                                key: placeholder(),
                                value: vec![t, i],
                                at: StampAt::Key(2),
                            });
                        if i % 4 == 0 {
                            c = c
                                .require(Predicate::Absent {
                                    ks: a,
                                    key: slot.clone(),
                                })
                                .put(a, slot, vec![t]);
                        }
                        if i % 6 == 5 {
                            c = c.require(Predicate::Absent {
                                ks: a,
                                key: vec![b'k', t, i - 2],
                            });
                        }
                        match e.commit(c) {
                            Ok(info) => {
                                assert!(info.durable, "an Immediate commit returned not durable");
                                assert!(
                                    e.durable_version() >= info.version,
                                    "durable_version below a returned Immediate commit"
                                );
                                done.push((t, i, info.version));
                            }
                            Err(CommitError::Conflict { .. }) => refused += 1,
                            Err(other) => panic!("thread {t} commit {i}: {other}"),
                        }
                    }
                    (done, refused)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("committing thread"))
            .collect()
    });
    let mut all_done: Vec<(u8, u8, u64)> = Vec::new();
    for (done, _) in &results {
        let versions: Vec<u64> = done.iter().map(|d| d.2).collect();
        assert!(
            versions.windows(2).all(|w| w[0] < w[1]),
            "a thread's commits must get increasing versions: {versions:?}"
        );
        all_done.extend(done);
    }
    let mut versions: Vec<u64> = all_done.iter().map(|d| d.2).collect();
    versions.sort_unstable();
    versions.dedup();
    assert_eq!(
        versions.len(),
        all_done.len(),
        "two commits got one version"
    );
    assert_eq!(
        versions,
        (1..=u64::try_from(all_done.len()).expect("small")).collect::<Vec<_>>(),
        "the applied commits take versions 1, 2, 3... with no gap (refused ones take none)"
    );
    // Which commits must have failed, worked out from the rules above:
    // every `i % 6 == 5` one (its key of two commits before exists), and of the racers
    // for each slot all but the first to commit.
    for (t, i, _) in &all_done {
        assert_ne!(
            i % 6,
            5,
            "thread {t} commit {i} passed a predicate that cannot hold"
        );
    }
    let racers = |slot: u8| {
        all_done
            .iter()
            .filter(move |(_, i, _)| i % 4 == 0 && i / 4 == slot)
            .collect::<Vec<_>>()
    };
    let slots = COMMITS.div_ceil(4);
    for slot in 0..slots {
        let winners = racers(slot);
        assert_eq!(
            winners.len(),
            1,
            "slot {slot}: one racer must win, got {winners:?}"
        );
        assert_eq!(
            get(&e, a, &[b'r', slot]),
            Some(vec![winners[0].0]),
            "slot {slot} holds its winner"
        );
    }
    let refused: usize = results.iter().map(|r| r.1).sum();
    let total = usize::from(THREADS) * usize::from(COMMITS);
    assert_eq!(all_done.len() + refused, total);
    // Refused: four `i % 6 == 5` commits a thread (5, 11, 17, 23), and
    // all but one racer a slot (racers are 0, 4, 8, 12, 16, 20: none of
    // them is refused for the other reason).
    let expected_refused = usize::from(THREADS) * usize::from(COMMITS / 6)
        + usize::from(slots) * (usize::from(THREADS) - 1);
    assert_eq!(refused, expected_refused, "refused commits");
    // Nothing of a refused commit is visible; everything of the others is.
    for t in 0..THREADS {
        for i in 0..COMMITS {
            let ok = all_done.iter().any(|d| d.0 == t && d.1 == i);
            assert_eq!(
                get(&e, a, &[b'k', t, i]).is_some(),
                ok,
                "thread {t} commit {i}: its row must exist exactly when it committed"
            );
        }
    }
    let count = get(&e, a, b"count").expect("counter");
    assert_eq!(
        u64::from_le_bytes(count.try_into().expect("8 bytes")),
        u64::try_from(all_done.len()).expect("small"),
        "one addition per commit, none lost, none doubled"
    );
    // The stamped rows, in key order, are the commits in version order.
    all_done.sort_by_key(|d| d.2);
    let stamped = scan(
        &e.snapshot().expect("snapshot"),
        q,
        RangeSpec::prefix(b"s/"),
    );
    let expected: Vec<(Vec<u8>, Vec<u8>)> = all_done
        .iter()
        .map(|(t, i, v)| {
            (
                [&b"s/"[..], &v.to_be_bytes(), &0u16.to_be_bytes()].concat(),
                vec![*t, *i],
            )
        })
        .collect();
    assert_eq!(stamped, expected, "versionstamps in version order");
}

/// A group of commits ([`Engine::commit_group`]) behaves as its commits
/// committed alone in order: each one's predicates see the earlier ones, a
/// refused or invalid commit fails alone and takes no version, the applied
/// ones take consecutive versions and are all durable when one of them is
/// `Immediate`; the group survives a reopen.
#[allow(clippy::too_many_lines)]
pub fn commit_groups<H: Harness>(mut h: H) {
    let e = h.open(&specs());
    let (a, b) = (ks(&e, "a"), ks(&e, "b"));
    let other = strata_engine::MemEngine::open(specs()).expect("other engine");
    let theirs = ks(&other, "a");
    assert_eq!(
        commit(&e, Commit::new().put(a, b"x".to_vec(), b"1".to_vec())),
        1
    );
    let placeholder = [&b"s/"[..], &[0xFF; 10]].concat();
    let buffered = || Commit::new().durability(Durability::Buffered);
    let results = e.commit_group(vec![
        // 2
        buffered().put(a, b"g1".to_vec(), b"a".to_vec()),
        // refused: g1 exists since the commit before
        buffered()
            .require(Predicate::Absent {
                ks: a,
                key: b"g1".to_vec(),
            })
            .put(a, b"never".to_vec(), b"1".to_vec()),
        // 3: sees g1
        buffered()
            .require(Predicate::ValueEquals {
                ks: a,
                key: b"g1".to_vec(),
                value: Some(b"a".to_vec()),
            })
            .put(a, b"g2".to_vec(), b"b".to_vec())
            .mutate(Mutation::Add {
                ks: a,
                key: b"n".to_vec(),
                delta: 5,
            }),
        // invalid: x holds one byte, not a counter
        buffered()
            .put(a, b"never".to_vec(), b"2".to_vec())
            .mutate(Mutation::Add {
                ks: a,
                key: b"x".to_vec(),
                delta: 1,
            }),
        // refused: a handle of another engine
        buffered().put(theirs, b"never".to_vec(), b"3".to_vec()),
        // 4, durable: and so every commit of the group
        Commit::new()
            .durability(Durability::Immediate)
            .mutate(Mutation::PutVersionstamped {
                ks: b,
                key: placeholder.clone(),
                value: b"stamped".to_vec(),
                at: StampAt::Key(2),
            })
            .mutate(Mutation::Add {
                ks: a,
                key: b"n".to_vec(),
                delta: 2,
            }),
        // 5: sees g2, removes both
        buffered()
            .require(Predicate::Exists {
                ks: a,
                key: b"g2".to_vec(),
            })
            .mutate(Mutation::DeleteRange {
                ks: a,
                range: RangeSpec {
                    start: Bound::Included(b"g1".to_vec()),
                    end: Bound::Included(b"g2".to_vec()),
                    reverse: false,
                    limit: None,
                },
            }),
    ]);
    assert_eq!(results.len(), 7, "one result per commit");
    let versions: Vec<Option<u64>> = results
        .iter()
        .map(|r| r.as_ref().ok().map(|i| i.version))
        .collect();
    assert_eq!(
        versions,
        [Some(2), None, Some(3), None, None, Some(4), Some(5)],
        "consecutive versions for the applied commits only"
    );
    assert!(
        matches!(&results[1], Err(CommitError::Conflict { index: 0, .. })),
        "the second commit's predicate sees the first: {:?}",
        results[1]
    );
    assert!(
        matches!(
            &results[3],
            Err(CommitError::InvalidMutation {
                index: 1,
                reason: MutationError::CounterNotEight { len: 1 }
            })
        ),
        "{:?}",
        results[3]
    );
    assert!(
        matches!(&results[4], Err(CommitError::UnknownKeyspace(k)) if *k == theirs),
        "{:?}",
        results[4]
    );
    for r in results.iter().flatten() {
        assert!(
            r.durable,
            "a group with an Immediate commit is durable as a whole"
        );
    }
    assert_eq!(e.last_version(), 5);
    assert!(
        e.durable_version() >= 5,
        "durable_version behind a durable group"
    );
    let expect_a = vec![
        (b"n".to_vec(), 7i64.to_le_bytes().to_vec()),
        (b"x".to_vec(), b"1".to_vec()),
    ];
    let expect_b = vec![(
        [&b"s/"[..], &4u64.to_be_bytes(), &0u16.to_be_bytes()].concat(),
        b"stamped".to_vec(),
    )];
    assert_eq!(all(&e, a), expect_a, "refused commits wrote nothing");
    assert_eq!(
        all(&e, b),
        expect_b,
        "the stamp carries the commit's own version"
    );
    // A group whose commits are all refused takes no version; an empty
    // group does nothing.
    let refused = e.commit_group(vec![buffered().require(Predicate::Absent {
        ks: a,
        key: b"x".to_vec(),
    })]);
    assert!(matches!(
        refused.as_slice(),
        [Err(CommitError::Conflict { index: 0, .. })]
    ));
    assert!(e.commit_group(Vec::new()).is_empty());
    assert_eq!(e.last_version(), 5);
    // A buffered group, then a reopen: everything committed is there.
    let results = e.commit_group(vec![
        buffered().put(a, b"y".to_vec(), b"6".to_vec()),
        buffered().put(a, b"z".to_vec(), b"7".to_vec()),
    ]);
    let versions: Vec<u64> = results
        .into_iter()
        .map(|r| r.expect("buffered group").version)
        .collect();
    assert_eq!(versions, [6, 7]);
    let e = h.reopen(e);
    let a = ks(&e, "a");
    let mut expect_a = expect_a;
    expect_a.extend([
        (b"y".to_vec(), b"6".to_vec()),
        (b"z".to_vec(), b"7".to_vec()),
    ]);
    assert_eq!(all(&e, a), expect_a, "the groups after a reopen");
    assert_eq!(e.last_version(), 7);
    assert_eq!(
        commit(&e, Commit::new().put(a, b"w".to_vec(), b"8".to_vec())),
        8
    );
}

/// Every predicate kind passes and fails as specified; a failing one
/// applies nothing at all and is named in the error.
pub fn predicates_are_the_atomicity_fence<H: Harness>(mut h: H) {
    let e = h.open(&specs());
    let (a, b) = (ks(&e, "a"), ks(&e, "b"));
    commit(
        &e,
        Commit::new()
            .put(a, b"x".to_vec(), b"1".to_vec())
            .put(b, b"q/1".to_vec(), b"m".to_vec()),
    );
    let pass = [
        Predicate::Exists {
            ks: a,
            key: b"x".to_vec(),
        },
        Predicate::Absent {
            ks: a,
            key: b"y".to_vec(),
        },
        Predicate::ValueEquals {
            ks: a,
            key: b"x".to_vec(),
            value: Some(b"1".to_vec()),
        },
        Predicate::ValueEquals {
            ks: a,
            key: b"y".to_vec(),
            value: None,
        },
        Predicate::RangeEmpty {
            ks: b,
            range: RangeSpec::prefix(b"r/"),
        },
    ];
    let fail = [
        Predicate::Exists {
            ks: a,
            key: b"y".to_vec(),
        },
        Predicate::Absent {
            ks: a,
            key: b"x".to_vec(),
        },
        Predicate::ValueEquals {
            ks: a,
            key: b"x".to_vec(),
            value: Some(b"2".to_vec()),
        },
        Predicate::ValueEquals {
            ks: a,
            key: b"x".to_vec(),
            value: None,
        },
        Predicate::RangeEmpty {
            ks: b,
            range: RangeSpec::prefix(b"q/"),
        },
    ];
    for (i, bad) in fail.iter().enumerate() {
        let before = (all(&e, a), all(&e, b), e.last_version());
        let mut c = Commit::new();
        for p in &pass {
            c = c.require(p.clone());
        }
        c = c
            .require(bad.clone())
            .put(a, b"x".to_vec(), b"changed".to_vec())
            .put(b, b"new".to_vec(), b"n".to_vec())
            .mutate(Mutation::Add {
                ks: a,
                key: b"counter".to_vec(),
                delta: 1,
            });
        match e.commit(c) {
            Err(CommitError::Conflict { index, predicate }) => {
                assert_eq!(
                    index,
                    pass.len(),
                    "case {i}: the failing predicate is named"
                );
                assert_eq!(&predicate, bad);
            }
            other => panic!("case {i}: expected a conflict, got {other:?}"),
        }
        assert_eq!(
            (all(&e, a), all(&e, b), e.last_version()),
            before,
            "case {i}: nothing applied"
        );
    }
    each_alone(&e, (a, b), &pass, &fail);
    let mut c = Commit::new();
    for p in &pass {
        c = c.require(p.clone());
    }
    commit(&e, c.put(a, b"x".to_vec(), b"2".to_vec()));
    assert_eq!(
        get(&e, a, b"x").as_deref(),
        Some(&b"2"[..]),
        "all predicates pass: applied"
    );
}

/// Each of `pass` and `fail` alone in a commit (an engine may read a lone
/// point predicate on its own, not in a batch): the same verdicts, a
/// failing one named as the first and applying nothing. Writes only keys
/// `p/…` of `b`.
fn each_alone<E: Engine>(
    e: &E,
    (a, b): (Keyspace, Keyspace),
    pass: &[Predicate],
    fail: &[Predicate],
) {
    for (i, bad) in fail.iter().enumerate() {
        let before = (all(e, a), all(e, b), e.last_version());
        let c = Commit::new()
            .require(bad.clone())
            .put(a, b"z".to_vec(), b"3".to_vec());
        match e.commit(c) {
            Err(CommitError::Conflict { index, predicate }) => {
                assert_eq!(index, 0, "case {i} alone: the predicate is named");
                assert_eq!(&predicate, bad);
            }
            other => panic!("case {i} alone: expected a conflict, got {other:?}"),
        }
        assert_eq!(
            (all(e, a), all(e, b), e.last_version()),
            before,
            "case {i} alone: nothing applied"
        );
    }
    for (i, good) in pass.iter().enumerate() {
        let key = format!("p/{i}").into_bytes();
        commit(
            e,
            Commit::new()
                .require(good.clone())
                .put(b, key.clone(), b"p".to_vec()),
        );
        assert_eq!(
            get(e, b, &key).as_deref(),
            Some(&b"p"[..]),
            "case {i} alone: applied"
        );
    }
}
