//! A damaged index directory: tantivy panics on some damaged segment
//! files; every read of the index turns that into `SearchError::Damaged`,
//! and the index is rebuilt from the store.

use std::collections::BTreeSet;
use std::path::Path;

use strata_engine::Durability;
use strata_search::inspect::IndexFiles;
use strata_search::{Indexer, Location, Query, SearchError};
use strata_store::Store;
use strata_test_support::copy_dir;

use crate::index::put;
use crate::{NoteKey, indexer_at, indexer_config, mem, note, options, outbox, outbox_config, spec};

/// The ids of the notes a search for "rust" finds.
fn rust_notes<E: strata_engine::Engine>(ix: &Indexer<'_, '_, E, NoteKey>) -> BTreeSet<u64> {
    ix.search(&Query::new("rust").limit(10_000))
        .unwrap()
        .hits
        .iter()
        .map(|h| h.key.id)
        .collect()
}

/// The notes index at `root`, rebuilt from the store.
fn rebuilt<'o, 's, E: strata_engine::Engine>(
    ob: &'o strata_outbox::Outbox<'s, E>,
    clock: &std::sync::Arc<strata_engine::ManualClock>,
    root: &Path,
) -> (Indexer<'o, 's, E, NoteKey>, strata_search::Rebuilt) {
    Indexer::open_rebuilt(
        ob,
        spec(),
        &Location::Dir(root.to_path_buf()),
        indexer_config(),
        clock.clone(),
    )
    .unwrap()
}

/// The files of the index's current generation (locks aside).
fn index_files(root: &Path) -> Vec<std::path::PathBuf> {
    let generation = std::fs::read_to_string(root.join("CURRENT")).unwrap();
    let mut files: Vec<_> = std::fs::read_dir(root.join(generation.trim()))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| !p.to_string_lossy().ends_with(".lock"))
        .collect();
    files.sort();
    files
}

/// Forty notes (every third about rust) indexed at `root`, then five of
/// them written again in a later commit of the index, their old documents
/// deleted: the first segment keeps 40 documents, 5 of them deleted (a
/// delete file), the second has 5. Returns what a search for "rust" finds.
fn forty_notes_five_written_again<E: strata_engine::Engine>(
    store: &Store<E>,
    ob: &strata_outbox::Outbox<'_, E>,
    clock: &std::sync::Arc<strata_engine::ManualClock>,
    root: &Path,
) -> BTreeSet<u64> {
    for id in 0..40u64 {
        let topic = if id % 3 == 0 {
            "rust borrow"
        } else {
            "garden beans"
        };
        put(
            store,
            ob,
            id,
            &note(topic, &format!("note {id} about {topic}"), "info", id),
        );
    }
    let mut ix = indexer_at(ob, clock, root);
    ix.catch_up().unwrap();
    for id in (0..15).step_by(3) {
        put(store, ob, id, &note("rust borrow", "again", "info", id));
    }
    ix.catch_up().unwrap();
    let found = rust_notes(&ix);
    assert_eq!(found, (0..40).step_by(3).collect());
    ix.close().unwrap();
    found
}

