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

use super::ActorKvError;
use super::physical::{
    self, ActorId, CHUNK_SIZE, DATA, KvMetadata, METADATA, RowKind, entry_base, wrapped_len,
};
use super::planted;

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

fn charged(key: &[u8], value_len: usize) -> u64 {
    (wrapped_len(key) + value_len) as u64
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

/// The native metadata row's body: the metadata's BARE bytes, then the
/// value.
struct NativeBody {
    metadata: KvMetadata,
    value: Vec<u8>,
}

impl Value for NativeBody {
    const CODEC: Codec = Codec::Raw;
    const VERSION: u16 = 1;

    fn encode_body(&self, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        out.extend_from_slice(&self.metadata.to_bare());
        out.extend_from_slice(&self.value);
        Ok(())
    }

    fn decode_body(version: u16, body: &[u8]) -> Result<Self, DecodeError> {
        if version != 1 {
            return Err(DecodeError::NoMigration {
                found: version,
                current: 1,
            });
        }
        let malformed = DecodeError::Malformed {
            layout: "actor KV entry",
            why: "metadata does not read",
        };
        let (metadata, used) = KvMetadata::read_bare(body).ok_or(malformed)?;
        Ok(Self {
            metadata,
            value: body[used..].to_vec(),
        })
    }
}

/// The native layout's chunk rows: the planner's key is an entry's base
/// (its actor subspace and `KeyWrapper`), so checksums cover the actor.
#[derive(Debug, Clone, Copy)]
struct EntryRows;

impl ChunkLayout for EntryRows {
    fn meta_key(&self, base: &[u8], out: &mut Vec<u8>) {
        out.extend_from_slice(base);
        tuple::pack_into(&(METADATA,), out);
    }

    fn chunk_key(&self, base: &[u8], index: u32, out: &mut Vec<u8>) {
        out.extend_from_slice(base);
        tuple::pack_into(&(DATA, i64::from(index)), out);
    }

    fn chunk_index(&self, base: &[u8], row_key: &[u8]) -> Option<u32> {
        let rest = row_key.strip_prefix(base)?;
        match tuple::unpack::<(i64, i64)>(rest) {
            Ok((DATA, i)) => u32::try_from(i).ok(),
            _ => None,
        }
    }

    fn chunks_from(&self, base: &[u8], from: u32) -> KeyRange {
        let mut start = Vec::new();
        self.chunk_key(base, from, &mut start);
        let mut data = base.to_vec();
        tuple::pack_into(&(DATA,), &mut data);
        KeyRange {
            start,
            end: strinc(&data),
        }
    }
}

fn planner() -> ChunkPlanner<EntryRows> {
    // CHUNK_SIZE is a valid chunk size: nonzero and below 2^32.
    ChunkPlanner::new(EntryRows, CHUNK_SIZE).unwrap_or_else(|e| unreachable!("{e}"))
}

/// An actor's layout state: its layout, and, while a migration runs, the
/// target and the last key already rewritten.
#[derive(Debug, Clone, PartialEq, Eq)]
struct LayoutState {
    current: PhysicalLayout,
    migration: Option<(PhysicalLayout, Option<Vec<u8>>)>,
    recorded: bool,
}

impl LayoutState {
    fn layout_of(&self, key: &[u8]) -> PhysicalLayout {
        match &self.migration {
            Some((target, Some(through))) if key <= through.as_slice() => *target,
            _ => self.current,
        }
    }

    fn encode(&self) -> Vec<u8> {
        let mut out = vec![self.current.code()];
        if let Some((target, through)) = &self.migration {
            out.push(target.code());
            match through {
                None => out.push(0),
                Some(k) => {
                    out.push(1);
                    out.extend_from_slice(k);
                }
            }
        }
        out
    }

    fn decode(bytes: &[u8]) -> Option<Self> {
        let current = PhysicalLayout::from_code(*bytes.first()?)?;
        let migration = match bytes.get(1..)? {
            [] => None,
            [target, 0] => Some((PhysicalLayout::from_code(*target)?, None)),
            [target, 1, through @ ..] => {
                Some((PhysicalLayout::from_code(*target)?, Some(through.to_vec())))
            }
            _ => return None,
        };
        Some(Self {
            current,
            migration,
            recorded: true,
        })
    }
}

/// The actor KV on a store: per-actor isolated keyspaces in one space.
///
/// ```
/// use strata_engine::MemEngine;
/// use strata_schemas::actor_kv::{ActorId, ActorKv, ActorKvConfig, ListOptions, ListQuery};
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
                growth += i128::from(new_size) - i128::from(planted::charged_old(old_size));
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
            more: planted::list_more(scanned.more),
        })
    }

    /// Bytes the actor uses, as charged against its quota.
    ///
    /// # Errors
    /// A store error.
    pub fn usage(&self, actor: ActorId) -> Result<u64, ActorKvError> {
        let mut tx = self.store.begin();
        read_usage(&mut tx, &self.meta, actor, false)
    }

    /// Sets the actor's usage to a recount of its rows and returns it: for
    /// rows that came in without passing through [`ActorKv::put`] (written
    /// by Rivet's engine and copied in raw, say), which nothing charged, so
    /// that [`ActorKv::usage`] read 0. Pinned: a concurrent write makes it
    /// retry.
    ///
    /// # Errors
    /// As [`ActorKv::recount`].
    pub fn recharge(&self, actor: ActorId) -> Result<u64, ActorKvError> {
        self.store.transact(|tx| {
            let state = self.state(tx, actor, true)?;
            let sub = physical::subspace(actor);
            let scanned =
                self.scan_entries(tx, actor, &state, KeyRange::prefix(&sub), false, None, true)?;
            let total: u64 = scanned.entries.iter().map(|(e, _)| e.charged_size()).sum();
            tx.put_in(&self.meta, usage_key(actor), total.to_be_bytes().to_vec())?;
            Ok(total)
        })
    }

    /// Recounts the actor's usage from its rows (every entry decoded), for
    /// audits: it equals [`ActorKv::usage`] unless something is wrong.
    ///
    /// # Errors
    /// [`ActorKvError::Corrupt`] naming the first entry that does not read;
    /// a store error.
    pub fn recount(&self, actor: ActorId) -> Result<u64, ActorKvError> {
        let mut tx = self.store.begin();
        let state = self.state(&mut tx, actor, false)?;
        let sub = physical::subspace(actor);
        let scanned = self.scan_entries(
            &mut tx,
            actor,
            &state,
            KeyRange::prefix(&sub),
            false,
            None,
            false,
        )?;
        Ok(scanned.entries.iter().map(|(e, _)| e.charged_size()).sum())
    }

    /// The actor's layout: the layout its entries are in, or, during a
    /// migration, the target with the last key rewritten.
    ///
    /// # Errors
    /// [`ActorKvError::Corrupt`] for an unreadable state row; a store error.
    pub fn layout(
        &self,
        actor: ActorId,
    ) -> Result<(PhysicalLayout, Option<PhysicalLayout>), ActorKvError> {
        let mut tx = self.store.begin();
        let state = self.state(&mut tx, actor, false)?;
        Ok((state.current, state.migration.map(|(t, _)| t)))
    }

    /// One step of moving the actor's entries to layout `to`: up to
    /// `max_entries` entries (at least one) rewritten in one commit, with
    /// the position recorded in the same commit, so a migration stopped by
    /// a crash resumes where it was. The actor stays readable and writable
    /// throughout: each key is read in the layout its position says.
    ///
    /// # Errors
    /// [`ActorKvError::Corrupt`] for an entry that does not read in its
    /// layout (nothing of the step is written); a store error.
    pub fn migrate(
        &self,
        actor: ActorId,
        to: PhysicalLayout,
        max_entries: usize,
    ) -> Result<MigrationStep, ActorKvError> {
        let max = max_entries.max(1);
        self.store.transact(|tx| {
            let mut state = self.state(tx, actor, true)?;
            let through = match &state.migration {
                None if state.current == to => {
                    return Ok(MigrationStep {
                        migrated: 0,
                        done: true,
                    });
                }
                None => None,
                Some((target, _)) if *target != to => {
                    return Err(ActorKvError::MigrationInProgress { target: *target });
                }
                Some((_, through)) => through.clone(),
            };
            let sub = physical::subspace(actor);
            let mut range = KeyRange::prefix(&sub);
            if let Some(k) = &through {
                range.start = past_entry(&entry_base(actor, k));
            }
            let scanned = self.scan_entries(tx, actor, &state, range, false, Some(max), true)?;
            for (entry, rows) in &scanned.entries {
                self.write_entry(
                    tx,
                    to,
                    actor,
                    &entry.key,
                    &entry.metadata,
                    &entry.value,
                    rows,
                )?;
            }
            let migrated = scanned.entries.len();
            let done = !scanned.more;
            state = if done {
                LayoutState {
                    current: to,
                    migration: None,
                    recorded: true,
                }
            } else {
                let last = scanned.entries.last().map(|(e, _)| e.key.clone());
                LayoutState {
                    migration: Some((to, last.or(through))),
                    ..state
                }
            };
            tx.put_in(&self.meta, state_key(actor), state.encode())?;
            Ok(MigrationStep { migrated, done })
        })
    }

    /// Runs [`ActorKv::migrate`] steps of `max_entries` until the actor is
    /// wholly in layout `to`, returning the entries rewritten.
    ///
    /// # Errors
    /// As [`ActorKv::migrate`]; what the failed step would have done is not
    /// written, and calling again resumes.
    pub fn migrate_all(
        &self,
        actor: ActorId,
        to: PhysicalLayout,
        max_entries: usize,
    ) -> Result<usize, ActorKvError> {
        let mut total = 0;
        loop {
            let step = self.migrate(actor, to, max_entries)?;
            total += step.migrated;
            if step.done {
                return Ok(total);
            }
        }
    }

    // --- internals ---

    fn state(
        &self,
        tx: &mut Tx<'_, E>,
        actor: ActorId,
        pin: bool,
    ) -> Result<LayoutState, ActorKvError> {
        let key = state_key(actor);
        let row = if pin {
            tx.get_in(&self.meta, &key)?
        } else {
            tx.snapshot_get_in(&self.meta, &key)?
        };
        match row {
            None => Ok(LayoutState {
                current: self.config.layout,
                migration: None,
                recorded: false,
            }),
            Some(bytes) => LayoutState::decode(&bytes).ok_or_else(|| ActorKvError::Corrupt {
                key: key.clone(),
                why: "the actor's layout state does not read".into(),
            }),
        }
    }

    fn entry_rows(
        &self,
        tx: &mut Tx<'_, E>,
        actor: ActorId,
        key: &[u8],
        pin: bool,
    ) -> Result<Rows, ActorKvError> {
        let range = KeyRange::prefix(&entry_base(actor, key));
        let page = if pin {
            tx.scan_in(&self.rows, &range, None, false)?
        } else {
            tx.snapshot_scan_in(&self.rows, &range, None, false)?
        };
        Ok(page.rows)
    }

    /// Replaces the rows of `key` (at keys `old`) with the entry's rows in
    /// `layout`.
    #[allow(clippy::too_many_arguments)] // one entry's whole write
    fn write_entry(
        &self,
        tx: &mut Tx<'_, E>,
        layout: PhysicalLayout,
        actor: ActorId,
        key: &[u8],
        metadata: &KvMetadata,
        value: &[u8],
        old: &[Vec<u8>],
    ) -> Result<(), ActorKvError> {
        let rows = encode_entry(layout, actor, key, metadata, value)?;
        let new_keys: BTreeSet<&[u8]> = rows.iter().map(|(k, _)| k.as_slice()).collect();
        for k in old {
            if !new_keys.contains(k.as_slice()) {
                tx.delete_in(&self.rows, k.clone())?;
            }
        }
        for (k, v) in rows {
            tx.put_in(&self.rows, k, v)?;
        }
        Ok(())
    }

    /// Adds `growth` to the actor's usage, refusing growth past the quota.
    fn charge(&self, tx: &mut Tx<'_, E>, actor: ActorId, growth: i128) -> Result<(), ActorKvError> {
        if growth == 0 {
            return Ok(());
        }
        let usage = read_usage(tx, &self.meta, actor, true)?;
        let next = i128::from(usage) + growth;
        if growth > 0 && next > i128::from(self.config.quota_bytes) {
            return Err(ActorKvError::QuotaExceeded {
                usage,
                growth: u64::try_from(growth).unwrap_or(u64::MAX),
                quota: self.config.quota_bytes,
            });
        }
        let next = u64::try_from(next.max(0)).unwrap_or(u64::MAX);
        if next == 0 {
            tx.delete_in(&self.meta, usage_key(actor))?;
        } else {
            tx.put_in(&self.meta, usage_key(actor), next.to_be_bytes().to_vec())?;
        }
        Ok(())
    }

    /// Entries in `range` (row keys), grouped from their rows, each with
    /// its rows, up to `limit` entries; `more` when a row of another entry
    /// follows the last one.
    #[allow(clippy::too_many_arguments)] // one scan's whole description
    fn scan_entries(
        &self,
        tx: &mut Tx<'_, E>,
        actor: ActorId,
        state: &LayoutState,
        mut range: KeyRange,
        reverse: bool,
        limit: Option<usize>,
        pin: bool,
    ) -> Result<Scanned, ActorKvError> {
        const PAGE: usize = 256;
        let sub = physical::subspace(actor);
        let max = limit.unwrap_or(usize::MAX);
        let mut out = Scanned::default();
        let mut group: Option<(Vec<u8>, Rows)> = None;
        loop {
            if range.end.as_ref().is_some_and(|end| *end <= range.start) {
                break;
            }
            let page = if pin {
                tx.scan_in(&self.rows, &range, Some(PAGE), reverse)?
            } else {
                tx.snapshot_scan_in(&self.rows, &range, Some(PAGE), reverse)?
            };
            let last_row = page.rows.last().map(|(k, _)| k.clone());
            for (k, v) in page.rows {
                let (key, _) = k
                    .strip_prefix(sub.as_slice())
                    .and_then(physical::parse_row)
                    .ok_or_else(|| ActorKvError::Corrupt {
                        key: k.clone(),
                        why: "a row of the actor's space in no entry's layout".into(),
                    })?;
                match &mut group {
                    Some((current, rows)) if *current == key => rows.push((k, v)),
                    _ => {
                        if let Some((done_key, rows)) = group.take() {
                            out.push(state, actor, done_key, rows, reverse)?;
                        }
                        if out.entries.len() == max {
                            out.more = true;
                            return Ok(out);
                        }
                        group = Some((key, vec![(k, v)]));
                    }
                }
            }
            match last_row {
                Some(last) if page.more => {
                    if reverse {
                        range.end = Some(last);
                    } else {
                        let mut next = last;
                        next.push(0);
                        range.start = next;
                    }
                }
                _ => break,
            }
        }
        if let Some((key, rows)) = group.take() {
            out.push(state, actor, key, rows, reverse)?;
        }
        Ok(out)
    }
}

