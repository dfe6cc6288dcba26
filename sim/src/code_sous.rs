//! The code-sous workload: publishes, alias moves (some to versions that do
//! not exist), drafts, activations started and ended (some twice), logs,
//! clock jumps of hours to days, sweeps, syncs and crashes, through
//! `strata_schemas::code_sous` on a faulty engine.
//!
//! Oracles, after every step and on every read:
//!
//! - each function's versions are gap-free and unique: every version from
//!   1 to its `version_seq` has its metadata, none beyond it (and the last
//!   has its bundle); the last three every step, all every fiftieth;
//! - every alias points at a version that exists;
//! - an activation reaches exactly one terminal status: once an ending is
//!   known (acknowledged), a second one is refused with that status, and
//!   reads show it; a durable ending survives crashes;
//! - an expired draft or activation is never returned (drafts by their
//!   recorded expiry, activations at the latest 7 days after the clock
//!   reading that followed their start).

use std::collections::BTreeMap;

use serde_json::json;
use strata_codec::Limits;
use strata_engine::{Clock, Durability, Engine, Rng, SeededRng};
use strata_schemas::code_sous::{
    ActivationRecord, ActivationStatus, Bundle, CodeSous, CodeSousConfig, CodeSousError,
    FunctionId, NewFunction, VersionRef,
};
use strata_store::{RetryPolicy, Store, StoreError, StoreOptions};

use crate::faults::FaultyEngine;
use crate::run::{
    Driven, Frame, RunOptions, SeedReport, Violation, drive, driven_on_store, fail, quiet_store,
};
use crate::store::{Applied, applied_despite};
use crate::targets::Target;

const DAY: u64 = 24 * 60 * 60 * 1000;
const ALIASES: [&str; 2] = ["prod", "canary"];
const TERMINAL: [ActivationStatus; 4] = [
    ActivationStatus::Success,
    ActivationStatus::Error,
    ActivationStatus::Timeout,
    ActivationStatus::Cancelled,
];

/// What is known of a write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Known {
    /// Acknowledged and durable.
    Certain,
    /// Acknowledged (or seen), not yet durable: a crash may lose it.
    Pending,
    /// Unknown outcome: there or not.
    Maybe,
}

/// An activation the workload started.
#[derive(Debug, Clone)]
struct Act {
    start: Known,
    /// Not expired before this clock reading (the reading before its start,
    /// plus the time to live).
    expires_from: u64,
    /// Expired by this clock reading at the latest (the reading after).
    expires_by: u64,
    /// Its ending, with what is known of it.
    end: Option<(ActivationStatus, Known)>,
    /// The record it was started with, resent now and then.
    record: ActivationRecord,
}

struct CsRun {
    /// The seed's draws, clock, trace and counts.
    frame: Frame,
    immediate: bool,
    functions: [FunctionId; 2],
    acts: BTreeMap<String, Act>,
    /// Drafts created: function index, id, recorded expiry.
    drafts: Vec<(usize, String, u64)>,
    next_act: u64,
    options: StoreOptions,
}

type Cs<E> = CodeSous<FaultyEngine<E>>;

fn store_options(rng: &mut SeededRng) -> StoreOptions {
    let mut o = StoreOptions::new(Limits::FOUNDATIONDB);
    if rng.chance(0.5) {
        o = o.durability(Durability::Buffered);
    }
    o.retry(RetryPolicy {
        max_attempts: 3,
        base_backoff_ms: 1,
        max_backoff_ms: 8,
    })
}

fn faulted(e: &CodeSousError) -> bool {
    matches!(e, CodeSousError::Store(s) if crate::store::faulted(s))
}

fn applied(e: &CodeSousError) -> Applied {
    match e {
        CodeSousError::Store(s) => applied_despite(s),
        _ => Applied::No,
    }
}

impl CsRun {
    fn open<E: Target>(&mut self, engine: FaultyEngine<E>) -> Cs<E> {
        let store = Store::open_with(
            engine,
            self.options.clone(),
            self.frame.clock.clone(),
            Box::new(SeededRng::new(self.frame.rng.next_u64())),
        )
        .unwrap_or_else(|e| unreachable!("the store's keyspaces are declared: {e}"));
        CodeSous::new(
            store,
            CodeSousConfig::default(),
            Box::new(SeededRng::new(self.frame.rng.next_u64())),
        )
    }

    fn known_after_ack(&self) -> Known {
        if self.immediate {
            Known::Certain
        } else {
            Known::Pending
        }
    }

