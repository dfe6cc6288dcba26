//! Chunking: a value larger than one row becomes a metadata row plus
//! ordered data rows, and back. Pure: it plans rows and checks rows; the
//! caller reads and writes them.
//!
//! # Rows
//!
//! For a logical key `k` a [`ChunkLayout`] names two kinds of rows:
//!
//! - the **metadata row** at `meta_key(k)`: either the value's envelope
//!   itself (an *inline* value, small enough for one row) or a chunk
//!   [`Manifest`] in an envelope with the `chunked` flag;
//! - **chunk rows** at `chunk_key(k, 0..n)`: consecutive slices of the
//!   value's envelope bytes, each `chunk_size` long but the last.
//!
//! [`TupleChunkLayout`] is one layout for keys under a tuple subspace: the
//! metadata at `prefix / (k, METADATA)` and chunk `i` at
//! `prefix / (k, DATA, i)`, all tuple-packed, `k` as a tuple byte string,
//! with `METADATA` and `DATA` two tuple codes the caller picks. A system
//! with its own row layout implements [`ChunkLayout`] for it: the store's
//! chunks in its system keyspace do, and so does the actor-KV schema
//! (`strata-schemas`), whose rows follow rivet's bytes rather than this
//! layout.
//!
//! # Integrity
//!
//! The manifest holds the total length, the chunk count and size, and a
//! CRC-32 of the whole value; [`ChunkPlanner::assemble`] checks each of
//! them, and that the chunks arrive complete and in order, with a typed
//! [`ChunkError`] for a missing, extra, reordered or foreign chunk. The
//! manifest's own envelope checksum covers the logical key.

use std::borrow::Cow;

use strata_keys::{KeyRange, Subspace, tuple};
use thiserror::Error;

use crate::envelope::{self, Codec, DecodeError, EncodeOptions};
use crate::limits::{BatchSize, LimitExceeded, Limits, RowSize};

/// Length of an encoded manifest body.
pub const MANIFEST_LEN: usize = 20;

/// Where the rows of a chunked value live.
pub trait ChunkLayout {
    /// Appends the metadata row's key for logical key `key`.
    fn meta_key(&self, key: &[u8], out: &mut Vec<u8>);
    /// Appends the key of chunk `index` of `key`. Chunk keys of one logical
    /// key must sort by index.
    fn chunk_key(&self, key: &[u8], index: u32, out: &mut Vec<u8>);
    /// The index of `row_key` if it is a chunk key of `key`.
    fn chunk_index(&self, key: &[u8], row_key: &[u8]) -> Option<u32>;
    /// The range of every chunk key of `key` with index `from` or more.
    fn chunks_from(&self, key: &[u8], from: u32) -> KeyRange;
}

/// A tuple layout: `prefix / (k, METADATA)` and `prefix / (k, DATA,
/// index)`. See the [module docs](self).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TupleChunkLayout {
    prefix: Subspace,
    metadata: i64,
    data: i64,
}

impl TupleChunkLayout {
    /// A layout under `prefix` with the tuple codes of `METADATA` and `DATA`.
    ///
    /// # Errors
    /// [`ChunkError::InvalidLayout`] when the two codes are equal: the
    /// metadata key would then be a prefix of the chunk keys.
    pub fn new(prefix: Subspace, metadata: i64, data: i64) -> Result<Self, ChunkError> {
        if metadata == data {
            return Err(ChunkError::InvalidLayout);
        }
        Ok(Self {
            prefix,
            metadata,
            data,
        })
    }

    fn data_prefix(&self, key: &[u8]) -> Vec<u8> {
        self.prefix.pack(&(key, self.data))
    }
}

impl ChunkLayout for TupleChunkLayout {
    fn meta_key(&self, key: &[u8], out: &mut Vec<u8>) {
        out.extend_from_slice(self.prefix.bytes());
        tuple::pack_into(&(key, self.metadata), out);
    }

    fn chunk_key(&self, key: &[u8], index: u32, out: &mut Vec<u8>) {
        out.extend_from_slice(self.prefix.bytes());
        tuple::pack_into(&(key, self.data, index), out);
    }

    fn chunk_index(&self, key: &[u8], row_key: &[u8]) -> Option<u32> {
        let rest = row_key.strip_prefix(self.data_prefix(key).as_slice())?;
        tuple::unpack::<(u32,)>(rest).ok().map(|(i,)| i)
    }