/// Each file of an index flipped at every twentieth of its length: every
/// open, search and count through `IndexFiles` and `Indexer` returns (a
/// panic would fail the test), some of them `Damaged` (tantivy panicked
/// and the panic was caught), and `open_rebuilt` makes it whole again.
#[test]
fn a_damaged_index_is_an_error_never_a_panic_and_rebuilds_from_the_store() {
    let (store, clock, dir) = mem(options(Durability::Immediate));
    let store: &Store<_> = &store;
    let ob = outbox(store, &clock, outbox_config());
    let root = dir.0.join("index");
    let expected = forty_notes_five_written_again(store, &ob, &clock, &root);
    let clean = dir.0.join("clean");
    copy_dir(&root, &clean);
    assert!(
        index_files(&clean)
            .iter()
            .any(|f| f.extension().is_some_and(|e| e == "del")),
        "no delete file to damage"
    );

    let mut damaged = 0;
    for file in index_files(&clean) {
        let bytes = std::fs::read(&file).unwrap();
        let name = file.file_name().unwrap().to_owned();
        for at in (0..bytes.len()).step_by(bytes.len() / 20 + 1) {
            std::fs::remove_dir_all(&root).unwrap();
            copy_dir(&clean, &root);
            let generation = std::fs::read_to_string(root.join("CURRENT")).unwrap();
            let mut flipped = bytes.clone();
            flipped[at] ^= 0xA5;
            std::fs::write(root.join(generation.trim()).join(&name), &flipped).unwrap();
            let inspected = IndexFiles::open(&root).and_then(|files| {
                let _ = files.documents();
                files.query("rust", 100).map(|_| ())
            });
            let opened = |verify_at_open: bool| {
                let mut config = indexer_config();
                config.verify_at_open = verify_at_open;
                let ix = Indexer::open(
                    &ob,
                    spec(),
                    &Location::Dir(root.clone()),
                    config,
                    clock.clone(),
                )?;
                let searched = ix.search(&Query::new("rust").limit(100)).map(|_| ());
                let counted = ix.documents().map(|_| ());
                ix.close().unwrap();
                searched.and(counted)
            };
            // Checked at open (the default; `IndexFiles` always checks):
            // refused before tantivy reads a byte, by the file's checksum.
            let checked = opened(true);
            if name != "meta.json" && name != ".managed.json" {
                for refused in [&inspected, &checked] {
                    assert!(
                        matches!(refused, Err(SearchError::Checksum { files }) if files == &[std::path::PathBuf::from(&name)]),
                        "{name:?} byte {at}: {refused:?}"
                    );
                }
            }
            // Not checked: tantivy reads the damaged bytes, and its panics
            // are caught. Only in a debug build: there tantivy's overflow
            // checks panic where a release build may wrap the length and
            // abort allocating it, which nothing catches (hence the check).
            if cfg!(debug_assertions) && matches!(opened(false), Err(SearchError::Damaged(_))) {
                damaged += 1;
            }
        }
    }
    assert!(
        damaged > 0 || !cfg!(debug_assertions),
        "no flipped byte made tantivy panic: the sweep tests nothing of the guard"
    );

    // What a killed writer leaves (files of a commit that never happened:
    // a half-written delete file of a committed segment, a segment never
    // committed) is no damage: only the files the last commit names are
    // checked.
    std::fs::remove_dir_all(&root).unwrap();
    copy_dir(&clean, &root);
    let generation = root.join(
        std::fs::read_to_string(root.join("CURRENT"))
            .unwrap()
            .trim(),
    );
    let segment = index_files(&root)
        .iter()
        .find_map(|f| {
            f.to_string_lossy()
                .strip_suffix(".store")
                .map(str::to_owned)
        })
        .unwrap();
    std::fs::write(format!("{segment}.999999.del"), b"half writ").unwrap();
    std::fs::write(
        generation.join("0123456789abcdef0123456789abcdef.store"),
        b"half",
    )
    .unwrap();
    assert_eq!(IndexFiles::open(&root).unwrap().documents(), 40);
    let ix = indexer_at(&ob, &clock, &root);
    assert_eq!(rust_notes(&ix), expected);
    ix.close().unwrap();

    // Rebuilt from the store over a damaged index: whole again.
    let store_file = index_files(&clean)
        .into_iter()
        .find(|f| f.extension().is_some_and(|e| e == "store"))
        .unwrap();
    let name = store_file.file_name().unwrap().to_owned();
    let at = std::fs::read(&store_file).unwrap().len() / 2;
    std::fs::remove_dir_all(&root).unwrap();
    copy_dir(&clean, &root);
    let generation = std::fs::read_to_string(root.join("CURRENT")).unwrap();
    let path = root.join(generation.trim()).join(&name);
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[at] ^= 0xA5;
    std::fs::write(&path, &bytes).unwrap();
    let (ix, report) = rebuilt(&ob, &clock, &root);
    assert_eq!(report.documents, 40);
    assert_eq!(rust_notes(&ix), expected);
    let files = IndexFiles::open(&root).unwrap();
    assert_eq!(files.documents(), 40);
    assert_eq!(files.query("rust", 100).unwrap().len(), expected.len());
}

