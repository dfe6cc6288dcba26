//! Envelope behaviour: every error is typed and distinct, migrations,
//! expiry, and the checksum's coverage.

use serde::{Deserialize, Serialize, Serializer};
use strata_codec::{
    ChecksumCheck, Codec, DecodeError, DecodeOptions, EncodeError, EncodeOptions, Header, decode,
    decode_with, decode_with_header, encode, value, verify,
};

#[derive(Debug, PartialEq, Serialize, Deserialize)]
struct UserV0 {
    name: String,
}
#[derive(Debug, PartialEq, Serialize, Deserialize)]
struct UserV1 {
    name: String,
    age: u8,
}
#[derive(Debug, PartialEq, Serialize, Deserialize)]
struct User {
    name: String,
    age: u8,
    admin: bool,
}
impl From<UserV1> for User {
    fn from(old: UserV1) -> Self {
        Self {
            name: old.name,
            age: old.age,
            admin: false,
        }
    }
}
value!(UserV0: postcard, version = 0);
value!(UserV1: postcard, version = 1);
value!(User: postcard, version = 2, migrate { 1 => UserV1 });

/// Reads the same data as JSON.
#[derive(Debug, PartialEq, Serialize, Deserialize)]
struct UserJson {
    name: String,
    age: u8,
    admin: bool,
}
value!(UserJson: json, version = 2);

fn enc<T: strata_codec::Value>(v: &T, key: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    encode(v, key, EncodeOptions::default(), &mut out).unwrap();
    out
}

fn user() -> User {
    User {
        name: "ada".into(),
        age: 36,
        admin: true,
    }
}

#[test]
fn roundtrip_under_each_codec() {
    assert_eq!(decode::<User>(b"k", &enc(&user(), b"k")).unwrap(), user());
    let j = UserJson {
        name: "ada".into(),
        age: 36,
        admin: true,
    };
    assert_eq!(decode::<UserJson>(b"k", &enc(&j, b"k")).unwrap(), j);
    let raw = vec![0_u8, 0xFF, 7];
    assert_eq!(decode::<Vec<u8>>(b"k", &enc(&raw, b"k")).unwrap(), raw);
    assert_eq!(
        decode::<String>(b"k", &enc(&"é".to_owned(), b"k")).unwrap(),
        "é"
    );
}

#[test]
fn older_versions_migrate_and_unknown_ones_are_refused() {
    let old = enc(
        &UserV1 {
            name: "bo".into(),
            age: 7,
        },
        b"k",
    );
    assert_eq!(
        decode::<User>(b"k", &old).unwrap(),
        User {
            name: "bo".into(),
            age: 7,
            admin: false
        }
    );
    let older = enc(&UserV0 { name: "cy".into() }, b"k");
    assert!(matches!(
        decode::<User>(b"k", &older),
        Err(DecodeError::NoMigration {
            found: 0,
            current: 2
        })
    ));
    let newer = enc(&user(), b"k");
    assert!(matches!(
        decode::<UserV1>(b"k", &newer),
        Err(DecodeError::NewerVersion {
            found: 2,
            current: 1
        })
    ));
}

