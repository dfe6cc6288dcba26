//! Restarts: the checkpoint committed inside the index, redelivered
//! entries after a lost acknowledgement, and an index that lost commits.

use std::sync::Arc;

use strata_engine::{Durability, Engine, ManualClock, MemEngine, SeededRng};
use strata_outbox::{Position, Start};
use strata_search::{Document, Indexer, Location, MappingError, Query, SearchError};
use strata_store::Store;

/// Longer than the outbox's lease term.
const LEASE_MS: u64 = 30_001;

use crate::engine_tests;
use crate::{
    Note, NoteKey, T0, indexer_config, note, on_every_engine, options, outbox, outbox_config, spec,
};

engine_tests! {
    fn an_index_reopens_at_the_checkpoint_it_committed() {
        on_every_engine!(Durability::Immediate, |store, clock, dir| {
            let ob = outbox(&store, &clock, outbox_config());
            let at = dir.0.join("index");
            let s = spec();
            for id in 1..=5 {
                store
                    .transact(|tx| s.put(&ob, tx, &NoteKey { id }, &note("kept", "x", "info", T0)))
                    .unwrap();
            }
            let first = {
                let mut ix = crate::indexer_at(&ob, &clock, &at);
                ix.catch_up().unwrap()
            };
            assert_ne!(first, Position::START);
            assert_eq!(ob.checkpoint("search.notes", "notes").unwrap(), first);
            // The dropped indexer's lease is waited out, as after a crash.
            clock.advance(LEASE_MS);
            let mut ix = crate::indexer_at(&ob, &clock, &at);
            assert_eq!(ix.checkpoint(), first, "read back from the commit payload");
            assert_eq!(ix.documents().unwrap(), 5);
            let step = ix.step().unwrap();
            assert_eq!((step.received, step.committed), (0, false));
            assert!(ix.verify().unwrap().is_exact());
        });
    }
}

engine_tests! {
    fn a_lost_acknowledgement_is_made_good_without_applying_entries_twice() {
        on_every_engine!(Durability::Immediate, |store, clock, _dir| {
            let ob = outbox(&store, &clock, outbox_config());
            let mut ix = crate::indexer_in_memory(&ob, &clock);
            let s = spec();
            for id in 1..=4 {
                store
                    .transact(|tx| s.put(&ob, tx, &NoteKey { id }, &note("again", "x", "info", T0)))
                    .unwrap();
            }
            let at = ix.catch_up().unwrap();
            // As if the process died after the index commit and before the
            // acknowledgement: the outbox delivers everything again.
            ob.reset("search.notes", "notes", Start::Beginning).unwrap();
            assert_eq!(
                ob.checkpoint("search.notes", "notes").unwrap(),
                Position::START
            );
            let step = ix.step().unwrap();
            assert_eq!((step.received, step.late_ack), (0, true));
            assert_eq!(ix.checkpoint(), at);
            assert_eq!(ob.checkpoint("search.notes", "notes").unwrap(), at);
            assert_eq!(ix.documents().unwrap(), 4);
            assert_eq!(ix.search(&Query::new("again")).unwrap().hits.len(), 4);
            assert!(ix.verify().unwrap().is_exact());
        });
    }
}

engine_tests! {
    fn an_index_that_lost_commits_the_outbox_acknowledged_refuses_to_open() {
        on_every_engine!(Durability::Immediate, |store, clock, _dir| {
            let ob = outbox(&store, &clock, outbox_config());
            let s = spec();
            store
                .transact(|tx| s.put(&ob, tx, &NoteKey { id: 1 }, &note("a", "b", "info", T0)))
                .unwrap();
            let at = {
                let mut ix = crate::indexer_in_memory(&ob, &clock);
                ix.catch_up().unwrap()
            };
            // The in-memory index is gone; the outbox remembers `at`.
            let err = Indexer::open(
                &ob,
                spec(),
                &Location::Memory,
                indexer_config(),
                clock.clone(),
            )
            .unwrap_err();
            match err {
                SearchError::Behind { index, outbox } => {
                    assert_eq!((index, outbox), (Position::START, at));
                }
                other => panic!("expected Behind, got {other:?}"),
            }
            // Opening it by a rebuild recovers it from the store, once the
            // dropped indexer's lease ran out.
            clock.advance(LEASE_MS);
            let (mut ix, report) = Indexer::open_rebuilt(
                &ob,
                spec(),
                &Location::Memory,
                indexer_config(),
                clock.clone(),
            )
            .unwrap();
            assert_eq!(report.documents, 1);
            assert!(ix.checkpoint() >= at);
            assert_eq!(ix.search(&Query::new("a")).unwrap().hits.len(), 1);
            assert!(ix.verify().unwrap().is_exact());
        });
    }
}

