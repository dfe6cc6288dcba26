//! The store's transactions, interleaved: counters read then written,
//! versioned records through compare-and-set, a quota scope near its
//! limit, groups read by a scan before a member joins.
//!
//! The model is a few maps replayed in commit order. Its one fact about the
//! store's formats is the documented size of a row (encoded key plus stored
//! value, measured once from the engine's raw bytes): how many pads fit a
//! scope's quota.

use std::collections::{BTreeMap, BTreeSet};
use strata_codec::Limits;
use strata_engine::{Engine, MemEngine, Rng, SeededRng, Snapshot};
use strata_keys::{Key, tuple, tuple_key};
use strata_store::{Scan, Store, StoreError, StoreOptions};

use super::{Done, Layer, Stage, check, layer_options};
use crate::run::{RunOptions, Trace, Violation, fail};
use crate::targets::Target;

const NEXT: i64 = 1;
const ITEM: i64 = 2;
const REC: i64 = 3;
const PAD: i64 = 4;
const MEMBER: i64 = 5;
/// Counters, records, scopes and groups the clients share.
const COUNTERS: u64 = 2;
const RECS: u64 = 2;
const SCOPES: u64 = 2;
const PADS: u64 = 5;
const GROUPS: u64 = 2;
const GROUP_IDS: u64 = 6;
/// Members a group may have: a join scans the group first.
const MAX_MEMBERS: usize = 3;
/// Pads a scope's quota holds.
const FIT: u64 = 3;
/// The scope whose pad measures a row's size.
const MEASURE: u64 = 9;
const PAD_BYTES: usize = 100;

/// A counter of items taken.
#[derive(Debug, Clone, PartialEq)]
struct Next {
    c: u64,
}
/// Item `n` of counter `c`, holding its taker's tag.
#[derive(Debug, Clone, PartialEq)]
struct Item {
    c: u64,
    n: u64,
}
/// A versioned record: 8 bytes of version, 8 of the writer's tag.
#[derive(Debug, Clone, PartialEq)]
struct Rec {
    r: u64,
}
/// A row of a quota scope.
#[derive(Debug, Clone, PartialEq)]
struct Pad {
    scope: u64,
    id: u64,
}
/// A member of a group.
#[derive(Debug, Clone, PartialEq)]
struct Member {
    g: u64,
    id: u64,
}
tuple_key! {
    Next -> i64 = (NEXT, {c});
    Item -> Vec<u8> = (ITEM, {c}, {n});
    Rec -> Vec<u8> = (REC, {r});
    Pad -> Vec<u8> = (PAD, {scope}, {id});
    Member -> Vec<u8> = (MEMBER, {g}, {id});
}

/// An operation of a client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    /// Reads counter `c` as `n`, writes item `(c, n)` with `tag`, adds 1.
    Take { c: u64, tag: u64 },
    /// Compare-and-set of record `r` from what the client last saw to the
    /// next version with `tag`; when it differs, reads what it holds.
    Bump {
        r: u64,
        expected: Option<Vec<u8>>,
        tag: u64,
    },
    /// Writes a pad in a scope (refused when the scope's quota is full).
    Charge { scope: u64, id: u64 },
    /// Deletes a pad.
    Free { scope: u64, id: u64 },
    /// Scans group `g`; joins it when it has room.
    Join { g: u64, id: u64 },
    /// Leaves group `g` if a member.
    Leave { g: u64, id: u64 },
}

fn rec_value(version: u64, tag: u64) -> Vec<u8> {
    [version.to_be_bytes(), tag.to_be_bytes()].concat()
}

fn rec_version(value: Option<&Vec<u8>>) -> u64 {
    value
        .and_then(|v| v.get(..8))
        .and_then(|b| <[u8; 8]>::try_from(b).ok())
        .map_or(0, u64::from_be_bytes)
}

fn show(value: Option<&Vec<u8>>) -> String {
    value.map_or_else(|| "nothing".to_owned(), |v| format!("{v:02x?}"))
}

