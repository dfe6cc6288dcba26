//! The original's ingest format: one JSON object per hook call, as coding
//! agents' hooks hand it to the original's hook handler, turned into an
//! [`Event`] with the original's mapping of kinds, roles and metadata.

use serde::Deserialize;

#[allow(clippy::wildcard_imports)]
use super::*;

/// One hook call in the original's ingest format (`hook_event_name`,
/// `session_id`, and optional `message`, `tool_name`, `tool_input`,
/// `timestamp` in RFC 3339, `cwd`, `agent`). Unknown fields are ignored.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct HookEvent {
    /// `SessionStart`, `UserPromptSubmit`, `AssistantResponse`,
    /// `PreToolUse`, `PostToolUse`, `Stop`, `SessionEnd`,
    /// `SubagentStart`, `SubagentStop`.
    pub hook_event_name: String,
    /// The conversation.
    pub session_id: String,
    /// A prompt's or a response's text.
    #[serde(default)]
    pub message: Option<String>,
    /// The tool of a tool event.
    #[serde(default)]
    pub tool_name: Option<String>,
    /// The tool's input, kept as JSON text when there is no message.
    #[serde(default)]
    pub tool_input: Option<serde_json::Value>,
    /// When it happened, RFC 3339 (`2026-01-30T12:00:00Z`).
    #[serde(default)]
    pub timestamp: Option<String>,
    /// The agent's working directory.
    #[serde(default)]
    pub cwd: Option<String>,
    /// The agent (`claude`, `opencode`, ...).
    #[serde(default)]
    pub agent: Option<String>,
}

impl HookEvent {
    /// Reads one line of the format.
    ///
    /// # Errors
    /// [`MemoryError::Invalid`] for a line that is not such an object.
    pub fn parse(line: &str) -> Result<Self, MemoryError> {
        serde_json::from_str(line).map_err(|e| MemoryError::Invalid {
            what: "hook event (JSON with hook_event_name and session_id)",
            value: format!("{e}: {}", line.chars().take(200).collect::<String>()),
        })
    }

    /// The event this hook call records, as the original maps it: the
    /// kind and role from `hook_event_name` (an unknown name is a user
    /// message, as there), the text from `message` or else `tool_input`'s
    /// JSON, `cwd` and `tool_name` into `metadata`, and an id minted from
    /// the event's time (`timestamp`, or `received_ms` without one) and
    /// `random`, so the key holds the event's own time.
    ///
    /// ```
    /// use strata_agent_memory::{EventType, HookEvent};
    /// let hook = HookEvent::parse(
    ///     r#"{"hook_event_name":"PostToolUse","session_id":"s1","tool_name":"Read","tool_input":{"path":"/a.rs"},"timestamp":"2026-01-30T12:00:00Z","cwd":"/w"}"#,
    /// )?;
    /// let event = hook.to_event(0, 7)?;
    /// assert_eq!((event.event_type, event.role.as_str()), (EventType::ToolResult, "tool"));
    /// assert_eq!(event.text, r#"{"path":"/a.rs"}"#);
    /// assert_eq!(event.timestamp_ms, 1_769_774_400_000);
    /// assert_eq!(event.metadata["tool_name"], "Read");
    /// # Ok::<(), strata_agent_memory::MemoryError>(())
    /// ```
    ///
    /// # Errors
    /// [`MemoryError::Invalid`] for a timestamp that is not RFC 3339 or is
    /// before 1970 or past the year 10000.
    pub fn to_event(&self, received_ms: u64, random: u128) -> Result<Event, MemoryError> {
        let (event_type, role) = match self.hook_event_name.as_str() {
            "SessionStart" => (EventType::SessionStart, "system"),
            "AssistantResponse" => (EventType::AssistantMessage, "assistant"),
            "PreToolUse" | "PostToolUse" => (EventType::ToolResult, "tool"),
            "Stop" | "SessionEnd" => (EventType::SessionEnd, "system"),
            "SubagentStart" => (EventType::SubagentStart, "system"),
            "SubagentStop" => (EventType::SubagentStop, "system"),
            _ => (EventType::UserMessage, "user"),
        };
        let text = match (&self.message, &self.tool_input) {
            (Some(m), _) => m.clone(),
            (None, Some(input)) => input.to_string(),
            (None, None) => String::new(),
        };
        let timestamp_ms = match &self.timestamp {
            Some(t) => rfc3339_ms(t).ok_or_else(|| MemoryError::Invalid {
                what: "hook timestamp (RFC 3339, 1970 to 9999)",
                value: t.clone(),
            })?,
            None => received_ms,
        };
        let id = Ulid::from_parts(timestamp_ms, random).map_err(|_| MemoryError::Invalid {
            what: "hook timestamp (past a ULID's 48 bits)",
            value: timestamp_ms.to_string(),
        })?;
        let mut event = Event::new(
            id.to_string(),
            self.session_id.clone(),
            timestamp_ms,
            event_type,
            role,
            text,
        );
        if let Some(cwd) = &self.cwd {
            event.metadata.insert("cwd".into(), cwd.clone());
        }
        if let Some(tool) = &self.tool_name {
            event.metadata.insert("tool_name".into(), tool.clone());
        }
        event.agent.clone_from(&self.agent);
        Ok(event)
    }
}

/// `len` ASCII digits at the start of `s`, and the rest.
fn digits(s: &str, len: usize) -> Option<(u32, &str)> {
    let head = s.get(..len)?;
    if !head.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((head.parse().ok()?, &s[len..]))
}

