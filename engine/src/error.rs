//! Typed errors of the engine contract.

use thiserror::Error;

use crate::capability::CapabilityError;
use crate::contract::Predicate;
use crate::keyspace::Keyspace;

/// A backend's own error, kept as the source.
pub type BackendError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Why a read failed.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum ReadError {
    /// The handle was not issued by this engine instance (another engine,
    /// or this database before a reopen).
    #[error("{0} was not issued by this engine")]
    UnknownKeyspace(Keyspace),
    /// The range's start lies above its end.
    #[error("invalid range: start above end")]
    InvalidRange,
    /// The backend failed.
    #[error("backend read failed")]
    Backend(#[source] BackendError),
    /// The stored bytes are damaged (a failed checksum, a page the backend
    /// cannot make sense of). Retrying reads the same bytes: restore from
    /// a backup, or repair, before going on.
    #[error("stored data is damaged")]
    Corrupt(#[source] BackendError),
}

/// Why a mutation is invalid (the commit then applies nothing).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum MutationError {
    /// A counter holds a value that is not 8 bytes.
    #[error("counter value is {len} bytes, not 8")]
    CounterNotEight {
        /// Its length.
        len: usize,
    },
    /// A versionstamp offset does not leave 10 bytes in the key or value.
    #[error("versionstamp at offset {offset} does not fit in {len} bytes")]
    StampOutOfBounds {
        /// Where the stamp was to start, in bytes.
        offset: usize,
        /// The key or value length.
        len: usize,
    },
    /// More than 65,536 versionstamped mutations in one commit.
    #[error("more than 65,536 versionstamped mutations in one commit")]
    TooManyStamps,
    /// A range whose start lies above its end.
    #[error("invalid range: start above end")]
    InvalidRange,
    /// A mutation kind this engine does not know (a newer contract than
    /// the engine implements).
    #[error("not supported by this engine")]
    Unsupported,
    /// The key is longer than this engine can store (an engine with a
    /// hard maximum says so in its docs and refuses before writing).
    #[error("key of {len} bytes is longer than this engine's maximum of {max}")]
    KeyTooLarge {
        /// The key's length.
        len: usize,
        /// The engine's maximum.
        max: usize,
    },
    /// The value is larger than this engine can store in one row.
    #[error("value of {len} bytes is larger than this engine's maximum of {max}")]
    ValueTooLarge {
        /// The value's length.
        len: usize,
        /// The engine's maximum.
        max: usize,
    },
}

/// Why a predicate is invalid (the commit then applies nothing).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum PredicateError {
    /// A range whose start lies above its end.
    #[error("invalid range: start above end")]
    InvalidRange,
    /// A predicate kind this engine does not know (a newer contract than
    /// the engine implements).
    #[error("not supported by this engine")]
    Unsupported,
}

