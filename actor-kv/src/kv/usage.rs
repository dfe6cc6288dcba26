//! An actor's usage: the exact quota counter, charged in each write's commit, recounted and recharged.

#[allow(clippy::wildcard_imports)]
use super::*;

pub(crate) fn usage_key(actor: ActorId) -> Vec<u8> {
    tuple::pack(&("usage", &actor.bytes()[..]))
}

pub(crate) fn read_usage<E: Engine>(
    tx: &mut Tx<'_, E>,
    meta: &Space,
    actor: ActorId,
    pin: bool,
) -> Result<u64, ActorKvError> {
    let key = usage_key(actor);
    let row = if pin {
        tx.get_in(meta, &key)?
    } else {
        tx.snapshot_get_in(meta, &key)?
    };
    match row {
        None => Ok(0),
        Some(bytes) => <[u8; 8]>::try_from(bytes.as_slice())
            .map(u64::from_be_bytes)
            .map_err(|_| corrupt(&key, DataProblem::UsageCounter)),
    }
}

impl<E: Engine> ActorKv<E> {
    /// Bytes the actor uses, as charged against its quota.
    ///
    /// # Errors
    /// A store error.
    pub fn usage(&self, actor: ActorId) -> Result<u64, ActorKvError> {
        let mut tx = self.store.begin();
        read_usage(&mut tx, &self.meta, actor, false)
    }

    /// Sets the actor's usage to a recount of its rows and returns it: for
    /// rows that came in without passing through [`ActorKv::put`] (written
    /// by Rivet's engine and copied in raw, say), which nothing charged, so
    /// that [`ActorKv::usage`] read 0. Pinned: a concurrent write makes it
    /// retry.
    ///
    /// # Errors
    /// As [`ActorKv::recount`].
    pub fn recharge(&self, actor: ActorId) -> Result<u64, ActorKvError> {
        self.store.transact(|tx| {
            let state = self.state(tx, actor, true)?;
            let sub = physical::subspace(actor);
            let scanned =
                self.scan_entries(tx, actor, &state, KeyRange::prefix(&sub), false, None, true)?;
            let total: u64 = scanned.entries.iter().map(|(e, _)| e.charged_size()).sum();
            tx.put_in(&self.meta, usage_key(actor), total.to_be_bytes().to_vec())?;
            Ok(total)
        })
    }

    /// Recounts the actor's usage from its rows (every entry decoded), for
    /// audits: it equals [`ActorKv::usage`] unless something is wrong.
    ///
    /// # Errors
    /// [`ActorKvError::Corrupt`] naming the first entry that does not read;
    /// a store error.
    pub fn recount(&self, actor: ActorId) -> Result<u64, ActorKvError> {
        let mut tx = self.store.begin();
        let state = self.state(&mut tx, actor, false)?;
        let sub = physical::subspace(actor);
        let scanned = self.scan_entries(
            &mut tx,
            actor,
            &state,
            KeyRange::prefix(&sub),
            false,
            None,
            false,
        )?;
        Ok(scanned.entries.iter().map(|(e, _)| e.charged_size()).sum())
    }

    /// Adds `growth` to the actor's usage, refusing growth past the quota.
    pub(crate) fn charge(
        &self,
        tx: &mut Tx<'_, E>,
        actor: ActorId,
        growth: i128,
    ) -> Result<(), ActorKvError> {
        if growth == 0 {
            return Ok(());
        }
        let usage = read_usage(tx, &self.meta, actor, true)?;
        let next = i128::from(usage) + growth;
        if growth > 0 && next > i128::from(self.config.quota_bytes) {
            return Err(ActorKvError::QuotaExceeded {
                usage,
                growth: u64::try_from(growth).unwrap_or(u64::MAX),
                quota: self.config.quota_bytes,
            });
        }
        let next = u64::try_from(next.max(0)).unwrap_or(u64::MAX);
        if next == 0 {
            tx.delete_in(&self.meta, usage_key(actor))?;
        } else {
            tx.put_in(&self.meta, usage_key(actor), next.to_be_bytes().to_vec())?;
        }
        Ok(())
    }
}
