//! Limits, their presets, and the one size function.
//!
//! # The size rule
//!
//! Every limit and every quota counts bytes with [`stored_size`]: a row
//! costs the length of its encoded key plus the length of the value bytes
//! stored under it (envelope header and body, or a chunk's bytes, or a
//! manifest). A logical value costs the sum over its rows: the metadata row
//! and every chunk row, each with its own key. A delete costs its key bytes
//! in a batch and frees the row's size from a quota. Nothing is estimated:
//! the sizes are those of the bytes handed to the engine.

use std::fmt;
use std::ops::Range;

use thiserror::Error;

/// The bytes a row occupies: encoded key plus stored value. The one size
/// function of Strata; see the [module docs](self).
#[inline]
pub const fn stored_size(key_len: usize, value_len: usize) -> u64 {
    key_len as u64 + value_len as u64
}

/// Limits an atomic write and a quota scope must respect.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Limits {
    /// Largest encoded key, in bytes.
    pub max_key_bytes: usize,
    /// Largest value stored in one row, in bytes (envelope included).
    pub max_value_bytes: usize,
    /// Most rows written or deleted by one atomic commit.
    pub max_batch_entries: usize,
    /// Most bytes ([`stored_size`] summed) in one atomic commit.
    pub max_batch_bytes: u64,
    /// Most bytes ([`stored_size`] summed) stored in one quota scope.
    pub quota_bytes: u64,
}

const GIB: u64 = 1 << 30;

impl Limits {
    /// The actor-KV limits of `actor-kv-structure.md`: 2,048-byte keys,
    /// 131,072-byte values, 128 entries and 999,424 bytes (976 KiB) per
    /// batch, and a 10 GiB quota per actor (use [`Limits::with_quota`]).
    pub const ACTOR_KV: Self = Self {
        max_key_bytes: 2_048,
        max_value_bytes: 131_072,
        max_batch_entries: 128,
        max_batch_bytes: 999_424,
        quota_bytes: 10 * GIB,
    };

    /// FoundationDB's limits: 10,000-byte keys, 100,000-byte values and
    /// 10,000,000 bytes per transaction; no entry count, no quota.
    pub const FOUNDATIONDB: Self = Self {
        max_key_bytes: 10_000,
        max_value_bytes: 100_000,
        max_batch_entries: usize::MAX,
        max_batch_bytes: 10_000_000,
        quota_bytes: u64::MAX,
    };

    /// What `strata-engine-postgres` stores: keys up to 16,384 bytes,
    /// values up to 256 MiB per row (that engine refuses anything longer
    /// before sending it), and 1 GiB per commit (one transaction, held in
    /// memory by the client while it is sent); no entry count, no quota.
    pub const POSTGRES: Self = Self {
        max_key_bytes: 16_384,
        max_value_bytes: 256 << 20,
        max_batch_entries: usize::MAX,
        max_batch_bytes: 1 << 30,
        quota_bytes: u64::MAX,
    };

    /// No limit at all (every maximum is the largest integer).
    pub const UNBOUNDED: Self = Self {
        max_key_bytes: usize::MAX,
        max_value_bytes: usize::MAX,
        max_batch_entries: usize::MAX,
        max_batch_bytes: u64::MAX,
        quota_bytes: u64::MAX,
    };

    /// These limits with another quota.
    #[must_use]
    pub const fn with_quota(mut self, quota_bytes: u64) -> Self {
        self.quota_bytes = quota_bytes;
        self
    }

    /// Checks one key.
    ///
    /// # Errors
    /// [`LimitExceeded`] naming [`Limit::KeyBytes`].
    pub fn check_key(&self, key: &[u8]) -> Result<(), LimitExceeded> {
        Limit::KeyBytes.check(key.len() as u64, self.max_key_bytes as u64)
    }

    /// Checks one row's key and value sizes (not the batch totals).
    ///
    /// # Errors
    /// [`LimitExceeded`] naming [`Limit::KeyBytes`] or
    /// [`Limit::ValueBytes`].
    pub fn check_row(&self, row: RowSize) -> Result<(), LimitExceeded> {
        Limit::KeyBytes.check(row.key as u64, self.max_key_bytes as u64)?;
        Limit::ValueBytes.check(row.value as u64, self.max_value_bytes as u64)
    }

    /// Checks one stored value (one row's value bytes).
    ///
    /// # Errors
    /// [`LimitExceeded`] naming [`Limit::ValueBytes`].
    pub fn check_value(&self, value: &[u8]) -> Result<(), LimitExceeded> {
        Limit::ValueBytes.check(value.len() as u64, self.max_value_bytes as u64)
    }

    /// Checks a whole atomic batch: every key and value, the entry count and
    /// the byte total. Returns the batch's size.
    ///
    /// # Errors
    /// The first limit the batch breaks.
    pub fn check_batch<I>(&self, rows: I) -> Result<BatchSize, LimitExceeded>
    where
        I: IntoIterator<Item = RowSize>,
    {
        let mut total = BatchSize::default();
        for row in rows {
            self.check_row(row)?;
            total.add(row);
        }
        self.check_batch_size(total)?;
        Ok(total)
    }

