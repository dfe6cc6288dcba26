//! The Strata engine contract on a PostgreSQL server, for services that
//! outgrow one machine: several processes, replicas and failover, the same
//! keys, store, outbox and schemas as on the embedded engines.
//!
//! ```no_run
//! use strata_engine::{Commit, Durability, Engine, KeyspaceSpec, Profile, Snapshot};
//! use strata_engine_postgres::{PostgresEngine, PostgresOptions};
//!
//! let specs = vec![KeyspaceSpec::new("kv", Profile::PointLookup)];
//! let engine = PostgresEngine::connect(
//!     "postgres://app:secret@db.internal:5432/app?sslmode=disable",
//!     specs,
//!     PostgresOptions::default(),
//! )?;
//! let kv = engine.keyspace("kv")?;
//! let info = engine.commit(Commit::new().put(kv, b"k".to_vec(), b"v".to_vec()))?;
//! assert!(info.durable);
//! assert_eq!(engine.snapshot()?.get(kv, b"k")?.as_deref(), Some(&b"v"[..]));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Mapping
//!
//! - **Keyspaces** are tables `strata_ks_<id>`, where `id` numbers the
//!   keyspace's name in the catalogue table `strata_keyspaces`: any name is
//!   safe, none is spliced into SQL. Tables are created on open (under an
//!   advisory lock, so processes opening at once do not race) and never
//!   dropped. A key is stored as an indexed 2,048-byte prefix and the rest;
//!   see [`layout`] for why the pair sorts as the key does.
//! - **Commits** are one transaction on one pooled connection. It
//!   increments the version row of `strata_meta`; the row lock it takes
//!   serialises every commit of every process on the database, so versions
//!   are strictly increasing, gap-free and in the order of the write-ahead
//!   log. Predicates are checked and counters read inside the transaction,
//!   under that lock, and the mutations applied with versionstamps filled
//!   from the version. A failed predicate rolls the transaction back,
//!   version included. A single commit (up to 256 KiB of keys and values)
//!   is **one message**: it takes the lock, checks its predicates and adds
//!   its counters on the server (two functions the engine installs,
//!   `strata_check_v1` and `strata_add_v1`), writes with the versionstamps
//!   computed from the version it took, records its commit token and
//!   commits, so the lock is held only while the server runs that message,
//!   never across a round trip. The commonest commit, puts and deletes in
//!   one keyspace, is not even parsed: it is one call of a prepared
//!   statement, `CALL strata_ks_<id>_write_v2(...)`, a procedure per
//!   keyspace table (installed at open) that does the same on the server
//!   and keeps its plans. A larger commit, and a group of other shapes,
//!   take the lock in a first round trip and commit in a second.
//! - **Concurrent commits** of puts and deletes in one keyspace are
//!   queued: such a commit made while another is being written waits, and
//!   the commits queued meanwhile are written together as one call of the
//!   procedure (one round trip, one lock of the version row, one flush of
//!   the log for all of them; see [`PostgresEngine::group_stats`]). Other
//!   commits are written at once, each its own transaction.
//! - **Snapshots** are read-only `REPEATABLE READ` transactions whose first
//!   statement reads the version, so [`Snapshot::version`](strata_engine::Snapshot::version) is exact. Ranges
//!   stream in batches, each a keyset-paginated query inside the
//!   snapshot's transaction: a range with a limit up to
//!   [`PostgresOptions::range_batch`] is one query; others read 64 rows
//!   first, then twice as many each time, up to that.
//!
//! # Durability
//!
//! | level | PostgreSQL | after a server crash |
//! |---|---|---|
//! | `Immediate` | the commit, then in the same round trip a one-row synchronous write: the reply comes after the log is flushed past the commit (and, with a synchronous standby, flushed there) | kept |
//! | `Buffered` | `synchronous_commit = off`: the reply comes before the flush | a suffix may be lost |
//! | `sync()` | the same one-row synchronous write, reading the version | every earlier commit kept |
//!
//! A lost suffix, never a hole: commits are serialised by the version
//! row's lock, which is released only after the commit record is in the
//! log, so commit records are in version order, and recovery replays the
//! log up to the last flushed record. A synchronous write flushes the log
//! up to its own record, so past every commit before it.
//!
//! Every commit transaction itself commits asynchronously, so the version
//! row's lock is held only until its commit record is in the log, not
//! through the flush; the synchronous write after an `Immediate` commit
//! touches a row of its own session, so concurrent ones wait for no lock
//! and share the server's log flushes (group commit).
//!
//! `durable_version()` is the highest version this engine has seen made
//! durable: by its own `Immediate` commits and by `sync()`, which reads the
//! database's version inside the synchronous write, so it covers the
//! commits of other processes too. `last_version()` is the highest version
//! this engine has committed or seen; other processes may be ahead.
//!
//! A commit whose `COMMIT` reply is lost (the connection broke) is resolved
//! on a new connection by its *commit token*: every commit writes, in its
//! own transaction, a row holding a token this engine generated
//! (`strata_commits`), so the row is durable exactly when the commit's rows
//! are. The resolver claims the token as not applied (an insert that waits
//! for a transaction still holding the commit's row, and that the commit,
//! were its message still on its way, can no longer follow), then reads
//! the row: applied, not applied, or else
//! [`CommitError::OutcomeUnknown`]. An applied commit is never sent again;
//! a single commit whose message found its connection dead and whose token
//! is then claimed as not applied (it never can be now) is sent once more
//! on a new connection, so a server restart between commits is invisible.
//! Transaction ids are
//! not used: after a crash the server hands out again an id that nothing
//! durable recorded, so `txid_status` can answer for another transaction.
//! Token rows are kept for [`PostgresOptions::token_retention`] (server
//! time) and pruned by the engine every 4,096 commits. A group's or a
//! large commit's first message applies nothing (the server rolls back an
//! unfinished transaction when its connection drops), so it is sent once
//! more on a new connection when it finds its pooled connection dead.
//!
//! # Limits
//!
//! Keys up to [`MAX_KEY_BYTES`] (16 KiB) and values up to
//! [`MAX_VALUE_BYTES`] (256 MiB); a commit writing a longer key or a larger
//! value is refused with [`MutationError::KeyTooLarge`] or
//! [`MutationError::ValueTooLarge`] before anything is sent.
//! `strata_codec::Limits::POSTGRES` states the same maxima for the layers
//! above.
#![cfg_attr(docsrs, feature(doc_cfg))]

