//! Transactions: reads that become predicates ([`read`]), writes buffered
//! until commit ([`write`]), and the planner that turns them into one
//! commit with its chunks, expiry index rows and quota charges ([`plan`]).

use std::collections::BTreeMap;
use std::ops::Bound;
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
        /// The expiry written in the envelope's header (kept beside it,
        /// so that planning need not read the header again).
        expires_at: Option<u64>,
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
pub(crate) type Writes = SmallMap<Vec<u8>, Pending>;

/// A sorted map for the few entries a transaction holds as a rule (a
/// one-put `transact` writes one key; agent memory's ingest one space
/// row): the first is kept in place (`One`: no allocation at all), then
/// up to [`FEW_WRITES`] in one vector sorted by key, one allocation where
/// a map allocates a node and walks it when taken or dropped. Past that
/// they move into a map. Either way they are taken in key order, so a
/// commit's rows are the same. (`Few` is empty only before the first
/// insert.)
#[derive(Debug)]
pub(crate) enum SmallMap<K, V> {
    One((K, V)),
    Few(Vec<(K, V)>),
    Many(BTreeMap<K, V>),
}

impl<K, V> Default for SmallMap<K, V> {
    fn default() -> Self {
        Self::Few(Vec::new())
    }
}

/// The most entries [`SmallMap`] keeps in its vector.
const FEW_WRITES: usize = 8;

impl<K: Ord, V> SmallMap<K, V> {
    fn is_empty(&self) -> bool {
        match self {
            Self::One(_) => false,
            Self::Few(few) => few.is_empty(),
            Self::Many(many) => many.is_empty(),
        }
    }

    /// How many keys it holds.
    fn len(&self) -> usize {
        match self {
            Self::One(_) => 1,
            Self::Few(few) => few.len(),
            Self::Many(many) => many.len(),
        }
    }

    /// The value of `key`.
    pub(crate) fn get<Q>(&self, key: &Q) -> Option<&V>
    where
        K: std::borrow::Borrow<Q>,
        Q: Ord + ?Sized,
    {
        match self {
            Self::One((k, v)) => (k.borrow() == key).then_some(v),
            Self::Few(few) => few
                .binary_search_by(|(k, _)| k.borrow().cmp(key))
                .ok()
                .map(|i| &few[i].1),
            Self::Many(many) => many.get(key),
        }
    }

    /// Sets the value of `key`, replacing an earlier one.
    fn insert(&mut self, key: K, value: V) {
        match self {
            Self::One((k, v)) if *k == key => *v = value,
            Self::One(_) => {
                // The second key: both into one vector, allocated once
                // for all of them (grown from two, it would reallocate
                // at the fifth).
                let mut few = Vec::with_capacity(FEW_WRITES);
                if let Self::One(first) = std::mem::take(self) {
                    few.push(first);
                }
                *self = Self::Few(few);
                self.insert(key, value);
            }
            Self::Few(few) if few.capacity() == 0 => {
                // The first key. Forgotten rather than dropped: a vector
                // without capacity owns nothing, and dropping it called
                // the whole enum's drop (a tenth of the insert).
                std::mem::forget(std::mem::replace(self, Self::One((key, value))));
            }
            Self::Few(few) => match few.binary_search_by(|(k, _)| k.cmp(&key)) {
                Ok(i) => few[i].1 = value,
                Err(i) if few.len() < FEW_WRITES => few.insert(i, (key, value)),
                Err(_) => {
                    let mut many: BTreeMap<_, _> = few.drain(..).collect();
                    many.insert(key, value);
                    *self = Self::Many(many);
                }
            },
            Self::Many(many) => {
                many.insert(key, value);
            }
        }
    }

    /// The entries whose keys are within `range`, ascending.
    fn range<R: std::ops::RangeBounds<K>>(&self, range: R) -> SmallMapRange<'_, K, V, R> {
        match self {
            Self::One(one) => SmallMapRange::Slice(std::slice::from_ref(one).iter(), range),
            Self::Few(few) => SmallMapRange::Slice(few.iter(), range),
            Self::Many(many) => {
                SmallMapRange::Many(many.range((range.start_bound(), range.end_bound())))
            }
        }
    }
}

