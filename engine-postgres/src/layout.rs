//! How keys and keyspaces are laid out in tables, and the SQL that reads
//! them in byte order.
//!
//! A PostgreSQL B-tree refuses index entries above about 2,700 bytes, so a
//! key cannot be one indexed column. Each key is split in two: `kp`, its
//! first [`INDEXED_PREFIX`] bytes, and `kr`, the rest (empty for shorter
//! keys). `bytea` compares as bytes (memcmp, then length), and comparing
//! `(kp, kr)` pairs lexicographically gives exactly the byte order of the
//! whole keys:
//!
//! - two keys no longer than the prefix have `kr` empty and compare by `kp`;
//! - a key `a` no longer than the prefix against a longer key `b`: `kp` of
//!   `b` is its first `INDEXED_PREFIX` bytes; if `a` is a prefix of `b` it
//!   is a prefix of that too and sorts first, as it should; otherwise the
//!   first differing byte decides both comparisons alike;
//! - two longer keys have `kp` of equal length: `kp` decides, or, when
//!   equal, `kr` does.
//!
//! The primary key is `(kp, kh)` with `kh = sha256(kr)`, a generated
//! column: bounded in size, unique per key. Ranges are ordered by
//! `(kp, kr)`: the index gives `kp` order, and rows that share a whole
//! 2,048-byte prefix (rare) are sorted by `kr` on the fly.

use std::fmt::Write as _;
use std::ops::Bound;

/// Bytes of a key stored in the indexed column `kp`; the rest goes to `kr`.
/// An index entry then holds at most this plus the 32-byte hash and
/// headers, well under PostgreSQL's limit of about 2,700 bytes.
pub const INDEXED_PREFIX: usize = 2_048;

/// The two columns a key is stored in.
pub(crate) fn split(key: &[u8]) -> (&[u8], &[u8]) {
    key.split_at(key.len().min(INDEXED_PREFIX))
}

/// The table of the keyspace with catalogue id `id`: a number, so any
/// keyspace name is safe (names are data in `strata_keyspaces`).
pub(crate) fn table(id: i32) -> String {
    format!("strata_ks_{id}")
}

/// The `CREATE TABLE` of a keyspace table. Queue keyspaces delete most rows
/// they write: autovacuum is told to come sooner.
pub(crate) fn create_table(table: &str, queue: bool) -> String {
    let with = if queue {
        " WITH (autovacuum_vacuum_scale_factor = 0.02, autovacuum_vacuum_threshold = 1000)"
    } else {
        ""
    };
    format!(
        "CREATE TABLE IF NOT EXISTS {table} (\
         kp bytea NOT NULL, \
         kr bytea NOT NULL, \
         kh bytea GENERATED ALWAYS AS (sha256(kr)) STORED, \
         value bytea NOT NULL, \
         PRIMARY KEY (kp, kh)){with}"
    )
}

/// A range condition under construction: SQL text and its parameters (as
/// owned byte strings, bound in order).
#[derive(Debug, Default)]
pub(crate) struct Condition {
    pub sql: String,
    pub params: Vec<Vec<u8>>,
}

impl Condition {
    /// Adds `key <op> bound` (in byte order), where `op` is one of `>=`,
    /// `>`, `<=`, `<`.
    fn compare(&mut self, op: &str, bound: &[u8]) {
        let (bp, br) = split(bound);
        let sep = if self.sql.is_empty() { "" } else { " AND " };
        self.params.push(bp.to_vec());
        let p = self.params.len();
        // A bound no longer than the prefix has an empty rest: `>=` and
        // `<` are then decided by `kp` alone (every `kr` is >= the empty
        // string, none is below it), and the index decides them row by
        // row with no filter.
        if br.is_empty() && matches!(op, ">=" | "<") {
            let _ = write!(self.sql, "{sep}kp {op} ${p}");
            return;
        }
        self.params.push(br.to_vec());
        let r = self.params.len();
        // `kp` first, alone, so the index serves it; ties on `kp` are then
        // decided by `kr`.
        let (wide, strict) = match op {
            ">=" | ">" => (">=", ">"),
            _ => ("<=", "<"),
        };
        let _ = write!(
            self.sql,
            "{sep}kp {wide} ${p} AND (kp {strict} ${p} OR kr {op} ${r})"
        );
    }

