//! Commits: one transaction per commit (or group), serialised by the
//! version row's lock; and `sync`.

use std::fmt::Write as _;

use postgres::SimpleQueryMessage;
use strata_engine::implement::{self, GroupFailed, GroupResults, Op, Reads};
use strata_engine::{
    Commit, CommitError, CommitInfo, Durability, Keyspace, Mutation, Predicate, StampAt,
};

use crate::commit_reads::{Answered, Prefetch, TxReads};
use crate::layout::{self, Condition};
use crate::pool::{Conn, Pooled};
use crate::read::first_value;
use crate::write_rows::{delete_range, delete_rows, last_puts, op_bytes, put_rows, run_len};
use crate::{LastMessageError, PostgresEngine, ServerError, boxed, is_connection_error};

/// A single commit whose keys and values hold at most this many bytes
/// sends them as text with its `COMMIT` (one round trip for the writes and
/// the commit); a larger one sends them in binary, statement by statement.
pub(crate) const LITERAL_BYTES: usize = 256 << 10;

/// The first statement of every commit: takes the version row's lock (the
/// commit lock of the whole database), and returns the next version.
const BEGIN: &str = "BEGIN ISOLATION LEVEL READ COMMITTED; \
     UPDATE strata_meta SET value = value + 1 WHERE id = 1 RETURNING value";

/// The statement, sent with a commit's `COMMIT`, that records its token
/// (see [`crate::CommitToken`]) as applied at the version `version_sql`
/// computes: the row is durable exactly when the commit's rows are.
fn token_row(token: &crate::CommitToken, version_sql: &str) -> String {
    format!(
        "INSERT INTO strata_commits (token, applied, version) VALUES ({}, true, {version_sql}); ",
        layout::literal(token.as_bytes())
    )
}

/// A transaction that makes the log durable up to its own commit record,
/// so past every commit before it: a one-row write (a commit that wrote
/// nothing would not wait for a flush) to this session's own row of
/// `strata_flush`, so concurrent flushes never wait for each other's locks,
/// committed synchronously.
/// `$read` runs inside it, before the commit.
macro_rules! flush_sql {
    ($read:literal) => {
        concat!(
            "BEGIN ISOLATION LEVEL READ COMMITTED; \
             SET LOCAL synchronous_commit TO on; \
             INSERT INTO strata_flush (pid, n) VALUES (pg_backend_pid(), 1) \
             ON CONFLICT (pid) DO UPDATE SET n = strata_flush.n + 1; ",
            $read,
            "COMMIT"
        )
    };
}

/// [`flush_sql`] appended to a commit's statements.
pub(crate) const FLUSH_AFTER: &str = concat!("; ", flush_sql!(""));

/// [`flush_sql`] reading the version: a sync.
const SYNC: &str = flush_sql!("SELECT value FROM strata_meta WHERE id = 1; ");

/// Begins a commit: [`BEGIN`], then `reads` (statements whose rows are
/// tagged, see [`Prefetched`]), in one round trip. Returns the first
/// version (0 when the answer held none) and the answer.
fn begin_on(
    pooled: &mut Pooled<'_>,
    reads: &str,
) -> Result<(u64, Vec<SimpleQueryMessage>), postgres::Error> {
    let answer = if reads.is_empty() {
        pooled.conn().client.simple_query(BEGIN)?
    } else {
        let sql = format!("{BEGIN}; SET LOCAL bytea_output = 'hex'; {reads}");
        pooled.conn().client.simple_query(&sql)?
    };
    let first = first_value(&answer)
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    Ok((first, answer))
}

/// The results of a group of `n` commits written as one transaction that
/// failed with `e`: the first commit carries `e`, the others its outcome
/// (unknown when `e` is, not applied otherwise).
pub(crate) fn fail_group(e: CommitError, n: usize) -> GroupResults {
    let msg = e.to_string();
    let unknown = matches!(e, CommitError::OutcomeUnknown(_));
    let mut out = vec![Err(e)];
    out.extend((1..n).map(|_| {
        Err(if unknown {
            GroupFailed::unknown(&msg)
        } else {
            GroupFailed::not_applied(&msg)
        })
    }));
    out
}

pub(crate) fn backend(e: postgres::Error) -> CommitError {
    CommitError::Backend(boxed(e))
}

/// The version the current transaction took (after its update of the
/// version row), as SQL.
pub(crate) const VERSION: &str = "SELECT value FROM strata_meta WHERE id = 1";

