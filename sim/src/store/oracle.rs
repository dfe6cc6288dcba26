//! The store workload's oracles (see the module docs of [`super`]),
//! checked on the engine without faults.

use std::collections::{BTreeMap, BTreeSet};

use strata_engine::{Clock, Engine, Rng, SeededRng};
use strata_keys::{Key, tuple};
use strata_store::{Store, StoreError};

use super::model::{self, Raw, Seen};
use super::{
    ACCOUNTS, ACTOR, ACTORS, APPLIED, Account, BLOBS, Blob, DOCS, Doc, DocCount, Faulty, GROUPS,
    LIMITS, MAX_MEMBERS, Member, START_BALANCE, Slot, StoreRun, Ttl, blob_ok, docs_of, members_of,
};
use crate::run::{Violation, fail, show_bytes};
use crate::targets::Target;

impl StoreRun {
    /// A fault-free view of the same engine, for the oracles.
    fn checker<'a, E: Target>(&self, store: &'a Store<Faulty<E>>) -> Store<&'a E> {
        Store::open_with(
            store.engine().inner(),
            store.options().clone(),
            self.frame.clock.clone(),
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
        self.frame.checks += 1;
        let c = self.checker(store);
        let err = read_failed(step, when);
        // The raw rows: layout, chunks, expiry index, quota counters.
        let usage = recount(&c, None).map_err(|why| fail(step, format!("{when}: {why}")))?;
        // The store's own audit agrees with the recount.
        for (scope, audit) in c.audit_quota().map_err(err)? {
            let want = usage.get(&scope).copied().unwrap_or(0);
            if audit.actual != want || i64::try_from(want).ok() != Some(audit.counted) {
                return Err(fail(
                    step,
                    format!(
                        "{when}: the store's audit of scope {scope:02x?} says {} counted, {} actual; the rows take {want}",
                        audit.counted, audit.actual
                    ),
                ));
            }
        }
        self.check_model(&c, step, when)?;
        self.check_events(&c, step, when)?;
        self.check_ranking(&c, step, when)?;
        if self.frame.rng.chance(0.3) {
            self.check_corruption(&c, step, when)?;
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
        self.check_paging(&c, step, when)
    }

    /// The sorted set's two rows per member agree: listing by score gives
    /// exactly the members that have a score, with it, ordered by score
    /// then member.
    fn check_ranking<E: Engine>(
        &mut self,
        c: &Store<E>,
        step: usize,
        when: &str,
    ) -> Result<(), Violation> {
        let err = read_failed(step, when);
        let mut tx = c.begin();
        let listed = super::leaders()
            .range_by_score(&mut tx, .., 1_000)
            .map_err(err)?
            .items;
        let mut want = Vec::new();
        for m in 0..super::RANKED {
            if let Some(score) = super::leaders().score(&mut tx, &m).map_err(err)? {
                want.push((m, score));
            }
        }
        want.sort_by_key(|&(m, score)| (score, m));
        self.frame.checks += 1;
        if listed != want {
            return Err(fail(
                step,
                format!(
                    "{when}: the sorted set lists {listed:?} by score; its members' scores are {want:?}"
                ),
            ));
        }
        Ok(())
    }

    /// The events, in key order, against what was written.
    fn check_events<E: Engine>(
        &mut self,
        c: &Store<E>,
        step: usize,
        when: &str,
    ) -> Result<(), Violation> {
        let events: Vec<u64> = c
            .scan::<super::Event>(&strata_store::Scan::prefix(&tuple::pack(&(super::EVENT,))))
            .map_err(read_failed(step, when))?
            .items
            .into_iter()
            .map(|(_, v)| <[u8; 8]>::try_from(v.as_slice()).map_or(u64::MAX, u64::from_be_bytes))
            .collect();
        self.frame.checks += 1;
        self.events
            .check(&events)
            .map_err(|why| fail(step, format!("{when}: {why}")))
    }

    /// Every key against the model of the workload's writes.
    fn check_model<E: Engine>(
        &mut self,
        c: &Store<E>,
        step: usize,
        when: &str,
    ) -> Result<(), Violation> {
        let now = c.read().map_err(read_failed(step, when))?.now_ms();
        let high = self.clock_high.max(now);
        let mut slots: BTreeSet<Slot> = Slot::fixed().into_iter().collect();
        slots.extend(self.model.keys());
        for slot in &slots {
            let seen = slot.read(c).map_err(read_failed(step, when))?;
            self.model
                .observe(slot, &seen, now, high)
                .map_err(|why| fail(step, format!("{when}: {why}")))?;
        }
        Ok(())
    }

    /// Corrupted bytes never read as a value: one bit of a row (a value's
    /// data row or one of its chunk rows) is flipped under the store; a
    /// read of the key must fail with a decode or chunk error, never
    /// return a value or absence; then the row is put back. Counter rows
    /// are bare 8-byte engine counters, with no checksum, and are left
    /// out.
    fn check_corruption<E: Engine>(
        &mut self,
        c: &Store<E>,
        step: usize,
        when: &str,
    ) -> Result<(), Violation> {
        use strata_engine::Commit;
        let o = c.options();
        let raw = Raw::read(c.engine(), &o.data_keyspace, &o.system_keyspace)
            .map_err(|why| fail(step, format!("{when}: {why}")))?;
        let mut slots: BTreeSet<Slot> = Slot::fixed().into_iter().collect();
        slots.extend(self.model.keys());
        let present: Vec<Slot> = slots
            .into_iter()
            .filter(|s| !matches!(s, Slot::Count(_)) && raw.data.contains_key(&s.pack()))
            .collect();
        if present.is_empty() {
            return Ok(());
        }
        let slot =
            &present[usize::try_from(self.frame.rng.below(present.len() as u64)).unwrap_or(0)];
        // A row that reads as absent has expired: its value is not read.
        if !matches!(slot.read(c), Ok(Seen::Value(Some(_)))) {
            return Ok(());
        }
        let key = slot.pack();
        let mut rows = vec![(o.data_keyspace.clone(), key.clone())];
        for i in 0.. {
            let ck = model::chunk_key(&key, i);
            if !raw.system.contains_key(&ck) {
                break;
            }
            rows.push((o.system_keyspace.clone(), ck));
        }
        let (ks_name, row) =
            &rows[usize::try_from(self.frame.rng.below(rows.len() as u64)).unwrap_or(0)];
        let ks = c
            .engine()
            .keyspace(ks_name)
            .map_err(|e| fail(step, format!("{when}: {e}")))?;
        let original = if ks_name == &o.data_keyspace {
            raw.data.get(row)
        } else {
            raw.system.get(row)
        }
        .cloned()
        .unwrap_or_default();
        if original.is_empty() {
            return Ok(());
        }
        let bit = self.frame.rng.below(original.len() as u64 * 8);
        let mut corrupted = original.clone();
        corrupted[usize::try_from(bit / 8).unwrap_or(0)] ^= 1 << (bit % 8);
        let put = |value: Vec<u8>| {
            c.engine()
                .commit(Commit::new().put(ks, row.clone(), value))
                .map_err(|e| fail(step, format!("{when}: a fault-free raw write failed: {e}")))
        };
        put(corrupted)?;
        self.frame.checks += 1;
        let read = slot.read(c);
        put(original)?;
        match read {
            Err(StoreError::Decode { .. } | StoreError::Chunk { .. }) => Ok(()),
            other => Err(fail(
                step,
                format!(
                    "{when}: with bit {bit} of row {} flipped, {slot:?} reads as {}",
                    show_bytes(row),
                    match other {
                        Ok(seen) => seen.to_string(),
                        Err(e) => format!("the error {e}"),
                    }
                ),
            )),
        }
    }

    /// The last check of a run: a complete sweep, then no row that expired
    /// before it may remain, and every other oracle.
    pub(super) fn check_after_sweep<E: Target>(
        &mut self,
        store: &Store<Faulty<E>>,
        step: usize,
    ) -> Result<(), Violation> {
        let when = "at the end, after a complete sweep";
        let c = self.checker(store);
        c.sweep_expired(None).map_err(read_failed(step, when))?;
        let now = self.frame.clock.now_ms();
        recount(&c, Some(now)).map_err(|why| fail(step, format!("{when}: {why}")))?;
        self.check(store, step, when)
    }

    /// A quota refusal must be true: the scope's rows (recounted from the
    /// raw rows) plus the growth asked for exceed the quota.
    pub(super) fn check_refusal<E: Target>(
        &mut self,
        store: &Store<Faulty<E>>,
        step: usize,
        scope: &[u8],
        used: u64,
        requested: u64,
        limit: u64,
    ) -> Result<(), Violation> {
        self.frame.checks += 1;
        let c = self.checker(store);
        let usage = recount(&c, None).map_err(|why| fail(step, why))?;
        let Some(&actual) = usage.get(scope) else {
            return Err(fail(
                step,
                format!("a quota refusal names scope {scope:02x?}, no actor's"),
            ));
        };
        if limit != LIMITS.quota_bytes || used != actual || used.saturating_add(requested) <= limit
        {
            return Err(fail(
                step,
                format!(
                    "a quota refusal says {used} used + {requested} asked > {limit}; the scope's rows take {actual} and its quota is {}",
                    LIMITS.quota_bytes
                ),
            ));
        }
        Ok(())
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
                let size = 1 + usize::try_from(self.frame.rng.below(3)).unwrap_or(0);
                let mut got: Vec<Doc> = Vec::new();
                let mut next = Some(whole.clone().limit(size));
                while let Some(scan) = next {
                    self.frame.checks += 1;
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
                    // The first page read again through the cursor's own
                    // loop, each value lent then decoded: the same entries,
                    // the same state after (the first only: the check
                    // runs often, and the sim's time is counted).
                    if got.is_empty() {
                        self.check_lent(&view, &scan, &page, step, when)?;
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
}

impl StoreRun {
    /// `page`, the page `scan` read in `view`, read again through the
    /// cursor's own loop (`try_for_each_lent`, each value lent then
    /// decoded): the same entries, `more` and resume point.
    fn check_lent<E: Engine>(
        &mut self,
        view: &strata_store::ReadView<'_, E>,
        scan: &strata_store::Scan,
        page: &strata_store::Page<Doc>,
        step: usize,
        when: &str,
    ) -> Result<(), Violation> {
        let err = read_failed(step, when);
        self.frame.checks += 1;
        let mut lent = Vec::new();
        let mut it = view.scan::<Doc>(scan).map_err(err)?;
        it.try_for_each_lent(|key, value| {
            lent.push((key, value.decode()?));
            Ok::<_, StoreError>(())
        })
        .map_err(err)?;
        if lent != page.items || it.more() != page.more || it.cursor() != page.cursor {
            return Err(fail(
                step,
                format!(
                    "{when}: a page lent (keys {:?}, more = {}) is not the page read (keys {:?}, more = {}), or its values or resume point differ",
                    lent.iter()
                        .map(|(k, _)| (k.actor, k.id))
                        .collect::<Vec<_>>(),
                    it.more(),
                    page.items
                        .iter()
                        .map(|(k, _)| (k.actor, k.id))
                        .collect::<Vec<_>>(),
                    page.more
                ),
            ));
        }
        Ok(())
    }
}

/// The violation of a read without faults that failed: the oracle cannot
/// check, and that is a finding, never a pass.
fn read_failed(step: usize, when: &str) -> impl Fn(StoreError) -> Violation + Copy + '_ {
    move |e| fail(step, format!("{when}: a fault-free read failed: {e}"))
}

/// Recounts every actor scope's bytes from the raw rows, by the documented
/// layouts, never through the store; checks on the way that every row
/// parses and its chunks are whole, that no chunk row is left over, that
/// every expiring row is in the expiry index (and, with `swept_at`, that
/// none expired at or before it), and that each quota counter equals its
/// recount and stays within the quota.
fn recount<E: Engine>(
    c: &Store<E>,
    swept_at: Option<u64>,
) -> Result<BTreeMap<Vec<u8>, u64>, String> {
    let o = c.options();
    let raw = Raw::read(c.engine(), &o.data_keyspace, &o.system_keyspace)?;
    let scopes: Vec<Vec<u8>> = (0..ACTORS).map(|a| tuple::pack(&(ACTOR, a))).collect();
    let counters: Vec<Vec<u8>> = (0..ACTORS)
        .filter_map(|actor| DocCount { actor }.pack().ok())
        .collect();
    let mut usage: BTreeMap<Vec<u8>, u64> = scopes.iter().map(|s| (s.clone(), 0)).collect();
    let mut chunks = BTreeSet::new();
    // Transfers' counters: `(APPLIED, n)`, 8 bytes, outside every scope.
    let transfers = tuple::pack(&(APPLIED,));
    for (k, v) in &raw.data {
        let size = if counters.contains(k) || k.starts_with(&transfers) {
            if v.len() != 8 {
                return Err(format!("counter {} holds {} bytes", show_bytes(k), v.len()));
            }
            (k.len() + v.len()) as u64
        } else {
            let row = model::parse_row(&raw, k, v, &mut chunks)
                .map_err(|why| format!("row {}: {why}", show_bytes(k)))?;
            if let Some(at) = row.expires {
                if !raw.system.contains_key(&model::expiry_key(at, k)) {
                    return Err(format!(
                        "row {} expires at {at} but the expiry index does not list it: no sweep would remove it",
                        show_bytes(k)
                    ));
                }
                if let Some(now) = swept_at
                    && at <= now
                {
                    return Err(format!(
                        "row {} expired at {at} and is still there after a complete sweep at {now}",
                        show_bytes(k)
                    ));
                }
            }
            row.size
        };
        if let Some(s) = scopes.iter().find(|s| k.starts_with(s)) {
            *usage.entry(s.clone()).or_default() += size;
        }
    }
    let chunk_rows = tuple::pack(&("c",));
    let quota_rows = tuple::pack(&("q",));
    for k in raw.system.keys() {
        if k.starts_with(&chunk_rows) && !chunks.contains(k) {
            return Err(format!("chunk row {} belongs to no value", show_bytes(k)));
        }
        if k.starts_with(&quota_rows) && !scopes.iter().any(|s| model::quota_key(s) == *k) {
            return Err(format!(
                "quota counter {} counts no actor's scope",
                show_bytes(k)
            ));
        }
    }
    for (scope, &bytes) in &usage {
        let counted = match raw.system.get(&model::quota_key(scope)) {
            None => 0,
            Some(v) => <[u8; 8]>::try_from(v.as_slice())
                .map(i64::from_le_bytes)
                .map_err(|_| format!("quota counter of {scope:02x?} holds {} bytes", v.len()))?,
        };
        if u64::try_from(counted).ok() != Some(bytes) {
            return Err(format!(
                "quota of scope {scope:02x?} says {counted} but its rows take {bytes}"
            ));
        }
        if bytes > LIMITS.quota_bytes {
            return Err(format!(
                "scope {scope:02x?} holds {bytes} bytes, over its quota of {}",
                LIMITS.quota_bytes
            ));
        }
    }
    Ok(usage)
}
