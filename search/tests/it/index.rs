//! Indexing through the outbox, searching, and verifying against the store.

use std::collections::BTreeSet;

use strata_engine::{Durability, Engine};
use strata_outbox::Position;
use strata_search::{
    Document, Freshness, IndexSpec, Indexer, Location, Merging, Query, SearchError, Verified,
};
use strata_store::Store;

use crate::engine_tests;
use crate::{NoteKey, T0, indexer_config, note, on_every_engine, outbox, outbox_config, spec};

fn keys(hits: &strata_search::Results<NoteKey>) -> BTreeSet<u64> {
    hits.hits.iter().map(|h| h.key.id).collect()
}

/// Puts note `id` through the spec (its outbox entry in the same
/// commit); returns the commit's version.
pub(crate) fn put<E: Engine>(
    store: &Store<E>,
    ob: &strata_outbox::Outbox<'_, E>,
    id: u64,
    n: &crate::Note,
) -> u64 {
    let s = spec();
    store
        .transact_info(|tx| s.put(ob, tx, &NoteKey { id }, n))
        .unwrap()
        .1
        .unwrap()
        .version
}

fn packed(id: u64) -> Vec<u8> {
    strata_keys::tuple::pack(&("note", id))
}

engine_tests! {
    fn puts_updates_and_deletes_reach_the_index_in_commit_order() {
        on_every_engine!(Durability::Immediate, |store, clock, _dir| {
            let ob = outbox(&store, &clock, outbox_config());
            let mut ix = crate::indexer_in_memory(&ob, &clock);
            assert_eq!(ix.checkpoint(), Position::START);
            put(
                &store,
                &ob,
                1,
                &note("Rust ownership", "borrowing rules", "info", T0),
            );
            put(
                &store,
                &ob,
                2,
                &note("Tokio", "async runtime in rust", "debug", T0 + 10),
            );
            let v3 = put(
                &store,
                &ob,
                3,
                &note("Gardening", "tomatoes and basil", "info", T0 + 20),
            );
            // Nothing is searchable before the indexer runs.
            assert!(ix.search(&Query::new("rust")).unwrap().hits.is_empty());
            let at = ix.catch_up().unwrap();
            assert_eq!(at.version, v3, "the checkpoint is the last entry's commit");
            assert_eq!(ix.documents().unwrap(), 3);

            let r = ix.search(&Query::new("rust")).unwrap();
            assert_eq!(keys(&r), BTreeSet::from([1, 2]));
            assert_eq!(r.checkpoint, at);
            // The title is boosted: a title match ranks first.
            assert_eq!(r.hits[0].key.id, 1);
            assert!(r.hits[0].score > r.hits[1].score);
            assert!(r.hits.iter().all(|h| h.freshness == Freshness::Current));
            assert!(
                r.hits[0].snippet.to_lowercase().contains("rust"),
                "{:?}",
                r.hits[0].snippet
            );
            // Filters and time ranges.
            let info = ix
                .search(&Query::new("rust").filter("level", "info"))
                .unwrap();
            assert_eq!(keys(&info), BTreeSet::from([1]));
            let all_info = ix.search(&Query::new("").filter("level", "info")).unwrap();
            assert_eq!(keys(&all_info), BTreeSet::from([1, 3]));
            let late = ix.search(&Query::new("").time(T0 + 10..)).unwrap();
            assert_eq!(keys(&late), BTreeSet::from([2, 3]));
            let window = ix.search(&Query::new("").time(T0 + 5..T0 + 20)).unwrap();
            assert_eq!(keys(&window), BTreeSet::from([2]));
            assert_eq!(ix.search(&Query::new("").limit(2)).unwrap().hits.len(), 2);
            assert!(
                ix.search(&Query::new("rust").limit(0))
                    .unwrap()
                    .hits
                    .is_empty()
            );

            // An update replaces the document (no duplicate, the old words
            // gone); a delete removes it.
            let v4 = put(
                &store,
                &ob,
                1,
                &note("Python typing", "gradual types", "info", T0),
            );
            store
                .transact(|tx| spec().delete(&ob, tx, &NoteKey { id: 2 }))
                .unwrap();
            ix.catch_up().unwrap();
            assert_eq!(ix.documents().unwrap(), 2);
            assert!(ix.search(&Query::new("rust")).unwrap().hits.is_empty());
            let py = ix.search(&Query::new("python")).unwrap();
            assert_eq!(keys(&py), BTreeSet::from([1]));
            assert_eq!(
                py.hits[0].version, v4,
                "the document says which commit made it"
            );
            let report = ix.verify().unwrap();
            assert!(report.is_exact(), "{report:?}");
            assert_eq!((report.documents, report.rows), (2, 2));
        });
    }
}