/// New notes arrive after the index was damaged (a file in turn, 60
/// rounds), and an indexer opens it to catch up. A damaged segment file is
/// refused at open by its checksum, naming it, before tantivy's writer
/// (whose delete pass runs on a rayon pool, where a panic aborts the
/// process) reads it; `meta.json` and `.managed.json` carry no checksum
/// and end as a tantivy error or an index that answers. Never a panic or
/// a hang; a rebuild then makes the index whole, with every note.
#[test]
fn catching_up_on_a_damaged_index_ends_and_a_rebuild_makes_it_whole() {
    let (store, clock, dir) = mem(options(Durability::Immediate));
    let store: &Store<_> = &store;
    let ob = outbox(store, &clock, outbox_config());
    let put_topic = |id: u64, topic: &str| {
        put(store, &ob, id, &note(topic, topic, "info", id));
    };
    let mut rusty = BTreeSet::new();
    for id in 0..30u64 {
        put_topic(
            id,
            if id % 3 == 0 {
                "rust borrow"
            } else {
                "garden beans"
            },
        );
        if id % 3 == 0 {
            rusty.insert(id);
        }
    }
    let root = dir.0.join("index");
    let mut ix = indexer_at(&ob, &clock, &root);
    ix.catch_up().unwrap();
    ix.close().unwrap();
    let clean = dir.0.join("clean");
    copy_dir(&root, &clean);
    let mut next = 100u64;
    let mut outcomes = std::collections::BTreeMap::<&str, usize>::new();
    // Each round damages the index as the last rebuild left it (so that
    // it is not merely behind its consumer): a file in turn, at a byte
    // spread over its length.
    for round in 0..60usize {
        {
            let files = index_files(&clean);
            let file = &files[round % files.len()];
            let name = file.file_name().unwrap().to_owned();
            let mut flipped = std::fs::read(file).unwrap();
            let at = round.wrapping_mul(7_919) % flipped.len();
            flipped[at] ^= 0xA5;
            std::fs::remove_dir_all(&root).unwrap();
            copy_dir(&clean, &root);
            let generation = std::fs::read_to_string(root.join("CURRENT")).unwrap();
            std::fs::write(root.join(generation.trim()).join(&name), &flipped).unwrap();
            // Updates of old notes (deletes in tantivy) and new ones.
            put_topic(next % 30, "rust update");
            put_topic(next, "rust new");
            rusty.extend([next % 30, next]);
            next += 1;
            let opened = Indexer::open(
                &ob,
                spec(),
                &Location::Dir(root.clone()),
                indexer_config(),
                clock.clone(),
            );
            let outcome = match opened {
                Ok(mut ix) => {
                    let caught = ix.catch_up().map(|_| ());
                    let searched = ix.search(&Query::new("rust")).map(|_| ());
                    ix.close().unwrap();
                    caught
                        .and(searched)
                        .map_or_else(|e| kind(&e), |()| "answers")
                }
                Err(SearchError::Checksum { files }) => {
                    assert_eq!(files, [std::path::PathBuf::from(&name)]);
                    "refused by the checksum"
                }
                Err(e) => kind(&e),
            };
            if name != "meta.json" && name != ".managed.json" {
                assert_eq!(outcome, "refused by the checksum", "{name:?} byte {at}");
            }
            *outcomes.entry(outcome).or_default() += 1;
            // Whatever happened, a rebuild makes it whole.
            let (ix, report) = rebuilt(&ob, &clock, &root);
            assert_eq!(report.documents, 30 + (next - 100));
            assert_eq!(rust_notes(&ix), rusty);
            ix.close().unwrap();
            std::fs::remove_dir_all(&clean).unwrap();
            copy_dir(&root, &clean);
        }
    }
    assert!(outcomes["refused by the checksum"] > 0, "{outcomes:?}");
}

fn kind(e: &SearchError) -> &'static str {
    match e {
        SearchError::Tantivy(_) => "a tantivy error",
        SearchError::Damaged(_) => "a caught panic",
        _ => "another error",
    }
}

/// A query of parentheses nested thousands deep (tantivy's parser recurses
/// once per level: it overflowed the stack and aborted the process) is a
/// typed error, through `Indexer::search` and `IndexFiles::query`, on a
/// thread with a 512 KiB stack; at the bound it still parses and finds.
#[test]
fn a_deeply_nested_query_is_refused_not_a_stack_overflow() {
    use strata_search::{MAX_QUERY_NESTING, QueryError};
    let (store, clock, dir) = mem(options(Durability::Immediate));
    let store: &Store<_> = &store;
    let ob = outbox(store, &clock, outbox_config());
    put(store, &ob, 1, &note("rust", "borrow", "info", 1));
    let root = dir.0.join("index");
    let mut ix = indexer_at(&ob, &clock, &root);
    ix.catch_up().unwrap();
    let nested = |n: usize| format!("{}rust{}", "(".repeat(n), ")".repeat(n));
    std::thread::scope(|s| {
        std::thread::Builder::new()
            .stack_size(512 << 10)
            .spawn_scoped(s, || {
                for text in [nested(20_000), format!("x -{}", "-(".repeat(20_000))] {
                    let refused = ix.search(&Query::new(&text));
                    assert!(
                        matches!(
                            refused,
                            Err(SearchError::Query(QueryError::TooDeep { depth })) if depth == MAX_QUERY_NESTING + 1
                        ),
                        "{refused:?}"
                    );
                }
                let files = IndexFiles::open(&root).unwrap();
                assert!(matches!(
                    files.query(&nested(20_000), 10),
                    Err(SearchError::Query(QueryError::TooDeep { .. }))
                ));
            })
            .unwrap()
            .join()
            .unwrap();
    });
    let at = nested(MAX_QUERY_NESTING);
    assert_eq!(ix.search(&Query::new(&at)).unwrap().hits.len(), 1);
    let closed_between = format!("{}rust", "(a) ".repeat(1_000));
    assert!(
        ix.search(&Query::new(&closed_between)).is_ok(),
        "depth 1, many groups"
    );
    assert!(matches!(
        ix.search(&Query::new(nested(MAX_QUERY_NESTING + 1))),
        Err(SearchError::Query(QueryError::TooDeep { .. }))
    ));
    // A stray `)` first closes nothing: the depth after it counts from
    // zero (a syntax error of tantivy's, or an answer; never `TooDeep`).
    let stray = format!(")) {}", nested(MAX_QUERY_NESTING));
    assert!(
        !matches!(
            ix.search(&Query::new(&stray)),
            Err(SearchError::Query(QueryError::TooDeep { .. }))
        ),
        "a stray `)` is no nesting"
    );
}

