//! The engine side's physical rows: the actor subspace, `KeyWrapper`, the
//! metadata and data rows, and the metadata value, byte for byte as the
//! public source of the actor engine (rivet-dev/rivet) encodes them.
//!
//! Where each constant comes from, in that repository (read at the
//! commits named in `schemas/README.md`, "Where the modules differ from
//! the real systems"):
//!
//! - the subspace `(RIVET, PEGBOARD, ACTOR_KV, actor_id)`:
//!   `engine/packages/pegboard/src/keys/actor_kv.rs`, with `RIVET` = 0,
//!   `PEGBOARD` = 3, `ACTOR_KV` = 72, `DATA` = 4 and `METADATA` = 44 from
//!   the key list of UniversalDB's utils (`universaldb/src/utils/keys.rs`);
//! - the actor id's tuple encoding: the user type code `0x40` (UniversalDB's
//!   tuple codes) followed by the id's 19 bytes, a version byte `1` then 16
//!   bytes of UUID and a 2-byte big-endian label (`util-id/src/lib.rs`);
//! - `KeyWrapper(key)`: the nested-tuple code `0x05`, the key as a tuple
//!   byte string (`0x01`, the bytes with each `0x00` escaped as `0x00 0xFF`,
//!   `0x00`), and a closing `0x00`; a list prefix omits the closing byte;
//! - the metadata value: the BARE struct `KvMetadata { version: data,
//!   updateTs: i64 }` (the envoy protocol schema), a uvarint length, the
//!   version bytes, then the timestamp as 8 little-endian bytes;
//! - data rows: the raw value in 10,000-byte chunks
//!   (`pegboard/src/actor_kv/mod.rs`, `VALUE_CHUNK_SIZE`).

use strata_keys::tuple;

/// Tuple code of the actor id in the engine's tuple layer (a FoundationDB
/// user type code).
pub const ID_CODE: u8 = strata_universaldb::rivet_id::ID_CODE;
/// `RIVET`, the first element of the subspace.
pub const RIVET: i64 = 0;
/// `PEGBOARD`.
pub const PEGBOARD: i64 = 3;
/// `ACTOR_KV`.
pub const ACTOR_KV: i64 = 72;
/// `DATA`: the code of a data (chunk) row.
pub const DATA: i64 = 4;
/// `METADATA`: the code of an entry's metadata row.
pub const METADATA: i64 = 44;
/// Bytes of value per data row.
pub const CHUNK_SIZE: usize = 10_000;

/// An actor's id: the engine's [`Id`](strata_universaldb::rivet_id::Id), version 1,
/// 16 bytes of UUID and a 2-byte label.
pub type ActorId = strata_universaldb::rivet_id::Id;

/// The packed subspace `(RIVET, PEGBOARD, ACTOR_KV, actor_id)`: every row
/// of the actor starts with these bytes.
pub fn subspace(actor: ActorId) -> Vec<u8> {
    tuple::pack(&(RIVET, PEGBOARD, ACTOR_KV, actor))
}

/// Appends `key` as a tuple byte string without its terminator.
fn escaped(key: &[u8], out: &mut Vec<u8>) {
    out.push(0x01);
    for &b in key {
        out.push(b);
        if b == 0 {
            out.push(0xFF);
        }
    }
}

/// `KeyWrapper(key)`: the nested tuple holding `key` as a byte string.
pub fn key_wrapper(key: &[u8], out: &mut Vec<u8>) {
    out.push(0x05);
    escaped(key, out);
    out.extend_from_slice(&[0x00, 0x00]);
}

/// `ListKeyWrapper(prefix)` with its byte string left open: every
/// wrapped key starting with `prefix` starts with these bytes.
pub fn list_prefix(prefix: &[u8], out: &mut Vec<u8>) {
    out.push(0x05);
    escaped(prefix, out);
}

/// Its encoded length: `KeyWrapper::tuple_len`, which the engine checks
/// against the key limit (the key plus 2, escapes not counted).
pub fn wrapped_len(key: &[u8]) -> usize {
    key.len() + 2
}