engine_tests! {
    fn hits_say_when_the_row_changed_or_vanished_and_verify_lists_it() {
        on_every_engine!(Durability::Immediate, |store, clock, _dir| {
            let ob = outbox(&store, &clock, outbox_config());
            let mut ix = crate::indexer_in_memory(&ob, &clock);
            for id in 1..=3 {
                put(
                    &store,
                    &ob,
                    id,
                    &note("memory", &format!("note {id}"), "info", T0),
                );
            }
            ix.catch_up().unwrap();
            // Rows changed behind the index's back (without an entry).
            store
                .put(&NoteKey { id: 1 }, &note("memory", "rewritten", "info", T0))
                .unwrap();
            store.delete(&NoteKey { id: 2 }).unwrap();
            store
                .put(
                    &NoteKey { id: 4 },
                    &note("memory", "never indexed", "info", T0),
                )
                .unwrap();
            let r = ix.search(&Query::new("memory")).unwrap();
            let by_id: Vec<(u64, Freshness)> = {
                let mut v: Vec<_> = r.hits.iter().map(|h| (h.key.id, h.freshness)).collect();
                v.sort_by_key(|(id, _)| *id);
                v
            };
            assert_eq!(
                by_id,
                [
                    (1, Freshness::Changed),
                    (2, Freshness::Vanished),
                    (3, Freshness::Current)
                ]
            );
            let report = ix.verify().unwrap();
            assert_eq!(
                report,
                Verified {
                    store_version: report.store_version,
                    checkpoint: ix.checkpoint(),
                    documents: 3,
                    rows: 3,
                    missing: vec![packed(4)],
                    extra: vec![packed(2)],
                    stale: vec![packed(1)],
                    duplicates: Vec::new(),
                    damaged: Vec::new(),
                }
            );
            assert!(!report.is_exact());
        });
    }
}

engine_tests! {
    fn the_index_never_shows_a_commit_that_is_not_durable() {
        on_every_engine!(Durability::Buffered, |store, clock, _dir| {
            // The outbox syncs buffered commits at most once a minute here.
            let mut config = outbox_config();
            config.sync_interval_ms = 60_000;
            let ob = outbox(&store, &clock, config);
            let mut ix = crate::indexer_in_memory(&ob, &clock);
            // A first poll syncs (the interval has passed since 0) ...
            put(&store, &ob, 1, &note("first", "durable soon", "info", T0));
            ix.catch_up().unwrap();
            assert_eq!(ix.documents().unwrap(), 1);
            // ... the next, within the interval, does not: the buffered commit
            // stays out of the index.
            let v2 = put(
                &store,
                &ob,
                2,
                &note("second", "not durable yet", "info", T0),
            );
            assert!(store.engine().durable_version() < v2);
            ix.catch_up().unwrap();
            assert_eq!(ix.documents().unwrap(), 1);
            assert!(ix.checkpoint().version < v2);
            assert!(ix.search(&Query::new("second")).unwrap().hits.is_empty());
            store.engine().sync().unwrap();
            ix.catch_up().unwrap();
            assert_eq!(ix.checkpoint().version, v2);
            assert_eq!(
                keys(&ix.search(&Query::new("second")).unwrap()),
                BTreeSet::from([2])
            );
        });
    }
}

