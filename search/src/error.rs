//! Errors of the search index.

use strata_outbox::{OutboxError, Position};
use strata_store::StoreError;

/// Why an index operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SearchError {
    /// An index or field name that is empty, longer than 64 bytes, or has
    /// characters other than ASCII letters, digits, `-`, `_` and `.`.
    #[error("bad name {0:?}: use 1 to 64 ASCII letters, digits, '-', '_' or '.'")]
    BadName(String),
    /// The mapping is inconsistent: a field declared twice, a reserved
    /// name, an unknown tokenizer, a document naming an undeclared field,
    /// a time on an index without one.
    #[error("mapping: {0}")]
    Mapping(String),
    /// The index's own checkpoint is behind the outbox consumer's: entries
    /// the outbox considers delivered are missing from the index (its
    /// directory was replaced or restored from an older copy). Open it
    /// with [`Indexer::open_rebuilt`](crate::Indexer::open_rebuilt).
    #[error(
        "the index is at {index} but its outbox consumer has acknowledged up to {outbox}: open it with Indexer::open_rebuilt"
    )]
    Behind {
        /// The position the index committed.
        index: Position,
        /// The consumer's checkpoint in the outbox.
        outbox: Position,
    },
    /// The index on disk was built with another mapping (fields added,
    /// removed or changed, or another version of this crate's reserved
    /// fields): open it with [`Indexer::open_rebuilt`](crate::Indexer::open_rebuilt).
    #[error("index {index:?} was built with another mapping: open it with Indexer::open_rebuilt")]
    MappingChanged {
        /// The index's name.
        index: String,
    },
    /// The index directory holds a commit whose payload is not one this
    /// crate wrote.
    #[error("the index's commit payload {0:?} is not a strata-search checkpoint")]
    Payload(String),
    /// A query that does not parse, or names an unknown field.
    #[error("query: {0}")]
    Query(String),
    /// An entry or a row that does not decode.
    #[error("decode: {0}")]
    Decode(String),
    /// The outbox failed.
    #[error(transparent)]
    Outbox(#[from] OutboxError),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// tantivy failed (I/O in the index directory among others).
    #[error("tantivy: {0}")]
    Tantivy(#[from] tantivy::TantivyError),
    /// A file-system operation on the index directory failed.
    #[error("index directory: {0}")]
    Io(#[from] std::io::Error),
    /// An [`IndexRunner`](crate::IndexRunner) asked for a search had
    /// stopped (its error comes from `shutdown`) or panicked.
    #[error("the index runner {0}")]
    Stopped(&'static str),
}

impl SearchError {
    /// The store's error inside, directly or through the outbox, if this is
    /// one.
    pub fn store_error(&self) -> Option<&StoreError> {
        match self {
            Self::Store(e) => Some(e),
            Self::Outbox(e) => e.store_error(),
            _ => None,
        }
    }

    /// [`StoreError::is_conflict`] of the store's error inside.
    pub fn is_conflict(&self) -> bool {
        self.store_error().is_some_and(StoreError::is_conflict)
    }

    /// [`StoreError::is_outcome_unknown`] of the store's error inside: the
    /// commit may or may not have applied.
    ///
    /// ```
    /// use strata_engine::CommitError;
    /// use strata_outbox::OutboxError;
    /// use strata_search::SearchError;
    /// use strata_store::StoreError;
    ///
    /// let lost = StoreError::Commit(CommitError::OutcomeUnknown("reply lost".into()));
    /// assert!(SearchError::Outbox(OutboxError::Store(lost)).is_outcome_unknown());
    /// assert!(!SearchError::Query("x:".into()).is_outcome_unknown());
    /// ```
    pub fn is_outcome_unknown(&self) -> bool {
        self.store_error()
            .is_some_and(StoreError::is_outcome_unknown)
    }
}

#[cfg(test)]
mod tests {
    use strata_engine::CommitError;

    use super::*;

    #[test]
    fn a_lost_reply_is_found_through_the_outbox_too() {
        let lost = || StoreError::Commit(CommitError::OutcomeUnknown("lost".into()));
        for e in [
            SearchError::Store(lost()),
            SearchError::Outbox(OutboxError::Store(lost())),
        ] {
            assert!(e.is_outcome_unknown() && !e.is_conflict(), "{e:?}");
            assert!(e.store_error().is_some_and(StoreError::is_outcome_unknown));
        }
        let other = SearchError::Outbox(OutboxError::NotDeclared);
        assert!(!other.is_conflict() && !other.is_outcome_unknown());
        assert!(other.store_error().is_none());
        assert!(SearchError::Stopped("stopped").store_error().is_none());
    }
}