/// The base of an entry's rows: the actor's subspace then `KeyWrapper(key)`.
pub fn entry_base(actor: ActorId, key: &[u8]) -> Vec<u8> {
    let mut out = subspace(actor);
    key_wrapper(key, &mut out);
    out
}

/// The metadata row of the entry at `base`.
pub fn meta_key(base: &[u8]) -> Vec<u8> {
    let mut out = base.to_vec();
    tuple::pack_into(&(METADATA,), &mut out);
    out
}

/// Data row `index` of the entry at `base`.
pub fn data_key(base: &[u8], index: u32) -> Vec<u8> {
    let mut out = base.to_vec();
    tuple::pack_into(&(DATA, i64::from(index)), &mut out);
    out
}

/// What a row under an actor's subspace is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RowKind {
    /// The entry's metadata row.
    Meta,
    /// Data row `n`.
    Data(u32),
}

/// Splits a row key (its actor subspace already removed) into the logical
/// key and the row's kind, or `None` when it is no row of this layout.
pub fn parse_row(rest: &[u8]) -> Option<(Vec<u8>, RowKind)> {
    let mut bytes = rest.strip_prefix(&[0x05, 0x01])?;
    let mut key = Vec::new();
    loop {
        let (&b, after) = bytes.split_first()?;
        bytes = after;
        if b != 0 {
            key.push(b);
            continue;
        }
        match bytes.split_first() {
            Some((0xFF, after)) => {
                key.push(0);
                bytes = after;
            }
            _ => break,
        }
    }
    let tail = bytes.strip_prefix(&[0x00])?;
    Some((key, row_kind(tail)?))
}

/// What the row is, given the bytes after its entry's base: `(METADATA)`
/// or `(DATA, index)`.
pub fn row_kind(tail: &[u8]) -> Option<RowKind> {
    if let Ok((code,)) = tuple::unpack::<(i64,)>(tail)
        && code == METADATA
    {
        return Some(RowKind::Meta);
    }
    match tuple::unpack::<(i64, i64)>(tail) {
        Ok((DATA, index)) => Some(RowKind::Data(u32::try_from(index).ok()?)),
        _ => None,
    }
}

/// The engine's `KvMetadata`: the writer's version and the update time.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct KvMetadata {
    /// The version string of the writer (bytes).
    pub version: Vec<u8>,
    /// When the entry was written, milliseconds since the Unix epoch.
    pub update_ts: i64,
}

impl KvMetadata {
    /// Its BARE encoding.
    pub fn to_bare(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.version.len() + 10);
        let mut n = self.version.len() as u64;
        loop {
            let low = (n & 0x7F) as u8;
            n >>= 7;
            if n == 0 {
                out.push(low);
                break;
            }
            out.push(low | 0x80);
        }
        out.extend_from_slice(&self.version);
        out.extend_from_slice(&self.update_ts.to_le_bytes());
        out
    }

    /// Reads a BARE encoding, all of it.
    pub fn from_bare(bytes: &[u8]) -> Option<Self> {
        match Self::read_bare(bytes)? {
            (m, used) if used == bytes.len() => Some(m),
            _ => None,
        }
    }

    /// Reads a BARE encoding at the start of `bytes`, returning it and the
    /// bytes it took.
    pub fn read_bare(bytes: &[u8]) -> Option<(Self, usize)> {
        let mut len: u64 = 0;
        let mut at = 0;
        loop {
            let b = *bytes.get(at)?;
            let shift = 7 * at;
            if shift > 63 {
                return None;
            }
            len |= u64::from(b & 0x7F) << shift;
            at += 1;
            if b & 0x80 == 0 {
                break;
            }
        }
        let len = usize::try_from(len).ok()?;
        let end = at.checked_add(len)?;
        let version = bytes.get(at..end)?.to_vec();
        let ts: [u8; 8] = bytes.get(end..end.checked_add(8)?)?.try_into().ok()?;
        Some((
            Self {
                version,
                update_ts: i64::from_le_bytes(ts),
            },
            end + 8,
        ))
    }
}