mod commit_reads;
mod conninfo;
pub mod layout;
mod one_call;
mod one_trip;
mod pool;
mod read;
#[cfg(all(feature = "test-server", unix))]
pub mod testing;
mod write;
mod write_rows;

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use strata_engine::{
    Backup, BackupInfo, CapabilityError, Commit, CommitError, CommitInfo, Compact, Engine,
    EngineError, KeyspaceSpec, KeyspaceStats, Keyspaces, MutationError, Profile, ReadError,
    Statistics,
};

pub use crate::conninfo::redact;
pub use crate::pool::PoolError;
pub use crate::read::{PostgresRange, PostgresSnapshot};
/// The `postgres` crate, for its [`Config`](postgres::Config).
pub use postgres;

use crate::pool::{Connector, Pool, Pooled};
use strata_engine::implement::GroupCommitter;

/// The most commits of concurrent callers written as one transaction.
const MAX_QUEUED_GROUP: usize = 64;

/// The longest key this engine stores, in bytes.
pub const MAX_KEY_BYTES: usize = 16_384;

/// The largest value this engine stores in one row, in bytes (PostgreSQL's
/// own limit for a `bytea` is 1 GB; a quarter of it keeps every statement
/// message well under the protocol's 1 GB).
pub const MAX_VALUE_BYTES: usize = 256 << 20;

/// The storage layout written in `strata_meta` (row 3); a database with
/// another is refused at open.
const LAYOUT_VERSION: i64 = 1;

/// Serialises engines opening (creating tables) on one database.
const OPEN_LOCK: i64 = 0x5354_5241_5441_0001;

/// Options of [`PostgresEngine::open`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PostgresOptions {
    /// Most connections open at once (default 8). A snapshot holds one for
    /// its life, a commit for its duration.
    pub pool_size: usize,
    /// How long to wait for a connection when all are in use before
    /// failing with [`PoolError::Exhausted`] (default 30 s).
    pub pool_wait: Duration,
    /// Most rows a range reads per query (default 1,024); the first query
    /// reads 64 and each next one twice as many, up to this.
    pub range_batch: usize,
    /// How long a commit's token row is kept (default 10 minutes, by the
    /// server's clock): a commit whose reply was lost is settled by its
    /// token within seconds, so this only needs to outlast that.
    pub token_retention: Duration,
}

impl Default for PostgresOptions {
    fn default() -> Self {
        Self {
            pool_size: 8,
            pool_wait: Duration::from_secs(30),
            range_batch: 1_024,
            token_retention: Duration::from_mins(10),
        }
    }
}

/// Token rows are pruned once every this many commits of an engine.
const PRUNE_EVERY: u64 = 4_096;

/// A commit's token: the engine's 16 random bytes, then its commit count.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CommitToken([u8; 24]);

impl CommitToken {
    pub(crate) fn as_bytes(&self) -> &[u8; 24] {
        &self.0
    }
}

impl std::fmt::Display for CommitToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.iter().try_for_each(|b| write!(f, "{b:02x}"))
    }
}

