//! The value envelope: header, codecs, schema versions, checksum, expiry.

use serde::Serialize;
use serde::de::DeserializeOwned;
use thiserror::Error;

/// The format byte of envelope format 1, the first byte of every envelope.
pub const FORMAT_V1: u8 = 0xE1;

/// Flag bit: an 8-byte `expires_at` follows the flags.
pub const FLAG_EXPIRES: u8 = 0b0000_0001;
/// Flag bit: a 4-byte CRC-32 follows (after `expires_at` when present).
pub const FLAG_CHECKSUM: u8 = 0b0000_0010;
/// Flag bit: the body is a chunk manifest; the value is in chunk rows.
pub const FLAG_CHUNKED: u8 = 0b0000_0100;
/// Flag bit, only with [`FLAG_CHECKSUM`]: the checksum leaves out the key
/// (the value of a versionstamped key, unknown when the value is encoded;
/// see [`encode_keyless`]).
pub const FLAG_KEYLESS: u8 = 0b0000_1000;
const KNOWN_FLAGS: u8 = FLAG_EXPIRES | FLAG_CHECKSUM | FLAG_CHUNKED | FLAG_KEYLESS;

/// Length of the fixed part of the header: format, codec, version, flags.
pub const FIXED_HEADER_LEN: usize = 5;
/// Longest header: fixed part, `expires_at` and checksum.
pub const MAX_HEADER_LEN: usize = FIXED_HEADER_LEN + 8 + 4;

/// How the body is encoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Codec {
    /// The body is the value's bytes as they are.
    Raw,
    /// [postcard](https://docs.rs/postcard): compact, the default.
    Postcard,
    /// JSON, for systems whose stored values are JSON documents.
    Json,
}

impl Codec {
    /// The id stored in the header.
    pub const fn id(self) -> u8 {
        match self {
            Self::Raw => 0,
            Self::Postcard => 1,
            Self::Json => 2,
        }
    }

    /// The codec with this id, if any.
    pub const fn from_id(id: u8) -> Option<Self> {
        match id {
            0 => Some(Self::Raw),
            1 => Some(Self::Postcard),
            2 => Some(Self::Json),
            _ => None,
        }
    }
}

impl std::fmt::Display for Codec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Raw => "raw",
            Self::Postcard => "postcard",
            Self::Json => "json",
        })
    }
}

