//! code-sous's versions, aliases and activations, interleaved: clients
//! publish versions of two functions, point an alias at versions that may
//! not exist yet, and start and end activations, several at once.
//!
//! The model, from code-sous's documentation: each publish takes the next
//! version of its function; an alias is set only to a version that exists;
//! an activation starts once, and ends once (a second ending is refused
//! with the status it reached).

use std::collections::BTreeMap;

use serde_json::json;
use strata_codec::Limits;
use strata_engine::{Clock, Engine, Rng, SeededRng};
use strata_schemas::code_sous::{
    ActivationRecord, ActivationStatus, Bundle, CodeSous, CodeSousConfig, CodeSousError,
    FunctionId, NewFunction, VersionRef,
};
use strata_store::StoreOptions;

use super::{Done, Layer, Stage, check, layer_options};
use crate::run::{RunOptions, Trace, Violation, fail};
use crate::targets::Target;

const FUNCTIONS: u64 = 2;
const ACTIVATIONS: u64 = 3;
const TENANT: &str = "t";
const ENDINGS: [ActivationStatus; 3] = [
    ActivationStatus::Success,
    ActivationStatus::Error,
    ActivationStatus::Cancelled,
];

fn function(f: u64) -> FunctionId {
    FunctionId::new(TENANT, "ns", &format!("f{f}"))
}

/// An operation of a client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    /// Publishes the next version of function `f`.
    Publish { f: u64 },
    /// Points function `f`'s alias `live` at `version`.
    Alias { f: u64, version: u64 },
    /// Starts activation `a` (once only).
    Start { a: u64 },
    /// Ends activation `a` with `status`.
    End { a: u64, status: ActivationStatus },
}

struct CodeSousLayer<'c, E: Engine> {
    cs: &'c CodeSous<E>,
    now: &'c (dyn Fn() -> u64 + Sync),
}

impl<E: Engine> Layer for CodeSousLayer<'_, E> {
    type Op = Op;
    type Client = ();

    fn draw(&self, _client: usize, (): &mut (), rng: &mut SeededRng) -> Op {
        let f = rng.below(FUNCTIONS);
        match rng.below(8) {
            0..=2 => Op::Publish { f },
            3 | 4 => Op::Alias {
                f,
                // Up to two past the last version seen now: by the time it
                // commits, it may exist.
                version: 1 + rng.below(self.cs.last_version(&function(f)).unwrap_or(0) + 2),
            },
            5 => Op::Start {
                a: rng.below(ACTIVATIONS),
            },
            _ => Op::End {
                a: rng.below(ACTIVATIONS),
                status: ENDINGS[usize::try_from(rng.below(3)).unwrap_or(0)],
            },
        }
    }

    fn run(&self, _client: usize, (): &mut (), op: &Op) -> String {
        let r = match op {
            Op::Publish { f } => self
                .cs
                .publish(
                    &function(*f),
                    &Bundle::new("export default () => 1;", "{}"),
                    &json!({}),
                    None,
                )
                .map(|p| format!("version {}", p.version)),
            Op::Alias { f, version } => self
                .cs
                .set_alias(&function(*f), "live", *version)
                .map(|a| format!("live at {}", a.version)),
            Op::Start { a } => self
                .cs
                .start_activation(&ActivationRecord {
                    activation_id: format!("a{a}"),
                    tenant: TENANT.to_owned(),
                    namespace: "ns".to_owned(),
                    function: "f0".to_owned(),
                    target: VersionRef {
                        alias: None,
                        version: 1,
                    },
                    trigger: json!({"type": "http"}),
                    status: ActivationStatus::Running,
                    start_ms: (self.now)(),
                    end_ms: None,
                    duration_ms: None,
                    result_truncated: false,
                    error: None,
                })
                .map(|()| "started".to_owned()),
            Op::End { a, status } => self
                .cs
                .finish_activation(TENANT, &format!("a{a}"), *status, (self.now)(), None, false)
                .map(|r| format!("ended {:?}", r.status)),
        };
        match r {
            Ok(answer) => answer,
            Err(CodeSousError::NoSuchVersion { .. }) => "no such version".to_owned(),
            Err(CodeSousError::ActivationExists { .. }) => "exists".to_owned(),
            Err(CodeSousError::NoSuchActivation { .. }) => "no such activation".to_owned(),
            Err(CodeSousError::AlreadyTerminal { status, .. }) => format!("already {status:?}"),
            Err(e) => format!("failed: {e}"),
        }
    }
}

