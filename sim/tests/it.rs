//! Tests of the simulation itself: determinism, swarm faults, a clean
//! engine passes, and every planted bug is caught.

use strata_sim::{FaultClass, RunOptions, Workload, run_seed};

#[test]
fn a_seed_replays_the_same_trace() {
    let mut hashes = std::collections::BTreeSet::new();
    for seed in 0..20 {
        let options = RunOptions::new(seed, 300);
        let (a, b) = (run_seed(&options), run_seed(&options));
        assert_eq!(a.trace_hash, b.trace_hash, "seed {seed}");
        assert_eq!(a.trace_tail, b.trace_tail, "seed {seed}");
        assert_eq!((a.commits, a.checks), (b.commits, b.checks));
        hashes.insert(a.trace_hash);
    }
    assert_eq!(hashes.len(), 20, "different seeds, different runs");
}

#[test]
fn the_reference_engine_passes_every_seed() {
    // Every workload, 10 seeds of 400 steps (`a_seed_replays_the_same_trace`
    // runs seeds 0..20 of 300): `cargo xtask test`'s `sim` step runs 100
    // more, seeds 20..120.
    for seed in 0..10 {
        let report = run_seed(&RunOptions::new(seed, 400));
        assert!(
            report.violation.is_none(),
            "seed {seed}: {:?}\n{}",
            report.violation,
            report.trace_tail.join("\n")
        );
        assert!(report.checks > 0);
    }
}

#[test]
fn fault_rates_vary_by_seed() {
    // Each workload draws its own fault configuration from the seed: per
    // workload, some seeds never crash and some crash a lot; over the
    // engine, store, outbox and code-sous workloads, every fault class fires in some
    // seeds and not in others. The search workload, about a second a seed,
    // is checked on fewer seeds and for crashes only.
    let mut all = Vec::new();
    for (workload, seeds) in [
        (Workload::Engine, 30u64),
        (Workload::Store, 30),
        (Workload::Outbox, 30),
        (Workload::CodeSous, 30),
        (Workload::UniversalDb, 30),
        (Workload::ActorKv, 30),
        (Workload::Nokv, 30),
        (Workload::AgentMemory, 30),
        (Workload::Search, 16),
    ] {
        let reports: Vec<_> = (0..seeds)
            .map(|s| {
                run_seed(&RunOptions {
                    workload,
                    ..RunOptions::new(s, 400)
                })
            })
            .collect();
        let crashes: Vec<u64> = reports
            .iter()
            .map(|r| r.faults.get(FaultClass::Crash))
            .collect();
        assert!(
            crashes.contains(&0),
            "{workload:?}: some seeds never crash: {crashes:?}"
        );
        assert!(
            crashes.iter().any(|&c| c >= 5),
            "{workload:?}: some seeds crash a lot: {crashes:?}"
        );
        if workload != Workload::Search {
            all.extend(reports);
        }
    }
    for class in FaultClass::ALL {
        let fired = all.iter().filter(|r| r.faults.get(class) > 0).count();
        assert!(fired > 0, "{class:?} never fires");
        assert!(fired < all.len(), "{class:?} fires in every seed: no swarm");
    }
}

#[test]
fn no_faults_means_no_faults() {
    for seed in 0..10 {
        let options = RunOptions {
            faults: Vec::new(),
            ..RunOptions::new(seed, 300)
        };
        let report = run_seed(&options);
        assert!(report.violation.is_none());
        for class in FaultClass::ALL {
            assert_eq!(report.faults.get(class), 0, "seed {seed}: {class:?}");
        }
        assert!(report.commits > 50, "seed {seed}: a fault-free run commits");
    }
}

/// Every planted bug is caught at the seed recorded for it: a replay, cheap
/// enough for every test run (`cargo xtask sim --plant all` does the full
/// search and prints the table).
#[cfg(feature = "planted-bugs")]
#[test]
fn every_planted_bug_is_caught_at_its_recorded_seed() {
    for bug in strata_sim::planted::catalogue() {
        let options = RunOptions {
            plant: Some(bug.name.to_owned()),
            workload: bug.workload,
            engine: bug.engine,
            ..RunOptions::new(bug.seed, 400)
        };
        let report = run_seed(&options);
        assert!(
            report.violation.is_some(),
            "{} was not caught at its recorded seed {}",
            bug.name,
            bug.seed
        );
    }
}

#[test]
fn redb_under_power_loss_passes_and_replays() {
    use strata_sim::EngineKind;
    // `cargo xtask test`'s `sim redb` step runs seeds 10..34.
    for seed in 0..10 {
        let options = RunOptions {
            engine: EngineKind::Redb,
            ..RunOptions::new(seed, 300)
        };
        let report = run_seed(&options);
        assert!(
            report.violation.is_none(),
            "seed {seed}: {:?}\n{}",
            report.violation,
            report.trace_tail.join("\n")
        );
        if seed < 3 {
            assert_eq!(
                run_seed(&options).trace_hash,
                report.trace_hash,
                "seed {seed} replays"
            );
        }
    }
}

/// A fault-injecting wrapper is the same engine: handles obtained through
/// it work on the inner engine and the other way round; after a restart
/// the old handles are refused and new ones are obtained by name.
#[test]
fn the_fault_wrapper_shares_its_engines_handles() {
    use strata_engine::{
        Commit, Engine, KeyspaceSpec, MemEngine, Profile, ReadError, SeededRng, Snapshot,
    };
    use strata_sim::{FaultConfig, FaultyEngine};

    let specs = vec![KeyspaceSpec::new("a", Profile::General)];
    let e = FaultyEngine::new(MemEngine::open(specs).unwrap(), FaultConfig::NONE, 1);
    let outer = e.keyspace("a").unwrap();
    let inner = e.inner().keyspace("a").unwrap();
    assert_eq!(outer, inner);
    e.commit(Commit::new().put(outer, b"k".to_vec(), b"v".to_vec()))
        .unwrap();
    let seen = e.inner().snapshot().unwrap().get(inner, b"k").unwrap();
    assert_eq!(seen.as_deref(), Some(&b"v"[..]));
    let e = e.crash_restart(&mut SeededRng::new(3));
    assert!(matches!(
        e.snapshot().unwrap().get(outer, b"k"),
        Err(ReadError::UnknownKeyspace(_))
    ));
    let again = e.keyspace("a").unwrap();
    assert_eq!(
        e.snapshot().unwrap().get(again, b"k").unwrap().as_deref(),
        Some(&b"v"[..]),
        "the immediate commit survived the crash"
    );
}

/// The seeded workload on RocksDB (what `cargo xtask sim --engine rocks`
/// runs): faults from the wrapper, crashes as process kills. Built with the
/// `rocks` feature, which `cargo xtask test` turns on in its planted-bug
/// step (the RocksDB build there is the test build's).
#[cfg(feature = "rocks")]
#[test]
fn simulation_seeds_pass_on_rocksdb() {
    for seed in 0..4 {
        let options = strata_sim::RunOptions {
            engine: strata_sim::EngineKind::Rocks,
            ..strata_sim::RunOptions::new(seed, 250)
        };
        let report = strata_sim::run_seed(&options);
        assert!(
            report.violation.is_none(),
            "seed {seed}: {:?}\n{}",
            report.violation,
            report.trace_tail.join("\n")
        );
        assert!(report.commits > 0);
    }
}
