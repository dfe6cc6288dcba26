//! The engine contract: snapshots, commits, durability.

use std::ops::{Bound, ControlFlow};

use crate::error::{CommitError, EngineError, ReadError};
use crate::keyspace::{Keyspace, Keyspaces};

/// A range of keys to read: bounds, direction and an optional limit.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RangeSpec {
    /// Lower bound.
    pub start: Bound<Vec<u8>>,
    /// Upper bound.
    pub end: Bound<Vec<u8>>,
    /// Yield from the upper end down.
    pub reverse: bool,
    /// Yield at most this many entries.
    pub limit: Option<usize>,
}

impl RangeSpec {
    /// Every key, ascending.
    pub fn all() -> Self {
        Self {
            start: Bound::Unbounded,
            end: Bound::Unbounded,
            reverse: false,
            limit: None,
        }
    }

    /// Keys in `[start, end)`, ascending.
    pub fn half_open(start: impl Into<Vec<u8>>, end: impl Into<Vec<u8>>) -> Self {
        Self {
            start: Bound::Included(start.into()),
            end: Bound::Excluded(end.into()),
            reverse: false,
            limit: None,
        }
    }

    /// Every key starting with `prefix`.
    pub fn prefix(prefix: &[u8]) -> Self {
        let end = strinc(prefix).map_or(Bound::Unbounded, Bound::Excluded);
        Self {
            start: Bound::Included(prefix.to_vec()),
            end,
            reverse: false,
            limit: None,
        }
    }

    /// The same range, descending.
    #[must_use]
    pub fn reversed(mut self) -> Self {
        self.reverse = !self.reverse;
        self
    }

    /// The same range, yielding at most `n` entries.
    #[must_use]
    pub fn limit(mut self, n: usize) -> Self {
        self.limit = Some(n);
        self
    }

    /// Whether `key` lies within the bounds.
    pub fn contains(&self, key: &[u8]) -> bool {
        let above = match &self.start {
            Bound::Included(s) => key >= s.as_slice(),
            Bound::Excluded(s) => key > s.as_slice(),
            Bound::Unbounded => true,
        };
        let below = match &self.end {
            Bound::Included(e) => key <= e.as_slice(),
            Bound::Excluded(e) => key < e.as_slice(),
            Bound::Unbounded => true,
        };
        above && below
    }

    /// Checks the bounds: a start key above the end key is refused. A
    /// range with equal start and end keys is valid (and empty unless both
    /// bounds include the key).
    ///
    /// # Errors
    /// [`ReadError::InvalidRange`].
    pub fn validate(&self) -> Result<(), ReadError> {
        match (&self.start, &self.end) {
            (Bound::Included(s) | Bound::Excluded(s), Bound::Included(e) | Bound::Excluded(e))
                if s > e =>
            {
                Err(ReadError::InvalidRange)
            }
            _ => Ok(()),
        }
    }
}

/// FoundationDB's `strinc`: the first byte string that sorts after every
/// string starting with `prefix`, or `None` when there is none (the prefix is
/// empty or all `0xFF`), meaning "unbounded". The one definition in the
/// workspace (`strata_keys::strinc` re-exports it).
///
/// ```
/// use strata_engine::strinc;
/// assert_eq!(strinc(b"ab"), Some(b"ac".to_vec()));
/// assert_eq!(strinc(&[1, 0xFF, 0xFF]), Some(vec![2]));
/// assert_eq!(strinc(&[0xFF]), None);
/// ```
pub fn strinc(prefix: &[u8]) -> Option<Vec<u8>> {
    let keep = prefix.iter().rposition(|&b| b != 0xFF)?;
    let mut end = prefix[..=keep].to_vec();
    end[keep] += 1;
    Some(end)
}

