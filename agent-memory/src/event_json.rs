//! An event's stored JSON, written by hand: the bytes `serde_json` writes
//! for an [`Event`] (the tests hold the two to each other), with each
//! string scanned eight bytes at a time for the bytes JSON escapes.
//! `serde_json` looks at every byte on its own, which was most of an
//! event's encoding (about 3,900 of 4,700 instructions for an event of
//! 350 bytes). Reading stays with `serde_json`.

use strata_codec::{DecodeError, EncodeError, Value};

use crate::{Event, EventType};

/// The JSON besides the strings: the field names, quotes, commas and
/// braces of an event without metadata, with room for the longest
/// timestamp and type name.
const FRAME_LEN: usize = 144;

impl Value for Event {
    // Written as the `value!` macro wrote them, which the API snapshot
    // shows.
    const CODEC: ::strata_codec::Codec = ::strata_codec::Codec::Json;
    const VERSION: u16 = 1;

    fn encode_body(&self, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        write(self, out);
        Ok(())
    }

    fn decode_body(version: u16, body: &[u8]) -> Result<Self, DecodeError> {
        if version == Self::VERSION {
            strata_codec::envelope::body::json_decode(body)
        } else {
            Err(DecodeError::NoMigration {
                found: version,
                current: Self::VERSION,
            })
        }
    }

    fn body_size_hint(&self) -> Option<usize> {
        let strings = self.event_id.len()
            + self.session_id.len()
            + self.role.len()
            + self.text.len()
            + self.agent.as_ref().map_or(0, String::len)
            + self
                .metadata
                .iter()
                .map(|(k, v)| k.len() + v.len() + 6)
                .sum::<usize>();
        Some(FRAME_LEN + strings)
    }
}

/// Appends `event`'s JSON, in `serde_json`'s compact form: the fields in
/// their declared order, `metadata` as an object in key order, `agent`
/// as `null` when absent.
fn write(event: &Event, out: &mut Vec<u8>) {
    out.extend_from_slice(b"{\"event_id\":");
    string(&event.event_id, out);
    out.extend_from_slice(b",\"session_id\":");
    string(&event.session_id, out);
    out.extend_from_slice(b",\"timestamp\":");
    number(event.timestamp_ms, out);
    out.extend_from_slice(b",\"event_type\":\"");
    out.extend_from_slice(type_name(event.event_type).as_bytes());
    out.extend_from_slice(b"\",\"role\":");
    string(&event.role, out);
    out.extend_from_slice(b",\"text\":");
    string(&event.text, out);
    out.extend_from_slice(b",\"metadata\":{");
    for (i, (key, value)) in event.metadata.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        string(key, out);
        out.push(b':');
        string(value, out);
    }
    out.extend_from_slice(b"},\"agent\":");
    match &event.agent {
        Some(agent) => string(agent, out),
        None => out.extend_from_slice(b"null"),
    }
    out.push(b'}');
}

/// The event type's stored name (`serde`'s snake case of the variant).
fn type_name(t: EventType) -> &'static str {
    match t {
        EventType::SessionStart => "session_start",
        EventType::UserMessage => "user_message",
        EventType::AssistantMessage => "assistant_message",
        EventType::ToolResult => "tool_result",
        EventType::AssistantStop => "assistant_stop",
        EventType::SubagentStart => "subagent_start",
        EventType::SubagentStop => "subagent_stop",
        EventType::SessionEnd => "session_end",
    }
}

/// `n` in decimal.
fn number(mut n: u64, out: &mut Vec<u8>) {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    loop {
        at -= 1;
        // A digit: below 10.
        #[allow(clippy::cast_possible_truncation)]
        {
            digits[at] = b'0' + (n % 10) as u8;
        }
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[at..]);
}

/// Eight copies of byte `b`.
const fn eight(b: u8) -> u64 {
    u64::from_ne_bytes([b; 8])
}