struct StoreLayer<'s, E: Engine> {
    store: &'s Store<E>,
}

/// What a client remembers: the records' values it last saw.
#[derive(Default)]
pub struct Client {
    seen: BTreeMap<u64, Option<Vec<u8>>>,
    tags: u64,
}

impl<E: Engine> Layer for StoreLayer<'_, E> {
    type Op = Op;
    type Client = Client;

    fn draw(&self, client: usize, state: &mut Client, rng: &mut SeededRng) -> Op {
        state.tags += 1;
        let tag = (client as u64) << 32 | state.tags;
        match rng.below(6) {
            0 => Op::Take {
                c: rng.below(COUNTERS),
                tag,
            },
            1 => {
                let r = rng.below(RECS);
                Op::Bump {
                    r,
                    expected: state.seen.get(&r).cloned().flatten(),
                    tag,
                }
            }
            2 => Op::Charge {
                scope: rng.below(SCOPES),
                id: rng.below(PADS),
            },
            3 => Op::Free {
                scope: rng.below(SCOPES),
                id: rng.below(PADS),
            },
            4 => Op::Join {
                g: rng.below(GROUPS),
                id: rng.below(GROUP_IDS),
            },
            _ => Op::Leave {
                g: rng.below(GROUPS),
                id: rng.below(GROUP_IDS),
            },
        }
    }

    fn run(&self, _client: usize, state: &mut Client, op: &Op) -> String {
        let store = self.store;
        let r: Result<String, StoreError> = match op {
            Op::Take { c, tag } => store.transact(|tx| {
                let n = tx.counter(&Next { c: *c })?;
                let n = u64::try_from(n).unwrap_or(u64::MAX);
                tx.put(&Item { c: *c, n }, &tag.to_be_bytes().to_vec())?;
                tx.add(&Next { c: *c }, 1)?;
                Ok(format!("took {n}"))
            }),
            Op::Bump { r, expected, tag } => {
                let next = rec_value(rec_version(expected.as_ref()) + 1, *tag);
                let out = store.transact(|tx| {
                    let key = Rec { r: *r };
                    if tx.compare_and_set(&key, expected.as_ref(), Some(&next))? {
                        Ok((Some(next.clone()), "set".to_owned()))
                    } else {
                        let now = tx.get(&key)?;
                        let shown = format!("unchanged, holds {}", show(now.as_ref()));
                        Ok((now, shown))
                    }
                });
                out.map(|(seen, answer)| {
                    state.seen.insert(*r, seen);
                    answer
                })
            }
            Op::Charge { scope, id } => {
                let done = store.transact(|tx| {
                    tx.put(
                        &Pad {
                            scope: *scope,
                            id: *id,
                        },
                        &vec![7; PAD_BYTES],
                    )
                });
                match done {
                    Err(StoreError::Quota { .. }) => Ok("refused".to_owned()),
                    other => other.map(|()| "ok".to_owned()),
                }
            }
            Op::Free { scope, id } => store
                .transact(|tx| {
                    tx.delete(&Pad {
                        scope: *scope,
                        id: *id,
                    })
                })
                .map(|()| "ok".to_owned()),
            Op::Join { g, id } => store.transact(|tx| {
                let page = tx.scan::<Member>(&group(*g))?;
                let members: BTreeSet<u64> = page.items.iter().map(|(k, _)| k.id).collect();
                if members.contains(id) {
                    Ok(format!("already in, {} members", members.len()))
                } else if members.len() >= MAX_MEMBERS {
                    Ok("full".to_owned())
                } else {
                    tx.put(&Member { g: *g, id: *id }, &Vec::new())?;
                    Ok(format!("joined as member {}", members.len() + 1))
                }
            }),
            Op::Leave { g, id } => store.transact(|tx| {
                let key = Member { g: *g, id: *id };
                if tx.get(&key)?.is_some() {
                    tx.delete(&key)?;
                    Ok("left".to_owned())
                } else {
                    Ok("not in".to_owned())
                }
            }),
        };
        r.unwrap_or_else(|e| format!("failed: {e}"))
    }
}

