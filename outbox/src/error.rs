//! The outbox's errors.

use strata_store::StoreError;
use thiserror::Error;

use crate::Position;

/// What went wrong in an outbox operation. Nothing is written when one is
/// returned, but for [`OutboxError::Store`] wrapping an unknown commit
/// outcome.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum OutboxError {
    /// The store refused or failed (a limit, a conflict, the engine).
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The store's options did not declare the outbox's spaces
    /// ([`Outbox::declare`](crate::Outbox::declare)).
    #[error(
        "the store was opened without the outbox's spaces (call Outbox::declare on its options)"
    )]
    NotDeclared,
    /// A topic or consumer name is empty or longer than 64 bytes.
    #[error("bad {what} name {name:?}: 1 to 64 bytes")]
    BadName {
        /// `"topic"` or `"consumer"`.
        what: &'static str,
        /// The name given.
        name: String,
    },
    /// The consumer is not registered on the topic.
    #[error("consumer {consumer:?} is not registered on topic {topic:?}")]
    UnknownConsumer {
        /// The topic named.
        topic: String,
        /// The consumer named, not registered on it.
        consumer: String,
    },
    /// Another worker holds the consumer's lease.
    #[error("the lease of {consumer:?} on {topic:?} is held by {holder:?} until {until_ms}")]
    LeaseHeld {
        /// The topic of the consumer asked for.
        topic: String,
        /// The consumer whose lease is held.
        consumer: String,
        /// Who holds it.
        holder: String,
        /// Until when, in the clock's milliseconds.
        until_ms: u64,
    },
    /// The lease used was taken over or has expired: a stale worker's
    /// acknowledgement is refused.
    #[error("the lease (token {token}) is no longer held: taken over or expired")]
    StaleLease {
        /// The token of the lease used.
        token: u64,
    },
    /// No entry at this position (already trimmed, or never written; for
    /// `ack_through`, a position after the last commit).
    #[error("no entry at {0}")]
    NoEntry(Position),
    /// The entry was already acknowledged (or dead-lettered) by this
    /// consumer: the transaction acknowledging it again must not commit.
    #[error("the entry at {0} is already finished")]
    AlreadyFinished(Position),
    /// A row of the outbox does not read as its layout says: damaged, or
    /// written by something else than this crate.
    #[error(
        "the outbox's {row} at key {} does not read",
        strata_keys::show::show_key(key)
    )]
    Corrupt {
        /// What the row is in the outbox's layout.
        row: OutboxRow,
        /// The row's key.
        key: Vec<u8>,
        /// What the decoder said, where it said something.
        #[source]
        source: Option<Box<dyn std::error::Error + Send + Sync>>,
    },
    /// An entry could not be encoded into its envelope (nothing was
    /// written).
    #[error("the entry could not be encoded")]
    Encode(#[source] strata_codec::EncodeError),
    /// A worker's handler panicked; the worker stopped at the entry it was
    /// handling (which stays unacknowledged).
    #[error("the worker's handler panicked")]
    HandlerPanicked,
}

/// What a damaged row is, in the outbox's layout
/// ([`OutboxError::Corrupt`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum OutboxRow {
    /// An entry's key (its position).
    EntryKey,
    /// An entry's value (push time, ordering key, envelope).
    EntryValue,
    /// A consumer's mark of an entry finished beyond its checkpoint.
    DoneMark,
    /// A consumer's record of an entry's failed attempts.
    AttemptRecord,
    /// A consumer's checkpoint.
    Checkpoint,
    /// A consumer's lease.
    Lease,
    /// A dead letter (its key, its record, or the entry it keeps).
    DeadLetter,
}

impl std::fmt::Display for OutboxRow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::EntryKey => "entry key",
            Self::EntryValue => "entry value",
            Self::DoneMark => "done mark",
            Self::AttemptRecord => "attempt record",
            Self::Checkpoint => "checkpoint",
            Self::Lease => "lease",
            Self::DeadLetter => "dead letter",
        })
    }
}

impl OutboxError {
    /// The store's error inside, if this is one.
    pub fn store_error(&self) -> Option<&StoreError> {
        match self {
            Self::Store(e) => Some(e),
            _ => None,
        }
    }

    /// Whether a commit conflicted, which a retry may resolve.
    pub fn is_conflict(&self) -> bool {
        self.store_error().is_some_and(StoreError::is_conflict)
    }

    /// Whether a commit's outcome is unknown: it may or may not have
    /// applied (a push may be there or not; resend only what is safe to
    /// apply twice).
    ///
    /// ```
    /// use strata_engine::CommitError;
    /// use strata_outbox::OutboxError;
    /// use strata_store::StoreError;
    ///
    /// let lost = OutboxError::Store(StoreError::Commit(CommitError::OutcomeUnknown("reply lost".into())));
    /// assert!(lost.is_outcome_unknown() && !lost.is_conflict());
    /// assert!(!OutboxError::NotDeclared.is_outcome_unknown());
    /// ```
    pub fn is_outcome_unknown(&self) -> bool {
        self.store_error()
            .is_some_and(StoreError::is_outcome_unknown)
    }

    /// [`StoreError::is_transient`] of the store's error inside: a failure
    /// to reach the engine that a later try may not meet.
    pub fn is_transient(&self) -> bool {
        self.store_error().is_some_and(StoreError::is_transient)
    }
}

#[cfg(test)]
mod tests {
    use strata_engine::CommitError;

    use super::*;

    /// A real conflict: predicate 0 (a key that must exist) did not hold.
    fn conflict_error() -> CommitError {
        use strata_engine::{KeyspaceSpec, Keyspaces, Predicate, Profile};
        let spaces = Keyspaces::new(vec![KeyspaceSpec::new("a", Profile::General)]).unwrap();
        CommitError::Conflict {
            index: 0,
            predicate: Predicate::Exists {
                ks: spaces.get("a").unwrap(),
                key: b"k".to_vec(),
            },
        }
    }

    #[test]
    fn outcomes_and_conflicts_are_told_apart() {
        let lost = OutboxError::Store(StoreError::Commit(CommitError::OutcomeUnknown(
            "lost".into(),
        )));
        assert!(lost.is_outcome_unknown() && !lost.is_conflict());
        let conflict = OutboxError::Store(StoreError::Commit(conflict_error()));
        assert!(conflict.is_conflict() && !conflict.is_outcome_unknown());
        let stale = OutboxError::StaleLease { token: 3 };
        assert!(!stale.is_conflict() && !stale.is_outcome_unknown());
        assert!(stale.store_error().is_none() && lost.store_error().is_some());
    }
}
