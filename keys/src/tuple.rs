//! Typed keys on the FoundationDB tuple layer.
//!
//! Everything here packs through [`foundationdb_tuple`], re-exported whole as
//! this module's items, so the bytes are those of every official FoundationDB
//! binding. [`tuple_key!`](crate::tuple_key) makes a struct a key type in
//! one line; [`tuple_prefix!`](crate::tuple_prefix) makes one a prefix with
//! optional trailing fields for range reads.
//!
//! # Layout syntax
//!
//! Every key macro of this crate (`tuple_key!`, `tuple_prefix!`,
//! [`raw_key!`](crate::raw_key), [`text_key!`](crate::text_key)) has one
//! grammar: you write the struct (derives, visibility and docs are yours),
//! and the macro implements the key for it from one line per type,
//!
//! ```text
//! Name -> Value = (part, part, ...);      // tuple_prefix!: Name = (part, ...);
//! Name -> chunked Value = (part, ...);    // values a store splits into chunks
//! ```
//!
//! where the parts of a tuple layout are:
//!
//! | part | meaning |
//! |---|---|
//! | `[b, ...]` (first only) | raw bytes before the tuple (the actor KV's `[7] ++ pack(...)`) |
//! | an expression (`ACTOR`, `3`, `"name"`, `keys::DATA`) | a constant: packed on write, **checked byte for byte on read** |
//! | `{field}` | a field of the struct, packed with its `TuplePack` impl |
//! | `..{field}` (last only) | a `Vec<T>` field spread as trailing elements, not nested |
//! | `?{field}` (prefixes only) | an `Option<T>` trailing field, packed only when set |
//!
//! Every field of the struct must appear in the layout (a key reads back
//! whole), and every field the layout names must exist; misuses of the
//! grammar (`..{f}` not last, `?{f}` in a key, a text width on a tuple
//! field) are compile errors naming the part.
//!
//! Constants are the discriminants that keep key types apart: reading bytes
//! of another key type that shares the prefix fails with
//! [`KeyError::Discriminant`](crate::KeyError::Discriminant) instead of
//! decoding a wrong value.

pub use foundationdb_tuple::*;

/// The deepest nesting of tuples that [`unpack_bounded`] unpacks.
/// Unpacking [`Element`]s recurses once per nested tuple, so a key of
/// thousands of levels (10,000 bytes hold 5,000: a damaged key, or one
/// made to crash a reader) overflows the stack and aborts the process.
pub const MAX_TUPLE_DEPTH: usize = 512;

/// `bytes` unpacked as `T` (as [`unpack`]), unless its tuples nest deeper
/// than [`MAX_TUPLE_DEPTH`]: for types made of [`Element`]s (`Element`,
/// `Vec<Element>`), whose unpacking recurses once per nested tuple, on
/// bytes read from storage. The depth is found first in one pass over the
/// bytes, without recursion, reading each element's extent as the tuple
/// layer does (a string or an integer holding `0x05` bytes is no nesting).
///
/// ```
/// use strata_keys::tuple::{self, Bytes, Element, unpack_bounded, MAX_TUPLE_DEPTH};
///
/// let shallow = tuple::pack(&("doc", (1, (2,)), Bytes::from(vec![0x05; 2_000])));
/// assert!(unpack_bounded::<Vec<Element<'_>>>(&shallow).is_ok());
/// // 5,000 tuples in one another: refused, not a stack overflow.
/// let deep = [vec![0x05; 5_000], vec![0x00; 5_000]].concat();
/// assert!(unpack_bounded::<Vec<Element<'_>>>(&deep).is_err());
/// # assert!(MAX_TUPLE_DEPTH < 5_000);
/// ```
///
/// # Errors
/// [`PackError::Message`] for bytes nested too deep; the unpacking's
/// errors.
pub fn unpack_bounded<'de, T: TupleUnpack<'de>>(bytes: &'de [u8]) -> PackResult<T> {
    if nests_deeper_than(bytes, MAX_TUPLE_DEPTH) {
        return Err(PackError::Message(
            format!("tuples nested deeper than {MAX_TUPLE_DEPTH}: not unpacked (the depth could overflow the stack)")
                .into(),
        ));
    }
    unpack(bytes)
}

