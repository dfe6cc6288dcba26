//! The document mapping of one indexed key type: its tantivy fields and
//! the function from a typed row to a document.

use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;

use strata_keys::Key;
use tantivy::schema::{
    FAST, Field, INDEXED, IndexRecordOption, STORED, STRING, Schema, TextFieldIndexing, TextOptions,
};

use crate::{MappingError, SearchError};

/// The fields of one document, as a mapping makes it from a row.
///
/// Field names and values may borrow from the row's value (`'a`), so a
/// mapping that passes `&value.text` copies nothing: the text is copied
/// once, into tantivy's document. Owned `String`s work as well.
///
/// ```
/// use strata_search::Document;
///
/// struct Note { text: String, kind: String }
/// let note = Note { text: "hello world".into(), kind: "memo".into() };
/// let doc = Document::new().text("text", &note.text).string("kind", note.kind.as_str());
/// # let _ = doc;
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Document<'a> {
    pub(crate) text: Vec<(&'a str, Cow<'a, str>)>,
    pub(crate) strings: Vec<(&'a str, Cow<'a, str>)>,
    pub(crate) time_ms: Option<u64>,
}

impl<'a> Document<'a> {
    /// An empty document.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds `value` to the text field `field` (tokenized, searched).
    #[must_use]
    pub fn text(mut self, field: &'a str, value: impl Into<Cow<'a, str>>) -> Self {
        self.text.push((field, value.into()));
        self
    }

    /// Adds `value` to the string field `field` (one exact term, for
    /// filters).
    #[must_use]
    pub fn string(mut self, field: &'a str, value: impl Into<Cow<'a, str>>) -> Self {
        self.strings.push((field, value.into()));
        self
    }

    /// Sets the document's time (milliseconds), for time ranges.
    #[must_use]
    pub fn time_ms(mut self, ms: u64) -> Self {
        self.time_ms = Some(ms);
        self
    }
}

/// A text field: its tokenizer and its boost in queries.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct TextField {
    pub(crate) name: String,
    pub(crate) tokenizer: String,
    pub(crate) boost: f32,
}

type MapFn<K> = dyn for<'a> Fn(&K, &'a <K as Key>::Value) -> Document<'a> + Send + Sync;

/// The stored field with each document's body hash. An index whose
/// documents hold another hash names it otherwise (FNV-1a in `_hash`
/// before 2026-11-27), so it cannot be read as this one.
pub(crate) const HASH_FIELD: &str = "_xxh3";

/// How rows of key type `K` become documents of the index `name`: declared
/// once, before the indexer opens.
///
/// Fields beyond the ones declared here are built in: `_key` (the store
/// key's bytes, indexed and stored: it identifies the row), `_xxh3` (the
/// XXH3-64 hash of the value's body the document was made from, to detect
/// staleness) and
/// `_version` (the version of the commit that wrote it). Names starting
/// with `_` are reserved.
pub struct IndexSpec<K: Key> {
    pub(crate) name: String,
    pub(crate) text: Vec<TextField>,
    pub(crate) strings: Vec<String>,
    pub(crate) time: bool,
    pub(crate) map: Arc<MapFn<K>>,
    pub(crate) feed: Option<Feed<K>>,
    _key: PhantomData<fn() -> K>,
}

/// The keys of the rows an entry names, from the entry's envelope.
pub(crate) type RowsFn<K> = dyn Fn(&[u8]) -> Result<Vec<K>, String> + Send + Sync;

/// A service's own topic feeding an index: each entry names the rows it
/// changed (see [`IndexSpec::fed_by`]).
pub(crate) struct Feed<K> {
    pub(crate) topic: String,
    pub(crate) rows: Arc<RowsFn<K>>,
}

impl<K> Clone for Feed<K> {
    fn clone(&self) -> Self {
        Self {
            topic: self.topic.clone(),
            rows: self.rows.clone(),
        }
    }
}

impl<K: Key> Clone for IndexSpec<K> {
    fn clone(&self) -> Self {
        Self {
            name: self.name.clone(),
            text: self.text.clone(),
            strings: self.strings.clone(),
            time: self.time,
            map: self.map.clone(),
            feed: self.feed.clone(),
            _key: PhantomData,
        }
    }
}

impl<K: Key> fmt::Debug for IndexSpec<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("IndexSpec")
            .field("name", &self.name)
            .field("key", &K::NAME)
            .field("text", &self.text)
            .field("strings", &self.strings)
            .field("time", &self.time)
            .field("fed_by", &self.feed.as_ref().map(|f| f.topic.as_str()))
            .finish_non_exhaustive()
    }
}

