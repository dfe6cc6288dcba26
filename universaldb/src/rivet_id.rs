//! Rivet's `Id` (`engine/packages/util-id` in rivet-dev/rivet): version 1
//! is 16 bytes of UUID and a 2-byte big-endian label. As a tuple element
//! it is the user type code `0x40`, the version byte `1` and the 18 bytes;
//! as a value ([`Id::as_bytes`]) the version byte and the 18 bytes; as
//! text, 30 base-36 digits. Actor KV's `ActorId` (`strata-actor-kv`)
//! and UniversalDB's keys use it, so real keys pack with Rivet's bytes.
//!
//! ```
//! use strata_universaldb::rivet_id::Id;
//! use strata_keys::tuple;
//!
//! let id = Id::v1(0x0011_2233_4455_6677_8899_AABB_CCDD_EEFF, 0x0A0B);
//! let packed = tuple::pack(&(3_i64, id));
//! assert_eq!(packed[..3], [0x15, 0x03, 0x40]);
//! assert_eq!(packed.len(), 2 + 1 + 19);
//! let (n, back): (i64, Id) = tuple::unpack(&packed)?;
//! assert_eq!((n, back), (3, id));
//! assert_eq!(id.to_string().parse::<Id>()?, id);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::fmt;
use std::str::FromStr;

use strata_keys::tuple::{
    PackError, PackResult, TupleDepth, TuplePack, TupleUnpack, VersionstampOffset,
};

/// The tuple type code of an id (a FoundationDB user type code).
pub const ID_CODE: u8 = 0x40;
/// The only version there is.
const V1: u8 = 1;
/// Bytes of a version-1 id after its version byte.
const V1_LEN: usize = 18;
/// Base-36 digits of a version-1 id's text.
const TEXT_LEN: usize = 30;

/// Why bytes or text are not an id.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum IdError {
    /// No bytes, or under 4 characters of text.
    #[error("too short for an id")]
    TooShort,
    /// The version byte is not 1.
    #[error("unsupported id version {0}")]
    UnsupportedVersion(u8),
    /// The wrong number of bytes or characters for the version.
    #[error("an id of version 1 has {expected} bytes or characters, found {found}")]
    Length {
        /// What version 1 has.
        expected: usize,
        /// What was given.
        found: usize,
    },
    /// A character that is not a base-36 digit.
    #[error("{0:?} is not a base-36 digit")]
    Digit(char),
    /// Base-36 text whose number does not fit 19 bytes.
    #[error("the number does not fit an id")]
    Overflow,
}

/// An id of Rivet's engine (version 1: UUID and label).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Id([u8; V1_LEN]);

impl Id {
    /// The id with this UUID (a big-endian `u128`) and label.
    pub fn v1(uuid: u128, label: u16) -> Self {
        let mut b = [0; V1_LEN];
        b[..16].copy_from_slice(&uuid.to_be_bytes());
        b[16..].copy_from_slice(&label.to_be_bytes());
        Self(b)
    }

    /// The 18 bytes after the version byte: UUID then label.
    pub fn bytes(&self) -> [u8; V1_LEN] {
        self.0
    }

    /// The UUID part.
    pub fn uuid(&self) -> u128 {
        let mut b = [0; 16];
        b.copy_from_slice(&self.0[..16]);
        u128::from_be_bytes(b)
    }

    /// The label part.
    pub fn label(&self) -> u16 {
        u16::from_be_bytes([self.0[16], self.0[17]])
    }

    /// The value form: the version byte, then [`Id::bytes`] (19 bytes).
    pub fn as_bytes(&self) -> [u8; V1_LEN + 1] {
        let mut out = [0; V1_LEN + 1];
        out[0] = V1;
        out[1..].copy_from_slice(&self.0);
        out
    }

    /// The id whose value form is `bytes`.
    ///
    /// # Errors
    /// [`IdError`] for an empty slice, another version or another length.
    pub fn from_slice(bytes: &[u8]) -> Result<Self, IdError> {
        match bytes.split_first() {
            None => Err(IdError::TooShort),
            Some((&V1, rest)) => {
                let data: [u8; V1_LEN] = rest.try_into().map_err(|_| IdError::Length {
                    expected: V1_LEN + 1,
                    found: bytes.len(),
                })?;
                Ok(Self(data))
            }
            Some((&v, _)) => Err(IdError::UnsupportedVersion(v)),
        }
    }
}

impl fmt::Display for Id {
    /// 30 base-36 digits (`0-9a-z`) of the value form read as a
    /// little-endian number, least significant digit first.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut n = self.as_bytes();
        let mut text = [b'0'; TEXT_LEN];
        for slot in &mut text {
            // Divide the little-endian number by 36, most significant byte first.
            let mut rem = 0_u32;
            for byte in n.iter_mut().rev() {
                let cur = (rem << 8) | u32::from(*byte);
                *byte = u8::try_from(cur / 36).unwrap_or(u8::MAX);
                rem = cur % 36;
            }
            *slot = char::from_digit(rem, 36).map_or(b'0', |c| c as u8);
        }
        f.write_str(std::str::from_utf8(&text).map_err(|_| fmt::Error)?)
    }
}

impl fmt::Debug for Id {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Id({self})")
    }
}

impl FromStr for Id {
    type Err = IdError;

    /// Text as [`Display`](fmt::Display) writes it (either case).
    fn from_str(text: &str) -> Result<Self, IdError> {
        let digits: Vec<u32> = text
            .chars()
            .map(|c| c.to_digit(36).ok_or(IdError::Digit(c)))
            .collect::<Result<_, _>>()?;
        if digits.len() < 4 {
            return Err(IdError::TooShort);
        }
        // The version byte is the number modulo 256: its first 4 digits.
        let version = digits[..4].iter().rev().fold(0_u32, |acc, d| acc * 36 + d) % 256;
        if version != u32::from(V1) {
            return Err(IdError::UnsupportedVersion(
                u8::try_from(version).unwrap_or(0),
            ));
        }
        if digits.len() != TEXT_LEN {
            return Err(IdError::Length {
                expected: TEXT_LEN,
                found: digits.len(),
            });
        }
        let mut n = [0_u8; V1_LEN + 1];
        for &d in digits.iter().rev() {
            let mut carry = d;
            for byte in &mut n {
                let cur = u32::from(*byte) * 36 + carry;
                *byte = (cur & 0xFF) as u8;
                carry = cur >> 8;
            }
            if carry != 0 {
                return Err(IdError::Overflow);
            }
        }
        Self::from_slice(&n)
    }
}

impl TuplePack for Id {
    fn pack<W: std::io::Write>(
        &self,
        w: &mut W,
        _depth: TupleDepth,
    ) -> std::io::Result<VersionstampOffset> {
        w.write_all(&[ID_CODE])?;
        w.write_all(&self.as_bytes())?;
        Ok(VersionstampOffset::None { size: 1 + 19 })
    }
}

impl<'de> TupleUnpack<'de> for Id {
    fn unpack(input: &'de [u8], _depth: TupleDepth) -> PackResult<(&'de [u8], Self)> {
        let rest = match input.split_first() {
            Some((&ID_CODE, rest)) => rest,
            Some((&found, _)) => {
                return Err(PackError::BadCode {
                    found,
                    expected: Some(ID_CODE),
                });
            }
            None => return Err(PackError::MissingBytes),
        };
        let (value, rest) = rest
            .split_at_checked(V1_LEN + 1)
            .ok_or(PackError::MissingBytes)?;
        let id = Self::from_slice(value)
            .map_err(|e| PackError::Message(format!("bad id: {e}").into_boxed_str()))?;
        Ok((rest, id))
    }
}
