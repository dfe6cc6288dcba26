//! Transactions: reads that become predicates, writes that become one
//! commit with its chunks, expiry index rows and quota charges.

use std::collections::BTreeMap;
use std::ops::Bound;

use std::borrow::Cow;

use strata_codec::{
    ChunkLayout, EncodeOptions, Header, Previous, Row, RowSize, Stale, Value, WritePlan,
    decode_with, encode, stored_size,
};
use strata_engine::{
    Commit, CommitInfo, Durability, Engine, Keyspace, Mutation, Predicate, RangeSpec, Snapshot,
    StampAt,
};
use strata_keys::Key;

use crate::Store;
use crate::read::{Cursor, Page, Scan};
use crate::{StoreError, layout};

/// A pending write of one data key.
#[derive(Debug, Clone)]
pub(crate) enum Pending {
    /// The value's envelope.
    Put { envelope: Vec<u8>, chunked: bool },
    /// Remove the value (and its chunks).
    Delete { chunked: bool },
}

impl Pending {
    fn chunked(&self) -> bool {
        match self {
            Self::Put { chunked, .. } | Self::Delete { chunked } => *chunked,
        }
    }
}

/// A put whose key receives the commit's versionstamp.
#[derive(Debug, Clone)]
struct Stamped {
    key: Vec<u8>,
    offset: usize,
    value: Vec<u8>,
}

/// An open transaction: reads at one snapshot, writes buffered until
/// [`Tx::commit`].
///
/// Every read (but [`Tx::snapshot_get`]) adds a predicate that the rows it
/// saw are unchanged at commit, so a committed transaction is serializable:
/// it behaves as if it ran alone at its commit version. Reads see the
/// transaction's own writes. Obtain one with
/// [`Store::transact`](crate::Store::transact) (retried on conflict) or
/// [`Store::begin`](crate::Store::begin).
pub struct Tx<'s, E: Engine> {
    store: &'s Store<E>,
    snap: Option<E::Snapshot<'s>>,
    now: u64,
    predicates: Vec<Predicate>,
    /// Rows read under a predicate, as read.
    pinned: BTreeMap<(Keyspace, Vec<u8>), Option<Vec<u8>>>,
    writes: BTreeMap<Vec<u8>, Pending>,
    adds: BTreeMap<Vec<u8>, i64>,
    stamped: Vec<Stamped>,
    /// System-row deletes that need no planning.
    raw: Vec<Mutation>,
    durability: Durability,
}

