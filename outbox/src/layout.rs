//! Where the outbox keeps its rows: three spaces of the store, every key a
//! FoundationDB tuple whose first element is a one-letter tag.
//!
//! | space | row | key | value |
//! |---|---|---|---|
//! | entries (`Queue`) | an entry | `("e", topic, stamp)` | `(pushed_ms, ordering_key or null, envelope)` |
//! | state | a consumer's checkpoint | `("c", topic, consumer)` | `(version, order)` of its low-water mark |
//! | state | an entry finished above it | `("d", topic, consumer, version, order)` | empty |
//! | state | a failed entry's attempts | `("t", topic, consumer, version, order)` | `(attempts, first_ms, last_ms, next_ms, error)` |
//! | state | the consumer's lease | `("l", topic, consumer)` | `(token, holder, expires_ms)` |
//! | dead letters | a dead letter | `("x", topic, consumer, version, order)` | `(entry row value, error, attempts, first_ms, last_ms)` |
//!
//! `stamp` is a tuple versionstamp: the commit's version (8 bytes) and the
//! entry's order in the commit (2 bytes), written by the engine at commit,
//! then a user version of 0. Entries of a topic therefore sort in commit
//! order with no counter and no read.

use strata_keys::tuple::{self, Versionstamp};
use strata_keys::{Key, KeyRange};

use crate::Position;

/// An entry's key, for packing with an incomplete versionstamp.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct EntryKey {
    pub(crate) topic: String,
    pub(crate) stamp: Versionstamp,
}
strata_keys::tuple_key! {
    EntryKey -> () = ("e", {topic}, {stamp});
}

/// The key of an entry at `pos` (complete stamp).
pub(crate) fn entry_key(topic: &str, pos: Position) -> Vec<u8> {
    EntryKey {
        topic: topic.to_owned(),
        stamp: Versionstamp::complete(pos.stamp_bytes(), 0),
    }
    .pack()
    .unwrap_or_default()
}

/// A new entry's key and the offset of its stamp.
pub(crate) fn new_entry_key(topic: &str) -> (Vec<u8>, usize) {
    let mut key = Vec::new();
    let offset = EntryKey {
        topic: topic.to_owned(),
        stamp: Versionstamp::incomplete(0),
    }
    .pack_into_versionstamped(&mut key)
    .ok()
    .flatten()
    .unwrap_or(0);
    (key, offset)
}

/// The position of an entry key of `topic`.
pub(crate) fn entry_position(key: &[u8]) -> Option<Position> {
    let k = EntryKey::unpack(key).ok()?;
    let bytes: [u8; 10] = k.stamp.transaction_version().try_into().ok()?;
    Some(Position::from_stamp_bytes(bytes))
}

/// Entries of `topic` after `after` up to `upto` (both positions).
pub(crate) fn entries_between(topic: &str, after: Position, upto: Position) -> KeyRange {
    let mut start = entry_key(topic, after);
    // Entry keys of a topic have one length: the next key after `after`.
    start.push(0);
    let mut end = entry_key(topic, upto);
    end.push(0);
    KeyRange {
        start,
        end: Some(end),
    }
}

/// Every entry of `topic`.
pub(crate) fn all_entries(topic: &str) -> KeyRange {
    KeyRange::tuple_prefix(&tuple::pack(&("e", topic)))
}

pub(crate) fn checkpoint_key(topic: &str, consumer: &str) -> Vec<u8> {
    tuple::pack(&("c", topic, consumer))
}

/// Every checkpoint of `topic`.
pub(crate) fn checkpoints(topic: &str) -> KeyRange {
    KeyRange::tuple_prefix(&tuple::pack(&("c", topic)))
}

pub(crate) fn done_key(topic: &str, consumer: &str, pos: Position) -> Vec<u8> {
    tuple::pack(&("d", topic, consumer, pos.version, pos.order))
}

pub(crate) fn done_rows(topic: &str, consumer: &str) -> KeyRange {
    KeyRange::tuple_prefix(&tuple::pack(&("d", topic, consumer)))
}

pub(crate) fn try_key(topic: &str, consumer: &str, pos: Position) -> Vec<u8> {
    tuple::pack(&("t", topic, consumer, pos.version, pos.order))
}

pub(crate) fn try_rows(topic: &str, consumer: &str) -> KeyRange {
    KeyRange::tuple_prefix(&tuple::pack(&("t", topic, consumer)))
}

pub(crate) fn lease_key(topic: &str, consumer: &str) -> Vec<u8> {
    tuple::pack(&("l", topic, consumer))
}

pub(crate) fn dead_key(topic: &str, consumer: &str, pos: Position) -> Vec<u8> {
    tuple::pack(&("x", topic, consumer, pos.version, pos.order))
}

pub(crate) fn dead_rows(topic: &str, consumer: &str) -> KeyRange {
    KeyRange::tuple_prefix(&tuple::pack(&("x", topic, consumer)))
}

/// The position in the last two tuple elements of a state key.
pub(crate) fn trailing_position(key: &[u8], prefix_len: usize) -> Option<Position> {
    let (version, order) = tuple::unpack::<(u64, u16)>(key.get(prefix_len..)?).ok()?;
    Some(Position { version, order })
}

/// An entry row's value.
pub(crate) fn entry_value(pushed_ms: u64, ordering_key: Option<&[u8]>, envelope: &[u8]) -> Vec<u8> {
    tuple::pack(&(pushed_ms, ordering_key, envelope))
}

/// An entry row's value, read.
pub(crate) type EntryValue = (u64, Option<Vec<u8>>, Vec<u8>);

pub(crate) fn read_entry_value(bytes: &[u8]) -> Option<EntryValue> {
    tuple::unpack::<EntryValue>(bytes).ok()
}
