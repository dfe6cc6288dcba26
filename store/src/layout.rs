//! Where the store keeps its own rows, in the system keyspace.
//!
//! Every system row is a FoundationDB tuple whose first element is a
//! one-letter string tag, so the three kinds never share a prefix:
//!
//! | row | key | value |
//! |---|---|---|
//! | chunk `i` of the value at data key `k` | `("c", k, i)` | the chunk's bytes |
//! | usage counter of quota scope `s` | `("q", s)` | `i64`, 8 bytes little-endian (an engine counter) |
//! | expiry index entry | `("x", expires_at_ms, k)` | empty |
//!
//! The metadata row of a chunked value is the data row itself (its
//! envelope is the chunk manifest), so a scan of the data keyspace sees one
//! row per logical value, whatever its size.
//!
//! A data row is one of two kinds, told apart by its length: a counter
//! (`Tx::add`, `Tx::increment`) is an engine counter of exactly 8 bytes,
//! and every envelope the store writes is longer (a 5-byte header and a
//! 4-byte checksum at least). See [`counter_row`].

use strata_codec::ChunkLayout;
use strata_keys::{KeyRange, tuple};

/// The length of an engine counter row.
const COUNTER_LEN: usize = 8;

// Every envelope the store writes carries a checksum, so none is as short
// as a counter: the length alone tells the two kinds of data row apart.
const _: () = assert!(strata_codec::envelope::header_len(false, true) > COUNTER_LEN);

/// The value type of a counter key: a key type declared `K -> Counter` (an
/// `i64`) is a counter kind. Its rows are written only by
/// [`Tx::add`](crate::Tx::add) and [`Tx::increment`](crate::Tx::increment),
/// added to by the engine at commit without a read (concurrent adds do not
/// conflict), read by `counter` on the store, a transaction or a
/// [`ReadView`](crate::ReadView) (one snapshot with the rows they count),
/// deleted by [`Tx::delete`](crate::Tx::delete), shown as numbers by
/// `strata get`/`scan`, and checked by `Store::verify` as counters. They
/// have no envelope (see [`counter_row`]), so `Tx::put` and `get` do not
/// take them.
///
/// ```
/// use strata_keys::tuple_key;
/// use strata_store::Counter;
///
/// #[derive(Debug, Clone, PartialEq)]
/// struct Orders { customer: u64 }
/// tuple_key! { Orders -> Counter = ("orders", {customer}); }
/// ```
pub type Counter = i64;

/// The value of a data row if it is a counter (written by `Tx::add` or
/// `Tx::increment`), `None` if it is an envelope.
///
/// Counter rows are engine counters (8 bytes, little-endian two's
/// complement), which the engine adds to at commit without reading them
/// into the store, so they carry no envelope and no checksum of the
/// store's: the engine's own checksums cover them (`Integrity`). The store
/// writes every envelope with a checksum, 9 bytes or more, so a data row of
/// exactly 8 bytes is a counter and nothing else.
///
/// ```
/// assert_eq!(strata_store::counter_row(&(-3i64).to_le_bytes()), Some(-3));
/// assert_eq!(strata_store::counter_row(&[0xE1; 9]), None);
/// ```
#[must_use]
pub fn counter_row(value: &[u8]) -> Option<i64> {
    <[u8; COUNTER_LEN]>::try_from(value)
        .ok()
        .map(i64::from_le_bytes)
}

const CHUNK: &str = "c";
const QUOTA: &str = "q";
const EXPIRY: &str = "x";

/// The chunk layout of the store: metadata at the data key, chunks in the
/// system keyspace.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct SystemChunks;

impl ChunkLayout for SystemChunks {
    fn meta_key(&self, key: &[u8], out: &mut Vec<u8>) {
        out.extend_from_slice(key);
    }

    fn chunk_key(&self, key: &[u8], index: u32, out: &mut Vec<u8>) {
        tuple::pack_into(&(CHUNK, key, index), out);
    }

    fn chunk_index(&self, key: &[u8], row_key: &[u8]) -> Option<u32> {
        let rest = row_key.strip_prefix(tuple::pack(&(CHUNK, key)).as_slice())?;
        tuple::unpack::<(u32,)>(rest).ok().map(|(i,)| i)
    }

    fn chunks_from(&self, key: &[u8], from: u32) -> KeyRange {
        let mut start = Vec::new();
        self.chunk_key(key, from, &mut start);
        let mut end = tuple::pack(&(CHUNK, key));
        end.push(0xFF);
        KeyRange {
            start,
            end: Some(end),
        }
    }
}

/// Every chunk row.
pub(crate) fn chunk_rows_range() -> KeyRange {
    KeyRange::tuple_prefix(&tuple::pack(&(CHUNK,)))
}

/// The data key a chunk row belongs to.
pub(crate) fn chunk_owner(row_key: &[u8]) -> Option<Vec<u8>> {
    tuple::unpack::<(String, Vec<u8>, u32)>(row_key)
        .ok()
        .filter(|(tag, _, _)| tag == CHUNK)
        .map(|(_, k, _)| k)
}

/// The chunk index of a chunk row.
pub(crate) fn chunk_index(row_key: &[u8]) -> Option<u32> {
    tuple::unpack::<(String, Vec<u8>, u32)>(row_key)
        .ok()
        .filter(|(tag, _, _)| tag == CHUNK)
        .map(|(_, _, i)| i)
}

/// The usage counter of a quota scope.
pub(crate) fn quota_key(scope: &[u8]) -> Vec<u8> {
    tuple::pack(&(QUOTA, scope))
}

/// Every quota counter.
pub(crate) fn quota_range() -> KeyRange {
    KeyRange::tuple_prefix(&tuple::pack(&(QUOTA,)))
}

/// The scope a quota counter key belongs to.
pub(crate) fn quota_scope(row_key: &[u8]) -> Option<Vec<u8>> {
    tuple::unpack::<(String, Vec<u8>)>(row_key)
        .ok()
        .filter(|(tag, _)| tag == QUOTA)
        .map(|(_, s)| s)
}

/// The expiry index entry of the value at `key` expiring at `at`.
pub(crate) fn expiry_key(at: u64, key: &[u8]) -> Vec<u8> {
    tuple::pack(&(EXPIRY, at, key))
}

/// Index entries expiring at `from` or later, up to and including `until`.
pub(crate) fn expiry_range(from: Option<&[u8]>, until: u64) -> KeyRange {
    let start = from.map_or_else(|| tuple::pack(&(EXPIRY,)), <[u8]>::to_vec);
    let end = until.checked_add(1).map_or_else(
        || KeyRange::tuple_prefix(&tuple::pack(&(EXPIRY,))).end,
        |next| Some(tuple::pack(&(EXPIRY, next))),
    );
    KeyRange { start, end }
}

/// Reads an expiry index key.
pub(crate) fn read_expiry(row_key: &[u8]) -> Option<(u64, Vec<u8>)> {
    tuple::unpack::<(String, u64, Vec<u8>)>(row_key)
        .ok()
        .filter(|(tag, _, _)| tag == EXPIRY)
        .map(|(_, at, k)| (at, k))
}