/// Whether any of the eight bytes of `w` is one JSON escapes: below
/// 0x20, `"` or `\`. (A byte below `n` (at most 0x80) borrows into its
/// top bit when `n` is taken from it, and a byte equal to `c` is zero
/// after `^ c`; a byte of 0x80 or more is never flagged. A flag may be
/// wrong only where an earlier byte is rightly flagged, so the answer
/// for the word is exact.)
fn needs_escape(w: u64) -> bool {
    let below = |v: u64, n: u8| v.wrapping_sub(eight(n)) & !v & eight(0x80);
    (below(w, 0x20) | below(w ^ eight(b'"'), 1) | below(w ^ eight(b'\\'), 1)) != 0
}

/// What JSON writes for byte `b` after its backslash, if it escapes it:
/// the short forms `serde_json` uses, else `u00` and two lowercase hex
/// digits.
fn escape(b: u8) -> Option<[u8; 5]> {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let short = |c: u8| Some([c, 0, 0, 0, 0]);
    match b {
        b'"' => short(b'"'),
        b'\\' => short(b'\\'),
        0x08 => short(b'b'),
        0x09 => short(b't'),
        0x0A => short(b'n'),
        0x0C => short(b'f'),
        0x0D => short(b'r'),
        0..0x20 => Some([
            b'u',
            b'0',
            b'0',
            HEX[usize::from(b >> 4)],
            HEX[usize::from(b & 0xF)],
        ]),
        _ => None,
    }
}

