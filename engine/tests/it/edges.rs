//! Edges that mutation testing found untested: the generator's stream
//! against the published SplitMix64 vector, `strinc`, the umbrella error,
//! keyspace lookups, and the forwarding of `&E` to `E`.

use strata_engine::{
    Commit, CommitError, Compact, Durability, Engine, Error, KeyspaceSpec, Keyspaces, MemEngine,
    Profile, Rng, SeededRng, Statistics, strinc,
};

#[test]
fn the_seeded_generator_is_splitmix64() {
    // The first outputs of SplitMix64 from seed 0, as published with the
    // reference implementation.
    let mut r = SeededRng::new(0);
    assert_eq!(r.next_u64(), 0xE220_A839_7B1D_CDAF);
    assert_eq!(r.next_u64(), 0x6E78_9E6A_A1B9_65F4);
    assert_eq!(r.next_u64(), 0x06C4_5D18_8009_454F);
}

#[test]
fn strinc_is_foundationdbs() {
    assert_eq!(strinc(b"ab"), Some(b"ac".to_vec()));
    assert_eq!(strinc(&[0x01, 0xFF]), Some(vec![0x02]));
    assert_eq!(strinc(&[0x00, 0xFF, 0xFF]), Some(vec![0x01]));
    assert_eq!(strinc(&[0xFF, 0xFF]), None);
    assert_eq!(strinc(&[]), None);
}

#[test]
fn only_an_unknown_outcome_is_an_unknown_outcome() {
    let unknown = Error::Commit(CommitError::OutcomeUnknown("x".into()));
    let failed = Error::Commit(CommitError::Backend("x".into()));
    assert!(unknown.is_outcome_unknown());
    assert!(!failed.is_outcome_unknown());
}

#[test]
fn keyspace_lookups() {
    assert!(Keyspaces::new(Vec::new()).unwrap().is_empty());
    let ks = Keyspaces::new(vec![
        KeyspaceSpec::new("a", Profile::General),
        KeyspaceSpec::new("q", Profile::Queue),
    ])
    .unwrap();
    assert!(!ks.is_empty());
    let q = ks.get("q").unwrap();
    assert_eq!(
        ks.spec(q).map(|s| (s.name.as_str(), s.profile)),
        Some(("q", Profile::Queue))
    );
    assert_eq!(ks.index_of(q), Some(1));
    assert!(ks.at(2).is_none());
}

#[test]
fn a_reference_to_an_engine_is_the_engine() {
    let e = MemEngine::open(vec![KeyspaceSpec::new("a", Profile::General)]).unwrap();
    let a = e.keyspace("a").unwrap();
    let by_ref = &e;
    for i in 0..3u8 {
        by_ref
            .commit(
                Commit::new()
                    .put(a, vec![i], vec![i])
                    .durability(Durability::Buffered),
            )
            .unwrap();
    }
    assert_eq!((by_ref.last_version(), by_ref.durable_version()), (3, 0));
    assert_eq!(by_ref.sync().unwrap(), 3);
    assert_eq!((e.last_version(), e.durable_version()), (3, 3));
    assert_eq!(by_ref.stats().unwrap(), e.stats().unwrap());
    assert_eq!(by_ref.stats().unwrap()[0].entries, 3);
    // MemEngine has nothing to compact and says so; through a reference too.
    assert!(matches!(
        by_ref.compact(),
        Err(strata_engine::CapabilityError::Unsupported {
            engine: "MemEngine",
            ..
        })
    ));
}
