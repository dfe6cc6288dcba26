//! The key macros are hygienic: layouts whose constants are named like
//! the items the macros used to declare inside (`NAME`, `PACKED`,
//! `CHUNKED`, `TAG`, `__STRATA_RAW`) and whose fields are named like every
//! local the generated code binds (`bytes`, `input`, `depth`, `name`,
//! `out`, `start`, `result`, `vs`, `gap`, `rest`, `item`, `encode`,
//! `expected`, `fixed`, `pos`, `i`, `write`) pack to the bytes
//! `tuple::pack` gives for the same elements, and unpack their own rows.

#![allow(clippy::struct_field_names)]

use strata_keys::{Key, raw_key, text_key, tuple, tuple_key, tuple_prefix};

const NAME: i64 = 71;
const PACKED: &str = "packed";
const CHUNKED: i64 = 73;
const TAG: u8 = 0x5A;
const __STRATA_RAW: i64 = 74;

#[derive(Debug, Clone, PartialEq)]
pub struct Locals {
    pub bytes: u64,
    pub input: String,
    pub depth: i64,
    pub name: String,
    pub out: u64,
    pub start: u64,
    pub result: u64,
    pub vs: u64,
    pub gap: u64,
    pub rest: u64,
    pub item: u64,
    pub encode: u64,
    pub expected: u64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ByName {
    pub name: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Spread {
    pub items: Vec<i64>,
}

tuple_key! {
    Locals -> () = (
        NAME, {bytes}, PACKED, {input}, CHUNKED, {depth}, __STRATA_RAW, {name},
        {out}, {start}, {result}, {vs}, {gap}, {rest}, {item}, {encode}, {expected}
    );
    ByName -> () = (NAME, PACKED, {name});
    Spread -> () = (NAME, ..{items});
}

#[derive(Debug, Clone, PartialEq)]
pub struct NamePrefix {
    pub input: Option<String>,
    pub depth: Option<i64>,
}

tuple_prefix! {
    NamePrefix = (NAME, PACKED, ?{input}, ?{depth});
}

fn locals() -> Locals {
    Locals {
        bytes: 1,
        input: "in".into(),
        depth: -2,
        name: "n".into(),
        out: 3,
        start: 4,
        result: 5,
        vs: 6,
        gap: 7,
        rest: 8,
        item: 9,
        encode: 10,
        expected: 11,
    }
}

#[test]
fn tuple_keys_pack_the_user_s_constants_and_read_their_own_rows() {
    let key = locals();
    let bytes = key.pack().unwrap();
    // Seventeen elements, packed as two flat runs (tuple::pack takes at
    // most twelve at once) put end to end.
    let flat = [
        tuple::pack(&(71_i64, 1_u64, "packed", "in", 73_i64, -2_i64, 74_i64, "n")),
        tuple::pack(&(
            3_u64, 4_u64, 5_u64, 6_u64, 7_u64, 8_u64, 9_u64, 10_u64, 11_u64,
        )),
    ]
    .concat();
    assert_eq!(bytes, flat);
    assert_eq!(Locals::unpack(&bytes).unwrap(), key);

    let by_name = ByName { name: "x".into() };
    let bytes = by_name.pack().unwrap();
    assert_eq!(bytes, tuple::pack(&(71_i64, "packed", "x")));
    assert_eq!(ByName::unpack(&bytes).unwrap(), by_name);
    // Another constant in the first place is refused, not misread.
    assert!(ByName::unpack(&tuple::pack(&(72_i64, "packed", "x"))).is_err());

    let spread = Spread {
        items: vec![1, -2, 3],
    };
    let bytes = spread.pack().unwrap();
    assert_eq!(bytes, tuple::pack(&(71_i64, 1_i64, -2_i64, 3_i64)));
    assert_eq!(Spread::unpack(&bytes).unwrap(), spread);
}

#[test]
fn tuple_prefixes_pack_the_user_s_constants() {
    let all = NamePrefix {
        input: None,
        depth: None,
    };
    assert_eq!(all.pack().unwrap(), tuple::pack(&(71_i64, "packed")));
    let some = NamePrefix {
        input: Some("in".into()),
        depth: Some(5),
    };
    assert_eq!(
        some.pack().unwrap(),
        tuple::pack(&(71_i64, "packed", "in", 5_i64))
    );
    assert!(
        all.range()
            .unwrap()
            .contains(&ByName { name: "z".into() }.pack().unwrap())
    );
}

#[derive(Debug, Clone, PartialEq)]
pub struct RawLocals {
    pub bytes: u32,
    pub fixed: u16,
    pub pos: u64,
    pub name: Vec<u8>,
}

raw_key! {
    RawLocals -> () = ([TAG, 0x01], {bytes}, {fixed}, {pos}, ..{name});
}

#[test]
fn raw_keys_with_fields_named_like_the_macro_s_locals_round_trip() {
    let key = RawLocals {
        bytes: 0x0102_0304,
        fixed: 0x0506,
        pos: 0x0708_090A_0B0C_0D0E,
        name: b"tail".to_vec(),
    };
    let packed = key.pack().unwrap();
    let mut want = vec![0x5A, 0x01, 1, 2, 3, 4, 5, 6];
    want.extend_from_slice(&[7, 8, 9, 0x0A, 0x0B, 0x0C, 0x0D, 0x0E]);
    want.extend_from_slice(b"tail");
    assert_eq!(packed, want);
    assert_eq!(RawLocals::unpack(&packed).unwrap(), key);
}

#[derive(Debug, Clone, PartialEq)]
pub struct TextLocals {
    pub name: String,
    pub pos: u64,
    pub i: String,
    pub write: u32,
}

text_key! {
    TextLocals -> () = ("t:", {name}, ":", {pos}, ":", {i}, ":", {write:04});
}

#[test]
fn text_keys_with_fields_named_like_the_macro_s_locals_round_trip() {
    let key = TextLocals {
        name: "n".into(),
        pos: 12,
        i: "x".into(),
        write: 7,
    };
    let packed = key.pack().unwrap();
    assert_eq!(packed, b"t:n:12:x:0007");
    assert_eq!(TextLocals::unpack(&packed).unwrap(), key);
}