/// What became of a transaction whose `COMMIT` reply was lost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fate {
    /// Its token row is there: applied, at this version (the last it took).
    Committed(Option<u64>),
    /// Its token was claimed as not applied: it never will be.
    Aborted,
    Unknown,
}

impl PostgresEngine {
    /// Writes the commits of concurrent callers, queued behind one another
    /// (already checked for keyspaces and sizes; puts and deletes, see
    /// `one_call::queueable`): in one keyspace, of at most
    /// `LITERAL_BYTES` together, as one call of its procedure, one
    /// transaction for them all; otherwise one after the other, each its
    /// own transaction (a group's transaction would take a round trip per
    /// commit, with the version row locked throughout). One result per
    /// commit, in order.
    pub(crate) fn write_queued(&self, commits: &[Commit]) -> GroupResults {
        if let Some(results) = self.write_call(commits) {
            // One transaction: durable for all of them or none.
            if results.iter().any(|r| r.as_ref().is_ok_and(|i| i.durable)) {
                self.committer.count_sync();
            }
            return results;
        }
        let results: GroupResults = commits
            .iter()
            .flat_map(|c| self.write_group(std::slice::from_ref(c)))
            .collect();
        for _ in results
            .iter()
            .filter(|r| r.as_ref().is_ok_and(|i| i.durable))
        {
            self.committer.count_sync();
        }
        results
    }

    /// Writes `commits` (already checked for keyspaces and sizes) in one
    /// transaction; one result per commit, in order.
    pub(crate) fn write_group(&self, commits: &[Commit]) -> Vec<Result<CommitInfo, CommitError>> {
        let n = commits.len();
        if let Some(results) = self.write_call(commits) {
            return results;
        }
        if let [commit] = commits
            && let Some(result) = self.write_one(commit)
        {
            return vec![result];
        }
        // A single commit reads what its predicates and counters need in
        // the first round trip, and sends its writes with the commit in the
        // second; a group goes statement by statement, as each commit's
        // reads must see the earlier ones' writes.
        let single = n == 1;
        let reads = if single {
            self.prefetch_sql(&commits[0])
        } else {
            Prefetch::default()
        };
        let token = self.mint_token();
        let (mut pooled, first, answer) = match self.begin(&reads.sql) {
            Ok(begun) => begun,
            Err(e) => return fail_group(e, n),
        };
        let prefetched = reads.answers(&answer);
        let mut outcomes: Vec<Result<u64, CommitError>> = Vec::with_capacity(n);
        let mut next = first;
        let mut immediate = false;
        let mut writes = String::new();
        for (i, commit) in commits.iter().enumerate() {
            let checked = {
                let tx = TxReads {
                    engine: self,
                    conn: pooled.conn(),
                };
                let check = |reads: &mut dyn Reads| {
                    implement::check_predicates(&commit.predicates, reads)
                        .and_then(|()| implement::resolve(next, &commit.mutations, reads))
                };
                if single {
                    check(&mut Answered {
                        prefetched: &prefetched,
                        tx,
                    })
                } else {
                    let mut tx = tx;
                    check(&mut tx)
                }
            };
            let written = match checked {
                Err(e @ CommitError::Backend(_)) => Err(e),
                Err(e) => {
                    outcomes.push(Err(e));
                    continue;
                }
                // Small enough to send as text with the commit.
                Ok(ops) if single && op_bytes(&ops) <= LITERAL_BYTES => {
                    writes = self.literal_writes(&ops);
                    Ok(())
                }
                Ok(ops) => self.apply(pooled.conn(), &ops),
            };
            if let Err(e) = written {
                // Part of this commit may be in the transaction: roll all
                // of it back.
                if pooled.conn().client.batch_execute("ROLLBACK").is_err() {
                    pooled.discard();
                }
                return abandon(outcomes, i, e, n);
            }
            immediate |= commit.durability == Durability::Immediate;
            outcomes.push(Ok(next));
            next += 1;
        }
        let applied = next - first;
        if applied == 0 {
            if pooled.conn().client.batch_execute("ROLLBACK").is_err() {
                pooled.discard();
            }
            return outcomes.into_iter().map(|r| r.map(info(false))).collect();
        }
        self.finish(
            pooled,
            outcomes,
            (first, next - 1),
            immediate,
            &token,
            &writes,
        )
    }

