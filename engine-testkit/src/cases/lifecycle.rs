//! Cases across a reopen or a crash: durability, raised versions,
//! keyspaces, the crash contract.

#![allow(clippy::many_single_char_names, clippy::type_complexity)]

use super::{
    Commit, Durability, Engine, EngineError, Harness, KeyspaceSpec, Mutation, Profile, RangeSpec,
    Rng, SeededRng, StampAt, all, commit, get, ks, specs,
};

/// Immediate commits, and buffered ones followed by `sync`, survive a clean
/// reopen; versions keep increasing after it.
pub fn durability_across_reopen<H: Harness>(mut h: H) {
    let e = h.open(&specs());
    let a = ks(&e, "a");
    assert_eq!((e.last_version(), e.durable_version()), (0, 0));
    let v1 = commit(&e, Commit::new().put(a, b"i".to_vec(), b"1".to_vec()));
    assert!(e.durable_version() >= v1, "immediate is durable on return");
    let info = e
        .commit(
            Commit::new()
                .put(a, b"b".to_vec(), b"2".to_vec())
                .durability(Durability::Buffered),
        )
        .expect("commit");
    let synced = e.sync().expect("sync");
    assert!(synced >= info.version && e.durable_version() >= info.version);
    let e = h.reopen(e);
    let a = ks(&e, "a");
    assert_eq!(get(&e, a, b"i").as_deref(), Some(&b"1"[..]));
    assert_eq!(get(&e, a, b"b").as_deref(), Some(&b"2"[..]));
    assert!(
        e.last_version() >= info.version,
        "the version survives reopen"
    );
    let v3 = commit(&e, Commit::new().put(a, b"after".to_vec(), b"3".to_vec()));
    assert!(
        v3 > info.version,
        "versions strictly increase across reopen"
    );
    let e = h.reopen(e);
    assert_eq!(all(&e, ks(&e, "a")).len(), 3);
}

/// `raise_version` lifts the last version without touching data, durably:
/// the next commit (and its versionstamps) sorts above it, across reopen;
/// a lower target changes nothing.
pub fn raise_version<H: Harness>(mut h: H) {
    let e = h.open(&specs());
    let a = ks(&e, "a");
    let v1 = commit(&e, Commit::new().put(a, b"k".to_vec(), b"1".to_vec()));
    let raised = e.raise_version(v1 + 300).expect("raise");
    assert_eq!(raised, v1 + 300, "raised to exactly the target");
    assert_eq!(e.last_version(), v1 + 300);
    assert!(
        e.durable_version() >= v1 + 300,
        "a raised version is durable"
    );
    assert_eq!(
        e.raise_version(5).expect("lower target"),
        v1 + 300,
        "a lower target changes nothing"
    );
    assert_eq!(
        all(&e, a),
        vec![(b"k".to_vec(), b"1".to_vec())],
        "no data changed"
    );
    let e = h.reopen(e);
    let a = ks(&e, "a");
    assert_eq!(
        e.last_version(),
        v1 + 300,
        "the raised version survives reopen"
    );
    let next = e
        .commit(Commit::new().mutate(Mutation::PutVersionstamped {
            ks: a,
            key: b"s".to_vec(),
            value: vec![0; 10],
            at: StampAt::Value(0),
        }))
        .expect("commit")
        .version;
    assert_eq!(next, v1 + 301, "the next commit follows the raised version");
    let stamp = get(&e, a, b"s").expect("stamped");
    assert_eq!(stamp[..8], (v1 + 301).to_be_bytes(), "stamps follow it too");
}

