//! The store: opening, single operations, transactions with retries.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::Duration;

use strata_codec::{ChunkPlanner, Value};
use strata_engine::{Clock, CommitInfo, Engine, Keyspace, Rng, SystemClock, SystemRng};
use strata_keys::Key;

use crate::layout::SystemChunks;
use crate::space::{CatalogEntry, Space};

/// The format version of the store's own catalog rows.
const CATALOG_FORMAT: u64 = 1;
use crate::read::{Expiring, Page, ReadView, Scan};
use crate::{Expiry, StoreError, StoreOptions, Tx};

/// A typed store over an engine. See the [crate docs](crate).
pub struct Store<E: Engine> {
    pub(crate) engine: E,
    pub(crate) data: Keyspace,
    pub(crate) system: Keyspace,
    pub(crate) options: StoreOptions,
    pub(crate) planner: ChunkPlanner<SystemChunks>,
    pub(crate) clock: Arc<dyn Clock>,
    rng: Mutex<Box<dyn Rng>>,
    /// The declared spaces, by name.
    spaces: Vec<(String, Space)>,
    /// The commits made through this store: the latest version and the
    /// waiters for the next one.
    commits: Commits,
}

/// The latest commit made through a store, and its waiters.
#[derive(Default)]
struct Commits {
    last: AtomicU64,
    /// Threads in `wait_for_commit`.
    waiters: AtomicUsize,
    lock: Mutex<()>,
    wake: Condvar,
}

