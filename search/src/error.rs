//! Errors of the search index.

use strata_outbox::{OutboxError, Position};

use strata_store::StoreError;

/// Why an index operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SearchError {
    /// An index or field name that is empty, longer than 64 bytes, or has
    /// characters other than ASCII letters, digits, `-`, `_` and `.`.
    #[error("bad name {name:?}: use 1 to 64 ASCII letters, digits, '-', '_' or '.'")]
    BadName {
        /// The name given.
        name: String,
    },
    /// The mapping is inconsistent (see [`MappingError`]).
    #[error(transparent)]
    Mapping(#[from] MappingError),
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
    #[error("the index's commit payload {found:?} is not a strata-search checkpoint")]
    Payload {
        /// The payload found.
        found: String,
    },
    /// The index directory's `CURRENT` file does not name a generation
    /// (`gen-N`): damaged, or not an index directory of this crate.
    #[error("the index directory's CURRENT file holds {found:?}, not a generation")]
    Current {
        /// What the file holds.
        found: String,
    },
    /// An index of an older format of this crate (FNV-1a hashes in
    /// `_hash`): rebuild it ([`Indexer::open_rebuilt`](crate::Indexer::open_rebuilt)).
    #[error("an index of an older format of strata-search (FNV-1a hashes): rebuild it")]
    OlderFormat,
    /// A query that does not parse, or names what the index lacks (see
    /// [`QueryError`]).
    #[error(transparent)]
    Query(#[from] QueryError),
    /// A row's key does not read as the index's key type (the key type
    /// changed, or the row is damaged).
    #[error("a key does not read as {key_type}")]
    Key {
        /// The key type's name.
        key_type: &'static str,
        /// What the key layer said.
        #[source]
        source: strata_keys::KeyError,
    },
    /// A row's value (or its envelope) does not decode: damaged, or written
    /// by a newer schema.
    #[error("a value of {key_type} does not decode")]
    Value {
        /// The key type's name.
        key_type: &'static str,
        /// What the codec said.
        #[source]
        source: strata_codec::DecodeError,
    },
    /// A value could not be encoded (to hash it as the store stores it).
    #[error("a value could not be encoded")]
    Encode(#[source] strata_codec::EncodeError),
    /// A document of the index lacks one of the fields every document of
    /// this crate has (the index was not made by this crate, or is
    /// damaged).
    #[error("a document of the index has no {field} field")]
    Document {
        /// The field missing.
        field: &'static str,
    },
    /// The index's schema lacks a field every index of this crate has: not
    /// an index of this crate.
    #[error("not a strata-search index: its schema has no {field} field")]
    Schema {
        /// The field missing.
        field: &'static str,
    },
    /// The outbox failed.
    #[error(transparent)]
    Outbox(#[from] OutboxError),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// tantivy failed (I/O in the index directory among others).
    #[error("tantivy failed")]
    Tantivy(#[from] tantivy::TantivyError),
    /// The index's files are damaged: tantivy panicked reading them (it
    /// does on some damaged segment files: a length read from the file
    /// past its end, an assertion on an offset). The panic was caught;
    /// the index is derived from the store, so rebuild it
    /// ([`Indexer::open_rebuilt`](crate::Indexer::open_rebuilt), or
    /// `strata search DB rebuild NAME`).
    #[error("the index's files are damaged (rebuild the index from the store)")]
    Damaged(#[source] strata_engine::BackendPanic),
    /// Files of the index fail their checksums (tantivy's CRC-32 in each
    /// file's footer), checked when it is opened (see
    /// [`IndexerConfig::verify_at_open`](crate::IndexerConfig::verify_at_open)):
    /// damaged. Rebuild the index from the store
    /// ([`Indexer::open_rebuilt`](crate::Indexer::open_rebuilt), or
    /// `strata search DB rebuild NAME`).
    #[error(
        "the index's files {files:?} fail their checksums (damaged: rebuild the index from the store)"
    )]
    Checksum {
        /// The damaged files, relative to the generation's directory.
        files: Vec<std::path::PathBuf>,
    },
    /// The index's `meta.json` (which carries no checksum) gives a segment
    /// a document count its own files do not hold: damaged. Rebuild the
    /// index from the store ([`Indexer::open_rebuilt`](crate::Indexer::open_rebuilt)).
    #[error(
        "the index's meta.json gives segment {segment} {said} {what}, its files hold {found} (damaged: rebuild the index from the store)"
    )]
    Counts {
        /// The segment's id.
        segment: String,
        /// Which count: `"documents"` or `"live documents"`.
        what: &'static str,
        /// The count `meta.json` gives.
        said: u64,
        /// The count the segment's files hold.
        found: u64,
    },
    /// A file-system operation on the index directory failed.
    #[error("an operation on the index directory failed")]
    Io(#[from] std::io::Error),
    /// An [`IndexRunner`](crate::IndexRunner) asked for a search had
    /// stopped (its error comes from `shutdown`) or panicked.
    #[error("the index runner {0}")]
    Stopped(&'static str),
}

/// What is inconsistent in an index's mapping ([`SearchError::Mapping`]).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum MappingError {
    /// A tokenizer this crate does not register.
    #[error("unknown tokenizer {tokenizer:?} for field {field:?}")]
    UnknownTokenizer {
        /// The field declared with it.
        field: String,
        /// The tokenizer named.
        tokenizer: String,
    },
    /// A boost that is not a positive number.
    #[error("boost {boost} of field {field:?} is not a positive number")]
    BadBoost {
        /// The field declared with it.
        field: String,
        /// The boost given.
        boost: f32,
    },
    /// A field name starting with `_`, which this crate reserves.
    #[error("field names starting with '_' are reserved: {field:?}")]
    ReservedName {
        /// The name declared.
        field: String,
    },
    /// A field declared twice.
    #[error("field {field:?} declared twice")]
    DeclaredTwice {
        /// The name declared twice.
        field: String,
    },
    /// A document names a field the mapping did not declare.
    #[error("a document of index {index:?} names the undeclared {kind} field {field:?}")]
    UndeclaredField {
        /// The index's name.
        index: String,
        /// `text` or `string`.
        kind: &'static str,
        /// The field named.
        field: String,
    },
    /// A string field's value is longer than one term may be (tantivy's
    /// 65,530 bytes): it could never be matched, so the document is not
    /// made (the change is dead-lettered, a rebuild leaves the row out).
    #[error(
        "a document of index {index:?} has a string value of {bytes} bytes in field {field:?}, past the 65,530 of one term"
    )]
    StringTooLong {
        /// The index's name.
        index: String,
        /// The string field.
        field: String,
        /// The value's length.
        bytes: usize,
    },
    /// A document has a time on an index declared without one.
    #[error("a document of index {index:?} has a time; declare it with `with_time`")]
    UndeclaredTime {
        /// The index's name.
        index: String,
    },
    /// A write of the index's own rows where a service's topic feeds it.
    #[error(
        "index {index:?} is fed by topic {topic:?}: write its rows with the store and push to that topic"
    )]
    FedByTopic {
        /// The index's name.
        index: String,
        /// The topic feeding it.
        topic: String,
    },
}