    /// Checks a batch's totals only: its entry count and byte total. For
    /// a caller that checks each row with [`Limits::check_row`] as it
    /// counts it with [`BatchSize::add`], and so keeps no list of rows.
    ///
    /// ```
    /// use strata_codec::{BatchSize, Limit, Limits, RowSize};
    ///
    /// let limits = Limits { max_batch_entries: 2, ..Limits::UNBOUNDED };
    /// let mut total = BatchSize::default();
    /// for row in [RowSize::put(b"a", b"1"), RowSize::delete(b"b")] {
    ///     limits.check_row(row)?;
    ///     total.add(row);
    /// }
    /// limits.check_batch_size(total)?;
    /// total.add(RowSize::delete(b"c"));
    /// assert_eq!(limits.check_batch_size(total).unwrap_err().limit, Limit::BatchEntries);
    /// # Ok::<(), strata_codec::LimitExceeded>(())
    /// ```
    ///
    /// # Errors
    /// [`LimitExceeded`] naming [`Limit::BatchEntries`] or
    /// [`Limit::BatchBytes`].
    pub fn check_batch_size(&self, total: BatchSize) -> Result<(), LimitExceeded> {
        Limit::BatchEntries.check(total.entries as u64, self.max_batch_entries as u64)?;
        Limit::BatchBytes.check(total.bytes, self.max_batch_bytes)
    }

    /// Checks that a scope using `used` bytes may grow to `used + growth`.
    /// Negative growth (a scope that shrinks) always passes.
    ///
    /// # Errors
    /// [`LimitExceeded`] naming [`Limit::Quota`], whose `size` is the usage
    /// the write would reach.
    pub fn check_quota(&self, used: u64, growth: i64) -> Result<(), LimitExceeded> {
        let after = used.saturating_add_signed(growth);
        if growth <= 0 {
            return Ok(());
        }
        Limit::Quota.check(after, self.quota_bytes)
    }

    /// Splits a sequence of rows into consecutive groups that each pass
    /// [`Limits::check_batch`], greedily, in order. The groups are **not**
    /// atomic together; this is for writers that say so.
    ///
    /// # Errors
    /// [`LimitExceeded`] for a row that breaks a limit on its own (its key,
    /// its value, or the batch byte limit by itself).
    pub fn plan_batches(&self, rows: &[RowSize]) -> Result<Vec<Range<usize>>, LimitExceeded> {
        let mut groups = Vec::new();
        let mut start = 0;
        let mut current = BatchSize::default();
        for (i, &row) in rows.iter().enumerate() {
            self.check_batch([row])?;
            let fits = current.entries < self.max_batch_entries
                && current.bytes + row.size() <= self.max_batch_bytes;
            if !fits {
                groups.push(start..i);
                start = i;
                current = BatchSize::default();
            }
            current.add(row);
        }
        if start < rows.len() {
            groups.push(start..rows.len());
        }
        Ok(groups)
    }
}

/// The key and value lengths of one row of a batch (value 0 for a delete).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct RowSize {
    /// Encoded key length.
    pub key: usize,
    /// Stored value length; 0 for a delete.
    pub value: usize,
}

impl RowSize {
    /// A put of `key` and `value`.
    pub fn put(key: &[u8], value: &[u8]) -> Self {
        Self {
            key: key.len(),
            value: value.len(),
        }
    }

    /// A delete of `key`.
    pub fn delete(key: &[u8]) -> Self {
        Self {
            key: key.len(),
            value: 0,
        }
    }

    /// Its [`stored_size`].
    pub const fn size(self) -> u64 {
        stored_size(self.key, self.value)
    }
}

/// Entry count and byte total of a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct BatchSize {
    /// Rows.
    pub entries: usize,
    /// Sum of [`stored_size`].
    pub bytes: u64,
}

impl BatchSize {
    /// Counts one more row: an entry, and its [`RowSize::size`] in bytes
    /// (saturating).
    pub fn add(&mut self, row: RowSize) {
        self.entries += 1;
        self.bytes = self.bytes.saturating_add(row.size());
    }
}

/// Which limit was broken.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Limit {
    /// [`Limits::max_key_bytes`].
    KeyBytes,
    /// [`Limits::max_value_bytes`].
    ValueBytes,
    /// [`Limits::max_batch_entries`].
    BatchEntries,
    /// [`Limits::max_batch_bytes`].
    BatchBytes,
    /// [`Limits::quota_bytes`].
    Quota,
}

impl Limit {
    fn check(self, size: u64, max: u64) -> Result<(), LimitExceeded> {
        if size <= max {
            Ok(())
        } else {
            Err(LimitExceeded {
                limit: self,
                size,
                max,
            })
        }
    }
}

impl fmt::Display for Limit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::KeyBytes => "key size (bytes)",
            Self::ValueBytes => "value size (bytes)",
            Self::BatchEntries => "batch entries",
            Self::BatchBytes => "batch size (bytes)",
            Self::Quota => "quota (bytes)",
        })
    }
}

/// A limit was broken: which, by how much, against what maximum.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Error)]
#[error("{limit} limit exceeded: {size} > {max}")]
pub struct LimitExceeded {
    /// Which of the limits was exceeded.
    pub limit: Limit,
    /// The size the write has (or would reach, for a quota).
    pub size: u64,
    /// The maximum allowed.
    pub max: u64,
}