fn group(g: u64) -> Scan {
    Scan::range_of(strata_keys::KeyRange::tuple_prefix(&tuple::pack(&(
        MEMBER, g,
    ))))
}

/// The model: what the rows hold, replayed in commit order.
#[derive(Debug, Default)]
struct Model {
    next: BTreeMap<u64, u64>,
    items: BTreeMap<(u64, u64), u64>,
    recs: BTreeMap<u64, Vec<u8>>,
    pads: BTreeSet<(u64, u64)>,
    members: BTreeMap<u64, BTreeSet<u64>>,
}

impl Model {
    fn apply(&mut self, d: &Done<Op>) -> String {
        match &d.op {
            Op::Take { c, tag } => {
                let n = self.next.entry(*c).or_default();
                let taken = *n;
                *n += 1;
                self.items.insert((*c, taken), *tag);
                format!("took {taken}")
            }
            Op::Bump { r, expected, tag } => {
                let now = self.recs.get(r);
                if now == expected.as_ref() {
                    let next = rec_value(rec_version(expected.as_ref()) + 1, *tag);
                    self.recs.insert(*r, next);
                    "set".to_owned()
                } else {
                    format!("unchanged, holds {}", show(now))
                }
            }
            Op::Charge { scope, id } => {
                let held = self.pads.iter().filter(|(s, _)| s == scope).count() as u64;
                if self.pads.contains(&(*scope, *id)) {
                    "ok".to_owned()
                } else if held + 1 > FIT {
                    "refused".to_owned()
                } else {
                    self.pads.insert((*scope, *id));
                    "ok".to_owned()
                }
            }
            Op::Free { scope, id } => {
                self.pads.remove(&(*scope, *id));
                "ok".to_owned()
            }
            Op::Join { g, id } => {
                let members = self.members.entry(*g).or_default();
                if members.contains(id) {
                    format!("already in, {} members", members.len())
                } else if members.len() >= MAX_MEMBERS {
                    "full".to_owned()
                } else {
                    members.insert(*id);
                    format!("joined as member {}", members.len())
                }
            }
            Op::Leave { g, id } => {
                if self.members.entry(*g).or_default().remove(id) {
                    "left".to_owned()
                } else {
                    "not in".to_owned()
                }
            }
        }
    }

    /// The store's rows, read back, against the model.
    fn matches<E: Engine>(&self, store: &Store<E>) -> Result<(), String> {
        let view = store.read().map_err(|e| e.to_string())?;
        let all = |k: i64| Scan::range_of(strata_keys::KeyRange::tuple_prefix(&tuple::pack(&(k,))));
        for c in 0..COUNTERS {
            let got = view.counter(&Next { c }).map_err(|e| e.to_string())?;
            let want = self.next.get(&c).copied().unwrap_or(0);
            if u64::try_from(got).ok() != Some(want) {
                return Err(format!("counter {c} holds {got}, the model {want}"));
            }
        }
        let items: BTreeMap<(u64, u64), u64> = view
            .scan::<Item>(&all(ITEM))
            .map_err(|e| e.to_string())?
            .map(|r| {
                r.map(|(k, v)| {
                    let tag =
                        <[u8; 8]>::try_from(v.as_slice()).map_or(u64::MAX, u64::from_be_bytes);
                    ((k.c, k.n), tag)
                })
            })
            .collect::<Result<_, _>>()
            .map_err(|e| e.to_string())?;
        if items != self.items {
            return Err(format!(
                "the items are {items:?}, the model's {:?}",
                self.items
            ));
        }
        let recs: BTreeMap<u64, Vec<u8>> = view
            .scan::<Rec>(&all(REC))
            .map_err(|e| e.to_string())?
            .map(|r| r.map(|(k, v)| (k.r, v)))
            .collect::<Result<_, _>>()
            .map_err(|e| e.to_string())?;
        if recs != self.recs {
            return Err(format!(
                "the records are {recs:?}, the model's {:?}",
                self.recs
            ));
        }
        let pads: BTreeSet<(u64, u64)> = view
            .scan::<Pad>(&all(PAD))
            .map_err(|e| e.to_string())?
            .map(|r| r.map(|(k, _)| (k.scope, k.id)))
            .filter(|r| r.as_ref().map_or(true, |(s, _)| *s != MEASURE))
            .collect::<Result<_, _>>()
            .map_err(|e| e.to_string())?;
        if pads != self.pads {
            return Err(format!(
                "the pads are {pads:?}, the model's {:?}",
                self.pads
            ));
        }
        let members: BTreeSet<(u64, u64)> = view
            .scan::<Member>(&all(MEMBER))
            .map_err(|e| e.to_string())?
            .map(|r| r.map(|(k, _)| (k.g, k.id)))
            .collect::<Result<_, _>>()
            .map_err(|e| e.to_string())?;
        let want: BTreeSet<(u64, u64)> = self
            .members
            .iter()
            .flat_map(|(g, ids)| ids.iter().map(move |id| (*g, *id)))
            .collect();
        if members != want {
            return Err(format!("the members are {members:?}, the model's {want:?}"));
        }
        Ok(())
    }
}

