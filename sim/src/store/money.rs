//! Transfers between accounts: conserved money, each transfer's own counter, and interleaved pairs of transactions.

#[allow(clippy::wildcard_imports)]
use super::*;

/// Moves `amount` from one account to another: two reads, two writes.
/// Transfer `n`: `amount` from account `from` to `to`, counted once in
/// its [`Transfer`] counter.
pub(super) fn move_money<E: Engine>(
    tx: &mut Tx<'_, E>,
    rec: &Rec,
    n: u64,
    (from, to, amount): (u64, u64, i64),
) -> Result<(), StoreError> {
    let a = balance(tx, from)?;
    let b = balance(tx, to)?;
    for (id, value) in [(from, a - amount), (to, b + amount)] {
        let bytes = value.to_be_bytes().to_vec();
        tx.put(&Account { id }, &bytes)?;
        rec.put(Slot::Account(id), &bytes);
    }
    tx.add(&Transfer { n }, 1)?;
    rec.write(Slot::Applied(n), Write::Add(1));
    Ok(())
}

pub(super) fn balance<E: Engine>(tx: &mut Tx<'_, E>, id: u64) -> Result<i64, StoreError> {
    Ok(tx.get(&Account { id })?.map_or(START_BALANCE, |b| {
        i64::from_be_bytes(b.try_into().unwrap_or([0; 8]))
    }))
}

impl StoreRun {
    /// Two different accounts and an amount below `max`.
    pub(super) fn pick_transfer(&mut self, max: u64) -> (u64, u64, i64) {
        let from = self.frame.rng.below(ACCOUNTS);
        let to = (from + 1 + self.frame.rng.below(ACCOUNTS - 1)) % ACCOUNTS;
        (
            from,
            to,
            i64::try_from(self.frame.rng.below(max)).unwrap_or(0),
        )
    }

    pub(super) fn transfer<E: Target>(
        &mut self,
        store: &Store<Faulty<E>>,
        step: usize,
    ) -> Result<(), Violation> {
        let (from, to, amount) = self.pick_transfer(300);
        self.seq += 1;
        let n = self.seq;
        let rec = Rec::default();
        let r = store.transact(|tx| {
            rec.start();
            move_money(tx, &rec, n, (from, to, amount))
        });
        self.settle(
            store,
            step,
            &format!("transfer {amount} {from}->{to}"),
            r,
            &rec.take(),
        )?;
        Ok(())
    }

    /// Two or three transfers interleaved by hand, committed in a random
    /// order: conflicts must be refused, never half-applied.
    pub(super) fn interleaved<E: Target>(
        &mut self,
        store: &Store<Faulty<E>>,
        step: usize,
    ) -> Result<(), Violation> {
        let n = 2 + self.frame.rng.below(2);
        // Transfers, or members joining one group (which may not take it
        // past MAX_MEMBERS together), now and then one leaving.
        let docs = self.frame.rng.chance(0.4);
        let group = self.frame.rng.below(GROUPS);
        let mut txs: Vec<Pending<'_, E>> = Vec::new();
        for k in 0..n {
            let (from, to, amount) = if docs {
                (
                    group,
                    (k + self.frame.rng.below(8)) % 8,
                    i64::from(self.frame.rng.chance(0.2)),
                )
            } else {
                self.pick_transfer(100)
            };
            txs.push((store.begin(), from, to, amount, Rec::default()));
        }
        for (tx, from, to, amount, rec) in &mut txs {
            let r = if docs && *amount == 1 {
                tx.delete(&Member {
                    group: *from,
                    id: *to,
                })
                .map(|()| rec.write(Slot::Member(*from, *to), Write::Delete))
            } else if docs {
                join(tx, rec, *from, *to).map(|_| ())
            } else {
                self.seq += 1;
                move_money(tx, rec, self.seq, (*from, *to, *amount))
            };
            if let Err(e) = r
                && !faulted(&e)
            {
                return Err(fail(step, format!("interleaved transaction: {e}")));
            }
        }
        while !txs.is_empty() {
            let i = usize::try_from(self.frame.rng.below(txs.len() as u64)).unwrap_or(0);
            let (tx, from, to, amount, rec) = txs.remove(i);
            let r = tx.commit().map(|_| ());
            match r {
                Err(e) if e.is_conflict() => self
                    .frame
                    .trace
                    .event(step, format!("interleaved {from}->{to}: conflict")),
                r => {
                    let what = if docs {
                        format!("interleaved join or leave of member {from}/{to}")
                    } else {
                        format!("interleaved transfer {amount} {from}->{to}")
                    };
                    self.settle(store, step, &what, r, &rec.take())?;
                }
            }
        }
        Ok(())
    }
}