impl<'s, E: Engine + 's> Tx<'s, E> {
    pub(crate) fn new(store: &'s Store<E>, now: u64) -> Self {
        Self {
            store,
            snap: None,
            now,
            predicates: Vec::new(),
            pinned: BTreeMap::new(),
            writes: BTreeMap::new(),
            adds: BTreeMap::new(),
            stamped: Vec::new(),
            raw: Vec::new(),
            durability: store.options.durability,
        }
    }

    /// The clock reading the transaction treats as now (expiry, TTL).
    pub fn now_ms(&self) -> u64 {
        self.now
    }

    /// Commits with this durability instead of the store's.
    pub fn set_durability(&mut self, durability: Durability) {
        self.durability = durability;
    }

    /// The snapshot, taken at the first read.
    fn snap(&mut self) -> Result<&E::Snapshot<'s>, StoreError> {
        if self.snap.is_none() {
            self.snap = Some(self.store.engine.snapshot()?);
        }
        match &self.snap {
            Some(s) => Ok(s),
            None => unreachable!("set above"),
        }
    }

    /// Reads a row and pins it with a predicate (once per row).
    fn read_pinned(&mut self, ks: Keyspace, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        if let Some(v) = self.pinned.get(&(ks, key.to_vec())) {
            return Ok(v.clone());
        }
        let value = self.snap()?.get(ks, key)?;
        #[cfg(feature = "planted-bugs")]
        if self.store.options.bug(crate::PlantedBug::ReadsNotPinned) && ks == self.store.data {
            return Ok(value);
        }
        self.pin(ks, key.to_vec(), value.clone());
        Ok(value)
    }

    fn pin(&mut self, ks: Keyspace, key: Vec<u8>, value: Option<Vec<u8>>) {
        if self.pinned.contains_key(&(ks, key.clone())) {
            return;
        }
        self.predicates.push(Predicate::ValueEquals {
            ks,
            key: key.clone(),
            value: value.clone(),
        });
        self.pinned.insert((ks, key), value);
    }

    fn pack<K: Key>(&self, key: &K) -> Result<Vec<u8>, StoreError> {
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

    /// A typed point read: this transaction's write of the key if any,
    /// else the snapshot's row, pinned by a predicate when `pin`.
    fn read_typed<K>(&mut self, key: &K, pin: bool) -> Result<Option<K::Value>, StoreError>
    where
        K: Key,
        K::Value: Value,
    {
        let bytes = key.pack().map_err(StoreError::key::<K>)?;
        if let Some(p) = self.writes.get(&bytes) {
            return self.pending_value::<K>(&bytes, p);
        }
        let (now, store) = (self.now, self.store);
        let meta = if pin {
            self.read_pinned(store.data, &bytes)?
        } else {
            self.snap()?.get(store.data, &bytes)?
        };
        match meta {
            None => Ok(None),
            Some(meta) => store.decode_row::<K, _>(self.snap()?, &bytes, &meta, now),
        }
    }

    fn pending_value<K>(&self, key: &[u8], p: &Pending) -> Result<Option<K::Value>, StoreError>
    where
        K: Key,
        K::Value: Value,
    {
        match p {
            Pending::Delete { .. } => Ok(None),
            Pending::Put { envelope, .. } => {
                let (value, header) =
                    decode_with::<K::Value>(key, envelope, self.store.options.decode_options())
                        .map_err(|source| StoreError::Decode {
                            key_type: K::NAME,
                            source,
                        })?;
                Ok((!header.is_expired(self.now)).then_some(value))
            }
        }
    }

    /// The entries of `scan`, seeing this transaction's puts and deletes
    /// (not its counters or versionstamped puts). The commit fails with a
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
        let pending: Vec<(Vec<u8>, Pending)> = {
            let it = self
                .writes
                .range::<Vec<u8>, _>((spec.start.clone(), spec.end.clone()))
                .map(|(k, p)| (k.clone(), p.clone()));
            if reverse {
                it.rev().collect()
            } else {
                it.collect()
            }
        };
        let now = self.now;
        let store = self.store;
        let snap = self.snap()?;
        let mut rows = snap.range(data, spec.clone())?.peekable();
        let mut pending = pending.into_iter().peekable();
        let mut seen: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
        let mut items = Vec::new();
        let mut more = false;
        let mut last_examined: Option<Vec<u8>> = None;
        let mut cursor = None;
        let before = |a: &[u8], b: &[u8]| if reverse { a > b } else { a < b };
        loop {
            let take_pending = match (rows.peek(), pending.peek()) {
                (None, None) => break,
                (Some(Ok((rk, _))), Some((pk, _))) => !before(rk, pk),
                (None, Some(_)) => true,
                (Some(_), _) => false,
            };
            let (key, value) = if take_pending {
                let Some((pk, p)) = pending.next() else { break };
                // The pending write shadows the stored row; both were examined.
                if let Some(Ok((rk, _))) = rows.peek()
                    && *rk == pk
                    && let Some(Ok(row)) = rows.next()
                {
                    seen.push(row);
                }
                last_examined = Some(pk.clone());
                let value = match &p {
                    Pending::Delete { .. } => None,
                    Pending::Put { envelope, .. } => {
                        let (v, header) =
                            decode_with::<K::Value>(&pk, envelope, store.options.decode_options())
                                .map_err(|source| StoreError::Decode {
                                    key_type: K::NAME,
                                    source,
                                })?;
                        (!header.is_expired(now)).then_some(v)
                    }
                };
                (pk, value)
            } else {
                let Some(row) = rows.next() else { break };
                let (rk, meta) = row?;
                last_examined = Some(rk.clone());
                seen.push((rk.clone(), meta.clone()));
                if items.len() == scan.max() {
                    // Only whether a live row follows matters.
                    if crate::read::live(&meta, now) {
                        more = true;
                        break;
                    }
                    continue;
                }
                let value = store.decode_row::<K, _>(snap, &rk, &meta, now)?;
                (rk, value)
            };
            let Some(value) = value else { continue };
            if items.len() == scan.max() {
                more = true;
                break;
            }
            let typed = K::unpack(&key).map_err(StoreError::key::<K>)?;
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
        })
    }

    /// Pins the part `[lo, hi]` of the data keyspace a scan examined: each
    /// row seen keeps its value, and every gap between them stays empty.
    fn pin_examined(
        &mut self,
        lo: Bound<Vec<u8>>,
        hi: Bound<Vec<u8>>,
        mut seen: Vec<(Vec<u8>, Vec<u8>)>,
    ) {
        let data = self.store.data;
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
        #[cfg(feature = "planted-bugs")]
        if self.store.options.bug(crate::PlantedBug::ScanGapsNotPinned) {
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

    /// Writes `value` at `key`.
    ///
    /// # Errors
    /// The key does not pack or breaks the key limit; the value does not
    /// encode, or is larger than the value limit and `K` is not chunked.
    /// (Batch limits and quota are checked at commit.)
    pub fn put<K>(&mut self, key: &K, value: &K::Value) -> Result<(), StoreError>
    where
        K: Key + 'static,
        K::Value: Value,
    {
        self.put_expiring(key, value, None)
    }

    /// Writes `value` at `key`, expiring `ttl_ms` milliseconds after the
    /// transaction's clock reading: reads treat it as absent from then on,
    /// and [`Store::sweep_expired`](crate::Store::sweep_expired) removes it.
    ///
    /// # Errors
    /// As [`Tx::put`].
    pub fn put_with_ttl<K>(
        &mut self,
        key: &K,
        value: &K::Value,
        ttl_ms: u64,
    ) -> Result<(), StoreError>
    where
        K: Key + 'static,
        K::Value: Value,
    {
        self.put_expiring(key, value, Some(self.now.saturating_add(ttl_ms)))
    }

    fn put_expiring<K>(
        &mut self,
        key: &K,
        value: &K::Value,
        expires_at: Option<u64>,
    ) -> Result<(), StoreError>
    where
        K: Key + 'static,
        K::Value: Value,
    {
        let (bytes, pending) = self.store.encode_put(key, value, expires_at)?;
        self.adds.remove(&bytes);
        self.writes.insert(bytes, pending);
        Ok(())
    }

    /// Removes the value at `key` and, if chunked, its chunks.
    ///
    /// # Errors
    /// The key does not pack or breaks the key limit.
    pub fn delete<K: Key + 'static>(&mut self, key: &K) -> Result<(), StoreError> {
        let (bytes, pending) = self.store.encode_delete(key)?;
        self.adds.remove(&bytes);
        self.writes.insert(bytes, pending);
        Ok(())
    }

    /// Queues an encoded write (bulk writer, sweeper).
    pub(crate) fn push_pending(&mut self, key: Vec<u8>, pending: Pending) {
        self.adds.remove(&key);
        self.writes.insert(key, pending);
    }

    /// Queues a raw delete of a system row (a stale expiry entry).
    pub(crate) fn delete_system_row(&mut self, key: Vec<u8>) {
        self.raw.push(Mutation::Delete {
            ks: self.store.system,
            key,
        });
    }

    /// Reads a data row under a predicate, for the sweeper.
    pub(crate) fn read_data_row(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        self.read_pinned(self.store.data, key)
    }

    /// Adds `delta` to the counter at `key` (absent counts as 0), applied
    /// by the engine at commit: concurrent adds do not conflict.
    ///
    /// # Errors
    /// The key does not pack or breaks the key limit.
    pub fn add<K: Key<Value = i64>>(&mut self, key: &K, delta: i64) -> Result<(), StoreError> {
        let bytes = self.pack(key)?;
        let sum = self.adds.entry(bytes).or_insert(0);
        *sum = sum.wrapping_add(delta);
        Ok(())
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
            counter_value(self.read_pinned(self.store.data, &bytes)?.as_deref())?
        };
        Ok(base.wrapping_add(self.adds.get(&bytes).copied().unwrap_or(0)))
    }

    /// Writes `new` (or deletes, for `None`) if the value at `key` equals
    /// `expected` (`None`: absent or expired). Returns whether it wrote.
    ///
    /// # Errors
    /// As [`Tx::get`] and [`Tx::put`].
    pub fn compare_and_set<K>(
        &mut self,
        key: &K,
        expected: Option<&K::Value>,
        new: Option<&K::Value>,
    ) -> Result<bool, StoreError>
    where
        K: Key + 'static,
        K::Value: Value + PartialEq,
    {
        if self.get(key)?.as_ref() != expected {
            return Ok(false);
        }
        match new {
            Some(v) => self.put(key, v)?,
            None => self.delete(key)?,
        }
        Ok(true)
    }

    /// Writes `value` if `key` holds no live value. Returns whether it wrote.
    ///
    /// # Errors
    /// As [`Tx::get`] and [`Tx::put`].
    pub fn put_if_absent<K>(&mut self, key: &K, value: &K::Value) -> Result<bool, StoreError>
    where
        K: Key + 'static,
        K::Value: Value,
    {
        if self.get(key)?.is_some() {
            return Ok(false);
        }
        self.put(key, value)?;
        Ok(true)
    }

    /// Writes `value` at `key`, whose incomplete
    /// [`Versionstamp`](strata_keys::tuple::Versionstamp) the engine fills
    /// with the commit's versionstamp: keys written this way sort in commit
    /// order. The envelope carries no checksum (the key it would cover is
    /// not known until commit); the value is not readable in this
    /// transaction.
    ///
    /// # Errors
    /// [`StoreError::Key`] when the key has no incomplete versionstamp (or
    /// several), plus the errors of [`Tx::put`] (chunking is not offered).
    pub fn put_versionstamped<K>(&mut self, key: &K, value: &K::Value) -> Result<(), StoreError>
    where
        K: Key,
        K::Value: Value,
    {
        let mut bytes = Vec::new();
        let offset = key
            .pack_into_versionstamped(&mut bytes)
            .map_err(StoreError::key::<K>)?
            .ok_or(StoreError::NoVersionstamp { key_type: K::NAME })?;
        let limits = &self.store.options.limits;
        limits.check_key(&bytes).map_err(StoreError::Limit)?;
        let mut envelope = Vec::new();
        let options = EncodeOptions {
            checksum: false,
            expires_at: None,
        };
        encode(value, &bytes, options, &mut envelope).map_err(|source| StoreError::Encode {
            key_type: K::NAME,
            source,
        })?;
        if envelope.len() > limits.max_value_bytes {
            return Err(StoreError::ValueTooLarge {
                key_type: K::NAME,
                size: envelope.len() as u64,
                max: limits.max_value_bytes as u64,
            });
        }
        self.stamped.push(Stamped {
            key: bytes,
            offset,
            value: envelope,
        });
        Ok(())
    }

    /// Whether the transaction has writes.
    pub fn is_read_only(&self) -> bool {
        self.writes.is_empty()
            && self.adds.is_empty()
            && self.stamped.is_empty()
            && self.raw.is_empty()
    }

    /// Commits: one engine commit holding every write, its chunk rows,
    /// expiry index rows and quota charges, guarded by the predicates of
    /// every read. Returns `None` for a transaction without writes (its
    /// reads were consistent at its snapshot; nothing to commit).
    ///
    /// # Errors
    /// [`StoreError::Limit`] or [`StoreError::Quota`] before anything is
    /// written; a [`CommitError`](strata_engine::CommitError) from the engine
    /// ([`StoreError::is_conflict`] when a read changed).
    pub fn commit(self) -> Result<Option<CommitInfo>, StoreError> {
        if self.is_read_only() {
            return Ok(None);
        }
        self.commit_writes().map(Some)
    }

    /// Plans and commits, even with nothing to write (the commit then only
    /// checks what was read).
    pub(crate) fn commit_writes(mut self) -> Result<CommitInfo, StoreError> {
        let commit = self.plan()?;
        let info = self.store.engine.commit(commit)?;
        tracing::trace!(version = info.version, "store commit");
        Ok(info)
    }

    /// Turns the buffered writes into one commit, checking every limit.
    pub(crate) fn plan(&mut self) -> Result<Commit, StoreError> {
        let mut out = Planned::default();
        let writes = std::mem::take(&mut self.writes);
        for (key, p) in &writes {
            self.plan_write(key, p, &mut out)?;
        }
        self.writes = writes;
        self.plan_counters(&mut out)?;
        let store = self.store;
        for s in &self.stamped {
            out.rows.push(RowSize::put(&s.key, &s.value));
            out.charge(
                store.options.scope_of(&s.key),
                stored_size(s.key.len(), s.value.len()),
                0,
            );
            out.mutations.push(Mutation::PutVersionstamped {
                ks: store.data,
                key: s.key.clone(),
                value: s.value.clone(),
                at: StampAt::Key(s.offset),
            });
        }
        let limits = store.options.limits;
        #[cfg(feature = "planted-bugs")]
        if store.options.bug(crate::PlantedBug::BatchLimitUnchecked) {
            out.rows.clear();
        }
        limits.check_batch(out.rows).map_err(StoreError::Limit)?;
        out.mutations.extend(self.raw.iter().cloned());
        for (scope, g) in out.growth {
            let counter = layout::quota_key(&scope);
            if g > 0 {
                // Pinned: a concurrent charge to the scope conflicts, so the
                // check is exact.
                let used = counter_value(self.read_pinned(store.system, &counter)?.as_deref())?;
                let used = u64::try_from(used).unwrap_or(0);
                if limits.check_quota(used, g).is_err() {
                    return Err(StoreError::Quota {
                        scope,
                        used,
                        requested: g.unsigned_abs(),
                        limit: limits.quota_bytes,
                    });
                }
            }
            if g != 0 {
                out.mutations.push(Mutation::Add {
                    ks: store.system,
                    key: counter,
                    delta: g,
                });
            }
        }
        Ok(Commit {
            predicates: self.predicates.clone(),
            mutations: out.mutations,
            durability: self.durability,
        })
    }

    /// The rows of one put or delete: the data row, chunk rows and stale
    /// chunks, expiry index changes, and the scope's growth. The old row is
    /// read (under a predicate) when chunks or quota depend on it.
    fn plan_write(&mut self, key: &[u8], p: &Pending, out: &mut Planned) -> Result<(), StoreError> {
        let store = self.store;
        let (data, system) = (store.data, store.system);
        let scope = store.options.scope_of(key);
        let known =
            p.chunked() || scope.is_some() || self.pinned.contains_key(&(data, key.to_vec()));
        let old = if known {
            Some(store.describe(key, self.read_pinned(data, key)?.as_deref()))
        } else {
            None
        };
        let (new_size, new_expiry) = match p {
            Pending::Put { envelope, .. } => {
                let expires_at = Header::read(envelope)
                    .map_err(|source| StoreError::Decode {
                        key_type: "(envelope)",
                        source,
                    })?
                    .expires_at;
                #[allow(unused_mut)]
                let mut previous = old.as_ref().map(|o| o.previous);
                #[cfg(feature = "planted-bugs")]
                if store.options.bug(crate::PlantedBug::StaleChunksSurvive) && previous.is_some() {
                    previous = Some(Previous::Absent);
                }
                let plan =
                    match previous {
                        Some(previous) => store
                            .planner
                            .plan_write(key, envelope, previous)
                            .map_err(|source| StoreError::Chunk {
                                key_type: "(write)",
                                source,
                            })?,
                        None => WritePlan {
                            puts: vec![Row {
                                key: key.to_vec(),
                                value: Cow::Borrowed(envelope),
                            }],
                            deletes: Vec::new(),
                        },
                    };
                for (i, row) in plan.puts.iter().enumerate() {
                    out.rows.push(RowSize::put(&row.key, &row.value));
                    out.mutations.push(Mutation::Put {
                        ks: if i == 0 { data } else { system },
                        key: row.key.clone(),
                        value: row.value.to_vec(),
                    });
                }
                out.stale(&plan.deletes, system);
                (plan.stored_bytes(), expires_at)
            }
            Pending::Delete { .. } => {
                out.rows.push(RowSize::delete(key));
                out.mutations.push(Mutation::Delete {
                    ks: data,
                    key: key.to_vec(),
                });
                if let Some(o) = &old {
                    // The first stale row is the data row, deleted above.
                    let stale = store.planner.plan_delete(key, o.previous);
                    out.stale(&stale[1..], system);
                }
                (0, None)
            }
        };
        let old_expiry = old.as_ref().and_then(|o| o.expires_at);
        if let Some(at) = old_expiry
            && old_expiry != new_expiry
        {
            out.mutations.push(Mutation::Delete {
                ks: system,
                key: layout::expiry_key(at, key),
            });
        }
        if let Some(at) = new_expiry
            && (old.is_none() || old_expiry != new_expiry)
        {
            out.mutations.push(Mutation::Put {
                ks: system,
                key: layout::expiry_key(at, key),
                value: Vec::new(),
            });
        }
        #[allow(unused_mut)]
        let mut old_size = old.as_ref().map_or(0, |o| o.size);
        #[cfg(feature = "planted-bugs")]
        if store.options.bug(crate::PlantedBug::QuotaIgnoresOverwrite) && new_size > 0 {
            old_size = 0;
        }
        out.charge(scope, new_size, old_size);
        Ok(())
    }

    /// The counter adds, charging a scope for each counter row they create.
    fn plan_counters(&mut self, out: &mut Planned) -> Result<(), StoreError> {
        let adds = std::mem::take(&mut self.adds);
        for (key, delta) in &adds {
            let scope = self.store.options.scope_of(key);
            if scope.is_some() {
                let exists = match self.writes.get(key) {
                    Some(Pending::Delete { .. }) => false,
                    Some(Pending::Put { .. }) => true,
                    None => self.read_pinned(self.store.data, key)?.is_some(),
                };
                if !exists {
                    out.charge(scope, stored_size(key.len(), 8), 0);
                }
            }
            out.rows.push(RowSize {
                key: key.len(),
                value: 8,
            });
            out.mutations.push(Mutation::Add {
                ks: self.store.data,
                key: key.clone(),
                delta: *delta,
            });
        }
        self.adds = adds;
        Ok(())
    }
}