/// A condition checked inside the commit, against the latest committed
/// state, before any mutation. If one fails nothing is applied.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Predicate {
    /// The key holds a value.
    Exists {
        /// The keyspace it reads or writes.
        ks: Keyspace,
        /// The key, in the keyspace's byte order.
        key: Vec<u8>,
    },
    /// The key holds no value.
    Absent {
        /// The keyspace it reads or writes.
        ks: Keyspace,
        /// The key, in the keyspace's byte order.
        key: Vec<u8>,
    },
    /// The key's value is exactly `value` (`None`: absent).
    ValueEquals {
        /// The keyspace it reads or writes.
        ks: Keyspace,
        /// The key, in the keyspace's byte order.
        key: Vec<u8>,
        /// Expected value.
        value: Option<Vec<u8>>,
    },
    /// No key lies in the range (its direction and limit are ignored).
    RangeEmpty {
        /// The keyspace it reads or writes.
        ks: Keyspace,
        /// The keys it covers (bounds only).
        range: RangeSpec,
    },
}

impl Predicate {
    /// The keyspace it reads.
    pub fn keyspace(&self) -> Keyspace {
        match self {
            Self::Exists { ks, .. }
            | Self::Absent { ks, .. }
            | Self::ValueEquals { ks, .. }
            | Self::RangeEmpty { ks, .. } => *ks,
        }
    }
}

/// Where a versionstamped put writes the 10-byte versionstamp.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StampAt {
    /// At this byte offset of the key.
    Key(usize),
    /// At this byte offset of the value.
    Value(usize),
    /// At this byte offset of the key, every bit of the stamp inverted:
    /// keys stamped across commits then sort newest first (history rows
    /// keyed by inverted commit version, where the commit's own version is
    /// known only as it commits).
    KeyInverted(usize),
}

impl StampAt {
    /// The 10 bytes this placement writes for commit `version` and `order`
    /// within the commit.
    pub fn stamp(self, version: u64, order: u16) -> [u8; 10] {
        let mut out = [0; 10];
        out[..8].copy_from_slice(&version.to_be_bytes());
        out[8..].copy_from_slice(&order.to_be_bytes());
        if let Self::KeyInverted(_) = self {
            for b in &mut out {
                *b = !*b;
            }
        }
        out
    }
}

/// One change; a commit applies its mutations in order.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Mutation {
    /// Set a key's value.
    Put {
        /// The keyspace it reads or writes.
        ks: Keyspace,
        /// The key, in the keyspace's byte order.
        key: Vec<u8>,
        /// The bytes to store (any length, empty included).
        value: Vec<u8>,
    },
    /// Remove a key (absent keys are fine).
    Delete {
        /// The keyspace it reads or writes.
        ks: Keyspace,
        /// The key, in the keyspace's byte order.
        key: Vec<u8>,
    },
    /// Remove every key in a range (direction and limit are ignored).
    DeleteRange {
        /// The keyspace it reads or writes.
        ks: Keyspace,
        /// The keys it covers (bounds only).
        range: RangeSpec,
    },
    /// Add `delta` to an atomic counter: an 8-byte little-endian two's
    /// complement `i64`; an absent key counts as 0; the sum wraps. A value
    /// of any other length fails the commit.
    Add {
        /// The keyspace it reads or writes.
        ks: Keyspace,
        /// The key, in the keyspace's byte order.
        key: Vec<u8>,
        /// The signed amount added (wrapping).
        delta: i64,
    },
    /// A put whose key or value receives the commit's 10-byte versionstamp
    /// (8-byte big-endian commit version, 2-byte big-endian order of this
    /// mutation among the commit's versionstamped ones) at `at`: the offset
    /// `foundationdb-tuple` reports for an incomplete `Versionstamp`.
    PutVersionstamped {
        /// The keyspace it reads or writes.
        ks: Keyspace,
        /// Key (the placeholder bytes are overwritten when `at` is in it).
        key: Vec<u8>,
        /// The bytes to store (any length, empty included).
        value: Vec<u8>,
        /// Where the stamp goes.
        at: StampAt,
    },
}

