//! The fault-injecting engine wrapper and the fault model.
//!
//! [`FaultyEngine`] wraps any [`Engine`] and, with probabilities drawn per
//! seed ([`FaultConfig::swarm`]), makes commits fail before applying
//! (transient or sticky until restart), makes commits end with an unknown
//! outcome (applied or not, as the seed decides), and fails syncs and reads
//! (a range also part-way through).
//! Crashes and restarts go through [`Restart`], which each engine
//! implements in its own way (for [`MemEngine`], its crash images).

use std::fmt;
use std::sync::{Mutex, PoisonError};

use strata_engine::{
    Commit, CommitError, CommitInfo, Engine, EngineError, Keyspace, Keyspaces, MemEngine,
    RangeSpec, ReadError, Rng, SeededRng, Snapshot,
};

/// The classes of fault the simulation injects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FaultClass {
    /// Crash and restart, losing a suffix of unsynced commits.
    Crash,
    /// A commit fails before applying anything.
    CommitError,
    /// Like `CommitError`, and every later operation fails until a restart.
    Sticky,
    /// A commit returns "outcome unknown"; it may or may not be applied.
    Unknown,
    /// A snapshot read fails.
    Read,
    /// A sync fails: before syncing, after making a prefix of the pending
    /// commits durable, or after making all of them durable.
    Sync,
    /// The simulated clock jumps (forward or back).
    Clock,
}

impl FaultClass {
    /// Every class, in report order.
    pub const ALL: [Self; 7] = [
        Self::Crash,
        Self::CommitError,
        Self::Sticky,
        Self::Unknown,
        Self::Read,
        Self::Sync,
        Self::Clock,
    ];

    /// Its name on the command line.
    pub const fn name(self) -> &'static str {
        match self {
            Self::Crash => "crash",
            Self::CommitError => "commit",
            Self::Sticky => "sticky",
            Self::Unknown => "unknown",
            Self::Read => "read",
            Self::Sync => "sync",
            Self::Clock => "clock",
        }
    }

    /// The class with this name.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|c| c.name() == name)
    }

    const fn index(self) -> usize {
        self as usize
    }
}

/// Per-class probabilities for one seed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FaultConfig {
    p: [f64; 7],
}

impl FaultConfig {
    /// No faults.
    pub const NONE: Self = Self { p: [0.0; 7] };

    /// Swarm testing: each enabled class gets a probability drawn from the
    /// seed (often zero, sometimes high), so some seeds crash a lot and
    /// others never.
    pub fn swarm(rng: &mut dyn Rng, enabled: &[FaultClass]) -> Self {
        const LEVELS: [f64; 5] = [0.0, 0.0, 0.005, 0.02, 0.06];
        let mut p = [0.0; 7];
        for class in FaultClass::ALL {
            let level = LEVELS[usize::try_from(rng.below(LEVELS.len() as u64)).unwrap_or(0)];
            if enabled.contains(&class) {
                p[class.index()] = level;
            }
        }
        Self { p }
    }

    /// The probability of `class`.
    pub fn p(&self, class: FaultClass) -> f64 {
        self.p[class.index()]
    }
}

/// How many faults of each class fired.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FaultCounters {
    counts: [u64; 7],
}

impl FaultCounters {
    /// Count one `class`.
    pub fn hit(&mut self, class: FaultClass) {
        self.counts[class.index()] += 1;
    }

    /// The count of `class`.
    pub fn get(&self, class: FaultClass) -> u64 {
        self.counts[class.index()]
    }

    /// Adds another set of counts.
    pub fn add(&mut self, other: &Self) {
        for (a, b) in self.counts.iter_mut().zip(other.counts) {
            *a += b;
        }
    }
}

/// The error an injected fault surfaces as (the backend error's source).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InjectedFault {
    /// Which kind of fault fired.
    pub class: FaultClass,
}

impl fmt::Display for InjectedFault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "injected {} fault", self.class.name())
    }
}

impl std::error::Error for InjectedFault {}

struct FaultState {
    config: FaultConfig,
    rng: SeededRng,
    counters: FaultCounters,
    sticky: bool,
    /// Real crashes of the engine's server inside a commit
    /// ([`Restart::commit_across_crash`]).
    server_crashes: u64,
}