/// Why a value could not be encoded.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum EncodeError {
    /// postcard refused the value.
    #[error("postcard could not encode the value")]
    Postcard(#[source] postcard::Error),
    /// serde_json refused the value.
    #[error("JSON could not encode the value")]
    Json(#[source] serde_json::Error),
}

/// Why bytes could not be decoded. Decoding never panics; every malformed
/// input maps to one of these.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum DecodeError {
    /// The bytes end inside the header.
    #[error("envelope truncated: header needs {needed} bytes, {available} present")]
    Truncated {
        /// Bytes the header needs.
        needed: usize,
        /// Bytes present.
        available: usize,
    },
    /// The first byte is not a known envelope format.
    #[error("unknown envelope format byte {byte:#04x}")]
    UnknownFormat {
        /// The byte found.
        byte: u8,
    },
    /// The codec id is not one this version knows.
    #[error("unknown codec id {id}")]
    UnknownCodec {
        /// The id found.
        id: u8,
    },
    /// Flag bits this version does not know are set.
    #[error("unknown flag bits {flags:#010b}")]
    UnknownFlags {
        /// The flags byte.
        flags: u8,
    },
    /// The envelope was written with another codec than the value type uses.
    #[error("value written as {found}, the type reads {expected}")]
    WrongCodec {
        /// The type's codec.
        expected: Codec,
        /// The envelope's codec.
        found: Codec,
    },
    /// The envelope's schema version is newer than the type's.
    #[error("schema version {found} is newer than this build reads ({current})")]
    NewerVersion {
        /// Version in the envelope.
        found: u16,
        /// The type's current version.
        current: u16,
    },
    /// An older schema version with no migration declared.
    #[error("no migration from schema version {found} to {current}")]
    NoMigration {
        /// Version in the envelope.
        found: u16,
        /// The type's current version.
        current: u16,
    },
    /// The checksum does not match the key, header and body.
    #[error("checksum mismatch: stored {stored:#010x}, computed {computed:#010x}")]
    ChecksumMismatch {
        /// Checksum in the header.
        stored: u32,
        /// Checksum of what was read.
        computed: u32,
    },
    /// The envelope has no checksum but the reader requires one.
    #[error("the envelope has no checksum and one is required")]
    MissingChecksum,
    /// The envelope is a chunk manifest: assemble the chunks first.
    #[error("the value is chunked; assemble its chunks before decoding")]
    Chunked,
    /// postcard rejected the body.
    #[error("postcard could not decode the body")]
    Postcard(#[source] postcard::Error),
    /// serde_json rejected the body.
    #[error("JSON could not decode the body")]
    Json(#[source] serde_json::Error),
    /// Bytes remain after the decoded body.
    #[error("{count} bytes after the end of the body")]
    TrailingBytes {
        /// Number of unread bytes.
        count: usize,
    },
    /// A raw text body is not UTF-8.
    #[error("raw text body is not UTF-8 (valid up to byte {valid_up_to})")]
    Utf8 {
        /// Length of the valid prefix.
        valid_up_to: usize,
    },
    /// A body in a hand-written layout (a [`Value`] implemented by hand)
    /// does not read.
    #[error("malformed {layout} body: {why}")]
    Malformed {
        /// The layout's name.
        layout: &'static str,
        /// What is wrong.
        why: &'static str,
    },
}

/// A value type with a stored form.
///
/// Implement it with [`value!`](crate::value) for serde types; by hand for
/// anything else. `Vec<u8>` and `String` implement it with [`Codec::Raw`].
pub trait Value: Sized {
    /// The codec of the body.
    const CODEC: Codec;
    /// The current schema version, written into every new envelope.
    const VERSION: u16;

    /// Appends the body to `out`.
    ///
    /// # Errors
    /// An [`EncodeError`] from the codec.
    fn encode_body(&self, out: &mut Vec<u8>) -> Result<(), EncodeError>;

    /// Reads a body written at schema `version`, which is at most
    /// [`Self::VERSION`]: the current version, or an older one through its
    /// migration.
    ///
    /// # Errors
    /// [`DecodeError::NoMigration`] for an older version with no migration;
    /// the codec's error for a malformed body.
    fn decode_body(version: u16, body: &[u8]) -> Result<Self, DecodeError>;

    /// As [`Value::decode_body`], given the whole envelope by value with
    /// its body from `start` on: a type that can keep the buffer (the raw
    /// `Vec<u8>` and `String`) takes it instead of copying the body. The
    /// default decodes the borrowed body.
    ///
    /// # Errors
    /// As [`Value::decode_body`].
    fn decode_body_owned(version: u16, bytes: Vec<u8>, start: usize) -> Result<Self, DecodeError> {
        Self::decode_body(version, bytes.get(start..).unwrap_or_default())
    }

    /// The body's length in bytes when known before encoding (the raw
    /// `Vec<u8>` and `String` know it), so that an envelope is written in
    /// one allocation; `None` (the default) when not. Only a hint: a
    /// wrong one costs a reallocation, never a wrong envelope.
    fn body_size_hint(&self) -> Option<usize> {
        None
    }
}

/// The room [`encode`] reserves for a body of unknown length (a serde
/// body is written by a serializer that grows the buffer as it goes).
const UNKNOWN_BODY_ROOM: usize = 64;

/// Room in `out` for an envelope whose body is `hint` bytes long.
fn reserve_envelope(out: &mut Vec<u8>, hint: Option<usize>) {
    out.reserve(MAX_HEADER_LEN + hint.unwrap_or(UNKNOWN_BODY_ROOM));
}

/// The body of an owned envelope, in its own buffer: the header's bytes
/// are moved out (a shift of the body, no new allocation).
fn take_body(mut bytes: Vec<u8>, start: usize) -> Vec<u8> {
    bytes.drain(..start.min(bytes.len()));
    bytes
}

impl Value for Vec<u8> {
    const CODEC: Codec = Codec::Raw;
    const VERSION: u16 = 1;
    fn body_size_hint(&self) -> Option<usize> {
        Some(self.len())
    }
    fn encode_body(&self, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        out.extend_from_slice(self);
        Ok(())
    }
    fn decode_body(version: u16, body: &[u8]) -> Result<Self, DecodeError> {
        check_raw_version(version)?;
        Ok(body.to_vec())
    }
    fn decode_body_owned(version: u16, bytes: Vec<u8>, start: usize) -> Result<Self, DecodeError> {
        check_raw_version(version)?;
        Ok(take_body(bytes, start))
    }
}

impl Value for String {
    const CODEC: Codec = Codec::Raw;
    const VERSION: u16 = 1;
    fn body_size_hint(&self) -> Option<usize> {
        Some(self.len())
    }
    fn encode_body(&self, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        out.extend_from_slice(self.as_bytes());
        Ok(())
    }
    fn decode_body(version: u16, body: &[u8]) -> Result<Self, DecodeError> {
        check_raw_version(version)?;
        std::str::from_utf8(body)
            .map(str::to_owned)
            .map_err(|e| DecodeError::Utf8 {
                valid_up_to: e.valid_up_to(),
            })
    }
    fn decode_body_owned(version: u16, bytes: Vec<u8>, start: usize) -> Result<Self, DecodeError> {
        check_raw_version(version)?;
        String::from_utf8(take_body(bytes, start)).map_err(|e| DecodeError::Utf8 {
            valid_up_to: e.utf8_error().valid_up_to(),
        })
    }
}

fn check_raw_version(version: u16) -> Result<(), DecodeError> {
    if version == 1 {
        Ok(())
    } else {
        Err(DecodeError::NoMigration {
            found: version,
            current: 1,
        })
    }
}

/// Body encoders and decoders for serde types, used by [`value!`](crate::value).
pub mod body {
    use super::{DecodeError, DeserializeOwned, EncodeError, Serialize};

    /// A postcard flavor that appends to a borrowed `Vec`, copying slices
    /// whole rather than byte by byte.
    struct Append<'a>(&'a mut Vec<u8>);

    impl postcard::ser_flavors::Flavor for Append<'_> {
        type Output = ();
        #[inline]
        fn try_extend(&mut self, data: &[u8]) -> postcard::Result<()> {
            self.0.extend_from_slice(data);
            Ok(())
        }
        #[inline]
        fn try_push(&mut self, data: u8) -> postcard::Result<()> {
            self.0.push(data);
            Ok(())
        }
        fn finalize(self) -> postcard::Result<()> {
            Ok(())
        }
    }

    /// Appends the postcard encoding of `value`.
    ///
    /// # Errors
    /// [`EncodeError::Postcard`].
    #[inline]
    pub fn postcard_encode<T: Serialize + ?Sized>(
        value: &T,
        out: &mut Vec<u8>,
    ) -> Result<(), EncodeError> {
        postcard::serialize_with_flavor(value, Append(out)).map_err(EncodeError::Postcard)
    }

    /// Reads a postcard body; bytes left over are an error.
    ///
    /// # Errors
    /// [`DecodeError::Postcard`] or [`DecodeError::TrailingBytes`].
    #[inline]
    pub fn postcard_decode<T: DeserializeOwned>(body: &[u8]) -> Result<T, DecodeError> {
        let (value, rest) = postcard::take_from_bytes(body).map_err(DecodeError::Postcard)?;
        if rest.is_empty() {
            Ok(value)
        } else {
            Err(DecodeError::TrailingBytes { count: rest.len() })
        }
    }

    /// Appends the JSON encoding of `value`.
    ///
    /// # Errors
    /// [`EncodeError::Json`].
    pub fn json_encode<T: Serialize + ?Sized>(
        value: &T,
        out: &mut Vec<u8>,
    ) -> Result<(), EncodeError> {
        serde_json::to_writer(out, value).map_err(EncodeError::Json)
    }

    /// Reads a JSON body (one document, surrounding white space allowed).
    ///
    /// # Errors
    /// [`DecodeError::Json`].
    pub fn json_decode<T: DeserializeOwned>(body: &[u8]) -> Result<T, DecodeError> {
        serde_json::from_slice(body).map_err(DecodeError::Json)
    }
}

