//! Typed reads: point reads and streaming scans over one snapshot.

use std::borrow::Cow;
use std::marker::PhantomData;
use std::ops::{Bound, ControlFlow};

use strata_codec::{
    ChecksumCheck, ChunkLayout, DecodeOptions, Header, Value, check_opened, decode_opened_owned,
    open, verify,
};
use strata_engine::{Engine, RangeSpec, RowCursor, Snapshot};
use strata_keys::{Key, KeyRange};

use crate::{Store, StoreError};

/// Where a scan resumes: after the last key it returned.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Cursor(pub(crate) Vec<u8>);

impl Cursor {
    /// The last key returned, encoded.
    pub fn key_bytes(&self) -> &[u8] {
        &self.0
    }

    /// A cursor after `key` (encoded), for a caller that stored one.
    pub fn after(key: impl Into<Vec<u8>>) -> Self {
        Self(key.into())
    }
}

/// What to scan: a key range, a direction, a limit, a resume point.
///
/// ```
/// use strata_keys::KeyRange;
/// use strata_store::Scan;
///
/// let scan = Scan::prefix(b"user/").limit(100).reverse();
/// assert_eq!(scan.range(), &KeyRange::prefix(b"user/"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scan {
    range: KeyRange,
    limit: Option<usize>,
    reverse: bool,
    after: Option<Cursor>,
    skip_other_types: bool,
}

impl Scan {
    /// Every key in `range`.
    pub fn range_of(range: KeyRange) -> Self {
        Self {
            range,
            limit: None,
            reverse: false,
            after: None,
            skip_other_types: false,
        }
    }

    /// Every key starting with `prefix` (the `strinc` rule; use
    /// [`Scan::range_of`] with a `tuple_range()` for tuple subspaces).
    pub fn prefix(prefix: &[u8]) -> Self {
        Self::range_of(KeyRange::prefix(prefix))
    }

    /// Every key.
    pub fn all() -> Self {
        Self::range_of(KeyRange {
            start: Vec::new(),
            end: None,
        })
    }

    /// At most `n` entries; the result says whether more remain.
    #[must_use]
    pub fn limit(mut self, n: usize) -> Self {
        self.limit = Some(n);
        self
    }

    /// Descending key order.
    #[must_use]
    pub fn reverse(mut self) -> Self {
        self.reverse = !self.reverse;
        self
    }

    /// Resumes after `cursor` (in the scan's direction).
    #[must_use]
    pub fn after(mut self, cursor: Cursor) -> Self {
        self.after = Some(cursor);
        self
    }

    /// Skips rows whose key is not of the scanned key type (another record
    /// family under the same prefix) instead of failing on the first one.
    /// Nothing is hidden silently: the scan counts them
    /// ([`Page::skipped`], [`ScanIter::skipped`]). Without it, such a row
    /// is a [`StoreError::Key`] error.
    ///
    /// ```
    /// use strata_keys::KeyRange;
    /// use strata_store::Scan;
    ///
    /// let scan = Scan::prefix(b"fn/1/ver/").skip_other_types();
    /// assert!(scan.skips_other_types());
    /// ```
    #[must_use]
    pub fn skip_other_types(mut self) -> Self {
        self.skip_other_types = true;
        self
    }

    /// Whether rows of other key types are skipped (and counted).
    pub fn skips_other_types(&self) -> bool {
        self.skip_other_types
    }

    /// The key range.
    pub fn range(&self) -> &KeyRange {
        &self.range
    }

    pub(crate) fn max(&self) -> usize {
        self.limit.unwrap_or(usize::MAX)
    }

    pub(crate) fn is_reverse(&self) -> bool {
        self.reverse
    }

    /// The engine range this scan reads (no limit: expired rows are
    /// skipped, so the engine cannot count for us).
    pub(crate) fn spec(&self) -> RangeSpec {
        let RangeSpec {
            mut start, mut end, ..
        } = RangeSpec::from(&self.range);
        if let Some(Cursor(after)) = &self.after {
            if self.reverse {
                if self.range.end.as_ref().is_none_or(|e| after < e) {
                    end = Bound::Excluded(after.clone());
                }
            } else if *after >= self.range.start {
                start = Bound::Excluded(after.clone());
            }
        }
        RangeSpec {
            start,
            end,
            reverse: self.reverse,
            limit: None,
        }
    }
}

