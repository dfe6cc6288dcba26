//! NoKV's inodes and dentries, interleaved: clients create and unlink
//! names in one directory and change inodes' modes, each command planned in
//! one transaction and executed under its predicates in another.
//!
//! The model is the directory's names, the inodes alive with their
//! generation and mode, and the mount's next inode number, as NoKV's
//! documentation states them: a create takes the next number, an unlink
//! takes the inode with its last link, a setattr bumps the generation.

use std::collections::BTreeMap;
use std::sync::Arc;

use strata_codec::Limits;
use strata_engine::{Engine, Rng, SeededRng};
use strata_schemas::nokv::{Executed, MemBlobs, Nokv, NokvConfig, NokvError, ROOT};
use strata_store::StoreOptions;

use super::{Done, Layer, Stage, check, layer_options};
use crate::run::{RunOptions, Trace, Violation, fail};
use crate::targets::Target;

const M: u64 = 7;
const NAMES: [&str; 4] = ["a", "b", "c", "d"];

/// A command of a client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    /// Creates file `name` in the root.
    Create { name: &'static str },
    /// Unlinks `name` from the root.
    Unlink { name: &'static str },
    /// Sets inode `inode`'s mode.
    SetAttr { inode: u64, mode: u32 },
}

struct NokvLayer<'n, E: Engine> {
    fs: &'n Nokv<E>,
}

/// A client's request numbers.
#[derive(Default)]
pub struct Client {
    requests: u64,
    /// The last inode a command applied to.
    highest: u64,
}

impl<E: Engine> Layer for NokvLayer<'_, E> {
    type Op = Op;
    type Client = Client;

    fn draw(&self, _client: usize, state: &mut Client, rng: &mut SeededRng) -> Op {
        let name = NAMES[usize::try_from(rng.below(NAMES.len() as u64)).unwrap_or(0)];
        match rng.below(10) {
            0..=2 => Op::Create { name },
            3 | 4 => Op::Unlink { name },
            // The inode a name holds now (by the time it runs, maybe no
            // longer), or one that was just released.
            _ => Op::SetAttr {
                inode: match self.fs.lookup(M, ROOT, name) {
                    Ok(Some(d)) => d.child,
                    _ => state.highest,
                },
                mode: 0o600 + u32::try_from(rng.below(64)).unwrap_or(0),
            },
        }
    }

    fn run(&self, client: usize, state: &mut Client, op: &Op) -> String {
        state.requests += 1;
        let request = format!("client-{client}-{}", state.requests);
        let r = match op {
            Op::Create { name } => self.fs.create(M, &request, ROOT, name, 0o644),
            Op::Unlink { name } => self.fs.unlink(M, &request, ROOT, name),
            Op::SetAttr { inode, mode } => self.fs.setattr(M, &request, *inode, *mode),
        };
        match r {
            Ok(Executed::Applied(outcome, _)) => {
                let inode = outcome.inode.unwrap_or(0);
                state.highest = inode;
                format!("applied to inode {inode}")
            }
            Ok(Executed::Replayed(_)) => "replayed".to_owned(),
            Err(NokvError::Exists { .. }) => "exists".to_owned(),
            Err(NokvError::NotFound(_)) => "not found".to_owned(),
            Err(NokvError::PredicateFailed { .. }) => GAVE_UP.to_owned(),
            Err(e) => format!("failed: {e}"),
        }
    }
}

/// The answer of a command NoKV gave up re-planning.
const GAVE_UP: &str = "gave up: its plans went stale";

/// An inode alive in the model: its generation and mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Alive {
    generation: u64,
    mode: u32,
}

#[derive(Debug)]
struct Model {
    names: BTreeMap<&'static str, u64>,
    alive: BTreeMap<u64, Alive>,
    next: u64,
}

