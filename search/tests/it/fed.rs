//! An index fed by a service's own topic: each entry names the rows it
//! changed, read from the store; no `search.NAME` entry is written.

use serde::{Deserialize, Serialize};
use strata_codec::value;
use strata_engine::{Durability, Engine};
use strata_outbox::Topic;
use strata_search::{Indexer, Location, MappingError, Query, SearchError};

use crate::engine_tests;
use crate::{NoteKey, T0, indexer_config, note, on_every_engine, outbox, outbox_config, spec};

/// What the service announces: notes it touched.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Touched {
    ids: Vec<u64>,
}
value!(Touched: postcard, version = 1);

fn touched() -> Topic<Touched> {
    Topic::new("notes-touched").unwrap()
}

engine_tests! {
    fn an_index_fed_by_a_service_topic_follows_the_rows_it_names() {
        on_every_engine!(Durability::Immediate, |store, clock, _dir| {
            let ob = outbox(&store, &clock, outbox_config());
            let fed = spec().fed_by(&touched(), |t: &Touched| {
                t.ids.iter().map(|&id| NoteKey { id }).collect()
            });
            assert_eq!(fed.source_topic(), "notes-touched");
            // The spec's own writes are refused: nobody reads search.notes.
            assert!(matches!(
                store.transact(|tx| fed.put(&ob, tx, &NoteKey { id: 9 }, &note("x", "y", "info", T0))),
                Err(SearchError::Mapping(MappingError::FedByTopic { topic, .. })) if topic == "notes-touched"
            ));
            let write = |ids: &[u64], title: &str| {
                store
                    .transact(|tx| {
                        for &id in ids {
                            tx.put(&NoteKey { id }, &note(title, "body", "info", T0))?;
                        }
                        ob.push(tx, &touched(), &Touched { ids: ids.to_vec() })
                    })
                    .unwrap();
            };
            write(&[1, 2, 3], "first");
            write(&[4], "second");
            let mut ix =
                Indexer::open(&ob, fed, &Location::Memory, indexer_config(), clock.clone()).unwrap();
            ix.catch_up().unwrap();
            assert_eq!(ix.documents().unwrap(), 4);
            assert_eq!(ix.search(&Query::new("first")).unwrap().hits.len(), 3);
            // A row changed, one deleted, an entry naming nothing, an entry
            // of another type on the same topic (dead-lettered).
            write(&[2], "changed");
            store
                .transact(|tx| {
                    tx.delete(&NoteKey { id: 3 })?;
                    ob.push(tx, &touched(), &Touched { ids: vec![3] })
                })
                .unwrap();
            write(&[], "none");
            let stray: Topic<String> = Topic::new("notes-touched").unwrap();
            store
                .transact(|tx| ob.push(tx, &stray, &"not a Touched".to_owned()))
                .unwrap();
            write(&[5], "last");
            let last = store.engine().last_version();
            let at = ix.catch_up().unwrap();
            assert_eq!(at.version, last, "past every entry");
            assert_eq!(ix.documents().unwrap(), 4, "1, 2, 4 and 5");
            assert_eq!(ix.search(&Query::new("first")).unwrap().hits.len(), 1);
            assert_eq!(ix.search(&Query::new("changed")).unwrap().hits.len(), 1);
            assert_eq!(ix.search(&Query::new("last")).unwrap().hits.len(), 1);
            let dead = ob.dead_letters("notes-touched", "notes").unwrap();
            assert_eq!(dead.len(), 1, "{dead:?}");
            assert!(
                dead[0].error.contains("does not decode"),
                "{}",
                dead[0].error
            );
            assert!(ix.verify().unwrap().is_exact());
            // No entry of the index's own topic was ever written.
            assert_eq!(
                ob.lag_after("search.notes", strata_outbox::Position::START)
                    .unwrap()
                    .entries,
                0
            );
        });
    }
}
