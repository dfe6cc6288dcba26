//! Typed keys for ordered key-value stores.
//!
//! `strata-keys` turns key types into bytes whose order is the order you
//! want, and back, refusing bytes that belong to another key type. It does no
//! I/O. Three layouts share one [`Key`] trait:
//!
//! - **Tuple keys** ([`tuple_key!`]) on the FoundationDB tuple layer,
//!   re-exported as [`mod@tuple`]: byte-identical to every official binding.
//!   Constant elements act as discriminants and are checked on read.
//! - **Raw byte keys** ([`raw_key!`]): a tag of fixed bytes, fixed-width
//!   big-endian segments, and an optional tail (bytes, UTF-8, or a tuple).
//! - **Delimited text keys** ([`text_key!`]): `evt:{ts:013}:{ulid}` and the
//!   like, with zero-padded numbers and a stated rule for delimiters inside
//!   free text (see [`text`]).
//!
//! Around them: [`Subspace`] and [`KeyRange`] (prefix ranges by the
//! FoundationDB `strinc` rule, correct when the next byte is `0xFF`), and
//! [`ulid`] (time-ordered ids from an injected clock and random source).
//!
//! ```
//! use strata_keys::{tuple_key, Key, Subspace};
//!
//! const ACTOR: i64 = 1;
//! const DATA: i64 = 2;
//! const SCORE: i64 = 7;
//!
//! /// `(ACTOR, DATA, actor_id, SCORE)` → the actor's score.
//! #[derive(Debug, Clone, PartialEq)]
//! pub struct ScoreKey { pub actor_id: u64 }
//! tuple_key! {
//!     ScoreKey -> i64 = (ACTOR, DATA, {actor_id}, SCORE);
//! }
//!
//! let tenant = Subspace::new(&("tenant", 42_u64));
//! let mut buf = Vec::new();
//! tenant.pack_key_into(&ScoreKey { actor_id: 9 }, &mut buf).unwrap();
//! assert_eq!(buf, strata_keys::tuple::pack(&("tenant", 42_u64, ACTOR, DATA, 9_u64, SCORE)));
//! let back: ScoreKey = tenant.unpack_key(&buf).unwrap();
//! assert_eq!(back.actor_id, 9);
//! ```
//!
//! # Guarantees
//!
//! - `K::unpack(&k.pack()?) == k` for every key type (tested by proptest).
//! - Unpacking never panics: truncated, trailing, foreign or garbage bytes
//!   are a [`KeyError`].
//! - Byte order equals logical order for tuple keys (tuple order), for
//!   fixed-width big-endian segments, and for zero-padded text numbers.
//! - Packing into a reused buffer does not allocate once the buffer has room
//!   (measured in `benches/keys.rs`).
//!
//! # Non-goals
//!
//! Values: a key names its value type ([`Key::Value`]) but encoding values is
//! `strata-codec`'s job. Limits: key size limits are enforced by the codec
//! and store, which see the whole encoded key.
#![cfg_attr(docsrs, feature(doc_cfg))]

pub mod error;
pub mod raw;
pub mod show;
pub mod subspace;
pub mod text;
pub mod tuple;
pub mod ulid;

pub use error::{KeyError, TextProblem};
pub use num_bigint;
pub use subspace::{KeyRange, Subspace, strinc};
pub use ulid::{Ulid, UlidError, UlidGenerator};

/// A key type bound to the type of the value stored under it.
///
/// Implemented by the declaration macros ([`tuple_key!`], [`raw_key!`],
/// [`text_key!`]); implement it by hand only for layouts they cannot express.
///
/// # Laws
///
/// 1. `K::unpack(&k.pack()?)? == k`.
/// 2. Bytes of another key type sharing a prefix fail with
///    [`KeyError::Discriminant`] (or another error), never decode to a wrong
///    value. Raw and text layouts accept only the exact bytes `pack`
///    produces. Tuple keys inherit one leniency of the tuple layer: a
///    non-minimal integer encoding (`15 00` for `0`) reads as its value.
/// 3. `unpack` never panics; `pack_into` leaves `out` unchanged on error.
pub trait Key: Sized {
    /// The type of the value stored under this key.
    type Value;
    /// The key type's name, used in errors.
    const NAME: &'static str;
    /// Whether values under this key type may be larger than one row, so
    /// that a store splits them into chunks. Declared with the key, as
    /// `Name -> chunked Value = (...)` in the key macros; a hint to stores
    /// that does not change the key's bytes.
    const CHUNKED: bool = false;

    /// Appends the encoded key to `out`. Tuple and raw keys never fail; text
    /// keys fail when a field cannot be written unambiguously.
    ///
    /// # Errors
    /// A [`KeyError`] naming the field; `out` is then unchanged.
    fn pack_into(&self, out: &mut Vec<u8>) -> Result<(), KeyError>;

    /// As [`pack_into`](Key::pack_into), also returning the offset in `out`
    /// of the 10-byte transaction version of an incomplete
    /// [`Versionstamp`](tuple::Versionstamp) in the key, if there is one. An
    /// engine writes the commit's versionstamp there.
    ///
    /// # Errors
    /// As `pack_into`, plus [`KeyError::MultipleVersionstamps`].
    fn pack_into_versionstamped(&self, out: &mut Vec<u8>) -> Result<Option<usize>, KeyError> {
        self.pack_into(out).map(|()| None)
    }

