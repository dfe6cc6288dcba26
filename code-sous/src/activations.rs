//! Activations: started once, ended once, their logs in chunks, swept when expired.

#[allow(clippy::wildcard_imports)]
use super::*;

pub(crate) fn activation_key(tenant: &str, activation_id: &str) -> ActivationKey {
    ActivationKey {
        tenant: tenant.to_owned(),
        activation_id: activation_id.to_owned(),
    }
}

/// Writes `value` expiring at `at` (never, for `None`).
pub(crate) fn put_expiring<E, K>(
    tx: &mut strata_store::Tx<'_, E>,
    key: &K,
    value: &K::Value,
    at: Option<u64>,
) -> Result<(), StoreError>
where
    E: Engine,
    K: strata_keys::Key + 'static,
    K::Value: strata_codec::Value,
{
    match at {
        Some(at) => tx.put_expiring_at(key, value, at),
        None => tx.put(key, value),
    }
}

/// `text` in pieces of at most `max` bytes, cut on character boundaries
/// (none for empty text).
pub(crate) fn split_utf8(text: &str, max: usize) -> Vec<&str> {
    let mut pieces = Vec::new();
    let mut rest = text;
    while !rest.is_empty() {
        let mut cut = rest.len().min(max);
        while !rest.is_char_boundary(cut) {
            cut -= 1;
        }
        let (piece, tail) = rest.split_at(cut);
        pieces.push(piece);
        rest = tail;
    }
    pieces
}

impl<E: Engine> CodeSous<E> {
    // ---- activations and logs ----

    /// Records a new activation (status `queued` or `running`), expiring
    /// after the activation time to live. A record whose `start_ms` is a
    /// whole time to live ago or more is refused: it may be a replay of an
    /// activation that ran, ended and expired, which must not start again.
    ///
    /// # Errors
    /// [`CodeSousError::WrongStatus`] for a terminal status,
    /// [`CodeSousError::ActivationExists`],
    /// [`CodeSousError::ActivationExpired`].
    pub fn start_activation(&self, activation: &ActivationRecord) -> Result<(), CodeSousError> {
        if activation.status.is_terminal() {
            return Err(CodeSousError::WrongStatus(activation.status));
        }
        let key = activation_key(&activation.tenant, &activation.activation_id);
        let expired_at = activation
            .start_ms
            .saturating_add(self.config.activation_ttl_ms);
        self.store.transact(|tx| {
            if tx.get(&key)?.is_some() {
                return Err(CodeSousError::ActivationExists {
                    id: activation.activation_id.clone(),
                });
            }
            if expired_at <= tx.now_ms() && !strata_engine::fault_point!("start-after-retention") {
                return Err(CodeSousError::ActivationExpired {
                    id: activation.activation_id.clone(),
                    start_ms: activation.start_ms,
                    expired_at,
                });
            }
            tx.put_with_ttl(&key, activation, self.config.activation_ttl_ms)?;
            Ok(())
        })
    }

    /// Ends an activation with the terminal `status` at `end_ms`, by
    /// compare-and-set on the record it read: exactly one terminal update
    /// wins; the record keeps its expiry.
    ///
    /// # Errors
    /// [`CodeSousError::WrongStatus`] for a non-terminal status,
    /// [`CodeSousError::NoSuchActivation`],
    /// [`CodeSousError::AlreadyTerminal`].
    pub fn finish_activation(
        &self,
        tenant: &str,
        activation_id: &str,
        status: ActivationStatus,
        end_ms: u64,
        error: Option<&str>,
        result_truncated: bool,
    ) -> Result<ActivationRecord, CodeSousError> {
        if !status.is_terminal() {
            return Err(CodeSousError::WrongStatus(status));
        }
        let key = activation_key(tenant, activation_id);
        self.store.transact(|tx| {
            let current = tx
                .get(&key)?
                .ok_or_else(|| CodeSousError::NoSuchActivation {
                    id: activation_id.to_owned(),
                })?;
            if current.status.is_terminal()
                && !strata_engine::fault_point!("second-ending-accepted")
            {
                return Err(CodeSousError::AlreadyTerminal {
                    id: activation_id.to_owned(),
                    status: current.status,
                });
            }
            let mut done = current.clone();
            done.status = status;
            done.end_ms = Some(end_ms);
            done.duration_ms = Some(end_ms.saturating_sub(current.start_ms));
            done.error = error.map(str::to_owned);
            done.result_truncated = result_truncated;
            if !tx.compare_and_set(&key, Some(&current), Some(&done))? {
                // The transaction read `current`; a change since is a
                // conflict the store retries, so this does not happen.
                return Err(CodeSousError::NoSuchActivation {
                    id: activation_id.to_owned(),
                });
            }
            Ok(done)
        })
    }

