//! Cases of point operations and ranges: gets and puts, byte order,
//! reverse ranges, bounds and limits, range deletes.

#![allow(clippy::many_single_char_names, clippy::type_complexity)]

use super::{
    Bound, Commit, Engine, Harness, Keyspace, Mutation, RangeSpec, all, commit, cursor_rows, get,
    ks, scan, specs,
};

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
                        // The lending cursor, stepped and in its own loop
                        // broken off on each row in turn.
                        for stop in 0..=want.len() {
                            let (stepped, looped) =
                                cursor_rows(&s, a, &spec, stop).expect("cursor");
                            let keys = |rows: Vec<(Vec<u8>, Vec<u8>)>| -> Vec<Vec<u8>> {
                                rows.into_iter().map(|(k, _)| k).collect()
                            };
                            assert_eq!(keys(stepped), want, "{spec:?}: stepped");
                            assert_eq!(keys(looped), want, "{spec:?}: looped, stop {stop}");
                        }
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
    // An open-ended delete in the commit that first writes keys beyond
    // every stored one removes them too (an engine bounding the delete by
    // the stored keys must count the commit's own puts before it), and a
    // put after it in the same commit stays.
    commit(&e, Commit::new().put(a, b"m".to_vec(), b"stored".to_vec()));
    commit(
        &e,
        Commit::new()
            .put(a, b"y".to_vec(), b"1".to_vec())
            .put(a, b"z".to_vec(), b"2".to_vec())
            .put(a, b"x".to_vec(), b"3".to_vec())
            .mutate(Mutation::DeleteRange {
                ks: a,
                range: RangeSpec {
                    start: Bound::Included(b"n".to_vec()),
                    end: Bound::Unbounded,
                    reverse: false,
                    limit: None,
                },
            })
            .put(a, b"zz".to_vec(), b"after".to_vec()),
    );
    assert_eq!(
        all(&e, a),
        [
            (b"m".to_vec(), b"stored".to_vec()),
            (b"zz".to_vec(), b"after".to_vec()),
        ]
    );
}
