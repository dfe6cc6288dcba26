//! The engine workload: several clients committing random predicates and
//! mutations and reading, through crashes, restarts and syncs. Its oracle
//! is in [`crate::engine_oracle`].

use std::fmt::Write as _;
use std::ops::Bound;

use strata_engine::{
    Clock, Commit, CommitError, Durability, Engine, Keyspace, KeyspaceSpec, Mutation, Predicate,
    Profile, RangeSpec, ReadError, Rng, SeededRng, Snapshot, StampAt,
};
use strata_engine_testkit::{Model, ModelError};

use crate::faults::{FaultClass, FaultyEngine};
use crate::run::{Frame, RunOptions, SeedReport, Violation, fail};
use crate::targets::Target;

const KEYS: u64 = 12;

/// A client's reads, which its next commit turns into predicates.
#[derive(Default)]
pub(crate) struct Client {
    /// Values read, by keyspace position (handles change at a restart;
    /// a clean restart keeps these reads).
    pub(crate) reads: Vec<(usize, Vec<u8>, Option<Vec<u8>>)>,
}

pub(crate) struct Run {
    /// The seed's draws, clock, trace and counts.
    pub(crate) frame: Frame,
    pub(crate) ks: [Keyspace; 2],
    pub(crate) model: Model,
    /// Models after each commit since the last point known durable; a
    /// crash must recover one of these at or after `floor`.
    pub(crate) history: Vec<Model>,
    pub(crate) floor: u64,
    /// The highest version durable by what was asked and acknowledged
    /// (immediate commits, successful syncs), not by the engine's reports,
    /// which are checked against it.
    pub(crate) acked: u64,
    pub(crate) clients: Vec<Client>,
}

fn specs() -> Vec<KeyspaceSpec> {
    vec![
        KeyspaceSpec::new("data", Profile::General),
        KeyspaceSpec::new("queue", Profile::Queue),
    ]
}

/// The handles of [`specs`] on `e`: obtained again after every restart,
/// since a reopened engine issues new ones.
pub(crate) fn handles<E: Engine>(e: &E) -> [Keyspace; 2] {
    let at = |i| e.keyspaces().at(i).expect("the run declares two keyspaces");
    [at(0), at(1)]
}

fn key(rng: &mut SeededRng) -> Vec<u8> {
    let n = rng.below(KEYS);
    if rng.chance(0.1) {
        vec![0xFF, u8::try_from(n).unwrap_or(0)]
    } else {
        format!("k{n:02}").into_bytes()
    }
}

fn counter_key(rng: &mut SeededRng) -> Vec<u8> {
    format!("c{}", rng.below(3)).into_bytes()
}

pub(crate) fn show(bytes: &[u8]) -> String {
    bytes
        .iter()
        .map(|&b| {
            if b.is_ascii_graphic() {
                char::from(b).to_string()
            } else {
                format!("\\x{b:02x}")
            }
        })
        .collect()
}

impl Run {
    fn random_range(&mut self) -> RangeSpec {
        let a = key(&mut self.frame.rng);
        let b = key(&mut self.frame.rng);
        let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
        let bound = |rng: &mut SeededRng, k: Vec<u8>| match rng.below(3) {
            0 => Bound::Included(k),
            1 => Bound::Excluded(k),
            _ => Bound::Unbounded,
        };
        RangeSpec {
            start: bound(&mut self.frame.rng, lo),
            end: bound(&mut self.frame.rng, hi),
            reverse: self.frame.rng.chance(0.3),
            limit: self
                .frame
                .rng
                .chance(0.3)
                .then(|| usize::try_from(self.frame.rng.below(5)).unwrap_or(0)),
        }
    }

