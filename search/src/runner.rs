//! An indexer on its own thread, as the outbox's `Worker` runs a handler:
//! it catches up, commits on its cadence, sleeps until a commit through the
//! store wakes it, answers searches, and stops cleanly.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::thread::JoinHandle;
use std::time::Duration;

use strata_codec::Value;
use strata_engine::Engine;
use strata_keys::Key;
use strata_outbox::{Outbox, OutboxConfig, OutboxError};
use strata_store::Store;

use crate::{IndexSpec, Indexer, IndexerConfig, Location, Query, Results, SearchError};

/// What an [`IndexRunner`] did, returned at shutdown.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct IndexReport {
    /// Outbox entries applied to the index by steps that completed (a
    /// step that failed after applying some, a store failure waited out,
    /// leaves them in the index uncounted).
    pub received: u64,
    /// Commits of the index (each with its checkpoint and acknowledgement).
    pub commits: u64,
    /// Searches answered.
    pub searches: u64,
}

/// A search waiting for the runner's thread, and where to send its answer.
type Ask<K> = (Query, Sender<Result<Results<K>, SearchError>>);

/// An [`Indexer`] on its own thread over a shared store: opened with the
/// store's clock, stepped while entries come, woken by commits through the
/// store, searched through [`IndexRunner::search`], closed (its lease given
/// up) by [`IndexRunner::shutdown`].
///
/// While another indexer holds the index's lease (whatever its holder
/// name) the runner waits for it to be released or to expire.
pub struct IndexRunner<K: Key> {
    stop: Arc<AtomicBool>,
    /// The store failures in a row the runner is waiting out.
    failing: Arc<AtomicU32>,
    wake: Box<dyn Fn() + Send + Sync>,
    asks: Sender<Ask<K>>,
    thread: Option<JoinHandle<Result<IndexReport, SearchError>>>,
}

