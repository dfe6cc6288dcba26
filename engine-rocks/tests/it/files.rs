//! Reopen with other keyspaces, checkpoint backup, compaction, stats.

use strata_engine::{
    Backup, Commit, Compact, Durability, Engine, EngineError, KeyspaceSpec, Profile, RangeSpec,
    Snapshot, Statistics,
};
use strata_engine_rocks::{RocksEngine, RocksOptions};

use crate::TempDir;

fn specs(names: &[(&str, Profile)]) -> Vec<KeyspaceSpec> {
    names
        .iter()
        .map(|(n, p)| KeyspaceSpec::new(*n, *p))
        .collect()
}

fn keys(e: &RocksEngine, name: &str) -> Vec<Vec<u8>> {
    let ks = e.keyspace(name).unwrap();
    e.snapshot()
        .unwrap()
        .range(ks, RangeSpec::all())
        .unwrap()
        .map(|r| r.unwrap().0)
        .collect()
}

#[test]
fn reopen_keeps_data_and_handles_new_keyspaces() {
    let dir = TempDir::new("reopen");
    let path = dir.0.join("db");
    let all = [
        ("events", Profile::AppendOnly),
        ("q", Profile::Queue),
        ("idx", Profile::PointLookup),
    ];
    let e = RocksEngine::open(&path, specs(&all), RocksOptions::default()).unwrap();
    let (ev, q) = (e.keyspace("events").unwrap(), e.keyspace("q").unwrap());
    e.commit(
        Commit::new()
            .put(ev, b"e".to_vec(), b"1".to_vec())
            .put(q, b"m".to_vec(), b"2".to_vec())
            .durability(Durability::Buffered),
    )
    .unwrap();
    assert_eq!(e.sync().unwrap(), 1);
    drop(e);
    let e = RocksEngine::open(
        &path,
        specs(&[("q", Profile::Queue), ("new", Profile::General)]),
        RocksOptions::default(),
    )
    .unwrap();
    assert_eq!(keys(&e, "q"), [b"m".to_vec()]);
    assert!(keys(&e, "new").is_empty());
    assert!(matches!(
        e.keyspace("events"),
        Err(EngineError::UnknownKeyspaceName { .. })
    ));
    assert_eq!((e.last_version(), e.durable_version()), (1, 1));
    drop(e);
    let e = RocksEngine::open(&path, specs(&all), RocksOptions::default()).unwrap();
    assert_eq!(
        keys(&e, "events"),
        [b"e".to_vec()],
        "an undeclared family stays on disk"
    );
    assert!(matches!(
        RocksEngine::open(
            dir.0.join("dup"),
            specs(&[("x", Profile::General), ("x", Profile::Queue)]),
            RocksOptions::default()
        ),
        Err(EngineError::DuplicateKeyspace { .. })
    ));
}

#[test]
fn checkpoint_backup_compaction_and_stats() {
    let dir = TempDir::new("backup");
    let options = RocksOptions {
        block_cache_bytes: 8 << 20,
        write_buffer_bytes: 4 << 20,
        ..RocksOptions::default()
    };
    let e = RocksEngine::open(
        dir.0.join("db"),
        specs(&[("a", Profile::PointLookup)]),
        options,
    )
    .unwrap();
    let a = e.keyspace("a").unwrap();
    for i in 0..200u32 {
        e.commit(
            Commit::new()
                .put(a, i.to_be_bytes().to_vec(), vec![7; 100])
                .durability(Durability::Buffered),
        )
        .unwrap();
    }
    let info = e.backup(&dir.0.join("copy")).unwrap();
    assert_eq!(info.version, Some(200), "the copy is at the last commit");
    e.commit(Commit::new().put(a, b"after".to_vec(), b"x".to_vec()))
        .unwrap();
    e.compact().unwrap();
    let copy = RocksEngine::open(
        dir.0.join("copy"),
        specs(&[("a", Profile::PointLookup)]),
        RocksOptions::default(),
    )
    .unwrap();
    assert_eq!(
        keys(&copy, "a").len(),
        200,
        "the checkpoint has the state at the backup"
    );
    assert_eq!(copy.last_version(), 200);
    let stats = e.stats().unwrap();
    assert!(!stats[0].entries_exact);
    assert!(
        (150..=260).contains(&stats[0].entries),
        "estimate {}",
        stats[0].entries
    );
    assert_eq!(e.pending_compaction_bytes().unwrap().len(), 1);
}