    /// Sends a single commit by `send` (on a pooled connection, with a new
    /// token; it answers the version the commit took, if its answer holds
    /// one) and settles what came of it: acknowledged; refused by the
    /// server's check (rolled back); or, after a failure, as its token
    /// says. A commit whose connection was lost and whose token is then
    /// claimed as not applied (it never can be now) is sent once more on a
    /// new connection, so a server restart between commits is invisible.
    pub(crate) fn send_single(
        &self,
        commit: &Commit,
        send: impl Fn(&mut Pooled<'_>, &crate::CommitToken) -> Result<Option<u64>, LastMessageError>,
    ) -> Result<CommitInfo, CommitError> {
        self.send_tokened(commit.durability == Durability::Immediate, commit, send)
    }

    /// [`send_single`](Self::send_single) for a transaction that is
    /// durable when `immediate`; `commit` is the one a refusal of the
    /// server's names.
    pub(crate) fn send_tokened(
        &self,
        immediate: bool,
        commit: &Commit,
        send: impl Fn(&mut Pooled<'_>, &crate::CommitToken) -> Result<Option<u64>, LastMessageError>,
    ) -> Result<CommitInfo, CommitError> {
        let (mut resent, mut reinstalled) = (false, false);
        loop {
            let token = self.mint_token();
            let mut pooled = self.pooled().map_err(|e| CommitError::Backend(boxed(e)))?;
            let e = match send(&mut pooled, &token) {
                Ok(Some(version)) => {
                    if immediate {
                        self.made_durable(version);
                    } else {
                        self.seen(version);
                    }
                    return Ok(CommitInfo {
                        version,
                        durable: immediate,
                    });
                }
                Ok(None) => {
                    pooled.discard();
                    return Err(CommitError::OutcomeUnknown(boxed(ServerError::Unexpected(
                        "no version in a commit's answer",
                    ))));
                }
                Err(e) => e,
            };
            if let Some(refusal) = e.refusal {
                // Refused before its `COMMIT`: the transaction is aborted,
                // nothing of it applied.
                if pooled.conn().client.batch_execute("ROLLBACK").is_err() {
                    pooled.discard();
                }
                return Err(refusal.error(commit));
            }
            let (fate, msg) = self.after_failure(pooled, &e, &token);
            match fate {
                Fate::Aborted if e.connection_lost && !resent => {
                    // The other idle connections most likely went with
                    // the same server: the new send takes a new one.
                    self.reconnect();
                    resent = true;
                }
                Fate::Aborted if e.missing_function && !reinstalled => {
                    // A function or procedure of the engine's was dropped
                    // since the open: installed again, the commit is sent
                    // again (its first token is claimed, never applied).
                    tracing::warn!(error = %msg, "a function of the engine's is missing: installing it again");
                    if let Err(why) = self.reinstall() {
                        return Err(GroupFailed::not_applied(&format!(
                            "{msg}; installing the engine's functions again failed: {why}"
                        )));
                    }
                    reinstalled = true;
                }
                Fate::Committed(Some(version)) => {
                    return self
                        .settle(version, immediate, &msg)
                        .map(|durable| CommitInfo { version, durable });
                }
                Fate::Committed(None) => {
                    return Err(GroupFailed::unknown(&format!(
                        "{msg}; the commit was applied, its version is not known"
                    )));
                }
                Fate::Aborted => return Err(GroupFailed::not_applied(&msg)),
                Fate::Unknown => return Err(GroupFailed::unknown(&msg)),
            }
        }
    }

    /// After a lost reply, for a commit known applied at `version`:
    /// whether it is durable as its durability asks (`Ok(false)` for a
    /// buffered one); an `Immediate` one that no sync can confirm is an
    /// unknown outcome.
    fn settle(&self, version: u64, immediate: bool, msg: &str) -> Result<bool, CommitError> {
        if !immediate {
            self.seen(version);
            return Ok(false);
        }
        if self.sync_write().is_ok_and(|v| v >= version) {
            self.made_durable(version);
            return Ok(true);
        }
        Err(GroupFailed::unknown(&format!(
            "{msg}; the commit was applied, but is not known durable"
        )))
    }

    /// Begins a commit's transaction on a pooled connection, reading
    /// `reads` with it: the connection, the first version and the answer.
    fn begin(
        &self,
        reads: &str,
    ) -> Result<(Pooled<'_>, u64, Vec<SimpleQueryMessage>), CommitError> {
        let (pooled, (first, answer)) = self
            .first_message(|p| begin_on(p, reads))
            .map_err(CommitError::Backend)?;
        if first == 0 {
            pooled.discard();
            return Err(CommitError::Backend(boxed(ServerError::Unexpected(
                "the version row is missing",
            ))));
        }
        Ok((pooled, first, answer))
    }

    /// The reads a single commit will ask for, as tagged statements.
    fn prefetch_sql(&self, commit: &Commit) -> Prefetch {
        let mut p = Prefetch::default();
        let points = commit
            .predicates
            .iter()
            .filter_map(|pr| match pr {
                Predicate::Exists { ks, key }
                | Predicate::Absent { ks, key }
                | Predicate::ValueEquals { ks, key, .. } => Some((*ks, key)),
                _ => None,
            })
            .chain(commit.mutations.iter().filter_map(|m| match m {
                Mutation::Add { ks, key, .. } => Some((*ks, key)),
                _ => None,
            }));
        for (ks, key) in points {
            let Some(table) = self.table(ks) else {
                continue;
            };
            let (kp, kr) = layout::split(key);
            let i = p.points.len();
            let _ = write!(
                p.sql,
                "SELECT 'p{i}', value FROM {table} WHERE kp = {} AND kh = sha256({}); ",
                layout::literal(kp),
                layout::literal(kr)
            );
            p.points.push((ks, key.clone()));
        }
        for pr in &commit.predicates {
            if let Predicate::RangeEmpty { ks, range } = pr {
                let Some(table) = self.table(*ks) else {
                    continue;
                };
                let mut bounds = Condition::default();
                bounds.lower(&range.start);
                bounds.upper(&range.end);
                let i = p.ranges.len();
                let _ = write!(
                    p.sql,
                    "SELECT 'r{i}', EXISTS (SELECT 1 FROM {table}{} LIMIT 1)::text; ",
                    bounds.where_inline()
                );
                p.ranges.push((*ks, range.clone()));
            }
        }
        p
    }

    /// Resolved changes as SQL statements with their bytes written in.
    pub(crate) fn literal_writes(&self, ops: &[Op]) -> String {
        let mut sql = String::new();
        let mut i = 0;
        while i < ops.len() {
            let (ks, run) = match &ops[i] {
                Op::Put(ks, ..) => (
                    *ks,
                    run_len(&ops[i..], |op| matches!(op, Op::Put(k, ..) if *k == *ks)),
                ),
                Op::Delete(ks, _) => (
                    *ks,
                    run_len(&ops[i..], |op| matches!(op, Op::Delete(k, _) if *k == *ks)),
                ),
                Op::DeleteRange(ks, _) => (*ks, 1),
            };
            // Checked by the caller: every keyspace was issued here.
            let Some(table) = self.table(ks) else {
                i += run;
                continue;
            };
            match &ops[i] {
                Op::Put(..) => {
                    let rows = last_puts(&ops[i..i + run]);
                    let _ = write!(sql, "INSERT INTO {table} (kp, kr, value) VALUES ");
                    for (j, (key, value)) in rows.iter().enumerate() {
                        let (kp, kr) = layout::split(key);
                        let sep = if j == 0 { "" } else { ", " };
                        let _ = write!(
                            sql,
                            "{sep}({}, {}, {})",
                            layout::literal(kp),
                            layout::literal(kr),
                            layout::literal(value)
                        );
                    }
                    sql.push_str(" ON CONFLICT (kp, kh) DO UPDATE SET value = EXCLUDED.value; ");
                }
                Op::Delete(..) => {
                    let _ = write!(sql, "DELETE FROM {table} WHERE (kp, kh) IN (");
                    for (j, op) in ops[i..i + run].iter().enumerate() {
                        if let Op::Delete(_, key) = op {
                            let (kp, kr) = layout::split(key);
                            let sep = if j == 0 { "" } else { ", " };
                            let _ = write!(
                                sql,
                                "{sep}({}, sha256({}))",
                                layout::literal(kp),
                                layout::literal(kr)
                            );
                        }
                    }
                    sql.push_str("); ");
                }
                Op::DeleteRange(_, range) => {
                    let mut bounds = Condition::default();
                    bounds.lower(&range.start);
                    bounds.upper(&range.end);
                    let _ = write!(sql, "DELETE FROM {table}{}; ", bounds.where_inline());
                }
            }
            i += run;
        }
        sql
    }

    /// Sends `writes` (statements, possibly none) and commits the
    /// transaction holding applied commits `first..=last` (their versions
    /// in `outcomes`) with its `token`'s row; when `immediate`, waits until
    /// the log is durable past it. A lost or failed reply is resolved by
    /// looking for the token's row: a failed write rolls the whole
    /// transaction back, row included.
    ///
    /// The transaction itself always commits asynchronously: the version
    /// row's lock (which every commit waits for) is then released once the
    /// commit record is in the log, not after its flush. Durability comes
    /// from the [`flush_sql`] transaction after it, in the same round trip: its
    /// synchronous commit flushes the log past this commit's record, and
    /// concurrent flushes share one fsync (PostgreSQL's group flush), so
    /// concurrent `Immediate` commits share durable writes while their
    /// versions stay in log order.
    fn finish(
        &self,
        mut pooled: Pooled<'_>,
        outcomes: Vec<Result<u64, CommitError>>,
        (first, last): (u64, u64),
        immediate: bool,
        token: &crate::CommitToken,
        writes: &str,
    ) -> Vec<Result<CommitInfo, CommitError>> {
        let finish = format!(
            "{writes}{}{}SET LOCAL synchronous_commit TO off; COMMIT{}",
            if last == first {
                String::new()
            } else {
                // The first statement took `first`; the group took more.
                format!("UPDATE strata_meta SET value = {last} WHERE id = 1; ")
            },
            token_row(token, &last.to_string()),
            if immediate { FLUSH_AFTER } else { "" }
        );
        let Err(e) = self.last_message(&mut pooled, &finish) else {
            if immediate {
                self.made_durable(last);
            } else {
                self.seen(last);
            }
            return outcomes
                .into_iter()
                .map(|r| r.map(info(immediate)))
                .collect();
        };
        let (fate, msg) = self.after_failure(pooled, &e, token);
        match fate {
            Fate::Committed(_) => match self.settle(last, immediate, &msg) {
                Ok(durable) => outcomes.into_iter().map(|r| r.map(info(durable))).collect(),
                Err(e) => {
                    let why = e.to_string();
                    outcomes
                        .into_iter()
                        .map(|r| r.and_then(|_| Err(GroupFailed::unknown(&why))))
                        .collect()
                }
            },
            Fate::Aborted => outcomes
                .into_iter()
                .map(|r| r.and_then(|_| Err(GroupFailed::not_applied(&msg))))
                .collect(),
            Fate::Unknown => outcomes
                .into_iter()
                .map(|r| r.and_then(|_| Err(GroupFailed::unknown(&msg))))
                .collect(),
        }
    }

    /// After a commit's last message failed with `e`: which statement
    /// failed is unknown, so whatever transaction is open is ended (or the
    /// connection dropped), then the fate of the commit with `token` is
    /// settled. Returns its fate and the error's text.
    fn after_failure(
        &self,
        mut pooled: Pooled<'_>,
        e: &LastMessageError,
        token: &crate::CommitToken,
    ) -> (Fate, String) {
        if e.connection_lost || pooled.conn().client.batch_execute("ROLLBACK").is_err() {
            pooled.discard();
        } else {
            drop(pooled);
        }
        tracing::warn!(token = %token, error = %e.message, "a commit's reply was lost or failed");
        (self.fate(token), e.message.clone())
    }

    /// Settles, on a new connection, what became of the commit with
    /// `token`, by its token row (never by transaction id: the server hands
    /// out again, after a crash, an id that nothing durable recorded). The
    /// token is claimed as not applied by inserting a row of our own for
    /// it: that insert waits for a transaction still holding the commit's
    /// uncommitted row, and once it is in, the commit (even one whose
    /// message is still on its way) can never add its own. A server that is
    /// restarting is asked a few times.
    fn fate(&self, token: &crate::CommitToken) -> Fate {
        const CLAIM: &str = "INSERT INTO strata_commits (token, applied) VALUES ($1, false) \
             ON CONFLICT (token) DO NOTHING";
        const READ: &str = "SELECT applied, version FROM strata_commits WHERE token = $1";
        for attempt in 0..5u32 {
            if attempt > 0 {
                std::thread::sleep(std::time::Duration::from_millis(200 << attempt));
            }
            let Ok(mut conn) = self.fresh() else {
                continue;
            };
            let bytes = token.as_bytes().as_slice();
            let settled = conn
                .client
                .batch_execute("SET lock_timeout = '10s'; SET synchronous_commit = on")
                .and_then(|()| conn.client.execute(CLAIM, &[&bytes]))
                .and_then(|_| conn.client.query_opt(READ, &[&bytes]));
            return match settled {
                Ok(Some(row)) if row.get::<_, bool>(0) => Fate::Committed(
                    row.get::<_, Option<i64>>(1)
                        .and_then(|v| u64::try_from(v).ok()),
                ),
                Ok(Some(_)) => Fate::Aborted,
                // Gone already (pruned): too old to know.
                Ok(None) => Fate::Unknown,
                Err(e) if is_connection_error(&e) => continue,
                // The old transaction still holds its row (lock timeout),
                // or the server refused: not known.
                Err(e) => {
                    tracing::warn!(token = %token, error = %crate::describe(&e), "a lost commit could not be settled");
                    Fate::Unknown
                }
            };
        }
        Fate::Unknown
    }

    /// The [`flush_sql`] transaction, reading the version inside it: when it
    /// returns, the log is flushed (and, with a synchronous standby,
    /// flushed there) past every commit up to the version it returns.
    pub(crate) fn sync_write(&self) -> Result<u64, strata_engine::BackendError> {
        let (_pooled, answer) = self.first_message(|p| p.conn().client.simple_query(SYNC))?;
        first_value(&answer)
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| boxed(ServerError::Unexpected("no version in the sync's answer")))
    }

    /// Applies resolved changes in the open transaction: runs of puts
    /// (and of deletes) to one keyspace go in few multi-row statements.
    fn apply(&self, conn: &mut Conn, ops: &[Op]) -> Result<(), CommitError> {
        let table = |ks: Keyspace| self.table(ks).ok_or(CommitError::UnknownKeyspace(ks));
        let mut i = 0;
        while i < ops.len() {
            match &ops[i] {
                Op::Put(ks, ..) => {
                    let run = run_len(&ops[i..], |op| matches!(op, Op::Put(k, ..) if k == ks));
                    put_rows(conn, table(*ks)?, &ops[i..i + run])?;
                    i += run;
                }
                Op::Delete(ks, _) => {
                    let run = run_len(&ops[i..], |op| matches!(op, Op::Delete(k, _) if k == ks));
                    delete_rows(conn, table(*ks)?, &ops[i..i + run])?;
                    i += run;
                }
                Op::DeleteRange(ks, range) => {
                    delete_range(conn, table(*ks)?, range)?;
                    i += 1;
                }
            }
        }
        Ok(())
    }
}

fn info(durable: bool) -> impl Fn(u64) -> CommitInfo {
    move |version| CommitInfo { version, durable }
}

/// The results of a group whose transaction was rolled back when commit
/// `failed` met `error` (as redb's engine reports it).
fn abandon(
    outcomes: Vec<Result<u64, CommitError>>,
    failed: usize,
    error: CommitError,
    n: usize,
) -> Vec<Result<CommitInfo, CommitError>> {
    let msg = error.to_string();
    let mut results: Vec<_> = outcomes
        .into_iter()
        .map(|r| r.and_then(|_| Err(GroupFailed::not_applied(&msg))))
        .collect();
    debug_assert_eq!(results.len(), failed);
    results.push(Err(error));
    results.extend((failed + 1..n).map(|_| Err(GroupFailed::not_applied(&msg))));
    results
}

/// The statement writing a versionstamped put into `table`: its stamp (the
/// `order`th of its commit) computed on the server from the version the
/// transaction took.
pub(crate) fn stamped_put(
    table: &str,
    key: &[u8],
    value: &[u8],
    at: StampAt,
    order: u32,
) -> String {
    let stamp = match at {
        StampAt::KeyInverted(_) => {
            format!("(int8send(~({VERSION})) || substring(int4send(~{order}) from 3 for 2))")
        }
        StampAt::Key(_) | StampAt::Value(_) => {
            format!("(int8send(({VERSION})) || substring(int4send({order}) from 3 for 2))")
        }
    };
    let placed = |bytes: &[u8], offset: usize| {
        format!(
            "overlay({} placing {stamp} from {} for 10)",
            layout::literal(bytes),
            offset + 1
        )
    };
    let (k, v) = match at {
        StampAt::Key(o) | StampAt::KeyInverted(o) => (placed(key, o), layout::literal(value)),
        StampAt::Value(o) => (layout::literal(key), placed(value, o)),
    };
    let p = layout::INDEXED_PREFIX;
    format!(
        "INSERT INTO {table} (kp, kr, value) \
         SELECT substring(k from 1 for {p}), substring(k from {}), v FROM (SELECT {k} AS k, {v} AS v) s \
         ON CONFLICT (kp, kh) DO UPDATE SET value = EXCLUDED.value; ",
        p + 1
    )
}
