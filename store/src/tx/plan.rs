//! The commit planner: buffered writes become one engine commit with its
//! chunk rows, expiry index rows and quota charges, every limit checked.

use std::collections::BTreeMap;

use strata_codec::{
    BatchSize, ChunkLayout, EncodeOptions, Previous, RowSize, Stale, Value, encode, stored_size,
};
use strata_engine::{Commit, Engine, Keyspace, Mutation, RangeSpec};
use strata_keys::Key;

use super::{Pending, Tx};
use crate::{RowKind, Store, StoreError, layout};

impl<'s, E: Engine + 's> Tx<'s, E> {
    /// Turns the buffered writes into one commit, checking every limit.
    /// The rows written in spaces, the versionstamped rows and the
    /// predicates move into the commit (the transaction ends with it).
    pub(crate) fn plan(&mut self) -> Result<Commit, StoreError> {
        let writes = std::mem::take(&mut self.writes);
        // A row a write as a rule, and each stamped and raw row, with room
        // for a few more (an index row, a counter): made at its size at
        // once, where the first push took the path that grows a vector,
        // and an exact size made the next row reallocate.
        let rows = writes.len() + self.space_writes.len() + self.stamped.len() + self.raw.len();
        let mut out = Planned {
            mutations: Vec::with_capacity(rows.max(4)),
            ..Planned::default()
        };
        // What the counters need to know of the writes (whether a
        // counter's key is put or deleted here), taken before the writes
        // move into the commit. No map at all without counter adds.
        let written: Option<BTreeMap<Vec<u8>, bool>> = (!self.adds.is_empty()).then(|| {
            self.adds
                .keys()
                .filter_map(|k| {
                    let put = matches!(writes.get(k)?, Pending::Put { .. });
                    Some((k.clone(), put))
                })
                .collect()
        });
        for (key, p) in writes {
            self.plan_write(key, p, &mut out)?;
        }
        if let Some(written) = written {
            self.plan_counters(&written, &mut out)?;
        }
        let store = self.store;
        let limits = store.options.limits;
        self.plan_space_writes(&mut out)?;
        for s in std::mem::take(&mut self.stamped) {
            out.row(
                &limits,
                RowSize::put(&s.key, &s.value),
                (s.key_type, RowKind::Versionstamped, &s.key),
            )?;
            if s.charged {
                out.charge(
                    store.options.scope_of(&s.key),
                    stored_size(s.key.len(), s.value.len()),
                    0,
                    (s.key_type, &s.key),
                );
            }
            out.mutations.push(Mutation::PutVersionstamped {
                ks: s.ks,
                key: s.key,
                value: s.value,
                at: s.at,
            });
        }
        if strata_engine::fault_point!("batch-limit-unchecked") {
            out.batch = BatchSize::default();
        }
        limits
            .check_batch_size(out.batch)
            .map_err(StoreError::batch_limit)?;
        out.mutations.extend(self.raw.iter().cloned());
        // No map at all without a quota scope, as a rule.
        if let Some(growth) = out.growth.take() {
            self.plan_quotas(growth, &mut out.mutations)?;
        }
        Ok(Commit {
            predicates: std::mem::take(&mut self.predicates),
            mutations: out.mutations,
            durability: self.durability,
        })
    }

    /// Each scope's net growth: checked against its quota when it grows
    /// (the usage read under a predicate), then added to its counter.
    fn plan_quotas(
        &mut self,
        growth: BTreeMap<Vec<u8>, Growth>,
        mutations: &mut Vec<Mutation>,
    ) -> Result<(), StoreError> {
        let store = self.store;
        let limits = store.options.limits;
        for (scope, Growth { net: g, first }) in growth {
            let counter = layout::quota_key(&scope);
            if g > 0 {
                // Pinned: a concurrent charge to the scope conflicts, so the
                // check is exact.
                let row = if strata_engine::fault_point!("quota-read-not-pinned") {
                    strata_engine::Snapshot::get(self.snap()?, store.system, &counter)?
                } else {
                    self.read_pinned(store.system, &counter)?
                };
                let used = counter_value(row.as_deref())?;
                let used = u64::try_from(used).unwrap_or(0);
                if limits.check_quota(used, g).is_err() {
                    let (key_type, key) = first.unwrap_or_default();
                    crate::metrics::refused(strata_codec::Limit::Quota);
                    return Err(StoreError::Quota {
                        scope,
                        used,
                        requested: g.unsigned_abs(),
                        limit: limits.quota_bytes,
                        key_type,
                        key,
                    });
                }
                crate::metrics::quota_usage(
                    used.saturating_add(g.unsigned_abs()),
                    limits.quota_bytes,
                );
            }
            if g != 0 {
                mutations.push(Mutation::Add {
                    ks: store.system,
                    key: counter,
                    delta: g,
                });
            }
        }
        Ok(())
    }

    /// The rows written in declared spaces (and catalog rows): checked
    /// against the row and batch limits; in a charged space, the net growth
    /// charged to the key's scope (the old row read under a predicate).
    fn plan_space_writes(&mut self, out: &mut Planned) -> Result<(), StoreError> {
        let store = self.store;
        let limits = store.options.limits;
        if self.space_writes.is_empty() {
            return Ok(());
        }
        for ((ks, key), w) in std::mem::take(&mut self.space_writes) {
            let size = match &w.value {
                Some(v) => RowSize::put(&key, v),
                None => RowSize::delete(&key),
            };
            out.row(&limits, size, (None, RowKind::Space, &key))?;
            let scope = if w.charged {
                store.options.scope_of(&key)
            } else {
                None
            };
            if scope.is_some() {
                let old = self
                    .read_pinned(ks, &key)?
                    .map_or(0, |v| stored_size(key.len(), v.len()));
                let new = w
                    .value
                    .as_ref()
                    .map_or(0, |v| stored_size(key.len(), v.len()));
                out.charge(scope, new, old, (None, &key));
            }
            out.mutations.push(match w.value {
                Some(value) => Mutation::Put { ks, key, value },
                None => Mutation::Delete { ks, key },
            });
        }
        Ok(())
    }

    /// The rows of one put or delete: the data row, chunk rows and stale
    /// chunks, expiry index changes, and the scope's growth. The old row is
    /// read (under a predicate) when chunks or quota depend on it.
    fn plan_write(
        &mut self,
        key: Vec<u8>,
        p: Pending,
        out: &mut Planned,
    ) -> Result<(), StoreError> {
        let store = self.store;
        let limits = store.options.limits;
        let key_type = p.key_type();
        let (data, system) = (store.data, store.system);
        let scope = store.options.scope_of(&key);
        let known = p.chunked() || scope.is_some() || self.pinned.contains(data, &key);
        let old = if known {
            Some(store.describe(&key, self.read_pinned(data, &key)?.as_deref()))
        } else {
            None
        };
        let p = match p {
            // Nothing to know of the old row: the envelope is the one row
            // written, moved into the commit as it is.
            Pending::Put {
                envelope,
                expires_at,
                ..
            } if old.is_none() => {
                let size = RowSize::put(&key, &envelope);
                out.row(&limits, size, (key_type, RowKind::Value, &key))?;
                // Planted: the index entry is written only on the path
                // that read the old row.
                if !strata_engine::fault_point!("unread-row-not-indexed") {
                    out.reindex(system, &key, None, expires_at);
                }
                // No quota scope either (it would have read the old row).
                out.mutations.push(Mutation::Put {
                    ks: data,
                    key,
                    value: envelope,
                });
                return Ok(());
            }
            p => p,
        };
        let key = key.as_slice();
        let (new_size, new_expiry) = match &p {
            Pending::Put {
                envelope,
                expires_at,
                ..
            } => {
                let expires_at = *expires_at;
                // Here the old row was read (the fast path above takes the
                // other puts).
                let mut previous = old.as_ref().map_or(Previous::Absent, |o| o.previous);
                if strata_engine::fault_point!("stale-chunks-survive") {
                    previous = Previous::Absent;
                }
                let plan = store
                    .planner
                    .plan_write(key, envelope, previous)
                    .map_err(|source| StoreError::Chunk {
                        key_type: key_type.unwrap_or("an unknown key type"),
                        source,
                    })?;
                for (i, row) in plan.puts.iter().enumerate() {
                    let kind = match (i, plan.puts.len()) {
                        (0, 1) => RowKind::Value,
                        (0, _) => RowKind::Manifest,
                        _ => RowKind::Chunk,
                    };
                    out.row(
                        &limits,
                        RowSize::put(&row.key, &row.value),
                        (key_type, kind, key),
                    )?;
                    out.mutations.push(Mutation::Put {
                        ks: if i == 0 { data } else { system },
                        key: row.key.clone(),
                        value: row.value.to_vec(),
                    });
                }
                out.stale(&plan.deletes, system);
                (plan.stored_bytes(), expires_at)
            }
            Pending::Delete { .. } => {
                out.row(
                    &limits,
                    RowSize::delete(key),
                    (key_type, RowKind::Value, key),
                )?;
                out.mutations.push(Mutation::Delete {
                    ks: data,
                    key: key.to_vec(),
                });
                if let Some(o) = &old {
                    // The first stale row is the data row, deleted above.
                    let stale = store.planner.plan_delete(key, o.previous);
                    out.stale(&stale[1..], system);
                }
                (0, None)
            }
        };
        // Planted: the index entry is written only on the path that read
        // the old row.
        let index = !(strata_engine::fault_point!("unread-row-not-indexed") && old.is_none());
        if index {
            out.reindex(system, key, old.as_ref(), new_expiry);
        }
        let mut old_size = old.as_ref().map_or(0, |o| o.size);
        if strata_engine::fault_point!("quota-ignores-overwrite") && new_size > 0 {
            old_size = 0;
        }
        out.charge(scope, new_size, old_size, (key_type, key));
        Ok(())
    }

    /// The counter adds, charging a scope for each counter row they create.
    /// `written`: whether each counter key also written here is put
    /// (`true`) or deleted.
    fn plan_counters(
        &mut self,
        written: &BTreeMap<Vec<u8>, bool>,
        out: &mut Planned,
    ) -> Result<(), StoreError> {
        let adds = std::mem::take(&mut self.adds);
        let limits = self.store.options.limits;
        for (key, (delta, key_type)) in &adds {
            let scope = self.store.options.scope_of(key);
            if scope.is_some() {
                let exists = match written.get(key) {
                    Some(&put) => put,
                    None => self.read_pinned(self.store.data, key)?.is_some(),
                };
                let charged = !exists && !strata_engine::fault_point!("counter-add-not-charged");
                if charged {
                    out.charge(scope, stored_size(key.len(), 8), 0, (Some(key_type), key));
                }
            }
            out.row(
                &limits,
                RowSize {
                    key: key.len(),
                    value: 8,
                },
                (Some(key_type), RowKind::Counter, key),
            )?;
            out.mutations.push(Mutation::Add {
                ks: self.store.data,
                key: key.clone(),
                delta: *delta,
            });
        }
        self.adds = adds;
        Ok(())
    }
}

