//! Snapshots: read-only `REPEATABLE READ` transactions, and ranges that
//! stream from them in batches.

use std::collections::VecDeque;
use std::sync::{Mutex, PoisonError};

use postgres::SimpleQueryMessage;
use postgres::types::ToSql;
use sha2::Digest as _;
use strata_engine::{Keyspace, RangeSpec, ReadError, Snapshot};

use crate::layout::{self, Condition};
use crate::pool::Pooled;
use crate::{PostgresEngine, ServerError, boxed, is_connection_error};

/// Rows the first query of a range reads; each next one reads twice as
/// many, up to [`PostgresOptions::range_batch`](crate::PostgresOptions).
const FIRST_BATCH: usize = 64;

/// The first value of the first row of a simple query's answer.
pub(crate) fn first_value(messages: &[SimpleQueryMessage]) -> Option<&str> {
    messages.iter().find_map(|m| match m {
        SimpleQueryMessage::Row(row) => row.get(0),
        _ => None,
    })
}

/// A consistent view: one read-only `REPEATABLE READ` transaction on one
/// pooled connection, held until the snapshot is dropped. While it lives,
/// the server keeps every row version it may read (vacuum cannot remove
/// them): keep snapshots short.
pub struct PostgresSnapshot<'e> {
    engine: &'e PostgresEngine,
    conn: Mutex<Option<Pooled<'e>>>,
    version: u64,
}

impl std::fmt::Debug for PostgresSnapshot<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresSnapshot")
            .field("version", &self.version)
            .finish_non_exhaustive()
    }
}

const BEGIN: &str = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY; \
                     SELECT value FROM strata_meta WHERE id = 1";

fn begin_on(pooled: &mut Pooled<'_>) -> Result<u64, postgres::Error> {
    let answer = pooled.conn().client.simple_query(BEGIN)?;
    Ok(first_value(&answer)
        .and_then(|v| v.parse().ok())
        .unwrap_or(0))
}

impl<'e> PostgresSnapshot<'e> {
    pub(crate) fn begin(engine: &'e PostgresEngine) -> Result<Self, ReadError> {
        let (pooled, version) = engine.first_message(begin_on).map_err(ReadError::Backend)?;
        engine.seen(version);
        Ok(Self {
            engine,
            conn: Mutex::new(Some(pooled)),
            version,
        })
    }

    /// Runs `f` on the snapshot's connection.
    fn with<T>(
        &self,
        f: impl FnOnce(&mut crate::pool::Conn) -> Result<T, postgres::Error>,
    ) -> Result<T, ReadError> {
        let mut guard = self.conn.lock().unwrap_or_else(PoisonError::into_inner);
        let pooled = guard.as_mut().ok_or_else(|| {
            ReadError::Backend(boxed(ServerError::Unexpected(
                "the snapshot's connection was lost",
            )))
        })?;
        match f(pooled.conn()) {
            Ok(v) => Ok(v),
            Err(e) => {
                if is_connection_error(&e) {
                    // The transaction is gone with its connection.
                    if let Some(p) = guard.take() {
                        p.discard();
                    }
                }
                Err(ReadError::Backend(boxed(e)))
            }
        }
    }

    fn table(&self, ks: Keyspace) -> Result<&'e str, ReadError> {
        self.engine.table(ks).ok_or(ReadError::UnknownKeyspace(ks))
    }
}

impl Drop for PostgresSnapshot<'_> {
    fn drop(&mut self) {
        let slot = self.conn.get_mut().unwrap_or_else(PoisonError::into_inner);
        if let Some(mut pooled) = slot.take() {
            // Ends the transaction; a connection that cannot is not reused.
            if pooled.conn().client.batch_execute("ROLLBACK").is_err() {
                pooled.discard();
            }
        }
    }
}

/// The value of the row `(kp, kr)` of `table`, by one prepared statement
/// on `conn` (in its transaction, if one is open).
pub(crate) fn point_get(
    conn: &mut crate::pool::Conn,
    table: &str,
    kp: &[u8],
    kr: &[u8],
) -> Result<Option<Vec<u8>>, postgres::Error> {
    let stmt = conn.prepare(&format!(
        "SELECT value FROM {table} WHERE kp = $1 AND kh = sha256($2)"
    ))?;
    let row = conn.client.query_opt(&stmt, &[&kp, &kr])?;
    Ok(row.map(|r| r.get::<_, Vec<u8>>(0)))
}

impl<'e> Snapshot for PostgresSnapshot<'e> {
    type Range<'s>
        = PostgresRange<'s, 'e>
    where
        Self: 's;

    type Cursor<'s>
        = strata_engine::Lent<Self::Range<'s>>
    where
        Self: 's;

    fn version(&self) -> Result<u64, ReadError> {
        Ok(self.version)
    }

    fn get(&self, ks: Keyspace, key: &[u8]) -> Result<Option<Vec<u8>>, ReadError> {
        let table = self.table(ks)?;
        let (kp, kr) = layout::split(key);
        self.with(|conn| point_get(conn, table, kp, kr))
    }

    fn range(&self, ks: Keyspace, range: RangeSpec) -> Result<PostgresRange<'_, 'e>, ReadError> {
        let table = self.table(ks)?;
        range.validate()?;
        Ok(PostgresRange {
            snapshot: self,
            table,
            remaining: range.limit.unwrap_or(usize::MAX),
            ready: VecDeque::new(),
            held: Vec::new(),
            // A limited range that fits one batch is one query (one row
            // more than the limit shows that the last group is whole);
            // others start small, for callers that stop early.
            batch: range.limit.map_or(FIRST_BATCH, |n| {
                n.saturating_add(1)
                    .clamp(1, self.engine.options.range_batch.max(1))
            }),
            cursor: None,
            done: false,
            range,
        })
    }

