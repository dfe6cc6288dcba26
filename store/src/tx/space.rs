//! Reads and writes of rows in declared spaces, and catalog rows: the
//! transaction side of the extension seam (see [`crate::Space`]).

use std::ops::Bound;

use strata_engine::{
    Engine, Lent, LentRow, Predicate, RangeSpec, ReadError, RowCursor, Snapshot, StampAt,
};
use strata_keys::KeyRange;

use super::{SpaceWrite, Stamped, Tx};
use crate::{RowKind, Space, StoreError, space};

/// Rows of a space read by [`Tx::scan_in`], in scan order.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RawPage {
    /// Key and value of each row.
    pub rows: Vec<(Vec<u8>, Vec<u8>)>,
    /// Whether rows remain after the last one (the limit stopped it).
    pub more: bool,
}

/// A lending cursor over rows of a space, from [`Tx::snapshot_cursor_in`].
#[allow(explicit_outlives_requirements)] // the where clause needs it first
pub struct SpaceCursor<'a, 's, E: Engine + 's>
where
    E::Snapshot<'s>: 'a,
{
    rows: SpaceRows<'a, 's, E>,
}

/// Rows the transaction's own writes merged in, owned.
type Merged = Lent<std::vec::IntoIter<Result<(Vec<u8>, Vec<u8>), ReadError>>>;

enum SpaceRows<'a, 's, E: Engine + 's>
where
    E::Snapshot<'s>: 'a,
{
    /// The engine's own cursor: nothing of this transaction in the range.
    Engine(<E::Snapshot<'s> as Snapshot>::Cursor<'a>),
    /// The snapshot's rows with this transaction's writes, collected.
    Merged(Merged),
}

impl<'a, 's, E: Engine + 's> std::fmt::Debug for SpaceCursor<'a, 's, E>
where
    E::Snapshot<'s>: 'a,
{
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let lends = match self.rows {
            SpaceRows::Engine(_) => "the engine's rows",
            SpaceRows::Merged(_) => "rows merged with the transaction's writes",
        };
        f.debug_struct("SpaceCursor")
            .field("lends", &lends)
            .finish_non_exhaustive()
    }
}

impl<'a, 's, E: Engine + 's> RowCursor for SpaceCursor<'a, 's, E>
where
    E::Snapshot<'s>: 'a,
{
    fn next_row(&mut self) -> Option<LentRow<'_>> {
        match &mut self.rows {
            SpaceRows::Engine(rows) => rows.next_row(),
            SpaceRows::Merged(rows) => rows.next_row(),
        }
    }

    /// The engine's own loop where the rows are the engine's.
    fn try_for_each_row<B, F>(&mut self, f: F) -> Result<std::ops::ControlFlow<B>, ReadError>
    where
        F: FnMut(&[u8], &[u8]) -> std::ops::ControlFlow<B>,
    {
        match &mut self.rows {
            SpaceRows::Engine(rows) => rows.try_for_each_row(f),
            SpaceRows::Merged(rows) => rows.try_for_each_row(f),
        }
    }
}

