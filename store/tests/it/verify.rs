//! `Store::verify` passes on a sound store and names each planted kind of
//! damage; `StoreOptions::from_catalog` rebuilds what a tool needs.

use std::ops::ControlFlow;

use strata_codec::Limits;
use strata_engine::{Commit, Engine, MemEngine, Mutation, RangeSpec, Snapshot};
use strata_keys::tuple;
use strata_store::{Problem, Store, StoreOptions};

use crate::common::{BlobKey, CountKey, Doc, DocKey};

fn options() -> StoreOptions {
    // Values above 200 bytes are chunked, in chunks of 100.
    StoreOptions::new(Limits {
        max_value_bytes: 200,
        ..Limits::FOUNDATIONDB.with_quota(1 << 30)
    })
    .chunked::<BlobKey>()
    .chunk_size(100)
    .quota_scope_tuple_prefix(2)
}

/// A store with an inline doc, a chunked blob of 5 chunks and an expiring
/// doc, for actors 1 and 2.
fn filled(engine: &MemEngine) -> Store<&MemEngine> {
    let store = Store::open(engine, options()).unwrap();
    let doc = Doc {
        title: "t".into(),
        body: vec![3; 40],
    };
    store.put(&DocKey { actor: 1, id: 1 }, &doc).unwrap();
    store
        .put(&BlobKey { actor: 1, id: 2 }, &vec![9u8; 450])
        .unwrap();
    store
        .put_with_ttl(&DocKey { actor: 2, id: 3 }, &doc, 3_600_000)
        .unwrap();
    store
}

fn engine() -> MemEngine {
    MemEngine::open(options().keyspace_specs()).unwrap()
}

