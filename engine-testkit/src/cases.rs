//! The named conformance cases: point operations, ranges, snapshots,
//! predicates, versionstamps, counters, durability, the crash contract,
//! typed errors and statistics. Each panics naming what broke.

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

pub(crate) fn specs() -> Vec<KeyspaceSpec> {
    vec![
        KeyspaceSpec::new("a", Profile::PointLookup),
        KeyspaceSpec::new("b", Profile::Queue),
    ]
}

pub(crate) fn ks<E: Engine>(e: &E, name: &str) -> Keyspace {
    e.keyspace(name).expect("declared keyspace")
}

fn get<E: Engine>(e: &E, ks: Keyspace, key: &[u8]) -> Option<Vec<u8>> {
    e.snapshot().expect("snapshot").get(ks, key).expect("get")
}

fn scan<S: Snapshot>(s: &S, ks: Keyspace, range: RangeSpec) -> Vec<(Vec<u8>, Vec<u8>)> {
    s.range(ks, range)
        .expect("range")
        .collect::<Result<_, _>>()
        .expect("range item")
}

fn all<E: Engine>(e: &E, ks: Keyspace) -> Vec<(Vec<u8>, Vec<u8>)> {
    scan(&e.snapshot().expect("snapshot"), ks, RangeSpec::all())
}

fn commit<E: Engine>(e: &E, c: Commit) -> u64 {
    e.commit(c).expect("commit").version
}

/// Puts, overwrites, deletes and reads single keys, in two keyspaces.
pub fn point_ops<H: Harness>(mut h: H) {
    let e = h.open(&specs());
    let (a, b) = (ks(&e, "a"), ks(&e, "b"));
    assert_eq!(get(&e, a, b"k"), None, "a fresh engine is empty");
    commit(&e, Commit::new().put(a, b"k".to_vec(), b"1".to_vec()));
    assert_eq!(get(&e, a, b"k").as_deref(), Some(&b"1"[..]));
    assert_eq!(get(&e, b, b"k"), None, "keyspaces are separate");
    commit(&e, Commit::new().put(a, b"k".to_vec(), b"2".to_vec()));
    assert_eq!(get(&e, a, b"k").as_deref(), Some(&b"2"[..]), "overwrite");
    commit(&e, Commit::new().put(a, b"empty".to_vec(), Vec::new()));
    assert_eq!(
        get(&e, a, b"empty").as_deref(),
        Some(&b""[..]),
        "an empty value is a value"
    );
    commit(&e, Commit::new().put(a, Vec::new(), b"root".to_vec()));
    assert_eq!(
        get(&e, a, b"").as_deref(),
        Some(&b"root"[..]),
        "the empty key is a key"
    );
    let big = vec![0xAB; 100_000];
    commit(&e, Commit::new().put(b, vec![0xFF; 300], big.clone()));
    assert_eq!(get(&e, b, &[0xFF; 300]), Some(big));
    commit(
        &e,
        Commit::new()
            .delete(a, b"k".to_vec())
            .delete(a, b"never".to_vec()),
    );
    assert_eq!(get(&e, a, b"k"), None, "delete");
    let v1 = commit(&e, Commit::new().put(a, b"x".to_vec(), b"1".to_vec()));
    let v2 = commit(&e, Commit::new());
    assert!(v2 > v1, "even an empty commit gets a new version");
    assert_eq!(e.last_version(), v2);
}

const KEYS: &[&[u8]] = &[
    b"",
    b"\x00",
    b"\x00\x00",
    b"\x00\xFF",
    b"\x01",
    b"a",
    b"a\x00",
    b"ab",
    b"b",
    b"\x7F",
    b"\x80",
    b"\xFE\xFF",
    b"\xFF",
    b"\xFF\x00",
    b"\xFF\xFF",
    b"\xFF\xFF\xFF",
];

