//! The actor KV's operations on a store: get, put, delete, delete range and
//! list, in either physical layout, with the engine's limits and an exact
//! per-actor quota.

use std::collections::BTreeSet;

use strata_codec::{
    ChunkLayout, ChunkPlanner, Codec, DecodeError, EncodeError, EncodeOptions, Previous, Value,
};
use strata_engine::{Engine, Profile};
use strata_keys::{KeyRange, strinc, tuple};
use strata_store::{Space, Store, StoreError, StoreOptions, Tx};

use super::physical::{
    self, ActorId, CHUNK_SIZE, DATA, KvMetadata, METADATA, RowKind, entry_base, wrapped_len,
};
use super::{ActorKvError, DataProblem, corrupt};

mod migration;
mod rows;
mod usage;

pub(crate) use self::migration::{LayoutState, state_key};
pub(crate) use self::rows::{charged, decode_entry};

/// The engine's limits, checked on the logical request as the engine
/// checks them.
pub mod limits {
    /// Largest key, counted as the engine counts it: its length plus 2
    /// (`KeyWrapper::tuple_len`).
    pub const MAX_KEY_SIZE: usize = 2_048;
    /// Largest value.
    pub const MAX_VALUE_SIZE: usize = 131_072;
    /// Most keys of one get, put or delete.
    pub const MAX_KEYS: usize = 128;
    /// Most payload of one put: wrapped keys plus values (976 KiB).
    pub const MAX_PUT_PAYLOAD_SIZE: usize = 976 * 1_024;
    /// The default per-actor quota, as the engine now has it (10 GiB).
    pub const DEFAULT_QUOTA: u64 = 10 << 30;
    /// Entries a list returns when it gives no limit.
    pub const DEFAULT_LIST_LIMIT: usize = 16_384;
}

/// The space holding every actor's rows.
pub const ROWS_SPACE: &str = "akv";
/// The space holding each actor's quota usage and layout state.
pub const META_SPACE: &str = "akv_meta";

/// How an actor's entries are stored. The key tree is the same in both;
/// the row values differ.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum PhysicalLayout {
    /// Strata's: the metadata row is a checksummed envelope (over the
    /// row's actor and key) holding the metadata and the value, or, for a
    /// value over 10,000 bytes, a chunk manifest with the value's CRC-32,
    /// the value's envelope then being in the data rows.
    #[default]
    Native,
    /// The actor engine's own: a BARE `KvMetadata` in the metadata row and
    /// the raw value in 10,000-byte data rows, nothing else. Readable and
    /// writable by that engine. No checksum: see the module docs.
    Compatible,
}

impl PhysicalLayout {
    const fn code(self) -> u8 {
        match self {
            Self::Native => 0,
            Self::Compatible => 1,
        }
    }

    fn from_code(code: u8) -> Option<Self> {
        match code {
            0 => Some(Self::Native),
            1 => Some(Self::Compatible),
            _ => None,
        }
    }
}

/// How an [`ActorKv`] stores and limits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActorKvConfig {
    /// The layout of actors that have no layout recorded yet (an actor's
    /// first write records it; [`ActorKv::migrate`] changes it).
    pub layout: PhysicalLayout,
    /// Most bytes one actor may store, counted as the engine counts a put's
    /// payload: each entry's key plus 2, plus its value.
    pub quota_bytes: u64,
    /// The writer version recorded in each entry's metadata.
    pub version: Vec<u8>,
}

impl Default for ActorKvConfig {
    fn default() -> Self {
        Self {
            layout: PhysicalLayout::Native,
            quota_bytes: limits::DEFAULT_QUOTA,
            version: concat!("strata-", env!("CARGO_PKG_VERSION"))
                .as_bytes()
                .to_vec(),
        }
    }
}

/// One stored entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The logical key, as the actor wrote it.
    pub key: Vec<u8>,
    /// The bytes stored, whole (every chunk joined and checked).
    pub value: Vec<u8>,
    /// The writer version and update time.
    pub metadata: KvMetadata,
}

