//! Reads: pinned by predicates, seeing the transaction's own writes.

use std::ops::Bound;

use strata_codec::{Value, decode_with};
use strata_engine::{Engine, Keyspace, Predicate, RangeSpec, Snapshot};
use strata_keys::Key;

use super::{Pending, Tx, counter_value};
use crate::read::{Cursor, Expiring, Page, Scan};
use crate::{Store, StoreError};

impl<'s, E: Engine + 's> Tx<'s, E> {
    /// Reads a row and pins it with a predicate (once per row).
    pub(super) fn read_pinned(
        &mut self,
        ks: Keyspace,
        key: &[u8],
    ) -> Result<Option<Vec<u8>>, StoreError> {
        if let Some(v) = self.pinned.get(ks, key) {
            return Ok(v.clone());
        }
        let value = self.snap()?.get(ks, key)?;
        if strata_engine::fault_point!("reads-not-pinned") && ks == self.store.data {
            return Ok(value);
        }
        self.pin(ks, key.to_vec(), value.clone());
        Ok(value)
    }

    fn pin(&mut self, ks: Keyspace, key: Vec<u8>, value: Option<Vec<u8>>) {
        if self.pinned.contains(ks, &key) {
            return;
        }
        self.predicates.push(Predicate::ValueEquals {
            ks,
            key: key.clone(),
            value: value.clone(),
        });
        self.pinned.insert(ks, key, value);
    }

    pub(super) fn pack<K: Key>(&self, key: &K) -> Result<Vec<u8>, StoreError> {
        self.store.pack_checked(key)
    }

    /// The value of `key` (`None` when absent or expired), seeing this
    /// transaction's writes. The commit fails with a conflict if the value
    /// changes before it.
    ///
    /// # Errors
    /// As [`ReadView::get`](crate::ReadView::get).
    pub fn get<K>(&mut self, key: &K) -> Result<Option<K::Value>, StoreError>
    where
        K: Key,
        K::Value: Value,
    {
        self.read_typed(key, true)
    }

    /// As [`Tx::get`] without a predicate: the value may have changed by
    /// the time the transaction commits (FoundationDB's snapshot read).
    ///
    /// # Errors
    /// As [`Tx::get`].
    pub fn snapshot_get<K>(&mut self, key: &K) -> Result<Option<K::Value>, StoreError>
    where
        K: Key,
        K::Value: Value,
    {
        self.read_typed(key, false)
    }

    /// As [`Tx::get`], with the value's expiry in milliseconds since the
    /// epoch (`None`: it never expires).
    ///
    /// # Errors
    /// As [`Tx::get`].
    pub fn get_with_expiry<K>(&mut self, key: &K) -> Result<Option<Expiring<K::Value>>, StoreError>
    where
        K: Key,
        K::Value: Value,
    {
        self.read_typed_expiring(key, true)
    }

    /// A typed point read: this transaction's write of the key if any,
    /// else the snapshot's row, pinned by a predicate when `pin`.
    fn read_typed<K>(&mut self, key: &K, pin: bool) -> Result<Option<K::Value>, StoreError>
    where
        K: Key,
        K::Value: Value,
    {
        Ok(self.read_typed_expiring(key, pin)?.map(|e| e.value))
    }

    pub(super) fn read_typed_expiring<K>(
        &mut self,
        key: &K,
        pin: bool,
    ) -> Result<Option<Expiring<K::Value>>, StoreError>
    where
        K: Key,
        K::Value: Value,
    {
        let bytes = key.pack().map_err(StoreError::key::<K>)?;
        if let Some(p) = self.writes.get(&bytes) {
            return pending_value::<K, E>(self.store, self.now_ms(), &bytes, p);
        }
        let (now, store) = (self.now_ms(), self.store);
        let meta = if pin {
            self.read_pinned(store.data, &bytes)?
        } else {
            self.snap()?.get(store.data, &bytes)?
        };
        match meta {
            None => Ok(None),
            Some(meta) => store.decode_row_expiring::<K, _>(self.snap()?, &bytes, meta, || now),
        }
    }

    /// The expiry of the live value at `key` (encoded), read from its
    /// header only and pinned: this transaction's write if any, else the
    /// stored row. `None` when absent, expired, or never expiring.
    pub(super) fn current_expiry(&mut self, key: &[u8]) -> Result<Option<u64>, StoreError> {
        let now = self.now_ms();
        if let Some(p) = self.writes.get(key) {
            return Ok(match p {
                Pending::Put { expires_at, .. } => expires_at.filter(|at| *at > now),
                Pending::Delete { .. } => None,
            });
        }
        let row = self.read_pinned(self.store.data, key)?;
        Ok(row.as_deref().and_then(|envelope| {
            strata_codec::Header::read(envelope)
                .ok()
                .and_then(|h| h.expires_at)
                .filter(|at| *at > now)
        }))
    }

    /// The entries of `scan`, seeing this transaction's puts and deletes
    /// (not its counters or versionstamped puts). A row of another key type
    /// is a [`StoreError::Key`] error found from its key, as in
    /// [`ReadView::scan`](crate::ReadView::scan), or with
    /// [`Scan::skip_other_types`] a skipped row counted in
    /// [`Page::skipped`]; skipped rows are pinned like the others. The commit fails with a
    /// conflict if any row in the part of the range the scan examined is
    /// added, changed or removed before it.
    ///
    /// # Errors
    /// A wrong-type key, an undecodable value, or an engine failure.
    pub fn scan<K>(&mut self, scan: &Scan) -> Result<Page<K>, StoreError>
    where
        K: Key,
        K::Value: Value,
    {
        let spec = scan.spec();
        spec.validate()?;
        let data = self.store.data;
        let reverse = scan.is_reverse();
        let pending = self.pending_in(&spec);
        let now = self.now_ms();
        let store = self.store;
        let snap = self.snap()?;
        let mut rows = snap.range(data, spec.clone())?.peekable();
        let mut pending = pending.into_iter().peekable();
        let mut seen: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
        let mut items = Vec::new();
        let mut more = false;
        let mut last_examined: Option<Vec<u8>> = None;
        let mut cursor = None;
        let skip = scan.skips_other_types();
        let mut skipped = 0;
        let before = |a: &[u8], b: &[u8]| if reverse { a > b } else { a < b };
        loop {
            let take_pending = match (rows.peek(), pending.peek()) {
                (None, None) => break,
                (Some(Ok((rk, _))), Some((pk, _))) => !before(rk, pk),
                (None, Some(_)) => true,
                (Some(_), _) => false,
            };
            let full = items.len() == scan.max();
            // The key is checked before any value is read: a row of another
            // type is a key error (or, when skipping, a counted skip), never
            // a codec error from decoding a foreign value.
            let (key, typed, value) = if take_pending {
                let Some((pk, p)) = pending.next() else { break };
                // The pending write shadows the stored row; both were examined.
                if let Some(Ok((rk, _))) = rows.peek()
                    && *rk == pk
                    && let Some(Ok(row)) = rows.next()
                {
                    seen.push(row);
                }
                last_examined = Some(pk.clone());
                let typed = match K::unpack(&pk) {
                    Ok(k) => k,
                    Err(_) if skip => {
                        skipped += usize::from(!full);
                        continue;
                    }
                    Err(_) if full => {
                        more = true;
                        break;
                    }
                    Err(e) => return Err(StoreError::key::<K>(e)),
                };
                let value = pending_value::<K, E>(store, now, &pk, &p)?.map(|e| e.value);
                (pk, typed, value)
            } else {
                let Some(row) = rows.next() else { break };
                let (rk, meta) = row?;
                last_examined = Some(rk.clone());
                seen.push((rk.clone(), meta.clone()));
                if full {
                    // Only whether a live row of this type follows matters.
                    if crate::read::live(&meta, now) && !(skip && K::unpack(&rk).is_err()) {
                        more = true;
                        break;
                    }
                    continue;
                }
                let typed = match K::unpack(&rk) {
                    Ok(k) => k,
                    Err(_) if skip => {
                        skipped += 1;
                        continue;
                    }
                    Err(e) => return Err(StoreError::key::<K>(e)),
                };
                let value = store.decode_row::<K, _>(snap, &rk, meta, now)?;
                (rk, typed, value)
            };
            let Some(value) = value else { continue };
            if full {
                more = true;
                break;
            }
            cursor = Some(Cursor(key));
            items.push((typed, value));
        }
        drop(rows);
        let (lo, hi) = match (last_examined, more) {
            (Some(last), true) if reverse => (Bound::Included(last), spec.end),
            (Some(last), true) => (spec.start, Bound::Included(last)),
            _ => (spec.start, spec.end),
        };
        self.pin_examined(lo, hi, seen);
        Ok(Page {
            items,
            more,
            cursor,
            skipped,
        })
    }

    /// This transaction's writes within `spec`, in its direction.
    fn pending_in(&self, spec: &RangeSpec) -> Vec<(Vec<u8>, Pending)> {
        let mut pending = self.writes.cloned_within(&spec.start, &spec.end);
        if spec.reverse {
            pending.reverse();
        }
        pending
    }

    /// Pins the part `[lo, hi]` of the data keyspace a scan examined: each
    /// row seen keeps its value, and every gap between them stays empty.
    fn pin_examined(
        &mut self,
        lo: Bound<Vec<u8>>,
        hi: Bound<Vec<u8>>,
        seen: Vec<(Vec<u8>, Vec<u8>)>,
    ) {
        self.pin_range(self.store.data, lo, hi, seen);
    }

    /// Pins the part `[lo, hi]` of keyspace `ks` a scan examined: each row
    /// seen keeps its value, and every gap between them stays empty.
    pub(super) fn pin_range(
        &mut self,
        data: Keyspace,
        lo: Bound<Vec<u8>>,
        hi: Bound<Vec<u8>>,
        mut seen: Vec<(Vec<u8>, Vec<u8>)>,
    ) {
        let empty = |start, end| Predicate::RangeEmpty {
            ks: data,
            range: RangeSpec {
                start,
                end,
                reverse: false,
                limit: None,
            },
        };
        seen.sort();
        if strata_engine::fault_point!("scan-gaps-not-pinned") {
            for (k, v) in seen {
                self.pin(data, k, Some(v));
            }
            return;
        }
        let mut from = lo;
        for (k, v) in seen {
            self.predicates
                .push(empty(from, Bound::Excluded(k.clone())));
            from = Bound::Excluded(k.clone());
            self.pin(data, k, Some(v));
        }
        self.predicates.push(empty(from, hi));
    }

    /// Reads a data row under a predicate, for the sweeper.
    pub(crate) fn read_data_row(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        self.read_pinned(self.store.data, key)
    }

    /// The counter at `key`, with this transaction's adds. Adds a predicate
    /// on the stored counter (a read conflicts with concurrent adds).
    ///
    /// # Errors
    /// [`StoreError::BadCounter`] when the row is not 8 bytes.
    pub fn counter<K: Key<Value = i64>>(&mut self, key: &K) -> Result<i64, StoreError> {
        let bytes = key.pack().map_err(StoreError::key::<K>)?;
        let base = if matches!(self.writes.get(&bytes), Some(Pending::Delete { .. })) {
            0
        } else {
            if strata_engine::fault_point!("counter-read-not-pinned") {
                let data = self.store.data;
                let row = self.snap()?.get(data, &bytes)?;
                return Ok(counter_value(row.as_deref())?
                    .wrapping_add(self.adds.get(&bytes).map_or(0, |(d, _)| *d)));
            }
            counter_value(self.read_pinned(self.store.data, &bytes)?.as_deref())?
        };
        Ok(base.wrapping_add(self.adds.get(&bytes).map_or(0, |(d, _)| *d)))
    }
}

/// The value a pending write of this transaction gives `key`, with its
/// expiry: `None` for a delete or an expired put.
fn pending_value<K, E>(
    store: &Store<E>,
    now: u64,
    key: &[u8],
    p: &Pending,
) -> Result<Option<Expiring<K::Value>>, StoreError>
where
    K: Key,
    K::Value: Value,
    E: Engine,
{
    match p {
        Pending::Delete { .. } => Ok(None),
        Pending::Put { envelope, .. } => {
            let (value, header) =
                decode_with::<K::Value>(key, envelope, store.options.decode_options())
                    .map_err(StoreError::decode::<K>)?;
            Ok((!header.is_expired(now)).then_some(Expiring {
                value,
                expires_at: header.expires_at,
            }))
        }
    }
}