    fn synced(&mut self) {
        for a in self.acts.values_mut() {
            if a.start == Known::Pending {
                a.start = Known::Certain;
            }
            if let Some((_, k @ Known::Pending)) = &mut a.end {
                *k = Known::Certain;
            }
        }
    }

    fn forget_pending(&mut self) {
        for a in self.acts.values_mut() {
            if a.start == Known::Pending {
                a.start = Known::Maybe;
            }
            if let Some((_, k @ Known::Pending)) = &mut a.end {
                *k = Known::Maybe;
            }
        }
    }

    fn one_step<E: Target>(&mut self, cs: &Cs<E>, step: usize) -> Result<(), Violation> {
        let fi = usize::try_from(self.frame.rng.below(2)).unwrap_or(0);
        match self.frame.rng.below(100) {
            0..=19 => self.publish(cs, step, fi),
            20..=31 => self.set_alias(cs, step, fi)?,
            32..=39 => self.create_draft(cs, step, fi),
            40..=47 => self.read_draft(cs, step)?,
            48..=55 => self.start(cs, step, fi)?,
            56..=59 => self.resend_start(cs, step)?,
            60..=77 => self.finish(cs, step)?,
            78..=83 => self.read_activation(cs, step)?,
            84..=88 => {
                let jump = self.frame.rng.below(2 * DAY);
                self.frame.clock.advance(jump);
                self.frame.trace.event(step, format!("clock +{jump} ms"));
            }
            89..=93 => match cs.sweep_expired() {
                Ok(r) => self
                    .frame
                    .trace
                    .event(step, format!("sweep removed {}", r.removed)),
                Err(e) => self.frame.trace.event(step, format!("sweep failed: {e}")),
            },
            _ => match cs.store().engine().sync() {
                Ok(v) => {
                    self.synced();
                    self.frame.trace.event(step, format!("sync: durable {v}"));
                }
                Err(e) => self.frame.trace.event(step, format!("sync failed: {e}")),
            },
        }
        self.check(cs, step)
    }

    fn publish<E: Target>(&mut self, cs: &Cs<E>, step: usize, fi: usize) {
        let f = &self.functions[fi];
        let n = self.frame.rng.next_u64();
        let bundle = Bundle::new(format!("export default () => {n};"), "{}");
        let alias = self
            .frame
            .rng
            .chance(0.3)
            .then(|| ALIASES[usize::try_from(self.frame.rng.below(2)).unwrap_or(0)]);
        match cs.publish(f, &bundle, &json!({"n": n}), alias) {
            Ok(p) => {
                self.frame.commits += 1;
                self.frame
                    .trace
                    .event(step, format!("publish {f}: v{} alias {alias:?}", p.version));
            }
            Err(e) => self
                .frame
                .trace
                .event(step, format!("publish {f} failed: {e}")),
        }
    }

    fn set_alias<E: Target>(
        &mut self,
        cs: &Cs<E>,
        step: usize,
        fi: usize,
    ) -> Result<(), Violation> {
        let f = self.functions[fi].clone();
        let Ok(last) = cs.last_version(&f) else {
            return Ok(());
        };
        // Up to two beyond the last: versions that do not exist.
        let version = 1 + self.frame.rng.below(last + 2);
        let alias = ALIASES[usize::try_from(self.frame.rng.below(2)).unwrap_or(0)];
        match cs.set_alias(&f, alias, version) {
            Ok(_) => {
                self.frame.commits += 1;
                self.frame
                    .trace
                    .event(step, format!("alias {f} {alias} -> v{version}"));
            }
            Err(CodeSousError::NoSuchVersion { .. }) => {
                self.frame
                    .trace
                    .event(step, format!("alias {f} {alias} -> v{version} refused"));
                self.frame.checks += 1;
                if let Ok(Some(_)) = cs.version(&f, version) {
                    return Err(fail(
                        step,
                        format!("an alias to {f} v{version} was refused, but the version exists"),
                    ));
                }
            }
            Err(e) if faulted(&e) => self.frame.trace.event(step, format!("alias failed: {e}")),
            Err(e) => return Err(fail(step, format!("alias {f} {alias} -> v{version}: {e}"))),
        }
        Ok(())
    }