fn filled<H: Harness>(h: &mut H) -> (H::Engine, Keyspace) {
    let e = h.open(&specs());
    let a = ks(&e, "a");
    // Insert out of order, over several commits.
    for chunk in KEYS.iter().rev().collect::<Vec<_>>().chunks(5) {
        let mut c = Commit::new();
        for k in chunk {
            c = c.put(a, k.to_vec(), [b"v:", **k].concat());
        }
        commit(&e, c);
    }
    (e, a)
}

/// A full scan yields keys in byte order, with `0x00` and `0xFF` edge keys.
pub fn range_order_is_byte_order<H: Harness>(mut h: H) {
    let (e, a) = filled(&mut h);
    let keys: Vec<Vec<u8>> = all(&e, a).into_iter().map(|(k, _)| k).collect();
    let mut sorted: Vec<Vec<u8>> = KEYS.iter().map(|k| k.to_vec()).collect();
    sorted.sort();
    assert_eq!(keys, sorted);
    for (k, v) in all(&e, a) {
        assert_eq!(
            v,
            [b"v:".as_slice(), &k].concat(),
            "values follow their keys"
        );
    }
}

/// A reversed scan yields exactly the forward scan backwards, with limits.
pub fn reverse_ranges<H: Harness>(mut h: H) {
    let (e, a) = filled(&mut h);
    let s = e.snapshot().expect("snapshot");
    let mut forward = scan(&s, a, RangeSpec::all());
    forward.reverse();
    assert_eq!(scan(&s, a, RangeSpec::all().reversed()), forward);
    let top3 = scan(&s, a, RangeSpec::all().reversed().limit(3));
    assert_eq!(top3, forward[..3].to_vec());
    let r = RangeSpec::half_open(b"a".to_vec(), b"\xFF".to_vec()).reversed();
    let keys: Vec<Vec<u8>> = scan(&s, a, r).into_iter().map(|(k, _)| k).collect();
    assert_eq!(
        keys,
        [
            &b"\xFE\xFF"[..],
            b"\x80",
            b"\x7F",
            b"b",
            b"ab",
            b"a\x00",
            b"a"
        ]
        .map(<[u8]>::to_vec)
    );
}

/// Every combination of included, excluded and unbounded bounds, with and
/// without a limit, matches filtering the sorted keys.
pub fn bounds_and_limits<H: Harness>(mut h: H) {
    let (e, a) = filled(&mut h);
    let s = e.snapshot().expect("snapshot");
    let mut sorted: Vec<Vec<u8>> = KEYS.iter().map(|k| k.to_vec()).collect();
    sorted.sort();
    let probes: Vec<Vec<u8>> = [
        &b""[..],
        b"\x00",
        b"\x00\x01",
        b"a",
        b"a\x00",
        b"c",
        b"\xFF",
        b"\xFF\xFF",
        b"\xFF\xFF\xFF\xFF",
    ]
    .iter()
    .map(|p| p.to_vec())
    .collect();
    let bounds = |p: &Vec<u8>| {
        [
            Bound::Included(p.clone()),
            Bound::Excluded(p.clone()),
            Bound::Unbounded,
        ]
    };
    for lo in &probes {
        for hi in &probes {
            if lo > hi {
                continue;
            }
            for start in bounds(lo) {
                for end in bounds(hi) {
                    for (reverse, limit) in [
                        (false, None),
                        (true, None),
                        (false, Some(2)),
                        (true, Some(1)),
                        (false, Some(0)),
                    ] {
                        let spec = RangeSpec {
                            start: start.clone(),
                            end: end.clone(),
                            reverse,
                            limit,
                        };
                        let mut want: Vec<Vec<u8>> = sorted
                            .iter()
                            .filter(|k| spec.contains(k))
                            .cloned()
                            .collect();
                        if reverse {
                            want.reverse();
                        }
                        want.truncate(limit.unwrap_or(usize::MAX));
                        let got: Vec<Vec<u8>> = scan(&s, a, spec.clone())
                            .into_iter()
                            .map(|(k, _)| k)
                            .collect();
                        assert_eq!(got, want, "{spec:?}");
                    }
                }
            }
        }
    }
}

