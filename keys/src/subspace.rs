//! Subspaces and prefix ranges.
//!
//! A [`Subspace`] is a byte prefix shared by a family of keys. It offers two
//! ranges, because "starts with these bytes" and "extends this tuple" are
//! different sets:
//!
//! - [`Subspace::range`]: **every key that starts with the prefix bytes**,
//!   the end computed with FoundationDB's `strinc` rule (drop trailing `0xFF`
//!   bytes, increment the last remaining one). The naive `prefix ++ 0xFF`
//!   end misses every key whose next byte after the prefix is `0xFF`, which
//!   raw layouts produce (`[5] ++ u64_be(u64::MAX)`); this one does not. Use
//!   it for raw byte and text layouts.
//! - [`Subspace::tuple_range`]: **the prefix followed by zero or more tuple
//!   elements**, `[prefix, prefix ++ 0xFF)`. When the prefix ends in a byte
//!   string or string element, a *sibling* element that extends it with a
//!   NUL byte (`"a"` vs `"a\0b"`) is escaped as `00 FF` and so starts with
//!   the same bytes; the tuple range leaves it out, the byte range does not.
//!   Use it for tuple keys. (FoundationDB's own `Subspace::range` is the same
//!   but starts at `prefix ++ 0x00`, leaving out the prefix key itself.)

use std::ops::Bound;

use strata_engine::RangeSpec;

use crate::tuple::{TuplePack, TupleUnpack};
use crate::{Key, KeyError};

/// A half-open byte range `[start, end)`; `end: None` means unbounded.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct KeyRange {
    /// Inclusive start.
    pub start: Vec<u8>,
    /// Exclusive end, or `None` for "to the end of the keyspace".
    pub end: Option<Vec<u8>>,
}

impl KeyRange {
    /// Every key that starts with `prefix` (the `strinc` rule).
    ///
    /// ```
    /// use strata_keys::KeyRange;
    /// let r = KeyRange::prefix(&[5, 0xFF]);
    /// assert_eq!(r.end.as_deref(), Some(&[6][..]));
    /// assert!(r.contains(&[5, 0xFF, 0xFF, 1]));
    /// assert!(!r.contains(&[6]));
    /// ```
    pub fn prefix(prefix: &[u8]) -> Self {
        Self {
            start: prefix.to_vec(),
            end: strinc(prefix),
        }
    }

    /// The packed tuple `prefix` followed by zero or more tuple elements:
    /// `[prefix, prefix ++ 0xFF)`. Tuple elements never start with `0xFF`, so
    /// this holds every extension of the tuple and leaves out siblings whose
    /// last string or byte element merely extends the prefix's last one.
    ///
    /// ```
    /// use strata_keys::{KeyRange, tuple};
    /// let r = KeyRange::tuple_prefix(&tuple::pack(&("a",)));
    /// assert!(r.contains(&tuple::pack(&("a", 1))));
    /// assert!(!r.contains(&tuple::pack(&("a\0b",))));
    /// assert!(KeyRange::prefix(&tuple::pack(&("a",))).contains(&tuple::pack(&("a\0b",))));
    /// ```
    pub fn tuple_prefix(prefix: &[u8]) -> Self {
        let mut end = prefix.to_vec();
        end.push(0xFF);
        Self {
            start: prefix.to_vec(),
            end: Some(end),
        }
    }

    /// Whether `key` lies in the range.
    pub fn contains(&self, key: &[u8]) -> bool {
        key >= self.start.as_slice() && self.end.as_deref().is_none_or(|end| key < end)
    }

    /// The range as a pair of standard bounds, for APIs that take them.
    pub fn into_bounds(self) -> (Bound<Vec<u8>>, Bound<Vec<u8>>) {
        (
            Bound::Included(self.start),
            self.end.map_or(Bound::Unbounded, Bound::Excluded),
        )
    }
}

/// FoundationDB's `strinc` (defined once, in the engine contract, whose
/// prefix ranges use it too).
///
/// ```
/// use strata_keys::strinc;
/// assert_eq!(strinc(b"ab"), Some(b"ac".to_vec()));
/// assert_eq!(strinc(&[0xFF]), None);
/// ```
pub use strata_engine::strinc;

/// The engine's range of the same keys, ascending and without a limit.
///
/// ```
/// use strata_engine::RangeSpec;
/// use strata_keys::KeyRange;
/// use std::ops::Bound;
///
/// let spec = RangeSpec::from(KeyRange::prefix(b"a"));
/// assert_eq!(spec.start, Bound::Included(b"a".to_vec()));
/// assert_eq!(spec.end, Bound::Excluded(b"b".to_vec()));
/// assert!(!spec.reverse && spec.limit.is_none());
/// ```
impl From<KeyRange> for RangeSpec {
    fn from(range: KeyRange) -> Self {
        let (start, end) = range.into_bounds();
        Self {
            start,
            end,
            reverse: false,
            limit: None,
        }
    }
}

