//! The reference model: the contract's commit semantics written as plainly
//! as possible, independent of `MemEngine`'s code and of the resolver the
//! engines share. The conformance suite's model check and the simulation's
//! oracle compare engines with it.

use std::collections::BTreeMap;

use strata_engine::{
    Commit, CommitError, Mutation, MutationError, Predicate, PredicateError, RangeSpec, StampAt,
};

/// The contract written as plainly as possible: the reference the model
/// check (and the simulation) compares engines with.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Model {
    /// One map per keyspace.
    pub maps: Vec<BTreeMap<Vec<u8>, Vec<u8>>>,
    /// Last committed version.
    pub version: u64,
}

/// Why the model refused a commit (mirrors [`CommitError`]'s variants).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModelError {
    /// Predicate `index` failed.
    Conflict(usize),
    /// A keyspace position beyond the declared ones.
    UnknownKeyspace,
    /// Predicate `index` invalid.
    InvalidPredicate(usize, PredicateError),
    /// Mutation `index` invalid.
    InvalidMutation(usize, MutationError),
}

impl ModelError {
    /// The model error an engine's [`CommitError`] corresponds to, if any
    /// (backend failures and unknown outcomes have none).
    pub fn of(e: &CommitError) -> Option<Self> {
        Some(match e {
            CommitError::Conflict { index, .. } => Self::Conflict(*index),
            CommitError::UnknownKeyspace(_) => Self::UnknownKeyspace,
            CommitError::InvalidPredicate { index, reason } => {
                Self::InvalidPredicate(*index, reason.clone())
            }
            CommitError::InvalidMutation { index, reason } => {
                Self::InvalidMutation(*index, reason.clone())
            }
            _ => return None,
        })
    }
}

impl Model {
    /// An empty model with `n` keyspaces.
    pub fn new(n: usize) -> Self {
        Self {
            maps: vec![BTreeMap::new(); n],
            version: 0,
        }
    }

    /// Applies a commit as the contract says, or refuses it whole. The
    /// model knows keyspaces by position only: a handle is in range or not.
    ///
    /// # Errors
    /// The [`ModelError`] an engine's [`CommitError`] must match.
    pub fn commit(&mut self, c: &Commit) -> Result<u64, ModelError> {
        let n = self.maps.len();
        if c.keyspaces().any(|k| k.index() >= n) {
            return Err(ModelError::UnknownKeyspace);
        }
        for (i, p) in c.predicates.iter().enumerate() {
            let holds = match p {
                Predicate::Exists { ks, key } => self.maps[ks.index()].contains_key(key),
                Predicate::Absent { ks, key } => !self.maps[ks.index()].contains_key(key),
                Predicate::ValueEquals { ks, key, value } => {
                    self.maps[ks.index()].get(key) == value.as_ref()
                }
                Predicate::RangeEmpty { ks, range } => {
                    if range.validate().is_err() {
                        return Err(ModelError::InvalidPredicate(
                            i,
                            PredicateError::InvalidRange,
                        ));
                    }
                    !self.maps[ks.index()].keys().any(|k| range.contains(k))
                }
                _ => return Err(ModelError::InvalidPredicate(i, PredicateError::Unsupported)),
            };
            if !holds {
                return Err(ModelError::Conflict(i));
            }
        }
        let version = self.version + 1;
        let mut next = self.maps.clone();
        let mut stamps = 0u16;
        for (i, m) in c.mutations.iter().enumerate() {
            let bad = |r| ModelError::InvalidMutation(i, r);
            match m {
                Mutation::Put { ks, key, value } => {
                    next[ks.index()].insert(key.clone(), value.clone());
                }
                Mutation::Delete { ks, key } => {
                    next[ks.index()].remove(key);
                }
                Mutation::DeleteRange { ks, range } => {
                    range
                        .validate()
                        .map_err(|_| bad(MutationError::InvalidRange))?;
                    next[ks.index()].retain(|k, _| !range.contains(k));
                }
                Mutation::Add { ks, key, delta } => {
                    let old = match next[ks.index()].get(key) {
                        None => 0,
                        Some(v) if v.len() == 8 => {
                            i64::from_le_bytes(v[..].try_into().unwrap_or([0; 8]))
                        }
                        Some(v) => {
                            return Err(bad(MutationError::CounterNotEight { len: v.len() }));
                        }
                    };
                    next[ks.index()]
                        .insert(key.clone(), old.wrapping_add(*delta).to_le_bytes().to_vec());
                }
                Mutation::PutVersionstamped { ks, key, value, at } => {
                    let mut stamp = [&version.to_be_bytes()[..], &stamps.to_be_bytes()].concat();
                    stamps += 1;
                    let (mut key, mut value) = (key.clone(), value.clone());
                    let (target, offset) = match at {
                        StampAt::Key(o) => (&mut key, *o),
                        StampAt::Value(o) => (&mut value, *o),
                        StampAt::KeyInverted(o) => {
                            stamp = stamp.iter().map(|b| 0xFF ^ b).collect();
                            (&mut key, *o)
                        }
                    };
                    if offset.checked_add(10).is_none_or(|end| end > target.len()) {
                        return Err(bad(MutationError::StampOutOfBounds {
                            offset,
                            len: target.len(),
                        }));
                    }
                    target[offset..offset + 10].copy_from_slice(&stamp);
                    next[ks.index()].insert(key, value);
                }
                _ => return Err(bad(MutationError::Unsupported)),
            }
        }
        self.maps = next;
        self.version = version;
        Ok(version)
    }

    /// The model's answer to a range read of the keyspace at `index`.
    pub fn range(&self, index: usize, spec: &RangeSpec) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut rows: Vec<(Vec<u8>, Vec<u8>)> = self.maps[index]
            .iter()
            .filter(|(k, _)| spec.contains(k))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        if spec.reverse {
            rows.reverse();
        }
        rows.truncate(spec.limit.unwrap_or(usize::MAX));
        rows
    }
}