/// Whether the tuple encoding in `bytes` opens more than `limit` nested
/// tuples at some point, read element by element as the tuple layer
/// unpacks them, without recursion. Stops (answering no) where the bytes
/// stop being a tuple: unpacking them fails at that same point, no deeper.
///
/// ```
/// use strata_keys::tuple::{self, nests_deeper_than};
///
/// let two = tuple::pack(&(1, (2, (3,))));
/// assert!(nests_deeper_than(&two, 1));
/// assert!(!nests_deeper_than(&two, 2));
/// // A `0x05` inside a string is a byte, not a tuple.
/// assert!(!nests_deeper_than(&tuple::pack(&("\u{5}\u{5}",)), 0));
/// ```
pub fn nests_deeper_than(bytes: &[u8], limit: usize) -> bool {
    let (mut i, mut depth) = (0usize, 0usize);
    while let Some((next, deeper)) = step(bytes, i, depth) {
        if deeper > limit {
            return true;
        }
        (i, depth) = (next, deeper);
    }
    false
}

/// `bytes` split after its first `elements` top-level tuple elements, if
/// the whole of `bytes` reads as a sequence of tuple elements (by their
/// extents, as the tuple layer reads them: codes, lengths, terminators,
/// nesting; without recursion, so at any depth) of at least `elements`.
/// It does not unpack them: a string of invalid UTF-8 still has an extent.
/// For finding the first elements of a key nested too deep to unpack (see
/// [`unpack_bounded`]).
///
/// ```
/// use strata_keys::tuple::{self, split_prefix};
///
/// let key = tuple::pack(&("actor", 7, (1, (2,)), "name"));
/// let (head, rest) = split_prefix(&key, 2).unwrap();
/// assert_eq!(head, tuple::pack(&("actor", 7)));
/// assert_eq!(rest, tuple::pack(&((1, (2,)), "name")));
/// // Fewer elements, or bytes that end inside one: none.
/// assert!(split_prefix(&key, 5).is_none());
/// assert!(split_prefix(&key[..key.len() - 1], 1).is_none());
/// ```
pub fn split_prefix(bytes: &[u8], elements: usize) -> Option<(&[u8], &[u8])> {
    let (mut i, mut depth, mut seen) = (0usize, 0usize, 0usize);
    let mut split = (elements == 0).then_some(0);
    while i < bytes.len() {
        let (next, deeper) = step(bytes, i, depth)?;
        (i, depth) = (next, deeper);
        if depth == 0 {
            seen += 1;
            if seen == elements {
                split = Some(i);
            }
        }
    }
    // Every element ended, none past the bytes.
    let at = split.filter(|_| i == bytes.len() && depth == 0)?;
    Some(bytes.split_at(at))
}

/// One step of reading a tuple's bytes by their extents: the code at `i`
/// with what it spans (a nested tuple's opening and its end are steps of
/// their own), at nesting `depth`. The position after it and the depth
/// there (the position may lie past the bytes when they end early);
/// `None` for a code that starts no element, or a length or terminator
/// the bytes end before.
fn step(bytes: &[u8], i: usize, depth: usize) -> Option<(usize, usize)> {
    let code = *bytes.get(i)?;
    let i = i + 1;
    Some(match code {
        // Inside a nested tuple: `00 FF` is a nil, `00` its end.
        0x00 if depth > 0 => {
            if bytes.get(i) == Some(&0xFF) {
                (i + 1, depth)
            } else {
                (i, depth - 1)
            }
        }
        0x00 | 0x26 | 0x27 | 0x14 => (i, depth),
        // Bytes and strings end at a `00` not followed by `FF`.
        0x01 | 0x02 => {
            let mut j = i;
            loop {
                match bytes.get(j)? {
                    0x00 if bytes.get(j + 1) == Some(&0xFF) => j += 2,
                    0x00 => break (j + 1, depth),
                    _ => j += 1,
                }
            }
        }
        0x05 => (i, depth + 1),
        0x0C..=0x13 => (i + usize::from(0x14 - code), depth),
        0x15..=0x1C => (i + usize::from(code - 0x14), depth),
        0x0B | 0x1D => {
            let n = *bytes.get(i)?;
            (
                i + 1 + usize::from(if code == 0x0B { n ^ 0xFF } else { n }),
                depth,
            )
        }
        0x20 => (i + 4, depth),
        0x21 => (i + 8, depth),
        0x30 => (i + 16, depth),
        0x33 => (i + 12, depth),
        _ => return None,
    })
}