    /// Adds the lower bound of a range.
    pub fn lower(&mut self, bound: &Bound<Vec<u8>>) {
        match bound {
            Bound::Included(b) => self.compare(">=", b),
            Bound::Excluded(b) => self.compare(">", b),
            Bound::Unbounded => {}
        }
    }

    /// Adds the upper bound of a range.
    pub fn upper(&mut self, bound: &Bound<Vec<u8>>) {
        match bound {
            Bound::Included(b) => self.compare("<=", b),
            Bound::Excluded(b) => self.compare("<", b),
            Bound::Unbounded => {}
        }
    }

    /// Adds "strictly after the row `(kp, kh)`" in the index order a scan
    /// reads (descending when `reverse`): a row comparison the index
    /// serves directly.
    pub fn after_row(&mut self, kp: &[u8], kh: &[u8], reverse: bool) {
        self.params.push(kp.to_vec());
        let p = self.params.len();
        self.params.push(kh.to_vec());
        let h = self.params.len();
        let op = if reverse { "<" } else { ">" };
        let sep = if self.sql.is_empty() { "" } else { " AND " };
        let _ = write!(self.sql, "{sep}(kp, kh) {op} (${p}, ${h})");
    }

    /// `WHERE ...`, or nothing.
    pub fn where_clause(&self) -> String {
        if self.sql.is_empty() {
            String::new()
        } else {
            format!(" WHERE {}", self.sql)
        }
    }

    /// `WHERE ...` with the parameters written in as literals (for a
    /// simple query, which takes none).
    pub fn where_inline(&self) -> String {
        let mut sql = self.where_clause();
        // From the highest number down, so `$1` never eats `$12`'s start.
        for (i, p) in self.params.iter().enumerate().rev() {
            sql = sql.replace(&format!("${}", i + 1), &literal(p));
        }
        sql
    }
}

/// `bytes` as a SQL `bytea` literal: an escape string (its meaning does not
/// depend on `standard_conforming_strings`) in hex.
pub(crate) fn literal(bytes: &[u8]) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2 + 14);
    out.push_str("E'\\\\x");
    for b in bytes {
        out.push(char::from(HEX[usize::from(b >> 4)]));
        out.push(char::from(HEX[usize::from(b & 0xF)]));
    }
    out.push_str("'::bytea");
    out
}

/// The bytes of a `bytea` in PostgreSQL's hex output (`\x4142`), `None`
/// for anything else.
pub(crate) fn parse_hex(text: &str) -> Option<Vec<u8>> {
    let hex = text.strip_prefix("\\x")?.as_bytes();
    if hex.len() % 2 != 0 {
        return None;
    }
    let digit = |c: u8| match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    };
    hex.chunks_exact(2)
        .map(|p| Some(digit(p[0])? << 4 | digit(p[1])?))
        .collect()
}

/// A scan of `table` within `cond` in the primary key's order `(kp, kh)`
/// (descending when `reverse`), `limit` rows at most (the limit is the next
/// parameter). That is byte order except among rows sharing all of `kp`,
/// which come in hash order; the reader puts those in order (see
/// `read.rs`). Ordering by `kr` in SQL would put a sort over every row.
pub(crate) fn scan(table: &str, cond: &Condition, reverse: bool) -> String {
    let dir = if reverse { " DESC" } else { "" };
    format!(
        "SELECT kp, kr, value FROM {table}{} ORDER BY kp{dir}, kh{dir} LIMIT ${}",
        cond.where_clause(),
        cond.params.len() + 1
    )
}

