//! Subspaces and prefix ranges, including the `0xFF` case naive code gets
//! wrong.

use std::collections::BTreeMap;

use strata_keys::{Key, KeyError, KeyRange, Subspace, raw_key, strinc, tuple};

/// `[5] ++ u64_be(id)`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Message {
    pub id: u64,
}
/// `[4] ++ key`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct User {
    pub key: Vec<u8>,
}
raw_key! {
    Message -> Vec<u8> = ([5], {id});
    User -> Vec<u8> = ([4], ..{key});
}

#[test]
fn strinc_vectors() {
    assert_eq!(strinc(b""), None);
    assert_eq!(strinc(&[0xFF]), None);
    assert_eq!(strinc(&[0xFF, 0xFF]), None);
    assert_eq!(strinc(&[1, 2]), Some(vec![1, 3]));
    assert_eq!(strinc(&[1, 0xFF]), Some(vec![2]));
    assert_eq!(strinc(&[1, 0xFE, 0xFF, 0xFF]), Some(vec![1, 0xFF]));
    assert_eq!(strinc(&[0, 0xFF]), Some(vec![1]));
}

#[test]
fn keys_whose_next_byte_is_ff_are_inside_the_prefix_range() {
    let mut store = BTreeMap::new();
    let mut expected = Vec::new();
    for id in [0, 1, 0xFF, 0xFF00_0000_0000_0000, u64::MAX - 1, u64::MAX] {
        let k = Message { id }.pack().unwrap();
        expected.push(k.clone());
        store.insert(k, ());
    }
    for key in [vec![0xFF], vec![0xFF, 0xFF, 0xFF], vec![]] {
        store.insert(User { key }.pack().unwrap(), ());
    }
    store.insert(vec![6], ());
    store.insert(vec![4, 0xFF, 0xFF], ());

    let range = Subspace::from_bytes(vec![5]).range();
    assert_eq!(range.end.as_deref(), Some(&[6][..]));
    let found: Vec<Vec<u8>> = store
        .range(range.clone().into_bounds())
        .map(|(k, ())| k.clone())
        .collect();
    assert_eq!(found, expected);

    // The naive end bound `prefix ++ 0xFF` loses the ids starting with 0xFF.
    let naive_end = vec![5, 0xFF];
    let naive = store.range(vec![5]..naive_end).count();
    assert_eq!(
        naive, 3,
        "naive code misses the three ids whose first byte is 0xFF"
    );

    // A prefix that is itself all 0xFF has no upper bound.
    let users = Subspace::from_bytes(vec![4, 0xFF]).range();
    assert_eq!(users.end.as_deref(), Some(&[5][..]));
    let n = store.range(users.into_bounds()).count();
    assert_eq!(n, 3, "[4,FF], [4,FF,FF,FF] and [4,FF,FF]");
    let top = KeyRange::prefix(&[0xFF, 0xFF]);
    assert_eq!(top.end, None);
    assert!(top.contains(&[0xFF, 0xFF, 0xFF, 0xFF]));
    assert!(!top.contains(&[0xFF, 0xFE]));
}

#[test]
fn pack_and_unpack_relative_to_a_subspace() {
    let root = Subspace::new(&("app", 1_i64));
    let nested = root.subspace(&("users",));
    assert_eq!(nested.bytes(), tuple::pack(&("app", 1_i64, "users")));
    let key = nested.pack(&(42_i64, "name"));
    assert!(nested.contains(&key) && root.contains(&key));
    let (id, field): (i64, String) = nested.unpack(&key).unwrap();
    assert_eq!((id, field.as_str()), (42, "name"));

    let outside = Subspace::new(&("other",)).pack(&(1_i64,));
    assert!(matches!(
        nested.unpack::<(i64,)>(&outside),
        Err(KeyError::PrefixMismatch { prefix_len }) if prefix_len == nested.bytes().len()
    ));
    let bad: Result<(String,), _> = nested.unpack(&key);
    assert!(matches!(bad, Err(KeyError::Tuple { .. })));

    // Typed keys under a subspace, into a reused buffer.
    let mut buf = Vec::with_capacity(64);
    root.pack_key_into(&Message { id: 7 }, &mut buf).unwrap();
    let mut want = root.bytes().to_vec();
    want.extend([5, 0, 0, 0, 0, 0, 0, 0, 7]);
    assert_eq!(buf, want);
    assert_eq!(root.unpack_key::<Message>(&buf).unwrap(), Message { id: 7 });
    assert!(matches!(
        root.unpack_key::<Message>(&[9, 9]),
        Err(KeyError::PrefixMismatch { .. })
    ));
    assert_eq!(
        Subspace::all().range(),
        KeyRange {
            start: vec![],
            end: None
        }
    );
    assert_eq!(root.clone().into_bytes(), root.bytes());
}

#[test]
fn tuple_range_is_every_tuple_extension_and_nothing_else() {
    let s = Subspace::new(&("a",));
    let r = s.tuple_range();
    assert!(r.contains(s.bytes()), "the prefix key itself");
    assert!(r.contains(&s.pack(&(1_i64,))));
    assert!(r.contains(&s.pack(&(vec![0xFF_u8],))));
    assert!(!r.contains(&tuple::pack(&("a\0",))));
    assert!(!r.contains(&tuple::pack(&("b",))));
    let (lo, hi) = r.into_bounds();
    assert_eq!(lo, std::ops::Bound::Included(s.bytes().to_vec()));
    assert!(matches!(hi, std::ops::Bound::Excluded(ref e) if e.last() == Some(&0xFF)));
}
