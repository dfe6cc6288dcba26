//! Edges the conformance suite does not reach: ranges that select nothing
//! by their bounds, and the texts of the engine's own errors and `Debug`.

use std::ops::Bound;

use strata_engine::{Commit, Engine, KeyspaceSpec, Profile, RangeSpec, ReadError, Snapshot};
use strata_engine_redb::{NotStrata, OpenedReadOnly, PowerLossBackend, RedbEngine, RedbOptions};

fn engine() -> RedbEngine {
    RedbEngine::open_with_backend(
        PowerLossBackend::new(),
        vec![KeyspaceSpec::new("a", Profile::General)],
        RedbOptions::default(),
    )
    .expect("open")
}

/// Equal bounds with one side excluded select nothing and read nothing,
/// forwards and backwards (redb itself is never asked for them); a start
/// above the end is refused as the contract says.
#[test]
fn ranges_empty_by_their_bounds_read_nothing() {
    let e = engine();
    let ks = e.keyspace("a").expect("keyspace");
    let mut c = Commit::new();
    for k in [b"a", b"b", b"c"] {
        c = c.put(ks, k.to_vec(), b"v".to_vec());
    }
    e.commit(c).expect("commit");
    let snap = e.snapshot().expect("snapshot");
    let b = |k: &[u8]| k.to_vec();
    for (start, end) in [
        (Bound::Included(b(b"c")), Bound::Included(b(b"a"))),
        (Bound::Excluded(b(b"c")), Bound::Excluded(b(b"a"))),
    ] {
        let range = RangeSpec {
            start,
            end,
            reverse: false,
            limit: None,
        };
        assert!(matches!(
            snap.range(ks, range).map(|_| ()),
            Err(ReadError::InvalidRange)
        ));
    }
    let empty = [
        (Bound::Excluded(b(b"b")), Bound::Included(b(b"b"))),
        (Bound::Included(b(b"b")), Bound::Excluded(b(b"b"))),
        (Bound::Excluded(b(b"b")), Bound::Excluded(b(b"b"))),
    ];
    for (start, end) in empty {
        for reverse in [false, true] {
            let range = RangeSpec {
                start: start.clone(),
                end: end.clone(),
                reverse,
                limit: None,
            };
            let rows: Vec<_> = snap
                .range(ks, range)
                .expect("range")
                .collect::<Result<_, _>>()
                .expect("rows");
            assert!(
                rows.is_empty(),
                "{start:?}..{end:?} reverse {reverse}: {rows:?}"
            );
        }
    }
    // One key, both sides included: that key.
    let one = RangeSpec {
        start: Bound::Included(b(b"b")),
        end: Bound::Included(b(b"b")),
        reverse: false,
        limit: None,
    };
    let rows: Vec<_> = snap
        .range(ks, one)
        .expect("range")
        .collect::<Result<_, _>>()
        .expect("rows");
    assert_eq!(rows, vec![(b(b"b"), b(b"v"))]);
}

#[test]
fn the_engines_own_errors_and_debug_say_what_they_are() {
    assert_eq!(
        OpenedReadOnly.to_string(),
        "the database was opened read-only"
    );
    assert_eq!(
        NotStrata("no strata.meta table".to_owned()).to_string(),
        "not a Strata database: no strata.meta table"
    );
    let shown = format!("{:?}", engine());
    assert!(
        shown.starts_with("RedbEngine { keyspaces: [") && shown.contains("\"a\""),
        "{shown}"
    );
}