    fn chunks_from(&self, key: &[u8], from: u32) -> KeyRange {
        let mut start = Vec::new();
        self.chunk_key(key, from, &mut start);
        let mut end = self.data_prefix(key);
        end.push(0xFF);
        KeyRange {
            start,
            end: Some(end),
        }
    }
}

/// What a chunked value's metadata row records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Manifest {
    /// Length of the whole value (its envelope bytes).
    pub total_len: u64,
    /// Number of chunk rows.
    pub chunk_count: u32,
    /// Length of every chunk but the last.
    pub chunk_size: u32,
    /// CRC-32 of the whole value.
    pub checksum: u32,
}

impl Manifest {
    /// The 20-byte body: `total_len` u64, `chunk_count`, `chunk_size`,
    /// `checksum` u32, all big-endian.
    pub fn to_bytes(&self) -> [u8; MANIFEST_LEN] {
        let mut b = [0; MANIFEST_LEN];
        b[..8].copy_from_slice(&self.total_len.to_be_bytes());
        b[8..12].copy_from_slice(&self.chunk_count.to_be_bytes());
        b[12..16].copy_from_slice(&self.chunk_size.to_be_bytes());
        b[16..].copy_from_slice(&self.checksum.to_be_bytes());
        b
    }

    /// Reads a body written by [`Manifest::to_bytes`], checking that the
    /// count agrees with the length and size.
    ///
    /// # Errors
    /// [`ChunkError::BadManifest`].
    pub fn from_bytes(body: &[u8]) -> Result<Self, ChunkError> {
        let b: &[u8; MANIFEST_LEN] = body.try_into().map_err(|_| ChunkError::BadManifest)?;
        let u32_at = |i: usize| u32::from_be_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        let m = Self {
            total_len: u64::from_be_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]),
            chunk_count: u32_at(8),
            chunk_size: u32_at(12),
            checksum: u32_at(16),
        };
        let expected = m.total_len.div_ceil(u64::from(m.chunk_size.max(1)));
        if m.chunk_size == 0 || u64::from(m.chunk_count) != expected {
            return Err(ChunkError::BadManifest);
        }
        Ok(m)
    }
}

/// What the metadata row held before a write, as far as the caller knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Previous {
    /// Not read: stale chunks are removed with a range delete.
    Unknown,
    /// No value.
    Absent,
    /// An inline value: no chunk rows.
    Inline,
    /// A chunked value with this many chunks.
    Chunked {
        /// Chunk rows of the old value.
        chunk_count: u32,
    },
}

/// One row to write. The value borrows from the planned value where it can.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row<'v> {
    /// The row's key.
    pub key: Vec<u8>,
    /// The row's value.
    pub value: Cow<'v, [u8]>,
}

/// A row or rows to delete.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stale {
    /// One key.
    Key(Vec<u8>),
    /// Every key in a range.
    Range(KeyRange),
}

impl Stale {
    /// Its size for batch limits: a key's length, or both bounds of a range.
    pub fn row_size(&self) -> RowSize {
        match self {
            Self::Key(k) => RowSize::delete(k),
            Self::Range(r) => RowSize {
                key: r.start.len() + r.end.as_ref().map_or(0, Vec::len),
                value: 0,
            },
        }
    }
}

/// The rows one write of a value puts and deletes, to be applied in one
/// atomic commit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WritePlan<'v> {
    /// Rows to put: the metadata row first, then chunks in order.
    pub puts: Vec<Row<'v>>,
    /// Chunk rows of the old value that the new one does not overwrite.
    pub deletes: Vec<Stale>,
}

impl WritePlan<'_> {
    /// The sizes of every mutation, puts then deletes.
    pub fn row_sizes(&self) -> impl Iterator<Item = RowSize> + '_ {
        self.puts
            .iter()
            .map(|r| RowSize::put(&r.key, &r.value))
            .chain(self.deletes.iter().map(Stale::row_size))
    }

    /// Bytes the value occupies once written: [`stored_size`](crate::stored_size)
    /// summed over the rows put.
    pub fn stored_bytes(&self) -> u64 {
        self.puts
            .iter()
            .map(|r| RowSize::put(&r.key, &r.value).size())
            .sum()
    }

    /// Checks the whole plan as one atomic batch.
    ///
    /// # Errors
    /// The first limit broken.
    pub fn check(&self, limits: &Limits) -> Result<BatchSize, LimitExceeded> {
        limits.check_batch(self.row_sizes())
    }
}

