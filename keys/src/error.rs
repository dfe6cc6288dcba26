//! The one error type of key packing and unpacking.

use thiserror::Error;

use crate::tuple::PackError;
use crate::ulid::UlidError;

/// Why a key could not be packed or unpacked.
///
/// Every variant names the key type (`key`, its [`Key::NAME`](crate::Key::NAME))
/// and, when reading, the byte offset into the encoded key where reading
/// stopped, so a corrupt or foreign key in a scan can be located.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum KeyError {
    /// A constant element (a key-type discriminant, a tag byte or a literal)
    /// differs from the one the key type declares: these bytes belong to
    /// another key type sharing the prefix.
    #[error("not a {key}: discriminant mismatch at byte {offset}")]
    Discriminant {
        /// The key type that was expected.
        key: &'static str,
        /// Byte offset of the mismatching element.
        offset: usize,
    },
    /// The tuple layer rejected an element (wrong type code, truncated,
    /// invalid UTF-8, integer out of range for the field, ...).
    #[error("{key}: bad tuple element at byte {offset}")]
    Tuple {
        /// The key type being read.
        key: &'static str,
        /// Byte offset of the element.
        offset: usize,
        /// What the tuple layer said.
        #[source]
        source: PackError,
    },
    /// The key ended before all its parts were read.
    #[error("{key}: truncated at byte {offset}, {needed} more bytes needed")]
    Truncated {
        /// The key type being read.
        key: &'static str,
        /// Where the input ran out.
        offset: usize,
        /// How many more bytes the next part needs (at least).
        needed: usize,
    },
    /// Bytes remain after the last part of the key.
    #[error("{key}: {count} trailing bytes at byte {offset}")]
    TrailingBytes {
        /// The key type being read.
        key: &'static str,
        /// Offset of the first unread byte.
        offset: usize,
        /// Number of unread bytes.
        count: usize,
    },
    /// A key does not start with the subspace prefix it was read under.
    #[error("key does not start with the subspace prefix ({prefix_len} bytes)")]
    PrefixMismatch {
        /// Length of the expected prefix.
        prefix_len: usize,
    },
    /// A text part is not valid UTF-8.
    #[error("{key}: invalid UTF-8 at byte {offset}")]
    Utf8 {
        /// The key type being read.
        key: &'static str,
        /// Offset of the invalid sequence.
        offset: usize,
    },
    /// A field of a text key is malformed or cannot be written unambiguously.
    #[error("{key}: field `{field}`: {problem}")]
    TextField {
        /// The key type.
        key: &'static str,
        /// The field's name.
        field: &'static str,
        /// What is wrong with it.
        problem: TextProblem,
    },
    /// An optional trailing field of a prefix is set while an earlier one is
    /// not: the prefix would skip an element.
    #[error("{key}: optional field `{field}` is set but an earlier optional field is not")]
    OptionalFieldGap {
        /// The prefix type.
        key: &'static str,
        /// The field set after a gap.
        field: &'static str,
    },
    /// A key holds more than one incomplete versionstamp; an engine can fill
    /// in only one.
    #[error("{key}: more than one incomplete versionstamp")]
    MultipleVersionstamps {
        /// The key type.
        key: &'static str,
    },
    /// The tuple layer could not write the key: its encoding exceeds the
    /// tuple layer's 4 GiB bound.
    #[error("key too large for the tuple layer")]
    TooLarge {
        /// What the tuple layer said.
        #[from]
        source: std::io::Error,
    },
    /// A ULID field is malformed.
    #[error("{key}: bad ULID at byte {offset}")]
    Ulid {
        /// The key type being read.
        key: &'static str,
        /// Offset of the ULID text.
        offset: usize,
        /// The ULID error.
        #[source]
        source: UlidError,
    },
}

/// What is wrong with one field of a delimited text key.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum TextProblem {
    /// A [`Spanning`](crate::text::Spanning) field's text contains the
    /// literal that ends it, so the key could not be split back.
    #[error("value contains its terminator {terminator:?}")]
    ContainsTerminator {
        /// The literal that follows the field in the layout.
        terminator: &'static str,
    },
    /// The field's text contains one of the layout's delimiters, so the key
    /// could not be split back unambiguously. Use
    /// [`Escaped`](crate::text::Escaped) for free text that may contain it.
    #[error("value contains the delimiter {:?}", char::from(*byte))]
    ContainsDelimiter {
        /// The delimiter byte found.
        byte: u8,
    },
    /// A number has more digits than its zero-padded width.
    #[error("number needs {digits} digits, the layout pads to {width}")]
    TooWide {
        /// Digits the value needs.
        digits: usize,
        /// Declared width.
        width: usize,
    },
    /// A number field is not the canonical decimal form (only ASCII digits,
    /// exactly `width` of them when padded, no leading zero when not).
    #[error("not a canonical decimal number")]
    BadNumber,
    /// A number does not fit its field's type.
    #[error("number out of range for the field type")]
    OutOfRange,
    /// The literal expected after this field is missing.
    #[error("expected literal {expected:?} after the field")]
    MissingTerminator {
        /// The literal.
        expected: &'static str,
    },
    /// The field's text is not valid UTF-8.
    #[error("not valid UTF-8")]
    NotUtf8,
    /// The layout has a variable-length field followed by another field with
    /// no literal between them: the key could not be split back.
    #[error("variable-length field is not followed by a literal")]
    Unterminated,
    /// A ULID field is malformed.
    #[error("bad ULID")]
    Ulid(#[source] UlidError),
    /// A percent escape is malformed or not canonical.
    #[error("bad percent escape")]
    BadEscape,
}
