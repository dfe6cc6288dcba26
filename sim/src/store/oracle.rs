//! The store workload's oracles (see the module docs of [`super`]),
//! checked on the engine without faults.

use strata_engine::{Engine, Rng, SeededRng};
use strata_store::{Store, StoreError};

use super::{
    ACCOUNTS, ACTORS, Account, BLOBS, Blob, DOCS, Doc, DocCount, Faulty, GROUPS, LIMITS,
    MAX_MEMBERS, Member, START_BALANCE, StoreRun, Ttl, blob_ok, docs_of, members_of,
};
use crate::run::{Violation, fail};
use crate::targets::Target;

impl StoreRun {
    /// A fault-free view of the same engine, for the oracles.
    fn checker<'a, E: Target>(&self, store: &'a Store<Faulty<E>>) -> Store<&'a E> {
        Store::open_with(
            store.engine().inner(),
            store.options().clone(),
            self.clock.clone(),
            Box::new(SeededRng::new(0)),
        )
        .unwrap_or_else(|e| unreachable!("the store's keyspaces are declared: {e}"))
    }

    /// Every oracle, on the engine without faults.
    pub(super) fn check<E: Target>(
        &mut self,
        store: &Store<Faulty<E>>,
        step: usize,
        when: &str,
    ) -> Result<(), Violation> {
        self.checks += 1;
        let c = self.checker(store);
        let err = read_failed(step, when);
        // Quota.
        for (scope, usage) in c.audit_quota().map_err(err)? {
            if i64::try_from(usage.actual).ok() != Some(usage.counted) {
                return Err(fail(
                    step,
                    format!(
                        "{when}: quota of scope {scope:02x?} says {} but its rows take {}",
                        usage.counted, usage.actual
                    ),
                ));
            }
        }
        let view = c.read().map_err(err)?;
        // Money.
        let mut total = 0;
        for id in 0..ACCOUNTS {
            total += view
                .get(&Account { id })
                .map_err(err)?
                .map_or(START_BALANCE, |b| {
                    i64::from_be_bytes(b.try_into().unwrap_or([0; 8]))
                });
        }
        if total != START_BALANCE * i64::try_from(ACCOUNTS).unwrap_or(0) {
            return Err(fail(
                step,
                format!("{when}: money was created or lost: the accounts hold {total}"),
            ));
        }
        // Group sizes.
        for group in 0..GROUPS {
            let members = view.scan_page::<Member>(&members_of(group)).map_err(err)?;
            if members.items.len() > MAX_MEMBERS {
                return Err(fail(
                    step,
                    format!(
                        "{when}: group {group} has {} members, more than {MAX_MEMBERS}: two joins each saw room (write skew)",
                        members.items.len()
                    ),
                ));
            }
        }
        let now = view.now_ms();
        for actor in 0..ACTORS {
            // Counts.
            let docs = view.scan_page::<Doc>(&docs_of(actor)).map_err(err)?;
            let count = c.counter(&DocCount { actor }).map_err(err)?;
            if i64::try_from(docs.items.len()).ok() != Some(count) {
                return Err(fail(
                    step,
                    format!(
                        "{when}: actor {actor} has {} documents, its counter says {count}",
                        docs.items.len()
                    ),
                ));
            }
            // Chunks.
            for id in 0..BLOBS {
                match view.get(&Blob { actor, id }) {
                    Ok(None) => {}
                    Ok(Some(b)) if blob_ok(&b) => {}
                    Ok(Some(b)) => {
                        return Err(fail(
                            step,
                            format!(
                                "{when}: blob {actor}/{id} ({} bytes) is not one whole write",
                                b.len()
                            ),
                        ));
                    }
                    Err(e) => {
                        return Err(fail(
                            step,
                            format!("{when}: blob {actor}/{id} does not read: {e}"),
                        ));
                    }
                }
            }
            // Expiry.
            for id in 0..DOCS {
                if let Some(b) = view.get(&Ttl { actor, id }).map_err(err)? {
                    // The expiry time is the value's first 8 bytes.
                    let at = b
                        .get(..8)
                        .and_then(|h| h.try_into().ok())
                        .map_or(0, u64::from_be_bytes);
                    if at <= now {
                        return Err(fail(
                            step,
                            format!("{when}: ttl {actor}/{id} expired at {at} was read at {now}"),
                        ));
                    }
                }
            }
        }
        self.check_live(&c, step, when)?;
        self.check_paging(&c, step, when)
    }

    /// Paging through a scan with cursors, forward and reverse, in pages
    /// of a random size, gives exactly the rows of one unlimited scan of
    /// the same snapshot, and the last page says there is no more.
    fn check_paging<E: Engine>(
        &mut self,
        c: &Store<E>,
        step: usize,
        when: &str,
    ) -> Result<(), Violation> {
        let err = read_failed(step, when);
        let view = c.read().map_err(err)?;
        for actor in 0..ACTORS {
            for reverse in [false, true] {
                let mut whole = docs_of(actor);
                if reverse {
                    whole = whole.reverse();
                }
                let want: Vec<Doc> = view
                    .scan_page::<Doc>(&whole)
                    .map_err(err)?
                    .items
                    .into_iter()
                    .map(|(k, _)| k)
                    .collect();
                let size = 1 + usize::try_from(self.rng.below(3)).unwrap_or(0);
                let mut got: Vec<Doc> = Vec::new();
                let mut next = Some(whole.clone().limit(size));
                while let Some(scan) = next {
                    self.checks += 1;
                    let page = view.scan_page::<Doc>(&scan).map_err(err)?;
                    if page.items.len() > size || (page.more && page.items.len() < size) {
                        return Err(fail(
                            step,
                            format!(
                                "{when}: a page of {} rows (limit {size}) says more = {}",
                                page.items.len(),
                                page.more
                            ),
                        ));
                    }
                    next = page.next(&scan);
                    got.extend(page.items.into_iter().map(|(k, _)| k));
                    if got.len() > want.len() {
                        break;
                    }
                }
                if got != want {
                    return Err(fail(
                        step,
                        format!(
                            "{when}: paging actor {actor}'s documents ({}, pages of {size}) gave {} rows, one scan {}",
                            if reverse { "reverse" } else { "forward" },
                            got.len(),
                            want.len()
                        ),
                    ));
                }
            }
        }
        Ok(())
    }

    /// Values acknowledged and not yet expired are still there, unchanged;
    /// no scope holds more than its quota.
    fn check_live<E: Engine>(
        &mut self,
        c: &Store<E>,
        step: usize,
        when: &str,
    ) -> Result<(), Violation> {
        let err = read_failed(step, when);
        let view = c.read().map_err(err)?;
        let now = view.now_ms();
        // A value acknowledged and not yet expired is still there, unchanged.
        // Only a value not expired at the latest reading so far: the clock
        // jumps back, and a sweep at a later reading may have removed it.
        let high = self.clock_high.max(now);
        self.live_ttl.retain(|_, (at, _)| *at > high);
        for (&(actor, id), (at, value)) in &self.live_ttl {
            let got = view.get(&Ttl { actor, id }).map_err(err)?;
            if got.as_ref() != Some(value) {
                return Err(fail(
                    step,
                    format!(
                        "{when}: ttl {actor}/{id}, acknowledged and expiring at {at}, reads as {:?} at {now}",
                        got.as_deref().map(crate::run::show_bytes)
                    ),
                ));
            }
        }
        // Usage never exceeds the quota.
        for (scope, usage) in c.audit_quota().map_err(err)? {
            if usage.actual > LIMITS.quota_bytes {
                return Err(fail(
                    step,
                    format!(
                        "{when}: scope {scope:02x?} holds {} bytes, over its quota of {}",
                        usage.actual, LIMITS.quota_bytes
                    ),
                ));
            }
        }
        Ok(())
    }
}

/// The violation of a read without faults that failed: the oracle cannot
/// check, and that is a finding, never a pass.
fn read_failed(step: usize, when: &str) -> impl Fn(StoreError) -> Violation + Copy + '_ {
    move |e| fail(step, format!("{when}: a fault-free read failed: {e}"))
}