/// The key a row's two columns hold.
pub(crate) fn join(kp: &[u8], kr: &[u8]) -> Vec<u8> {
    let mut key = Vec::with_capacity(kp.len() + kr.len());
    key.extend_from_slice(kp);
    key.extend_from_slice(kr);
    key
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_keeps_the_prefix_indexed_and_the_rest_apart() {
        assert_eq!(split(b""), (&b""[..], &b""[..]));
        let long = vec![7u8; INDEXED_PREFIX + 3];
        let (p, r) = split(&long);
        assert_eq!((p.len(), r.len()), (2_048, 3));
        let exact = vec![1u8; INDEXED_PREFIX];
        assert_eq!(split(&exact).1.len(), 0);
        assert_eq!(join(p, r), long);
    }

    /// The pair order is the byte order, on keys around the split point
    /// (compared as PostgreSQL compares `bytea`: as byte strings).
    #[test]
    fn pair_order_is_byte_order() {
        let n = INDEXED_PREFIX;
        let base = |len: usize, last: u8| {
            let mut k = vec![0x61; len];
            if let Some(b) = k.last_mut() {
                *b = last;
            }
            k
        };
        let keys = [
            vec![],
            base(1, 0),
            base(n - 1, 0x61),
            base(n - 1, 0xFF),
            base(n, 0x00),
            base(n, 0x61),
            base(n + 1, 0x00),
            base(n + 1, 0x61),
            base(n + 5, 0xFF),
            base(2 * n + 1, 0x62),
            vec![0x62],
            vec![0xFF; n + 1],
        ];
        for a in &keys {
            for b in &keys {
                let (pa, pb) = (split(a), split(b));
                assert_eq!(pa.cmp(&pb), a.cmp(b), "{} vs {} bytes", a.len(), b.len());
            }
        }
    }

    #[test]
    fn literals_are_hex_escape_strings_and_parse_back() {
        assert_eq!(literal(&[]), "E'\\\\x'::bytea");
        assert_eq!(literal(&[0x00, 0xAB, 0x7F]), "E'\\\\x00ab7f'::bytea");
        assert_eq!(parse_hex("\\x00ab7F"), Some(vec![0x00, 0xAB, 0x7F]));
        assert_eq!(parse_hex("\\x"), Some(vec![]));
        assert_eq!(parse_hex("\\x0"), None);
        assert_eq!(parse_hex("\\xzz"), None);
        assert_eq!(parse_hex("ab"), None);
        let mut c = Condition::default();
        for i in 0..6u8 {
            c.lower(&Bound::Excluded(vec![i]));
        }
        let inline = c.where_inline();
        assert!(!inline.contains('$'), "{inline}");
        assert!(inline.contains("kr > E'\\\\x'::bytea"), "{inline}");
        assert!(inline.contains("kp >= E'\\\\x05'::bytea"), "{inline}");
    }

    #[test]
    fn conditions_bind_each_bound_once_in_order() {
        let mut c = Condition::default();
        c.lower(&Bound::Excluded(b"a".to_vec()));
        c.upper(&Bound::Included(b"b".to_vec()));
        assert_eq!(
            c.sql,
            "kp >= $1 AND (kp > $1 OR kr > $2) AND kp <= $3 AND (kp < $3 OR kr <= $4)"
        );
        assert_eq!(c.params, [b"a".to_vec(), vec![], b"b".to_vec(), vec![]]);
        c.after_row(b"k", b"h", true);
        assert_eq!(
            scan("t", &c, true),
            "SELECT kp, kr, value FROM t WHERE kp >= $1 AND (kp > $1 OR kr > $2) AND kp <= $3 AND (kp < $3 OR kr <= $4) AND (kp, kh) < ($5, $6) ORDER BY kp DESC, kh DESC LIMIT $7"
        );
        // Short bounds of `>=` and `<` need no rest.
        let mut short = Condition::default();
        short.lower(&Bound::Included(b"a".to_vec()));
        short.upper(&Bound::Excluded(b"b".to_vec()));
        assert_eq!(short.sql, "kp >= $1 AND kp < $2");
        let long = vec![7u8; INDEXED_PREFIX + 1];
        let mut c = Condition::default();
        c.lower(&Bound::Included(long.clone()));
        assert_eq!(c.sql, "kp >= $1 AND (kp > $1 OR kr >= $2)");
        assert_eq!(c.params, [long[..INDEXED_PREFIX].to_vec(), vec![7]]);
        let none = Condition::default();
        assert_eq!(
            scan("t", &none, false),
            "SELECT kp, kr, value FROM t ORDER BY kp, kh LIMIT $1"
        );
    }
}
