//! Key types, stores on each engine, and checks shared by the tests.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use strata_codec::{Limits, value};
use strata_engine::{Engine, ManualClock, MemEngine};
use strata_keys::tuple::Versionstamp;
use strata_keys::tuple_key;
use strata_store::{Store, StoreOptions};

/// A small record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Doc {
    pub title: String,
    pub body: Vec<u8>,
}
value!(Doc: postcard, version = 1);

pub const ACTOR: i64 = 7;

/// A document of an actor: `(ACTOR, actor, "doc", id)`.
#[derive(Debug, Clone, PartialEq)]
pub struct DocKey {
    pub actor: u64,
    pub id: u64,
}
/// A blob of an actor, chunked when large: `(ACTOR, actor, "blob", id)`.
#[derive(Debug, Clone, PartialEq)]
pub struct BlobKey {
    pub actor: u64,
    pub id: u64,
}
/// A counter of an actor.
#[derive(Debug, Clone, PartialEq)]
pub struct CountKey {
    pub actor: u64,
    pub name: String,
}
/// A note sharing the doc prefix with another type (`("doc", id, "note")`).
#[derive(Debug, Clone, PartialEq)]
pub struct NoteKey {
    pub actor: u64,
    pub id: u64,
}
/// An event whose key carries the commit's versionstamp.
#[derive(Debug, Clone, PartialEq)]
pub struct EventKey {
    pub stamp: Versionstamp,
}
tuple_key! {
    DocKey -> Doc = (ACTOR, {actor}, "doc", {id});
    BlobKey -> Vec<u8> = (ACTOR, {actor}, "blob", {id});
    CountKey -> i64 = (ACTOR, {actor}, "count", {name});
    NoteKey -> String = (ACTOR, {actor}, "doc", {id}, "note");
    EventKey -> String = ("event", {stamp});
}

/// The quota scope of a key: its `(ACTOR, actor)` prefix. (A tuple
/// non-negative integer is a code byte `0x14 + n` and `n` bytes.)
pub fn actor_scope(key: &[u8]) -> Option<Vec<u8>> {
    let rest = key.strip_prefix(&[0x15, u8::try_from(ACTOR).ok()?][..])?;
    let n = usize::from(rest.first()?.checked_sub(0x14)?);
    (n <= 8 && rest.len() > n).then(|| key[..3 + n].to_vec())
}

/// The scope bytes of an actor.
pub fn scope(actor: u64) -> Vec<u8> {
    strata_keys::tuple::pack(&(ACTOR, actor))
}

pub fn options(limits: Limits) -> StoreOptions {
    StoreOptions::new(limits)
        .chunked::<BlobKey>()
        .quota_scope(actor_scope)
}

pub use strata_test_support::{Dir as TempDir, T0, postgres, redb, rocks, store_on};

/// A store on a new `MemEngine` (no directory needed).
pub fn mem(options: StoreOptions) -> (Store<MemEngine>, Arc<ManualClock>) {
    let engine = MemEngine::open(options.keyspace_specs()).unwrap();
    store_on(engine, options)
}

/// Runs `body` on a `MemEngine`, a `RedbEngine`, a `RocksEngine` and a
/// `PostgresEngine` store (inside [`engine_tests!`], on the test's engine
/// alone).
#[macro_export]
macro_rules! on_every_engine {
    ($options:expr, |$store:ident, $clock:ident| $body:block) => {{
        use strata_test_support::{EngineKind, runs};
        if runs(EngineKind::Mem) {
            let ($store, $clock) = $crate::common::mem($options);
            $body
        }
        if runs(EngineKind::Redb) {
            let ($store, $clock, _dir) = $crate::common::redb($options);
            $body
        }
        if runs(EngineKind::Rocks) {
            let ($store, $clock, _dir) = $crate::common::rocks($options);
            $body
        }
        if runs(EngineKind::Postgres) {
            let ($store, $clock, _server) = $crate::common::postgres($options);
            $body
        }
    }};
}

/// One test per engine (`name::mem`, `name::redb`, `name::rocks`,
/// `name::postgres`) for each function given.
#[macro_export]
macro_rules! engine_tests {
    ($($t:tt)*) => {
        strata_test_support::engine_tests!([mem, redb, rocks, postgres] $($t)*);
    };
}

/// Every quota scope's counter equals the recount of its rows.
pub fn assert_quota_exact<E: Engine>(store: &Store<E>) {
    for (scope, usage) in store.audit_quota().unwrap() {
        assert_eq!(
            usage.counted,
            i64::try_from(usage.actual).unwrap(),
            "scope {scope:02x?}: counter {} but rows take {}",
            usage.counted,
            usage.actual
        );
    }
}

/// Rows in the system keyspace (chunks, counters, index).
pub fn system_rows<E: Engine>(store: &Store<E>) -> Vec<(Vec<u8>, Vec<u8>)> {
    use strata_engine::Snapshot;
    let (_, system) = store.keyspaces();
    let snap = store.engine().snapshot().unwrap();
    snap.range(system, strata_engine::RangeSpec::all())
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

/// Rows of a tag (`"c"`, `"q"`, `"x"`) in the system keyspace.
pub fn system_rows_tagged<E: Engine>(store: &Store<E>, tag: &str) -> usize {
    let prefix = strata_keys::tuple::pack(&(tag,));
    system_rows(store)
        .iter()
        .filter(|(k, _)| k.starts_with(&prefix))
        .count()
}
