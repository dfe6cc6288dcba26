//! Client helpers that keep an actor's writes within the engine's limits:
//! the fixes of the document's known issues that live on the client side.
//!
//! - [`plan_puts`] and [`plan_deletes`] split any number of writes into
//!   requests within the limits. **Atomicity ends at each request**: a
//!   crash between two leaves the earlier ones applied, the later ones
//!   not; a caller that needs all-or-nothing must fit one request.
//! - [`plan_sqlite_write`] plans a SQLite file's page writes with the
//!   file's metadata in the last request, so the metadata never describes
//!   pages not yet written.
//! - [`queue_message`] refuses a queue message over the value limit with a
//!   typed error instead of sending it; [`trace_chunks`] cuts trace data
//!   into chunks within the value limit.
//! - [`WriteBuffer`] holds writes (coalesced by key) until a flush commits
//!   them: an entry leaves the buffer only once its request committed, so
//!   a failed write is retried by the next flush instead of wedging the
//!   queue, and nothing is marked clean before it is durable in the store.

use std::collections::BTreeMap;

use strata_engine::Engine;

use super::kv::{check_entries, check_key, limits};
use super::physical::{ActorId, wrapped_len};
use super::{ActorKv, ActorKvError, Layout, LogicalKey, SqliteFile};

/// A key and its value.
pub type KeyValue = (Vec<u8>, Vec<u8>);

/// Splits `entries` into puts within the limits, in order: each request
/// has at most 128 entries, at most 976 KiB of payload and no key twice (a
/// key written twice lands in a later request, so the later value wins).
///
/// # Errors
/// The first entry that fits no request: [`ActorKvError::KeyTooLarge`],
/// [`ActorKvError::ValueTooLarge`] (with its position in `entries`). An
/// empty value is taken, as the engine takes it.
pub fn plan_puts(entries: Vec<KeyValue>) -> Result<Vec<Vec<KeyValue>>, ActorKvError> {
    let mut batches = Vec::new();
    let mut batch: Vec<KeyValue> = Vec::new();
    let mut payload = 0;
    for (index, entry) in entries.into_iter().enumerate() {
        check_entries(std::slice::from_ref(&entry)).map_err(|e| at_index(e, index))?;
        let size = wrapped_len(&entry.0) + entry.1.len();
        let full = batch.len() == limits::MAX_KEYS
            || payload + size > limits::MAX_PUT_PAYLOAD_SIZE
            || batch.iter().any(|(k, _)| *k == entry.0);
        if full {
            batches.push(std::mem::take(&mut batch));
            payload = 0;
        }
        payload += size;
        batch.push(entry);
    }
    if !batch.is_empty() {
        batches.push(batch);
    }
    Ok(batches)
}

/// Splits `keys` into deletes of at most 128 keys, in order.
///
/// # Errors
/// [`ActorKvError::KeyTooLarge`] for the first key over the key limit.
pub fn plan_deletes(keys: &[Vec<u8>]) -> Result<Vec<Vec<Vec<u8>>>, ActorKvError> {
    for (index, key) in keys.iter().enumerate() {
        check_key(index, key)?;
    }
    Ok(keys
        .chunks(limits::MAX_KEYS)
        .map(<[Vec<u8>]>::to_vec)
        .collect())
}

fn at_index(e: ActorKvError, index: usize) -> ActorKvError {
    match e {
        ActorKvError::KeyTooLarge { len, max, .. } => ActorKvError::KeyTooLarge { index, len, max },
        ActorKvError::EmptyValue { .. } => ActorKvError::EmptyValue { index },
        ActorKvError::ValueTooLarge { len, max, .. } => {
            ActorKvError::ValueTooLarge { index, len, max }
        }
        other => other,
    }
}

/// The puts writing `pages` (chunk index and bytes) of SQLite `file` and
/// then its `metadata`, within the limits, the metadata in the last
/// request.
///
/// # Errors
/// As [`plan_puts`] (a page or metadata over the value limit, or empty).
pub fn plan_sqlite_write(
    file: SqliteFile,
    layout: Layout,
    pages: Vec<(u32, Vec<u8>)>,
    metadata: Vec<u8>,
) -> Result<Vec<Vec<KeyValue>>, ActorKvError> {
    let mut entries: Vec<KeyValue> = pages
        .into_iter()
        .map(|(chunk_index, bytes)| {
            (
                LogicalKey::SqliteChunk { file, chunk_index }.encode(layout),
                bytes,
            )
        })
        .collect();
    entries.push((LogicalKey::SqliteMetadata(file).encode(layout), metadata));
    plan_puts(entries)
}

/// The entry of queue message `message_id`.
///
/// # Errors
/// [`ActorKvError::ValueTooLarge`] when `message` is over the value limit
/// (the document's runtime defaulted to 1 MiB messages, which the engine
/// refuses); [`ActorKvError::EmptyValue`] for an empty one.
pub fn queue_message(
    message_id: u64,
    layout: Layout,
    message: Vec<u8>,
) -> Result<KeyValue, ActorKvError> {
    // The engine takes an empty value; a queue message is never empty.
    if message.is_empty() {
        return Err(ActorKvError::EmptyValue { index: 0 });
    }
    let entry = (
        LogicalKey::QueueMessage { message_id }.encode(layout),
        message,
    );
    check_entries(std::slice::from_ref(&entry))?;
    Ok(entry)
}