    fn random_commit(&mut self, client: usize) -> Commit {
        let [data, queue] = self.ks;
        let mut c = Commit::new().durability(if self.frame.rng.chance(0.3) {
            Durability::Immediate
        } else {
            Durability::Buffered
        });
        // Now and then an empty commit: it takes a version and changes
        // nothing (the client's reads stay for its next commit).
        if self.frame.rng.chance(0.02) {
            return c;
        }
        // The client's earlier reads become predicates: serialisable writes.
        for (at, k, v) in std::mem::take(&mut self.clients[client].reads) {
            c = c.require(Predicate::ValueEquals {
                ks: self.ks[at],
                key: k,
                value: v,
            });
        }
        if self.frame.rng.chance(0.15) {
            let k = key(&mut self.frame.rng);
            c = c.require(if self.frame.rng.chance(0.5) {
                Predicate::Absent { ks: data, key: k }
            } else {
                Predicate::Exists { ks: data, key: k }
            });
        }
        if self.frame.rng.chance(0.05) {
            let range = self.random_range();
            c = c.require(Predicate::RangeEmpty { ks: data, range });
        }
        let now = self.frame.clock.now_ms();
        for _ in 0..=self.frame.rng.below(3) {
            let m = match self.frame.rng.below(10) {
                0..=3 => Mutation::Put {
                    ks: data,
                    key: key(&mut self.frame.rng),
                    value: format!("{now}:{}", self.frame.rng.below(100)).into_bytes(),
                },
                4 => Mutation::Delete {
                    ks: data,
                    key: key(&mut self.frame.rng),
                },
                5 => Mutation::DeleteRange {
                    ks: data,
                    range: self.random_range(),
                },
                6 | 7 => {
                    // Now and then a counter op on a data key, to hit the
                    // wrong-length error path.
                    let k = if self.frame.rng.chance(0.05) {
                        key(&mut self.frame.rng)
                    } else {
                        counter_key(&mut self.frame.rng)
                    };
                    Mutation::Add {
                        ks: data,
                        key: k,
                        delta: i64::try_from(self.frame.rng.below(7)).unwrap_or(0) - 3,
                    }
                }
                _ => {
                    let mut k = b"q/".to_vec();
                    k.extend_from_slice(&[0xFF; 10]);
                    k.extend_from_slice(
                        &u16::try_from(self.frame.rng.below(4))
                            .unwrap_or(0)
                            .to_be_bytes(),
                    );
                    Mutation::PutVersionstamped {
                        ks: queue,
                        key: k,
                        value: now.to_be_bytes().to_vec(),
                        at: StampAt::Key(2),
                    }
                }
            };
            c = c.mutate(m);
        }
        c
    }

    pub(crate) fn commit<E: Target>(
        &mut self,
        e: &FaultyEngine<E>,
        step: usize,
        client: usize,
    ) -> Result<(), Violation> {
        let c = self.random_commit(client);
        let mut next = self.model.clone();
        let want = next.commit(&c);
        let got = e.commit(c.clone());
        self.frame.checks += 1;
        match (&want, got) {
            (Ok(v), Ok(info)) => {
                self.frame.trace.event(
                    step,
                    format!(
                        "client {client} commit v{} ({} preds, {} muts, {:?})",
                        info.version,
                        c.predicates.len(),
                        c.mutations.len(),
                        c.durability
                    ),
                );
                if info.version != *v {
                    return Err(fail(
                        step,
                        format!(
                            "commit acknowledged as version {}, the next version is {v}: versions must strictly increase by commit",
                            info.version
                        ),
                    ));
                }
                self.model = next;
                self.history.push(self.model.clone());
                self.frame.commits += 1;
                self.acknowledged(c.durability, info, step)?;
                self.check_state(e, step, "after commit")
            }
            (Err(w), Err(CommitError::Backend(src))) => {
                self.frame.trace.event(
                    step,
                    format!("client {client} commit failed: {src} (model: {w:?})"),
                );
                self.check_state(e, step, "after failed commit")
            }
            (Ok(_), Err(CommitError::Backend(src))) => {
                self.frame
                    .trace
                    .event(step, format!("client {client} commit failed: {src}"));
                self.check_state(e, step, "after failed commit")
            }
            (_, Err(CommitError::OutcomeUnknown(src))) => {
                // Resolve against what the engine holds: applied or not.
                let applied = e.last_version() == self.model.version + 1;
                self.frame.trace.event(
                    step,
                    format!(
                        "client {client} commit outcome unknown ({src}); resolved as {}",
                        if applied { "applied" } else { "not applied" }
                    ),
                );
                if applied {
                    if want.is_err() {
                        return Err(fail(
                            step,
                            format!("a commit the model refuses ({want:?}) was applied"),
                        ));
                    }
                    self.model = next;
                    self.history.push(self.model.clone());
                    self.frame.commits += 1;
                }
                self.check_state(e, step, "after unknown outcome")
            }
            (Err(w), Err(g)) => {
                self.frame
                    .trace
                    .event(step, format!("client {client} commit refused: {g}"));
                let g_model = ModelError::of(&g);
                if g_model.as_ref() != Some(w) {
                    return Err(fail(
                        step,
                        format!("engine refused the commit with {g}, the model with {w:?}"),
                    ));
                }
                self.check_state(e, step, "after refused commit")
            }
            (Err(w), Ok(info)) => Err(fail(
                step,
                format!(
                    "engine applied a commit as version {} that the model refuses: {w:?}",
                    info.version
                ),
            )),
            (Ok(_), Err(g)) => Err(fail(
                step,
                format!("engine refused a commit the model accepts: {g}"),
            )),
        }
    }