    fn create_draft<E: Target>(&mut self, cs: &Cs<E>, step: usize, fi: usize) {
        let n = self.frame.rng.next_u64();
        match cs.create_draft(
            &self.functions[fi],
            &Bundle::new(format!("// draft {n}"), "{}"),
        ) {
            Ok(d) => {
                self.frame.commits += 1;
                self.frame.trace.event(
                    step,
                    format!("draft {} until {}", d.draft_id, d.expires_at_ms),
                );
                self.drafts.push((fi, d.draft_id, d.expires_at_ms));
            }
            Err(e) => self.frame.trace.event(step, format!("draft failed: {e}")),
        }
    }

    fn read_draft<E: Target>(&mut self, cs: &Cs<E>, step: usize) -> Result<(), Violation> {
        if self.drafts.is_empty() {
            return Ok(());
        }
        let i = usize::try_from(self.frame.rng.below(self.drafts.len() as u64)).unwrap_or(0);
        let (fi, id, expires) = self.drafts[i].clone();
        let now = self.frame.clock.now_ms();
        if let Ok(found) = cs.draft(&self.functions[fi], &id) {
            self.frame.checks += 1;
            self.frame
                .trace
                .event(step, format!("read draft {id}: {}", found.is_some()));
            if found.is_some() && now >= expires {
                return Err(fail(
                    step,
                    format!("draft {id} returned at {now}, it expired at {expires}"),
                ));
            }
        }
        Ok(())
    }

    fn start<E: Target>(&mut self, cs: &Cs<E>, step: usize, fi: usize) -> Result<(), Violation> {
        let id = format!("a{}", self.next_act);
        self.next_act += 1;
        let f = &self.functions[fi];
        let record = ActivationRecord {
            activation_id: id.clone(),
            tenant: f.tenant.clone(),
            namespace: f.namespace.clone(),
            function: f.name.clone(),
            target: VersionRef {
                alias: None,
                version: 1,
            },
            trigger: json!({"type": "http"}),
            status: ActivationStatus::Running,
            start_ms: self.frame.clock.now_ms(),
            end_ms: None,
            duration_ms: None,
            result_truncated: false,
            error: None,
        };
        let ttl = CodeSousConfig::default().activation_ttl_ms;
        let expires_from = self.frame.clock.now_ms() + ttl;
        let result = cs.start_activation(&record);
        let expires_by = self.frame.clock.now_ms() + ttl;
        let record_kept = record;
        let start = match &result {
            Ok(()) => {
                self.frame.commits += 1;
                self.known_after_ack()
            }
            Err(e) if faulted(e) => match applied(e) {
                Applied::No => return Ok(()),
                _ => Known::Maybe,
            },
            Err(e) => return Err(fail(step, format!("starting new activation {id}: {e}"))),
        };
        self.frame
            .trace
            .event(step, format!("start {id}: {start:?}"));
        self.acts.insert(
            id,
            Act {
                start,
                expires_from,
                expires_by,
                end: None,
                record: record_kept,
            },
        );
        Ok(())
    }

    /// A client resends the start of an activation it started before
    /// (its reply lost, or a queue delivering twice), perhaps days later:
    /// an activation that ran never starts again. The record is there
    /// (`ActivationExists`), or past its retention (`ActivationExpired`);
    /// a start that succeeds is a violation when the first start was
    /// durable or the activation durably ended.
    fn resend_start<E: Target>(&mut self, cs: &Cs<E>, step: usize) -> Result<(), Violation> {
        let Some(id) = self.pick_act() else {
            return Ok(());
        };
        let act = self.acts.get(&id).unwrap_or_else(|| unreachable!("picked"));
        let record = act.record.clone();
        let ttl = CodeSousConfig::default().activation_ttl_ms;
        let expires_from = self.frame.clock.now_ms() + ttl;
        let result = cs.start_activation(&record);
        let known_after = self.known_after_ack();
        let act = self
            .acts
            .get_mut(&id)
            .unwrap_or_else(|| unreachable!("picked"));
        self.frame.checks += 1;
        match result {
            Ok(()) => {
                self.frame
                    .trace
                    .event(step, format!("resent start {id}: started"));
                if act.start == Known::Certain
                    || matches!(act.end, Some((_, Known::Certain | Known::Pending)))
                {
                    return Err(fail(
                        step,
                        format!(
                            "activation {id} started again by a resent start (first start {:?}, ending {:?})",
                            act.start, act.end
                        ),
                    ));
                }
                // Its first start was lost: this one is the activation.
                self.frame.commits += 1;
                act.start = known_after;
                act.end = None;
                act.expires_from = expires_from;
                act.expires_by = self.frame.clock.now_ms() + ttl;
            }
            Err(
                e @ (CodeSousError::ActivationExists { .. }
                | CodeSousError::ActivationExpired { .. }),
            ) => {
                self.frame
                    .trace
                    .event(step, format!("resent start {id}: {e}"));
            }
            Err(e) if faulted(&e) => {
                self.frame
                    .trace
                    .event(step, format!("resent start {id} failed: {e}"));
                if applied(&e) != Applied::No && act.start != Known::Certain {
                    act.start = Known::Maybe;
                    // Had the first start been lost, this one wrote the
                    // record, whose time to live runs from this commit.
                    act.expires_by = act.expires_by.max(self.frame.clock.now_ms() + ttl);
                }
            }
            Err(e) => return Err(fail(step, format!("resent start {id}: {e}"))),
        }
        Ok(())
    }

