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

/// An engine holding keys `a`, `b` and `c` in its keyspace `a`.
fn engine_with_abc() -> (RedbEngine, strata_engine::Keyspace) {
    let e = engine();
    let ks = e.keyspace("a").expect("keyspace");
    let mut c = Commit::new();
    for k in [b"a", b"b", b"c"] {
        c = c.put(ks, k.to_vec(), b"v".to_vec());
    }
    e.commit(c).expect("commit");
    (e, ks)
}

/// Equal bounds with one side excluded select nothing and read nothing,
/// forwards and backwards (redb itself is never asked for them); a start
/// above the end is refused as the contract says.
#[test]
fn ranges_empty_by_their_bounds_read_nothing() {
    let (e, ks) = engine_with_abc();
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

/// The cursor's own loop guards redb's code, not the caller's: a panic of
/// `f` unwinds out of `try_for_each_row` as it was raised (not turned into
/// a `Corrupt` error), and the panic hook sees it outside the guard, so an
/// application's quiet hook (`BackendPanic::quiet_caught`) still prints it.
#[test]
#[allow(clippy::manual_assert)] // the caller's panic, a `&str` as raised
fn a_panic_of_the_loops_caller_is_the_callers_own() {
    use std::ops::ControlFlow;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use strata_engine::{BackendPanic, RowCursor};
    static SEEN: AtomicUsize = AtomicUsize::new(0);
    // The hook an application had before, wrapped by the quiet one.
    std::panic::set_hook(Box::new(|_| {
        SEEN.fetch_add(1, Ordering::SeqCst);
    }));
    BackendPanic::quiet_caught();
    let (e, ks) = engine_with_abc();
    let snap = e.snapshot().expect("snapshot");
    let mut rows = snap.cursor(ks, RangeSpec::all()).expect("cursor");
    let mut seen = Vec::new();
    let out = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        rows.try_for_each_row(|k, _| {
            assert!(!BackendPanic::catching(), "the caller's code ran as redb's");
            seen.push(k.to_vec());
            if k == b"b" {
                panic!("the caller's own");
            }
            ControlFlow::<()>::Continue(())
        })
    }));
    let payload = out.expect_err("the caller's panic was caught");
    assert_eq!(payload.downcast_ref::<&str>(), Some(&"the caller's own"));
    assert_eq!(seen, [b"a".to_vec(), b"b".to_vec()]);
    assert_eq!(SEEN.load(Ordering::SeqCst), 1, "the hook did not see it");
    assert!(
        !BackendPanic::catching(),
        "the guard's depth was left behind"
    );
    // The guard is whole again: redb's code runs inside it, the caller's
    // outside, and redb's again after the caller's returns.
    let caught = BackendPanic::catch_around("a test", |caller| {
        let before = BackendPanic::catching();
        let during = caller.run(BackendPanic::catching);
        (before, during, BackendPanic::catching())
    });
    assert_eq!(caught.ok(), Some((true, false, true)));
}