/// `DeleteRange` removes exactly its range, including keys after `0xFF`.
pub fn delete_range<H: Harness>(mut h: H) {
    let (e, a) = filled(&mut h);
    commit(
        &e,
        Commit::new().mutate(Mutation::DeleteRange {
            ks: a,
            range: RangeSpec::prefix(b"\xFF"),
        }),
    );
    let keys: Vec<Vec<u8>> = all(&e, a).into_iter().map(|(k, _)| k).collect();
    assert!(keys.iter().all(|k| !k.starts_with(b"\xFF")), "{keys:?}");
    assert_eq!(keys.len(), KEYS.len() - 4);
    commit(
        &e,
        Commit::new().mutate(Mutation::DeleteRange {
            ks: a,
            range: RangeSpec {
                start: Bound::Excluded(b"a".to_vec()),
                end: Bound::Included(b"b".to_vec()),
                reverse: true,
                limit: Some(1),
            },
        }),
    );
    let keys: Vec<Vec<u8>> = all(&e, a).into_iter().map(|(k, _)| k).collect();
    assert!(
        keys.contains(&b"a".to_vec())
            && !keys.contains(&b"ab".to_vec())
            && !keys.contains(&b"b".to_vec())
    );
    assert!(
        keys.contains(&b"\x7F".to_vec()),
        "direction and limit do not narrow a delete"
    );
    commit(
        &e,
        Commit::new().mutate(Mutation::DeleteRange {
            ks: a,
            range: RangeSpec::all(),
        }),
    );
    assert!(all(&e, a).is_empty());
}

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

/// Versionstamps carry the commit version (8 bytes, big-endian) and the
/// order within the commit (2 bytes, big-endian), in keys and values; keys
/// stamped across commits sort in commit order.
pub fn versionstamps_order_commits<H: Harness>(mut h: H) {
    let e = h.open(&specs());
    let q = ks(&e, "b");
    let placeholder = |prefix: &[u8]| [prefix, &[0xFF; 10], b"\x00\x07"].concat();
    let mut versions = Vec::new();
    for _ in 0..3 {
        let mut c = Commit::new();
        for _ in 0..3 {
            c = c.mutate(Mutation::PutVersionstamped {
                ks: q,
                key: placeholder(b"q/"),
                value: b"v".to_vec(),
                at: StampAt::Key(2),
            });
        }
        c = c.mutate(Mutation::PutVersionstamped {
            ks: q,
            key: b"last".to_vec(),
            value: placeholder(b"@"),
            at: StampAt::Value(1),
        });
        versions.push(commit(&e, c));
    }
    let rows = scan(
        &e.snapshot().expect("snapshot"),
        q,
        RangeSpec::prefix(b"q/"),
    );
    assert_eq!(rows.len(), 9, "three stamped keys per commit");
    let mut expected_stamps = Vec::new();
    for v in &versions {
        for order in 0u16..3 {
            expected_stamps.push([&v.to_be_bytes()[..], &order.to_be_bytes()].concat());
        }
    }
    let stamps: Vec<Vec<u8>> = rows.iter().map(|(k, _)| k[2..12].to_vec()).collect();
    assert_eq!(
        stamps, expected_stamps,
        "sorted by commit, then order within the commit"
    );
    assert!(
        rows.iter().all(|(k, _)| k.ends_with(b"\x00\x07")),
        "the user version is kept"
    );
    let last = get(&e, q, b"last").expect("stamped value");
    assert_eq!(
        &last[1..11],
        &[&versions[2].to_be_bytes()[..], &3u16.to_be_bytes()].concat()[..]
    );
    // A stamp that does not fit fails the commit and applies nothing.
    let before = (all(&e, q), e.last_version());
    let bad = Commit::new()
        .put(q, b"first".to_vec(), b"x".to_vec())
        .mutate(Mutation::PutVersionstamped {
            ks: q,
            key: b"short".to_vec(),
            value: Vec::new(),
            at: StampAt::Key(0),
        });
    assert!(matches!(
        e.commit(bad),
        Err(CommitError::InvalidMutation {
            index: 1,
            reason: MutationError::StampOutOfBounds { offset: 0, len: 5 }
        })
    ));
    assert_eq!((all(&e, q), e.last_version()), before);
}