/// A commit's last message failed: its text, and whether the connection
/// (rather than a statement) failed.
#[derive(Debug)]
pub(crate) struct LastMessageError {
    pub(crate) connection_lost: bool,
    pub(crate) message: String,
    /// The server refused the commit by one of the engine's functions.
    pub(crate) refusal: Option<one_trip::Refusal>,
    /// The server found one of the engine's functions or procedures
    /// missing (SQLSTATE `42883`): nothing of the commit ran.
    pub(crate) missing_function: bool,
}

/// A fault the tests put in the way of the next commit's last message (its
/// `COMMIT`): `meanwhile` runs before the message is sent (`applied:
/// false`; a test kills the server there, so the message never arrives),
/// or after its reply arrived, which is then treated as lost (`applied:
/// true`). Either way the engine must settle the commit as it really went.
#[cfg(feature = "test-server")]
pub struct ReplyFault {
    /// Whether the message is sent (and its reply dropped) or not sent.
    pub applied: bool,
    /// What happens meanwhile (a server crash and restart, other work).
    pub meanwhile: Box<dyn FnOnce() + Send>,
}

/// The engine contract on PostgreSQL. See the [crate docs](crate).
pub struct PostgresEngine {
    pool: Pool,
    keyspaces: Keyspaces,
    /// The table of each keyspace, in declaration order.
    tables: Vec<String>,
    options: PostgresOptions,
    last: AtomicU64,
    durable: AtomicU64,
    /// The first 16 bytes of every commit token of this instance.
    token_prefix: [u8; 16],
    /// Commits begun by this instance: the rest of the token.
    tokens: AtomicU64,
    /// Queues the commits of concurrent callers behind the one being
    /// written, to be written as one transaction (see `write_queued`).
    committer: GroupCommitter,
    #[cfg(feature = "test-server")]
    reply_fault: std::sync::Mutex<Option<ReplyFault>>,
}

impl std::fmt::Debug for PostgresEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresEngine")
            .field("keyspaces", &self.keyspaces.specs())
            .field("tables", &self.tables)
            .finish_non_exhaustive()
    }
}

/// A backend error of this crate, boxed as the contract keeps it; a
/// `postgres::Error` is wrapped so that its message names the server's
/// error (its own says only "db error").
pub(crate) fn boxed<E: std::error::Error + Send + Sync + 'static>(
    e: E,
) -> strata_engine::BackendError {
    let b: strata_engine::BackendError = Box::new(e);
    match b.downcast::<postgres::Error>() {
        Ok(pg) => Box::new(ServerError::Postgres(*pg)),
        Err(other) => other,
    }
}

/// A `postgres::Error` in words: the server's severity, code and message
/// when the server sent one.
pub(crate) fn describe(e: &postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => format!("{} {}: {}", db.severity(), db.code().code(), db.message()),
        None => match std::error::Error::source(e) {
            Some(cause) => format!("{e}: {cause}"),
            None => e.to_string(),
        },
    }
}

/// Whether `e` says the connection (or the server) went away, rather than
/// that a statement failed: the connection is closed, the socket failed,
/// or the server answered with SQLSTATE class 08 (connection exception) or
/// 57P01–57P03 (shutting down, crashed, starting). Such a connection is
/// not reused, and work that sent nothing is retried once on a new one.
///
/// ```no_run
/// let mut client = postgres::Client::connect("host=/run/postgresql user=app", postgres::NoTls)?;
/// let err = client.batch_execute("SELEC 1").unwrap_err();
/// assert!(!strata_engine_postgres::is_connection_error(&err), "a syntax error is the statement's");
/// # Ok::<(), postgres::Error>(())
/// ```
pub fn is_connection_error(e: &postgres::Error) -> bool {
    if e.is_closed() {
        return true;
    }
    if let Some(code) = e.code() {
        let c = code.code();
        // Class 08: connection exception; 57P01-03: the server is shutting
        // down, crashed, or not yet accepting connections.
        return c.starts_with("08") || matches!(c, "57P01" | "57P02" | "57P03");
    }
    std::error::Error::source(e).is_some_and(<dyn std::error::Error>::is::<std::io::Error>)
}

