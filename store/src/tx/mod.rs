//! Transactions: reads that become predicates ([`read`]), writes buffered
//! until commit ([`write`]), and the planner that turns them into one
//! commit with its chunks, expiry index rows and quota charges ([`plan`]).

use std::collections::BTreeMap;
use std::ops::{Bound, RangeBounds as _};
use std::sync::atomic::{AtomicU64, Ordering};

use strata_engine::{CommitInfo, Durability, Engine, Keyspace, Mutation, Predicate, StampAt};

use crate::{Store, StoreError};

/// [`Tx::now_ms`] not read from the clock yet (no clock reads this).
const NOW_UNREAD: u64 = u64::MAX;

/// A pending write of one data key.
#[derive(Debug, Clone)]
pub(crate) enum Pending {
    /// The value's envelope.
    Put {
        envelope: Vec<u8>,
        chunked: bool,
        key_type: Option<&'static str>,
    },
    /// Remove the value (and its chunks).
    Delete {
        chunked: bool,
        key_type: Option<&'static str>,
    },
}

impl Pending {
    fn chunked(&self) -> bool {
        match self {
            Self::Put { chunked, .. } | Self::Delete { chunked, .. } => *chunked,
        }
    }

    /// The key type of the write, for errors.
    fn key_type(&self) -> Option<&'static str> {
        match self {
            Self::Put { key_type, .. } | Self::Delete { key_type, .. } => *key_type,
        }
    }
}

/// A put whose key receives the commit's versionstamp.
#[derive(Debug, Clone)]
struct Stamped {
    ks: Keyspace,
    /// Charged to the key's quota scope (the data keyspace, or a charged
    /// space).
    charged: bool,
    key: Vec<u8>,
    /// Where the stamp goes in the key (inverted or not).
    at: StampAt,
    value: Vec<u8>,
    key_type: Option<&'static str>,
}

/// Rows read under a predicate, as read (`None`: absent).
///
/// A transaction pins a few rows as a rule (an insert's check that its
/// key is new pins one): up to [`FEW_PINS`] are kept in one vector,
/// searched in order, one allocation where maps by keyspace and key cost
/// a node each. Past that (a scan pins every row it sees) they move into
/// those maps, where a lookup borrows the key rather than copying it.
/// (No map exists before then: even an empty one costs its walk when
/// dropped.)
#[derive(Debug)]
enum Pinned {
    Few(Vec<(Keyspace, Vec<u8>, Option<Vec<u8>>)>),
    Many(BTreeMap<Keyspace, BTreeMap<Vec<u8>, Option<Vec<u8>>>>),
}

impl Default for Pinned {
    fn default() -> Self {
        Self::Few(Vec::new())
    }
}

/// The most rows [`Pinned`] keeps in its vector.
const FEW_PINS: usize = 8;

impl Pinned {
    /// The row as read under a predicate; `None` when not pinned.
    fn get(&self, ks: Keyspace, key: &[u8]) -> Option<&Option<Vec<u8>>> {
        match self {
            Self::Few(few) => few
                .iter()
                .find(|(k, bytes, _)| *k == ks && bytes.as_slice() == key)
                .map(|(_, _, value)| value),
            Self::Many(many) => many.get(&ks)?.get(key),
        }
    }

    fn contains(&self, ks: Keyspace, key: &[u8]) -> bool {
        self.get(ks, key).is_some()
    }

    /// Pins `key` of `ks`, not pinned yet (its callers look first), as
    /// holding `value`.
    fn insert(&mut self, ks: Keyspace, key: Vec<u8>, value: Option<Vec<u8>>) {
        debug_assert!(!self.contains(ks, &key), "pinned once");
        match self {
            Self::Few(few) if few.len() < FEW_PINS => few.push((ks, key, value)),
            Self::Few(few) => {
                let mut many: BTreeMap<Keyspace, BTreeMap<_, _>> = BTreeMap::new();
                for (k, bytes, v) in few.drain(..) {
                    many.entry(k).or_default().insert(bytes, v);
                }
                many.entry(ks).or_default().insert(key, value);
                *self = Self::Many(many);
            }
            Self::Many(many) => {
                many.entry(ks).or_default().insert(key, value);
            }
        }
    }
}

