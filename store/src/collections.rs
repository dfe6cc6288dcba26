//! Collections the reference systems need, built from plain rows inside a
//! transaction: a set index, a sorted set by score, a chunked append-only
//! log. Every operation takes a [`Tx`], so a collection changes in the same
//! commit as the data it indexes, under the store's limits and quota.
//!
//! ```
//! use strata_codec::Limits;
//! use strata_engine::MemEngine;
//! use strata_keys::Subspace;
//! use strata_store::{SetIndex, SortedSet, Store, StoreError, StoreOptions};
//!
//! let options = StoreOptions::new(Limits::FOUNDATIONDB);
//! let store = Store::open(MemEngine::open(options.keyspace_specs())?, options)?;
//! let workers: SetIndex<String> = SetIndex::new(Subspace::new(&("workers",)));
//! let board: SortedSet<String> = SortedSet::new(Subspace::new(&("board",)));
//! store.transact(|tx| {
//!     workers.insert(tx, &"w1".to_owned())?;
//!     board.add(tx, &"ada".to_owned(), 30)?;
//!     board.add(tx, &"bob".to_owned(), 10)?;
//!     board.add(tx, &"ada".to_owned(), 5)?; // moves ada
//!     Ok::<_, StoreError>(())
//! })?;
//! let top = store.transact(|tx| board.range_by_score(tx, 0..=100, 10))?;
//! assert_eq!(top.items, vec![("ada".to_owned(), 5), ("bob".to_owned(), 10)]);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::marker::PhantomData;
use std::ops::{Bound, RangeBounds};

use strata_engine::Engine;
use strata_keys::tuple::{TuplePack, TupleUnpack};
use strata_keys::{Key, KeyError, KeyRange, Subspace};

use crate::{Cursor, Scan, StoreError, Tx};

/// A row of a collection: a key given as bytes, a value of type `V`.
pub(crate) struct RowKey<V>(Vec<u8>, PhantomData<fn() -> V>);

impl<V> RowKey<V> {
    fn new(bytes: Vec<u8>) -> Self {
        Self(bytes, PhantomData)
    }
}

impl<V> Key for RowKey<V> {
    type Value = V;
    const NAME: &'static str = "collection row";

    fn pack_into(&self, out: &mut Vec<u8>) -> Result<(), KeyError> {
        out.extend_from_slice(&self.0);
        Ok(())
    }

    fn unpack(bytes: &[u8]) -> Result<Self, KeyError> {
        Ok(Self::new(bytes.to_vec()))
    }
}

type Marker = RowKey<Vec<u8>>;

/// Entries of a collection read in key order, with the scan's `more` flag
/// and resume point.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Members<T> {
    /// The entries.
    pub items: Vec<T>,
    /// Whether entries remain after the last one.
    pub more: bool,
    /// Where to resume.
    pub cursor: Option<Cursor>,
}

fn collection_err(source: KeyError) -> StoreError {
    StoreError::Key {
        key_type: "collection row",
        source,
    }
}

/// A set of members stored as keys under a subspace (`prefix / (member,)`,
/// empty values). Membership tests are point reads; listing is a scan.
#[derive(Debug, Clone)]
pub struct SetIndex<M> {
    prefix: Subspace,
    _member: PhantomData<fn() -> M>,
}

impl<M> SetIndex<M>
where
    M: TuplePack + for<'de> TupleUnpack<'de>,
{
    /// A set under `prefix`.
    pub fn new(prefix: Subspace) -> Self {
        Self {
            prefix,
            _member: PhantomData,
        }
    }

    fn row(&self, member: &M) -> Marker {
        RowKey::new(self.prefix.pack(&(member,)))
    }

    /// Adds `member` (a no-op when present).
    ///
    /// # Errors
    /// As [`Tx::put`].
    pub fn insert<E: Engine>(&self, tx: &mut Tx<'_, E>, member: &M) -> Result<(), StoreError> {
        tx.put(&self.row(member), &Vec::new())
    }

    /// Removes `member`.
    ///
    /// # Errors
    /// As [`Tx::delete`].
    pub fn remove<E: Engine>(&self, tx: &mut Tx<'_, E>, member: &M) -> Result<(), StoreError> {
        tx.delete(&self.row(member))
    }

    /// Whether `member` is in the set.
    ///
    /// # Errors
    /// As [`Tx::get`].
    pub fn contains<E: Engine>(&self, tx: &mut Tx<'_, E>, member: &M) -> Result<bool, StoreError> {
        Ok(tx.get(&self.row(member))?.is_some())
    }

    /// Up to `limit` members in order, after `after` if given.
    ///
    /// # Errors
    /// As [`Tx::scan`], or a row that does not unpack as a member.
    pub fn members<E: Engine>(
        &self,
        tx: &mut Tx<'_, E>,
        limit: usize,
        after: Option<Cursor>,
    ) -> Result<Members<M>, StoreError> {
        let mut scan = Scan::range_of(self.prefix.tuple_range()).limit(limit);
        if let Some(c) = after {
            scan = scan.after(c);
        }
        let page = tx.scan::<Marker>(&scan)?;
        let items = page
            .items
            .iter()
            .map(|(k, _)| self.prefix.unpack::<(M,)>(&k.0).map(|(m,)| m))
            .collect::<Result<_, _>>()
            .map_err(collection_err)?;
        Ok(Members {
            items,
            more: page.more,
            cursor: page.cursor,
        })
    }
}