#[test]
fn each_malformed_input_has_its_own_error() {
    let good = enc(&user(), b"k");
    let with = |i: usize, b: u8| {
        let mut v = good.clone();
        v[i] = b;
        v
    };
    assert!(matches!(
        decode::<User>(b"k", &[]),
        Err(DecodeError::Truncated {
            needed: 5,
            available: 0
        })
    ));
    assert!(matches!(
        decode::<User>(b"k", &good[..4]),
        Err(DecodeError::Truncated {
            needed: 5,
            available: 4
        })
    ));
    assert!(matches!(
        decode::<User>(b"k", &good[..7]),
        Err(DecodeError::Truncated {
            needed: 9,
            available: 7
        })
    ));
    assert!(matches!(
        decode::<User>(b"k", &with(0, 0xE2)),
        Err(DecodeError::UnknownFormat { byte: 0xE2 })
    ));
    assert!(matches!(
        decode::<User>(b"k", &with(1, 9)),
        Err(DecodeError::UnknownCodec { id: 9 })
    ));
    assert!(matches!(
        decode::<User>(b"k", &with(4, 0b1_0010)),
        Err(DecodeError::UnknownFlags { flags: 0b1_0010 })
    ));
    // `keyless` without `checksum`.
    assert!(matches!(
        decode::<User>(b"k", &with(4, 0b1000)),
        Err(DecodeError::UnknownFlags { flags: 0b1000 })
    ));
    let last = good.len() - 1;
    assert!(matches!(
        decode::<User>(b"k", &with(last, good[last] ^ 1)),
        Err(DecodeError::ChecksumMismatch { .. })
    ));
    assert!(matches!(
        decode::<User>(b"other", &good),
        Err(DecodeError::ChecksumMismatch { .. })
    ));
    assert!(matches!(
        decode::<UserJson>(b"k", &good),
        Err(DecodeError::WrongCodec {
            expected: Codec::Json,
            found: Codec::Postcard
        })
    ));
    // Body errors, without a checksum so they reach the codec.
    let plain = EncodeOptions {
        checksum: false,
        expires_at: None,
    };
    let mut short = Vec::new();
    encode(&user(), b"k", plain, &mut short).unwrap();
    short.pop();
    assert!(matches!(
        decode::<User>(b"k", &short),
        Err(DecodeError::Postcard(_))
    ));
    let mut long = Vec::new();
    encode(&user(), b"k", plain, &mut long).unwrap();
    long.push(0);
    assert!(matches!(
        decode::<User>(b"k", &long),
        Err(DecodeError::TrailingBytes { count: 1 })
    ));
    let mut bad_json = Vec::new();
    encode(
        &UserJson {
            name: "x".into(),
            age: 1,
            admin: false,
        },
        b"k",
        plain,
        &mut bad_json,
    )
    .unwrap();
    bad_json.push(b'}');
    assert!(matches!(
        decode::<UserJson>(b"k", &bad_json),
        Err(DecodeError::Json(_))
    ));
    let mut not_utf8 = Vec::new();
    encode(&vec![0xC3_u8], b"k", plain, &mut not_utf8).unwrap();
    assert!(matches!(
        decode::<String>(b"k", &not_utf8),
        Err(DecodeError::Utf8 { valid_up_to: 0 })
    ));
    // Errors keep their source and say what happened.
    let err = decode::<User>(b"k", &short).unwrap_err();
    assert!(std::error::Error::source(&err).is_some());
    assert!(err.to_string().contains("postcard"), "{err}");
}

#[test]
fn a_required_checksum_catches_a_cleared_flag() {
    let mut bytes = enc(&vec![1_u8, 2, 3], b"k");
    // Clear the checksum flag: the 4 checksum bytes now read as body.
    bytes[4] &= !0b10;
    let lenient: Vec<u8> = decode(b"k", &bytes).unwrap();
    assert_eq!(
        lenient.len(),
        7,
        "without the requirement the flip goes unseen"
    );
    let strict = DecodeOptions::checksum(ChecksumCheck::Require);
    assert!(matches!(
        decode_with::<Vec<u8>>(b"k", &bytes, strict),
        Err(DecodeError::MissingChecksum)
    ));
    let good = enc(&vec![1_u8, 2, 3], b"k");
    assert_eq!(
        decode_with::<Vec<u8>>(b"k", &good, strict).unwrap().0,
        [1, 2, 3]
    );
}

#[test]
fn expiry_is_judged_against_the_reading_passed_in() {
    let options = EncodeOptions {
        checksum: true,
        expires_at: Some(1_000),
    };
    let mut bytes = Vec::new();
    encode(&user(), b"k", options, &mut bytes).unwrap();
    let (_, header) = decode_with_header::<User>(b"k", &bytes).unwrap();
    assert!(!header.is_expired(999));
    assert!(header.is_expired(1_000));
    assert!(header.is_expired(u64::MAX));
    let never = Header::read(&enc(&user(), b"k")).unwrap();
    assert!(!never.is_expired(u64::MAX));
    // The expiry is covered by the checksum.
    let mut moved = bytes.clone();
    moved[12] ^= 0x01;
    assert!(matches!(
        verify(b"k", &moved),
        Err(DecodeError::ChecksumMismatch { .. })
    ));
}

