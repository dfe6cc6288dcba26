//! `copy`, `backup` and `restore`: between engines, resumed, stopped,
//! with the source's mode.

use super::*;

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

/// `backup` and `restore` say what they did, in words, with the version
/// the copy holds.
#[test]
fn backup_and_restore_report_in_words() {
    let dir = Dir::new("backup-words");
    let src = create(Which::Redb, &dir);
    let version = json(&["info", p(&src)])["last_version"].as_u64().unwrap();
    let backup = dir.0.join("b.redb");
    let restored = dir.0.join("r.redb");
    let (code, text, err) = run(&["backup", p(&src), p(&backup)]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        text.trim_end(),
        format!(
            "backed up {} at version {version} to {}",
            p(&src),
            p(&backup)
        )
    );
    let (code, text, err) = run(&["restore", p(&backup), p(&restored)]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        text.trim_end(),
        format!(
            "restored {} (version {version}) to {}",
            p(&backup),
            p(&restored)
        )
    );
}

/// A destination that had writes but holds no rows (its version above
/// zero) takes a copy; one holding a row does not.
#[test]
fn a_destination_that_holds_nothing_takes_a_copy() {
    let dir = Dir::new("copy-into-empty");
    let src = create(Which::Redb, &dir);
    let dest = dir.0.join("dest.redb");
    {
        let e =
            RedbEngine::open(&dest, options().keyspace_specs(), RedbOptions::default()).unwrap();
        let data = e.keyspace("data").unwrap();
        e.commit(Commit::new().put(data, b"k".to_vec(), b"v".to_vec()))
            .unwrap();
        e.commit(Commit::new().delete(data, b"k".to_vec())).unwrap();
        assert!(e.last_version() > 0);
    }
    let (code, _, err) = run(&["copy", p(&src), p(&dest)]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(json(&["verify", p(&dest)])["ok"], true);
    let (code, _, err) = run(&["copy", p(&src), p(&dest)]);
    assert_eq!(code, 2, "holds data now: {err}");
    assert!(err.contains("holds data"), "{err}");
}
