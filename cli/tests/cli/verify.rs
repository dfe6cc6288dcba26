//! `verify` on planted damage: what it catches, line by line.

use super::*;

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

/// A consumer the catalog names whose checkpoint row is gone (its state
/// lost): `verify` says so, and the outbox no longer lists it.
fn verify_finds_a_consumer_whose_checkpoint_is_gone(which: Which) {
    let dir = Dir::new(&format!("verify-gone-{which:?}"));
    let db = create(which, &dir);
    assert_eq!(
        json(&["outbox", p(&db), "list"])["consumers"][0]["consumer"],
        "indexer"
    );
    plant(which, &db, strata_outbox::STATE, |ks, _| Mutation::Delete {
        ks,
        key: tuple::pack(&("c", "notes", "indexer")),
    });
    let (code, text, _) = run(&["verify", p(&db)]);
    assert_eq!(code, 1, "{text}");
    let problems: Vec<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("PROBLEM "))
        .collect();
    assert_eq!(
        problems,
        ["outbox consumer notes/indexer: in the catalog, but its checkpoint is gone"],
        "{text}"
    );
    assert_eq!(
        json(&["outbox", p(&db), "list"])["consumers"],
        serde_json::json!([])
    );
}

#[test]
fn verify_finds_a_consumer_whose_checkpoint_is_gone_on_redb() {
    verify_finds_a_consumer_whose_checkpoint_is_gone(Which::Redb);
}

#[test]
fn verify_finds_a_consumer_whose_checkpoint_is_gone_on_rocksdb() {
    verify_finds_a_consumer_whose_checkpoint_is_gone(Which::Rocks);
}

#[test]
fn verify_reports_system_damage_line_by_line_on_redb() {
    verify_reports_system_damage_line_by_line(Which::Redb);
}

#[test]
fn verify_reports_system_damage_line_by_line_on_rocksdb() {
    verify_reports_system_damage_line_by_line(Which::Rocks);
}

/// `verify` checks NoKV's namespaces where the database has its keyspace:
/// clean after a few commands, then a parent-index row removed behind the
/// module's back is reported (exit status 1), by mount.
#[test]
fn verify_checks_nokv_namespaces() {
    use strata_schemas::nokv::keys::ParentKey;
    use strata_schemas::nokv::{MemBlobs, Nokv, NokvConfig, ROOT};
    let dir = Dir::new("verify-nokv");
    let path = dir.0.join("fs.redb");
    let options = Nokv::<RedbEngine>::store_options();
    let engine = RedbEngine::open(&path, options.keyspace_specs(), RedbOptions::default()).unwrap();
    let store = Store::open(engine, options).unwrap();
    store.publish_catalog().unwrap();
    let fs = Nokv::open(store, Arc::new(MemBlobs::default()), NokvConfig::default()).unwrap();
    fs.create_mount(3, "").unwrap();
    let d = fs
        .mkdir(3, "m", ROOT, "d", 0o755)
        .unwrap()
        .outcome()
        .inode
        .unwrap();
    let f = fs
        .create(3, "c", d, "f", 0o644)
        .unwrap()
        .outcome()
        .inode
        .unwrap();
    fs.write(3, "w", f, b"hello").unwrap();
    let store = fs.into_store();
    drop(store);
    let out = json(&["verify", p(&path)]);
    assert_eq!(out["ok"], true, "{out}");
    assert_eq!(
        (
            out["nokv"]["mounts"].clone(),
            out["nokv"]["inodes"].clone(),
            out["nokv"]["dentries"].clone()
        ),
        (1.into(), 3.into(), 2.into())
    );
    {
        let options = Nokv::<RedbEngine>::store_options();
        let engine =
            RedbEngine::open(&path, options.keyspace_specs(), RedbOptions::default()).unwrap();
        let store = Store::open(engine, options).unwrap();
        store
            .delete(&ParentKey {
                mount: 3,
                child: f,
                parent: d,
                name: "f".into(),
            })
            .unwrap();
    }
    let (code, text, _) = run(&["verify", p(&path)]);
    assert_eq!(code, 1, "{text}");
    assert!(
        text.contains(&format!(
            "PROBLEM nokv mount 3: dentry {d}/\"f\" has no parent-index row of its generation"
        )),
        "{text}"
    );
    assert!(
        text.contains("nokv: 1 mounts, 3 inodes, 2 dentries"),
        "{text}"
    );
    assert!(!text.contains("upload records"), "none yet: {text}");
    // Two upload records left by writers that died (two and one hours
    // ago): a note naming the oldest, not a problem.
    leave_upload_records(&path, f);
    let (_, text, _) = run(&["verify", p(&path)]);
    let notes: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("upload records"))
        .collect();
    assert_eq!(notes.len(), 1, "{text}");
    assert!(
        notes[0].starts_with("note: nokv mount 3: 2 upload records, the oldest begun 720")
            && notes[0].contains(" s ago (")
            && notes[0].contains("`Nokv::collect_uploads`"),
        "{text}"
    );
    // (Still failing on the parent-index row removed above.)
    let (code, out, _) = run(&["--json", "verify", p(&path)]);
    assert_eq!(code, 1, "{out}");
    let out: Json = serde_json::from_str(&out).unwrap();
    assert_eq!(out["nokv"]["uploads"], 2, "{out}");
}

/// Two upload records of mount 3's file `inode` in the NoKV database at
/// `path`, as writers that died one and two hours ago leave them.
fn leave_upload_records(path: &Path, inode: u64) {
    use strata_keys::tuple::Versionstamp;
    use strata_schemas::nokv::Nokv;
    use strata_schemas::nokv::keys::{Upload, UploadKey};
    let options = Nokv::<RedbEngine>::store_options();
    let engine = RedbEngine::open(path, options.keyspace_specs(), RedbOptions::default()).unwrap();
    let store = Store::open(engine, options).unwrap();
    let now = store.clock().now_ms();
    for (request, hours) in [("late", 1), ("dead", 2)] {
        store
            .transact(|tx| {
                tx.put_versionstamped(
                    &UploadKey {
                        mount: 3,
                        stamp: Versionstamp::incomplete(0),
                    },
                    &Upload {
                        request_id: request.to_owned(),
                        inode,
                        objects: 2,
                        at_ms: now - hours * 3_600_000,
                        abandoned: false,
                    },
                )
            })
            .unwrap();
    }
}