impl Mutation {
    /// The keyspace it writes.
    pub fn keyspace(&self) -> Keyspace {
        match self {
            Self::Put { ks, .. }
            | Self::Delete { ks, .. }
            | Self::DeleteRange { ks, .. }
            | Self::Add { ks, .. }
            | Self::PutVersionstamped { ks, .. } => *ks,
        }
    }
}

/// When a commit returns relative to durability.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Durability {
    /// Return after the commit (and so every earlier one) is durable.
    #[default]
    Immediate,
    /// Return before; a crash may lose it until a later `sync()` or
    /// immediate commit.
    Buffered,
}

/// One atomic unit of predicates and mutations.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct Commit {
    /// Checked first; any failure aborts the commit.
    pub predicates: Vec<Predicate>,
    /// Applied in order if every predicate holds.
    pub mutations: Vec<Mutation>,
    /// When to return.
    pub durability: Durability,
}

impl Commit {
    /// An empty immediate commit.
    pub fn new() -> Self {
        Self::default()
    }

    /// Every keyspace the commit reads or writes, predicates first.
    pub fn keyspaces(&self) -> impl Iterator<Item = Keyspace> + '_ {
        self.predicates
            .iter()
            .map(Predicate::keyspace)
            .chain(self.mutations.iter().map(Mutation::keyspace))
    }

    /// With this durability.
    #[must_use]
    pub fn durability(mut self, durability: Durability) -> Self {
        self.durability = durability;
        self
    }

    /// Adds a predicate.
    #[must_use]
    pub fn require(mut self, predicate: Predicate) -> Self {
        self.predicates.push(predicate);
        self
    }

    /// Adds a put.
    #[must_use]
    pub fn put(mut self, ks: Keyspace, key: impl Into<Vec<u8>>, value: impl Into<Vec<u8>>) -> Self {
        self.mutations.push(Mutation::Put {
            ks,
            key: key.into(),
            value: value.into(),
        });
        self
    }

    /// Adds a delete.
    #[must_use]
    pub fn delete(mut self, ks: Keyspace, key: impl Into<Vec<u8>>) -> Self {
        self.mutations.push(Mutation::Delete {
            ks,
            key: key.into(),
        });
        self
    }

    /// Adds a mutation.
    #[must_use]
    pub fn mutate(mut self, mutation: Mutation) -> Self {
        self.mutations.push(mutation);
        self
    }
}

/// What a successful commit reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CommitInfo {
    /// The commit's version: strictly greater than every earlier commit's,
    /// across reopen.
    pub version: u64,
    /// Whether it is durable on return (always for `Immediate`).
    pub durable: bool,
}

/// A consistent read view at one commit version. Usable from several
/// threads; a commit after it was taken is never visible through it.
pub trait Snapshot: Send + Sync {
    /// Streaming iterator over a range.
    type Range<'s>: Iterator<Item = Result<(Vec<u8>, Vec<u8>), ReadError>> + 's
    where
        Self: 's;

    /// Lending cursor over a range ([`Snapshot::cursor`]).
    type Cursor<'s>: RowCursor + 's
    where
        Self: 's;

    /// The commit version this view shows.
    ///
    /// # Errors
    /// A backend failure (an engine may read the version lazily).
    fn version(&self) -> Result<u64, ReadError>;

    /// The value of `key`.
    ///
    /// # Errors
    /// [`ReadError::UnknownKeyspace`], or a backend failure.
    fn get(&self, ks: Keyspace, key: &[u8]) -> Result<Option<Vec<u8>>, ReadError>;

    /// The entries in `range`, in key order (descending when reversed),
    /// produced one at a time: the range is not materialised.
    ///
    /// # Errors
    /// [`ReadError::UnknownKeyspace`], [`ReadError::InvalidRange`]; a
    /// backend failure may also surface as an item of the iterator.
    fn range(&self, ks: Keyspace, range: RangeSpec) -> Result<Self::Range<'_>, ReadError>;