/// A commit being planned.
#[derive(Default)]
struct Planned {
    mutations: Vec<Mutation>,
    /// Data and chunk rows counted for the batch limits (each checked
    /// against the per-row limits as it was counted).
    batch: BatchSize,
    /// Net growth per quota scope (`None` until a write is charged).
    growth: Option<BTreeMap<Vec<u8>, Growth>>,
}

/// How a commit changes one quota scope's usage.
#[derive(Default)]
struct Growth {
    /// Net bytes.
    net: i64,
    /// The first write that grew the scope: its key type and key.
    first: Option<(Option<&'static str>, Vec<u8>)>,
}

/// Which write a row belongs to: its key type, the row's kind, the key the
/// user wrote.
type RowOrigin<'a> = (Option<&'static str>, RowKind, &'a [u8]);

impl Planned {
    /// Adds a row, refused when its key or value breaks a per-row limit.
    fn row(
        &mut self,
        limits: &strata_codec::Limits,
        size: RowSize,
        (key_type, kind, key): RowOrigin<'_>,
    ) -> Result<(), StoreError> {
        limits
            .check_row(size)
            .map_err(|e| StoreError::row_limit(e, key_type, kind, key))?;
        self.batch.add(size);
        Ok(())
    }

    fn charge(
        &mut self,
        scope: Option<Vec<u8>>,
        new: u64,
        old: u64,
        (key_type, key): (Option<&'static str>, &[u8]),
    ) {
        if let Some(scope) = scope {
            let growth = self
                .growth
                .get_or_insert_default()
                .entry(scope)
                .or_default();
            if new > old && growth.first.is_none() {
                growth.first = Some((key_type, key.to_vec()));
            }
            growth.net += signed(new) - signed(old);
        }
    }

    /// The expiry index changes of a write whose old row is `old` (`None`:
    /// not read) and whose new one expires at `new`.
    fn reindex(&mut self, system: Keyspace, key: &[u8], old: Option<&OldRow>, new: Option<u64>) {
        let old_expiry = old.and_then(|o| o.expires_at);
        if let Some(at) = old_expiry
            && old_expiry != new
        {
            self.mutations.push(Mutation::Delete {
                ks: system,
                key: layout::expiry_key(at, key),
            });
        }
        if let Some(at) = new
            && (old.is_none() || old_expiry != new)
        {
            self.mutations.push(Mutation::Put {
                ks: system,
                key: layout::expiry_key(at, key),
                value: Vec::new(),
            });
        }
    }

    /// Deletes the stale rows of a chunked value, each counted for the
    /// batch limits. Not checked against the key limit: they were written
    /// under it, and a range of them (the chunks of a damaged row) has two
    /// keys, together longer than one may be (checked as one key, such an
    /// overwrite was refused).
    fn stale(&mut self, stale: &[Stale], system: Keyspace) {
        for s in stale {
            self.batch.add(s.row_size());
            self.mutations.push(match s {
                Stale::Key(k) => Mutation::Delete {
                    ks: system,
                    key: k.clone(),
                },
                Stale::Range(r) => Mutation::DeleteRange {
                    ks: system,
                    range: RangeSpec::from(r),
                },
            });
        }
    }
}

/// Sizes are far below `i64::MAX`; saturate rather than wrap if not.
fn signed(size: u64) -> i64 {
    i64::try_from(size).unwrap_or(i64::MAX)
}

/// An engine counter row's value (absent: 0).
pub(crate) fn counter_value(row: Option<&[u8]>) -> Result<i64, StoreError> {
    match row {
        None => Ok(0),
        Some(bytes) => <[u8; 8]>::try_from(bytes)
            .map(i64::from_le_bytes)
            .map_err(|_| StoreError::BadCounter { len: bytes.len() }),
    }
}

/// What an old data row occupies, for quota and clean-up.
pub(crate) struct OldRow {
    pub(crate) previous: Previous,
    pub(crate) size: u64,
    pub(crate) expires_at: Option<u64>,
}

impl<E: Engine> Store<E> {
    /// Packs a key and checks it against the key limit.
    pub(crate) fn pack_checked<K: Key>(&self, key: &K) -> Result<Vec<u8>, StoreError> {
        let bytes = key.pack().map_err(StoreError::key::<K>)?;
        self.options
            .limits
            .check_key(&bytes)
            .map_err(|e| StoreError::row_limit(e, Some(K::NAME), RowKind::Value, &bytes))?;
        Ok(bytes)
    }