    fn cursor(&self, ks: Keyspace, range: RangeSpec) -> Result<Self::Cursor<'_>, ReadError> {
        self.range(ks, range).map(strata_engine::Lent::new)
    }
}

/// A streaming range: keyset-paginated queries in the snapshot's
/// transaction, in the primary key's order `(kp, kh)`, each starting after
/// the last row read.
///
/// That order is byte order except among rows that share all of `kp` (keys
/// longer than the indexed prefix, equal over all of it), which come in
/// hash order. So the rows of the last `kp` seen are held back until a row
/// with another `kp` (or the end) shows the group is whole, then put in
/// `kr` order. Ranges over keys shorter than the prefix hold back one row;
/// a group of many long keys sharing the prefix is held whole in memory.
pub struct PostgresRange<'s, 'e> {
    snapshot: &'s PostgresSnapshot<'e>,
    table: &'e str,
    range: RangeSpec,
    remaining: usize,
    /// `(kp, kh)` of the last row read.
    cursor: Option<(Vec<u8>, Vec<u8>)>,
    /// Rows in order, ready to be yielded.
    ready: VecDeque<(Vec<u8>, Vec<u8>)>,
    /// The rows of the last `kp` read: `(kp, kr, value)`.
    held: Vec<(Vec<u8>, Vec<u8>, Vec<u8>)>,
    batch: usize,
    done: bool,
}

impl std::fmt::Debug for PostgresRange<'_, '_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresRange")
            .field("range", &self.range)
            .field("remaining", &self.remaining)
            .finish_non_exhaustive()
    }
}

impl PostgresRange<'_, '_> {
    /// Moves the held group, in key order, to the ready rows.
    fn release(&mut self) {
        let mut group = std::mem::take(&mut self.held);
        if group.len() > 1 {
            group.sort_unstable_by(|a, b| a.1.cmp(&b.1));
            if self.range.reverse {
                group.reverse();
            }
        }
        for (kp, kr, value) in group {
            let key = if kr.is_empty() {
                kp
            } else {
                layout::join(&kp, &kr)
            };
            self.ready.push_back((key, value));
        }
    }

    /// Reads the next batch.
    fn fetch(&mut self) -> Result<(), ReadError> {
        let want = self.batch.min(self.remaining.saturating_add(1)).max(1);
        let mut cond = Condition::default();
        cond.lower(&self.range.start);
        cond.upper(&self.range.end);
        if let Some((kp, kh)) = &self.cursor {
            cond.after_row(kp, kh, self.range.reverse);
        }
        let sql = layout::scan(self.table, &cond, self.range.reverse);
        let limit = i64::try_from(want).unwrap_or(i64::MAX);
        let rows = self.snapshot.with(|conn| {
            let stmt = conn.prepare(&sql)?;
            let mut params: Vec<&(dyn ToSql + Sync)> = cond
                .params
                .iter()
                .map(|p| p as &(dyn ToSql + Sync))
                .collect();
            params.push(&limit);
            conn.client.query(&stmt, &params)
        })?;
        let whole = rows.len() < want;
        let last = rows.len().checked_sub(1);
        for (i, row) in rows.into_iter().enumerate() {
            let kp: Vec<u8> = row.get(0);
            if self.held.first().is_some_and(|(held, ..)| *held != kp) {
                self.release();
            }
            let kr: &[u8] = row.get(1);
            if Some(i) == last {
                // The row's `kh`, computed here rather than sent for every
                // row.
                let kh = sha2::Sha256::digest(kr).to_vec();
                self.cursor = Some((kp.clone(), kh));
            }
            if alone_in_group(&kp, kr) {
                // Ready as it is (anything held has another `kp`, released
                // above).
                self.ready.push_back((kp, row.get(2)));
            } else {
                self.held.push((kp, kr.to_vec(), row.get(2)));
            }
        }
        if whole {
            self.release();
            self.done = true;
        }
        self.batch = (self.batch * 2).min(self.snapshot.engine.options.range_batch.max(1));
        Ok(())
    }
}

/// Whether the row `(kp, kr)` is a group of one: a key shorter than the
/// indexed prefix is its `kp` whole (its `kr` empty), and no other key has
/// that `kp`. A key of the prefix's length or longer may share its `kp`
/// with others, which then come in hash order.
fn alone_in_group(kp: &[u8], kr: &[u8]) -> bool {
    kr.is_empty() && kp.len() < layout::INDEXED_PREFIX
}

impl Iterator for PostgresRange<'_, '_> {
    type Item = Result<(Vec<u8>, Vec<u8>), ReadError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.remaining == 0 {
            return None;
        }
        while self.ready.is_empty() {
            if self.done {
                return None;
            }
            if let Err(e) = self.fetch() {
                // A failed read ends the range.
                self.done = true;
                self.remaining = 0;
                return Some(Err(e));
            }
        }
        let row = self.ready.pop_front()?;
        self.remaining -= 1;
        Some(Ok(row))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_key_shorter_than_the_indexed_prefix_is_alone_in_its_group() {
        let p = layout::INDEXED_PREFIX;
        assert!(alone_in_group(b"user/1", b""));
        assert!(alone_in_group(&vec![7; p - 1], b""));
        // As long as the prefix: a longer key may share its `kp`.
        assert!(!alone_in_group(&vec![7; p], b""));
        assert!(!alone_in_group(&vec![7; p], b"x"));
        // A short `kp` with a rest is no row the engine writes: held, as
        // any group, rather than read as its `kp` alone.
        assert!(!alone_in_group(b"user/1", b"x"));
    }
}
