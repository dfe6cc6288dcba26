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
        self.write_row(
            tx,
            (&self.toc, TOC_NODES),
            &key,
            encode(&stored, &key)?,
            false,
        )?;
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
                text: spill::capped(text, PROJECTED_TEXT_BYTES),
                keywords: spill::capped(node.keywords.join(" "), PROJECTED_KEYWORD_BYTES),
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
        self.toc_node_in(&mut tx, node_id)
    }

    /// [`AgentMemory::toc_node`] in `tx`'s snapshot (no read recorded).
    fn toc_node_in(
        &self,
        tx: &mut Tx<'_, E>,
        node_id: &str,
    ) -> Result<Option<TocNode>, MemoryError> {
        let version = self.latest_version_in(tx, node_id, false)?;
        if version == 0 {
            return Ok(None);
        }
        let key = toc_key(node_id, version);
        match tx.snapshot_get_in(&self.toc, key.as_bytes())? {
            None => Err(MemoryError::Inconsistent {
                key: latest_key(node_id),
                problem: Inconsistency::VersionNotStored(version),
            }),
            Some(b) => Self::read_row(tx, TOC_NODES, key.as_bytes(), b, false).map(Some),
        }
    }

    /// The latest version of every node of `level` whose span meets
    /// `[start_ms, end_ms)` (either bound may be left open), ordered by
    /// the span's start: one scan of the latest pointers of the level and
    /// a read per node, in one snapshot.
    ///
    /// # Errors
    /// [`MemoryError::Inconsistent`] for a pointer that names no stored
    /// version or is not 4 bytes; [`MemoryError::Corrupt`]; a store error.
    pub fn toc_nodes_by_level(
        &self,
        level: Level,
        start_ms: Option<u64>,
        end_ms: Option<u64>,
    ) -> Result<Vec<TocNode>, MemoryError> {
        let prefix = latest_key(&format!("toc:{}:", level.name()));
        let mut tx = self.store.begin();
        let pointers = tx
            .snapshot_scan_in(
                &self.latest,
                &KeyRange::prefix(prefix.as_bytes()),
                None,
                false,
            )?
            .rows;
        let mut nodes = Vec::new();
        for (key, _) in pointers {
            let node_id = String::from_utf8_lossy(&key["latest:".len()..]).into_owned();
            let Some(node) = self.toc_node_in(&mut tx, &node_id)? else {
                continue;
            };
            let meets = start_ms.is_none_or(|s| node.end_ms > s || node.start_ms >= s)
                && end_ms.is_none_or(|e| node.start_ms < e);
            if meets {
                nodes.push(node);
            }
        }
        nodes.sort_by(|a, b| (a.start_ms, &a.node_id).cmp(&(b.start_ms, &b.node_id)));
        Ok(nodes)
    }

    /// The latest version of each child of `node_id`, ordered by the
    /// span's start (empty for an unknown node; a child listed but never
    /// written is left out).
    ///
    /// # Errors
    /// As [`AgentMemory::toc_node`].
    pub fn child_nodes(&self, node_id: &str) -> Result<Vec<TocNode>, MemoryError> {
        let mut tx = self.store.begin();
        let Some(parent) = self.toc_node_in(&mut tx, node_id)? else {
            return Ok(Vec::new());
        };
        let mut children = Vec::new();
        for child in &parent.child_node_ids {
            if let Some(node) = self.toc_node_in(&mut tx, child)? {
                children.push(node);
            }
        }
        children.sort_by(|a, b| (a.start_ms, &a.node_id).cmp(&(b.start_ms, &b.node_id)));
        Ok(children)
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
            .into_iter()
            .filter(|(k, _)| {
                let rest = &k[prefix.len()..];
                rest.len() == 6 && rest.iter().all(u8::is_ascii_digit)
            })
            .map(|(k, v)| Self::read_row(&mut tx, TOC_NODES, &k, v, false))
            .collect()
    }

    /// Makes sure the year, month, week and day nodes of `timestamp_ms`
    /// exist ([`calendar_chain`]: the day under its ISO week, the week
    /// under its Thursday's month, with the original's ids, titles and
    /// calendar spans), each listing the next as a child (a parent gains a
    /// new version only when a child is new to it); returns the day's id.
    ///
    /// # Errors
    /// A store error.
    pub fn ensure_hierarchy(&self, timestamp_ms: u64) -> Result<String, MemoryError> {
        self.store
            .transact(|tx| self.ensure_hierarchy_in(tx, timestamp_ms))
    }

    fn ensure_hierarchy_in(
        &self,
        tx: &mut Tx<'_, E>,
        timestamp_ms: u64,
    ) -> Result<String, MemoryError> {
        let chain = calendar_chain(timestamp_ms);
        {
            let mut child: Option<&str> = None;
            for cal in chain.iter().rev() {
                let current = self.node_in(tx, &cal.node_id)?;
                let mut node = current.clone().unwrap_or_else(|| TocNode {
                    salience: Salience::default(),
                    contributing_agents: Vec::new(),
                    node_id: cal.node_id.clone(),
                    level: cal.level,
                    title: cal.title.clone(),
                    bullets: Vec::new(),
                    keywords: Vec::new(),
                    child_node_ids: Vec::new(),
                    start_ms: cal.start_ms,
                    end_ms: cal.end_ms,
                    version: 0,
                });
                let mut changed = current.is_none();
                if let Some(c) = child
                    && !node.child_node_ids.iter().any(|x| x == c)
                {
                    node.child_node_ids.push(c.to_owned());
                    changed = true;
                }
                if changed {
                    self.put_toc_node_in(tx, &node)?;
                }
                child = Some(&cal.node_id);
            }
            Ok(chain[3].node_id.clone())
        }
    }

    /// Adds segment `segment` under its day (creating the day's ancestors
    /// as [`AgentMemory::ensure_hierarchy`] does) and writes it.
    ///
    /// # Errors
    /// [`MemoryError::Invalid`] for a segment id outside
    /// `toc:segment:{day}:{suffix}` or whose day is not the one `start_ms`
    /// falls on; a store error.
    pub fn put_segment(&self, segment: &TocNode) -> Result<u32, MemoryError> {
        Self::check_segment(segment)?;
        self.ensure_hierarchy(segment.start_ms)?;
        self.store.transact(|tx| self.put_segment_in(tx, segment))
    }

    /// As [`AgentMemory::put_segment`], in the caller's transaction (the
    /// hierarchy made there too).
    ///
    /// # Errors
    /// As [`AgentMemory::put_segment`].
    pub fn put_segment_tx(
        &self,
        tx: &mut Tx<'_, E>,
        segment: &TocNode,
    ) -> Result<u32, MemoryError> {
        Self::check_segment(segment)?;
        self.ensure_hierarchy_in(tx, segment.start_ms)?;
        self.put_segment_in(tx, segment)
    }

    fn check_segment(segment: &TocNode) -> Result<(), MemoryError> {
        // The id names the day the segment starts on, so that the id
        // alone tells its parent ([`parent_id`]), as in the original.
        let day = day_id(segment.start_ms);
        if !segment.node_id.starts_with("toc:segment:")
            || parent_id(&segment.node_id).as_deref() != Some(day.as_str())
        {
            return Err(MemoryError::Invalid {
                what: "segment id (toc:segment:{the day of start_ms}:{suffix})",
                value: segment.node_id.clone(),
            });
        }
        Ok(())
    }

    fn put_segment_in(&self, tx: &mut Tx<'_, E>, segment: &TocNode) -> Result<u32, MemoryError> {
        let day = day_id(segment.start_ms);
        let version = self.put_toc_node_in(tx, segment)?;
        if let Some(mut d) = self.node_in(tx, &day)?
            && !d.child_node_ids.contains(&segment.node_id)
        {
            d.child_node_ids.push(segment.node_id.clone());
            self.put_toc_node_in(tx, &d)?;
        }
        Ok(version)
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
        match tx.get_in(&self.toc, key.as_bytes())? {
            None => Ok(None),
            Some(b) => Self::read_row(tx, TOC_NODES, key.as_bytes(), b, true).map(Some),
        }
    }
}