    /// The encoded key and pending write of a put: the envelope, checked
    /// against the value limit unless `K` is chunked.
    pub(crate) fn encode_put<K>(
        &self,
        key: &K,
        value: &K::Value,
        expires_at: Option<u64>,
    ) -> Result<(Vec<u8>, Pending), StoreError>
    where
        K: Key + 'static,
        K::Value: Value,
    {
        let bytes = self.pack_checked(key)?;
        let mut envelope = Vec::new();
        let options = EncodeOptions {
            checksum: true,
            expires_at,
        };
        encode(value, &bytes, options, &mut envelope).map_err(|source| StoreError::Encode {
            key_type: K::NAME,
            source,
        })?;
        let chunked = self.options.is_chunked::<K>();
        let max = self.options.limits.max_value_bytes;
        if envelope.len() > max && !chunked {
            crate::metrics::refused(strata_codec::Limit::ValueBytes);
            return Err(StoreError::ValueTooLarge {
                key_type: K::NAME,
                size: envelope.len() as u64,
                max: max as u64,
            });
        }
        Ok((
            bytes,
            Pending::Put {
                envelope,
                expires_at,
                chunked,
                key_type: Some(K::NAME),
            },
        ))
    }

    /// The encoded key and pending write of a delete.
    pub(crate) fn encode_delete<K: Key + 'static>(
        &self,
        key: &K,
    ) -> Result<(Vec<u8>, Pending), StoreError> {
        let bytes = self.pack_checked(key)?;
        let chunked = self.options.is_chunked::<K>();
        Ok((
            bytes,
            Pending::Delete {
                chunked,
                key_type: Some(K::NAME),
            },
        ))
    }

