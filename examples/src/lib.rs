//! Runnable walks through Strata on redb (see the crate README), built from normal dependencies
//! only (no benchmark, RocksDB or test dependency), so that
//! `cargo run -p strata-examples --example NAME` is quick after the tests:
//!
//! - `orders`: a service as a new user builds it (this crate's
//!   [`orders`] module, also run by this crate's tests and the tool's);
//! - `actor_kv`, `agent_memory`, `code_sous`, `nokv`, `universaldb`: the
//!   five reference systems of `strata-schemas`;
//! - `metrics`: the metrics the crates record, scraped by Prometheus's
//!   exporter.

pub mod orders;
