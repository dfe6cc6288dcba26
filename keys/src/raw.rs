//! Raw byte layouts: a tag of constant bytes, fixed-width segments, and an
//! optional tail.
//!
//! For systems that do not use tuples, such as an actor KV whose first byte
//! selects a namespace (`[5] ++ u64_be(message_id)`). Implemented with
//! [`raw_key!`](crate::raw_key) for a struct you write, in the grammar of
//! every key macro (`Name -> Value = (parts);`):
//!
//! ```
//! use strata_keys::{raw_key, Key, KeyError};
//!
//! /// `[9, 1, file_tag, u32_be(chunk)]`
//! #[derive(Debug, Clone, PartialEq, Eq)]
//! pub struct SqliteChunk { pub file_tag: u8, pub chunk: u32 }
//! /// `[2] ++ utf8(conn_id)`
//! #[derive(Debug, Clone, PartialEq, Eq)]
//! pub struct Connection { pub conn_id: String }
//!
//! raw_key! {
//!     SqliteChunk -> Vec<u8> = ([9, 1], {file_tag}, {chunk});
//!     Connection -> Vec<u8> = ([2], ..{conn_id});
//! }
//!
//! let k = SqliteChunk { file_tag: 2, chunk: 258 };
//! assert_eq!(k.pack().unwrap(), [9, 1, 2, 0, 0, 1, 2]);
//! assert!(matches!(Connection::unpack(&[9, 1, 2, 0, 0, 1, 2]), Err(KeyError::Discriminant { .. })));
//! ```
//!
//! The parts: an optional leading `[tag bytes]`, then fixed segments
//! `{field}` ([`FixedSegment`]): unsigned integers in big-endian (`u8`,
//! `u16`, `u32`, `u64`, `u128`), byte arrays, UUIDs and ULIDs, whose byte
//! order is their numeric order; then an optional tail `..{field}`
//! ([`TailSegment`]) that runs to the end of the key: `Vec<u8>`, `String`
//! (checked UTF-8), or [`Packed<T>`] for a tuple-encoded tail. A field of
//! another type in a fixed position is a compile error (the trait bound).

use crate::tuple::{TuplePack, TupleUnpack};
use crate::{KeyError, Ulid};

/// A segment of a fixed number of bytes whose byte order is its value order.
pub trait FixedSegment: Sized {
    /// Encoded length in bytes.
    const LEN: usize;
    /// Writes the encoding into `out`, which is exactly [`Self::LEN`] bytes.
    fn write(&self, out: &mut [u8]);
    /// Decodes exactly [`Self::LEN`] bytes.
    fn read(bytes: &[u8]) -> Option<Self>;
    /// Appends the encoding to `out`.
    fn append(&self, out: &mut Vec<u8>) {
        let at = out.len();
        out.resize(at + Self::LEN, 0);
        self.write(&mut out[at..]);
    }
}

macro_rules! fixed_uint {
    ($($t:ty),*) => {$(
        impl FixedSegment for $t {
            const LEN: usize = std::mem::size_of::<$t>();
            #[inline]
            fn write(&self, out: &mut [u8]) {
                out.copy_from_slice(&self.to_be_bytes());
            }
            #[inline]
            fn read(bytes: &[u8]) -> Option<Self> {
                bytes.try_into().ok().map(<$t>::from_be_bytes)
            }
            #[inline]
            fn append(&self, out: &mut Vec<u8>) {
                out.extend_from_slice(&self.to_be_bytes());
            }
        }
    )*};
}
fixed_uint!(u8, u16, u32, u64, u128);

impl<const N: usize> FixedSegment for [u8; N] {
    const LEN: usize = N;
    fn write(&self, out: &mut [u8]) {
        out.copy_from_slice(self);
    }
    fn read(bytes: &[u8]) -> Option<Self> {
        bytes.try_into().ok()
    }
}

impl FixedSegment for uuid::Uuid {
    const LEN: usize = 16;
    fn write(&self, out: &mut [u8]) {
        out.copy_from_slice(self.as_bytes());
    }
    fn read(bytes: &[u8]) -> Option<Self> {
        uuid::Uuid::from_slice(bytes).ok()
    }
}