    /// Reads an old data row (`None`: absent): whether it is chunked, the
    /// bytes it and its chunks occupy, and its expiry. An unreadable row
    /// counts as its own bytes and has its chunk range cleared.
    pub(crate) fn describe(&self, key: &[u8], meta: Option<&[u8]>) -> OldRow {
        let Some(meta) = meta else {
            return OldRow {
                previous: Previous::Absent,
                size: 0,
                expires_at: None,
            };
        };
        let own = stored_size(key.len(), meta.len());
        let Ok((header, _)) = strata_codec::verify(key, meta) else {
            return OldRow {
                previous: Previous::Unknown,
                size: own,
                expires_at: None,
            };
        };
        match self.planner.read_meta(key, meta) {
            Ok(None) => OldRow {
                previous: Previous::Inline,
                size: own,
                expires_at: header.expires_at,
            },
            Ok(Some(m)) => {
                let mut chunk_key = Vec::new();
                let mut size = own;
                let mut left = m.total_len;
                for i in 0..m.chunk_count {
                    chunk_key.clear();
                    self.planner.layout().chunk_key(key, i, &mut chunk_key);
                    let len = left.min(u64::from(m.chunk_size));
                    left -= len;
                    size += chunk_key.len() as u64 + len;
                }
                OldRow {
                    previous: Previous::Chunked {
                        chunk_count: m.chunk_count,
                    },
                    size,
                    expires_at: header.expires_at,
                }
            }
            Err(_) => OldRow {
                previous: Previous::Unknown,
                size: own,
                expires_at: header.expires_at,
            },
        }
    }
}