#[test]
fn the_commit_cadence_follows_counts_bytes_and_time() {
    let (store, clock, _dir) = crate::mem(crate::options(Durability::Immediate));
    let ob = outbox(&store, &clock, outbox_config());
    let mut config = indexer_config();
    config.batch = 1;
    config.commit_docs = 3;
    config.commit_bytes = usize::MAX;
    config.commit_interval_ms = 500;
    let mut ix = Indexer::open(&ob, spec(), &Location::Memory, config, clock.clone()).unwrap();
    for id in 1..=4 {
        put(&store, &ob, id, &note("t", "b", "info", T0));
    }
    let committed: Vec<bool> = (0..4).map(|_| ix.step().unwrap().committed).collect();
    assert_eq!(committed, [false, false, true, false], "every third change");
    assert_eq!(
        ix.documents().unwrap(),
        3,
        "searches see committed documents only"
    );
    clock.advance(499);
    assert!(!ix.step().unwrap().committed);
    clock.advance(1);
    let step = ix.step().unwrap();
    assert!(step.committed, "the fourth change is 500 ms old");
    assert_eq!(ix.documents().unwrap(), 4);
    assert!(format!("{ix:?}").starts_with("Indexer"));

    // By bytes: two values of 60-odd bytes pass 100 bytes; the minimum
    // memory budget applies whatever the configuration says.
    let (store, clock, _dir) = crate::mem(crate::options(Durability::Immediate));
    let ob = outbox(&store, &clock, outbox_config());
    let mut config = indexer_config();
    config.batch = 1;
    config.commit_docs = usize::MAX;
    config.commit_bytes = 100;
    config.commit_interval_ms = u64::MAX;
    config.memory_bytes = 1;
    let mut ix = Indexer::open(&ob, spec(), &Location::Memory, config, clock.clone()).unwrap();
    for id in 1..=2 {
        put(
            &store,
            &ob,
            id,
            &note(&"t".repeat(30), &"b".repeat(30), "info", T0),
        );
    }
    let committed: Vec<bool> = (0..2).map(|_| ix.step().unwrap().committed).collect();
    assert_eq!(committed, [false, true]);
}

#[test]
fn mappings_are_checked() {
    // A mapping kept apart from `IndexSpec::new` is a `fn`: a closure in a
    // variable would tie its documents to one borrow of the value.
    fn map<'a>(_: &NoteKey, _: &'a crate::Note) -> Document<'a> {
        Document::new()
    }
    assert!(matches!(
        IndexSpec::<NoteKey>::new("", map),
        Err(SearchError::BadName { .. })
    ));
    assert!(matches!(
        IndexSpec::<NoteKey>::new("a b", map),
        Err(SearchError::BadName { .. })
    ));
    let s = IndexSpec::<NoteKey>::new("ok", map).unwrap();
    assert!(matches!(
        s.clone().text("_key", 1.0),
        Err(SearchError::Mapping(_))
    ));
    assert!(matches!(
        s.clone().text("t", 1.0).unwrap().string("t"),
        Err(SearchError::Mapping(_))
    ));
    assert!(matches!(
        s.clone().text_with("t", "klingon", 1.0),
        Err(SearchError::Mapping(_))
    ));
    assert!(matches!(
        s.clone().text("t", 0.0),
        Err(SearchError::Mapping(_))
    ));
    assert!(matches!(
        s.clone().text("t", f32::NAN),
        Err(SearchError::Mapping(_))
    ));
    assert_eq!(s.topic().name(), "search.ok");

    // A document naming an undeclared field is refused by the spec's own
    // put, and dead-lettered by an indexer whose mapping names it.
    let (store, clock, _dir) = crate::mem(crate::options(Durability::Immediate));
    let ob = outbox(&store, &clock, outbox_config());
    let sloppy = IndexSpec::new("notes", |_: &NoteKey, n: &crate::Note| {
        Document::new()
            .text("title", n.title.clone())
            .string("nope", "x")
    })
    .unwrap()
    .text("title", 1.0)
    .unwrap();
    let mut ix = Indexer::open(
        &ob,
        sloppy.clone(),
        &Location::Memory,
        indexer_config(),
        clock.clone(),
    )
    .unwrap();
    assert!(matches!(
        store.transact(|tx| sloppy.put(&ob, tx, &NoteKey { id: 9 }, &note("t", "b", "info", T0))),
        Err(SearchError::Mapping(_))
    ));
    put(&store, &ob, 1, &note("t", "b", "info", T0));
    let at = ix.catch_up().unwrap();
    assert_ne!(at, Position::START);
    assert_eq!(ix.documents().unwrap(), 0);
    assert_eq!(ob.dead_letters("search.notes", "notes").unwrap().len(), 1);
    assert!(matches!(
        ix.search(&Query::new("").filter("level", "info")),
        Err(SearchError::Query(_))
    ));
    assert!(matches!(
        ix.search(&Query::new("").time(..5)),
        Err(SearchError::Query(_))
    ));
    assert!(matches!(
        ix.search(&Query::new("title:(unclosed")),
        Err(SearchError::Query(_))
    ));
}