const MEMBER: &str = "m";
const SCORE: &str = "s";

/// A sorted set: each member has an `i64` score; members are listed by
/// score. Two rows per member, written in one commit: `prefix / ("m",
/// member)` holding the score, and `prefix / ("s", score, member)` (empty)
/// ordering members by score, then member.
#[derive(Debug, Clone)]
pub struct SortedSet<M> {
    prefix: Subspace,
    _member: PhantomData<fn() -> M>,
}

impl<M> SortedSet<M>
where
    M: TuplePack + for<'de> TupleUnpack<'de>,
{
    /// A sorted set under `prefix`.
    pub fn new(prefix: Subspace) -> Self {
        Self {
            prefix,
            _member: PhantomData,
        }
    }

    fn member_row(&self, member: &M) -> Marker {
        RowKey::new(self.prefix.pack(&(MEMBER, member)))
    }

    fn score_row(&self, score: i64, member: &M) -> Marker {
        RowKey::new(self.prefix.pack(&(SCORE, score, member)))
    }

    /// The score of `member`, if present.
    ///
    /// # Errors
    /// As [`Tx::get`]; [`StoreError::BadCounter`] for a score row that is
    /// not 8 bytes.
    pub fn score<E: Engine>(
        &self,
        tx: &mut Tx<'_, E>,
        member: &M,
    ) -> Result<Option<i64>, StoreError> {
        tx.get(&self.member_row(member))?
            .map(|bytes| {
                <[u8; 8]>::try_from(bytes.as_slice())
                    .map(i64::from_be_bytes)
                    .map_err(|_| StoreError::BadCounter { len: bytes.len() })
            })
            .transpose()
    }

    /// Sets `member`'s score, moving it if present.
    ///
    /// # Errors
    /// As [`SortedSet::score`] and [`Tx::put`].
    pub fn add<E: Engine>(
        &self,
        tx: &mut Tx<'_, E>,
        member: &M,
        score: i64,
    ) -> Result<(), StoreError> {
        match self.score(tx, member)? {
            Some(old) if old == score => return Ok(()),
            Some(_) if strata_engine::fault_point!("sorted-set-move-keeps-old-score") => {}
            Some(old) => tx.delete(&self.score_row(old, member))?,
            None => {}
        }
        tx.put(&self.member_row(member), &score.to_be_bytes().to_vec())?;
        tx.put(&self.score_row(score, member), &Vec::new())
    }

    /// Removes `member`; returns whether it was present.
    ///
    /// # Errors
    /// As [`SortedSet::score`] and [`Tx::delete`].
    pub fn remove<E: Engine>(&self, tx: &mut Tx<'_, E>, member: &M) -> Result<bool, StoreError> {
        let Some(old) = self.score(tx, member)? else {
            return Ok(false);
        };
        tx.delete(&self.score_row(old, member))?;
        tx.delete(&self.member_row(member))?;
        Ok(true)
    }

    /// Up to `limit` members whose score lies in `scores`, by score.
    ///
    /// # Errors
    /// As [`Tx::scan`], or a row that does not unpack.
    pub fn range_by_score<E: Engine>(
        &self,
        tx: &mut Tx<'_, E>,
        scores: impl RangeBounds<i64>,
        limit: usize,
    ) -> Result<Members<(M, i64)>, StoreError> {
        let all = KeyRange::tuple_prefix(&self.prefix.pack(&(SCORE,)));
        let start = match scores.start_bound() {
            Bound::Included(s) => Some(*s),
            Bound::Excluded(s) => s.checked_add(1),
            Bound::Unbounded => Some(i64::MIN),
        };
        let end = match scores.end_bound() {
            Bound::Included(e) => e.checked_add(1),
            Bound::Excluded(e) => Some(*e),
            Bound::Unbounded => None,
        };
        let Some(start) = start else {
            return Ok(Members {
                items: Vec::new(),
                more: false,
                cursor: None,
            });
        };
        let range = KeyRange {
            start: self.prefix.pack(&(SCORE, start)),
            end: end.map_or(all.end, |e| Some(self.prefix.pack(&(SCORE, e)))),
        };
        let page = tx.scan::<Marker>(&Scan::range_of(range).limit(limit))?;
        let items = page
            .items
            .iter()
            .map(|(k, _)| {
                self.prefix
                    .unpack::<(String, i64, M)>(&k.0)
                    .map(|(_, s, m)| (m, s))
            })
            .collect::<Result<_, _>>()
            .map_err(collection_err)?;
        Ok(Members {
            items,
            more: page.more,
            cursor: page.cursor,
        })
    }
}

const HEAD: &str = "h";
const CHUNK: &str = "c";

