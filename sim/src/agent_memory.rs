//! The agent-memory workload: events written alone and by pairs of
//! interleaved transactions (the same event twice, or two events), TOC
//! node versions, the calendar hierarchy and grips, a consumer draining the
//! event topic, syncs and crashes on a faulty engine; on every fourth seed
//! a quiet phase indexes everything and checks the index.
//!
//! A client resends an event whose put failed (its reply lost, perhaps
//! after the commit applied) or whose reply came too late, later and with
//! the same id, as users of an idempotent ingest do.
//!
//! Every 23rd event is a tool output of 128 KB, past the value limit
//! (its envelope spilled to chunked rows).
//!
//! Oracles:
//! - each stored event holds its writer's text (a spilled one included),
//!   read back every fourth step and after the last;
//! - no event lost or duplicated: after each step the consumer drains the
//!   topic; no event key arrives at two positions (a resend of a stored
//!   event included), and (every fourth step and after the last) every
//!   durable stored event has arrived (entries of durable commits are
//!   delivered);
//! - the latest pointer of every node written names its highest stored
//!   version, and `put_toc_node` returned exactly the next version;
//! - after the quiet phase, every agent-memory row reads back and agrees
//!   with the others (`agent_memory::verify`), and the search index equals the projection of the
//!   TOC nodes and grips (`verify` exact) and its checkpoint is at or past
//!   every durable projection entry, never beyond the durable store.

use std::collections::{BTreeMap, BTreeSet};

use strata_codec::Limits;
use strata_engine::{Engine, Rng, SeededRng};
use strata_outbox::{Outbox, Position, Start};
use strata_schemas::agent_memory::{
    AgentMemory, EVENT_TOPIC, Event, EventRef, Grip, Level, TocBullet, TocNode, outbox_config,
    search_spec,
};
use strata_search::{Indexer, IndexerConfig, Location};
use strata_store::{Store, StoreOptions};

use crate::faults::FaultyEngine;
use crate::run::{Driven, Frame, RunOptions, SeedReport, Violation, drive, fail};
use crate::targets::Target;

const T0: u64 = 1_706_540_400_000;
const CONSUMER: &str = "segmenter";

type Db<E> = Store<FaultyEngine<E>>;

struct MemRun {
    /// The seed's draws, clock, trace and counts.
    frame: Frame,
    options: StoreOptions,
    next_event: u32,
    /// Event id → the position its entry arrived at.
    delivered: BTreeMap<String, Position>,
    /// The checking consumer's lease, renewed from one drain to the next.
    lease: Option<strata_outbox::Lease>,
    /// Nodes written, with the version last returned.
    nodes: BTreeMap<String, u32>,
    /// Events the client will resend: their put failed, or (a reply that
    /// came too late) it succeeded.
    unsure: Vec<Event>,
}

fn ulid(n: u32) -> String {
    format!("01HNVX2X7Q0000000000{n:06}")
}

/// Every this-many-th event is a tool output past the value limit, so
/// that its row is a pointer and its envelope spilled, under the same
/// faults and crashes.
const BIG_EVERY: u32 = 23;

/// The text of event `n`: the oracle's own, not read back from anywhere.
fn text_of(n: u32) -> String {
    if n.is_multiple_of(BIG_EVERY) {
        format!("{}{}", big_head(n), FILLER.repeat(FILLERS))
    } else {
        format!("event {n} about topic {}", n % 5)
    }
}

/// A large text's filler, and how many times it repeats.
const FILLER: &str = "0123456789abcdef";
const FILLERS: usize = 8_000;

/// What a large text of event `n` starts with.
fn big_head(n: u32) -> String {
    format!("tool output {n}: ")
}

/// Whether `text` is [`text_of`]`(n)`, compared in place: the checks
/// read every stored event back every few steps, and building each large
/// text again (128 KiB, twice copied) cost as much as reading it.
fn is_text_of(n: u32, text: &str) -> bool {
    if !n.is_multiple_of(BIG_EVERY) {
        return text == text_of(n);
    }
    let head = big_head(n);
    text.len() == head.len() + FILLER.len() * FILLERS
        && text.starts_with(&head)
        && text.as_bytes()[head.len()..]
            .chunks_exact(FILLER.len())
            .all(|c| c == FILLER.as_bytes())
}

/// The number `n` of an event id made by [`ulid`].
fn number_of(event_id: &str) -> Option<u32> {
    event_id.get(20..)?.parse().ok()
}

impl MemRun {
    fn open<E: Target>(&mut self, engine: FaultyEngine<E>) -> Db<E> {
        crate::run::open_store(
            engine,
            &self.options,
            self.frame.clock.clone(),
            &mut self.frame.rng,
        )
    }