/// Inverted versionstamps: every bit of the stamp flipped (the version
/// `0x…05` becomes `0xFF…FA`), so keys stamped across commits sort newest
/// commit first, and within a commit the later mutation first; a stamp that
/// does not fit fails the commit.
pub fn inverted_versionstamps_sort_newest_first<H: Harness>(mut h: H) {
    let e = h.open(&specs());
    let q = ks(&e, "b");
    let mut versions = Vec::new();
    for _ in 0..3 {
        let mut c = Commit::new();
        for _ in 0..2 {
            c = c.mutate(Mutation::PutVersionstamped {
                ks: q,
                key: [&b"h/"[..], &[0; 10], b"/x"].concat(),
                value: b"v".to_vec(),
                at: StampAt::KeyInverted(2),
            });
        }
        versions.push(commit(&e, c));
    }
    let rows = scan(
        &e.snapshot().expect("snapshot"),
        q,
        RangeSpec::prefix(b"h/"),
    );
    let mut expected = Vec::new();
    for v in versions.iter().rev() {
        for order in [1u16, 0] {
            // Written out: 0xFF minus each byte of the big-endian version
            // and order.
            let mut stamp: Vec<u8> = v.to_be_bytes().iter().map(|b| 255 - b).collect();
            stamp.extend(order.to_be_bytes().iter().map(|b| 255 - b));
            expected.push([&b"h/"[..], &stamp, b"/x"].concat());
        }
    }
    let keys: Vec<Vec<u8>> = rows.into_iter().map(|(k, _)| k).collect();
    assert_eq!(keys, expected, "newest commit first, later mutation first");
    let bad = Commit::new().mutate(Mutation::PutVersionstamped {
        ks: q,
        key: vec![0; 9],
        value: Vec::new(),
        at: StampAt::KeyInverted(0),
    });
    assert!(matches!(
        e.commit(bad),
        Err(CommitError::InvalidMutation {
            index: 0,
            reason: MutationError::StampOutOfBounds { offset: 0, len: 9 }
        })
    ));
}