engine_tests! {
    fn an_index_built_with_another_mapping_is_refused_then_opened_by_a_rebuild() {
        on_every_engine!(Durability::Immediate, |store, clock, dir| {
            let ob = outbox(&store, &clock, outbox_config());
            let root = dir.0.join("index");
            let s = spec();
            for id in 1..=3 {
                store
                    .transact(|tx| s.put(&ob, tx, &NoteKey { id }, &note("old", "body", "info", T0)))
                    .unwrap();
            }
            crate::indexer_at(&ob, &clock, &root).catch_up().unwrap();
            // The mapping gains a field.
            let wider = || spec().string("source").unwrap();
            let location = Location::Dir(root.clone());
            let Err(err) = Indexer::open(&ob, wider(), &location, indexer_config(), clock.clone())
            else {
                panic!("a changed mapping opened");
            };
            assert!(
                matches!(&err, SearchError::MappingChanged { index } if index == "notes"),
                "{err:?}"
            );
            // The old generation is untouched and still opens with the old one.
            crate::indexer_at(&ob, &clock, &root);
            clock.advance(LEASE_MS);
            let (mut ix, report) =
                Indexer::open_rebuilt(&ob, wider(), &location, indexer_config(), clock.clone())
                    .unwrap();
            assert_eq!(report.documents, 3);
            assert_eq!(ix.generation(), Some(2));
            assert_eq!(ix.search(&Query::new("old")).unwrap().hits.len(), 3);
            assert!(ix.verify().unwrap().is_exact());
            drop(ix);
            // From now on it opens with the new mapping.
            let ix = Indexer::open(&ob, wider(), &location, indexer_config(), clock.clone()).unwrap();
            assert_eq!(ix.documents().unwrap(), 3);
        });
    }
}