/// Entries read by a scan, each with its row keys.
#[derive(Default)]
struct Scanned {
    entries: Vec<(Entry, Vec<Vec<u8>>)>,
    more: bool,
}

impl Scanned {
    fn push(
        &mut self,
        state: &LayoutState,
        actor: ActorId,
        key: Vec<u8>,
        mut rows: Rows,
        reverse: bool,
    ) -> Result<(), ActorKvError> {
        if reverse {
            rows.reverse();
        }
        let keys = rows.iter().map(|(k, _)| k.clone()).collect();
        let entry = decode_entry(state.layout_of(&key), actor, key, rows)?;
        self.entries.push((entry, keys));
        Ok(())
    }
}

fn state_key(actor: ActorId) -> Vec<u8> {
    tuple::pack(&("layout", &actor.bytes()[..]))
}

fn usage_key(actor: ActorId) -> Vec<u8> {
    tuple::pack(&("usage", &actor.bytes()[..]))
}

fn read_usage<E: Engine>(
    tx: &mut Tx<'_, E>,
    meta: &Space,
    actor: ActorId,
    pin: bool,
) -> Result<u64, ActorKvError> {
    let key = usage_key(actor);
    let row = if pin {
        tx.get_in(meta, &key)?
    } else {
        tx.snapshot_get_in(meta, &key)?
    };
    match row {
        None => Ok(0),
        Some(bytes) => <[u8; 8]>::try_from(bytes.as_slice())
            .map(u64::from_be_bytes)
            .map_err(|_| ActorKvError::Corrupt {
                key,
                why: "the usage counter is not 8 bytes".into(),
            }),
    }
}

