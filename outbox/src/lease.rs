//! Leases: a worker's hold on a consumer, taken, renewed, released and checked.

use std::sync::PoisonError;

use strata_engine::Engine;
use strata_keys::tuple;
use strata_store::Tx;

#[allow(clippy::wildcard_imports)]
use crate::*;

/// A worker's hold on a consumer: acknowledgements and failures under it
/// are refused once another worker has taken the consumer over.
///
/// A lease belongs to the one [`Outbox::acquire`] call that took it (a
/// random instance number is stored with it), not to its holder name: a
/// second worker with the same name (a restart while the old process still
/// runs, a name copied from the docs) is refused like any other until the
/// lease is released or expires. The holder keeps it with
/// [`Outbox::renew`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    pub(crate) topic: String,
    pub(crate) consumer: String,
    pub(crate) token: u64,
    pub(crate) holder: String,
    pub(crate) expires_ms: u64,
    pub(crate) instance: u64,
}

impl Lease {
    /// The fencing token: larger for every acquisition.
    pub fn token(&self) -> u64 {
        self.token
    }

    /// The holder name it was taken under (for people: it decides nothing).
    pub fn holder(&self) -> &str {
        &self.holder
    }

    /// Until when it holds without renewal (clock milliseconds).
    pub fn expires_ms(&self) -> u64 {
        self.expires_ms
    }

    /// The topic of the consumer it holds.
    pub fn topic(&self) -> &str {
        &self.topic
    }

    /// The consumer it holds.
    pub fn consumer(&self) -> &str {
        &self.consumer
    }
}

/// A lease row: `(token, holder, until_ms, instance)`.
pub(crate) struct LeaseRow {
    pub(crate) token: u64,
    pub(crate) holder: String,
    pub(crate) until: u64,
    pub(crate) instance: u64,
}

impl LeaseRow {
    /// Whether the row is `lease`'s own acquisition.
    fn is(&self, lease: &Lease) -> bool {
        self.token == lease.token && self.instance == lease.instance
    }
}

/// The lease row at `key` holding `bytes`.
pub(crate) fn read_lease(key: &[u8], bytes: &[u8]) -> Result<LeaseRow, OutboxError> {
    tuple::unpack::<(u64, String, u64, u64)>(bytes)
        .map(|(token, holder, until, instance)| LeaseRow {
            token,
            holder,
            until,
            instance,
        })
        .map_err(|e| corrupt_by(OutboxRow::Lease, key, e))
}