    /// The encoded key in a new buffer.
    ///
    /// # Errors
    /// As [`pack_into`](Key::pack_into).
    fn pack(&self) -> Result<Vec<u8>, KeyError> {
        // Room for most keys at once: grown from empty, a key of a few
        // elements was reallocated two or three times.
        let mut out = Vec::with_capacity(32);
        self.pack_into(&mut out)?;
        Ok(out)
    }

    /// Reads a key, validating every discriminant and that nothing trails.
    ///
    /// # Errors
    /// A [`KeyError`] saying what is wrong and at which byte.
    fn unpack(bytes: &[u8]) -> Result<Self, KeyError>;
}

/// Support code for the declaration macros. Not part of the public API.
#[doc(hidden)]
pub mod __private {
    pub use crate::raw::{fixed_part, read_fixed, read_tail};
    pub use crate::text::{TextPart, expect_literal, read_text_field, write_text_field};

    use crate::KeyError;
    use crate::tuple::{PackResult, TupleDepth, TuplePack, TupleUnpack, VersionstampOffset};

    /// Reports the depth it is unpacked at; unpacking it as the only element
    /// of a root tuple yields the depth of top-level tuple elements.
    struct DepthProbe(TupleDepth);

    impl<'de> TupleUnpack<'de> for DepthProbe {
        fn unpack(input: &'de [u8], depth: TupleDepth) -> PackResult<(&'de [u8], Self)> {
            Ok((input, DepthProbe(depth)))
        }
    }

    /// The depth at which the elements of a top-level tuple are packed.
    #[inline]
    pub fn element_depth() -> TupleDepth {
        // `(DepthProbe,)` consumes nothing, so empty input unpacks cleanly;
        // the tuple layer offers no public constructor for the depth.
        match <(DepthProbe,)>::unpack_root(&[]) {
            Ok((probe,)) => probe.0,
            Err(e) => unreachable!("a probe that reads nothing cannot fail: {e}"),
        }
    }

    #[inline]
    pub fn pack_elem<T: TuplePack + ?Sized>(
        value: &T,
        out: &mut Vec<u8>,
        depth: TupleDepth,
    ) -> Result<VersionstampOffset, KeyError> {
        Ok(value.pack(out, depth)?)
    }

    /// Turns the result of packing the tuple part into the key's result,
    /// restoring `out` on error.
    #[inline]
    pub fn finish_pack(
        key: &'static str,
        out: &mut Vec<u8>,
        start: usize,
        tuple_start: usize,
        packed: Result<VersionstampOffset, KeyError>,
    ) -> Result<Option<usize>, KeyError> {
        match packed {
            Ok(VersionstampOffset::None { .. }) => Ok(None),
            Ok(VersionstampOffset::OneIncomplete { offset }) => {
                Ok(Some(tuple_start + offset as usize))
            }
            Ok(VersionstampOffset::MultipleIncomplete) => {
                out.truncate(start);
                Err(KeyError::MultipleVersionstamps { key })
            }
            Err(e) => {
                out.truncate(start);
                Err(e)
            }
        }
    }

    #[inline]
    pub fn offset(whole: &[u8], rest: &[u8]) -> usize {
        whole.len() - rest.len()
    }

    /// Checks that `input` starts with the raw bytes `expected`.
    #[inline]
    pub fn expect_raw<'a>(
        key: &'static str,
        whole: &'a [u8],
        input: &'a [u8],
        expected: &[u8],
    ) -> Result<&'a [u8], KeyError> {
        match input.strip_prefix(expected) {
            Some(rest) => Ok(rest),
            None if expected.starts_with(input) => Err(KeyError::Truncated {
                key,
                offset: whole.len(),
                needed: expected.len() - input.len(),
            }),
            None => Err(KeyError::Discriminant {
                key,
                offset: offset(whole, input),
            }),
        }
    }

    /// The encoding of a constant element. Writing into a `Vec` fails only
    /// past the tuple layer's 4 GiB bound, which no constant reaches; such a
    /// constant would yield a partial encoding that no key matches.
    pub fn pack_const<T: TuplePack + ?Sized>(value: &T, depth: TupleDepth) -> Vec<u8> {
        let mut out = Vec::new();
        let _ = value.pack(&mut out, depth);
        out
    }

    /// The encoding of a constant element and where an incomplete
    /// versionstamp in it lies, for [`pack_elem`] to copy; `None` when it
    /// does not pack (past the tuple layer's 4 GiB bound), for the caller
    /// to pack it again and report the error.
    pub fn pack_const_once<T: TuplePack + ?Sized>(
        value: &T,
        depth: TupleDepth,
    ) -> Option<(Vec<u8>, VersionstampOffset)> {
        let mut out = Vec::new();
        value.pack(&mut out, depth).ok().map(|offset| (out, offset))
    }

    #[inline]
    pub fn unpack_elem<'de, T: TupleUnpack<'de>>(
        key: &'static str,
        whole: &'de [u8],
        input: &'de [u8],
        depth: TupleDepth,
    ) -> Result<(&'de [u8], T), KeyError> {
        T::unpack(input, depth).map_err(|source| KeyError::Tuple {
            key,
            offset: offset(whole, input),
            source,
        })
    }

    #[inline]
    pub fn expect_end(key: &'static str, whole: &[u8], rest: &[u8]) -> Result<(), KeyError> {
        if rest.is_empty() {
            Ok(())
        } else {
            Err(KeyError::TrailingBytes {
                key,
                offset: offset(whole, rest),
                count: rest.len(),
            })
        }
    }
}

/// The workspace README's example, compiled and run as a doctest.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
pub struct ReadmeDoctests;

/// This crate's README example, compiled and run as a doctest.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct CrateReadmeDoctests;