/// A value with its expiry, from the `get_with_expiry` reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expiring<V> {
    /// The value read, decoded.
    pub value: V,
    /// When it expires, in milliseconds since the epoch on the store's
    /// clock; `None` when it never does.
    pub expires_at: Option<u64>,
}

/// One page of a collected scan.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Page<K: Key> {
    /// The entries, in scan order.
    pub items: Vec<(K, K::Value)>,
    /// Whether entries remain after the last one (the limit stopped it).
    pub more: bool,
    /// Resume point: after the last entry returned (`None` when empty).
    pub cursor: Option<Cursor>,
    /// Rows of other key types passed over on this page
    /// ([`Scan::skip_other_types`]; always 0 without it).
    pub skipped: usize,
}

impl<K: Key> Page<K> {
    /// The scan that continues this page, if `more`.
    pub fn next(&self, scan: &Scan) -> Option<Scan> {
        (self.more)
            .then(|| self.cursor.clone().map(|c| scan.clone().after(c)))
            .flatten()
    }
}

/// A consistent typed view of a store at one engine version.
pub struct ReadView<'s, E: Engine> {
    pub(crate) store: &'s Store<E>,
    pub(crate) snap: E::Snapshot<'s>,
    pub(crate) now: u64,
}

impl<'s, E: Engine + 's> ReadView<'s, E> {
    /// The engine version this view reads.
    ///
    /// # Errors
    /// A backend read failure.
    pub fn version(&self) -> Result<u64, StoreError> {
        Ok(self.snap.version()?)
    }

    /// The clock reading this view treats as now, for expiry.
    pub fn now_ms(&self) -> u64 {
        self.now
    }

    /// The value of `key`, or `None` when absent or expired.
    ///
    /// # Errors
    /// The key does not pack, the value does not decode, or the engine fails.
    pub fn get<K>(&self, key: &K) -> Result<Option<K::Value>, StoreError>
    where
        K: Key,
        K::Value: Value,
    {
        Ok(self.get_with_expiry(key)?.map(|e| e.value))
    }

    /// The value of `key` with its expiry in milliseconds since the epoch
    /// (`None`: it never expires), or `None` when absent or expired.
    ///
    /// # Errors
    /// As [`ReadView::get`].
    pub fn get_with_expiry<K>(&self, key: &K) -> Result<Option<Expiring<K::Value>>, StoreError>
    where
        K: Key,
        K::Value: Value,
    {
        self.store.get_at(&self.snap, key, || self.now)
    }

    /// The counter at `key` at this snapshot (0 when absent): read with the
    /// view's values, so totals and the rows they count agree.
    ///
    /// # Errors
    /// [`StoreError::BadCounter`]; the key does not pack; an engine
    /// failure.
    pub fn counter<K: Key<Value = crate::Counter>>(&self, key: &K) -> Result<i64, StoreError> {
        let bytes = key.pack().map_err(StoreError::key::<K>)?;
        crate::tx::counter_value(self.snap.get(self.store.data, &bytes)?.as_deref())
    }

    /// Streams the entries of `scan`, decoding keys as `K`: a row of
    /// another key type is an error item ([`StoreError::Key`], found from
    /// the key before any value is read), or, with
    /// [`Scan::skip_other_types`], a skipped and counted row. Expired
    /// values are skipped. After the iterator ends, [`ScanIter::more`] and
    /// [`ScanIter::cursor`] say whether and where to continue.
    ///
    /// # Errors
    /// The range is invalid or the engine fails.
    pub fn scan<K>(&self, scan: &Scan) -> Result<ScanIter<'_, 's, E, K>, StoreError>
    where
        K: Key,
        K::Value: Value,
    {
        let rows = self.snap.cursor(self.store.data, scan.spec())?;
        Ok(ScanIter {
            view: self,
            rows,
            state: ScanState {
                left: scan.max(),
                skip_other_types: scan.skips_other_types(),
                skipped: 0,
                more: false,
                last: None,
                done: false,
            },
            _key: PhantomData,
        })
    }

    /// [`ReadView::scan`] collected into a [`Page`].
    ///
    /// # Errors
    /// The first error item of the scan.
    pub fn scan_page<K>(&self, scan: &Scan) -> Result<Page<K>, StoreError>
    where
        K: Key,
        K::Value: Value,
    {
        let mut it = self.scan::<K>(scan)?;
        let items = it.by_ref().collect::<Result<Vec<_>, _>>()?;
        Ok(Page {
            items,
            more: it.more(),
            cursor: it.cursor(),
            skipped: it.skipped(),
        })
    }
}

