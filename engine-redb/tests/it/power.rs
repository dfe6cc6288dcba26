//! Power loss: random commits on a disk that keeps only what was synced
//! plus a random, possibly torn, subset of later writes; the reopened
//! database must be at some commit at or after the last durable one.

use std::collections::BTreeMap;

use strata_engine::{
    Commit, Durability, Engine, KeyspaceSpec, Profile, RangeSpec, Rng, SeededRng, Snapshot,
};
use strata_engine_redb::{PowerLossBackend, RedbEngine, RedbOptions};

type State = BTreeMap<Vec<u8>, Vec<u8>>;

fn state(e: &RedbEngine) -> State {
    let ks = e.keyspace("a").unwrap();
    e.snapshot()
        .unwrap()
        .range(ks, RangeSpec::all())
        .unwrap()
        .map(|r| r.unwrap())
        .collect()
}

/// Seeds of power-loss runs in the default suite; each cuts power several
/// times. More with `STRATA_POWER_SEEDS`.
const SEEDS: u64 = 60;

#[test]
fn power_loss_keeps_a_prefix_of_commits_including_every_durable_one() {
    let seeds = std::env::var("STRATA_POWER_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(SEEDS);
    let specs = vec![KeyspaceSpec::new("a", Profile::General)];
    let (mut cuts, mut lost) = (0, 0);
    for seed in 0..seeds {
        let mut rng = SeededRng::new(seed);
        let mut disk = PowerLossBackend::new();
        let mut e =
            RedbEngine::open_with_backend(disk.clone(), specs.clone(), RedbOptions::default())
                .unwrap();
        let mut history: Vec<(u64, State)> = vec![(0, State::new())];
        let mut durable = 0;
        for round in 0..(2 + rng.below(4)) {
            for i in 0..=rng.below(12) {
                let ks = e.keyspace("a").unwrap();
                let immediate = rng.chance(0.25);
                let mut c = Commit::new().durability(if immediate {
                    Durability::Immediate
                } else {
                    Durability::Buffered
                });
                for j in 0..=rng.below(3) {
                    let key = format!("k{}", rng.below(10)).into_bytes();
                    c = if rng.chance(0.2) {
                        c.delete(ks, key)
                    } else {
                        c.put(
                            ks,
                            key,
                            vec![
                                u8::try_from(j).unwrap();
                                usize::try_from(rng.below(3000)).unwrap()
                            ],
                        )
                    };
                }
                let info = e.commit(c).unwrap();
                if info.durable {
                    durable = info.version;
                }
                if rng.chance(0.1) {
                    durable = e.sync().unwrap();
                }
                history.push((info.version, state(&e)));
                let _ = (round, i);
            }
            // Cut power.
            let survivor = disk.power_loss(&mut rng);
            drop(e);
            disk = survivor;
            e = RedbEngine::open_with_backend(disk.clone(), specs.clone(), RedbOptions::default())
                .unwrap_or_else(|err| panic!("seed {seed}: reopen after power loss failed: {err}"));
            cuts += 1;
            let version = e.last_version();
            let got = state(&e);
            let matching = history.iter().find(|(v, s)| *v == version && *s == got);
            assert!(
                matching.is_some(),
                "seed {seed}: recovered state at version {version} is the state after no commit"
            );
            assert!(
                version >= durable,
                "seed {seed}: recovered version {version} lost durable commit {durable}"
            );
            lost += history.last().map_or(0, |(v, _)| v - version);
            history.retain(|(v, _)| *v <= version);
            durable = version;
        }
    }
    println!("{cuts} power cuts, {lost} buffered commits lost in total");
    assert!(cuts >= seeds * 2);
}

/// A group of durable commits costs the disk what one durable commit costs
/// (counted by the disk itself), and all of it survives a power cut.
#[test]
fn a_durable_group_costs_the_syncs_of_one_commit_and_survives_power_loss() {
    let specs = vec![KeyspaceSpec::new("a", Profile::General)];
    let disk = PowerLossBackend::new();
    let e =
        RedbEngine::open_with_backend(disk.clone(), specs.clone(), RedbOptions::default()).unwrap();
    let a = e.keyspace("a").unwrap();
    let before = disk.syncs();
    e.commit(Commit::new().put(a, b"one".to_vec(), b"1".to_vec()))
        .unwrap();
    let one = disk.syncs() - before;
    assert!(one >= 1, "a durable commit synced nothing");
    let group: Vec<Commit> = (0..8u8)
        .map(|i| Commit::new().put(a, vec![b'g', i], vec![i]))
        .collect();
    let before = disk.syncs();
    let results = e.commit_group(group);
    assert_eq!(
        disk.syncs() - before,
        one,
        "a group of eight synced more than one commit"
    );
    let versions: Vec<u64> = results.into_iter().map(|r| r.unwrap().version).collect();
    assert_eq!(versions, (2..=9).collect::<Vec<_>>());
    assert_eq!(e.group_stats().syncs, 2);
    let survivor = disk.power_loss(&mut SeededRng::new(7));
    drop(e);
    let e = RedbEngine::open_with_backend(survivor, specs, RedbOptions::default()).unwrap();
    let got = state(&e);
    let mut want: State = (0..8u8).map(|i| (vec![b'g', i], vec![i])).collect();
    want.insert(b"one".to_vec(), b"1".to_vec());
    assert_eq!(got, want, "a durable group lost to a power cut");
    assert_eq!(e.last_version(), 9);
}

/// A disk whose syncs fail while `failing` is set.
#[derive(Debug, Clone)]
struct FailingSyncs {
    disk: PowerLossBackend,
    failing: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl redb::StorageBackend for FailingSyncs {
    fn len(&self) -> Result<u64, std::io::Error> {
        self.disk.len()
    }
    fn read(&self, offset: u64, out: &mut [u8]) -> Result<(), std::io::Error> {
        self.disk.read(offset, out)
    }
    fn set_len(&self, len: u64) -> Result<(), std::io::Error> {
        self.disk.set_len(len)
    }
    fn sync_data(&self) -> Result<(), std::io::Error> {
        if self.failing.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(std::io::Error::other("injected sync failure"));
        }
        self.disk.sync_data()
    }
    fn write(&self, offset: u64, data: &[u8]) -> Result<(), std::io::Error> {
        self.disk.write(offset, data)
    }
}

/// A group whose durable write fails: every commit of it has an unknown
/// outcome, no version is published, and after a power cut the disk holds
/// the whole group or none of it.
#[test]
fn a_group_whose_sync_fails_is_unknown_and_all_or_nothing() {
    use strata_engine::CommitError;
    let specs = vec![KeyspaceSpec::new("a", Profile::General)];
    let disk = PowerLossBackend::new();
    let failing = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let backend = FailingSyncs {
        disk: disk.clone(),
        failing: failing.clone(),
    };
    let e = RedbEngine::open_with_backend(backend, specs.clone(), RedbOptions::default()).unwrap();
    let a = e.keyspace("a").unwrap();
    e.commit(Commit::new().put(a, b"base".to_vec(), b"0".to_vec()))
        .unwrap();
    failing.store(true, std::sync::atomic::Ordering::SeqCst);
    let results = e.commit_group(
        (0..3u8)
            .map(|i| Commit::new().put(a, vec![b'g', i], vec![i]))
            .collect(),
    );
    assert_eq!(results.len(), 3);
    for r in &results {
        assert!(
            matches!(r, Err(CommitError::OutcomeUnknown(_))),
            "a failed durable write leaves the outcome unknown: {r:?}"
        );
    }
    assert_eq!(
        (e.last_version(), e.durable_version()),
        (1, 1),
        "no version published"
    );
    let survivor = disk.power_loss(&mut SeededRng::new(3));
    drop(e);
    let e = RedbEngine::open_with_backend(survivor, specs, RedbOptions::default()).unwrap();
    let got = state(&e);
    let base: State = [(b"base".to_vec(), b"0".to_vec())].into_iter().collect();
    let mut all = base.clone();
    all.extend((0..3u8).map(|i| (vec![b'g', i], vec![i])));
    assert!(got == base || got == all, "half a group survived: {got:?}");
    assert_eq!(e.last_version(), if got == base { 1 } else { 4 });
}
