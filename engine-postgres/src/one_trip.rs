//! A single commit in one round trip: one message that takes the version
//! row's lock, checks the predicates and applies the counters on the
//! server (two functions the engine installs), writes, records the commit
//! token and commits. The lock is held only while the server runs that
//! message, never across a round trip.

use std::fmt::Write as _;

use strata_engine::implement::{self, Op, Reads};
use strata_engine::{
    Commit, CommitError, CommitInfo, Durability, Keyspace, Mutation, MutationError, Predicate,
    RangeSpec,
};

use crate::layout::{self, Condition};
use crate::read::first_value;
use crate::write::{FLUSH_AFTER, LITERAL_BYTES};
use crate::write_rows::op_bytes;
use crate::{PostgresEngine, ServerError, boxed};

/// The server-side functions, versioned by name (`_v1`): a later engine
/// that needs other semantics installs `_v2` beside them, and engines of
/// both versions keep working on one database.
///
/// - `strata_check_v1(holds, i)` raises `SR001` (detail: `i`) unless
///   `holds` is true: predicate `i` did not hold.
/// - `strata_add_v1(current, delta, i)` is the counter of mutation `i`
///   after adding `delta` to `current` (8 bytes little-endian two's
///   complement, absent as 0, the sum wrapping), or raises `SR002`
///   (detail: `i` and the stored length) when `current` is not 8 bytes.
pub(crate) const FUNCTIONS: &str = r"
CREATE OR REPLACE FUNCTION strata_check_v1(holds boolean, idx integer) RETURNS void
LANGUAGE plpgsql AS $f$
BEGIN
    IF holds IS NOT TRUE THEN
        RAISE EXCEPTION USING ERRCODE = 'SR001',
            MESSAGE = 'strata: a predicate did not hold', DETAIL = idx::text;
    END IF;
END
$f$;
CREATE OR REPLACE FUNCTION strata_add_v1(current bytea, delta bigint, idx integer) RETURNS bytea
LANGUAGE plpgsql AS $f$
DECLARE
    old numeric := 0;
    total numeric;
    be bytea;
    le bytea := '\x0000000000000000'::bytea;
BEGIN
    IF current IS NOT NULL THEN
        IF length(current) <> 8 THEN
            RAISE EXCEPTION USING ERRCODE = 'SR002',
                MESSAGE = 'strata: a counter is not 8 bytes',
                DETAIL = idx::text || ' ' || length(current)::text;
        END IF;
        FOR i IN REVERSE 7..0 LOOP
            old := old * 256 + get_byte(current, i);
        END LOOP;
        IF old >= 9223372036854775808 THEN
            old := old - 18446744073709551616;
        END IF;
    END IF;
    total := old + delta;
    IF total > 9223372036854775807 THEN
        total := total - 18446744073709551616;
    ELSIF total < -9223372036854775808 THEN
        total := total + 18446744073709551616;
    END IF;
    be := int8send(total::bigint);
    FOR i IN 0..7 LOOP
        le := set_byte(le, i, get_byte(be, 7 - i));
    END LOOP;
    RETURN le;
END
$f$;
";

/// Whether every function of [`FUNCTIONS`] is installed.
pub(crate) const FUNCTIONS_PRESENT: &str = "SELECT \
    to_regprocedure('strata_check_v1(boolean,integer)') IS NOT NULL \
    AND to_regprocedure('strata_add_v1(bytea,bigint,integer)') IS NOT NULL";

/// A commit the server refused by one of the engine's functions, before
/// its `COMMIT`: nothing of it was applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// `SR001`: predicate `index` did not hold.
    Conflict(usize),
    /// `SR002`: the counter of mutation `index` holds `len` bytes.
    CounterNotEight { index: usize, len: usize },
}