/// A streaming typed scan; see [`ReadView::scan`].
pub struct ScanIter<'v, 's, E: Engine, K> {
    view: &'v ReadView<'s, E>,
    rows: <E::Snapshot<'s> as Snapshot>::Cursor<'v>,
    state: ScanState,
    _key: PhantomData<fn() -> K>,
}

/// Where a [`ScanIter`] stands, apart from its rows (so that the engine's
/// cursor can run the loop and hand each row to [`ScanState::row`]).
struct ScanState {
    left: usize,
    skip_other_types: bool,
    skipped: usize,
    more: bool,
    last: Option<Vec<u8>>,
    done: bool,
}

/// What one row of the engine's made of a typed scan.
enum RowStep<R> {
    /// Not an entry (expired, or of another key type skipped).
    Skip,
    /// The limit is reached and a live row lies beyond it.
    End,
    /// An entry given to the caller.
    Entry(R),
    /// A damaged row, or one of another key type (boxed: a step is
    /// returned for every row, and a `StoreError` is larger than an
    /// entry).
    Failed(Box<StoreError>),
}

impl<E: Engine, K> ScanIter<'_, '_, E, K> {
    /// Whether the limit stopped the scan with entries left (known once
    /// the iterator has returned `None`).
    pub fn more(&self) -> bool {
        self.state.more
    }

    /// Resume point: after the last entry returned.
    pub fn cursor(&self) -> Option<Cursor> {
        self.state.last.clone().map(Cursor)
    }

    /// Rows of other key types passed over so far
    /// ([`Scan::skip_other_types`]).
    pub fn skipped(&self) -> usize {
        self.state.skipped
    }
}