    /// A cursor over the entries in `range` that lends each row: the same
    /// rows in the same order as [`Snapshot::range`], each key and value
    /// borrowed from the engine's own buffer until the next step, so a
    /// reader that decodes in place pays no copy. An engine without such a
    /// buffer lends an owned row ([`Lent`]).
    ///
    /// ```
    /// use strata_engine::{Commit, Engine, KeyspaceSpec, MemEngine, Profile, RangeSpec, RowCursor, Snapshot};
    ///
    /// let engine = MemEngine::open(vec![KeyspaceSpec::new("data", Profile::PointLookup)])?;
    /// let ks = engine.keyspace("data")?;
    /// engine.commit(Commit::new().put(ks, b"a".to_vec(), b"1".to_vec()).put(ks, b"b".to_vec(), b"22".to_vec()))?;
    /// let snap = engine.snapshot()?;
    /// let mut rows = snap.cursor(ks, RangeSpec::all().reversed())?;
    /// let mut seen = Vec::new();
    /// while let Some(row) = rows.next_row() {
    ///     let (key, value) = row?;
    ///     seen.push((key[0], value.len()));
    /// }
    /// assert_eq!(seen, [(b'b', 2), (b'a', 1)]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// As [`Snapshot::range`].
    fn cursor(&self, ks: Keyspace, range: RangeSpec) -> Result<Self::Cursor<'_>, ReadError>;
}

/// A lent row: its key and value, or a backend failure.
pub type LentRow<'a> = Result<(&'a [u8], &'a [u8]), ReadError>;

/// A range that lends its rows; see [`Snapshot::cursor`].
pub trait RowCursor {
    /// The next row: its key and value, valid until the next call. `None`
    /// once the range is done; an error item is a backend failure.
    fn next_row(&mut self) -> Option<LentRow<'_>>;

    /// Hands each remaining row to `f`, in order, until `f` breaks or the
    /// range ends: the loop over [`RowCursor::next_row`] that a caller
    /// would write, which is what it runs unless the engine has a cheaper
    /// one (redb's guards the whole loop against its backend's panic once,
    /// not each row). A panic of `f` is `f`'s own: it unwinds out of this
    /// call as it was raised. After a break the cursor goes on from the
    /// next row.
    ///
    /// ```
    /// use std::ops::ControlFlow;
    /// use strata_engine::{Commit, Engine, KeyspaceSpec, MemEngine, Profile, RangeSpec, RowCursor, Snapshot};
    ///
    /// let engine = MemEngine::open(vec![KeyspaceSpec::new("data", Profile::PointLookup)])?;
    /// let ks = engine.keyspace("data")?;
    /// engine.commit(Commit::new().put(ks, b"a".to_vec(), b"1".to_vec()).put(ks, b"b".to_vec(), b"22".to_vec()))?;
    /// let snap = engine.snapshot()?;
    /// let mut rows = snap.cursor(ks, RangeSpec::all())?;
    /// let mut total = 0;
    /// let flow = rows.try_for_each_row(|_key, value| {
    ///     total += value.len();
    ///     ControlFlow::<()>::Continue(())
    /// })?;
    /// assert_eq!((flow, total), (ControlFlow::Continue(()), 3));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// A backend failure, as `next_row`'s error item: the rows before it
    /// were given to `f`.
    #[inline]
    fn try_for_each_row<B, F>(&mut self, mut f: F) -> Result<ControlFlow<B>, ReadError>
    where
        Self: Sized,
        F: FnMut(&[u8], &[u8]) -> ControlFlow<B>,
    {
        while let Some(row) = self.next_row() {
            let (key, value) = row?;
            if let ControlFlow::Break(b) = f(key, value) {
                return Ok(ControlFlow::Break(b));
            }
        }
        Ok(ControlFlow::Continue(()))
    }
}