/// Unix milliseconds of an RFC 3339 date-time (`T`, `t` or a space between
/// date and time; fractions of a second cut to milliseconds; `Z`, `z` or
/// an offset), if it is one, from 1970 on.
pub(crate) fn rfc3339_ms(s: &str) -> Option<u64> {
    let (year, s) = digits(s, 4)?;
    let (month, s) = digits(s.strip_prefix('-')?, 2)?;
    let (day, s) = digits(s.strip_prefix('-')?, 2)?;
    let s = s
        .strip_prefix('T')
        .or_else(|| s.strip_prefix('t'))
        .or_else(|| s.strip_prefix(' '))?;
    let (hour, s) = digits(s, 2)?;
    let (minute, s) = digits(s.strip_prefix(':')?, 2)?;
    let (second, mut s) = digits(s.strip_prefix(':')?, 2)?;
    let mut millis = 0;
    if let Some(rest) = s.strip_prefix('.') {
        let n = rest.bytes().take_while(u8::is_ascii_digit).count();
        if n == 0 {
            return None;
        }
        let frac = &rest[..n];
        millis = frac
            .bytes()
            .chain(std::iter::repeat(b'0'))
            .take(3)
            .fold(0, |m, b| m * 10 + u64::from(b - b'0'));
        s = &rest[n..];
    }
    let offset_minutes: i64 = match s {
        "Z" | "z" => 0,
        _ => {
            let sign = match s.as_bytes().first()? {
                b'+' => 1,
                b'-' => -1,
                _ => return None,
            };
            let (h, rest) = digits(&s[1..], 2)?;
            let (m, rest) = digits(rest.strip_prefix(':')?, 2)?;
            if !rest.is_empty() || h > 23 || m > 59 {
                return None;
            }
            sign * i64::from(h * 60 + m)
        }
    };
    // A leap second (`:60`) is read as the last millisecond's second, as
    // most parsers do.
    if hour > 23 || minute > 59 || second > 60 {
        return None;
    }
    // A month or day out of range (13, 0, 30 February) comes back as
    // another date.
    let days = dates::days_from_civil(i64::from(year), month, day);
    if dates::civil_of(days) != (i64::from(year), month, day) {
        return None;
    }
    let seconds = days * 86_400
        + i64::from(hour) * 3_600
        + i64::from(minute) * 60
        + i64::from(second.min(59))
        - offset_minutes * 60;
    let ms = seconds
        .checked_mul(1_000)?
        .checked_add(i64::try_from(millis).ok()?)?;
    u64::try_from(ms).ok()
}

#[cfg(test)]
mod tests {
    use super::rfc3339_ms;

    #[test]
    fn rfc3339_times_are_read_to_the_millisecond() {
        // Worked out with `date -u -d ... +%s%3N`.
        assert_eq!(rfc3339_ms("2026-01-30T12:00:00Z"), Some(1_769_774_400_000));
        assert_eq!(
            rfc3339_ms("2026-01-30t12:00:00.123456z"),
            Some(1_769_774_400_123)
        );
        assert_eq!(
            rfc3339_ms("2026-01-30 12:00:00.5Z"),
            Some(1_769_774_400_500)
        );
        // 14:30 at +02:30 is 12:00 UTC; 09:00 at -03:00 is 12:00 UTC.
        assert_eq!(
            rfc3339_ms("2026-01-30T14:30:00+02:30"),
            Some(1_769_774_400_000)
        );
        assert_eq!(
            rfc3339_ms("2026-01-30T09:00:00-03:00"),
            Some(1_769_774_400_000)
        );
        assert_eq!(rfc3339_ms("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(rfc3339_ms("2024-02-29T00:00:00Z"), Some(1_709_164_800_000));
        // The last valid hour, minute, second and offset; a leap second
        // read as the one before.
        assert_eq!(rfc3339_ms("2026-01-30T23:59:59Z"), Some(1_769_817_599_000));
        assert_eq!(rfc3339_ms("2026-01-30T12:34:56Z"), Some(1_769_776_496_000));
        assert_eq!(
            rfc3339_ms("2026-01-30T12:00:00+23:59"),
            Some(1_769_688_060_000)
        );
        assert_eq!(
            rfc3339_ms("2026-01-30T12:00:00-23:59"),
            Some(1_769_860_740_000)
        );
        assert_eq!(rfc3339_ms("2016-12-31T23:59:60Z"), Some(1_483_228_799_000));
        for bad in [
            "2023-02-29T00:00:00Z",
            "2026-13-01T00:00:00Z",
            "2026-01-30T24:00:00Z",
            "2026-01-30T12:00:00",
            "2026-01-30T12:00:00.Z",
            "2026-01-30T12:00Z",
            "2026-01-30",
            "1969-12-31T23:59:59Z",
            "2026-01-30T12:00:00+2:00",
            "2026-01-30T12:00:00Zjunk",
            "2026-01-30T12:60:00Z",
            "2026-01-30T12:00:61Z",
            "2026-00-10T12:00:00Z",
            "2026-01-00T12:00:00Z",
            "2026-01-30T12:00:00+24:00",
            "2026-01-30T12:00:00+23:60",
            "2026-01-30T12:00:00+02:00x",
            "",
        ] {
            assert_eq!(rfc3339_ms(bad), None, "{bad}");
        }
    }
}
