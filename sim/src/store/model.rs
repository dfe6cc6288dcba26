//! The store workload's independent model: what each key may hold, from
//! the writes the workload asked for and the outcomes it was told, and a
//! recount of the store's bytes from the raw rows.
//!
//! Nothing here calls the store. The model never reads a value through the
//! code it checks: it applies the workload's own writes, and it parses the
//! engine's rows by the documented formats (the envelope table of
//! `strata-codec`, the chunk manifest, the store's system-row layout), so a
//! mistake made in the same way by the store's writer and reader still
//! shows.
//!
//! # What a key may hold
//!
//! Each key has a set of possible cells *now*, and a wider set it may hold
//! *after a crash*: every cell it may have held since the last durable point
//! (a successful sync, or any acknowledged commit under `Immediate`
//! durability, which makes every earlier commit durable too). An
//! acknowledged commit replaces the cells by the written ones; a commit
//! whose outcome is unknown adds them; a refused or failed one changes
//! nothing. A crash widens *now* to *after a crash*. A read through the
//! store narrows *now* to the cells that explain it (never the crash set:
//! what a read sees may still be lost).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use strata_engine::{Engine, RangeSpec, Snapshot};
use strata_keys::tuple;

/// What a key holds, as the model sees it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Cell {
    Absent,
    Row {
        value: Vec<u8>,
        expires: Option<u64>,
    },
    Counter(i64),
}

/// One write of a transaction, as the workload made it.
#[derive(Debug, Clone)]
pub(super) enum Write {
    Put {
        value: Vec<u8>,
        expires: Option<u64>,
    },
    /// A put keeping the current expiry (compare-and-set does).
    PutKeep(Vec<u8>),
    Delete,
    Add(i64),
}

/// What a read through the store returned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Seen {
    Value(Option<Vec<u8>>),
    Counter(i64),
}

impl fmt::Display for Seen {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Value(None) => f.write_str("absent"),
            Self::Value(Some(v)) => f.write_str(&crate::run::show_bytes(v)),
            Self::Counter(n) => write!(f, "counter {n}"),
        }
    }
}

/// Whether a transaction's writes took effect.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Applied {
    Yes,
    Maybe,
    No,
}

/// More possible cells than this for one key, and the model stops
/// checking it until a write makes it certain again.
const MAX_CELLS: usize = 64;

/// `None`: anything (too many possibilities to track).
type Cells = Option<Vec<Cell>>;

#[derive(Debug, Clone)]
struct Possible {
    now: Cells,
    after_crash: Cells,
}

/// The model: every key the workload wrote, and what it may hold. A key
/// never written is absent.
#[derive(Debug)]
pub(super) struct Model<K: Ord> {
    keys: BTreeMap<K, Possible>,
}

impl<K: Ord> Default for Model<K> {
    fn default() -> Self {
        Self {
            keys: BTreeMap::new(),
        }
    }
}

fn apply(cell: &Cell, write: &Write) -> Cell {
    match write {
        Write::Put { value, expires } => Cell::Row {
            value: value.clone(),
            expires: *expires,
        },
        Write::PutKeep(value) => Cell::Row {
            value: value.clone(),
            expires: match cell {
                Cell::Row { expires, .. } => *expires,
                _ => None,
            },
        },
        Write::Delete => Cell::Absent,
        Write::Add(d) => match cell {
            Cell::Counter(n) => Cell::Counter(n.wrapping_add(*d)),
            _ => Cell::Counter(*d),
        },
    }
}

fn merge(into: &mut Cells, more: &Cells) {
    match (into.as_mut(), more) {
        (Some(cells), Some(more)) => {
            cells.extend(more.iter().cloned());
            cells.sort();
            cells.dedup();
            if cells.len() > MAX_CELLS {
                *into = None;
            }
        }
        _ => *into = None,
    }
}

/// Whether `cell` explains reading `seen` at clock `now`, the latest
/// reading so far being `high` (a value expired at a later reading may
/// have been swept, though the clock has since gone back).
fn explains(cell: &Cell, seen: &Seen, now: u64, high: u64) -> bool {
    match (cell, seen) {
        (Cell::Absent, Seen::Value(None) | Seen::Counter(0)) => true,
        (Cell::Row { value, expires }, Seen::Value(got)) => match (expires, got) {
            (None, Some(got)) => got == value,
            (Some(at), Some(got)) => *at > now && got == value,
            (Some(at), None) => *at <= high,
            (None, None) => false,
        },
        (Cell::Counter(n), Seen::Counter(got)) => n == got,
        _ => false,
    }
}

