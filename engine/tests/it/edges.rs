//! Edges that mutation testing found untested: the generator's stream
//! against the published SplitMix64 vector and its bounds, the clocks'
//! sleeps, `strinc`, the umbrella error, keyspace lookups, the forwarding
//! of `&E` to `E`, the reference engine's reclaiming of old versions and
//! its debug output, and `read_through` of the shared commit logic.

use strata_engine::{
    Commit, CommitError, Compact, Durability, Engine, Error, KeyspaceSpec, Keyspaces, MemEngine,
    Profile, Rng, SeededRng, Snapshot, Statistics, strinc,
};

#[test]
fn the_seeded_generator_is_splitmix64() {
    // The first outputs of SplitMix64 from seed 0, as published with the
    // reference implementation.
    let mut r = SeededRng::new(0);
    assert_eq!(r.next_u64(), 0xE220_A839_7B1D_CDAF);
    assert_eq!(r.next_u64(), 0x6E78_9E6A_A1B9_65F4);
    assert_eq!(r.next_u64(), 0x06C4_5D18_8009_454F);
}

#[test]
fn strinc_is_foundationdbs() {
    assert_eq!(strinc(b"ab"), Some(b"ac".to_vec()));
    assert_eq!(strinc(&[0x01, 0xFF]), Some(vec![0x02]));
    assert_eq!(strinc(&[0x00, 0xFF, 0xFF]), Some(vec![0x01]));
    assert_eq!(strinc(&[0xFF, 0xFF]), None);
    assert_eq!(strinc(&[]), None);
}

#[test]
fn only_an_unknown_outcome_is_an_unknown_outcome() {
    let unknown = Error::Commit(CommitError::OutcomeUnknown("x".into()));
    let failed = Error::Commit(CommitError::Backend("x".into()));
    assert!(unknown.is_outcome_unknown());
    assert!(!failed.is_outcome_unknown());
}

#[test]
fn keyspace_lookups() {
    assert!(Keyspaces::new(Vec::new()).unwrap().is_empty());
    let ks = Keyspaces::new(vec![
        KeyspaceSpec::new("a", Profile::General),
        KeyspaceSpec::new("q", Profile::Queue),
    ])
    .unwrap();
    assert!(!ks.is_empty());
    let q = ks.get("q").unwrap();
    assert_eq!(
        ks.spec(q).map(|s| (s.name.as_str(), s.profile)),
        Some(("q", Profile::Queue))
    );
    assert_eq!(ks.index_of(q), Some(1));
    assert!(ks.at(2).is_none());
}

/// Calls through a generic parameter, so a `&MemEngine` argument goes
/// through the `impl ... for &E` forwarding (a method call on a reference
/// would auto-dereference to `MemEngine`'s own impl instead).
fn versions<E: Engine>(e: &E) -> (u64, u64) {
    (e.last_version(), e.durable_version())
}

fn sync<E: Engine>(e: &E) -> u64 {
    e.sync().unwrap()
}

fn entries<S: Statistics>(s: &S) -> u64 {
    s.stats().unwrap()[0].entries
}

fn compact<C: Compact>(c: &C) -> Result<(), strata_engine::CapabilityError> {
    c.compact()
}

#[test]
fn a_reference_to_an_engine_is_the_engine() {
    let e = MemEngine::open(vec![KeyspaceSpec::new("a", Profile::General)]).unwrap();
    let a = e.keyspace("a").unwrap();
    let by_ref = &e;
    for i in 0..3u8 {
        by_ref
            .commit(
                Commit::new()
                    .put(a, vec![i], vec![i])
                    .durability(Durability::Buffered),
            )
            .unwrap();
    }
    assert_eq!(versions(&by_ref), (3, 0));
    assert_eq!(entries(&by_ref), 3);
    assert_eq!(sync(&by_ref), 3);
    assert_eq!(versions(&by_ref), (3, 3));
    // MemEngine has nothing to compact and says so; through a reference too.
    assert!(matches!(
        compact(&by_ref),
        Err(strata_engine::CapabilityError::Unsupported {
            engine: "MemEngine",
            ..
        })
    ));
}

#[test]
fn old_versions_are_reclaimed_once_no_snapshot_reads_them() {
    let e = MemEngine::open(vec![KeyspaceSpec::new("a", Profile::General)]).unwrap();
    let a = e.keyspace("a").unwrap();
    let put = |v: u8| {
        e.commit(Commit::new().put(a, b"k".to_vec(), vec![v]))
            .unwrap();
    };
    for v in 0..5 {
        put(v);
    }
    assert_eq!(e.retained_versions(), 1, "no snapshot: one version a key");

    // Two snapshots at version 5: every version from the oldest live
    // snapshot's on is kept until both are gone.
    let s1 = e.snapshot().unwrap();
    let s2 = e.snapshot().unwrap();
    put(10);
    put(11);
    assert_eq!(e.retained_versions(), 3, "v5 for the snapshots, v6, v7");
    assert_eq!(s1.get(a, b"k").unwrap(), Some(vec![4]));
    drop(s1);
    put(12);
    assert_eq!(e.retained_versions(), 4, "s2 still reads v5");
    assert_eq!(s2.get(a, b"k").unwrap(), Some(vec![4]));
    drop(s2);
    put(13);
    assert_eq!(e.retained_versions(), 1, "both snapshots gone");
}