impl From<&KeyRange> for RangeSpec {
    fn from(range: &KeyRange) -> Self {
        range.clone().into()
    }
}

/// A byte prefix shared by a family of keys.
///
/// ```
/// use strata_keys::{Subspace, tuple};
///
/// let actor = Subspace::new(&("pegboard", "actor_kv", 42_u64));
/// let key = actor.pack(&("queue", 7_i64));
/// assert_eq!(key, tuple::pack(&("pegboard", "actor_kv", 42_u64, "queue", 7_i64)));
/// let (ns, n): (String, i64) = actor.unpack(&key).unwrap();
/// assert_eq!((ns.as_str(), n), ("queue", 7));
/// assert!(actor.tuple_range().contains(&key));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Subspace {
    prefix: Vec<u8>,
}

impl Subspace {
    /// The subspace of all keys (empty prefix).
    pub fn all() -> Self {
        Self::default()
    }

    /// The subspace whose prefix is the packed tuple `t`.
    pub fn new<T: TuplePack>(t: &T) -> Self {
        Self {
            prefix: crate::tuple::pack(t),
        }
    }

    /// The subspace with a raw byte prefix.
    pub fn from_bytes(prefix: impl Into<Vec<u8>>) -> Self {
        Self {
            prefix: prefix.into(),
        }
    }

    /// A nested subspace: this prefix followed by the packed tuple `t`.
    #[must_use]
    pub fn subspace<T: TuplePack>(&self, t: &T) -> Self {
        let mut prefix = self.prefix.clone();
        crate::tuple::pack_into(t, &mut prefix);
        Self { prefix }
    }

    /// The prefix bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.prefix
    }

    /// Consumes the subspace, returning its prefix.
    pub fn into_bytes(self) -> Vec<u8> {
        self.prefix
    }

    /// Prefix followed by the packed tuple `t`.
    pub fn pack<T: TuplePack>(&self, t: &T) -> Vec<u8> {
        let mut out = self.prefix.clone();
        crate::tuple::pack_into(t, &mut out);
        out
    }

    /// Unpacks a tuple from a key of this subspace.
    ///
    /// # Errors
    /// [`KeyError::PrefixMismatch`] when `key` is outside the subspace,
    /// [`KeyError::Tuple`] when the rest is not a `T`.
    pub fn unpack<'de, T: TupleUnpack<'de>>(&self, key: &'de [u8]) -> Result<T, KeyError> {
        let rest = self.strip(key)?;
        crate::tuple::unpack(rest).map_err(|source| KeyError::Tuple {
            key: std::any::type_name::<T>(),
            offset: self.prefix.len(),
            source,
        })
    }

    /// Appends prefix and typed key to `out` (a reused buffer); on error
    /// `out` is unchanged.
    ///
    /// # Errors
    /// Whatever [`Key::pack_into`] reports.
    pub fn pack_key_into<K: Key>(&self, key: &K, out: &mut Vec<u8>) -> Result<(), KeyError> {
        let start = out.len();
        out.extend_from_slice(&self.prefix);
        key.pack_into(out).inspect_err(|_| out.truncate(start))
    }

    /// Prefix followed by the typed key.
    ///
    /// # Errors
    /// Whatever [`Key::pack_into`] reports.
    pub fn pack_key<K: Key>(&self, key: &K) -> Result<Vec<u8>, KeyError> {
        let mut out = Vec::new();
        self.pack_key_into(key, &mut out)?;
        Ok(out)
    }

    /// Reads a typed key from a key of this subspace, validating both the
    /// prefix and the key type's discriminants.
    ///
    /// # Errors
    /// [`KeyError::PrefixMismatch`], or whatever [`Key::unpack`] reports.
    /// Offsets in the error are relative to the end of the prefix.
    pub fn unpack_key<K: Key>(&self, key: &[u8]) -> Result<K, KeyError> {
        K::unpack(self.strip(key)?)
    }

    /// Whether `key` starts with this subspace's prefix.
    pub fn contains(&self, key: &[u8]) -> bool {
        key.starts_with(&self.prefix)
    }

    /// Every key that starts with the prefix bytes, the prefix itself
    /// included (`strinc` rule; see the module docs).
    pub fn range(&self) -> KeyRange {
        KeyRange::prefix(&self.prefix)
    }

    /// The prefix followed by zero or more tuple elements:
    /// `[prefix, prefix ++ 0xFF)` (see the module docs).
    pub fn tuple_range(&self) -> KeyRange {
        KeyRange::tuple_prefix(&self.prefix)
    }

    fn strip<'k>(&self, key: &'k [u8]) -> Result<&'k [u8], KeyError> {
        key.strip_prefix(self.prefix.as_slice())
            .ok_or(KeyError::PrefixMismatch {
                prefix_len: self.prefix.len(),
            })
    }
}