impl<K: Ord + Clone + fmt::Debug> Model<K> {
    /// Applies one transaction's writes, in order, as `applied` says.
    pub(super) fn commit(&mut self, writes: &[(K, Write)], applied: Applied) {
        if applied == Applied::No {
            return;
        }
        let mut touched: BTreeMap<K, Cells> = BTreeMap::new();
        for (key, write) in writes {
            let cells = touched.entry(key.clone()).or_insert_with(|| {
                self.keys
                    .get(key)
                    .map_or_else(|| Some(vec![Cell::Absent]), |p| p.now.clone())
            });
            *cells = match (cells.take(), write) {
                (Some(cs), w) => Some(cs.iter().map(|c| apply(c, w)).collect()),
                // Unknown before; a put or delete makes it certain.
                (None, w @ (Write::Put { .. } | Write::Delete)) => {
                    Some(vec![apply(&Cell::Absent, w)])
                }
                (None, _) => None,
            };
        }
        for (key, mut written) in touched {
            if let Some(cs) = written.as_mut() {
                cs.sort();
                cs.dedup();
            }
            let p = self.keys.entry(key).or_insert_with(|| Possible {
                now: Some(vec![Cell::Absent]),
                after_crash: Some(vec![Cell::Absent]),
            });
            if applied == Applied::Maybe {
                merge(&mut written, &p.now);
            }
            p.now = written;
            merge(&mut p.after_crash, &p.now.clone());
        }
    }

    /// Everything so far is durable.
    pub(super) fn durable(&mut self) {
        for p in self.keys.values_mut() {
            p.after_crash = p.now.clone();
        }
    }

    /// A crash: each key may hold anything it held since the last durable
    /// point.
    pub(super) fn crash(&mut self) {
        for p in self.keys.values_mut() {
            p.now = p.after_crash.clone();
        }
    }

    /// The keys the model knows.
    pub(super) fn keys(&self) -> Vec<K> {
        self.keys.keys().cloned().collect()
    }

    /// Narrows `key` to the cells that explain reading `seen`; a message
    /// when none does.
    pub(super) fn observe(
        &mut self,
        key: &K,
        seen: &Seen,
        now: u64,
        high: u64,
    ) -> Result<(), String> {
        let Some(p) = self.keys.get_mut(key) else {
            return if explains(&Cell::Absent, seen, now, high) {
                Ok(())
            } else {
                Err(format!("{key:?} was never written but reads as {seen}"))
            };
        };
        let Some(cells) = p.now.as_mut() else {
            return Ok(());
        };
        let before = cells.clone();
        cells.retain(|c| explains(c, seen, now, high));
        if cells.is_empty() {
            cells.clone_from(&before);
            return Err(format!(
                "{key:?} reads as {seen} at {now}; the writes acknowledged allow only {}",
                show_cells(&before)
            ));
        }
        Ok(())
    }
}

fn show_cells(cells: &[Cell]) -> String {
    let shown: Vec<String> = cells
        .iter()
        .take(6)
        .map(|c| match c {
            Cell::Absent => "absent".to_owned(),
            Cell::Row {
                value,
                expires: None,
            } => crate::run::show_bytes(value),
            Cell::Row {
                value,
                expires: Some(at),
            } => format!("{} until {at}", crate::run::show_bytes(value)),
            Cell::Counter(n) => format!("counter {n}"),
        })
        .collect();
    let more = cells.len().saturating_sub(shown.len());
    if more > 0 {
        format!("{} and {more} more", shown.join(", "))
    } else {
        shown.join(", ")
    }
}

/// One data row, parsed by the envelope table.
#[derive(Debug)]
pub(super) struct Parsed {
    pub expires: Option<u64>,
    /// Bytes the row and its chunk rows take (key plus value each).
    pub size: u64,
}

/// The raw rows of the store's two keyspaces, read without the store.
pub(super) struct Raw {
    pub data: BTreeMap<Vec<u8>, Vec<u8>>,
    pub system: BTreeMap<Vec<u8>, Vec<u8>>,
}

impl Raw {
    pub(super) fn read<E: Engine>(e: &E, data: &str, system: &str) -> Result<Self, String> {
        let snap = e
            .snapshot()
            .map_err(|err| format!("a fault-free snapshot failed: {err}"))?;
        let rows = |name: &str| -> Result<BTreeMap<Vec<u8>, Vec<u8>>, String> {
            let ks = e.keyspaces().get(name).map_err(|err| err.to_string())?;
            snap.range(ks, RangeSpec::all())
                .and_then(Iterator::collect)
                .map_err(|err| format!("a fault-free read of {name} failed: {err}"))
        };
        Ok(Self {
            data: rows(data)?,
            system: rows(system)?,
        })
    }
}