/// The transaction's pending writes of data keys, by key.
///
/// A transaction writes a few keys as a rule (a one-put `transact` writes
/// one): up to [`FEW_WRITES`] are kept in one vector sorted by key, one
/// allocation where a map allocates a node and walks it at commit. Past
/// that they move into a map. Either way they are taken in key order, so
/// the commit's rows are the same.
#[derive(Debug)]
pub(crate) enum Writes {
    Few(Vec<(Vec<u8>, Pending)>),
    Many(BTreeMap<Vec<u8>, Pending>),
}

impl Default for Writes {
    fn default() -> Self {
        Self::Few(Vec::new())
    }
}

/// The most writes [`Writes`] keeps in its vector.
const FEW_WRITES: usize = 8;

impl Writes {
    fn is_empty(&self) -> bool {
        match self {
            Self::Few(few) => few.is_empty(),
            Self::Many(many) => many.is_empty(),
        }
    }

    /// The pending write of `key`.
    pub(crate) fn get(&self, key: &[u8]) -> Option<&Pending> {
        match self {
            Self::Few(few) => few
                .binary_search_by(|(k, _)| k.as_slice().cmp(key))
                .ok()
                .map(|i| &few[i].1),
            Self::Many(many) => many.get(key),
        }
    }

    /// Sets the pending write of `key`, replacing an earlier one.
    fn insert(&mut self, key: Vec<u8>, pending: Pending) {
        match self {
            Self::Few(few) => match few.binary_search_by(|(k, _)| k.cmp(&key)) {
                Ok(i) => few[i].1 = pending,
                Err(i) if few.len() < FEW_WRITES => {
                    // One allocation for all of them (growing from
                    // nothing would reallocate at the fifth).
                    if few.capacity() == 0 {
                        few.reserve_exact(FEW_WRITES);
                    }
                    few.insert(i, (key, pending));
                }
                Err(_) => {
                    let mut many: BTreeMap<_, _> = few.drain(..).collect();
                    many.insert(key, pending);
                    *self = Self::Many(many);
                }
            },
            Self::Many(many) => {
                many.insert(key, pending);
            }
        }
    }

    /// Copies of the writes whose keys are within `start..end`, ascending.
    fn cloned_within(
        &self,
        start: &Bound<Vec<u8>>,
        end: &Bound<Vec<u8>>,
    ) -> Vec<(Vec<u8>, Pending)> {
        match self {
            Self::Few(few) => few
                .iter()
                .filter(|(k, _)| (start.as_ref(), end.as_ref()).contains(k))
                .cloned()
                .collect(),
            Self::Many(many) => many
                .range::<Vec<u8>, _>((start.clone(), end.clone()))
                .map(|(k, p)| (k.clone(), p.clone()))
                .collect(),
        }
    }
}

/// [`Writes`] taken in key order.
pub(crate) enum WritesIntoIter {
    Few(std::vec::IntoIter<(Vec<u8>, Pending)>),
    Many(std::collections::btree_map::IntoIter<Vec<u8>, Pending>),
}

impl Iterator for WritesIntoIter {
    type Item = (Vec<u8>, Pending);

    fn next(&mut self) -> Option<Self::Item> {
        match self {
            Self::Few(it) => it.next(),
            Self::Many(it) => it.next(),
        }
    }
}

impl IntoIterator for Writes {
    type Item = (Vec<u8>, Pending);
    type IntoIter = WritesIntoIter;

    /// Every write, ascending by key.
    fn into_iter(self) -> WritesIntoIter {
        match self {
            Self::Few(few) => WritesIntoIter::Few(few.into_iter()),
            Self::Many(many) => WritesIntoIter::Many(many.into_iter()),
        }
    }
}

/// A map made at its first insert: a transaction without counter adds
/// or space writes (most) has none to drop, where even an empty
/// `BTreeMap` costs a walk when dropped.
#[derive(Debug)]
pub(crate) struct LazyMap<K, V>(Option<BTreeMap<K, V>>);

impl<K, V> Default for LazyMap<K, V> {
    fn default() -> Self {
        Self(None)
    }
}