/// A change the indexer cannot map is dead-lettered: the key's old document
/// goes (the row no longer holds it), the changes around it are indexed.
#[test]
fn a_change_that_cannot_be_mapped_is_dead_lettered_and_its_old_document_goes() {
    // The mapping fails for a note titled "bad".
    let picky = || {
        IndexSpec::new("notes", |_: &NoteKey, n: &crate::Note| {
            let doc = Document::new().text("title", &n.title);
            if n.title == "bad" {
                doc.string("nope", "x")
            } else {
                doc
            }
        })
        .unwrap()
        .text("title", 1.0)
        .unwrap()
    };
    let (store, clock, _dir) = crate::mem(crate::options(Durability::Immediate));
    let ob = outbox(&store, &clock, outbox_config());
    let mut ix = Indexer::open(
        &ob,
        picky(),
        &Location::Memory,
        indexer_config(),
        clock.clone(),
    )
    .unwrap();
    put(&store, &ob, 1, &note("one", "b", "info", T0));
    ix.catch_up().unwrap();
    // One poll: two good changes, then a put replacing note 1 that fails,
    // then a good one after it.
    put(&store, &ob, 2, &note("two", "b", "info", T0));
    put(&store, &ob, 3, &note("three", "b", "info", T0));
    put(&store, &ob, 1, &note("bad", "b", "info", T0));
    let fourth = put(&store, &ob, 4, &note("four", "b", "info", T0));
    let step = ix.step().unwrap();
    assert_eq!(step.received, 4);
    assert!(ix.commit().unwrap());
    assert_eq!(ix.checkpoint().version, fourth, "past the failed change");
    // Notes 2, 3 and 4; note 1's old document is gone with its row's value.
    assert_eq!(ix.documents().unwrap(), 3);
    assert!(keys(&ix.search(&Query::new("one")).unwrap()).is_empty());
    assert_eq!(
        keys(&ix.search(&Query::new("four")).unwrap()),
        BTreeSet::from([4])
    );
    let dead = ob.dead_letters("search.notes", "notes").unwrap();
    assert_eq!(dead.len(), 1);
    assert!(dead[0].error.contains("\"nope\""), "{}", dead[0].error);
}

engine_tests! {
    fn many_changes_in_one_commit_are_indexed_across_polls() {
        on_every_engine!(Durability::Buffered, |store, clock, _dir| {
            let ob = outbox(&store, &clock, outbox_config());
            let s = spec();
            // Thirty rows and thirty entries a commit (the test limits allow
            // 64 rows).
            for c in 0..10u64 {
                store
                    .transact(|tx| {
                        for i in 0..30 {
                            let n = note(&format!("bulk {c}"), &format!("item {i}"), "info", T0);
                            s.put(&ob, tx, &NoteKey { id: c * 100 + i }, &n)?;
                        }
                        Ok::<_, SearchError>(())
                    })
                    .unwrap();
            }
            store.engine().sync().unwrap();
            let mut config = indexer_config();
            config.batch = 64;
            let mut ix = Indexer::open(&ob, spec(), &Location::Memory, config, clock.clone()).unwrap();
            let mut received = 0;
            for _ in 0..10 {
                received += ix.step().unwrap().received;
            }
            assert_eq!(received, 300);
            ix.commit().unwrap();
            assert_eq!(ix.documents().unwrap(), 300);
            assert!(ix.verify().unwrap().is_exact());
        });
    }
}