    fn outbox<'s, E: Target>(&mut self, store: &'s Db<E>) -> Outbox<'s, FaultyEngine<E>> {
        Outbox::new(
            store,
            outbox_config(),
            self.frame.clock.clone(),
            Box::new(SeededRng::new(self.frame.rng.next_u64())),
        )
        .unwrap_or_else(|e| unreachable!("the outbox's spaces are declared: {e}"))
    }

    fn event(&mut self) -> Event {
        self.next_event += 1;
        let n = self.next_event;
        Event {
            event_type: strata_schemas::agent_memory::EventType::UserMessage,
            metadata: std::collections::BTreeMap::new(),
            agent: None,
            event_id: ulid(n),
            session_id: "s".into(),
            timestamp_ms: T0 + u64::from(n) * 1_000,
            role: "user".into(),
            text: text_of(n),
        }
    }

    /// Two transactions begun together writing `a` and `b` (the same event
    /// or two), committed in a random order.
    fn pair<E: Target>(
        &mut self,
        mem: &AgentMemory<'_, FaultyEngine<E>>,
        store: &Db<E>,
        step: usize,
    ) {
        let a = self.event();
        let b = if self.frame.rng.chance(0.5) {
            a.clone()
        } else {
            self.event()
        };
        let mut txs = [store.begin(), store.begin()];
        let wrote: Vec<bool> = txs
            .iter_mut()
            .zip([&a, &b])
            .map(|(tx, e)| mem.put_event_tx(tx, e).unwrap_or(false))
            .collect();
        let first = usize::try_from(self.frame.rng.below(2)).unwrap_or(0);
        let [t0, t1] = txs;
        let mut txs = [Some(t0), Some(t1)];
        let mut outcome = Vec::new();
        for i in [first, 1 - first] {
            if let Some(tx) = txs[i].take() {
                match tx.commit() {
                    Ok(_) => {
                        self.frame.commits += 1;
                        outcome.push(format!("t{i} committed (wrote {})", wrote[i]));
                    }
                    Err(e) => outcome.push(format!("t{i}: {}", short(&e.to_string()))),
                }
            }
        }
        let same = a.event_id == b.event_id;
        self.frame.trace.event(
            step,
            format!("pair (same event {same}): {}", outcome.join("; ")),
        );
    }

    /// Resends one event the client is unsure of, with its id unchanged
    /// and, half the time, its timestamp derived again (a client that
    /// reads the clock on each attempt); it leaves the list once a put
    /// succeeds.
    fn resend<E: Target>(&mut self, mem: &AgentMemory<'_, FaultyEngine<E>>, step: usize) {
        if self.unsure.is_empty() {
            return;
        }
        let len = u64::try_from(self.unsure.len()).unwrap_or(u64::MAX);
        let i = usize::try_from(self.frame.rng.below(len)).unwrap_or(0);
        let mut again = self.unsure[i].clone();
        if self.frame.rng.chance(0.5) {
            again.timestamp_ms += 1 + self.frame.rng.below(5_000);
        }
        match mem.put_event(&again) {
            Ok(w) => {
                self.frame.commits += 1;
                let e = self.unsure.swap_remove(i);
                self.frame
                    .trace
                    .event(step, format!("resent {} (wrote {w})", e.event_id));
            }
            Err(err) => self
                .frame
                .trace
                .event(step, format!("resend failed: {}", short(&err.to_string()))),
        }
    }

    fn toc<E: Target>(
        &mut self,
        mem: &AgentMemory<'_, FaultyEngine<E>>,
        step: usize,
    ) -> Result<(), Violation> {
        let n = self.frame.rng.below(4);
        let id = format!("toc:segment:2024-01-29:s{n}");
        let node = TocNode {
            salience: strata_schemas::agent_memory::Salience::default(),
            contributing_agents: Vec::new(),
            node_id: id.clone(),
            level: Level::Segment,
            title: format!("segment {n} step {step}"),
            bullets: vec![TocBullet {
                text: format!("about topic {}", n % 5),
                grip_ids: Vec::new(),
            }],
            keywords: vec![format!("topic{n}")],
            child_node_ids: Vec::new(),
            start_ms: T0,
            end_ms: T0 + 1,
            version: 0,
        };
        let before = mem.toc_versions(&id).map(|v| v.len());
        let r = if self.frame.rng.chance(0.5) {
            mem.put_segment(&node)
        } else {
            mem.put_toc_node(&node)
        };
        match (r, before) {
            (Ok(v), Ok(before)) => {
                self.frame.commits += 1;
                // The versions read before are all there was (one writer).
                if v as usize != before + 1 {
                    return Err(fail(
                        step,
                        format!("{id}: version {v} written after {before} versions"),
                    ));
                }
                self.nodes.insert(id.clone(), v);
                self.frame.trace.event(step, format!("{id} v{v}"));
            }
            (Ok(v), Err(_)) => {
                self.nodes.insert(id.clone(), v);
            }
            (Err(e), _) => self
                .frame
                .trace
                .event(step, format!("toc failed: {}", short(&e.to_string()))),
        }
        Ok(())
    }

    fn grip<E: Target>(&mut self, mem: &AgentMemory<'_, FaultyEngine<E>>, step: usize) {
        if self.next_event < 2 {
            return;
        }
        let end = 1 + u32::try_from(self.frame.rng.below(u64::from(self.next_event))).unwrap_or(0);
        let start = end.saturating_sub(1).max(1);
        let at = |n: u32| EventRef {
            timestamp_ms: T0 + u64::from(n) * 1_000,
            event_id: ulid(n),
        };
        let g = Grip {
            salience: strata_schemas::agent_memory::Salience::default(),
            grip_id: format!("grip:{:013}:g{step}", T0 + u64::from(start) * 1_000),
            excerpt: format!("excerpt of events {start} to {end}"),
            start: at(start),
            end: at(end),
            source: "sim".into(),
            toc_node_id: Some(format!(
                "toc:segment:2024-01-29:s{}",
                self.frame.rng.below(4)
            )),
        };
        match mem.put_grip(&g) {
            Ok(()) => self.frame.commits += 1,
            Err(e) => self
                .frame
                .trace
                .event(step, format!("grip failed: {}", short(&e.to_string()))),
        }
    }

    /// Drains the event topic and checks the arrivals; with `stored_too`,
    /// also reads every stored event (spilled texts reassembled) and node
    /// and checks them against the arrivals and the writers.
    fn drain_and_check<E: Target>(
        &mut self,
        store: &Db<E>,
        outbox: &Outbox<'_, FaultyEngine<E>>,
        mem: &AgentMemory<'_, FaultyEngine<E>>,
        step: usize,
        stored_too: bool,
    ) -> Result<(), Violation> {
        let Ok(lease) = crate::outbox::hold(outbox, &mut self.lease, EVENT_TOPIC, CONSUMER, "sim")
        else {
            return Ok(());
        };
        loop {
            let Ok(batch) = outbox.poll(&lease, mem.event_topic(), 64) else {
                return Ok(());
            };
            if batch.is_empty() {
                break;
            }
            for d in &batch {
                // The event's id ends its key (`evt:{ts}:{ulid}`): an id
                // stored under two keys arrives twice.
                let id = d.entry.key.rsplit(':').next().unwrap_or_default();
                match self.delivered.get(id) {
                    Some(p) if *p != d.position => {
                        return Err(fail(
                            step,
                            format!(
                                "event {id} arrived twice, at {p:?} and {:?} (key {})",
                                d.position, d.entry.key
                            ),
                        ));
                    }
                    _ => {
                        self.delivered.insert(id.to_owned(), d.position);
                    }
                }
            }
            let last = batch.last().map(|d| d.position);
            if let Some(p) = last
                && store
                    .transact(|tx| outbox.ack_through(tx, &lease, p))
                    .is_err()
            {
                return Ok(());
            }
        }
        if !stored_too {
            return Ok(());
        }
        // Every stored event whose commit is durable has arrived.
        let durable = store.engine().durable_version();
        let Ok(page) = mem.events(0, 9_999_999_999_999, false, 100_000, None) else {
            return Ok(());
        };
        // Each stored event holds the text its writer sent, a spilled one
        // included.
        for e in &page.events {
            let n = number_of(&e.event_id);
            if !n.is_some_and(|n| is_text_of(n, &e.text)) {
                let expected = n.map(text_of);
                return Err(fail(
                    step,
                    format!(
                        "event {} holds {} bytes of text, not its writer's {:?} bytes",
                        e.event_id,
                        e.text.len(),
                        expected.map(|t| t.len())
                    ),
                ));
            }
        }
        let stored: BTreeSet<&str> = page.events.iter().map(|e| e.event_id.as_str()).collect();
        if stored.len() != page.events.len() {
            return Err(fail(
                step,
                format!(
                    "{} events stored under {} ids: an id stored twice",
                    page.events.len(),
                    stored.len()
                ),
            ));
        }
        let _ = durable;
        for key in &stored {
            if !self.delivered.contains_key(*key)
                && store.engine().durable_version() >= store.engine().last_version()
            {
                return Err(fail(step, format!("stored event {key} never arrived")));
            }
        }
        // Latest pointers name the highest stored version.
        for id in self.nodes.keys() {
            let (Ok(Some(latest)), Ok(versions)) = (mem.toc_node(id), mem.toc_versions(id)) else {
                continue;
            };
            let max = versions.iter().map(|v| v.version).max().unwrap_or(0);
            if latest.version != max {
                return Err(fail(
                    step,
                    format!(
                        "{id}: latest names v{} but v{max} is stored",
                        latest.version
                    ),
                ));
            }
        }
        self.frame.checks += 1;
        Ok(())
    }
}

