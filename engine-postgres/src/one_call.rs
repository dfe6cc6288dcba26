//! The commonest commit, puts and deletes in one keyspace, as one call of
//! a prepared statement: a procedure per keyspace table, installed at
//! open, takes the version row's lock, records the commit token, writes
//! the rows and commits, then (for `Immediate`) commits the flush write,
//! all on the server. Nothing is parsed or planned per commit: the
//! statement is prepared once per connection and the procedure's plans
//! are kept by its session. A group of such commits in one keyspace
//! (concurrent callers queued behind one another, see
//! `PostgresEngine::write_queued`, or `commit_group`) is one call too:
//! their rows merged in order, the version raised by the number of
//! commits.

use std::collections::HashMap;

use strata_engine::{Commit, CommitError, CommitInfo, Durability, Keyspace, Mutation};

use crate::PostgresEngine;
use crate::layout;
use crate::write::LITERAL_BYTES;

/// The procedure's name for `table`; its version is in the name, as for
/// the engine's other functions (see `one_trip::FUNCTIONS`).
pub(crate) fn procedure(table: &str) -> String {
    format!("{table}_write_v2")
}

/// Whether `table`'s procedure is installed.
pub(crate) fn present_sql(table: &str) -> String {
    format!(
        "SELECT to_regprocedure('{}(bytea[],bytea[],bytea[],bytea[],bytea[],bytea,boolean,bigint,bigint)') IS NOT NULL",
        procedure(table)
    )
}

/// The procedure of `table`: deletes the keys `(dkp, dkr)`, upserts the
/// rows `(pkp, pkr, pv)` (keys split by `layout::split`; the two sets
/// disjoint, no key twice), after
/// taking `n` versions (the last returned in `version`: a group of `n`
/// commits takes the `n` before it too) and recording `token` as applied
/// at the last; commits asynchronously, then, when `durable`, commits a
/// write of the session's flush row synchronously (see `write::flush_sql`).
pub(crate) fn create_sql(table: &str) -> String {
    let name = procedure(table);
    format!(
        r"CREATE OR REPLACE PROCEDURE {name}(
    dkp bytea[], dkr bytea[], pkp bytea[], pkr bytea[], pv bytea[],
    tok bytea, durable boolean, n bigint, INOUT version bigint)
LANGUAGE plpgsql AS $f$
BEGIN
    UPDATE strata_meta SET value = value + n WHERE id = 1 RETURNING value INTO version;
    INSERT INTO strata_commits (token, applied, version) VALUES (tok, true, version);
    IF cardinality(dkp) > 0 THEN
        DELETE FROM {table} t USING unnest(dkp, dkr) AS d(kp, kr)
            WHERE t.kp = d.kp AND t.kh = sha256(d.kr);
    END IF;
    IF cardinality(pkp) > 0 THEN
        INSERT INTO {table} (kp, kr, value) SELECT * FROM unnest(pkp, pkr, pv)
            ON CONFLICT (kp, kh) DO UPDATE SET value = EXCLUDED.value;
    END IF;
    PERFORM set_config('synchronous_commit', 'off', true);
    COMMIT;
    IF durable THEN
        PERFORM set_config('synchronous_commit', 'on', true);
        INSERT INTO strata_flush (pid, n) VALUES (pg_backend_pid(), 1)
            ON CONFLICT (pid) DO UPDATE SET n = strata_flush.n + 1;
        COMMIT;
    END IF;
END
$f$"
    )
}

/// A key and what it ends up with: a value, or deleted (`None`).
type Write<'c> = (&'c [u8], Option<&'c [u8]>);

/// Whether `commit` is puts and deletes in one keyspace, without
/// predicates: what a queue of concurrent commits is written as one call
/// of (see `PostgresEngine::write_queued`).
pub(crate) fn queueable(commit: &Commit) -> bool {
    let mut ks = None;
    commit.predicates.is_empty()
        && commit.mutations.iter().all(|m| match m {
            Mutation::Put { ks: k, .. } | Mutation::Delete { ks: k, .. } => {
                *ks.get_or_insert(*k) == *k
            }
            _ => false,
        })
}

/// The last mutation of each key of commits of puts and deletes in one
/// keyspace, in order: `None` when any commit has another shape.
fn last_writes(commits: &[Commit]) -> Option<(Keyspace, Vec<Write<'_>>)> {
    let mut ks = None;
    let n = commits.iter().map(|c| c.mutations.len()).sum();
    let mut at: HashMap<&[u8], usize> = HashMap::with_capacity(n);
    let mut rows: Vec<(&[u8], Option<&[u8]>)> = Vec::with_capacity(n);
    for commit in commits {
        if !commit.predicates.is_empty() {
            return None;
        }
        for m in &commit.mutations {
            let (k, key, value) = match m {
                Mutation::Put { ks, key, value } => (*ks, key, Some(value.as_slice())),
                Mutation::Delete { ks, key } => (*ks, key, None),
                _ => return None,
            };
            if *ks.get_or_insert(k) != k {
                return None;
            }
            if let Some(&i) = at.get(key.as_slice()) {
                rows[i].1 = value;
            } else {
                at.insert(key, rows.len());
                rows.push((key, value));
            }
        }
    }
    Some((ks?, rows))
}

impl PostgresEngine {
    /// Commits of puts and deletes in one keyspace, of at most
    /// [`LITERAL_BYTES`] together, as one call of its table's procedure
    /// (one transaction: all applied, at consecutive versions, or none;
    /// durable when any of them asks to be); `None` for any other commits.
    /// A call that finds its connection dead is settled and sent again as
    /// `write_one` does.
    pub(crate) fn write_call(
        &self,
        commits: &[Commit],
    ) -> Option<Vec<Result<CommitInfo, CommitError>>> {
        let (ks, rows) = last_writes(commits)?;
        let bytes: usize = rows
            .iter()
            .map(|(k, v)| k.len() + v.map_or(0, <[u8]>::len))
            .sum();
        if bytes > LITERAL_BYTES {
            return None;
        }
        let table = self.table(ks)?;
        let (mut dkp, mut dkr, mut pkp, mut pkr, mut pv) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for (key, value) in &rows {
            let (kp, kr) = layout::split(key);
            if let Some(v) = value {
                pkp.push(kp);
                pkr.push(kr);
                pv.push(*v);
            } else {
                dkp.push(kp);
                dkr.push(kr);
            }
        }
        let immediate = commits
            .iter()
            .any(|c| c.durability == Durability::Immediate);
        let n = i64::try_from(commits.len()).ok()?;
        let call = format!(
            "CALL {}($1, $2, $3, $4, $5, $6, $7, $8, NULL)",
            procedure(table)
        );
        let sent = self.send_tokened(immediate, &commits[0], |pooled, token| {
            self.last_call(pooled, |conn| {
                let stmt = conn.prepare(&call)?;
                let tok = token.as_bytes().as_slice();
                conn.client
                    .query_one(&stmt, &[&dkp, &dkr, &pkp, &pkr, &pv, &tok, &immediate, &n])
            })
            .map(|row| {
                row.try_get::<_, Option<i64>>(0)
                    .ok()
                    .flatten()
                    .and_then(|v| u64::try_from(v).ok())
            })
        });
        Some(match sent {
            // The last version is the group's; each commit took one, in
            // order, up to it.
            Ok(info) => (0..commits.len() as u64)
                .rev()
                .map(|before| {
                    Ok(CommitInfo {
                        version: info.version - before,
                        durable: info.durable,
                    })
                })
                .collect(),
            Err(e) => crate::write::fail_group(e, commits.len()),
        })
    }
}
