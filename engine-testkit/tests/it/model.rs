//! The model against hand-computed expectations, and `remap`.

use strata_engine::{
    Commit, KeyspaceSpec, Keyspaces, Mutation, Predicate, PredicateError, Profile, RangeSpec,
    StampAt,
};
use strata_engine_testkit::{Model, ModelError, remap};

fn two() -> Keyspaces {
    Keyspaces::new(vec![
        KeyspaceSpec::new("a", Profile::General),
        KeyspaceSpec::new("b", Profile::Queue),
    ])
    .unwrap()
}

#[test]
fn counters_stamps_and_refusals() {
    let ks = two();
    let (a, b) = (ks.at(0).unwrap(), ks.at(1).unwrap());
    let mut m = Model::new(2);
    let c = Commit::new()
        .mutate(Mutation::Add {
            ks: a,
            key: b"n".to_vec(),
            delta: -2,
        })
        .mutate(Mutation::Add {
            ks: a,
            key: b"n".to_vec(),
            delta: 5,
        })
        .mutate(Mutation::PutVersionstamped {
            ks: b,
            key: vec![7; 12],
            value: b"v".to_vec(),
            at: StampAt::Key(1),
        });
    assert_eq!(m.commit(&c), Ok(1));
    assert_eq!(m.maps[0][&b"n".to_vec()], 3i64.to_le_bytes().to_vec());
    let stamped = [vec![7], 1u64.to_be_bytes().to_vec(), vec![0, 0, 7]].concat();
    assert_eq!(m.range(1, &RangeSpec::all()), [(stamped, b"v".to_vec())]);
    let backwards = RangeSpec::half_open(b"b".to_vec(), b"a".to_vec());
    let bad = Commit::new()
        .require(Predicate::Absent {
            ks: a,
            key: b"zz".to_vec(),
        })
        .require(Predicate::RangeEmpty {
            ks: a,
            range: backwards,
        });
    assert_eq!(
        m.commit(&bad),
        Err(ModelError::InvalidPredicate(
            1,
            PredicateError::InvalidRange
        ))
    );
    let taken = Commit::new().require(Predicate::Absent {
        ks: a,
        key: b"n".to_vec(),
    });
    assert_eq!(m.commit(&taken), Err(ModelError::Conflict(0)));
    assert_eq!(m.version, 1, "refused commits take no version");
}

#[test]
fn remap_moves_every_handle_and_keeps_the_rest() {
    let from = two();
    let to = two();
    let c = Commit::new()
        .require(Predicate::Exists {
            ks: from.at(1).unwrap(),
            key: b"p".to_vec(),
        })
        .put(from.at(0).unwrap(), b"k".to_vec(), b"v".to_vec())
        .delete(from.at(1).unwrap(), b"d".to_vec());
    let moved = remap(&c, &to);
    assert!(moved.keyspaces().all(|k| to.index_of(k).is_some()));
    assert!(moved.keyspaces().all(|k| from.index_of(k).is_none()));
    let positions: Vec<usize> = moved
        .keyspaces()
        .map(strata_engine::Keyspace::index)
        .collect();
    assert_eq!(positions, [1, 0, 1]);
    assert_eq!(moved.mutations.len(), 2);
    assert!(
        matches!(&moved.mutations[0], Mutation::Put { key, value, .. } if key == b"k" && value == b"v")
    );
}