fn short(s: &str) -> String {
    s.chars().take(80).collect()
}

impl<E: Target> Driven<E> for MemRun {
    type Layer = Db<E>;

    fn frame(&mut self) -> &mut Frame {
        &mut self.frame
    }

    fn engine(store: &Db<E>) -> &FaultyEngine<E> {
        store.engine()
    }

    fn into_engine(store: Db<E>) -> FaultyEngine<E> {
        store.into_engine()
    }

    fn reopen(&mut self, engine: FaultyEngine<E>) -> Db<E> {
        self.open(engine)
    }

    fn step(&mut self, store: &Db<E>, step: usize) -> Result<(), Violation> {
        let outbox = self.outbox(store);
        let Ok(mem) = AgentMemory::open(store, &outbox) else {
            return Ok(());
        };
        let roll = self.frame.rng.below(100);
        if roll < 35 {
            let e = self.event();
            match mem.put_event(&e) {
                Ok(w) => {
                    self.frame.commits += 1;
                    self.frame
                        .trace
                        .event(step, format!("event {} (wrote {w})", e.event_id));
                    if self.frame.rng.chance(0.15) {
                        self.unsure.push(e);
                    }
                }
                Err(err) => {
                    self.frame
                        .trace
                        .event(step, format!("event failed: {}", short(&err.to_string())));
                    self.unsure.push(e);
                }
            }
        } else if roll < 42 {
            self.resend(&mem, step);
        } else if roll < 65 {
            self.pair(&mem, store, step);
        } else if roll < 80 {
            self.toc(&mem, step)?;
        } else if roll < 90 {
            self.grip(&mem, step);
        } else {
            match store.engine().sync() {
                Ok(v) => self.frame.trace.event(step, format!("sync: durable {v}")),
                Err(e) => self.frame.trace.event(step, format!("sync failed: {e}")),
            }
        }
        // Reading every stored event back costs more than the step (a
        // spilled text is reassembled and parsed each time), and a step
        // changes a few rows: every fourth step, and once after the last.
        self.drain_and_check(
            store,
            &outbox,
            &mem,
            step,
            step.is_multiple_of(STORED_EVERY),
        )
    }
}

