//! The reads a commit makes: asked for with its first statement
//! ([`Prefetch`]), or inside its transaction ([`TxReads`]).

use std::collections::HashMap;

use postgres::SimpleQueryMessage;
use postgres::types::ToSql;
use strata_engine::implement::Reads;
use strata_engine::{CommitError, Keyspace, RangeSpec};

use crate::layout::{self, Condition};
use crate::pool::Conn;
use crate::write::backend;
use crate::{PostgresEngine, ServerError, boxed};

/// The reads of a single commit, asked for in its first round trip: each
/// statement's one row is tagged `p<i>` (a point read, the value) or
/// `r<i>` (whether a range holds a key).
#[derive(Default)]
pub(crate) struct Prefetch {
    pub(crate) sql: String,
    pub(crate) points: Vec<(Keyspace, Vec<u8>)>,
    pub(crate) ranges: Vec<(Keyspace, RangeSpec)>,
}

impl Prefetch {
    /// The answers found in `answer`; a read whose row is missing is an
    /// absent key.
    pub(crate) fn answers(&self, answer: &[SimpleQueryMessage]) -> Prefetched<'_> {
        let mut points: HashMap<(Keyspace, &[u8]), Option<Vec<u8>>> = self
            .points
            .iter()
            .map(|(ks, k)| ((*ks, k.as_slice()), None))
            .collect();
        let mut ranges: HashMap<(Keyspace, &RangeSpec), bool> = HashMap::new();
        let mut valid = true;
        for m in answer {
            let SimpleQueryMessage::Row(row) = m else {
                continue;
            };
            // The version row of `BEGIN` has one column; tagged rows two.
            if row.len() < 2 {
                continue;
            }
            let (Some(tag), value) = (row.get(0), row.get(1)) else {
                continue;
            };
            let index = |t: &str| t[1..].parse::<usize>().ok();
            if tag.starts_with('p') {
                let found = value.and_then(layout::parse_hex);
                valid &= value.is_none() || found.is_some();
                if let Some((ks, k)) = index(tag).and_then(|i| self.points.get(i)) {
                    points.insert((*ks, k.as_slice()), found);
                }
            } else if tag.starts_with('r')
                && let Some((ks, r)) = index(tag).and_then(|i| self.ranges.get(i))
            {
                ranges.insert((*ks, r), value == Some("true"));
            }
        }
        Prefetched {
            points,
            ranges,
            valid,
        }
    }
}

/// The answers of a [`Prefetch`].
pub(crate) struct Prefetched<'p> {
    pub(crate) points: HashMap<(Keyspace, &'p [u8]), Option<Vec<u8>>>,
    pub(crate) ranges: HashMap<(Keyspace, &'p RangeSpec), bool>,
    /// False when a value came back in a form not understood: every read
    /// then goes to the transaction.
    pub(crate) valid: bool,
}

/// [`Reads`] answered from [`Prefetched`], asking the transaction for
/// anything it does not hold.
pub(crate) struct Answered<'a, 'p> {
    pub(crate) prefetched: &'a Prefetched<'p>,
    pub(crate) tx: TxReads<'a>,
}

impl Reads for Answered<'_, '_> {
    fn get(&mut self, ks: Keyspace, key: &[u8]) -> Result<Option<Vec<u8>>, CommitError> {
        if self.prefetched.valid
            && let Some(v) = self.prefetched.points.get(&(ks, key))
        {
            return Ok(v.clone());
        }
        self.tx.get(ks, key)
    }

    fn any_in(&mut self, ks: Keyspace, range: &RangeSpec) -> Result<bool, CommitError> {
        if let Some(found) = self.prefetched.ranges.get(&(ks, range)) {
            return Ok(*found);
        }
        self.tx.any_in(ks, range)
    }
}

/// Reads of the latest state inside the commit's transaction. Under the
/// version row's lock, each statement (`READ COMMITTED`) sees every commit
/// before this one, and this transaction's own earlier writes.
pub(crate) struct TxReads<'a> {
    pub(crate) engine: &'a PostgresEngine,
    pub(crate) conn: &'a mut Conn,
}

impl TxReads<'_> {
    pub(crate) fn table(&self, ks: Keyspace) -> Result<&str, CommitError> {
        self.engine
            .table(ks)
            .ok_or(CommitError::UnknownKeyspace(ks))
    }
}

impl Reads for TxReads<'_> {
    fn get(&mut self, ks: Keyspace, key: &[u8]) -> Result<Option<Vec<u8>>, CommitError> {
        let table = self.table(ks)?;
        let (kp, kr) = layout::split(key);
        let stmt = self
            .conn
            .prepare(&format!(
                "SELECT value FROM {table} WHERE kp = $1 AND kh = sha256($2)"
            ))
            .map_err(backend)?;
        let row = self
            .conn
            .client
            .query_opt(&stmt, &[&kp, &kr])
            .map_err(backend)?;
        Ok(row.map(|r| r.get(0)))
    }

    /// One query per keyspace asked.
    fn get_many(
        &mut self,
        keys: &[(Keyspace, &[u8])],
    ) -> Result<Vec<Option<Vec<u8>>>, CommitError> {
        if let [(ks, key)] = keys {
            return Ok(vec![self.get(*ks, key)?]);
        }
        let mut out = vec![None; keys.len()];
        let mut spaces: Vec<Keyspace> = keys.iter().map(|(ks, _)| *ks).collect();
        spaces.sort_unstable();
        spaces.dedup();
        for ks in spaces {
            let table = self.table(ks)?.to_owned();
            let (mut kps, mut krs, mut at) = (Vec::new(), Vec::new(), Vec::new());
            for (i, (k, key)) in keys.iter().enumerate() {
                if *k == ks {
                    let (kp, kr) = layout::split(key);
                    kps.push(kp);
                    krs.push(kr);
                    at.push(i);
                }
            }
            let stmt = self
                .conn
                .prepare(&format!(
                    "SELECT q.i, t.value FROM unnest($1::bytea[], $2::bytea[]) WITH ORDINALITY AS q(kp, kr, i) \
                     JOIN {table} t ON t.kp = q.kp AND t.kh = sha256(q.kr)"
                ))
                .map_err(backend)?;
            for row in self
                .conn
                .client
                .query(&stmt, &[&kps, &krs])
                .map_err(backend)?
            {
                let i: i64 = row.get(0);
                let slot = usize::try_from(i - 1)
                    .ok()
                    .and_then(|j| at.get(j))
                    .ok_or_else(|| {
                        CommitError::Backend(boxed(ServerError::Unexpected(
                            "a row number out of range",
                        )))
                    })?;
                out[*slot] = Some(row.get(1));
            }
        }
        Ok(out)
    }

    fn any_in(&mut self, ks: Keyspace, range: &RangeSpec) -> Result<bool, CommitError> {
        let table = self.table(ks)?;
        let mut cond = Condition::default();
        cond.lower(&range.start);
        cond.upper(&range.end);
        let stmt = self
            .conn
            .prepare(&format!(
                "SELECT 1 FROM {table}{} LIMIT 1",
                cond.where_clause()
            ))
            .map_err(backend)?;
        let params: Vec<&(dyn ToSql + Sync)> = cond
            .params
            .iter()
            .map(|p| p as &(dyn ToSql + Sync))
            .collect();
        let rows = self.conn.client.query(&stmt, &params).map_err(backend)?;
        Ok(!rows.is_empty())
    }
}
