//! Byte-exact checks of the raw segment types (byte arrays, UUIDs, ULIDs,
//! packed tuple tails), text numbers at their edges, subspace membership
//! and versionstamp offsets. Written against mutation testing: each
//! expectation is spelled out by hand, not computed with the code under
//! test.

use strata_keys::raw::Packed;
use strata_keys::tuple::{Uuid, Versionstamp};
use strata_keys::{Key, KeyError, Subspace, Ulid, raw_key, text_key, tuple_key};

use crate::{hex, unhex};

/// `[0x51] ++ [u8; 3] ++ uuid ++ ulid ++ tuple tail`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Seg {
    pub tag: [u8; 3],
    pub id: Uuid,
    pub at: Ulid,
    pub tail: Packed<(u64, String)>,
}
raw_key! {
    Seg -> () = ([0x51], {tag}, {id}, {at}, ..{tail});
}

fn seg() -> Seg {
    Seg {
        tag: [0xA1, 0x00, 0xFF],
        id: Uuid::from_u128(0x0011_2233_4455_6677_8899_AABB_CCDD_EEFF),
        at: Ulid::from_bytes([
            0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0A, 0x0B, 0x0C, 0x0D, 0x0E,
            0x0F, 0x10,
        ]),
        tail: Packed((2, "x".to_owned())),
    }
}

#[test]
fn raw_segments_are_written_byte_for_byte() {
    let bytes = seg().pack().unwrap();
    let want = unhex(
        "51 a1 00 ff \
         00 11 22 33 44 55 66 77 88 99 aa bb cc dd ee ff \
         01 02 03 04 05 06 07 08 09 0a 0b 0c 0d 0e 0f 10 \
         15 02 02 78 00",
    );
    assert_eq!(hex(&bytes), hex(&want));
    assert_eq!(Seg::unpack(&bytes).unwrap(), seg());
    // The same bytes by the versionstamp-aware path, which finds none.
    let mut out = vec![0xEE];
    assert_eq!(seg().pack_into_versionstamped(&mut out).unwrap(), None);
    assert_eq!(hex(&out[1..]), hex(&want));
}

#[test]
fn raw_segments_read_back_what_the_bytes_say() {
    let mut bytes = seg().pack().unwrap();
    // Change one byte in each fixed segment and in the tail: the decoded
    // fields follow the bytes.
    bytes[3] = 0x7F; // tag[2]
    bytes[4] = 0x99; // uuid, first byte
    bytes[35] = 0x20; // ulid, last byte
    bytes[37] = 0x07; // tail integer
    let back = Seg::unpack(&bytes).unwrap();
    assert_eq!(back.tag, [0xA1, 0x00, 0x7F]);
    assert_eq!(
        back.id,
        Uuid::from_u128(0x9911_2233_4455_6677_8899_AABB_CCDD_EEFF)
    );
    assert_eq!(back.at.to_bytes()[15], 0x20);
    assert_eq!(back.at.to_bytes()[..15], seg().at.to_bytes()[..15]);
    assert_eq!(back.tail, Packed((7, "x".to_owned())));
    // Cut inside a fixed segment: an error, never a short field.
    for cut in [2, 10, 25] {
        assert!(
            matches!(Seg::unpack(&bytes[..cut]), Err(KeyError::Truncated { .. })),
            "cut at {cut}"
        );
    }
}

/// `n{v}` unpadded and `p{v:3}` padded.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Plain {
    pub v: u32,
}
/// Padded to three digits.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Padded {
    pub v: u32,
}
text_key! {
    Plain -> () = ("n", {v}, ";");
    Padded -> () = ("p", {v:3}, ";");
}

#[test]
fn text_numbers_at_their_edges() {
    // Zero, unpadded, is one digit, and reads back.
    assert_eq!(Plain { v: 0 }.pack().unwrap(), b"n0;");
    assert_eq!(Plain::unpack(b"n0;").unwrap(), Plain { v: 0 });
    assert_eq!(Plain::unpack(b"n10;").unwrap(), Plain { v: 10 });
    // A leading zero is not canonical without padding.
    assert!(Plain::unpack(b"n07;").is_err());
    assert!(Plain::unpack(b"n00;").is_err());
    // Padded: exactly the width, zeros in front.
    assert_eq!(Padded { v: 7 }.pack().unwrap(), b"p007;");
    assert_eq!(Padded { v: 999 }.pack().unwrap(), b"p999;");
    assert_eq!(Padded::unpack(b"p007;").unwrap(), Padded { v: 7 });
    assert!(Padded::unpack(b"p07;").is_err());
    assert!(Padded::unpack(b"p0007;").is_err());
    // Wider than the width: refused, nothing written.
    let mut out = b"keep".to_vec();
    assert!(Padded { v: 1000 }.pack_into(&mut out).is_err());
    assert_eq!(out, b"keep");
}

