//! Cases of versionstamps and counters.

#![allow(clippy::many_single_char_names, clippy::type_complexity)]

use super::{
    Commit, CommitError, Durability, Engine, Harness, Mutation, MutationError, RangeSpec, StampAt,
    all, commit, get, ks, scan, specs,
};

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
    commit(&e, Commit::new().mutate(add(b"w", -1)));
    assert_eq!(
        get(&e, a, b"w"),
        Some(i64::MAX.to_le_bytes().to_vec()),
        "wraps below"
    );
    // Negative counters: every byte of the stored value counts.
    commit(
        &e,
        Commit::new()
            .mutate(add(b"neg", -300))
            .mutate(add(b"neg", 44)),
    );
    assert_eq!(
        get(&e, a, b"neg"),
        Some(vec![0, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF]),
        "-256"
    );
    commit(
        &e,
        Commit::new().mutate(add(b"neg", 0x0102_0304_0506_0708 + 256)),
    );
    assert_eq!(
        get(&e, a, b"neg"),
        Some(vec![8, 7, 6, 5, 4, 3, 2, 1]),
        "little-endian"
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
