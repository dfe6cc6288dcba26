//! Byte-exact vectors of the FoundationDB tuple encoding, one per element
//! type, written out from the tuple layer's specification (not produced by
//! the code under test), each packed and unpacked through the re-export.

use std::fmt::Debug;

use strata_keys::num_bigint::{BigInt, BigUint};
use strata_keys::tuple::{self, TuplePack, TupleUnpack, Uuid, Versionstamp};

use crate::{hex, unhex};

fn check<T>(value: T, expected: &str)
where
    T: TuplePack + for<'de> TupleUnpack<'de> + PartialEq + Debug,
{
    let want = unhex(expected);
    let got = tuple::pack(&value);
    assert_eq!(hex(&got), hex(&want), "packing {value:?}");
    let back: T = tuple::unpack(&want).expect("unpack of the vector");
    assert_eq!(back, value, "unpacking {expected}");
}

#[test]
fn null_and_bool() {
    check((None::<i64>,), "00");
    check((false,), "26");
    check((true,), "27");
}

#[test]
fn bytes_and_strings_escape_nul() {
    check((b"foo\x00bar".to_vec(),), "01 66 6f 6f 00 ff 62 61 72 00");
    check(
        ("F\u{d4}O\u{0}bar".to_owned(),),
        "02 46 c3 94 4f 00 ff 62 61 72 00",
    );
    check((String::new(),), "02 00");
}

#[test]
fn integers_of_every_width_and_sign() {
    check((0_i64,), "14");
    check((1_u16,), "15 01");
    check((-1_i32,), "13 fe");
    check((255_u32,), "15 ff");
    check((256_i64,), "16 01 00");
    check((-255_i64,), "13 00");
    check((-256_i64,), "12 fe ff");
    check((-5_551_212_i64,), "11 ab 4b 93");
    check((i64::MAX,), "1c 7f ff ff ff ff ff ff ff");
    check((u64::MAX,), "1c ff ff ff ff ff ff ff ff");
    check((i64::MIN,), "0c 7f ff ff ff ff ff ff ff");
    check((usize::MAX,), "1c ff ff ff ff ff ff ff ff");
}

#[test]
fn integers_beyond_64_bits() {
    // Positive: 0x1d, one length byte, the magnitude big-endian.
    check((1_u128 << 64,), "1d 09 01 00 00 00 00 00 00 00 00");
    check(
        (BigUint::from(1_u128 << 64),),
        "1d 09 01 00 00 00 00 00 00 00 00",
    );
    // Negative: 0x0b, the length byte's complement, the magnitude's complement.
    check((-(1_i128 << 64),), "0b f6 fe ff ff ff ff ff ff ff ff");
    check(
        (BigInt::from(-(1_i128 << 64)),),
        "0b f6 fe ff ff ff ff ff ff ff ff",
    );
    check(
        (u128::MAX,),
        "1d 10 ff ff ff ff ff ff ff ff ff ff ff ff ff ff ff ff",
    );
}

#[test]
fn floats_and_doubles() {
    check((42.0_f32,), "20 c2 28 00 00");
    check((-42.0_f32,), "20 3d d7 ff ff");
    check((42.0_f64,), "21 c0 45 00 00 00 00 00 00");
    check((-42.0_f64,), "21 3f ba ff ff ff ff ff ff");
}

#[test]
fn uuid() {
    let id = Uuid::from_u128(0x0011_2233_4455_6677_8899_aabb_ccdd_eeff);
    check((id,), "30 00 11 22 33 44 55 66 77 88 99 aa bb cc dd ee ff");
}

#[test]
fn nested_tuples_and_null_inside_them() {
    check(((1_i64, "a".to_owned()),), "05 15 01 02 61 00 00");
    // A null inside a nested tuple is 00 ff, so it is not read as the end.
    check(((None::<i64>,),), "05 00 ff 00");
    check(
        ((b"foo\x00bar".to_vec(), None::<i64>, ()),),
        "05 01 66 6f 6f 00 ff 62 61 72 00 00 ff 05 00 00",
    );
}

#[test]
fn versionstamps_complete_and_incomplete() {
    let tr = [0, 0, 0, 0, 0, 0, 0, 7, 0, 1];
    check(
        (Versionstamp::complete(tr, 3),),
        "33 00 00 00 00 00 00 00 07 00 01 00 03",
    );
    let incomplete = ("q", Versionstamp::incomplete(5));
    assert_eq!(
        hex(&tuple::pack(&incomplete)),
        "02 71 00 33 ff ff ff ff ff ff ff ff ff ff 00 05"
    );
    // The FoundationDB convention: the packed key followed by the 4-byte
    // little-endian offset of the 10-byte transaction version.
    assert_eq!(
        hex(&tuple::pack_with_versionstamp(&incomplete)),
        "02 71 00 33 ff ff ff ff ff ff ff ff ff ff 00 05 04 00 00 00"
    );
}
