//! Limit pressure: bulk writes narrowed to fit, readers pinned across commits, refusals that leave no trace, the sweeper.

#[allow(clippy::wildcard_imports)]
use super::*;

impl StoreRun {
    /// A bulk write of notes (many with a time to live, outside every
    /// quota scope), resumed once from its cursor after a failure: the
    /// entries before the cursor are written, the rest not (or, after an
    /// unknown outcome, perhaps).
    pub(super) fn bulk<E: Target>(
        &mut self,
        store: &Store<Faulty<E>>,
        step: usize,
    ) -> Result<(), Violation> {
        let mut bulk = store.bulk_non_atomic();
        let mut writes = Vec::new();
        let n = 1 + self.frame.rng.below(30);
        for _ in 0..n {
            let (actor, id) = (self.frame.rng.below(ACTORS), self.frame.rng.below(NOTES));
            let key = Note { actor, id };
            self.seq += 1;
            let r = match self.frame.rng.below(4) {
                0 => bulk.delete(&key).map(|_| Write::Delete),
                1 => {
                    let value = self.seq.to_be_bytes().to_vec();
                    bulk.put(&key, &value).map(|_| Write::Put {
                        value,
                        expires: None,
                    })
                }
                _ => {
                    let ttl = 1 + self.frame.rng.below(3_000);
                    let value = self.seq.to_be_bytes().to_vec();
                    let at = self.frame.clock.now_ms() + ttl;
                    bulk.put_with_ttl(&key, &value, ttl).map(|_| Write::Put {
                        value,
                        expires: Some(at),
                    })
                }
            };
            match r {
                Ok(w) => writes.push((Slot::Note(actor, id), w)),
                Err(e) => return Err(fail(step, format!("queueing a bulk entry failed: {e}"))),
            }
        }
        let mut from = 0;
        for attempt in 0..2 {
            let r = bulk.apply_from(strata_store::BulkCursor { next: from });
            let (done, error) = match r {
                Ok(report) => {
                    self.frame.commits += report.commits;
                    (writes.len(), None)
                }
                Err(e) => (e.cursor.next, Some(e.source)),
            };
            if done < from || done > writes.len() {
                return Err(fail(
                    step,
                    format!(
                        "a bulk write from entry {from} of {} stopped at {done}",
                        writes.len()
                    ),
                ));
            }
            // One entry at a time: the entries span several commits, and a
            // crash may keep any prefix of those not yet durable.
            for w in &writes[from..done] {
                self.model.commit(std::slice::from_ref(w), Applied::Yes);
            }
            if self.immediate {
                self.model.durable();
                self.events.durable();
            }
            let Some(e) = error else {
                self.frame
                    .trace
                    .event(step, format!("bulk of {n} notes: written"));
                return Ok(());
            };
            for w in &writes[done..] {
                self.model
                    .commit(std::slice::from_ref(w), applied_despite(&e));
            }
            self.frame.trace.event(
                step,
                format!("bulk of {n} notes, attempt {attempt}: stopped at {done}: {e}"),
            );
            if !faulted(&e) {
                return Err(fail(step, format!("a bulk write of notes failed: {e}")));
            }
            from = done;
        }
        Ok(())
    }

    /// A read-only transaction: an actor's documents paged with cursors in
    /// either direction, a byte-prefix scan of them, and snapshot reads,
    /// each compared with the model.
    pub(super) fn reader<E: Target>(
        &mut self,
        store: &Store<Faulty<E>>,
        step: usize,
    ) -> Result<(), Violation> {
        let actor = self.frame.rng.below(ACTORS);
        let reverse = self.frame.rng.chance(0.5);
        let size = 1 + usize::try_from(self.frame.rng.below(4)).unwrap_or(0);
        let mut tx = store.begin();
        let now = tx.now_ms();
        let high = self.clock_high.max(now);
        let mut paged: Vec<(u64, Vec<u8>)> = Vec::new();
        let whole = if reverse {
            docs_of(actor).reverse()
        } else {
            docs_of(actor)
        };
        let mut next = Some(whole.clone().limit(size));
        while let Some(scan) = next {
            let page = match tx.scan::<Doc>(&scan) {
                Ok(page) => page,
                Err(e) if faulted(&e) => return Ok(()),
                Err(e) => {
                    return Err(fail(
                        step,
                        format!("paging documents in a transaction: {e}"),
                    ));
                }
            };
            next = page.next(&scan);
            paged.extend(page.items.into_iter().map(|(k, v)| (k.id, v)));
            if paged.len() > usize::try_from(DOCS).unwrap_or(0) {
                return Err(fail(step, "paging documents never ends".to_owned()));
            }
        }
        if reverse {
            paged.reverse();
        }
        // A byte prefix that is not a tuple boundary: the packed
        // `(ACTOR, actor)` then the string code and "d".
        let mut prefix = tuple::pack(&(ACTOR, actor));
        prefix.extend_from_slice(&[0x02, b'd']);
        let by_prefix = match tx.scan::<Doc>(&Scan::prefix(&prefix)) {
            Ok(page) => page
                .items
                .into_iter()
                .map(|(k, v)| (k.id, v))
                .collect::<Vec<_>>(),
            Err(e) if faulted(&e) => return Ok(()),
            Err(e) => return Err(fail(step, format!("a byte-prefix scan: {e}"))),
        };
        if by_prefix != paged {
            return Err(fail(
                step,
                format!(
                    "actor {actor}'s documents: paged ({}, pages of {size}) {:?}, by byte prefix {:?}",
                    if reverse { "reverse" } else { "forward" },
                    paged.iter().map(|(id, _)| id).collect::<Vec<_>>(),
                    by_prefix.iter().map(|(id, _)| id).collect::<Vec<_>>()
                ),
            ));
        }
        for id in 0..DOCS {
            self.frame.checks += 1;
            let listed = paged.iter().find(|(i, _)| *i == id).map(|(_, v)| v.clone());
            let seen = if self.frame.rng.chance(0.5) {
                match tx.snapshot_get(&Doc { actor, id }) {
                    Ok(v) if v != listed => {
                        return Err(fail(
                            step,
                            format!(
                                "doc {actor}/{id}: the scan and a snapshot read of one transaction disagree"
                            ),
                        ));
                    }
                    Ok(v) => v,
                    Err(e) if faulted(&e) => return Ok(()),
                    Err(e) => return Err(fail(step, format!("a snapshot read: {e}"))),
                }
            } else {
                listed
            };
            self.model
                .observe(&Slot::Doc(actor, id), &Seen::Value(seen), now, high)
                .map_err(|why| fail(step, format!("in a read-only transaction: {why}")))?;
        }
        match tx.commit() {
            Ok(None) => Ok(()),
            Ok(Some(info)) => Err(fail(
                step,
                format!(
                    "a read-only transaction committed at version {}",
                    info.version
                ),
            )),
            Err(e) if faulted(&e) => Ok(()),
            Err(e) => Err(fail(
                step,
                format!("committing a read-only transaction: {e}"),
            )),
        }
    }

