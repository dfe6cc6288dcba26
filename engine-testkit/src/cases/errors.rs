//! Cases of typed errors, foreign handles and statistics.

#![allow(clippy::many_single_char_names, clippy::type_complexity)]

use super::{
    Commit, CommitError, Engine, EngineError, Harness, Mutation, MutationError, Predicate,
    PredicateError, RangeSpec, ReadError, Snapshot, Statistics, commit, get, ks, specs,
};

/// Undeclared keyspaces and bad ranges are typed errors everywhere.
pub fn typed_errors<H: Harness>(mut h: H) {
    let e = h.open(&specs());
    assert!(
        matches!(e.keyspace("nope"), Err(EngineError::UnknownKeyspaceName { name: n }) if n == "nope")
    );
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
    assert!(
        matches!(e.get_latest(theirs, b"k"), Err(ReadError::UnknownKeyspace(k)) if k == theirs)
    );
    assert!(matches!(
        e.commit(Commit::new().put(a, b"x".to_vec(), b"1".to_vec()).delete(theirs, b"k".to_vec())),
        Err(CommitError::UnknownKeyspace(k)) if k == theirs
    ));
    assert_eq!(get(&e, a, b"x"), None, "the refused commit wrote nothing");
    let shared = &e;
    assert_eq!(shared.keyspace("b").expect("b"), b, "&E shares the handles");
    commit(&shared, Commit::new().put(b, b"y".to_vec(), b"2".to_vec()));
    assert_eq!(
        get(&shared, b, b"y").as_deref(),
        Some(&b"2"[..]),
        "&E reads as E, on its own and in a snapshot"
    );
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
