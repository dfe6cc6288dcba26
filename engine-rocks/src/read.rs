//! Snapshots and ranges over a RocksDB snapshot.

use std::ops::Bound;

use rocksdb::{ColumnFamily, DB, ReadOptions};
use strata_engine::{Keyspace, RangeSpec, ReadError, RowCursor, Snapshot};

#[allow(clippy::wildcard_imports)]
use super::*;

/// `RangeSpec` bounds as RocksDB's inclusive lower and exclusive upper
/// bound: the least key above `k` is `k ++ 0x00`.
pub(crate) fn rocks_bounds(range: &RangeSpec) -> (Option<Vec<u8>>, Option<Vec<u8>>) {
    let after = |k: &Vec<u8>| {
        let mut next = k.clone();
        next.push(0);
        next
    };
    let lower = match &range.start {
        Bound::Included(k) => Some(k.clone()),
        Bound::Excluded(k) => Some(after(k)),
        Bound::Unbounded => None,
    };
    let upper = match &range.end {
        Bound::Included(k) => Some(after(k)),
        Bound::Excluded(k) => Some(k.clone()),
        Bound::Unbounded => None,
    };
    (lower, upper)
}

pub(crate) fn read_options(range: &RangeSpec) -> (ReadOptions, bool) {
    let (lower, upper) = rocks_bounds(range);
    let empty = matches!((&lower, &upper), (Some(l), Some(u)) if l >= u);
    let mut ro = ReadOptions::default();
    if let Some(l) = lower {
        ro.set_iterate_lower_bound(l);
    }
    if let Some(u) = upper {
        ro.set_iterate_upper_bound(u);
    }
    (ro, empty)
}

/// A consistent view: a RocksDB snapshot.
pub struct RocksSnapshot<'e> {
    pub(crate) engine: &'e RocksEngine,
    pub(crate) snap: rocksdb::Snapshot<'e>,
}

impl RocksSnapshot<'_> {
    pub(crate) fn family(&self, ks: Keyspace) -> Result<&ColumnFamily, ReadError> {
        match self.engine.family(ks) {
            Some(cf) => Ok(cf),
            None => Err(ReadError::UnknownKeyspace(ks)),
        }
    }
}

impl Snapshot for RocksSnapshot<'_> {
    type Range<'s>
        = RocksRange<'s>
    where
        Self: 's;

    type Cursor<'s>
        = RocksRange<'s>
    where
        Self: 's;

    fn version(&self) -> Result<u64, ReadError> {
        let meta = self.engine.meta().map_err(ReadError::Backend)?;
        Ok(self
            .snap
            .get_cf(meta, VERSION)
            .map_err(read_err)?
            .and_then(|v| <[u8; 8]>::try_from(v.as_slice()).ok())
            .map_or(0, u64::from_be_bytes))
    }

    fn get(&self, ks: Keyspace, key: &[u8]) -> Result<Option<Vec<u8>>, ReadError> {
        let cf = self.family(ks)?;
        self.snap.get_cf(cf, key).map_err(read_err)
    }

    fn range(&self, ks: Keyspace, range: RangeSpec) -> Result<RocksRange<'_>, ReadError> {
        let cf = self.family(ks)?;
        range.validate()?;
        let (ro, empty) = read_options(&range);
        let mut it = self.snap.raw_iterator_cf_opt(cf, ro);
        if range.reverse {
            it.seek_to_last();
        } else {
            it.seek_to_first();
        }
        Ok(RocksRange {
            it,
            reverse: range.reverse,
            remaining: if empty {
                0
            } else {
                range.limit.unwrap_or(usize::MAX)
            },
            started: false,
        })
    }

    fn cursor(&self, ks: Keyspace, range: RangeSpec) -> Result<RocksRange<'_>, ReadError> {
        self.range(ks, range)
    }
}

/// A streaming range over a raw RocksDB iterator with bounds.
pub struct RocksRange<'s> {
    pub(crate) it: rocksdb::DBRawIteratorWithThreadMode<'s, DB>,
    pub(crate) reverse: bool,
    pub(crate) remaining: usize,
    pub(crate) started: bool,
}

impl RocksRange<'_> {
    /// Moves to the next row: `Some(Ok(()))` when the iterator holds one.
    #[inline]
    fn step(&mut self) -> Option<Result<(), ReadError>> {
        if self.remaining == 0 {
            return None;
        }
        if self.started {
            if self.reverse {
                self.it.prev();
            } else {
                self.it.next();
            }
        }
        self.started = true;
        if !self.it.valid() {
            self.remaining = 0;
            return self.it.status().err().map(|e| Err(read_err(e)));
        }
        self.remaining -= 1;
        Some(Ok(()))
    }
}

impl Iterator for RocksRange<'_> {
    type Item = Result<(Vec<u8>, Vec<u8>), ReadError>;

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        if let Err(e) = self.step()? {
            return Some(Err(e));
        }
        self.it.item().map(|(k, v)| Ok((k.to_vec(), v.to_vec())))
    }
}

/// The rows lent from RocksDB's own iterator buffer.
impl RowCursor for RocksRange<'_> {
    #[inline]
    fn next_row(&mut self) -> Option<strata_engine::LentRow<'_>> {
        if let Err(e) = self.step()? {
            return Some(Err(e));
        }
        self.it.item().map(Ok)
    }
}
