//! Bad input gets a typed error naming the key type and the byte, never a
//! panic and never a wrong value.

use std::error::Error as _;

use strata_keys::text::Spanning;
use strata_keys::tuple::Uuid;
use strata_keys::{Key, KeyError, TextProblem, raw_key, text_key, tuple_key};

/// `(1, id, name, 2)`.
#[derive(Debug, Clone, PartialEq)]
pub struct T {
    pub id: Uuid,
    pub name: String,
}
tuple_key! {
    T -> () = (1, {id}, {name}, 2);
}
/// `[7, 7] ++ u32 ++ u64 ++ utf8`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct R {
    pub a: u32,
    pub b: u64,
    pub rest: String,
}
raw_key! {
    R -> () = ([7, 7], {a}, {b}, ..{rest});
}
/// `k:{n:04}:{s}:end`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct X {
    pub n: u16,
    pub s: String,
}
/// A terminator that can overlap the field's end.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Overlap {
    pub s: Spanning,
    pub n: u8,
}
/// Two fields with no literal between: refused at the first write.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Unterminated {
    pub s: String,
    pub n: u8,
}
text_key! {
    X -> () = ("k:", {n:04}, ":", {s}, ":end");
    Overlap -> () = ("o", {s}, "-x-", {n});
    Unterminated -> () = ("u", {s}, {n:3});
}

fn t() -> Vec<u8> {
    T {
        id: Uuid::from_u128(5),
        name: "abc".into(),
    }
    .pack()
    .unwrap()
}

#[test]
fn every_truncation_of_a_tuple_key_is_a_typed_error() {
    let full = t();
    for n in 0..full.len() {
        match T::unpack(&full[..n]) {
            Err(KeyError::Truncated { key: "T", .. } | KeyError::Tuple { key: "T", .. }) => {}
            other => panic!("prefix of {n} bytes: {other:?}"),
        }
    }
    let mut long = full.clone();
    long.extend([0x14, 0x14]);
    assert!(
        matches!(T::unpack(&long), Err(KeyError::TrailingBytes { key: "T", count: 2, offset }) if offset == full.len())
    );
}

#[test]
fn tuple_errors_keep_their_source() {
    let mut bad = t();
    bad[2] = 0x02; // the UUID's type code becomes a string's
    let err = T::unpack(&bad).unwrap_err();
    assert!(matches!(err, KeyError::Tuple { offset: 2, .. }), "{err:?}");
    assert!(
        err.source().is_some(),
        "the tuple layer's error is the source"
    );
    assert!(err.to_string().contains("byte 2"), "{err}");
    let mut other = t();
    *other.last_mut().unwrap() = 0x17; // discriminant 2 -> 3
    assert!(matches!(
        T::unpack(&other),
        Err(KeyError::Discriminant { key: "T", .. })
    ));
    let mut first = t();
    first[1] = 9;
    assert!(matches!(
        T::unpack(&first),
        Err(KeyError::Discriminant { offset: 0, .. })
    ));
}

#[test]
fn raw_key_errors() {
    let full = R {
        a: 1,
        b: 2,
        rest: "zé".into(),
    }
    .pack()
    .unwrap();
    assert_eq!(full.len(), 2 + 4 + 8 + 3);
    assert!(matches!(
        R::unpack(&[7]),
        Err(KeyError::Truncated { needed: 1, .. })
    ));
    assert!(matches!(
        R::unpack(&[7, 7, 0, 0]),
        Err(KeyError::Truncated {
            offset: 4,
            needed: 10,
            ..
        })
    ));
    assert!(matches!(
        R::unpack(&full[..10]),
        Err(KeyError::Truncated { needed: 4, .. })
    ));
    assert!(matches!(
        R::unpack(&[7, 8, 0]),
        Err(KeyError::Discriminant { offset: 0, .. })
    ));
    let mut bad_utf8 = full.clone();
    bad_utf8.truncate(full.len() - 1); // cut the two-byte 'é' in half
    assert!(matches!(
        R::unpack(&bad_utf8),
        Err(KeyError::Utf8 { offset: 15, .. })
    ));
    assert_eq!(R::unpack(&full).unwrap().rest, "zé");
    assert_eq!(R::TAG, [7, 7]);
}

