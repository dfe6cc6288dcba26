//! The actor KV workload: three actors with a small quota, random puts
//! (small, chunked and up to the value limit, many of them overwrites),
//! deletes, range deletes, requests over the engine's limits, large writes
//! split by the client planner, and layout migrations back and forth, on a
//! faulty engine with crashes.
//!
//! Oracles, after every step, on the actor it touched:
//! - the quota usage equals a recount of the rows and never exceeds the
//!   quota;
//! - a list paged with a random limit is complete, strictly ordered, with
//!   `more` set exactly until the last page, and equals one unpaged list;
//! - every value read is whole: it carries its own length and seed and is
//!   regenerated from them byte for byte (no chunk missing, extra or from
//!   another value);
//! - a put that was acknowledged reads back at once;
//! - a request over a limit is refused with its typed error and changes
//!   nothing; every request the planner makes is within the limits
//!   (recounted here from the engine's rules, not with the module's code).

use strata_codec::Limits;
use strata_engine::{Engine, Rng};
use strata_schemas::actor_kv::client::plan_puts;
use strata_schemas::actor_kv::{
    ActorId, ActorKv, ActorKvConfig, ActorKvError, ListOptions, ListQuery, PhysicalLayout,
};
use strata_store::StoreOptions;

use crate::faults::FaultyEngine;
use crate::run::{Driven, Frame, RunOptions, SeedReport, Violation, drive, driven_on_store, fail};
use crate::targets::Target;

const ACTORS: u64 = 3;
const KEYS: u64 = 24;
const QUOTA: u64 = 80_000;
/// Bytes of a value's header: its length (u32) and seed (u64).
const HEADER: usize = 12;

type Kv<E> = ActorKv<FaultyEngine<E>>;

/// A request over a limit and the test of the error it must get.
type Refused = (Vec<(Vec<u8>, Vec<u8>)>, fn(&ActorKvError) -> bool);

fn actor(n: u64) -> ActorId {
    ActorId::v1(0xAC70_0000_0000_0000_0000_0000_0000_0000 | u128::from(n), 1)
}

/// Keys with shared prefixes and a `0xFF` byte, so prefix and range lists
/// meet the escaping and `strinc` cases.
fn key(n: u64) -> Vec<u8> {
    let mut k = vec![4, b'k', u8::try_from(n % 3).unwrap_or(0)];
    match n % 4 {
        0 => k.push(0xFF),
        1 => k.push(0x00),
        _ => {}
    }
    k.extend_from_slice(&n.to_be_bytes()[6..]);
    k
}

/// A value of `len` bytes (at least [`HEADER`]) that says what it is.
fn payload(seed: u64, len: usize) -> Vec<u8> {
    let mut v = Vec::with_capacity(len);
    v.extend_from_slice(&u32::try_from(len).unwrap_or(u32::MAX).to_le_bytes());
    v.extend_from_slice(&seed.to_le_bytes());
    let mut x = seed;
    while v.len() < len {
        x = next_word(x);
        v.extend_from_slice(&x.to_le_bytes());
    }
    v.truncate(len.max(HEADER));
    v
}

/// Whether `v` is exactly the value its header describes.
fn whole(v: &[u8]) -> bool {
    if v.len() < HEADER {
        return false;
    }
    let len = u32::from_le_bytes([v[0], v[1], v[2], v[3]]) as usize;
    let mut seed = [0; 8];
    seed.copy_from_slice(&v[4..12]);
    if len != v.len() {
        return false;
    }
    // The body, generated again word by word and compared in place (as
    // words: a slice comparison per word would call `memcmp` each time).
    let mut x = u64::from_le_bytes(seed);
    let words = v[HEADER..].chunks_exact(8);
    let tail = words.remainder();
    let body_whole = words.into_iter().all(|got| {
        x = next_word(x);
        u64::from_le_bytes([
            got[0], got[1], got[2], got[3], got[4], got[5], got[6], got[7],
        ]) == x
    });
    body_whole && next_word(x).to_le_bytes()[..tail.len()] == *tail
}

/// The payload's next word after `x` (a linear congruential step).
fn next_word(x: u64) -> u64 {
    x.wrapping_mul(6_364_136_223_846_793_005)
        .wrapping_add(1_442_695_040_888_963_407)
}

struct AkvRun {
    /// The seed's draws, clock, trace and counts.
    frame: Frame,
    options: StoreOptions,
    config: ActorKvConfig,
}

impl AkvRun {
    fn open<E: Target>(&mut self, engine: FaultyEngine<E>) -> Kv<E> {
        let store = crate::run::open_store(
            engine,
            &self.options,
            self.frame.clock.clone(),
            &mut self.frame.rng,
        );
        ActorKv::open(store, self.config.clone())
            .unwrap_or_else(|e| unreachable!("the actor KV spaces are declared: {e}"))
    }