/// The envelope's first byte (format 1).
const FORMAT_V1: u8 = 0xE1;
const EXPIRES: u8 = 1;
const CHECKSUM: u8 = 2;
const CHUNKED: u8 = 4;
const KEYLESS: u8 = 8;

/// Header fields of an envelope, by the table in `strata-codec`'s docs.
struct Envelope<'a> {
    expires: Option<u64>,
    chunked: bool,
    body: &'a [u8],
}

fn envelope<'a>(key: &[u8], bytes: &'a [u8]) -> Result<Envelope<'a>, String> {
    let (&[format, _codec, _v0, _v1, flags], rest) = bytes
        .split_first_chunk::<5>()
        .ok_or("shorter than an envelope header")?;
    if format != FORMAT_V1 {
        return Err(format!("format byte {format:#04x}"));
    }
    if flags & !(EXPIRES | CHECKSUM | CHUNKED | KEYLESS) != 0
        || (flags & KEYLESS != 0 && flags & CHECKSUM == 0)
    {
        return Err(format!("unknown flags {flags:#04x}"));
    }
    // The store writes a checksum on every value.
    if flags & CHECKSUM == 0 {
        return Err("no checksum".to_owned());
    }
    let mut rest = rest;
    let mut expires = None;
    if flags & EXPIRES != 0 {
        let (at, r) = rest.split_first_chunk::<8>().ok_or("expiry cut short")?;
        expires = Some(u64::from_be_bytes(*at));
        rest = r;
    }
    if flags & CHECKSUM != 0 {
        let header_len = bytes.len() - rest.len();
        let (sum, body) = rest.split_first_chunk::<4>().ok_or("checksum cut short")?;
        let mut h = crc32fast::Hasher::new();
        if flags & KEYLESS == 0 {
            h.update(key);
        }
        h.update(&bytes[..header_len]);
        h.update(body);
        if h.finalize() != u32::from_be_bytes(*sum) {
            return Err("checksum does not match the key, header and body".to_owned());
        }
        rest = body;
    }
    Ok(Envelope {
        expires,
        chunked: flags & CHUNKED != 0,
        body: rest,
    })
}

/// The system row of chunk `i` of the value at `key`: `("c", key, i)`.
pub(super) fn chunk_key(key: &[u8], i: u32) -> Vec<u8> {
    tuple::pack(&("c", key, i))
}

/// The system row counting quota scope `scope`: `("q", scope)`.
pub(super) fn quota_key(scope: &[u8]) -> Vec<u8> {
    tuple::pack(&("q", scope))
}

/// The expiry index entry of `key` expiring at `at`: `("x", at, key)`.
pub(super) fn expiry_key(at: u64, key: &[u8]) -> Vec<u8> {
    tuple::pack(&("x", at, key))
}

