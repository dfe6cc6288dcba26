//! The search workload: notes written, rewritten and deleted through the
//! store together with their index changes, an indexer stepping, crashing
//! (its uncommitted documents lost, its committed index kept in a shared
//! in-memory directory) and reopening, through engine crashes and faults.
//! A step that meets a fault either crashes the indexer or, half the
//! time, leaves it to go on at its next step, as an `IndexRunner` waiting
//! out a store failure does.
//!
//! Now and then the indexer rebuilds the index from a snapshot, or catches
//! up, and (on seeds whose faults include crashes) the engine crashes
//! right after it: the rebuilt index and its
//! checkpoint must not be ahead of what the engine kept.
//!
//! Oracles, none of which asks the indexer what it believes:
//!
//! - the index is never ahead of the durable store: after every step its
//!   checkpoint is at most the engine's durable version, and after an
//!   engine crash the checkpoint read from the index's own commit payload
//!   (parsed by its documented format, `strata-search/1 VERSION.ORDER`) is
//!   at most the version the engine came back with;
//! - an indexer always reopens: the outbox never acknowledged more than
//!   the index holds;
//! - after a quiet phase without faults the index is exactly the
//!   projection of the store (no document missing, extra, stale or
//!   duplicated), and a search for each word returns exactly the notes
//!   whose stored text holds it, read from the store by a plain scan.

use std::collections::BTreeSet;
use std::sync::Arc;

use strata_codec::Limits;
use strata_engine::{Engine, ManualClock, Rng, SeededRng};
use strata_keys::tuple_key;
use strata_outbox::{Outbox, OutboxConfig, OutboxError};
use strata_search::tantivy;
use strata_search::tantivy::directory::RamDirectory;
use strata_search::{Document, IndexSpec, Indexer, IndexerConfig, Location, Query, SearchError};
use strata_store::{Scan, Store, StoreError, StoreOptions};

use crate::faults::{FaultClass, FaultyEngine};
use crate::run::{Frame, RunOptions, SeedReport, Trace, Violation, fail};
use crate::targets::Target;

const WORDS: [&str; 6] = ["amber", "basil", "cedar", "delta", "ember", "fjord"];
const IDS: u64 = 8;

/// A note: `(30, id)` -> its text.
#[derive(Debug, Clone, PartialEq)]
struct Note {
    id: u64,
}
tuple_key! {
    Note -> String = (30, {id});
}

type Faulty<E> = FaultyEngine<E>;

fn spec() -> IndexSpec<Note> {
    IndexSpec::new("sim", |_: &Note, text: &String| {
        Document::new().text("text", text)
    })
    .and_then(|s| s.text("text", 1.0))
    .unwrap_or_else(|e| unreachable!("a valid mapping: {e}"))
}

fn options(rng: &mut SeededRng) -> StoreOptions {
    crate::outbox::options_with(
        rng,
        Limits {
            max_key_bytes: 128,
            max_value_bytes: 512,
            max_batch_entries: 16,
            max_batch_bytes: 8_192,
            quota_bytes: 1 << 30,
        },
    )
}

fn outbox_config() -> OutboxConfig {
    let mut c = OutboxConfig::default();
    c.lease_ms = 1_000;
    // Buffered commits stay not durable for a while.
    c.sync_interval_ms = 200;
    c
}

fn indexer_config() -> IndexerConfig {
    let mut c = IndexerConfig::new("sim");
    c.threads = 1;
    c.batch = 4;
    c.commit_docs = 3;
    c.commit_bytes = usize::MAX;
    c.commit_interval_ms = 100;
    // A dropped indexer is a crashed one: its lease is waited out.
    c.release_on_drop = false;
    c
}

/// Whether `e` comes from an injected fault (or the conflicts and unknown
/// outcomes faults cause), which the workload tolerates.
fn faulted(e: &SearchError) -> bool {
    match e {
        SearchError::Store(s) | SearchError::Outbox(OutboxError::Store(s)) => {
            crate::store::faulted(s)
        }
        _ => false,
    }
}

