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
    /// wait), renews the lease once half its time is gone (checked at
    /// each poll and before each entry), and sleeps until a commit
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
            let mut work = WorkerLoop::new(&store, clock, rng, topic, &consumer, worker)?;
            while !stopping.load(Ordering::SeqCst) {
                let turn = work.turn(&mut *handler, &stopping);
                failures.store(work.store_failures(), Ordering::SeqCst);
                match turn? {
                    Turn::Again => {}
                    Turn::Wait { seen, wait } => {
                        store.wait_for_commit(seen, wait);
                    }
                }
            }
            Ok(work.finish())
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

/// What a [`WorkerLoop`] asks of its caller after a turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Turn {
    /// Turn again at once: there may be more to do.
    Again,
    /// Nothing to do now (no entry due, the lease held by another worker,
    /// or a store failure waited out): turn again after a commit through
    /// the store later than commit `seen`, or after `wait`, whichever
    /// comes first ([`Store::wait_for_commit`]). `wait` is
    /// [`WorkerConfig::idle_wait`], shorter when an entry this loop saw
    /// fail is due for its retry sooner, longer after store failures.
    /// Turning sooner is harmless.
    Wait {
        /// The last commit the turn saw.
        seen: u64,
        /// The longest wait.
        wait: Duration,
    },
}

/// A worker's loop, driven by its caller one turn at a time: what
/// [`Worker`] runs on its own thread, for a runtime of your own (a task
/// that sleeps as [`Turn::Wait`] says) or a deterministic test that
/// decides when each worker runs and what the clock reads.
///
/// Each turn trims the topic when due ([`WorkerConfig::retention_ms`]),
/// takes or renews the consumer's lease (a lease this loop took; another
/// worker's is waited for), polls a batch and runs the handler on each
/// delivery in a transaction that acknowledges it ([`Handler`]; after a
/// failure the batch's later entries of the same ordering key wait).
/// [`WorkerLoop::finish`] gives the lease up; a loop dropped without it
/// (a crash) leaves the lease to expire.
///
/// ```
/// use std::sync::Arc;
/// use std::sync::atomic::AtomicBool;
/// use strata_codec::Limits;
/// use strata_engine::{ManualClock, MemEngine, SeededRng};
/// use strata_outbox::{Outbox, Start, Topic, Turn, WorkerConfig, WorkerLoop};
/// use strata_store::{Store, StoreOptions};
///
/// let options = Outbox::<MemEngine>::declare(StoreOptions::new(Limits::FOUNDATIONDB));
/// let clock = Arc::new(ManualClock::new(1_700_000_000_000));
/// let store = Store::open_with(
///     MemEngine::open(options.keyspace_specs())?,
///     options,
///     clock.clone(),
///     Box::new(SeededRng::new(1)),
/// )?;
/// let jobs: Topic<String> = Topic::new("jobs")?;
/// let outbox = Outbox::open(&store, Default::default())?;
/// outbox.register("jobs", "printer", Start::Beginning)?;
/// for job in ["a", "b"] {
///     store.transact(|tx| outbox.push(tx, &jobs, &job.to_owned()))?;
/// }
/// let mut work = WorkerLoop::new(
///     &store,
///     clock.clone(),
///     Box::new(SeededRng::new(2)),
///     jobs,
///     "printer",
///     WorkerConfig::new("worker-1"),
/// )?;
/// let (mut printed, stop) = (Vec::new(), AtomicBool::new(false));
/// let mut handler = |_tx: &mut strata_store::Tx<'_, MemEngine>, d: &strata_outbox::Delivery<String>| {
///     printed.push(d.entry.clone());
///     Ok(())
/// };
/// // A turn handles the batch; the next finds nothing and asks to wait.
/// assert_eq!(work.turn(&mut handler, &stop)?, Turn::Again);
/// assert!(matches!(work.turn(&mut handler, &stop)?, Turn::Wait { .. }));
/// assert_eq!(printed, ["a", "b"]);
/// assert_eq!(work.finish().handled, 2);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct WorkerLoop<'s, E: Engine, T> {
    outbox: Outbox<'s, E>,
    store: &'s Store<E>,
    topic: Topic<T>,
    consumer: String,
    config: WorkerConfig,
    clock: Arc<dyn Clock>,
    report: WorkerReport,
    /// The lease this loop took, renewed once half its time is gone.
    held: Option<crate::Lease>,
    /// When the last trim ran (`None`: more to trim, at once).
    trimmed_at: Option<u64>,
    /// The store failures in a row being waited out.
    failures: u32,
    /// The earliest retry time of an entry this loop saw fail: an idle
    /// wait ends by then while it is ahead.
    retry_at: Option<u64>,
}

