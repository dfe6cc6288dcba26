//! Pins: reads at a pinned version, the GC queue drained, history and dedupe rows pruned under the live pins.

use std::collections::BTreeMap;

use strata_engine::Engine;
use strata_keys::tuple;
use strata_keys::{Key, KeyRange};
use strata_store::{Scan, StoreError, Tx};

use super::keys::{Dedupe, DedupeFloor, DedupeFloorKey, DedupeKey, GcKey, PinKey, WatchKey};

#[allow(clippy::wildcard_imports)]
use super::*;

impl<E: Engine> Nokv<E> {
    // --- pins and history ---

    /// Pins a snapshot of the mount for `lease_ms`: reads through it see
    /// the mount as of the pin's commit, served from history rows that
    /// every later change writes while the pin is live.
    ///
    /// # Errors
    /// [`NokvError::Exists`] for a pin of that id; a store error.
    pub fn pin(&self, mount: MountId, snapshot: &str, lease_ms: u64) -> Result<u64, NokvError> {
        let key = PinKey {
            mount,
            snapshot: snapshot.to_owned(),
        };
        let ((), info) = self.store.transact_info(|tx| {
            if tx.get(&key)?.is_some() {
                return Err(NokvError::Exists {
                    parent: 0,
                    name: format!("snapshot {snapshot}"),
                });
            }
            let now = tx.now_ms();
            tx.put(
                &key,
                &SnapshotPin {
                    root: ROOT,
                    read_version: None,
                    lease_until_ms: now + lease_ms,
                },
            )?;
            Ok::<_, NokvError>(())
        })?;
        let version = info.map(|i| i.version).unwrap_or_default();
        self.store.transact(|tx| {
            if let Some(pin) = tx.get(&key)? {
                tx.put(
                    &key,
                    &SnapshotPin {
                        read_version: Some(version),
                        ..pin
                    },
                )?;
            }
            Ok::<_, NokvError>(())
        })?;
        Ok(version)
    }

    /// Ends a pin.
    ///
    /// # Errors
    /// A store error.
    pub fn unpin(&self, mount: MountId, snapshot: &str) -> Result<(), NokvError> {
        self.store.delete(&PinKey {
            mount,
            snapshot: snapshot.to_owned(),
        })?;
        Ok(())
    }

    /// Inode `inode` as of pin `snapshot`.
    ///
    /// # Errors
    /// [`NokvError::Pin`] for an unknown, expired or unready pin; a store
    /// error.
    pub fn getattr_at(
        &self,
        mount: MountId,
        snapshot: &str,
        inode: InodeId,
    ) -> Result<Option<InodeAttr>, NokvError> {
        self.at_pin(mount, snapshot, &inode_key(mount, inode))
    }

    /// Dentry `name` in `parent` as of pin `snapshot`.
    ///
    /// # Errors
    /// As [`Nokv::getattr_at`].
    pub fn lookup_at(
        &self,
        mount: MountId,
        snapshot: &str,
        parent: InodeId,
        name: &str,
    ) -> Result<Option<Dentry>, NokvError> {
        self.at_pin(mount, snapshot, &dentry_key(mount, parent, name))
    }

    pub(crate) fn at_pin<K>(
        &self,
        mount: MountId,
        snapshot: &str,
        key: &K,
    ) -> Result<Option<K::Value>, NokvError>
    where
        K: Key + 'static,
        K::Value: strata_codec::Value,
    {
        let mut tx = self.store.begin();
        let now = tx.now_ms();
        let pin = tx
            .get(&PinKey {
                mount,
                snapshot: snapshot.to_owned(),
            })?
            .ok_or_else(|| NokvError::Pin {
                snapshot: snapshot.to_owned(),
                problem: PinProblem::Unknown,
            })?;
        if pin.lease_until_ms <= now {
            return Err(NokvError::Pin {
                snapshot: snapshot.to_owned(),
                problem: PinProblem::Ended,
            });
        }
        let version = pin.read_version.ok_or_else(|| NokvError::Pin {
            snapshot: snapshot.to_owned(),
            problem: PinProblem::NotReady,
        })?;
        let packed = key.pack().map_err(|source| StoreError::Key {
            key_type: K::NAME,
            source,
        })?;
        let prefix = history_prefix(K::NAME, &packed);
        // History rows of changes after the pin sort first (inverted
        // versions below the pin's); the oldest of them holds the value
        // the pin sees.
        let mut bound = prefix.clone();
        bound.extend(version.to_be_bytes().iter().map(|b| !b));
        let range = KeyRange {
            start: prefix,
            end: Some(bound),
        };
        let page = tx.snapshot_scan_in(&self.hist, &range, Some(1), true)?;
        match page.rows.into_iter().next() {
            None => Ok(tx.get(key)?),
            Some((_, row)) => {
                let previous: Vec<u8> =
                    strata_codec::decode(&[], &row).map_err(NokvError::History)?;
                match previous.split_first() {
                    Some((0, _)) | None => Ok(None),
                    Some((_, envelope)) => Ok(Some(
                        strata_codec::decode(&packed, envelope).map_err(NokvError::History)?,
                    )),
                }
            }
        }
    }

    // --- GC and retention ---