engine_tests! {
    fn inserts_add_documents_once_and_mix_with_puts_and_deletes() {
        on_every_engine!(Durability::Immediate, |store, clock, _dir| {
            let ob = outbox(&store, &clock, outbox_config());
            let s = spec();
            let insert = |id: u64, title: &str| {
                store
                    .transact(|tx| s.insert(&ob, tx, &NoteKey { id }, &note(title, "x", "info", T0)))
                    .unwrap()
            };
            assert!(insert(1, "alpha"));
            assert!(insert(2, "alpha"));
            // The key holds a value: nothing written, nothing recorded.
            assert!(!insert(1, "beta"));
            assert_eq!(
                store.get(&NoteKey { id: 1 }).unwrap().unwrap().title,
                "alpha"
            );
            let mut ix = crate::indexer_in_memory(&ob, &clock);
            ix.catch_up().unwrap();
            assert_eq!(
                keys(&ix.search(&Query::new("alpha")).unwrap()),
                [1, 2].into()
            );
            assert!(ix.search(&Query::new("beta")).unwrap().hits.is_empty());
            // A put replaces an inserted row's document; a delete then an
            // insert leaves one document, the new one.
            put(&store, &ob, 1, &note("gamma", "x", "info", T0));
            store
                .transact(|tx| s.delete(&ob, tx, &NoteKey { id: 2 }))
                .unwrap();
            assert!(insert(2, "delta"));
            ix.catch_up().unwrap();
            assert_eq!(ix.documents().unwrap(), 2);
            assert!(ix.search(&Query::new("alpha")).unwrap().hits.is_empty());
            assert_eq!(keys(&ix.search(&Query::new("gamma")).unwrap()), [1].into());
            assert_eq!(keys(&ix.search(&Query::new("delta")).unwrap()), [2].into());
            assert!(ix.verify().unwrap().is_exact());
        });
    }
}

/// Commits `n` changes one at a time with `merging`, and returns the
/// indexer.
fn one_commit_each<'o, 's, E: Engine>(
    ob: &'o strata_outbox::Outbox<'s, E>,
    clock: &std::sync::Arc<strata_engine::ManualClock>,
    merging: Merging,
    n: u64,
) -> Indexer<'o, 's, E, NoteKey> {
    let mut config = indexer_config();
    config.commit_docs = 1;
    config.merging = merging;
    let mut ix = Indexer::open(ob, spec(), &Location::Memory, config, clock.clone()).unwrap();
    for id in 1..=n {
        put(ob.store(), ob, id, &note("merge", "x", "info", T0));
        assert!(ix.step().unwrap().committed);
    }
    ix
}

#[test]
fn segments_merge_only_when_the_config_lets_them() {
    // tantivy's log-merge policy merges once eight segments of a size
    // exist; twelve commits of one document make twelve.
    let (store, clock, _dir) = crate::mem(crate::options(Durability::Immediate));
    let ob = outbox(&store, &clock, outbox_config());
    let ix = one_commit_each(&ob, &clock, Merging::Never, 12);
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert_eq!(ix.segments().unwrap(), 12, "no merge without merging");
    assert_eq!(ix.documents().unwrap(), 12);

    let (store, clock, _dir) = crate::mem(crate::options(Durability::Immediate));
    let ob = outbox(&store, &clock, outbox_config());
    let ix = one_commit_each(&ob, &clock, Merging::Log, 12);
    // Merges run on tantivy's threads: wait for one, at most 20 seconds.
    let mut segments = ix.segments().unwrap();
    for _ in 0..200 {
        if segments < 12 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
        segments = ix.segments().unwrap();
    }
    assert!(
        segments < 12,
        "the log policy merged nothing: {segments} segments"
    );
    assert_eq!(ix.documents().unwrap(), 12, "merges keep every document");
}

engine_tests! {
    fn a_memory_budget_below_tantivys_floor_is_raised_for_every_thread() {
        on_every_engine!(Durability::Immediate, |store, clock, dir| {
            let ob = outbox(&store, &clock, outbox_config());
            put(&store, &ob, 1, &note("floor", "x", "info", T0));
            let mut config = indexer_config();
            config.threads = 2;
            config.memory_bytes = 1;
            // tantivy refuses less than 15 MB a thread; the indexer asks for
            // that much for each of the two threads, on open and on rebuild.
            let location = Location::Dir(dir.0.join("index"));
            let mut ix = Indexer::open(&ob, spec(), &location, config.clone(), clock.clone()).unwrap();
            ix.catch_up().unwrap();
            let (ix, report) = ix.rebuild().unwrap();
            assert_eq!(report.documents, 1);
            assert_eq!(ix.documents().unwrap(), 1);
        });
    }
}