    fn size(&mut self) -> usize {
        let r = self.frame.rng.below(100);
        let n = if r < 85 {
            self.frame.rng.below(1_000)
        } else if r < 98 {
            10_000 + self.frame.rng.below(15_000)
        } else {
            100_000 + self.frame.rng.below(31_073)
        };
        HEADER + usize::try_from(n).unwrap_or(0).min(131_072 - HEADER)
    }

    fn entries(&mut self, n: u64) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut keys: Vec<u64> = Vec::new();
        while keys.len() < usize::try_from(n).unwrap_or(1) {
            let k = self.frame.rng.below(KEYS);
            if !keys.contains(&k) {
                keys.push(k);
            }
        }
        keys.into_iter()
            .map(|k| {
                let len = self.size();
                (key(k), payload(self.frame.rng.next_u64(), len))
            })
            .collect()
    }

    fn put<E: Target>(&mut self, kv: &Kv<E>, a: ActorId, step: usize) -> Result<(), Violation> {
        let n = 1 + self.frame.rng.below(5);
        let entries = self.entries(n);
        match kv.put(a, &entries) {
            Ok(()) => {
                self.frame.commits += 1;
                self.frame.trace.event(step, format!("put {n} entries"));
                let keys: Vec<_> = entries.iter().map(|(k, _)| k.clone()).collect();
                if let Ok(got) = kv.get(a, &keys) {
                    for ((k, v), e) in entries.iter().zip(got) {
                        if e.as_ref().map(|e| &e.value) != Some(v) {
                            return Err(fail(
                                step,
                                format!("an acknowledged put of {k:?} does not read back"),
                            ));
                        }
                    }
                }
            }
            Err(e) => self
                .frame
                .trace
                .event(step, format!("put {n} entries failed: {}", short(&e))),
        }
        Ok(())
    }

    /// A request over one of the limits: refused, typed, nothing changed.
    fn over_limit<E: Target>(
        &mut self,
        kv: &Kv<E>,
        a: ActorId,
        step: usize,
    ) -> Result<(), Violation> {
        let before = kv.usage(a);
        let kind = self.frame.rng.below(4);
        let (entries, expect): Refused = match kind {
            0 => (vec![(vec![4; 2_047], vec![1; 20])], |e| {
                matches!(e, ActorKvError::KeyTooLarge { len: 2_049, .. })
            }),
            1 => (vec![(key(1), vec![1; 131_073])], |e| {
                matches!(e, ActorKvError::ValueTooLarge { len: 131_073, .. })
            }),
            2 => (
                (0..129u64)
                    .map(|i| (i.to_be_bytes().to_vec(), vec![1; 12]))
                    .collect(),
                |e| matches!(e, ActorKvError::TooManyKeys { count: 129, .. }),
            ),
            _ => (
                (0..8u8).map(|i| (vec![9, i], vec![1; 124_928])).collect(),
                |e| matches!(e, ActorKvError::PayloadTooLarge { .. }),
            ),
        };
        match kv.put(a, &entries) {
            Err(e) if expect(&e) => {}
            other => {
                return Err(fail(
                    step,
                    format!("a request over limit {kind} was not refused as such: {other:?}"),
                ));
            }
        }
        if let (Ok(b), Ok(after)) = (before, kv.usage(a))
            && b != after
        {
            return Err(fail(
                step,
                format!("a refused request changed the usage from {b} to {after}"),
            ));
        }
        self.frame
            .trace
            .event(step, format!("limit {kind} refused"));
        Ok(())
    }

    /// Many small writes split by the planner; each request is recounted
    /// against the engine's rules before it is sent.
    fn planned<E: Target>(&mut self, kv: &Kv<E>, a: ActorId, step: usize) -> Result<(), Violation> {
        let n = 20 + self.frame.rng.below(150);
        // Small values: the point is the split, not the bytes.
        let entries: Vec<_> = (0..n)
            .map(|i| {
                let len = HEADER + usize::try_from(self.frame.rng.below(100)).unwrap_or(0);
                (
                    vec![4, b'p', u8::try_from(i % 256).unwrap_or(0)],
                    payload(self.frame.rng.next_u64(), len),
                )
            })
            .collect();
        let batches = plan_puts(entries.clone())
            .map_err(|e| fail(step, format!("the planner refused valid entries: {e}")))?;
        let flat: Vec<_> = batches.iter().flatten().cloned().collect();
        if flat != entries {
            return Err(fail(step, "the planner lost or reordered entries".into()));
        }
        for b in &batches {
            let payload: usize = b.iter().map(|(k, v)| k.len() + 2 + v.len()).sum();
            let mut keys: Vec<_> = b.iter().map(|(k, _)| k).collect();
            keys.sort();
            keys.dedup();
            if b.len() > 128 || payload > 976 * 1_024 || keys.len() != b.len() {
                return Err(fail(
                    step,
                    format!(
                        "a planned request of {} entries and {payload} bytes breaks a limit",
                        b.len()
                    ),
                ));
            }
        }
        let mut sent = 0;
        for b in &batches {
            if let Err(e) = kv.put(a, b) {
                self.frame
                    .trace
                    .event(step, format!("planned request failed: {}", short(&e)));
                break;
            }
            sent += 1;
            self.frame.commits += 1;
        }
        self.frame.trace.event(
            step,
            format!("{n} planned entries, {sent}/{} requests", batches.len()),
        );
        // Leave room for the rest of the run.
        let keys: Vec<Vec<u8>> = entries.into_iter().map(|(k, _)| k).collect();
        for chunk in keys.chunks(128) {
            if kv.delete(a, chunk).is_err() {
                break;
            }
        }
        Ok(())
    }

    fn migrate<E: Target>(&mut self, kv: &Kv<E>, a: ActorId, step: usize) {
        let to = match kv.layout(a) {
            Ok((_, Some(target))) => target,
            Ok((PhysicalLayout::Native, None)) => PhysicalLayout::Compatible,
            Ok((_, None)) => PhysicalLayout::Native,
            Err(e) => {
                self.frame
                    .trace
                    .event(step, format!("layout read failed: {}", short(&e)));
                return;
            }
        };
        let max = 1 + usize::try_from(self.frame.rng.below(6)).unwrap_or(0);
        match kv.migrate(a, to, max) {
            Ok(s) => self.frame.trace.event(
                step,
                format!("migrate to {to:?}: {} entries, done {}", s.migrated, s.done),
            ),
            Err(e) => self
                .frame
                .trace
                .event(step, format!("migrate failed: {}", short(&e))),
        }
    }

    /// The oracles on actor `a`: usage against the quota and against the
    /// rows (recounted here from one list, by the engine's rule: key plus
    /// 2 plus value); the list's order and whole values; on some steps,
    /// paging.
    fn check<E: Target>(&mut self, kv: &Kv<E>, a: ActorId, step: usize) -> Result<(), Violation> {
        let usage = kv.usage(a);
        let Ok(all) = kv.list(a, &ListQuery::All, &ListOptions::default()) else {
            return Ok(());
        };
        // No write runs between the two reads, so both see the same commits.
        let Ok(usage) = usage else {
            return Ok(());
        };
        let recount: u64 = all
            .entries
            .iter()
            .map(|e| (e.key.len() + 2 + e.value.len()) as u64)
            .sum();
        if usage != recount {
            return Err(fail(
                step,
                format!("usage {usage} differs from the rows' {recount}"),
            ));
        }
        if usage > QUOTA {
            return Err(fail(
                step,
                format!("usage {usage} is over the quota {QUOTA}"),
            ));
        }
        if all.more {
            return Err(fail(step, "an unlimited list says there is more".into()));
        }
        if let Some(w) = all.entries.windows(2).find(|w| w[0].key >= w[1].key) {
            return Err(fail(step, format!("list out of order at {:?}", w[1].key)));
        }
        if let Some(e) = all.entries.iter().find(|e| !whole(&e.value)) {
            return Err(fail(
                step,
                format!(
                    "the value of {:?} is not whole ({} bytes)",
                    e.key,
                    e.value.len()
                ),
            ));
        }
        self.frame.checks += 1;
        if !self.frame.rng.chance(0.3) {
            return Ok(());
        }
        let limit = 1 + usize::try_from(self.frame.rng.below(7)).unwrap_or(0);
        let reverse = self.frame.rng.chance(0.5);
        let mut options = Some(ListOptions {
            limit: Some(limit),
            reverse,
            after: None,
        });
        let mut paged = Vec::new();
        while let Some(o) = options {
            let Ok(page) = kv.list(a, &ListQuery::All, &o) else {
                return Ok(());
            };
            paged.extend(page.entries.iter().map(|e| e.key.clone()));
            let expect_more = paged.len() < all.entries.len();
            if page.more != expect_more {
                return Err(fail(
                    step,
                    format!(
                        "a page ending at entry {} of {} says more = {}",
                        paged.len(),
                        all.entries.len(),
                        page.more
                    ),
                ));
            }
            options = page.next(&o);
        }
        let mut expected: Vec<_> = all.entries.iter().map(|e| e.key.clone()).collect();
        if reverse {
            expected.reverse();
        }
        if paged != expected {
            return Err(fail(
                step,
                format!(
                    "paging by {limit} (reverse {reverse}) read {} keys where one list read {}",
                    paged.len(),
                    expected.len()
                ),
            ));
        }
        Ok(())
    }
}