/// The rows of one entry in `layout`: metadata row and data rows.
fn encode_entry(
    layout: PhysicalLayout,
    actor: ActorId,
    key: &[u8],
    metadata: &KvMetadata,
    value: &[u8],
) -> Result<Rows, ActorKvError> {
    let base = entry_base(actor, key);
    match layout {
        PhysicalLayout::Compatible => {
            let mut rows: Rows = value
                .chunks(CHUNK_SIZE)
                .zip(0u32..)
                .map(|(chunk, i)| (physical::data_key(&base, i), chunk.to_vec()))
                .collect();
            rows.push((physical::meta_key(&base), metadata.to_bare()));
            Ok(rows)
        }
        PhysicalLayout::Native => {
            let body = NativeBody {
                metadata: metadata.clone(),
                value: value.to_vec(),
            };
            let mut envelope = Vec::new();
            strata_codec::encode(&body, &base, EncodeOptions::default(), &mut envelope)?;
            let plan = planner().plan_write(&base, &envelope, Previous::Absent)?;
            Ok(plan
                .puts
                .into_iter()
                .map(|row| (row.key, row.value.into_owned()))
                .collect())
        }
    }
}

/// The entry stored in `rows` (the rows of one key, ascending).
fn decode_entry(
    layout: PhysicalLayout,
    actor: ActorId,
    key: Vec<u8>,
    rows: Rows,
) -> Result<Entry, ActorKvError> {
    let base = entry_base(actor, &key);
    let corrupt = |why: String| ActorKvError::Corrupt {
        key: key.clone(),
        why,
    };
    let mut meta = None;
    let mut data = Vec::new();
    for (k, v) in rows {
        match k.strip_prefix(base.as_slice()).and_then(physical::row_kind) {
            Some(RowKind::Meta) if meta.is_none() => meta = Some(v),
            Some(RowKind::Data(i)) => data.push((i, k, v)),
            _ => return Err(corrupt("a row that is not this entry's".into())),
        }
    }
    let meta = meta.ok_or_else(|| corrupt("no metadata row".into()))?;
    match layout {
        PhysicalLayout::Compatible => {
            let metadata = KvMetadata::from_bare(&meta)
                .ok_or_else(|| corrupt("metadata row is not a BARE KvMetadata".into()))?;
            // No data rows: the empty value, as the engine writes it.
            let count = data.len();
            let mut value = Vec::with_capacity(count * CHUNK_SIZE);
            for (n, (i, _, v)) in data.into_iter().enumerate() {
                if i as usize != n {
                    return Err(corrupt(format!("data row {i} where row {n} was due")));
                }
                let last = n + 1 == count;
                if v.is_empty() || v.len() > CHUNK_SIZE || (!last && v.len() != CHUNK_SIZE) {
                    return Err(corrupt(format!("data row {i} has {} bytes", v.len())));
                }
                value.extend_from_slice(&v);
            }
            Ok(Entry {
                key,
                value,
                metadata,
            })
        }
        PhysicalLayout::Native => {
            let planner = planner();
            let chunked = planner
                .read_meta(&base, &meta)
                .map_err(|e| corrupt(e.to_string()))?
                .is_some();
            if !chunked && !data.is_empty() {
                return Err(corrupt("data rows beside an inline value".into()));
            }
            let envelope = planner
                .assemble(&base, &meta, data.into_iter().map(|(_, k, v)| (k, v)))
                .map_err(|e| corrupt(e.to_string()))?;
            let body: NativeBody =
                strata_codec::decode(&base, &envelope).map_err(|e| corrupt(e.to_string()))?;
            Ok(Entry {
                key,
                value: body.value,
                metadata: body.metadata,
            })
        }
    }
}

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
