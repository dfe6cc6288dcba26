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
//! | dead letters | a dead letter's entry | `("x", topic, consumer, version, order)` | the entry row's value, as it was |
//! | dead letters | why it was given up on | `("y", topic, consumer, version, order)` | `(error, attempts, first_ms, last_ms)` |
//!
//! A recorded failure's text is cut to fit the value limit
//! ([`fit_error`]); a dead letter's entry keeps a row of its own, so an
//! entry at the limit can be given up on too. (Dead letters written before
//! the note had its own row, `("x", ...)` holding `(entry row value,
//! error, attempts, first_ms, last_ms)`, are still read.)
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

/// The position of an entry key (`("e", topic, stamp)`), read in place:
/// the key is checked as the tuple layer unpacks an [`EntryKey`] (the tag,
/// a topic that is valid UTF-8 up to its unescaped end, a complete
/// 12-byte stamp, nothing after it) without copying the topic out.
/// Every poll, acknowledgement and trim reads its entries' keys through
/// this.
pub(crate) fn entry_position(key: &[u8]) -> Option<Position> {
    let topic = key.strip_prefix(&[STRING, b'e', NIL, STRING])?;
    // A NUL is never part of a longer UTF-8 sequence, so the topic is
    // valid UTF-8 when every run between its escaped NULs is.
    let stamp = byte_string_runs(topic, |run, _| std::str::from_utf8(run).ok().map(drop))?;
    let (&VERSIONSTAMP, stamp) = stamp.split_first()? else {
        return None;
    };
    // The commit's version and order, then the user version.
    let stamp: &[u8; 12] = stamp.try_into().ok()?;
    let (position, _user) = stamp.split_first_chunk::<10>()?;
    Some(Position::from_stamp_bytes(*position))
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

pub(crate) fn dead_note_key(topic: &str, consumer: &str, pos: Position) -> Vec<u8> {
    tuple::pack(&("y", topic, consumer, pos.version, pos.order))
}

pub(crate) fn dead_note_rows(topic: &str, consumer: &str) -> KeyRange {
    KeyRange::tuple_prefix(&tuple::pack(&("y", topic, consumer)))
}

/// What a failure's text is cut to when recorded, at most: a row holding
/// it (escaped by the tuple layer, a byte doubling at worst) and a few
/// numbers stays within `max_value_bytes`.
pub(crate) fn error_room(max_value_bytes: usize) -> usize {
    (max_value_bytes.saturating_sub(64) / 2).min(8 * 1024)
}

/// `error` cut at a character boundary to at most `room` bytes, ending
/// with ` (cut)` when it was cut.
pub(crate) fn fit_error(error: &str, room: usize) -> std::borrow::Cow<'_, str> {
    const MARK: &str = " (cut)";
    if error.len() <= room {
        return error.into();
    }
    let mut end = room.saturating_sub(MARK.len());
    while !error.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}{MARK}", &error[..end]).into()
}

/// The position in the last two tuple elements of a state key.
pub(crate) fn trailing_position(key: &[u8], prefix_len: usize) -> Option<Position> {
    let (version, order) = tuple::unpack::<(u64, u16)>(key.get(prefix_len..)?).ok()?;
    Some(Position { version, order })
}

/// An entry row's value.
pub(crate) fn entry_value(pushed_ms: u64, ordering_key: Option<&[u8]>, envelope: &[u8]) -> Vec<u8> {
    // Sized for the usual case (few bytes to escape): one allocation.
    let mut out = Vec::with_capacity(envelope.len() + ordering_key.map_or(0, <[u8]>::len) + 24);
    tuple::pack_into(&(pushed_ms, ordering_key, envelope), &mut out);
    out
}

/// An entry row's value, read.
pub(crate) type EntryValue = (u64, Option<Vec<u8>>, Vec<u8>);

/// Reads an entry row's value. The usual shape (a non-negative integer,
/// bytes or null, bytes) is read here, each byte string copied once into
/// a buffer of its final size; anything else goes to the general tuple
/// reader, which decides. Polls read every entry through this.
pub(crate) fn read_entry_value(bytes: &[u8]) -> Option<EntryValue> {
    fast_entry_value(bytes).or_else(|| tuple::unpack::<EntryValue>(bytes).ok())
}

/// Tuple type codes (the FoundationDB tuple layer's).
const NIL: u8 = 0x00;
const BYTES: u8 = 0x01;
const STRING: u8 = 0x02;
const VERSIONSTAMP: u8 = 0x33;
const INT_ZERO: u8 = 0x14;
const ESCAPE: u8 = 0xFF;

