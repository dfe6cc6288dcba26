//! Commit semantics shared by engine implementations: checking predicates
//! and turning mutations (counters, versionstamps, in order, seeing earlier
//! mutations of the same commit) into plain puts and deletes.
//!
//! An engine supplies reads of its latest state; these functions do the
//! rest, so every engine gives counters and versionstamps the same bytes.
//! Point reads are asked for in batches ([`Reads::get_many`]): at most one
//! batch for the predicates and one for the counters of a commit, so an
//! engine that pays a round trip per read pays few (a lone point
//! predicate is one [`Reads::get`]). (The model in
//! `strata-engine-testkit` restates the same rules independently; it is
//! the oracle these are tested against.)

use std::collections::BTreeMap;

use crate::contract::{Mutation, Predicate, RangeSpec, StampAt};
use crate::error::{CommitError, MutationError, PredicateError};
use crate::keyspace::Keyspace;

/// A resolved change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    /// Set `key` to `value`.
    Put(Keyspace, Vec<u8>, Vec<u8>),
    /// Remove `key`.
    Delete(Keyspace, Vec<u8>),
    /// Remove every key in the range (already validated).
    DeleteRange(Keyspace, RangeSpec),
}

/// Reads of an engine's latest committed state.
pub trait Reads {
    /// The value of `key`.
    ///
    /// # Errors
    /// A backend failure, as a [`CommitError`].
    fn get(&mut self, ks: Keyspace, key: &[u8]) -> Result<Option<Vec<u8>>, CommitError>;

    /// The values of many keys, in the order asked. The default asks
    /// [`Reads::get`] for each; an engine with a cheaper batch read (one
    /// round trip to a server) overrides it.
    ///
    /// # Errors
    /// A backend failure, as a [`CommitError`].
    fn get_many(
        &mut self,
        keys: &[(Keyspace, &[u8])],
    ) -> Result<Vec<Option<Vec<u8>>>, CommitError> {
        keys.iter().map(|(ks, key)| self.get(*ks, key)).collect()
    }

    /// Whether any key lies in `range` (a validated range).
    ///
    /// # Errors
    /// A backend failure, as a [`CommitError`].
    fn any_in(&mut self, ks: Keyspace, range: &RangeSpec) -> Result<bool, CommitError>;
}

/// Checks every predicate against the latest state.
///
/// # Errors
/// [`CommitError::Conflict`] naming the first predicate that fails,
/// [`CommitError::InvalidPredicate`], or a read's error.
pub fn check_predicates(
    predicates: &[Predicate],
    reads: &mut dyn Reads,
) -> Result<(), CommitError> {
    // A lone point predicate (the commonest: an insert's key must still be
    // free) is one read, without the batch's two vectors.
    if let [p] = predicates
        && let Check::Point(ks, key, want) = Check::of(p)
    {
        let value = reads.get(ks, key)?;
        return verdict(0, p, want.holds(value.as_deref()));
    }
    // Every point read in one batch, then each predicate in order.
    let points: Vec<(Keyspace, &[u8])> = predicates
        .iter()
        .filter_map(|p| match Check::of(p) {
            Check::Point(ks, key, _) => Some((ks, key)),
            Check::Range(..) => None,
        })
        .collect();
    let mut values = if points.is_empty() {
        Vec::new()
    } else {
        reads.get_many(&points)?
    }
    .into_iter();
    for (index, p) in predicates.iter().enumerate() {
        let holds = match Check::of(p) {
            Check::Point(_, _, want) => want.holds(values.next().flatten().as_deref()),
            Check::Range(ks, range) => {
                range
                    .validate()
                    .map_err(|_| CommitError::InvalidPredicate {
                        index,
                        reason: PredicateError::InvalidRange,
                    })?;
                !reads.any_in(ks, range)?
            }
        };
        verdict(index, p, holds)?;
    }
    Ok(())
}

/// What a predicate reads and asks.
enum Check<'a> {
    /// A key, and what its value must be.
    Point(Keyspace, &'a [u8], Want<'a>),
    /// A range that must hold no key.
    Range(Keyspace, &'a RangeSpec),
}

impl<'a> Check<'a> {
    fn of(p: &'a Predicate) -> Self {
        match p {
            Predicate::Exists { ks, key } => Self::Point(*ks, key, Want::Present),
            Predicate::Absent { ks, key } => Self::Point(*ks, key, Want::Absent),
            Predicate::ValueEquals { ks, key, value } => Self::Point(*ks, key, Want::Equal(value)),
            Predicate::RangeEmpty { ks, range } => Self::Range(*ks, range),
        }
    }
}

/// What a point predicate asks of its key's value.
#[derive(Clone, Copy)]
enum Want<'a> {
    Present,
    Absent,
    Equal(&'a Option<Vec<u8>>),
}

impl Want<'_> {
    fn holds(self, value: Option<&[u8]>) -> bool {
        match self {
            Self::Present => value.is_some(),
            Self::Absent => value.is_none(),
            Self::Equal(want) => value == want.as_deref(),
        }
    }
}