engine_tests! {
    fn the_catalog_says_where_an_index_is_and_it_reads_without_its_mapping() {
        on_every_engine!(Durability::Buffered, |store, clock, dir| {
            let ob = outbox(&store, &clock, outbox_config());
            let root = dir.0.join("index");
            put(
                &store,
                &ob,
                1,
                &note("refresh tokens", "rotate them", "info", T0),
            );
            put(
                &store,
                &ob,
                2,
                &note("deploy", "migrations first", "warn", T0),
            );
            store.engine().sync().unwrap();
            let mut ix = crate::indexer_at(&ob, &clock, &root);
            ix.catch_up().unwrap();
            ix.close().unwrap();
            // Closed: another holder takes the index over at once (the clock
            // has not moved, so the lease would otherwise still run).
            let mut config = crate::indexer_config();
            config.holder = "another".into();
            let mut other = Indexer::open(
                &ob,
                spec(),
                &Location::Dir(root.clone()),
                config,
                clock.clone(),
            )
            .unwrap();
            put(&store, &ob, 3, &note("third", "more", "info", T0));
            store.engine().sync().unwrap();
            other.catch_up().unwrap();
            other.close().unwrap();
            put(&store, &ob, 3, &note("third", "gone", "info", T0));
            store
                .transact(|tx| spec().delete(&ob, tx, &NoteKey { id: 3 }))
                .unwrap();
            store.engine().sync().unwrap();
            let mut ix = crate::indexer_at(&ob, &clock, &root);
            let checkpoint = ix.catch_up().unwrap();
            ix.close().unwrap();

            let listed = strata_search::inspect::catalog_indexes(&store.catalog().unwrap());
            assert_eq!(listed.len(), 1, "{listed:?}");
            assert_eq!(listed[0].name, "notes");
            assert_eq!(listed[0].topic, "search.notes");
            assert_eq!(listed[0].consumer, "notes");
            assert_eq!(
                listed[0].dir.as_deref(),
                Some(std::fs::canonicalize(&root).unwrap().as_path())
            );
            // Opening again records nothing new.
            let before = store.engine().last_version();
            drop(crate::indexer_at(&ob, &clock, &root));
            assert_eq!(store.engine().last_version(), before);

            let files = strata_search::inspect::IndexFiles::open(&root).unwrap();
            assert_eq!(files.checkpoint(), checkpoint);
            assert_eq!(files.generation(), 1);
            assert_eq!(files.documents(), 2);
            let hits = files.query("tokens", 10).unwrap();
            assert_eq!(hits.len(), 1);
            assert_eq!(hits[0].key, packed(1));
            assert_eq!(hits[0].snippet, "refresh tokens");
            // Queries read the text fields only: a word of a string field
            // ("info" is a level) or of the built-in fields is not searched.
            assert!(files.query("info", 10).unwrap().is_empty());
            let shown = format!("{files:?}");
            assert!(
                shown.contains("generation: 1") && shown.contains(&format!("{checkpoint:?}")),
                "{shown}"
            );
            let view = store.read().unwrap();
            assert_eq!(hits[0].freshness(&view).unwrap(), Freshness::Current);
            let same = files.compare(&view, &spec()).unwrap();
            assert!(same.is_exact(), "{same:?}");
            assert_eq!((same.documents, same.rows), (2, 2));
            drop(view);
            // The row changes, then vanishes: the raw check sees both.
            put(
                &store,
                &ob,
                1,
                &note("refresh tokens", "changed", "info", T0),
            );
            assert_eq!(
                hits[0].freshness(&store.read().unwrap()).unwrap(),
                Freshness::Changed
            );
            let changed = files.compare(&store.read().unwrap(), &spec()).unwrap();
            assert_eq!(changed.stale, vec![packed(1)]);
            assert!(changed.missing.is_empty() && changed.extra.is_empty());
            store
                .transact(|tx| spec().delete(&ob, tx, &NoteKey { id: 1 }))
                .unwrap();
            assert_eq!(
                hits[0].freshness(&store.read().unwrap()).unwrap(),
                Freshness::Vanished
            );
            let gone = files.compare(&store.read().unwrap(), &spec()).unwrap();
            assert_eq!(gone.extra, vec![packed(1)]);
            assert_eq!((gone.documents, gone.rows), (2, 1));
            assert!(matches!(
                files.query("title:(", 10),
                Err(SearchError::Query(_))
            ));
            assert!(strata_search::inspect::IndexFiles::open(&dir.0.join("nothing")).is_err());
        });
    }
}