/// An error of the server or the connection that is not a statement's.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServerError {
    /// The database was written by a newer (or unknown) layout.
    #[error("the database's strata layout is {found}, this engine writes {expected}")]
    Layout {
        /// What `strata_meta` says.
        found: i64,
        /// What this engine writes.
        expected: i64,
    },
    /// The database holds no Strata tables.
    #[error("not a Strata database: it has no strata_meta table")]
    NotStrata,
    /// The server answered something this engine did not expect.
    #[error("unexpected answer from the server: {0}")]
    Unexpected(&'static str),
    /// The server or the connection failed.
    #[error("postgres: {}", describe(.0))]
    Postgres(#[source] postgres::Error),
}

impl PostgresEngine {
    /// Connects to the server at `url` (a `postgres://` URL or a key=value
    /// string, as libpq takes them; a `host` starting with `/` is a Unix
    /// socket directory) without TLS, and opens the keyspaces.
    ///
    /// # Errors
    /// An unparsable URL, a failed connection or a refused layout, as
    /// [`EngineError::Backend`]; [`EngineError::DuplicateKeyspace`].
    pub fn connect(
        url: &str,
        specs: Vec<KeyspaceSpec>,
        options: PostgresOptions,
    ) -> Result<Self, EngineError> {
        let config: postgres::Config = url
            .parse()
            .map_err(|e: postgres::Error| EngineError::Backend(boxed(e)))?;
        Self::open(config, specs, options)
    }

    /// Opens the keyspaces on the server `config` names, without TLS.
    ///
    /// # Errors
    /// As [`PostgresEngine::connect`].
    pub fn open(
        config: postgres::Config,
        specs: Vec<KeyspaceSpec>,
        options: PostgresOptions,
    ) -> Result<Self, EngineError> {
        Self::init(config, Connector::Plain, specs, options)
    }

    /// Opens the keyspaces on the server `config` names, over TLS with
    /// `tls` when the server and `config`'s `sslmode` agree on it
    /// (`sslmode=require` refuses a server without TLS).
    ///
    /// # Errors
    /// As [`PostgresEngine::connect`].
    #[cfg(feature = "tls")]
    pub fn open_tls(
        config: postgres::Config,
        tls: native_tls::TlsConnector,
        specs: Vec<KeyspaceSpec>,
        options: PostgresOptions,
    ) -> Result<Self, EngineError> {
        let connector = Connector::Tls(postgres_native_tls::MakeTlsConnector::new(tls));
        Self::init(config, connector, specs, options)
    }

    fn init(
        config: postgres::Config,
        connector: Connector,
        specs: Vec<KeyspaceSpec>,
        options: PostgresOptions,
    ) -> Result<Self, EngineError> {
        let keyspaces = Keyspaces::new(specs)?;
        let pool = Pool::new(config, connector, options.pool_size, options.pool_wait);
        let tables = {
            let mut pooled = pool.get().map_err(|e| EngineError::Backend(boxed(e)))?;
            create(&mut pooled, &keyspaces).map_err(EngineError::Backend)?
        };
        let engine = Self {
            pool,
            keyspaces,
            tables,
            options,
            last: AtomicU64::new(0),
            durable: AtomicU64::new(0),
            token_prefix: {
                use strata_engine::Rng as _;
                let mut rng = strata_engine::SystemRng::new();
                let mut prefix = [0; 16];
                prefix[..8].copy_from_slice(&rng.next_u64().to_be_bytes());
                prefix[8..].copy_from_slice(&rng.next_u64().to_be_bytes());
                prefix
            },
            tokens: AtomicU64::new(0),
            committer: GroupCommitter::new(MAX_QUEUED_GROUP),
            #[cfg(feature = "test-server")]
            reply_fault: std::sync::Mutex::new(None),
        };
        // The state found is made durable (a server that did not crash may
        // still hold buffered commits of another process in memory), which
        // also reads the version.
        engine.sync()?;
        tracing::debug!(
            version = engine.last_version(),
            keyspaces = engine.tables.len(),
            "postgres engine open"
        );
        Ok(engine)
    }

    /// The keyspaces stored in the database `config` names (every name in
    /// its catalogue table, declared at the last open or not), in order,
    /// over one plain connection that writes nothing.
    ///
    /// # Errors
    /// [`ServerError::NotStrata`] for a database without Strata's tables;
    /// the connection's or the server's error, as
    /// [`EngineError::Backend`].
    pub fn stored_keyspaces(config: &postgres::Config) -> Result<Vec<String>, EngineError> {
        let err = |e: postgres::Error| EngineError::Backend(boxed(e));
        let mut client = config.connect(postgres::NoTls).map_err(err)?;
        let found: Option<String> = client
            .query_one("SELECT to_regclass('strata_keyspaces')::text", &[])
            .map_err(err)?
            .get(0);
        if found.is_none() {
            return Err(EngineError::Backend(boxed(ServerError::NotStrata)));
        }
        let mut names: Vec<String> = client
            .query("SELECT name FROM strata_keyspaces", &[])
            .map_err(err)?
            .iter()
            .map(|row| String::from_utf8_lossy(row.get::<_, &[u8]>(0)).into_owned())
            .collect();
        names.sort();
        Ok(names)
    }

    /// The options it was opened with.
    pub fn options(&self) -> PostgresOptions {
        self.options
    }

    /// Drops every idle pooled connection; the next use connects anew.
    /// Connections found dead are replaced anyway; this is for callers that
    /// know the server moved (a failover to a standby behind the same
    /// address).
    pub fn reconnect(&self) {
        self.pool.clear_idle();
    }

    /// Puts `fault` in the way of the next commit's last message (see
    /// [`ReplyFault`]); for tests of lost replies.
    #[cfg(feature = "test-server")]
    pub fn inject_reply_fault(&self, fault: ReplyFault) {
        *self
            .reply_fault
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(fault);
    }

    /// A new commit token; every [`PRUNE_EVERY`] tokens, first prunes the
    /// token rows older than the retention.
    pub(crate) fn mint_token(&self) -> CommitToken {
        let n = self.tokens.fetch_add(1, Ordering::Relaxed);
        if n % PRUNE_EVERY == PRUNE_EVERY - 1 {
            self.prune_tokens();
        }
        let mut token = [0; 24];
        token[..16].copy_from_slice(&self.token_prefix);
        token[16..].copy_from_slice(&n.to_be_bytes());
        CommitToken(token)
    }

    /// Deletes the token rows older than [`PostgresOptions::token_retention`]
    /// (by the server's clock). A failure is only logged: the next prune
    /// tries again.
    pub fn prune_tokens(&self) {
        let secs = self.options.token_retention.as_secs_f64();
        let pruned = self.repeatable(|client| {
            client.execute(
                "DELETE FROM strata_commits WHERE at < now() - make_interval(secs => $1)",
                &[&secs],
            )
        });
        match pruned {
            Ok(n) => tracing::debug!(rows = n, "commit tokens pruned"),
            Err(e) => tracing::warn!(error = %e, "commit tokens could not be pruned"),
        }
    }

    /// Sends a commit's last message (its `COMMIT`) and reads the answer.
    pub(crate) fn last_message(
        &self,
        pooled: &mut Pooled<'_>,
        sql: &str,
    ) -> Result<Vec<postgres::SimpleQueryMessage>, LastMessageError> {
        self.last_call(pooled, |conn| conn.client.simple_query(sql))
    }

    /// As [`last_message`](Self::last_message), for a commit sent by
    /// `send` (a prepared call).
    pub(crate) fn last_call<T>(
        &self,
        pooled: &mut Pooled<'_>,
        send: impl FnOnce(&mut pool::Conn) -> Result<T, postgres::Error>,
    ) -> Result<T, LastMessageError> {
        #[cfg(feature = "test-server")]
        let fault = self
            .reply_fault
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        #[cfg(feature = "test-server")]
        let fault = match fault {
            Some(f) if !f.applied => {
                (f.meanwhile)();
                None
            }
            other => other,
        };
        let answer = send(pooled.conn()).map_err(|e| LastMessageError {
            connection_lost: is_connection_error(&e),
            message: describe(&e),
            refusal: one_trip::Refusal::of(&e),
            missing_function: e.code() == Some(&postgres::error::SqlState::UNDEFINED_FUNCTION),
        });
        #[cfg(feature = "test-server")]
        if let Some(f) = fault
            && answer.is_ok()
        {
            (f.meanwhile)();
            return Err(LastMessageError {
                connection_lost: true,
                message: "the commit's reply was lost (a fault of the tests)".into(),
                refusal: None,
                missing_function: false,
            });
        }
        answer
    }

    /// How many groups of queued commits this instance wrote since it
    /// opened, how many commits they held and how many of its transactions
    /// flushed the log for them. A commit of puts and deletes in one
    /// keyspace made while another is being written is queued, and the
    /// queue written as one transaction (other commits are not counted
    /// here), so with concurrent `Immediate` writers `commits / syncs` is
    /// the number of commits per flush of the log.
    ///
    /// ```no_run
    /// # fn demo(engine: &strata_engine_postgres::PostgresEngine) {
    /// let stats = engine.group_stats();
    /// println!("{} commits in {} groups", stats.commits, stats.groups);
    /// # }
    /// ```
    pub fn group_stats(&self) -> strata_engine::GroupStats {
        self.committer.stats()
    }

    /// The table of keyspace `ks`, if this instance issued it.
    pub(crate) fn table(&self, ks: strata_engine::Keyspace) -> Option<&str> {
        self.keyspaces.index_of(ks).map(|i| self.tables[i].as_str())
    }

    /// A pooled connection for a read or a commit.
    pub(crate) fn pooled(&self) -> Result<Pooled<'_>, PoolError> {
        self.pool.get()
    }

    /// Sends a transaction's first message on a pooled connection; if that
    /// connection turns out dead (a server restart ended it while idle),
    /// drops every idle connection and sends it once more on a new one: nothing was applied by a message
    /// that never reached a live session. A connection whose message
    /// failed is not reused.
    pub(crate) fn first_message<T>(
        &self,
        send: impl Fn(&mut Pooled<'_>) -> Result<T, postgres::Error>,
    ) -> Result<(Pooled<'_>, T), strata_engine::BackendError> {
        let mut pooled = self.pooled().map_err(boxed)?;
        match send(&mut pooled) {
            Ok(v) => Ok((pooled, v)),
            Err(e) if is_connection_error(&e) => {
                pooled.discard();
                // The other idle connections most likely went with the
                // same server (a restart): drop them all, so the retry
                // gets a new one.
                self.pool.clear_idle();
                let mut fresh = self.pooled().map_err(boxed)?;
                match send(&mut fresh) {
                    Ok(v) => Ok((fresh, v)),
                    Err(e) => {
                        fresh.discard();
                        Err(boxed(e))
                    }
                }
            }
            Err(e) => {
                pooled.discard();
                Err(boxed(e))
            }
        }
    }

    /// A fresh connection outside the pool's count.
    pub(crate) fn fresh(&self) -> Result<pool::Conn, PoolError> {
        self.pool.connect()
    }

    /// Installs again what a commit found missing of the engine's
    /// functions and procedures (dropped by hand since the open), on a new
    /// connection. (A call prepared before the drop needs nothing more:
    /// the server resolves the procedure's name again when it runs.)
    pub(crate) fn reinstall(&self) -> Result<(), String> {
        let mut conn = self.fresh().map_err(|e| e.to_string())?;
        let mut txn = conn.client.transaction().map_err(|e| describe(&e))?;
        install(&mut txn, &self.tables).map_err(|e| describe(&e))?;
        txn.commit().map_err(|e| describe(&e))?;
        Ok(())
    }

    pub(crate) fn seen(&self, version: u64) {
        self.last.fetch_max(version, Ordering::SeqCst);
    }

    pub(crate) fn made_durable(&self, version: u64) {
        self.seen(version);
        self.durable.fetch_max(version, Ordering::SeqCst);
    }
}

/// Creates the meta, catalogue and keyspace tables that are missing, under
/// an advisory lock, and returns the keyspaces' tables.
fn create(
    pooled: &mut Pooled<'_>,
    keyspaces: &Keyspaces,
) -> Result<Vec<String>, strata_engine::BackendError> {
    let client = &mut pooled.conn().client;
    let mut txn = client.transaction().map_err(boxed)?;
    txn.execute("SELECT pg_advisory_xact_lock($1)", &[&OPEN_LOCK])
        .map_err(boxed)?;
    txn.batch_execute(&format!(
        "CREATE TABLE IF NOT EXISTS strata_meta (id int PRIMARY KEY, value bigint NOT NULL);
         INSERT INTO strata_meta VALUES (1, 0), (3, {LAYOUT_VERSION}) ON CONFLICT (id) DO NOTHING;
         CREATE TABLE IF NOT EXISTS strata_flush (
             pid int PRIMARY KEY, n bigint NOT NULL DEFAULT 0, xid bigint, version bigint);
         CREATE TABLE IF NOT EXISTS strata_commits (
             token bytea PRIMARY KEY, applied boolean NOT NULL, version bigint,
             at timestamptz NOT NULL DEFAULT now());
         CREATE INDEX IF NOT EXISTS strata_commits_at ON strata_commits (at);
         CREATE TABLE IF NOT EXISTS strata_keyspaces (
             id int GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
             name bytea NOT NULL UNIQUE)"
    ))
    .map_err(boxed)?;
    let found: i64 = txn
        .query_one("SELECT value FROM strata_meta WHERE id = 3", &[])
        .map_err(boxed)?
        .get(0);
    if found != LAYOUT_VERSION {
        return Err(boxed(ServerError::Layout {
            found,
            expected: LAYOUT_VERSION,
        }));
    }
    let mut tables = Vec::with_capacity(keyspaces.len());
    for spec in keyspaces.specs() {
        // Names are stored as bytes: any name (a NUL, any script) is kept
        // whatever the database's encoding.
        let name = spec.name.as_bytes();
        txn.execute(
            "INSERT INTO strata_keyspaces (name) VALUES ($1) ON CONFLICT (name) DO NOTHING",
            &[&name],
        )
        .map_err(boxed)?;
        let id: i32 = txn
            .query_one("SELECT id FROM strata_keyspaces WHERE name = $1", &[&name])
            .map_err(boxed)?
            .get(0);
        let table = layout::table(id);
        txn.batch_execute(&layout::create_table(
            &table,
            spec.profile == Profile::Queue,
        ))
        .map_err(boxed)?;
        tables.push(table);
    }
    install(&mut txn, &tables).map_err(boxed)?;
    txn.commit().map_err(boxed)?;
    Ok(tables)
}

/// Installs the functions a commit in one round trip calls and the
/// procedure of each of `tables`, those missing only (the role needs
/// `CREATE` only then).
fn install(txn: &mut postgres::Transaction<'_>, tables: &[String]) -> Result<(), postgres::Error> {
    let installed: bool = txn.query_one(one_trip::FUNCTIONS_PRESENT, &[])?.get(0);
    if !installed {
        txn.batch_execute(one_trip::FUNCTIONS)?;
    }
    for table in tables {
        let installed: bool = txn.query_one(&one_call::present_sql(table), &[])?.get(0);
        if !installed {
            txn.batch_execute(&one_call::create_sql(table))?;
        }
    }
    Ok(())
}

/// Refuses a commit that writes a key or value this engine cannot store,
/// before anything is sent.
fn check_sizes(commit: &Commit) -> Result<(), CommitError> {
    for (index, m) in commit.mutations.iter().enumerate() {
        let (key, value) = match m {
            strata_engine::Mutation::Put { key, value, .. }
            | strata_engine::Mutation::PutVersionstamped { key, value, .. } => (key, Some(value)),
            strata_engine::Mutation::Add { key, .. } => (key, None),
            _ => continue,
        };
        let reason = if key.len() > MAX_KEY_BYTES {
            MutationError::KeyTooLarge {
                len: key.len(),
                max: MAX_KEY_BYTES,
            }
        } else if let Some(v) = value.filter(|v| v.len() > MAX_VALUE_BYTES) {
            MutationError::ValueTooLarge {
                len: v.len(),
                max: MAX_VALUE_BYTES,
            }
        } else {
            continue;
        };
        return Err(CommitError::InvalidMutation { index, reason });
    }
    Ok(())
}

impl Engine for PostgresEngine {
    type Snapshot<'e> = PostgresSnapshot<'e>;

    fn keyspaces(&self) -> &Keyspaces {
        &self.keyspaces
    }

    fn snapshot(&self) -> Result<PostgresSnapshot<'_>, ReadError> {
        PostgresSnapshot::begin(self)
    }

    /// One prepared statement in autocommit, which sees every commit
    /// acknowledged before it: one round trip, where a read in a snapshot
    /// of its own takes three (the snapshot's start, the read, its end).
    fn get_latest(
        &self,
        ks: strata_engine::Keyspace,
        key: &[u8],
    ) -> Result<Option<Vec<u8>>, ReadError> {
        let table = self.table(ks).ok_or(ReadError::UnknownKeyspace(ks))?;
        let (kp, kr) = layout::split(key);
        let (_pooled, value) = self
            .first_message(|pooled| read::point_get(pooled.conn(), table, kp, kr))
            .map_err(ReadError::Backend)?;
        Ok(value)
    }

    /// A commit of puts and deletes in one keyspace made while another of
    /// this instance is being written waits for it, queued with any
    /// others, and the queue is then written as one transaction
    /// (`write_queued`): one round trip, one lock of the version row and
    /// one flush of the log for all of them. A commit of any other shape
    /// (predicates, counters, versionstamps, several keyspaces) is written
    /// at once, as its own transaction: queued, it would still be written
    /// alone, after waiting for the others.
    fn commit(&self, commit: Commit) -> Result<CommitInfo, CommitError> {
        self.keyspaces.check_commit(&commit)?;
        check_sizes(&commit)?;
        if one_call::queueable(&commit) {
            return self
                .committer
                .commit(commit, |group| self.write_queued(&group), Ok);
        }
        self.write_group(std::slice::from_ref(&commit))
            .pop()
            .unwrap_or_else(|| {
                Err(CommitError::Backend(boxed(ServerError::Unexpected(
                    "no result",
                ))))
            })
    }

    /// One transaction for the whole group: each commit's predicates see
    /// the group's earlier commits, a refused commit writes nothing and
    /// fails alone, the applied ones take consecutive versions, and the
    /// transaction commits synchronously when any applied member is
    /// `Immediate`. A statement that fails rolls back the whole group.
    fn commit_group(&self, commits: Vec<Commit>) -> Vec<Result<CommitInfo, CommitError>> {
        // Commits refused before anything is sent fail alone; the others
        // go in one transaction, in order.
        let mut results: Vec<Option<Result<CommitInfo, CommitError>>> = Vec::new();
        let mut sent = Vec::new();
        for c in commits {
            match self
                .keyspaces
                .check_commit(&c)
                .and_then(|()| check_sizes(&c))
            {
                Ok(()) => {
                    results.push(None);
                    sent.push(c);
                }
                Err(e) => results.push(Some(Err(e))),
            }
        }
        let mut written = if sent.is_empty() {
            Vec::new()
        } else {
            self.write_group(&sent)
        }
        .into_iter();
        results
            .into_iter()
            .map(|r| {
                r.or_else(|| written.next()).unwrap_or_else(|| {
                    Err(CommitError::Backend(boxed(ServerError::Unexpected(
                        "fewer results than commits",
                    ))))
                })
            })
            .collect()
    }

    fn sync(&self) -> Result<u64, EngineError> {
        let version = self.sync_write().map_err(EngineError::Backend)?;
        self.made_durable(version);
        Ok(self.durable_version())
    }

    /// One synchronous transaction raises the version row (to the
    /// greater of its value and `at_least`: safe to repeat).
    fn raise_version(&self, at_least: u64) -> Result<u64, strata_engine::Error> {
        let target = i64::try_from(at_least).unwrap_or(i64::MAX);
        let version = self
            .repeatable(|client| {
                let mut txn = client.transaction()?;
                txn.batch_execute("SET LOCAL synchronous_commit = on")?;
                let v: i64 = txn
                    .query_one(
                        "UPDATE strata_meta SET value = GREATEST(value, $1) WHERE id = 1 RETURNING value",
                        &[&target],
                    )?
                    .get(0);
                txn.commit()?;
                Ok(v)
            })
            .map_err(|e| match e {
                CapabilityError::Backend(b) => CommitError::OutcomeUnknown(b),
                other => CommitError::OutcomeUnknown(Box::new(other)),
            })?;
        let version = version.unsigned_abs();
        self.made_durable(version);
        Ok(version)
    }

    fn durable_version(&self) -> u64 {
        self.durable.load(Ordering::SeqCst)
    }

    fn last_version(&self) -> u64 {
        self.last.load(Ordering::SeqCst)
    }
}