/// Why a query was refused ([`SearchError::Query`]).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum QueryError {
    /// The text does not parse as tantivy's query syntax, or names an
    /// unknown field.
    #[error("query {text:?} does not parse")]
    Parse {
        /// The query text.
        text: String,
        /// What tantivy's parser said.
        #[source]
        source: tantivy::query::QueryParserError,
    },
    /// A filter on a string field the index does not declare.
    #[error("no string field {field:?}")]
    NoStringField {
        /// The field named.
        field: String,
    },
    /// A time range on an index without a time.
    #[error("this index has no time")]
    NoTime,
    /// Parentheses nested deeper than [`MAX_QUERY_NESTING`]: tantivy's
    /// parser recurses once per level, and a query of thousands would
    /// overflow the stack and abort the process.
    #[error("query nests parentheses {depth} deep, more than {MAX_QUERY_NESTING}")]
    TooDeep {
        /// How deep the text nests (counted up to one past the bound).
        depth: usize,
    },
}

/// The deepest nesting of parentheses a query's text may have (see
/// [`QueryError::TooDeep`]).
pub const MAX_QUERY_NESTING: usize = 64;

/// Refuses query text nested deeper than [`MAX_QUERY_NESTING`], before
/// tantivy's recursive parser sees it. Counts every `(` not yet closed,
/// inside quotes too (so a phrase of many `(` may be refused: cheap, and
/// never too lenient).
pub(crate) fn check_nesting(text: &str) -> Result<(), QueryError> {
    let mut depth = 0usize;
    for b in text.bytes() {
        match b {
            b'(' => {
                depth += 1;
                if depth > MAX_QUERY_NESTING {
                    return Err(QueryError::TooDeep { depth });
                }
            }
            b')' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    Ok(())
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
    /// assert!(!SearchError::Query(strata_search::QueryError::NoTime).is_outcome_unknown());
    /// ```
    pub fn is_outcome_unknown(&self) -> bool {
        self.store_error()
            .is_some_and(StoreError::is_outcome_unknown)
    }

    /// [`StoreError::is_transient`] of the store's error inside, directly
    /// or through the outbox: a failure to reach the engine that a later
    /// try may not meet.
    pub fn is_transient(&self) -> bool {
        self.store_error().is_some_and(StoreError::is_transient)
    }
}

/// Checks every file of `index` against its checksum:
/// [`SearchError::Checksum`] names the damaged ones.
pub(crate) fn check_files(index: &tantivy::Index) -> Result<(), SearchError> {
    use tantivy::directory::error::OpenReadError;
    use tantivy::index::SegmentComponent as C;
    let directory = index.directory();
    // The files the last commit names (a segment's components, its
    // current delete file): not `meta.json` (JSON, written whole), nor a
    // file a killed writer left half written for a commit that never
    // happened. A footer that does not read is damage too; a component a
    // segment does not have (no deletes, no positions) is not.
    let components = [
        C::Postings,
        C::Positions,
        C::Terms,
        C::Store,
        C::FastFields,
        C::FieldNorms,
        C::Delete,
    ];
    let mut files = Vec::new();
    for segment in index.searchable_segment_metas()? {
        for component in &components {
            if *component == C::Delete && segment.delete_opstamp().is_none() {
                continue;
            }
            let path = segment.relative_path(component.clone());
            match directory.validate_checksum(&path) {
                Ok(true) | Err(OpenReadError::FileDoesNotExist(_)) => {}
                Ok(false) | Err(_) => files.push(path),
            }
        }
    }
    if !files.is_empty() {
        files.sort();
        return Err(SearchError::Checksum { files });
    }
    check_counts(index)
}

/// Checks the document counts `meta.json` gives each segment against the
/// segment's own files, whose checksums passed: its fast-field file
/// records how many documents it has, its delete file which are deleted.
/// `meta.json` carries no checksum: a count changed in it would otherwise
/// be read as written (a wrong size, searches past a segment's end).
fn check_counts(index: &tantivy::Index) -> Result<(), SearchError> {
    use tantivy::Directory as _;
    use tantivy::index::SegmentComponent as C;
    let directory = index.directory();
    let open = |path: std::path::PathBuf| {
        directory
            .open_read(&path)
            .map_err(|e| SearchError::Tantivy(e.into()))
    };
    for segment in index.searchable_segment_metas()? {
        let mismatch = |what, said: u32, found: u32| SearchError::Counts {
            segment: segment.id().uuid_string(),
            what,
            said: u64::from(said),
            found: u64::from(found),
        };
        let fast = open(segment.relative_path(C::FastFields))?;
        let documents = tantivy::columnar::ColumnarReader::open(fast)?.num_docs();
        if documents != segment.max_doc() {
            return Err(mismatch("documents", segment.max_doc(), documents));
        }
        if segment.delete_opstamp().is_some() {
            let bytes = open(segment.relative_path(C::Delete))?.read_bytes()?;
            let alive = tantivy::fastfield::AliveBitSet::open(bytes).num_alive_docs();
            let alive = u32::try_from(alive).unwrap_or(u32::MAX);
            if alive != segment.num_docs() {
                return Err(mismatch("live documents", segment.num_docs(), alive));
            }
        }
    }
    Ok(())
}

/// Runs `f`, which reads the index's files through tantivy, turning a
/// panic of tantivy's on damaged files into [`SearchError::Damaged`]
/// (`what` says what was being done).
pub(crate) fn reading<T>(
    what: &'static str,
    f: impl FnOnce() -> Result<T, SearchError>,
) -> Result<T, SearchError> {
    strata_engine::BackendPanic::catch(what, f).map_err(SearchError::Damaged)?
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
