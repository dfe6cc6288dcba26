//! The `strata` binary run against databases these tests create on redb
//! and RocksDB: every command's output (text and `--json`), `verify`
//! passing on a clean database and catching planted damage, clear errors
//! for what is not a database or is held by another process.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use assert_cmd::Command;
use serde::{Deserialize, Serialize};
use serde_json::Value as Json;
use strata_codec::{Limits, value};
use strata_engine::{
    Clock, Commit, Engine, ManualClock, Mutation, RangeSpec, SeededRng, Snapshot, SystemClock,
};
use strata_engine_redb::{RedbEngine, RedbOptions};
use strata_engine_rocks::{RocksEngine, RocksOptions};
use strata_keys::{tuple, tuple_key};
use strata_outbox::{Outbox, OutboxConfig, Start, Topic};
use strata_store::{Store, StoreOptions};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Note {
    title: String,
    stars: u32,
}
value!(Note: json, version = 2);

#[derive(Debug, Clone, PartialEq)]
struct NoteKey {
    user: u64,
    id: u64,
}
#[derive(Debug, Clone, PartialEq)]
struct BlobKey {
    user: u64,
}
#[derive(Debug, Clone, PartialEq)]
struct CountKey {
    user: u64,
}
tuple_key! {
    NoteKey -> Note = ("note", {user}, {id});
    BlobKey -> Vec<u8> = ("blob", {user});
    CountKey -> i64 = ("count", {user});
}