/// An engine whose operations fail as the seed decides. See the
/// [module docs](self).
pub struct FaultyEngine<E> {
    inner: E,
    state: Mutex<FaultState>,
}

impl<E> FaultyEngine<E> {
    /// Wraps `inner` with faults drawn from `seed` under `config`.
    pub fn new(inner: E, config: FaultConfig, seed: u64) -> Self {
        Self {
            inner,
            state: Mutex::new(FaultState {
                config,
                rng: SeededRng::new(seed),
                counters: FaultCounters::default(),
                sticky: false,
                server_crashes: 0,
            }),
        }
    }

    /// The wrapped engine, for checks that must not see faults.
    pub fn inner(&self) -> &E {
        &self.inner
    }

    /// Faults fired so far.
    pub fn counters(&self) -> FaultCounters {
        self.lock().counters
    }

    /// Counts a fault the run injected itself (a clock jump).
    pub fn record(&self, class: FaultClass) {
        self.lock().counters.hit(class);
    }

    /// How many times the engine's server really crashed inside a commit:
    /// a snapshot open across one has lost its connection.
    pub fn server_crashes(&self) -> u64 {
        self.lock().server_crashes
    }

    /// Whether a sticky fault is in force (until the next restart).
    pub fn is_stuck(&self) -> bool {
        self.lock().sticky
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, FaultState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Draws whether a fault of `class` fires now (always, when stuck and
    /// `class` can be stuck).
    fn fires(&self, class: FaultClass) -> bool {
        let mut s = self.lock();
        if s.sticky && class != FaultClass::Unknown {
            return true;
        }
        let p = s.config.p(class);
        let fired = p > 0.0 && s.rng.chance(p);
        if fired {
            s.counters.hit(class);
        }
        fired
    }

    /// As [`FaultyEngine::fires`] with the class's probability scaled.
    fn fires_scaled(&self, class: FaultClass, scale: f64) -> bool {
        let mut s = self.lock();
        let p = s.config.p(class) * scale;
        let fired = p > 0.0 && s.rng.chance(p);
        if fired {
            s.counters.hit(class);
        }
        fired
    }

    fn coin(&self) -> bool {
        self.lock().rng.chance(0.5)
    }

    fn into_parts(self) -> (E, FaultState) {
        let state = self
            .state
            .into_inner()
            .unwrap_or_else(PoisonError::into_inner);
        (self.inner, state)
    }
}

fn injected(class: FaultClass) -> strata_engine::BackendError {
    Box::new(InjectedFault { class })
}

/// Crash and clean restart, engine by engine.
pub trait Restart: Engine + Sized {
    /// A crash and restart: may lose any suffix of the unsynced commits.
    #[must_use]
    fn crash_restart(self, rng: &mut dyn Rng) -> Self;
    /// A clean shutdown and reopen.
    #[must_use]
    fn clean_restart(self) -> Self;
    /// A sync interrupted part-way: some prefix of the unsynced commits
    /// made durable, as `rng` chooses. Engines that cannot do part of a
    /// sync do all of it.
    fn sync_partially(&self, rng: &mut dyn Rng) {
        let _ = rng;
        let _ = self.sync();
    }
    /// Whether [`Restart::commit_across_crash`] is real on this engine.
    fn loses_real_replies(&self) -> bool {
        false
    }
    /// Commits `commit` while its server crashes: before its last message
    /// is sent (`applied: false`) or after its reply came (`applied: true`,
    /// the reply then lost); the server restarts and other work reuses
    /// what the crash forgot before the engine settles the commit itself.
    /// Every earlier commit is made durable first, so the crash loses
    /// nothing else. Only where [`Restart::loses_real_replies`].
    ///
    /// # Errors
    /// As the engine settled the commit.
    fn commit_across_crash(
        &self,
        commit: Commit,
        applied: bool,
    ) -> Result<CommitInfo, CommitError> {
        let _ = applied;
        self.commit(commit)
    }
}

impl Restart for MemEngine {
    fn crash_restart(self, rng: &mut dyn Rng) -> Self {
        // Reopening an image of this engine's own keyspaces cannot fail.
        MemEngine::from_image(self.crash(rng)).unwrap_or_else(|e| unreachable!("{e}"))
    }

    fn clean_restart(self) -> Self {
        MemEngine::from_image(self.close()).unwrap_or_else(|e| unreachable!("{e}"))
    }

    fn sync_partially(&self, rng: &mut dyn Rng) {
        let pending = self.pending_commits();
        let keep = usize::try_from(rng.below(pending as u64 + 1)).unwrap_or(0);
        MemEngine::sync_partially(self, keep);
    }
}

impl<E: Restart> FaultyEngine<E> {
    /// Crashes and restarts the inner engine; sticky faults clear, the
    /// counters and the fault stream carry on.
    #[must_use]
    pub fn crash_restart(self, rng: &mut dyn Rng) -> Self {
        let (inner, mut state) = self.into_parts();
        state.counters.hit(FaultClass::Crash);
        state.sticky = false;
        Self {
            inner: inner.crash_restart(rng),
            state: Mutex::new(state),
        }
    }

    /// Shuts down cleanly and reopens.
    #[must_use]
    pub fn clean_restart(self) -> Self {
        let (inner, mut state) = self.into_parts();
        state.sticky = false;
        Self {
            inner: inner.clean_restart(),
            state: Mutex::new(state),
        }
    }

    /// Applies `f` to the inner engine (to re-plant a bug after a restart).
    #[must_use]
    pub fn map_inner(self, f: impl FnOnce(E) -> E) -> Self {
        let (inner, state) = self.into_parts();
        Self {
            inner: f(inner),
            state: Mutex::new(state),
        }
    }
}

impl<E: Restart> Engine for FaultyEngine<E> {
    type Snapshot<'e>
        = FaultySnapshot<'e, E>
    where
        Self: 'e;

    fn keyspaces(&self) -> &Keyspaces {
        self.inner.keyspaces()
    }

    fn snapshot(&self) -> Result<FaultySnapshot<'_, E>, ReadError> {
        if self.fires(FaultClass::Read) {
            return Err(ReadError::Backend(injected(FaultClass::Read)));
        }
        Ok(FaultySnapshot {
            inner: self.inner.snapshot()?,
            engine: self,
        })
    }

    fn commit(&self, commit: Commit) -> Result<CommitInfo, CommitError> {
        if self.fires(FaultClass::Sticky) {
            self.lock().sticky = true;
            return Err(CommitError::Backend(injected(FaultClass::Sticky)));
        }
        if self.fires(FaultClass::CommitError) {
            return Err(CommitError::Backend(injected(FaultClass::CommitError)));
        }
        if self.fires(FaultClass::Unknown) {
            if self.inner.loses_real_replies() {
                // The engine's own resolver settles a reply lost in a real
                // crash of its server.
                let applied = self.coin();
                self.lock().server_crashes += 1;
                return self.inner.commit_across_crash(commit, applied);
            }
            if self.coin() {
                // Applied (or refused by a predicate), but the caller cannot tell.
                return match self.inner.commit(commit) {
                    Ok(_) => Err(CommitError::OutcomeUnknown(injected(FaultClass::Unknown))),
                    Err(e) => Err(e),
                };
            }
            return Err(CommitError::OutcomeUnknown(injected(FaultClass::Unknown)));
        }
        self.inner.commit(commit)
    }

    /// A group fails as a whole: before anything is written, or (an
    /// unknown outcome) either before anything is written or after its
    /// commits were applied and only a prefix of the pending commits made
    /// durable, as a durable write cut short leaves it. A commit the
    /// engine refused keeps its refusal.
    fn commit_group(&self, commits: Vec<Commit>) -> Vec<Result<CommitInfo, CommitError>> {
        let n = commits.len();
        let all = |class: FaultClass, unknown: bool| {
            (0..n)
                .map(|_| {
                    Err(if unknown {
                        CommitError::OutcomeUnknown(injected(class))
                    } else {
                        CommitError::Backend(injected(class))
                    })
                })
                .collect()
        };
        if self.fires(FaultClass::Sticky) {
            self.lock().sticky = true;
            return all(FaultClass::Sticky, false);
        }
        if self.fires(FaultClass::CommitError) {
            return all(FaultClass::CommitError, false);
        }
        if self.fires(FaultClass::Unknown) {
            if !self.coin() {
                return all(FaultClass::Unknown, true);
            }
            let seed = self.lock().rng.next_u64();
            let buffered = commits
                .into_iter()
                .map(|c| c.durability(strata_engine::Durability::Buffered))
                .collect();
            let results = self.inner.commit_group(buffered);
            self.inner.sync_partially(&mut SeededRng::new(seed));
            return results
                .into_iter()
                .map(|r| match r {
                    Ok(_) => Err(CommitError::OutcomeUnknown(injected(FaultClass::Unknown))),
                    Err(e) => Err(e),
                })
                .collect();
        }
        self.inner.commit_group(commits)
    }

    fn sync(&self) -> Result<u64, EngineError> {
        if self.fires(FaultClass::Sync) {
            // The sync fails before doing anything, after making a prefix
            // of the pending commits durable, or after making all of them
            // durable: an error says nothing about what is durable.
            // (The lock is taken once: the guard of a match scrutinee
            // would live through the arms.)
            let (how, seed) = {
                let mut s = self.lock();
                (s.rng.below(3), s.rng.next_u64())
            };
            match how {
                0 => {}
                1 => {
                    self.inner.sync_partially(&mut SeededRng::new(seed));
                }
                _ => {
                    let _ = self.inner.sync();
                }
            }
            return Err(EngineError::Backend(injected(FaultClass::Sync)));
        }
        self.inner.sync()
    }

    fn durable_version(&self) -> u64 {
        self.inner.durable_version()
    }

    fn last_version(&self) -> u64 {
        self.inner.last_version()
    }
}

/// A snapshot whose reads may fail.
pub struct FaultySnapshot<'e, E: Engine> {
    inner: E::Snapshot<'e>,
    engine: &'e FaultyEngine<E>,
}

