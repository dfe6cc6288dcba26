//! Snapshots and ranges over one read transaction.

use std::ops::Bound;

use strata_engine::BackendPanic;
use strata_engine::{Keyspace, RangeSpec, ReadError, Snapshot};

#[allow(clippy::wildcard_imports)]
use super::*;

/// Bounds that select nothing (start above end, or equal with one side
/// excluded) are answered without asking redb.
pub(crate) fn is_empty(start: &Bound<Vec<u8>>, end: &Bound<Vec<u8>>) -> bool {
    match (start, end) {
        (Bound::Included(s), Bound::Included(e)) => s > e,
        (Bound::Included(s) | Bound::Excluded(s), Bound::Included(e) | Bound::Excluded(e)) => {
            s >= e
        }
        _ => false,
    }
}

pub(crate) fn as_slices(range: &RangeSpec) -> (Bound<&[u8]>, Bound<&[u8]>) {
    (
        range.start.as_ref().map(Vec::as_slice),
        range.end.as_ref().map(Vec::as_slice),
    )
}

/// A consistent view: one redb read transaction.
pub struct RedbSnapshot<'e> {
    pub(crate) engine: &'e RedbEngine,
    pub(crate) txn: redb::ReadTransaction,
    /// Read from the meta table on first use: most reads never ask.
    pub(crate) version: std::sync::OnceLock<u64>,
}

impl RedbSnapshot<'_> {
    pub(crate) fn table(
        &self,
        ks: Keyspace,
    ) -> Result<redb::ReadOnlyTable<&'static [u8], &'static [u8]>, ReadError> {
        let name = self
            .engine
            .table_name(ks)
            .ok_or(ReadError::UnknownKeyspace(ks))?;
        self.txn.open_table(def(name)).map_err(read_err)
    }
}

impl Snapshot for RedbSnapshot<'_> {
    type Range<'s>
        = RedbRange
    where
        Self: 's;

    fn version(&self) -> Result<u64, ReadError> {
        if let Some(v) = self.version.get() {
            return Ok(*v);
        }
        guarded("a read", ReadError::Corrupt, || self.version_inner())
    }

    fn get(&self, ks: Keyspace, key: &[u8]) -> Result<Option<Vec<u8>>, ReadError> {
        guarded("a read", ReadError::Corrupt, || self.get_inner(ks, key))
    }

    fn range(&self, ks: Keyspace, range: RangeSpec) -> Result<RedbRange, ReadError> {
        guarded("a range", ReadError::Corrupt, || {
            self.range_inner(ks, &range)
        })
    }
}

impl RedbSnapshot<'_> {
    pub(crate) fn version_inner(&self) -> Result<u64, ReadError> {
        let io = |e: redb::Error| read_err(e);
        let meta = self.txn.open_table(META).map_err(|e| io(e.into()))?;
        let v = meta
            .get(VERSION)
            .map_err(|e| io(e.into()))?
            .map_or(0, |g| g.value());
        Ok(*self.version.get_or_init(|| v))
    }

    pub(crate) fn get_inner(&self, ks: Keyspace, key: &[u8]) -> Result<Option<Vec<u8>>, ReadError> {
        let table = self.table(ks)?;
        let value = table.get(key).map_err(read_err)?;
        Ok(value.map(|g| g.value().to_vec()))
    }

    pub(crate) fn range_inner(
        &self,
        ks: Keyspace,
        range: &RangeSpec,
    ) -> Result<RedbRange, ReadError> {
        let table = self.table(ks)?;
        range.validate()?;
        let inner = if is_empty(&range.start, &range.end) {
            None
        } else {
            Some(table.range::<&[u8]>(as_slices(range)).map_err(read_err)?)
        };
        Ok(RedbRange {
            inner,
            reverse: range.reverse,
            remaining: range.limit.unwrap_or(usize::MAX),
        })
    }
}

/// A streaming range: redb's own range iterator, forward or backward.
pub struct RedbRange {
    pub(crate) inner: Option<redb::Range<'static, &'static [u8], &'static [u8]>>,
    pub(crate) reverse: bool,
    pub(crate) remaining: usize,
}

impl Iterator for RedbRange {
    type Item = Result<(Vec<u8>, Vec<u8>), ReadError>;

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        if self.remaining == 0 {
            return None;
        }
        let inner = self.inner.as_mut()?;
        let reverse = self.reverse;
        let row = match BackendPanic::catch("a range", || {
            let row = if reverse {
                inner.next_back()
            } else {
                inner.next()
            }?;
            Some(
                row.map(|(k, v)| (k.value().to_vec(), v.value().to_vec()))
                    .map_err(read_err),
            )
        }) {
            Ok(row) => row?,
            Err(p) => {
                // The iterator's state is not trusted after a panic: end it.
                self.inner = None;
                Err(ReadError::Corrupt(Box::new(p)))
            }
        };
        self.remaining -= 1;
        Some(row)
    }
}