/// A conflict naming predicate `index` unless it `holds`.
fn verdict(index: usize, p: &Predicate, holds: bool) -> Result<(), CommitError> {
    if holds {
        Ok(())
    } else {
        Err(CommitError::Conflict {
            index,
            predicate: p.clone(),
        })
    }
}

/// The value of `key` with `ops` (earlier resolved mutations of the same
/// commit) laid over the latest state.
///
/// # Errors
/// A read's error.
pub fn read_through(
    ops: &[Op],
    reads: &mut dyn Reads,
    ks: Keyspace,
    key: &[u8],
) -> Result<Option<Vec<u8>>, CommitError> {
    match overlay(ops, ks, key) {
        Some(value) => Ok(value),
        None => reads.get(ks, key),
    }
}

/// What `ops` say of `key`: `Some(value or absence)` when one of them
/// writes it (the last one wins), `None` when none touches it.
#[allow(clippy::option_option)]
fn overlay(ops: &[Op], ks: Keyspace, key: &[u8]) -> Option<Option<Vec<u8>>> {
    ops.iter().rev().find_map(|op| match op {
        Op::Put(o, k, v) if *o == ks && k == key => Some(Some(v.clone())),
        Op::Delete(o, k) if *o == ks && k == key => Some(None),
        Op::DeleteRange(o, r) if *o == ks && r.contains(key) => Some(None),
        _ => None,
    })
}

/// Writes the stamp of commit `version`, the `order`-th stamp of its
/// commit, into `target` (the key or the value `at` names) at `at`'s
/// offset.
///
/// # Errors
/// [`MutationError::StampOutOfBounds`] when the 10 bytes do not fit.
pub fn stamp_into(
    target: &mut [u8],
    at: StampAt,
    version: u64,
    order: u16,
) -> Result<(), MutationError> {
    let offset = match at {
        StampAt::Key(o) | StampAt::KeyInverted(o) | StampAt::Value(o) => o,
    };
    let len = target.len();
    let slot = offset
        .checked_add(10)
        .and_then(|end| target.get_mut(offset..end))
        .ok_or(MutationError::StampOutOfBounds { offset, len })?;
    slot.copy_from_slice(&at.stamp(version, order));
    Ok(())
}

/// Resolves the mutations of a commit that will get `version`, in order.
///
/// # Errors
/// [`CommitError::InvalidMutation`] (a counter that is not 8 bytes, a
/// versionstamp that does not fit, a bad range), or a read's error. Nothing
/// has been written when it fails.
pub fn resolve(
    version: u64,
    mutations: &[Mutation],
    reads: &mut dyn Reads,
) -> Result<Vec<Op>, CommitError> {
    let mut ops: Vec<Op> = Vec::with_capacity(mutations.len());
    let mut stamps: u32 = 0;
    // The stored values of every counter, in one batch.
    let counters: Vec<(Keyspace, &[u8])> = mutations
        .iter()
        .filter_map(|m| match m {
            Mutation::Add { ks, key, .. } => Some((*ks, key.as_slice())),
            _ => None,
        })
        .collect();
    let mut stored: BTreeMap<(Keyspace, &[u8]), Option<Vec<u8>>> = BTreeMap::new();
    if !counters.is_empty() {
        stored.extend(counters.iter().copied().zip(reads.get_many(&counters)?));
    }
    for (index, m) in mutations.iter().enumerate() {
        let invalid = |reason| CommitError::InvalidMutation { index, reason };
        let op = match m {
            Mutation::Put { ks, key, value } => Op::Put(*ks, key.clone(), value.clone()),
            Mutation::Delete { ks, key } => Op::Delete(*ks, key.clone()),
            Mutation::DeleteRange { ks, range } => {
                range
                    .validate()
                    .map_err(|_| invalid(MutationError::InvalidRange))?;
                Op::DeleteRange(*ks, range.clone())
            }
            Mutation::Add { ks, key, delta } => {
                let current = match overlay(&ops, *ks, key) {
                    Some(v) => v,
                    None => stored.get(&(*ks, key.as_slice())).cloned().flatten(),
                };
                let old = match current {
                    None => 0,
                    Some(v) => {
                        let bytes: [u8; 8] = v[..].try_into().map_err(|_| {
                            invalid(MutationError::CounterNotEight { len: v.len() })
                        })?;
                        i64::from_le_bytes(bytes)
                    }
                };
                Op::Put(
                    *ks,
                    key.clone(),
                    old.wrapping_add(*delta).to_le_bytes().to_vec(),
                )
            }
            Mutation::PutVersionstamped { ks, key, value, at } => {
                let order =
                    u16::try_from(stamps).map_err(|_| invalid(MutationError::TooManyStamps))?;
                stamps += 1;
                let (mut key, mut value) = (key.clone(), value.clone());
                let target = match at {
                    StampAt::Key(_) | StampAt::KeyInverted(_) => &mut key,
                    StampAt::Value(_) => &mut value,
                };
                stamp_into(target, *at, version, order).map_err(invalid)?;
                Op::Put(*ks, key, value)
            }
        };
        ops.push(op);
    }
    Ok(ops)
}