/// Counters: 8-byte little-endian, absent is 0, wrapping, visible to later
/// mutations of the same commit; a non-counter value fails the commit.
pub fn counters<H: Harness>(mut h: H) {
    let e = h.open(&specs());
    let a = ks(&e, "a");
    let add = |key: &[u8], delta| Mutation::Add {
        ks: a,
        key: key.to_vec(),
        delta,
    };
    commit(&e, Commit::new().mutate(add(b"c", 5)).mutate(add(b"c", -2)));
    assert_eq!(get(&e, a, b"c"), Some(3i64.to_le_bytes().to_vec()));
    commit(
        &e,
        Commit::new()
            .put(a, b"w".to_vec(), i64::MAX.to_le_bytes().to_vec())
            .mutate(add(b"w", 1)),
    );
    assert_eq!(
        get(&e, a, b"w"),
        Some(i64::MIN.to_le_bytes().to_vec()),
        "wraps"
    );
    commit(
        &e,
        Commit::new().delete(a, b"c".to_vec()).mutate(add(b"c", 7)),
    );
    assert_eq!(
        get(&e, a, b"c"),
        Some(7i64.to_le_bytes().to_vec()),
        "a deleted counter restarts at 0"
    );
    // A range delete earlier in the commit removes the counter only when
    // it covers the key in the counter's own keyspace.
    let five = 5i64.to_le_bytes().to_vec();
    let b = ks(&e, "b");
    let range_delete = |ks, range| Mutation::DeleteRange { ks, range };
    for (range, want) in [
        (range_delete(a, RangeSpec::half_open(b"q", b"s")), 1i64),
        (range_delete(a, RangeSpec::half_open(b"s", b"t")), 6),
        (range_delete(b, RangeSpec::all()), 6),
    ] {
        commit(
            &e,
            Commit::new()
                .put(a, b"r".to_vec(), five.clone())
                .mutate(range)
                .mutate(add(b"r", 1)),
        );
        assert_eq!(get(&e, a, b"r"), Some(want.to_le_bytes().to_vec()));
    }
    commit(&e, Commit::new().put(a, b"s".to_vec(), b"abc".to_vec()));
    let before = (all(&e, a), e.last_version());
    let bad = Commit::new().mutate(add(b"c", 1)).mutate(add(b"s", 1));
    assert!(matches!(
        e.commit(bad),
        Err(CommitError::InvalidMutation {
            index: 1,
            reason: MutationError::CounterNotEight { len: 3 }
        })
    ));
    assert_eq!((all(&e, a), e.last_version()), before, "nothing applied");
    // Concurrent adds from several threads are exact.
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                for _ in 0..100 {
                    e.commit(
                        Commit::new()
                            .mutate(add(b"n", 1))
                            .durability(Durability::Buffered),
                    )
                    .expect("add");
                }
            });
        }
    });
    assert_eq!(get(&e, a, b"n"), Some(400i64.to_le_bytes().to_vec()));
}

/// Immediate commits, and buffered ones followed by `sync`, survive a clean
/// reopen; versions keep increasing after it.
pub fn durability_across_reopen<H: Harness>(mut h: H) {
    let e = h.open(&specs());
    let a = ks(&e, "a");
    assert_eq!((e.last_version(), e.durable_version()), (0, 0));
    let v1 = commit(&e, Commit::new().put(a, b"i".to_vec(), b"1".to_vec()));
    assert!(e.durable_version() >= v1, "immediate is durable on return");
    let info = e
        .commit(
            Commit::new()
                .put(a, b"b".to_vec(), b"2".to_vec())
                .durability(Durability::Buffered),
        )
        .expect("commit");
    let synced = e.sync().expect("sync");
    assert!(synced >= info.version && e.durable_version() >= info.version);
    let e = h.reopen(e);
    let a = ks(&e, "a");
    assert_eq!(get(&e, a, b"i").as_deref(), Some(&b"1"[..]));
    assert_eq!(get(&e, a, b"b").as_deref(), Some(&b"2"[..]));
    assert!(
        e.last_version() >= info.version,
        "the version survives reopen"
    );
    let v3 = commit(&e, Commit::new().put(a, b"after".to_vec(), b"3".to_vec()));
    assert!(
        v3 > info.version,
        "versions strictly increase across reopen"
    );
    let e = h.reopen(e);
    assert_eq!(all(&e, ks(&e, "a")).len(), 3);
}

/// `raise_version` lifts the last version without touching data, durably:
/// the next commit (and its versionstamps) sorts above it, across reopen;
/// a lower target changes nothing.
pub fn raise_version<H: Harness>(mut h: H) {
    let e = h.open(&specs());
    let a = ks(&e, "a");
    let v1 = commit(&e, Commit::new().put(a, b"k".to_vec(), b"1".to_vec()));
    let raised = e.raise_version(v1 + 300).expect("raise");
    assert_eq!(raised, v1 + 300, "raised to exactly the target");
    assert_eq!(e.last_version(), v1 + 300);
    assert!(
        e.durable_version() >= v1 + 300,
        "a raised version is durable"
    );
    assert_eq!(
        e.raise_version(5).expect("lower target"),
        v1 + 300,
        "a lower target changes nothing"
    );
    assert_eq!(
        all(&e, a),
        vec![(b"k".to_vec(), b"1".to_vec())],
        "no data changed"
    );
    let e = h.reopen(e);
    let a = ks(&e, "a");
    assert_eq!(
        e.last_version(),
        v1 + 300,
        "the raised version survives reopen"
    );
    let next = e
        .commit(Commit::new().mutate(Mutation::PutVersionstamped {
            ks: a,
            key: b"s".to_vec(),
            value: vec![0; 10],
            at: StampAt::Value(0),
        }))
        .expect("commit")
        .version;
    assert_eq!(next, v1 + 301, "the next commit follows the raised version");
    let stamp = get(&e, a, b"s").expect("stamped");
    assert_eq!(stamp[..8], (v1 + 301).to_be_bytes(), "stamps follow it too");
}

