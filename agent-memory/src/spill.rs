//! Rows past the value limit: an event, TOC version or grip whose envelope
//! is larger than the store's value limit keeps its key (the original's),
//! with a pointer there, and its envelope in the data keyspace as a
//! chunked value (`("am", "spill", space, key)`), written and removed in
//! the same commit. Readers follow the pointer; nothing a user feeds fails
//! on size. The search projection keeps the first [`PROJECTED_TEXT_BYTES`]
//! of a node's or grip's text.

#[allow(clippy::wildcard_imports)]
use super::*;

/// The bytes of a pointer row. Its first byte is no envelope's (an
/// envelope starts with its format byte, `0xE1`), so a pointer and a
/// value cannot be taken for each other.
pub(crate) const POINTER: &[u8] = b"\xF5strata.am.spilled.v1";

/// Text of a node (title and bullets) or grip (excerpt) indexed for
/// search, and keywords: beyond these, the projection is cut (at a
/// character boundary), so that its change fits one outbox entry.
pub const PROJECTED_TEXT_BYTES: usize = 32 * 1_024;
/// Keywords indexed for search, likewise.
pub const PROJECTED_KEYWORD_BYTES: usize = 8 * 1_024;

/// Where a spilled row's envelope lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SpillKey {
    pub(crate) space: String,
    pub(crate) key: String,
}

tuple_key! {
    SpillKey -> chunked Vec<u8> = ("am", "spill", {space}, {key});
}

/// `text` cut to at most `max` bytes at a character boundary.
pub(crate) fn capped(mut text: String, max: usize) -> String {
    if text.len() > max {
        let mut end = max;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
    }
    text
}

impl<E: Engine> AgentMemory<'_, E> {
    /// Writes `envelope` at `key` of `space` (named `name`): in the row
    /// when it fits the value limit, else a pointer there and the envelope
    /// spilled. `replacing`: the key may hold a row already (a grip
    /// rewritten), whose spill must not outlive it.
    pub(crate) fn write_row(
        &self,
        tx: &mut Tx<'_, E>,
        (space, name): (&Space, &'static str),
        key: &str,
        envelope: Vec<u8>,
        replacing: bool,
    ) -> Result<(), MemoryError> {
        let spill = || SpillKey {
            space: name.to_owned(),
            key: key.to_owned(),
        };
        let max = self.store.options().limits.max_value_bytes;
        if envelope.len() > max && strata_engine::fault_point!("spill-cut-to-limit") {
            // The mistake of fitting the value to the limit.
            let mut cut = envelope;
            cut.truncate(max);
            tx.put_in(space, key.as_bytes().to_vec(), cut)?;
            return Ok(());
        }
        if envelope.len() > max {
            tx.put(&spill(), &envelope)?;
            tx.put_in(space, key.as_bytes().to_vec(), POINTER.to_vec())?;
        } else {
            if replacing {
                tx.delete(&spill())?;
            }
            tx.put_in(space, key.as_bytes().to_vec(), envelope)?;
        }
        Ok(())
    }

    /// The envelope of the row `stored` at `key` of space `name`: the row
    /// itself, or the spilled envelope its pointer names (read at `tx`'s
    /// snapshot; `pin`: recorded as a read of the transaction).
    pub(crate) fn envelope_of(
        tx: &mut Tx<'_, E>,
        name: &'static str,
        key: &[u8],
        stored: Vec<u8>,
        pin: bool,
    ) -> Result<Vec<u8>, MemoryError> {
        if stored != POINTER {
            return Ok(stored);
        }
        let spill = SpillKey {
            space: name.to_owned(),
            key: String::from_utf8_lossy(key).into_owned(),
        };
        let found = if pin {
            tx.get(&spill)?
        } else {
            tx.snapshot_get(&spill)?
        };
        found.ok_or_else(|| MemoryError::Inconsistent {
            key: spill.key,
            problem: Inconsistency::SpillNotStored,
        })
    }

    /// The value at `key` of space `name` decoded from its row `stored`.
    pub(crate) fn read_row<T: Value>(
        tx: &mut Tx<'_, E>,
        name: &'static str,
        key: &[u8],
        stored: Vec<u8>,
        pin: bool,
    ) -> Result<T, MemoryError> {
        let envelope = Self::envelope_of(tx, name, key, stored, pin)?;
        decode(key, &envelope)
    }

    /// Removes the spill of `key` in space `name`, if its row `stored` is
    /// a pointer.
    pub(crate) fn drop_spill(
        tx: &mut Tx<'_, E>,
        name: &'static str,
        key: &str,
        stored: &[u8],
    ) -> Result<(), MemoryError> {
        if stored == POINTER {
            tx.delete(&SpillKey {
                space: name.to_owned(),
                key: key.to_owned(),
            })?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::{POINTER, capped};

    #[test]
    fn text_is_cut_at_a_character_boundary_and_pointers_are_no_envelopes() {
        assert_eq!(capped("abcdef".into(), 4), "abcd");
        assert_eq!(capped("abc".into(), 4), "abc");
        // "é" is two bytes: a cut inside it keeps the byte before.
        assert_eq!(capped("aé".into(), 2), "a");
        assert_eq!(capped("aé".into(), 3), "aé");
        assert_ne!(POINTER[0], strata_codec::FORMAT_V1);
    }
}