fn fast_entry_value(bytes: &[u8]) -> Option<EntryValue> {
    let (pushed_ms, rest) = fast_uint(bytes)?;
    let (ordering_key, rest) = match rest.split_first()? {
        (&NIL, rest) => (None, rest),
        (&BYTES, rest) => {
            let (b, rest) = fast_bytes(rest)?;
            (Some(b), rest)
        }
        _ => return None,
    };
    let (&BYTES, rest) = rest.split_first()? else {
        return None;
    };
    let (envelope, rest) = fast_bytes(rest)?;
    rest.is_empty()
        .then_some((pushed_ms, ordering_key, envelope))
}

/// A non-negative integer element: its code says how many big-endian
/// bytes follow (none for zero).
fn fast_uint(bytes: &[u8]) -> Option<(u64, &[u8])> {
    let (&code, rest) = bytes.split_first()?;
    let n = usize::from(code.checked_sub(INT_ZERO)?);
    if n > 8 || rest.len() < n {
        return None;
    }
    let (digits, rest) = rest.split_at(n);
    Some((
        digits.iter().fold(0u64, |v, &b| (v << 8) | u64::from(b)),
        rest,
    ))
}

/// Where the first NUL of `bytes` is. A short run is searched byte by
/// byte: an envelope's header holds NULs a few bytes apart (its schema
/// version's high byte), where a vector search costs more to start than
/// it saves.
fn find_nil(bytes: &[u8]) -> Option<usize> {
    match bytes.get(..32) {
        Some(head) => head
            .iter()
            .position(|&b| b == NIL)
            .or_else(|| memchr::memchr(NIL, &bytes[32..]).map(|at| at + 32)),
        None => bytes.iter().position(|&b| b == NIL),
    }
}

/// Walks the body of a byte-string element (after its code) in runs:
/// the bytes between its escaped NULs (`0x00 0xFF`), each handed to
/// `each` as stored, with whether an escaped NUL came before it. Returns
/// what follows the unescaped `0x00` that ends the string; `None` when
/// there is none, or when `each` says `None`.
fn byte_string_runs(
    bytes: &[u8],
    mut each: impl FnMut(&[u8], bool) -> Option<()>,
) -> Option<&[u8]> {
    let (mut rest, mut escaped) = (bytes, false);
    loop {
        let at = find_nil(rest)?;
        each(&rest[..at], escaped)?;
        if rest.get(at + 1) == Some(&ESCAPE) {
            (rest, escaped) = (&rest[at + 2..], true);
        } else {
            return Some(&rest[at + 1..]);
        }
    }
}

