//! Restarts: the checkpoint committed inside the index, redelivered
//! entries after a lost acknowledgement, and an index that lost commits.

use strata_engine::Durability;
use strata_outbox::{Position, Start};
use strata_search::{Indexer, Location, Query, SearchError};

use crate::{NoteKey, T0, indexer_config, note, on_every_engine, outbox, outbox_config, spec};

#[test]
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
            let mut ix = Indexer::open(
                &ob,
                spec(),
                &Location::Dir(at.clone()),
                indexer_config(),
                clock.clone(),
            )
            .unwrap();
            ix.catch_up().unwrap()
        };
        assert_ne!(first, Position::START);
        assert_eq!(ob.checkpoint("search.notes", "notes").unwrap(), first);
        let mut ix = Indexer::open(
            &ob,
            spec(),
            &Location::Dir(at.clone()),
            indexer_config(),
            clock.clone(),
        )
        .unwrap();
        assert_eq!(ix.checkpoint(), first, "read back from the commit payload");
        assert_eq!(ix.documents(), 5);
        let step = ix.step().unwrap();
        assert_eq!((step.received, step.committed), (0, false));
        assert!(ix.verify().unwrap().is_exact());
    });
}

#[test]
fn a_lost_acknowledgement_is_made_good_without_applying_entries_twice() {
    on_every_engine!(Durability::Immediate, |store, clock, _dir| {
        let ob = outbox(&store, &clock, outbox_config());
        let mut ix = Indexer::open(
            &ob,
            spec(),
            &Location::Memory,
            indexer_config(),
            clock.clone(),
        )
        .unwrap();
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
        assert_eq!(ix.documents(), 4);
        assert_eq!(ix.search(&Query::new("again")).unwrap().hits.len(), 4);
        assert!(ix.verify().unwrap().is_exact());
    });
}

#[test]
fn an_index_that_lost_commits_the_outbox_acknowledged_refuses_to_open() {
    on_every_engine!(Durability::Immediate, |store, clock, _dir| {
        let ob = outbox(&store, &clock, outbox_config());
        let s = spec();
        store
            .transact(|tx| s.put(&ob, tx, &NoteKey { id: 1 }, &note("a", "b", "info", T0)))
            .unwrap();
        let at = {
            let mut ix = Indexer::open(
                &ob,
                spec(),
                &Location::Memory,
                indexer_config(),
                clock.clone(),
            )
            .unwrap();
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
    });
}