    fn pick_act(&mut self) -> Option<String> {
        if self.acts.is_empty() {
            return None;
        }
        let i = usize::try_from(self.frame.rng.below(self.acts.len() as u64)).unwrap_or(0);
        self.acts.keys().nth(i).cloned()
    }

    fn finish<E: Target>(&mut self, cs: &Cs<E>, step: usize) -> Result<(), Violation> {
        let Some(id) = self.pick_act() else {
            return Ok(());
        };
        let status = TERMINAL[usize::try_from(self.frame.rng.below(4)).unwrap_or(0)];
        let tenant = self.functions[0].tenant.clone();
        let result =
            cs.finish_activation(&tenant, &id, status, self.frame.clock.now_ms(), None, false);
        let known_after = self.known_after_ack();
        let act = self
            .acts
            .get_mut(&id)
            .unwrap_or_else(|| unreachable!("picked"));
        self.frame.checks += 1;
        match result {
            Ok(_) => {
                self.frame.commits += 1;
                self.frame
                    .trace
                    .event(step, format!("finish {id} as {status:?}"));
                if let Some((first, Known::Certain | Known::Pending)) = act.end {
                    return Err(fail(
                        step,
                        format!(
                            "activation {id} ended as {first:?}, then again as {status:?}: a second terminal status was accepted"
                        ),
                    ));
                }
                act.end = Some((status, known_after));
            }
            Err(CodeSousError::AlreadyTerminal { status: found, .. }) => {
                self.frame
                    .trace
                    .event(step, format!("finish {id} refused: already {found:?}"));
                if let Some((first, Known::Certain | Known::Pending)) = act.end
                    && first != found
                {
                    return Err(fail(
                        step,
                        format!(
                            "activation {id} ended as {first:?}, a later ending found {found:?}"
                        ),
                    ));
                }
                if !matches!(act.end, Some((_, Known::Certain))) {
                    act.end = Some((found, Known::Pending));
                }
            }
            Err(CodeSousError::NoSuchActivation { .. }) => {
                self.frame
                    .trace
                    .event(step, format!("finish {id}: no such activation"));
                if act.start == Known::Certain && self.frame.clock.now_ms() < act.expires_from {
                    return Err(fail(
                        step,
                        format!("activation {id}, durably started and not expired, is gone"),
                    ));
                }
            }
            Err(e) if faulted(&e) => {
                self.frame
                    .trace
                    .event(step, format!("finish {id} failed: {e}"));
                if applied(&e) != Applied::No && act.end.is_none() {
                    act.end = Some((status, Known::Maybe));
                }
            }
            Err(e) => return Err(fail(step, format!("finish {id}: {e}"))),
        }
        Ok(())
    }

    fn read_activation<E: Target>(&mut self, cs: &Cs<E>, step: usize) -> Result<(), Violation> {
        let Some(id) = self.pick_act() else {
            return Ok(());
        };
        let tenant = self.functions[0].tenant.clone();
        let Ok(found) = cs.activation(&tenant, &id) else {
            return Ok(());
        };
        self.frame.checks += 1;
        let now = self.frame.clock.now_ms();
        let act = &self.acts[&id];
        self.frame.trace.event(
            step,
            format!("read {id}: {:?}", found.as_ref().map(|r| r.status)),
        );
        let Some(record) = found else {
            if act.start == Known::Certain && now < act.expires_from {
                return Err(fail(
                    step,
                    format!("activation {id}, durably started and not expired, is gone"),
                ));
            }
            return Ok(());
        };
        if now >= act.expires_by {
            return Err(fail(
                step,
                format!(
                    "activation {id} returned at {now}, expired by {}",
                    act.expires_by
                ),
            ));
        }
        if let Some((ended, Known::Certain)) = act.end
            && record.status != ended
        {
            return Err(fail(
                step,
                format!(
                    "activation {id} durably ended as {ended:?} reads as {:?}",
                    record.status
                ),
            ));
        }
        Ok(())
    }