/// Implements [`Value`] for a serde type: its codec, its current schema
/// version, and one migration per older version it can still read.
///
/// A migration `OLD => OldType` reads the body as `OldType` (same codec)
/// and converts it with `From<OldType> for Type`.
///
/// ```
/// use serde::{Deserialize, Serialize};
/// use strata_codec::{decode, encode, value, EncodeOptions};
///
/// #[derive(Serialize, Deserialize)]
/// struct UserV1 { name: String }
/// #[derive(Serialize, Deserialize, Debug, PartialEq)]
/// struct User { name: String, admin: bool }
/// impl From<UserV1> for User {
///     fn from(old: UserV1) -> Self { User { name: old.name, admin: false } }
/// }
///
/// value!(UserV1: postcard, version = 1);
/// value!(User: postcard, version = 2, migrate { 1 => UserV1 });
///
/// let mut old = Vec::new();
/// encode(&UserV1 { name: "ada".into() }, b"user/1", EncodeOptions::default(), &mut old).unwrap();
/// let user: User = decode(b"user/1", &old).unwrap();
/// assert_eq!(user, User { name: "ada".into(), admin: false });
/// ```
#[macro_export]
macro_rules! value {
    ($ty:ty : postcard, version = $version:literal $(, migrate { $($from:literal => $old:ty),* $(,)? })? $(,)?) => {
        $crate::value!(@impl $ty, Postcard, postcard_encode, postcard_decode, $version, [$($($from => $old),*)?]);
    };
    ($ty:ty : json, version = $version:literal $(, migrate { $($from:literal => $old:ty),* $(,)? })? $(,)?) => {
        $crate::value!(@impl $ty, Json, json_encode, json_decode, $version, [$($($from => $old),*)?]);
    };
    (@impl $ty:ty, $codec:ident, $enc:ident, $dec:ident, $version:literal, [$($from:literal => $old:ty),*]) => {
        impl $crate::Value for $ty {
            const CODEC: $crate::Codec = $crate::Codec::$codec;
            const VERSION: u16 = $version;

            fn encode_body(&self, out: &mut ::std::vec::Vec<u8>) -> ::std::result::Result<(), $crate::EncodeError> {
                $crate::envelope::body::$enc(self, out)
            }

            fn decode_body(version: u16, body: &[u8]) -> ::std::result::Result<Self, $crate::DecodeError> {
                match version {
                    $version => $crate::envelope::body::$dec::<Self>(body),
                    $( $from => $crate::envelope::body::$dec::<$old>(body).map(::std::convert::Into::into), )*
                    found => Err($crate::DecodeError::NoMigration { found, current: $version }),
                }
            }
        }
    };
}

