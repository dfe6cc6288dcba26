//! Time-ordered identifiers (ULID): 48 bits of Unix milliseconds followed by
//! 80 bits of randomness, written as 26 characters of Crockford base32.
//!
//! Strata never reads the wall clock or a thread-local generator: the
//! [`UlidGenerator`] is handed the reading of the caller's injected clock and
//! a draw from its injected random source, so a simulation replays the same
//! ids from the same seed.

use std::fmt;
use std::str::FromStr;

use thiserror::Error;

/// Crockford's base32 alphabet: no I, L, O or U.
const ALPHABET: &[u8; 32] = b"0123456789ABCDEFGHJKMNPQRSTVWXYZ";
/// Largest timestamp a ULID can carry: 2^48 - 1 milliseconds.
pub const MAX_TIMESTAMP_MS: u64 = (1 << 48) - 1;
const RANDOM_BITS: u32 = 80;
const RANDOM_MASK: u128 = (1 << RANDOM_BITS) - 1;
/// Length of the text form.
pub const ULID_LEN: usize = 26;

/// A ULID. Ordering of values equals ordering of their text forms and of
/// their 16-byte big-endian forms: timestamp first, then the random part.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Ulid(u128);

/// Why a ULID could not be made or read.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum UlidError {
    /// The text is not 26 characters long.
    #[error("a ULID is 26 characters, got {len}")]
    Length {
        /// Length of the rejected text, in bytes.
        len: usize,
    },
    /// A character is not in the canonical (upper-case) Crockford alphabet.
    #[error("byte {byte:#04x} at offset {offset} is not an upper-case Crockford base32 digit")]
    Character {
        /// Offset of the offending byte.
        offset: usize,
        /// The byte itself.
        byte: u8,
    },
    /// The first character is above `7`: the value would not fit in 128 bits.
    #[error("ULID text overflows 128 bits (first character above '7')")]
    Overflow,
    /// The clock reading does not fit in the 48-bit timestamp.
    #[error("timestamp {ms} ms does not fit in 48 bits")]
    TimestampTooLarge {
        /// The rejected reading.
        ms: u64,
    },
    /// More ids were asked for within one millisecond than the 80-bit random
    /// part can count past its starting draw.
    #[error("monotonic ULID random part exhausted within one millisecond")]
    RandomExhausted,
}

impl Ulid {
    /// Builds a ULID from a timestamp and the low 80 bits of `random`.
    ///
    /// # Errors
    /// [`UlidError::TimestampTooLarge`] when `timestamp_ms` exceeds 48 bits.
    pub fn from_parts(timestamp_ms: u64, random: u128) -> Result<Self, UlidError> {
        if timestamp_ms > MAX_TIMESTAMP_MS {
            return Err(UlidError::TimestampTooLarge { ms: timestamp_ms });
        }
        Ok(Self(
            (u128::from(timestamp_ms) << RANDOM_BITS) | (random & RANDOM_MASK),
        ))
    }

    /// The id as one 128-bit number.
    pub const fn from_u128(value: u128) -> Self {
        Self(value)
    }

    /// The 128-bit value.
    pub const fn to_u128(self) -> u128 {
        self.0
    }

    /// The 16-byte big-endian form (sorts like the id).
    pub const fn to_bytes(self) -> [u8; 16] {
        self.0.to_be_bytes()
    }

    /// Reads the 16-byte big-endian form.
    pub const fn from_bytes(bytes: [u8; 16]) -> Self {
        Self(u128::from_be_bytes(bytes))
    }

    /// Milliseconds since the Unix epoch recorded in the id.
    pub const fn timestamp_ms(self) -> u64 {
        // The shift leaves 48 bits, which always fit.
        #[allow(clippy::cast_possible_truncation)]
        let ms = (self.0 >> RANDOM_BITS) as u64;
        ms
    }

    /// The 80-bit random part.
    pub const fn random(self) -> u128 {
        self.0 & RANDOM_MASK
    }

    /// The 26-character text form as ASCII bytes.
    pub fn to_text(self) -> [u8; ULID_LEN] {
        let mut text = [0u8; ULID_LEN];
        for (i, c) in text.iter_mut().enumerate() {
            let digit = (self.0 >> (5 * (ULID_LEN - 1 - i))) & 0x1f;
            *c = ALPHABET[digit as usize];
        }
        text
    }

