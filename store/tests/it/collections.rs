//! The set index, the sorted set and the chunked log.

use strata_codec::Limits;
use strata_keys::Subspace;
use strata_store::{ChunkedLog, SetIndex, SortedSet, StoreError};

use crate::common;
use crate::engine_tests;
use crate::on_every_engine;

engine_tests! {
    fn a_set_index_lists_its_members_in_pages() {
        on_every_engine!(common::options(Limits::FOUNDATIONDB), |store, _clock| {
            let set: SetIndex<String> = SetIndex::new(Subspace::new(&("workers", 1u64)));
            let other: SetIndex<String> = SetIndex::new(Subspace::new(&("workers", 2u64)));
            store
                .transact(|tx| {
                    for w in ["c", "a", "b", "d"] {
                        set.insert(tx, &w.to_owned())?;
                    }
                    other.insert(tx, &"z".to_owned())?;
                    set.remove(tx, &"d".to_owned())?;
                    Ok::<_, StoreError>(())
                })
                .unwrap();
            let (first, rest) = store
                .transact(|tx| {
                    let first = set.members(tx, 2, None)?;
                    let rest = set.members(tx, 2, first.cursor.clone())?;
                    assert!(set.contains(tx, &"a".to_owned())? && !set.contains(tx, &"d".to_owned())?);
                    Ok::<_, StoreError>((first, rest))
                })
                .unwrap();
            assert_eq!(
                (first.items, first.more),
                (vec!["a".to_owned(), "b".to_owned()], true)
            );
            assert_eq!((rest.items, rest.more), (vec!["c".to_owned()], false));
        });
    }
}

engine_tests! {
    fn a_sorted_set_keeps_one_score_per_member_and_lists_by_score() {
        on_every_engine!(common::options(Limits::FOUNDATIONDB), |store, _clock| {
            let z: SortedSet<String> = SortedSet::new(Subspace::new(&("z",)));
            store
                .transact(|tx| {
                    z.add(tx, &"a".to_owned(), 5)?;
                    z.add(tx, &"b".to_owned(), -3)?;
                    z.add(tx, &"c".to_owned(), 5)?;
                    z.add(tx, &"a".to_owned(), 100)?;
                    z.add(tx, &"min".to_owned(), i64::MIN)?;
                    z.add(tx, &"max".to_owned(), i64::MAX)?;
                    Ok::<_, StoreError>(())
                })
                .unwrap();
            let (all, mid, top, removed) = store
                .transact(|tx| {
                    let all = z.range_by_score(tx, .., 100)?;
                    let mid = z.range_by_score(tx, -3..=5, 100)?;
                    let top = z.range_by_score(tx, 6.., 1)?;
                    let removed = z.remove(tx, &"c".to_owned())?;
                    Ok::<_, StoreError>((all, mid, top, removed))
                })
                .unwrap();
            let names = |m: &[(String, i64)]| {
                m.iter()
                    .map(|(n, s)| format!("{n}={s}"))
                    .collect::<Vec<_>>()
            };
            assert_eq!(
                names(&all.items),
                [
                    format!("min={}", i64::MIN),
                    "b=-3".into(),
                    "c=5".into(),
                    "a=100".into(),
                    format!("max={}", i64::MAX)
                ]
            );
            assert_eq!(names(&mid.items), ["b=-3", "c=5"]);
            assert_eq!(
                (names(&top.items), top.more),
                (vec!["a=100".to_owned()], true)
            );
            assert!(removed);
            let after = store.transact(|tx| z.range_by_score(tx, .., 100)).unwrap();
            assert_eq!(after.items.len(), 4, "c and its score row are gone");
            assert_eq!(
                store.transact(|tx| z.score(tx, &"a".to_owned())).unwrap(),
                Some(100)
            );
        });
    }
}

engine_tests! {
    fn a_chunked_log_appends_across_chunks_in_commit_order() {
        on_every_engine!(common::options(Limits::FOUNDATIONDB), |store, _clock| {
            let log = ChunkedLog::new(Subspace::new(&("log", "act-1")), 10);
            let mut want = Vec::new();
            for piece in [
                &b"hello "[..],
                b"world",
                b"",
                b" and a longer line of output\n",
                b"x",
            ] {
                store.transact(|tx| log.append(tx, piece)).unwrap();
                want.extend_from_slice(piece);
            }
            let (all, len, chunks) = store
                .transact(|tx| {
                    let chunks = log.chunks(tx, 0, 100)?;
                    Ok::<_, StoreError>((log.read_all(tx)?, log.len(tx)?, chunks))
                })
                .unwrap();
            assert_eq!(all, want);
            assert_eq!(len, want.len() as u64);
            assert!(chunks.items.iter().all(|c| c.len() <= 10));
            assert!(
                chunks.items[..chunks.items.len() - 1]
                    .iter()
                    .all(|c| c.len() == 10),
                "only the last chunk is short"
            );
            // Two appenders: one conflicts on the head and is retried after the other.
            let mut a = store.begin();
            let mut b = store.begin();
            log.append(&mut a, b"A").unwrap();
            log.append(&mut b, b"B").unwrap();
            a.commit().unwrap();
            assert!(b.commit().unwrap_err().is_conflict());
            store.transact(|tx| log.append(tx, b"B")).unwrap();
            want.extend_from_slice(b"AB");
            assert_eq!(store.transact(|tx| log.read_all(tx)).unwrap(), want);
        });
    }
}
