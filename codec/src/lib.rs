//! Value envelopes for ordered key-value stores: a stable, versioned byte
//! format, limits enforced with one size function, and chunking of values
//! larger than one row. Pure: no I/O, no clock (readings are passed in).
//!
//! ```
//! use serde::{Deserialize, Serialize};
//! use strata_codec::{decode, encode, value, EncodeOptions, Limits};
//!
//! #[derive(Serialize, Deserialize, Debug, PartialEq)]
//! struct Activation { status: String, duration_ms: u64 }
//! value!(Activation: json, version = 1);
//!
//! let key = b"cs:act:t_abc123:uuid:meta";
//! let mut bytes = Vec::new();
//! let options = EncodeOptions { expires_at: Some(1_730_604_800_000), ..Default::default() };
//! encode(&Activation { status: "success".into(), duration_ms: 12 }, key, options, &mut bytes)?;
//! Limits::ACTOR_KV.check_value(&bytes)?;
//!
//! let back: Activation = decode(key, &bytes)?;
//! assert_eq!(back.duration_ms, 12);
//! // The checksum covers the key: the same bytes under another key fail.
//! assert!(decode::<Activation>(b"cs:act:t_abc123:other:meta", &bytes).is_err());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Envelope format 1
//!
//! | offset | length | field | meaning |
//! |---|---|---|---|
//! | 0 | 1 | format | `0xE1` ([`FORMAT_V1`]); anything else is [`DecodeError::UnknownFormat`] |
//! | 1 | 1 | codec | `0` raw bytes, `1` postcard, `2` JSON ([`Codec`]) |
//! | 2 | 2 | schema version | `u16` big-endian, the value type's [`Value::VERSION`] when written |
//! | 4 | 1 | flags | bit 0 `expires`, bit 1 `checksum`, bit 2 `chunked`, bit 3 `keyless` (only with `checksum`); other bits must be 0 |
//! | 5 | 8 | `expires_at` | only with `expires`: Unix milliseconds, `u64` big-endian |
//! | 5 or 13 | 4 | checksum | only with `checksum`: CRC-32, big-endian, see below |
//! | header end | rest | body | the value in its codec; with `chunked`, a chunk [`Manifest`] |
//!
//! The header is 5 to 17 bytes. The checksum is CRC-32 (the IEEE 802.3 polynomial, as in zlib and gzip) over
//! the **logical key** the value is stored under, then the header bytes
//! before the checksum field, then the body; so a flipped bit anywhere, or a
//! value copied under another key, fails with
//! [`DecodeError::ChecksumMismatch`], whichever engine stored it. The key
//! itself is not stored.
//!
//! With `keyless` ([`FLAG_KEYLESS`], written by [`encode_keyless`] for a
//! value whose key is versionstamped, so not known when it is encoded) the
//! checksum leaves out the key: damage is caught, a copy under another key
//! is not. A `keyless` flag without `checksum` is [`DecodeError::UnknownFlags`].
//!
//! Decoding checks, in order: header, checksum, `chunked`, codec
//! ([`DecodeError::WrongCodec`]), schema version (newer is
//! [`DecodeError::NewerVersion`]; older goes through the type's migration or
//! is [`DecodeError::NoMigration`]), then the body (postcard and JSON errors
//! keep their source; trailing bytes after a postcard body are an error).
//!
//! # Schema evolution
//!
//! A value type declares its codec, its current version and one migration
//! per older version it can still read ([`value!`]); see [`Value`].
//!
//! # Expiry
//!
//! An envelope may carry `expires_at`; [`Header::is_expired`] compares it
//! with a clock reading the caller passes in (expired from `expires_at` on).
//!
//! # Limits and the size function
//!
//! [`Limits`] with presets [`Limits::ACTOR_KV`], [`Limits::FOUNDATIONDB`],
//! [`Limits::POSTGRES`] and [`Limits::UNBOUNDED`]; every check counts bytes with [`stored_size`]
//! (encoded key plus stored value bytes, per row). See [`limits`].
//!
//! # Chunking
//!
//! [`ChunkPlanner`] turns a large envelope into a metadata row and chunk
//! rows under any [`ChunkLayout`] (a tuple layout is provided), and
//! reassembles with typed errors. See [`chunk`].
//!
//! # Non-goals
//!
//! Compression, encryption, and reading or writing an engine: the store
//! applies the plans this crate makes.
#![cfg_attr(docsrs, feature(doc_cfg))]

pub mod chunk;
pub mod envelope;
pub mod limits;

pub use chunk::{
    ChunkError, ChunkLayout, ChunkPlanner, Manifest, Previous, Row, Stale, TupleChunkLayout,
    WritePlan,
};
pub use envelope::{
    ChecksumCheck, Codec, DecodeError, DecodeOptions, EncodeError, EncodeOptions, FLAG_KEYLESS,
    FORMAT_V1, Header, Value, check_opened, decode, decode_opened, decode_opened_owned,
    decode_with, decode_with_header, encode, encode_keyless, open, verify,
};
pub use limits::{BatchSize, Limit, LimitExceeded, Limits, RowSize, stored_size};

/// This crate's README example, compiled and run as a doctest.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