/// Keyspaces added and dropped across a clean reopen: a kept keyspace keeps
/// its data under its name, whatever its new position; an added one starts
/// empty and takes commits; a dropped one is no longer named; versions
/// carry on.
pub fn keyspaces_across_reopen<H: Harness>(mut h: H) {
    let e = h.open(&specs());
    let (a, b) = (ks(&e, "a"), ks(&e, "b"));
    commit(&e, Commit::new().put(a, b"x".to_vec(), b"1".to_vec()));
    let v = commit(&e, Commit::new().put(b, b"y".to_vec(), b"2".to_vec()));
    let mut with_c = specs();
    with_c.push(KeyspaceSpec::new("c", Profile::Queue));
    let Some(e) = h.reopen_with(e, &with_c) else {
        println!(
            "keyspaces_across_reopen: skipped, this harness cannot reopen with other keyspaces"
        );
        return;
    };
    assert_eq!(e.keyspaces().len(), 3);
    let (a, b, c) = (ks(&e, "a"), ks(&e, "b"), ks(&e, "c"));
    assert_eq!(
        get(&e, a, b"x").as_deref(),
        Some(&b"1"[..]),
        "a kept its row"
    );
    assert_eq!(
        get(&e, b, b"y").as_deref(),
        Some(&b"2"[..]),
        "b kept its row"
    );
    assert!(all(&e, c).is_empty(), "an added keyspace starts empty");
    assert_eq!(
        e.last_version(),
        v,
        "the version survives a reopen with a keyspace added"
    );
    let w = commit(&e, Commit::new().put(c, b"z".to_vec(), b"3".to_vec()));
    assert!(w > v, "versions carry on in an added keyspace");
    // Drop b; c comes first now.
    let c_spec = with_c[2].clone();
    let a_spec = with_c[0].clone();
    let Some(e) = h.reopen_with(e, &[c_spec, a_spec]) else {
        println!("keyspaces_across_reopen: skipped the second reopen, the harness cannot");
        return;
    };
    assert_eq!(e.keyspaces().len(), 2);
    assert!(
        matches!(e.keyspace("b"), Err(EngineError::UnknownKeyspaceName(_))),
        "a dropped keyspace is no longer named"
    );
    let (a, c) = (ks(&e, "a"), ks(&e, "c"));
    assert_eq!(
        all(&e, a),
        vec![(b"x".to_vec(), b"1".to_vec())],
        "a by name, at a new position"
    );
    assert_eq!(
        all(&e, c),
        vec![(b"z".to_vec(), b"3".to_vec())],
        "c by name, at a new position"
    );
    assert_eq!(e.last_version(), w);
}