/// Implements [`Key`](crate::Key) for a struct as a FoundationDB tuple;
/// see the [module docs](crate::tuple) for the layout syntax. The struct is
/// yours (its derives, visibility and docs); every field must appear in the
/// layout. Several declarations may follow each other in one invocation.
///
/// ```
/// use strata_keys::{tuple_key, Key, KeyError};
/// use strata_keys::tuple::Uuid;
///
/// const ACTOR: i64 = 1;
/// const DATA: i64 = 2;
/// const WORKFLOW_ID: i64 = 10;
/// const CREATE_TS: i64 = 11;
///
/// /// `(ACTOR, DATA, actor_id, WORKFLOW_ID)` holds the actor's workflow id.
/// #[derive(Debug, Clone, PartialEq)]
/// pub struct WorkflowIdKey { pub actor_id: Uuid }
/// /// `(ACTOR, DATA, actor_id, CREATE_TS)` holds a timestamp.
/// #[derive(Debug, Clone, PartialEq)]
/// pub struct CreateTsKey { pub actor_id: Uuid }
///
/// tuple_key! {
///     WorkflowIdKey -> Uuid = (ACTOR, DATA, {actor_id}, WORKFLOW_ID);
///     CreateTsKey -> i64 = (ACTOR, DATA, {actor_id}, CREATE_TS);
/// }
///
/// let key = CreateTsKey { actor_id: Uuid::from_u128(7) };
/// let bytes = key.pack().unwrap();
/// assert_eq!(bytes, strata_keys::tuple::pack(&(ACTOR, DATA, Uuid::from_u128(7), CREATE_TS)));
/// assert_eq!(CreateTsKey::unpack(&bytes).unwrap(), key);
/// // Same prefix, other key type: a typed error, never a wrong value.
/// assert!(matches!(WorkflowIdKey::unpack(&bytes), Err(KeyError::Discriminant { .. })));
/// ```
#[macro_export]
macro_rules! tuple_key {
    () => {};
    ($name:ident -> chunked $value:ty = ( [ $($raw:expr),* $(,)? ] $(, $($layout:tt)*)? ); $($rest:tt)*) => {
        $crate::__strata_tuple_layout! { @munch (key $name [$value] true) [$($raw),*] [] [] $($($layout)*)? }
        $crate::tuple_key! { $($rest)* }
    };
    ($name:ident -> chunked $value:ty = ( $($layout:tt)* ); $($rest:tt)*) => {
        $crate::__strata_tuple_layout! { @munch (key $name [$value] true) [] [] [] $($layout)* }
        $crate::tuple_key! { $($rest)* }
    };
    ($name:ident -> $value:ty = ( [ $($raw:expr),* $(,)? ] $(, $($layout:tt)*)? ); $($rest:tt)*) => {
        $crate::__strata_tuple_layout! { @munch (key $name [$value] false) [$($raw),*] [] [] $($($layout)*)? }
        $crate::tuple_key! { $($rest)* }
    };
    ($name:ident -> $value:ty = ( $($layout:tt)* ); $($rest:tt)*) => {
        $crate::__strata_tuple_layout! { @munch (key $name [$value] false) [] [] [] $($layout)* }
        $crate::tuple_key! { $($rest)* }
    };
    ($($other:tt)*) => {
        ::std::compile_error!(
            "tuple_key! expects `Name -> Value = (parts);`: parts are constants, `{field}`, a last `..{field}`, and an optional leading `[raw bytes]`"
        );
    };
}