#[test]
fn debug_output_and_image_keyspaces() {
    let specs = vec![
        KeyspaceSpec::new("a", Profile::General),
        KeyspaceSpec::new("q", Profile::Queue),
    ];
    let e = MemEngine::open(specs.clone()).unwrap();
    let a = e.keyspace("a").unwrap();
    e.commit(Commit::new().put(a, b"k".to_vec(), b"v".to_vec()))
        .unwrap();
    let engine_debug = format!("{e:?}");
    assert!(engine_debug.starts_with("MemEngine"), "{engine_debug}");
    assert!(engine_debug.contains("\"q\""), "{engine_debug}");
    let snapshot = e.snapshot().unwrap();
    assert_eq!(format!("{snapshot:?}"), "MemSnapshot { version: 1 }");
    drop(snapshot);
    let image = e.close();
    assert_eq!(image.keyspaces(), &specs[..]);
    assert_eq!(image.version(), 1);
}

/// A generator that always returns one value.
struct Constant(u64);

impl Rng for Constant {
    fn next_u64(&mut self) -> u64 {
        self.0
    }
}

#[test]
fn chance_at_its_bounds() {
    // The smallest draw never passes probability 0; the largest passes 1.
    assert!(!Constant(0).chance(0.0));
    assert!(Constant(0).chance(0.5));
    assert!(!Constant(u64::MAX).chance(0.5));
    assert!(Constant(u64::MAX).chance(1.0));
    // Exactly one half, drawn: not below one half.
    assert!(!Constant(1 << 63).chance(0.5));
    assert_eq!(Constant(u64::MAX).below(10), 9);
    assert_eq!(Constant(0).below(10), 0);
    assert_eq!(Constant(u64::MAX).below(0), 0);
}

#[test]
fn clocks_sleep() {
    use strata_engine::{Clock, ManualClock, SystemClock};
    let manual = ManualClock::new(100);
    manual.sleep_ms(25);
    assert_eq!(manual.now_ms(), 125);
    // The system clock's sleep lasts as long as asked (its own readings,
    // whole milliseconds, may lose one to rounding).
    let started = SystemClock.now_ms();
    SystemClock.sleep_ms(30);
    assert!(SystemClock.now_ms() - started >= 29);
}

/// The latest state, for the shared commit logic: one stored key.
struct OneKey(Vec<u8>, Vec<u8>);

impl strata_engine::implement::Reads for OneKey {
    fn get(
        &mut self,
        _ks: strata_engine::Keyspace,
        key: &[u8],
    ) -> Result<Option<Vec<u8>>, CommitError> {
        Ok((key == self.0).then(|| self.1.clone()))
    }

    fn any_in(
        &mut self,
        _ks: strata_engine::Keyspace,
        range: &strata_engine::RangeSpec,
    ) -> Result<bool, CommitError> {
        Ok(range.contains(&self.0))
    }
}

#[test]
fn read_through_lays_a_commits_own_changes_over_the_state() {
    use strata_engine::RangeSpec;
    use strata_engine::implement::{Op, read_through};
    let e = MemEngine::open(vec![
        KeyspaceSpec::new("a", Profile::General),
        KeyspaceSpec::new("b", Profile::General),
    ])
    .unwrap();
    let (a, b) = (e.keyspace("a").unwrap(), e.keyspace("b").unwrap());
    let mut state = OneKey(b"k".to_vec(), b"stored".to_vec());
    let mut read = |ops: &[Op], ks, key: &[u8]| read_through(ops, &mut state, ks, key).unwrap();
    assert_eq!(read(&[], a, b"k"), Some(b"stored".to_vec()));
    assert_eq!(read(&[], a, b"x"), None);
    let put = Op::Put(a, b"k".to_vec(), b"new".to_vec());
    let del = Op::Delete(a, b"k".to_vec());
    let cover = |ks| Op::DeleteRange(ks, RangeSpec::half_open(b"j", b"l"));
    // The last change of the key wins.
    assert_eq!(
        read(std::slice::from_ref(&put), a, b"k"),
        Some(b"new".to_vec())
    );
    assert_eq!(read(&[put.clone(), del.clone()], a, b"k"), None);
    assert_eq!(read(&[del, put.clone()], a, b"k"), Some(b"new".to_vec()));
    assert_eq!(read(&[put.clone(), cover(a)], a, b"k"), None);
    // Changes to other keys or keyspaces do not hide the stored value.
    assert_eq!(read(&[cover(b)], a, b"k"), Some(b"stored".to_vec()));
    assert_eq!(
        read(
            &[Op::DeleteRange(a, RangeSpec::half_open(b"l", b"m"))],
            a,
            b"k"
        ),
        Some(b"stored".to_vec())
    );
    assert_eq!(
        read(&[Op::Put(b, b"k".to_vec(), b"other".to_vec())], a, b"k"),
        Some(b"stored".to_vec())
    );
    assert_eq!(read(&[put], b, b"k"), Some(b"stored".to_vec()));
}