/// A commit being planned.
#[derive(Default)]
struct Planned {
    mutations: Vec<Mutation>,
    /// Data and chunk rows, for the batch limits.
    rows: Vec<RowSize>,
    /// Net growth per quota scope.
    growth: BTreeMap<Vec<u8>, i64>,
}

impl Planned {
    fn charge(&mut self, scope: Option<Vec<u8>>, new: u64, old: u64) {
        if let Some(scope) = scope {
            *self.growth.entry(scope).or_default() += signed(new) - signed(old);
        }
    }

    fn stale(&mut self, stale: &[Stale], system: Keyspace) {
        for s in stale {
            self.rows.push(s.row_size());
            self.mutations.push(match s {
                Stale::Key(k) => Mutation::Delete {
                    ks: system,
                    key: k.clone(),
                },
                Stale::Range(r) => Mutation::DeleteRange {
                    ks: system,
                    range: RangeSpec {
                        start: Bound::Included(r.start.clone()),
                        end: r.end.clone().map_or(Bound::Unbounded, Bound::Excluded),
                        reverse: false,
                        limit: None,
                    },
                },
            });
        }
    }
}

/// Sizes are far below `i64::MAX`; saturate rather than wrap if not.
fn signed(size: u64) -> i64 {
    i64::try_from(size).unwrap_or(i64::MAX)
}