/// Implements a tuple *prefix* for a struct: the first elements of a key
/// family, for range reads over a [`Subspace`](crate::Subspace). Trailing
/// fields marked `?{field}` are `Option`s packed only when set; setting one
/// while an earlier one is unset is refused with
/// [`KeyError::OptionalFieldGap`](crate::KeyError::OptionalFieldGap).
///
/// The struct gets `pack_into`, `pack`, `subspace` and `range`.
///
/// ```
/// use strata_keys::{tuple_prefix, tuple::Uuid};
///
/// const NAMESPACE: i64 = 3;
///
/// /// All keys `(NAMESPACE, namespace_id, name, [create_ts, ...])`.
/// #[derive(Debug, Clone)]
/// pub struct NameSubspace {
///     pub namespace_id: Uuid,
///     pub name: String,
///     pub create_ts: Option<i64>,
/// }
/// tuple_prefix! {
///     NameSubspace = (NAMESPACE, {namespace_id}, {name}, ?{create_ts});
/// }
///
/// let ns = Uuid::from_u128(9);
/// let all = NameSubspace { namespace_id: ns, name: "jobs".into(), create_ts: None };
/// let later = NameSubspace { create_ts: Some(1_700), ..all.clone() };
/// let range = all.range().unwrap();
/// assert!(range.contains(&later.pack().unwrap()));
/// ```
#[macro_export]
macro_rules! tuple_prefix {
    () => {};
    ($name:ident = ( [ $($raw:expr),* $(,)? ] $(, $($layout:tt)*)? ); $($rest:tt)*) => {
        $crate::__strata_tuple_layout! { @munch (prefix $name) [$($raw),*] [] [] $($($layout)*)? }
        $crate::tuple_prefix! { $($rest)* }
    };
    ($name:ident = ( $($layout:tt)* ); $($rest:tt)*) => {
        $crate::__strata_tuple_layout! { @munch (prefix $name) [] [] [] $($layout)* }
        $crate::tuple_prefix! { $($rest)* }
    };
    ($($other:tt)*) => {
        ::std::compile_error!(
            "tuple_prefix! expects `Name = (parts);`: parts are constants, `{field}`, trailing `?{field}`s, and an optional leading `[raw bytes]`"
        );
    };
}