impl<K: Ord + Clone, V: Clone> SmallMap<K, V> {
    /// Copies of the entries whose keys are within `start..end`,
    /// ascending.
    fn cloned_within(&self, start: &Bound<K>, end: &Bound<K>) -> Vec<(K, V)> {
        self.range((start.as_ref(), end.as_ref()))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }
}

/// [`SmallMap::range`]: the vector's entries filtered by the range (a
/// few, in key order), or the map's own range.
pub(crate) enum SmallMapRange<'a, K, V, R> {
    Slice(std::slice::Iter<'a, (K, V)>, R),
    Many(std::collections::btree_map::Range<'a, K, V>),
}

impl<'a, K: Ord, V, R: std::ops::RangeBounds<K>> Iterator for SmallMapRange<'a, K, V, R> {
    type Item = (&'a K, &'a V);

    fn next(&mut self) -> Option<Self::Item> {
        match self {
            Self::Slice(it, range) => it
                .by_ref()
                .find(|(k, _)| range.contains(k))
                .map(|(k, v)| (k, v)),
            Self::Many(it) => it.next(),
        }
    }
}

/// [`SmallMap`] taken in key order.
pub(crate) enum SmallMapIntoIter<K, V> {
    One(Option<(K, V)>),
    Few(std::vec::IntoIter<(K, V)>),
    Many(std::collections::btree_map::IntoIter<K, V>),
}

impl<K, V> Iterator for SmallMapIntoIter<K, V> {
    type Item = (K, V);

    fn next(&mut self) -> Option<Self::Item> {
        match self {
            Self::One(one) => one.take(),
            Self::Few(it) => it.next(),
            Self::Many(it) => it.next(),
        }
    }
}

impl<K, V> IntoIterator for SmallMap<K, V> {
    type Item = (K, V);
    type IntoIter = SmallMapIntoIter<K, V>;

    /// Every entry, ascending by key.
    fn into_iter(self) -> SmallMapIntoIter<K, V> {
        match self {
            Self::One(one) => SmallMapIntoIter::One(Some(one)),
            Self::Few(few) => SmallMapIntoIter::Few(few.into_iter()),
            Self::Many(many) => SmallMapIntoIter::Many(many.into_iter()),
        }
    }
}

/// A map made at its first insert: a transaction without counter adds
/// (most) has none to drop, where even an empty `BTreeMap` costs a walk
/// when dropped.
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

    fn entry(&mut self, key: K) -> std::collections::btree_map::Entry<'_, K, V> {
        self.0.get_or_insert_default().entry(key)
    }

    fn keys(&self) -> impl Iterator<Item = &K> {
        self.0.iter().flat_map(BTreeMap::keys)
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
    space_writes: SmallMap<(Keyspace, Vec<u8>), SpaceWrite>,
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
            space_writes: SmallMap::default(),
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
    pub fn commit(mut self) -> Result<Option<CommitInfo>, StoreError> {
        self.commit_in_place()
    }

    /// [`Tx::commit`] without moving the transaction (a few hundred bytes
    /// copied for each move): the caller drops it after, and uses it for
    /// nothing else.
    pub(crate) fn commit_in_place(&mut self) -> Result<Option<CommitInfo>, StoreError> {
        if self.is_read_only() {
            return Ok(None);
        }
        self.commit_writes().map(Some)
    }

    /// Plans and commits, even with nothing to write (the commit then only
    /// checks what was read). The writes, predicates and pins move into the
    /// commit: the caller drops the transaction after, and uses it for
    /// nothing else.
    pub(crate) fn commit_writes(&mut self) -> Result<CommitInfo, StoreError> {
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

    use super::{FEW_PINS, FEW_WRITES, Pending, Pinned, SmallMap, Writes};

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
    fn small_map_ranges_and_gets_match_a_btree_map_in_every_state() {
        // Keys as the space writes have them: (keyspace, key), two
        // keyspaces, inserted out of order, some twice.
        let mut map: SmallMap<(u8, Vec<u8>), u32> = SmallMap::default();
        let mut model: BTreeMap<(u8, Vec<u8>), u32> = BTreeMap::new();
        for n in 0..24u32 {
            let i = u8::try_from((n * 7) % 13).unwrap();
            let key = (i % 2, vec![b'k', i]);
            map.insert(key.clone(), n);
            model.insert(key, n);
            assert_eq!(map.len(), model.len());
            for (k, v) in &model {
                assert_eq!(map.get(k), Some(v));
            }
            assert_eq!(map.get(&(2, vec![b'k', 1])), None);
            for ks in 0..2u8 {
                let (lo, hi) = ((ks, vec![b'k', 3]), (ks, vec![b'k', 9]));
                for range in [
                    (Bound::Included(lo.clone()), Bound::Excluded(hi.clone())),
                    (Bound::Excluded(lo.clone()), Bound::Included(hi.clone())),
                    (Bound::Included((ks, Vec::new())), Bound::Unbounded),
                    (Bound::Unbounded, Bound::Included(hi.clone())),
                ] {
                    let got: Vec<_> = map.range(range.clone()).collect();
                    let want: Vec<_> = model.range(range.clone()).collect();
                    assert_eq!(got, want, "{} entries, {range:?}", model.len());
                }
            }
        }
        assert!(matches!(map, SmallMap::Many(_)));
        let all: Vec<_> = map.into_iter().collect();
        assert_eq!(all, model.into_iter().collect::<Vec<_>>());
    }

    #[test]
    fn one_key_written_twice_stays_in_place_and_the_later_write_wins() {
        let put = |n: u8| Pending::Put {
            envelope: vec![n],
            expires_at: Some(u64::from(n)),
            chunked: false,
            key_type: None,
        };
        let mut writes = Writes::default();
        writes.insert(b"k0".to_vec(), put(1));
        writes.insert(b"k0".to_vec(), put(2));
        assert!(matches!(writes, Writes::One(..)));
        assert_eq!(writes.len(), 1);
        assert_eq!(writes.get(&b"k0"[..]).and_then(said), Some(vec![2]));
        assert!(matches!(
            writes.get(&b"k0"[..]),
            Some(Pending::Put {
                expires_at: Some(2),
                ..
            })
        ));
        assert!(writes.get(&b"k"[..]).is_none() && writes.get(&b"k00"[..]).is_none());
        // A second key moves both into the vector, in key order.
        writes.insert(b"a".to_vec(), put(3));
        assert!(matches!(writes, Writes::Few(_)));
        let keys: Vec<Vec<u8>> = writes.into_iter().map(|(k, _)| k).collect();
        assert_eq!(keys, [b"a".to_vec(), b"k0".to_vec()]);
    }

    #[test]
    fn writes_are_kept_by_key_in_place_in_the_vector_and_after_they_move_into_the_map() {
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
                    expires_at: None,
                    chunked: false,
                    key_type: None,
                }
            };
            model.insert(key.clone(), said(&pending));
            writes.insert(key, pending);
            assert!(!writes.is_empty());
            assert_eq!(writes.len(), model.len());
            let held = match &writes {
                Writes::One(..) => 1,
                Writes::Few(_) => FEW_WRITES,
                Writes::Many(_) => usize::MAX,
            };
            let want = match model.len() {
                1 => 1,
                n if n <= FEW_WRITES => FEW_WRITES,
                _ => usize::MAX,
            };
            assert_eq!(
                held,
                want,
                "the first key in place, then the vector holds the first {FEW_WRITES} keys ({} written)",
                model.len()
            );
            for (key, says) in &model {
                assert_eq!(writes.get(key).map(said), Some(says.clone()), "key {key:?}");
            }
            assert!(
                writes.get(&b"k"[..]).is_none(),
                "a prefix of a key is not written"
            );
            assert!(writes.get(&[b'k', 200][..]).is_none());
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
            assert!(writes.is_empty());
            assert_eq!(writes.len(), 0);
            // Put back as they were, for the next round.
            for (k, v) in all {
                let p = match v {
                    Some(envelope) => Pending::Put {
                        envelope,
                        expires_at: None,
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