impl Entry {
    /// Bytes it counts against the quota: the key plus 2, plus the value.
    pub fn charged_size(&self) -> u64 {
        charged(&self.key, self.value.len())
    }
}

/// Which entries a list reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListQuery {
    /// Every entry of the actor.
    All,
    /// Entries whose key starts with these bytes (including keys whose next
    /// byte is `0xFF`).
    Prefix(Vec<u8>),
    /// Entries from `start` (inclusive) to `end`, which `exclusive` leaves
    /// out.
    Range {
        /// First key.
        start: Vec<u8>,
        /// Last key, or the bound before it.
        end: Vec<u8>,
        /// Whether `end` itself is left out.
        exclusive: bool,
    },
}

/// How a list reads.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ListOptions {
    /// From the last key down.
    pub reverse: bool,
    /// Most entries returned (default [`limits::DEFAULT_LIST_LIMIT`]).
    pub limit: Option<usize>,
    /// Continue after this key (the last key of the previous page).
    pub after: Option<Vec<u8>>,
}

/// One page of a list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListPage {
    /// Entries in key order (descending when reversed).
    pub entries: Vec<Entry>,
    /// Whether entries remain after the last one: set only when one was
    /// seen, never guessed from the count.
    pub more: bool,
}

impl ListPage {
    /// Options reading the next page: `options` continued after the last
    /// entry, or `None` when there is no more.
    pub fn next(&self, options: &ListOptions) -> Option<ListOptions> {
        let last = self.entries.last()?;
        self.more.then(|| ListOptions {
            after: Some(last.key.clone()),
            ..options.clone()
        })
    }
}

/// Progress of a layout migration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MigrationStep {
    /// Entries rewritten by this step.
    pub migrated: usize,
    /// Whether the actor is now wholly in the target layout.
    pub done: bool,
}

/// The actor KV on a store: per-actor isolated keyspaces in one space.
///
/// ```
/// use strata_engine::MemEngine;
/// use strata_actor_kv::{ActorId, ActorKv, ActorKvConfig, ListOptions, ListQuery};
/// use strata_store::Store;
///
/// let options = ActorKv::<MemEngine>::store_options();
/// let store = Store::open(MemEngine::open(options.keyspace_specs())?, options)?;
/// let kv = ActorKv::open(store, ActorKvConfig::default())?;
/// let actor = ActorId::v1(7, 1);
/// kv.put(actor, &[(b"a".to_vec(), b"1".to_vec()), (b"b".to_vec(), vec![2; 30_000])])?;
/// assert_eq!(kv.get(actor, &[b"b".to_vec()])?[0].as_ref().map(|e| e.value.len()), Some(30_000));
/// let page = kv.list(actor, &ListQuery::All, &ListOptions { limit: Some(1), ..Default::default() })?;
/// assert_eq!((page.entries.len(), page.more), (1, true));
/// assert_eq!(kv.usage(actor)?, 3 + 1 + 3 + 30_000);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct ActorKv<E: Engine> {
    store: Store<E>,
    config: ActorKvConfig,
    rows: Space,
    meta: Space,
}

impl<E: Engine> std::fmt::Debug for ActorKv<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ActorKv")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

/// Rows read from the rows space.
type Rows = Vec<(Vec<u8>, Vec<u8>)>;

/// Checks one key against the key limit, as the engine counts it.
pub(crate) fn check_key(index: usize, key: &[u8]) -> Result<(), ActorKvError> {
    let len = wrapped_len(key);
    if len > limits::MAX_KEY_SIZE {
        return Err(ActorKvError::KeyTooLarge {
            index,
            len,
            max: limits::MAX_KEY_SIZE,
        });
    }
    Ok(())
}

fn check_keys(keys: &[Vec<u8>]) -> Result<(), ActorKvError> {
    if keys.len() > limits::MAX_KEYS {
        return Err(ActorKvError::TooManyKeys {
            count: keys.len(),
            max: limits::MAX_KEYS,
        });
    }
    keys.iter()
        .enumerate()
        .try_for_each(|(index, key)| check_key(index, key))
}