#[test]
fn text_key_errors() {
    let ok = X {
        n: 7,
        s: "hi".into(),
    };
    assert_eq!(ok.pack().unwrap(), b"k:0007:hi:end");
    let cases: [(&[u8], fn(&KeyError) -> bool); 8] = [
        (b"k:0007:hi:en", |e| matches!(e, KeyError::Truncated { .. })),
        (b"k:0007:hi:end!", |e| {
            matches!(e, KeyError::TrailingBytes { count: 1, .. })
        }),
        (b"q:0007:hi:end", |e| {
            matches!(e, KeyError::Discriminant { offset: 0, .. })
        }),
        (b"k:07:hi:end", |e| {
            matches!(
                e,
                KeyError::TextField {
                    field: "n",
                    problem: TextProblem::BadNumber,
                    ..
                }
            )
        }),
        (b"k:00a7:hi:end", |e| {
            matches!(
                e,
                KeyError::TextField {
                    field: "n",
                    problem: TextProblem::BadNumber,
                    ..
                }
            )
        }),
        (b"k:0007:hi:and", |e| {
            matches!(e, KeyError::Discriminant { offset: 9, .. })
        }),
        (b"k:0007:h\xffi:end", |e| {
            matches!(
                e,
                KeyError::TextField {
                    field: "s",
                    problem: TextProblem::NotUtf8,
                    ..
                }
            )
        }),
        (b"k:", |e| {
            matches!(e, KeyError::Truncated { needed: 4, .. })
        }),
    ];
    for (input, expected) in cases {
        let err = X::unpack(input).expect_err("bad input");
        assert!(
            expected(&err),
            "{}: {err:?}",
            String::from_utf8_lossy(input)
        );
    }
    // u16 out of range in a 5-digit field.
    /// `w{n:05}`.
    #[allow(clippy::items_after_statements)]
    #[derive(Debug, Clone, PartialEq, Eq, Hash)]
    pub struct W {
        pub n: u16,
    }
    text_key! {
        W -> () = ("w", {n:05});
    }
    assert!(matches!(
        W::unpack(b"w70000"),
        Err(KeyError::TextField {
            problem: TextProblem::OutOfRange,
            ..
        })
    ));
    assert_eq!(W::unpack(b"w65535").unwrap().n, u16::MAX);
}

#[test]
fn text_writes_that_would_be_ambiguous_are_refused_and_leave_the_buffer() {
    let mut buf = b"xyz".to_vec();
    let bad = X {
        n: 1,
        s: "a:b".into(),
    };
    assert!(matches!(
        bad.pack_into(&mut buf),
        Err(KeyError::TextField {
            field: "s",
            problem: TextProblem::ContainsDelimiter { byte: b':' },
            ..
        })
    ));
    assert_eq!(buf, b"xyz");
    // The field "a-x" followed by "-x-" reads "a-x-x-": the terminator would
    // be found one byte early, so it is refused.
    assert!(matches!(
        Overlap {
            s: Spanning("a-x".into()),
            n: 1
        }
        .pack(),
        Err(KeyError::TextField {
            problem: TextProblem::ContainsTerminator { terminator: "-x-" },
            ..
        })
    ));
    let fine = Overlap {
        s: Spanning("a-".into()),
        n: 1,
    };
    assert_eq!(Overlap::unpack(&fine.pack().unwrap()).unwrap(), fine);
    assert!(matches!(
        Unterminated {
            s: "a".into(),
            n: 1
        }
        .pack(),
        Err(KeyError::TextField {
            field: "s",
            problem: TextProblem::Unterminated,
            ..
        })
    ));
    let too_wide = X {
        n: 10_000,
        s: String::new(),
    };
    assert!(matches!(
        too_wide.pack(),
        Err(KeyError::TextField {
            problem: TextProblem::TooWide {
                digits: 5,
                width: 4
            },
            ..
        })
    ));
}