impl<E, K> ScanIter<'_, '_, E, K>
where
    E: Engine,
    K: Key,
    K::Value: Value,
{
    /// Hands every remaining entry to `f` with its value lent, not
    /// decoded: the body borrowed from the engine's buffer until `f`
    /// returns (no copy, no allocation for a value stored in one row),
    /// checked as [`ScanIter`]'s items are (the checksum, unless the store
    /// skips it; the codec and schema version of `K::Value`). The rows,
    /// the limit, [`ScanIter::more`], [`ScanIter::cursor`] and skipped
    /// rows are those of the iterator, and the two can be mixed. `f`
    /// stops the scan by returning an error of its own; the cursor is then
    /// after the entry it was given.
    ///
    /// ```
    /// use strata_codec::Limits;
    /// use strata_engine::MemEngine;
    /// use strata_keys::tuple_key;
    /// use strata_store::{Scan, Store, StoreError, StoreOptions};
    ///
    /// #[derive(Debug, Clone, PartialEq)]
    /// struct Blob { id: u64 }
    /// tuple_key! { Blob -> Vec<u8> = ("blob", {id}); }
    ///
    /// let options = StoreOptions::new(Limits::FOUNDATIONDB);
    /// let store = Store::open(MemEngine::open(options.keyspace_specs())?, options)?;
    /// store.put(&Blob { id: 1 }, &b"first".to_vec())?;
    /// store.put(&Blob { id: 2 }, &b"second".to_vec())?;
    ///
    /// let view = store.read()?;
    /// let mut scan = view.scan::<Blob>(&Scan::prefix(b"").limit(10))?;
    /// let mut total = 0;
    /// scan.try_for_each_lent(|key, value| {
    ///     // A raw value's body is the value itself: summed in place.
    ///     total += key.id as usize * value.body().len();
    ///     Ok::<_, StoreError>(())
    /// })?;
    /// assert_eq!(total, 5 + 2 * 6);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// The first error of the scan (as the iterator's error items), or
    /// the first `f` returns.
    pub fn try_for_each_lent<Er, F>(&mut self, mut f: F) -> Result<(), Er>
    where
        Er: From<StoreError>,
        F: FnMut(K, LentValue<'_, K::Value>) -> Result<(), Er>,
    {
        if self.state.done {
            return Ok(());
        }
        // The engine's cursor runs the loop (redb's guards it once against
        // its backend's panic, not each row).
        let (view, state) = (self.view, &mut self.state);
        let flow = self.rows.try_for_each_row(|key, meta| {
            match state.row::<K, E>(view, key, meta, &mut ()) {
                RowStep::Skip => ControlFlow::Continue(()),
                RowStep::End => ControlFlow::Break(Ok(())),
                RowStep::Entry((key, value)) => match f(key, value) {
                    Ok(()) => ControlFlow::Continue(()),
                    Err(e) => ControlFlow::Break(Err(e)),
                },
                RowStep::Failed(e) => ControlFlow::Break(Err(Er::from(*e))),
            }
        });
        match flow {
            Ok(ControlFlow::Continue(())) => Ok(()),
            Ok(ControlFlow::Break(result)) => result,
            Err(e) => Err(Er::from(e.into())),
        }
    }

    /// As the iterator's `next`, an error item naming its row: the packed
    /// key of the row whose key does not unpack as `K` or whose value does
    /// not open, assemble or decode (a damaged row), `None` for an error of
    /// the engine itself. For a caller that goes on past damaged rows (the
    /// scan moves on to the next row) and reports them. The iterator's own
    /// `next` does not pay for it.
    ///
    /// ```
    /// use strata_codec::Limits;
    /// use strata_engine::{Commit, Engine as _, MemEngine, Snapshot as _};
    /// use strata_keys::{Key as _, tuple_key};
    /// use strata_store::{Scan, Store, StoreOptions};
    ///
    /// #[derive(Debug, Clone, PartialEq)]
    /// struct Note { id: u64 }
    /// tuple_key! { Note -> String = ("note", {id}); }
    ///
    /// let options = StoreOptions::new(Limits::FOUNDATIONDB);
    /// let store = Store::open(MemEngine::open(options.keyspace_specs())?, options)?;
    /// for id in 1..=3 {
    ///     store.put(&Note { id }, &format!("note {id}"))?;
    /// }
    /// // Damage the second row's stored bytes (its checksum no longer holds).
    /// let data = store.engine().keyspace("data")?;
    /// let key = Note { id: 2 }.pack()?;
    /// let mut row = store.engine().snapshot()?.get(data, &key)?.expect("stored");
    /// *row.last_mut().expect("a body") ^= 1;
    /// store.engine().commit(Commit::new().put(data, key.clone(), row))?;
    ///
    /// let view = store.read()?;
    /// let mut scan = view.scan::<Note>(&Scan::all())?;
    /// let (mut good, mut damaged) = (Vec::new(), Vec::new());
    /// while let Some(entry) = scan.next_naming_row() {
    ///     match entry {
    ///         Ok((note, _)) => good.push(note.id),
    ///         Err((_, row)) => damaged.push(row),
    ///     }
    /// }
    /// assert_eq!(good, [1, 3]);
    /// assert_eq!(damaged, [Some(key)]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[allow(clippy::type_complexity, clippy::result_large_err)] // an error with its row, as `next`'s
    pub fn next_naming_row(
        &mut self,
    ) -> Option<Result<(K, K::Value), (StoreError, Option<Vec<u8>>)>> {
        let mut failed: Option<Vec<u8>> = None;
        let entry = self.next_with(&mut failed, |key, value| match value.decode() {
            Ok(v) => Ok((key, v)),
            // The value opened, its body did not decode.
            Err(e) => Err((e, key.pack().ok())),
        })?;
        Some(match entry {
            Ok(decoded) => decoded,
            Err(e) => Err((e, failed)),
        })
    }

    /// The next entry, given to `f` with its value lent; what `f` returns.
    /// A row that fails (its key or its value) is given to `failed`
    /// first (`()` for callers that do not ask: nothing is done).
    #[inline]
    fn next_with<R>(
        &mut self,
        failed: &mut impl FailedRow,
        f: impl FnOnce(K, LentValue<'_, K::Value>) -> R,
    ) -> Option<Result<R, StoreError>> {
        while !self.state.done {
            let (key, meta) = match self.rows.next_row()? {
                Ok(row) => row,
                Err(e) => return Some(Err(e.into())),
            };
            match self.state.row::<K, E>(self.view, key, meta, failed) {
                RowStep::Skip => {}
                RowStep::End => return None,
                RowStep::Entry((key, value)) => return Some(Ok(f(key, value))),
                RowStep::Failed(e) => return Some(Err(*e)),
            }
        }
        None
    }
}

impl ScanState {
    /// One row of the engine's, `key` holding `meta`: skipped, the end
    /// (the limit reached with a live row of this type beyond it), or an
    /// entry, its value lent (a row that fails, its key or its value, is
    /// given to `failed` first).
    #[inline]
    #[allow(clippy::type_complexity)] // an entry with its value lent
    fn row<'m, K, E>(
        &mut self,
        view: &ReadView<'_, E>,
        key: &[u8],
        meta: &'m [u8],
        failed: &mut impl FailedRow,
    ) -> RowStep<(K, LentValue<'m, K::Value>)>
    where
        E: Engine,
        K: Key,
        K::Value: Value,
    {
        let now = view.now;
        if self.left == 0 {
            // Is there one more live row of this type beyond the limit?
            if !live(meta, now) || (self.skip_other_types && K::unpack(key).is_err()) {
                return RowStep::Skip;
            }
            self.more = true;
            self.done = true;
            return RowStep::End;
        }
        let typed = match K::unpack(key) {
            Ok(k) => k,
            Err(_) if self.skip_other_types => {
                self.skipped += 1;
                return RowStep::Skip;
            }
            Err(e) => {
                failed.row(key);
                return RowStep::Failed(Box::new(StoreError::key::<K>(e)));
            }
        };
        match view.store.lend_row::<K, _>(&view.snap, key, meta, || now) {
            Ok(None) => RowStep::Skip,
            Ok(Some(value)) => {
                self.left -= 1;
                let keep_first =
                    strata_engine::fault_point!("cursor-after-first-row") && self.last.is_some();
                if !keep_first {
                    // The last key's buffer is reused row to row.
                    let last = self.last.get_or_insert_with(Vec::new);
                    last.clear();
                    last.extend_from_slice(key);
                }
                RowStep::Entry((typed, value))
            }
            Err(e) => {
                failed.row(key);
                RowStep::Failed(Box::new(e))
            }
        }
    }
}

impl<E, K> Iterator for ScanIter<'_, '_, E, K>
where
    E: Engine,
    K: Key,
    K::Value: Value,
{
    type Item = Result<(K, K::Value), StoreError>;

    fn next(&mut self) -> Option<Self::Item> {
        self.next_with(&mut (), |key, value| value.decode().map(|v| (key, v)))
            .map(|entry| entry.and_then(|decoded| decoded))
    }
}

/// Where [`ScanIter`]'s step puts the key of a row that fails.
trait FailedRow {
    fn row(&mut self, key: &[u8]);
}

/// Nobody asked: nothing is kept (and nothing is compiled in).
impl FailedRow for () {
    #[inline(always)]
    fn row(&mut self, _key: &[u8]) {}
}

/// The key, copied.
impl FailedRow for Option<Vec<u8>> {
    #[cold]
    fn row(&mut self, key: &[u8]) {
        *self = Some(key.to_vec());
    }
}

/// A value lent by [`ScanIter::try_for_each_lent`]: its envelope,
/// borrowed from the engine's buffer (a chunked value's assembled from its
/// chunks), opened and checked but not decoded.
pub struct LentValue<'a, V> {
    /// The whole envelope: header, then body.
    envelope: Cow<'a, [u8]>,
    /// The value's expiry (a chunked value's, from its manifest).
    expires_at: Option<u64>,
    /// The key type's name, for decode errors (one word, not two: a
    /// scan hands a lent value on for every row).
    key_type: &'static &'static str,
    /// Where the body starts in `envelope` (the header's length).
    body_at: usize,
    /// The schema version the body was written at.
    version: u16,
    _value: PhantomData<fn() -> V>,
}

/// A key type's name behind one pointer ([`LentValue::key_type`]).
struct KeyName<K>(PhantomData<K>);

impl<K: Key> KeyName<K> {
    const NAME: &'static &'static str = &K::NAME;
}

impl<V> LentValue<'_, V> {
    /// The encoded body: for a raw value (`Vec<u8>`, `String`) the
    /// value's own bytes; for a serde value its postcard or JSON bytes at
    /// [`LentValue::version`], for a reader of its own (one that borrows
    /// from them, say).
    #[inline]
    pub fn body(&self) -> &[u8] {
        &self.envelope[self.body_at..]
    }

    /// The schema version the body was written at (at most the value
    /// type's current one; an older body needs the type's migration,
    /// which [`LentValue::decode`] applies).
    pub fn version(&self) -> u16 {
        self.version
    }

    /// When the value expires, in milliseconds since the epoch on the
    /// store's clock; `None` when it never does.
    pub fn expires_at(&self) -> Option<u64> {
        self.expires_at
    }
}

