//! Group membership raced by two writers, a ranked sorted set, an event log.

#[allow(clippy::wildcard_imports)]
use super::*;

/// The range of a group's members.
pub(super) fn members_of(group: u64) -> Scan {
    Scan::range_of(KeyRange::tuple_prefix(&tuple::pack(&(GROUP, group))))
}

/// Adds member `id` to `group` if the group has fewer than
/// [`MAX_MEMBERS`]; returns whether it did.
pub(super) fn join<E: Engine>(
    tx: &mut Tx<'_, E>,
    rec: &Rec,
    group: u64,
    id: u64,
) -> Result<bool, StoreError> {
    if tx.scan::<Member>(&members_of(group))?.items.len() >= MAX_MEMBERS {
        return Ok(false);
    }
    tx.put(&Member { group, id }, &Vec::new())?;
    rec.put(Slot::Member(group, id), &[]);
    Ok(true)
}

impl StoreRun {
    /// Transactions racing on one chunked value, one quota scope or one
    /// TTL key, committed in a random order: each commits whole or
    /// conflicts, and the model and the recount see the result.
    pub(super) fn race<E: Target>(
        &mut self,
        store: &Store<Faulty<E>>,
        step: usize,
    ) -> Result<(), Violation> {
        let actor = self.frame.rng.below(ACTORS);
        let kind = self.frame.rng.below(3);
        let n = 2 + self.frame.rng.below(2);
        let mut txs: Vec<(Tx<'_, Faulty<E>>, Rec, String)> = Vec::new();
        for _ in 0..n {
            let mut tx = store.begin();
            let rec = Rec::default();
            self.seq += 1;
            let (what, r) = match kind {
                0 => {
                    let id = 0;
                    let len = 150 + usize::try_from(self.frame.rng.below(900)).unwrap_or(0);
                    let bytes = blob_bytes(self.seq, len);
                    let r = tx.put(&Blob { actor, id }, &bytes);
                    if r.is_ok() {
                        rec.put(Slot::Blob(actor, id), &bytes);
                    }
                    (
                        format!("race on blob {actor}/{id} seq {} ({len} bytes)", self.seq),
                        r,
                    )
                }
                1 => {
                    // Rows of one scope, each alone within the quota.
                    let name = format!("r{}", self.frame.rng.below(4));
                    let value =
                        vec![7; 100 + usize::try_from(self.frame.rng.below(40)).unwrap_or(0)];
                    let key = Pad {
                        actor,
                        name: name.clone(),
                    };
                    let r = tx.put(&key, &value);
                    if r.is_ok() {
                        rec.put(Slot::Pad(actor, name.clone()), &value);
                    }
                    (format!("race on the scope of actor {actor}: pad {name}"), r)
                }
                _ => {
                    let id = 0;
                    let at = self.frame.clock.now_ms() + 1 + self.frame.rng.below(4_000);
                    let value = [&at.to_be_bytes()[..], &[1]].concat();
                    let key = Ttl { actor, id };
                    // Read first, so that the racers conflict.
                    let r = tx
                        .get(&key)
                        .and_then(|_| tx.put_expiring_at(&key, &value, at));
                    if r.is_ok() {
                        rec.write(
                            Slot::Ttl(actor, id),
                            Write::Put {
                                value,
                                expires: Some(at),
                            },
                        );
                    }
                    (format!("race on ttl {actor}/{id} until {at}"), r)
                }
            };
            match r {
                Err(e) if !faulted(&e) && !matches!(e, StoreError::Limit { .. }) => {
                    return Err(fail(step, format!("{what}: {e}")));
                }
                _ => txs.push((tx, rec, what)),
            }
        }
        while !txs.is_empty() {
            let i = usize::try_from(self.frame.rng.below(txs.len() as u64)).unwrap_or(0);
            let (tx, rec, what) = txs.remove(i);
            match tx.commit() {
                Err(e) if e.is_conflict() => {
                    self.frame.trace.event(step, format!("{what}: conflict"));
                }
                Err(StoreError::Limit { source, .. }) => {
                    self.frame
                        .trace
                        .event(step, format!("{what}: refused ({source})"));
                }
                r => {
                    self.settle(store, step, &what, r, &rec.take())?;
                }
            }
        }
        Ok(())
    }

    /// A member of the sorted set added with a score, moved, or removed.
    pub(super) fn rank<E: Target>(
        &mut self,
        store: &Store<Faulty<E>>,
        step: usize,
    ) -> Result<(), Violation> {
        let m = self.frame.rng.below(RANKED);
        let points = i64::try_from(self.frame.rng.below(20)).unwrap_or(0) - 10;
        let remove = self.frame.rng.chance(0.3);
        let rec = Rec::default();
        let r = store.transact(|tx| {
            rec.start();
            if remove {
                if leaders().remove(tx, &m)? {
                    rec.write(Slot::Ranked(m), Write::Delete);
                }
            } else {
                leaders().add(tx, &m, points)?;
                rec.put(Slot::Ranked(m), &points.to_be_bytes());
            }
            Ok::<_, StoreError>(())
        });
        let what = if remove {
            format!("unrank {m}")
        } else {
            format!("rank {m} at {points}")
        };
        self.settle(store, step, &what, r, &rec.take())?;
        Ok(())
    }

    /// One to three events in one transaction, their keys versionstamped.
    pub(super) fn event<E: Target>(
        &mut self,
        store: &Store<Faulty<E>>,
        step: usize,
    ) -> Result<(), Violation> {
        let n = 1 + self.frame.rng.below(3);
        let first = self.events.next;
        self.events.next += n;
        let r = store.transact(|tx| {
            for i in 0..n {
                let stamp =
                    strata_keys::tuple::Versionstamp::incomplete(u16::try_from(i).unwrap_or(0));
                tx.put_versionstamped(&Event { stamp }, &(first + i).to_be_bytes().to_vec())?;
            }
            Ok::<_, StoreError>(())
        });
        self.events.commit(first..first + n, applied(&r));
        self.settle(
            store,
            step,
            &format!("events {first}..{}", first + n),
            r,
            &[],
        )?;
        Ok(())
    }
}
