//! The event topic consumed: new events delivered to a consumer (the
//! segmenter of the design), finished in the commit that writes what was
//! made of them, trimmed once every consumer is past them; and the
//! segmenter's split of a run of events into bounded segments.

use std::ops::Range;

use strata_outbox::{Lease, Position, Start};

#[allow(clippy::wildcard_imports)]
use super::*;

/// An event delivered from the event topic ([`AgentMemory::new_events`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewEvent {
    /// Where its entry sits on the topic: finish through it.
    pub position: Position,
    /// The event, read from `am.events`.
    pub event: Event,
}

impl<E: Engine> AgentMemory<'_, E> {
    /// Registers `consumer` on the event topic, from its first entry
    /// (`true`) or from now on; registering again changes nothing. Until a
    /// consumer is registered, the topic's entries are kept (and
    /// [`AgentMemory::trim_events`] removes none).
    ///
    /// # Errors
    /// An outbox error.
    pub fn register_consumer(&self, consumer: &str, from_start: bool) -> Result<(), MemoryError> {
        let start = if from_start {
            Start::Beginning
        } else {
            Start::End
        };
        self.outbox.register(EVENT_TOPIC, consumer, start)?;
        Ok(())
    }

    /// Up to `max` events of the topic the consumer holding `lease` has
    /// not finished, oldest first, each read from `am.events`. Delivered
    /// again (at least once) until finished: process them idempotently.
    ///
    /// # Errors
    /// [`MemoryError::Inconsistent`] for an entry whose event is not
    /// stored ([`Inconsistency::EventNotStored`]); an outbox or store error.
    pub fn new_events(&self, lease: &Lease, max: usize) -> Result<Vec<NewEvent>, MemoryError> {
        let deliveries = self.outbox.poll(lease, &self.topic, max)?;
        let mut tx = self.store.begin();
        deliveries
            .into_iter()
            .map(|d| {
                let key = d.entry.key;
                let bytes = tx
                    .snapshot_get_in(&self.events, key.as_bytes())?
                    .ok_or_else(|| MemoryError::Inconsistent {
                        key: key.clone(),
                        problem: Inconsistency::EventNotStored,
                    })?;
                Ok(NewEvent {
                    position: d.position,
                    event: Self::read_row(&mut tx, EVENTS, key.as_bytes(), bytes, false)?,
                })
            })
            .collect()
    }

    /// Marks every event of the topic through `position` finished for
    /// the consumer holding `lease`, in `tx`: commit it with what was made
    /// of the events (segments, grips), so that both are kept or neither.
    ///
    /// # Errors
    /// A lease no longer held, an outbox or store error.
    pub fn finish_events(
        &self,
        tx: &mut Tx<'_, E>,
        lease: &Lease,
        position: Position,
    ) -> Result<(), MemoryError> {
        self.outbox.ack_through(tx, lease, position)?;
        Ok(())
    }

    /// Deletes the topic's entries every registered consumer has finished
    /// and that were pushed at least `retention_ms` ago; returns how many.
    ///
    /// # Errors
    /// An outbox error (trimming resumes when called again).
    pub fn trim_events(&self, retention_ms: u64) -> Result<u64, MemoryError> {
        Ok(self.outbox.trim(EVENT_TOPIC, retention_ms, None)?.entries)
    }
}

/// Where the segmenter ([`segments`]) starts a new segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SegmentRule {
    /// After a silence longer than this (milliseconds).
    pub gap_ms: u64,
    /// Before the event that would make more than this many.
    pub max_events: usize,
    /// Before the event whose text would take the segment's text past
    /// this many bytes.
    pub max_text_bytes: usize,
}

impl Default for SegmentRule {
    /// The original's segmenter: 30 minutes of silence, about 4,000 tokens
    /// (16 KiB of text); and at most 64 events, so that a segment of
    /// short turns stays small too.
    fn default() -> Self {
        Self {
            gap_ms: 30 * 60 * 1_000,
            max_events: 64,
            max_text_bytes: 16 * 1_024,
        }
    }
}

/// Splits `events` (in time order) into segments, as the design's
/// segmenter does, by `rule`: a segment holds at least one event, however
/// long, and a bounded number of them, so a segment node built from one
/// (a bullet and a grip per turn or pair) stays within the value limit
/// whatever the conversation. Returns each segment's range of indexes into
/// `events`.
///
/// ```
/// use strata_agent_memory::{Event, EventType, SegmentRule, segments};
/// let at = |ms: u64, text: &str| Event::new("", "s", ms, EventType::UserMessage, "user", text);
/// // A silence of an hour, then three events of which the last would
/// // pass 10 bytes.
/// let events = [at(0, "hello"), at(3_600_001, "abc"), at(3_600_002, "defg"), at(3_600_003, "hijk")];
/// let rule = SegmentRule { max_text_bytes: 10, ..SegmentRule::default() };
/// assert_eq!(segments(&events, rule), [0..1, 1..3, 3..4]);
/// ```
pub fn segments(events: &[Event], rule: SegmentRule) -> Vec<Range<usize>> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut bytes = 0usize;
    for (i, e) in events.iter().enumerate() {
        if i > start {
            let silence = e.timestamp_ms.saturating_sub(events[i - 1].timestamp_ms);
            if silence > rule.gap_ms
                || i - start >= rule.max_events
                || bytes.saturating_add(e.text.len()) > rule.max_text_bytes
            {
                out.push(start..i);
                start = i;
                bytes = 0;
            }
        }
        bytes = bytes.saturating_add(e.text.len());
    }
    if start < events.len() {
        out.push(start..events.len());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::{Event, Range, SegmentRule, segments};

    fn at(ms: u64, len: usize) -> Event {
        Event {
            event_type: crate::EventType::UserMessage,
            metadata: std::collections::BTreeMap::new(),
            agent: None,
            event_id: String::new(),
            session_id: "s".into(),
            timestamp_ms: ms,
            role: "user".into(),
            text: "x".repeat(len),
        }
    }

    fn rule(gap_ms: u64, max_events: usize, max_text_bytes: usize) -> SegmentRule {
        SegmentRule {
            gap_ms,
            max_events,
            max_text_bytes,
        }
    }

    #[test]
    fn segments_split_on_silence_count_and_size() {
        assert!(segments(&[], rule(10, 10, 10)).is_empty());
        // Exactly the gap is no split; one more millisecond is.
        let e = [at(0, 1), at(10, 1), at(21, 1)];
        assert_eq!(segments(&e, rule(10, 10, 100)), [0..2, 2..3]);
        // Exactly the budget fits; one byte more starts a new segment.
        let e = [at(0, 4), at(1, 6), at(2, 1), at(3, 9)];
        assert_eq!(segments(&e, rule(100, 10, 10)), [0..2, 2..4]);
        // An event alone over the budget is a segment of its own.
        let e = [at(0, 2), at(1, 50), at(2, 2)];
        assert_eq!(segments(&e, rule(100, 10, 10)), [0..1, 1..2, 2..3]);
        // Events without text: the count bounds them.
        let e: Vec<Event> = (0..7).map(|i| at(i, 0)).collect();
        assert_eq!(segments(&e, rule(100, 3, 10)), [0..3, 3..6, 6..7]);
        // Events out of order (a clock step back) are no silence.
        let e = [at(100, 1), at(50, 1)];
        assert_eq!(
            segments(&e, rule(10, 10, 10)),
            vec![Range { start: 0, end: 2 }]
        );
        assert_eq!(
            SegmentRule::default(),
            rule(1_800_000, 64, 16_384),
            "the original's thresholds"
        );
    }
}