impl<V: Value> LentValue<'_, V> {
    /// The value, decoded (and migrated from an older schema version), as
    /// the scan's iterator returns it.
    ///
    /// # Errors
    /// [`StoreError::Decode`]: the body does not decode as `V`.
    #[inline]
    pub fn decode(&self) -> Result<V, StoreError> {
        V::decode_body(self.version, self.body()).map_err(|source| StoreError::Decode {
            key_type: self.key_type,
            source,
        })
    }
}

impl<V> std::fmt::Debug for LentValue<'_, V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LentValue")
            .field("key_type", self.key_type)
            .field("version", &self.version)
            .field("expires_at", &self.expires_at)
            .field("body_len", &self.body().len())
            .finish_non_exhaustive()
    }
}

/// The data row `meta` whose `header` [`open`] returned, not a chunk
/// manifest, decoded; `None` when expired at `now` (read only for a row
/// that has an expiry).
pub(crate) fn decode_unchunked<K>(
    header: Header,
    meta: Vec<u8>,
    now: impl Fn() -> u64,
) -> Result<Option<Expiring<K::Value>>, StoreError>
where
    K: Key,
    K::Value: Value,
{
    let value = decode_opened_owned::<K::Value>(header, meta).map_err(StoreError::decode::<K>)?;
    Ok((!expired(&header, now)).then_some(Expiring {
        value,
        expires_at: header.expires_at,
    }))
}

