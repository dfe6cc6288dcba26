//! What the outbox's planted bugs do where it takes more than a line
//! (their fault points are in the outbox's code; see
//! `strata_engine::faults`). Kept apart from the real logic: mutation
//! testing skips files named `planted.rs`.

use strata_engine::Engine;
use strata_store::Tx;

use crate::layout;
use crate::{Outbox, OutboxError, Position};

impl<E: Engine> Outbox<'_, E> {
    /// Bug `sequence-from-counter`: the entry's position comes from a
    /// counter read without a predicate, not from the commit's
    /// versionstamp, so concurrent producers take the same number and one
    /// entry replaces the other.
    pub(crate) fn push_numbered_by_counter(
        &self,
        tx: &mut Tx<'_, E>,
        topic: &str,
        value: Vec<u8>,
    ) -> Result<(), OutboxError> {
        let counter = strata_keys::tuple::pack(&("planted-seq", topic));
        let n = tx
            .snapshot_get_in(&self.state, &counter)?
            .and_then(|v| <[u8; 8]>::try_from(v.as_slice()).ok())
            .map_or(0, u64::from_be_bytes)
            + 1;
        tx.put_in(&self.state, counter, n.to_be_bytes().to_vec())?;
        let pos = Position {
            version: n,
            order: 0,
        };
        tx.put_in(&self.entries, layout::entry_key(topic, pos), value)?;
        Ok(())
    }
}