impl<K: Key> IndexSpec<K> {
    /// The index `name` (letters, digits, `-`, `_` and `.`; it names the
    /// outbox topic `search.<name>` and the consumer) of rows of `K`,
    /// mapped by `map`.
    ///
    /// The documents `map` returns may borrow from the value it is given.
    /// Write the closure in the call, or as a `fn` (a closure kept in a
    /// variable first is typed for one borrow only, and is refused).
    ///
    /// # Errors
    /// [`SearchError::BadName`].
    pub fn new(
        name: &str,
        map: impl for<'a> Fn(&K, &'a K::Value) -> Document<'a> + Send + Sync + 'static,
    ) -> Result<Self, SearchError> {
        check_name(name)?;
        Ok(Self {
            name: name.to_owned(),
            text: Vec::new(),
            strings: Vec::new(),
            time: false,
            map: Arc::new(map),
            feed: None,
            _key: PhantomData,
        })
    }

    /// Declares a text field with tantivy's `default` tokenizer (split on
    /// non-alphanumerics, lower-cased, very long tokens dropped) and
    /// `boost` (1.0 for none).
    ///
    /// # Errors
    /// [`SearchError::BadName`]; [`SearchError::Mapping`] for a name
    /// declared twice.
    pub fn text(self, field: &str, boost: f32) -> Result<Self, SearchError> {
        self.text_with(field, "default", boost)
    }

    /// Declares a text field with one of tantivy's built-in tokenizers
    /// (`default`, `raw`, `en_stem`, `whitespace`).
    ///
    /// # Errors
    /// As [`IndexSpec::text`], and [`SearchError::Mapping`] for another
    /// tokenizer.
    pub fn text_with(
        mut self,
        field: &str,
        tokenizer: &str,
        boost: f32,
    ) -> Result<Self, SearchError> {
        self.check_new_field(field)?;
        if !["default", "raw", "en_stem", "whitespace"].contains(&tokenizer) {
            return Err(MappingError::UnknownTokenizer {
                field: field.to_owned(),
                tokenizer: tokenizer.to_owned(),
            }
            .into());
        }
        if !boost.is_finite() || boost <= 0.0 {
            return Err(MappingError::BadBoost {
                field: field.to_owned(),
                boost,
            }
            .into());
        }
        self.text.push(TextField {
            name: field.to_owned(),
            tokenizer: tokenizer.to_owned(),
            boost,
        });
        Ok(self)
    }

    /// Declares a string field: each value one exact term, for filters.
    ///
    /// # Errors
    /// As [`IndexSpec::text`].
    pub fn string(mut self, field: &str) -> Result<Self, SearchError> {
        self.check_new_field(field)?;
        self.strings.push(field.to_owned());
        Ok(self)
    }

    /// Gives documents a time (a fast `u64` field of milliseconds), for
    /// time ranges.
    #[must_use]
    pub fn with_time(mut self) -> Self {
        self.time = true;
        self
    }

    /// The index's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    fn check_new_field(&self, field: &str) -> Result<(), SearchError> {
        check_name(field)?;
        if field.starts_with('_') {
            return Err(MappingError::ReservedName {
                field: field.to_owned(),
            }
            .into());
        }
        if self.text.iter().any(|t| t.name == field) || self.strings.iter().any(|s| s == field) {
            return Err(MappingError::DeclaredTwice {
                field: field.to_owned(),
            }
            .into());
        }
        Ok(())
    }

    /// The tantivy schema and its fields.
    pub(crate) fn schema(&self) -> (Schema, Fields) {
        let mut b = Schema::builder();
        let key = b.add_bytes_field("_key", INDEXED | STORED);
        let hash = b.add_u64_field(HASH_FIELD, STORED);
        let version = b.add_u64_field("_version", STORED);
        let time = self
            .time
            .then(|| b.add_u64_field("_time", INDEXED | STORED | FAST));
        let text = self
            .text
            .iter()
            .map(|t| {
                let indexing = TextFieldIndexing::default()
                    .set_tokenizer(&t.tokenizer)
                    .set_index_option(IndexRecordOption::WithFreqsAndPositions);
                let options = TextOptions::default()
                    .set_indexing_options(indexing)
                    .set_stored();
                (b.add_text_field(&t.name, options), t.boost)
            })
            .collect();
        let strings = self
            .strings
            .iter()
            .map(|s| b.add_text_field(s, STRING | STORED))
            .collect();
        (
            b.build(),
            Fields {
                key,
                hash,
                version,
                time,
                text,
                strings,
            },
        )
    }
}

/// The tantivy fields of an index, in declaration order.
#[derive(Debug, Clone)]
pub(crate) struct Fields {
    pub(crate) key: Field,
    pub(crate) hash: Field,
    pub(crate) version: Field,
    pub(crate) time: Option<Field>,
    pub(crate) text: Vec<(Field, f32)>,
    pub(crate) strings: Vec<Field>,
}

impl<K: Key> IndexSpec<K> {
    /// Checks the document the mapping makes of `value` at `key` against
    /// the declared fields: every field it names declared, each string
    /// value short enough to be one term, a time only if declared.
    pub(crate) fn check(&self, key: &K, value: &K::Value) -> Result<(), SearchError> {
        self.check_document(&(self.map)(key, value))
    }

    pub(crate) fn check_document(&self, doc: &Document<'_>) -> Result<(), SearchError> {
        let undeclared = |kind: &'static str, name: &str| {
            SearchError::from(MappingError::UndeclaredField {
                index: self.name.clone(),
                kind,
                field: name.to_owned(),
            })
        };
        if let Some((name, _)) = doc
            .text
            .iter()
            .find(|(name, _)| !self.text.iter().any(|t| t.name == *name))
        {
            return Err(undeclared("text", name));
        }
        if let Some((name, _)) = doc
            .strings
            .iter()
            .find(|(name, _)| !self.strings.iter().any(|s| s == name))
        {
            return Err(undeclared("string", name));
        }
        if let Some((name, value)) = doc
            .strings
            .iter()
            .find(|(_, v)| v.len() > tantivy::tokenizer::MAX_TOKEN_LEN)
        {
            return Err(MappingError::StringTooLong {
                index: self.name.clone(),
                field: (*name).to_owned(),
                bytes: value.len(),
            }
            .into());
        }
        if doc.time_ms.is_some() && !self.time {
            return Err(MappingError::UndeclaredTime {
                index: self.name.clone(),
            }
            .into());
        }
        Ok(())
    }
}

pub(crate) fn check_name(name: &str) -> Result<(), SearchError> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
    if ok {
        Ok(())
    } else {
        Err(SearchError::BadName {
            name: name.to_owned(),
        })
    }
}