engine_tests! {
    fn an_index_of_the_older_hash_format_is_refused_then_rebuilt() {
        use strata_search::tantivy::schema::{INDEXED, STORED, Schema, TEXT};
        use strata_search::tantivy::{Index, IndexWriter, TantivyDocument};
        on_every_engine!(Durability::Immediate, |store, clock, dir| {
            let ob = outbox(&store, &clock, outbox_config());
            let s = spec();
            for id in 1..=2 {
                store
                    .transact(|tx| s.put(&ob, tx, &NoteKey { id }, &note("kept", "x", "info", T0)))
                    .unwrap();
            }
            // Generation 1 as indexes were made before 2026-11-27: each
            // document's FNV-1a body hash in `_hash`.
            let root = dir.0.join("index");
            std::fs::create_dir_all(root.join("gen-1")).unwrap();
            std::fs::write(root.join("CURRENT"), "gen-1").unwrap();
            let mut b = Schema::builder();
            let key = b.add_bytes_field("_key", INDEXED | STORED);
            let hash = b.add_u64_field("_hash", STORED);
            let version = b.add_u64_field("_version", STORED);
            let title = b.add_text_field("title", TEXT | STORED);
            let index = Index::create_in_dir(root.join("gen-1"), b.build()).unwrap();
            let mut writer: IndexWriter = index.writer_with_num_threads(1, 15 << 20).unwrap();
            let mut doc = TantivyDocument::default();
            doc.add_bytes(key, b"k".as_slice());
            doc.add_u64(hash, 1);
            doc.add_u64(version, 1);
            doc.add_text(title, "kept");
            writer.add_document(doc).unwrap();
            writer.commit().unwrap();
            drop(writer);

            let location = Location::Dir(root.clone());
            let Err(err) = Indexer::open(&ob, spec(), &location, indexer_config(), clock.clone())
            else {
                panic!("an index of the older format opened");
            };
            assert!(
                matches!(&err, SearchError::MappingChanged { index } if index == "notes"),
                "{err:?}"
            );
            let Err(err) = strata_search::inspect::IndexFiles::open(&root) else {
                panic!("an index of the older format was inspected");
            };
            assert!(
                matches!(&err, SearchError::OlderFormat),
                "{err:?}"
            );
            let (mut ix, report) =
                Indexer::open_rebuilt(&ob, spec(), &location, indexer_config(), clock.clone()).unwrap();
            assert_eq!(report.documents, 2);
            assert_eq!(ix.generation(), Some(2));
            assert!(ix.verify().unwrap().is_exact());
            assert_eq!(
                strata_search::inspect::IndexFiles::open(&root)
                    .unwrap()
                    .generation(),
                2
            );

            // An index with neither hash field is no strata index at all.
            let foreign = dir.0.join("foreign");
            std::fs::create_dir_all(foreign.join("gen-1")).unwrap();
            std::fs::write(foreign.join("CURRENT"), "gen-1").unwrap();
            let mut b = Schema::builder();
            b.add_text_field("title", TEXT | STORED);
            drop(Index::create_in_dir(foreign.join("gen-1"), b.build()).unwrap());
            let Err(err) = strata_search::inspect::IndexFiles::open(&foreign) else {
                panic!("a foreign index was inspected");
            };
            assert!(
                matches!(&err, SearchError::Schema { field: "_key" }),
                "{err:?}"
            );
        });
    }
}

engine_tests! {
    fn a_rebuild_indexes_a_store_snapshot_in_a_new_generation_and_switches() {
        on_every_engine!(Durability::Immediate, |store, clock, dir| {
            let ob = outbox(&store, &clock, outbox_config());
            let root = dir.0.join("index");
            let s = spec();
            let put = |id: u64, title: &str| {
                store
                    .transact(|tx| s.put(&ob, tx, &NoteKey { id }, &note(title, "x", "info", T0)))
                    .unwrap();
            };
            for id in 1..=4 {
                put(id, "first");
            }
            let mut ix = crate::indexer_at(&ob, &clock, &root);
            ix.catch_up().unwrap();
            assert_eq!(ix.generation(), Some(1));
            // Rows changed behind the index's back: the index is wrong.
            store
                .put(&NoteKey { id: 1 }, &note("changed", "x", "info", T0))
                .unwrap();
            store.delete(&NoteKey { id: 2 }).unwrap();
            store
                .put(&NoteKey { id: 9 }, &note("unindexed", "x", "info", T0))
                .unwrap();
            assert!(!ix.verify().unwrap().is_exact());

            let before = store.engine().last_version();
            let (mut ix, report) = ix.rebuild().unwrap();
            assert_eq!(report.documents, 4, "rows 1, 3, 4 and 9");
            assert_eq!(report.version, before, "a snapshot of every commit so far");
            assert_eq!(ix.generation(), Some(2));
            assert_eq!(ix.checkpoint(), Position::end_of(report.version));
            assert_eq!(
                std::fs::read_to_string(root.join("CURRENT")).unwrap(),
                "gen-2"
            );
            assert!(
                !root.join("gen-1").exists(),
                "the old generation is removed"
            );
            assert!(ix.verify().unwrap().is_exact());
            assert_eq!(
                ix.search(&Query::new("changed")).unwrap().hits[0].key,
                NoteKey { id: 1 }
            );
            // The outbox consumer is acknowledged through the snapshot.
            ix.step().unwrap();
            assert_eq!(
                ob.checkpoint("search.notes", "notes").unwrap(),
                ix.checkpoint()
            );
            // Later changes reach the new generation, which a reopen finds.
            put(5, "fresh");
            ix.catch_up().unwrap();
            drop(ix);
            let ix = crate::indexer_at(&ob, &clock, &root);
            assert_eq!(ix.generation(), Some(2));
            assert_eq!(ix.documents().unwrap(), 5);
            assert_eq!(
                ix.search(&Query::new("fresh")).unwrap().hits[0].key,
                NoteKey { id: 5 }
            );
        });
    }
}