/// `data` of the traces bucket starting at `bucket_start_sec`, cut into
/// chunks within the value limit, numbered from `first_chunk_id`.
pub fn trace_chunks(
    bucket_start_sec: u64,
    first_chunk_id: u64,
    layout: Layout,
    data: &[u8],
) -> Vec<KeyValue> {
    data.chunks(limits::MAX_VALUE_SIZE)
        .zip(first_chunk_id..)
        .map(|(chunk, chunk_id)| {
            (
                LogicalKey::TraceChunk {
                    bucket_start_sec,
                    chunk_id,
                }
                .encode(layout),
                chunk.to_vec(),
            )
        })
        .collect()
}

/// What a flush committed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Flushed {
    /// Requests committed.
    pub requests: usize,
    /// Entries written or deleted.
    pub entries: usize,
}

/// Writes held for an actor until [`WriteBuffer::flush`] commits them: the
/// dirty set of a workflow's state, a write queue of traces. Writes to one
/// key coalesce (the last wins).
///
/// ```
/// use strata_engine::MemEngine;
/// use strata_actor_kv::client::WriteBuffer;
/// use strata_actor_kv::{ActorId, ActorKv, ActorKvConfig};
/// use strata_store::Store;
///
/// let options = ActorKv::<MemEngine>::store_options();
/// let kv = ActorKv::open(Store::open(MemEngine::open(options.keyspace_specs())?, options)?, ActorKvConfig::default())?;
/// let actor = ActorId::v1(1, 0);
/// let mut buffer = WriteBuffer::new();
/// for i in 0..300u32 {
///     buffer.put(i.to_be_bytes().to_vec(), vec![1; 100])?;
/// }
/// let flushed = buffer.flush(&kv, actor)?;
/// assert_eq!((flushed.requests, flushed.entries), (3, 300));
/// assert!(!buffer.is_dirty());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WriteBuffer {
    pending: BTreeMap<Vec<u8>, Option<Vec<u8>>>,
}

impl WriteBuffer {
    /// An empty buffer.
    pub fn new() -> Self {
        Self::default()
    }

    /// Holds a put of `value` at `key`.
    ///
    /// # Errors
    /// [`ActorKvError::KeyTooLarge`], [`ActorKvError::ValueTooLarge`]: the
    /// write is not held.
    pub fn put(&mut self, key: Vec<u8>, value: Vec<u8>) -> Result<(), ActorKvError> {
        let entry = (key, value);
        check_entries(std::slice::from_ref(&entry))?;
        self.pending.insert(entry.0, Some(entry.1));
        Ok(())
    }

    /// Holds a delete of `key`.
    ///
    /// # Errors
    /// [`ActorKvError::KeyTooLarge`]: the delete is not held.
    pub fn delete(&mut self, key: Vec<u8>) -> Result<(), ActorKvError> {
        plan_deletes(std::slice::from_ref(&key))?;
        self.pending.insert(key, None);
        Ok(())
    }

    /// Whether writes are held.
    pub fn is_dirty(&self) -> bool {
        !self.pending.is_empty()
    }

    /// Writes held.
    pub fn len(&self) -> usize {
        self.pending.len()
    }

    /// Whether no write is held.
    pub fn is_empty(&self) -> bool {
        self.pending.is_empty()
    }

    /// The held write of `key`: `Some(Some(value))` a put, `Some(None)` a
    /// delete.
    pub fn held(&self, key: &[u8]) -> Option<Option<&[u8]>> {
        self.pending.get(key).map(Option::as_deref)
    }

    /// Commits the held writes to `actor`, deletes then puts, in requests
    /// within the limits; each request's entries leave the buffer once it
    /// committed.
    ///
    /// # Errors
    /// The first request's error; that request's entries and every later
    /// one's stay held, and the next flush writes them again (puts and
    /// deletes are idempotent, so this is safe after an unknown outcome too).
    pub fn flush<E: Engine>(
        &mut self,
        kv: &ActorKv<E>,
        actor: ActorId,
    ) -> Result<Flushed, ActorKvError> {
        let mut done = Flushed::default();
        let deletes: Vec<Vec<u8>> = self
            .pending
            .iter()
            .filter(|(_, v)| v.is_none())
            .map(|(k, _)| k.clone())
            .collect();
        for batch in plan_deletes(&deletes)? {
            kv.delete(actor, &batch)?;
            for key in &batch {
                self.pending.remove(key);
            }
            done.requests += 1;
            done.entries += batch.len();
        }
        let puts: Vec<KeyValue> = self
            .pending
            .iter()
            .filter_map(|(k, v)| v.as_ref().map(|v| (k.clone(), v.clone())))
            .collect();
        for batch in plan_puts(puts)? {
            kv.put(actor, &batch)?;
            for (key, _) in &batch {
                self.pending.remove(key);
            }
            done.requests += 1;
            done.entries += batch.len();
        }
        Ok(done)
    }
}