/// A [`RowCursor`] over an owned range: it keeps the last row and lends
/// it (for engines whose rows are owned anyway, and for wrappers).
#[derive(Debug)]
pub struct Lent<I> {
    rows: I,
    row: (Vec<u8>, Vec<u8>),
}

impl<I> Lent<I> {
    /// Lends the rows of `rows`.
    pub fn new(rows: I) -> Self {
        Self {
            rows,
            row: (Vec::new(), Vec::new()),
        }
    }
}

impl<I> RowCursor for Lent<I>
where
    I: Iterator<Item = Result<(Vec<u8>, Vec<u8>), ReadError>>,
{
    fn next_row(&mut self) -> Option<LentRow<'_>> {
        match self.rows.next()? {
            Ok(row) => {
                self.row = row;
                Some(Ok((&self.row.0, &self.row.1)))
            }
            Err(e) => Some(Err(e)),
        }
    }
}

/// An ordered key-value engine: bytes in, bytes out.
///
/// # Contract
///
/// - **Keyspaces** are declared at open; [`Engine::keyspace`] maps a name to
///   a handle. An undeclared name or a foreign handle is a typed error.
/// - **Snapshots** are consistent at one version and see every commit up to
///   it and none after.
/// - **Commits** are serialised. A commit's predicates are checked against
///   the latest state before any of its mutations; if one fails, nothing is
///   applied and the error names it. Otherwise every mutation is applied, in
///   order, atomically. Versions strictly increase and survive reopen.
/// - **Durability.** `Immediate` returns after the commit is durable;
///   `Buffered` returns before. [`Engine::sync`] makes every earlier commit
///   durable; [`Engine::durable_version`] is the highest durable version.
/// - **Crash contract.** After a crash (process kill or power loss) and
///   reopen, the state equals the state after some commit `c` with
///   `c >= ` the last commit acknowledged as durable: a lost suffix of
///   buffered commits, never a hole, never half a commit. Each engine says
///   how it meets this.
/// - **Errors** are typed; a commit error says whether the outcome is
///   unknown. Nothing panics on any input.
pub trait Engine: Send + Sync {
    /// The engine's read view.
    type Snapshot<'e>: Snapshot
    where
        Self: 'e;

    /// The declared keyspaces of this instance, which issue and check its
    /// handles.
    fn keyspaces(&self) -> &Keyspaces;

    /// The handle of the keyspace named `name`.
    ///
    /// # Errors
    /// [`EngineError::UnknownKeyspaceName`].
    fn keyspace(&self, name: &str) -> Result<Keyspace, EngineError> {
        self.keyspaces().get(name)
    }

    /// A read view at the latest commit.
    ///
    /// # Errors
    /// A backend failure.
    fn snapshot(&self) -> Result<Self::Snapshot<'_>, ReadError>;

    /// The value of `key` in `ks` at the latest commit, read on its own:
    /// what `self.snapshot()?.get(ks, key)` returns, without a read view
    /// held around it. For a single read (a store's `get`), on an engine
    /// whose read view costs more than the read itself: the PostgreSQL
    /// engine answers it with one statement instead of a transaction of
    /// three round trips. The default takes a snapshot.
    ///
    /// ```
    /// use strata_engine::{Commit, Engine, KeyspaceSpec, MemEngine, Profile};
    ///
    /// let engine = MemEngine::open(vec![KeyspaceSpec::new("a", Profile::General)])?;
    /// let a = engine.keyspace("a")?;
    /// engine.commit(Commit::new().put(a, b"k".to_vec(), b"v".to_vec()))?;
    /// assert_eq!(engine.get_latest(a, b"k")?, Some(b"v".to_vec()));
    /// assert_eq!(engine.get_latest(a, b"other")?, None);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// As [`Snapshot::get`] ([`ReadError::UnknownKeyspace`] for a handle
    /// of another instance), or a failure taking the snapshot.
    fn get_latest(&self, ks: Keyspace, key: &[u8]) -> Result<Option<Vec<u8>>, ReadError> {
        self.snapshot()?.get(ks, key)
    }