/// A value whose serialisation fails.
struct Unencodable;
impl Serialize for Unencodable {
    fn serialize<S: Serializer>(&self, _: S) -> Result<S::Ok, S::Error> {
        Err(serde::ser::Error::custom("refused"))
    }
}
impl<'de> Deserialize<'de> for Unencodable {
    fn deserialize<D: serde::Deserializer<'de>>(_: D) -> Result<Self, D::Error> {
        Ok(Self)
    }
}
value!(Unencodable: postcard, version = 1);

#[test]
fn a_failed_encode_leaves_the_buffer_unchanged() {
    let mut out = b"before".to_vec();
    let err = encode(&Unencodable, b"k", EncodeOptions::default(), &mut out).unwrap_err();
    assert!(matches!(err, EncodeError::Postcard(_)));
    assert_eq!(out, b"before");
}

#[test]
fn skipping_the_checksum_still_checks_the_header() {
    let good = enc(&vec![1_u8, 2, 3], b"k");
    let skip = DecodeOptions::checksum(ChecksumCheck::Skip);
    // Under another key: caught with the checksum, not without.
    assert!(matches!(
        decode_with::<Vec<u8>>(b"other", &good, DecodeOptions::default()),
        Err(DecodeError::ChecksumMismatch { .. })
    ));
    assert_eq!(
        decode_with::<Vec<u8>>(b"other", &good, skip).unwrap().0,
        [1, 2, 3]
    );
    let mut bad_format = good.clone();
    bad_format[0] = 0;
    assert!(matches!(
        decode_with::<Vec<u8>>(b"k", &bad_format, skip),
        Err(DecodeError::UnknownFormat { .. })
    ));
    assert!(matches!(
        decode_with::<Vec<u8>>(b"k", &good[..4], skip),
        Err(DecodeError::Truncated { .. })
    ));
}

/// A keyless checksum (a value under a versionstamped key): flag bits 1
/// and 3, a CRC-32 over the header and body only; it reads under any key,
/// and damage anywhere still fails.
#[test]
fn a_keyless_checksum_covers_header_and_body_only() {
    let mut bytes = Vec::new();
    strata_codec::encode_keyless(&b"event".to_vec(), None, &mut bytes).unwrap();
    // format, raw codec, version 1, flags checksum|keyless.
    assert_eq!(&bytes[..5], &[0xE1, 0, 0, 1, 0b1010]);
    let mut crc = crc32fast::Hasher::new();
    crc.update(&bytes[..5]);
    crc.update(b"event");
    assert_eq!(bytes[5..9], crc.finalize().to_be_bytes());
    assert_eq!(&bytes[9..], b"event");
    for key in [&b"a"[..], b"another key"] {
        assert_eq!(decode::<Vec<u8>>(key, &bytes).unwrap(), b"event");
    }
    for bit in 0..bytes.len() * 8 {
        let mut bad = bytes.clone();
        bad[bit / 8] ^= 1 << (bit % 8);
        assert!(
            decode::<Vec<u8>>(b"a", &bad).is_err(),
            "bit {bit} flipped still decodes"
        );
    }
}

