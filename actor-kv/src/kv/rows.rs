//! An entry's rows: its metadata and data rows written, read and scanned, in either physical layout.

#[allow(clippy::wildcard_imports)]
use super::*;

pub(crate) fn charged(key: &[u8], value_len: usize) -> u64 {
    (wrapped_len(key) + value_len) as u64
}

/// The native metadata row's body: the metadata's BARE bytes, then the
/// value.
pub(crate) struct NativeBody {
    pub(crate) metadata: KvMetadata,
    pub(crate) value: Vec<u8>,
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
pub(crate) struct EntryRows;

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

pub(crate) fn planner() -> ChunkPlanner<EntryRows> {
    // CHUNK_SIZE is a valid chunk size: nonzero and below 2^32.
    ChunkPlanner::new(EntryRows, CHUNK_SIZE).unwrap_or_else(|e| unreachable!("{e}"))
}

/// Entries read by a scan, each with its row keys.
#[derive(Default)]
pub(crate) struct Scanned {
    pub(crate) entries: Vec<(Entry, Vec<Vec<u8>>)>,
    pub(crate) more: bool,
}

impl Scanned {
    pub(crate) fn push(
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

/// The rows of one entry in `layout`: metadata row and data rows.
pub(crate) fn encode_entry(
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
pub(crate) fn decode_entry(
    layout: PhysicalLayout,
    actor: ActorId,
    key: Vec<u8>,
    rows: Rows,
) -> Result<Entry, ActorKvError> {
    let base = entry_base(actor, &key);
    let corrupt = |problem| corrupt(&key, problem);
    let undecoded = |problem, e: Box<dyn std::error::Error + Send + Sync>| ActorKvError::Corrupt {
        key: key.clone(),
        problem,
        source: Some(e),
    };
    let mut meta = None;
    let mut data = Vec::new();
    for (k, v) in rows {
        match k.strip_prefix(base.as_slice()).and_then(physical::row_kind) {
            Some(RowKind::Meta) if meta.is_none() => meta = Some(v),
            Some(RowKind::Data(i)) => data.push((i, k, v)),
            _ => return Err(corrupt(DataProblem::ForeignRow)),
        }
    }
    let meta = meta.ok_or_else(|| corrupt(DataProblem::NoMetadata))?;
    match layout {
        PhysicalLayout::Compatible => {
            let metadata = KvMetadata::from_bare(&meta)
                .ok_or_else(|| corrupt(DataProblem::MetadataNotBare))?;
            // No data rows: the empty value, as the engine writes it.
            let count = data.len();
            let mut value = Vec::with_capacity(count * CHUNK_SIZE);
            for (n, (i, _, v)) in data.into_iter().enumerate() {
                if i as usize != n {
                    return Err(corrupt(DataProblem::DataRowOutOfOrder { found: i, due: n }));
                }
                let last = n + 1 == count;
                if v.is_empty() || v.len() > CHUNK_SIZE || (!last && v.len() != CHUNK_SIZE) {
                    return Err(corrupt(DataProblem::DataRowSize {
                        index: i,
                        len: v.len(),
                    }));
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
                .map_err(|e| undecoded(DataProblem::Chunks, Box::new(e)))?
                .is_some();
            if !chunked && !data.is_empty() {
                return Err(corrupt(DataProblem::DataBesideInline));
            }
            let envelope = planner
                .assemble(&base, &meta, data.into_iter().map(|(_, k, v)| (k, v)))
                .map_err(|e| undecoded(DataProblem::Chunks, Box::new(e)))?;
            let body: NativeBody = strata_codec::decode(&base, &envelope)
                .map_err(|e| undecoded(DataProblem::Envelope, Box::new(e)))?;
            Ok(Entry {
                key,
                value: body.value,
                metadata: body.metadata,
            })
        }
    }
}

impl<E: Engine> ActorKv<E> {
    pub(crate) fn entry_rows(
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
    pub(crate) fn write_entry(
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

    /// Entries in `range` (row keys), grouped from their rows, each with
    /// its rows, up to `limit` entries; `more` when a row of another entry
    /// follows the last one.
    #[allow(clippy::too_many_arguments)] // one scan's whole description
    pub(crate) fn scan_entries(
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
                    .ok_or_else(|| corrupt(&k, DataProblem::RowOutsideLayout))?;
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