/// The checkpoint in the index's last commit, read from its payload by the
/// documented format, without the indexer.
fn committed_version(ram: &RamDirectory) -> Result<u64, String> {
    if !tantivy::Index::exists(ram).map_err(|e| e.to_string())? {
        return Ok(0);
    }
    let index = tantivy::Index::open(ram.clone()).map_err(|e| e.to_string())?;
    let payload = index.load_metas().map_err(|e| e.to_string())?.payload;
    match payload {
        None => Ok(0),
        Some(p) => p
            .strip_prefix("strata-search/1 ")
            .and_then(|rest| rest.split_once('.'))
            .and_then(|(v, _)| v.parse().ok())
            .ok_or_else(|| format!("payload {p:?} is not a checkpoint")),
    }
}

struct SearchRun {
    /// The seed's draws, clock, trace and counts.
    frame: Frame,
}

impl SearchRun {
    fn open<E: Target>(&mut self, engine: Faulty<E>, options: &StoreOptions) -> Store<Faulty<E>> {
        Store::open_with(
            engine,
            options.clone(),
            self.frame.clock.clone(),
            Box::new(SeededRng::new(self.frame.rng.next_u64())),
        )
        .unwrap_or_else(|e| unreachable!("the store's keyspaces are declared: {e}"))
    }

