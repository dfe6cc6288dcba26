//! The outbox's lease and checkpoint rows, interleaved: workers take,
//! renew, release and acknowledge through one consumer's lease while
//! producers commit entries.
//!
//! The model holds the consumer's lease (its token, its end, whether it
//! was released) and its checkpoint, as the outbox's documentation states
//! them: a lease is taken when none runs, with the next token; only its
//! holder renews it, until it is taken over or released; an
//! acknowledgement needs a running lease and moves the checkpoint only
//! forwards.

use strata_codec::Limits;
use strata_engine::{Engine, Rng, SeededRng};
use strata_outbox::{Lease, Outbox, OutboxError, Position, Start, Topic};
use strata_store::StoreOptions;

use super::{Done, Layer, Stage, check, layer_options};
use crate::run::{RunOptions, Trace, Violation, fail};
use crate::targets::Target;

const TOPIC: &str = "jobs";
const CONSUMER: &str = "indexer";

/// An operation of a worker or producer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    /// Takes the consumer's lease.
    Acquire,
    /// Renews the lease with this token.
    Renew { token: u64 },
    /// Releases it; the worker keeps using it after when `zombie`.
    Release { token: u64, zombie: bool },
    /// Acknowledges through the end of commit `through` under it.
    Ack { token: u64, through: u64 },
    /// Commits an entry.
    Push,
}

struct OutboxLayer<'o, 's, E: Engine> {
    outbox: &'o Outbox<'s, E>,
    topic: Topic<Vec<u8>>,
}

/// The lease a worker holds.
#[derive(Default)]
pub struct Client {
    lease: Option<Lease>,
    /// It released its lease and goes on using it (a zombie worker).
    zombie: bool,
}

impl<E: Engine> Layer for OutboxLayer<'_, '_, E> {
    type Op = Op;
    type Client = Client;

    fn draw(&self, _client: usize, state: &mut Client, rng: &mut SeededRng) -> Op {
        let token = state.lease.as_ref().map(Lease::token);
        if let (true, Some(token)) = (std::mem::take(&mut state.zombie), token) {
            return if rng.chance(0.5) {
                Op::Renew { token }
            } else {
                Op::Ack {
                    token,
                    through: rng.below(self.outbox.store().engine().last_version() + 1),
                }
            };
        }
        match (rng.below(10), token) {
            (0..=2, _) => Op::Push,
            (3..=4, Some(token)) => Op::Renew { token },
            (5, Some(token)) => Op::Release {
                token,
                zombie: rng.chance(0.5),
            },
            (6..=9, Some(token)) => Op::Ack {
                token,
                through: rng.below(self.outbox.store().engine().last_version() + 1),
            },
            _ => Op::Acquire,
        }
    }

    fn run(&self, client: usize, state: &mut Client, op: &Op) -> String {
        let outbox = self.outbox;
        let held = |state: &Client| state.lease.clone();
        let r: Result<String, OutboxError> = match op {
            Op::Acquire => outbox
                .acquire(TOPIC, CONSUMER, &format!("worker-{client}"))
                .map(|lease| {
                    let answer = format!("token {}", lease.token());
                    state.lease = Some(lease);
                    answer
                }),
            Op::Renew { .. } => match held(state).map(|l| outbox.renew(&l)) {
                Some(Ok(lease)) => {
                    state.lease = Some(lease);
                    Ok("renewed".to_owned())
                }
                Some(Err(e)) => Err(e),
                None => Ok("no lease".to_owned()),
            },
            Op::Release { zombie, .. } => match held(state) {
                Some(l) => outbox.release(&l).map(|()| {
                    if *zombie {
                        state.zombie = true;
                    } else {
                        state.lease = None;
                    }
                    "released".to_owned()
                }),
                None => Ok("no lease".to_owned()),
            },
            Op::Ack { through, .. } => match held(state) {
                Some(l) => outbox
                    .store()
                    .transact(|tx| outbox.ack_through(tx, &l, Position::end_of(*through)))
                    .map(|()| "acknowledged".to_owned()),
                None => Ok("no lease".to_owned()),
            },
            Op::Push => outbox
                .store()
                .transact(|tx| outbox.push(tx, &self.topic, &vec![1, 2, 3]))
                .map(|()| "pushed".to_owned()),
        };
        match r {
            Ok(answer) => answer,
            Err(OutboxError::LeaseHeld { .. }) => "held".to_owned(),
            Err(OutboxError::StaleLease { .. }) => {
                state.lease = None;
                "stale".to_owned()
            }
            Err(e) => format!("failed: {e}"),
        }
    }
}

