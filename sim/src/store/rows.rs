//! Documents with their counts, blobs chunked or refused whole, values that expire.

#[allow(clippy::wildcard_imports)]
use super::*;

/// A blob's bytes: sequence number, length, then a pattern of both.
pub(super) fn blob_bytes(seq: u64, len: usize) -> Vec<u8> {
    let mut out = seq.to_be_bytes().to_vec();
    out.extend_from_slice(&u32::try_from(len).unwrap_or(u32::MAX).to_be_bytes());
    let mut x = seq.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    while out.len() < len.max(12) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.push(x.to_le_bytes()[0]);
    }
    out
}

/// Whether the value at data key `key` has chunk rows, read raw without
/// faults.
pub(super) fn has_chunks<E: Target>(store: &Store<Faulty<E>>, key: &[u8]) -> Result<bool, String> {
    use strata_engine::Snapshot;
    let e = store.engine().inner();
    let system = e
        .keyspaces()
        .get(&store.options().system_keyspace)
        .map_err(|err| err.to_string())?;
    e.snapshot()
        .and_then(|snap| snap.get(system, &model::chunk_key(key, 0)))
        .map(|v| v.is_some())
        .map_err(|err| format!("a fault-free read failed: {err}"))
}

/// The rows a put of a `len`-byte blob at `key` writes, by the documented
/// formats (not the store's code): entries, and bytes at least and at most
/// (the manifest may or may not repeat the expiry). The envelope is a
/// 5-byte header, 8 bytes of expiry if any, a 4-byte checksum and the
/// bytes; up to the value limit it is the data row itself, above it chunks
/// of the value limit at `("c", key, i)` plus a manifest row (header,
/// checksum, 20 bytes of manifest).
pub(super) fn blob_rows(key: &[u8], len: usize, expires: bool) -> (usize, usize, usize) {
    let whole = 5 + if expires { 8 } else { 0 } + 4 + len;
    let max = LIMITS.max_value_bytes;
    if whole <= max {
        return (1, key.len() + whole, key.len() + whole);
    }
    let n = whole.div_ceil(max);
    let mut bytes = 0;
    for i in 0..n {
        let chunk = if i + 1 == n {
            whole - max * (n - 1)
        } else {
            max
        };
        bytes += model::chunk_key(key, u32::try_from(i).unwrap_or(u32::MAX)).len() + chunk;
    }
    let manifest = key.len() + 5 + 4 + 20;
    (1 + n, bytes + manifest, bytes + manifest + 8)
}

/// Whether `bytes` is a whole blob written by [`blob_bytes`].
pub(super) fn blob_ok(bytes: &[u8]) -> bool {
    let Some((seq, rest)) = bytes.split_first_chunk::<8>() else {
        return false;
    };
    let Some((len, _)) = rest.split_first_chunk::<4>() else {
        return false;
    };
    let len = u32::from_be_bytes(*len) as usize;
    blob_bytes(u64::from_be_bytes(*seq), len) == bytes
}

/// The range of an actor's documents.
pub(super) fn docs_of(actor: u64) -> Scan {
    Scan::range_of(KeyRange::tuple_prefix(&tuple::pack(&(ACTOR, actor, "doc"))))
}