impl<E: Engine> Outbox<'_, E> {
    /// Takes `consumer`'s lease, named `holder`, if it is free (released
    /// or expired): a new fencing token each time. A lease that still runs
    /// is refused whoever holds it, even under the same holder name: the
    /// worker that took it keeps it with [`Outbox::renew`], so two workers
    /// never hold one consumer at once.
    ///
    /// # Errors
    /// [`OutboxError::LeaseHeld`] while a lease runs;
    /// [`OutboxError::UnknownConsumer`].
    pub fn acquire(&self, topic: &str, consumer: &str, holder: &str) -> Result<Lease, OutboxError> {
        let now = self.clock.now_ms();
        let instance = self
            .rng
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .next_u64();
        self.store.transact(|tx| {
            if tx
                .get_in(&self.state, &layout::checkpoint_key(topic, consumer))?
                .is_none()
            {
                return Err(unknown(topic, consumer));
            }
            let key = layout::lease_key(topic, consumer);
            let row = if strata_engine::fault_point!("lease-read-not-pinned") {
                tx.snapshot_get_in(&self.state, &key)?
            } else {
                tx.get_in(&self.state, &key)?
            };
            let current = row.map(|v| read_lease(&key, &v)).transpose()?;
            if strata_engine::fault_point!("shared-holder-name")
                && let Some(held) = current.as_ref().filter(|h| h.holder == holder)
            {
                return Ok(Lease {
                    topic: topic.to_owned(),
                    consumer: consumer.to_owned(),
                    token: held.token,
                    holder: holder.to_owned(),
                    expires_ms: held.until,
                    instance: held.instance,
                });
            }
            let token = match current {
                Some(held) if held.until > now => {
                    return Err(OutboxError::LeaseHeld {
                        topic: topic.to_owned(),
                        consumer: consumer.to_owned(),
                        holder: held.holder,
                        until_ms: held.until,
                    });
                }
                Some(held) => held.token + 1,
                None => 1,
            };
            let expires_ms = now.saturating_add(self.config.lease_ms);
            tx.put_in(
                &self.state,
                key,
                tuple::pack(&(token, holder, expires_ms, instance)),
            )?;
            Ok(Lease {
                topic: topic.to_owned(),
                consumer: consumer.to_owned(),
                token,
                holder: holder.to_owned(),
                expires_ms,
                instance,
            })
        })
    }

    /// Extends `lease` by the configured term from now, keeping its token:
    /// how its holder keeps it. A lease that expired is renewed too as long
    /// as nobody took the consumer in between.
    ///
    /// # Errors
    /// [`OutboxError::StaleLease`] when the consumer was taken over or
    /// released since (acquire it again); a store failure.
    pub fn renew(&self, lease: &Lease) -> Result<Lease, OutboxError> {
        let now = self.clock.now_ms();
        self.store.transact(|tx| {
            let key = layout::lease_key(&lease.topic, &lease.consumer);
            let current = tx
                .get_in(&self.state, &key)?
                .map(|v| read_lease(&key, &v))
                .transpose()?;
            match current {
                Some(held) if held.is(lease) && held.until >= lease.expires_ms.min(now) => {}
                _ => return Err(OutboxError::StaleLease { token: lease.token }),
            }
            let expires_ms = now.saturating_add(self.config.lease_ms);
            tx.put_in(
                &self.state,
                key,
                tuple::pack(&(
                    lease.token,
                    lease.holder.as_str(),
                    expires_ms,
                    lease.instance,
                )),
            )?;
            Ok(Lease {
                expires_ms,
                ..lease.clone()
            })
        })
    }

    /// Gives `lease` up at once, so another holder can take the consumer
    /// over without waiting for it to expire (a worker stopping cleanly).
    /// The token stays: the next holder gets a new one, and this lease's
    /// acknowledgements are refused from now on. Does nothing when the
    /// lease already changed hands.
    ///
    /// # Errors
    /// A store failure.
    pub fn release(&self, lease: &Lease) -> Result<(), OutboxError> {
        let now = self.clock.now_ms();
        self.store.transact(|tx| {
            let key = layout::lease_key(&lease.topic, &lease.consumer);
            let current = tx
                .get_in(&self.state, &key)?
                .map(|v| read_lease(&key, &v))
                .transpose()?;
            if let Some(held) = current
                && held.is(lease)
            {
                // Ended a millisecond before now, or before its own end if
                // it already ran out: free now, and not renewable by its
                // holder, whose renewal accepts an end at `now` or at the
                // lease's own end (a lease that ran out untaken). A lease
                // run out is fenced too: left as it was, its holder could
                // renew it after giving it up.
                let end = held.until.min(now);
                let ended = if strata_engine::fault_point!("release-renewable") {
                    end
                } else {
                    end.saturating_sub(1)
                };
                tx.put_in(
                    &self.state,
                    key,
                    tuple::pack(&(held.token, held.holder.as_str(), ended, held.instance)),
                )?;
            }
            Ok::<_, OutboxError>(())
        })
    }

    /// Checks in `tx` that `lease` still holds (pinned: a take-over before
    /// the commit makes it fail).
    pub(crate) fn check_lease(&self, tx: &mut Tx<'_, E>, lease: &Lease) -> Result<(), OutboxError> {
        let now = self.clock.now_ms();
        let key = layout::lease_key(&lease.topic, &lease.consumer);
        let row = tx.get_in(&self.state, &key)?;
        match row.map(|v| read_lease(&key, &v)).transpose()? {
            Some(held) if held.is(lease) && held.until > now => Ok(()),
            _ => Err(OutboxError::StaleLease { token: lease.token }),
        }
    }
}
