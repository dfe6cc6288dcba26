//! Agent memory's TOC nodes, interleaved: clients write new versions of
//! three nodes at once.
//!
//! The model, from the documentation of `AgentMemory::put_toc_node`:
//! concurrent writers of one node get distinct, consecutive versions, and
//! the latest pointer names the last one written.

use std::collections::BTreeMap;
use std::sync::Arc;

use strata_codec::Limits;
use strata_engine::{Engine, Rng, SeededRng};
use strata_outbox::Outbox;
use strata_schemas::agent_memory::{AgentMemory, Level, TocBullet, TocNode, outbox_config};
use strata_store::StoreOptions;

use super::{Done, Layer, Stage, check, layer_options};
use crate::run::{RunOptions, Trace, Violation, fail};
use crate::targets::Target;

const NODES: u64 = 3;

fn node_id(n: u64) -> String {
    format!("toc:day:2024-01-2{n}")
}

/// An operation of a client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    /// Writes a new version of node `n` titled `title`.
    Put { n: u64, title: String },
}

struct TocLayer<'m, 's, E: Engine> {
    memory: &'m AgentMemory<'s, E>,
}

impl<E: Engine> Layer for TocLayer<'_, '_, E> {
    type Op = Op;
    type Client = u64;

    fn draw(&self, client: usize, written: &mut u64, rng: &mut SeededRng) -> Op {
        *written += 1;
        Op::Put {
            n: rng.below(NODES),
            title: format!("client {client}, node {written}"),
        }
    }

    fn run(&self, _client: usize, _written: &mut u64, op: &Op) -> String {
        let Op::Put { n, title } = op;
        let node = TocNode {
            salience: strata_schemas::agent_memory::Salience::default(),
            contributing_agents: Vec::new(),
            node_id: node_id(*n),
            level: Level::Day,
            title: title.clone(),
            bullets: vec![TocBullet {
                text: format!("a bullet of {title}"),
                grip_ids: Vec::new(),
            }],
            keywords: Vec::new(),
            child_node_ids: Vec::new(),
            start_ms: 1_706_140_800_000,
            end_ms: 1_706_227_200_000,
            version: 0,
        };
        match self.memory.put_toc_node(&node) {
            Ok(v) => format!("version {v}"),
            Err(e) => format!("failed: {e}"),
        }
    }
}

#[derive(Debug, Default)]
struct Model {
    /// Each node's versions' titles, oldest first.
    titles: BTreeMap<u64, Vec<String>>,
}

impl Model {
    fn apply(&mut self, d: &Done<Op>) -> String {
        let Op::Put { n, title } = &d.op;
        let titles = self.titles.entry(*n).or_default();
        titles.push(title.clone());
        format!("version {}", titles.len())
    }

    /// Every node's versions and latest pointer, read back, against the
    /// model.
    fn matches<E: Engine>(&self, memory: &AgentMemory<'_, E>) -> Result<(), String> {
        for n in 0..NODES {
            let id = node_id(n);
            let want = self.titles.get(&n).cloned().unwrap_or_default();
            let versions: Vec<(u32, String)> = memory
                .toc_versions(&id)
                .map_err(|e| e.to_string())?
                .into_iter()
                .map(|node| (node.version, node.title))
                .collect();
            let expected: Vec<(u32, String)> = (1..).zip(want.iter().cloned()).collect();
            if versions != expected {
                return Err(format!(
                    "{id} holds versions {versions:?}, the model {expected:?}"
                ));
            }
            let latest = memory
                .toc_node(&id)
                .map_err(|e| e.to_string())?
                .map(|node| (node.version, node.title));
            if latest != expected.last().cloned() {
                return Err(format!(
                    "{id}'s latest is {latest:?}, the model's {:?}",
                    expected.last()
                ));
            }
        }
        Ok(())
    }
}

/// Runs the TOC's interleaved workload of one seed; returns its checks and
/// commits.
///
/// # Errors
/// The first violation.
pub(super) fn run<E: Target>(
    options: &RunOptions,
    trace: &mut Trace,
) -> Result<(u64, u64), Violation> {
    let mut rng = SeededRng::new(options.seed ^ 0x1A7E_0000_0000_0005);
    let store_options = layer_options(AgentMemory::<strata_engine::MemEngine>::declare(
        StoreOptions::new(Limits::FOUNDATIONDB),
    ));
    let stage = Stage::<E>::new(&store_options, &mut rng);
    let store = stage.store(store_options, &mut rng)?;
    let clock: Arc<dyn strata_engine::Clock> = stage.shared_clock();
    let outbox = Outbox::new(
        &store,
        outbox_config(),
        clock,
        Box::new(SeededRng::new(rng.next_u64())),
    )
    .map_err(|e| fail(0, format!("opening the outbox: {e}")))?;
    let memory = AgentMemory::open(&store, &outbox)
        .map_err(|e| fail(0, format!("opening agent memory: {e}")))?;
    let layer = TocLayer { memory: &memory };
    let (history, commits) = stage.rounds("toc", &layer, (options, &mut rng, trace), |_| {});
    let mut model = Model::default();
    let checks = check(history, trace, |d| model.apply(d))?;
    model
        .matches(&memory)
        .map_err(|m| fail(0, format!("after the replay in commit order: {m}")))?;
    Ok((checks + 1, commits))
}