#[derive(Debug, Default)]
struct Model {
    versions: BTreeMap<u64, u64>,
    alias: BTreeMap<u64, u64>,
    /// Activations started: `None` while running, then how they ended.
    activations: BTreeMap<u64, Option<ActivationStatus>>,
}

impl Model {
    fn apply(&mut self, d: &Done<Op>) -> String {
        match d.op {
            Op::Publish { f } => {
                let v = self.versions.entry(f).or_default();
                *v += 1;
                format!("version {v}")
            }
            Op::Alias { f, version } => {
                if (1..=self.versions.get(&f).copied().unwrap_or(0)).contains(&version) {
                    self.alias.insert(f, version);
                    format!("live at {version}")
                } else {
                    "no such version".to_owned()
                }
            }
            Op::Start { a } => {
                if self.activations.contains_key(&a) {
                    return "exists".to_owned();
                }
                self.activations.insert(a, None);
                "started".to_owned()
            }
            Op::End { a, status } => match self.activations.get_mut(&a) {
                None => "no such activation".to_owned(),
                Some(Some(ended)) => format!("already {ended:?}"),
                Some(ended @ None) => {
                    *ended = Some(status);
                    format!("ended {status:?}")
                }
            },
        }
    }

    /// The records, read back, against the model.
    fn matches<E: Engine>(&self, cs: &CodeSous<E>) -> Result<(), String> {
        for f in 0..FUNCTIONS {
            let id = function(f);
            let last = cs.last_version(&id).map_err(|e| e.to_string())?;
            let want = self.versions.get(&f).copied().unwrap_or(0);
            if last != want {
                return Err(format!("f{f} is at version {last}, the model at {want}"));
            }
            for v in 1..=want + 1 {
                let stored = cs.version(&id, v).map_err(|e| e.to_string())?.is_some();
                if stored != (v <= want) {
                    return Err(format!(
                        "f{f} version {v} stored: {stored}, the model has {want}"
                    ));
                }
            }
            let alias = cs
                .alias(&id, "live")
                .map_err(|e| e.to_string())?
                .map(|a| a.version);
            if alias != self.alias.get(&f).copied() {
                return Err(format!(
                    "f{f}'s alias is at {alias:?}, the model's at {:?}",
                    self.alias.get(&f)
                ));
            }
        }
        for a in 0..ACTIVATIONS {
            let got = cs
                .activation(TENANT, &format!("a{a}"))
                .map_err(|e| e.to_string())?
                .map(|r| r.status);
            let want = self
                .activations
                .get(&a)
                .map(|s| s.unwrap_or(ActivationStatus::Running));
            if got != want {
                return Err(format!("activation a{a} is {got:?}, the model's {want:?}"));
            }
        }
        Ok(())
    }
}

/// Runs code-sous's interleaved workload of one seed; returns its checks
/// and commits.
///
/// # Errors
/// The first violation.
pub(super) fn run<E: Target>(
    options: &RunOptions,
    trace: &mut Trace,
) -> Result<(u64, u64), Violation> {
    let mut rng = SeededRng::new(options.seed ^ 0x1A7E_0000_0000_0004);
    let store_options = layer_options(StoreOptions::new(Limits::FOUNDATIONDB));
    let stage = Stage::<E>::new(&store_options, &mut rng);
    let store = stage.store(store_options, &mut rng)?;
    let cs = CodeSous::new(
        store,
        CodeSousConfig::default(),
        Box::new(SeededRng::new(rng.next_u64())),
    );
    for f in 0..FUNCTIONS {
        cs.create_function(&function(f), &NewFunction::js())
            .map_err(|e| fail(0, format!("creating f{f}: {e}")))?;
    }
    let now = || stage.clock().now_ms();
    let layer = CodeSousLayer { cs: &cs, now: &now };
    let (history, commits) = stage.rounds("code-sous", &layer, (options, &mut rng, trace), |rng| {
        stage.clock().advance(rng.below(1_000));
    });
    let mut model = Model::default();
    let checks = check(history, trace, |d| model.apply(d))?;
    model
        .matches(&cs)
        .map_err(|m| fail(0, format!("after the replay in commit order: {m}")))?;
    Ok((checks + 1, commits))
}