/// The consumer's lease row as the model keeps it.
#[derive(Debug, Clone, Copy)]
struct Held {
    token: u64,
    until: u64,
    released: bool,
}

#[derive(Debug)]
struct Model {
    lease_ms: u64,
    lease: Option<Held>,
    checkpoint: Position,
}

impl Model {
    fn running(&self, token: u64, now: u64) -> Option<Held> {
        self.lease
            .filter(|h| h.token == token && !h.released && h.until > now)
    }

    fn apply(&mut self, d: &Done<Op>) -> String {
        let now = d.now;
        match d.op {
            Op::Acquire => {
                let token = match self.lease {
                    Some(h) if !h.released && h.until > now => return "held".to_owned(),
                    Some(h) => h.token + 1,
                    None => 1,
                };
                self.lease = Some(Held {
                    token,
                    until: now + self.lease_ms,
                    released: false,
                });
                format!("token {token}")
            }
            Op::Renew { token } => match &mut self.lease {
                // Renewed even once expired, as long as nobody took it.
                Some(h) if h.token == token && !h.released => {
                    h.until = now + self.lease_ms;
                    "renewed".to_owned()
                }
                _ => "stale".to_owned(),
            },
            Op::Release { token, .. } => {
                // Fenced while it is still this token's lease, running or
                // run out: a holder may not renew a lease it gave up (a
                // release that ran out untaken fenced nothing before
                // 2026-11-29, and the model kept that).
                if let Some(h) = &mut self.lease
                    && h.token == token
                {
                    h.released = true;
                }
                "released".to_owned()
            }
            Op::Ack { token, through } => {
                if self.running(token, now).is_none() {
                    return "stale".to_owned();
                }
                self.checkpoint = self.checkpoint.max(Position::end_of(through));
                "acknowledged".to_owned()
            }
            Op::Push => "pushed".to_owned(),
        }
    }
}

/// Runs the outbox's interleaved workload of one seed; returns its checks
/// and commits.
///
/// # Errors
/// The first violation.
pub(super) fn run<E: Target>(
    options: &RunOptions,
    trace: &mut Trace,
) -> Result<(u64, u64), Violation> {
    let mut rng = SeededRng::new(options.seed ^ 0x1A7E_0000_0000_0002);
    let store_options = layer_options(Outbox::<strata_engine::MemEngine>::declare(
        StoreOptions::new(Limits::FOUNDATIONDB),
    ));
    let stage = Stage::<E>::new(&store_options, &mut rng);
    let store = stage.store(store_options, &mut rng)?;
    let config = crate::outbox::outbox_config();
    let lease_ms = config.lease_ms;
    let outbox =
        Outbox::open(&store, config).map_err(|e| fail(0, format!("opening the outbox: {e}")))?;
    outbox
        .register(TOPIC, CONSUMER, Start::Beginning)
        .map_err(|e| fail(0, format!("registering the consumer: {e}")))?;
    let start = outbox
        .checkpoint(TOPIC, CONSUMER)
        .map_err(|e| fail(0, format!("reading the checkpoint: {e}")))?;
    let layer = OutboxLayer {
        outbox: &outbox,
        topic: Topic::new(TOPIC).map_err(|e| fail(0, e.to_string()))?,
    };
    // Leases run out now and then between rounds.
    let (history, commits) = stage.rounds("outbox", &layer, (options, &mut rng, trace), |rng| {
        stage.clock().advance(rng.below(lease_ms * 3 / 4));
    });
    let mut model = Model {
        lease_ms,
        lease: None,
        checkpoint: start,
    };
    let checks = check(history, trace, |d| model.apply(d))?;
    let got = outbox
        .checkpoint(TOPIC, CONSUMER)
        .map_err(|e| fail(0, format!("reading the checkpoint: {e}")))?;
    if got != model.checkpoint {
        return Err(fail(
            0,
            format!(
                "after the replay in commit order: the checkpoint is {got:?}, the model's {:?}",
                model.checkpoint
            ),
        ));
    }
    Ok((checks + 1, commits))
}