fn system_rows(e: &MemEngine, tag: &str) -> Vec<(Vec<u8>, Vec<u8>)> {
    let ks = e.keyspace("strata.system").unwrap();
    e.snapshot()
        .unwrap()
        .range(ks, RangeSpec::prefix(&tuple::pack(&(tag,))[..=tag.len()]))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

fn raw(e: &MemEngine, m: Mutation) {
    e.commit(Commit::new().mutate(m)).unwrap();
}

#[test]
fn a_sound_store_verifies_with_its_counts() {
    let e = engine();
    let store = filled(&e);
    let v = store.verify().unwrap();
    assert!(v.is_ok(), "{:?}", v.problems);
    assert_eq!((v.values, v.chunked, v.chunk_rows), (3, 1, 5));
    assert_eq!((v.expiry_entries, v.stale_expiry_entries), (1, 0));
    assert_eq!(v.quota_scopes, Some(2), "two actors' scopes recounted");
    assert_eq!(v.version, e.last_version());
}

/// Counter rows are counted as counters (not read as envelopes) and
/// charged to their scope like any row; a data row of another length that
/// is no envelope is still a problem.
#[test]
fn counters_verify_as_counters_with_their_quota() {
    let e = engine();
    let store = filled(&e);
    let hits = CountKey {
        actor: 1,
        name: "hits".into(),
    };
    store.add(&hits, 3).unwrap();
    assert_eq!(store.increment(&hits, 4).unwrap(), 7);
    store
        .add(
            &CountKey {
                actor: 3,
                name: "misses".into(),
            },
            -1,
        )
        .unwrap();
    let v = store.verify().unwrap();
    assert!(v.is_ok(), "{:?}", v.problems);
    assert_eq!((v.values, v.counters), (3, 2));
    assert_eq!(
        v.quota_scopes,
        Some(3),
        "actor 3's scope holds only a counter"
    );

    // Nine bytes that are no envelope, in actor 3's scope (its quota
    // counter is raised to match, so only the row is wrong).
    let data = e.keyspace("data").unwrap();
    let key = tuple::pack(&(7i64, 3u64, "count", "other"));
    raw(
        &e,
        Mutation::Put {
            ks: data,
            key: key.clone(),
            value: vec![0x01; 9],
        },
    );
    let scope = tuple::pack(&("q", tuple::pack(&(7i64, 3u64)).as_slice()));
    assert!(system_rows(&e, "q").iter().any(|(k, _)| *k == scope));
    raw(
        &e,
        Mutation::Add {
            ks: e.keyspace("strata.system").unwrap(),
            key: scope,
            delta: i64::try_from(strata_codec::stored_size(key.len(), 9)).unwrap(),
        },
    );
    let v = store.verify().unwrap();
    assert_eq!(v.counters, 2);
    assert!(
        matches!(&v.problems[..], [Problem::Value { key: k, .. }] if *k == key),
        "{:?}",
        v.problems
    );
}

#[test]
fn a_flipped_value_byte_is_a_value_problem() {
    let e = engine();
    let store = filled(&e);
    let data = e.keyspace("data").unwrap();
    let key = tuple::pack(&(7i64, 1u64, "doc", 1u64));
    let mut value = e.snapshot().unwrap().get(data, &key).unwrap().unwrap();
    let last = value.len() - 1;
    value[last] ^= 1;
    // Same length: the quota recount still agrees; only the checksum fails.
    raw(
        &e,
        Mutation::Put {
            ks: data,
            key: key.clone(),
            value,
        },
    );
    let v = store.verify().unwrap();
    assert!(!v.is_ok());
    assert!(
        matches!(v.problems.as_slice(), [Problem::Value { key: k, .. }] if *k == key),
        "{:?}",
        v.problems
    );
}

/// A data row whose key is 50,000 tuples in one another (damage): the
/// quota rule (the key's first two tuple elements) and the problem's
/// message unpack it bounded, so `verify` names it instead of overflowing
/// the stack.
#[test]
fn a_key_nested_fifty_thousand_deep_is_a_problem_not_a_stack_overflow() {
    let e = engine();
    let store = filled(&e);
    let data = e.keyspace("data").unwrap();
    let key = [vec![0x05u8; 50_000], vec![0x00; 50_000]].concat();
    raw(
        &e,
        Mutation::Put {
            ks: data,
            key: key.clone(),
            value: b"x".to_vec(),
        },
    );
    let v = std::thread::scope(|s| {
        std::thread::Builder::new()
            .stack_size(1 << 20)
            .spawn_scoped(s, || {
                let v = store.verify().unwrap();
                // Each problem reads as a line, its key shown bounded.
                let lines: Vec<String> = v.problems.iter().map(ToString::to_string).collect();
                (v, lines)
            })
            .unwrap()
            .join()
            .unwrap()
    });
    let (v, lines) = v;
    assert!(
        lines.iter().any(|l| l.contains(r#"b"\x05\x05"#)),
        "{lines:?}"
    );
    assert!(
        v.problems
            .iter()
            .any(|p| matches!(p, Problem::Value { key: k, .. } if *k == key)),
        "{:?}",
        v.problems.len()
    );
}

#[test]
fn a_deleted_chunk_row_is_a_chunk_problem_and_quota_drifts() {
    let e = engine();
    let store = filled(&e);
    let system = e.keyspace("strata.system").unwrap();
    let chunks = system_rows(&e, "c");
    assert_eq!(chunks.len(), 5);
    raw(
        &e,
        Mutation::Delete {
            ks: system,
            key: chunks[2].0.clone(),
        },
    );
    let v = store.verify().unwrap();
    let blob = tuple::pack(&(7i64, 1u64, "blob", 2u64));
    assert!(
        v.problems
            .iter()
            .any(|p| matches!(p, Problem::Chunks { key, .. } if *key == blob)),
        "{:?}",
        v.problems
    );
    // The row's bytes are gone from the recount but not from the counter.
    assert!(
        v.problems
            .iter()
            .any(|p| matches!(p, Problem::Quota { counted, actual, .. } if u64::try_from(*counted).unwrap() > *actual)),
        "{:?}",
        v.problems
    );
}

#[test]
fn an_extra_chunk_row_is_an_orphan() {
    let e = engine();
    let store = filled(&e);
    let system = e.keyspace("strata.system").unwrap();
    let blob = tuple::pack(&(7i64, 1u64, "blob", 2u64));
    raw(
        &e,
        Mutation::Put {
            ks: system,
            key: tuple::pack(&("c", blob.as_slice(), 5u32)),
            value: vec![1; 10],
        },
    );
    let v = store.verify().unwrap();
    assert!(
        v.problems.iter().any(|p| *p
            == Problem::OrphanChunk {
                owner: blob.clone(),
                index: 5
            }),
        "{:?}",
        v.problems
    );
}

#[test]
fn a_quota_counter_off_by_one_is_named() {
    let e = engine();
    let store = filled(&e);
    let system = e.keyspace("strata.system").unwrap();
    let scope = tuple::pack(&(7i64, 2u64));
    raw(
        &e,
        Mutation::Add {
            ks: system,
            key: tuple::pack(&("q", scope.as_slice())),
            delta: 1,
        },
    );
    let v = store.verify().unwrap();
    let [
        Problem::Quota {
            scope: s,
            counted,
            actual,
        },
    ] = v.problems.as_slice()
    else {
        panic!("{:?}", v.problems);
    };
    assert_eq!(*s, scope);
    assert_eq!(u64::try_from(*counted).unwrap(), actual + 1);
}

#[test]
fn an_unindexed_expiring_value_is_named() {
    let e = engine();
    let store = filled(&e);
    let system = e.keyspace("strata.system").unwrap();
    let index = system_rows(&e, "x");
    assert_eq!(index.len(), 1);
    raw(
        &e,
        Mutation::Delete {
            ks: system,
            key: index[0].0.clone(),
        },
    );
    let v = store.verify().unwrap();
    let key = tuple::pack(&(7i64, 2u64, "doc", 3u64));
    assert!(
        matches!(v.problems.as_slice(), [Problem::ExpiryNotIndexed { key: k, .. }] if *k == key),
        "{:?}",
        v.problems
    );
}

#[test]
fn verification_stops_when_asked() {
    let e = engine();
    let store = filled(&e);
    let mut seen = 0;
    let v = store
        .verify_with(&mut |rows| {
            seen = rows;
            if rows == 2 {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        })
        .unwrap();
    assert_eq!(seen, 2);
    assert!(!v.complete && !v.is_ok());
}

#[test]
fn the_catalog_rebuilds_keyspaces_spaces_and_the_quota_rule() {
    let e = MemEngine::open(
        options()
            .space("extra", strata_engine::Profile::Queue)
            .charged_space("billed", strata_engine::Profile::General)
            .keyspace_specs(),
    )
    .unwrap();
    let declared = options()
        .space("extra", strata_engine::Profile::Queue)
        .charged_space("billed", strata_engine::Profile::General);
    let store = Store::open(&e, declared.clone()).unwrap();
    assert!(store.publish_catalog().unwrap());
    let mut rebuilt = StoreOptions::new(Limits::FOUNDATIONDB);
    assert!(rebuilt.from_catalog(&store.catalog().unwrap()));
    let sorted = |mut v: Vec<strata_engine::KeyspaceSpec>| {
        v.sort_by(|a, b| a.name.cmp(&b.name));
        v
    };
    assert_eq!(
        sorted(rebuilt.keyspace_specs()),
        sorted(declared.keyspace_specs())
    );
    let charged = rebuilt.keyspace_specs().len();
    assert_eq!(charged, 4);
    // The quota rule came back: the same counters are recounted.
    drop(filled_with(&e, declared));
    let tool = Store::open(&e, {
        let mut o = StoreOptions::new(Limits::FOUNDATIONDB);
        o.from_catalog(&store.catalog().unwrap());
        o
    })
    .unwrap();
    let v = tool.verify().unwrap();
    assert_eq!(v.quota_scopes, Some(2), "{v:?}");
    assert!(v.problems.is_empty(), "{:?}", v.problems);
    // A store without a catalog is not described.
    let mut untouched = StoreOptions::new(Limits::FOUNDATIONDB);
    assert!(!untouched.from_catalog(&[]));
    assert_eq!(untouched.data_keyspace, "data");
}

fn filled_with(engine: &MemEngine, options: StoreOptions) -> Store<&MemEngine> {
    let store = Store::open(engine, options).unwrap();
    let doc = Doc {
        title: "t".into(),
        body: vec![3; 40],
    };
    store.put(&DocKey { actor: 1, id: 1 }, &doc).unwrap();
    store.put(&DocKey { actor: 2, id: 1 }, &doc).unwrap();
    store
}

/// A key of `ACTOR, actor` followed by tuples nested `depth` deep, too
/// deep to unpack: a key whose structure its user chose.
#[derive(Debug, Clone, PartialEq)]
struct DeepKey {
    actor: u64,
    depth: usize,
}

impl strata_keys::Key for DeepKey {
    type Value = Vec<u8>;
    const NAME: &'static str = "DeepKey";

    fn pack_into(&self, out: &mut Vec<u8>) -> Result<(), strata_keys::KeyError> {
        out.extend(tuple::pack(&(crate::common::ACTOR, self.actor)));
        out.extend(std::iter::repeat_n(0x05, self.depth));
        out.extend(std::iter::repeat_n(0x00, self.depth));
        Ok(())
    }

    fn unpack(bytes: &[u8]) -> Result<Self, strata_keys::KeyError> {
        let bad = || strata_keys::KeyError::PrefixMismatch { prefix_len: 4 };
        let (head, rest) = tuple::split_prefix(bytes, 2).ok_or_else(bad)?;
        let (_, actor): (i64, u64) = tuple::unpack(head).map_err(|_| bad())?;
        Ok(Self {
            actor,
            depth: rest.len() / 2,
        })
    }
}

/// A key of any bytes.
#[derive(Debug, Clone, PartialEq)]
struct RawRow(Vec<u8>);

impl strata_keys::Key for RawRow {
    type Value = Vec<u8>;
    const NAME: &'static str = "RawRow";

    fn pack_into(&self, out: &mut Vec<u8>) -> Result<(), strata_keys::KeyError> {
        out.extend_from_slice(&self.0);
        Ok(())
    }

    fn unpack(bytes: &[u8]) -> Result<Self, strata_keys::KeyError> {
        Ok(Self(bytes.to_vec()))
    }
}

/// Under the tuple-prefix quota rule a key nested past what can be
/// unpacked is charged to the scope of its first elements like any other
/// (it was charged to none: nesting was a way past the quota): the charge
/// equals that of a shallow key of the same length, the quota refuses the
/// next one, a delete frees it, and `verify` recounts the same.
#[test]
fn a_key_nested_too_deep_to_unpack_is_charged_to_its_scope() {
    let e = engine();
    let store = Store::open(&e, options()).unwrap();
    let deep = DeepKey {
        actor: 1,
        depth: 600,
    };
    let value = vec![1u8; 50];
    store.put(&deep, &value).unwrap();
    let scope = tuple::pack(&(crate::common::ACTOR, 1u64));
    let charged = store.quota_usage(&scope).unwrap();
    // A shallow key of the same length (4 bytes of prefix, a byte string
    // of 1,198 bytes and its two marks) under actor 2.
    let shallow = tuple::pack(&(
        crate::common::ACTOR,
        2u64,
        tuple::Bytes::from(vec![9u8; 1_198]),
    ));
    assert_eq!(shallow.len(), strata_keys::Key::pack(&deep).unwrap().len());
    store.put(&RawRow(shallow), &value).unwrap();
    assert_eq!(
        store
            .quota_usage(&tuple::pack(&(crate::common::ACTOR, 2u64)))
            .unwrap(),
        charged
    );
    assert!(charged > 1_204 + 50, "{charged}");
    assert!(store.verify().unwrap().problems.is_empty());
    // With room for exactly one such key, a second is refused.
    let mut tight = options();
    tight.limits = tight.limits.with_quota(charged);
    let tight = Store::open(&e, tight).unwrap();
    let err = tight
        .put(
            &DeepKey {
                actor: 1,
                depth: 601,
            },
            &value,
        )
        .unwrap_err();
    assert!(
        matches!(&err, strata_store::StoreError::Quota { scope: s, .. } if *s == scope),
        "{err:?}"
    );
    tight.delete(&deep).unwrap();
    assert_eq!(tight.quota_usage(&scope).unwrap(), 0);
    // Freed exactly: the same key fits again.
    tight.put(&deep, &value).unwrap();
    assert_eq!(tight.quota_usage(&scope).unwrap(), charged);
}