/// Normalises a tuple layout into `(kind field)` / `(const expr)` items and
/// collects the fields it names.
#[doc(hidden)]
#[macro_export]
macro_rules! __strata_tuple_layout {
    (@munch $cfg:tt $raw:tt [$($acc:tt)*] [$($fields:ident)*] .. { $f:ident } $(,)?) => {
        $crate::__strata_tuple_layout! { @done $cfg $raw [$($acc)* (spread $f)] [$($fields)* $f] }
    };
    (@munch $cfg:tt $raw:tt $acc:tt $fields:tt .. { $f:ident } , $($rest:tt)+) => {
        ::std::compile_error!(::std::concat!(
            "`..{", ::std::stringify!($f), "}` spreads a field as trailing elements: it must be the last part"
        ));
    };
    (@munch (key $($cfg:tt)*) $raw:tt $acc:tt $fields:tt ? { $f:ident } $($rest:tt)*) => {
        ::std::compile_error!(::std::concat!(
            "`?{", ::std::stringify!($f), "}` is an optional prefix field: use tuple_prefix!, not tuple_key!"
        ));
    };
    (@munch $cfg:tt $raw:tt [$($acc:tt)*] [$($fields:ident)*] ? { $f:ident } $(, $($rest:tt)*)?) => {
        $crate::__strata_tuple_layout! { @munch $cfg $raw [$($acc)* (optional $f)] [$($fields)* $f] $($($rest)*)? }
    };
    (@munch $cfg:tt $raw:tt [$($acc:tt)*] [$($fields:ident)*] { $f:ident } $(, $($rest:tt)*)?) => {
        $crate::__strata_tuple_layout! { @munch $cfg $raw [$($acc)* (field $f)] [$($fields)* $f] $($($rest)*)? }
    };
    (@munch $cfg:tt $raw:tt $acc:tt $fields:tt { $f:ident : $($w:tt)* } $($rest:tt)*) => {
        ::std::compile_error!(::std::concat!(
            "`{", ::std::stringify!($f), ":...}`: a width is for text_key! fields; tuple elements have none"
        ));
    };
    (@munch $cfg:tt $raw:tt [$($acc:tt)*] $fields:tt $c:expr $(, $($rest:tt)*)?) => {
        $crate::__strata_tuple_layout! { @munch $cfg $raw [$($acc)* (const $c)] $fields $($($rest)*)? }
    };
    (@munch $cfg:tt $raw:tt $acc:tt $fields:tt) => {
        $crate::__strata_tuple_layout! { @done $cfg $raw $acc $fields }
    };

    (@done (key $name:ident [$value:ty] $chunked:literal) [$($raw:expr),*] [$($elem:tt)*] [$($field:ident)*]) => {
        impl $name {
            const __STRATA_RAW: &'static [u8] = &[$($raw),*];

            /// Packs the tuple part and reports where an incomplete
            /// versionstamp landed (relative to the start of the tuple part).
            fn __strata_pack_elems(
                &self,
                out: &mut ::std::vec::Vec<u8>,
            ) -> ::std::result::Result<$crate::tuple::VersionstampOffset, $crate::KeyError> {
                let depth = $crate::__private::element_depth();
                let mut vs = $crate::tuple::VersionstampOffset::None { size: 0 };
                $( $crate::__strata_tuple_elem!(pack self out depth vs $elem); )*
                Ok(vs)
            }
        }

        impl $crate::Key for $name {
            type Value = $value;
            const NAME: &'static str = ::std::stringify!($name);
            const CHUNKED: bool = $chunked;

            fn pack_into(&self, out: &mut ::std::vec::Vec<u8>) -> ::std::result::Result<(), $crate::KeyError> {
                self.pack_into_versionstamped(out).map(|_| ())
            }

            fn pack_into_versionstamped(
                &self,
                out: &mut ::std::vec::Vec<u8>,
            ) -> ::std::result::Result<::std::option::Option<usize>, $crate::KeyError> {
                let start = out.len();
                out.extend_from_slice(Self::__STRATA_RAW);
                let packed = self.__strata_pack_elems(out);
                $crate::__private::finish_pack(
                    <Self as $crate::Key>::NAME,
                    out,
                    start,
                    start + Self::__STRATA_RAW.len(),
                    packed,
                )
            }

            fn unpack(bytes: &[u8]) -> ::std::result::Result<Self, $crate::KeyError> {
                // Local variables only, no local items: a constant of the
                // user's in the layout may have any name (a local `const`
                // would shadow it), and `let` bindings are hygienic.
                let name: &'static str = ::std::stringify!($name);
                let depth = $crate::__private::element_depth();
                #[allow(unused_mut)]
                let mut input = $crate::__private::expect_raw(name, bytes, bytes, Self::__STRATA_RAW)?;
                $( $crate::__strata_tuple_elem!(unpack name bytes input depth $elem); )*
                $crate::__private::expect_end(name, bytes, input)?;
                Ok(Self { $($field),* })
            }
        }
    };

    (@done (prefix $name:ident) [$($raw:expr),*] [$($elem:tt)*] [$($field:ident)*]) => {
        impl $name {
            /// Appends the packed prefix to `out`; on error `out` is unchanged.
            ///
            /// # Errors
            /// [`KeyError::OptionalFieldGap`]($crate::KeyError::OptionalFieldGap)
            /// when an optional field is set after an unset one.
            pub fn pack_into(&self, out: &mut ::std::vec::Vec<u8>) -> ::std::result::Result<(), $crate::KeyError> {
                // No local items (see the key's `unpack`).
                let name: &'static str = ::std::stringify!($name);
                let start = out.len();
                out.extend_from_slice(&[$($raw),*]);
                let depth = $crate::__private::element_depth();
                let result = (|| {
                    #[allow(unused_mut, unused_variables)]
                    let mut gap = false;
                    let mut vs = $crate::tuple::VersionstampOffset::None { size: 0 };
                    $( $crate::__strata_tuple_elem!(prefix name self out depth vs gap $elem); )*
                    Ok(vs)
                })();
                $crate::__private::finish_pack(name, out, start, start, result).map(|_| ())
            }

            /// The packed prefix.
            ///
            /// # Errors
            /// As [`Self::pack_into`].
            pub fn pack(&self) -> ::std::result::Result<::std::vec::Vec<u8>, $crate::KeyError> {
                let mut out = ::std::vec::Vec::new();
                self.pack_into(&mut out)?;
                Ok(out)
            }

            /// The subspace of every key that starts with this prefix.
            ///
            /// # Errors
            /// As [`Self::pack_into`].
            pub fn subspace(&self) -> ::std::result::Result<$crate::Subspace, $crate::KeyError> {
                self.pack().map($crate::Subspace::from_bytes)
            }

            /// The range of every key that extends this prefix by tuple
            /// elements ([`KeyRange::tuple_prefix`]($crate::KeyRange::tuple_prefix)).
            ///
            /// # Errors
            /// As [`Self::pack_into`].
            pub fn range(&self) -> ::std::result::Result<$crate::KeyRange, $crate::KeyError> {
                self.pack().map(|p| $crate::KeyRange::tuple_prefix(&p))
            }
        }
    };
}