/// An error that prints its source in its own message (as foreign
/// crates may): the chain does not say it twice.
#[derive(Debug)]
struct Loud(std::io::Error);
impl std::fmt::Display for Loud {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "loud: {}", self.0)
    }
}
impl std::error::Error for Loud {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.0)
    }
}

/// `ErrorChain` prints each cause of the chain once, in order, and skips a
/// cause whose text an outer message already holds.
#[test]
fn error_chain_tells_each_cause_once() {
    use strata_engine::{CommitError, ErrorChain, ReopenRequired};

    let root = std::io::Error::other("No space left on device");
    let stop = ReopenRequired::new("SomeEngine", root);
    let commit = CommitError::Backend(Box::new(stop));
    let text = ErrorChain(&commit).to_string();
    assert_eq!(
        text,
        "backend failed; the commit was not applied: SomeEngine takes no more writes after an \
         earlier write failed (a full disk?); free the space, then reopen the database: No space \
         left on device"
    );
    // The outer message alone says only its own layer.
    assert_eq!(
        commit.to_string(),
        "backend failed; the commit was not applied"
    );

    let loud = Loud(std::io::Error::other("cause"));
    assert_eq!(ErrorChain(&loud).to_string(), "loud: cause");
    assert_eq!(format!("{:?}", ErrorChain(&loud)), "loud: cause");
}

#[test]
fn a_lent_cursor_lends_each_row_and_passes_errors_through() {
    use strata_engine::{Lent, ReadError, RowCursor};
    type Row = (Vec<u8>, Vec<u8>);
    let rows: Vec<Result<Row, ReadError>> = vec![
        Ok((b"a".to_vec(), b"1".to_vec())),
        Err(ReadError::InvalidRange),
        Ok((b"bb".to_vec(), Vec::new())),
    ];
    let mut cursor = Lent::new(rows.into_iter());
    let first = cursor.next_row().unwrap().unwrap();
    assert_eq!(first, (&b"a"[..], &b"1"[..]));
    assert!(matches!(
        cursor.next_row(),
        Some(Err(ReadError::InvalidRange))
    ));
    let third = cursor.next_row().unwrap().unwrap();
    assert_eq!(third, (&b"bb"[..], &b""[..]));
    assert!(cursor.next_row().is_none());
    assert!(cursor.next_row().is_none());
}

/// `BackendPanic::quiet_caught` silences exactly the panics that
/// `BackendPanic::catch` catches, nested ones too, and hands every other
/// panic to the hook installed before it (here one that counts). The
/// hook is the process's: this test runs in a process of its own under
/// nextest.
#[test]
fn quiet_caught_silences_caught_backend_panics_only() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use strata_engine::BackendPanic;
    let seen = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&seen);
    std::panic::set_hook(Box::new(move |_| {
        counter.fetch_add(1, Ordering::SeqCst);
    }));
    // Before: the counting hook sees the caught panic.
    assert!(BackendPanic::catch("a read", || panic!("first")).is_err());
    assert_eq!(seen.load(Ordering::SeqCst), 1);
    BackendPanic::quiet_caught();
    BackendPanic::quiet_caught(); // once only: not a hook around a hook
    assert!(!BackendPanic::catching());
    let caught = BackendPanic::catch("a read", || -> u8 { panic!("bad page") });
    assert_eq!(caught.unwrap_err().message, "bad page");
    // Nested: the inner catch ends, the outer one still catches.
    let outer = BackendPanic::catch("outer", || {
        assert!(BackendPanic::catching());
        let inner = BackendPanic::catch("inner", || -> u8 { panic!("inner page") });
        assert!(inner.is_err());
        assert!(BackendPanic::catching(), "still inside the outer catch");
        // Another thread's panic, while this one catches, is not this
        // catch's: it reaches the earlier hook.
        let other = std::thread::spawn(|| panic!("a bug elsewhere")).join();
        assert!(other.is_err());
        panic!("outer page")
    });
    assert_eq!(outer.unwrap_err().message, "outer page");
    assert_eq!(
        seen.load(Ordering::SeqCst),
        2,
        "caught panics print nothing, the other thread's did"
    );
    assert!(!BackendPanic::catching());
    // A panic caught some other way is not silenced either.
    let plain = std::panic::catch_unwind(|| panic!("a bug"));
    assert!(plain.is_err());
    assert_eq!(seen.load(Ordering::SeqCst), 3);
    let _ = std::panic::take_hook();
}