#[test]
fn an_index_in_memory_rebuilds_too() {
    let (store, clock, _dir) = crate::mem(crate::options(Durability::Immediate));
    let ob = outbox(&store, &clock, outbox_config());
    let mut ix = crate::indexer_in_memory(&ob, &clock);
    store
        .put(&NoteKey { id: 1 }, &note("direct", "x", "info", T0))
        .unwrap();
    assert_eq!(ix.verify().unwrap().missing.len(), 1);
    let (mut ix, report) = ix.rebuild().unwrap();
    assert_eq!((report.documents, ix.generation()), (1, None));
    assert!(ix.verify().unwrap().is_exact());
}

engine_tests! {
    fn an_unreadable_generation_pointer_is_reported_and_nothing_is_written() {
        on_every_engine!(Durability::Immediate, |store, clock, dir| {
            let ob = outbox(&store, &clock, outbox_config());
            let root = dir.0.join("index");
            // `CURRENT` cannot be read as a file: it is a directory.
            std::fs::create_dir_all(root.join("CURRENT")).unwrap();
            let Err(err) = Indexer::open(
                &ob,
                spec(),
                &Location::Dir(root.clone()),
                indexer_config(),
                clock.clone(),
            ) else {
                panic!("an index opened with an unreadable CURRENT");
            };
            assert!(matches!(err, SearchError::Io(_)), "{err:?}");
            let entries: Vec<_> = std::fs::read_dir(&root)
                .unwrap()
                .map(|e| e.unwrap().file_name())
                .collect();
            assert_eq!(entries, vec![std::ffi::OsString::from("CURRENT")]);
        });
    }
}

engine_tests! {
    /// An open refused because the outbox acknowledged more than the index
    /// holds (its directory lost, or pointed elsewhere) writes nothing: no
    /// directory, no commit, no catalog change.
    fn a_refused_open_writes_nothing() {
        on_every_engine!(Durability::Immediate, |store, clock, dir| {
            let ob = outbox(&store, &clock, outbox_config());
            let s = spec();
            store
                .transact(|tx| s.put(&ob, tx, &NoteKey { id: 1 }, &note("a", "b", "info", T0)))
                .unwrap();
            let root = dir.0.join("index");
            let mut ix = crate::indexer_at(&ob, &clock, &root);
            let at = ix.catch_up().unwrap();
            ix.close().unwrap();
            let catalog = store.catalog().unwrap();
            let version = store.engine().last_version();
            std::fs::remove_dir_all(&root).unwrap();
            for place in [root.clone(), dir.0.join("elsewhere")] {
                let err = Indexer::open(
                    &ob,
                    spec(),
                    &Location::Dir(place.clone()),
                    indexer_config(),
                    clock.clone(),
                )
                .unwrap_err();
                assert!(
                    matches!(err, SearchError::Behind { index, outbox } if index == Position::START && outbox == at),
                    "{err:?}"
                );
                assert!(!place.exists(), "{} created", place.display());
                assert_eq!(store.catalog().unwrap(), catalog);
                assert_eq!(store.engine().last_version(), version);
            }
        });
    }
}

/// The mapping of notes, naming the string field `source` for notes titled
/// "bad" (declared only when `declared`).
fn with_source(declared: bool) -> strata_search::IndexSpec<NoteKey> {
    let s = crate::spec_mapped(|_k: &NoteKey, n: &crate::Note| {
        let d = strata_search::Document::new()
            .text("title", &n.title)
            .text("body", &n.body)
            .string("level", &n.level)
            .time_ms(n.at_ms);
        if n.title == "bad" {
            d.string("source", "x")
        } else {
            d
        }
    });
    if declared {
        s.string("source").unwrap()
    } else {
        s
    }
}