/// `meta.json` has no checksum: a document count changed in it (a digit
/// damaged into another digit) is refused at open, named with both
/// counts, by `Indexer::open` and `IndexFiles::open`, instead of being
/// read as written (before, `IndexFiles` reported the changed count and
/// searches ran with it; a count too small made tantivy panic).
#[test]
fn a_changed_count_in_meta_json_is_refused_at_open() {
    let (store, clock, dir) = mem(options(Durability::Immediate));
    let store: &Store<_> = &store;
    let ob = outbox(store, &clock, outbox_config());
    let root = dir.0.join("index");
    let expected = forty_notes_five_written_again(store, &ob, &clock, &root);
    let clean = dir.0.join("clean");
    copy_dir(&root, &clean);
    let meta = index_files(&clean)
        .into_iter()
        .find(|f| f.file_name().is_some_and(|n| n == "meta.json"))
        .unwrap();
    let text = std::fs::read_to_string(&meta).unwrap();
    // The counts as this test wrote them, in tantivy's own spelling.
    for count in [
        r#""max_doc": 40"#,
        r#""max_doc": 5"#,
        r#""num_deleted_docs": 5"#,
    ] {
        assert_eq!(text.matches(count).count(), 1, "{count} in {text}");
    }
    let cases = [
        (r#""max_doc": 40"#, r#""max_doc": 41"#, "documents", 41, 40),
        (r#""max_doc": 40"#, r#""max_doc": 39"#, "documents", 39, 40),
        (r#""max_doc": 5"#, r#""max_doc": 2"#, "documents", 2, 5),
        (r#""max_doc": 5"#, r#""max_doc": 50"#, "documents", 50, 5),
        (
            r#""num_deleted_docs": 5"#,
            r#""num_deleted_docs": 4"#,
            "live documents",
            36,
            35,
        ),
        (
            r#""num_deleted_docs": 5"#,
            r#""num_deleted_docs": 9"#,
            "live documents",
            31,
            35,
        ),
    ];
    let generation = std::fs::read_to_string(root.join("CURRENT")).unwrap();
    for (from, to, what, said, found) in cases {
        std::fs::remove_dir_all(&root).unwrap();
        copy_dir(&clean, &root);
        std::fs::write(
            root.join(generation.trim()).join("meta.json"),
            text.replace(from, to),
        )
        .unwrap();
        let inspected = IndexFiles::open(&root).map(|_| ());
        let opened = Indexer::open(
            &ob,
            spec(),
            &Location::Dir(root.clone()),
            indexer_config(),
            clock.clone(),
        )
        .map(|ix| ix.close().unwrap());
        for refused in [inspected, opened] {
            assert!(
                matches!(
                    &refused,
                    Err(SearchError::Counts { what: w, said: s, found: f, .. })
                        if *w == what && *s == said && *f == found
                ),
                "{to}: {refused:?}"
            );
        }
    }
    // The clean copy opens, and a rebuild makes a damaged one whole.
    std::fs::remove_dir_all(&root).unwrap();
    copy_dir(&clean, &root);
    assert_eq!(IndexFiles::open(&root).unwrap().documents(), 40);
    std::fs::write(
        root.join(generation.trim()).join("meta.json"),
        text.replace(r#""max_doc": 5"#, r#""max_doc": 6"#),
    )
    .unwrap();
    let (ix, report) = rebuilt(&ob, &clock, &root);
    assert_eq!(report.documents, 40);
    assert_eq!(rust_notes(&ix), expected);
    ix.close().unwrap();
}
