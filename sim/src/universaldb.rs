//! The UniversalDB workload: transfers between actors' balances, kept on
//! the document's key layout `(ACTOR, DATA, actor_id, METADATA)`, by
//! transactions interleaved in pairs (both begun, both read, both write,
//! committed in a random order), with serializable reads, on a faulty
//! engine with crashes; the audit reads every balance with snapshot reads
//! in one transaction.
//!
//! Oracles: money is conserved (the balances always sum to the initial
//! total) and no balance goes below zero, after every step, whatever
//! commits failed, conflicted or ended with an unknown outcome. Two
//! transfers that read the same balance serializably cannot both commit;
//! if they could, the second would overwrite the first's debit or credit
//! and the sum would change.

use serde::{Deserialize, Serialize};
use strata_codec::Limits;
use strata_engine::{Engine, Rng};
use strata_keys::tuple::Uuid;
use strata_keys::tuple_key;
use strata_schemas::universaldb::keys::{ACTOR, DATA, METADATA};
use strata_schemas::universaldb::{Database, Isolation, UdbError};
use strata_store::StoreOptions;

use crate::faults::FaultyEngine;
use crate::run::{
    Driven, Frame, RunOptions, SeedReport, Violation, drive, driven_on_store, fail, quiet_store,
};
use crate::targets::Target;

const ACTORS: u64 = 4;
const START: i64 = 250;

/// An actor's balance.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
struct Balance(i64);
strata_codec::value!(Balance: postcard, version = 1);

/// `(ACTOR, DATA, actor_id, METADATA)`.
#[derive(Debug, Clone, PartialEq)]
struct BalanceKey {
    actor_id: Uuid,
}
tuple_key! {
    BalanceKey -> Balance = (ACTOR, DATA, {actor_id}, METADATA);
}

fn key(n: u128) -> BalanceKey {
    BalanceKey {
        actor_id: Uuid::from_u128(n),
    }
}

type Db<E> = Database<FaultyEngine<E>>;

struct UdbRun {
    /// The seed's draws, clock, trace and counts.
    frame: Frame,
    options: StoreOptions,
}

/// One planned transfer: from, to, amount. Both balances are read
/// serializably: the values written depend on both.
#[derive(Debug, Clone, Copy)]
struct Transfer {
    from: u128,
    to: u128,
    amount: i64,
}

impl UdbRun {
    fn open<E: Target>(&mut self, engine: FaultyEngine<E>) -> Db<E> {
        let store = crate::run::open_store(
            engine,
            &self.options,
            self.frame.clock.clone(),
            &mut self.frame.rng,
        );
        Database::open(store).unwrap_or_else(|e| unreachable!("the udb space is declared: {e}"))
    }

    fn transfer(&mut self) -> Transfer {
        let from = self.frame.rng.below(ACTORS);
        let to = (from + 1 + self.frame.rng.below(ACTORS - 1)) % ACTORS;
        Transfer {
            from: from.into(),
            to: to.into(),
            amount: i64::try_from(1 + self.frame.rng.below(120)).unwrap_or(1),
        }
    }

    /// Two transfers begun together, read, written, committed in a random
    /// order.
    fn pair<E: Target>(&mut self, db: &Db<E>, step: usize) {
        let plans = [self.transfer(), self.transfer()];
        let mut txs: Vec<_> = plans.iter().map(|_| db.begin()).collect();
        let mut wrote = [false, false];
        for (i, (tx, plan)) in txs.iter_mut().zip(plans).enumerate() {
            let mut ops = tx.ops();
            let from = ops.read_opt(&key(plan.from), Isolation::Serializable);
            let to = ops.read_opt(&key(plan.to), Isolation::Serializable);
            let (Ok(Some(from)), Ok(Some(to))) = (from, to) else {
                continue;
            };
            if from.0 < plan.amount {
                continue;
            }
            let debit = ops.write(&key(plan.from), &Balance(from.0 - plan.amount));
            let credit = ops.write(&key(plan.to), &Balance(to.0 + plan.amount));
            wrote[i] = debit.is_ok() && credit.is_ok();
        }
        let first = usize::try_from(self.frame.rng.below(2)).unwrap_or(0);
        let mut outcomes = Vec::new();
        let mut txs: Vec<_> = txs.into_iter().map(Some).collect();
        for i in [first, 1 - first] {
            let Some(tx) = txs[i].take() else { continue };
            if !wrote[i] {
                outcomes.push(format!("t{i} skipped"));
                continue;
            }
            let plan = plans[i];
            match tx.commit() {
                Ok(_) => {
                    self.frame.commits += 1;
                    outcomes.push(format!(
                        "t{i} moved {} {}->{}",
                        plan.amount, plan.from, plan.to
                    ));
                }
                Err(e) => outcomes.push(format!("t{i} failed: {}", short(&e))),
            }
        }
        self.frame.trace.event(step, outcomes.join("; "));
    }