    /// Several clients' commits in one group ([`Engine::commit_group`]):
    /// each must fare exactly as if committed alone in order (versions,
    /// refusals, effects), a durable group is durable as a whole, and a
    /// group that fails fails as a whole: all of its accepted commits
    /// applied or none.
    pub(crate) fn group<E: Target>(
        &mut self,
        e: &FaultyEngine<E>,
        step: usize,
    ) -> Result<(), Violation> {
        let n = 2 + usize::try_from(self.frame.rng.below(4)).unwrap_or(0);
        let members: Vec<(usize, Commit)> = (0..n)
            .map(|_| {
                let client =
                    usize::try_from(self.frame.rng.below(self.clients.len() as u64)).unwrap_or(0);
                (client, self.random_commit(client))
            })
            .collect();
        let commits: Vec<Commit> = members.iter().map(|(_, c)| c.clone()).collect();
        // The model's verdict on each, in order, and its state after each.
        let mut next = self.model.clone();
        let wants: Vec<(Result<u64, ModelError>, Model)> = commits
            .iter()
            .map(|c| (next.commit(c), next.clone()))
            .collect();
        let got = e.commit_group(commits.clone());
        self.frame.checks += 1;
        if got.len() != n {
            return Err(fail(
                step,
                format!("a group of {n} commits returned {} results", got.len()),
            ));
        }
        let failed = got.iter().any(|r| {
            matches!(
                r,
                Err(CommitError::Backend(_) | CommitError::OutcomeUnknown(_))
            )
        });
        if failed {
            return self.group_failed(e, step, &got, &wants);
        }
        let mut line = format!("group of {n}:");
        for (((client, c), (want, after)), got) in members.iter().zip(&wants).zip(got) {
            match (want, got) {
                (Ok(v), Ok(info)) => {
                    let _ = write!(line, " c{client}=v{}", info.version);
                    if info.version != *v {
                        return Err(fail(
                            step,
                            format!(
                                "a group commit got version {}, the model's next is {v}: a group numbers its applied commits consecutively",
                                info.version
                            ),
                        ));
                    }
                    self.model = after.clone();
                    self.history.push(after.clone());
                    self.frame.commits += 1;
                    self.acknowledged(c.durability, info, step)?;
                }
                (Err(w), Err(g)) => {
                    let _ = write!(line, " c{client}=refused");
                    if ModelError::of(&g).as_ref() != Some(w) {
                        return Err(fail(
                            step,
                            format!("a group commit was refused with {g}, the model says {w:?}"),
                        ));
                    }
                }
                (Err(w), Ok(info)) => {
                    return Err(fail(
                        step,
                        format!(
                            "a group applied a commit as v{} that the model refuses: {w:?}",
                            info.version
                        ),
                    ));
                }
                (Ok(_), Err(g)) => {
                    return Err(fail(
                        step,
                        format!("a group refused a commit the model accepts: {g}"),
                    ));
                }
            }
        }
        self.frame.trace.event(step, line);
        self.check_state(e, step, "after group")
    }