/// `-> chunked Value` marks a key type whose values a store chunks, in
/// every macro; without it a key type is not chunked.
#[test]
fn chunked_is_declared_with_the_key() {
    use strata_keys::{raw_key, text_key, tuple_key};

    #[derive(Debug, Clone, PartialEq)]
    struct BigT {
        id: u64,
    }
    #[derive(Debug, Clone, PartialEq)]
    struct SmallT {
        id: u64,
    }
    tuple_key! {
        BigT -> chunked Vec<u8> = ("big", {id});
        SmallT -> Vec<u8> = ("small", {id});
    }
    #[derive(Debug, Clone, PartialEq)]
    struct BigR {
        id: u64,
    }
    #[derive(Debug, Clone, PartialEq)]
    struct SmallR {
        id: u64,
    }
    raw_key! {
        BigR -> chunked Vec<u8> = ([1], {id});
        SmallR -> Vec<u8> = ([2], {id});
    }
    #[derive(Debug, Clone, PartialEq)]
    struct BigX {
        id: u64,
    }
    #[derive(Debug, Clone, PartialEq)]
    struct SmallX {
        id: u64,
    }
    text_key! {
        BigX -> chunked Vec<u8> = ("big:", {id:08});
        SmallX -> Vec<u8> = ("small:", {id:08});
    }
    fn chunked<K: Key>() -> bool {
        K::CHUNKED
    }
    assert_eq!(
        [chunked::<BigT>(), chunked::<BigR>(), chunked::<BigX>()],
        [true; 3]
    );
    assert_eq!(
        [
            chunked::<SmallT>(),
            chunked::<SmallR>(),
            chunked::<SmallX>()
        ],
        [false; 3]
    );
    // The marker does not change the bytes.
    assert_eq!(
        BigR { id: 3 }.pack().unwrap()[1..],
        SmallR { id: 3 }.pack().unwrap()[1..]
    );
}