/// Why a commit failed. Unless the variant says otherwise, **nothing** of
/// the commit was applied.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum CommitError {
    /// Predicate number `index` did not hold.
    #[error("predicate {index} failed: {predicate:?}")]
    Conflict {
        /// Its position in the commit.
        index: usize,
        /// The predicate that did not hold, as given.
        predicate: Predicate,
    },
    /// A predicate or mutation names a keyspace this engine instance did
    /// not issue.
    #[error("{0} was not issued by this engine")]
    UnknownKeyspace(Keyspace),
    /// Predicate number `index` is invalid (a range with its start above its
    /// end).
    #[error("predicate {index} is invalid: {reason}")]
    InvalidPredicate {
        /// Its position in the commit.
        index: usize,
        /// Why.
        reason: PredicateError,
    },
    /// Mutation number `index` is invalid.
    #[error("mutation {index} is invalid: {reason}")]
    InvalidMutation {
        /// Its position in the commit.
        index: usize,
        /// Why.
        reason: MutationError,
    },
    /// The backend failed before applying anything.
    #[error("backend failed; the commit was not applied")]
    Backend(#[source] BackendError),
    /// The backend failed in a way that leaves the outcome unknown: the
    /// commit may or may not have been applied (and may become durable).
    /// Read to find out.
    #[error("commit outcome unknown")]
    OutcomeUnknown(#[source] BackendError),
    /// What the commit had to read (a predicate's key, a counter, the
    /// pages it writes into) is damaged; nothing was applied.
    #[error("stored data is damaged; the commit was not applied")]
    Corrupt(#[source] BackendError),
}

/// Engine-level failures (open, sync, stats, lookups).
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum EngineError {
    /// No keyspace has this name.
    #[error("no keyspace named {name:?}")]
    UnknownKeyspaceName {
        /// The name asked for.
        name: String,
    },
    /// Two keyspaces share a name.
    #[error("keyspace {name:?} is declared twice")]
    DuplicateKeyspace {
        /// The name declared twice.
        name: String,
    },
    /// More keyspaces than handles can number.
    #[error("{0} keyspaces declared; at most u32::MAX")]
    TooManyKeyspaces(usize),
    /// The backend failed.
    #[error("backend failed")]
    Backend(#[source] BackendError),
    /// The database's files are damaged: it does not open (or sync), and
    /// what it would open at is not known good. The engine's docs say how
    /// to repair, or to accept a loss explicitly.
    #[error("the database is damaged")]
    Corrupt(#[source] BackendError),
}

/// Any error of this crate, for callers that handle them alike: each
/// operation's own error converts into it with `?`.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum Error {
    /// A read failed.
    #[error(transparent)]
    Read(#[from] ReadError),
    /// A commit failed.
    #[error(transparent)]
    Commit(#[from] CommitError),
    /// Open, sync or a lookup failed.
    #[error(transparent)]
    Engine(#[from] EngineError),
    /// A capability call failed.
    #[error(transparent)]
    Capability(#[from] CapabilityError),
}

impl Error {
    /// Whether the error leaves a commit's outcome unknown (it may have
    /// been applied): read before retrying.
    pub fn is_outcome_unknown(&self) -> bool {
        matches!(self, Self::Commit(CommitError::OutcomeUnknown(_)))
    }

    /// Whether the error says stored bytes are damaged.
    pub fn is_corrupt(&self) -> bool {
        matches!(
            self,
            Self::Read(ReadError::Corrupt(_))
                | Self::Commit(CommitError::Corrupt(_))
                | Self::Engine(EngineError::Corrupt(_))
        )
    }
}

/// The backend refuses every write after an earlier write failed (a full
/// disk, an I/O error) until the engine is reopened: the source of a
/// commit's or a sync's `Backend` error. Reopening works once the cause is
/// gone (space freed), and keeps every commit acknowledged as durable.
///
/// ```
/// use strata_engine::ReopenRequired;
/// let e = ReopenRequired::new("RocksEngine", std::io::Error::other("No space left on device"));
/// assert!(e.to_string().contains("reopen"));
/// ```
#[derive(Debug, Error)]
#[error(
    "{engine} takes no more writes after an earlier write failed (a full disk?); \
     free the space, then reopen the database"
)]
pub struct ReopenRequired {
    /// The engine's type name.
    pub engine: &'static str,
    /// The failure that stopped it.
    #[source]
    pub source: BackendError,
}

impl ReopenRequired {
    /// The error of `engine` stopped by `source`.
    pub fn new(engine: &'static str, source: impl Into<BackendError>) -> Self {
        Self {
            engine,
            source: source.into(),
        }
    }

    /// Whether `e`, or an error in its source chain, is a
    /// [`ReopenRequired`].
    pub fn in_chain(e: &(dyn std::error::Error + 'static)) -> bool {
        let mut cur = Some(e);
        while let Some(err) = cur {
            if err.is::<Self>() {
                return true;
            }
            cur = err.source();
        }
        false
    }
}

/// A backend panicked on damaged bytes (the panic was caught at the
/// engine's boundary and is reported as a `Corrupt` error instead).
#[derive(Debug, Error)]
#[error("{operation} panicked inside the backend: {message}")]
pub struct BackendPanic {
    /// What the engine was doing.
    pub operation: &'static str,
    /// The panic's message, where it had one.
    pub message: String,
}

impl BackendPanic {
    /// Runs `f`, turning a panic inside it into a [`BackendPanic`]: for
    /// engines whose backend library panics on damaged files instead of
    /// returning an error. The backend's state after such a panic is not
    /// trusted: the engine reports the data as damaged.
    ///
    /// ```
    /// use strata_engine::BackendPanic;
    /// let caught = BackendPanic::catch("a read", || -> u32 { panic!("bad page") });
    /// assert_eq!(caught.unwrap_err().message, "bad page");
    /// assert_eq!(BackendPanic::catch("a read", || 7).unwrap(), 7);
    /// ```
    ///
    /// # Errors
    /// The panic, as a value.
    pub fn catch<T>(operation: &'static str, f: impl FnOnce() -> T) -> Result<T, Self> {
        let _inside = Catching::enter();
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(f))
            .map_err(|payload| Self::caught(operation, &*payload))
    }

    /// As [`BackendPanic::catch`], around a loop that also runs the
    /// caller's code: what `f` runs through [`CallerCode::run`] is not
    /// the backend's, and its panic is not caught (it goes on unwinding
    /// past this call, printed by the panic hook as any panic is). For an
    /// engine that guards a whole scan once instead of each row.
    ///
    /// ```
    /// use strata_engine::BackendPanic;
    /// // The backend's panic is caught...
    /// let caught = BackendPanic::catch_around("a scan", |_| -> u32 { panic!("bad page") });
    /// assert_eq!(caught.unwrap_err().message, "bad page");
    /// // ...the caller's is not.
    /// let theirs = std::panic::catch_unwind(|| {
    ///     BackendPanic::catch_around("a scan", |caller| caller.run(|| panic!("the caller's")))
    /// });
    /// let payload = theirs.unwrap_err();
    /// assert_eq!(payload.downcast_ref::<&str>(), Some(&"the caller's"));
    /// ```
    ///
    /// # Errors
    /// The backend's panic, as a value.
    pub fn catch_around<T>(
        operation: &'static str,
        f: impl FnOnce(&CallerCode) -> T,
    ) -> Result<T, Self> {
        let caller = CallerCode {
            running: std::cell::Cell::new(false),
        };
        let inside = Catching::enter();
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(&caller))) {
            Ok(t) => Ok(t),
            Err(payload) if caller.running.get() => {
                drop(inside);
                std::panic::resume_unwind(payload)
            }
            Err(payload) => Err(Self::caught(operation, &*payload)),
        }
    }

    /// The caught panic `payload` of `operation`, logged.
    #[cold]
    fn caught(operation: &'static str, payload: &(dyn std::any::Any + Send)) -> Self {
        let message = payload
            .downcast_ref::<&str>()
            .map(|s| (*s).to_owned())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_default();
        tracing::error!(
            operation,
            message,
            "the backend panicked; reported as damaged data"
        );
        Self { operation, message }
    }

    /// Whether this thread is inside [`BackendPanic::catch`] now: a panic
    /// raised here will be caught and reported as damaged data.
    pub fn catching() -> bool {
        CATCHING.with(std::cell::Cell::get) > 0
    }

    /// Installs, once for the process, a panic hook that prints nothing
    /// for the panics [`BackendPanic::catch`] catches (a backend's panic on
    /// a damaged file, which the engine reports as an error and logs with
    /// `tracing`), and hands every other panic to the hook that was
    /// installed before. Rust's default hook prints each panic to stderr,
    /// caught or not, so without this a tool reading a damaged file shows
    /// a panic message and a backtrace above the clean error it returns.
    /// For applications (the `strata` tool calls it first thing); a
    /// library should leave the panic hook to its application.
    ///
    /// ```
    /// use strata_engine::BackendPanic;
    /// BackendPanic::quiet_caught();
    /// // Caught, reported as an error, and nothing printed.
    /// let caught = BackendPanic::catch("a read", || -> u32 { panic!("bad page") });
    /// assert_eq!(caught.unwrap_err().message, "bad page");
    /// assert!(!BackendPanic::catching());
    /// ```
    pub fn quiet_caught() {
        static INSTALLED: std::sync::Once = std::sync::Once::new();
        INSTALLED.call_once(|| {
            let before = std::panic::take_hook();
            std::panic::set_hook(Box::new(move |info| {
                if !Self::catching() {
                    before(info);
                }
            }));
        });
    }
}

// tidy: not a planted bug: the depth of `BackendPanic::catch`, for the panic hook
thread_local! {
    /// How many [`BackendPanic::catch`] calls this thread is inside.
    static CATCHING: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

/// This thread is inside [`BackendPanic::catch`] while it lives (through
/// the panic hook's call, which runs before the unwinding drops it).
struct Catching;

impl Catching {
    #[inline]
    fn enter() -> Self {
        CATCHING.with(|c| c.set(c.get().saturating_add(1)));
        Self
    }
}

impl Drop for Catching {
    #[inline]
    fn drop(&mut self) {
        CATCHING.with(|c| c.set(c.get().saturating_sub(1)));
    }
}

/// The caller's code inside [`BackendPanic::catch_around`]: run through
/// [`CallerCode::run`], its panic is its own, not the backend's.
#[derive(Debug)]
pub struct CallerCode {
    /// Set while the caller's code runs (left set by its panic).
    running: std::cell::Cell<bool>,
}

impl CallerCode {
    /// Runs the caller's `f`. A panic inside it is not caught by the
    /// surrounding [`BackendPanic::catch_around`], and the panic hook sees
    /// this thread outside the catch ([`BackendPanic::catching`] is false
    /// here), so a quiet hook prints it as any other panic.
    #[inline]
    pub fn run<R>(&self, f: impl FnOnce() -> R) -> R {
        self.running.set(true);
        let outside = Outside::enter();
        let r = f();
        drop(outside);
        self.running.set(false);
        r
    }
}

/// This thread is outside every [`BackendPanic::catch`] while it lives:
/// the caller's code inside a [`BackendPanic::catch_around`]. The depth it
/// found is put back when it is dropped (by the unwinding too, which runs
/// after the panic hook).
struct Outside(u32);

impl Outside {
    #[inline]
    fn enter() -> Self {
        Self(CATCHING.with(|c| c.replace(0)))
    }
}

impl Drop for Outside {
    #[inline]
    fn drop(&mut self) {
        CATCHING.with(|c| c.set(self.0));
    }
}

/// A result with this crate's umbrella [`enum@Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Shows an error with every cause in its source chain, once each:
/// `outer: cause: root cause`.
///
/// Strata's errors follow one rule: a variant prints its own message
/// *or* its source, never both (the cause is returned by
/// [`source`](std::error::Error::source)). So `{e}` says what failed at
/// this layer, and `ErrorChain(&e)` tells the whole story, for a log line
/// or a user. A cause whose text the story already holds (a foreign error
/// that prints its own source) is not repeated.
///
/// ```
/// use strata_engine::{ErrorChain, ReadError};
/// let e = ReadError::Backend(std::io::Error::other("disk on fire").into());
/// assert_eq!(e.to_string(), "backend read failed");
/// assert_eq!(ErrorChain(&e).to_string(), "backend read failed: disk on fire");
/// ```
#[derive(Clone, Copy)]
pub struct ErrorChain<'a>(pub &'a (dyn std::error::Error + 'static));

impl std::fmt::Debug for ErrorChain<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(self, f)
    }
}

impl std::fmt::Display for ErrorChain<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut told = self.0.to_string();
        f.write_str(&told)?;
        let mut cause = self.0.source();
        while let Some(e) = cause {
            let text = e.to_string();
            if !text.is_empty() && !told.contains(&text) {
                write!(f, ": {text}")?;
                told.push_str(": ");
                told.push_str(&text);
            }
            cause = e.source();
        }
        Ok(())
    }
}
