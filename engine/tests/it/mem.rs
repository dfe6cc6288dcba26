//! What only the reference engine offers: crash images, restarts, keyspace
//! changes across restarts; and the injected clock and generator.

use strata_engine::{
    Clock, Commit, Durability, Engine, EngineError, KeyspaceSpec, ManualClock, MemEngine, Profile,
    RangeSpec, Rng, SeededRng, Snapshot, SystemClock, SystemRng,
};

fn engine() -> MemEngine {
    MemEngine::open(vec![
        KeyspaceSpec::new("a", Profile::General),
        KeyspaceSpec::new("q", Profile::Queue),
    ])
    .unwrap()
}

fn keys(e: &MemEngine, name: &str) -> Vec<Vec<u8>> {
    let ks = e.keyspace(name).unwrap();
    e.snapshot()
        .unwrap()
        .range(ks, RangeSpec::all())
        .unwrap()
        .map(|r| r.unwrap().0)
        .collect()
}

#[test]
fn a_crash_keeps_exactly_a_prefix_of_the_unsynced_commits() {
    let e = engine();
    let a = e.keyspace("a").unwrap();
    e.commit(Commit::new().put(a, b"durable".to_vec(), b"1".to_vec()))
        .unwrap();
    for i in 0..4u8 {
        let c = Commit::new()
            .put(a, vec![b'b', i], vec![i])
            .durability(Durability::Buffered);
        e.commit(c).unwrap();
    }
    assert_eq!(
        (e.pending_commits(), e.durable_version(), e.last_version()),
        (4, 1, 5)
    );
    let image = e.crash_keeping(2);
    assert_eq!(image.version(), 3);
    let e = MemEngine::from_image(image).unwrap();
    assert_eq!(
        keys(&e, "a"),
        [b"b\x00".to_vec(), b"b\x01".to_vec(), b"durable".to_vec()]
    );
    assert_eq!(
        (e.last_version(), e.durable_version(), e.pending_commits()),
        (3, 3, 0)
    );
}

#[test]
fn a_partial_sync_makes_a_prefix_durable_and_a_crash_keeps_it() {
    let e = engine();
    let a = e.keyspace("a").unwrap();
    for i in 0..4u8 {
        let c = Commit::new()
            .put(a, vec![b'p', i], vec![i])
            .durability(Durability::Buffered);
        e.commit(c).unwrap();
    }
    assert_eq!((e.durable_version(), e.pending_commits()), (0, 4));
    assert_eq!(e.sync_partially(2), 2);
    assert_eq!((e.durable_version(), e.pending_commits()), (2, 2));
    // Reads still see every commit.
    assert_eq!(keys(&e, "a").len(), 4);
    // A crash keeping no unsynced commit keeps the two synced ones.
    let e = MemEngine::from_image(e.crash_keeping(0)).unwrap();
    assert_eq!(keys(&e, "a"), [b"p\x00".to_vec(), b"p\x01".to_vec()]);
    assert_eq!(e.last_version(), 2);
    // More than pending: all of them.
    let a = e.keyspace("a").unwrap();
    e.commit(
        Commit::new()
            .put(a, b"z".to_vec(), b"z".to_vec())
            .durability(Durability::Buffered),
    )
    .unwrap();
    assert_eq!(e.sync_partially(10), 3);
    assert_eq!(e.pending_commits(), 0);
}

#[test]
fn rng_chosen_crashes_cover_every_allowed_outcome_and_nothing_else() {
    let mut seen = std::collections::BTreeSet::new();
    let mut rng = SeededRng::new(7);
    for _ in 0..200 {
        let e = engine();
        let a = e.keyspace("a").unwrap();
        e.commit(Commit::new().put(a, b"d".to_vec(), b"d".to_vec()))
            .unwrap();
        for i in 0..3u8 {
            e.commit(
                Commit::new()
                    .put(a, vec![i], vec![i])
                    .durability(Durability::Buffered),
            )
            .unwrap();
        }
        let e = MemEngine::from_image(e.crash(&mut rng)).unwrap();
        let got = keys(&e, "a");
        let kept = got.len() - 1;
        assert_eq!(
            got[..kept],
            (0..u8::try_from(kept).unwrap())
                .map(|i| vec![i])
                .collect::<Vec<_>>()[..],
            "a prefix, no hole"
        );
        assert_eq!(got[kept], b"d", "the durable commit survives");
        seen.insert(kept);
    }
    assert_eq!(
        seen.into_iter().collect::<Vec<_>>(),
        [0, 1, 2, 3],
        "every prefix length occurs"
    );
}