    /// A group whose write failed: its refusals must be the model's, and
    /// of its accepted commits either all were applied or none.
    fn group_failed<E: Target>(
        &mut self,
        e: &FaultyEngine<E>,
        step: usize,
        got: &[Result<strata_engine::CommitInfo, CommitError>],
        wants: &[(Result<u64, ModelError>, Model)],
    ) -> Result<(), Violation> {
        for (g, (w, _)) in got.iter().zip(wants) {
            match g {
                Ok(info) => {
                    return Err(fail(
                        step,
                        format!("a failed group still acknowledged v{}", info.version),
                    ));
                }
                Err(CommitError::Backend(_) | CommitError::OutcomeUnknown(_)) => {}
                Err(g) => {
                    if ModelError::of(g).as_ref() != w.as_ref().err() {
                        return Err(fail(
                            step,
                            format!("a group commit was refused with {g}, the model says {w:?}"),
                        ));
                    }
                }
            }
        }
        let accepted: Vec<&Model> = wants
            .iter()
            .filter(|(w, _)| w.is_ok())
            .map(|(_, m)| m)
            .collect();
        let applied = e.last_version().saturating_sub(self.model.version);
        let all_unknown_or_refused = got
            .iter()
            .all(|g| !matches!(g, Err(CommitError::Backend(_))));
        self.frame.trace.event(
            step,
            format!(
                "group of {} failed; {applied} of its {} accepted commits applied",
                got.len(),
                accepted.len()
            ),
        );
        if applied == 0 {
            return self.check_state(e, step, "after failed group");
        }
        if applied != accepted.len() as u64 || !all_unknown_or_refused {
            return Err(fail(
                step,
                format!(
                    "a failed group applied {applied} of its {} accepted commits: all or none",
                    accepted.len()
                ),
            ));
        }
        for m in accepted {
            self.model = m.clone();
            self.history.push(m.clone());
            self.frame.commits += 1;
        }
        self.check_state(e, step, "after failed group")
    }

    fn read<E: Target>(
        &mut self,
        e: &FaultyEngine<E>,
        step: usize,
        client: usize,
    ) -> Result<(), Violation> {
        let [data, queue] = self.ks;
        let snap = match e.snapshot() {
            Ok(s) => s,
            Err(err) => {
                self.frame
                    .trace
                    .event(step, format!("client {client} snapshot failed: {err}"));
                return Ok(());
            }
        };
        if self.frame.rng.chance(0.6) {
            let k = if self.frame.rng.chance(0.2) {
                counter_key(&mut self.frame.rng)
            } else {
                key(&mut self.frame.rng)
            };
            match snap.get(data, &k) {
                Ok(v) => {
                    self.frame.checks += 1;
                    let want = self.model.maps[0].get(&k).cloned();
                    self.frame.trace.event(
                        step,
                        format!(
                            "client {client} get {} = {:?}",
                            show(&k),
                            v.as_deref().map(show)
                        ),
                    );
                    if v != want {
                        return Err(fail(
                            step,
                            format!(
                                "get {} returned {:?}, the model holds {:?}",
                                show(&k),
                                v.as_deref().map(show),
                                want.as_deref().map(show)
                            ),
                        ));
                    }
                    self.clients[client].reads.push((0, k, v));
                }
                Err(err) => self
                    .frame
                    .trace
                    .event(step, format!("client {client} get failed: {err}")),
            }
        } else {
            let (ks, idx) = if self.frame.rng.chance(0.3) {
                (queue, 1)
            } else {
                (data, 0)
            };
            let range = self.random_range();
            match snap.range(ks, range.clone()) {
                Ok(it) => {
                    self.frame.checks += 1;
                    let got: Result<Vec<_>, ReadError> = it.collect();
                    let want = self.model.range(idx, &range);
                    match got {
                        Ok(rows) if rows == want => self
                            .frame
                            .trace
                            .event(step, format!("client {client} range {} rows", rows.len())),
                        Ok(rows) => {
                            return Err(fail(
                                step,
                                format!(
                                    "range {} returned {} rows, the model {}; first difference: {}",
                                    crate::run::show_range(&range),
                                    rows.len(),
                                    want.len(),
                                    crate::run::first_difference(
                                        &vec![rows.clone()],
                                        &vec![want.clone()]
                                    )
                                    .unwrap_or_else(|| "none".to_owned())
                                ),
                            ));
                        }
                        Err(err) => self
                            .frame
                            .trace
                            .event(step, format!("client {client} range failed midway: {err}")),
                    }
                }
                Err(err) => self
                    .frame
                    .trace
                    .event(step, format!("client {client} range failed: {err}")),
            }
        }
        Ok(())
    }

