//! Fixed vectors of envelope format 1. If one of these fails, the stored
//! format changed: every value already written would be misread.
//! Checksums were computed with an independent bitwise CRC-32 (IEEE,
//! reflected polynomial 0xEDB88320; the same values as Python's
//! `zlib.crc32`), itself checked here against the standard check value.

use serde::{Deserialize, Serialize};
use strata_codec::{Codec, EncodeOptions, FORMAT_V1, Header, decode, encode, value};

use crate::{hex, unhex};

#[derive(Debug, PartialEq, Serialize, Deserialize)]
struct User {
    id: u32,
    name: String,
    tags: Vec<u8>,
}
value!(User: postcard, version = 2);

#[derive(Debug, PartialEq, Serialize, Deserialize)]
struct Doc {
    a: u32,
}
value!(Doc: json, version = 1);

/// Bitwise CRC-32 (reflected polynomial 0xEDB88320), for cross-checking.
fn crc32_reference(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in data {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

fn enc<T: strata_codec::Value>(v: &T, key: &[u8], options: EncodeOptions) -> Vec<u8> {
    let mut out = Vec::new();
    encode(v, key, options, &mut out).expect("encodes");
    out
}

const PLAIN: EncodeOptions = EncodeOptions {
    checksum: false,
    expires_at: None,
};

#[test]
fn reference_crc_is_crc32() {
    assert_eq!(crc32_reference(b"123456789"), 0xCBF4_3926);
    assert_eq!(crc32fast::hash(b"123456789"), 0xCBF4_3926);
}

#[test]
fn raw_without_options() {
    let bytes = enc(&b"hi".to_vec(), b"k", PLAIN);
    assert_eq!(hex(&bytes), "e1 00 00 01 00 68 69");
    assert_eq!(FORMAT_V1, 0xE1);
    let text = enc(&"hi".to_owned(), b"k", PLAIN);
    assert_eq!(text, bytes, "raw text and raw bytes share the form");
}

#[test]
fn raw_with_checksum() {
    let bytes = enc(&b"hi".to_vec(), b"k", EncodeOptions::default());
    assert_eq!(hex(&bytes), "e1 00 00 01 02 6f 06 45 7f 68 69");
    let mut covered = b"k".to_vec();
    covered.extend_from_slice(&bytes[..5]);
    covered.extend_from_slice(b"hi");
    assert_eq!(crc32_reference(&covered), 0x6F06_457F);
}

#[test]
fn postcard_with_expiry_and_checksum() {
    let user = User {
        id: 300,
        name: "ada".into(),
        tags: vec![1, 2],
    };
    let options = EncodeOptions {
        checksum: true,
        expires_at: Some(1_730_000_000_000),
    };
    let bytes = enc(&user, b"user/1", options);
    assert_eq!(
        hex(&bytes),
        "e1 01 00 02 03 00 00 01 92 cc 09 14 00 ff cb 63 ba ac 02 03 61 64 61 02 01 02"
    );
    let header = Header::read(&bytes).unwrap();
    assert_eq!(
        (
            header.codec,
            header.version,
            header.expires_at,
            header.checksum,
            header.chunked,
            header.len
        ),
        (
            Codec::Postcard,
            2,
            Some(1_730_000_000_000),
            Some(0xFFCB_63BA),
            false,
            17
        )
    );
    assert_eq!(decode::<User>(b"user/1", &bytes).unwrap(), user);
    assert_eq!(
        decode::<User>(b"user/1", &unhex(&hex(&bytes))).unwrap().id,
        300
    );
}

#[test]
fn json_body_is_the_document() {
    let bytes = enc(&Doc { a: 1 }, b"d", PLAIN);
    assert_eq!(&bytes[..5], [0xE1, 2, 0, 1, 0]);
    assert_eq!(&bytes[5..], br#"{"a":1}"#);
}
