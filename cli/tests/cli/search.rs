//! `search` on the agent-memory index: listed, queried, verified, rebuilt.

use super::*;

/// The agent-memory store of the redb database at `path`.
fn memory_store(path: &Path) -> Store<RedbEngine> {
    let options = strata_schemas::agent_memory::AgentMemory::<RedbEngine>::declare(
        StoreOptions::new(Limits::FOUNDATIONDB),
    );
    let engine = RedbEngine::open(path, options.keyspace_specs(), RedbOptions::default()).unwrap();
    Store::open(engine, options).unwrap()
}

/// The outbox of `store`, its generator seeded with `seed`.
fn memory_outbox<'s>(
    store: &'s Store<RedbEngine>,
    clock: &Arc<SystemClock>,
    seed: u64,
) -> Outbox<'s, RedbEngine> {
    Outbox::new(
        store,
        OutboxConfig::default(),
        clock.clone(),
        Box::new(SeededRng::new(seed)),
    )
    .unwrap()
}

/// An agent-memory database on redb with two grips indexed in `dir/index`.
pub(crate) fn agent_memory(dir: &Dir) -> PathBuf {
    use strata_schemas::agent_memory::{AgentMemory, EventRef, Grip};
    let path = dir.0.join("memory.redb");
    let clock = Arc::new(SystemClock);
    let store = memory_store(&path);
    let outbox = memory_outbox(&store, &clock, 3);
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
                salience: strata_schemas::agent_memory::Salience::default(),
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
    let (_, text, _) = run(&["search", db, "query", "agent_memory", "migrations"]);
    assert!(
        text.starts_with(&format!(
            "index agent_memory at checkpoint {}:\n",
            hits["checkpoint"].as_str().unwrap()
        )) && text
            .contains(r#"("am", "doc", "grip:1706540401000:g1") (current): run migrations first"#)
            && text.trim_end().ends_with("(1 hits)"),
        "{text}"
    );
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
    assert_eq!(
        (r["documents"].clone(), r["skipped"].clone()),
        (2.into(), 0.into())
    );
    assert_eq!(r["generation"], 2);
    assert_eq!(json(&["search", db, "list"])["indexes"][0]["generation"], 2);
    // In words: the generation, the documents, the snapshot's version.
    let (code, text, err) = run(&["search", db, "rebuild", "agent_memory"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        text.starts_with("rebuilt generation 3: 2 documents from the snapshot at version ")
            && text.contains(" a second), now at checkpoint "),
        "{text}"
    );
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
    // A row damaged behind the store's back (a byte of its value flipped):
    // both verifies name it and go on (they used to fail whole on it), the
    // duplicate still reported beside it.
    let g2 = tuple::pack(&("am", "doc", "grip:1706540402000:g2"));
    {
        let options = strata_schemas::agent_memory::AgentMemory::<RedbEngine>::declare(
            StoreOptions::new(Limits::FOUNDATIONDB),
        );
        let e = RedbEngine::open(db, options.keyspace_specs(), RedbOptions::default()).unwrap();
        let data = e.keyspace("data").unwrap();
        let mut row = e.snapshot().unwrap().get(data, &g2).unwrap().unwrap();
        *row.last_mut().unwrap() ^= 0x04;
        e.commit(Commit::new().put(data, g2.clone(), row)).unwrap();
    }
    let (code, text, _) = run(&["search", db, "verify", "agent_memory"]);
    assert_eq!(code, 1, "{text}");
    let lines: Vec<&str> = text.lines().filter(|l| l.starts_with("PROBLEM")).collect();
    assert_eq!(
        lines,
        [
            r#"PROBLEM duplicate document ("am", "doc", "grip:1706540401000:g1")"#,
            r#"PROBLEM damaged row ("am", "doc", "grip:1706540402000:g2") (its value does not decode; `strata verify` checks the store)"#,
        ],
        "{text}"
    );
    let (code, out, _) = run(&["--json", "search", db, "verify", "agent_memory"]);
    assert_eq!(code, 1, "{out}");
    let v: Json = serde_json::from_str(&out).unwrap();
    assert_eq!(
        (v["damaged"].clone(), v["rows"].clone(), v["extra"].clone()),
        (
            serde_json::json!([r#"("am", "doc", "grip:1706540402000:g2")"#]),
            1.into(),
            serde_json::json!([])
        ),
        "{v}"
    );
    let (code, text, _) = run(&["verify", db]);
    assert_eq!(code, 1, "{text}");
    assert!(
        text.contains(r#"PROBLEM search index agent_memory: damaged row (its value does not decode; not compared): ("am", "doc", "grip:1706540402000:g2")"#)
            && text.contains(r#"PROBLEM search index agent_memory: duplicate (more than one document for one row): ("am", "doc", "grip:1706540401000:g1")"#),
        "{text}"
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
    a_third_grip(&path, &dir, true);
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
    // `verify` calls it a problem: the outbox acknowledged what the
    // index's files do not hold.
    let (code, text, _) = run(&["verify", db]);
    assert_eq!(code, 1, "{text}");
    assert!(
        text.lines().any(|l| l
            .starts_with("PROBLEM search index agent_memory: the outbox acknowledged ")
            && l.contains(", past the index's checkpoint ")),
        "{text}"
    );
}

/// Entries the index has not caught up with are a note of `verify`, not
/// a problem: the documents are not compared until it catches up.
#[test]
fn verify_notes_an_index_that_has_not_caught_up() {
    let dir = Dir::new("search-lagging");
    let path = agent_memory(&dir);
    a_third_grip(&path, &dir, false);
    let (code, text, _) = run(&["verify", p(&path)]);
    assert_eq!(code, 0, "{text}");
    assert!(
        text.contains("note: search index agent_memory: 1 entries not indexed yet"),
        "{text}"
    );
}

/// `verify` reads the agent-memory keyspaces back too: the counts, and
/// damage planted in them reported line by line.
#[test]
fn verify_covers_the_agent_memory_keyspaces() {
    let dir = Dir::new("verify-am");
    let db = agent_memory(&dir);
    {
        use strata_schemas::agent_memory::{AgentMemory, Event};
        let store = memory_store(&db);
        let outbox = memory_outbox(&store, &Arc::new(SystemClock), 4);
        let memory = AgentMemory::open(&store, &outbox).unwrap();
        memory
            .put_event(&Event {
                event_type: strata_schemas::agent_memory::EventType::UserMessage,
                metadata: std::collections::BTreeMap::new(),
                agent: None,
                event_id: "01HNVX2X7Q0000000000000001".into(),
                session_id: "s1".into(),
                timestamp_ms: 1_706_540_400_000,
                role: "user".into(),
                text: "hello".into(),
            })
            .unwrap();
        store.engine().sync().unwrap();
    }
    let db = p(&db);
    let all = json(&["verify", db]);
    assert_eq!(all["ok"], true, "{all}");
    assert_eq!(
        all["agent_memory"],
        serde_json::json!({"events": 1, "toc_versions": 0, "nodes": 0, "grips": 2, "index_rows": 0})
    );
    // The event topic, which nothing consumes here, is listed.
    let (code, text, _) = run(&["outbox", db, "list"]);
    assert_eq!(code, 0, "{text}");
    assert!(
        text.lines()
            .any(|l| l.starts_with("  am.events: 1 entries, ")
                && l.ends_with(", no consumer (never trimmed)")),
        "{text}"
    );
    {
        let options = strata_schemas::agent_memory::AgentMemory::<RedbEngine>::declare(
            StoreOptions::new(Limits::FOUNDATIONDB),
        );
        let e = RedbEngine::open(db, options.keyspace_specs(), RedbOptions::default()).unwrap();
        let grips = e.keyspace("am.grips").unwrap();
        let latest = e.keyspace("am.toc_latest").unwrap();
        e.commit(
            Commit::new()
                .put(
                    grips,
                    b"node:toc:day:2024-01-29:grip:1706540400000:g7".to_vec(),
                    Vec::new(),
                )
                .put(latest, b"latest:toc:year:2024".to_vec(), vec![0, 1]),
        )
        .unwrap();
    }
    let (code, text, _) = run(&["verify", db]);
    assert_eq!(code, 1, "{text}");
    let lines: Vec<&str> = text.lines().filter(|l| l.starts_with("PROBLEM")).collect();
    assert_eq!(
        lines,
        [
            r#"PROBLEM agent memory: am.toc_latest "latest:toc:year:2024": is a latest pointer that is not 4 bytes"#,
            r#"PROBLEM agent memory: am.grips "node:toc:day:2024-01-29:grip:1706540400000:g7": indexes a grip that is not stored under that node"#,
        ],
        "{text}"
    );
    assert!(
        text.contains("agent memory: 1 events, 0 TOC versions of 1 nodes, 2 grips, 1 index rows"),
        "{text}"
    );
}

/// Adds a third grip to the agent-memory database at `path` and, when
/// `index`, catches its index in `dir/index` up.
fn a_third_grip(path: &Path, dir: &Dir, index: bool) {
    use strata_schemas::agent_memory::{AgentMemory, EventRef, Grip};
    let clock = Arc::new(SystemClock);
    let store = memory_store(path);
    let outbox = memory_outbox(&store, &clock, 9);
    let memory = AgentMemory::open(&store, &outbox).unwrap();
    let at = EventRef {
        timestamp_ms: 1_706_540_500_000,
        event_id: "01HNA000000001706540500000".to_owned(),
    };
    memory
        .put_grip(&Grip {
            salience: strata_schemas::agent_memory::Salience::default(),
            grip_id: "grip:1706540500000:g9".to_owned(),
            excerpt: "a third grip".to_owned(),
            start: at.clone(),
            end: at,
            source: "test".into(),
            toc_node_id: None,
        })
        .unwrap();
    store.engine().sync().unwrap();
    if !index {
        return;
    }
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

/// An index ahead of its store (the store restored from a backup taken
/// before the index caught up further) is a problem `verify` reports.
#[test]
fn verify_finds_an_index_ahead_of_its_store() {
    let dir = Dir::new("search-ahead");
    let path = agent_memory(&dir);
    let backup = dir.0.join("before.redb");
    json(&["backup", p(&path), p(&backup)]);
    a_third_grip(&path, &dir, true);
    let last = json(&["info", p(&backup)])["last_version"]
        .as_u64()
        .unwrap();
    let (code, text, _) = run(&["verify", p(&backup)]);
    assert_eq!(code, 1, "{text}");
    let line = text
        .lines()
        .find(|l| l.contains("is ahead of the store's last commit"))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(
        line.starts_with("PROBLEM search index agent_memory: checkpoint ")
            && line.ends_with(&format!("is ahead of the store's last commit {last}")),
        "{line}"
    );
}

/// An index whose mapping the tool does not know is listed, not verified:
/// the refusal names the mappings it knows.
#[test]
fn an_index_of_an_unknown_mapping_is_not_verified() {
    use strata_schemas::agent_memory::{SearchDoc, SearchDocKey};
    let dir = Dir::new("search-unknown");
    let path = agent_memory(&dir);
    {
        let clock = Arc::new(SystemClock);
        let store = memory_store(&path);
        let outbox = memory_outbox(&store, &clock, 5);
        let spec = strata_search::IndexSpec::new("other", |_: &SearchDocKey, d: &SearchDoc| {
            strata_search::Document::new().text("text", &d.text)
        })
        .unwrap()
        .text("text", 1.0)
        .unwrap();
        let indexer = strata_search::Indexer::open(
            &outbox,
            spec,
            &strata_search::Location::Dir(dir.0.join("other")),
            strata_search::IndexerConfig::new("other"),
            clock,
        )
        .unwrap();
        indexer.close().unwrap();
    }
    let (code, _, err) = run(&["search", p(&path), "verify", "other"]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains(r#"this tool does not know the mapping of search index "other" (it knows ["agent_memory"])"#),
        "{err}"
    );
}

/// The agent-memory index's files, each flipped at every fifteenth of its
/// length: `search list`, `query` and `verify` answer with a status of 0,
/// 1 or 2 and never print a panic (the files' checksums refuse the damage
/// before tantivy reads it, where it could panic); `rebuild` makes it
/// whole again.
#[test]
fn a_damaged_index_is_reported_never_a_panic_and_rebuilt() {
    let dir = Dir::new("search-damaged");
    let db = agent_memory(&dir);
    let db = p(&db);
    let root = dir.0.join("index");
    let generation = std::fs::read_to_string(root.join("CURRENT")).unwrap();
    let generation = root.join(generation.trim());
    let mut files: Vec<_> = std::fs::read_dir(&generation)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|f| !f.to_string_lossy().ends_with(".lock"))
        .collect();
    files.sort();
    let mut damaged = 0;
    for file in &files {
        let clean = std::fs::read(file).unwrap();
        for at in (0..clean.len()).step_by(clean.len() / 15 + 1) {
            let mut bytes = clean.clone();
            bytes[at] ^= 0xA5;
            std::fs::write(file, &bytes).unwrap();
            for args in [
                vec!["search", db, "list"],
                vec!["search", db, "query", "agent_memory", "migrations"],
                vec!["search", db, "verify", "agent_memory"],
            ] {
                let out = strata()
                    .args(&args)
                    .env("RUST_BACKTRACE", "1")
                    .output()
                    .unwrap();
                let err = String::from_utf8_lossy(&out.stderr);
                let text = String::from_utf8_lossy(&out.stdout);
                let code = out.status.code();
                let at_file = format!("{} byte {at}, {args:?}", file.display());
                assert!(matches!(code, Some(0..=2)), "{at_file}: {code:?} {err}");
                assert!(
                    !err.contains("panicked at") && !err.contains("backtrace"),
                    "{at_file}: a panic printed: {err}"
                );
                if err.contains("damaged") || text.contains("damaged") {
                    damaged += 1;
                }
            }
        }
        std::fs::write(file, &clean).unwrap();
    }
    assert!(damaged > 0, "no flipped byte was reported as damage");
    // Damaged again, then rebuilt from the store: whole.
    let store_file = files
        .iter()
        .find(|f| f.extension().is_some_and(|e| e == "store"))
        .unwrap();
    std::fs::write(store_file, b"not a store file").unwrap();
    let (code, _, err) = run(&["search", db, "rebuild", "agent_memory"]);
    assert_eq!(code, 0, "{err}");
    let hits = json(&["search", db, "query", "agent_memory", "migrations"]);
    assert_eq!(hits["hits"].as_array().unwrap().len(), 1, "{hits}");
    let v = json(&["search", db, "verify", "agent_memory"]);
    assert_eq!(v["ok"], true, "{v}");
}

/// A query of 10,000 nested parentheses: a message and exit status 2
/// (tantivy's parser overflowed the tool's stack on it).
#[test]
fn a_deeply_nested_query_is_a_message_not_a_stack_overflow() {
    let dir = Dir::new("search-nested");
    let db = agent_memory(&dir);
    let text = format!("{}migrations{}", "(".repeat(10_000), ")".repeat(10_000));
    let (code, _, err) = run(&["search", p(&db), "query", "agent_memory", &text]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("nests parentheses") && !err.contains("overflow"),
        "{err}"
    );
}
