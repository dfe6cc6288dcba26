//! The statements that write a commit's rows: runs of puts and deletes,
//! each statement within PostgreSQL's message bounds.

use std::collections::HashMap;

use postgres::types::ToSql;
use strata_engine::implement::Op;
use strata_engine::{CommitError, RangeSpec};

use crate::layout::{self, Condition};
use crate::pool::Conn;
use crate::write::backend;

/// Most rows in one statement of a multi-row put or delete, and most bytes
/// of keys and values: each statement is one protocol message, which
/// PostgreSQL caps at 1 GB.
const ROWS_PER_STATEMENT: usize = 1_000;
const BYTES_PER_STATEMENT: usize = 64 << 20;

/// How many ops from the start satisfy `same`.
pub(crate) fn run_len(ops: &[Op], same: impl Fn(&Op) -> bool) -> usize {
    ops.iter().take_while(|op| same(op)).count().max(1)
}

/// Consecutive chunks of `rows` within the per-statement bounds.
pub(crate) fn chunks<T>(rows: &[T], size: impl Fn(&T) -> usize) -> Vec<&[T]> {
    let mut out = Vec::new();
    let (mut start, mut bytes) = (0, 0);
    for (i, row) in rows.iter().enumerate() {
        let s = size(row);
        if i > start && (i - start >= ROWS_PER_STATEMENT || bytes + s > BYTES_PER_STATEMENT) {
            out.push(&rows[start..i]);
            start = i;
            bytes = 0;
        }
        bytes += s;
    }
    if start < rows.len() {
        out.push(&rows[start..]);
    }
    out
}

/// The keys and values of a run of puts, a key written twice keeping its
/// last value (one statement may not touch a row twice).
pub(crate) fn last_puts(ops: &[Op]) -> Vec<(&[u8], &[u8])> {
    let mut last: HashMap<&[u8], usize> = HashMap::with_capacity(ops.len());
    let mut rows: Vec<(&[u8], &[u8])> = Vec::with_capacity(ops.len());
    for op in ops {
        if let Op::Put(_, key, value) = op {
            if let Some(&at) = last.get(key.as_slice()) {
                rows[at].1 = value;
            } else {
                last.insert(key, rows.len());
                rows.push((key, value));
            }
        }
    }
    rows
}

/// The bytes of keys and values `ops` write or name.
pub(crate) fn op_bytes(ops: &[Op]) -> usize {
    ops.iter()
        .map(|op| match op {
            Op::Put(_, k, v) => k.len() + v.len(),
            Op::Delete(_, k) => k.len(),
            Op::DeleteRange(_, r) => {
                let len = |b: &std::ops::Bound<Vec<u8>>| match b {
                    std::ops::Bound::Included(k) | std::ops::Bound::Excluded(k) => k.len(),
                    std::ops::Bound::Unbounded => 0,
                };
                len(&r.start) + len(&r.end)
            }
        })
        .sum()
}

/// Upserts a run of puts to one table.
pub(crate) fn put_rows(conn: &mut Conn, table: &str, ops: &[Op]) -> Result<(), CommitError> {
    let rows = last_puts(ops);
    if let [(key, value)] = rows[..] {
        let (kp, kr) = layout::split(key);
        let stmt = conn
            .prepare(&format!(
                "INSERT INTO {table} (kp, kr, value) VALUES ($1, $2, $3) \
                 ON CONFLICT (kp, kh) DO UPDATE SET value = EXCLUDED.value"
            ))
            .map_err(backend)?;
        conn.client
            .execute(&stmt, &[&kp, &kr, &value])
            .map_err(backend)?;
        return Ok(());
    }
    let stmt = conn
        .prepare(&format!(
            "INSERT INTO {table} (kp, kr, value) \
             SELECT * FROM unnest($1::bytea[], $2::bytea[], $3::bytea[]) \
             ON CONFLICT (kp, kh) DO UPDATE SET value = EXCLUDED.value"
        ))
        .map_err(backend)?;
    for chunk in chunks(&rows, |(k, v)| k.len() + v.len()) {
        let (mut kps, mut krs, mut values) = (Vec::new(), Vec::new(), Vec::new());
        for (key, value) in chunk {
            let (kp, kr) = layout::split(key);
            kps.push(kp);
            krs.push(kr);
            values.push(*value);
        }
        conn.client
            .execute(&stmt, &[&kps, &krs, &values])
            .map_err(backend)?;
    }
    Ok(())
}

/// Deletes a run of keys from one table.
pub(crate) fn delete_rows(conn: &mut Conn, table: &str, ops: &[Op]) -> Result<(), CommitError> {
    let keys: Vec<&[u8]> = ops
        .iter()
        .filter_map(|op| match op {
            Op::Delete(_, key) => Some(key.as_slice()),
            _ => None,
        })
        .collect();
    if let [key] = keys[..] {
        let (kp, kr) = layout::split(key);
        let stmt = conn
            .prepare(&format!(
                "DELETE FROM {table} WHERE kp = $1 AND kh = sha256($2)"
            ))
            .map_err(backend)?;
        conn.client.execute(&stmt, &[&kp, &kr]).map_err(backend)?;
        return Ok(());
    }
    let stmt = conn
        .prepare(&format!(
            "DELETE FROM {table} t USING unnest($1::bytea[], $2::bytea[]) AS d(kp, kr) \
             WHERE t.kp = d.kp AND t.kh = sha256(d.kr)"
        ))
        .map_err(backend)?;
    for chunk in chunks(&keys, |k| k.len()) {
        let (kps, krs): (Vec<&[u8]>, Vec<&[u8]>) = chunk.iter().map(|k| layout::split(k)).unzip();
        conn.client.execute(&stmt, &[&kps, &krs]).map_err(backend)?;
    }
    Ok(())
}

pub(crate) fn delete_range(
    conn: &mut Conn,
    table: &str,
    range: &RangeSpec,
) -> Result<(), CommitError> {
    let mut bounds = Condition::default();
    bounds.lower(&range.start);
    bounds.upper(&range.end);
    let stmt = conn
        .prepare(&format!("DELETE FROM {table}{}", bounds.where_clause()))
        .map_err(backend)?;
    let params: Vec<&(dyn ToSql + Sync)> = bounds
        .params
        .iter()
        .map(|p| p as &(dyn ToSql + Sync))
        .collect();
    conn.client.execute(&stmt, &params).map_err(backend)?;
    Ok(())
}
