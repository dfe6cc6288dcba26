//! A worker: one consumer's handler on its own thread, with a lease,
//! batches, retries, wake-ups on new commits and a graceful shutdown.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use strata_codec::Value;
use strata_engine::{Clock, Engine, Rng};
use strata_store::{Store, StoreError, Tx};

use crate::{Delivery, Failed, Outbox, OutboxConfig, OutboxError, Topic};

/// How a [`Worker`] runs.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct WorkerConfig {
    /// The lease holder's name, shown by `LeaseHeld` errors and the tool.
    /// It decides nothing: a lease belongs to the worker that took it, so
    /// two workers with one name never both hold a consumer.
    pub holder: String,
    /// Entries per poll (default 64).
    pub batch: usize,
    /// Longest wait for a new commit when there is nothing to do (default
    /// 1 s); a commit through the store wakes the worker at once.
    pub idle_wait: Duration,
    /// Retries, leases and syncs of the worker's outbox.
    pub outbox: OutboxConfig,
    /// How long the topic's entries are kept once every consumer passed
    /// them, in clock milliseconds (default 7 days); `None`: the worker
    /// never trims. The worker trims its topic (see [`Outbox::trim`]) one
    /// commit at a time, at most every [`WorkerConfig::trim_every_ms`] while it
    /// finds nothing more to trim.
    pub retention_ms: Option<u64>,
    /// Least time between two trims, in clock milliseconds (default 60 s).
    pub trim_every_ms: u64,
    /// Store failures in a row that the worker waits out before it ends
    /// with the last one (`None`, the default: it never ends on them). A
    /// store that cannot reach its engine (a server restarting or failing
    /// over, a connection reset, a commit whose outcome a lost reply left
    /// unknown) is tried again after `idle_wait`, the wait doubling with
    /// each failure in a row up to 32 times that, each failure logged; an
    /// entry acknowledged by a commit that did apply is then finished
    /// already, and the handler's writes of its second run roll back.
    /// Damage, an unknown consumer and an engine that must be reopened
    /// ([`ReopenRequired`](strata_engine::ReopenRequired)) end the worker
    /// at once.
    pub max_store_failures: Option<u32>,
}

impl WorkerConfig {
    /// Defaults for holder `holder`.
    pub fn new(holder: impl Into<String>) -> Self {
        Self {
            holder: holder.into(),
            batch: 64,
            idle_wait: Duration::from_secs(1),
            outbox: OutboxConfig::default(),
            retention_ms: Some(7 * 24 * 3_600_000),
            trim_every_ms: 60_000,
            max_store_failures: None,
        }
    }
}

/// What a worker did, returned at shutdown.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct WorkerReport {
    /// Entries handled and acknowledged.
    pub handled: u64,
    /// Handler failures recorded (each retried later or dead-lettered).
    pub failed: u64,
    /// Entries moved to the dead letters.
    pub dead_lettered: u64,
    /// Polls that returned entries.
    pub batches: u64,
    /// Entries trimmed from the topic under
    /// [`WorkerConfig::retention_ms`].
    pub trimmed: u64,
}