/// Keyspaces added and dropped across a clean reopen: a kept keyspace keeps
/// its data under its name, whatever its new position; an added one starts
/// empty and takes commits; a dropped one is no longer named; versions
/// carry on.
pub fn keyspaces_across_reopen<H: Harness>(mut h: H) {
    let e = h.open(&specs());
    let (a, b) = (ks(&e, "a"), ks(&e, "b"));
    commit(&e, Commit::new().put(a, b"x".to_vec(), b"1".to_vec()));
    let v = commit(&e, Commit::new().put(b, b"y".to_vec(), b"2".to_vec()));
    let mut with_c = specs();
    with_c.push(KeyspaceSpec::new("c", Profile::Queue));
    let Some(e) = h.reopen_with(e, &with_c) else {
        println!(
            "keyspaces_across_reopen: skipped, this harness cannot reopen with other keyspaces"
        );
        return;
    };
    assert_eq!(e.keyspaces().len(), 3);
    let (a, b, c) = (ks(&e, "a"), ks(&e, "b"), ks(&e, "c"));
    assert_eq!(
        get(&e, a, b"x").as_deref(),
        Some(&b"1"[..]),
        "a kept its row"
    );
    assert_eq!(
        get(&e, b, b"y").as_deref(),
        Some(&b"2"[..]),
        "b kept its row"
    );
    assert!(all(&e, c).is_empty(), "an added keyspace starts empty");
    assert_eq!(
        e.last_version(),
        v,
        "the version survives a reopen with a keyspace added"
    );
    let w = commit(&e, Commit::new().put(c, b"z".to_vec(), b"3".to_vec()));
    assert!(w > v, "versions carry on in an added keyspace");
    // Drop b; c comes first now.
    let c_spec = with_c[2].clone();
    let a_spec = with_c[0].clone();
    let Some(e) = h.reopen_with(e, &[c_spec, a_spec]) else {
        println!("keyspaces_across_reopen: skipped the second reopen, the harness cannot");
        return;
    };
    assert_eq!(e.keyspaces().len(), 2);
    assert!(
        matches!(
            e.keyspace("b"),
            Err(EngineError::UnknownKeyspaceName { .. })
        ),
        "a dropped keyspace is no longer named"
    );
    let (a, c) = (ks(&e, "a"), ks(&e, "c"));
    assert_eq!(
        all(&e, a),
        vec![(b"x".to_vec(), b"1".to_vec())],
        "a by name, at a new position"
    );
    assert_eq!(
        all(&e, c),
        vec![(b"z".to_vec(), b"3".to_vec())],
        "c by name, at a new position"
    );
    assert_eq!(e.last_version(), w);
}

/// The crash contract, over many seeds: after a crash the state is the
/// state after some commit at or after the last one acknowledged durable.
/// Some commits go in groups ([`Engine::commit_group`]): a crash loses a
/// suffix of the commits, never a hole, group boundaries or not.
pub fn crash_contract<H: Harness>(mut h: H) {
    for seed in 0..40u64 {
        let mut rng = SeededRng::new(seed);
        let e = h.open(&specs());
        let a = ks(&e, "a");
        // States after each commit, by version, from the model.
        let mut model = crate::Model::new(2);
        let mut states: Vec<(u64, Vec<(Vec<u8>, Vec<u8>)>)> = vec![(0, Vec::new())];
        let mut last_durable = 0;
        let mut i = 0;
        while i < 5 + rng.below(20) {
            let group = if rng.chance(0.25) {
                2 + rng.below(3)
            } else {
                1
            };
            let mut commits = Vec::new();
            for _ in 0..group {
                let durability = if rng.chance(0.3) {
                    Durability::Immediate
                } else {
                    Durability::Buffered
                };
                let mut c = Commit::new().durability(durability);
                for j in 0..=rng.below(4) {
                    let key = format!("k{}", rng.below(8)).into_bytes();
                    c = if rng.chance(0.2) {
                        c.delete(a, key)
                    } else {
                        c.put(a, key, format!("{i}.{j}").into_bytes())
                    };
                }
                commits.push(c);
                i += 1;
            }
            let infos = if group == 1 {
                vec![e.commit(commits[0].clone()).expect("commit")]
            } else {
                e.commit_group(commits.clone())
                    .into_iter()
                    .map(|r| r.expect("group commit"))
                    .collect()
            };
            for (c, info) in commits.iter().zip(&infos) {
                let version = model.commit(c).expect("the model accepts");
                assert_eq!(info.version, version, "seed {seed}: versions by commit");
                if info.durable {
                    last_durable = info.version;
                }
                states.push((info.version, model.range(0, &RangeSpec::all())));
            }
            assert_eq!(
                all(&e, a),
                model.range(0, &RangeSpec::all()),
                "seed {seed}: the state after a commit"
            );
            if rng.chance(0.1) {
                last_durable = e.sync().expect("sync");
            }
        }
        let Some(e) = h.crash(e, &mut rng) else {
            eprintln!(
                "crash_contract: this harness cannot simulate a crash; the crash contract is NOT checked"
            );
            return;
        };
        let recovered = all(&e, ks(&e, "a"));
        let ok = states
            .iter()
            .any(|(v, s)| *v >= last_durable && *s == recovered);
        assert!(
            ok,
            "seed {seed}: recovered state is no state at or after durable version {last_durable}"
        );
        let v = e.last_version();
        assert!(
            v >= last_durable,
            "seed {seed}: version went back before the durable one"
        );
        let next = commit(
            &e,
            Commit::new().put(ks(&e, "a"), b"z".to_vec(), b"z".to_vec()),
        );
        assert!(next > v);
    }
}