impl<'e, E: Engine + 'e> Snapshot for FaultySnapshot<'e, E> {
    type Range<'s>
        = FaultyRange<'s, E, <E::Snapshot<'e> as Snapshot>::Range<'s>>
    where
        Self: 's;

    type Cursor<'s>
        = strata_engine::Lent<Self::Range<'s>>
    where
        Self: 's;

    fn version(&self) -> Result<u64, ReadError> {
        self.inner.version()
    }

    fn get(&self, ks: Keyspace, key: &[u8]) -> Result<Option<Vec<u8>>, ReadError> {
        if self.engine.fires(FaultClass::Read) {
            return Err(ReadError::Backend(injected(FaultClass::Read)));
        }
        self.inner.get(ks, key)
    }

    fn range(&self, ks: Keyspace, range: RangeSpec) -> Result<Self::Range<'_>, ReadError> {
        if self.engine.fires(FaultClass::Read) {
            return Err(ReadError::Backend(injected(FaultClass::Read)));
        }
        Ok(FaultyRange {
            inner: self.inner.range(ks, range)?,
            engine: self.engine,
            failed: false,
        })
    }

    fn cursor(&self, ks: Keyspace, range: RangeSpec) -> Result<Self::Cursor<'_>, ReadError> {
        self.range(ks, range).map(strata_engine::Lent::new)
    }
}

/// A range that may fail part-way: a read fault surfaces as an error item
/// after some rows (a backend error in the middle of an iteration), and the
/// iteration ends there.
pub struct FaultyRange<'s, E: Engine, R> {
    inner: R,
    engine: &'s FaultyEngine<E>,
    failed: bool,
}

impl<E: Engine, R> Iterator for FaultyRange<'_, E, R>
where
    R: Iterator<Item = Result<(Vec<u8>, Vec<u8>), ReadError>>,
{
    type Item = Result<(Vec<u8>, Vec<u8>), ReadError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        // A tenth of the point-read rate per row: long scans fail midway
        // sometimes, short ones rarely.
        if self.engine.fires_scaled(FaultClass::Read, 0.1) {
            self.failed = true;
            return Some(Err(ReadError::Backend(injected(FaultClass::Read))));
        }
        self.inner.next()
    }
}