impl<E: Engine, T> std::fmt::Debug for WorkerLoop<'_, E, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkerLoop")
            .field("consumer", &self.consumer)
            .field("holder", &self.config.holder)
            .field("report", &self.report)
            .field("holds_lease", &self.held.is_some())
            .field("store_failures", &self.failures)
            .finish_non_exhaustive()
    }
}

impl<'s, E: Engine, T: Value> WorkerLoop<'s, E, T> {
    /// A loop for `consumer` (registered on `topic`), with its own clock
    /// and generator (as [`Worker::spawn`]).
    ///
    /// # Errors
    /// [`OutboxError::NotDeclared`] when the store lacks the outbox's
    /// spaces.
    pub fn new(
        store: &'s Store<E>,
        clock: Arc<dyn Clock>,
        rng: Box<dyn Rng>,
        topic: Topic<T>,
        consumer: &str,
        config: WorkerConfig,
    ) -> Result<Self, OutboxError> {
        Ok(Self {
            outbox: Outbox::new(store, config.outbox, clock.clone(), rng)?,
            store,
            topic,
            consumer: consumer.to_owned(),
            config,
            clock,
            report: WorkerReport::default(),
            held: None,
            trimmed_at: None,
            failures: 0,
            retry_at: None,
        })
    }

    /// What the loop did so far.
    pub fn report(&self) -> WorkerReport {
        self.report
    }

    /// The store failures in a row the loop is waiting out (as
    /// [`Worker::store_failures`]).
    pub fn store_failures(&self) -> u32 {
        self.failures
    }