/// `s` as a JSON string: quoted, with the bytes JSON escapes escaped.
fn string(s: &str, out: &mut Vec<u8>) {
    let bytes = s.as_bytes();
    out.push(b'"');
    // Copied in runs between escapes; runs of eight clean bytes skipped a
    // word at a time.
    let mut start = 0;
    let mut i = 0;
    while let Some(rest) = bytes.get(i..)
        && !rest.is_empty()
    {
        if let Some(word) = rest.first_chunk::<8>()
            && !needs_escape(u64::from_ne_bytes(*word))
        {
            i += 8;
            continue;
        }
        // The word holds an escape, or fewer than eight bytes are left:
        // byte by byte to the word's end.
        for &b in rest.iter().take(8) {
            if let Some(e) = escape(b) {
                out.extend_from_slice(bytes.get(start..i).unwrap_or_default());
                out.push(b'\\');
                let len = if e[0] == b'u' { 5 } else { 1 };
                out.extend_from_slice(e.get(..len).unwrap_or_default());
                start = i + 1;
            }
            i += 1;
        }
    }
    out.extend_from_slice(bytes.get(start..).unwrap_or_default());
    out.push(b'"');
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    /// Every event type, in the order declared.
    const TYPES: [EventType; 8] = [
        EventType::SessionStart,
        EventType::UserMessage,
        EventType::AssistantMessage,
        EventType::ToolResult,
        EventType::AssistantStop,
        EventType::SubagentStart,
        EventType::SubagentStop,
        EventType::SessionEnd,
    ];

    fn ours(e: &Event) -> Vec<u8> {
        let mut out = Vec::new();
        e.encode_body(&mut out).unwrap();
        out
    }

    fn theirs(e: &Event) -> Vec<u8> {
        serde_json::to_vec(e).unwrap()
    }

    fn event(text: &str) -> Event {
        Event::new(
            "01HQ3K5M7N8P9R0S1T2V3W4X5Y",
            "s-1",
            1_706_540_400_000,
            EventType::UserMessage,
            "user",
            text,
        )
    }

    /// Characters of every class: each ASCII byte (those JSON escapes
    /// among them), DEL, and characters of two, three and four bytes.
    fn characters() -> Vec<char> {
        (0u8..=0x7F)
            .map(char::from)
            .chain(['é', '\u{2028}', '€', '😀'])
            .collect()
    }

    #[test]
    fn each_character_at_each_place_of_a_word_is_written_as_serde_json_writes_it() {
        for c in characters() {
            // Before, inside and after the first words, alone and
            // repeated, so every byte's place in a word is tried.
            for at in 0..18 {
                for run in [1, 2, 9] {
                    let text: String = "a".repeat(at) + &c.to_string().repeat(run) + "bcdefghij";
                    let e = event(&text);
                    assert_eq!(
                        String::from_utf8_lossy(&ours(&e)),
                        String::from_utf8_lossy(&theirs(&e)),
                        "{c:?} at {at}, {run} of it"
                    );
                }
            }
        }
    }

    #[test]
    fn every_field_is_written_as_serde_json_writes_it() {
        let mut metadata = BTreeMap::new();
        for (i, t) in TYPES.into_iter().enumerate() {
            let mut e = event("");
            e.event_type = t;
            e.timestamp_ms = [0, 9, 10, 1_706_540_400_000, u64::MAX][i % 5];
            e.session_id = "s\"\\\n\u{1}".repeat(i);
            e.role = ["user", "", "tool\t"][i % 3].to_owned();
            e.agent = (i % 2 == 1).then(|| format!("agent \u{7}{i}"));
            e.metadata.clone_from(&metadata);
            assert_eq!(
                String::from_utf8_lossy(&ours(&e)),
                String::from_utf8_lossy(&theirs(&e)),
                "{t:?}"
            );
            metadata.insert(format!("key \"{i}\""), format!("value\\{i}\u{1f}"));
        }
    }

    #[test]
    fn the_size_hint_is_the_length_of_an_event_without_escapes_but_a_few_bytes() {
        // The stored names of `TYPES`, restated: the hint has room for
        // the longest, `assistant_message`.
        let names = [
            "session_start",
            "user_message",
            "assistant_message",
            "tool_result",
            "assistant_stop",
            "subagent_start",
            "subagent_stop",
            "session_end",
        ];
        for (t, name) in TYPES.into_iter().zip(names) {
            for agent in [None, Some("opencode".to_owned())] {
                for entries in [0, 3] {
                    let mut e = event("plain text, nothing to escape");
                    e.event_type = t;
                    e.timestamp_ms = u64::MAX;
                    e.session_id = "session-12".to_owned();
                    e.role = "assistant".to_owned();
                    e.agent.clone_from(&agent);
                    for i in 0..entries {
                        e.metadata.insert(format!("key{i}"), format!("value {i}"));
                    }
                    let (len, hint) = (ours(&e).len(), e.body_size_hint().unwrap());
                    // Counted over: `null`'s four bytes where an agent's
                    // quotes take two, a comma before the first entry.
                    let over = ("assistant_message".len() - name.len())
                        + if agent.is_some() { 2 } else { 0 }
                        + usize::from(entries > 0);
                    assert_eq!(hint, len + over, "{t:?}, {agent:?}, {entries} entries");
                }
            }
        }
    }

    #[test]
    fn what_is_written_is_read_back_and_only_version_one_is_read() {
        let mut e = event("a \"quoted\" line\nand a tab\t, a bell \u{7} and é");
        e.metadata.insert("file".into(), "src/\\main.rs".into());
        e.agent = Some("claude".into());
        let body = ours(&e);
        assert_eq!(Event::decode_body(1, &body).unwrap(), e);
        assert!(matches!(
            Event::decode_body(2, &body),
            Err(DecodeError::NoMigration {
                found: 2,
                current: 1
            })
        ));
    }

    #[test]
    fn a_word_is_flagged_exactly_when_one_of_its_bytes_is_escaped() {
        // Each byte value at each place among clean bytes, and beside
        // bytes of 0x80 and more, which borrow differently.
        for fill in [b'a', 0x80, 0xFF, b' '] {
            for b in 0..=255u8 {
                for at in 0..8 {
                    let mut w = [fill; 8];
                    w[at] = b;
                    assert_eq!(
                        needs_escape(u64::from_ne_bytes(w)),
                        escape(b).is_some(),
                        "byte {b:#04x} at {at} among {fill:#04x}"
                    );
                }
            }
        }
    }
}
