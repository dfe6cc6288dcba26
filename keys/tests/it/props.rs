//! Property tests of every encoding law: roundtrip, order preservation,
//! canonical form, and no panic on arbitrary or mutated bytes.

use std::cmp::Ordering;

use proptest::prelude::*;
use strata_keys::text::{Escaped, Spanning};
use strata_keys::tuple::{self, Uuid};
use strata_keys::{Key, KeyRange, Subspace, Ulid, UlidGenerator, raw_key, text_key, tuple_key};

/// Several element types behind a discriminant.
#[derive(Debug, Clone, PartialEq)]
pub struct Tk {
    pub a: i64,
    pub s: String,
    pub b: Vec<u8>,
    pub u: Uuid,
}
/// Wide integers.
#[derive(Debug, Clone, PartialEq)]
pub struct Wide {
    pub n: i128,
}
/// Floats roundtrip bit for bit.
#[derive(Debug, Clone, PartialEq)]
pub struct Fl {
    pub f: f64,
    pub g: f32,
}
tuple_key! {
    Tk -> () = (1, {a}, {s}, {b}, {u});
    Wide -> () = (2, {n});
    Fl -> () = (3, {f}, {g});
}

/// `[9, 1, tag, u32_be(chunk)]`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Chunk {
    pub tag: u8,
    pub chunk: u32,
}
/// `[5] ++ u64_be ++ tail`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Msg {
    pub id: u64,
    pub tail: Vec<u8>,
}
/// UTF-8 tail.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Conn {
    pub id: String,
}
raw_key! {
    Chunk -> () = ([9, 1], {tag}, {chunk});
    Msg -> () = ([5], {id}, ..{tail});
    Conn -> () = ([2], ..{id});
}

/// `evt:{ts:013}:{ulid}`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Evt {
    pub ts: u64,
    pub id: Ulid,
}
/// `outbox:{seq:020}`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Outbox {
    pub seq: u64,
}
/// Strict text fields and an unpadded number.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Txt {
    pub a: String,
    pub n: u32,
    pub b: String,
}
/// Escaped free text.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Esc {
    pub a: Escaped,
    pub b: Escaped,
}
/// Spanning text.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Span {
    pub a: Spanning,
    pub v: u16,
}
text_key! {
    Evt -> () = ("evt:", {ts:013}, ":", {id});
    Outbox -> () = ("outbox:", {seq:020});
    Txt -> () = ("t:", {a}, ":", {n}, ":", {b}, ":end");
    Esc -> () = ("e:", {a}, "/", {b});
    Span -> () = ("s:", {a}, ":v", {v:05});
}

fn uuid() -> impl Strategy<Value = Uuid> {
    any::<u128>().prop_map(Uuid::from_u128)
}

fn tk() -> impl Strategy<Value = Tk> {
    (
        any::<i64>(),
        ".{0,6}",
        proptest::collection::vec(any::<u8>(), 0..6),
        uuid(),
    )
        .prop_map(|(a, s, b, u)| Tk { a, s, b, u })
}

fn ulid() -> impl Strategy<Value = Ulid> {
    (0..=strata_keys::ulid::MAX_TIMESTAMP_MS, any::<u128>())
        .prop_map(|(t, r)| Ulid::from_parts(t, r).unwrap())
}

/// Checks that byte order of the encodings equals the given logical order.
fn same_order<K: Key>(x: &K, y: &K, logical: Ordering) -> Result<(), TestCaseError> {
    let (bx, by) = (x.pack().unwrap(), y.pack().unwrap());
    prop_assert_eq!(bx.cmp(&by), logical);
    Ok(())
}

/// Unpacking never panics; when it succeeds on raw and text layouts the
/// bytes are exactly what packing the result gives (one key, one encoding).
fn decodes_canonically<K: Key>(bytes: &[u8]) -> Result<(), TestCaseError> {
    if let Ok(k) = K::unpack(bytes) {
        prop_assert_eq!(k.pack().unwrap(), bytes);
    }
    Ok(())
}

fn mutations() -> impl Strategy<Value = (usize, u8, u8)> {
    (any::<usize>(), any::<u8>(), 0..3u8)
}

fn mutate(mut bytes: Vec<u8>, (at, byte, how): (usize, u8, u8)) -> Vec<u8> {
    let i = at % (bytes.len() + 1);
    match how {
        0 if i < bytes.len() => bytes[i] = byte,
        1 => bytes.insert(i, byte),
        _ if i < bytes.len() => {
            bytes.remove(i);
        }
        _ => bytes.push(byte),
    }
    bytes
}

