//! The conformance suite: every engine runs the same tests by the same
//! names. **Not semver-stable**: tests are added and tightened as the
//! contract is pinned down; third-party engines are welcome to run it.
//!
//! An engine crate implements [`Harness`] (open a fresh engine, reopen it
//! after a clean shutdown, and crash it where it can) and expands the suite
//! into `#[test]`s with [`conformance_tests!`](crate::conformance_tests):
//!
//! ```ignore
//! strata_engine::conformance_tests!(MyHarness::new());
//! ```
//!
//! Each test function panics with a message naming what broke. The
//! [`Model`] is the plain reference the model check compares with: the
//! contract's semantics written as simply as possible, independent of
//! [`MemEngine`](crate::MemEngine)'s code.

// Test code: short names (`e` engine, `a`/`b` keyspaces, `s` snapshot) read
// better in the assertions than long ones.
#![allow(clippy::many_single_char_names, clippy::type_complexity)]

use std::ops::Bound;

use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};

pub use crate::model::{Model, ModelError};
use crate::{
    Commit, CommitError, Durability, Engine, EngineError, Keyspace, KeyspaceSpec, Mutation,
    MutationError, Predicate, Profile, RangeSpec, ReadError, Rng, SeededRng, Snapshot, StampAt,
};

/// How the suite drives an engine.
pub trait Harness {
    /// The engine under test.
    type Engine: Engine;
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
}

/// Expands the whole suite into `#[test]` functions, one per test, named
/// as the functions of this module. `$harness` is evaluated once per test.
#[macro_export]
macro_rules! conformance_tests {
    ($harness:expr) => {
        $crate::conformance_tests!(@tests $harness;
            point_ops, range_order_is_byte_order, reverse_ranges, bounds_and_limits,
            delete_range, snapshot_isolation, snapshot_isolation_under_concurrent_commits,
            predicates_are_the_atomicity_fence, versionstamps_order_commits, counters,
            durability_across_reopen, crash_contract, typed_errors, stats, model_check);
    };
    (@tests $harness:expr; $($name:ident),*) => {
        $(
            #[test]
            fn $name() {
                $crate::conformance::$name($harness);
            }
        )*
    };
}

fn specs() -> Vec<KeyspaceSpec> {
    vec![
        KeyspaceSpec::new("a", Profile::PointLookup),
        KeyspaceSpec::new("b", Profile::Queue),
    ]
}

fn ks<E: Engine>(e: &E, name: &str) -> Keyspace {
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
    let expected = scan(&snap, a, RangeSpec::all());
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

/// The crash contract, over many seeds: after a crash the state is the
/// state after some commit at or after the last one acknowledged durable.
pub fn crash_contract<H: Harness>(mut h: H) {
    for seed in 0..40u64 {
        let mut rng = SeededRng::new(seed);
        let e = h.open(&specs());
        let a = ks(&e, "a");
        // States after each commit, by version.
        let mut states: Vec<(u64, Vec<(Vec<u8>, Vec<u8>)>)> = vec![(0, Vec::new())];
        let mut last_durable = 0;
        for i in 0..(5 + rng.below(20)) {
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
            let info = e.commit(c).expect("commit");
            if info.durable {
                last_durable = info.version;
            }
            if rng.chance(0.1) {
                last_durable = e.sync().expect("sync");
            }
            states.push((info.version, all(&e, a)));
        }
        let Some(e) = h.crash(e, &mut rng) else {
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
    let forged = Keyspace::from_index(99);
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
            reason: MutationError::InvalidRange
        })
    ));
    assert_eq!(e.last_version(), v, "no failed commit took a version");
    assert_eq!(get(&e, a, b"k"), None);
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

/// One step of the model check.
#[derive(Debug, Clone)]
enum Step {
    Commit(Commit),
    Get(Keyspace, Vec<u8>),
    Range(Keyspace, RangeSpec),
}

fn step_strategy() -> impl Strategy<Value = Step> {
    let ks = prop_oneof![Just(Keyspace::from_index(0)), Just(Keyspace::from_index(1))];
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
    ]
}