    /// An activation that has not expired.
    ///
    /// # Errors
    /// A store failure.
    pub fn activation(
        &self,
        tenant: &str,
        activation_id: &str,
    ) -> Result<Option<ActivationRecord>, CodeSousError> {
        Ok(self.store.get(&activation_key(tenant, activation_id))?)
    }

    /// Appends `text` to an activation's log: chunks of at most
    /// [`CodeSousConfig::log_chunk_bytes`] (split on character
    /// boundaries) after the last one, and their numbers in the log's
    /// index, in one commit; chunks and index expire with the activation.
    /// Returns the numbers written.
    ///
    /// # Errors
    /// [`CodeSousError::NoSuchActivation`].
    pub fn append_log(
        &self,
        tenant: &str,
        activation_id: &str,
        text: &str,
    ) -> Result<Vec<u64>, CodeSousError> {
        let index = LogIndexKey {
            tenant: tenant.to_owned(),
            activation_id: activation_id.to_owned(),
        };
        let pieces = split_utf8(text, self.config.log_chunk_bytes.max(4));
        self.store.transact(|tx| {
            let activation = tx
                .get_with_expiry(&activation_key(tenant, activation_id))?
                .ok_or_else(|| CodeSousError::NoSuchActivation {
                    id: activation_id.to_owned(),
                })?;
            let expires = activation.expires_at;
            let mut chunks = tx.get(&index)?.unwrap_or_default();
            let first = chunks.last().map_or(0, |last| last + 1);
            let mut written = Vec::new();
            for (piece, chunk) in pieces.iter().zip(first..) {
                let key = LogChunkKey {
                    tenant: tenant.to_owned(),
                    activation_id: activation_id.to_owned(),
                    chunk,
                };
                put_expiring(tx, &key, &(*piece).to_owned(), expires)?;
                chunks.insert(chunk);
                written.push(chunk);
            }
            put_expiring(tx, &index, &chunks, expires)?;
            Ok(written)
        })
    }

    /// An activation's whole log, its chunks in order.
    ///
    /// # Errors
    /// A store failure.
    pub fn read_log(&self, tenant: &str, activation_id: &str) -> Result<String, CodeSousError> {
        let view = self.store.read()?;
        let index = LogIndexKey {
            tenant: tenant.to_owned(),
            activation_id: activation_id.to_owned(),
        };
        let mut log = String::new();
        for chunk in view.get(&index)?.unwrap_or_default().iter() {
            if let Some(text) = view.get(&LogChunkKey {
                tenant: tenant.to_owned(),
                activation_id: activation_id.to_owned(),
                chunk,
            })? {
                log.push_str(&text);
            }
        }
        Ok(log)
    }

    /// Removes expired drafts, activations and logs (the store's sweeper):
    /// deterministic for a state and a clock reading. Reads never return
    /// an expired record, swept or not.
    ///
    /// # Errors
    /// A store failure.
    pub fn sweep_expired(&self) -> Result<SweepReport, CodeSousError> {
        Ok(self.store.sweep_expired(None)?)
    }
}