proptest! {
    #![proptest_config(crate::proptest_cases::cases(256))]

    #[test]
    fn tuple_key_roundtrips_and_keeps_order(x in tk(), y in tk()) {
        let bytes = x.pack().unwrap();
        prop_assert_eq!(&bytes, &tuple::pack(&(1, x.a, &x.s, &x.b, x.u)));
        prop_assert_eq!(&Tk::unpack(&bytes).unwrap(), &x);
        let logical = (x.a, x.s.as_bytes(), &x.b, x.u).cmp(&(y.a, y.s.as_bytes(), &y.b, y.u));
        same_order(&x, &y, logical)?;
    }

    #[test]
    fn wide_integers_keep_order(x in any::<i128>(), y in any::<i128>()) {
        same_order(&Wide { n: x }, &Wide { n: y }, x.cmp(&y))?;
        prop_assert_eq!(Wide::unpack(&Wide { n: x }.pack().unwrap()).unwrap().n, x);
    }

    #[test]
    fn floats_roundtrip_bit_for_bit(f in any::<f64>(), g in any::<f32>()) {
        let back = Fl::unpack(&Fl { f, g }.pack().unwrap()).unwrap();
        prop_assert_eq!((back.f.to_bits(), back.g.to_bits()), (f.to_bits(), g.to_bits()));
    }

    #[test]
    fn raw_keys_roundtrip_and_keep_order(
        (t1, c1, t2, c2) in (any::<u8>(), any::<u32>(), any::<u8>(), any::<u32>()),
        (i1, tail1, i2, tail2) in (any::<u64>(), proptest::collection::vec(any::<u8>(), 0..5), any::<u64>(), proptest::collection::vec(any::<u8>(), 0..5)),
        id in ".{0,8}",
    ) {
        let (a, b) = (Chunk { tag: t1, chunk: c1 }, Chunk { tag: t2, chunk: c2 });
        prop_assert_eq!(Chunk::unpack(&a.pack().unwrap()).unwrap(), a.clone());
        same_order(&a, &b, (t1, c1).cmp(&(t2, c2)))?;
        let (m, n) = (Msg { id: i1, tail: tail1.clone() }, Msg { id: i2, tail: tail2.clone() });
        prop_assert_eq!(Msg::unpack(&m.pack().unwrap()).unwrap(), m.clone());
        same_order(&m, &n, (i1, &tail1).cmp(&(i2, &tail2)))?;
        let c = Conn { id };
        prop_assert_eq!(Conn::unpack(&c.pack().unwrap()).unwrap(), c);
    }

    #[test]
    fn padded_text_keys_roundtrip_and_keep_order(
        t1 in 0..10_000_000_000_000u64, t2 in 0..10_000_000_000_000u64, u1 in ulid(), u2 in ulid(),
        s1 in any::<u64>(), s2 in any::<u64>(),
    ) {
        let (a, b) = (Evt { ts: t1, id: u1 }, Evt { ts: t2, id: u2 });
        prop_assert_eq!(Evt::unpack(&a.pack().unwrap()).unwrap(), a.clone());
        same_order(&a, &b, (t1, u1).cmp(&(t2, u2)))?;
        same_order(&Outbox { seq: s1 }, &Outbox { seq: s2 }, s1.cmp(&s2))?;
    }

    #[test]
    fn strict_text_fields_roundtrip_or_refuse(a in ".{0,6}", n in any::<u32>(), b in ".{0,6}") {
        let key = Txt { a: a.clone(), n, b: b.clone() };
        match key.pack() {
            Ok(bytes) => prop_assert_eq!(Txt::unpack(&bytes).unwrap(), key),
            Err(_) => prop_assert!(a.contains(':') || b.contains(':')),
        }
    }

    #[test]
    fn escaped_text_always_roundtrips(a in ".{0,8}", b in "[:/%a-z]{0,8}") {
        let key = Esc { a: Escaped(a), b: Escaped(b) };
        let bytes = key.pack().unwrap();
        prop_assert_eq!(Esc::unpack(&bytes).unwrap(), key);
    }

    #[test]
    fn spanning_text_roundtrips_when_accepted(a in "[:va-c]{0,8}", v in any::<u16>()) {
        let key = Span { a: Spanning(a.clone()), v };
        match key.pack() {
            Ok(bytes) => prop_assert_eq!(Span::unpack(&bytes).unwrap(), key),
            Err(_) => prop_assert_ne!(format!("{a}:v").find(":v"), Some(a.len())),
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..40)) {
        let _ = Tk::unpack(&bytes);
        let _ = Wide::unpack(&bytes);
        let _ = Fl::unpack(&bytes);
        decodes_canonically::<Chunk>(&bytes)?;
        decodes_canonically::<Msg>(&bytes)?;
        decodes_canonically::<Conn>(&bytes)?;
        decodes_canonically::<Evt>(&bytes)?;
        decodes_canonically::<Outbox>(&bytes)?;
        decodes_canonically::<Txt>(&bytes)?;
        decodes_canonically::<Esc>(&bytes)?;
        decodes_canonically::<Span>(&bytes)?;
        let _ = Ulid::parse(&bytes);
        let _ = Subspace::from_bytes(vec![1]).unpack::<(i64, String)>(&bytes);
    }

    #[test]
    fn mutated_keys_never_panic(x in tk(), a in ".{0,4}", n in any::<u32>(), e in ".{0,4}", m in mutations()) {
        let _ = Tk::unpack(&mutate(x.pack().unwrap(), m));
        if let Ok(bytes) = (Txt { a, n, b: "z".into() }).pack() {
            decodes_canonically::<Txt>(&mutate(bytes, m))?;
        }
        let esc = Esc { a: Escaped(e), b: Escaped("/%".into()) }.pack().unwrap();
        decodes_canonically::<Esc>(&mutate(esc, m))?;
        let evt = Evt { ts: u64::from(n), id: Ulid::from_u128(u128::from(n)) }.pack().unwrap();
        decodes_canonically::<Evt>(&mutate(evt, m))?;
    }

    #[test]
    fn prefix_range_is_exactly_starts_with(
        prefix in proptest::collection::vec(prop_oneof![Just(0xFFu8), Just(0u8), any::<u8>()], 0..4),
        key in proptest::collection::vec(prop_oneof![Just(0xFFu8), Just(0u8), any::<u8>()], 0..6),
    ) {
        let range = KeyRange::prefix(&prefix);
        prop_assert_eq!(range.contains(&key), key.starts_with(&prefix));
        let mut extended = prefix.clone();
        extended.extend(&key);
        prop_assert!(range.contains(&extended));
    }

    #[test]
    fn tuple_range_is_exactly_tuple_extension(p in "[a\\x00]{0,3}", s in "[a\\x00]{0,3}", n in any::<i64>()) {
        let sub = Subspace::new(&(p.clone(),));
        prop_assert_eq!(sub.tuple_range().contains(&tuple::pack(&(s.clone(), n))), p == s);
    }

    #[test]
    fn ulid_text_roundtrips_and_keeps_order(a in any::<u128>(), b in any::<u128>()) {
        let (x, y) = (Ulid::from_u128(a), Ulid::from_u128(b));
        prop_assert_eq!(x.to_string().parse::<Ulid>().unwrap(), x);
        prop_assert_eq!(x.to_string().cmp(&y.to_string()), a.cmp(&b));
        prop_assert_eq!(x.to_bytes().cmp(&y.to_bytes()), a.cmp(&b));
    }

    #[test]
    fn generated_ulids_strictly_increase(steps in proptest::collection::vec((0..3u64, any::<bool>(), any::<u128>()), 1..50)) {
        let mut g = UlidGenerator::new();
        let mut clock = 1_000u64;
        let mut last: Option<Ulid> = None;
        for (dt, back, r) in steps {
            clock = if back { clock.saturating_sub(dt) } else { clock + dt };
            let id = g.generate(clock, || r).unwrap();
            if let Some(prev) = last {
                prop_assert!(id > prev);
                prop_assert!(id.timestamp_ms() >= prev.timestamp_ms());
            }
            prop_assert!(id.timestamp_ms() >= clock);
            last = Some(id);
        }
    }
}

/// Documents a limit of law 2 for tuple keys (see `Key`): the tuple layer
/// reads a non-minimal integer encoding (`15 00` for 0, minimal `14`) as its
/// value, so two byte strings can decode to one tuple key. Raw and text
/// layouts accept only their canonical form (`decodes_canonically`).
#[test]
fn tuple_layer_reads_non_minimal_integers() {
    assert_eq!(Wide::unpack(&[0x15, 2, 0x15, 0x00]).unwrap().n, 0);
    assert_eq!(Wide { n: 0 }.pack().unwrap(), [0x15, 2, 0x14]);
}