/// The crash contract, over many seeds: after a crash the state is the
/// state after some commit at or after the last one acknowledged durable.
/// Some commits go in groups ([`Engine::commit_group`]): a crash loses a
/// suffix of the commits, never a hole, group boundaries or not.
pub fn crash_contract<H: Harness>(mut h: H) {
    for seed in 0..40u64 {
        let mut rng = SeededRng::new(seed);
        let e = h.open(&specs());
        let a = ks(&e, "a");
        // States after each commit, by version, from the model.
        let mut model = crate::Model::new(2);
        let mut states: Vec<(u64, Vec<(Vec<u8>, Vec<u8>)>)> = vec![(0, Vec::new())];
        let mut last_durable = 0;
        let mut i = 0;
        while i < 5 + rng.below(20) {
            let group = if rng.chance(0.25) {
                2 + rng.below(3)
            } else {
                1
            };
            let mut commits = Vec::new();
            for _ in 0..group {
                let durability = if rng.chance(0.3) {
                    Durability::Immediate
                } else {
                    Durability::Buffered
                };
                let mut c = Commit::new().durability(durability);
                for j in 0..=rng.below(4) {
                    let key = format!("k{}", rng.below(8)).into_bytes();
                    c = if rng.chance(0.2) {
                        c.delete(a, key)
                    } else {
                        c.put(a, key, format!("{i}.{j}").into_bytes())
                    };
                }
                commits.push(c);
                i += 1;
            }
            let infos = if group == 1 {
                vec![e.commit(commits[0].clone()).expect("commit")]
            } else {
                e.commit_group(commits.clone())
                    .into_iter()
                    .map(|r| r.expect("group commit"))
                    .collect()
            };
            for (c, info) in commits.iter().zip(&infos) {
                let version = model.commit(c).expect("the model accepts");
                assert_eq!(info.version, version, "seed {seed}: versions by commit");
                if info.durable {
                    last_durable = info.version;
                }
                states.push((info.version, model.range(0, &RangeSpec::all())));
            }
            assert_eq!(
                all(&e, a),
                model.range(0, &RangeSpec::all()),
                "seed {seed}: the state after a commit"
            );
            if rng.chance(0.1) {
                last_durable = e.sync().expect("sync");
            }
        }
        let Some(e) = h.crash(e, &mut rng) else {
            eprintln!(
                "crash_contract: this harness cannot simulate a crash; the crash contract is NOT checked"
            );
            return;
        };
        let recovered = all(&e, ks(&e, "a"));
        let ok = states
            .iter()
            .any(|(v, s)| *v >= last_durable && *s == recovered);
        assert!(
            ok,
            "seed {seed}: recovered state is no state at or after durable version {last_durable}"
        );
        let v = e.last_version();
        assert!(
            v >= last_durable,
            "seed {seed}: version went back before the durable one"
        );
        let next = commit(
            &e,
            Commit::new().put(ks(&e, "a"), b"z".to_vec(), b"z".to_vec()),
        );
        assert!(next > v);
    }
}

/// Undeclared keyspaces and bad ranges are typed errors everywhere.
pub fn typed_errors<H: Harness>(mut h: H) {
    let e = h.open(&specs());
    assert!(matches!(e.keyspace("nope"), Err(EngineError::UnknownKeyspaceName(n)) if n == "nope"));
    // A handle of the right position, issued by another set of keyspaces.
    let forged = strata_engine::Keyspaces::new(specs())
        .expect("keyspaces")
        .get("b")
        .expect("b");
    let s = e.snapshot().expect("snapshot");
    assert!(matches!(s.get(forged, b"k"), Err(ReadError::UnknownKeyspace(k)) if k == forged));
    assert!(matches!(
        s.range(forged, RangeSpec::all()),
        Err(ReadError::UnknownKeyspace(_))
    ));
    let a = ks(&e, "a");
    let backwards = RangeSpec::half_open(b"b".to_vec(), b"a".to_vec());
    assert!(matches!(
        s.range(a, backwards.clone()),
        Err(ReadError::InvalidRange)
    ));
    drop(s);
    let v = e.last_version();
    assert!(
        matches!(e.commit(Commit::new().put(forged, b"k".to_vec(), b"v".to_vec())), Err(CommitError::UnknownKeyspace(k)) if k == forged)
    );
    assert!(matches!(
        e.commit(Commit::new().require(Predicate::Exists {
            ks: forged,
            key: b"k".to_vec()
        })),
        Err(CommitError::UnknownKeyspace(_))
    ));
    assert!(matches!(
        e.commit(Commit::new().put(a, b"k".to_vec(), b"v".to_vec()).mutate(
            Mutation::DeleteRange {
                ks: a,
                range: backwards.clone()
            }
        )),
        Err(CommitError::InvalidMutation {
            index: 1,
            reason: MutationError::InvalidRange
        })
    ));
    assert!(matches!(
        e.commit(Commit::new().require(Predicate::RangeEmpty {
            ks: a,
            range: backwards
        })),
        Err(CommitError::InvalidPredicate {
            index: 0,
            reason: PredicateError::InvalidRange
        })
    ));
    assert_eq!(e.last_version(), v, "no failed commit took a version");
    assert_eq!(get(&e, a, b"k"), None);
}