    /// Parses the canonical text form: exactly 26 upper-case Crockford digits.
    /// Lower case and the look-alikes (`I`, `L`, `O`) are refused so that each
    /// id has one text form and keys built from it compare byte for byte.
    ///
    /// # Errors
    /// [`UlidError::Length`], [`UlidError::Character`] or [`UlidError::Overflow`].
    pub fn parse(text: &[u8]) -> Result<Self, UlidError> {
        if text.len() != ULID_LEN {
            return Err(UlidError::Length { len: text.len() });
        }
        let mut value: u128 = 0;
        for (offset, &byte) in text.iter().enumerate() {
            let digit = decode_digit(byte).ok_or(UlidError::Character { offset, byte })?;
            if offset == 0 && digit > 7 {
                return Err(UlidError::Overflow);
            }
            value = (value << 5) | u128::from(digit);
        }
        Ok(Self(value))
    }
}

/// Not a digit, in [`DIGITS`].
const NOT_A_DIGIT: u8 = u8::MAX;

/// Each byte's digit value, or [`NOT_A_DIGIT`]: built from [`ALPHABET`],
/// one lookup a character (a binary search in the alphabet was a fifth of
/// an agent-memory event's key).
const DIGITS: [u8; 256] = {
    let mut table = [NOT_A_DIGIT; 256];
    let mut i = 0;
    while i < ALPHABET.len() {
        // `i` < 32.
        #[allow(clippy::cast_possible_truncation)]
        {
            table[ALPHABET[i] as usize] = i as u8;
        }
        i += 1;
    }
    table
};

fn decode_digit(byte: u8) -> Option<u8> {
    let digit = DIGITS[usize::from(byte)];
    (digit != NOT_A_DIGIT).then_some(digit)
}

impl fmt::Display for Ulid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text = self.to_text();
        // The alphabet is ASCII, so the text is valid UTF-8.
        f.write_str(std::str::from_utf8(&text).map_err(|_| fmt::Error)?)
    }
}

impl fmt::Debug for Ulid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Ulid({self})")
    }
}

impl FromStr for Ulid {
    type Err = UlidError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s.as_bytes())
    }
}

/// Makes ULIDs that strictly increase, from readings of an injected clock.
///
/// Within one millisecond, and whenever the clock reads earlier than the
/// last id (a clock stepped back), the generator keeps the last timestamp and
/// adds one to the random part, so ids from one generator always increase.
/// The timestamp of such an id may therefore be later than the reading that
/// produced it, never earlier.
///
/// ```
/// use strata_keys::ulid::UlidGenerator;
///
/// let mut ids = UlidGenerator::new();
/// // In real code the reading is `clock.now_ms()` and the randomness comes
/// // from the injected `Rng` (which yields 64 bits a draw), for example
/// // `|| u128::from(rng.next_u64()) << 64 | u128::from(rng.next_u64())`.
/// let a = ids.generate(1_706_540_400_000, || 0xDEAD_BEEF).unwrap();
/// let b = ids.generate(1_706_540_400_000, || 0).unwrap(); // same millisecond
/// assert!(b > a);
/// assert_eq!(b.timestamp_ms(), 1_706_540_400_000);
/// assert_eq!(b.random(), a.random() + 1);
/// ```
#[derive(Debug, Default, Clone)]
pub struct UlidGenerator {
    last: Option<Ulid>,
}

impl UlidGenerator {
    /// A generator that has produced nothing yet.
    pub const fn new() -> Self {
        Self { last: None }
    }

    /// The next id for a clock reading of `now_ms`. `random` is called only
    /// when a new millisecond starts; its low 80 bits are used.
    ///
    /// # Errors
    /// [`UlidError::TimestampTooLarge`] for a reading beyond 48 bits, and
    /// [`UlidError::RandomExhausted`] when the random part of the current
    /// millisecond cannot be incremented further. On error the generator is
    /// unchanged.
    pub fn generate(
        &mut self,
        now_ms: u64,
        random: impl FnOnce() -> u128,
    ) -> Result<Ulid, UlidError> {
        if now_ms > MAX_TIMESTAMP_MS {
            return Err(UlidError::TimestampTooLarge { ms: now_ms });
        }
        let next = match self.last {
            Some(last) if now_ms <= last.timestamp_ms() => {
                if last.random() == RANDOM_MASK {
                    return Err(UlidError::RandomExhausted);
                }
                Ulid(last.0 + 1)
            }
            _ => Ulid::from_parts(now_ms, random())?,
        };
        self.last = Some(next);
        Ok(next)
    }

    /// The last id produced, if any.
    pub const fn last(&self) -> Option<Ulid> {
        self.last
    }
}
