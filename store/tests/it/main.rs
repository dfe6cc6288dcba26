//! Integration tests of strata-store, on `MemEngine` and `RedbEngine`.

mod common;
mod limits;
mod reads;
mod ttl;
mod txn;