#[path = "../../../test-support/metrics.rs"]
mod metrics_capture;

#[test]
fn index_commits_changes_checkpoint_and_lag_are_recorded() {
    use metrics_capture::{capture, counter, gauge};
    use strata_search::metrics as m;
    let (store, clock, _dir) = crate::mem(crate::options(Durability::Buffered));
    let ob = outbox(&store, &clock, outbox_config());
    let ((checkpoint, last), rec) = capture(|| {
        for id in 1..=3 {
            put(&store, &ob, id, &note("t", "b", "info", T0));
        }
        store.engine().sync().unwrap();
        let mut ix = crate::indexer_in_memory(&ob, &clock);
        let at = ix.catch_up().unwrap();
        let last = store.engine().last_version();
        // Two more commits the index has not seen.
        put(&store, &ob, 4, &note("t", "b", "info", T0));
        put(&store, &ob, 5, &note("t", "b", "info", T0));
        store.engine().sync().unwrap();
        ix.close().unwrap();
        (at, last)
    });
    let labels = ["index=notes"];
    assert_eq!(counter(&rec, m::COMMITS, &labels), 1);
    assert_eq!(counter(&rec, m::CHANGES, &labels), 3);
    #[allow(clippy::cast_precision_loss)]
    let version = checkpoint.version as f64;
    assert_eq!(gauge(&rec, m::CHECKPOINT, &labels), Some(version));
    // The durable version when the index committed, minus its checkpoint:
    // the commits after the last entry (the indexer's registration and
    // catalog record) at most.
    let lag = gauge(&rec, m::LAG_VERSIONS, &labels).unwrap();
    #[allow(clippy::cast_precision_loss)]
    let most = (last - checkpoint.version) as f64;
    assert!((0.0..=most).contains(&lag), "{lag} of at most {most}");
}

engine_tests! {
    fn an_idle_step_writes_nothing_and_the_lease_is_renewed_a_second_before_it_expires() {
        on_every_engine!(Durability::Immediate, |store, clock, dir| {
            use strata_engine::Clock;
            let ob = outbox(&store, &clock, outbox_config());
            put(&store, &ob, 1, &note("kept", "x", "info", T0));
            let mut ix = crate::indexer_at(&ob, &clock, &dir.0.join("index"));
            let acquired = clock.now_ms();
            ix.catch_up().unwrap();
            assert_eq!(
                clock.now_ms(),
                acquired,
                "the test's clock moves only when told"
            );
            let idle = strata_search::Step::default();
            // Nothing to index, nothing to acknowledge, a lease that runs:
            // nothing is written.
            let before = store.engine().last_version();
            assert_eq!(ix.step().unwrap(), idle);
            assert_eq!(store.engine().last_version(), before, "an idle step wrote");
            // The lease (30 s) is renewed once it has a second or less to run.
            let expires = acquired + outbox_config().lease_ms;
            clock.advance(expires - 1_001 - acquired);
            assert_eq!(ix.step().unwrap(), idle);
            assert_eq!(store.engine().last_version(), before, "renewed too early");
            clock.advance(1);
            assert_eq!(ix.step().unwrap(), idle);
            assert_eq!(store.engine().last_version(), before + 1, "not renewed");
            // Past the old lease's expiry the indexer still works on the new one.
            clock.advance(5_000);
            put(&store, &ob, 2, &note("later", "y", "info", T0));
            assert_eq!(
                ix.catch_up().unwrap(),
                ob.checkpoint("search.notes", "notes").unwrap()
            );
            assert_eq!(ix.documents().unwrap(), 2);
        });
    }
}