/// What to write into a new envelope besides the value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EncodeOptions {
    /// Write a CRC-32 over the key, the header and the body (default: on).
    pub checksum: bool,
    /// Expiry time in milliseconds since the Unix epoch, if any.
    pub expires_at: Option<u64>,
}

impl Default for EncodeOptions {
    fn default() -> Self {
        Self {
            checksum: true,
            expires_at: None,
        }
    }
}

/// A parsed envelope header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// Codec of the body.
    pub codec: Codec,
    /// Schema version of the body.
    pub version: u16,
    /// Expiry in Unix milliseconds, when set.
    pub expires_at: Option<u64>,
    /// Stored checksum, when present.
    pub checksum: Option<u32>,
    /// Whether the body is a chunk manifest.
    pub chunked: bool,
    /// Whether the checksum leaves out the key ([`FLAG_KEYLESS`]).
    pub keyless: bool,
    /// Length of the header; the body starts here.
    pub len: usize,
}

/// Length of a header with these optional fields.
pub const fn header_len(expires: bool, checksum: bool) -> usize {
    FIXED_HEADER_LEN + if expires { 8 } else { 0 } + if checksum { 4 } else { 0 }
}

impl Header {
    /// Parses the header at the start of `bytes`. Checks the format byte,
    /// the codec id and the flags; does not verify the checksum.
    ///
    /// # Errors
    /// [`DecodeError::Truncated`], [`DecodeError::UnknownFormat`],
    /// [`DecodeError::UnknownCodec`] or [`DecodeError::UnknownFlags`].
    pub fn read(bytes: &[u8]) -> Result<Self, DecodeError> {
        let truncated = |needed| DecodeError::Truncated {
            needed,
            available: bytes.len(),
        };
        let (fixed, rest): (&[u8; FIXED_HEADER_LEN], _) = bytes
            .split_first_chunk()
            .ok_or_else(|| truncated(FIXED_HEADER_LEN.max(1)))?;
        let [format, codec, v0, v1, flags] = *fixed;
        if format != FORMAT_V1 {
            return Err(DecodeError::UnknownFormat { byte: format });
        }
        let codec = Codec::from_id(codec).ok_or(DecodeError::UnknownCodec { id: codec })?;
        // A keyless checksum without a checksum is no known combination.
        if flags & !KNOWN_FLAGS != 0 || (flags & FLAG_KEYLESS != 0 && flags & FLAG_CHECKSUM == 0) {
            return Err(DecodeError::UnknownFlags { flags });
        }
        let expires = flags & FLAG_EXPIRES != 0;
        let has_checksum = flags & FLAG_CHECKSUM != 0;
        let len = header_len(expires, has_checksum);
        // The optional fields, in order, each read as a fixed-size chunk
        // (no index arithmetic left to check at run time).
        let (expires_at, rest) = if expires {
            let (at, rest) = rest.split_first_chunk().ok_or_else(|| truncated(len))?;
            (Some(u64::from_be_bytes(*at)), rest)
        } else {
            (None, rest)
        };
        let checksum = if has_checksum {
            let crc = rest.first_chunk().ok_or_else(|| truncated(len))?;
            Some(u32::from_be_bytes(*crc))
        } else {
            None
        };
        Ok(Self {
            codec,
            version: u16::from_be_bytes([v0, v1]),
            expires_at,
            checksum,
            chunked: flags & FLAG_CHUNKED != 0,
            keyless: flags & FLAG_KEYLESS != 0,
            len,
        })
    }

