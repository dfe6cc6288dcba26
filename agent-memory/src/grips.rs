//! Grips: excerpts that back a TOC node's bullets, with the events they came from.

#[allow(clippy::wildcard_imports)]
use super::*;

impl<E: Engine> AgentMemory<'_, E> {
    /// Writes `grip`, and its node-index row when it names a TOC node, in
    /// one commit.
    ///
    /// # Errors
    /// [`MemoryError::Invalid`] for an id outside `grip:`; a store error.
    pub fn put_grip(&self, grip: &Grip) -> Result<(), MemoryError> {
        let (key, bytes) = Self::grip_row(grip)?;
        self.store
            .transact(|tx| self.put_grip_in(tx, grip, &key, &bytes))
    }

    /// As [`AgentMemory::put_grip`], in the caller's transaction.
    ///
    /// # Errors
    /// As [`AgentMemory::put_grip`].
    pub fn put_grip_tx(&self, tx: &mut Tx<'_, E>, grip: &Grip) -> Result<(), MemoryError> {
        let (key, bytes) = Self::grip_row(grip)?;
        self.put_grip_in(tx, grip, &key, &bytes)
    }

    fn grip_row(grip: &Grip) -> Result<(String, Vec<u8>), MemoryError> {
        if !grip.grip_id.starts_with("grip:") {
            return Err(MemoryError::Invalid {
                what: "grip id (grip:{ts:013}:{suffix})",
                value: grip.grip_id.clone(),
            });
        }
        let key = grip.grip_id.clone();
        let bytes = encode(grip, &key)?;
        Ok((key, bytes))
    }

    fn put_grip_in(
        &self,
        tx: &mut Tx<'_, E>,
        grip: &Grip,
        key: &str,
        bytes: &[u8],
    ) -> Result<(), MemoryError> {
        let old: Option<Grip> = match tx.get_in(&self.grips, key.as_bytes())? {
            None => None,
            Some(b) => Some(Self::read_row(tx, GRIPS, key.as_bytes(), b, true)?),
        };
        let replacing = old.is_some();
        if let Some(node) = old.and_then(|g| g.toc_node_id) {
            tx.delete_in(&self.grips, node_grip_key(&node, key).into_bytes())?;
        }
        self.write_row(tx, (&self.grips, GRIPS), key, bytes.to_vec(), replacing)?;
        if let Some(node) = &grip.toc_node_id {
            tx.put_in(
                &self.grips,
                node_grip_key(node, key).into_bytes(),
                Vec::new(),
            )?;
        }
        self.spec.put(
            self.outbox,
            tx,
            &SearchDocKey {
                doc_id: key.to_owned(),
            },
            &SearchDoc {
                doc_type: "grip".into(),
                level: String::new(),
                text: spill::capped(grip.excerpt.clone(), PROJECTED_TEXT_BYTES),
                keywords: String::new(),
                timestamp_ms: grip.start.timestamp_ms,
            },
        )?;
        Ok(())
    }

    /// Deletes grip `grip_id`, its node-index row and its search document
    /// in one commit; returns whether it was stored (deleting an unknown
    /// grip writes nothing).
    ///
    /// # Errors
    /// [`MemoryError::Corrupt`] for a stored grip that does not decode (it
    /// is left as it is), a store error.
    pub fn delete_grip(&self, grip_id: &str) -> Result<bool, MemoryError> {
        let key = grip_id.as_bytes();
        self.store.transact(|tx| {
            let Some(bytes) = tx.get_in(&self.grips, key)? else {
                return Ok(false);
            };
            let spilled = bytes == spill::POINTER;
            let grip: Grip = Self::read_row(tx, GRIPS, key, bytes, true)?;
            if spilled {
                Self::drop_spill(tx, GRIPS, grip_id, spill::POINTER)?;
            }
            if let Some(node) = &grip.toc_node_id {
                tx.delete_in(&self.grips, node_grip_key(node, grip_id).into_bytes())?;
            }
            tx.delete_in(&self.grips, key.to_vec())?;
            self.spec.delete(
                self.outbox,
                tx,
                &SearchDocKey {
                    doc_id: grip_id.to_owned(),
                },
            )?;
            Ok::<_, MemoryError>(true)
        })
    }

    /// Grip `grip_id`.
    ///
    /// # Errors
    /// [`MemoryError::Corrupt`], a store error.
    pub fn grip(&self, grip_id: &str) -> Result<Option<Grip>, MemoryError> {
        let mut tx = self.store.begin();
        match tx.snapshot_get_in(&self.grips, grip_id.as_bytes())? {
            None => Ok(None),
            Some(b) => Self::read_row(&mut tx, GRIPS, grip_id.as_bytes(), b, false).map(Some),
        }
    }

    /// The grips linked to `node_id`, by one prefix scan of the node index.
    ///
    /// # Errors
    /// [`MemoryError::Corrupt`] (also for an index row whose grip is gone);
    /// a store error.
    pub fn grips_for_node(&self, node_id: &str) -> Result<Vec<Grip>, MemoryError> {
        let prefix = format!("node:{node_id}:");
        let mut tx = self.store.begin();
        let rows = tx
            .snapshot_scan_in(
                &self.grips,
                &KeyRange::prefix(prefix.as_bytes()),
                None,
                false,
            )?
            .rows;
        rows.into_iter()
            .map(|(k, _)| {
                let grip_id = String::from_utf8_lossy(&k[prefix.len()..]).into_owned();
                let row = tx.snapshot_get_in(&self.grips, grip_id.as_bytes())?;
                row.map(|b| Self::read_row(&mut tx, GRIPS, grip_id.as_bytes(), b, false))
                    .transpose()?
                    .ok_or_else(|| MemoryError::Inconsistent {
                        key: String::from_utf8_lossy(&k).into_owned(),
                        problem: Inconsistency::GripNotStored,
                    })
            })
            .collect()
    }

    /// The events grip `grip_id` came from: its span, both ends included.
    ///
    /// # Errors
    /// [`MemoryError::NoSuchGrip`] for an unknown grip, [`MemoryError::Invalid`]
    /// for a span whose ends are no event keys, a store error.
    pub fn provenance(&self, grip_id: &str) -> Result<Vec<Event>, MemoryError> {
        let grip = self.grip(grip_id)?.ok_or_else(|| MemoryError::NoSuchGrip {
            grip_id: grip_id.to_owned(),
        })?;
        let start = event_key(&grip.start.event_id)?;
        let end = event_key(&grip.end.event_id)?;
        let mut end = end.into_bytes();
        end.push(0);
        let range = KeyRange {
            start: start.into_bytes(),
            end: Some(end),
        };
        let mut tx = self.store.begin();
        let rows = tx.snapshot_scan_in(&self.events, &range, None, false)?.rows;
        rows.into_iter()
            .map(|(k, v)| Self::read_row(&mut tx, EVENTS, &k, v, false))
            .collect()
    }
}