/// A key of tuples nested thousands deep (damaged, or made to crash a
/// reader) is shown as bytes and refused by `unpack_bounded`, on a thread
/// with a 256 KiB stack where unpacking it would overflow; at the bound
/// it still unpacks and shows as a tuple.
#[test]
fn deeply_nested_keys_are_bounded_not_a_stack_overflow() {
    use strata_keys::show::show_key;
    use strata_keys::tuple::{Element, MAX_TUPLE_DEPTH, unpack_bounded};
    let nested = |n: usize| [vec![0x05; n], vec![0x00; n]].concat();
    std::thread::Builder::new()
        .stack_size(256 << 10)
        .spawn(move || {
            let deep = nested(50_000);
            assert!(unpack_bounded::<Vec<Element<'_>>>(&deep).is_err());
            let shown = show_key(&deep);
            assert!(shown.starts_with(r#"b"\x05\x05"#), "{}", &shown[..20]);
            // Just past the bound: refused, though it would unpack.
            assert!(unpack_bounded::<Vec<Element<'_>>>(&nested(MAX_TUPLE_DEPTH + 1)).is_err());
        })
        .unwrap()
        .join()
        .unwrap();
    // The depth is read as the tuple layer reads elements: `0x05` and
    // `0x00` bytes inside strings, bytes and integers, nils inside nested
    // tuples (`00 FF`), floats, UUIDs and long integers are no nesting.
    let payload = [0x05u8, 0x00, 0x05, 0xFF, 0x05];
    let shallow = strata_keys::tuple::pack(&(
        "doc\u{5}\u{0}",
        strata_keys::tuple::Bytes::from(payload.repeat(400)),
        (
            Option::<i64>::None,
            5i64,
            -5i64,
            0x0505_0505_0505i64,
            -0x0505_0505_0505i64,
        ),
        ((
            1.5f32,
            2.5f64,
            true,
            strata_keys::tuple::Uuid::from_bytes([5; 16]),
        ),),
        u64::MAX,
    ));
    assert_eq!(
        unpack_bounded::<Vec<Element<'_>>>(&shallow).unwrap(),
        strata_keys::tuple::unpack::<Vec<Element<'_>>>(&shallow).unwrap()
    );
    // The same elements (two levels deep themselves) inside tuples nested
    // to one past the bound: refused; one level less: unpacked.
    let mut deep = vec![0x05u8; MAX_TUPLE_DEPTH - 1];
    deep.extend_from_slice(&shallow);
    deep.extend(vec![0x00u8; MAX_TUPLE_DEPTH - 1]);
    assert!(unpack_bounded::<Vec<Element<'_>>>(&deep).is_err());
    deep.remove(0);
    deep.pop();
    assert!(
        unpack_bounded::<Vec<Element<'_>>>(&deep).is_ok(),
        "at the bound"
    );
    // After an element of every kind, nesting past the bound is still
    // found: the depth is read through each element, not stopped at it.
    let past = nested(MAX_TUPLE_DEPTH + 1);
    let heads: Vec<Vec<u8>> = vec![
        vec![0x00],
        vec![0x26],
        vec![0x27],
        vec![0x14],
        // Floats, and the integers below, whose last byte is no type code:
        // read through whole, not from inside.
        strata_keys::tuple::pack(&(f32::from_bits(0x3F80_0040),)),
        strata_keys::tuple::pack(&(f64::from_bits(0x3FF0_0000_0000_0040),)),
        strata_keys::tuple::pack(&(strata_keys::tuple::Uuid::from_bytes([
            5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 0x40,
        ]),)),
        strata_keys::tuple::pack(&(strata_keys::tuple::Versionstamp::complete([5; 10], 0x40),)),
        vec![0x1D, 0x02, 0x05, 0x40],
        vec![0x0B, 0xFD, 0x05, 0x40],
        strata_keys::tuple::pack(&(5i64, -5i64)),
        strata_keys::tuple::pack(&(0x01FF_FFFF_FFFF_FFFFu64,)),
        strata_keys::tuple::pack(&(-0x0101_0101_0101_01BFi64,)),
        strata_keys::tuple::pack(&("s\u{5}\u{0}",)),
        vec![0x05, 0x00, 0xFF, 0x05, 0x00, 0x00],
    ];
    for head in heads {
        let bytes = [head.clone(), past.clone()].concat();
        assert!(
            strata_keys::tuple::unpack::<Vec<Element<'_>>>(&bytes).is_ok(),
            "{head:02x?} is a tuple"
        );
        assert!(
            unpack_bounded::<Vec<Element<'_>>>(&bytes).is_err(),
            "{head:02x?} then nesting past the bound"
        );
    }
    // At the bound: a tuple (on a stack of the usual size).
    let at = nested(MAX_TUPLE_DEPTH);
    assert!(unpack_bounded::<Vec<Element<'_>>>(&at).is_ok());
    let shown = show_key(&at);
    assert!(shown.starts_with("((("), "{}", &shown[..20]);
}

/// `split_prefix` finds the first elements of a key by their extents, at
/// any depth: the split falls where the tuple layer's own packing of the
/// elements one by one says it does, and bytes that end inside an element
/// (or hold fewer elements) give none.
#[test]
fn split_prefix_splits_where_the_elements_were_packed() {
    use strata_keys::tuple::{self, Bytes, Uuid, Versionstamp, nests_deeper_than, split_prefix};
    let nested = |n: usize| [vec![0x05; n], vec![0x00; n]].concat();
    // Each element packed on its own by the tuple layer.
    let elements: Vec<Vec<u8>> = vec![
        tuple::pack(&("actor",)),
        tuple::pack(&(7i64,)),
        tuple::pack(&(-0x0505_0505i64,)),
        tuple::pack(&(u64::MAX,)),
        tuple::pack(&(Bytes::from(vec![5u8, 1, 2]),)),
        tuple::pack(&((1i64, (2i64, "x")),)),
        tuple::pack(&(1.5f64,)),
        tuple::pack(&(2.5f32,)),
        tuple::pack(&(true,)),
        tuple::pack(&(Uuid::from_bytes([5; 16]),)),
        tuple::pack(&(Versionstamp::complete([5; 10], 3),)),
        nested(3),
    ];
    let key = elements.concat();
    let mut boundary = 0;
    for (n, element) in elements.iter().enumerate() {
        let (head, rest) = split_prefix(&key, n).unwrap();
        assert_eq!(
            (head.len(), rest.len()),
            (boundary, key.len() - boundary),
            "{n}"
        );
        assert_eq!(head, &key[..boundary]);
        // Cut anywhere inside this element: bytes that end inside one
        // element are no tuple (no element here holds a `00` that could
        // end it early).
        for cut in boundary + 1..boundary + element.len() {
            assert_eq!(split_prefix(&key[..cut], 0), None, "cut at {cut}");
        }
        boundary += element.len();
    }
    assert_eq!(
        split_prefix(&key, elements.len()),
        Some((&key[..], &[][..]))
    );
    assert_eq!(split_prefix(&key, elements.len() + 1), None);
    // A code that starts no element.
    assert_eq!(split_prefix(&[key.clone(), vec![0x99]].concat(), 1), None);
    // Nested far past what can be unpacked: the head is still found.
    let head = tuple::pack(&("actor", 7i64));
    let deep = [head.clone(), nested(5_000), tuple::pack(&("name",))].concat();
    assert!(nests_deeper_than(&deep, 4_999) && !nests_deeper_than(&deep, 5_000));
    assert_eq!(split_prefix(&deep, 2).unwrap().0, &head[..]);
    assert_eq!(
        split_prefix(&deep, 3).unwrap().1,
        &tuple::pack(&("name",))[..]
    );
    assert_eq!(split_prefix(&deep, 5), None);
    // A tuple left open is no tuple, however deep.
    assert_eq!(split_prefix(&deep[..deep.len() - 7], 1), None);
}
