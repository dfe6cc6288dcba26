//! The simulation's seeded workload on RocksDB (what `cargo xtask sim
//! --engine rocks` runs): faults from the wrapper, crashes as process kills.

use strata_sim::{EngineKind, RunOptions, run_seed};

#[test]
fn simulation_seeds_pass_on_rocksdb() {
    for seed in 0..4 {
        let options = RunOptions {
            engine: EngineKind::Rocks,
            ..RunOptions::new(seed, 250)
        };
        let report = run_seed(&options);
        assert!(
            report.violation.is_none(),
            "seed {seed}: {:?}\n{}",
            report.violation,
            report.trace_tail.join("\n")
        );
        assert!(report.commits > 0);
    }
}