impl FixedSegment for Ulid {
    const LEN: usize = 16;
    fn write(&self, out: &mut [u8]) {
        out.copy_from_slice(&self.to_bytes());
    }
    fn read(bytes: &[u8]) -> Option<Self> {
        bytes.try_into().ok().map(Ulid::from_bytes)
    }
}

/// The last part of a raw key: everything after the fixed segments.
pub trait TailSegment: Sized {
    /// Appends the encoding.
    ///
    /// # Errors
    /// When the value cannot be encoded (a tuple over 4 GiB).
    fn write(&self, out: &mut Vec<u8>) -> Result<(), KeyError>;
    /// Decodes the whole tail `bytes`, which start at `offset` of the key.
    ///
    /// # Errors
    /// A [`KeyError`] naming `key` and the offset of the problem.
    fn read(key: &'static str, offset: usize, bytes: &[u8]) -> Result<Self, KeyError>;
}

impl TailSegment for Vec<u8> {
    fn write(&self, out: &mut Vec<u8>) -> Result<(), KeyError> {
        out.extend_from_slice(self);
        Ok(())
    }
    fn read(_: &'static str, _: usize, bytes: &[u8]) -> Result<Self, KeyError> {
        Ok(bytes.to_vec())
    }
}

impl TailSegment for String {
    fn write(&self, out: &mut Vec<u8>) -> Result<(), KeyError> {
        out.extend_from_slice(self.as_bytes());
        Ok(())
    }
    fn read(key: &'static str, offset: usize, bytes: &[u8]) -> Result<Self, KeyError> {
        std::str::from_utf8(bytes)
            .map(str::to_owned)
            .map_err(|e| KeyError::Utf8 {
                key,
                offset: offset + e.valid_up_to(),
            })
    }
}

/// A tail holding a FoundationDB tuple (packed at the top level, so a
/// `Packed<(i64, String)>` tail is the bytes of `pack(&(i64, String))`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Packed<T>(pub T);

impl<T> TailSegment for Packed<T>
where
    T: TuplePack + for<'de> TupleUnpack<'de>,
{
    fn write(&self, out: &mut Vec<u8>) -> Result<(), KeyError> {
        self.0.pack_root(out)?;
        Ok(())
    }
    fn read(key: &'static str, offset: usize, bytes: &[u8]) -> Result<Self, KeyError> {
        crate::tuple::unpack(bytes)
            .map(Packed)
            .map_err(|source| KeyError::Tuple {
                key,
                offset,
                source,
            })
    }
}

#[doc(hidden)]
#[inline]
pub fn fixed_part<'a>(
    key: &'static str,
    whole: &'a [u8],
    len: usize,
) -> Result<&'a [u8], KeyError> {
    whole.get(..len).ok_or(KeyError::Truncated {
        key,
        offset: whole.len(),
        needed: len.saturating_sub(whole.len()),
    })
}

/// Reads one fixed segment at `pos` of `fixed`, the key's fixed part, whose
/// length the caller has checked.
#[doc(hidden)]
#[inline]
pub fn read_fixed<T: FixedSegment>(
    key: &'static str,
    fixed: &[u8],
    pos: &mut usize,
) -> Result<T, KeyError> {
    let end = *pos + T::LEN;
    match fixed.get(*pos..end).and_then(T::read) {
        Some(value) => {
            *pos = end;
            Ok(value)
        }
        None => Err(KeyError::Truncated {
            key,
            offset: fixed.len(),
            needed: end.saturating_sub(fixed.len()),
        }),
    }
}

#[doc(hidden)]
#[inline]
pub fn read_tail<T: TailSegment>(
    key: &'static str,
    whole: &[u8],
    pos: &mut usize,
) -> Result<T, KeyError> {
    let value = T::read(key, *pos, &whole[*pos..])?;
    *pos = whole.len();
    Ok(value)
}