    /// Deletes up to `max` queued blocks from the object store, in enqueue
    /// order, each row removed after its object; returns how many. A block
    /// is deleted only once the commit that queued it is durable (the
    /// engine is synced first when one is not): a crash that lost that
    /// commit would bring back the manifest naming the block.
    ///
    /// # Errors
    /// [`NokvError::Blob`] (the row stays queued), a store error.
    pub fn drain_gc(&self, mount: MountId, max: usize) -> Result<usize, NokvError> {
        let prefix = tuple::pack(&("nokv", "gc", mount));
        let page = self
            .store
            .scan::<GcKey>(&Scan::range_of(KeyRange::tuple_prefix(&prefix)).limit(max))?;
        let newest = page
            .items
            .iter()
            .map(|(key, _)| crate::body::stamp_version(&key.stamp))
            .max();
        let engine = self.store.engine();
        if newest.is_some_and(|v| v > engine.durable_version())
            && !strata_engine::fault_point!("gc-drain-before-durable")
        {
            engine.sync().map_err(StoreError::from)?;
        }
        let mut done = 0;
        for (key, entry) in page.items {
            self.blobs.delete(&entry.object).map_err(NokvError::Blob)?;
            self.store.delete(&key)?;
            done += 1;
        }
        Ok(done)
    }

    /// Prunes what no reader needs: dedupe rows past their retention,
    /// watch events past their age or beyond the per-scope count (never
    /// those newer than the oldest live pin), expired pins, and history
    /// rows at or below the oldest live pin's version (all of them when no
    /// pin is live).
    ///
    /// # Errors
    /// A store error.
    pub fn prune(&self, mount: MountId) -> Result<Pruned, NokvError> {
        let mut out = Pruned::default();
        let view = self.store.read()?;
        let now = view.now_ms();
        let pins = view
            .scan::<PinKey>(&Scan::range_of(KeyRange::tuple_prefix(&tuple::pack(&(
                "nokv", "pin", mount,
            )))))?
            .collect::<Result<Vec<_>, _>>()?;
        let mut floor: Option<u64> = None;
        for (k, pin) in &pins {
            if pin.lease_until_ms <= now {
                self.store.delete(k)?;
                out.pins += 1;
            } else {
                let v = pin.read_version.unwrap_or(0);
                floor = Some(floor.map_or(v, |f| f.min(v)));
            }
        }
        let dedupes = view
            .scan::<DedupeKey>(&Scan::range_of(KeyRange::tuple_prefix(&tuple::pack(&(
                "nokv", "dedupe", mount,
            )))))?
            .collect::<Result<Vec<_>, _>>()?;
        let expired: Vec<(DedupeKey, Dedupe)> = dedupes
            .into_iter()
            .filter(|(_, d)| d.at_ms.saturating_add(self.config.dedupe_retention_ms) <= now)
            .collect();
        // Each batch of rows goes in one commit with the floor raised past
        // their plans: no moment when a row is gone and its replay allowed.
        for batch in expired.chunks(64) {
            let floor_key = DedupeFloorKey { mount };
            self.store.transact(|tx| {
                let mut floor = tx.get(&floor_key)?.map_or(0, |f| f.below);
                for (k, d) in batch {
                    tx.delete(k)?;
                    floor = floor.max(d.read_version.saturating_add(1));
                }
                if !strata_engine::fault_point!("prune-without-floor") {
                    tx.put(&floor_key, &DedupeFloor { below: floor })?;
                }
                Ok::<_, StoreError>(())
            })?;
            out.dedupe += batch.len();
        }
        let events = view
            .scan::<WatchKey>(&Scan::range_of(KeyRange::tuple_prefix(&tuple::pack(&(
                "nokv", "watch", mount,
            )))))?
            .collect::<Result<Vec<_>, _>>()?;
        let mut per_scope: BTreeMap<InodeId, Vec<(WatchKey, u64)>> = BTreeMap::new();
        for (k, r) in events {
            per_scope.entry(k.scope).or_default().push((k, r.at_ms));
        }
        for keys in per_scope.values() {
            let excess = keys.len().saturating_sub(self.config.watch_keep_per_scope);
            for (i, (k, at_ms)) in keys.iter().enumerate() {
                let version = stamp_version(&k.stamp);
                let needed = floor.is_some_and(|f| version > f);
                let old = at_ms.saturating_add(self.config.watch_retention_ms) <= now;
                if (i < excess || old) && !needed {
                    self.store.delete(k)?;
                    out.watch += 1;
                }
            }
        }
        // History: rows whose commit is at or below the floor.
        let mut tx = self.store.begin();
        let rows = tx.snapshot_scan_in(&self.hist, &KeyRange::prefix(&[]), None, false)?;
        drop(tx);
        let stale: Vec<Vec<u8>> = rows
            .rows
            .into_iter()
            .filter(|(k, _)| {
                k.len() >= 10 && {
                    let inv = &k[k.len() - 10..k.len() - 2];
                    let mut v = [0u8; 8];
                    for (d, s) in v.iter_mut().zip(inv) {
                        *d = !s;
                    }
                    floor.is_none_or(|f| u64::from_be_bytes(v) <= f)
                }
            })
            .map(|(k, _)| k)
            .collect();
        for chunk in stale.chunks(1_000) {
            self.store.transact(|tx| {
                for k in chunk {
                    tx.delete_in(&self.hist, k.clone())?;
                }
                Ok::<_, StoreError>(())
            })?;
            out.history += chunk.len();
        }
        Ok(out)
    }

    pub(crate) fn live_pins(tx: &mut Tx<'_, E>, mount: MountId) -> Result<bool, NokvError> {
        let now = tx.now_ms();
        let prefix = tuple::pack(&("nokv", "pin", mount));
        let page = tx.scan::<PinKey>(&Scan::range_of(KeyRange::tuple_prefix(&prefix)))?;
        Ok(page.items.iter().any(|(_, p)| p.lease_until_ms > now))
    }
}
