//! Clear errors and no surprises: what is not a database, a held one, a
//! file not closed cleanly, a cut log, read-only commands, passwords,
//! closed pipes, the tool's notation.

use super::*;

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
        .args(["--exact", "edges::unclean_child", "--nocapture"])
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
    // A command that writes is refused the same way: its writable open
    // does not repair on its own.
    let (code, _, err) = run(&["sweep", p(&db)]);
    assert_eq!(code, 2, "sweep: {err}");
    assert!(err.contains("--repair"), "sweep: {err}");
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

    let mem = crate::search::agent_memory(&dir);
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

/// A file too short to have a redb header is reported as what it is, not
/// as missing; output the tool cannot write (a full disk) fails, where a
/// reader that went away does not.
#[test]
fn short_files_and_unwritable_output_are_their_own_errors() {
    let dir = Dir::new("short");
    let short = dir.0.join("two-bytes.redb");
    std::fs::write(&short, b"re").unwrap();
    let (code, _, err) = run(&["info", p(&short)]);
    assert_eq!(code, 2, "{err}");
    assert!(!err.contains("does not exist"), "{err}");
    assert!(err.contains("two-bytes.redb"), "{err}");
    let db = create(Which::Redb, &dir);
    let full = std::fs::OpenOptions::new().write(true).open("/dev/full");
    if let Ok(full) = full {
        let out = std::process::Command::new(assert_cmd::cargo::cargo_bin("strata"))
            .args(["info", p(&db)])
            .stdout(full)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(err.contains("cannot write the output"), "{err}");
    }
}

/// A database with only some of the outbox's keyspaces has no outbox: the
/// tool says so instead of failing to open one.
#[test]
fn part_of_the_outbox_keyspaces_is_no_outbox() {
    let dir = Dir::new("part-outbox");
    for present in [
        [strata_outbox::ENTRIES, strata_outbox::STATE],
        [strata_outbox::STATE, strata_outbox::DEAD],
    ] {
        let db = dir.0.join(format!("{}.redb", present[0]));
        let mut specs = StoreOptions::default().keyspace_specs();
        specs.extend(
            present.map(|n| strata_engine::KeyspaceSpec::new(n, strata_engine::Profile::General)),
        );
        drop(RedbEngine::open(&db, specs, RedbOptions::default()).unwrap());
        let (code, _, err) = run(&["outbox", p(&db), "list"]);
        assert_ne!(code, 0, "{present:?}");
        assert!(err.contains("has no outbox"), "{present:?}: {err}");
    }
}

/// A byte flipped anywhere in a redb file, every 61st byte: the tool
/// answers each with an exit status of 0, 1 or 2 and never prints a
/// panic, though redb itself panics on some of them (a malformed
/// allocator state, a slice out of range: caught by the engine, reported
/// as damage). `RUST_BACKTRACE` is set so that a printed panic could not
/// hide its backtrace either.
#[test]
fn a_flipped_byte_in_a_redb_file_is_never_a_printed_panic() {
    let dir = Dir::new("flipped");
    let db = create(Which::Redb, &dir);
    let clean = std::fs::read(&db).unwrap();
    let damaged = dir.0.join("damaged.redb");
    let mut backend_panics = 0;
    for at in (0..clean.len()).step_by(61) {
        let mut bytes = clean.clone();
        bytes[at] ^= 0xA5;
        std::fs::write(&damaged, &bytes).unwrap();
        let out = strata()
            .args(["info", p(&damaged)])
            .env("RUST_BACKTRACE", "1")
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        let code = out.status.code();
        assert!(
            matches!(code, Some(0..=2)),
            "byte {at}: exit {code:?}: {err}"
        );
        assert!(
            !err.contains("panicked at") && !err.contains("backtrace"),
            "byte {at}: a panic printed: {err}"
        );
        if err.contains("panicked inside the backend") {
            assert_eq!(code, Some(2), "byte {at}: {err}");
            assert!(err.contains("damaged"), "byte {at}: {err}");
            backend_panics += 1;
        }
    }
    assert!(
        backend_panics > 0,
        "no flipped byte made redb panic: the sweep tests nothing of the hook"
    );
}

/// A key typed thousands of tuples deep is refused with a message, and a
/// stored key of 50,000 nested tuples (damage) is shown as bytes: neither
/// overflows the tool's stack.
#[test]
fn deeply_nested_keys_are_errors_or_bytes_never_a_stack_overflow() {
    let dir = Dir::new("nested");
    let db = create(Which::Redb, &dir);
    let typed = "(".repeat(5_000);
    let (code, _, err) = run(&["get", p(&db), "data", &typed]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("nested deeper than 64"), "{err}");
    let deep = [vec![0x05u8; 50_000], vec![0x00; 50_000]].concat();
    match open_engine(Which::Redb, &db)() {
        Either::Redb(e) => {
            let data = e.keyspace("data").unwrap();
            e.commit(Commit::new().put(data, deep, b"x".to_vec()))
                .unwrap();
        }
        Either::Rocks(_) => unreachable!(),
    }
    let (code, text, err) = run(&["scan", p(&db), "data"]);
    assert!(matches!(code, 0..=2), "{code} {err}");
    assert!(!err.contains("overflowed"), "{err}");
    assert!(text.contains(r#"b"\x05\x05\x05"#), "{err}");
}
