//! `put_event` when the engine's answer is lost: the commit applied or
//! not, the caller told the outcome is unknown (never "written" or "a
//! duplicate"), and a resend of the same event settles it with exactly one
//! event and one entry in the events topic.

use std::sync::atomic::{AtomicU8, Ordering};

use strata_engine::{Commit, CommitError, CommitInfo, Engine, EngineError, MemEngine, ReadError};
use strata_schemas::agent_memory::{AgentMemory, MemoryError};

use crate::agent_memory::{T, event, options, outbox_on, specs};
use crate::store_on;

/// What the next commit's answer does.
const ANSWER: u8 = 0;
const APPLY_THEN_LOSE: u8 = 1;
const LOSE_UNAPPLIED: u8 = 2;

/// `MemEngine` whose next commit can be answered with an unknown outcome,
/// applied or not.
struct LostReply {
    inner: MemEngine,
    next: AtomicU8,
}

impl Engine for LostReply {
    type Snapshot<'e> = strata_engine::MemSnapshot<'e>;

    fn keyspaces(&self) -> &strata_engine::Keyspaces {
        self.inner.keyspaces()
    }

    fn snapshot(&self) -> Result<Self::Snapshot<'_>, ReadError> {
        self.inner.snapshot()
    }

    fn commit(&self, commit: Commit) -> Result<CommitInfo, CommitError> {
        let lost = || strata_engine::implement::GroupFailed::unknown(&"the reply was lost");
        match self.next.swap(ANSWER, Ordering::SeqCst) {
            APPLY_THEN_LOSE => {
                self.inner.commit(commit)?;
                Err(lost())
            }
            LOSE_UNAPPLIED => Err(lost()),
            _ => self.inner.commit(commit),
        }
    }

    fn sync(&self) -> Result<u64, EngineError> {
        self.inner.sync()
    }

    fn durable_version(&self) -> u64 {
        self.inner.durable_version()
    }

    fn last_version(&self) -> u64 {
        self.inner.last_version()
    }
}

fn is_unknown(e: &MemoryError) -> bool {
    matches!(e, MemoryError::Store(s) if s.is_outcome_unknown())
}

#[test]
fn a_lost_reply_is_unknown_and_a_resend_settles_it_once() {
    let engine = LostReply {
        inner: MemEngine::open(specs()).unwrap(),
        next: AtomicU8::new(ANSWER),
    };
    let (store, clock) = store_on(engine, options());
    let outbox = outbox_on(&store, &clock, 7);
    let memory = AgentMemory::open(&store, &outbox).unwrap();
    let topic_entries = || {
        outbox
            .topics()
            .unwrap()
            .into_iter()
            .map(|t| t.entries)
            .sum::<u64>()
    };
    for (n, answer) in [(1, APPLY_THEN_LOSE), (2, LOSE_UNAPPLIED)] {
        let e = event(n, T + u64::from(n));
        store.engine().next.store(answer, Ordering::SeqCst);
        let err = memory.put_event(&e).unwrap_err();
        assert!(is_unknown(&err), "event {n}: {err}");
        // The resend: written now only if the first did not apply.
        let written = memory.put_event(&e).unwrap();
        assert_eq!(written, answer == LOSE_UNAPPLIED, "event {n}");
        assert_eq!(memory.event(&e.event_id).unwrap(), Some(e.clone()));
        // And again: a duplicate.
        assert!(!memory.put_event(&e).unwrap(), "event {n}");
        assert_eq!(topic_entries(), u64::from(n), "after event {n}");
    }
}