/// Random sequences of commits (with predicates, counters, range deletes and
/// versionstamps) and reads give the same results on the engine as on the
/// [`Model`]; failed commits fail with the same error and change nothing.
pub fn model_check<H: Harness>(h: H) {
    let h = std::cell::RefCell::new(h);
    let mut runner = TestRunner::new(Config {
        cases: 64,
        failure_persistence: None,
        ..Config::default()
    });
    let result = runner.run(&prop::collection::vec(step_strategy(), 1..40), |steps| {
        let e = h.borrow_mut().open(&specs());
        let mut model = Model::new(2);
        for (i, step) in steps.iter().enumerate() {
            match step {
                Step::Commit(c) => {
                    let want = model.commit(c);
                    let got = e.commit(c.clone());
                    match (&want, &got) {
                        (Ok(_), Ok(_)) => {}
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
                        .get(*ks, key)
                        .map_err(|e| TestCaseError::fail(e.to_string()))?;
                    prop_assert_eq!(got.as_ref(), model.maps[ks.index()].get(key), "step {}", i);
                }
                Step::Range(ks, r) => {
                    let snap = e
                        .snapshot()
                        .map_err(|e| TestCaseError::fail(e.to_string()))?;
                    match snap.range(*ks, r.clone()) {
                        Ok(iter) => {
                            let got: Vec<_> = iter
                                .collect::<Result<_, _>>()
                                .map_err(|e| TestCaseError::fail(e.to_string()))?;
                            prop_assert_eq!(got, model.range(*ks, r), "step {}", i);
                        }
                        Err(ReadError::InvalidRange) => {
                            prop_assert!(r.validate().is_err(), "step {}", i);
                        }
                        Err(other) => prop_assert!(false, "step {}: {}", i, other),
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

/// The process-kill test, for engines that persist to files: this test
/// binary runs itself again as a child (the test named `test`, with
/// `STRATA_KILL_WRITER` set to the database path) that commits pairs of rows
/// to keyspaces `a` and `b` with `durability` and prints each
/// acknowledgement; the parent kills it with SIGKILL after a random number
/// of acknowledgements and a random pause, reopens with `open`, and checks
/// that every acknowledged commit is there, that none is there by half,
/// and that the version counts the commits. `rounds` kills, or
/// `STRATA_KILL_ROUNDS`.
///
/// Call it from a `#[test]` named `test` (its full path, as `--exact`
/// takes it): in the child the same call becomes the writer.
///
/// # Panics
/// On a broken promise, naming the round.
pub fn sigkill_rounds<E: Engine>(
    test: &str,
    durability: Durability,
    rounds: u64,
    open: impl Fn(&std::path::Path, Vec<KeyspaceSpec>) -> E,
) {
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};

    const WRITER: &str = "STRATA_KILL_WRITER";
    let specs = || {
        vec![
            KeyspaceSpec::new("a", Profile::General),
            KeyspaceSpec::new("b", Profile::AppendOnly),
        ]
    };
    if let Ok(path) = std::env::var(WRITER) {
        // The child: commit forever, printing each acknowledgement.
        let e = open(std::path::Path::new(&path), specs());
        let (a, b) = (e.keyspace("a").unwrap(), e.keyspace("b").unwrap());
        let start = e.last_version();
        for i in start + 1..start + 1_000_000 {
            let v = i.to_be_bytes().to_vec();
            let c = Commit::new()
                .put(a, v.clone(), vec![1; 700])
                .put(b, v, vec![2; 700])
                .durability(durability);
            e.commit(c).expect("child commit");
            println!("ack {i}");
        }
        return;
    }
    let rounds = std::env::var("STRATA_KILL_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(rounds);
    let dir = std::env::temp_dir().join(format!(
        "strata-kill-{}-{}",
        std::process::id(),
        test.replace(':', "_")
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("db");
    let mut rng = SeededRng::new(0x00C0_FFEE);
    let mut acked_total = 0;
    for round in 0..rounds {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args(["--exact", test, "--nocapture"])
            .env(WRITER, &path)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn writer");
        let wanted = 1 + rng.below(60);
        let mut acked: Vec<u64> = Vec::new();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let ack = |line: &str| {
            line.strip_prefix("ack ")
                .and_then(|n| n.parse::<u64>().ok())
        };
        while acked.len() < usize::try_from(wanted).unwrap() {
            let Some(Ok(line)) = lines.next() else { break };
            acked.extend(ack(&line));
        }
        // A random moment: right away, or after a short while of writing.
        std::thread::sleep(std::time::Duration::from_micros(rng.below(3_000)));
        child.kill().expect("SIGKILL");
        let _ = child.wait();
        // Acknowledgements printed before the kill count too.
        acked.extend(lines.map_while(Result::ok).filter_map(|l| ack(&l)));
        let e = open(&path, specs());
        let (a, b) = (e.keyspace("a").unwrap(), e.keyspace("b").unwrap());
        let snap = e.snapshot().unwrap();
        for i in &acked {
            let k = i.to_be_bytes();
            assert!(
                snap.get(a, &k).unwrap().is_some() && snap.get(b, &k).unwrap().is_some(),
                "round {round}: acknowledged commit {i} lost"
            );
        }
        let keys = |ks| -> Vec<Vec<u8>> {
            snap.range(ks, RangeSpec::all())
                .unwrap()
                .map(|r| r.unwrap().0)
                .collect()
        };
        let (ka, kb) = (keys(a), keys(b));
        assert_eq!(ka, kb, "round {round}: a commit is there by half");
        assert_eq!(
            e.last_version(),
            ka.len() as u64,
            "round {round}: versions count commits"
        );
        acked_total += acked.len();
    }
    let _ = std::fs::remove_dir_all(&dir);
    println!("{rounds} kills, {acked_total} acknowledged commits checked");
}