/// A directory removed when dropped.
struct Dir(PathBuf);
impl Dir {
    fn new(name: &str) -> Self {
        let p = std::env::temp_dir().join(format!("strata-cli-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        Self(p)
    }
}
impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn options() -> StoreOptions {
    let limits = Limits {
        max_value_bytes: 300,
        ..Limits::FOUNDATIONDB.with_quota(1 << 30)
    };
    Outbox::<RedbEngine>::declare(
        StoreOptions::new(limits)
            .chunked::<BlobKey>()
            .chunk_size(128)
            .quota_scope_tuple_prefix(2),
    )
}

#[derive(Clone, Copy, Debug)]
enum Which {
    Redb,
    Rocks,
}

fn open_engine(which: Which, path: &Path) -> Box<dyn Fn() -> Either> {
    let path = path.to_owned();
    Box::new(move || match which {
        Which::Redb => Either::Redb(
            RedbEngine::open(&path, options().keyspace_specs(), RedbOptions::default()).unwrap(),
        ),
        Which::Rocks => Either::Rocks(
            RocksEngine::open(&path, options().keyspace_specs(), RocksOptions::default()).unwrap(),
        ),
    })
}

enum Either {
    Redb(RedbEngine),
    Rocks(RocksEngine),
}

/// Writes the test database: two notes, a chunked blob (450 bytes in 4
/// chunks), a note expiring in an hour, an expired one, three outbox
/// entries, a consumer that finished one and dead-lettered none.
fn fill<E: Engine>(engine: E) {
    // The tool reads expiry with the system clock: this store writes with
    // the same time.
    let clock = Arc::new(ManualClock::new(SystemClock.now_ms()));
    let store = Store::open_with(
        engine,
        options(),
        clock.clone(),
        Box::new(SeededRng::new(1)),
    )
    .unwrap();
    store.publish_catalog().unwrap();
    let outbox = Outbox::new(
        &store,
        OutboxConfig::default(),
        clock.clone(),
        Box::new(SeededRng::new(2)),
    )
    .unwrap();
    let topic: Topic<String> = Topic::new("notes").unwrap();
    outbox
        .register("notes", "indexer", Start::Beginning)
        .unwrap();
    for id in 1..=2 {
        store
            .transact(|tx| {
                tx.put(
                    &NoteKey { user: 7, id },
                    &Note {
                        title: format!("note {id}"),
                        stars: u32::try_from(id).unwrap(),
                    },
                )?;
                outbox.push(tx, &topic, &format!("put {id}"))?;
                Ok::<_, strata_outbox::OutboxError>(())
            })
            .unwrap();
    }
    store.put(&BlobKey { user: 7 }, &vec![0xAB; 450]).unwrap();
    store
        .put_with_ttl(
            &NoteKey { user: 8, id: 1 },
            &Note {
                title: "soon".into(),
                stars: 0,
            },
            3_600_000,
        )
        .unwrap();
    store
        .put_with_ttl(
            &NoteKey { user: 8, id: 2 },
            &Note {
                title: "gone".into(),
                stars: 0,
            },
            1,
        )
        .unwrap();
    store
        .transact(|tx| {
            outbox.push(tx, &topic, &"third".to_owned())?;
            Ok::<_, strata_outbox::OutboxError>(())
        })
        .unwrap();
    store.engine().sync().unwrap();
}

/// Consumers "mailer" (its first two entries dead) and "audit" (its first
/// entry dead), giving up at the first failure.
fn dead_letters<E: Engine>(engine: E) {
    let store = Store::open(engine, options()).unwrap();
    let mut config = OutboxConfig::default();
    config.max_attempts = 1;
    let outbox = Outbox::new(
        &store,
        config,
        Arc::new(SystemClock),
        Box::new(SeededRng::new(4)),
    )
    .unwrap();
    let topic: Topic<String> = Topic::new("notes").unwrap();
    for (consumer, n) in [("mailer", 2), ("audit", 1)] {
        outbox
            .register("notes", consumer, Start::Beginning)
            .unwrap();
        let lease = outbox.acquire("notes", consumer, "test").unwrap();
        let got = outbox.poll(&lease, &topic, n).unwrap();
        for d in &got {
            let failed = outbox.fail(&lease, d.position, "smtp down").unwrap();
            assert_eq!(failed, strata_outbox::Failed::DeadLettered);
        }
        outbox.release(&lease).unwrap();
    }
}

fn create(which: Which, dir: &Dir) -> PathBuf {
    let path = match which {
        Which::Redb => dir.0.join("db.redb"),
        Which::Rocks => dir.0.join("rocks"),
    };
    match open_engine(which, &path)() {
        Either::Redb(e) => fill(e),
        Either::Rocks(e) => fill(e),
    }
    path
}

fn strata() -> Command {
    Command::cargo_bin("strata").unwrap()
}

fn run(args: &[&str]) -> (i32, String, String) {
    let out = strata().args(args).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn json(args: &[&str]) -> Json {
    let mut all = vec!["--json"];
    all.extend_from_slice(args);
    let (code, out, err) = run(&all);
    assert_eq!(code, 0, "{args:?}: {err}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{args:?}: {e}: {out}"))
}

fn p(path: &Path) -> &str {
    path.to_str().unwrap()
}

#[allow(clippy::too_many_lines)] // one walk through every command, in order
fn inspect(which: Which, engine_name: &str) {
    let dir = Dir::new(&format!("inspect-{which:?}"));
    let db = create(which, &dir);
    let db = p(&db);

    let info = json(&["info", db]);
    assert_eq!(info["engine"], engine_name);
    assert_eq!(info["catalog"], true);
    // Commits: publish, register, two notes, blob, two expiring, third.
    assert_eq!(info["last_version"], 8);
    let ks = |name: &str| {
        info["keyspaces"]
            .as_array()
            .unwrap()
            .iter()
            .find(|k| k["name"] == name)
            .cloned()
            .unwrap_or_else(|| panic!("{name} in {info}"))
    };
    assert_eq!(ks("data")["role"], "data");
    assert_eq!(ks("data")["profile"], "point-lookup");
    assert_eq!(ks("strata.outbox")["profile"], "queue");
    assert_eq!(ks("strata.system")["role"], "system");
    let consumers = info["consumers"].as_array().unwrap();
    assert_eq!(consumers.len(), 1);
    assert_eq!(consumers[0]["topic"], "notes");
    assert_eq!(consumers[0]["consumer"], "indexer");
    assert_eq!(consumers[0]["lag_entries"], 3);
    let (code, text, _) = run(&["info", db]);
    assert_eq!(code, 0);
    assert!(text.contains("catalog: yes"), "{text}");
    assert!(
        text.contains("notes/indexer: checkpoint 0.0, lag 3 entries"),
        "{text}"
    );

    // Scan: keys in tuple notation, values from their envelopes.
    let scan = json(&["scan", db, "data", "--tuple-prefix", r#"("note", 7)"#]);
    let rows = scan["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[0]["key"]["key"], r#"("note", 7, 1)"#);
    assert_eq!(
        rows[0]["key"]["hex"],
        "026e6f7465001507150 1".replace(' ', "")
    );
    assert_eq!(rows[0]["value"]["codec"], "json");
    assert_eq!(rows[0]["value"]["schema_version"], 2);
    assert_eq!(rows[0]["value"]["checksum"], "ok");
    assert_eq!(rows[0]["value"]["body"]["json"]["title"], "note 1");
    assert_eq!(rows[1]["value"]["body"]["json"]["stars"], 2);
    let reversed = json(&["scan", db, "data", "--reverse", "--limit", "1"]);
    assert_eq!(reversed["rows"][0]["key"]["key"], r#"("note", 8, 2)"#);
    let (_, text, _) = run(&["scan", db, "data", "--prefix", r#"("note", 8)"#]);
    let line = text
        .lines()
        .find(|l| l.starts_with(r#"("note", 8, 1) = [json v2, checksum ok, expires at "#))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(!line.contains("(expired)"), "{line}");
    assert!(
        text.contains(r#"("note", 8, 2) = "#) && text.contains("(expired)"),
        "{text}"
    );
    assert!(text.contains("(2 rows)"), "{text}");

    // Get: the chunked blob is one value with its chunk count.
    let blob = json(&["get", db, "data", r#"("blob", 7)"#]);
    assert_eq!(blob["found"], true);
    assert_eq!(blob["value"]["chunks"], 4);
    assert_eq!(blob["value"]["flags"]["chunked"], true);
    assert_eq!(blob["value"]["length"], 450, "the whole reassembled body");
    assert_eq!(blob["value"]["codec"], "raw");
    assert_eq!(
        blob["value"]["body"]["hex"],
        "ab".repeat(64),
        "the first 64 bytes"
    );
    let hexed = json(&["get", db, "data", "0x02626c6f62001507"]);
    assert_eq!(hexed["value"]["chunks"], 4, "the same key in hex");
    let (code, text, _) = run(&["get", db, "data", r#"("note", 9, 9)"#]);
    assert_eq!(code, 1);
    assert!(text.contains("not found"));
    // Another keyspace is shown raw, and says so.
    let (code, text, _) = run(&["scan", db, "strata.outbox"]);
    assert_eq!(code, 0);
    assert!(text.contains("values shown raw"), "{text}");
    assert!(text.contains("(3 rows)"), "{text}");

    // Verify: clean.
    let v = json(&["verify", db]);
    assert_eq!(v["ok"], true, "{v}");
    assert_eq!(v["values"], 5);
    assert_eq!(v["chunked_values"], 1);
    assert_eq!(v["chunk_rows"], 4);
    assert_eq!(v["expiry_entries"], 2);
    // ("note", 7), ("note", 8) and ("blob", 7).
    assert_eq!(v["quota_scopes"], 3);
    assert_eq!(v["outbox_consumers"], 1);

    // Outbox: list, dead letters, reset.
    let list = json(&["outbox", db, "list"]);
    assert_eq!(list["consumers"][0]["lag_entries"], 3);
    let dead = json(&["outbox", db, "dead", "notes", "indexer"]);
    assert_eq!(dead["dead_letters"].as_array().unwrap().len(), 0);
    let reset = json(&["outbox", db, "reset", "notes", "indexer", "end"]);
    assert_eq!(reset["checkpoint"], "8.65535");
    assert_eq!(
        json(&["outbox", db, "list"])["consumers"][0]["lag_entries"],
        0
    );

    // Dead letters: two for "mailer", one for "audit", made by a consumer
    // that gives up at the first failure.
    match open_engine(which, Path::new(db))() {
        Either::Redb(e) => dead_letters(e),
        Either::Rocks(e) => dead_letters(e),
    }
    let dead = json(&["outbox", db, "dead", "notes", "mailer"]);
    let letters = dead["dead_letters"].as_array().unwrap();
    assert_eq!(letters.len(), 2);
    assert_eq!(letters[0]["error"], "smtp down");
    assert_eq!(letters[0]["attempts"], 1);
    let (_, text, _) = run(&["outbox", db, "dead", "notes", "mailer"]);
    assert!(text.starts_with("2 dead letters of notes/mailer"), "{text}");
    assert!(
        text.contains(r#"1 attempts, last error "smtp down""#),
        "{text}"
    );
    let mailer_lag = || {
        json(&["outbox", db, "list"])["consumers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["consumer"] == "mailer")
            .unwrap()["lag_entries"]
            .as_u64()
            .unwrap()
    };
    let lag_before = mailer_lag();
    let redriven = json(&["outbox", db, "redrive", "notes", "mailer"]);
    assert_eq!(redriven["redriven"], 2);
    assert_eq!(
        json(&["outbox", db, "dead", "notes", "mailer"])["dead_letters"],
        serde_json::json!([])
    );
    let lag_after = mailer_lag();
    assert_eq!(lag_after, lag_before + 2, "re-driven entries wait again");
    let (_, text, _) = run(&["outbox", db, "purge", "notes", "audit"]);
    assert_eq!(text.trim(), "purged 1 dead letters of notes/audit");
    assert_eq!(
        json(&["outbox", db, "dead", "notes", "audit"])["dead_letters"],
        serde_json::json!([])
    );
    let (code, _, err) = run(&["outbox", db, "dead", "notes", "nobody"]);
    assert_eq!(code, 2, "an unknown consumer's dead letters: {err}");
    assert!(err.contains("not registered"), "{err}");

    // Unregistered consumers no longer hold trimming back: only the
    // indexer is left, past the three first entries.
    let (_, text, _) = run(&["outbox", db, "unregister", "notes", "audit"]);
    assert_eq!(text.trim(), "unregistered notes/audit");
    json(&["outbox", db, "unregister", "notes", "mailer"]);
    let (code, _, _) = run(&["outbox", db, "unregister", "notes", "mailer"]);
    assert_eq!(code, 2, "no longer registered");
    let listed = json(&["outbox", db, "list"]);
    assert_eq!(listed["consumers"].as_array().unwrap().len(), 1, "{listed}");
    let trimmed = json(&["outbox", db, "trim", "notes"]);
    assert_eq!(trimmed["trimmed"], 3, "{trimmed}");

    // Sweep removes the expired note (its clock is the system's).
    let sweep = json(&["sweep", db]);
    assert_eq!(sweep["removed"], 1);
    let gone = run(&["get", db, "data", r#"("note", 8, 2)"#]);
    assert_eq!(gone.0, 1);
    assert_eq!(json(&["verify", db])["values"], 4);

    // Backup, restore, compact.
    let backup = dir.0.join("backup");
    let b = json(&["backup", db, p(&backup)]);
    assert!(b["version"].as_u64().unwrap() >= 10);
    let (code, _, err) = run(&["backup", db, p(&backup)]);
    assert_eq!(code, 2);
    assert!(err.contains("exists"), "{err}");
    let restored = dir.0.join("restored");
    json(&["restore", p(&backup), p(&restored)]);
    assert_eq!(json(&["verify", p(&restored)])["values"], 4);
    json(&["compact", db]);
    assert_eq!(json(&["verify", db])["ok"], true);
}

#[test]
fn inspect_and_operate_redb() {
    inspect(Which::Redb, "redb");
}

#[test]
fn inspect_and_operate_rocksdb() {
    inspect(Which::Rocks, "rocksdb");
}

/// The rows of a keyspace, for a planted change to pick from.
type Rows<'a> = &'a dyn Fn(strata_engine::Keyspace) -> Vec<(Vec<u8>, Vec<u8>)>;

/// Damages the database at `db` with `m` (keyspace by name).
fn plant(
    which: Which,
    db: &Path,
    keyspace: &str,
    m: impl Fn(strata_engine::Keyspace, Rows<'_>) -> Mutation,
) {
    fn go<E: Engine>(
        e: &E,
        keyspace: &str,
        m: &dyn Fn(strata_engine::Keyspace, Rows<'_>) -> Mutation,
    ) {
        let ks = e.keyspace(keyspace).unwrap();
        let rows = |k| {
            e.snapshot()
                .unwrap()
                .range(k, RangeSpec::all())
                .unwrap()
                .collect::<Result<Vec<_>, _>>()
                .unwrap()
        };
        e.commit(Commit::new().mutate(m(ks, &rows))).unwrap();
    }
    match open_engine(which, db)() {
        Either::Redb(e) => go(&e, keyspace, &m),
        Either::Rocks(e) => go(&e, keyspace, &m),
    }
}

fn verify_catches(which: Which) {
    let dir = Dir::new(&format!("verify-{which:?}"));
    let clean = create(which, &dir);
    let (code, text, _) = run(&["verify", p(&clean)]);
    assert_eq!(code, 0, "{text}");
    assert!(text.ends_with("OK: nothing wrong\n"), "{text}");

    let note = tuple::pack(&("note", 7u64, 1u64));
    // A flipped byte in a value (same length: only the checksum sees it).
    plant(which, &clean, "data", |ks, rows| {
        let (k, mut v) = rows(ks).into_iter().find(|(k, _)| *k == note).unwrap();
        let last = v.len() - 1;
        v[last] ^= 0x01;
        Mutation::Put {
            ks,
            key: k,
            value: v,
        }
    });
    let v = {
        let (code, out, _) = run(&["--json", "verify", p(&clean)]);
        assert_eq!(code, 1, "damage is exit status 1");
        serde_json::from_str::<Json>(&out).unwrap()
    };
    assert_eq!(v["ok"], false);
    let problems = v["problems"].as_array().unwrap();
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(
        problems[0]
            .as_str()
            .unwrap()
            .starts_with(r#"value at ("note", "#),
        "{problems:?}"
    );
    assert!(
        problems[0].as_str().unwrap().contains("checksum"),
        "{problems:?}"
    );

    // A deleted chunk row.
    let dir2 = Dir::new(&format!("verify2-{which:?}"));
    let db = create(which, &dir2);
    plant(which, &db, "strata.system", |ks, rows| {
        let chunk = rows(ks)
            .into_iter()
            .find(|(k, _)| k.starts_with(&tuple::pack(&("c",))[..2]))
            .unwrap();
        Mutation::Delete { ks, key: chunk.0 }
    });
    let (code, text, _) = run(&["verify", p(&db)]);
    assert_eq!(code, 1);
    assert!(
        text.contains(r#"PROBLEM chunked value at ("blob", 7)"#),
        "{text}"
    );
    assert!(text.contains("FAILED"), "{text}");

    // A quota counter off by one.
    let dir3 = Dir::new(&format!("verify3-{which:?}"));
    let db = create(which, &dir3);
    let scope = tuple::pack(&("note", 7u64));
    plant(which, &db, "strata.system", |ks, _| Mutation::Add {
        ks,
        key: tuple::pack(&("q", scope.as_slice())),
        delta: 1,
    });
    let (code, text, _) = run(&["verify", p(&db)]);
    assert_eq!(code, 1);
    let expected = r#"PROBLEM quota scope ("note", 7): counter "#;
    assert!(text.contains(expected), "{text}");
    assert_eq!(text.matches("PROBLEM").count(), 1, "{text}");
}

#[test]
fn verify_catches_planted_damage_on_redb() {
    verify_catches(Which::Redb);
}

#[test]
fn verify_catches_planted_damage_on_rocksdb() {
    verify_catches(Which::Rocks);
}

/// Four kinds of damage planted at once (an expiring value's index entry
/// removed, a chunk row of no chunked value, a system row of no kind the
/// store writes, an outbox checkpoint beyond the last commit): `verify`
/// reports exactly these four problems, each line as written here by
/// hand, in text and JSON.
fn verify_reports_system_damage_line_by_line(which: Which) {
    let dir = Dir::new(&format!("verify-lines-{which:?}"));
    let db = create(which, &dir);
    let expiring = tuple::pack(&("note", 8u64, 1u64));
    let expires_at = std::cell::Cell::new(None);
    plant(which, &db, "strata.system", |ks, rows| {
        let (entry, at) = rows(ks)
            .into_iter()
            .find_map(|(k, _)| {
                let (tag, at, key) = tuple::unpack::<(String, u64, Vec<u8>)>(&k).ok()?;
                (tag == "x" && key == expiring).then_some((k, at))
            })
            .expect("the expiring note's index entry");
        expires_at.set(Some(at));
        Mutation::Delete { ks, key: entry }
    });
    let at = expires_at.get().unwrap();
    let stale_before = {
        let (_, out, _) = run(&["--json", "verify", p(&db)]);
        serde_json::from_str::<Json>(&out).unwrap()["stale_expiry_entries"]
            .as_u64()
            .unwrap()
    };
    // An expiry entry a second later than the note's expiry: stale (what
    // an overwrite leaves until the sweeper passes), counted, no problem.
    plant(which, &db, "strata.system", |ks, _| Mutation::Put {
        ks,
        key: tuple::pack(&("x", at + 1_000, expiring.as_slice())),
        value: Vec::new(),
    });
    plant(which, &db, "strata.system", |ks, _| Mutation::Put {
        ks,
        key: tuple::pack(&("c", tuple::pack(&("zzz",)).as_slice(), 0u32)),
        value: vec![1, 2, 3],
    });
    plant(which, &db, "strata.system", |ks, _| Mutation::Put {
        ks,
        key: tuple::pack(&("zz", 1u64)),
        value: Vec::new(),
    });
    // The outbox consumer's checkpoint moved past every commit.
    plant(which, &db, strata_outbox::STATE, |ks, _| Mutation::Put {
        ks,
        key: tuple::pack(&("c", "notes", "indexer")),
        value: tuple::pack(&(1_000_000u64, 0u64)),
    });
    let version = {
        let (_, out, _) = run(&["--json", "verify", p(&db)]);
        serde_json::from_str::<Json>(&out).unwrap()["version"].clone()
    };
    let mut expected = vec![
        format!(r#"value at ("note", 8, 1) expires at {at} but is not in the expiry index"#),
        r#"chunk 0 of ("zzz",) belongs to no chunked value"#.to_owned(),
        r#"unknown system row ("zz", 1)"#.to_owned(),
        format!(
            "outbox consumer notes/indexer: checkpoint 1000000.0 is beyond the last commit {version}"
        ),
    ];
    expected.sort();

    let (code, text, _) = run(&["verify", p(&db)]);
    assert_eq!(code, 1, "{text}");
    let mut lines: Vec<String> = text
        .lines()
        .filter_map(|l| l.strip_prefix("PROBLEM "))
        .map(str::to_owned)
        .collect();
    lines.sort();
    assert_eq!(lines, expected, "{text}");
    assert!(text.ends_with("FAILED: 4 problems\n"), "{text}");
    assert!(
        text.contains(&format!("({} stale)", stale_before + 1)),
        "{text}"
    );

    let (code, out, _) = run(&["--json", "verify", p(&db)]);
    assert_eq!(code, 1);
    let v: Json = serde_json::from_str(&out).unwrap();
    let mut problems: Vec<String> = v["problems"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_str().unwrap().to_owned())
        .collect();
    problems.sort();
    assert_eq!(problems, expected);
    assert_eq!(v["ok"], false);
    assert_eq!(v["stale_expiry_entries"], stale_before + 1);
}

#[test]
fn verify_reports_system_damage_line_by_line_on_redb() {
    verify_reports_system_damage_line_by_line(Which::Redb);
}

#[test]
fn verify_reports_system_damage_line_by_line_on_rocksdb() {
    verify_reports_system_damage_line_by_line(Which::Rocks);
}

#[test]
fn copy_redb_to_rocksdb_is_verified_and_raises_the_version() {
    let dir = Dir::new("copy");
    let src = create(Which::Redb, &dir);
    let dest = dir.0.join("copy-rocks");
    let out = json(&["copy", p(&src), p(&dest)]);
    assert_eq!(out["dest_engine"], "rocksdb");
    assert_eq!(out["resumed"], false);
    let version = out["version"].as_u64().unwrap();
    assert!(version >= 8, "the copy's version is at least the source's");
    // Rows: 5 data, the system rows, 3 outbox entries, the consumer.
    assert!(out["rows"].as_u64().unwrap() > 10);
    let a = json(&["scan", p(&src), "data", "--limit", "0"]);
    let b = json(&["scan", p(&dest), "data", "--limit", "0"]);
    assert_eq!(a["rows"], b["rows"]);
    assert_eq!(json(&["verify", p(&dest)])["ok"], true);
    assert_eq!(json(&["info", p(&dest)])["last_version"], version);
    // A second copy into the same destination is refused.
    let (code, _, err) = run(&["copy", p(&src), p(&dest)]);
    assert_eq!(code, 2);
    assert!(err.contains("holds data"), "{err}");
}

#[test]
fn not_a_database_and_held_databases_are_clear_errors() {
    let dir = Dir::new("errors");
    let (code, _, err) = run(&["info", p(&dir.0.join("missing.redb"))]);
    assert_eq!(code, 2);
    assert!(err.contains("does not exist"), "{err}");
    let text = dir.0.join("notes.txt");
    std::fs::write(&text, "hello, not a database").unwrap();
    let (code, _, err) = run(&["verify", p(&text)]);
    assert_eq!(code, 2);
    assert!(err.contains("not a redb file"), "{err}");
    let (code, _, err) = run(&["info", p(&dir.0)]);
    assert_eq!(code, 2);
    assert!(err.contains("CURRENT"), "{err}");
    // A redb file this process holds open for writing.
    let db = dir.0.join("held.redb");
    let held = RedbEngine::open(&db, options().keyspace_specs(), RedbOptions::default()).unwrap();
    let (code, _, err) = run(&["info", p(&db)]);
    assert_eq!(code, 2);
    assert!(err.contains("another process holds it"), "{err}");
    drop(held);
    // A truncated file.
    let (code, _, err) = run(&["info", p(&db)]);
    assert_eq!(code, 0, "{err}");
    let bytes = std::fs::read(&db).unwrap();
    std::fs::write(&db, &bytes[..bytes.len() / 3]).unwrap();
    let (code, _, err) = run(&["info", p(&db)]);
    assert_eq!(code, 2, "{err}");
    assert!(err.starts_with("strata: "), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    // A bad key notation.
    let dir2 = Dir::new("errors2");
    let ok = create(Which::Redb, &dir2);
    let (code, _, err) = run(&["get", p(&ok), "data", r#"("unterminated"#]);
    assert_eq!(code, 2);
    assert!(err.contains("unterminated"), "{err}");
}

/// An agent-memory database on redb with two grips indexed in `dir/index`.
fn agent_memory(dir: &Dir) -> PathBuf {
    use strata_schemas::agent_memory::{AgentMemory, EventRef, Grip};
    let path = dir.0.join("memory.redb");
    let options = AgentMemory::<RedbEngine>::declare(StoreOptions::new(Limits::FOUNDATIONDB));
    let engine = RedbEngine::open(&path, options.keyspace_specs(), RedbOptions::default()).unwrap();
    let clock = Arc::new(SystemClock);
    let store = Store::open(engine, options).unwrap();
    let outbox = Outbox::new(
        &store,
        OutboxConfig::default(),
        clock.clone(),
        Box::new(SeededRng::new(3)),
    )
    .unwrap();
    let memory = AgentMemory::open(&store, &outbox).unwrap();
    let at = |ms: u64| EventRef {
        timestamp_ms: ms,
        event_id: format!("01HNA{ms:021}"),
    };
    for (i, text) in ["rotate refresh tokens", "run migrations first"]
        .iter()
        .enumerate()
    {
        let ms = 1_706_540_400_000 + i as u64 * 1_000;
        memory
            .put_grip(&Grip {
                grip_id: format!("grip:{ms:013}:g{i}"),
                excerpt: (*text).to_owned(),
                start: at(ms),
                end: at(ms),
                source: "test".into(),
                toc_node_id: None,
            })
            .unwrap();
    }
    store.engine().sync().unwrap();
    let mut indexer = strata_search::Indexer::open(
        &outbox,
        strata_schemas::agent_memory::search_spec().unwrap(),
        &strata_search::Location::Dir(dir.0.join("index")),
        strata_search::IndexerConfig::new("test"),
        clock,
    )
    .unwrap();
    indexer.catch_up().unwrap();
    indexer.close().unwrap();
    path
}

#[test]
#[allow(clippy::too_many_lines)] // one walk through the index's life, in order
fn search_indexes_are_listed_queried_verified_and_rebuilt() {
    let dir = Dir::new("search");
    let db = agent_memory(&dir);
    let db = p(&db);
    let listed = json(&["search", db, "list"]);
    let index = &listed["indexes"][0];
    assert_eq!(index["name"], "agent_memory");
    assert_eq!(index["documents"], 2);
    assert_eq!(index["generation"], 1);
    assert_eq!(index["mapping_known"], true);
    assert_eq!(index["lag_entries"], 0);
    assert_eq!(
        json(&["info", db])["search_indexes"][0]["documents"],
        2,
        "info shows it too"
    );
    let hits = json(&["search", db, "query", "agent_memory", "migrations"]);
    assert_eq!(hits["hits"].as_array().unwrap().len(), 1);
    assert_eq!(
        hits["hits"][0]["key"],
        r#"("am", "doc", "grip:1706540401000:g1")"#
    );
    assert_eq!(hits["hits"][0]["freshness"], "current");
    let v = json(&["search", db, "verify", "agent_memory"]);
    assert_eq!(v["ok"], true, "{v}");
    assert_eq!(
        (v["documents"].clone(), v["rows"].clone()),
        (2.into(), 2.into())
    );
    let r = json(&["search", db, "rebuild", "agent_memory"]);
    assert_eq!(r["documents"], 2);
    assert_eq!(r["generation"], 2);
    assert_eq!(json(&["search", db, "list"])["indexes"][0]["generation"], 2);
    let all = json(&["verify", db]);
    assert_eq!(all["ok"], true, "{all}");
    assert_eq!(all["search_indexes"], 1);
    // A row removed behind the outbox's back: the index (with no lag) has
    // a document for it, which the read-only verify finds.
    {
        let options = strata_schemas::agent_memory::AgentMemory::<RedbEngine>::declare(
            StoreOptions::new(Limits::FOUNDATIONDB),
        );
        let e = RedbEngine::open(db, options.keyspace_specs(), RedbOptions::default()).unwrap();
        let data = e.keyspace("data").unwrap();
        e.commit(Commit::new().delete(data, tuple::pack(&("am", "doc", "grip:1706540400000:g0"))))
            .unwrap();
    }
    let (code, text, _) = run(&["verify", db]);
    assert_eq!(code, 1, "{text}");
    assert!(
        text.contains(r#"PROBLEM search index agent_memory: extra (a document without its row): ("am", "doc", "grip:1706540400000:g0")"#),
        "{text}"
    );
    assert_eq!(text.matches("PROBLEM").count(), 1, "{text}");
    // Behind the outbox's back again: a row changed (its document is of
    // another value) and a row added (no document): each reported once,
    // the lines as written here.
    {
        use strata_schemas::agent_memory::SearchDoc;
        let options = strata_schemas::agent_memory::AgentMemory::<RedbEngine>::declare(
            StoreOptions::new(Limits::FOUNDATIONDB),
        );
        let e = RedbEngine::open(db, options.keyspace_specs(), RedbOptions::default()).unwrap();
        let data = e.keyspace("data").unwrap();
        let kept = tuple::pack(&("am", "doc", "grip:1706540401000:g1"));
        let stored = e.snapshot().unwrap().get(data, &kept).unwrap().unwrap();
        let require = strata_codec::DecodeOptions::checksum(strata_codec::ChecksumCheck::Require);
        let (mut doc, _) = strata_codec::decode_with::<SearchDoc>(&kept, &stored, require).unwrap();
        doc.text.push_str(" (edited)");
        let mut changed = Vec::new();
        strata_codec::encode(
            &doc,
            &kept,
            strata_codec::EncodeOptions::default(),
            &mut changed,
        )
        .unwrap();
        let new = tuple::pack(&("am", "doc", "grip:1706540402000:g2"));
        let mut added = Vec::new();
        strata_codec::encode(
            &doc,
            &new,
            strata_codec::EncodeOptions::default(),
            &mut added,
        )
        .unwrap();
        e.commit(Commit::new().put(data, kept, changed).put(data, new, added))
            .unwrap();
    }
    let (code, text, _) = run(&["verify", db]);
    assert_eq!(code, 1, "{text}");
    let mut lines: Vec<&str> = text.lines().filter(|l| l.starts_with("PROBLEM")).collect();
    lines.sort_unstable();
    assert_eq!(
        lines,
        [
            r#"PROBLEM search index agent_memory: extra (a document without its row): ("am", "doc", "grip:1706540400000:g0")"#,
            r#"PROBLEM search index agent_memory: missing (a row without its document): ("am", "doc", "grip:1706540402000:g2")"#,
            r#"PROBLEM search index agent_memory: stale (a document of another value): ("am", "doc", "grip:1706540401000:g1")"#,
        ],
        "{text}"
    );
    // Rebuilt, the index is whole again; then a second document for one
    // row, added to the index's files behind its back (its checkpoint
    // kept): reported once, as a duplicate, by both verifies.
    let rebuilt = json(&["search", db, "rebuild", "agent_memory"]);
    assert_eq!(rebuilt["documents"], 2, "{rebuilt}");
    assert_eq!(json(&["verify", db])["ok"], true);
    let generation = rebuilt["generation"].as_u64().unwrap();
    duplicate_a_document(
        &dir.0.join("index").join(format!("gen-{generation}")),
        &tuple::pack(&("am", "doc", "grip:1706540401000:g1")),
    );
    let (code, text, _) = run(&["verify", db]);
    assert_eq!(code, 1, "{text}");
    let lines: Vec<&str> = text.lines().filter(|l| l.starts_with("PROBLEM")).collect();
    assert_eq!(
        lines,
        [
            r#"PROBLEM search index agent_memory: duplicate (more than one document for one row): ("am", "doc", "grip:1706540401000:g1")"#
        ],
        "{text}"
    );
    let (code, text, _) = run(&["search", db, "verify", "agent_memory"]);
    assert_eq!(code, 1, "{text}");
    let lines: Vec<&str> = text.lines().filter(|l| l.starts_with("PROBLEM")).collect();
    assert_eq!(
        lines,
        [r#"PROBLEM duplicate document ("am", "doc", "grip:1706540401000:g1")"#],
        "{text}"
    );
    let (code, out, _) = run(&["--json", "search", db, "verify", "agent_memory"]);
    assert_eq!(code, 1, "{out}");
    let v: Json = serde_json::from_str(&out).unwrap();
    assert_eq!(
        v["duplicates"],
        serde_json::json!([r#"("am", "doc", "grip:1706540401000:g1")"#]),
        "{v}"
    );
    assert_eq!(
        (v["missing"].clone(), v["extra"].clone(), v["stale"].clone()),
        (
            serde_json::json!([]),
            serde_json::json!([]),
            serde_json::json!([])
        ),
        "{v}"
    );
    // An unknown index, and an index whose files are gone.
    let (code, _, err) = run(&["search", db, "verify", "nope"]);
    assert_eq!(code, 2);
    assert!(err.contains("no search index \"nope\""), "{err}");
    std::fs::remove_file(dir.0.join("index").join("CURRENT")).unwrap();
    let (code, text, _) = run(&["verify", db]);
    assert_eq!(code, 1, "{text}");
    assert!(
        text.contains("PROBLEM search index agent_memory:"),
        "{text}"
    );
}

/// Adds to the tantivy index in `dir` a second copy of the document whose
/// `_key` is `key`, committed with the index's own payload (its
/// checkpoint), as damage no indexer would make.
fn duplicate_a_document(dir: &Path, key: &[u8]) {
    use strata_search::tantivy::{
        self, Document as _, TantivyDocument, Term, collector::DocSetCollector, query::TermQuery,
        schema::IndexRecordOption,
    };
    let index = tantivy::Index::open_in_dir(dir).unwrap();
    let payload = index.load_metas().unwrap().payload.unwrap();
    let field = index.schema().get_field("_key").unwrap();
    let reader = index.reader().unwrap();
    let searcher = reader.searcher();
    let query = TermQuery::new(Term::from_field_bytes(field, key), IndexRecordOption::Basic);
    let hits: Vec<_> = searcher
        .search(&query, &DocSetCollector)
        .unwrap()
        .into_iter()
        .collect();
    assert_eq!(hits.len(), 1, "one document for the key before");
    let doc: TantivyDocument = searcher.doc(hits[0]).unwrap();
    assert!(doc.iter_fields_and_values().count() > 0);
    let mut writer: tantivy::IndexWriter = index.writer(15_000_000).unwrap();
    writer.add_document(doc).unwrap();
    let mut prepared = writer.prepare_commit().unwrap();
    prepared.set_payload(&payload);
    prepared.commit().unwrap();
}

/// `search list` shows the index's own lag: an index whose files are
/// older than what its consumer acknowledged (restored from an old copy)
/// is shown behind, with the entries after its files' checkpoint.
#[test]
fn search_list_shows_an_index_behind_its_consumer() {
    use strata_schemas::agent_memory::{AgentMemory, EventRef, Grip};
    let dir = Dir::new("search-behind");
    let path = agent_memory(&dir);
    let copy = |from: &Path, to: &Path| {
        let status = std::process::Command::new("cp")
            .arg("-a")
            .arg(from)
            .arg(to)
            .status()
            .unwrap();
        assert!(status.success());
    };
    let old = dir.0.join("index-old");
    copy(&dir.0.join("index"), &old);
    {
        let options = AgentMemory::<RedbEngine>::declare(StoreOptions::new(Limits::FOUNDATIONDB));
        let engine =
            RedbEngine::open(&path, options.keyspace_specs(), RedbOptions::default()).unwrap();
        let clock = Arc::new(SystemClock);
        let store = Store::open(engine, options).unwrap();
        let outbox = Outbox::new(
            &store,
            OutboxConfig::default(),
            clock.clone(),
            Box::new(SeededRng::new(9)),
        )
        .unwrap();
        let memory = AgentMemory::open(&store, &outbox).unwrap();
        let at = EventRef {
            timestamp_ms: 1_706_540_500_000,
            event_id: "01HNA000000001706540500000".to_owned(),
        };
        memory
            .put_grip(&Grip {
                grip_id: "grip:1706540500000:g9".to_owned(),
                excerpt: "a third grip".to_owned(),
                start: at.clone(),
                end: at,
                source: "test".into(),
                toc_node_id: None,
            })
            .unwrap();
        store.engine().sync().unwrap();
        let mut indexer = strata_search::Indexer::open(
            &outbox,
            strata_schemas::agent_memory::search_spec().unwrap(),
            &strata_search::Location::Dir(dir.0.join("index")),
            strata_search::IndexerConfig::new("test"),
            clock,
        )
        .unwrap();
        indexer.catch_up().unwrap();
        indexer.close().unwrap();
    }
    let db = p(&path);
    let current = json(&["search", db, "list"]);
    assert_eq!(current["indexes"][0]["lag_entries"], 0, "{current}");
    assert_eq!(current["indexes"][0]["behind"], Json::Null, "{current}");
    std::fs::remove_dir_all(dir.0.join("index")).unwrap();
    copy(&old, &dir.0.join("index"));
    let behind = json(&["search", db, "list"]);
    let index = &behind["indexes"][0];
    assert_eq!(index["behind"], true, "{behind}");
    assert_eq!(index["documents"], 2, "{behind}");
    assert!(index["lag_entries"].as_u64().unwrap() >= 1, "{behind}");
    let (code, text, _) = run(&["search", db, "list"]);
    assert_eq!(code, 0);
    assert!(text.contains("BEHIND its consumer's checkpoint"), "{text}");
}

#[test]
fn copy_redb_to_postgresql_and_inspect_it_there() {
    use strata_engine_postgres::testing::TestServer;
    let server = TestServer::shared().unwrap();
    let config = server.database("cli_copy").unwrap();
    let url = format!(
        "host={} port={} user={} dbname={}",
        server.socket_dir().display(),
        server.port(),
        config.get_user().unwrap(),
        config.get_dbname().unwrap()
    );
    let dir = Dir::new("copy-pg");
    let src = create(Which::Redb, &dir);
    let out = json(&["copy", p(&src), &url]);
    assert_eq!(out["dest_engine"], "postgresql");
    let version = out["version"].as_u64().unwrap();
    assert!(version >= 8);
    let info = json(&["info", &url]);
    assert_eq!(info["engine"], "postgresql");
    assert_eq!(info["last_version"], version);
    assert_eq!(info["catalog"], true);
    assert_eq!(info["consumers"][0]["lag_entries"], 3);
    let a = json(&["scan", p(&src), "data", "--limit", "0"]);
    let b = json(&["scan", &url, "data", "--limit", "0"]);
    assert_eq!(a["rows"], b["rows"]);
    let v = json(&["verify", &url]);
    assert_eq!(v["ok"], true, "{v}");
    assert_eq!(v["quota_scopes"], 3);
    let (code, _, err) = run(&["backup", &url, p(&dir.0.join("pg-backup"))]);
    assert_eq!(code, 2);
    assert!(err.contains("pg_dump"), "{err}");
    // The copy's own commits sort after the source's: a new outbox entry
    // through the tool's reset lands above every copied one.
    let reset = json(&["outbox", &url, "reset", "notes", "indexer", "end"]);
    let at: Vec<u64> = reset["checkpoint"]
        .as_str()
        .unwrap()
        .split('.')
        .map(|n| n.parse().unwrap())
        .collect();
    assert!(at[0] >= version, "{reset}");
}

/// The test database's keyspaces (a copy keeps its progress in the
/// system keyspace).
fn copy_specs() -> Vec<strata_engine::KeyspaceSpec> {
    options().keyspace_specs()
}

/// Where `strata copy` records its progress: a row of the system keyspace.
fn progress_key() -> Vec<u8> {
    tuple::pack(&("strata.copy", "progress"))
}

#[test]
fn an_interrupted_copy_resumes_after_its_last_batch() {
    let dir = Dir::new("resume");
    let src = create(Which::Redb, &dir);
    let whole = dir.0.join("whole.redb");
    let full = json(&["copy", p(&src), p(&whole)]);
    let total = full["rows"].as_u64().unwrap();
    // Nothing of the copy's own is left: no keyspace, no progress row.
    let info = json(&["info", p(&whole)]);
    assert!(
        !info["keyspaces"]
            .as_array()
            .unwrap()
            .iter()
            .any(|k| k["name"] == "strata.copy"),
        "{info}"
    );
    assert_eq!(json(&["verify", p(&whole)])["ok"], true);
    // What an interrupted copy leaves: the first keyspace in name order
    // ("data") partly copied, with its progress row in the same commit:
    // here, its first two rows.
    let dest = dir.0.join("part.redb");
    let specs = copy_specs();
    let source =
        RedbEngine::open_read_only(&src, options().keyspace_specs(), RedbOptions::default())
            .unwrap();
    let version = source.last_version();
    let data = source.keyspace("data").unwrap();
    let first_two: Vec<(Vec<u8>, Vec<u8>)> = source
        .snapshot()
        .unwrap()
        .range(data, RangeSpec::all().limit(2))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    drop(source);
    let part = RedbEngine::open(&dest, specs, RedbOptions::default()).unwrap();
    let (d, progress) = (
        part.keyspace("data").unwrap(),
        part.keyspace("strata.system").unwrap(),
    );
    let mut commit = Commit::new();
    for (k, v) in &first_two {
        commit = commit.put(d, k.clone(), v.clone());
    }
    commit = commit.put(
        progress,
        progress_key(),
        tuple::pack(&(version, "data", first_two[1].0.as_slice())),
    );
    part.commit(commit).unwrap();
    drop(part);
    let resumed = json(&["copy", p(&src), p(&dest)]);
    assert_eq!(resumed["resumed"], true);
    assert_eq!(
        resumed["rows"].as_u64().unwrap(),
        total - 2,
        "the two rows are not copied again"
    );
    let a = json(&["scan", p(&src), "data", "--limit", "0"]);
    let b = json(&["scan", p(&dest), "data", "--limit", "0"]);
    assert_eq!(a["rows"], b["rows"]);
    // A destination that holds a row the source lacks (written behind the
    // copy's back) fails the final comparison, naming it.
    let odd = dir.0.join("odd.redb");
    let specs = copy_specs();
    let e = RedbEngine::open(&odd, specs, RedbOptions::default()).unwrap();
    let (d, progress) = (
        e.keyspace("strata.outbox.dead").unwrap(),
        e.keyspace("strata.system").unwrap(),
    );
    let data = e.keyspace("data").unwrap();
    let mut commit = Commit::new().put(d, b"stray".to_vec(), b"x".to_vec());
    for (k, v) in &first_two {
        commit = commit.put(data, k.clone(), v.clone());
    }
    e.commit(commit.put(
        progress,
        progress_key(),
        tuple::pack(&(version, "data", first_two[1].0.as_slice())),
    ))
    .unwrap();
    drop(e);
    let (code, _, err) = run(&["copy", p(&src), p(&odd)]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains(r#"the copy has a row the source lacks in strata.outbox.dead: "stray""#),
        "{err}"
    );
    // A progress row from another source version is refused.
    let stale = dir.0.join("stale.redb");
    let specs = copy_specs();
    let e = RedbEngine::open(&stale, specs, RedbOptions::default()).unwrap();
    let progress = e.keyspace("strata.system").unwrap();
    e.commit(Commit::new().put(
        progress,
        progress_key(),
        tuple::pack(&(version - 1, "data", b"x".as_slice())),
    ))
    .unwrap();
    drop(e);
    let (code, _, err) = run(&["copy", p(&src), p(&stale)]);
    assert_eq!(code, 2);
    assert!(err.contains("copy into a new destination"), "{err}");
}

#[test]
fn ctrl_c_stops_a_copy_that_then_resumes_and_a_bad_backup_is_not_restored() {
    let dir = Dir::new("ctrl-c");
    // A source big enough for a copy to take a while: 60,000 raw rows.
    let src = dir.0.join("big.redb");
    {
        let e = RedbEngine::open(&src, options().keyspace_specs(), RedbOptions::default()).unwrap();
        let data = e.keyspace("data").unwrap();
        for chunk in 0..60u32 {
            let mut c = Commit::new().durability(strata_engine::Durability::Buffered);
            for i in 0..1_000u32 {
                c = c.put(data, tuple::pack(&("row", chunk * 1_000 + i)), vec![7; 100]);
            }
            e.commit(c).unwrap();
        }
        e.sync().unwrap();
    }
    let dest = dir.0.join("dest.redb");
    let child = std::process::Command::new(assert_cmd::cargo::cargo_bin("strata"))
        .args(["--json", "copy", p(&src), p(&dest)])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Once the destination exists the copy is under way (and Ctrl-C is
    // caught: the handler is set before anything is opened).
    while !dest.exists() {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    std::thread::sleep(std::time::Duration::from_millis(100));
    let sent = std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
    let out = child.wait_with_output().unwrap();
    if out.status.code() == Some(130) {
        let resumed = json(&["copy", p(&src), p(&dest)]);
        assert!(String::from_utf8_lossy(&out.stderr).contains("stopped"));
        assert_eq!(resumed["resumed"], true, "{resumed}");
        assert!(resumed["rows"].as_u64().unwrap() < 60_000, "{resumed}");
    } else {
        // The copy finished before the signal: nothing to resume.
        assert_eq!(out.status.code(), Some(0), "{out:?}");
    }
    let a = json(&["scan", p(&src), "data", "--limit", "0"]);
    let b = json(&["scan", p(&dest), "data", "--limit", "0"]);
    assert_eq!(a["rows"].as_array().unwrap().len(), 60_000);
    assert_eq!(a["rows"], b["rows"]);

    // A damaged backup is refused, and nothing appears at the destination.
    let backup = dir.0.join("backup.redb");
    json(&["backup", p(&src), p(&backup)]);
    let bytes = std::fs::read(&backup).unwrap();
    std::fs::write(&backup, &bytes[..bytes.len() / 2]).unwrap();
    let restored = dir.0.join("restored.redb");
    let (code, _, err) = run(&["restore", p(&backup), p(&restored)]);
    assert_eq!(code, 2, "{err}");
    assert!(!restored.exists());
    let leftovers: Vec<_> = std::fs::read_dir(&dir.0)
        .unwrap()
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().contains("partial"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

#[test]
fn read_only_commands_leave_the_file_byte_for_byte() {
    let dir = Dir::new("read-only");
    let db = create(Which::Redb, &dir);
    let before = std::fs::read(&db).unwrap();
    let d = p(&db);
    for args in [
        vec!["info", d],
        vec!["scan", d, "data"],
        vec!["get", d, "data", r#"("note", 7, 1)"#],
        vec!["verify", d],
        vec!["outbox", d, "list"],
        vec!["outbox", d, "dead", "notes", "indexer"],
        vec!["search", d, "list"],
    ] {
        let (code, _, err) = run(&args);
        assert_eq!(code, 0, "{args:?}: {err}");
    }
    assert!(
        std::fs::read(&db).unwrap() == before,
        "a read-only command wrote"
    );
    // A writing command does change it: the comparison can fail.
    json(&["outbox", d, "reset", "notes", "indexer", "end"]);
    assert!(std::fs::read(&db).unwrap() != before);
}

/// A PostgreSQL password given in a connection string (key=value and URL
/// forms) appears in no output of the tool: text and JSON, successes and
/// errors, the engine line, a copy's report. (The throwaway server trusts
/// local users, so it connects whatever the password.)
#[test]
fn no_output_shows_a_postgresql_password() {
    use strata_engine_postgres::testing::TestServer;
    const SECRET: &str = "Hunter2Sekrit";
    let server = TestServer::shared().unwrap();
    let config = server.database("cli_secret").unwrap();
    let socket = server.socket_dir().display().to_string();
    let (user, dbname) = (config.get_user().unwrap(), config.get_dbname().unwrap());
    let kv = format!(
        "host={socket} port={} user={user} dbname={dbname} password={SECRET}",
        server.port()
    );
    let bad_kv = format!(
        "host={socket} port={} user={user} dbname=no_such_db password='{SECRET}'",
        server.port()
    );
    let bad_url = format!("postgresql://{user}:{SECRET}@127.0.0.1:1/{dbname}");
    let dir = Dir::new("secret");
    let src = create(Which::Redb, &dir);
    let back = dir.0.join("back.redb");
    let back2 = dir.0.join("back2.redb");
    let mut runs: Vec<Vec<&str>> = vec![
        vec!["copy", p(&src), &kv],
        vec!["--json", "copy", p(&src), &kv],
        vec!["info", &kv],
        vec!["--json", "info", &kv],
        vec!["scan", &kv, "data", "--limit", "2"],
        vec!["verify", &kv],
        vec!["--json", "verify", &kv],
        vec!["outbox", &kv, "list"],
        vec!["backup", &kv, p(&back)],
        vec!["copy", &kv, p(&back)],
        vec!["--json", "copy", &kv, p(&back2)],
    ];
    for bad in [&bad_kv, &bad_url] {
        runs.push(vec!["info", bad]);
        runs.push(vec!["--json", "verify", bad]);
        runs.push(vec!["copy", p(&src), bad]);
    }
    let mut failures = 0;
    for args in &runs {
        let (code, out, err) = run(args);
        if code != 0 {
            println!("{args:?} failed ({code}): {err}");
        }
        failures += usize::from(code != 0);
        for (stream, text) in [("stdout", &out), ("stderr", &err)] {
            assert!(
                !text.contains(SECRET),
                "{args:?} shows the password on {stream}: {text}"
            );
        }
    }
    // The copies worked (so their reports were really printed), and the
    // bad addresses failed with their message.
    let (_, info, _) = run(&["info", &kv]);
    assert!(info.contains("password=***"), "{info}");
    let (code, _, err) = run(&["info", &bad_url]);
    assert_eq!(code, 2);
    assert!(
        err.contains(&format!("postgresql://{user}:***@127.0.0.1:1/")),
        "{err}"
    );
    assert_eq!(
        failures, 8,
        "the second copy into the same database, the backup of PostgreSQL and the six bad opens fail"
    );
    // A copy of a copy (the source has the copy's progress keyspace).
    let again = json(&["copy", p(&back), p(&dir.0.join("again.redb"))]);
    assert!(again["rows"].as_u64().unwrap() > 0, "{again}");
}

/// `strata info db | head -1`: the reader goes away, and the tool ends
/// quietly (no panic, no "Broken pipe" message).
#[test]
fn a_closed_pipe_ends_the_tool_quietly() {
    use std::io::Read as _;
    use std::process::Stdio;
    let dir = Dir::new("pipe");
    let db = create(Which::Redb, &dir);
    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("strata"))
        .args(["scan", p(&db), "data"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Close the reading end before the tool writes.
    drop(child.stdout.take());
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    let status = child.wait().unwrap();
    assert!(!err.contains("panicked"), "{err}");
    assert!(!err.contains("Broken pipe"), "{err}");
    assert_eq!(status.code(), Some(0), "{err}");
}

/// `backup`, `restore` and `copy` give what they create the source's
/// mode: a 0600 redb file stays 0600 (whatever the umask), a 0700 RocksDB
/// directory stays private, file by file.
#[cfg(unix)]
#[test]
fn copies_keep_the_source_s_mode() {
    use std::os::unix::fs::PermissionsExt as _;
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    let set = |p: &Path, m: u32| {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(m)).unwrap();
    };
    let dir = Dir::new("modes");
    let redb = create(Which::Redb, &dir);
    set(&redb, 0o600);
    let b = dir.0.join("b.redb");
    let r = dir.0.join("r.redb");
    let c = dir.0.join("c.redb");
    let cr = dir.0.join("c-rocks");
    json(&["backup", p(&redb), p(&b)]);
    json(&["restore", p(&b), p(&r)]);
    json(&["copy", p(&redb), p(&c)]);
    json(&["copy", p(&redb), p(&cr), "--dest-engine", "rocks"]);
    for f in [&b, &r, &c] {
        assert_eq!(mode(f), 0o600, "{}", f.display());
    }
    assert_eq!(mode(&cr), 0o700);
    let rocks = create(Which::Rocks, &dir);
    set(&rocks, 0o750);
    let rb = dir.0.join("rocks-backup");
    json(&["backup", p(&rocks), p(&rb)]);
    assert_eq!(mode(&rb), 0o750);
    for dest in [&cr, &rb] {
        for entry in std::fs::read_dir(dest).unwrap() {
            let entry = entry.unwrap();
            if entry.file_type().unwrap().is_file() {
                let m = mode(&entry.path());
                assert_eq!(m & 0o007, 0, "{}: {m:o}", entry.path().display());
                assert_eq!(m & 0o111, 0, "{}: {m:o}", entry.path().display());
            }
        }
    }
    // A 0644 source gives 0644 copies, so the mode is the source's, not a
    // fixed one.
    set(&redb, 0o644);
    let open = dir.0.join("open.redb");
    json(&["copy", p(&redb), p(&open)]);
    assert_eq!(mode(&open), 0o644);
}

/// Run as a child by the test below: opens the redb file named by
/// `STRATA_UNCLEAN_CHILD` for writing, syncs, and exits without closing
/// it (no destructor runs), as a crash or a full disk leaves a file.
#[test]
fn unclean_child() {
    let Some(path) = std::env::var_os("STRATA_UNCLEAN_CHILD") else {
        return;
    };
    let names = RedbEngine::stored_keyspaces(&path).unwrap();
    let specs = names
        .iter()
        .map(|n| strata_engine::KeyspaceSpec::new(n.clone(), strata_engine::Profile::General))
        .collect();
    let e = RedbEngine::open(&path, specs, RedbOptions::default()).unwrap();
    e.sync().unwrap();
    std::process::exit(0);
}

/// A redb file not closed cleanly: every command refuses it with a message
/// that names `--repair`, writing nothing; with `--repair` it is repaired
/// and the command runs, every durable commit kept.
#[test]
fn a_file_not_closed_cleanly_is_refused_then_repaired_on_request() {
    let dir = Dir::new("unclean");
    let db = create(Which::Redb, &dir);
    let before = json(&["info", p(&db)]);
    let status = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "unclean_child", "--nocapture"])
        .env("STRATA_UNCLEAN_CHILD", &db)
        .status()
        .unwrap();
    assert!(status.success());
    let bytes = std::fs::read(&db).unwrap();
    for args in [
        vec!["info", p(&db)],
        vec!["verify", p(&db)],
        vec!["scan", p(&db), "data"],
    ] {
        let (code, _, err) = run(&args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(err.contains("--repair"), "{args:?}: {err}");
    }
    assert_eq!(
        std::fs::read(&db).unwrap(),
        bytes,
        "a refused open wrote to the file"
    );
    let after = json(&["--repair", "info", p(&db)]);
    assert_eq!(after["last_version"], before["last_version"]);
    assert_eq!(after["keyspaces"], before["keyspaces"]);
    let v = json(&["verify", p(&db)]);
    assert_eq!(v["ok"], true, "{v}");
}

/// A RocksDB directory whose log was cut after a clean close: every
/// command refuses it, naming `--accept-loss`; with it the database opens
/// at the state before the cut, and says so by its version.
#[test]
fn a_cut_rocksdb_log_is_refused_then_opened_with_accept_loss() {
    let dir = Dir::new("accept-loss");
    let db = create(Which::Rocks, &dir);
    let before = json(&["info", p(&db)]);
    let log = std::fs::read_dir(&db)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "log"))
        .expect("a log");
    let len = std::fs::metadata(&log).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&log)
        .unwrap()
        .set_len(len / 2)
        .unwrap();
    for args in [vec!["info", p(&db)], vec!["verify", p(&db)]] {
        let (code, _, err) = run(&args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(err.contains("--accept-loss"), "{args:?}: {err}");
    }
    let after = json(&["--accept-loss", "info", p(&db)]);
    assert!(
        after["last_version"].as_u64().unwrap() < before["last_version"].as_u64().unwrap(),
        "{after}"
    );
}

/// Counter rows (`add`, `increment`, code-sous's version sequence) are
/// counters, not damaged envelopes: `verify` passes and counts them (and
/// their quota), a backup of a database with counters restores, and `get`
/// and `scan` show them as numbers. A data row that is neither (7 bytes)
/// is still reported.
#[test]
fn databases_with_counters_verify_back_up_and_restore() {
    use strata_schemas::code_sous::{Bundle, CodeSous, CodeSousConfig, FunctionId, NewFunction};
    let dir = Dir::new("counters");
    let path = dir.0.join("counters.redb");
    {
        let engine = match open_engine(Which::Redb, &path)() {
            Either::Redb(e) => e,
            Either::Rocks(_) => unreachable!(),
        };
        let store = Store::open(engine, options()).unwrap();
        store.publish_catalog().unwrap();
        store.add(&CountKey { user: 7 }, 5).unwrap();
        assert_eq!(store.increment(&CountKey { user: 7 }, 2).unwrap(), 7);
        store.add(&CountKey { user: 9 }, -4).unwrap();
        store
            .put(
                &NoteKey { user: 7, id: 1 },
                &Note {
                    title: "one".into(),
                    stars: 1,
                },
            )
            .unwrap();
        store.engine().sync().unwrap();
    }
    let db = p(&path);
    let v = json(&["verify", db]);
    assert_eq!(v["ok"], true, "{v}");
    assert_eq!(v["counters"], 2, "{v}");
    assert_eq!(v["values"], 1, "{v}");
    let got = json(&["get", db, "data", r#"("count", 7)"#]);
    assert_eq!(got["value"]["counter"], 7, "{got}");
    let (code, text, _) = run(&["scan", db, "data", "--tuple-prefix", r#"("count",)"#]);
    assert_eq!(code, 0);
    assert!(text.contains(r#"("count", 7) = counter 7"#), "{text}");
    assert!(text.contains(r#"("count", 9) = counter -4"#), "{text}");
    let backup = dir.0.join("counters.backup");
    json(&["backup", db, p(&backup)]);
    let restored = dir.0.join("restored.redb");
    json(&["restore", p(&backup), p(&restored)]);
    let again = json(&["verify", p(&restored)]);
    assert_eq!(again["ok"], true, "{again}");
    assert_eq!(again["counters"], 2, "{again}");
    assert_eq!(
        json(&["get", p(&restored), "data", r#"("count", 9)"#])["value"]["counter"],
        -4
    );

    // Seven bytes are neither a counter nor an envelope.
    plant(Which::Redb, &path, "data", |ks, _| Mutation::Put {
        ks,
        key: strata_keys::tuple::pack(&("count", 8u64)),
        value: vec![1; 7],
    });
    let (code, out, _) = run(&["--json", "verify", db]);
    assert_ne!(code, 0, "{out}");
    let bad: Json = serde_json::from_str(&out).unwrap();
    assert_eq!(bad["counters"], 2, "{bad}");
    // The row, and its scope's quota that no write charged.
    let problems = bad["problems"].as_array().unwrap();
    assert_eq!(problems.len(), 2, "{bad}");
    assert!(
        problems[0]
            .as_str()
            .unwrap()
            .contains("unknown envelope format byte 0x01"),
        "{bad}"
    );

    // code-sous: versions numbered by a counter.
    let path = dir.0.join("code-sous.redb");
    {
        let options = CodeSous::<RedbEngine>::store_options();
        let engine =
            RedbEngine::open(&path, options.keyspace_specs(), RedbOptions::default()).unwrap();
        let cs = CodeSous::open(
            Store::open(engine, options).unwrap(),
            CodeSousConfig::default(),
            Box::new(SeededRng::new(5)),
        )
        .unwrap();
        let f = FunctionId::new("t_abc123", "payments", "reconcile");
        cs.create_function(&f, &NewFunction::js()).unwrap();
        for body in ["export default () => 1;", "export default () => 2;"] {
            cs.publish(&f, &Bundle::new(body, "{}"), &serde_json::json!({}), None)
                .unwrap();
        }
        cs.store().engine().sync().unwrap();
    }
    let v = json(&["verify", p(&path)]);
    assert_eq!(v["ok"], true, "{v}");
    assert_eq!(v["counters"], 1, "{v}");
    assert_eq!(
        json(&["info", p(&path)])["catalog"],
        true,
        "CodeSous::open describes the store"
    );
    let backup = dir.0.join("code-sous.backup");
    json(&["backup", p(&path), p(&backup)]);
    let restored = dir.0.join("code-sous-restored.redb");
    json(&["restore", p(&backup), p(&restored)]);
    assert_eq!(json(&["verify", p(&restored)])["ok"], true);
}

/// Messages say things once and in the tool's notation: an empty file, a
/// file with redb's magic and nothing valid after it, a tuple prefix
/// without its parentheses, expiry times as dates, a copy's summary, and
/// a copy that leaves the source's search indexes with the source.
#[test]
fn messages_read_once_in_the_tool_s_notation() {
    let dir = Dir::new("messages");
    let empty = dir.0.join("empty.redb");
    std::fs::write(&empty, b"").unwrap();
    let (code, _, err) = run(&["info", p(&empty)]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("is an empty file, not a database"), "{err}");
    let bad = dir.0.join("bad.redb");
    let mut bytes = b"redb".to_vec();
    bytes.extend((0..4_096u32).map(|i| u8::try_from(i * 7 % 251).unwrap()));
    std::fs::write(&bad, &bytes).unwrap();
    let (code, _, err) = run(&["info", p(&bad)]);
    assert_ne!(code, 0);
    let first = err.lines().next().unwrap_or_default();
    let once = first.split(": ").collect::<Vec<_>>();
    let mut seen = std::collections::BTreeSet::new();
    for part in &once {
        assert!(seen.insert(*part), "{part:?} said twice: {err}");
    }

    let db = create(Which::Redb, &dir);
    let db = p(&db);
    let (code, _, err) = run(&["scan", db, "data", "--tuple-prefix", "note"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--tuple-prefix takes a tuple"), "{err}");
    let (_, text, _) = run(&["scan", db, "data", "--tuple-prefix", r#"("note", 8)"#]);
    let line = text
        .lines()
        .find(|l| l.starts_with(r#"("note", 8, 1) = "#))
        .unwrap_or_else(|| panic!("{text}"));
    let year = line.split("expires at ").nth(1).unwrap_or_default();
    assert!(
        year.starts_with("20") && year.contains(" UTC"),
        "a date, not milliseconds: {line}"
    );

    let mem = agent_memory(&dir);
    let copy = dir.0.join("copy.redb");
    let (code, text, err) = run(&["copy", p(&mem), p(&copy)]);
    assert_eq!(code, 0, "{err}");
    assert!(!text.contains("resumed"), "{text}");
    assert!(
        text.contains("search indexes not copied (their files stay with the source; rebuild them on the copy): agent_memory"),
        "{text}"
    );
    assert_eq!(
        json(&["search", p(&copy), "list"])["indexes"],
        serde_json::json!([])
    );
    assert_eq!(
        json(&["search", p(&mem), "list"])["indexes"][0]["name"],
        "agent_memory"
    );
}

/// The orders walk-through's database (orders, lines, carts with a time
/// to live, counters kept by a worker, an outbox, a search index), read by
/// the tool as a user would: it verifies, backs up and restores, lists its
/// consumer and its index, and finds the notes.
#[test]
fn the_orders_walk_through_is_verified_backed_up_and_restored() {
    let dir = Dir::new("orders");
    let report = strata_examples::orders::run(&dir.0, 3, 12).unwrap();
    let db = p(&report.path);
    let v = json(&["verify", db]);
    assert_eq!(v["ok"], true, "{v}");
    assert_eq!(v["counters"], 3, "one total per customer: {v}");
    assert_eq!(v["search_indexes"], 1, "{v}");
    let consumers = json(&["outbox", db, "list"]);
    let totals = consumers["consumers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["consumer"] == "totals")
        .cloned()
        .unwrap_or_else(|| panic!("{consumers}"));
    assert_eq!(totals["lag_entries"], 0);
    let total = json(&["get", db, "data", r#"("c", 1, "total")"#]);
    assert_eq!(
        total["value"]["counter"], report.totals[&1],
        "the counter as the tool reads it: {total}"
    );
    let hits = json(&["search", db, "query", "orders", "gift"]);
    assert_eq!(
        hits["hits"].as_array().map(Vec::len),
        Some(report.gift_hits),
        "{hits}"
    );
    let backup = dir.0.join("orders.backup");
    json(&["backup", db, p(&backup)]);
    let restored = dir.0.join("restored.redb");
    json(&["restore", p(&backup), p(&restored)]);
    let again = json(&["verify", p(&restored)]);
    assert_eq!(again["ok"], true, "{again}");
    assert_eq!(again["counters"], 3, "{again}");
    assert_eq!(again["values"], v["values"], "{again}");
}
