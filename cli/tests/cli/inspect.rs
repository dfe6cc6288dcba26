//! Every command's output on a database of notes, blobs, counters and an
//! outbox, on redb and RocksDB.

use super::*;

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
    // The topic, with its three entries, the last pushed alone by the
    // eighth commit.
    let topics = list["topics"].as_array().unwrap();
    assert_eq!(topics.len(), 1, "{list}");
    assert_eq!(
        (
            topics[0]["topic"].clone(),
            topics[0]["entries"].clone(),
            topics[0]["last"].clone(),
            topics[0]["consumers"].clone()
        ),
        ("notes".into(), 3.into(), "8.0".into(), 1.into())
    );
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
    // The list counts each consumer's dead letters, and says them in text.
    let dead_of = |consumer: &str| {
        json(&["outbox", db, "list"])["consumers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["consumer"] == consumer)
            .unwrap()["dead_letters"]
            .as_u64()
            .unwrap()
    };
    assert_eq!(
        (dead_of("mailer"), dead_of("audit"), dead_of("indexer")),
        (2, 1, 0)
    );
    let (_, text, _) = run(&["outbox", db, "list"]);
    assert!(
        text.lines().any(
            |l| l.starts_with("  notes/mailer: checkpoint ") && l.ends_with(", 2 dead letters")
        ),
        "{text}"
    );
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

/// Values shown by what they are: a raw-codec body that is text as text,
/// one with a NUL byte as hex; a row of a keyspace without envelopes as
/// its bytes, in JSON and on its text line.
#[test]
fn values_are_shown_by_what_they_hold() {
    let dir = Dir::new("shown");
    let db = create(Which::Redb, &dir);
    let Either::Redb(e) = open_engine(Which::Redb, &db)() else {
        unreachable!("a redb database")
    };
    let state = e.keyspace(strata_outbox::STATE).unwrap();
    e.commit(
        Commit::new()
            .put(state, b"zz-hi".to_vec(), b"hi".to_vec())
            .put(state, b"zz-empty".to_vec(), Vec::new()),
    )
    .unwrap();
    let store = Store::open(e, options()).unwrap();
    store
        .put(&BlobKey { user: 1 }, &b"plain text".to_vec())
        .unwrap();
    store
        .put(&BlobKey { user: 2 }, &b"nul\0inside".to_vec())
        .unwrap();
    drop(store);
    let db = p(&db);
    let text = json(&["get", db, "data", r#"("blob", 1)"#]);
    assert_eq!(
        text["value"]["body"],
        serde_json::json!({"text": "plain text"})
    );
    let (_, line, _) = run(&["get", db, "data", r#"("blob", 1)"#]);
    assert!(line.contains(r#""plain text""#), "{line}");
    let nul = json(&["get", db, "data", r#"("blob", 2)"#]);
    assert_eq!(
        nul["value"]["body"],
        serde_json::json!({"hex": "6e756c00696e73696465", "truncated": false})
    );
    let raw = json(&["get", db, strata_outbox::STATE, r#"b"zz-hi""#]);
    assert_eq!(raw["value"]["envelope"], false, "{raw}");
    assert_eq!(
        (raw["value"]["length"].clone(), raw["value"]["hex"].clone()),
        (2.into(), "6869".into())
    );
    let empty = json(&["get", db, strata_outbox::STATE, r#"b"zz-empty""#]);
    assert_eq!(
        (
            empty["value"]["shown"].clone(),
            empty["value"]["length"].clone()
        ),
        (r#"b"""#.into(), 0.into())
    );
    let (code, line, err) = run(&["get", db, strata_outbox::STATE, r#"b"zz-hi""#]);
    assert_eq!(code, 0, "{err}");
    assert!(line.trim_end().ends_with("(2 bytes)"), "{line}");
}

/// A database of the engine alone (a data keyspace, no system keyspace)
/// is no store: the tool says so, without taking it for a store whose
/// catalog is damaged.
#[test]
fn a_database_without_the_store_keyspaces_is_no_store() {
    let dir = Dir::new("bare");
    let path = dir.0.join("bare.redb");
    {
        let e = RedbEngine::open(
            &path,
            vec![strata_engine::KeyspaceSpec::new(
                "data",
                strata_engine::Profile::General,
            )],
            RedbOptions::default(),
        )
        .unwrap();
        let data = e.keyspace("data").unwrap();
        e.commit(Commit::new().put(data, b"k".to_vec(), b"v".to_vec()))
            .unwrap();
    }
    let (code, _, err) = run(&["info", p(&path)]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains(r#"cannot open the store: engine failed: no keyspace named "strata.system""#),
        "{err}"
    );
    assert!(!err.contains("catalog"), "{err}");
}

/// `sweep` counts what it removed, the stale index entries it dropped and
/// its commits, and says so in words; `compact` too.
#[test]
fn sweep_and_compact_report_in_words() {
    let dir = Dir::new("sweep-words");
    let db = create(Which::Redb, &dir);
    // The expired note's row removed behind the store's back: its expiry
    // entry, due, names nothing (stale).
    plant(Which::Redb, &db, "data", |ks, _| Mutation::Delete {
        ks,
        key: tuple::pack(&("note", 8u64, 2u64)),
    });
    let db = p(&db);
    let swept = json(&["sweep", db]);
    assert_eq!(
        (
            swept["removed"].clone(),
            swept["stale"].clone(),
            swept["commits"].clone()
        ),
        (0.into(), 1.into(), 1.into()),
        "{swept}"
    );
    let dir2 = Dir::new("sweep-words-2");
    let db2 = create(Which::Redb, &dir2);
    let (code, text, err) = run(&["sweep", p(&db2)]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        text.trim_end(),
        "removed 1 expired values and 0 stale index entries in 1 commits"
    );
    let (code, text, err) = run(&["compact", db]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(text.trim_end(), format!("compacted {db} (redb)"));
}

/// A store whose catalog was never written: the keyspaces' roles come
/// from their names, and the text has no catalog section; with a catalog
/// it has one.
#[test]
fn roles_without_a_catalog_come_from_the_names() {
    let dir = Dir::new("no-catalog");
    let path = dir.0.join("plain.redb");
    {
        let e =
            RedbEngine::open(&path, options().keyspace_specs(), RedbOptions::default()).unwrap();
        let store = Store::open(e, options()).unwrap();
        store.put(&BlobKey { user: 1 }, &b"x".to_vec()).unwrap();
    }
    let info = json(&["info", p(&path)]);
    assert_eq!(info["catalog"], false, "{info}");
    let roles: std::collections::BTreeMap<String, String> = info["keyspaces"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| {
            (
                k["name"].as_str().unwrap().to_owned(),
                k["role"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(roles["data"], "data", "{info}");
    assert_eq!(roles["strata.system"], "system", "{info}");
    assert_eq!(roles[strata_outbox::ENTRIES], "space", "{info}");
    let (_, text, _) = run(&["info", p(&path)]);
    assert!(!text.contains("catalog entries:"), "{text}");
    // `verify` says what it could not check without a catalog.
    let (code, text, _) = run(&["verify", p(&path)]);
    assert_eq!(code, 0, "{text}");
    assert!(
        text.contains("note: no catalog: only the default data and system keyspaces were checked"),
        "{text}"
    );
    let with = create(Which::Redb, &dir);
    let (_, text, _) = run(&["info", p(&with)]);
    assert!(text.contains("\ncatalog entries:\n"), "{text}");
    let (_, text, _) = run(&["verify", p(&with)]);
    assert!(!text.contains("no catalog"), "{text}");
}

/// `scan --limit N` stops after N rows, either way.
#[test]
fn scans_stop_at_their_limit() {
    let dir = Dir::new("limit");
    let db = create(Which::Redb, &dir);
    let all = json(&["scan", p(&db), "data", "--limit", "0"]);
    let n = all["rows"].as_array().unwrap().len();
    assert!(n > 2, "{all}");
    for args in [
        vec!["scan", p(&db), "data", "--limit", "2"],
        vec!["scan", p(&db), "data", "--limit", "2", "--reverse"],
    ] {
        let two = json(&args);
        assert_eq!(two["rows"].as_array().unwrap().len(), 2, "{args:?}: {two}");
    }
}