engine_tests! {
    /// A put whose document names an undeclared field is refused with nothing
    /// written; a change that still cannot be indexed (the mapping changed
    /// since) is dead-lettered and the index goes on past it.
    fn a_document_that_cannot_be_indexed_is_refused_or_dead_lettered() {
        on_every_engine!(Durability::Immediate, |store, clock, _dir| {
            let ob = outbox(&store, &clock, outbox_config());
            let undeclared = with_source(false);
            let before = store.engine().last_version();
            let err = store
                .transact(|tx| {
                    undeclared.put(&ob, tx, &NoteKey { id: 1 }, &note("bad", "b", "info", T0))
                })
                .unwrap_err();
            assert!(
                matches!(&err, SearchError::Mapping(MappingError::UndeclaredField { field, .. }) if field == "source"),
                "{err:?}"
            );
            assert_eq!(store.engine().last_version(), before, "nothing written");
            assert_eq!(store.get(&NoteKey { id: 1 }).unwrap(), None);

            // Written under a mapping that declares the field, indexed under
            // one that does not.
            let writer = with_source(true);
            for (id, title) in [(1, "good"), (2, "bad"), (3, "fine")] {
                store
                    .transact(|tx| writer.put(&ob, tx, &NoteKey { id }, &note(title, "b", "info", T0)))
                    .unwrap();
            }
            let written = store.engine().last_version();
            let mut ix = Indexer::open(
                &ob,
                undeclared,
                &Location::Memory,
                indexer_config(),
                clock.clone(),
            )
            .unwrap();
            let at = ix.catch_up().unwrap();
            assert_eq!(at.version, written, "past the bad one");
            assert_eq!(ix.documents().unwrap(), 2);
            let dead = ob.dead_letters("search.notes", "notes").unwrap();
            assert_eq!(dead.len(), 1, "{dead:?}");
            assert!(
                dead[0].error.contains("undeclared string field"),
                "{}",
                dead[0].error
            );
            assert!(ix.search(&Query::new("fine")).unwrap().hits.len() == 1);
            // A rebuild leaves the row out as the feed did, and says so,
            // where it used to fail on it (the index could not be rebuilt
            // at all).
            let (mut ix, rebuilt) = ix.rebuild().unwrap();
            assert_eq!((rebuilt.documents, rebuilt.skipped), (2, 1));
            assert_eq!(ix.documents().unwrap(), 2);
            let v = ix.verify().unwrap();
            assert_eq!(v.missing.len(), 1, "{v:?}");
        });
    }
}