impl PostgresEngine {
    /// Runs `work` on a pooled connection and, if that connection turns out
    /// dead (the server restarted, or ended the session), once more on a
    /// new one: for work safe to repeat (reads, `VACUUM`). A connection
    /// whose work failed is not reused.
    fn repeatable<T>(
        &self,
        work: impl Fn(&mut postgres::Client) -> Result<T, postgres::Error>,
    ) -> Result<T, CapabilityError> {
        self.first_message(|p| work(&mut p.conn().client))
            .map(|(_, v)| v)
            .map_err(CapabilityError::Backend)
    }
}

impl Statistics for PostgresEngine {
    /// Exact counts and bytes (key and value lengths), from a scan of each
    /// table in one snapshot: costly on large tables.
    fn stats(&self) -> Result<Vec<KeyspaceStats>, CapabilityError> {
        let counts = self.repeatable(|client| {
            let mut txn = client
                .build_transaction()
                .isolation_level(postgres::IsolationLevel::RepeatableRead)
                .read_only(true)
                .start()?;
            let mut counts = Vec::with_capacity(self.tables.len());
            for table in &self.tables {
                let row = txn.query_one(
                    &format!(
                        "SELECT count(*), coalesce(sum(length(kp) + length(kr) + length(value)), 0)::bigint FROM {table}"
                    ),
                    &[],
                )?;
                counts.push((row.get::<_, i64>(0), row.get::<_, i64>(1)));
            }
            txn.commit()?;
            Ok(counts)
        })?;
        Ok(self
            .keyspaces
            .specs()
            .iter()
            .zip(counts)
            .map(|(spec, (entries, bytes))| KeyspaceStats {
                name: spec.name.clone(),
                entries: entries.unsigned_abs(),
                entries_exact: true,
                bytes: bytes.unsigned_abs(),
                bytes_exact: true,
            })
            .collect())
    }
}