    /// Money conserved, nothing negative: read in one snapshot.
    fn check<E: Target>(&mut self, db: &Db<E>, step: usize) -> Result<(), Violation> {
        let read = db.run("audit", |tx| {
            (0..u128::from(ACTORS))
                .map(|n| tx.read(&key(n), Isolation::Snapshot).map(|b| b.0))
                .collect::<Result<Vec<i64>, UdbError>>()
        });
        let Ok(balances) = read else {
            return Ok(());
        };
        self.frame.checks += 1;
        let total: i64 = balances.iter().sum();
        if total != START * i64::try_from(ACTORS).unwrap_or(0) {
            return Err(fail(
                step,
                format!("balances {balances:?} sum to {total}: money was created or lost"),
            ));
        }
        if balances.iter().any(|b| *b < 0) {
            return Err(fail(step, format!("a negative balance: {balances:?}")));
        }
        Ok(())
    }
}

impl<E: Target> Driven<E> for UdbRun {
    driven_on_store!(Db<E>);

    fn step(&mut self, db: &Db<E>, step: usize) -> Result<(), Violation> {
        if self.frame.rng.chance(0.05) {
            match db.store().engine().sync() {
                Ok(v) => self.frame.trace.event(step, format!("sync: durable {v}")),
                Err(e) => self.frame.trace.event(step, format!("sync failed: {e}")),
            }
        } else {
            self.pair(db, step);
        }
        self.check(db, step)
    }
}

fn short(e: &UdbError) -> String {
    let text = e.to_string();
    text.chars().take(80).collect()
}

/// Runs the UniversalDB workload of one seed on engine `E`.
#[allow(clippy::too_many_lines)] // setup, loop and report, in order
pub fn run_universaldb_seed_on<E: Target>(options: &RunOptions) -> SeedReport {
    let mut frame = Frame::new(options, 0x0DB0_0000_0000_0000, 1_730_000_000_000);
    let config = frame.faults;
    let store_options = crate::run::schema_options(
        &mut frame.rng,
        Database::<strata_engine::MemEngine>::declare(StoreOptions::new(Limits::FOUNDATIONDB)),
    );
    let mut run = UdbRun {
        options: store_options.clone(),
        frame,
    };
    run.frame.trace.event(
        0,
        format!(
            "universaldb seed {} faults {config:?} durability {:?}",
            options.seed, store_options.durability
        ),
    );
    let engine = run.frame.engine::<E>(store_options.keyspace_specs());
    let mut violation = None;
    {
        // The balances exist before the workload, written without faults.
        let quiet = quiet_store(&engine, &store_options, run.frame.clock.clone());
        let quiet = Database::open(quiet).unwrap_or_else(|e| unreachable!("{e}"));
        let made = quiet
            .run("open accounts", |tx| {
                (0..u128::from(ACTORS)).try_for_each(|n| tx.write(&key(n), &Balance(START)))
            })
            .and_then(|()| {
                quiet
                    .store()
                    .engine()
                    .sync()
                    .map(|_| ())
                    .map_err(|e| UdbError::Store(strata_store::StoreError::Engine(e)))
            });
        if let Err(e) = made {
            violation = Some(fail(
                0,
                format!("opening the accounts without faults failed: {e}"),
            ));
        }
    }
    let db = run.open(engine);
    let (db, found) = if violation.is_some() {
        (Some(db), None)
    } else {
        drive(&mut run, db, options.ops)
    };
    violation = violation.or(found);
    let faults = db
        .map(|d| d.store().engine().counters())
        .unwrap_or_default();
    run.frame
        .report("universaldb", options.seed, faults, violation)
}