/// Opening once and decoding from the owned envelope gives what `decode`
/// gives, for the raw types (which keep the buffer) and a postcard type
/// (the default path), and refuses what `decode` refuses.
#[test]
fn decoding_an_owned_envelope_matches_decoding_a_borrowed_one() {
    use strata_codec::{decode_opened, decode_opened_owned, open};
    let key = b"k";
    let options = DecodeOptions::checksum(ChecksumCheck::Require);
    // Raw bytes: the body is the bytes themselves.
    let bytes = vec![0u8, 1, 2, 0xFF, 7];
    let env = enc(&bytes, key);
    let (header, body) = open(key, &env, options).unwrap();
    assert_eq!(body, &bytes[..]);
    assert_eq!(decode_opened::<Vec<u8>>(header, body).unwrap(), bytes);
    assert_eq!(
        decode_opened_owned::<Vec<u8>>(header, env.clone()).unwrap(),
        bytes
    );
    // Text, and text that is not UTF-8 (the same error either way).
    let text = "grüße".to_owned();
    let env = enc(&text, key);
    let (header, _) = open(key, &env, options).unwrap();
    assert_eq!(decode_opened_owned::<String>(header, env).unwrap(), text);
    let not_text = enc(&vec![b'a', b'b', 0xC3], key);
    let (header, body) = open(key, &not_text, options).unwrap();
    assert!(matches!(
        decode_opened::<String>(header, body),
        Err(DecodeError::Utf8 { valid_up_to: 2 })
    ));
    assert!(matches!(
        decode_opened_owned::<String>(header, not_text),
        Err(DecodeError::Utf8 { valid_up_to: 2 })
    ));
    // A postcard value and the checks before the body.
    let env = enc(&user(), key);
    let (header, _) = open(key, &env, options).unwrap();
    assert_eq!(
        decode_opened_owned::<User>(header, env.clone()).unwrap(),
        user()
    );
    assert!(matches!(
        decode_opened_owned::<UserJson>(header, env.clone()),
        Err(DecodeError::WrongCodec { .. })
    ));
    assert!(matches!(
        decode_opened_owned::<UserV1>(header, env.clone()),
        Err(DecodeError::NewerVersion {
            found: 2,
            current: 1
        })
    ));
    assert!(matches!(
        decode_opened_owned::<Vec<u8>>(header, env),
        Err(DecodeError::WrongCodec { .. })
    ));
    // `open` checks the checksum against the key, and requires one.
    let env = enc(&bytes, key);
    assert!(matches!(
        open(b"other", &env, options),
        Err(DecodeError::ChecksumMismatch { .. })
    ));
    let mut bare = Vec::new();
    encode(
        &bytes,
        key,
        EncodeOptions {
            checksum: false,
            ..EncodeOptions::default()
        },
        &mut bare,
    )
    .unwrap();
    assert!(matches!(
        open(key, &bare, options),
        Err(DecodeError::MissingChecksum)
    ));
    assert!(open(key, &bare, DecodeOptions::default()).is_ok());
}

#[test]
fn raw_bodies_hint_their_length_and_serde_bodies_none() {
    use strata_codec::Value;
    assert_eq!(vec![7u8; 300].body_size_hint(), Some(300));
    assert_eq!(Vec::<u8>::new().body_size_hint(), Some(0));
    // Bytes, not characters.
    assert_eq!("h\u{e9}llo".to_string().body_size_hint(), Some(6));
    assert_eq!(user().body_size_hint(), None);
    // A body longer or shorter than the room reserved encodes the same.
    let mut grown = vec![1, 2, 3];
    strata_codec::encode(
        &vec![9u8; 1_000],
        b"k",
        strata_codec::EncodeOptions::default(),
        &mut grown,
    )
    .unwrap();
    assert_eq!(&grown[..3], &[1, 2, 3]);
    assert_eq!(grown[3..], enc(&vec![9u8; 1_000], b"k")[..]);
}

/// A header with an expiry and a checksum is 17 bytes: cut anywhere in
/// its optional fields, it is truncated (needing all 17), never misread;
/// whole, its fields read back.
#[test]
fn a_header_cut_in_its_expiry_or_checksum_is_truncated() {
    let mut whole = Vec::new();
    let options = EncodeOptions {
        checksum: true,
        expires_at: Some(0x0102_0304_0506_0708),
    };
    encode(&user(), b"k", options, &mut whole).unwrap();
    for cut in 5..17 {
        let err = Header::read(&whole[..cut]).unwrap_err();
        assert!(
            matches!(err, DecodeError::Truncated { needed: 17, available } if available == cut),
            "cut at {cut}: {err:?}"
        );
    }
    let header = Header::read(&whole[..17]).unwrap();
    assert_eq!(header.len, 17);
    assert_eq!(header.expires_at, Some(0x0102_0304_0506_0708));
    // The checksum is the four bytes after the expiry, big-endian.
    let stored = u32::from_be_bytes(whole[13..17].try_into().unwrap());
    assert_eq!(header.checksum, Some(stored));
    assert!(verify(b"k", &whole).is_ok());
}