/// Why a value could not be chunked or assembled.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum ChunkError {
    /// The chunk size is zero or above `u32::MAX`.
    #[error("chunk size must be between 1 and 2^32 - 1 bytes")]
    InvalidChunkSize,
    /// The layout's metadata and data codes are equal.
    #[error("metadata and data tags must differ")]
    InvalidLayout,
    /// The value needs more than `u32::MAX` chunks.
    #[error("value of {len} bytes needs more than 2^32 - 1 chunks")]
    TooLarge {
        /// Value length.
        len: usize,
    },
    /// The value to store is not an envelope (or is a chunk manifest).
    #[error("the value to store is not a value envelope")]
    NotAnEnvelope(#[source] DecodeError),
    /// The metadata row is not a valid envelope.
    #[error("the metadata row is not a valid envelope")]
    Meta(#[source] DecodeError),
    /// The manifest body is malformed or inconsistent.
    #[error("malformed chunk manifest")]
    BadManifest,
    /// A chunk is missing: the next row is a later chunk, or rows ran out.
    #[error("chunk {index} is missing")]
    MissingChunk {
        /// The first missing index.
        index: u32,
    },
    /// A chunk arrived after a later one, or twice.
    #[error("chunk {found} arrived where chunk {expected} was due")]
    OutOfOrder {
        /// The index due.
        expected: u32,
        /// The index found.
        found: u32,
    },
    /// A chunk beyond the manifest's count is present (a stale chunk).
    #[error("chunk {index} is beyond the manifest's {count} chunks")]
    ExtraChunk {
        /// Position of the unexpected chunk, counting from 0.
        index: u32,
        /// The manifest's count.
        count: u32,
    },
    /// A row that is not a chunk of this key.
    #[error("row is not a chunk of this key")]
    ForeignRow,
    /// A chunk has the wrong length.
    #[error("chunk {index} is {len} bytes, expected {expected}")]
    ChunkLength {
        /// Position of the chunk with the wrong length, counting from 0.
        index: u32,
        /// Its length.
        len: usize,
        /// The length the manifest implies.
        expected: usize,
    },
    /// The assembled value's CRC-32 differs from the manifest's.
    #[error("assembled value checksum {computed:#010x} differs from {stored:#010x}")]
    Checksum {
        /// From the manifest.
        stored: u32,
        /// Of the assembled bytes.
        computed: u32,
    },
}

/// Plans chunked writes and assembles chunked reads for one layout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChunkPlanner<L> {
    layout: L,
    chunk_size: usize,
    inline_max: Option<usize>,
    checksum: bool,
}

impl<L: ChunkLayout> ChunkPlanner<L> {
    /// A planner storing values up to `chunk_size` bytes inline in the
    /// metadata row and larger ones in chunks of `chunk_size`.
    ///
    /// # Errors
    /// [`ChunkError::InvalidChunkSize`].
    pub fn new(layout: L, chunk_size: usize) -> Result<Self, ChunkError> {
        if chunk_size == 0 || u32::try_from(chunk_size).is_err() {
            return Err(ChunkError::InvalidChunkSize);
        }
        Ok(Self {
            layout,
            chunk_size,
            inline_max: Some(chunk_size),
            checksum: true,
        })
    }

    /// Values of at most `bytes` are stored inline.
    #[must_use]
    pub fn inline_up_to(mut self, bytes: usize) -> Self {
        self.inline_max = Some(bytes);
        self
    }

    /// Every value is chunked, however small (a metadata row and at least
    /// one chunk).
    #[must_use]
    pub fn always_chunked(mut self) -> Self {
        self.inline_max = None;
        self
    }

    /// Whether manifests carry an envelope checksum (default: yes).
    #[must_use]
    pub fn manifest_checksum(mut self, on: bool) -> Self {
        self.checksum = on;
        self
    }

    /// The row layout chunks are written in (key of each chunk, manifest row).
    pub fn layout(&self) -> &L {
        &self.layout
    }

    /// Bytes of value per data row; the last row may hold fewer.
    pub fn chunk_size(&self) -> usize {
        self.chunk_size
    }

    /// The key of `key`'s metadata row.
    pub fn meta_key(&self, key: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        self.layout.meta_key(key, &mut out);
        out
    }