    /// One turn: trim when due, hold the lease, poll a batch and handle
    /// it with `handler`, stopping after the entry in hand once `stop` is
    /// set.
    ///
    /// # Errors
    /// What ends a worker: damage, an unknown consumer, an engine that
    /// must be reopened, or store failures beyond
    /// [`WorkerConfig::max_store_failures`]. The loop may be turned again
    /// after an error (it then starts from its lease, as after a restart).
    pub fn turn<H>(&mut self, handler: &mut H, stop: &AtomicBool) -> Result<Turn, OutboxError>
    where
        H: FnMut(&mut Tx<'_, E>, &Delivery<T>) -> Result<(), HandlerError> + ?Sized,
    {
        self.retain();
        let idle_wait = self.config.idle_wait;
        let idle = |seen| Turn::Wait {
            seen,
            wait: idle_wait,
        };
        let before = self.store.last_commit_seen();
        // The lease this loop took is kept (renewed once half its time is
        // gone); another's (whatever its holder name) is waited for.
        let got = match self.held.clone() {
            Some(l) => self.keep(&l),
            None => self
                .outbox
                .acquire(self.topic.name(), &self.consumer, &self.config.holder),
        };
        let lease = match got {
            Ok(l) => {
                self.held = Some(l.clone());
                l
            }
            Err(OutboxError::LeaseHeld { .. }) => return Ok(idle(before)),
            Err(e) => return self.lease_failed(e),
        };
        // Read after the lease's own commit, so that an idle worker's wait
        // does not end at once on it (a busy loop renewing the lease);
        // read before the poll, so that a commit the poll did not see
        // ends it. Planted: read before the lease's commit, as it was.
        let seen = if strata_engine::fault_point!("worker-waits-for-its-own-commit") {
            before
        } else {
            self.store.last_commit_seen()
        };
        let batch = match self
            .outbox
            .poll(&lease, &self.topic, self.config.batch.max(1))
        {
            Ok(b) => b,
            Err(OutboxError::StaleLease { .. }) => return Ok(Turn::Again),
            Err(e) => return self.wait_out(e),
        };
        self.over();
        if batch.is_empty() {
            return Ok(Turn::Wait {
                seen,
                wait: self.idle_wait(),
            });
        }
        self.report.batches += 1;
        let mut lease = lease;
        let mut failed_keys = BTreeSet::new();
        for d in &batch {
            if stop.load(Ordering::SeqCst) {
                break;
            }
            // Planted: the batch's later entries of a failed entry's key
            // are handled at once, before it.
            if failed_keys.contains(&d.ordering_key)
                && !strata_engine::fault_point!("worker-handles-past-a-failure")
            {
                continue;
            }
            // A long batch keeps its lease: renewed before the entry once
            // half its time is gone.
            lease = match self.keep(&lease) {
                Ok(l) => l,
                Err(e) => return self.lease_failed(e),
            };
            self.held = Some(lease.clone());
            let outbox = &self.outbox;
            let r = self.store.transact(|tx| {
                handler(tx, d).map_err(Attempt::Handler)?;
                outbox.ack(tx, &lease, d.position).map_err(Attempt::Outbox)
            });
            match r {
                Ok(()) => self.report.handled += 1,
                Err(Attempt::Handler(error)) => {
                    let why = strata_engine::ErrorChain(&*error).to_string();
                    self.report.failed += 1;
                    failed_keys.insert(d.ordering_key.clone());
                    tracing::debug!(position = %d.position, %why, "handler failed");
                    match self.outbox.fail(&lease, d.position, &why) {
                        Ok(Failed::DeadLettered) => self.report.dead_lettered += 1,
                        Ok(Failed::Retry { at_ms, .. }) => {
                            self.retry_at = Some(self.retry_at.map_or(at_ms, |r| r.min(at_ms)));
                        }
                        // Not recorded: delivered again after the wait.
                        Err(e) => return self.wait_out(e),
                    }
                }
                // Finished already (a lost reply that applied, retried):
                // the handler's writes of this run rolled back.
                Err(Attempt::Outbox(OutboxError::AlreadyFinished(_))) => {}
                Err(Attempt::Outbox(OutboxError::StaleLease { .. })) => {
                    self.held = None;
                    return Ok(Turn::Again);
                }
                // Polled again after the wait, from the checkpoint.
                Err(Attempt::Outbox(e)) => return self.wait_out(e),
            }
        }
        Ok(Turn::Again)
    }

    /// Ends the loop: the lease is given up, so another worker takes over
    /// at once (after a crash it expires instead). Returns what the loop
    /// did.
    pub fn finish(self) -> WorkerReport {
        if let Some(lease) = &self.held
            && let Err(e) = self.outbox.release(lease)
        {
            tracing::warn!(error = %e, "the worker's lease was not released; it will expire");
        }
        self.report
    }

    /// A failure to take or keep the lease: a lease lost (taken over or
    /// released) is taken again at the next turn; contention for the
    /// lease row (the store's own retries used up) is tried again; a
    /// store failure is waited out; anything else ends the worker.
    fn lease_failed(&mut self, e: OutboxError) -> Result<Turn, OutboxError> {
        match e {
            OutboxError::StaleLease { .. } => {
                self.held = None;
                Ok(Turn::Again)
            }
            OutboxError::Store(e)
                if e.is_conflict() || matches!(e, StoreError::RetriesExhausted { .. }) =>
            {
                Ok(Turn::Again)
            }
            e => self.wait_out(e),
        }
    }

    /// How long to wait with nothing due: [`WorkerConfig::idle_wait`], or
    /// less when an entry this loop saw fail is due for its retry sooner
    /// (wake up by then at the latest).
    fn idle_wait(&self) -> Duration {
        let now = self.clock.now_ms();
        match self.retry_at {
            Some(at) if at > now => self.config.idle_wait.min(Duration::from_millis(at - now)),
            _ => self.config.idle_wait,
        }
    }

    /// `lease`, renewed when half its time or less is left (a commit);
    /// as it is otherwise. An idle worker so renews every `lease_ms / 2`
    /// rather than at every turn; the poll and every acknowledgement check
    /// the lease whether renewed or not.
    fn keep(&self, lease: &crate::Lease) -> Result<crate::Lease, OutboxError> {
        let left = lease.expires_ms.saturating_sub(self.clock.now_ms());
        if left > self.config.outbox.lease_ms / 2 {
            return Ok(lease.clone());
        }
        self.outbox.renew(lease)
    }

    /// Retention: one bounded trim commit now and then (a failure is
    /// retried at the next turn; the entries are only kept longer).
    fn retain(&mut self) {
        let Some(keep) = self.config.retention_ms else {
            return;
        };
        let now = self.clock.now_ms();
        if self
            .trimmed_at
            .is_some_and(|t| now.saturating_sub(t) < self.config.trim_every_ms)
        {
            return;
        }
        self.trimmed_at = Some(now);
        match self.outbox.trim(self.topic.name(), keep, Some(1)) {
            Ok(t) => {
                self.report.trimmed += t.entries;
                // More to trim: another commit at the next turn.
                if t.more {
                    self.trimmed_at = None;
                }
            }
            Err(e) => tracing::warn!(error = %e, "the worker's trim failed"),
        }
    }

    /// A failure: waited out (the wait returned) when it is the store
    /// failing to reach its engine, within
    /// [`WorkerConfig::max_store_failures`]; returned otherwise.
    fn wait_out(&mut self, e: OutboxError) -> Result<Turn, OutboxError> {
        if !e.is_transient()
            || self
                .config
                .max_store_failures
                .is_some_and(|most| self.failures >= most)
        {
            return Err(e);
        }
        self.failures += 1;
        let wait = self
            .config
            .idle_wait
            .saturating_mul(1 << (self.failures - 1).min(5));
        tracing::warn!(
            error = %strata_engine::ErrorChain(&e),
            failures = self.failures,
            wait_ms = wait.as_millis(),
            "the worker's store failed; it tries again"
        );
        Ok(Turn::Wait {
            seen: self.store.last_commit_seen(),
            wait,
        })
    }

    /// The store answered: the failures in a row are over.
    fn over(&mut self) {
        self.failures = 0;
    }
}