/// Checks a put as the engine does, plus duplicate keys.
pub(crate) fn check_entries(entries: &[(Vec<u8>, Vec<u8>)]) -> Result<(), ActorKvError> {
    if entries.len() > limits::MAX_KEYS {
        return Err(ActorKvError::TooManyKeys {
            count: entries.len(),
            max: limits::MAX_KEYS,
        });
    }
    let mut seen = BTreeSet::new();
    let mut payload = 0usize;
    for (index, (key, value)) in entries.iter().enumerate() {
        check_key(index, key)?;
        // An empty value is a value, as the engine takes it: a metadata row
        // and no data rows.
        if value.len() > limits::MAX_VALUE_SIZE {
            return Err(ActorKvError::ValueTooLarge {
                index,
                len: value.len(),
                max: limits::MAX_VALUE_SIZE,
            });
        }
        if !seen.insert(key.as_slice()) {
            return Err(ActorKvError::DuplicateKey { index });
        }
        payload += wrapped_len(key) + value.len();
    }
    if payload > limits::MAX_PUT_PAYLOAD_SIZE {
        return Err(ActorKvError::PayloadTooLarge {
            bytes: payload,
            max: limits::MAX_PUT_PAYLOAD_SIZE,
        });
    }
    Ok(())
}

/// The row range of a list query.
fn query_range(actor: ActorId, query: &ListQuery) -> Result<KeyRange, ActorKvError> {
    let sub = physical::subspace(actor);
    Ok(match query {
        ListQuery::All => KeyRange::prefix(&sub),
        ListQuery::Prefix(prefix) => {
            check_key(0, prefix)?;
            let mut start = sub;
            physical::list_prefix(prefix, &mut start);
            KeyRange::prefix(&start)
        }
        ListQuery::Range {
            start,
            end,
            exclusive,
        } => {
            check_key(0, start)?;
            check_key(1, end)?;
            let end_base = entry_base(actor, end);
            KeyRange {
                start: entry_base(actor, start),
                end: Some(if *exclusive {
                    end_base
                } else {
                    past_entry(&end_base)
                }),
            }
        }
    })
}

/// The first key after every row of the entry at `base`.
fn past_entry(base: &[u8]) -> Vec<u8> {
    // An entry base starts with the tuple code 0x14, so it has a byte
    // below 0xFF to increment.
    strinc(base).unwrap_or_else(|| unreachable!("an entry base has a byte below 0xFF"))
}

impl From<StoreError> for ActorKvError {
    fn from(e: StoreError) -> Self {
        Self::Store(Box::new(e))
    }
}

impl<E: Engine> ActorKv<E> {
    /// Store options with the actor KV's spaces and FoundationDB's
    /// physical limits (every row the layouts write fits them; see the
    /// module docs).
    pub fn store_options() -> StoreOptions {
        Self::declare(StoreOptions::new(strata_codec::Limits::FOUNDATIONDB))
    }

    /// `options` with the actor KV's two spaces added.
    pub fn declare(options: StoreOptions) -> StoreOptions {
        options
            .space(ROWS_SPACE, Profile::General)
            .space(META_SPACE, Profile::PointLookup)
    }

    /// The actor KV on `store`, opened with [`ActorKv::declare`]d options.
    ///
    /// # Errors
    /// [`StoreError::UnknownSpace`] (as [`ActorKvError::Store`]) when the
    /// spaces were not declared.
    pub fn open(store: Store<E>, config: ActorKvConfig) -> Result<Self, ActorKvError> {
        let rows = store.space(ROWS_SPACE)?;
        let meta = store.space(META_SPACE)?;
        Ok(Self {
            store,
            config,
            rows,
            meta,
        })
    }

    /// The store underneath.
    pub fn store(&self) -> &Store<E> {
        &self.store
    }

    /// Gives the store back.
    pub fn into_store(self) -> Store<E> {
        self.store
    }

    /// The configuration.
    pub fn config(&self) -> &ActorKvConfig {
        &self.config
    }