impl<E: Target> Driven<E> for AkvRun {
    driven_on_store!(Kv<E>);

    fn step(&mut self, kv: &Kv<E>, step: usize) -> Result<(), Violation> {
        let who = actor(self.frame.rng.below(ACTORS));
        let roll = self.frame.rng.below(100);
        if roll < 45 {
            self.put(kv, who, step)?;
        } else if roll < 55 {
            self.over_limit(kv, who, step)?;
        } else if roll < 70 {
            let n = 1 + self.frame.rng.below(4);
            let keys: Vec<_> = (0..n).map(|_| key(self.frame.rng.below(KEYS))).collect();
            match kv.delete(who, &keys) {
                Ok(()) => self.frame.commits += 1,
                Err(e) => self
                    .frame
                    .trace
                    .event(step, format!("delete failed: {}", short(&e))),
            }
        } else if roll < 75 {
            let (from, to) = (
                key(self.frame.rng.below(KEYS)),
                key(self.frame.rng.below(KEYS)),
            );
            match kv.delete_range(who, &from, &to) {
                Ok(n) => self
                    .frame
                    .trace
                    .event(step, format!("delete range: {n} entries")),
                Err(e) => self
                    .frame
                    .trace
                    .event(step, format!("delete range failed: {}", short(&e))),
            }
        } else if roll < 83 {
            self.planned(kv, who, step)?;
        } else if roll < 93 {
            self.migrate(kv, who, step);
        } else {
            match kv.store().engine().sync() {
                Ok(v) => self.frame.trace.event(step, format!("sync: durable {v}")),
                Err(e) => self.frame.trace.event(step, format!("sync failed: {e}")),
            }
        }
        self.check(kv, who, step)
    }
}