    /// Applies a commit atomically, or nothing.
    ///
    /// # Errors
    /// See [`CommitError`].
    fn commit(&self, commit: Commit) -> Result<CommitInfo, CommitError>;

    /// Applies several independent commits as one group, in order, and
    /// returns one result per commit. Each is atomic on its own and behaves
    /// exactly as if committed alone in this order: its predicates see the
    /// group's earlier commits, a commit that fails fails alone (the others
    /// still apply), and the applied ones take consecutive versions. What a
    /// group adds is cost: an engine writes the group at once and makes it
    /// durable with one sync when any member is `Immediate` (the other
    /// members then return durable too). Engines that group concurrent
    /// [`Engine::commit`] calls write those groups the same way.
    ///
    /// After a crash, the group obeys the crash contract commit by commit:
    /// a suffix of it may be lost, never a hole.
    ///
    /// The default commits one by one.
    fn commit_group(&self, commits: Vec<Commit>) -> Vec<Result<CommitInfo, CommitError>> {
        commits.into_iter().map(|c| self.commit(c)).collect()
    }

    /// Makes every earlier commit durable; returns the durable version.
    ///
    /// # Errors
    /// A backend failure; durability is then unknown beyond
    /// [`Engine::durable_version`].
    fn sync(&self) -> Result<u64, EngineError>;

    /// The highest version known durable (0 before the first commit).
    fn durable_version(&self) -> u64;

    /// The highest committed version (0 before the first commit).
    fn last_version(&self) -> u64;

    /// Raises the last committed version to at least `at_least`, durably,
    /// changing no data, so the next commit gets a higher version; returns
    /// the last version. A lower `at_least` changes nothing.
    ///
    /// For tools that copy rows from another database (`strata copy`):
    /// copied keys and values may carry that database's versionstamps (an
    /// outbox's entries, its consumers' checkpoints), and the copy's own
    /// commits must sort after them.
    ///
    /// The default commits empty commits until it gets there, then syncs:
    /// correct for any engine but one commit per version. The embedded
    /// engines override it with one write.
    ///
    /// # Errors
    /// A commit or sync failure; versions raised so far stay raised.
    fn raise_version(&self, at_least: u64) -> Result<u64, crate::Error> {
        while self.last_version() < at_least {
            self.commit(Commit::new().durability(Durability::Buffered))?;
        }
        self.sync()?;
        Ok(self.last_version())
    }
}

/// A shared reference to an engine is an engine: several owners (a store
/// and a checker, say) can work on one engine.
impl<E: Engine + ?Sized> Engine for &E {
    type Snapshot<'e>
        = E::Snapshot<'e>
    where
        Self: 'e;

    fn keyspaces(&self) -> &Keyspaces {
        (**self).keyspaces()
    }

    fn raise_version(&self, at_least: u64) -> Result<u64, crate::Error> {
        (**self).raise_version(at_least)
    }

    fn keyspace(&self, name: &str) -> Result<Keyspace, EngineError> {
        (**self).keyspace(name)
    }

    fn snapshot(&self) -> Result<Self::Snapshot<'_>, ReadError> {
        (**self).snapshot()
    }

    fn get_latest(&self, ks: Keyspace, key: &[u8]) -> Result<Option<Vec<u8>>, ReadError> {
        (**self).get_latest(ks, key)
    }

    fn commit(&self, commit: Commit) -> Result<CommitInfo, CommitError> {
        (**self).commit(commit)
    }

    fn commit_group(&self, commits: Vec<Commit>) -> Vec<Result<CommitInfo, CommitError>> {
        (**self).commit_group(commits)
    }

    fn sync(&self) -> Result<u64, EngineError> {
        (**self).sync()
    }

    fn durable_version(&self) -> u64 {
        (**self).durable_version()
    }

    fn last_version(&self) -> u64 {
        (**self).last_version()
    }
}