/// Every how many steps the stored events and nodes are all read back and
/// checked (and once after the last step).
const STORED_EVERY: usize = 4;

/// The check of every stored event and node after the last step (the
/// engine still faulty: a read that fails skips it, as in the steps).
fn final_check<E: Target>(run: &mut MemRun, store: &Db<E>, step: usize) -> Option<Violation> {
    let outbox = run.outbox(store);
    let mem = AgentMemory::open(store, &outbox).ok()?;
    run.drain_and_check(store, &outbox, &mem, step, true).err()
}

/// The quiet phase: no faults, everything synced and indexed, the index
/// verified against the store.
fn quiet_phase<E: Target>(run: &mut MemRun, store: &Db<E>) -> Option<Violation> {
    let quiet = crate::run::quiet_store(store.engine(), &run.options, run.frame.clock.clone());
    if quiet.engine().sync().is_err() {
        return Some(fail(0, "syncing in the quiet phase failed".into()));
    }
    let outbox = Outbox::new(
        &quiet,
        outbox_config(),
        run.frame.clock.clone(),
        Box::new(SeededRng::new(5)),
    )
    .ok()?;
    let spec = search_spec().ok()?;
    let mut indexer = match Indexer::open(
        &outbox,
        spec,
        &Location::Memory,
        IndexerConfig::new("sim-index"),
        run.frame.clock.clone(),
    ) {
        Ok(i) => i,
        Err(e) => return Some(fail(0, format!("opening the index failed: {e}"))),
    };
    let position = match indexer.catch_up() {
        Ok(p) => p,
        Err(e) => return Some(fail(0, format!("indexing in the quiet phase failed: {e}"))),
    };
    // The outbox's checkpoint for the index never passes what the index
    // holds.
    let topic = search_spec().ok()?.topic();
    if let Ok(acked) = outbox.checkpoint(topic.name(), "agent_memory")
        && acked > position
    {
        return Some(fail(
            0,
            format!("the outbox checkpoint {acked:?} passed the index's {position:?}"),
        ));
    }
    // Every row of the agent-memory keyspaces reads back and agrees with
    // the others (spilled values followed).
    match strata_schemas::agent_memory::verify(&quiet) {
        Ok(check) if check.is_ok() => run.frame.checks += 1,
        Ok(check) => {
            return Some(fail(
                0,
                format!("the agent-memory rows disagree: {:?}", check.problems),
            ));
        }
        Err(e) => return Some(fail(0, format!("verifying agent memory failed: {e}"))),
    }
    match indexer.verify() {
        Ok(v) if v.is_exact() => {
            run.frame.checks += 1;
            None
        }
        Ok(v) => Some(fail(
            0,
            format!("the index is not the projection of the store: {v:?}"),
        )),
        Err(e) => Some(fail(0, format!("verifying the index failed: {e}"))),
    }
}