    /// Whether the value has expired at the clock reading `now_ms`: true
    /// from `expires_at` on (inclusive), never without an expiry.
    pub fn is_expired(&self, now_ms: u64) -> bool {
        self.expires_at.is_some_and(|at| now_ms >= at)
    }
}

/// A CRC-32 hasher made once and cloned for each checksum: a new one
/// asks which of the CPU's features it may use each time it is made.
static CRC32: std::sync::LazyLock<crc32fast::Hasher> =
    std::sync::LazyLock::new(crc32fast::Hasher::new);

/// The checksum of an envelope stored under `key`: CRC-32 over the key,
/// then the header without its checksum field, then the body.
fn checksum_of(key: &[u8], header_without_crc: &[u8], body: &[u8]) -> u32 {
    let mut crc = CRC32.clone();
    crc.update(key);
    crc.update(header_without_crc);
    crc.update(body);
    crc.finalize()
}

/// Writes a header for `codec`/`version` with `flags` and returns where the
/// checksum goes, if anywhere.
fn write_header(
    out: &mut Vec<u8>,
    codec: Codec,
    version: u16,
    flags: u8,
    expires_at: Option<u64>,
) -> Option<usize> {
    let [v0, v1] = version.to_be_bytes();
    out.extend_from_slice(&[FORMAT_V1, codec.id(), v0, v1, flags]);
    if let Some(at) = expires_at {
        out.extend_from_slice(&at.to_be_bytes());
    }
    (flags & FLAG_CHECKSUM != 0).then(|| {
        let at = out.len();
        out.extend_from_slice(&[0; 4]);
        at
    })
}

/// Appends the envelope of `value`, stored under `key`, to `out`. On error
/// `out` is unchanged.
///
/// The key is not stored; it is covered by the checksum so that a value
/// copied under another key fails to decode.
///
/// # Errors
/// The codec's [`EncodeError`].
pub fn encode<T: Value>(
    value: &T,
    key: &[u8],
    options: EncodeOptions,
    out: &mut Vec<u8>,
) -> Result<(), EncodeError> {
    reserve_envelope(out, value.body_size_hint());
    encode_parts(
        T::CODEC,
        T::VERSION,
        false,
        Some(key),
        options,
        out,
        |out| value.encode_body(out),
    )
}