    /// The entries of `keys`, in their order (`None` where absent), from
    /// one snapshot.
    ///
    /// # Errors
    /// [`ActorKvError::TooManyKeys`], [`ActorKvError::KeyTooLarge`],
    /// [`ActorKvError::Corrupt`] for rows that do not read, or a store error.
    pub fn get(
        &self,
        actor: ActorId,
        keys: &[Vec<u8>],
    ) -> Result<Vec<Option<Entry>>, ActorKvError> {
        check_keys(keys)?;
        let mut tx = self.store.begin();
        let state = self.state(&mut tx, actor, false)?;
        keys.iter()
            .map(|key| {
                let rows = self.entry_rows(&mut tx, actor, key, false)?;
                if rows.is_empty() {
                    return Ok(None);
                }
                decode_entry(state.layout_of(key), actor, key.clone(), rows).map(Some)
            })
            .collect()
    }

    /// Puts `entries` in one commit, charging the quota by net growth: an
    /// overwrite is charged the difference, so one near the quota succeeds
    /// when the result fits.
    ///
    /// # Errors
    /// Before anything is written: [`ActorKvError::TooManyKeys`],
    /// [`ActorKvError::KeyTooLarge`], [`ActorKvError::ValueTooLarge`],
    /// [`ActorKvError::PayloadTooLarge`],
    /// [`ActorKvError::DuplicateKey`], [`ActorKvError::QuotaExceeded`];
    /// [`ActorKvError::Corrupt`] when an entry to overwrite does not read;
    /// a store error (a conflict is retried).
    pub fn put(&self, actor: ActorId, entries: &[(Vec<u8>, Vec<u8>)]) -> Result<(), ActorKvError> {
        check_entries(entries)?;
        self.store.transact(|tx| {
            let mut state = self.state(tx, actor, true)?;
            if !state.recorded {
                state.recorded = true;
                tx.put_in(&self.meta, state_key(actor), state.encode())?;
            }
            let metadata = KvMetadata {
                version: self.config.version.clone(),
                update_ts: i64::try_from(tx.now_ms()).unwrap_or(i64::MAX),
            };
            let mut growth: i128 = 0;
            for (key, value) in entries {
                let old = self.entry_rows(tx, actor, key, true)?;
                let layout = state.layout_of(key);
                let old_keys: Vec<Vec<u8>> = old.iter().map(|(k, _)| k.clone()).collect();
                let old_size = if old.is_empty() {
                    0
                } else {
                    decode_entry(layout, actor, key.clone(), old)?.charged_size()
                };
                let new_size = charged(key, value.len());
                growth += i128::from(new_size)
                    - i128::from(if strata_engine::fault_point!("overwrite-charged-gross") {
                        0
                    } else {
                        old_size
                    });
                self.write_entry(tx, layout, actor, key, &metadata, value, &old_keys)?;
            }
            self.charge(tx, actor, growth)
        })
    }

    /// Deletes `keys` in one commit; absent keys are no error.
    ///
    /// # Errors
    /// [`ActorKvError::TooManyKeys`], [`ActorKvError::KeyTooLarge`],
    /// [`ActorKvError::Corrupt`] when an entry does not read (its size is
    /// unknown), or a store error.
    pub fn delete(&self, actor: ActorId, keys: &[Vec<u8>]) -> Result<(), ActorKvError> {
        check_keys(keys)?;
        self.store.transact(|tx| {
            let state = self.state(tx, actor, true)?;
            let mut growth: i128 = 0;
            for key in keys {
                let rows = self.entry_rows(tx, actor, key, true)?;
                if rows.is_empty() {
                    continue;
                }
                let keys: Vec<Vec<u8>> = rows.iter().map(|(k, _)| k.clone()).collect();
                let size =
                    decode_entry(state.layout_of(key), actor, key.clone(), rows)?.charged_size();
                growth -= i128::from(size);
                for k in keys {
                    tx.delete_in(&self.rows, k)?;
                }
            }
            self.charge(tx, actor, growth)
        })
    }

