//! Integration tests of strata-store, on `MemEngine`, `RedbEngine` and `RocksEngine`.

mod collections;
mod common;
mod edges;
mod families;
mod golden;
mod limits;
mod metrics;
mod processes;
mod reads;
mod spaces;
mod ttl;
mod txn;
mod verify;

/// A store is shared between threads like its engine.
#[test]
fn a_store_is_send_and_sync() {
    fn shared<T: Send + Sync>() {}
    shared::<strata_store::Store<strata_engine::MemEngine>>();
    shared::<strata_store::Store<strata_engine_redb::RedbEngine>>();
    shared::<strata_store::Store<strata_engine_rocks::RocksEngine>>();
}

#[path = "../../../test-support/proptest_cases.rs"]
mod proptest_cases;