impl StoreRun {
    pub(super) fn doc<E: Target>(
        &mut self,
        store: &Store<Faulty<E>>,
        step: usize,
    ) -> Result<(), Violation> {
        let actor = self.frame.rng.below(ACTORS);
        let id = self.frame.rng.below(DOCS);
        let insert = self.frame.rng.chance(0.6);
        // Sizes around the value limit (the envelope adds 9 bytes).
        let len = match self.frame.rng.below(4) {
            0 => 150,
            1 => 151,
            2 => 152,
            _ => usize::try_from(self.frame.rng.below(100)).unwrap_or(0),
        };
        let value = vec![u8::try_from(id).unwrap_or(0); len];
        let rec = Rec::default();
        let r = store.transact(|tx| {
            rec.start();
            let k = Doc { actor, id };
            if insert {
                if tx.put_if_absent(&k, &value)? {
                    rec.put(Slot::Doc(actor, id), &value);
                    tx.add(&DocCount { actor }, 1)?;
                    rec.write(Slot::Count(actor), Write::Add(1));
                }
            } else if tx.get(&k)?.is_some() {
                tx.delete(&k)?;
                rec.write(Slot::Doc(actor, id), Write::Delete);
                tx.add(&DocCount { actor }, -1)?;
                rec.write(Slot::Count(actor), Write::Add(-1));
            }
            Ok::<_, StoreError>(())
        });
        let over = len + 9 > LIMITS.max_value_bytes;
        match (&r, insert && over) {
            (Err(StoreError::ValueTooLarge { .. }), true) => {
                self.frame
                    .trace
                    .event(step, format!("doc {actor}/{id} of {len} bytes refused"));
                Ok(())
            }
            (Err(StoreError::ValueTooLarge { .. }), false) => Err(fail(
                step,
                format!("a {len}-byte document was refused as too large"),
            )),
            _ => {
                self.settle(
                    store,
                    step,
                    &format!(
                        "doc {} {actor}/{id} ({len} bytes)",
                        if insert { "insert" } else { "delete" }
                    ),
                    r,
                    &rec.take(),
                )?;
                Ok(())
            }
        }
    }

    pub(super) fn blob<E: Target>(
        &mut self,
        store: &Store<Faulty<E>>,
        step: usize,
    ) -> Result<(), Violation> {
        let actor = self.frame.rng.below(ACTORS);
        let id = self.frame.rng.below(BLOBS);
        self.seq += 1;
        let len = match self.frame.rng.below(5) {
            0 => 12 + usize::try_from(self.frame.rng.below(100)).unwrap_or(0),
            1 => 150 + usize::try_from(self.frame.rng.below(4)).unwrap_or(0), // the inline boundary
            2 => 1_200 + usize::try_from(self.frame.rng.below(600)).unwrap_or(0), // near the batch limits
            _ => 200 + usize::try_from(self.frame.rng.below(1_200)).unwrap_or(0),
        };
        let bytes = blob_bytes(self.seq, len);
        let delete = self.frame.rng.chance(0.15);
        // Now and then a chunked value with a time to live.
        let expires = self
            .frame
            .rng
            .chance(0.2)
            .then(|| self.frame.clock.now_ms() + 1 + self.frame.rng.below(3_000));
        // What the put's own rows take, computed from the documented
        // formats, and whether an old value has chunk rows (whose deletes
        // add to the commit), read raw before the transaction.
        let raw_key = Blob { actor, id }.pack().unwrap_or_default();
        let old_chunked = has_chunks(store, &raw_key).map_err(|why| fail(step, why))?;
        let own = (!delete).then(|| blob_rows(&raw_key, len, expires.is_some()));
        let rec = Rec::default();
        let r = store.transact(|tx| {
            rec.start();
            let key = Blob { actor, id };
            if delete {
                tx.delete(&key)?;
                rec.write(Slot::Blob(actor, id), Write::Delete);
            } else {
                match expires {
                    Some(at) => tx.put_expiring_at(&key, &bytes, at)?,
                    None => tx.put(&key, &bytes)?,
                }
                let value = bytes.clone();
                rec.write(Slot::Blob(actor, id), Write::Put { value, expires });
            }
            Ok::<_, StoreError>(())
        });
        if self.blob_refusal(step, (actor, id, len), &r, own, old_chunked)? {
            return Ok(());
        }
        self.settle(
            store,
            step,
            &format!("blob {actor}/{id} seq {} ({len} bytes)", self.seq),
            r,
            &rec.take(),
        )?;
        Ok(())
    }