impl Backup for PostgresEngine {
    /// Unsupported: a server database is backed up with the server's own
    /// tools (`pg_dump`, or `pg_basebackup` and WAL archiving for a point
    /// in time), which see every process's commits.
    fn backup(&self, _path: &std::path::Path) -> Result<BackupInfo, CapabilityError> {
        Err(CapabilityError::Unsupported {
            engine: "PostgresEngine",
            capability: "backup",
            why: "back up a server database with pg_dump or pg_basebackup",
        })
    }
}

impl strata_engine::Integrity for PostgresEngine {
    /// Unsupported: the server's own checks serve (`data_checksums` at
    /// `initdb`, `pg_amcheck`, `pg_checksums`); every row this engine reads
    /// is a server's answer.
    fn check_integrity(&self) -> Result<strata_engine::IntegrityReport, CapabilityError> {
        Err(CapabilityError::Unsupported {
            engine: "PostgresEngine",
            capability: "integrity checks",
            why: "use the server's data checksums and pg_amcheck",
        })
    }
}

impl Compact for PostgresEngine {
    /// `VACUUM (ANALYZE)` of every keyspace table: dead rows' space is made
    /// reusable (not returned to the operating system) and the planner's
    /// statistics refreshed.
    fn compact(&self) -> Result<(), CapabilityError> {
        self.repeatable(|client| {
            for table in &self.tables {
                client.batch_execute(&format!("VACUUM (ANALYZE) {table}"))?;
            }
            Ok(())
        })
    }
}

/// This crate's README example, compiled as a doctest (not run: it needs a
/// server).
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