#[test]
fn a_subspace_contains_its_keys_only() {
    let s = Subspace::from_bytes(vec![0x15, 0x07]);
    assert!(s.contains(&[0x15, 0x07]));
    assert!(s.contains(&[0x15, 0x07, 0x00]));
    assert!(!s.contains(&[0x15, 0x08]));
    assert!(!s.contains(&[0x15]));
    assert!(!s.contains(&[]));
    assert!(Subspace::all().contains(&[]));
    assert!(Subspace::all().contains(&[0xFF]));
}

/// `("ev", stamp)`.
#[derive(Debug, Clone, PartialEq)]
pub struct Ev {
    pub stamp: Versionstamp,
}
tuple_key! {
    Ev -> () = ("ev", {stamp});
}

#[test]
fn an_incomplete_versionstamp_is_found_at_its_offset() {
    let mut out = vec![0xAA, 0xBB];
    let at = Ev {
        stamp: Versionstamp::incomplete(3),
    }
    .pack_into_versionstamped(&mut out)
    .unwrap();
    // Two bytes already there, then 02 'e' 'v' 00, then the code 0x33:
    // the 10-byte transaction version starts at 2 + 4 + 1.
    assert_eq!(at, Some(7));
    assert_eq!(
        hex(&out),
        hex(&unhex(
            "aa bb 02 65 76 00 33 ff ff ff ff ff ff ff ff ff ff 00 03"
        ))
    );
    // A complete one is not an offset to fill.
    let mut out = Vec::new();
    let at = Ev {
        stamp: Versionstamp::complete([1; 10], 3),
    }
    .pack_into_versionstamped(&mut out)
    .unwrap();
    assert_eq!(at, None);
}

/// `ev:{n:04}:{kind}` and a prefix whose last literal stops inside the key's.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Evt {
    pub n: u32,
    pub kind: String,
}
/// Every `Evt`: `"ev"`, a strict start of the key's first literal.
pub struct AllEvt;
text_key! {
    Evt -> () = ("ev:", {n:04}, ":", {kind});
}
strata_keys::text_prefix! {
    AllEvt of Evt = ("ev");
}

#[test]
fn a_prefix_may_stop_inside_the_keys_last_literal() {
    assert_eq!(AllEvt.pack().unwrap(), b"ev");
    let key = Evt {
        n: 12,
        kind: "a".into(),
    }
    .pack()
    .unwrap();
    assert_eq!(key, b"ev:0012:a");
    assert!(AllEvt.range().unwrap().contains(&key));
    assert!(!AllEvt.range().unwrap().contains(b"eu:0012:a"));
}

/// A user field type that claims a fixed width and writes another.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Liar(pub u8);

impl strata_keys::text::TextField for Liar {
    fn extent(_: &strata_keys::text::FieldContext) -> strata_keys::text::Extent {
        strata_keys::text::Extent::Fixed(4)
    }
    fn write_text(
        &self,
        out: &mut Vec<u8>,
        _: &strata_keys::text::FieldContext,
    ) -> Result<(), strata_keys::TextProblem> {
        // Three bytes where four were promised.
        out.extend_from_slice(&[b'0' + self.0 % 10; 3]);
        Ok(())
    }
    fn read_text(
        text: &[u8],
        _: &strata_keys::text::FieldContext,
    ) -> Result<Self, strata_keys::TextProblem> {
        Ok(Self(text.first().map_or(0, |b| b - b'0')))
    }
}

/// `l{v}!`, its field a [`Liar`].
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Lied {
    pub v: Liar,
}
text_key! {
    Lied -> () = ("l", {v}, "!");
}

#[test]
fn a_fixed_width_field_that_writes_another_width_is_refused() {
    let mut out = b"keep".to_vec();
    let err = Lied { v: Liar(3) }.pack_into(&mut out).unwrap_err();
    assert!(
        matches!(
            err,
            KeyError::TextField {
                problem: strata_keys::TextProblem::TooWide {
                    digits: 3,
                    width: 4
                },
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(out, b"keep", "nothing written");
}

#[test]
fn ulid_timestamps_stop_at_48_bits() {
    let max = (1u64 << 48) - 1;
    assert_eq!(strata_keys::ulid::MAX_TIMESTAMP_MS, max);
    let at_max = Ulid::from_parts(max, 5).unwrap();
    assert_eq!(at_max.timestamp_ms(), max);
    assert_eq!(at_max.random(), 5);
    assert!(Ulid::from_parts(max + 1, 5).is_err());
    // Timestamp and random part occupy their own bits.
    let all = Ulid::from_parts(max, u128::MAX).unwrap();
    assert_eq!(all.to_bytes(), [0xFF; 16]);
    let mut g = strata_keys::UlidGenerator::default();
    assert_eq!(g.generate(max, || 9).unwrap().timestamp_ms(), max);
    let mut g = strata_keys::UlidGenerator::default();
    assert!(g.generate(max + 1, || 9).is_err());
}