/// The body of a byte-string element (after its code): bytes up to the
/// unescaped `0x00`, with each `0x00 0xFF` read as `0x00`.
fn fast_bytes(bytes: &[u8]) -> Option<(Vec<u8>, &[u8])> {
    let mut out = Vec::with_capacity(bytes.len());
    let rest = byte_string_runs(bytes, |run, escaped| {
        if escaped {
            out.push(NIL);
        }
        out.extend_from_slice(run);
        Some(())
    })?;
    Some((out, rest))
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        #[test]
        fn entry_values_read_as_the_tuple_layer_reads_them(
            pushed_ms in prop_oneof![Just(0u64), Just(u64::MAX), any::<u64>(), 0u64..300],
            ordering_key in proptest::option::of(proptest::collection::vec(prop_oneof![Just(0u8), Just(0xFF), any::<u8>()], 0..40)),
            envelope in proptest::collection::vec(prop_oneof![Just(0u8), Just(0xFF), any::<u8>()], 0..200),
        ) {
            let packed = entry_value(pushed_ms, ordering_key.as_deref(), &envelope);
            let expected: EntryValue = tuple::unpack(&packed).unwrap();
            prop_assert_eq!(&expected, &(pushed_ms, ordering_key.clone(), envelope.clone()));
            prop_assert_eq!(fast_entry_value(&packed), Some(expected));
            // Every cut is refused by both readers, or read alike.
            for cut in 0..packed.len() {
                let general = tuple::unpack::<EntryValue>(&packed[..cut]).ok();
                prop_assert_eq!(read_entry_value(&packed[..cut]), general);
            }
        }

        #[test]
        fn any_bytes_read_as_the_tuple_layer_reads_them(
            bytes in proptest::collection::vec(prop_oneof![Just(0u8), Just(1u8), Just(0x14), Just(0x15), Just(0xFF), any::<u8>()], 0..64),
        ) {
            prop_assert_eq!(
                read_entry_value(&bytes),
                tuple::unpack::<EntryValue>(&bytes).ok()
            );
        }
    }

    /// The tuple layer's reading of an entry key: the oracle of
    /// [`entry_position`].
    fn position_by_the_tuple_layer(key: &[u8]) -> Option<Position> {
        let k = EntryKey::unpack(key).ok()?;
        let bytes: [u8; 10] = k.stamp.transaction_version().try_into().ok()?;
        Some(Position::from_stamp_bytes(bytes))
    }

    proptest! {
        #[test]
        fn entry_keys_read_as_the_tuple_layer_reads_them(
            topic in prop_oneof![".{0,12}", "[a\\x00\\x{ff}\\x{fffd}]{0,8}"],
            version in any::<u64>(),
            order in any::<u16>(),
            cut in any::<prop::sample::Index>(),
            flip in any::<(prop::sample::Index, u8)>(),
        ) {
            let pos = Position { version, order };
            let key = entry_key(&topic, pos);
            prop_assert_eq!(entry_position(&key), Some(pos));
            prop_assert_eq!(position_by_the_tuple_layer(&key), Some(pos));
            // A cut key, a changed byte, a byte more: read alike.
            let short = &key[..cut.index(key.len())];
            prop_assert_eq!(entry_position(short), position_by_the_tuple_layer(short));
            let mut changed = key.clone();
            let at = flip.0.index(changed.len());
            changed[at] ^= flip.1;
            prop_assert_eq!(entry_position(&changed), position_by_the_tuple_layer(&changed));
            let mut longer = key;
            longer.push(flip.1);
            prop_assert_eq!(entry_position(&longer), None);
        }

        #[test]
        fn any_key_reads_as_the_tuple_layer_reads_it(
            tail in proptest::collection::vec(prop_oneof![Just(0u8), Just(0xFF), Just(0x33), Just(0xC3), any::<u8>()], 0..24),
        ) {
            let mut key = vec![0x02, b'e', 0x00, 0x02];
            key.extend_from_slice(&tail);
            prop_assert_eq!(entry_position(&key), position_by_the_tuple_layer(&key));
        }
    }

    #[test]
    fn an_entry_key_by_hand() {
        // ("e", "a\0", stamp): the topic's NUL escaped, by hand from the
        // tuple layer's encoding.
        let mut key = vec![0x02, b'e', 0x00, 0x02, b'a', 0x00, 0xFF, 0x00, 0x33];
        key.extend_from_slice(&[0, 0, 0, 0, 0, 0, 1, 2, 0, 3, 0, 0]);
        assert_eq!(
            entry_position(&key),
            Some(Position {
                version: 0x0102,
                order: 3
            })
        );
        // A topic that is not UTF-8 is no entry key.
        key[4] = 0xC3;
        assert_eq!(entry_position(&key), None);
        assert_eq!(position_by_the_tuple_layer(&key), None);
    }

    #[test]
    fn nuls_anywhere_in_a_long_envelope_read_as_the_tuple_layer_reads_them() {
        // A NUL before, at and after the 32 bytes searched one by one, and
        // none at all.
        for len in [40usize, 70, 200] {
            for at in [
                None,
                Some(0),
                Some(1),
                Some(30),
                Some(31),
                Some(32),
                Some(33),
                Some(39),
            ] {
                let mut envelope = vec![0xA5; len];
                if let Some(at) = at {
                    envelope[at] = 0;
                }
                let packed = entry_value(7, Some(b"k"), &envelope);
                let expected: EntryValue = tuple::unpack(&packed).unwrap();
                assert_eq!(expected.2, envelope, "the tuple layer reads it back");
                assert_eq!(fast_entry_value(&packed), Some(expected), "{len} {at:?}");
            }
        }
    }

    #[test]
    fn known_bytes_read() {
        // (300, null, b"a\0b"), by hand from the tuple layer's encoding.
        let bytes = [0x16, 0x01, 0x2C, 0x00, 0x01, b'a', 0x00, 0xFF, b'b', 0x00];
        assert_eq!(
            fast_entry_value(&bytes),
            Some((300, None, b"a\0b".to_vec()))
        );
        // A negative integer is not the usual shape: left to the general
        // reader (which reads it as no u64 either).
        assert_eq!(fast_entry_value(&[0x13, 0xFE, 0x00, 0x01, 0x00]), None);
        // Nine bytes of integer do not fit a u64: refused by both.
        let mut big = vec![0x1D, 1, 0, 0, 0, 0, 0, 0, 0, 0];
        big.extend_from_slice(&[0x00, 0x01, 0x00]);
        assert_eq!(fast_entry_value(&big), None);
        assert_eq!(read_entry_value(&big), None);
        // Bytes after the last element are refused.
        assert_eq!(fast_entry_value(&[0x14, 0x00, 0x01, 0x00, 0x14]), None);
        assert_eq!(
            fast_entry_value(&[0x14, 0x00, 0x01, 0x00]),
            Some((0, None, Vec::new()))
        );
    }
}
