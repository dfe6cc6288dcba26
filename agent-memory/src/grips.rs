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
        if !grip.grip_id.starts_with("grip:") {
            return Err(MemoryError::Invalid {
                what: "grip id (grip:{ts:013}:{suffix})",
                value: grip.grip_id.clone(),
            });
        }
        let key = grip.grip_id.clone();
        let bytes = encode(grip, &key)?;
        self.store.transact(|tx| {
            let old: Option<Grip> = tx
                .get_in(&self.grips, key.as_bytes())?
                .map(|b| decode(key.as_bytes(), &b))
                .transpose()?;
            if let Some(node) = old.and_then(|g| g.toc_node_id) {
                tx.delete_in(&self.grips, node_grip_key(&node, &key).into_bytes())?;
            }
            tx.put_in(&self.grips, key.clone().into_bytes(), bytes.clone())?;
            if let Some(node) = &grip.toc_node_id {
                tx.put_in(
                    &self.grips,
                    node_grip_key(node, &key).into_bytes(),
                    Vec::new(),
                )?;
            }
            self.spec.put(
                self.outbox,
                tx,
                &SearchDocKey {
                    doc_id: key.clone(),
                },
                &SearchDoc {
                    doc_type: "grip".into(),
                    level: String::new(),
                    text: grip.excerpt.clone(),
                    keywords: String::new(),
                    timestamp_ms: grip.start.timestamp_ms,
                },
            )?;
            Ok::<_, MemoryError>(())
        })
    }

    /// Grip `grip_id`.
    ///
    /// # Errors
    /// [`MemoryError::Corrupt`], a store error.
    pub fn grip(&self, grip_id: &str) -> Result<Option<Grip>, MemoryError> {
        let mut tx = self.store.begin();
        tx.snapshot_get_in(&self.grips, grip_id.as_bytes())?
            .map(|b| decode(grip_id.as_bytes(), &b))
            .transpose()
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
                tx.snapshot_get_in(&self.grips, grip_id.as_bytes())?
                    .map(|b| decode(grip_id.as_bytes(), &b))
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
        let start = event_key(grip.start.timestamp_ms, &grip.start.event_id)?;
        let end = event_key(grip.end.timestamp_ms, &grip.end.event_id)?;
        let mut end = end.into_bytes();
        end.push(0);
        let range = KeyRange {
            start: start.into_bytes(),
            end: Some(end),
        };
        let mut tx = self.store.begin();
        let rows = tx.snapshot_scan_in(&self.events, &range, None, false)?.rows;
        rows.iter().map(|(k, v)| decode(k, v)).collect()
    }
}
