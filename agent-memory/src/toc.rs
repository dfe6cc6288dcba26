//! The table of contents: versioned nodes, the latest pointer, the calendar hierarchy, segments.

#[allow(clippy::wildcard_imports)]
use super::*;

impl<E: Engine> AgentMemory<'_, E> {
    /// Writes the next version of `node` (its `version` field is set to
    /// it) and moves the latest pointer to it in the same commit; the
    /// pointer is read in the transaction, so concurrent writers of one
    /// node get distinct, consecutive versions. Returns the version.
    ///
    /// # Errors
    /// [`MemoryError::Invalid`] for a node id outside `toc:`; a store error.
    pub fn put_toc_node(&self, node: &TocNode) -> Result<u32, MemoryError> {
        check_node_id(&node.node_id)?;
        self.store.transact(|tx| self.put_toc_node_in(tx, node))
    }

    pub(crate) fn put_toc_node_in(
        &self,
        tx: &mut Tx<'_, E>,
        node: &TocNode,
    ) -> Result<u32, MemoryError> {
        let latest = latest_key(&node.node_id);
        let current = self.latest_version_in(
            tx,
            &node.node_id,
            !strata_engine::fault_point!("toc-latest-unpinned"),
        )?;
        let version = current + 1;
        let key = toc_key(&node.node_id, version);
        let stored = TocNode {
            version,
            ..node.clone()
        };
        tx.put_in(&self.toc, key.clone().into_bytes(), encode(&stored, &key)?)?;
        tx.put_in(
            &self.latest,
            latest.into_bytes(),
            version.to_be_bytes().to_vec(),
        )?;
        let text = std::iter::once(node.title.as_str())
            .chain(node.bullets.iter().map(|b| b.text.as_str()))
            .collect::<Vec<_>>()
            .join("\n");
        self.spec.put(
            self.outbox,
            tx,
            &SearchDocKey {
                doc_id: node.node_id.clone(),
            },
            &SearchDoc {
                doc_type: "toc_node".into(),
                level: node.level.name().into(),
                text,
                keywords: node.keywords.join(" "),
                timestamp_ms: node.start_ms,
            },
        )?;
        Ok(version)
    }

    pub(crate) fn latest_version_in(
        &self,
        tx: &mut Tx<'_, E>,
        node_id: &str,
        pin: bool,
    ) -> Result<u32, MemoryError> {
        let key = latest_key(node_id);
        let row = if pin {
            tx.get_in(&self.latest, key.as_bytes())?
        } else {
            tx.snapshot_get_in(&self.latest, key.as_bytes())?
        };
        match row {
            None => Ok(0),
            Some(b) => <[u8; 4]>::try_from(b.as_slice())
                .map(u32::from_be_bytes)
                .map_err(|_| MemoryError::Inconsistent {
                    key,
                    problem: Inconsistency::PointerNotFourBytes,
                }),
        }
    }

    /// The latest version of TOC node `node_id`.
    ///
    /// # Errors
    /// [`MemoryError::Inconsistent`] when the pointer names a version that
    /// is not stored; [`MemoryError::Corrupt`]; a store error.
    pub fn toc_node(&self, node_id: &str) -> Result<Option<TocNode>, MemoryError> {
        let mut tx = self.store.begin();
        let version = self.latest_version_in(&mut tx, node_id, false)?;
        if version == 0 {
            return Ok(None);
        }
        let key = toc_key(node_id, version);
        match tx.snapshot_get_in(&self.toc, key.as_bytes())? {
            None => Err(MemoryError::Inconsistent {
                key: latest_key(node_id),
                problem: Inconsistency::VersionNotStored(version),
            }),
            Some(b) => decode(key.as_bytes(), &b).map(Some),
        }
    }

    /// Every stored version of TOC node `node_id`, oldest first.
    ///
    /// # Errors
    /// [`MemoryError::Corrupt`], a store error.
    pub fn toc_versions(&self, node_id: &str) -> Result<Vec<TocNode>, MemoryError> {
        let prefix = format!("{node_id}:v");
        let mut tx = self.store.begin();
        let page =
            tx.snapshot_scan_in(&self.toc, &KeyRange::prefix(prefix.as_bytes()), None, false)?;
        // Keys of other nodes can share the prefix (`toc:a:v` of `toc:a` and
        // of `toc:a:vx`): a version's key ends with exactly six digits.
        page.rows
            .iter()
            .filter(|(k, _)| {
                let rest = &k[prefix.len()..];
                rest.len() == 6 && rest.iter().all(u8::is_ascii_digit)
            })
            .map(|(k, v)| decode(k, v))
            .collect()
    }

    /// Makes sure the year, month, week and day nodes of `timestamp_ms`
    /// exist, each listing the next as a child (a parent gains a new
    /// version only when a child is new to it); returns the day's id.
    ///
    /// # Errors
    /// A store error.
    pub fn ensure_hierarchy(&self, timestamp_ms: u64) -> Result<String, MemoryError> {
        let chain = [
            (Level::Year, year_id(timestamp_ms)),
            (Level::Month, month_id(timestamp_ms)),
            (Level::Week, week_id(timestamp_ms)),
            (Level::Day, day_id(timestamp_ms)),
        ];
        self.store.transact(|tx| {
            let mut child: Option<String> = None;
            for (level, id) in chain.iter().rev() {
                let current = self.node_in(tx, id)?;
                let mut node = current.clone().unwrap_or_else(|| TocNode {
                    node_id: id.clone(),
                    level: *level,
                    title: id.clone(),
                    bullets: Vec::new(),
                    keywords: Vec::new(),
                    child_node_ids: Vec::new(),
                    start_ms: timestamp_ms,
                    end_ms: timestamp_ms,
                    version: 0,
                });
                let mut changed = current.is_none();
                if let Some(c) = &child
                    && !node.child_node_ids.contains(c)
                {
                    node.child_node_ids.push(c.clone());
                    changed = true;
                }
                if changed {
                    self.put_toc_node_in(tx, &node)?;
                }
                child = Some(id.clone());
            }
            Ok(chain[3].1.clone())
        })
    }

    /// Adds segment `segment` under its day (creating the day's ancestors
    /// as [`AgentMemory::ensure_hierarchy`] does) and writes it.
    ///
    /// # Errors
    /// [`MemoryError::Invalid`] for a segment id outside `toc:segment:`; a
    /// store error.
    pub fn put_segment(&self, segment: &TocNode) -> Result<u32, MemoryError> {
        if !segment.node_id.starts_with("toc:segment:") {
            return Err(MemoryError::Invalid {
                what: "segment id (toc:segment:{day}:{suffix})",
                value: segment.node_id.clone(),
            });
        }
        let day = self.ensure_hierarchy(segment.start_ms)?;
        self.store.transact(|tx| {
            let version = self.put_toc_node_in(tx, segment)?;
            if let Some(mut d) = self.node_in(tx, &day)?
                && !d.child_node_ids.contains(&segment.node_id)
            {
                d.child_node_ids.push(segment.node_id.clone());
                self.put_toc_node_in(tx, &d)?;
            }
            Ok(version)
        })
    }

    pub(crate) fn node_in(
        &self,
        tx: &mut Tx<'_, E>,
        node_id: &str,
    ) -> Result<Option<TocNode>, MemoryError> {
        let version = self.latest_version_in(tx, node_id, true)?;
        if version == 0 {
            return Ok(None);
        }
        let key = toc_key(node_id, version);
        tx.get_in(&self.toc, key.as_bytes())?
            .map(|b| decode(key.as_bytes(), &b))
            .transpose()
    }
}