/// The encoded length of the fixed segment a field accessor returns: lets
/// the macro sum a layout's fixed lengths without naming the field types.
#[doc(hidden)]
#[inline]
pub fn segment_len<S, T: FixedSegment>(_field: impl Fn(&S) -> &T) -> usize {
    T::LEN
}

/// Implements [`Key`](crate::Key) for a struct as a raw byte layout:
/// `(tag bytes ++ fixed segments in layout order ++ optional tail)`. See
/// the [module docs](crate::raw). The struct is yours; every field must
/// appear in the layout. Several declarations may follow each other.
#[macro_export]
macro_rules! raw_key {
    () => {};
    ($name:ident -> chunked $value:ty = $layout:tt; $($rest:tt)*) => {
        $crate::raw_key! { @layout $name [$value] true $layout }
        $crate::raw_key! { $($rest)* }
    };
    ($name:ident -> $value:ty = $layout:tt; $($rest:tt)*) => {
        $crate::raw_key! { @layout $name [$value] false $layout }
        $crate::raw_key! { $($rest)* }
    };
    (@layout $name:ident [$value:ty] $chunked:literal ( [ $($tag:expr),* $(,)? ] $(, { $field:ident })* $(, .. { $tail:ident })? $(,)? )) => {
        $crate::raw_key! { @emit $name $value, $chunked [$($tag),*] [$($field)*] [$($tail)?] }
    };
    (@layout $name:ident [$value:ty] $chunked:literal ( { $first:ident } $(, { $field:ident })* $(, .. { $tail:ident })? $(,)? )) => {
        $crate::raw_key! { @emit $name $value, $chunked [] [$first $($field)*] [$($tail)?] }
    };
    (@layout $name:ident [$value:ty] $chunked:literal ( .. { $tail:ident } $(,)? )) => {
        $crate::raw_key! { @emit $name $value, $chunked [] [] [$tail] }
    };
    (@emit $name:ident $value:ty, $chunked:literal [$($tag:expr),*] [$($field:ident)*] [$($tail:ident)?]) => {
        impl $name {
            /// The constant bytes every key of this type starts with.
            pub const TAG: &'static [u8] = &[$($tag),*];

            /// Length of the tag and fixed segments together.
            pub fn fixed_len() -> usize {
                Self::TAG.len() $(+ $crate::raw::segment_len(|k: &Self| &k.$field))*
            }
        }

        impl $crate::Key for $name {
            type Value = $value;
            const NAME: &'static str = ::std::stringify!($name);
            const CHUNKED: bool = $chunked;

            fn pack_into(&self, out: &mut ::std::vec::Vec<u8>) -> ::std::result::Result<(), $crate::KeyError> {
                #[allow(unused_variables)]
                let start = out.len();
                out.extend_from_slice(Self::TAG);
                $( $crate::raw::FixedSegment::append(&self.$field, out); )*
                $(
                    if let Err(e) = $crate::raw::TailSegment::write(&self.$tail, out) {
                        out.truncate(start);
                        return Err(e);
                    }
                )?
                Ok(())
            }

            fn unpack(bytes: &[u8]) -> ::std::result::Result<Self, $crate::KeyError> {
                // No local items: `let` bindings are hygienic.
                let name: &'static str = ::std::stringify!($name);
                $crate::__private::expect_raw(name, bytes, bytes, Self::TAG)?;
                // One length check for the whole fixed part; the reads below
                // then cannot run short.
                let fixed = $crate::__private::fixed_part(name, bytes, Self::fixed_len())?;
                #[allow(unused_mut)]
                let mut pos = Self::TAG.len();
                $( let $field = $crate::__private::read_fixed(name, fixed, &mut pos)?; )*
                $( let $tail = $crate::__private::read_tail(name, bytes, &mut pos)?; )?
                $crate::__private::expect_end(name, bytes, &bytes[pos..])?;
                Ok(Self { $($field,)* $($tail)? })
            }
        }
    };
    ($($other:tt)*) => {
        ::std::compile_error!(
            "raw_key! expects `Name -> Value = ([tag bytes], {field}, ..., ..{tail});`: the tag first, fixed fields, then at most one tail, last"
        );
    };
}
