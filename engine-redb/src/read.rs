//! Snapshots and ranges over one read transaction.

use std::ops::{Bound, ControlFlow};

use strata_engine::BackendPanic;
use strata_engine::{Keyspace, RangeSpec, ReadError, RowCursor, Snapshot};

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

    type Cursor<'s>
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

    fn cursor(&self, ks: Keyspace, range: RangeSpec) -> Result<RedbRange, ReadError> {
        self.range(ks, range)
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
            key: None,
            value: None,
        })
    }
}

/// A key's or value's guard, which holds its page.
type Guard = redb::AccessGuard<'static, &'static [u8]>;

/// A streaming range: redb's own range iterator, forward or backward. As
/// a [`RowCursor`] it lends each row from redb's page.
pub struct RedbRange {
    pub(crate) inner: Option<redb::Range<'static, &'static [u8], &'static [u8]>>,
    pub(crate) reverse: bool,
    pub(crate) remaining: usize,
    /// The row `step` read last: its key's and value's guards, kept
    /// apart (each moved in a few instructions where the pair, 192 bytes
    /// with its result, was moved by a call to `memcpy` each row).
    pub(crate) key: Option<Guard>,
    pub(crate) value: Option<Guard>,
}

impl RedbRange {
    /// Moves to the next row, kept in `key` and `value` (its guards, read
    /// under the panic guard with their slices touched there, so that
    /// lending them later cannot panic). The guards are stored where they
    /// are read: moved out through the panic guard they cost a copy of
    /// their pages' handles each row (measured: a third of a lent scan).
    /// The iterator's item is matched where it was returned, not
    /// unwrapped with `?`, which copied it whole (192 bytes, a call to
    /// `memcpy`) each row: a sixth of the lent scan. (Lending the slices
    /// out of the panic guard, rather than reading them again in
    /// [`RedbRange::row`], measured slower.)
    #[inline]
    fn step(&mut self) -> Option<Result<(), ReadError>> {
        if self.remaining == 0 {
            return None;
        }
        let inner = self.inner.as_mut()?;
        let (key, value) = (&mut self.key, &mut self.value);
        let reverse = self.reverse;
        let row = match BackendPanic::catch("a range", || {
            let row = if reverse {
                inner.next_back()
            } else {
                inner.next()
            };
            match row {
                None => None,
                Some(Ok((k, v))) => {
                    let (k, v) = (key.insert(k), value.insert(v));
                    std::hint::black_box((k.value().len(), v.value().len()));
                    Some(Ok(()))
                }
                Some(Err(e)) => Some(Err(read_err(e))),
            }
        }) {
            Ok(row) => row?,
            Err(p) => {
                // The iterator's state is not trusted after a panic: end it.
                self.inner = None;
                (self.key, self.value) = (None, None);
                Err(ReadError::Corrupt(Box::new(p)))
            }
        };
        self.remaining -= 1;
        Some(row)
    }

    /// The row `step` just kept.
    #[inline]
    fn row(&self) -> Option<(&[u8], &[u8])> {
        Some((self.key.as_ref()?.value(), self.value.as_ref()?.value()))
    }
}

impl Iterator for RedbRange {
    type Item = Result<(Vec<u8>, Vec<u8>), ReadError>;

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        if let Err(e) = self.step()? {
            return Some(Err(e));
        }
        self.row().map(|(k, v)| Ok((k.to_vec(), v.to_vec())))
    }
}

impl RowCursor for RedbRange {
    #[inline]
    fn next_row(&mut self) -> Option<strata_engine::LentRow<'_>> {
        if let Err(e) = self.step()? {
            return Some(Err(e));
        }
        self.row().map(Ok)
    }

    /// The whole loop under one panic guard: redb's iterator and the
    /// rows' slices read inside it, `f` run as the caller's code (its
    /// panic is its own). `next_row` pays the guard each row (measured:
    /// about 3 ns of a 50 ns row).
    #[inline]
    fn try_for_each_row<B, F>(&mut self, mut f: F) -> Result<ControlFlow<B>, ReadError>
    where
        F: FnMut(&[u8], &[u8]) -> ControlFlow<B>,
    {
        let Some(inner) = self.inner.as_mut() else {
            return Ok(ControlFlow::Continue(()));
        };
        // The row `next_row` lent last is done with.
        (self.key, self.value) = (None, None);
        let (reverse, remaining) = (self.reverse, &mut self.remaining);
        let caught = BackendPanic::catch_around("a range", |caller| {
            while *remaining > 0 {
                let row = if reverse {
                    inner.next_back()
                } else {
                    inner.next()
                };
                let Some(row) = row else { break };
                // A row read counts against the limit, as in `step`.
                *remaining -= 1;
                match row {
                    Ok((k, v)) => {
                        let (key, value) = (k.value(), v.value());
                        if let ControlFlow::Break(b) = caller.run(|| f(key, value)) {
                            return Ok(ControlFlow::Break(b));
                        }
                    }
                    Err(e) => return Err(read_err(e)),
                }
            }
            Ok(ControlFlow::Continue(()))
        });
        caught.unwrap_or_else(|p| {
            // The iterator's state is not trusted after a panic: end it.
            self.inner = None;
            Err(ReadError::Corrupt(Box::new(p)))
        })
    }
}