/// An append-only byte log kept in chunk rows of at most `chunk_bytes`
/// (the activation logs of a function platform): `prefix / ("c", index)`
/// holds chunk `index`, `prefix / ("h",)` the chunk count and the last
/// chunk's length. An append fills the last chunk, then adds chunks, in
/// one commit; concurrent appends to one log conflict on the head and are
/// retried, so the log's order is the commit order.
#[derive(Debug, Clone)]
pub struct ChunkedLog {
    prefix: Subspace,
    chunk_bytes: usize,
}

impl ChunkedLog {
    /// A log under `prefix` with chunks of `chunk_bytes` (at least 1). Keep
    /// a chunk's envelope (`chunk_bytes` plus 9 to 17 bytes) within the
    /// store's value limit, or appends fail with
    /// [`StoreError::ValueTooLarge`].
    pub fn new(prefix: Subspace, chunk_bytes: usize) -> Self {
        Self {
            prefix,
            chunk_bytes: chunk_bytes.max(1),
        }
    }

    fn head_row(&self) -> Marker {
        RowKey::new(self.prefix.pack(&(HEAD,)))
    }

    fn chunk_row(&self, index: u32) -> Marker {
        RowKey::new(self.prefix.pack(&(CHUNK, index)))
    }

    /// The chunk count and the last chunk's length.
    fn head<E: Engine>(&self, tx: &mut Tx<'_, E>) -> Result<(u32, usize), StoreError> {
        match tx.get(&self.head_row())? {
            None => Ok((0, 0)),
            Some(b) => {
                let b: [u8; 8] = b
                    .as_slice()
                    .try_into()
                    .map_err(|_| StoreError::BadCounter { len: b.len() })?;
                let [c0, c1, c2, c3, l0, l1, l2, l3] = b;
                Ok((
                    u32::from_be_bytes([c0, c1, c2, c3]),
                    u32::from_be_bytes([l0, l1, l2, l3]) as usize,
                ))
            }
        }
    }

    /// Appends `bytes`.
    ///
    /// # Errors
    /// As [`Tx::get`] and [`Tx::put`]; the commit's limits apply to the
    /// whole append (split a large append across transactions).
    pub fn append<E: Engine>(
        &self,
        tx: &mut Tx<'_, E>,
        mut bytes: &[u8],
    ) -> Result<(), StoreError> {
        let (mut count, mut last_len) = self.head(tx)?;
        if count > 0 && last_len < self.chunk_bytes && !bytes.is_empty() {
            let index = count - 1;
            let mut last = tx.get(&self.chunk_row(index))?.unwrap_or_default();
            let take = (self.chunk_bytes - last.len()).min(bytes.len());
            last.extend_from_slice(&bytes[..take]);
            bytes = &bytes[take..];
            last_len = last.len();
            tx.put(&self.chunk_row(index), &last)?;
        }
        for piece in bytes.chunks(self.chunk_bytes) {
            tx.put(&self.chunk_row(count), &piece.to_vec())?;
            count = count.checked_add(1).ok_or(StoreError::Chunk {
                key_type: "collection row",
                source: strata_codec::ChunkError::TooLarge { len: bytes.len() },
            })?;
            last_len = piece.len();
        }
        let mut head = count.to_be_bytes().to_vec();
        head.extend_from_slice(&u32::try_from(last_len).unwrap_or(u32::MAX).to_be_bytes());
        tx.put(&self.head_row(), &head)
    }

    /// The log's length in bytes.
    ///
    /// # Errors
    /// As [`Tx::get`].
    pub fn len<E: Engine>(&self, tx: &mut Tx<'_, E>) -> Result<u64, StoreError> {
        let (count, last) = self.head(tx)?;
        Ok(match count {
            0 => 0,
            n => u64::from(n - 1) * self.chunk_bytes as u64 + last as u64,
        })
    }

    /// Up to `limit` chunks from chunk `from` on, in order, with whether
    /// more follow.
    ///
    /// # Errors
    /// As [`Tx::scan`].
    pub fn chunks<E: Engine>(
        &self,
        tx: &mut Tx<'_, E>,
        from: u32,
        limit: usize,
    ) -> Result<Members<Vec<u8>>, StoreError> {
        let all = KeyRange::tuple_prefix(&self.prefix.pack(&(CHUNK,)));
        let range = KeyRange {
            start: self.prefix.pack(&(CHUNK, from)),
            end: all.end,
        };
        let page = tx.scan::<Marker>(&Scan::range_of(range).limit(limit))?;
        Ok(Members {
            items: page.items.into_iter().map(|(_, v)| v).collect(),
            more: page.more,
            cursor: page.cursor,
        })
    }

    /// The whole log.
    ///
    /// # Errors
    /// As [`Tx::scan`].
    pub fn read_all<E: Engine>(&self, tx: &mut Tx<'_, E>) -> Result<Vec<u8>, StoreError> {
        let page = self.chunks(tx, 0, usize::MAX)?;
        Ok(page.items.concat())
    }
}