    /// Deletes every entry from `start` (inclusive) to `end` (exclusive) in
    /// one commit, returning how many. Nothing is deleted when `start` is
    /// not below `end`.
    ///
    /// # Errors
    /// [`ActorKvError::KeyTooLarge`] for either bound;
    /// [`ActorKvError::Corrupt`]; a store error, such as
    /// [`StoreError::Limit`] when the range holds more rows than one commit
    /// may delete (nothing is deleted then: delete smaller ranges).
    pub fn delete_range(
        &self,
        actor: ActorId,
        start: &[u8],
        end: &[u8],
    ) -> Result<usize, ActorKvError> {
        for (index, key) in [start, end].into_iter().enumerate() {
            check_key(index, key)?;
        }
        if start >= end {
            return Ok(0);
        }
        let range = KeyRange {
            start: entry_base(actor, start),
            end: Some(entry_base(actor, end)),
        };
        self.store.transact(|tx| {
            let state = self.state(tx, actor, true)?;
            let entries = self.scan_entries(tx, actor, &state, range.clone(), false, None, true)?;
            let mut growth: i128 = 0;
            for (entry, rows) in &entries.entries {
                growth -= i128::from(entry.charged_size());
                for k in rows {
                    tx.delete_in(&self.rows, k.clone())?;
                }
            }
            self.charge(tx, actor, growth)?;
            Ok(entries.entries.len())
        })
    }

    /// A page of entries, from one snapshot.
    ///
    /// # Errors
    /// [`ActorKvError::KeyTooLarge`] for a prefix or bound over the key
    /// limit; [`ActorKvError::Corrupt`]; a store error.
    pub fn list(
        &self,
        actor: ActorId,
        query: &ListQuery,
        options: &ListOptions,
    ) -> Result<ListPage, ActorKvError> {
        let mut range = query_range(actor, query)?;
        if let Some(after) = &options.after {
            let base = entry_base(actor, after);
            if options.reverse {
                range.end = Some(match range.end {
                    Some(end) if end < base => end,
                    _ => base,
                });
            } else {
                let past = past_entry(&base);
                if past > range.start {
                    range.start = past;
                }
            }
        }
        let limit = options.limit.unwrap_or(limits::DEFAULT_LIST_LIMIT);
        let mut tx = self.store.begin();
        let state = self.state(&mut tx, actor, false)?;
        let scanned = self.scan_entries(
            &mut tx,
            actor,
            &state,
            range,
            options.reverse,
            Some(limit),
            false,
        )?;
        Ok(ListPage {
            entries: scanned.entries.into_iter().map(|(e, _)| e).collect(),
            more: scanned.more && !strata_engine::fault_point!("list-more-dropped"),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::{LayoutState, PhysicalLayout};

    #[test]
    fn layout_states_round_trip_and_refuse_garbage() {
        let states = [
            (
                LayoutState {
                    current: PhysicalLayout::Native,
                    migration: None,
                    recorded: true,
                },
                vec![0],
            ),
            (
                LayoutState {
                    current: PhysicalLayout::Compatible,
                    migration: Some((PhysicalLayout::Native, None)),
                    recorded: true,
                },
                vec![1, 0, 0],
            ),
            (
                LayoutState {
                    current: PhysicalLayout::Native,
                    migration: Some((PhysicalLayout::Compatible, Some(b"k\x00".to_vec()))),
                    recorded: true,
                },
                vec![0, 1, 1, b'k', 0],
            ),
        ];
        for (state, bytes) in states {
            assert_eq!(state.encode(), bytes);
            assert_eq!(LayoutState::decode(&bytes), Some(state));
        }
        for bad in [&[][..], &[2], &[0, 2, 0], &[0, 1, 2], &[0, 1]] {
            assert_eq!(LayoutState::decode(bad), None, "{bad:?}");
        }
        let migrating = LayoutState::decode(&[0, 1, 1, b'm']).unwrap();
        assert_eq!(migrating.layout_of(b"a"), PhysicalLayout::Compatible);
        assert_eq!(migrating.layout_of(b"m"), PhysicalLayout::Compatible);
        assert_eq!(migrating.layout_of(b"n"), PhysicalLayout::Native);
    }
}