impl<E: Engine> std::fmt::Debug for Store<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("data", &self.data)
            .field("system", &self.system)
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl<E: Engine> Store<E> {
    /// A store on `engine` with the system clock and randomness. The
    /// engine must have been opened with the keyspaces of
    /// [`StoreOptions::keyspace_specs`] (more are fine). Opening writes
    /// nothing: call [`Store::publish_catalog`] once after it so that tools
    /// (`strata info`, `verify`) know the store's keyspaces and quota rule.
    ///
    /// # Errors
    /// [`StoreError::Engine`] naming a missing keyspace; [`StoreError::Chunk`]
    /// for a chunk size of 0.
    pub fn open(engine: E, options: StoreOptions) -> Result<Self, StoreError> {
        Self::open_with(
            engine,
            options,
            Arc::new(SystemClock),
            Box::new(SystemRng::new()),
        )
    }

    /// As [`Store::open`] with an injected clock (expiry, backoff) and rng
    /// (backoff jitter).
    ///
    /// # Errors
    /// As [`Store::open`].
    pub fn open_with(
        engine: E,
        options: StoreOptions,
        clock: Arc<dyn Clock>,
        rng: Box<dyn Rng>,
    ) -> Result<Self, StoreError> {
        let data = engine.keyspace(&options.data_keyspace)?;
        let system = engine.keyspace(&options.system_keyspace)?;
        let planner = ChunkPlanner::new(SystemChunks, options.effective_chunk_size())
            .map_err(|source| StoreError::InvalidOptions {
                option: "chunk_size",
                source,
            })?
            .inline_up_to(options.limits.max_value_bytes);
        let spaces = options
            .spaces
            .iter()
            .map(|s| {
                let ks = engine.keyspace(&s.name)?;
                Ok((
                    s.name.clone(),
                    Space {
                        ks,
                        charged: s.charged,
                    },
                ))
            })
            .collect::<Result<Vec<_>, StoreError>>()?;
        Ok(Self {
            spaces,
            engine,
            data,
            system,
            options,
            planner,
            clock,
            rng: Mutex::new(rng),
            commits: Commits::default(),
        })
    }

    /// The engine underneath, for reads and commits outside the store.
    pub fn engine(&self) -> &E {
        &self.engine
    }

    /// The engine, giving up the store.
    pub fn into_engine(self) -> E {
        self.engine
    }

    /// The options the store was opened with.
    pub fn options(&self) -> &StoreOptions {
        &self.options
    }

    /// The store's clock: the layers above (`Outbox::open`,
    /// `Worker::start`, the indexer) take it from here, so a service gives
    /// its clock once.
    pub fn clock(&self) -> Arc<dyn Clock> {
        self.clock.clone()
    }

    /// A generator seeded from the store's own (deterministic when the
    /// store's is, as in the simulation), for a layer above that needs one.
    pub fn fork_rng(&self) -> Box<dyn Rng> {
        let seed = self
            .rng
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .next_u64();
        Box::new(strata_engine::SeededRng::new(seed))
    }

    /// The version of the engine's last commit (through this store or
    /// not): `store.engine().last_version()` without importing `Engine`.
    pub fn last_version(&self) -> u64 {
        self.engine.last_version()
    }

    /// The data and system keyspaces.
    pub fn keyspaces(&self) -> (Keyspace, Keyspace) {
        (self.data, self.system)
    }

    /// Records a commit made through this store and wakes the waiters, if
    /// any (a commit nobody waits for costs no system call).
    pub(crate) fn signal_commit(&self, version: u64) {
        let c = &self.commits;
        c.last.fetch_max(version, Ordering::SeqCst);
        // Paired with the waiter's count then check: either it sees this
        // version, or this sees it counted and wakes it (the lock makes
        // sure it is already waiting).
        if c.waiters.load(Ordering::SeqCst) > 0 {
            let _guard = c.lock.lock().unwrap_or_else(PoisonError::into_inner);
            c.wake.notify_all();
        }
    }

    /// The version of the latest commit made through this store (0 before
    /// the first).
    pub fn last_commit_seen(&self) -> u64 {
        self.commits.last.load(Ordering::SeqCst)
    }

    /// Blocks until a commit through this store (from any thread) has a
    /// version above `after`, or `timeout` passes, or [`Store::wake_all`]
    /// is called; returns the latest version seen. For workers that wait
    /// for new data instead of polling in a loop. Commits made directly on
    /// the engine are not seen.
    pub fn wait_for_commit(&self, after: u64, timeout: Duration) -> u64 {
        let c = &self.commits;
        let guard = c.lock.lock().unwrap_or_else(PoisonError::into_inner);
        c.waiters.fetch_add(1, Ordering::SeqCst);
        if c.last.load(Ordering::SeqCst) <= after {
            drop(
                c.wake
                    .wait_timeout(guard, timeout)
                    .unwrap_or_else(PoisonError::into_inner),
            );
        } else {
            drop(guard);
        }
        c.waiters.fetch_sub(1, Ordering::SeqCst);
        c.last.load(Ordering::SeqCst)
    }

    /// Wakes every thread in [`Store::wait_for_commit`] (a shutdown).
    pub fn wake_all(&self) {
        let _guard = self
            .commits
            .lock
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        self.commits.wake.notify_all();
    }

    /// The handle of the space declared as `name` (see [`Space`]).
    ///
    /// # Errors
    /// [`StoreError::UnknownSpace`] when the options did not declare it.
    pub fn space(&self, name: &str) -> Result<Space, StoreError> {
        self.spaces
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, s)| *s)
            .ok_or_else(|| StoreError::UnknownSpace {
                name: name.to_owned(),
            })
    }

    /// The keyspaces of the charged spaces.
    pub(crate) fn charged_spaces(&self) -> impl Iterator<Item = Keyspace> + '_ {
        self.spaces
            .iter()
            .filter(|(_, s)| s.charged)
            .map(|(_, s)| s.ks)
    }

    /// Every catalog entry, in key order (kind, then name). See [`Space`].
    ///
    /// # Errors
    /// An engine failure. (A row in the catalog's range that does not read
    /// as a catalog row, which the store never writes, is left out.)
    pub fn catalog(&self) -> Result<Vec<CatalogEntry>, StoreError> {
        use strata_engine::Snapshot;
        let snap = self.engine.snapshot()?;
        let range = crate::space::catalog_range();
        let spec = strata_engine::RangeSpec::from(range);
        let mut out = Vec::new();
        for row in snap.range(self.system, spec)? {
            let (k, v) = row?;
            if let Some(entry) = crate::space::read_catalog(&k, &v) {
                out.push(entry);
            }
        }
        Ok(out)
    }

    /// Records the store's keyspaces in the catalog: the data and system
    /// keyspaces and every declared space, kind `"keyspace"`, detail the
    /// tuple `(role, profile)` (`(role, profile, true)` for a charged
    /// space), and the quota scope rule when the options give one (see
    /// [`Space`]). Writes only what differs, in as many commits as the
    /// batch limit needs; returns whether it wrote.
    ///
    /// # Errors
    /// As [`Store::transact`].
    pub fn publish_catalog(&self) -> Result<bool, StoreError> {
        let mut wanted: Vec<(String, Vec<u8>)> = vec![
            (
                self.options.data_keyspace.clone(),
                strata_keys::tuple::pack(&("data", "point-lookup")),
            ),
            (
                self.options.system_keyspace.clone(),
                strata_keys::tuple::pack(&("system", "general")),
            ),
        ];
        for s in &self.options.spaces {
            let profile = crate::space::profile_name(s.profile);
            wanted.push((
                s.name.clone(),
                if s.charged {
                    strata_keys::tuple::pack(&("space", profile, true))
                } else {
                    strata_keys::tuple::pack(&("space", profile))
                },
            ));
        }
        let quota = self
            .options
            .scope_rule
            .map(|n| strata_keys::tuple::pack(&("tuple-prefix", n as u64)));
        let rows = wanted
            .iter()
            .map(|(name, detail)| ("keyspace", name.as_str(), detail))
            .chain(quota.iter().map(|detail| ("quota", "scope", detail)));
        let rows: Vec<_> = rows.collect();
        // A commit per batch of rows the limits allow (publishing again
        // after a failure finishes the job).
        let mut wrote = false;
        for batch in rows.chunks(self.options.limits.max_batch_entries.max(1)) {
            wrote |= self.transact(|tx| {
                let mut wrote = false;
                for (kind, name, detail) in batch {
                    let key = crate::space::catalog_key(kind, name);
                    let want = crate::space::catalog_value(CATALOG_FORMAT, detail);
                    if tx.read_system_row(&key)?.as_deref() != Some(want.as_slice()) {
                        tx.catalog_put(kind, name, CATALOG_FORMAT, detail)?;
                        wrote = true;
                    }
                }
                Ok::<_, StoreError>(wrote)
            })?;
        }
        Ok(wrote)
    }

    /// A consistent read view at the engine's latest version, with the
    /// clock's current reading for expiry.
    ///
    /// # Errors
    /// The engine cannot take a snapshot.
    pub fn read(&self) -> Result<ReadView<'_, E>, StoreError> {
        Ok(ReadView {
            store: self,
            snap: self.engine.snapshot()?,
            now: self.clock.now_ms(),
        })
    }

    /// The value of `key` (`None` when absent or expired).
    ///
    /// # Errors
    /// As [`ReadView::get`].
    pub fn get<K>(&self, key: &K) -> Result<Option<K::Value>, StoreError>
    where
        K: Key,
        K::Value: Value,
    {
        Ok(self.get_with_expiry(key)?.map(|e| e.value))
    }

    /// The value of `key` with its expiry (`None` when absent or expired).
    /// The clock is read only when the row has an expiry.
    ///
    /// # Errors
    /// As [`ReadView::get`].
    pub fn get_with_expiry<K>(&self, key: &K) -> Result<Option<Expiring<K::Value>>, StoreError>
    where
        K: Key,
        K::Value: Value,
    {
        let now = || self.clock.now_ms();
        let bytes = key.pack().map_err(StoreError::key::<K>)?;
        // The row read on its own (one statement on PostgreSQL, where a
        // snapshot costs two round trips more).
        let Some(meta) = self.engine.get_latest(self.data, &bytes)? else {
            return Ok(None);
        };
        let (header, _) = strata_codec::open(&bytes, &meta, self.options.decode_options())
            .map_err(StoreError::decode::<K>)?;
        if header.chunked {
            // A manifest names chunk rows to be read in the same view as
            // it: the whole value is read again, in a snapshot.
            let snap = self.engine.snapshot()?;
            return self.get_at(&snap, key, now);
        }
        crate::read::decode_unchunked::<K>(header, meta, now)
    }

    /// One page of `scan`.
    ///
    /// # Errors
    /// As [`ReadView::scan_page`].
    pub fn scan<K>(&self, scan: &Scan) -> Result<Page<K>, StoreError>
    where
        K: Key,
        K::Value: Value,
    {
        self.read()?.scan_page(scan)
    }

    /// A transaction to drive by hand: read, write, then [`Tx::commit`].
    /// Nothing retries it; see [`Store::transact`].
    pub fn begin(&self) -> Tx<'_, E> {
        Tx::new(self)
    }

    /// Runs `f` in a transaction and commits it, running it again after a
    /// conflict (with the backoff of [`StoreOptions::retry`]). `f` may run
    /// several times, so it should have no effects outside the transaction.
    ///
    /// An error returned by `f` aborts without retry. A commit whose
    /// outcome is unknown is not retried either (a retry could apply the
    /// transaction twice); its error says so.
    ///
    /// ```
    /// use strata_codec::Limits;
    /// use strata_engine::MemEngine;
    /// use strata_keys::tuple_key;
    /// use strata_store::{Store, StoreError, StoreOptions};
    ///
    /// /// An account's balance.
    /// #[derive(Debug, Clone, PartialEq)]
    /// pub struct Balance { pub id: u64 }
    /// tuple_key! {
    ///     Balance -> String = ("balance", {id});
    /// }
    /// let options = StoreOptions::new(Limits::FOUNDATIONDB);
    /// let store = Store::open(MemEngine::open(options.keyspace_specs())?, options)?;
    /// store.put(&Balance { id: 1 }, &"10".to_owned())?;
    /// let moved = store.transact(|tx| {
    ///     let from: u64 = tx.get(&Balance { id: 1 })?.unwrap_or_default().parse().unwrap_or(0);
    ///     tx.put(&Balance { id: 1 }, &(from - 3).to_string())?;
    ///     tx.put(&Balance { id: 2 }, &"3".to_owned())?;
    ///     Ok::<_, StoreError>(3)
    /// })?;
    /// assert_eq!(moved, 3);
    /// assert_eq!(store.get(&Balance { id: 1 })?.as_deref(), Some("7"));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// `f`'s error; [`StoreError::RetriesExhausted`] with the attempt count
    /// and the last conflict; any other commit error.
    pub fn transact<T, Er>(
        &self,
        mut f: impl FnMut(&mut Tx<'_, E>) -> Result<T, Er>,
    ) -> Result<T, Er>
    where
        Er: From<StoreError>,
    {
        self.transact_info(|tx| f(tx)).map(|(value, _)| value)
    }

    /// As [`Store::transact`], also returning the commit (`None` when the
    /// transaction wrote nothing).
    ///
    /// # Errors
    /// As [`Store::transact`].
    pub fn transact_info<T, Er>(
        &self,
        mut f: impl FnMut(&mut Tx<'_, E>) -> Result<T, Er>,
    ) -> Result<(T, Option<CommitInfo>), Er>
    where
        Er: From<StoreError>,
    {
        self.with_retries(|| {
            let mut tx = self.begin();
            let value = f(&mut tx)?;
            Ok(tx.commit_in_place().map(|info| (value, info)))
        })
    }

    /// Runs `once` until its commit succeeds, fails with something other
    /// than a conflict, or the retry policy is spent. `once` returns the
    /// caller's error (never retried) or the commit's result.
    fn with_retries<R, Er>(
        &self,
        mut once: impl FnMut() -> Result<Result<R, StoreError>, Er>,
    ) -> Result<R, Er>
    where
        Er: From<StoreError>,
    {
        let mut attempt = 0;
        loop {
            attempt += 1;
            match once()? {
                Ok(done) => return Ok(done),
                Err(e) => self.after_failed_attempt(attempt, e)?,
            }
        }
    }

    /// After attempt `attempt` of a transaction failed with `e`: `Ok` once
    /// the backoff is waited out when it should run again, or the error
    /// to return. Apart from [`Store::with_retries`], which is compiled
    /// for every closure it runs, so that each copy holds only the loop.
    fn after_failed_attempt(&self, attempt: u32, e: StoreError) -> Result<(), StoreError> {
        let policy = self.options.retry;
        match e {
            #[cfg(feature = "planted-bugs")]
            e if e.is_outcome_unknown()
                && strata_engine::fault_point!("unknown-outcome-retried")
                && attempt < policy.max_attempts.max(1) =>
            {
                Ok(())
            }
            e if e.is_conflict() && attempt < policy.max_attempts.max(1) => {
                crate::metrics::retried();
                let wait = self.backoff_ms(attempt);
                tracing::debug!(attempt, wait, "transaction conflict, retrying");
                self.clock.sleep_ms(wait);
                Ok(())
            }
            e if e.is_conflict() => Err(StoreError::RetriesExhausted {
                attempts: attempt,
                last: Box::new(e),
            }),
            e => Err(e),
        }
    }

    /// A random wait in `[ceiling / 2, ceiling]` after failed `attempt`.
    pub(crate) fn backoff_ms(&self, attempt: u32) -> u64 {
        let ceiling = self.options.retry.ceiling_ms(attempt);
        let half = ceiling / 2;
        let mut rng = self.rng.lock().unwrap_or_else(PoisonError::into_inner);
        half + rng.below(ceiling - half + 1)
    }

    /// Writes `value` at `key` in its own transaction.
    ///
    /// # Errors
    /// As [`Tx::put`] and [`Tx::commit`].
    pub fn put<K>(&self, key: &K, value: &K::Value) -> Result<CommitInfo, StoreError>
    where
        K: Key + 'static,
        K::Value: Value,
    {
        self.write_one(|tx| tx.put(key, value))
    }

    /// Writes `value` at `key`, expiring `ttl_ms` from now, in its own
    /// transaction.
    ///
    /// # Errors
    /// As [`Tx::put_with_ttl`] and [`Tx::commit`].
    pub fn put_with_ttl<K>(
        &self,
        key: &K,
        value: &K::Value,
        ttl_ms: u64,
    ) -> Result<CommitInfo, StoreError>
    where
        K: Key + 'static,
        K::Value: Value,
    {
        self.write_one(|tx| tx.put_with_ttl(key, value, ttl_ms))
    }

    /// Writes `value` at `key` with the expiry `expiry` says (see
    /// [`Expiry`]), in its own transaction.
    ///
    /// # Errors
    /// As [`Tx::put_with`] and [`Tx::commit`].
    pub fn put_with<K>(
        &self,
        key: &K,
        value: &K::Value,
        expiry: Expiry,
    ) -> Result<CommitInfo, StoreError>
    where
        K: Key + 'static,
        K::Value: Value,
    {
        self.write_one(|tx| tx.put_with(key, value, expiry))
    }

    /// Writes `new` if the value at `key` equals `expected`, keeping the
    /// old value's expiry, in its own transaction (retried on conflict).
    /// Returns whether it wrote.
    ///
    /// # Errors
    /// As [`Tx::compare_and_set`] and [`Tx::commit`].
    pub fn compare_and_set<K>(
        &self,
        key: &K,
        expected: Option<&K::Value>,
        new: Option<&K::Value>,
    ) -> Result<bool, StoreError>
    where
        K: Key + 'static,
        K::Value: Value + PartialEq,
    {
        self.transact(|tx| tx.compare_and_set(key, expected, new))
    }

    /// Deletes `key` in its own transaction.
    ///
    /// # Errors
    /// As [`Tx::delete`] and [`Tx::commit`].
    pub fn delete<K: Key + 'static>(&self, key: &K) -> Result<CommitInfo, StoreError> {
        self.write_one(|tx| tx.delete(key))
    }

    /// Adds `delta` to the counter at `key` in its own transaction.
    ///
    /// # Errors
    /// As [`Tx::add`] and [`Tx::commit`].
    pub fn add<K: Key<Value = i64>>(&self, key: &K, delta: i64) -> Result<CommitInfo, StoreError> {
        self.write_one(|tx| tx.add(key, delta))
    }

    /// Adds `delta` to the counter at `key` in its own transaction (retried
    /// on conflict) and returns the new value: each call gets a value no
    /// other call gets.
    ///
    /// # Errors
    /// As [`Tx::increment`] and [`Tx::commit`].
    pub fn increment<K: Key<Value = i64>>(&self, key: &K, delta: i64) -> Result<i64, StoreError> {
        self.transact(|tx| tx.increment(key, delta))
    }

    /// The counter at `key` (0 when absent).
    ///
    /// # Errors
    /// [`StoreError::BadCounter`], or an engine failure.
    pub fn counter<K: Key<Value = i64>>(&self, key: &K) -> Result<i64, StoreError> {
        self.read()?.counter(key)
    }

    fn write_one(
        &self,
        mut f: impl FnMut(&mut Tx<'_, E>) -> Result<(), StoreError>,
    ) -> Result<CommitInfo, StoreError> {
        self.with_retries(|| {
            let mut tx = self.begin();
            f(&mut tx)?;
            Ok(tx.commit_writes())
        })
    }
}