engine_tests! {
    /// A row whose value does not decode (a byte of its value flipped
    /// behind the store's back) is left out of a rebuild and counted as
    /// damaged, where it used to make the index impossible to rebuild: the
    /// index holds the other rows. `verify` names it as damaged and goes
    /// on comparing the rest (it used to fail whole on it): before the
    /// rebuild its document is neither compared nor extra, and a row
    /// written without its change shows as missing beside it.
    fn a_damaged_row_is_left_out_of_a_rebuild_and_counted() {
        on_every_engine!(Durability::Immediate, |store, clock, _dir| {
            use strata_engine::{Commit, Snapshot as _};
            use strata_keys::Key as _;
            let ob = outbox(&store, &clock, outbox_config());
            for (id, title) in [(1, "alpha"), (2, "bravo"), (3, "charlie")] {
                store
                    .transact(|tx| spec().put(&ob, tx, &NoteKey { id }, &note(title, "b", "info", T0)))
                    .unwrap();
            }
            let mut ix = Indexer::open(&ob, spec(), &Location::Memory, indexer_config(), clock.clone())
                .unwrap();
            ix.catch_up().unwrap();
            assert_eq!(ix.documents().unwrap(), 3);
            let engine = store.engine();
            let data = engine.keyspace("data").unwrap();
            let key = NoteKey { id: 2 }.pack().unwrap();
            let mut row = engine.snapshot().unwrap().get(data, &key).unwrap().unwrap();
            *row.last_mut().unwrap() ^= 0x20;
            engine
                .commit(Commit::new().put(data, key.clone(), row).durability(Durability::Immediate))
                .unwrap();
            // 4: a row the index never hears of (no outbox entry).
            store.put(&NoteKey { id: 4 }, &note("delta", "b", "info", T0)).unwrap();
            let v = ix.verify().unwrap();
            let four = NoteKey { id: 4 }.pack().unwrap();
            assert_eq!(
                (&v.damaged, &v.missing, &v.extra, &v.stale, v.documents, v.rows),
                (&vec![key.clone()], &vec![four.clone()], &vec![], &vec![], 3, 3),
                "{v:?}"
            );
            assert!(!v.is_exact());
            let (mut ix, rebuilt) = ix.rebuild().unwrap();
            assert_eq!(
                (rebuilt.documents, rebuilt.skipped, rebuilt.damaged),
                (3, 0, 1)
            );
            let found: Vec<u64> = ["alpha", "bravo", "charlie"]
                .iter()
                .flat_map(|t| ix.search(&Query::new(*t)).unwrap().hits)
                .map(|h| h.key.id)
                .collect();
            assert_eq!(found, [1, 3]);
            let v = ix.verify().unwrap();
            assert_eq!(
                (&v.damaged, &v.missing, &v.extra, v.documents, v.rows),
                (&vec![key], &vec![], &vec![], 3, 3),
                "{v:?}"
            );
            assert!(!v.is_exact(), "a damaged row is reported, never exact");
        });
    }
}

/// A string value longer than one term (65,530 bytes) could never be
/// matched: a put making one is refused with nothing written, a change
/// making one (the mapping changed since) is dead-lettered, and a rebuild
/// leaves the row out.
#[test]
fn a_string_value_too_long_for_one_term_is_refused_dead_lettered_or_left_out() {
    let mut opts = options(Durability::Immediate);
    opts.limits.max_value_bytes = 200_000;
    opts.limits.max_batch_bytes = 1 << 20;
    let clock = Arc::new(ManualClock::new(T0));
    let store = Store::open_with(
        MemEngine::open(opts.keyspace_specs()).unwrap(),
        opts,
        clock.clone(),
        Box::new(SeededRng::new(1)),
    )
    .unwrap();
    let ob = outbox(&store, &clock, outbox_config());
    let long = "L".repeat(70_000);
    let err = store
        .transact(|tx| spec().put(&ob, tx, &NoteKey { id: 1 }, &note("t", "b", &long, T0)))
        .unwrap_err();
    assert!(
        matches!(&err, SearchError::Mapping(MappingError::StringTooLong { field, bytes: 70_000, .. }) if field == "level"),
        "{err:?}"
    );
    assert_eq!(
        store.get(&NoteKey { id: 1 }).unwrap(),
        None,
        "nothing written"
    );
    // Written under a mapping that keeps the level out of the document.
    let levelless = crate::spec_mapped(|_k: &NoteKey, n: &Note| {
        Document::new()
            .text("title", &n.title)
            .text("body", &n.body)
            .time_ms(n.at_ms)
    });
    for (id, level) in [(1, long.as_str()), (2, "info")] {
        store
            .transact(|tx| levelless.put(&ob, tx, &NoteKey { id }, &note("t", "b", level, T0)))
            .unwrap();
    }
    let mut ix = Indexer::open(
        &ob,
        spec(),
        &Location::Memory,
        indexer_config(),
        clock.clone(),
    )
    .unwrap();
    ix.catch_up().unwrap();
    assert_eq!(ix.documents().unwrap(), 1);
    let dead = ob.dead_letters("search.notes", "notes").unwrap();
    assert_eq!(dead.len(), 1, "{dead:?}");
    assert!(
        dead[0].error.contains("past the 65,530 of one term"),
        "{}",
        dead[0].error
    );
    let (_, rebuilt) = ix.rebuild().unwrap();
    assert_eq!((rebuilt.documents, rebuilt.skipped), (1, 1));
}