/// Whether the value whose envelope has `header` is expired at `now`
/// (read only when it has an expiry).
fn expired(header: &Header, now: impl FnOnce() -> u64) -> bool {
    !strata_engine::fault_point!("expired-still-visible")
        && header.expires_at.is_some()
        && header.is_expired(now())
}

impl<E: Engine> Store<E> {
    /// Decodes the data row `meta` stored at `key`, assembling chunks from
    /// `snap` when it is a chunk manifest; `None` when expired at `now`.
    /// The row's buffer is kept by a value that can (a raw value).
    pub(crate) fn decode_row<K, S>(
        &self,
        snap: &S,
        key: &[u8],
        meta: Vec<u8>,
        now: u64,
    ) -> Result<Option<K::Value>, StoreError>
    where
        K: Key,
        K::Value: Value,
        S: Snapshot,
    {
        Ok(self
            .decode_row_expiring::<K, S>(snap, key, meta, || now)?
            .map(|e| e.value))
    }

    /// The value of `key` in `snap` with its expiry; `now` is read only
    /// for a row that has an expiry.
    pub(crate) fn get_at<K, S>(
        &self,
        snap: &S,
        key: &K,
        now: impl Fn() -> u64,
    ) -> Result<Option<Expiring<K::Value>>, StoreError>
    where
        K: Key,
        K::Value: Value,
        S: Snapshot,
    {
        let bytes = key.pack().map_err(StoreError::key::<K>)?;
        match snap.get(self.data, &bytes)? {
            None => Ok(None),
            Some(meta) => self.decode_row_expiring::<K, S>(snap, &bytes, meta, now),
        }
    }