#[test]
fn sync_and_immediate_commits_empty_the_unsynced_list() {
    let e = engine();
    let a = e.keyspace("a").unwrap();
    for _ in 0..3 {
        e.commit(
            Commit::new()
                .put(a, b"k".to_vec(), b"v".to_vec())
                .durability(Durability::Buffered),
        )
        .unwrap();
    }
    assert_eq!(e.pending_commits(), 3);
    assert_eq!(e.sync().unwrap(), 3);
    assert_eq!(e.pending_commits(), 0);
    e.commit(
        Commit::new()
            .put(a, b"k".to_vec(), b"w".to_vec())
            .durability(Durability::Buffered),
    )
    .unwrap();
    let info = e
        .commit(Commit::new().put(a, b"z".to_vec(), b"z".to_vec()))
        .unwrap();
    assert!(info.durable);
    assert_eq!((e.pending_commits(), e.durable_version()), (0, 5));
    let e = MemEngine::from_image(e.crash_keeping(0)).unwrap();
    assert_eq!(
        keys(&e, "a"),
        [b"k".to_vec(), b"z".to_vec()],
        "an immediate commit made the earlier one durable"
    );
}

#[test]
fn keyspaces_can_change_across_a_restart() {
    let e = engine();
    let (a, q) = (e.keyspace("a").unwrap(), e.keyspace("q").unwrap());
    e.commit(Commit::new().put(a, b"x".to_vec(), b"1".to_vec()).put(
        q,
        b"m".to_vec(),
        b"2".to_vec(),
    ))
    .unwrap();
    let image = e.close().with_keyspaces(vec![
        KeyspaceSpec::new("q", Profile::Queue),
        KeyspaceSpec::new("new", Profile::AppendOnly),
    ]);
    let e = MemEngine::from_image(image).unwrap();
    assert_eq!(
        keys(&e, "q"),
        [b"m".to_vec()],
        "kept by name, at a new index"
    );
    assert!(keys(&e, "new").is_empty());
    assert!(matches!(
        e.keyspace("a"),
        Err(EngineError::UnknownKeyspaceName { .. })
    ));
    let dup = MemEngine::open(vec![
        KeyspaceSpec::new("x", Profile::General),
        KeyspaceSpec::new("x", Profile::Queue),
    ]);
    assert!(matches!(dup, Err(EngineError::DuplicateKeyspace { name: n }) if n == "x"));
}

#[test]
fn old_snapshots_survive_many_overwrites_and_deletes() {
    let e = engine();
    let a = e.keyspace("a").unwrap();
    e.commit(Commit::new().put(a, b"k".to_vec(), b"0".to_vec()))
        .unwrap();
    let first = e.snapshot().unwrap();
    for i in 1..100u32 {
        let c = if i % 10 == 0 {
            Commit::new().delete(a, b"k".to_vec())
        } else {
            Commit::new().put(a, b"k".to_vec(), i.to_string().into_bytes())
        };
        e.commit(c.durability(Durability::Buffered)).unwrap();
        if i == 50 {
            let mid = e.snapshot().unwrap();
            assert_eq!(mid.get(a, b"k").unwrap(), None, "deleted at 50");
        }
    }
    assert_eq!(first.get(a, b"k").unwrap().as_deref(), Some(&b"0"[..]));
    drop(first);
    e.commit(Commit::new().put(a, b"k".to_vec(), b"last".to_vec()))
        .unwrap();
    assert_eq!(
        e.snapshot().unwrap().get(a, b"k").unwrap().as_deref(),
        Some(&b"last"[..])
    );
}

#[test]
fn injected_time_and_randomness() {
    let clock = ManualClock::new(1_000);
    clock.advance(500);
    assert_eq!(clock.now_ms(), 1_500);
    clock.set(10);
    assert_eq!(clock.now_ms(), 10, "a manual clock may step back");
    assert!(
        SystemClock.now_ms() > 1_700_000_000_000,
        "the system clock reads real time"
    );

    let (mut x, mut y) = (SeededRng::new(42), SeededRng::new(42));
    let xs: Vec<u64> = (0..5).map(|_| x.next_u64()).collect();
    assert_eq!(
        xs,
        (0..5).map(|_| y.next_u64()).collect::<Vec<_>>(),
        "one seed, one stream"
    );
    assert_ne!(SeededRng::new(43).next_u64(), xs[0]);
    let mut r = SeededRng::new(1);
    assert!((0..1_000).all(|_| r.below(7) < 7));
    assert_eq!(r.below(0), 0);
    let hits = (0..10_000).filter(|_| r.chance(0.25)).count();
    assert!((2_000..3_000).contains(&hits), "{hits}");
    assert!(!(0..100).any(|_| r.chance(0.0)));
    let mut s = SystemRng::new();
    assert_ne!(s.next_u64(), s.next_u64());
}