impl<K: Ord, V> LazyMap<K, V> {
    fn is_empty(&self) -> bool {
        self.0.as_ref().is_none_or(BTreeMap::is_empty)
    }

    fn get<Q>(&self, key: &Q) -> Option<&V>
    where
        K: std::borrow::Borrow<Q>,
        Q: Ord + ?Sized,
    {
        self.0.as_ref()?.get(key)
    }

    fn remove<Q>(&mut self, key: &Q) -> Option<V>
    where
        K: std::borrow::Borrow<Q>,
        Q: Ord + ?Sized,
    {
        self.0.as_mut()?.remove(key)
    }

    fn insert(&mut self, key: K, value: V) -> Option<V> {
        self.0.get_or_insert_default().insert(key, value)
    }

    fn entry(&mut self, key: K) -> std::collections::btree_map::Entry<'_, K, V> {
        self.0.get_or_insert_default().entry(key)
    }

    fn keys(&self) -> impl Iterator<Item = &K> {
        self.0.iter().flat_map(BTreeMap::keys)
    }

    fn range<R: std::ops::RangeBounds<K>>(&self, range: R) -> impl Iterator<Item = (&K, &V)> {
        self.0
            .iter()
            .flat_map(move |m| m.range((range.start_bound(), range.end_bound())))
    }
}

impl<K, V> IntoIterator for LazyMap<K, V> {
    type Item = (K, V);
    type IntoIter = std::iter::Flatten<std::option::IntoIter<BTreeMap<K, V>>>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.into_iter().flatten()
    }
}

impl<'a, K, V> IntoIterator for &'a LazyMap<K, V> {
    type Item = (&'a K, &'a V);
    type IntoIter = std::iter::Flatten<std::option::Iter<'a, BTreeMap<K, V>>>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.iter().flatten()
    }
}

/// A pending write of a row in a declared space (or of a catalog row).
#[derive(Debug, Clone)]
struct SpaceWrite {
    /// `None`: delete.
    value: Option<Vec<u8>>,
    /// Charged to the key's quota scope.
    charged: bool,
}

/// An open transaction: reads at one snapshot, writes buffered until
/// [`Tx::commit`].
///
/// Every read (but [`Tx::snapshot_get`]) adds a predicate that the rows it
/// saw are unchanged at commit, so a committed transaction is serializable:
/// it behaves as if it ran alone at its commit version. Reads see the
/// transaction's own writes. Obtain one with
/// [`Store::transact`](crate::Store::transact) (retried on conflict) or
/// [`Store::begin`](crate::Store::begin).
pub struct Tx<'s, E: Engine> {
    store: &'s Store<E>,
    snap: Option<E::Snapshot<'s>>,
    /// The clock's reading, taken when first needed (expiry, TTL);
    /// [`NOW_UNREAD`] until then. Atomic so that `Tx` stays `Sync`.
    now: AtomicU64,
    predicates: Vec<Predicate>,
    /// Rows read under a predicate, as read.
    pinned: Pinned,
    writes: Writes,
    /// Counter adds: the sum and the key type.
    adds: LazyMap<Vec<u8>, (i64, &'static str)>,
    stamped: Vec<Stamped>,
    /// Writes of rows in declared spaces, and catalog rows.
    space_writes: LazyMap<(Keyspace, Vec<u8>), SpaceWrite>,
    /// System-row deletes that need no planning.
    raw: Vec<Mutation>,
    durability: Durability,
}