impl Refusal {
    /// The refusal a server error states, if it is one of ours.
    pub(crate) fn of(e: &postgres::Error) -> Option<Self> {
        let db = e.as_db_error()?;
        let mut detail = db.detail()?.split(' ').map(str::parse::<usize>);
        match db.code().code() {
            "SR001" => Some(Self::Conflict(detail.next()?.ok()?)),
            "SR002" => Some(Self::CounterNotEight {
                index: detail.next()?.ok()?,
                len: detail.next()?.ok()?,
            }),
            _ => None,
        }
    }

    /// The commit error it means for `commit`.
    pub(crate) fn error(self, commit: &Commit) -> CommitError {
        match self {
            Self::Conflict(index) => match commit.predicates.get(index) {
                Some(p) => CommitError::Conflict {
                    index,
                    predicate: p.clone(),
                },
                None => CommitError::Backend(boxed(ServerError::Unexpected(
                    "the server named a predicate the commit does not have",
                ))),
            },
            Self::CounterNotEight { index, len } => CommitError::InvalidMutation {
                index,
                reason: MutationError::CounterNotEight { len },
            },
        }
    }
}

/// Reads that find every counter at zero and every range empty: resolving
/// a commit with them checks what does not depend on stored data (ranges,
/// versionstamp offsets, counters over values the commit itself writes).
struct Unread;

impl Reads for Unread {
    fn get(&mut self, _: Keyspace, _: &[u8]) -> Result<Option<Vec<u8>>, CommitError> {
        Ok(Some(vec![0; 8]))
    }

    fn any_in(&mut self, _: Keyspace, _: &RangeSpec) -> Result<bool, CommitError> {
        Ok(false)
    }
}

/// Bytes a commit's predicates carry into its message.
fn predicate_bytes(commit: &Commit) -> usize {
    commit
        .predicates
        .iter()
        .map(|p| match p {
            Predicate::Exists { key, .. } | Predicate::Absent { key, .. } => key.len(),
            Predicate::ValueEquals { key, value, .. } => {
                key.len() + value.as_ref().map_or(0, Vec::len)
            }
            // Bounds; other kinds go the general way.
            _ => 64,
        })
        .sum()
}

impl PostgresEngine {
    /// A single commit of at most [`LITERAL_BYTES`] in one round trip.
    /// `None` sends the caller the general way: a commit too large to send
    /// as text, or one that is invalid whatever the stored data (the
    /// general way reports its error in the order the contract gives).
    ///
    /// A message that finds its connection dead is settled by its token
    /// like any lost reply; when that proves it was not applied (it never
    /// can be now), the commit is sent once more on a new connection, so a
    /// server restart between commits is invisible.
    pub(crate) fn write_one(&self, commit: &Commit) -> Option<Result<CommitInfo, CommitError>> {
        if commit
            .predicates
            .iter()
            .any(|p| matches!(p, Predicate::RangeEmpty { range, .. } if range.validate().is_err()))
        {
            return None;
        }
        let ops = implement::resolve(0, &commit.mutations, &mut Unread).ok()?;
        if op_bytes(&ops) + predicate_bytes(commit) > LITERAL_BYTES {
            return None;
        }
        let immediate = commit.durability == Durability::Immediate;
        let body = format!(
            "{}{}",
            self.predicate_checks(&commit.predicates)?,
            self.ordered_writes(&commit.mutations, &ops)
        );
        Some(self.send_single(commit, |pooled, token| {
            // The version row's update and the token's row in one
            // statement (one plan fewer than two); the statements after it
            // start after the lock is taken, so they see every earlier
            // commit.
            let sql = format!(
                "BEGIN ISOLATION LEVEL READ COMMITTED; \
                 WITH v AS (UPDATE strata_meta SET value = value + 1 WHERE id = 1 RETURNING value) \
                 INSERT INTO strata_commits (token, applied, version) \
                 SELECT {}, true, value FROM v RETURNING version; \
                 {body}SET LOCAL synchronous_commit TO off; COMMIT{}",
                layout::literal(token.as_bytes()),
                if immediate { FLUSH_AFTER } else { "" }
            );
            self.last_message(pooled, &sql)
                .map(|answer| first_value(&answer).and_then(|v| v.parse().ok()))
        }))
    }