/// Parses data row `key` (not a counter), checking its chunk rows and
/// marking them in `chunks_seen`.
pub(super) fn parse_row(
    raw: &Raw,
    key: &[u8],
    value: &[u8],
    chunks_seen: &mut BTreeSet<Vec<u8>>,
) -> Result<Parsed, String> {
    let env = envelope(key, value)?;
    let mut size = (key.len() + value.len()) as u64;
    if env.chunked {
        let m: &[u8; 20] = env
            .body
            .try_into()
            .map_err(|_| format!("a manifest of {} bytes", env.body.len()))?;
        let total = u64::from_be_bytes(m[..8].try_into().unwrap_or_default());
        let count = u32::from_be_bytes(m[8..12].try_into().unwrap_or_default());
        let chunk_size = u32::from_be_bytes(m[12..16].try_into().unwrap_or_default());
        let crc = u32::from_be_bytes(m[16..].try_into().unwrap_or_default());
        let mut whole = Vec::new();
        for i in 0..count {
            let ck = chunk_key(key, i);
            let chunk = raw
                .system
                .get(&ck)
                .ok_or_else(|| format!("chunk {i} of {count} is missing"))?;
            if i + 1 < count && chunk.len() != chunk_size as usize {
                return Err(format!(
                    "chunk {i} has {} bytes, not {chunk_size}",
                    chunk.len()
                ));
            }
            size += (ck.len() + chunk.len()) as u64;
            whole.extend_from_slice(chunk);
            chunks_seen.insert(ck);
        }
        if whole.len() as u64 != total || crc32fast::hash(&whole) != crc {
            return Err(format!(
                "its {count} chunks hold {} bytes that do not match the manifest ({total} bytes)",
                whole.len()
            ));
        }
        let inner = envelope(key, &whole).map_err(|why| format!("the chunked value: {why}"))?;
        if inner.chunked {
            return Err("the chunked value says it is chunked".to_owned());
        }
        return Ok(Parsed {
            expires: env.expires.or(inner.expires),
            size,
        });
    }
    Ok(Parsed {
        expires: env.expires,
        size,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m() -> Model<u8> {
        Model::default()
    }

    fn put(v: &[u8]) -> Write {
        Write::Put {
            value: v.to_vec(),
            expires: None,
        }
    }

    #[test]
    fn acknowledged_writes_are_certain_and_unknown_ones_are_either() {
        let mut model = m();
        model.commit(&[(1, put(b"a"))], Applied::Yes);
        assert!(model.observe(&1, &Seen::Value(None), 0, 0).is_err());
        assert!(
            model
                .observe(&1, &Seen::Value(Some(b"a".to_vec())), 0, 0)
                .is_ok()
        );
        model.commit(&[(1, put(b"b"))], Applied::Maybe);
        assert!(
            model
                .observe(&1, &Seen::Value(Some(b"c".to_vec())), 0, 0)
                .is_err()
        );
        // Reading "b" settles it: "a" is no longer possible.
        assert!(
            model
                .observe(&1, &Seen::Value(Some(b"b".to_vec())), 0, 0)
                .is_ok()
        );
        assert!(
            model
                .observe(&1, &Seen::Value(Some(b"a".to_vec())), 0, 0)
                .is_err()
        );
        model.commit(&[(1, put(b"x"))], Applied::No);
        assert!(
            model
                .observe(&1, &Seen::Value(Some(b"x".to_vec())), 0, 0)
                .is_err()
        );
    }

    #[test]
    fn a_blind_add_of_unknown_outcome_allows_both_sums() {
        let mut model = m();
        model.commit(&[(2, Write::Add(5))], Applied::Yes);
        model.commit(&[(2, Write::Add(1))], Applied::Maybe);
        assert!(model.observe(&2, &Seen::Counter(7), 0, 0).is_err());
        assert!(model.observe(&2, &Seen::Counter(4), 0, 0).is_err());
        assert!(model.observe(&2, &Seen::Counter(6), 0, 0).is_ok());
    }

    #[test]
    fn a_crash_may_lose_what_is_not_durable_and_nothing_else() {
        let mut model = m();
        model.commit(&[(1, put(b"a"))], Applied::Yes);
        model.durable();
        model.commit(&[(1, put(b"b"))], Applied::Yes);
        model.commit(&[(1, put(b"c"))], Applied::Yes);
        model.crash();
        for v in [b"a", b"b", b"c"] {
            let mut copy = Model {
                keys: model.keys.clone(),
            };
            assert!(
                copy.observe(&1, &Seen::Value(Some(v.to_vec())), 0, 0)
                    .is_ok()
            );
        }
        assert!(model.observe(&1, &Seen::Value(None), 0, 0).is_err());
    }

    #[test]
    fn expiry_hides_a_value_and_a_later_reading_allows_it_swept() {
        let mut model = m();
        let w = Write::Put {
            value: b"t".to_vec(),
            expires: Some(100),
        };
        model.commit(&[(3, w)], Applied::Yes);
        assert!(model.observe(&3, &Seen::Value(None), 50, 99).is_err());
        assert!(
            model
                .observe(&3, &Seen::Value(Some(b"t".to_vec())), 100, 100)
                .is_err()
        );
        assert!(model.observe(&3, &Seen::Value(None), 50, 100).is_ok());
        // compare-and-set keeps the expiry.
        model.commit(&[(3, Write::PutKeep(b"u".to_vec()))], Applied::Yes);
        assert!(
            model
                .observe(&3, &Seen::Value(Some(b"u".to_vec())), 99, 100)
                .is_ok()
        );
        assert!(
            model
                .observe(&3, &Seen::Value(Some(b"u".to_vec())), 100, 100)
                .is_err()
        );
    }

    #[test]
    fn the_envelope_parser_follows_the_documented_table() {
        // format, codec raw, version 1, flags expires|checksum, expiry, crc, body.
        let key = b"k";
        let mut bytes = vec![0xE1, 0, 0, 1, 3];
        bytes.extend_from_slice(&77u64.to_be_bytes());
        let mut h = crc32fast::Hasher::new();
        h.update(key);
        h.update(&bytes);
        h.update(b"body");
        bytes.extend_from_slice(&h.finalize().to_be_bytes());
        bytes.extend_from_slice(b"body");
        let env = envelope(key, &bytes).unwrap();
        assert_eq!(env.expires, Some(77));
        assert_eq!(env.body, b"body");
        assert!(envelope(b"other", &bytes).is_err());
        let mut flipped = bytes.clone();
        flipped[14] ^= 1;
        assert!(envelope(key, &flipped).is_err());
    }
}
