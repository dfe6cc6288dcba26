//! Several record families under one prefix (the code-sous layout, where
//! `…:ver:{v}:meta` and `…:ver:{v}:bundle` interleave): a scan of one
//! family fails on the other's rows from their keys, the same way in a
//! read view and in a transaction, or skips and counts them when asked.

use strata_codec::Limits;
use strata_keys::{text_key, text_prefix};
use strata_store::{Scan, StoreError, StoreOptions};

use crate::common::{self, Doc};
use crate::engine_tests;
use crate::on_every_engine;

/// `cs:fn:{function}:ver:{version:06}:meta`
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct VerMeta {
    pub function: String,
    pub version: u32,
}
/// `cs:fn:{function}:ver:{version:06}:bundle`
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct VerBundle {
    pub function: String,
    pub version: u32,
}
text_key! {
    VerMeta -> Doc = ("cs:fn:", {function}, ":ver:", {version:06}, ":meta");
    VerBundle -> Vec<u8> = ("cs:fn:", {function}, ":ver:", {version:06}, ":bundle");
}

/// Every version row of one function: `cs:fn:{function}:ver:`.
pub struct FnVersions {
    pub function: String,
}
text_prefix! {
    FnVersions of VerMeta = ("cs:fn:", {function}, ":ver:");
}

fn meta(v: u32) -> Doc {
    Doc {
        title: format!("v{v}"),
        body: vec![1; 8],
    }
}

fn options() -> StoreOptions {
    // Bundles are chunked: reading one by mistake would assemble it first.
    StoreOptions::new(Limits::FOUNDATIONDB)
        .chunked::<VerBundle>()
        .chunk_size(1_000)
}

fn versions(page: &strata_store::Page<VerMeta>) -> Vec<u32> {
    page.items.iter().map(|(k, _)| k.version).collect()
}

const VERSIONS: &str = "cs:fn:f:ver:";

/// Versions `1..=versions` of `function`: a meta row and a bundle of
/// `bundle` bytes each.
fn fill<E: strata_engine::Engine>(
    store: &strata_store::Store<E>,
    function: &str,
    versions: u32,
    bundle: usize,
) {
    for version in 1..=versions {
        let function = function.to_owned();
        store
            .put(
                &VerMeta {
                    function: function.clone(),
                    version,
                },
                &meta(version),
            )
            .unwrap();
        store
            .put(&VerBundle { function, version }, &vec![7; bundle])
            .unwrap();
    }
}

engine_tests! {
    fn a_foreign_row_is_a_key_error_in_views_and_transactions_alike() {
        on_every_engine!(options(), |store, _clock| {
            fill(&store, "f", 3, 4_000);
            let scan = Scan::prefix(VERSIONS.as_bytes());
            let in_store = store.scan::<VerMeta>(&scan).unwrap_err();
            let in_view = store
                .read()
                .unwrap()
                .scan::<VerMeta>(&scan)
                .unwrap()
                .find_map(Result::err)
                .unwrap();
            let in_tx = store.begin().scan::<VerMeta>(&scan).unwrap_err();
            for err in [&in_store, &in_view, &in_tx] {
                assert!(
                    matches!(
                        err,
                        StoreError::Key {
                            key_type: "VerMeta",
                            ..
                        }
                    ),
                    "{err:?}"
                );
            }
            assert_eq!(
                in_store.to_string(),
                in_tx.to_string(),
                "one behaviour, one error"
            );
        });
    }
}

engine_tests! {
    fn skipping_other_types_pages_through_one_family_and_counts_the_rest() {
        on_every_engine!(options(), |store, _clock| {
            fill(&store, "f", 5, 2_500);
            // Another function's rows lie outside the prefix and are not counted.
            store
                .put(
                    &VerMeta {
                        function: "g".into(),
                        version: 1,
                    },
                    &meta(1),
                )
                .unwrap();

            let scan = Scan::prefix(VERSIONS.as_bytes())
                .skip_other_types()
                .limit(2);
            let mut pages = Vec::new();
            let mut next = Some(scan.clone());
            while let Some(s) = next {
                let page = store.scan::<VerMeta>(&s).unwrap();
                next = page.next(&s);
                pages.push((versions(&page), page.skipped, page.more));
            }
            // Bundles sort before their meta (`b` < `m`); the last meta is
            // followed only by nothing, so the last page says no more.
            assert_eq!(
                pages,
                [
                    (vec![1, 2], 2, true),
                    (vec![3, 4], 2, true),
                    (vec![5], 1, false),
                ]
            );

            let reverse = store
                .scan::<VerMeta>(
                    &Scan::prefix(VERSIONS.as_bytes())
                        .skip_other_types()
                        .reverse()
                        .limit(2),
                )
                .unwrap();
            assert_eq!(
                (versions(&reverse), reverse.skipped, reverse.more),
                (vec![5, 4], 1, true)
            );

            let view = store.read().unwrap();
            let mut it = view
                .scan::<VerMeta>(&Scan::prefix(VERSIONS.as_bytes()).skip_other_types())
                .unwrap();
            let streamed: Vec<u32> = it.by_ref().map(|r| r.unwrap().0.version).collect();
            assert_eq!(
                (streamed, it.skipped(), it.more()),
                (vec![1, 2, 3, 4, 5], 5, false)
            );
        });
    }
}

engine_tests! {
    fn a_transaction_skips_its_own_foreign_writes_too() {
        on_every_engine!(options(), |store, _clock| {
            fill(&store, "f", 2, 100);
            let mut tx = store.begin();
            let function = "f".to_owned();
            tx.put(
                &VerMeta {
                    function: function.clone(),
                    version: 3,
                },
                &meta(3),
            )
            .unwrap();
            tx.put(
                &VerBundle {
                    function: function.clone(),
                    version: 3,
                },
                &vec![9; 100],
            )
            .unwrap();
            tx.delete(&VerMeta {
                function,
                version: 1,
            })
            .unwrap();
            let page = tx
                .scan::<VerMeta>(&Scan::prefix(VERSIONS.as_bytes()).skip_other_types())
                .unwrap();
            assert_eq!(
                (versions(&page), page.skipped, page.more),
                (vec![2, 3], 3, false)
            );
            tx.commit().unwrap();
            let after = store
                .scan::<VerMeta>(&Scan::prefix(VERSIONS.as_bytes()).skip_other_types())
                .unwrap();
            assert_eq!((versions(&after), after.skipped), (vec![2, 3], 3));
            common::assert_quota_exact(&store);
        });
    }
}

engine_tests! {
    fn a_text_prefix_lists_one_function_without_hand_written_bytes() {
        on_every_engine!(options(), |store, _clock| {
            for function in ["f", "fx", "g"] {
                fill(&store, function, 2, 10);
            }
            let range = FnVersions {
                function: "f".into(),
            }
            .range()
            .unwrap();
            let page = store
                .scan::<VerMeta>(&Scan::range_of(range).skip_other_types())
                .unwrap();
            // `fx` shares the bytes `cs:fn:f` but not `cs:fn:f:ver:`.
            assert_eq!((versions(&page), page.skipped), (vec![1, 2], 2));
            assert!(page.items.iter().all(|(k, _)| k.function == "f"));
            assert!(
                FnVersions {
                    function: "f:ver".into()
                }
                .range()
                .is_err(),
                "the key's delimiter rule"
            );
        });
    }
}