/// Appends the envelope of `value` for a key not known yet (a
/// versionstamped key, completed by the engine at commit): with a checksum
/// over the header and body only ([`FLAG_KEYLESS`]), so that damage is
/// still caught, though not a copy under another key. On error `out` is
/// unchanged.
///
/// # Errors
/// The codec's [`EncodeError`].
pub fn encode_keyless<T: Value>(
    value: &T,
    expires_at: Option<u64>,
    out: &mut Vec<u8>,
) -> Result<(), EncodeError> {
    let options = EncodeOptions {
        checksum: true,
        expires_at,
    };
    reserve_envelope(out, value.body_size_hint());
    encode_parts(T::CODEC, T::VERSION, false, None, options, out, |out| {
        value.encode_body(out)
    })
}

/// Shared by value and manifest envelopes.
pub(crate) fn encode_parts(
    codec: Codec,
    version: u16,
    chunked: bool,
    key: Option<&[u8]>,
    options: EncodeOptions,
    out: &mut Vec<u8>,
    body: impl FnOnce(&mut Vec<u8>) -> Result<(), EncodeError>,
) -> Result<(), EncodeError> {
    let start = out.len();
    let options = if strata_engine::fault_point!("expiry-not-encoded") {
        EncodeOptions {
            expires_at: None,
            ..options
        }
    } else {
        options
    };
    let mut flags = 0;
    if options.expires_at.is_some() {
        flags |= FLAG_EXPIRES;
    }
    if options.checksum {
        flags |= FLAG_CHECKSUM;
    }
    if chunked {
        flags |= FLAG_CHUNKED;
    }
    if options.checksum && key.is_none() {
        flags |= FLAG_KEYLESS;
    }
    let crc_at = write_header(out, codec, version, flags, options.expires_at);
    let body_start = out.len();
    if let Err(e) = body(out) {
        out.truncate(start);
        return Err(e);
    }
    if let Some(at) = crc_at {
        let crc = checksum_of(key.unwrap_or_default(), &out[start..at], &out[body_start..]);
        out[at..at + 4].copy_from_slice(&crc.to_be_bytes());
    }
    Ok(())
}

/// Parses the header and verifies the checksum, if the envelope has one,
/// against `key` (or without it, for a [`FLAG_KEYLESS`] checksum). Returns
/// the header and the body.
///
/// # Errors
/// Any header error, or [`DecodeError::ChecksumMismatch`].
pub fn verify<'b>(key: &[u8], bytes: &'b [u8]) -> Result<(Header, &'b [u8]), DecodeError> {
    let header = Header::read(bytes)?;
    let body = &bytes[header.len..];
    if let Some(stored) = header.checksum {
        let covered = if header.keyless { &[][..] } else { key };
        let computed = checksum_of(covered, &bytes[..header.len - 4], body);
        if stored != computed {
            return Err(DecodeError::ChecksumMismatch { stored, computed });
        }
    }
    Ok((header, body))
}

/// Decodes the envelope of a `T` stored under `key`.
///
/// Checks, in order: the header, the checksum (when present), that the
/// value is not chunked, the codec, and the schema version (newer is an
/// error, older goes through the type's migration).
///
/// # Errors
/// A [`DecodeError`] saying which check failed.
pub fn decode<T: Value>(key: &[u8], bytes: &[u8]) -> Result<T, DecodeError> {
    decode_with_header(key, bytes).map(|(value, _)| value)
}

/// As [`decode`], also returning the header (for its expiry, say).
///
/// # Errors
/// As [`decode`].
pub fn decode_with_header<T: Value>(key: &[u8], bytes: &[u8]) -> Result<(T, Header), DecodeError> {
    decode_with(key, bytes, DecodeOptions::default())
}

/// How a reader treats an envelope's checksum.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum ChecksumCheck {
    /// Compute and compare the checksum when the envelope has one
    /// (the default).
    #[default]
    Verify,
    /// As `Verify`, and refuse envelopes without a checksum
    /// ([`DecodeError::MissingChecksum`]).
    ///
    /// The `checksum` flag bit is itself unprotected: a flip that clears it
    /// turns the stored checksum into body bytes. A store that always writes
    /// checksums should require them, so that such a flip is an error too.
    Require,
    /// Do not compute the checksum. For a reader that trusts its storage
    /// engine's own checksums (RocksDB blocks, redb pages) and wants the
    /// CRC's cost back; the header is still checked, and a value stored
    /// under the wrong key is then not detected.
    Skip,
}

/// What a reader demands of an envelope beyond a valid format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct DecodeOptions {
    /// How the checksum is treated.
    pub checksum: ChecksumCheck,
}