    /// Each predicate as a statement that raises [`Refusal::Conflict`]
    /// unless it holds, in the commit's order; `None` for a kind of
    /// predicate this engine checks only the general way.
    fn predicate_checks(&self, predicates: &[Predicate]) -> Option<String> {
        let mut sql = String::new();
        for (i, p) in predicates.iter().enumerate() {
            // Checked by the caller: every keyspace was issued here.
            let Some(table) = self.table(p.keyspace()) else {
                continue;
            };
            let holds = match p {
                Predicate::Exists { key, .. } => format!("EXISTS ({})", point(table, key, "1")),
                Predicate::Absent { key, .. }
                | Predicate::ValueEquals {
                    key, value: None, ..
                } => {
                    format!("NOT EXISTS ({})", point(table, key, "1"))
                }
                Predicate::ValueEquals {
                    key,
                    value: Some(v),
                    ..
                } => format!(
                    "({}) IS NOT DISTINCT FROM {}",
                    point(table, key, "value"),
                    layout::literal(v)
                ),
                Predicate::RangeEmpty { range, .. } => {
                    let mut bounds = Condition::default();
                    bounds.lower(&range.start);
                    bounds.upper(&range.end);
                    format!(
                        "NOT EXISTS (SELECT 1 FROM {table}{} LIMIT 1)",
                        bounds.where_inline()
                    )
                }
                _ => return None,
            };
            let _ = write!(sql, "SELECT strata_check_v1({holds}, {i}); ");
        }
        Some(sql)
    }

    /// A commit's writes as statements, in its order: runs of plain puts,
    /// deletes and range deletes as [`literal_writes`](Self::literal_writes)
    /// writes them; each versionstamped put alone, its stamp computed from
    /// the version the transaction took; each counter alone, added on the
    /// server to the value the earlier statements left.
    pub(crate) fn ordered_writes(&self, mutations: &[Mutation], ops: &[Op]) -> String {
        let mut sql = String::new();
        let mut plain: Vec<Op> = Vec::new();
        let mut order: u32 = 0;
        for (index, (m, op)) in mutations.iter().zip(ops).enumerate() {
            match m {
                Mutation::PutVersionstamped { ks, key, value, at } => {
                    sql.push_str(&self.literal_writes(&std::mem::take(&mut plain)));
                    if let Some(table) = self.table(*ks) {
                        sql.push_str(&crate::write::stamped_put(table, key, value, *at, order));
                    }
                    order += 1;
                }
                Mutation::Add { ks, key, delta } => {
                    sql.push_str(&self.literal_writes(&std::mem::take(&mut plain)));
                    if let Some(table) = self.table(*ks) {
                        let (kp, kr) = layout::split(key);
                        let (kp, kr) = (layout::literal(kp), layout::literal(kr));
                        let _ = write!(
                            sql,
                            "INSERT INTO {table} (kp, kr, value) VALUES ({kp}, {kr}, strata_add_v1(\
                             (SELECT value FROM {table} WHERE kp = {kp} AND kh = sha256({kr})), \
                             {delta}, {index})) \
                             ON CONFLICT (kp, kh) DO UPDATE SET value = EXCLUDED.value; "
                        );
                    }
                }
                _ => plain.push(op.clone()),
            }
        }
        sql.push_str(&self.literal_writes(&plain));
        sql
    }
}

/// The statement reading `column` of `key`'s row in `table`.
fn point(table: &str, key: &[u8], column: &str) -> String {
    let (kp, kr) = layout::split(key);
    format!(
        "SELECT {column} FROM {table} WHERE kp = {} AND kh = sha256({})",
        layout::literal(kp),
        layout::literal(kr)
    )
}
