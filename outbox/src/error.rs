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
    /// A row of the outbox does not read as its layout says.
    #[error("corrupt outbox row: {0}")]
    Corrupt(String),
}