    /// The rows that store `value` (an encoded envelope) under logical
    /// `key`, and the deletes of chunks the old value leaves behind.
    ///
    /// # Errors
    /// [`ChunkError::NotAnEnvelope`] when `value`'s header does not parse or
    /// is a chunk manifest (it would make the metadata row unreadable), and
    /// [`ChunkError::TooLarge`].
    pub fn plan_write<'v>(
        &self,
        key: &[u8],
        value: &'v [u8],
        previous: Previous,
    ) -> Result<WritePlan<'v>, ChunkError> {
        let header = envelope::Header::read(value).map_err(ChunkError::NotAnEnvelope)?;
        if header.chunked {
            return Err(ChunkError::NotAnEnvelope(DecodeError::Chunked));
        }
        let meta_key = self.meta_key(key);
        if self.inline_max.is_some_and(|max| value.len() <= max) {
            return Ok(WritePlan {
                puts: vec![Row {
                    key: meta_key,
                    value: Cow::Borrowed(value),
                }],
                deletes: self.stale(key, 0, previous),
            });
        }
        let count = u32::try_from(value.len().div_ceil(self.chunk_size))
            .map_err(|_| ChunkError::TooLarge { len: value.len() })?;
        let manifest = Manifest {
            total_len: value.len() as u64,
            chunk_count: count,
            chunk_size: u32::try_from(self.chunk_size).map_err(|_| ChunkError::InvalidChunkSize)?,
            checksum: crc32fast::hash(value),
        };
        let mut puts = Vec::with_capacity(count as usize + 1);
        puts.push(Row {
            key: meta_key,
            value: Cow::Owned(self.manifest_envelope(key, &manifest, header.expires_at)),
        });
        let mut chunks = value.chunks(self.chunk_size);
        for index in 0..count {
            let mut chunk_key = Vec::new();
            self.layout.chunk_key(key, index, &mut chunk_key);
            puts.push(Row {
                key: chunk_key,
                value: Cow::Borrowed(chunks.next().unwrap_or(&[])),
            });
        }
        if strata_engine::fault_point!("last-chunk-dropped") {
            puts.pop();
        }
        Ok(WritePlan {
            puts,
            deletes: self.stale(key, count, previous),
        })
    }

    /// The deletes that remove `key`'s value: its metadata row and chunks.
    pub fn plan_delete(&self, key: &[u8], previous: Previous) -> Vec<Stale> {
        let mut deletes = vec![Stale::Key(self.meta_key(key))];
        deletes.extend(self.stale(key, 0, previous));
        deletes
    }

    /// Chunk rows with index `from` or more that the old value had.
    fn stale(&self, key: &[u8], from: u32, previous: Previous) -> Vec<Stale> {
        match previous {
            Previous::Absent | Previous::Inline => Vec::new(),
            Previous::Chunked { chunk_count } => (from..chunk_count)
                .map(|i| {
                    let mut k = Vec::new();
                    self.layout.chunk_key(key, i, &mut k);
                    Stale::Key(k)
                })
                .collect(),
            Previous::Unknown => vec![Stale::Range(self.layout.chunks_from(key, from))],
        }
    }

    /// The manifest's envelope carries the value's expiry, so that the
    /// metadata row alone says when a chunked value expires.
    fn manifest_envelope(
        &self,
        key: &[u8],
        manifest: &Manifest,
        expires_at: Option<u64>,
    ) -> Vec<u8> {
        let mut out = Vec::with_capacity(envelope::MAX_HEADER_LEN + MANIFEST_LEN);
        let options = EncodeOptions {
            checksum: self.checksum,
            expires_at,
        };
        // Appending a fixed array to a Vec cannot fail.
        let _ = envelope::encode_parts(Codec::Raw, 1, true, Some(key), options, &mut out, |out| {
            out.extend_from_slice(&manifest.to_bytes());
            Ok(())
        });
        out
    }

    /// What `key`'s metadata row says: `None` for an inline value, the
    /// manifest for a chunked one.
    ///
    /// # Errors
    /// [`ChunkError::Meta`] or [`ChunkError::BadManifest`].
    pub fn read_meta(&self, key: &[u8], meta: &[u8]) -> Result<Option<Manifest>, ChunkError> {
        let (header, body) = envelope::verify(key, meta).map_err(ChunkError::Meta)?;
        if !header.chunked {
            return Ok(None);
        }
        Manifest::from_bytes(body).map(Some)
    }

    /// What the metadata row means for the next write of `key`.
    ///
    /// # Errors
    /// As [`ChunkPlanner::read_meta`].
    pub fn previous(&self, key: &[u8], meta: Option<&[u8]>) -> Result<Previous, ChunkError> {
        Ok(match meta {
            None => Previous::Absent,
            Some(m) => match self.read_meta(key, m)? {
                None => Previous::Inline,
                Some(manifest) => Previous::Chunked {
                    chunk_count: manifest.chunk_count,
                },
            },
        })
    }

    /// Reassembles the value of `key` from its metadata row and the rows of
    /// its chunk range in key order (as a range scan of
    /// [`ChunkLayout::chunks_from`]`(key, 0)` yields them). An inline value
    /// is returned as it is, borrowed.
    ///
    /// # Errors
    /// A [`ChunkError`] naming what is missing, extra, out of order, foreign,
    /// of the wrong length, or corrupt.
    pub fn assemble<'m, I, K, V>(
        &self,
        key: &[u8],
        meta: &'m [u8],
        chunks: I,
    ) -> Result<Cow<'m, [u8]>, ChunkError>
    where
        I: IntoIterator<Item = (K, V)>,
        K: AsRef<[u8]>,
        V: AsRef<[u8]>,
    {
        let (header, body) = envelope::verify(key, meta).map_err(ChunkError::Meta)?;
        if !header.chunked {
            return Ok(Cow::Borrowed(meta));
        }
        let mut out = Vec::new();
        self.assemble_chunks(key, body, chunks, &mut out)?;
        Ok(Cow::Owned(out))
    }

    /// As [`ChunkPlanner::assemble`], appending the value to `out`, a buffer
    /// the caller may reuse across reads (an inline value is copied). On
    /// error `out` is unchanged.
    ///
    /// # Errors
    /// As [`ChunkPlanner::assemble`].
    pub fn assemble_into<I, K, V>(
        &self,
        key: &[u8],
        meta: &[u8],
        chunks: I,
        out: &mut Vec<u8>,
    ) -> Result<(), ChunkError>
    where
        I: IntoIterator<Item = (K, V)>,
        K: AsRef<[u8]>,
        V: AsRef<[u8]>,
    {
        let (header, body) = envelope::verify(key, meta).map_err(ChunkError::Meta)?;
        if !header.chunked {
            out.extend_from_slice(meta);
            return Ok(());
        }
        let start = out.len();
        self.assemble_chunks(key, body, chunks, out)
            .inspect_err(|_| out.truncate(start))
    }

    fn assemble_chunks<I, K, V>(
        &self,
        key: &[u8],
        manifest: &[u8],
        chunks: I,
        out: &mut Vec<u8>,
    ) -> Result<(), ChunkError>
    where
        I: IntoIterator<Item = (K, V)>,
        K: AsRef<[u8]>,
        V: AsRef<[u8]>,
    {
        let m = Manifest::from_bytes(manifest)?;
        let total = usize::try_from(m.total_len).map_err(|_| ChunkError::BadManifest)?;
        let size = m.chunk_size as usize;
        out.reserve(total);
        let mut expected_key = Vec::new();
        let mut rows = chunks.into_iter();
        let mut crc = crc32fast::Hasher::new();
        for index in 0..m.chunk_count {
            expected_key.clear();
            self.layout.chunk_key(key, index, &mut expected_key);
            let (row_key, row_value) = rows.next().ok_or(ChunkError::MissingChunk { index })?;
            if row_key.as_ref() != expected_key.as_slice() {
                return Err(match self.layout.chunk_index(key, row_key.as_ref()) {
                    Some(found) if found > index => ChunkError::MissingChunk { index },
                    Some(found) => ChunkError::OutOfOrder {
                        expected: index,
                        found,
                    },
                    None => ChunkError::ForeignRow,
                });
            }
            let value = row_value.as_ref();
            let due = if index + 1 == m.chunk_count {
                total - size * index as usize
            } else {
                size
            };
            if value.len() != due {
                return Err(ChunkError::ChunkLength {
                    index,
                    len: value.len(),
                    expected: due,
                });
            }
            out.extend_from_slice(value);
            // Hash each chunk while it is still in cache from the copy.
            crc.update(value);
        }
        if let Some((row_key, _)) = rows.next() {
            return Err(match self.layout.chunk_index(key, row_key.as_ref()) {
                Some(index) => ChunkError::ExtraChunk {
                    index,
                    count: m.chunk_count,
                },
                None => ChunkError::ForeignRow,
            });
        }
        let computed = crc.finalize();
        if computed != m.checksum {
            return Err(ChunkError::Checksum {
                stored: m.checksum,
                computed,
            });
        }
        Ok(())
    }
}