fn short(e: &ActorKvError) -> String {
    e.to_string().chars().take(80).collect()
}

/// Runs the actor KV workload of one seed on engine `E`.
pub fn run_actor_kv_seed_on<E: Target>(options: &RunOptions) -> SeedReport {
    let mut frame = Frame::new(options, 0xAC70_0000_0000_0000, 1_730_000_000_000);
    let config = frame.faults;
    let store_options = crate::run::schema_options(
        &mut frame.rng,
        ActorKv::<strata_engine::MemEngine>::declare(StoreOptions::new(Limits::FOUNDATIONDB)),
    );
    let layout = if frame.rng.chance(0.5) {
        PhysicalLayout::Native
    } else {
        PhysicalLayout::Compatible
    };
    let mut run = AkvRun {
        options: store_options.clone(),
        config: ActorKvConfig {
            layout,
            quota_bytes: QUOTA,
            ..ActorKvConfig::default()
        },
        frame,
    };
    run.frame.trace.event(
        0,
        format!(
            "actor-kv seed {} faults {config:?} durability {:?} layout {layout:?}",
            options.seed, store_options.durability
        ),
    );
    let engine = run.frame.engine::<E>(store_options.keyspace_specs());
    let kv = run.open(engine);
    let (kv, violation) = drive(&mut run, kv, options.ops);
    let faults = kv
        .map(|k| k.store().engine().counters())
        .unwrap_or_default();
    run.frame
        .report("actor-kv", options.seed, faults, violation)
}

#[cfg(test)]
mod tests {
    use super::{HEADER, payload, whole};

    #[test]
    fn a_payload_is_whole_and_any_changed_byte_is_seen() {
        // Lengths with and without a partial last word.
        for len in [HEADER, HEADER + 1, HEADER + 8, HEADER + 13, 1_000, 4_099] {
            let v = payload(0x5EED ^ len as u64, len);
            assert_eq!(v.len(), len);
            assert!(whole(&v), "length {len}");
            for at in [HEADER, len / 2, len - 1] {
                if at < HEADER || at >= len {
                    continue;
                }
                let mut bad = v.clone();
                bad[at] ^= 0x40;
                assert!(!whole(&bad), "length {len}, byte {at} changed");
            }
            assert!(!whole(&v[..len - 1]), "length {len}, cut by one");
        }
        // Bytes generated from another seed are not this header's.
        let mut other = payload(7, 100);
        other[HEADER..].copy_from_slice(&payload(8, 100)[HEADER..]);
        assert!(!whole(&other));
    }
}
