//! Values as their key type's own bytes, as Rivet's `FormalKey` stores
//! them: the [`Raw`](super::Raw) format.

use crate::rivet_id::{Id, IdError};
use strata_keys::Key;

/// Why a raw value does not read (or, for a hand-written [`FormalKey`],
/// write).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RawValueError {
    /// A fixed-width value of another width.
    #[error("expected {expected} bytes, found {found}")]
    Width {
        /// The value type's width.
        expected: usize,
        /// The stored length.
        found: usize,
    },
    /// A string value that is not UTF-8.
    #[error("not UTF-8")]
    Utf8(#[source] std::str::Utf8Error),
    /// An [`Id`] value that is not an id.
    #[error("not an id")]
    Id(#[source] IdError),
    /// A hand-written serialization's own error.
    #[error("the key type's serialization failed")]
    Custom(#[source] Box<dyn std::error::Error + Send + Sync>),
}

/// A key type whose value is stored as the key type's own bytes (Rivet's
/// `FormalKey`): its serialization is the key type's, so two key types may
/// store the same value type differently. Implement it by hand for values
/// with their own encoding (BARE, protobuf), or with
/// [`formal_key!`](crate::formal_key) for a [`RawValue`].
pub trait FormalKey: Key {
    /// The bytes stored for `value` at this key.
    ///
    /// # Errors
    /// A value that cannot be serialized ([`RawValueError::Custom`]).
    fn serialize(&self, value: &Self::Value) -> Result<Vec<u8>, RawValueError>;

    /// The value stored as `raw` at this key.
    ///
    /// # Errors
    /// Bytes that are not a value of this key type.
    fn deserialize(&self, raw: &[u8]) -> Result<Self::Value, RawValueError>;
}

/// A value type with one byte form, the one Rivet's key types give it:
/// integers big-endian at their width, strings as UTF-8, an [`Id`] as its
/// 19 bytes, bytes as themselves, `()` as nothing (and anything stored
/// reads as `()`, as Rivet's reads ignore the bytes).
pub trait RawValue: Sized {
    /// The stored bytes.
    fn to_raw(&self) -> Vec<u8>;

    /// The value stored as `raw`.
    ///
    /// # Errors
    /// Bytes that are not a value of this type.
    fn from_raw(raw: &[u8]) -> Result<Self, RawValueError>;
}

macro_rules! big_endian {
    ($($t:ty),*) => {$(
        impl RawValue for $t {
            fn to_raw(&self) -> Vec<u8> {
                self.to_be_bytes().to_vec()
            }

            fn from_raw(raw: &[u8]) -> Result<Self, RawValueError> {
                let bytes = raw.try_into().map_err(|_| RawValueError::Width {
                    expected: std::mem::size_of::<$t>(),
                    found: raw.len(),
                })?;
                Ok(<$t>::from_be_bytes(bytes))
            }
        }
    )*};
}
big_endian!(i64, u64, i32, u32, u16, u8);

impl RawValue for String {
    fn to_raw(&self) -> Vec<u8> {
        self.as_bytes().to_vec()
    }

    fn from_raw(raw: &[u8]) -> Result<Self, RawValueError> {
        std::str::from_utf8(raw)
            .map(str::to_owned)
            .map_err(RawValueError::Utf8)
    }
}

impl RawValue for Vec<u8> {
    fn to_raw(&self) -> Vec<u8> {
        self.clone()
    }

    fn from_raw(raw: &[u8]) -> Result<Self, RawValueError> {
        Ok(raw.to_vec())
    }
}

impl RawValue for () {
    fn to_raw(&self) -> Vec<u8> {
        Vec::new()
    }

    fn from_raw(_raw: &[u8]) -> Result<Self, RawValueError> {
        Ok(())
    }
}

impl RawValue for Id {
    fn to_raw(&self) -> Vec<u8> {
        self.as_bytes().to_vec()
    }

    fn from_raw(raw: &[u8]) -> Result<Self, RawValueError> {
        Id::from_slice(raw).map_err(RawValueError::Id)
    }
}

/// Implements [`FormalKey`] for key types whose value is a [`RawValue`]:
/// the value's one byte form, as Rivet's key types store it.
///
/// ```
/// use strata_keys::tuple_key;
/// use strata_universaldb::formal_key;
/// use strata_universaldb::{keys::{ACTOR, DATA, RUNNER_ID}, FormalKey, Id};
///
/// #[derive(Debug, Clone, PartialEq)]
/// pub struct RunnerIdKey { pub actor_id: Id }
/// tuple_key! { RunnerIdKey -> Id = (ACTOR, DATA, {actor_id}, RUNNER_ID); }
/// formal_key!(RunnerIdKey);
///
/// let key = RunnerIdKey { actor_id: Id::v1(1, 0) };
/// let runner = Id::v1(2, 0);
/// assert_eq!(key.serialize(&runner).unwrap(), runner.as_bytes());
/// ```
#[macro_export]
macro_rules! formal_key {
    ($($key:ty),+ $(,)?) => {$(
        impl $crate::FormalKey for $key {
            fn serialize(
                &self,
                value: &<Self as $crate::__keys::Key>::Value,
            ) -> ::std::result::Result<::std::vec::Vec<u8>, $crate::RawValueError> {
                ::std::result::Result::Ok($crate::RawValue::to_raw(value))
            }

            fn deserialize(
                &self,
                raw: &[u8],
            ) -> ::std::result::Result<<Self as $crate::__keys::Key>::Value, $crate::RawValueError> {
                <<Self as $crate::__keys::Key>::Value as $crate::RawValue>::from_raw(raw)
            }
        }
    )+};
}