/// A group of durable commits is made durable by one WAL sync; a group of
/// buffered commits by none; commits then and after are numbered on.
#[test]
fn a_durable_group_takes_one_wal_sync() {
    let dir = TempDir::new("group");
    let path = dir.0.join("db");
    let e = RocksEngine::open(
        &path,
        specs(&[("a", Profile::General)]),
        RocksOptions::default(),
    )
    .unwrap();
    let a = e.keyspace("a").unwrap();
    let group: Vec<Commit> = (0..8u8)
        .map(|i| Commit::new().put(a, vec![b'g', i], vec![i]))
        .collect();
    let results = e.commit_group(group);
    for (i, r) in results.into_iter().enumerate() {
        let info = r.unwrap();
        assert_eq!(info.version, i as u64 + 1);
        assert!(info.durable);
    }
    let stats = e.group_stats();
    assert_eq!((stats.groups, stats.commits, stats.syncs), (1, 8, 1));
    assert_eq!(e.durable_version(), 8);
    let buffered: Vec<Commit> = (0..3u8)
        .map(|i| {
            Commit::new()
                .durability(Durability::Buffered)
                .put(a, vec![b'b', i], vec![i])
        })
        .collect();
    for r in e.commit_group(buffered) {
        assert!(!r.unwrap().durable);
    }
    let stats = e.group_stats();
    assert_eq!((stats.groups, stats.commits, stats.syncs), (2, 11, 1));
    assert_eq!((e.last_version(), e.durable_version()), (11, 8));
    // A single durable commit syncs once more, covering the buffered ones.
    let info = e
        .commit(Commit::new().put(a, b"z".to_vec(), b"z".to_vec()))
        .unwrap();
    assert_eq!((info.version, e.durable_version()), (12, 12));
    assert_eq!(e.group_stats().syncs, 2);
    drop(e);
    let e = RocksEngine::open(
        &path,
        specs(&[("a", Profile::General)]),
        RocksOptions::default(),
    )
    .unwrap();
    assert_eq!(keys(&e, "a").len(), 12);
    assert_eq!(e.last_version(), 12);
}

/// The keyspaces stored in a database, read from its manifest alone, in
/// name order; no database, or a RocksDB database this engine did not
/// make, is an error.
#[test]
fn stored_keyspaces_are_listed_from_the_manifest() {
    let dir = TempDir::new("stored");
    let db = dir.0.join("db");
    drop(
        RocksEngine::open(
            &db,
            specs(&[("zeta", Profile::General), ("alpha", Profile::Queue)]),
            RocksOptions::default(),
        )
        .unwrap(),
    );
    assert_eq!(
        RocksEngine::stored_keyspaces(&db).unwrap(),
        ["alpha".to_owned(), "zeta".to_owned()]
    );
    // Reopened with one more: all three, whatever was declared last.
    drop(
        RocksEngine::open(
            &db,
            specs(&[("mid", Profile::General)]),
            RocksOptions::default(),
        )
        .unwrap(),
    );
    assert_eq!(
        RocksEngine::stored_keyspaces(&db).unwrap(),
        ["alpha".to_owned(), "mid".to_owned(), "zeta".to_owned()]
    );
    assert!(matches!(
        RocksEngine::stored_keyspaces(dir.0.join("nothing")),
        Err(EngineError::Backend(_))
    ));
}

/// A database another engine instance holds is a backend error (its lock),
/// not damage.
#[test]
fn a_held_database_is_a_backend_error_not_damage() {
    let dir = TempDir::new("held");
    let db = dir.0.join("db");
    let first = RocksEngine::open(
        &db,
        specs(&[("a", Profile::General)]),
        RocksOptions::default(),
    )
    .unwrap();
    match RocksEngine::open(
        &db,
        specs(&[("a", Profile::General)]),
        RocksOptions::default(),
    ) {
        Err(EngineError::Backend(e)) => {
            assert!(e.to_string().to_lowercase().contains("lock"), "{e}");
        }
        Err(other) => panic!("not a backend error: {other:?}"),
        Ok(_) => panic!("a held database opened twice"),
    }
    drop(first);
}