    fn text(&mut self) -> String {
        let n = 1 + self.frame.rng.below(3);
        (0..n)
            .map(|_| WORDS[usize::try_from(self.frame.rng.below(6)).unwrap_or(0)])
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// One write: a note put (new or rewritten), inserted (written only if
    /// absent, indexed without a delete) or deleted, with its change.
    fn write<E: Engine>(&mut self, outbox: &Outbox<'_, E>, step: usize) -> Result<(), Violation> {
        let id = self.frame.rng.below(IDS);
        let delete = self.frame.rng.chance(0.2);
        let insert = !delete && self.frame.rng.chance(0.3);
        let text = self.text();
        let s = spec();
        let r = outbox.store().transact(|tx| {
            if delete {
                s.delete(outbox, tx, &Note { id }).map(|()| true)
            } else if insert {
                s.insert(outbox, tx, &Note { id }, &text)
            } else {
                s.put(outbox, tx, &Note { id }, &text).map(|()| true)
            }
        });
        match r {
            Ok(wrote) => {
                self.frame.commits += 1;
                self.frame.trace.event(
                    step,
                    match (delete, insert) {
                        (true, _) => format!("delete {id}"),
                        (false, true) => format!("insert {id} {text:?}: {wrote}"),
                        (false, false) => format!("put {id} {text:?}"),
                    },
                );
                Ok(())
            }
            Err(e) if faulted(&e) => Ok(()),
            Err(e) => Err(fail(step, format!("a write failed: {e}"))),
        }
    }
}

/// Opens the indexer on the shared directory; `None` when a fault stopped
/// it (tried again later).
fn open_indexer<'o, 's, E: Engine>(
    outbox: &'o Outbox<'s, E>,
    ram: &RamDirectory,
    config: &IndexerConfig,
    clock: &Arc<ManualClock>,
    step: usize,
) -> Result<Option<Indexer<'o, 's, E, Note>>, Violation> {
    match Indexer::open(
        outbox,
        spec(),
        &Location::Shared(ram.clone()),
        config.clone(),
        clock.clone(),
    ) {
        Ok(ix) => Ok(Some(ix)),
        Err(e) if faulted(&e) => Ok(None),
        Err(e) => Err(fail(step, format!("the indexer does not reopen: {e}"))),
    }
}

/// What an indexer's failure means for the run: a fault stops the indexer
/// as a crash would (what it had not committed is gone), unless `keep`:
/// then the same indexer goes on at its next step, as an `IndexRunner`
/// waiting out a store failure does; a lease a crashed indexer still holds
/// is waited out; anything else is a violation.
fn index_error<I>(
    e: SearchError,
    ix: &mut Option<I>,
    keep: bool,
    trace: &mut Trace,
    step: usize,
    what: &str,
) -> Result<(), Violation> {
    match e {
        e if faulted(&e) => {
            if keep {
                trace.event(step, format!("{what} failed, the indexer goes on: {e}"));
            } else {
                *ix = None;
            }
            Ok(())
        }
        SearchError::Outbox(e @ OutboxError::LeaseHeld { .. }) => {
            trace.event(step, format!("the indexer waits: {e}"));
            Ok(())
        }
        e => Err(fail(step, format!("{what} failed: {e}"))),
    }
}

/// Runs the search workload of one seed on engine `E`.
// One loop of epochs (an engine's life between crashes) around one loop of
// steps: split, the borrows of the store, outbox and indexer would have to
// travel between functions.
#[allow(clippy::too_many_lines)]
pub fn run_search_seed_on<E: Target>(options: &RunOptions) -> SeedReport {
    let mut frame = Frame::new(options, 0x5EA2_C400_0000_0000, 1_700_000_000_000);
    let config = frame.faults;
    let store_options = self::options(&mut frame.rng);
    let mut run = SearchRun { frame };
    run.frame.trace.event(
        0,
        format!(
            "search seed {} faults {config:?} durability {:?}",
            options.seed, store_options.durability
        ),
    );
    let ix_config = indexer_config();
    let ram = RamDirectory::create();
    let engine = run.frame.engine::<E>(store_options.keyspace_specs());
    let mut store = Some(run.open(engine, &store_options));
    let mut violation = None;
    let mut step = 0;
    while step < options.ops && violation.is_none() {
        let Some(s) = store.take() else { break };
        let mut crashed = false;
        {
            let outbox = Outbox::new(
                &s,
                outbox_config(),
                run.frame.clock.clone(),
                Box::new(SeededRng::new(run.frame.rng.next_u64())),
            )
            .unwrap_or_else(|e| unreachable!("the outbox's spaces are declared: {e}"));
            let mut ix: Option<Indexer<'_, '_, Faulty<E>, Note>> = None;
            while step < options.ops {
                step += 1;
                if run.frame.crash_due(s.engine().is_stuck()) {
                    crashed = true;
                    break;
                }
                run.frame.clock.advance(run.frame.rng.below(50));
                let roll = run.frame.rng.below(100);
                if (45..=89).contains(&roll) && ix.is_none() {
                    match open_indexer(&outbox, &ram, &ix_config, &run.frame.clock, step) {
                        Ok(opened) => ix = opened,
                        Err(v) => {
                            violation = Some(v);
                            break;
                        }
                    }
                }
                let outcome = match roll {
                    0..=44 => run.write(&outbox, step),
                    45..=79 => match ix.as_mut().map(Indexer::step) {
                        Some(Err(e)) => {
                            let keep = run.frame.rng.chance(0.5);
                            index_error(
                                e,
                                &mut ix,
                                keep,
                                &mut run.frame.trace,
                                step,
                                "an index step",
                            )
                        }
                        _ => Ok(()),
                    },
                    80..=84 => {
                        run.frame.trace.event(step, "indexer crash".to_owned());
                        ix = None;
                        if run.frame.rng.chance(0.5) {
                            // The restart comes after its lease ran out.
                            run.frame.clock.advance(outbox_config().lease_ms + 1);
                        }
                        Ok(())
                    }
                    85..=89 => {
                        // A rebuild or a catch-up, and the engine crashes
                        // right after it: the index must not be ahead of
                        // what the engine keeps.
                        let rebuild = run.frame.rng.chance(0.6);
                        let result = match ix.take() {
                            None => Ok(()),
                            Some(i) if rebuild => i.rebuild().map(|(i, r)| {
                                run.frame.trace.event(
                                    step,
                                    format!("rebuilt: {} documents at {}", r.documents, r.version),
                                );
                                ix = Some(i);
                            }),
                            Some(mut i) => {
                                let r = i.catch_up().map(|_| {
                                    run.frame.trace.event(step, "caught up".to_owned());
                                });
                                ix = Some(i);
                                r
                            }
                        };
                        let outcome = match result {
                            Err(e) => index_error(
                                e,
                                &mut ix,
                                false,
                                &mut run.frame.trace,
                                step,
                                if rebuild { "a rebuild" } else { "a catch-up" },
                            ),
                            Ok(()) => Ok(()),
                        };
                        // Every time, on seeds whose faults include crashes.
                        if outcome.is_ok() && config.p(FaultClass::Crash) > 0.0 {
                            crashed = true;
                            break;
                        }
                        outcome
                    }
                    _ => {
                        let r = s.engine().sync();
                        run.frame.trace.event(step, format!("sync: {r:?}"));
                        Ok(())
                    }
                };
                if let Err(v) = outcome {
                    violation = Some(v);
                    break;
                }
                if let Some(ix) = &ix {
                    run.frame.checks += 1;
                    let durable = s.engine().durable_version();
                    if ix.checkpoint().version > durable {
                        violation = Some(fail(
                            step,
                            format!(
                                "the index is at {} but only version {durable} is durable",
                                ix.checkpoint()
                            ),
                        ));
                        break;
                    }
                }
            }
        }
        if crashed {
            let e = s.into_engine().crash_restart(&mut run.frame.rng);
            run.frame.trace.event(step, "crash and reopen".to_owned());
            let reopened = run.open(e, &store_options);
            run.frame.checks += 1;
            match committed_version(&ram) {
                Ok(v) if v > reopened.engine().last_version() => {
                    violation = Some(fail(
                        step,
                        format!(
                            "the index's commit holds version {v}, but the engine came back at {}",
                            reopened.engine().last_version()
                        ),
                    ));
                }
                Ok(_) => {}
                Err(e) => violation = Some(fail(step, format!("the index does not read: {e}"))),
            }
            store = Some(reopened);
        } else {
            store = Some(s);
        }
    }
    if violation.is_none()
        && let Some(s) = &store
        && let Err(v) = quiet_check(&mut run, s, &ram, &ix_config, options.ops)
    {
        violation = Some(v);
    }
    let faults = store.map(|s| s.engine().counters()).unwrap_or_default();
    run.frame.report("search", options.seed, faults, violation)
}

/// The quiet phase: without faults, the indexer catches up; the index must
/// then be the store's projection, and every word must find exactly the
/// notes that hold it.
fn quiet_check<E: Target>(
    run: &mut SearchRun,
    store: &Store<Faulty<E>>,
    ram: &RamDirectory,
    config: &IndexerConfig,
    step: usize,
) -> Result<(), Violation> {
    let quiet: Store<&E> = Store::open_with(
        store.engine().inner(),
        store.options().clone(),
        run.frame.clock.clone(),
        Box::new(SeededRng::new(0)),
    )
    .unwrap_or_else(|e| unreachable!("{e}"));
    let err = |what: &str, e: &dyn std::fmt::Display| fail(step, format!("{what}: {e}"));
    quiet
        .engine()
        .sync()
        .map_err(|e| err("a fault-free sync failed", &e))?;
    let outbox = Outbox::new(
        &quiet,
        outbox_config(),
        run.frame.clock.clone(),
        Box::new(SeededRng::new(1)),
    )
    .unwrap_or_else(|e| unreachable!("{e}"));
    // Past any lease a crashed indexer held.
    run.frame.clock.advance(outbox_config().lease_ms + 1);
    let mut ix = Indexer::open(
        &outbox,
        spec(),
        &Location::Shared(ram.clone()),
        config.clone(),
        run.frame.clock.clone(),
    )
    .map_err(|e| err("the indexer does not reopen without faults", &e))?;
    let report = ix.verify().map_err(|e| err("verify failed", &e))?;
    run.frame.checks += 1;
    if !report.is_exact() {
        return Err(fail(
            step,
            format!("the index is not the store's projection: {report:?}"),
        ));
    }
    // The notes each word should find, from a plain scan of the store.
    let view = quiet.read().map_err(|e| err("a read", &e))?;
    let mut notes: Vec<(u64, String)> = Vec::new();
    for row in view
        .scan::<Note>(&Scan::all().skip_other_types())
        .map_err(|e: StoreError| err("a scan", &e))?
    {
        let (k, text) = row.map_err(|e| err("a scan", &e))?;
        notes.push((k.id, text));
    }
    drop(view);
    for word in WORDS {
        let want: BTreeSet<u64> = notes
            .iter()
            .filter(|(_, t)| t.split(' ').any(|w| w == word))
            .map(|(id, _)| *id)
            .collect();
        let got = ix
            .search(&Query::new(word).limit(100))
            .map_err(|e| err("a search", &e))?;
        let ids: BTreeSet<u64> = got.hits.iter().map(|h| h.key.id).collect();
        run.frame.checks += 1;
        if ids != want || got.hits.len() != want.len() {
            return Err(fail(
                step,
                format!(
                    "a search for {word:?} found {:?}; the store holds it in {want:?}",
                    got.hits.iter().map(|h| h.key.id).collect::<Vec<_>>()
                ),
            ));
        }
    }
    Ok(())
}