/// Packs or unpacks one normalised tuple element.
#[doc(hidden)]
#[macro_export]
macro_rules! __strata_tuple_elem {
    (pack $self:ident $out:ident $depth:ident $vs:ident (field $f:ident)) => {
        $vs += $crate::__private::pack_elem(&$self.$f, $out, $depth)?;
    };
    (pack $self:ident $out:ident $depth:ident $vs:ident (const $c:expr)) => {
        $vs += {
            // Packed once per key type and element, then copied (a string
            // constant packed each time cost a one-put commit 0.5 % of
            // its time); evaluated out here as in `unpack` below.
            let encode = || $crate::__private::pack_const_once(&$c, $depth);
            let packed = {
                static PACKED: ::std::sync::OnceLock<
                    ::std::option::Option<(::std::vec::Vec<u8>, $crate::tuple::VersionstampOffset)>,
                > = ::std::sync::OnceLock::new();
                PACKED.get_or_init(encode)
            };
            match packed {
                ::std::option::Option::Some((bytes, offset)) => {
                    $out.extend_from_slice(bytes);
                    *offset
                }
                // Its packing failed: packed again, for its error.
                ::std::option::Option::None => $crate::__private::pack_elem(&$c, $out, $depth)?,
            }
        };
    };
    (pack $self:ident $out:ident $depth:ident $vs:ident (spread $f:ident)) => {
        for item in &$self.$f {
            $vs += $crate::__private::pack_elem(item, $out, $depth)?;
        }
    };
    (unpack $name:ident $bytes:ident $input:ident $depth:ident (field $f:ident)) => {
        let (rest, $f) = $crate::__private::unpack_elem($name, $bytes, $input, $depth)?;
        $input = rest;
    };
    (unpack $name:ident $bytes:ident $input:ident $depth:ident (const $c:expr)) => {
        $input = {
            // The constant is evaluated out here, where no item of the
            // macro's is in scope (a constant of the user's may be named
            // like one); its encoding is kept, computed once per key type
            // and element, in the block below.
            let encode = || $crate::__private::pack_const(&$c, $depth);
            let expected = {
                static PACKED: ::std::sync::OnceLock<::std::vec::Vec<u8>> =
                    ::std::sync::OnceLock::new();
                PACKED.get_or_init(encode)
            };
            $crate::__private::expect_raw($name, $bytes, $input, expected)?
        };
    };
    (unpack $name:ident $bytes:ident $input:ident $depth:ident (spread $f:ident)) => {
        let mut $f = ::std::vec::Vec::new();
        while !$input.is_empty() {
            let (rest, item) = $crate::__private::unpack_elem($name, $bytes, $input, $depth)?;
            $f.push(item);
            $input = rest;
        }
    };
    (prefix $name:ident $self:ident $out:ident $depth:ident $vs:ident $gap:ident (optional $f:ident)) => {
        match &$self.$f {
            ::std::option::Option::Some(_) if $gap => {
                return Err($crate::KeyError::OptionalFieldGap { key: $name, field: ::std::stringify!($f) });
            }
            ::std::option::Option::Some(v) => {
                $vs += $crate::__private::pack_elem(v, $out, $depth)?;
            }
            ::std::option::Option::None => $gap = true,
        }
    };
    (prefix $name:ident $self:ident $out:ident $depth:ident $vs:ident $gap:ident $elem:tt) => {
        $crate::__strata_tuple_elem!(pack $self $out $depth $vs $elem);
    };
}

/// An owned tuple element of any type, for fields whose element types vary
/// (a history location of numbers and names, say). [`Element`] itself
/// borrows from the bytes it was read from; this does not.
///
/// ```
/// use strata_keys::tuple::{self, Element, OwnedElement};
///
/// let bytes = tuple::pack(&(3_i64, "loop"));
/// let (a, b): (OwnedElement, OwnedElement) = tuple::unpack(&bytes).unwrap();
/// assert_eq!(a.0, Element::Int(3));
/// assert_eq!(b.0.as_str(), Some("loop"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct OwnedElement(pub Element<'static>);

impl From<Element<'_>> for OwnedElement {
    fn from(e: Element<'_>) -> Self {
        Self(e.into_owned())
    }
}

impl TuplePack for OwnedElement {
    fn pack<W: std::io::Write>(
        &self,
        w: &mut W,
        tuple_depth: TupleDepth,
    ) -> std::io::Result<VersionstampOffset> {
        self.0.pack(w, tuple_depth)
    }
}

impl<'de> TupleUnpack<'de> for OwnedElement {
    fn unpack(input: &'de [u8], tuple_depth: TupleDepth) -> PackResult<(&'de [u8], Self)> {
        Element::unpack(input, tuple_depth).map(|(rest, e)| (rest, Self(e.into_owned())))
    }
}
