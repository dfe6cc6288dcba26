//! Integration tests of strata-store, on `MemEngine`, `RedbEngine` and `RocksEngine`.

mod collections;
mod common;
mod limits;
mod reads;
mod ttl;
mod txn;
