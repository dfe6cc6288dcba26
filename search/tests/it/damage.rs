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

use crate::{NoteKey, indexer_at, indexer_config, mem, note, options, outbox, outbox_config, spec};

/// The ids of the notes a search for "rust" finds.
fn rust_notes<E: strata_engine::Engine>(ix: &Indexer<'_, '_, E, NoteKey>) -> BTreeSet<u64> {
    ix.search(&Query::new("rust").limit(100))
        .unwrap()
        .hits
        .iter()
        .map(|h| h.key.id)
        .collect()
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

/// Each file of an index flipped at every twentieth of its length: every
/// open, search and count through `IndexFiles` and `Indexer` returns (a
/// panic would fail the test), some of them `Damaged` (tantivy panicked
/// and the panic was caught), and `open_rebuilt` makes it whole again.
#[test]
fn a_damaged_index_is_an_error_never_a_panic_and_rebuilds_from_the_store() {
    let (store, clock, dir) = mem(options(Durability::Immediate));
    let store: &Store<_> = &store;
    let ob = outbox(store, &clock, outbox_config());
    for id in 0..40u64 {
        let topic = if id % 3 == 0 {
            "rust borrow"
        } else {
            "garden beans"
        };
        store
            .transact(|tx| {
                spec().put(
                    &ob,
                    tx,
                    &NoteKey { id },
                    &note(topic, &format!("note {id} about {topic}"), "info", id),
                )
            })
            .unwrap();
    }
    let root = dir.0.join("index");
    let mut ix = indexer_at(&ob, &clock, &root);
    ix.catch_up().unwrap();
    let expected = rust_notes(&ix);
    assert_eq!(expected, (0..40).step_by(3).collect());
    ix.close().unwrap();
    let clean = dir.0.join("clean");
    copy_dir(&root, &clean);

    let mut damaged = 0;
    let mut last_damaged = None;
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
            let mut outcomes = Vec::new();
            match IndexFiles::open(&root) {
                Ok(files) => {
                    let _ = files.documents();
                    outcomes.push(files.query("rust", 100).map(|_| ()));
                }
                Err(e) => outcomes.push(Err(e)),
            }
            match Indexer::open(
                &ob,
                spec(),
                &Location::Dir(root.clone()),
                indexer_config(),
                clock.clone(),
            ) {
                Ok(ix) => {
                    outcomes.push(ix.search(&Query::new("rust").limit(100)).map(|_| ()));
                    outcomes.push(ix.documents().map(|_| ()));
                    ix.close().unwrap();
                }
                Err(e) => outcomes.push(Err(e)),
            }
            if outcomes
                .iter()
                .any(|o| matches!(o, Err(SearchError::Damaged(_))))
            {
                damaged += 1;
                last_damaged = Some((name.clone(), at));
            }
        }
    }
    assert!(
        damaged > 0,
        "no flipped byte made tantivy panic: the sweep tests nothing of the guard"
    );

    // Rebuilt from the store over a damaged index: whole again.
    let (name, at) = last_damaged.unwrap();
    std::fs::remove_dir_all(&root).unwrap();
    copy_dir(&clean, &root);
    let generation = std::fs::read_to_string(root.join("CURRENT")).unwrap();
    let path = root.join(generation.trim()).join(&name);
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[at] ^= 0xA5;
    std::fs::write(&path, &bytes).unwrap();
    let (ix, report) = Indexer::open_rebuilt(
        &ob,
        spec(),
        &Location::Dir(root.clone()),
        indexer_config(),
        clock.clone(),
    )
    .unwrap();
    assert_eq!(report.documents, 40);
    assert_eq!(rust_notes(&ix), expected);
    let files = IndexFiles::open(&root).unwrap();
    assert_eq!(files.documents(), 40);
    assert_eq!(files.query("rust", 100).unwrap().len(), expected.len());
}