/// The handler of a worker: called for each delivery in a transaction of
/// the store; returning `Ok` acknowledges the entry in that transaction,
/// with the handler's writes (exactly once for them); `Err` rolls the
/// transaction back and records the failure (retried with backoff, then
/// dead-lettered, the error's text kept with it). On a conflict the
/// transaction, handler included, runs again. The error is any error
/// (`?` works on the store's, the outbox's and your own), or text:
/// `Err("smtp down".into())`.
pub type Handler<E, T> = dyn FnMut(&mut Tx<'_, E>, &Delivery<T>) -> Result<(), HandlerError> + Send;

/// Why a handler did not handle an entry: any error.
pub type HandlerError = Box<dyn std::error::Error + Send + Sync>;

/// A running worker. [`Worker::shutdown`] stops it after the entry in hand.
pub struct Worker {
    stop: Arc<AtomicBool>,
    /// The store failures in a row the worker is waiting out.
    failing: Arc<AtomicU32>,
    wake: Box<dyn Fn() + Send + Sync>,
    thread: Option<JoinHandle<Result<WorkerReport, OutboxError>>>,
}

impl std::fmt::Debug for Worker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Worker")
            .field("stopping", &self.stop.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

/// Why one delivery's transaction did not commit.
enum Attempt {
    Handler(HandlerError),
    Outbox(OutboxError),
}

impl From<StoreError> for Attempt {
    fn from(e: StoreError) -> Self {
        Self::Outbox(OutboxError::Store(e))
    }
}

impl Worker {
    /// Starts a worker for `consumer` (registered on `topic`) on its own
    /// thread, with the store's clock and a generator drawn from its
    /// ([`Store::clock`], [`Store::fork_rng`]). It takes the consumer's lease (waiting while another worker
    /// holds it), polls batches, runs `handler` on each entry in order
    /// (after a failure, the batch's later entries of the same ordering key
    /// wait), renews the lease with each poll, and sleeps until a commit
    /// through the store wakes it when there is nothing to do.
    ///
    /// # Errors
    /// The returned worker's [`Worker::shutdown`] reports an error that
    /// stopped it (the store failing for good, the consumer unknown).
    #[allow(clippy::needless_pass_by_value)]
    pub fn start<E, T>(
        store: Arc<Store<E>>,
        topic: Topic<T>,
        consumer: &str,
        worker: WorkerConfig,
        handler: Box<Handler<E, T>>,
    ) -> Self
    where
        E: Engine + Send + Sync + 'static,
        T: Value + Send + 'static,
    {
        let clock = store.clock();
        let rng = store.fork_rng();
        Self::spawn(store, clock, rng, topic, consumer, worker, handler)
    }

    /// As [`Worker::start`], with a clock and a generator of its own
    /// instead of the store's.
    ///
    /// # Errors
    /// As [`Worker::start`].
    #[allow(clippy::needless_pass_by_value)]
    pub fn spawn<E, T>(
        store: Arc<Store<E>>,
        clock: Arc<dyn Clock>,
        rng: Box<dyn Rng>,
        topic: Topic<T>,
        consumer: &str,
        worker: WorkerConfig,
        mut handler: Box<Handler<E, T>>,
    ) -> Self
    where
        E: Engine + Send + Sync + 'static,
        T: Value + Send + 'static,
    {
        let stop = Arc::new(AtomicBool::new(false));
        let consumer = consumer.to_owned();
        let waker_store = store.clone();
        let wake = Box::new(move || waker_store.wake_all());
        let stopping = stop.clone();
        let failing = Arc::new(AtomicU32::new(0));
        let failures = failing.clone();
        #[cfg(feature = "planted-bugs")]
        let planting = strata_engine::faults::Planting::here();
        let thread = std::thread::spawn(move || {
            // A bug planted where the worker starts holds in its thread.
            #[cfg(feature = "planted-bugs")]
            planting.enter();
            let outbox = Outbox::new(&store, worker.outbox, clock.clone(), rng)?;
            run(
                &outbox,
                &store,
                &topic,
                &consumer,
                &worker,
                &stopping,
                &failures,
                &mut *handler,
                &*clock,
            )
        });
        Self {
            stop,
            failing,
            wake,
            thread: Some(thread),
        }
    }

    /// Whether the worker's thread has ended: after an error that stopped
    /// it, a panic of its handler, or (in its last moment) a shutdown.
    /// [`Worker::shutdown`] returns why. For a health check.
    pub fn is_finished(&self) -> bool {
        self.thread.as_ref().is_none_or(JoinHandle::is_finished)
    }

    /// The store failures in a row the worker is waiting out now (see
    /// [`WorkerConfig::max_store_failures`]): 0 while the store answers.
    /// For a health check: a number that keeps growing is an outage.
    pub fn store_failures(&self) -> u32 {
        self.failing.load(Ordering::SeqCst)
    }

    /// Stops the worker after the entry in hand and waits for it.
    ///
    /// # Errors
    /// What stopped the worker before, if anything did.
    pub fn shutdown(mut self) -> Result<WorkerReport, OutboxError> {
        self.stop.store(true, Ordering::SeqCst);
        (self.wake)();
        match self.thread.take().map(JoinHandle::join) {
            Some(Ok(r)) => r,
            Some(Err(_)) => Err(OutboxError::HandlerPanicked),
            None => Ok(WorkerReport::default()),
        }
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        (self.wake)();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Retention: one bounded trim commit now and then (a failure is retried
/// at the next turn; the entries are only kept longer). `trimmed_at` is
/// when the last trim ran (`None`: more to trim, at once).
fn retain<E: Engine>(
    outbox: &Outbox<'_, E>,
    topic: &str,
    worker: &WorkerConfig,
    clock: &dyn Clock,
    trimmed_at: &mut Option<u64>,
    report: &mut WorkerReport,
) {
    let Some(keep) = worker.retention_ms else {
        return;
    };
    let now = clock.now_ms();
    if trimmed_at.is_some_and(|t| now.saturating_sub(t) < worker.trim_every_ms) {
        return;
    }
    *trimmed_at = Some(now);
    match outbox.trim(topic, keep, Some(1)) {
        Ok(t) => {
            report.trimmed += t.entries;
            // More to trim: another commit at the next turn.
            if t.more {
                *trimmed_at = None;
            }
        }
        Err(e) => tracing::warn!(error = %e, "the worker's trim failed"),
    }
}

/// The store failures in a row a worker is waiting out.
struct Outage<'a, E: Engine> {
    store: &'a Store<E>,
    worker: &'a WorkerConfig,
    failures: u32,
    /// Where the worker's handle reads `failures`.
    shown: &'a AtomicU32,
}

impl<E: Engine> Outage<'_, E> {
    /// Whether `e` is waited out (the wait then made): a store failing to
    /// reach its engine, within [`WorkerConfig::max_store_failures`].
    fn wait_out(&mut self, e: &OutboxError) -> bool {
        if !e.is_transient()
            || self
                .worker
                .max_store_failures
                .is_some_and(|most| self.failures >= most)
        {
            return false;
        }
        self.failures += 1;
        self.shown.store(self.failures, Ordering::SeqCst);
        let wait = self
            .worker
            .idle_wait
            .saturating_mul(1 << (self.failures - 1).min(5));
        tracing::warn!(
            error = %strata_engine::ErrorChain(e),
            failures = self.failures,
            wait_ms = wait.as_millis(),
            "the worker's store failed; it tries again"
        );
        self.store
            .wait_for_commit(self.store.last_commit_seen(), wait);
        true
    }

    /// The store answered: the failures in a row are over.
    fn over(&mut self) {
        self.failures = 0;
        self.shown.store(0, Ordering::SeqCst);
    }
}

#[allow(clippy::too_many_arguments)]
fn run<E: Engine, T: Value>(
    outbox: &Outbox<'_, E>,
    store: &Store<E>,
    topic: &Topic<T>,
    consumer: &str,
    worker: &WorkerConfig,
    stop: &AtomicBool,
    failing: &AtomicU32,
    handler: &mut Handler<E, T>,
    clock: &dyn Clock,
) -> Result<WorkerReport, OutboxError> {
    let mut report = WorkerReport::default();
    let mut held = None;
    let mut trimmed_at: Option<u64> = None;
    let mut outage = Outage {
        store,
        worker,
        failures: 0,
        shown: failing,
    };
    while !stop.load(Ordering::SeqCst) {
        retain(
            outbox,
            topic.name(),
            worker,
            clock,
            &mut trimmed_at,
            &mut report,
        );
        let seen = store.last_commit_seen();
        // The lease this worker took is renewed; another's (whatever its
        // holder name) is waited for.
        let got = match &held {
            Some(l) => outbox.renew(l),
            None => outbox.acquire(topic.name(), consumer, &worker.holder),
        };
        let lease = match got {
            Ok(l) => {
                held = Some(l.clone());
                l
            }
            Err(OutboxError::StaleLease { .. }) => {
                held = None;
                continue;
            }
            Err(OutboxError::LeaseHeld { .. }) => {
                store.wait_for_commit(seen, worker.idle_wait);
                continue;
            }
            // Contention for the lease row (the store's own retries used
            // up): try again; any other failure ends the worker.
            Err(OutboxError::Store(e))
                if e.is_conflict() || matches!(e, StoreError::RetriesExhausted { .. }) =>
            {
                continue;
            }
            Err(e) if outage.wait_out(&e) => continue,
            Err(e) => return Err(e),
        };
        let batch = match outbox.poll(&lease, topic, worker.batch.max(1)) {
            Ok(b) => b,
            Err(OutboxError::StaleLease { .. }) => continue,
            Err(e) if outage.wait_out(&e) => continue,
            Err(e) => return Err(e),
        };
        outage.over();
        if batch.is_empty() {
            // Entries may be waiting for a retry time: wake up by then at
            // the latest.
            store.wait_for_commit(seen, worker.idle_wait);
            continue;
        }
        report.batches += 1;
        let mut failed_keys = BTreeSet::new();
        for d in &batch {
            if stop.load(Ordering::SeqCst) {
                break;
            }
            if failed_keys.contains(&d.ordering_key) {
                continue;
            }
            let r = store.transact(|tx| {
                handler(tx, d).map_err(Attempt::Handler)?;
                outbox.ack(tx, &lease, d.position).map_err(Attempt::Outbox)
            });
            match r {
                Ok(()) => report.handled += 1,
                Err(Attempt::Handler(error)) => {
                    let why = strata_engine::ErrorChain(&*error).to_string();
                    report.failed += 1;
                    failed_keys.insert(d.ordering_key.clone());
                    tracing::debug!(position = %d.position, %why, "handler failed");
                    match outbox.fail(&lease, d.position, &why) {
                        Ok(Failed::DeadLettered) => report.dead_lettered += 1,
                        Ok(_) => {}
                        // Not recorded: delivered again after the wait.
                        Err(e) if outage.wait_out(&e) => break,
                        Err(e) => return Err(e),
                    }
                }
                // Finished already (a lost reply that applied, retried):
                // the handler's writes of this run rolled back.
                Err(Attempt::Outbox(OutboxError::AlreadyFinished(_))) => {}
                Err(Attempt::Outbox(OutboxError::StaleLease { .. })) => {
                    held = None;
                    break;
                }
                // Polled again after the wait, from the checkpoint.
                Err(Attempt::Outbox(e)) if outage.wait_out(&e) => break,
                Err(Attempt::Outbox(e)) => return Err(e),
            }
        }
    }
    // Stopping cleanly: the lease is given up, so another worker takes
    // over at once (after a crash it expires instead).
    if let Some(lease) = held
        && let Err(e) = outbox.release(&lease)
    {
        tracing::warn!(error = %e, "the worker's lease was not released; it will expire");
    }
    Ok(report)
}