/// A pad's stored size (encoded key plus stored value, the documented
/// quota measure), measured on the raw rows of a scratch engine.
fn pad_size(options: &StoreOptions) -> Result<u64, String> {
    let spec = options.keyspace_specs();
    let engine = MemEngine::open(spec).map_err(|e| e.to_string())?;
    let store = Store::open(&engine, options.clone()).map_err(|e| e.to_string())?;
    let key = Pad {
        scope: MEASURE,
        id: 0,
    };
    store
        .put(&key, &vec![7; PAD_BYTES])
        .map_err(|e| e.to_string())?;
    let packed = key.pack().map_err(|e| e.to_string())?;
    let ks = engine
        .keyspace(&options.data_keyspace)
        .map_err(|e| e.to_string())?;
    let raw = engine
        .snapshot()
        .and_then(|s| s.get(ks, &packed))
        .map_err(|e| e.to_string())?
        .ok_or("the measured pad is not in the data keyspace")?;
    Ok(strata_codec::stored_size(packed.len(), raw.len()))
}

fn options(quota: u64) -> StoreOptions {
    let scopes: Vec<Vec<u8>> = (0..=MEASURE).map(|s| tuple::pack(&(PAD, s))).collect();
    StoreOptions::new(Limits::FOUNDATIONDB.with_quota(quota))
        .quota_scope(move |key| scopes.iter().find(|s| key.starts_with(s)).cloned())
}

/// Runs the store's interleaved workload of one seed; returns its checks
/// and commits.
///
/// # Errors
/// The first violation.
pub(super) fn run<E: Target>(
    options: &RunOptions,
    trace: &mut Trace,
) -> Result<(u64, u64), Violation> {
    let mut rng = SeededRng::new(options.seed ^ 0x1A7E_0000_0000_0001);
    let size = pad_size(&options_for_measure()).map_err(|m| fail(0, m))?;
    // FIT pads and half of another fit.
    let store_options = layer_options(options_for(size));
    let stage = Stage::<E>::new(&store_options, &mut rng);
    let store = stage.store(store_options, &mut rng)?;
    let layer = StoreLayer { store: &store };
    let (history, commits) = stage.rounds("store", &layer, (options, &mut rng, trace), |_| {});
    let mut model = Model::default();
    let checks = check(history, trace, |d| model.apply(d))?;
    model
        .matches(&store)
        .map_err(|m| fail(0, format!("after the replay in commit order: {m}")))?;
    Ok((checks + 1, commits))
}

fn options_for_measure() -> StoreOptions {
    options(u64::MAX / 4)
}

fn options_for(size: u64) -> StoreOptions {
    options(FIT * size + size / 2)
}