impl<'s, E: Engine + 's> Tx<'s, E> {
    /// The rows of `space` in `range`, forward or `reverse`, seeing this
    /// transaction's writes, lent one at a time (see
    /// [`RowCursor`]): the rows of [`Tx::snapshot_scan_in`] without a
    /// limit, not collected. Nothing is pinned. When the transaction has
    /// no write in the range, each row is borrowed from the engine's own
    /// buffer, so a reader that stops early reads no further and one that
    /// decodes in place copies nothing; otherwise the merged rows are
    /// collected first.
    ///
    /// ```
    /// use strata_codec::Limits;
    /// use strata_engine::{MemEngine, Profile, RowCursor};
    /// use strata_keys::KeyRange;
    /// use strata_store::{Store, StoreOptions};
    ///
    /// let options = StoreOptions::new(Limits::FOUNDATIONDB).space("queue", Profile::General);
    /// let engine = MemEngine::open(options.keyspace_specs())?;
    /// let store = Store::open(&engine, options)?;
    /// let queue = store.space("queue")?;
    /// store.transact(|tx| tx.put_in(&queue, b"a".to_vec(), b"1".to_vec()))?;
    /// let mut tx = store.begin();
    /// tx.put_in(&queue, b"b".to_vec(), b"2".to_vec())?;
    /// let mut rows = tx.snapshot_cursor_in(&queue, &KeyRange::prefix(&[]), false)?;
    /// let mut keys = Vec::new();
    /// while let Some(row) = rows.next_row() {
    ///     keys.push(row?.0.to_vec());
    /// }
    /// assert_eq!(keys, [b"a".to_vec(), b"b".to_vec()]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// As [`Tx::scan_in`]; an engine failure while reading is an error
    /// item of the cursor.
    pub fn snapshot_cursor_in<'a>(
        &'a mut self,
        space: &Space,
        range: &KeyRange,
        reverse: bool,
    ) -> Result<SpaceCursor<'a, 's, E>, StoreError> {
        let spec = RangeSpec {
            reverse,
            ..RangeSpec::from(range)
        };
        spec.validate()?;
        if self.space_writes_in(space.ks, range).next().is_some() {
            let page = self.scan_space(space, range, None, reverse, false)?;
            let rows: Vec<_> = page.rows.into_iter().map(Ok).collect();
            return Ok(SpaceCursor {
                rows: SpaceRows::Merged(Lent::new(rows.into_iter())),
            });
        }
        let rows = self.snap()?.cursor(space.ks, spec)?;
        Ok(SpaceCursor {
            rows: SpaceRows::Engine(rows),
        })
    }

    /// This transaction's writes of keyspace `ks` in `range`, in key
    /// order.
    fn space_writes_in<'t>(
        &'t self,
        ks: strata_engine::Keyspace,
        range: &KeyRange,
    ) -> impl Iterator<Item = (&'t Vec<u8>, &'t SpaceWrite)> + 't {
        self.space_writes
            .range((
                Bound::Included((ks, range.start.clone())),
                range
                    .end
                    .clone()
                    .map_or(Bound::Unbounded, |e| Bound::Excluded((ks, e))),
            ))
            .take_while(move |((k, _), _)| *k == ks)
            .map(|((_, key), w)| (key, w))
    }

    /// The row at `key` in `space`, seeing this transaction's writes. The
    /// commit fails with a conflict if the row changes before it.
    ///
    /// # Errors
    /// An engine failure.
    pub fn get_in(&mut self, space: &Space, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        if let Some(w) = self.space_writes.get(&(space.ks, key.to_vec())) {
            return Ok(w.value.clone());
        }
        self.read_pinned(space.ks, key)
    }

    /// Makes the commit depend on the row at `key` in `space` being
    /// absent when it commits, without reading it now: the commit fails
    /// with a conflict if the row is there by then. For a write that must
    /// not replace a row (an insert), this costs the engine's one check
    /// in the commit instead of a read now and the same check again; a
    /// later [`Tx::get_in`] of the row in this transaction answers `None`
    /// (what the commit will require).
    ///
    /// ```
    /// use strata_codec::Limits;
    /// use strata_engine::{MemEngine, Profile};
    /// use strata_store::{Store, StoreOptions};
    ///
    /// let options = StoreOptions::new(Limits::FOUNDATIONDB).space("ids", Profile::General);
    /// let store = Store::open(MemEngine::open(options.keyspace_specs())?, options)?;
    /// let ids = store.space("ids")?;
    /// let insert = |value: &[u8]| {
    ///     let mut tx = store.begin();
    ///     tx.expect_absent_in(&ids, b"a")?;
    ///     tx.put_in(&ids, b"a".to_vec(), value.to_vec())?;
    ///     tx.commit()
    /// };
    /// insert(b"first")?;
    /// assert!(insert(b"second").unwrap_err().is_conflict());
    /// assert_eq!(store.begin().get_in(&ids, b"a")?, Some(b"first".to_vec()));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// None yet (the check is the commit's); a `Result` for the engines to
    /// come.
    pub fn expect_absent_in(&mut self, space: &Space, key: &[u8]) -> Result<(), StoreError> {
        match self.pinned.get(space.ks, key) {
            // Read absent already, under a predicate that requires it still.
            Some(None) => return Ok(()),
            // Read present: the commit will fail, as it must.
            Some(Some(_)) => {}
            None => self.pinned.insert(space.ks, key.to_vec(), None),
        }
        self.predicates.push(Predicate::Absent {
            ks: space.ks,
            key: key.to_vec(),
        });
        Ok(())
    }

    /// As [`Tx::get_in`] without a predicate: the row may change before the
    /// commit.
    ///
    /// # Errors
    /// An engine failure.
    pub fn snapshot_get_in(
        &mut self,
        space: &Space,
        key: &[u8],
    ) -> Result<Option<Vec<u8>>, StoreError> {
        if let Some(w) = self.space_writes.get(&(space.ks, key.to_vec())) {
            return Ok(w.value.clone());
        }
        if let Some(v) = self.pinned.get(space.ks, key) {
            return Ok(v.clone());
        }
        Ok(self.snap()?.get(space.ks, key)?)
    }

    /// Up to `limit` rows of `space` in `range` (all without a limit),
    /// forward or `reverse`, seeing this transaction's writes. The part of
    /// the range examined is pinned: the commit fails with a conflict if a
    /// row in it is added, changed or removed before it.
    ///
    /// # Errors
    /// A range with its start above its end, or an engine failure.
    pub fn scan_in(
        &mut self,
        space: &Space,
        range: &KeyRange,
        limit: Option<usize>,
        reverse: bool,
    ) -> Result<RawPage, StoreError> {
        self.scan_space(space, range, limit, reverse, true)
    }

    /// As [`Tx::scan_in`] without predicates: rows added, changed or
    /// removed in the range before the commit do not make it fail.
    ///
    /// # Errors
    /// As [`Tx::scan_in`].
    pub fn snapshot_scan_in(
        &mut self,
        space: &Space,
        range: &KeyRange,
        limit: Option<usize>,
        reverse: bool,
    ) -> Result<RawPage, StoreError> {
        self.scan_space(space, range, limit, reverse, false)
    }

    fn scan_space(
        &mut self,
        space: &Space,
        range: &KeyRange,
        limit: Option<usize>,
        reverse: bool,
        pin: bool,
    ) -> Result<RawPage, StoreError> {
        let ks = space.ks;
        let spec = RangeSpec {
            reverse,
            ..RangeSpec::from(range)
        };
        spec.validate()?;
        let mut pending: Vec<(Vec<u8>, Option<Vec<u8>>)> = self
            .space_writes_in(ks, range)
            .map(|(key, w)| (key.clone(), w.value.clone()))
            .collect();
        if reverse {
            pending.reverse();
        }
        let max = limit.unwrap_or(usize::MAX);
        let snap = self.snap()?;
        let mut stored = snap.range(ks, spec.clone())?.peekable();
        let mut pending = pending.into_iter().peekable();
        let before = |a: &[u8], b: &[u8]| if reverse { a > b } else { a < b };
        let mut seen = Vec::new();
        let mut rows = Vec::new();
        let mut more = false;
        let mut last: Option<Vec<u8>> = None;
        loop {
            let take_pending = match (stored.peek(), pending.peek()) {
                (None, None) => break,
                (Some(Ok((sk, _))), Some((pk, _))) => !before(sk, pk),
                (None, Some(_)) => true,
                (Some(_), _) => false,
            };
            let (key, value) = if take_pending {
                let Some((pk, pv)) = pending.next() else {
                    break;
                };
                // The pending write shadows the stored row; both examined.
                if let Some(Ok((sk, _))) = stored.peek()
                    && *sk == pk
                    && let Some(Ok(row)) = stored.next()
                    && pin
                {
                    seen.push(row);
                }
                (pk, pv)
            } else {
                let Some(row) = stored.next() else { break };
                let (k, v) = row?;
                // Only a pinned scan needs what it examined (a copy).
                if pin {
                    seen.push((k.clone(), v.clone()));
                }
                (k, Some(v))
            };
            // Every entry examined is inside the pinned part, the one that
            // shows there is more included. (A row's key is taken from
            // `rows` at the end instead of being copied each time.)
            let Some(value) = value else {
                last = Some(key);
                continue;
            };
            if rows.len() == max {
                more = true;
                last = Some(key);
                break;
            }
            rows.push((key, value));
            last = None;
        }
        drop(stored);
        let last = last.or_else(|| rows.last().map(|(k, _)| k.clone()));
        let (lo, hi) = match (last, more) {
            (Some(last), true) if reverse => (Bound::Included(last), spec.end),
            (Some(last), true) => (spec.start, Bound::Included(last)),
            _ => (spec.start, spec.end),
        };
        if pin {
            self.pin_range(ks, lo, hi, seen);
        }
        Ok(RawPage { rows, more })
    }

    /// Puts `value` at `key` in `space`, in this transaction's commit.
    ///
    /// # Errors
    /// [`StoreError::Limit`] when the row alone breaks the key or value
    /// limit; nothing is buffered then. The batch limits and the quota are
    /// checked at commit.
    pub fn put_in(
        &mut self,
        space: &Space,
        key: Vec<u8>,
        value: Vec<u8>,
    ) -> Result<(), StoreError> {
        self.check_space_row(&key, Some(&value))?;
        self.space_writes.insert(
            (space.ks, key),
            SpaceWrite {
                value: Some(value),
                charged: space.charged,
            },
        );
        Ok(())
    }

    /// Deletes the row at `key` in `space`, in this transaction's commit.
    ///
    /// # Errors
    /// [`StoreError::Limit`] when the key breaks the key limit.
    pub fn delete_in(&mut self, space: &Space, key: Vec<u8>) -> Result<(), StoreError> {
        self.check_space_row(&key, None)?;
        self.space_writes.insert(
            (space.ks, key),
            SpaceWrite {
                value: None,
                charged: space.charged,
            },
        );
        Ok(())
    }

    /// Puts `value` at `key` in `space` with the commit's 10-byte
    /// versionstamp written into the key at `offset` (where a packed
    /// incomplete [`Versionstamp`](strata_keys::tuple::Versionstamp) has its
    /// transaction version, as [`Key::pack_into_versionstamped`](strata_keys::Key::pack_into_versionstamped)
    /// returns it): such keys sort in commit order, with no counter and no
    /// read. Not readable in this transaction.
    ///
    /// # Errors
    /// [`StoreError::BadStampOffset`] when the stamp does not fit the key;
    /// [`StoreError::Limit`] when the row breaks the key or value limit.
    pub fn put_versionstamped_in(
        &mut self,
        space: &Space,
        key: Vec<u8>,
        offset: usize,
        value: Vec<u8>,
    ) -> Result<(), StoreError> {
        self.put_stamped_in(space, key, StampAt::Key(offset), value)
    }

    /// As [`Tx::put_versionstamped_in`] with every bit of the stamp
    /// inverted ([`StampAt::KeyInverted`]): such keys sort newest commit
    /// first, as history rows keyed by inverted commit version need.
    ///
    /// # Errors
    /// As [`Tx::put_versionstamped_in`].
    pub fn put_inverted_stamped_in(
        &mut self,
        space: &Space,
        key: Vec<u8>,
        offset: usize,
        value: Vec<u8>,
    ) -> Result<(), StoreError> {
        self.put_stamped_in(space, key, StampAt::KeyInverted(offset), value)
    }

    fn put_stamped_in(
        &mut self,
        space: &Space,
        key: Vec<u8>,
        at: StampAt,
        value: Vec<u8>,
    ) -> Result<(), StoreError> {
        let (StampAt::Key(offset) | StampAt::KeyInverted(offset) | StampAt::Value(offset)) = at;
        if offset.checked_add(10).is_none_or(|end| end > key.len()) {
            return Err(StoreError::BadStampOffset {
                offset,
                len: key.len(),
            });
        }
        self.check_space_row(&key, Some(&value))?;
        self.stamped.push(Stamped {
            ks: space.ks,
            charged: space.charged,
            key,
            at,
            value,
            key_type: None,
        });
        Ok(())
    }

    /// Records `(kind, name)` in the store's catalog with a format version
    /// and `detail` bytes, in this transaction's commit (see
    /// [`crate::Space`]).
    ///
    /// # Errors
    /// [`StoreError::Limit`] when the row breaks the key or value limit.
    pub fn catalog_put(
        &mut self,
        kind: &str,
        name: &str,
        version: u64,
        detail: &[u8],
    ) -> Result<(), StoreError> {
        let key = space::catalog_key(kind, name);
        let value = space::catalog_value(version, detail);
        self.check_space_row(&key, Some(&value))?;
        self.space_writes.insert(
            (self.store.system, key),
            SpaceWrite {
                value: Some(value),
                charged: false,
            },
        );
        Ok(())
    }

    /// Removes `(kind, name)` from the store's catalog in this
    /// transaction's commit (nothing happens if it is not there).
    ///
    /// # Errors
    /// [`StoreError::Limit`] when the key breaks the key limit.
    pub fn catalog_delete(&mut self, kind: &str, name: &str) -> Result<(), StoreError> {
        let key = space::catalog_key(kind, name);
        self.check_space_row(&key, None)?;
        self.space_writes.insert(
            (self.store.system, key),
            SpaceWrite {
                value: None,
                charged: false,
            },
        );
        Ok(())
    }

    /// Checks one row against the key and value limits.
    fn check_space_row(&self, key: &[u8], value: Option<&[u8]>) -> Result<(), StoreError> {
        let size = match value {
            Some(v) => strata_codec::RowSize::put(key, v),
            None => strata_codec::RowSize::delete(key),
        };
        self.store
            .options
            .limits
            .check_row(size)
            .map_err(|e| StoreError::row_limit(e, None, RowKind::Space, key))
    }

    /// A system-keyspace row, pinned.
    pub(crate) fn read_system_row(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        if let Some(w) = self.space_writes.get(&(self.store.system, key.to_vec())) {
            return Ok(w.value.clone());
        }
        self.read_pinned(self.store.system, key)
    }
}