    /// As [`Store::decode_row`], with the value's expiry (`None`: never).
    ///
    /// `now` is called only for a row that has an expiry: a read of rows
    /// without one never reads the clock.
    pub(crate) fn decode_row_expiring<K, S>(
        &self,
        snap: &S,
        key: &[u8],
        meta: Vec<u8>,
        now: impl Fn() -> u64,
    ) -> Result<Option<Expiring<K::Value>>, StoreError>
    where
        K: Key,
        K::Value: Value,
        S: Snapshot,
    {
        let decode_err = StoreError::decode::<K>;
        // The header is parsed, and the checksum verified, once.
        let (header, _) = open(key, &meta, self.options.decode_options()).map_err(decode_err)?;
        if header.chunked {
            return self
                .lend_row::<K, S>(snap, key, &meta, now)?
                .map(|lent| {
                    lent.decode().map(|value| Expiring {
                        value,
                        expires_at: lent.expires_at,
                    })
                })
                .transpose();
        }
        decode_unchunked::<K>(header, meta, now)
    }

    /// The data row `meta` stored at `key`, opened and lent: the header
    /// parsed and the checksum treated as the store's options say, the
    /// codec and schema version checked against `K::Value`, the body
    /// borrowed from `meta` (a chunk manifest's value assembled from
    /// `snap`); `None` when expired at `now` (read only for a row that
    /// has an expiry).
    #[inline]
    pub(crate) fn lend_row<'m, K, S>(
        &self,
        snap: &S,
        key: &[u8],
        meta: &'m [u8],
        now: impl Fn() -> u64,
    ) -> Result<Option<LentValue<'m, K::Value>>, StoreError>
    where
        K: Key,
        K::Value: Value,
        S: Snapshot,
    {
        let decode_err = StoreError::decode::<K>;
        let options = self.options.decode_options();
        let lent = |header: Header, expires_at, envelope| LentValue {
            envelope,
            expires_at,
            key_type: KeyName::<K>::NAME,
            body_at: header.len,
            version: header.version,
            _value: PhantomData,
        };
        // A manifest must carry a checksum as any envelope the store
        // writes.
        let (header, _) = open(key, meta, options).map_err(decode_err)?;
        if !header.chunked {
            check_opened::<K::Value>(header).map_err(decode_err)?;
            return Ok((!expired(&header, now))
                .then(|| lent(header, header.expires_at, Cow::Borrowed(meta))));
        }
        let whole = self.assemble_chunked(
            snap,
            Manifest { key, meta, header },
            &now,
            K::NAME,
            check_opened::<K::Value>,
        )?;
        Ok(whole.map(|(inner, envelope)| lent(inner, header.expires_at, envelope)))
    }

    /// The value of a chunk manifest `m` (from [`Store::lend_row`]): its
    /// chunks read from `snap` and assembled, the whole envelope opened
    /// and checked by `check` (the codec and version of the key type
    /// `key_type`'s value); `None` when expired at `now`. Not generic over
    /// the key type, so each caller's code holds only the common case (a
    /// typed read was compiled once per key type and snapshot with this in
    /// it).
    #[cold]
    #[inline(never)]
    fn assemble_chunked<'m, S: Snapshot>(
        &self,
        snap: &S,
        m: Manifest<'_, 'm>,
        now: &dyn Fn() -> u64,
        key_type: &'static str,
        check: fn(Header) -> Result<(), strata_codec::DecodeError>,
    ) -> Result<Option<Assembled<'m>>, StoreError> {
        let decode_err = |source| StoreError::Decode { key_type, source };
        let Manifest { key, meta, header } = m;
        // A manifest's checksum is verified even when values' are not: it
        // says which chunk rows make the value.
        if self.options.decode_options().checksum == ChecksumCheck::Skip {
            verify(key, meta).map_err(decode_err)?;
        }
        if expired(&header, now) {
            return Ok(None);
        }
        let rows = self.chunk_rows(snap, key)?;
        let whole = self
            .planner
            .assemble(key, meta, rows)
            .map_err(|source| StoreError::Chunk { key_type, source })?;
        // The whole value's own envelope, checksum verified.
        let (inner, _) = open(key, &whole, DecodeOptions::default()).map_err(decode_err)?;
        check(inner).map_err(decode_err)?;
        Ok(Some((inner, whole)))
    }
}