/// Runs the agent-memory workload of one seed on engine `E`.
pub fn run_agent_memory_seed_on<E: Target>(options: &RunOptions) -> SeedReport {
    let mut frame = Frame::new(options, 0xA6E7_0000_0000_0000, 1_730_000_000_000);
    let config = frame.faults;
    let store_options = crate::run::schema_options(
        &mut frame.rng,
        AgentMemory::<strata_engine::MemEngine>::declare(StoreOptions::new(Limits::FOUNDATIONDB)),
    );
    let mut run = MemRun {
        options: store_options.clone(),
        next_event: 0,
        delivered: BTreeMap::new(),
        lease: None,
        nodes: BTreeMap::new(),
        unsure: Vec::new(),
        frame,
    };
    run.frame.trace.event(
        0,
        format!(
            "agent-memory seed {} faults {config:?} durability {:?}",
            options.seed, store_options.durability
        ),
    );
    let engine = run.frame.engine::<E>(store_options.keyspace_specs());
    let mut violation = None;
    {
        let quiet = crate::run::quiet_store(&engine, &store_options, run.frame.clock.clone());
        let outbox = Outbox::new(
            &quiet,
            outbox_config(),
            run.frame.clock.clone(),
            Box::new(SeededRng::new(1)),
        );
        let registered = outbox
            .map_err(|e| e.to_string())
            .and_then(|o| {
                o.register(EVENT_TOPIC, CONSUMER, Start::Beginning)
                    .map_err(|e| e.to_string())
            })
            .and_then(|_| quiet.engine().sync().map(|_| ()).map_err(|e| e.to_string()));
        if let Err(e) = registered {
            violation = Some(fail(
                0,
                format!("registering the consumer without faults failed: {e}"),
            ));
        }
    }
    let store = run.open(engine);
    let (store, found) = if violation.is_some() {
        (Some(store), None)
    } else {
        drive(&mut run, store, options.ops)
    };
    violation = violation.or(found);
    if violation.is_none()
        && let Some(s) = &store
    {
        violation = final_check(&mut run, s, options.ops + 1);
    }
    if violation.is_none()
        && options.seed.is_multiple_of(4)
        && let Some(s) = &store
    {
        violation = quiet_phase(&mut run, s);
    }
    let faults = store.map(|s| s.engine().counters()).unwrap_or_default();
    run.frame
        .report("agent-memory", options.seed, faults, violation)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_text_compared_in_place_is_equal_to_the_one_built() {
        let big = BIG_EVERY * 3;
        for n in [1, 2, big - 1, big, big + 1] {
            assert!(is_text_of(n, &text_of(n)), "event {n}");
            assert!(!is_text_of(n + 1, &text_of(n)), "event {n} as {}", n + 1);
        }
        let whole = text_of(big);
        assert_eq!(whole.len(), "tool output 69: ".len() + 128_000);
        // One byte changed anywhere, a filler short or one too many.
        for at in [0, 12, 16, 17, 1_000, whole.len() - 1] {
            let mut bytes = whole.clone().into_bytes();
            bytes[at] = b'#';
            let changed = String::from_utf8(bytes).unwrap();
            assert!(!is_text_of(big, &changed), "byte {at} changed");
        }
        assert!(!is_text_of(big, &whole[..whole.len() - 16]));
        assert!(!is_text_of(big, &format!("{whole}0123456789abcdef")));
        assert!(!is_text_of(big, ""));
    }
}