/// An engine counter row's value (absent: 0).
pub(crate) fn counter_value(row: Option<&[u8]>) -> Result<i64, StoreError> {
    match row {
        None => Ok(0),
        Some(bytes) => <[u8; 8]>::try_from(bytes)
            .map(i64::from_le_bytes)
            .map_err(|_| StoreError::BadCounter { len: bytes.len() }),
    }
}

/// What an old data row occupies, for quota and clean-up.
pub(crate) struct OldRow {
    pub(crate) previous: Previous,
    pub(crate) size: u64,
    pub(crate) expires_at: Option<u64>,
}

impl<E: Engine> Store<E> {
    /// Packs a key and checks it against the key limit.
    pub(crate) fn pack_checked<K: Key>(&self, key: &K) -> Result<Vec<u8>, StoreError> {
        let bytes = key.pack().map_err(StoreError::key::<K>)?;
        self.options
            .limits
            .check_key(&bytes)
            .map_err(StoreError::Limit)?;
        Ok(bytes)
    }

    /// The encoded key and pending write of a put: the envelope, checked
    /// against the value limit unless `K` is chunked.
    pub(crate) fn encode_put<K>(
        &self,
        key: &K,
        value: &K::Value,
        expires_at: Option<u64>,
    ) -> Result<(Vec<u8>, Pending), StoreError>
    where
        K: Key + 'static,
        K::Value: Value,
    {
        let bytes = self.pack_checked(key)?;
        let mut envelope = Vec::new();
        let options = EncodeOptions {
            checksum: true,
            expires_at,
        };
        encode(value, &bytes, options, &mut envelope).map_err(|source| StoreError::Encode {
            key_type: K::NAME,
            source,
        })?;
        let chunked = self.options.is_chunked::<K>();
        let max = self.options.limits.max_value_bytes;
        if envelope.len() > max && !chunked {
            return Err(StoreError::ValueTooLarge {
                key_type: K::NAME,
                size: envelope.len() as u64,
                max: max as u64,
            });
        }
        Ok((bytes, Pending::Put { envelope, chunked }))
    }