    /// A commit at or just over a limit: refused exactly when over, with
    /// the engine untouched.
    pub(super) fn pressure<E: Target>(
        &mut self,
        store: &Store<Faulty<E>>,
        step: usize,
    ) -> Result<(), Violation> {
        let actor = self.frame.rng.below(ACTORS);
        let excess = self.frame.rng.below(3); // 0, 1 or 2 over the edge, minus one
        let kind = self.frame.rng.below(2);
        let before = state(store.engine().inner()).map_err(|why| fail(step, why))?;
        // Entries (max - 1, max, max + 1 puts of tiny pads), or key length
        // (max - 1, max, max + 1).
        let rec = Rec::default();
        let r = if kind == 0 {
            {
                let n = LIMITS.max_batch_entries - 1 + usize::try_from(excess).unwrap_or(0);
                store.transact(|tx| {
                    rec.start();
                    for i in 0..n {
                        let name = format!("e{i}");
                        tx.put(
                            &Pad {
                                actor,
                                name: name.clone(),
                            },
                            &Vec::new(),
                        )?;
                        rec.put(Slot::Pad(actor, name), &[]);
                    }
                    Ok::<_, StoreError>(())
                })
            }
        } else {
            {
                let base = Pad {
                    actor,
                    name: String::new(),
                }
                .pack_len();
                let name_len = (LIMITS.max_key_bytes - 1 + usize::try_from(excess).unwrap_or(0))
                    .saturating_sub(base);
                store.transact(|tx| {
                    rec.start();
                    let name = "k".repeat(name_len);
                    tx.put(
                        &Pad {
                            actor,
                            name: name.clone(),
                        },
                        &Vec::new(),
                    )?;
                    rec.put(Slot::Pad(actor, name), &[]);
                    Ok::<_, StoreError>(())
                })
            }
        };
        let over = excess == 2;
        match r {
            Err(StoreError::Limit { source: l, .. }) if over => {
                self.frame.checks += 1;
                let after = state(store.engine().inner()).map_err(|why| fail(step, why))?;
                if let Some(diff) = crate::run::first_difference(&after, &before) {
                    return Err(fail(
                        step,
                        format!("a commit refused by {l} changed the engine: {diff}"),
                    ));
                }
                self.frame
                    .trace
                    .event(step, format!("pressure {kind}: refused ({l})"));
                Ok(())
            }
            Err(StoreError::Limit { source: l, .. }) => Err(fail(
                step,
                format!("a commit within the limits was refused: {l}"),
            )),
            Ok(()) if over => Err(fail(
                step,
                format!("a commit over the limit (kind {kind}) was accepted"),
            )),
            r => {
                self.settle(
                    store,
                    step,
                    &format!("pressure {kind} at the limit"),
                    r,
                    &rec.take(),
                )?;
                Ok(())
            }
        }
    }

    pub(super) fn sweep<E: Target>(
        &mut self,
        store: &Store<Faulty<E>>,
        step: usize,
    ) -> Result<(), Violation> {
        let r = store.sweep_expired(Some(1 + self.frame.rng.below(3)));
        match r {
            Ok(report) => {
                self.frame.commits += report.commits;
                self.frame.trace.event(
                    step,
                    format!(
                        "sweep: {} removed, {} stale, {} commits",
                        report.removed, report.stale, report.commits
                    ),
                );
                Ok(())
            }
            Err(e) if faulted(&e) => {
                self.frame.trace.event(step, format!("sweep: {e}"));
                Ok(())
            }
            Err(e) => Err(fail(step, format!("sweep failed: {e}"))),
        }
    }
}
