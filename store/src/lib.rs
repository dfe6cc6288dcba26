//! The typed store of Strata: typed keys and value envelopes over any
//! engine of the contract, with serializable transactions, exact limits and
//! quotas, and TTL.
//!
//! ```
//! use strata_codec::{value, Limits};
//! use strata_engine::MemEngine;
//! use strata_keys::tuple_key;
//! use strata_store::{Scan, Store, StoreOptions};
//!
//! #[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
//! pub struct User { pub name: String }
//! value!(User: postcard, version = 1);
//!
//! /// `("user", id)`.
//! #[derive(Debug, Clone, PartialEq)]
//! pub struct UserKey { pub id: u64 }
//! tuple_key! {
//!     UserKey -> User = ("user", {id});
//! }
//!
//! let options = StoreOptions::new(Limits::FOUNDATIONDB);
//! let store = Store::open(MemEngine::open(options.keyspace_specs())?, options)?;
//! for id in 0..3 {
//!     store.put(&UserKey { id }, &User { name: format!("u{id}") })?;
//! }
//! assert_eq!(store.get(&UserKey { id: 1 })?, Some(User { name: "u1".into() }));
//!
//! let scan = Scan::range_of(strata_keys::KeyRange::tuple_prefix(&strata_keys::tuple::pack(&("user",)))).limit(2);
//! let page = store.scan::<UserKey>(&scan)?;
//! assert_eq!(page.items.len(), 2);
//! assert!(page.more, "a limit never truncates silently");
//! let rest = store.scan::<UserKey>(&page.next(&scan).unwrap())?;
//! assert_eq!((rest.items.len(), rest.more), (1, false));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Rows
//!
//! A store uses two engine keyspaces ([`StoreOptions::keyspace_specs`]):
//! the **data** keyspace holds one row per typed key (its value envelope,
//! or a chunk manifest), so scans see exactly the typed entries; the
//! **system** keyspace holds chunk rows, quota counters and the expiry
//! index (layout in the `layout` module source).
//!
//! Crates above the store declare their own keyspaces (**spaces**) and
//! write raw rows there in the same transactions, under the same limits
//! and quota, and record what they declared in a **catalog**: see
//! [`Space`].
//!
//! # Limits and quota
//!
//! Every commit is checked against the store's [`Limits`](strata_codec::Limits)
//! before anything is written: keys, row values (after chunking), entries
//! and bytes of the data and chunk rows it writes or deletes, sized with
//! [`strata_codec::stored_size`]. Bookkeeping rows (quota counters, expiry
//! index entries) are not counted against the batch limits. A quota scope's
//! usage is the `stored_size` of its data rows and their chunk rows, kept
//! exactly by a counter updated in the same commit; expiry index rows are
//! not charged. An expired value still counts until it is swept.
//!
//! # Non-goals and limits of this version
//!
//! - A transaction's reads of counters see its own adds, but its scans do
//!   not see its counters or versionstamped puts.
//! - Versionstamped values carry a keyless checksum (the key is not known
//!   when the envelope is written): damage is caught, a copy of the value
//!   under another key is not.
#![cfg_attr(docsrs, feature(doc_cfg))]

mod collections;
mod error;
mod layout;
pub mod metrics;
mod ops;
mod options;
pub mod prelude;
mod read;
mod space;
mod store;
mod tx;
mod verify;

pub use collections::{ChunkedLog, Members, SetIndex, SortedSet};
pub use error::{LimitedRow, RowKind, StoreError};
pub use layout::{Counter, counter_row};
pub use ops::{
    BulkCursor, BulkError, BulkNonAtomic, BulkReport, ScopeUsage, SweepCursor, SweepReport,
};
pub use options::{RetryPolicy, ScopeFn, StoreOptions};
pub use read::{Cursor, Expiring, LentValue, Page, RawValue, ReadView, Scan, ScanIter};
pub use space::{CatalogEntry, Space};
pub use store::Store;
pub use tx::{Expiry, RawPage, SpaceCursor, Tx};
pub use verify::{Problem, Verification};

/// This crate's README example, compiled and run as a doctest.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