/// What a generic caller (the store, a command-line tool) sees of the
/// capabilities of the reference engine: exact statistics, and typed
/// refusals naming the capability for backup and compaction.
#[test]
fn capabilities_answer_generically() {
    use strata_engine::{Backup, CapabilityError, Compact, Statistics};

    fn report<E: Engine + Statistics + Backup + Compact>(e: &E) -> (u64, String, String) {
        let entries = e.stats().unwrap().iter().map(|s| s.entries).sum();
        let backup = e.backup(std::path::Path::new("unused")).unwrap_err();
        let compact = e.compact().unwrap_err();
        (entries, backup.to_string(), compact.to_string())
    }

    let e = engine();
    let a = e.keyspace("a").unwrap();
    e.commit(Commit::new().put(a, b"x".to_vec(), b"1".to_vec()).put(
        a,
        b"y".to_vec(),
        b"2".to_vec(),
    ))
    .unwrap();
    let (entries, backup, compact) = report(&e);
    assert_eq!(entries, 2);
    assert!(
        backup.starts_with("MemEngine does not support backup"),
        "{backup}"
    );
    assert!(
        compact.starts_with("MemEngine does not support compaction"),
        "{compact}"
    );
    assert!(matches!(
        e.backup(std::path::Path::new("unused")),
        Err(CapabilityError::Unsupported {
            capability: "backup",
            ..
        })
    ));
    let stats = e.stats().unwrap();
    assert_eq!(
        (stats[0].entries, stats[0].bytes, stats[0].bytes_exact),
        (2, 4, true)
    );
}

/// Every operation's error converts into the umbrella `Error` with `?`,
/// keeping what it was.
#[test]
fn the_umbrella_error_keeps_each_operations_error() {
    fn bad_name(e: &MemEngine) -> strata_engine::Result<()> {
        e.keyspace("nope")?;
        Ok(())
    }
    fn bad_commit(e: &MemEngine, other: &MemEngine) -> strata_engine::Result<()> {
        let foreign = other.keyspace("a")?;
        e.commit(Commit::new().put(foreign, b"k".to_vec(), b"v".to_vec()))?;
        Ok(())
    }
    let (e, other) = (engine(), engine());
    assert!(matches!(
        bad_name(&e),
        Err(strata_engine::Error::Engine(EngineError::UnknownKeyspaceName { name: n })) if n == "nope"
    ));
    let err = bad_commit(&e, &other).unwrap_err();
    assert!(matches!(
        err,
        strata_engine::Error::Commit(strata_engine::CommitError::UnknownKeyspace(_))
    ));
    assert!(!err.is_outcome_unknown());
    assert_eq!(err.to_string(), "keyspace #0 was not issued by this engine");
}

/// A durable group empties the unsynced list with one durable write; a
/// crash after a buffered group keeps a prefix of it, commit by commit.
#[test]
fn groups_sync_once_and_crash_commit_by_commit() {
    let e = MemEngine::open(vec![KeyspaceSpec::new("a", Profile::General)]).unwrap();
    let a = e.keyspace("a").unwrap();
    let buffered = |k: u8| {
        Commit::new()
            .durability(Durability::Buffered)
            .put(a, vec![k], vec![k])
    };
    for r in e.commit_group(vec![buffered(1), buffered(2), buffered(3)]) {
        assert!(!r.unwrap().durable);
    }
    assert_eq!(e.pending_commits(), 3, "each commit of a group is its own");
    assert_eq!(e.group_stats().syncs, 0);
    let image = e.crash_keeping(2);
    assert_eq!(image.version(), 2, "a crash keeps a prefix of the group");
    let e = MemEngine::from_image(image).unwrap();
    let a = e.keyspace("a").unwrap();
    let results = e.commit_group(vec![
        Commit::new().put(a, vec![4], vec![4]),
        Commit::new()
            .durability(Durability::Buffered)
            .put(a, vec![5], vec![5]),
    ]);
    let infos: Vec<(u64, bool)> = results
        .into_iter()
        .map(|r| r.map(|i| (i.version, i.durable)).unwrap())
        .collect();
    assert_eq!(infos, [(3, true), (4, true)]);
    assert_eq!(e.pending_commits(), 0);
    assert_eq!(e.group_stats().syncs, 1);
}