impl<'s, E: Engine + 's> Tx<'s, E> {
    /// A transaction that reads the store's clock when it first needs
    /// the time.
    pub(crate) fn new(store: &'s Store<E>) -> Self {
        Self::at(store, NOW_UNREAD)
    }

    /// A transaction that treats `now` as the time.
    pub(crate) fn at(store: &'s Store<E>, now: u64) -> Self {
        Self {
            store,
            snap: None,
            now: AtomicU64::new(now),
            predicates: Vec::new(),
            pinned: Pinned::default(),
            writes: Writes::default(),
            adds: LazyMap::default(),
            stamped: Vec::new(),
            space_writes: LazyMap::default(),
            raw: Vec::new(),
            durability: store.options.durability,
        }
    }

    /// The clock reading the transaction treats as now (expiry, TTL):
    /// read from the store's clock the first time it is needed, then the
    /// same for the whole transaction.
    pub fn now_ms(&self) -> u64 {
        match self.now.load(Ordering::Relaxed) {
            NOW_UNREAD => {
                let now = self.store.clock.now_ms();
                self.now.store(now, Ordering::Relaxed);
                now
            }
            now => now,
        }
    }

    /// The commit version the transaction reads at (its snapshot's, taken
    /// now if no read has taken it yet).
    ///
    /// # Errors
    /// An engine failure taking or reading the snapshot.
    pub fn read_version(&mut self) -> Result<u64, StoreError> {
        Ok(strata_engine::Snapshot::version(self.snap()?)?)
    }

    /// Commits with this durability instead of the store's.
    pub fn set_durability(&mut self, durability: Durability) {
        self.durability = durability;
    }

    /// The snapshot, taken at the first read.
    fn snap(&mut self) -> Result<&E::Snapshot<'s>, StoreError> {
        if self.snap.is_none() {
            self.snap = Some(self.store.engine.snapshot()?);
        }
        match &self.snap {
            Some(s) => Ok(s),
            None => unreachable!("set above"),
        }
    }

    /// Whether the transaction has writes.
    pub fn is_read_only(&self) -> bool {
        self.writes.is_empty()
            && self.adds.is_empty()
            && self.stamped.is_empty()
            && self.space_writes.is_empty()
            && self.raw.is_empty()
    }

    /// Commits: one engine commit holding every write, its chunk rows,
    /// expiry index rows and quota charges, guarded by the predicates of
    /// every read. Returns `None` for a transaction without writes (its
    /// reads were consistent at its snapshot; nothing to commit).
    ///
    /// # Errors
    /// [`StoreError::Limit`] or [`StoreError::Quota`] before anything is
    /// written; a [`CommitError`](strata_engine::CommitError) from the engine
    /// ([`StoreError::is_conflict`] when a read changed).
    pub fn commit(self) -> Result<Option<CommitInfo>, StoreError> {
        if self.is_read_only() {
            return Ok(None);
        }
        self.commit_writes().map(Some)
    }

    /// Plans and commits, even with nothing to write (the commit then only
    /// checks what was read).
    pub(crate) fn commit_writes(mut self) -> Result<CommitInfo, StoreError> {
        let started = self.store.clock.now_us();
        let commit = self.plan().inspect_err(crate::metrics::failed)?;
        let (rows, bytes) = crate::metrics::size_of(&commit);
        let info = self
            .store
            .engine
            .commit(commit)
            .map_err(StoreError::from)
            .inspect_err(crate::metrics::failed)?;
        let micros = self.store.clock.now_us().saturating_sub(started);
        crate::metrics::committed(micros, rows, bytes);
        tracing::trace!(version = info.version, "store commit");
        self.store.signal_commit(info.version);
        Ok(info)
    }
}

mod plan;
mod read;
mod space;
mod write;