/// A handle is only good on the engine instance that issued it: another
/// engine's handles (here a `MemEngine` with the same keyspaces), and this
/// engine's handles from before a reopen, are refused by reads and commits,
/// whatever their position; a shared reference to the engine shares its
/// handles; handles obtained again by name after the reopen work.
pub fn foreign_handles_are_refused<H: Harness>(mut h: H) {
    let e = h.open(&specs());
    let other = strata_engine::MemEngine::open(specs()).expect("other engine");
    let (a, b) = (ks(&e, "a"), ks(&e, "b"));
    let theirs = ks(&other, "b");
    assert_eq!(theirs.index(), b.index(), "same position in both engines");
    assert_ne!(theirs, b, "but not the same handle");
    commit(
        &other,
        Commit::new().put(theirs, b"k".to_vec(), b"v".to_vec()),
    );
    let s = e.snapshot().expect("snapshot");
    assert!(matches!(s.get(theirs, b"k"), Err(ReadError::UnknownKeyspace(k)) if k == theirs));
    drop(s);
    assert!(matches!(
        e.commit(Commit::new().put(a, b"x".to_vec(), b"1".to_vec()).delete(theirs, b"k".to_vec())),
        Err(CommitError::UnknownKeyspace(k)) if k == theirs
    ));
    assert_eq!(get(&e, a, b"x"), None, "the refused commit wrote nothing");
    let shared = &e;
    assert_eq!(shared.keyspace("b").expect("b"), b, "&E shares the handles");
    commit(&shared, Commit::new().put(b, b"y".to_vec(), b"2".to_vec()));
    drop(other);
    let e = h.reopen(e);
    assert!(
        matches!(
            e.snapshot().expect("snapshot").get(b, b"y"),
            Err(ReadError::UnknownKeyspace(_))
        ),
        "a handle from before the reopen is refused"
    );
    assert!(matches!(
        e.commit(Commit::new().put(a, b"z".to_vec(), b"3".to_vec())),
        Err(CommitError::UnknownKeyspace(_))
    ));
    let b = ks(&e, "b");
    assert_eq!(
        get(&e, b, b"y").as_deref(),
        Some(&b"2"[..]),
        "obtained again by name"
    );
}

/// Stats count entries and bytes (exactly, where the engine says so).
pub fn stats<H: Harness>(mut h: H) {
    let e = h.open(&specs());
    let a = ks(&e, "a");
    commit(
        &e,
        Commit::new()
            .put(a, b"k1".to_vec(), b"vvv".to_vec())
            .put(a, b"k2".to_vec(), b"v".to_vec()),
    );
    commit(
        &e,
        Commit::new()
            .delete(a, b"k2".to_vec())
            .put(a, b"k1".to_vec(), b"vv".to_vec()),
    );
    let st = e.stats().expect("stats");
    assert_eq!(st.len(), 2);
    assert_eq!((st[0].name.as_str(), st[1].name.as_str()), ("a", "b"));
    if st[0].entries_exact {
        assert_eq!(st[0].entries, 1);
    }
    if st[0].bytes_exact {
        assert_eq!(st[0].bytes, 4);
    }
    if st[1].entries_exact {
        assert_eq!(st[1].entries, 0);
    }
}