    /// The encoded key and pending write of a delete.
    pub(crate) fn encode_delete<K: Key + 'static>(
        &self,
        key: &K,
    ) -> Result<(Vec<u8>, Pending), StoreError> {
        let bytes = self.pack_checked(key)?;
        let chunked = self.options.is_chunked::<K>();
        Ok((bytes, Pending::Delete { chunked }))
    }

    /// Reads an old data row (`None`: absent): whether it is chunked, the
    /// bytes it and its chunks occupy, and its expiry. An unreadable row
    /// counts as its own bytes and has its chunk range cleared.
    pub(crate) fn describe(&self, key: &[u8], meta: Option<&[u8]>) -> OldRow {
        let Some(meta) = meta else {
            return OldRow {
                previous: Previous::Absent,
                size: 0,
                expires_at: None,
            };
        };
        let own = stored_size(key.len(), meta.len());
        let Ok((header, _)) = strata_codec::verify(key, meta) else {
            return OldRow {
                previous: Previous::Unknown,
                size: own,
                expires_at: None,
            };
        };
        match self.planner.read_meta(key, meta) {
            Ok(None) => OldRow {
                previous: Previous::Inline,
                size: own,
                expires_at: header.expires_at,
            },
            Ok(Some(m)) => {
                let mut chunk_key = Vec::new();
                let mut size = own;
                let mut left = m.total_len;
                for i in 0..m.chunk_count {
                    chunk_key.clear();
                    self.planner.layout().chunk_key(key, i, &mut chunk_key);
                    let len = left.min(u64::from(m.chunk_size));
                    left -= len;
                    size += chunk_key.len() as u64 + len;
                }
                OldRow {
                    previous: Previous::Chunked {
                        chunk_count: m.chunk_count,
                    },
                    size,
                    expires_at: header.expires_at,
                }
            }
            Err(_) => OldRow {
                previous: Previous::Unknown,
                size: own,
                expires_at: header.expires_at,
            },
        }
    }
}