engine_tests! {
    fn every_index_is_in_the_catalog_and_a_moved_one_is_updated() {
        on_every_engine!(Durability::Immediate, |store, clock, dir| {
            let ob = outbox(&store, &clock, outbox_config());
            assert_eq!(spec().name(), "notes");
            assert!(format!("{:?}", spec()).contains("\"notes\""));
            let other_spec = || {
                IndexSpec::new("titles", |_k: &NoteKey, n: &crate::Note| {
                    Document::new().text("title", &n.title)
                })
                .unwrap()
                .text("title", 1.0)
                .unwrap()
            };
            let (first, second, moved) = (
                dir.0.join("first"),
                dir.0.join("second"),
                dir.0.join("moved"),
            );
            drop(crate::indexer_at(&ob, &clock, &first));
            drop(
                Indexer::open(
                    &ob,
                    other_spec(),
                    &Location::Dir(second.clone()),
                    indexer_config(),
                    clock.clone(),
                )
                .unwrap(),
            );
            let dirs = |store: &Store<_>| {
                let mut v: Vec<(String, std::path::PathBuf)> =
                    strata_search::inspect::catalog_indexes(&store.catalog().unwrap())
                        .into_iter()
                        .map(|e| (e.name, e.dir.unwrap()))
                        .collect();
                v.sort();
                v
            };
            let canonical = |p: &std::path::Path| std::fs::canonicalize(p).unwrap();
            assert_eq!(
                dirs(&store),
                vec![
                    ("notes".to_owned(), canonical(&first)),
                    ("titles".to_owned(), canonical(&second)),
                ]
            );
            // The same index opened from another directory: its entry follows.
            let ix = crate::indexer_at(&ob, &clock, &moved);
            ix.close().unwrap();
            assert_eq!(
                dirs(&store),
                vec![
                    ("notes".to_owned(), canonical(&moved)),
                    ("titles".to_owned(), canonical(&second)),
                ]
            );
        });
    }
}

engine_tests! {
    fn a_dropped_indexer_gives_its_lease_back_unless_told_not_to() {
        on_every_engine!(Durability::Buffered, |store, clock, dir| {
            let ob = outbox(&store, &clock, outbox_config());
            let root = dir.0.join("index");
            let location = Location::Dir(root.clone());
            put(&store, &ob, 1, &note("first", "one", "info", T0));
            store.engine().sync().unwrap();
            // Who holds the index's lease, as the outbox reads it.
            let holder = || {
                ob.status("search.notes", "notes")
                    .unwrap()
                    .lease
                    .map(|l| l.holder)
            };
            let as_holder = |name: &str| {
                let mut config = indexer_config();
                config.holder = name.into();
                config
            };
            // Dropped without `close` (as on a `?`): given back, and the
            // next indexer takes the index over at once, the clock unmoved.
            let mut ix = Indexer::open(&ob, spec(), &location, as_holder("first"), clock.clone())
                .unwrap();
            ix.catch_up().unwrap();
            assert_eq!(holder().as_deref(), Some("first"));
            drop(ix);
            assert_eq!(holder(), None);
            let mut next =
                Indexer::open(&ob, spec(), &location, as_holder("second"), clock.clone()).unwrap();
            next.catch_up().unwrap();
            assert_eq!(holder().as_deref(), Some("second"));
            // A rebuilt indexer holds the lease it took over, and gives it
            // back dropped.
            let (rebuilt, _) = next.rebuild().unwrap();
            assert_eq!(holder().as_deref(), Some("second"));
            drop(rebuilt);
            assert_eq!(holder(), None);
            // Told not to, a dropped indexer keeps it until it expires, as
            // a crashed process does.
            let mut config = as_holder("crashed");
            config.release_on_drop = false;
            let mut crashed = Indexer::open(&ob, spec(), &location, config, clock.clone()).unwrap();
            put(&store, &ob, 2, &note("second", "two", "info", T0));
            store.engine().sync().unwrap();
            crashed.catch_up().unwrap();
            drop(crashed);
            assert_eq!(holder().as_deref(), Some("crashed"));
            let mut next =
                Indexer::open(&ob, spec(), &location, as_holder("third"), clock.clone()).unwrap();
            assert!(
                matches!(
                    next.catch_up(),
                    Err(SearchError::Outbox(strata_outbox::OutboxError::LeaseHeld { .. }))
                ),
                "the lease outlives the dropped indexer"
            );
            clock.advance(outbox_config().lease_ms + 1);
            next.catch_up().unwrap();
            assert_eq!(next.documents().unwrap(), 2);
            next.close().unwrap();
            assert_eq!(holder(), None);
        });
    }
}
