//! What a service on the store uses, in one import:
//! `use strata_store::prelude::*;`. The outbox's and the search crate's
//! preludes add their layers to it.
//!
//! ```
//! use strata_store::prelude::*;
//! use serde::{Deserialize, Serialize};
//!
//! #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
//! struct Order { total_cents: u64 }
//! value!(Order: postcard, version = 1);
//! #[derive(Debug, Clone, PartialEq)]
//! struct OrderKey { order: u64 }
//! #[derive(Debug, Clone, PartialEq)]
//! struct Orders { customer: u64 }
//! tuple_key! {
//!     OrderKey -> Order = ("order", {order});
//!     Orders -> Counter = ("orders", {customer});
//! }
//!
//! let options = StoreOptions::new(Limits::FOUNDATIONDB);
//! let store = Store::open(MemEngine::open(options.keyspace_specs())?, options)?;
//! store.transact(|tx| {
//!     tx.put(&OrderKey { order: 1 }, &Order { total_cents: 250 })?;
//!     tx.add(&Orders { customer: 7 }, 1)
//! })?;
//! assert_eq!(store.read()?.counter(&Orders { customer: 7 })?, 1);
//! assert_eq!(store.last_version(), 1);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub use strata_codec::{Limits, Value, value};
pub use strata_engine::{
    Clock, Durability, Engine, ManualClock, MemEngine, Rng, SeededRng, SystemClock, SystemRng,
};
pub use strata_keys::{Key, KeyRange, tuple, tuple_key, tuple_prefix};

pub use crate::{
    Counter, Expiry, ReadView, RetryPolicy, Scan, Store, StoreError, StoreOptions, Tx,
};
