//! Writes: buffered until commit.

use strata_codec::{Value, encode_keyless};
use strata_engine::{Engine, Mutation, StampAt};
use strata_keys::Key;

use super::{Pending, Stamped, Tx};

/// What a write does with the value's expiry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Expiry {
    /// The value never expires (an expiry of the value it replaces is
    /// cleared).
    Never,
    /// The value expires at this time, in milliseconds since the epoch on
    /// the store's clock.
    At(u64),
    /// The value expires this many milliseconds after the transaction's
    /// clock reading.
    After(u64),
    /// The value keeps the expiry of the live value it replaces (none if
    /// there is none).
    Keep,
}
use crate::StoreError;

impl<'s, E: Engine + 's> Tx<'s, E> {
    /// Writes `value` at `key`; it never expires (an expiry of the value
    /// it replaces is cleared). [`Tx::put_with`] keeps or sets one.
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
        self.put_expiring(key, value, Some(self.now_ms().saturating_add(ttl_ms)))
    }

    /// Writes `value` at `key`, expiring at the absolute time `at_ms`
    /// (milliseconds since the epoch, on the store's clock).
    ///
    /// # Errors
    /// As [`Tx::put`].
    pub fn put_expiring_at<K>(
        &mut self,
        key: &K,
        value: &K::Value,
        at_ms: u64,
    ) -> Result<(), StoreError>
    where
        K: Key + 'static,
        K::Value: Value,
    {
        self.put_expiring(key, value, Some(at_ms))
    }

    /// Writes `value` at `key` with the expiry `expiry` says:
    /// [`Expiry::Keep`] keeps that of the live value it replaces (reading,
    /// and pinning, that value's row; none if there is none).
    ///
    /// # Errors
    /// As [`Tx::put`], and a read's error for [`Expiry::Keep`].
    pub fn put_with<K>(
        &mut self,
        key: &K,
        value: &K::Value,
        expiry: Expiry,
    ) -> Result<(), StoreError>
    where
        K: Key + 'static,
        K::Value: Value,
    {
        let at = match expiry {
            Expiry::Never => None,
            Expiry::At(at) => Some(at),
            Expiry::After(ttl) => Some(self.now_ms().saturating_add(ttl)),
            Expiry::Keep => {
                let bytes = self.pack(key)?;
                self.current_expiry(&bytes)?
            }
        };
        self.put_expiring(key, value, at)
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

    /// Adds `delta` to the counter at `key` and returns the new value (the
    /// next number of a sequence, say). It reads the counter, so two
    /// transactions incrementing one counter conflict and one retries:
    /// every value is handed out once. [`Tx::add`] is the blind, conflict
    /// free form.
    ///
    /// # Errors
    /// As [`Tx::counter`] and [`Tx::add`].
    pub fn increment<K: Key<Value = i64>>(
        &mut self,
        key: &K,
        delta: i64,
    ) -> Result<i64, StoreError> {
        let now = self.counter(key)?;
        self.add(key, delta)?;
        Ok(now.wrapping_add(delta))
    }

    /// Adds `delta` to the counter at `key` (absent counts as 0), applied
    /// by the engine at commit: concurrent adds do not conflict.
    ///
    /// # Errors
    /// The key does not pack or breaks the key limit.
    pub fn add<K: Key<Value = i64>>(&mut self, key: &K, delta: i64) -> Result<(), StoreError> {
        let bytes = self.pack(key)?;
        let sum = self.adds.entry(bytes).or_insert((0, K::NAME));
        sum.0 = sum.0.wrapping_add(delta);
        Ok(())
    }

    /// Writes `new` (or deletes, for `None`) if the value at `key` equals
    /// `expected` (`None`: absent or expired). Returns whether it wrote.
    /// The value written keeps the expiry of the value it replaces (an
    /// activation created with a time to live still expires when finished
    /// this way); [`Tx::compare_and_set_with`] chooses another.
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
        if strata_engine::fault_point!("cas-drops-expiry") {
            return self.compare_and_set_with(key, expected, new, Expiry::Never);
        }
        self.compare_and_set_with(key, expected, new, Expiry::Keep)
    }

    /// As [`Tx::compare_and_set`], writing `new` with the expiry `expiry`
    /// says.
    ///
    /// # Errors
    /// As [`Tx::compare_and_set`].
    pub fn compare_and_set_with<K>(
        &mut self,
        key: &K,
        expected: Option<&K::Value>,
        new: Option<&K::Value>,
        expiry: Expiry,
    ) -> Result<bool, StoreError>
    where
        K: Key + 'static,
        K::Value: Value + PartialEq,
    {
        let pin = !strata_engine::fault_point!("cas-read-not-pinned");
        let current = self.read_typed_expiring(key, pin)?;
        if current.as_ref().map(|e| &e.value) != expected {
            return Ok(false);
        }
        match (new, expiry) {
            // The expiry was read with the value: no second read.
            (Some(v), Expiry::Keep) => {
                self.put_expiring(key, v, current.and_then(|e| e.expires_at))?;
            }
            (Some(v), expiry) => self.put_with(key, v, expiry)?,
            (None, _) => self.delete(key)?,
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
    /// order. The envelope's checksum leaves out the key, which is not
    /// known until commit ([`strata_codec::encode_keyless`]); the value is
    /// not readable in this transaction.
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
        limits.check_key(&bytes).map_err(|e| {
            StoreError::row_limit(e, Some(K::NAME), crate::RowKind::Versionstamped, &bytes)
        })?;
        let mut envelope = Vec::new();
        encode_keyless(value, None, &mut envelope).map_err(|source| StoreError::Encode {
            key_type: K::NAME,
            source,
        })?;
        if envelope.len() > limits.max_value_bytes {
            crate::metrics::refused(strata_codec::Limit::ValueBytes);
            return Err(StoreError::ValueTooLarge {
                key_type: K::NAME,
                size: envelope.len() as u64,
                max: limits.max_value_bytes as u64,
            });
        }
        self.stamped.push(Stamped {
            ks: self.store.data,
            charged: true,
            key: bytes,
            at: StampAt::Key(offset),
            value: envelope,
            key_type: Some(K::NAME),
        });
        Ok(())
    }
}