    /// Versions gap-free, aliases on existing versions.
    fn check<E: Target>(&mut self, cs: &Cs<E>, step: usize) -> Result<(), Violation> {
        for f in self.functions.clone() {
            let Ok(last) = cs.last_version(&f) else {
                continue;
            };
            // Versions are never removed, and a crash takes the counter
            // back with them: every step checks the last ones and the one
            // after, every fiftieth step all of them.
            let from = if step.is_multiple_of(50) {
                1
            } else {
                last.saturating_sub(2).max(1)
            };
            for v in from..=last + 1 {
                let Ok(meta) = cs.version(&f, v) else {
                    continue;
                };
                self.frame.checks += 1;
                match meta {
                    Some(m) if v > last => {
                        return Err(fail(
                            step,
                            format!(
                                "{f} has version {} beyond its version_seq {last}",
                                m.version
                            ),
                        ));
                    }
                    None if v <= last => {
                        return Err(fail(
                            step,
                            format!("{f} has no version {v}, its version_seq is {last}: a gap"),
                        ));
                    }
                    Some(m) if m.version != v => {
                        return Err(fail(step, format!("{f} v{v} holds version {}", m.version)));
                    }
                    _ => {}
                }
            }
            if last > 0
                && let Ok(None) = cs.bundle(&f, last)
            {
                return Err(fail(step, format!("{f} v{last} has no bundle")));
            }
            for alias in ALIASES {
                let Ok(Some(a)) = cs.alias(&f, alias) else {
                    continue;
                };
                self.frame.checks += 1;
                if let Ok(None) = cs.version(&f, a.version) {
                    return Err(fail(
                        step,
                        format!(
                            "{f} alias {alias} points at v{}, which does not exist",
                            a.version
                        ),
                    ));
                }
            }
        }
        Ok(())
    }
}

impl<E: Target> Driven<E> for CsRun {
    driven_on_store!(Cs<E>);

    fn crashed(&mut self) {
        self.forget_pending();
    }

    fn step(&mut self, cs: &Cs<E>, step: usize) -> Result<(), Violation> {
        self.one_step(cs, step)
    }
}

/// Runs the code-sous workload of one seed on engine `E`.
pub fn run_code_sous_seed_on<E: Target>(options: &RunOptions) -> SeedReport {
    let mut frame = Frame::new(options, 0xC0DE_5005_0000_0000, 1_730_000_000_000);
    let config = frame.faults;
    let store_options = store_options(&mut frame.rng);
    let mut run = CsRun {
        immediate: store_options.durability == Durability::Immediate,
        functions: [
            FunctionId::new("t_abc123", "payments", "reconcile"),
            FunctionId::new("t_abc123", "payments", "refund"),
        ],
        acts: BTreeMap::new(),
        drafts: Vec::new(),
        next_act: 0,
        options: store_options.clone(),
        frame,
    };
    run.frame.trace.event(
        0,
        format!(
            "code-sous seed {} faults {config:?} durability {:?}",
            options.seed, store_options.durability
        ),
    );
    let engine = run.frame.engine::<E>(store_options.keyspace_specs());
    let mut violation = None;
    // The functions exist before the workload, made without faults.
    {
        let quiet = quiet_store(&engine, &store_options, run.frame.clock.clone());
        let quiet = CodeSous::new(
            quiet,
            CodeSousConfig::default(),
            Box::new(SeededRng::new(0)),
        );
        for f in &run.functions {
            let made = quiet.create_function(f, &NewFunction::js()).and_then(|_| {
                quiet
                    .store()
                    .engine()
                    .sync()
                    .map(|_| ())
                    .map_err(|e| CodeSousError::from(StoreError::Engine(e)))
            });
            if let Err(e) = made {
                violation = Some(fail(0, format!("creating {f} without faults failed: {e}")));
            }
        }
    }
    let cs = run.open(engine);
    let (cs, found) = if violation.is_some() {
        (Some(cs), None)
    } else {
        drive(&mut run, cs, options.ops)
    };
    violation = violation.or(found);
    let faults = cs
        .map(|c| c.store().engine().counters())
        .unwrap_or_default();
    run.frame
        .report("code-sous", options.seed, faults, violation)
}