pub(crate) use plan::counter_value;
pub use space::{RawPage, SpaceCursor};
pub use write::Expiry;

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::ops::Bound;

    use strata_engine::{Engine as _, KeyspaceSpec, MemEngine, Profile};

    use super::{FEW_PINS, FEW_WRITES, Pending, Pinned, Writes};

    #[test]
    fn pins_are_found_in_the_vector_and_after_they_move_into_the_maps() {
        let engine = MemEngine::open(vec![
            KeyspaceSpec::new("a", Profile::General),
            KeyspaceSpec::new("b", Profile::General),
        ])
        .unwrap();
        let (a, b) = (engine.keyspace("a").unwrap(), engine.keyspace("b").unwrap());
        let value = |i: u8| (!i.is_multiple_of(3)).then(|| vec![i; 3]);
        let mut pinned = Pinned::default();
        let expect = |pinned: &Pinned, n: u8| {
            for i in 0..n {
                // The same key in the other keyspace is another row.
                let (ks, other) = if i.is_multiple_of(2) { (a, b) } else { (b, a) };
                assert_eq!(pinned.get(ks, &[i]), Some(&value(i)), "pin {i} of {n}");
                assert!(
                    !pinned.contains(other, &[i]),
                    "pin {i} of {n}, other keyspace"
                );
            }
            assert!(!pinned.contains(a, &[n]) && !pinned.contains(b, &[n]));
            assert!(
                !pinned.contains(a, &[]),
                "a prefix of a pinned key is not pinned"
            );
        };
        let total = u8::try_from(3 * FEW_PINS).unwrap();
        for i in 0..total {
            let ks = if i.is_multiple_of(2) { a } else { b };
            pinned.insert(ks, vec![i], value(i));
            expect(&pinned, i + 1);
            assert_eq!(
                matches!(pinned, Pinned::Few(_)),
                usize::from(i) < FEW_PINS,
                "the vector holds the first {FEW_PINS} pins"
            );
        }
    }

    /// What a write says, to compare: its envelope, or `None` for a
    /// delete.
    fn said(p: &Pending) -> Option<Vec<u8>> {
        match p {
            Pending::Put { envelope, .. } => Some(envelope.clone()),
            Pending::Delete { .. } => None,
        }
    }

    #[test]
    fn writes_are_kept_by_key_in_the_vector_and_after_they_move_into_the_map() {
        // Keys written out of order, some twice (the later write wins),
        // some deleted; the model is a map of what each key says last.
        let order: Vec<u8> = (0..40u16)
            .map(|i| u8::try_from((i * 17) % 40).unwrap())
            .collect();
        let mut writes = Writes::default();
        let mut model: BTreeMap<Vec<u8>, Option<Vec<u8>>> = BTreeMap::new();
        assert!(writes.is_empty());
        for (n, &k) in order.iter().chain(order.iter().step_by(3)).enumerate() {
            let key = vec![b'k', k];
            let pending = if n % 5 == 4 {
                Pending::Delete {
                    chunked: false,
                    key_type: None,
                }
            } else {
                Pending::Put {
                    envelope: vec![k, u8::try_from(n).unwrap()],
                    chunked: false,
                    key_type: None,
                }
            };
            model.insert(key.clone(), said(&pending));
            writes.insert(key, pending);
            assert!(!writes.is_empty());
            assert_eq!(
                matches!(writes, Writes::Few(_)),
                model.len() <= FEW_WRITES,
                "the vector holds the first {FEW_WRITES} keys ({} written)",
                model.len()
            );
            for (key, says) in &model {
                assert_eq!(writes.get(key).map(said), Some(says.clone()), "key {key:?}");
            }
            assert!(
                writes.get(b"k").is_none(),
                "a prefix of a key is not written"
            );
            assert!(writes.get(&[b'k', 200]).is_none());
            // Ranges: inclusive, exclusive and open bounds, each compared
            // with the model's own range.
            let (lo, hi) = (vec![b'k', 5], vec![b'k', 30]);
            for (start, end) in [
                (Bound::Included(lo.clone()), Bound::Excluded(hi.clone())),
                (Bound::Excluded(lo.clone()), Bound::Included(hi.clone())),
                (Bound::Unbounded, Bound::Excluded(lo.clone())),
                (Bound::Included(hi.clone()), Bound::Unbounded),
            ] {
                let got: Vec<(Vec<u8>, Option<Vec<u8>>)> = writes
                    .cloned_within(&start, &end)
                    .iter()
                    .map(|(k, p)| (k.clone(), said(p)))
                    .collect();
                let want: Vec<(Vec<u8>, Option<Vec<u8>>)> = model
                    .range((start.clone(), end.clone()))
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                assert_eq!(got, want, "{start:?}..{end:?}");
            }
            // Taken whole, in key order.
            let all: Vec<(Vec<u8>, Option<Vec<u8>>)> = std::mem::take(&mut writes)
                .into_iter()
                .map(|(k, p)| (k, said(&p)))
                .collect();
            let want: Vec<(Vec<u8>, Option<Vec<u8>>)> = model.clone().into_iter().collect();
            assert_eq!(all, want);
            // Put back as they were, for the next round.
            for (k, v) in all {
                let p = match v {
                    Some(envelope) => Pending::Put {
                        envelope,
                        chunked: false,
                        key_type: None,
                    },
                    None => Pending::Delete {
                        chunked: false,
                        key_type: None,
                    },
                };
                writes.insert(k, p);
            }
        }
    }
}
