//! The index's disk fills while the indexer catches up.

use std::process::Command;

use strata_engine::Durability;
use strata_search::{Indexer, Location, Query};
use strata_store::Store;

use crate::{NoteKey, indexer_config, mem, note, options, outbox, outbox_config, spec};

/// A tmpfs mounted at this directory: unmounted and removed on drop.
struct Mount(std::path::PathBuf);

impl Drop for Mount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
        let _ = std::fs::remove_dir(&self.0);
    }
}

/// The index directory on a 3 MiB tmpfs, a filler file taking most of it:
/// notes are indexed until the disk is full. The indexer's failure is an
/// error (no panic, no hang, no abort), and the index it leaves is its
/// last commit, whole: once the filler is removed, a new indexer opens it
/// (its checksums checked), catches up, and every note is found. Skipped (and says so) where this process may
/// not mount a tmpfs.
#[test]
fn a_full_disk_under_the_index_is_an_error_and_space_back_lets_it_catch_up() {
    let root_dir = std::env::temp_dir().join(format!("strata-search-full-{}", std::process::id()));
    std::fs::create_dir_all(&root_dir).unwrap();
    let mounted = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=3m", "tmpfs"])
        .arg(&root_dir)
        .status()
        .is_ok_and(|s| s.success());
    if !mounted {
        eprintln!("skipped: cannot mount a tmpfs here");
        return;
    }
    let _mount = Mount(root_dir.clone());
    let filler = root_dir.join("filler");
    std::fs::write(&filler, vec![0u8; 2 << 20]).unwrap();
    let (store, clock, _dir) = mem(options(Durability::Immediate));
    let store: &Store<_> = &store;
    let ob = outbox(store, &clock, outbox_config());
    let root = root_dir.join("index");
    let mut ix = crate::indexer_at(&ob, &clock, &root);
    let body = |id: u64| format!("note {id} {}", "lorem ipsum dolor sit amet ".repeat(100));
    let mut failed = None;
    let mut written = 0u64;
    for id in 0..2_000u64 {
        store
            .transact(|tx| {
                spec().put(
                    &ob,
                    tx,
                    &NoteKey { id },
                    &note("full", &body(id), "info", id),
                )
            })
            .unwrap();
        written = id + 1;
        if id % 50 == 49
            && let Err(e) = ix.catch_up()
        {
            failed = Some(e);
            break;
        }
    }
    let failed = failed.expect("the disk never filled");
    let said = strata_engine::ErrorChain(&failed).to_string();
    // The full disk met in this thread, or in tantivy's indexing thread,
    // which then reports itself killed.
    assert!(
        said.contains("No space left on device") || said.contains("index writer was killed"),
        "not the full disk: {said}"
    );
    eprintln!("after {written} notes: {said}");
    drop(ix);
    std::fs::remove_file(&filler).unwrap();
    let mut config = indexer_config();
    config.holder = "after".into();
    clock.advance(120_000);
    // Space back: a new indexer opens what the failed one left (its last
    // commit, whole) and catches up.
    let mut ix = Indexer::open(
        &ob,
        spec(),
        &Location::Dir(root.clone()),
        config,
        clock.clone(),
    )
    .unwrap();
    ix.catch_up().unwrap();
    assert_eq!(ix.documents().unwrap(), written);
    let found = ix.search(&Query::new("lorem").limit(10_000)).unwrap();
    assert_eq!(found.hits.len() as u64, written);
}