/// A chunked value assembled: its envelope's header and the envelope.
type Assembled<'m> = (Header, Cow<'m, [u8]>);

/// A chunk manifest row: its key, its bytes and their parsed header.
#[derive(Clone, Copy)]
struct Manifest<'k, 'm> {
    key: &'k [u8],
    meta: &'m [u8],
    header: Header,
}

/// A row: key and value.
type Row = (Vec<u8>, Vec<u8>);

impl<E: Engine> Store<E> {
    /// The chunk rows of the value at data key `key` in `snap`, in order.
    pub(crate) fn chunk_rows<S: Snapshot>(
        &self,
        snap: &S,
        key: &[u8],
    ) -> Result<Vec<Row>, StoreError> {
        let chunks = self.planner.layout().chunks_from(key, 0);
        Ok(snap
            .range(self.system, RangeSpec::from(chunks))?
            .collect::<Result<Vec<_>, _>>()?)
    }
}

/// A data row read without its key type (see [`ReadView::raw`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RawValue {
    /// The value's envelope, reassembled when it was chunked; decode it
    /// with `strata_codec::envelope`.
    pub envelope: Vec<u8>,
    /// The chunk rows it is stored in (`None`: inline).
    pub chunks: Option<u32>,
}

impl<E: Engine> ReadView<'_, E> {
    /// The stored value of data key `key` (encoded) without its key type,
    /// expired or not: its envelope, reassembled from its chunks when
    /// chunked (the whole value's checksum verified). For tools that
    /// decode values they have no type for (`strata get`).
    ///
    /// # Errors
    /// [`StoreError::Chunk`] (key type `"untyped"`) for a chunked value
    /// whose manifest or chunks are damaged; an engine failure.
    pub fn raw(&self, key: &[u8]) -> Result<Option<RawValue>, StoreError> {
        let Some(meta) = self.snap.get(self.store.data, key)? else {
            return Ok(None);
        };
        let chunk_err = |source| StoreError::Chunk {
            key_type: "untyped",
            source,
        };
        let Some(manifest) = Header::read(&meta)
            .ok()
            .filter(|h| h.chunked)
            .map(|_| self.store.planner.read_meta(key, &meta))
            .transpose()
            .map_err(chunk_err)?
            .flatten()
        else {
            return Ok(Some(RawValue {
                envelope: meta,
                chunks: None,
            }));
        };
        let rows = self.store.chunk_rows(&self.snap, key)?;
        let whole = self
            .store
            .planner
            .assemble(key, &meta, rows)
            .map_err(chunk_err)?;
        Ok(Some(RawValue {
            envelope: whole.into_owned(),
            chunks: Some(manifest.chunk_count),
        }))
    }
}

/// Whether a data row holds a value that has not expired at `now`, by its
/// header alone (a row whose header does not parse counts as live: it is
/// there, and reading it will say what is wrong).
pub(crate) fn live(meta: &[u8], now: u64) -> bool {
    Header::read(meta).map_or(true, |h| !h.is_expired(now))
}
