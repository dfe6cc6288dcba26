//! Packing into a reused buffer allocates nothing.
//!
//! A separate test binary because it installs a counting global allocator,
//! which would count the allocations of concurrently running tests.

use std::alloc::System;

use stats_alloc::{INSTRUMENTED_SYSTEM, Region, StatsAlloc};
use strata_keys::tuple::Uuid;
use strata_keys::{Key, Subspace, Ulid};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

/// The key types under test.
mod decl {
    use strata_keys::tuple::Uuid;
    use strata_keys::{Ulid, raw_key, text_key, tuple_key};

    /// Numeric fields.
    #[derive(Debug, Clone, PartialEq)]
    pub struct T {
        pub id: Uuid,
        pub ts: i64,
    }
    /// A string field.
    #[derive(Debug, Clone, PartialEq)]
    pub struct S {
        pub name: String,
    }
    tuple_key! {
        T -> () = (3, {id}, {ts}, 7);
        S -> () = (4, {name});
    }
    /// Fixed segments and a tail.
    #[derive(Debug, Clone, PartialEq, Eq, Hash)]
    pub struct R {
        pub a: u64,
        pub tail: Vec<u8>,
    }
    raw_key! {
        R -> () = ([5, 1, 2], {a}, ..{tail});
    }
    /// Padded number and ULID.
    #[derive(Debug, Clone, PartialEq, Eq, Hash)]
    pub struct X {
        pub ts: u64,
        pub id: Ulid,
    }
    text_key! {
        X -> () = ("evt:", {ts:013}, ":", {id});
    }
}
use decl::{R, S, T, X};

#[test]
fn packing_into_a_reused_buffer_does_not_allocate() {
    let t = T {
        id: Uuid::from_u128(9),
        ts: -4,
    };
    let s = S {
        name: "a\0b".into(),
    };
    let r = R {
        a: 7,
        tail: vec![1, 2, 3],
    };
    let x = X {
        ts: 1_706_540_400_000,
        id: Ulid::from_u128(77),
    };
    let sub = Subspace::new(&("tenant", 1_i64));
    let mut buf = Vec::with_capacity(256);
    let pack_all = |buf: &mut Vec<u8>| {
        buf.clear();
        t.pack_into(buf).unwrap();
        s.pack_into(buf).unwrap();
        r.pack_into(buf).unwrap();
        x.pack_into(buf).unwrap();
        sub.pack_key_into(&t, buf).unwrap();
    };
    pack_all(&mut buf);
    let change = quietest(|| {
        for _ in 0..1000 {
            pack_all(&mut buf);
        }
    });
    assert_eq!(change.allocations, 0, "{change:?}");
    assert_eq!(change.reallocations, 0, "{change:?}");

    // Unpacking numeric keys does not allocate either, once the first call
    // has cached the encodings of the key type's constants.
    let bytes = t.pack().unwrap();
    T::unpack(&bytes).unwrap();
    let change = quietest(|| {
        for _ in 0..1000 {
            std::hint::black_box(T::unpack(&bytes).unwrap());
        }
    });
    assert_eq!(change.allocations, 0, "{change:?}");
}

/// The counts of the quietest of five runs of `f`. The allocator counts
/// every thread of the process, and the test harness allocates now and then
/// on its own threads; an allocation inside `f` would show in every run
/// (`f` does a thousand iterations), a stray one in only some.
fn quietest(mut f: impl FnMut()) -> stats_alloc::Stats {
    (0..5)
        .map(|_| {
            let region = Region::new(GLOBAL);
            f();
            region.change()
        })
        .min_by_key(|c| (c.allocations, c.reallocations))
        .unwrap_or_default()
}
