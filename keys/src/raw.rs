//! Raw byte layouts: a tag of constant bytes, fixed-width segments, and an
//! optional tail.
//!
//! For systems that do not use tuples, such as an actor KV whose first byte
//! selects a namespace (`[5] ++ u64_be(message_id)`). Declared with
//! [`raw_key!`](crate::raw_key):
//!
//! ```
//! use strata_keys::{raw_key, Key, KeyError};
//!
//! raw_key! {
//!     /// `[9, 1, file_tag, u32_be(chunk)]`
//!     pub struct SqliteChunk { file_tag: u8, chunk: u32 } -> Vec<u8> = [9, 1];
//!     /// `[2] ++ utf8(conn_id)`
//!     pub struct Connection { ..conn_id: String } -> Vec<u8> = [2];
//! }
//!
//! let k = SqliteChunk { file_tag: 2, chunk: 258 };
//! assert_eq!(k.pack().unwrap(), [9, 1, 2, 0, 0, 1, 2]);
//! assert!(matches!(Connection::unpack(&[9, 1, 2, 0, 0, 1, 2]), Err(KeyError::Discriminant { .. })));
//! ```
//!
//! Fixed segments ([`FixedSegment`]) are unsigned integers in big-endian
//! (`u8`, `u16`, `u32`, `u64`, `u128`), byte arrays, UUIDs and ULIDs: their
//! byte order is their numeric order. The tail ([`TailSegment`], written
//! `..name: Type` after the fixed fields) runs to the end of the key:
//! `Vec<u8>`, `String` (checked UTF-8), or [`Packed<T>`] for a tuple-encoded
//! tail. Field visibility is always `pub`: keys are plain data.

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

/// Declares a struct and implements [`Key`](crate::Key) for it as a raw byte
/// layout: `[tag bytes] ++ fixed fields in order ++ optional tail`. See the
/// [module docs](crate::raw). Several declarations may follow each other.
#[macro_export]
macro_rules! raw_key {
    () => {};
    (
        $(#[$meta:meta])*
        $vis:vis struct $name:ident {
            $( $(#[$fmeta:meta])* $field:ident : $fty:ty , )*
            .. $(#[$tmeta:meta])* $tail:ident : $tty:ty $(,)?
        } -> $value:ty = [ $($tag:expr),* $(,)? ];
        $($rest:tt)*
    ) => {
        $crate::raw_key! { @emit [$(#[$meta])*] $vis $name [$($(#[$fmeta])* $field : $fty),*]
            [$(#[$tmeta])* $tail : $tty] $value [$($tag),*] }
        $crate::raw_key! { $($rest)* }
    };
    (
        $(#[$meta:meta])*
        $vis:vis struct $name:ident {
            $( $(#[$fmeta:meta])* $field:ident : $fty:ty ),* $(,)?
        } -> $value:ty = [ $($tag:expr),* $(,)? ];
        $($rest:tt)*
    ) => {
        $crate::raw_key! { @emit [$(#[$meta])*] $vis $name [$($(#[$fmeta])* $field : $fty),*]
            [] $value [$($tag),*] }
        $crate::raw_key! { $($rest)* }
    };
    (
        @emit [$(#[$meta:meta])*] $vis:vis $name:ident [$( $(#[$fmeta:meta])* $field:ident : $fty:ty ),*]
        [$( $(#[$tmeta:meta])* $tail:ident : $tty:ty )?] $value:ty [$($tag:expr),*]
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash)]
        $vis struct $name {
            $( $(#[$fmeta])* pub $field : $fty, )*
            $( $(#[$tmeta])* pub $tail : $tty, )?
        }

        impl $name {
            /// The constant bytes every key of this type starts with.
            pub const TAG: &'static [u8] = &[$($tag),*];
            /// Length of the tag and fixed segments together.
            pub const FIXED_LEN: usize = Self::TAG.len() $(+ <$fty as $crate::raw::FixedSegment>::LEN)*;
        }

        impl $crate::Key for $name {
            type Value = $value;
            const NAME: &'static str = ::std::stringify!($name);

            fn pack_into(&self, out: &mut ::std::vec::Vec<u8>) -> ::std::result::Result<(), $crate::KeyError> {
                #[allow(unused_variables)]
                let start = out.len();
                // Tag and fixed segments are assembled on the stack and
                // appended in one copy.
                let mut fixed = [0_u8; Self::FIXED_LEN];
                fixed[..Self::TAG.len()].copy_from_slice(Self::TAG);
                #[allow(unused_mut, unused_variables)]
                let mut at = Self::TAG.len();
                $(
                    let end = at + <$fty as $crate::raw::FixedSegment>::LEN;
                    $crate::raw::FixedSegment::write(&self.$field, &mut fixed[at..end]);
                    at = end;
                )*
                out.extend_from_slice(&fixed);
                $(
                    if let Err(e) = $crate::raw::TailSegment::write(&self.$tail, out) {
                        out.truncate(start);
                        return Err(e);
                    }
                )?
                Ok(())
            }

            fn unpack(bytes: &[u8]) -> ::std::result::Result<Self, $crate::KeyError> {
                const NAME: &str = ::std::stringify!($name);
                $crate::__private::expect_raw(NAME, bytes, bytes, Self::TAG)?;
                // One length check for the whole fixed part; the reads below
                // then cannot run short.
                let fixed = $crate::__private::fixed_part(NAME, bytes, Self::FIXED_LEN)?;
                #[allow(unused_mut)]
                let mut pos = Self::TAG.len();
                $( let $field = $crate::__private::read_fixed::<$fty>(NAME, fixed, &mut pos)?; )*
                $( let $tail = $crate::__private::read_tail::<$tty>(NAME, bytes, &mut pos)?; )?
                $crate::__private::expect_end(NAME, bytes, &bytes[pos..])?;
                Ok(Self { $($field,)* $($tail)? })
            }
        }
    };
}