    /// What an acknowledged commit promises: an immediate one is durable,
    /// whatever else the engine reports.
    fn acknowledged(
        &mut self,
        asked: Durability,
        info: strata_engine::CommitInfo,
        step: usize,
    ) -> Result<(), Violation> {
        if asked == Durability::Immediate {
            if !info.durable {
                return Err(fail(
                    step,
                    format!(
                        "an immediate commit (v{}) was acknowledged as not durable",
                        info.version
                    ),
                ));
            }
            self.acked = self.acked.max(info.version);
        }
        if info.durable {
            self.floor = self.floor.max(info.version);
        }
        Ok(())
    }

    /// A sync makes every commit so far durable: its answer must say so.
    fn sync<E: Target>(&mut self, e: &FaultyEngine<E>, step: usize) -> Result<(), Violation> {
        match e.sync() {
            Ok(v) => {
                self.frame.checks += 1;
                if v < self.model.version {
                    return Err(fail(
                        step,
                        format!(
                            "sync answered durable version {v}, but commits up to v{} were made before it",
                            self.model.version
                        ),
                    ));
                }
                self.floor = self.floor.max(v);
                self.acked = self.acked.max(self.model.version);
                self.frame.trace.event(step, format!("sync: durable {v}"));
                self.history.retain(|m| m.version >= v);
            }
            Err(err) => self.frame.trace.event(step, format!("sync failed: {err}")),
        }
        Ok(())
    }

    /// Takes the engine's new handles after a (re)start.
    pub(crate) fn reopened<E: Target>(&mut self, e: FaultyEngine<E>) -> FaultyEngine<E> {
        self.ks = handles(&e);
        e
    }
}

/// Runs the engine workload of one seed on engine `E`.
pub fn run_seed_on<E: Target>(options: &RunOptions) -> SeedReport {
    // The engine workload's draws are the seed's own (no salt).
    let mut frame = Frame::new(options, 0, 1_700_000_000_000);
    let config = frame.faults;
    let clients = (0..=frame.rng.below(3))
        .map(|_| Client::default())
        .collect();
    let engine = frame.engine::<E>(specs());
    let mut run = Run {
        ks: handles(&engine),
        model: Model::new(2),
        history: vec![Model::new(2)],
        floor: 0,
        acked: 0,
        clients,
        frame,
    };
    let mut e = run.reopened(engine);
    run.frame.trace.event(
        0,
        format!(
            "seed {} with {} clients, faults {config:?}",
            options.seed,
            run.clients.len()
        ),
    );
    let mut violation = None;
    for step in 1..=options.ops {
        let client = usize::try_from(run.frame.rng.below(run.clients.len() as u64)).unwrap_or(0);
        let roll = run.frame.rng.below(1000);
        let outcome = if run.frame.crash_due(e.is_stuck()) {
            let (next, outcome) = run.crash(e, step);
            e = next;
            outcome
        } else if config.p(FaultClass::Clock) > 0.0
            && run.frame.rng.chance(config.p(FaultClass::Clock))
        {
            let jump = run.frame.rng.below(7_200_000);
            let now = run.frame.clock.now_ms();
            let back = run.frame.rng.chance(0.3);
            run.frame.clock.set(if back {
                now.saturating_sub(jump)
            } else {
                now + jump
            });
            e.record(FaultClass::Clock);
            run.frame.trace.event(
                step,
                format!("clock jumps {}{jump} ms", if back { "-" } else { "+" }),
            );
            Ok(())
        } else {
            run.frame.clock.advance(run.frame.rng.below(50));
            match roll {
                0..=439 => run.commit(&e, step, client),
                440..=499 => run.group(&e, step),
                500..=849 => run.read(&e, step, client),
                850..=899 => run.isolation(&e, step),
                900..=969 => run.sync(&e, step),
                970..=979 => {
                    let (next, outcome) = run.clean_restart(e, step);
                    e = next;
                    outcome
                }
                _ => run.durable_check(&e, step),
            }
        };
        if let Err(v) = outcome {
            violation = Some(v);
            break;
        }
    }
    let faults = e.counters();
    run.frame.report("engine", options.seed, faults, violation)
}
