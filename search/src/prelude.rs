//! What a service on the store, the outbox and a search index uses, in
//! one import: `use strata_search::prelude::*;` (the outbox's prelude, the
//! store's in it, and the search types).

pub use strata_outbox::prelude::*;

pub use crate::{
    Document, IndexRunner, IndexSpec, Indexer, IndexerConfig, Location, Query, SearchError,
};