impl Model {
    fn apply(&mut self, d: &Done<Op>) -> String {
        // NoKV re-plans a command whose predicates failed a few times, then
        // gives up, documented to apply nothing (each failure needs another
        // client's commit in between, which the schedule can make four
        // times in a row). Such an answer is right for an operation that
        // committed nothing; the final state, compared with the model's,
        // shows any effect it had.
        if d.answer == GAVE_UP {
            return if d.commits.is_empty() {
                GAVE_UP.to_owned()
            } else {
                format!("nothing committed (it committed at {:?})", d.commits)
            };
        }
        match d.op {
            Op::Create { name } => {
                if self.names.contains_key(name) {
                    return "exists".to_owned();
                }
                let inode = self.next;
                self.next += 1;
                self.names.insert(name, inode);
                self.alive.insert(
                    inode,
                    Alive {
                        generation: 1,
                        mode: 0o644,
                    },
                );
                format!("applied to inode {inode}")
            }
            Op::Unlink { name } => match self.names.remove(name) {
                Some(inode) => {
                    self.alive.remove(&inode);
                    format!("applied to inode {inode}")
                }
                None => "not found".to_owned(),
            },
            Op::SetAttr { inode, mode } => match self.alive.get_mut(&inode) {
                Some(a) => {
                    a.generation += 1;
                    a.mode = mode;
                    format!("applied to inode {inode}")
                }
                None => "not found".to_owned(),
            },
        }
    }

    /// The directory and its inodes, read back, against the model.
    fn matches<E: Engine>(&self, fs: &Nokv<E>) -> Result<(), String> {
        let names: BTreeMap<String, u64> = fs
            .readdirplus(M, ROOT)
            .map_err(|e| e.to_string())?
            .into_iter()
            .map(|(name, d)| (name, d.child))
            .collect();
        let want: BTreeMap<String, u64> = self
            .names
            .iter()
            .map(|(n, i)| ((*n).to_owned(), *i))
            .collect();
        if names != want {
            return Err(format!("the root lists {names:?}, the model {want:?}"));
        }
        for inode in ROOT + 1..self.next + 2 {
            let got = fs
                .getattr(M, inode)
                .map_err(|e| e.to_string())?
                .map(|a| Alive {
                    generation: a.generation,
                    mode: a.mode,
                });
            let want = self.alive.get(&inode).copied();
            if got != want {
                return Err(format!("inode {inode} is {got:?}, the model's {want:?}"));
            }
        }
        Ok(())
    }
}

/// Runs NoKV's interleaved workload of one seed; returns its checks and
/// commits.
///
/// # Errors
/// The first violation.
pub(super) fn run<E: Target>(
    options: &RunOptions,
    trace: &mut Trace,
) -> Result<(u64, u64), Violation> {
    let mut rng = SeededRng::new(options.seed ^ 0x1A7E_0000_0000_0003);
    let store_options = layer_options(Nokv::<strata_engine::MemEngine>::declare(
        StoreOptions::new(Limits::FOUNDATIONDB),
    ));
    let stage = Stage::<E>::new(&store_options, &mut rng);
    let store = stage.store(store_options, &mut rng)?;
    let fs = Nokv::open(store, Arc::new(MemBlobs::default()), NokvConfig::default())
        .map_err(|e| fail(0, format!("opening NoKV: {e}")))?;
    fs.create_mount(M, "")
        .map_err(|e| fail(0, format!("creating the mount: {e}")))?;
    let layer = NokvLayer { fs: &fs };
    let (history, commits) = stage.rounds("nokv", &layer, (options, &mut rng, trace), |rng| {
        stage.clock().advance(rng.below(50));
    });
    let mut model = Model {
        names: BTreeMap::new(),
        alive: BTreeMap::new(),
        next: ROOT + 1,
    };
    let checks = check(history, trace, |d| model.apply(d))?;
    model
        .matches(&fs)
        .map_err(|m| fail(0, format!("after the replay in commit order: {m}")))?;
    Ok((checks + 1, commits))
}