/// RocksDB's tickers, when statistics are on: a known ticker counts what
/// happened, an unknown name is `None`, and without statistics every
/// ticker is `None`. Pending compaction bytes: one figure per keyspace.
#[test]
fn tickers_and_pending_compaction_bytes() {
    let dir = TempDir::new("tickers");
    let two = specs(&[("a", Profile::General), ("b", Profile::Queue)]);
    let counted = RocksOptions {
        statistics: true,
        ..RocksOptions::default()
    };
    let e = RocksEngine::open(dir.0.join("on"), two.clone(), counted).unwrap();
    let a = e.keyspace("a").unwrap();
    for i in 0..3u8 {
        e.commit(Commit::new().put(a, vec![i], vec![i])).unwrap();
    }
    let written = e.ticker("rocksdb.number.keys.written").unwrap();
    assert!(written >= 3, "{written} keys written");
    assert_eq!(e.ticker("rocksdb.no.such.ticker"), None);
    assert_eq!(e.pending_compaction_bytes().unwrap().len(), 2);
    let quiet = RocksEngine::open(dir.0.join("off"), two, RocksOptions::default()).unwrap();
    assert_eq!(quiet.ticker("rocksdb.number.keys.written"), None);
}

/// The options RocksDB itself wrote for family `family` (its latest
/// `OPTIONS-*` file, sections `[CFOptions "family"]` and
/// `[TableOptions/BlockBasedTable "family"]`), as `name=value` lines.
fn persisted_options(db: &std::path::Path, family: &str) -> Vec<String> {
    let latest = std::fs::read_dir(db)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("OPTIONS-"))
        })
        .max_by_key(|p| {
            let name = p.file_name().unwrap().to_str().unwrap().to_owned();
            name["OPTIONS-".len()..].parse::<u64>().unwrap()
        })
        .expect("RocksDB writes an OPTIONS file");
    let text = std::fs::read_to_string(latest).unwrap();
    let wanted = [
        format!("[CFOptions \"{family}\"]"),
        format!("[TableOptions/BlockBasedTable \"{family}\"]"),
    ];
    let mut inside = false;
    let mut out = Vec::new();
    for line in text.lines().map(str::trim) {
        if line.starts_with('[') {
            inside = wanted.iter().any(|w| w == line);
        } else if inside && line.contains('=') {
            out.push(line.replace(' ', ""));
        }
    }
    assert!(!out.is_empty(), "no section for {family}");
    out
}

#[test]
fn each_profile_is_tuned_as_documented() {
    let dir = TempDir::new("profiles");
    let path = dir.0.join("db");
    let all = [
        ("events", Profile::AppendOnly),
        ("q", Profile::Queue),
        ("idx", Profile::PointLookup),
        ("misc", Profile::General),
    ];
    let e = RocksEngine::open(&path, specs(&all), RocksOptions::default()).unwrap();
    drop(e);
    let has = |family: &str, line: &str| persisted_options(&path, family).iter().any(|l| l == line);
    // No family keeps a bloom filter of its memtable's keys: tried for
    // `AppendOnly` (stop 67), each insert paid for it about as much as
    // agent memory's check that an event is new saved.
    for family in ["ks.events", "ks.q", "ks.idx", "ks.misc"] {
        assert!(
            has(family, "memtable_whole_key_filtering=false"),
            "{family}"
        );
        assert!(
            has(family, "memtable_prefix_bloom_size_ratio=0.000000"),
            "{family}"
        );
    }
    assert!(has(
        "ks.events",
        "compaction_style=kCompactionStyleUniversal"
    ));
    assert!(has("ks.events", "compression=kZSTD"));
    for family in ["ks.q", "ks.idx"] {
        assert!(
            has(family, "compaction_style=kCompactionStyleLevel"),
            "{family}"
        );
    }
    // Only the point-lookup profile has a bloom filter in its tables.
    let filters = |family: &str| {
        persisted_options(&path, family)
            .into_iter()
            .filter(|l| l.starts_with("filter_policy="))
            .collect::<Vec<_>>()
    };
    assert_eq!(filters("ks.idx"), ["filter_policy=bloomfilter"]);
    for family in ["ks.events", "ks.q", "ks.misc"] {
        assert!(
            filters(family).iter().all(|l| l == "filter_policy=nullptr"),
            "{family}: {:?}",
            filters(family)
        );
    }
}