impl DecodeOptions {
    /// Options with this checksum treatment.
    pub const fn checksum(checksum: ChecksumCheck) -> Self {
        Self { checksum }
    }
}

/// As [`decode_with_header`], with [`DecodeOptions`].
///
/// # Errors
/// As [`decode`], plus [`DecodeError::MissingChecksum`].
pub fn decode_with<T: Value>(
    key: &[u8],
    bytes: &[u8],
    options: DecodeOptions,
) -> Result<(T, Header), DecodeError> {
    let (header, body) = open(key, bytes, options)?;
    decode_opened(header, body).map(|v| (v, header))
}

/// The first half of [`decode_with`]: parses the header and treats the
/// checksum as `options` say. Returns the header and the body, for a
/// reader that looks at the header (chunked? expired?) before decoding
/// with [`decode_opened`], so the header is parsed once.
///
/// # Errors
/// Any header error, [`DecodeError::ChecksumMismatch`] or
/// [`DecodeError::MissingChecksum`].
pub fn open<'b>(
    key: &[u8],
    bytes: &'b [u8],
    options: DecodeOptions,
) -> Result<(Header, &'b [u8]), DecodeError> {
    let (header, body) = if options.checksum == ChecksumCheck::Skip {
        let header = Header::read(bytes)?;
        (header, &bytes[header.len..])
    } else {
        verify(key, bytes)?
    };
    if options.checksum == ChecksumCheck::Require && header.checksum.is_none() {
        return Err(DecodeError::MissingChecksum);
    }
    Ok((header, body))
}

/// The second half of [`decode_with`]: decodes the `body` of an envelope
/// whose `header` [`open`] returned. Checks that the value is not
/// chunked, the codec, and the schema version (newer is an error, older
/// goes through the type's migration).
///
/// # Errors
/// [`DecodeError::Chunked`], [`DecodeError::WrongCodec`],
/// [`DecodeError::NewerVersion`], or the body's own decode error.
pub fn decode_opened<T: Value>(header: Header, body: &[u8]) -> Result<T, DecodeError> {
    check_opened::<T>(header)?;
    T::decode_body(header.version, body)
}

/// As [`decode_opened`], given the whole envelope `bytes` (whose `header`
/// [`open`] returned) by value: a type that can keep the buffer takes it
/// instead of copying the body ([`Value::decode_body_owned`]).
///
/// # Errors
/// As [`decode_opened`].
pub fn decode_opened_owned<T: Value>(header: Header, bytes: Vec<u8>) -> Result<T, DecodeError> {
    check_opened::<T>(header)?;
    T::decode_body_owned(header.version, bytes, header.len)
}

/// The checks of [`decode_opened`] before the body is read: not chunked,
/// `T`'s codec, a schema version `T` reads. For a reader that lends the
/// body undecoded and must refuse what `T` could not decode.
///
/// ```
/// use serde::{Deserialize, Serialize};
/// use strata_codec::{check_opened, encode, open, value, DecodeError, DecodeOptions, EncodeOptions};
///
/// #[derive(Serialize, Deserialize)]
/// struct Note { text: String }
/// value!(Note: json, version = 1);
///
/// let mut bytes = Vec::new();
/// encode(&b"raw".to_vec(), b"k", EncodeOptions::default(), &mut bytes).unwrap();
/// let (header, body) = open(b"k", &bytes, DecodeOptions::default()).unwrap();
/// check_opened::<Vec<u8>>(header).unwrap();
/// assert_eq!(body, b"raw");
/// assert!(matches!(check_opened::<Note>(header), Err(DecodeError::WrongCodec { .. })));
/// ```
///
/// # Errors
/// [`DecodeError::Chunked`], [`DecodeError::WrongCodec`],
/// [`DecodeError::NewerVersion`].
pub fn check_opened<T: Value>(header: Header) -> Result<(), DecodeError> {
    if header.chunked {
        return Err(DecodeError::Chunked);
    }
    if header.codec != T::CODEC {
        return Err(DecodeError::WrongCodec {
            expected: T::CODEC,
            found: header.codec,
        });
    }
    if header.version > T::VERSION {
        return Err(DecodeError::NewerVersion {
            found: header.version,
            current: T::VERSION,
        });
    }
    Ok(())
}