impl<K: Key> std::fmt::Debug for IndexRunner<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IndexRunner")
            .field("index", &K::NAME)
            .field("stopping", &self.stop.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl<K> IndexRunner<K>
where
    K: Key + Send + 'static,
    K::Value: Value,
{
    /// Opens the index of `spec` at `location` on its own thread (see
    /// [`Indexer::open`], with the store's clock and an outbox of `outbox`'s
    /// configuration) and keeps it caught up: it steps while the outbox has
    /// entries for it, and otherwise sleeps until a commit through `store`
    /// wakes it (at most `idle`).
    ///
    /// # Errors
    /// [`IndexRunner::shutdown`] (or a search) reports an error that stopped
    /// it: the open refused ([`SearchError::Behind`],
    /// [`SearchError::MappingChanged`]), damage, an engine that must be
    /// reopened. A store failing to reach its engine
    /// ([`SearchError::is_transient`]) is waited out, logged, however long
    /// it lasts, unless [`IndexerConfig::max_store_failures`] bounds the
    /// failures in a row.
    pub fn start<E>(
        store: Arc<Store<E>>,
        spec: IndexSpec<K>,
        location: Location,
        config: IndexerConfig,
        outbox: OutboxConfig,
        idle: Duration,
    ) -> Self
    where
        E: Engine + Send + Sync + 'static,
    {
        let stop = Arc::new(AtomicBool::new(false));
        let waker = store.clone();
        let wake = Box::new(move || waker.wake_all());
        let (asks, answers) = channel();
        let stopping = stop.clone();
        let failing = Arc::new(AtomicU32::new(0));
        let failures = failing.clone();
        let bound = config.max_store_failures;
        #[cfg(feature = "planted-bugs")]
        let planting = strata_engine::faults::Planting::here();
        let thread = std::thread::spawn(move || {
            // A bug planted where the runner starts holds in its thread.
            #[cfg(feature = "planted-bugs")]
            planting.enter();
            let ob = Outbox::open(&store, outbox)?;
            let mut ix = Indexer::open(&ob, spec, &location, config, store.clock())?;
            let report = run(
                &store,
                &mut ix,
                &stopping,
                (&failures, bound),
                &answers,
                idle,
            );
            // Closed either way: the lease is given up at once.
            let closed = ix.close();
            let report = report?;
            closed.map(|()| report)
        });
        Self {
            stop,
            failing,
            wake,
            asks,
            thread: Some(thread),
        }
    }

    /// Whether the runner's thread has ended: its open refused, an error
    /// that stopped it, or (in its last moment) a shutdown.
    /// [`IndexRunner::shutdown`] returns why. For a health check.
    pub fn is_finished(&self) -> bool {
        self.thread.as_ref().is_none_or(JoinHandle::is_finished)
    }

    /// The store failures in a row the runner is waiting out now: 0 while
    /// the store answers. For a health check: a number that keeps growing
    /// is an outage.
    pub fn store_failures(&self) -> u32 {
        self.failing.load(Ordering::SeqCst)
    }

    /// The best hits for `query` over what the index has committed (the
    /// runner's thread answers between steps).
    ///
    /// # Errors
    /// [`SearchError::Query`]; tantivy failures; a runner that stopped
    /// (its error comes from [`IndexRunner::shutdown`]).
    pub fn search(&self, query: &Query) -> Result<Results<K>, SearchError> {
        let stopped = || SearchError::Stopped("stopped");
        let (tx, rx) = channel();
        self.asks.send((query.clone(), tx)).map_err(|_| stopped())?;
        (self.wake)();
        rx.recv().map_err(|_| stopped())?
    }

    /// Stops the runner: it commits what it applied, acknowledges the
    /// outbox, gives its lease up, and reports.
    ///
    /// # Errors
    /// What stopped the runner, or the last commit's failure.
    pub fn shutdown(mut self) -> Result<IndexReport, SearchError> {
        self.stop.store(true, Ordering::SeqCst);
        (self.wake)();
        match self.thread.take().map(JoinHandle::join) {
            Some(Ok(r)) => r,
            Some(Err(_)) => Err(SearchError::Stopped("panicked")),
            None => Ok(IndexReport::default()),
        }
    }
}

impl<K: Key> Drop for IndexRunner<K> {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        (self.wake)();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn run<E, K>(
    store: &Store<E>,
    ix: &mut Indexer<'_, '_, E, K>,
    halt: &AtomicBool,
    (failing, bound): (&AtomicU32, Option<u32>),
    asks: &Receiver<Ask<K>>,
    idle: Duration,
) -> Result<IndexReport, SearchError>
where
    E: Engine,
    K: Key + 'static,
    K::Value: Value,
{
    let mut report = IndexReport::default();
    // Store failures in a row, waited out.
    let mut failures = 0u32;
    while !halt.load(Ordering::SeqCst) {
        while let Ok((query, answer)) = asks.try_recv() {
            report.searches += 1;
            let _ = answer.send(ix.search(&query));
        }
        let seen = store.last_commit_seen();
        match ix.step() {
            Ok(step) => {
                failures = 0;
                failing.store(0, Ordering::SeqCst);
                report.received += step.received as u64;
                report.commits += u64::from(step.committed);
                if step.received == 0 {
                    // Nothing new: sleep until a commit (each step commits
                    // what it applied once the cadence says so).
                    store.wait_for_commit(seen, idle);
                }
            }
            Err(SearchError::Outbox(OutboxError::LeaseHeld { .. })) => {
                store.wait_for_commit(seen, idle);
            }
            Err(SearchError::Outbox(OutboxError::Store(e))) if e.is_conflict() => {}
            // The store failing to reach its engine (a server restarting, a
            // connection reset, a lost reply): waited out, the wait doubling
            // up to 32 times `idle`. The next step picks up where this one
            // stopped, acknowledging what a failed step committed.
            Err(e) if e.is_transient() && bound.is_none_or(|most| failures < most) => {
                failures += 1;
                failing.store(failures, Ordering::SeqCst);
                let wait = idle.saturating_mul(1 << (failures - 1).min(5));
                tracing::warn!(
                    error = %strata_engine::ErrorChain(&e),
                    failures,
                    wait_ms = wait.as_millis(),
                    "the index runner's store failed; it tries again"
                );
                store.wait_for_commit(store.last_commit_seen(), wait);
            }
            Err(e) => return Err(e),
        }
    }
    report.commits += u64::from(ix.commit()?);
    while let Ok((query, answer)) = asks.try_recv() {
        report.searches += 1;
        let _ = answer.send(ix.search(&query));
    }
    Ok(report)
}