    /// Checks a blob put's outcome against the limits, from the rows it
    /// writes (`own`: entries and bytes at least and at most) and whether
    /// old chunks were deleted too; returns whether it was refused.
    pub(super) fn blob_refusal(
        &mut self,
        step: usize,
        (actor, id, len): (u64, u64, usize),
        r: &Result<(), StoreError>,
        own: Option<(usize, usize, usize)>,
        old_chunked: bool,
    ) -> Result<bool, Violation> {
        self.frame.checks += 1;
        let within = |(entries, lo, hi): (usize, usize, usize)| {
            (
                entries <= LIMITS.max_batch_entries && hi as u64 <= LIMITS.max_batch_bytes,
                entries > LIMITS.max_batch_entries || lo as u64 > LIMITS.max_batch_bytes,
            )
        };
        match (&r, own.map(within)) {
            // Every row is within the row limits by construction (chunks of
            // the value limit, short keys): a row-limit refusal is wrong.
            (
                Err(StoreError::Limit {
                    row: Some(row),
                    source,
                }),
                _,
            ) => {
                return Err(fail(
                    step,
                    format!(
                        "blob {actor}/{id} of {len} bytes refused for its {} ({source}), though every row it writes is within the row limits",
                        row.kind
                    ),
                ));
            }
            // Its own rows fit and no old chunk is deleted: nothing else
            // counts, so the batch limits cannot refuse it.
            (Err(StoreError::Limit { source, .. }), Some((true, _))) if !old_chunked => {
                return Err(fail(
                    step,
                    format!(
                        "blob {actor}/{id} of {len} bytes refused ({source}), though its rows fit the batch limits"
                    ),
                ));
            }
            (Ok(()), Some((_, true))) => {
                return Err(fail(
                    step,
                    format!(
                        "blob {actor}/{id} of {len} bytes accepted, though its own rows exceed the batch limits"
                    ),
                ));
            }
            (Err(StoreError::Limit { source: l, .. }), _) => {
                self.frame.trace.event(
                    step,
                    format!("blob {actor}/{id} of {len} bytes refused: {l}"),
                );
                return Ok(true);
            }
            _ => {}
        }
        Ok(false)
    }

    pub(super) fn ttl<E: Target>(
        &mut self,
        store: &Store<Faulty<E>>,
        step: usize,
    ) -> Result<(), Violation> {
        let actor = self.frame.rng.below(ACTORS);
        let id = self.frame.rng.below(DOCS);
        if self.frame.rng.chance(0.4) {
            // Finished by compare-and-set, which keeps the expiry: the new
            // value carries the same expiry time in its first 8 bytes and
            // must still expire then.
            let rec = Rec::default();
            let r = store.transact(|tx| {
                rec.start();
                let key = Ttl { actor, id };
                let Some(old) = tx.get(&key)? else {
                    return Ok(());
                };
                let mut new = old.clone();
                if let Some(flag) = new.get_mut(8) {
                    *flag ^= 1;
                }
                if tx.compare_and_set(&key, Some(&old), Some(&new))? {
                    rec.write(Slot::Ttl(actor, id), Write::PutKeep(new));
                }
                Ok(())
            });
            self.settle(
                store,
                step,
                &format!("ttl {actor}/{id} finished by compare-and-set"),
                r,
                &rec.take(),
            )?;
            return Ok(());
        }
        let ttl = 1 + self.frame.rng.below(5_000);
        let at = self.frame.clock.now_ms() + ttl;
        let value = [&at.to_be_bytes()[..], &[0]].concat();
        // An absolute expiry: the same in every attempt of the transaction,
        // and the same as the time in the value's bytes.
        let r = store.transact(|tx| tx.put_expiring_at(&Ttl { actor, id }, &value, at));
        let writes = [(
            Slot::Ttl(actor, id),
            Write::Put {
                value,
                expires: Some(at),
            },
        )];
        self.settle(
            store,
            step,
            &format!("ttl {actor}/{id} for {ttl} ms"),
            r,
            &writes,
        )?;
        Ok(())
    }
}
