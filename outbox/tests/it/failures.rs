//! Failures: retries with backoff, holding back one ordering key, dead
//! letters, leases, limits.

use strata_engine::{Clock, Durability, Engine};
use strata_outbox::{Failed, OutboxError, Start, Topic};
use strata_store::StoreError;

use crate::engine_tests;
use crate::{Event, T0, ack_all, event, on_every_engine, orders, place, topic};

engine_tests! {
    fn a_failed_entry_is_retried_after_a_backoff_and_holds_back_only_its_key() {
        on_every_engine!(Durability::Immediate, |store, outbox, clock| {
            outbox.register("orders", "c", Start::Beginning).unwrap();
            place(&outbox, 1, Some(b"alice"));
            place(&outbox, 2, Some(b"bob"));
            place(&outbox, 3, Some(b"alice"));
            place(&outbox, 4, None);
            let lease = outbox.acquire("orders", "c", "w").unwrap();
            let got = outbox.poll(&lease, &topic(), 10).unwrap();
            assert_eq!(orders(&got), [1, 2, 3, 4]);
            assert_eq!(got[0].ordering_key.as_deref(), Some(&b"alice"[..]));
            // 1 fails; 2, 3 and 4 were handled... but 3 is alice's: a worker
            // that failed 1 stops alice's entries, so only 2 and 4 finish.
            let Failed::Retry { at_ms, attempts } =
                outbox.fail(&lease, got[0].position, "smtp down").unwrap()
            else {
                panic!("the first failure retries");
            };
            assert_eq!(attempts, 1);
            // Backoff: between half and all of the base (100 ms).
            let wait = at_ms - clock.now_ms();
            assert!((50..=100).contains(&wait), "waits {wait} ms");
            ack_all(&outbox, &lease, &[got[1].clone(), got[3].clone()]);
            // While 1 waits, alice is held back, nothing else is.
            place(&outbox, 5, Some(b"bob"));
            assert_eq!(orders(&outbox.poll(&lease, &topic(), 10).unwrap()), [5]);
            clock.advance(wait);
            let again = outbox.poll(&lease, &topic(), 10).unwrap();
            assert_eq!(orders(&again), [1, 3, 5]);
            assert_eq!(again[0].attempt, 2);
            // The second failure waits longer (base doubled: 100..=200 ms).
            let Failed::Retry { at_ms, attempts } =
                outbox.fail(&lease, got[0].position, "still down").unwrap()
            else {
                panic!("the second failure retries");
            };
            assert_eq!(attempts, 2);
            assert!((100..=200).contains(&(at_ms - clock.now_ms())));
        });
    }
}

engine_tests! {
    fn after_the_last_attempt_an_entry_becomes_a_dead_letter_and_the_checkpoint_passes_it() {
        on_every_engine!(Durability::Immediate, |store, outbox, clock| {
            outbox.register("orders", "c", Start::Beginning).unwrap();
            place(&outbox, 1, Some(b"k"));
            place(&outbox, 2, Some(b"k"));
            let mut lease = outbox.acquire("orders", "c", "w").unwrap();
            let first = outbox.poll(&lease, &topic(), 1).unwrap();
            let pos = first[0].position;
            let mut outcome = Failed::Retry {
                at_ms: 0,
                attempts: 0,
            };
            for attempt in 1..=3u32 {
                // Past any backoff (at most 1 s); the worker renews its lease.
                clock.advance(2_000);
                lease = outbox.renew(&lease).unwrap();
                let d = outbox.poll(&lease, &topic(), 1).unwrap();
                assert_eq!((d[0].position, d[0].attempt), (pos, attempt));
                outcome = outbox
                    .fail(&lease, pos, &format!("failure {attempt}"))
                    .unwrap();
            }
            // max_attempts is 3.
            assert_eq!(outcome, Failed::DeadLettered);
            // Passed: 2 is delivered, 1 never again.
            let next = outbox.poll(&lease, &topic(), 10).unwrap();
            assert_eq!(orders(&next), [2]);
            ack_all(&outbox, &lease, &next);
            assert!(outbox.poll(&lease, &topic(), 10).unwrap().is_empty());
            let dead = outbox.dead_letters("orders", "c").unwrap();
            assert_eq!(dead.len(), 1);
            assert_eq!(dead[0].position, pos);
            assert_eq!(dead[0].error, "failure 3");
            assert_eq!(dead[0].attempts, 3);
            assert_eq!(dead[0].ordering_key.as_deref(), Some(&b"k"[..]));
            assert!(dead[0].first_failure_ms < dead[0].last_failure_ms);
            let entry: Event = strata_codec::decode(&[], &dead[0].envelope).unwrap();
            assert_eq!(entry, event(1));
            // Re-driven: a new entry in the topic, the dead letter gone.
            outbox.redrive("orders", "c", pos).unwrap();
            assert!(outbox.dead_letters("orders", "c").unwrap().is_empty());
            let redriven = outbox.poll(&lease, &topic(), 10).unwrap();
            assert_eq!(orders(&redriven), [1]);
            assert!(redriven[0].position > pos);
            assert_eq!(redriven[0].attempt, 1);
            // Purged: gone for good.
            clock.advance(1);
            for _ in 1..=3u32 {
                clock.advance(2_000);
                lease = outbox.renew(&lease).unwrap();
                outbox.fail(&lease, redriven[0].position, "again").unwrap();
            }
            assert_eq!(outbox.dead_letters("orders", "c").unwrap().len(), 1);
            outbox.purge("orders", "c", redriven[0].position).unwrap();
            assert!(outbox.dead_letters("orders", "c").unwrap().is_empty());
        });
    }
}

engine_tests! {
    fn one_worker_holds_a_consumer_and_a_stale_one_is_fenced_off() {
        on_every_engine!(Durability::Immediate, |store, outbox, clock| {
            outbox.register("orders", "c", Start::Beginning).unwrap();
            place(&outbox, 1, None);
            let w1 = outbox.acquire("orders", "c", "w1").unwrap();
            assert!(matches!(
                outbox.acquire("orders", "c", "w2"),
                Err(OutboxError::LeaseHeld { holder, .. }) if holder == "w1"
            ));
            // The same holder name is refused too: a lease is the acquiring
            // worker's, renewed with the lease itself, keeping its token.
            assert!(matches!(
                outbox.acquire("orders", "c", "w1"),
                Err(OutboxError::LeaseHeld { holder, .. }) if holder == "w1"
            ));
            clock.advance(1_000);
            let w1 = outbox.renew(&w1).unwrap();
            assert_eq!(w1.expires_ms(), clock.now_ms() + 5_000);
            let d = outbox.poll(&w1, &topic(), 10).unwrap();
            // w1 stalls past its lease; w2 takes over with a larger token.
            clock.advance(5_001);
            let w2 = outbox.acquire("orders", "c", "w2").unwrap();
            assert!(w2.token() > w1.token());
            // w1's acknowledgement and failure are refused, nothing written.
            let stale = store.transact(|tx| outbox.ack(tx, &w1, d[0].position));
            assert!(matches!(stale, Err(OutboxError::StaleLease { .. })));
            assert!(matches!(
                outbox.fail(&w1, d[0].position, "x"),
                Err(OutboxError::StaleLease { .. })
            ));
            assert!(matches!(
                outbox.poll(&w1, &topic(), 10),
                Err(OutboxError::StaleLease { .. })
            ));
            // w2 gets the entry again (at least once) and finishes it.
            let again = outbox.poll(&w2, &topic(), 10).unwrap();
            assert_eq!(orders(&again), [1]);
            ack_all(&outbox, &w2, &again);
            assert!(outbox.poll(&w2, &topic(), 10).unwrap().is_empty());
            assert!(matches!(
                outbox.acquire("orders", "nobody", "w"),
                Err(OutboxError::UnknownConsumer { .. })
            ));
        });
    }
}

engine_tests! {
    fn an_entry_too_large_is_refused_before_anything_is_written() {
        on_every_engine!(Durability::Immediate, |store, outbox, _clock| {
            outbox.register("orders", "c", Start::Beginning).unwrap();
            let before = store.engine().last_version();
            let big = Event {
                order: 1,
                note: "x".repeat(600),
            };
            let r = store.transact(|tx| outbox.push(tx, &topic(), &big));
            assert!(
                matches!(r, Err(OutboxError::Store(StoreError::Limit { .. }))),
                "{r:?}"
            );
            assert_eq!(store.engine().last_version(), before);
            // Pushes beyond the batch entry limit (16) fail the commit.
            let r = store.transact(|tx| {
                for i in 0..17 {
                    outbox.push(tx, &topic(), &event(i))?;
                }
                Ok::<_, OutboxError>(())
            });
            assert!(
                matches!(
                    r,
                    Err(OutboxError::Store(StoreError::Limit { row: None, .. }))
                ),
                "{r:?}"
            );
            let lease = outbox.acquire("orders", "c", "w").unwrap();
            assert!(outbox.poll(&lease, &topic(), 100).unwrap().is_empty());
        });
    }
}

engine_tests! {
    /// `ack_through` clears the attempt records at or below the position
    /// it acknowledges, never one above it: a failed entry past it keeps
    /// its count (found by the mutation run: a flipped comparison there
    /// passed every test).
    fn ack_through_keeps_the_attempts_of_entries_past_it() {
        on_every_engine!(Durability::Immediate, |store, outbox, clock| {
            outbox.register("orders", "c", Start::Beginning).unwrap();
            place(&outbox, 1, None);
            place(&outbox, 2, Some(b"k"));
            let lease = outbox.acquire("orders", "c", "w").unwrap();
            let got = outbox.poll(&lease, &topic(), 10).unwrap();
            assert_eq!(orders(&got), [1, 2]);
            let Failed::Retry { at_ms, attempts } =
                outbox.fail(&lease, got[1].position, "down").unwrap()
            else {
                panic!("the first failure retries");
            };
            assert_eq!(attempts, 1);
            store
                .transact(|tx| outbox.ack_through(tx, &lease, got[0].position))
                .unwrap();
            clock.advance(at_ms - clock.now_ms());
            let again = outbox.poll(&lease, &topic(), 10).unwrap();
            assert_eq!(orders(&again), [2]);
            assert_eq!(again[0].attempt, 2, "the failure before ack_through still counts");
        });
    }
}

engine_tests! {
    /// A lease's edges: what it says about itself, the millisecond it
    /// ends, and the fencing of an older lease of the same outbox.
    fn a_lease_ends_at_its_expiry_and_an_older_one_of_the_same_outbox_is_fenced() {
        on_every_engine!(Durability::Immediate, |store, outbox, clock| {
            outbox.register("orders", "c", Start::Beginning).unwrap();
            place(&outbox, 1, None);
            let first = outbox.acquire("orders", "c", "w1").unwrap();
            assert_eq!(
                (first.holder(), first.topic(), first.consumer()),
                ("w1", "orders", "c")
            );
            assert_eq!(first.expires_ms(), T0 + 5_000);
            let d = outbox.poll(&first, &topic(), 10).unwrap();
            assert_eq!(orders(&d), [1]);
            // At its expiry's millisecond the lease no longer holds: its
            // holder is refused, and another worker may take it.
            clock.advance(5_000);
            assert!(matches!(
                outbox.poll(&first, &topic(), 10),
                Err(OutboxError::StaleLease { token }) if token == first.token()
            ));
            assert!(matches!(
                store.transact(|tx| outbox.ack(tx, &first, d[0].position)),
                Err(OutboxError::StaleLease { .. })
            ));
            // The same outbox takes the lease again: the older lease it
            // handed out is still fenced off.
            let second = outbox.acquire("orders", "c", "w1").unwrap();
            assert!(second.token() > first.token());
            assert!(matches!(
                store.transact(|tx| outbox.ack(tx, &first, d[0].position)),
                Err(OutboxError::StaleLease { .. })
            ));
            // The entry, not acknowledged, comes again to the new lease.
            let again = outbox.poll(&second, &topic(), 10).unwrap();
            assert_eq!(orders(&again), [1]);
            assert_eq!(again[0].position.to_string(), format!("{}.{}", again[0].position.version, again[0].position.order));
            ack_all(&outbox, &second, &again);
            // A consumer removed and registered again starts its tokens
            // over: a lease of its former life, though its token comes
            // round again, is fenced off by its acquisition's identity.
            place(&outbox, 2, None);
            clock.advance(5_000);
            assert!(outbox.unregister("orders", "c").unwrap());
            outbox.register("orders", "c", Start::Beginning).unwrap();
            let reborn = outbox.acquire("orders", "c", "w1").unwrap();
            assert_eq!(reborn.token(), first.token());
            let fresh = outbox.poll(&reborn, &topic(), 10).unwrap();
            // A new consumer from the beginning: every entry not trimmed.
            assert_eq!(orders(&fresh), [1, 2]);
            assert!(matches!(
                store.transact(|tx| outbox.ack(tx, &first, fresh[0].position)),
                Err(OutboxError::StaleLease { .. })
            ));
            ack_all(&outbox, &reborn, &fresh);
        });
    }
}

engine_tests! {
    /// Topic and consumer names: 1 to 64 bytes.
    fn names_of_64_bytes_are_taken_and_longer_ones_refused() {
        on_every_engine!(Durability::Immediate, |store, outbox, clock| {
            let _ = (&store, &clock);
            let long = "t".repeat(64);
            assert!(Topic::<Event>::new(&long).is_ok());
            // (Names of 64 bytes each make keys longer than the tests' 128-byte
            // key limit: a name of 64 bytes with a short one.)
            outbox.register(&long, "c", Start::Beginning).unwrap();
            outbox.register("orders", &"c".repeat(64), Start::Beginning).unwrap();
            let longer = "t".repeat(65);
            assert!(matches!(
                Topic::<Event>::new(&longer),
                Err(OutboxError::BadName { what: "topic", .. })
            ));
            assert!(matches!(
                outbox.register("orders", &longer, Start::Beginning),
                Err(OutboxError::BadName { what: "consumer", .. })
            ));
            assert!(matches!(
                outbox.register("", "c", Start::Beginning),
                Err(OutboxError::BadName { what: "topic", .. })
            ));
        });
    }
}

engine_tests! {
    /// `poll_raw_after` hands out each entry's envelope as pushed.
    fn a_raw_poll_gives_the_envelopes_as_pushed() {
        on_every_engine!(Durability::Immediate, |store, outbox, clock| {
            let _ = (&store, &clock);
            outbox.register("orders", "c", Start::Beginning).unwrap();
            place(&outbox, 1, Some(b"k1"));
            place(&outbox, 2, None);
            let lease = outbox.acquire("orders", "c", "w").unwrap();
            let raw = outbox
                .poll_raw_after(&lease, "orders", strata_outbox::Position::START, 10)
                .unwrap();
            assert_eq!(raw.len(), 2);
            let decoded: Vec<Event> = raw
                .iter()
                .map(|d| strata_codec::decode::<Event>(&[], &d.entry).unwrap())
                .collect();
            assert_eq!(decoded, [event(1), event(2)]);
            assert_eq!(raw[0].ordering_key.as_deref(), Some(&b"k1"[..]));
            assert_eq!(raw[1].ordering_key, None);
        });
    }
}

/// The consumer `c`'s rows of `tag` in the outbox's state space (`"d"`:
/// finished marks, `"t"`: attempt records), read from the store.
fn state_rows<E: Engine>(store: &strata_store::Store<E>, tag: &str) -> usize {
    let space = store.space(strata_outbox::STATE).unwrap();
    let range =
        strata_keys::KeyRange::tuple_prefix(&strata_keys::tuple::pack(&(tag, "orders", "c")));
    let mut tx = store.begin();
    tx.scan_in(&space, &range, None, false).unwrap().rows.len()
}

engine_tests! {
    /// `ack_through` clears finished marks and attempt records at or below
    /// its position, at most a quarter of the batch limit (16 entries
    /// here: 4) per commit, marks first; an attempt record at the position
    /// itself goes too (found by the mutation run: the bound, its count
    /// and the comparison at the position passed every test).
    fn ack_through_clears_what_it_passes_a_bounded_number_per_commit() {
        on_every_engine!(Durability::Immediate, |store, outbox, _clock| {
            for id in 1..=12 {
                place(&outbox, id, None);
            }
            outbox.register("orders", "c", Start::Beginning).unwrap();
            let lease = outbox.acquire("orders", "c", "w").unwrap();
            let got = outbox.poll(&lease, &topic(), 12).unwrap();
            assert_eq!(got.len(), 12);
            // 1 and 2 fail (attempt records), 3..=10 finish out of order
            // (marks above the checkpoint, held at the start by 1).
            for d in &got[..2] {
                outbox.fail(&lease, d.position, "down").unwrap();
            }
            ack_all(&outbox, &lease, &got[2..10]);
            assert_eq!((state_rows(&store, "d"), state_rows(&store, "t")), (8, 2));
            store
                .transact(|tx| outbox.ack_through(tx, &lease, got[9].position))
                .unwrap();
            assert_eq!(outbox.checkpoint("orders", "c").unwrap(), got[9].position);
            // Four marks gone (3..=6), nothing left for the attempts.
            assert_eq!((state_rows(&store, "d"), state_rows(&store, "t")), (4, 2));

            // A fresh consumer: 1 fails, then is passed by `ack_through` at
            // its own position with room to spare.
            outbox.release(&lease).unwrap();
            assert!(outbox.unregister("orders", "c").unwrap());
            outbox.register("orders", "c", Start::Beginning).unwrap();
            let lease = outbox.acquire("orders", "c", "w").unwrap();
            let got = outbox.poll(&lease, &topic(), 12).unwrap();
            outbox.fail(&lease, got[0].position, "down").unwrap();
            outbox.fail(&lease, got[1].position, "down").unwrap();
            assert_eq!(state_rows(&store, "t"), 2);
            store
                .transact(|tx| outbox.ack_through(tx, &lease, got[0].position))
                .unwrap();
            assert_eq!(state_rows(&store, "t"), 1, "the record at the position goes, the next stays");
        });
    }
}

engine_tests! {
    /// An entry whose row is at the value limit (its bytes escaped in the
    /// row, zeros doubled), and a failure whose text is longer than the
    /// limit, are still recorded: the dead letter keeps the entry's row as
    /// it was, in a row of its own, and the failure's text cut to fit, so
    /// a consumer is never stuck on an entry it can neither handle nor
    /// give up on. Re-driven, the entry is delivered whole.
    fn an_entry_at_the_limit_with_a_long_failure_is_given_up_on_and_redriven() {
        on_every_engine!(Durability::Immediate, |store, outbox, _clock| {
            outbox.register("orders", "c", Start::Beginning).unwrap();
            // The longest note of zeros and letters that pushes.
            let note = |n: usize| -> String {
                (0..n).map(|i| if i % 2 == 0 { '\0' } else { 'z' }).collect()
            };
            let mut n = 600;
            let big = loop {
                let e = Event { order: 7, note: note(n) };
                if store.transact(|tx| outbox.push(tx, &topic(), &e)).is_ok() {
                    break e;
                }
                n -= 1;
            };
            assert!(n > 250, "the note's row fills the limit ({n})");
            let lease = outbox.acquire("orders", "c", "w").unwrap();
            let got = outbox.poll(&lease, &topic(), 10).unwrap();
            assert_eq!(got.len(), 1);
            let long = format!("the handler failed: {}", "e".repeat(2_000));
            let Failed::Retry { attempts, .. } = outbox.fail(&lease, got[0].position, &long).unwrap()
            else {
                panic!("the first failure retries");
            };
            assert_eq!(attempts, 1);
            outbox.dead_letter(&lease, got[0].position, &long).unwrap();
            let dead = outbox.dead_letters("orders", "c").unwrap();
            assert_eq!(dead.len(), 1);
            let entry: Event = strata_codec::decode(&[], &dead[0].envelope).unwrap();
            assert_eq!(entry, big);
            assert_eq!(dead[0].attempts, 1);
            assert!(dead[0].error.starts_with("the handler failed: eee"), "{}", dead[0].error);
            assert!(dead[0].error.ends_with("(cut)"), "{}", dead[0].error);
            assert!(dead[0].error.len() < 512);
            // The checkpoint passed it; re-driven, it comes back whole.
            assert!(outbox.poll(&lease, &topic(), 10).unwrap().is_empty());
            outbox.redrive("orders", "c", dead[0].position).unwrap();
            assert!(outbox.dead_letters("orders", "c").unwrap().is_empty());
            let again = outbox.poll(&lease, &topic(), 10).unwrap();
            assert_eq!(again.len(), 1);
            assert_eq!(again[0].entry, big);
            // Given up on again, then purged: nothing of it is left.
            outbox.dead_letter(&lease, again[0].position, "no").unwrap();
            let dead = outbox.dead_letters("orders", "c").unwrap();
            assert_eq!(dead[0].error, "no");
            outbox.purge("orders", "c", dead[0].position).unwrap();
            assert!(outbox.dead_letters("orders", "c").unwrap().is_empty());
            let report = store.verify().unwrap();
            assert!(report.problems.is_empty(), "{:?}", report.problems);
        });
    }
}

/// A dead letter written in the layout before its note had a row of its
/// own (`("x", topic, consumer, version, order)` holding the entry row,
/// the error, attempts and times, packed here by hand) is still listed,
/// re-driven and purged.
#[test]
fn a_dead_letter_of_the_earlier_layout_is_still_read() {
    use strata_keys::tuple;
    let (store, clock, _dir) = strata_test_support::mem(crate::options(Durability::Immediate));
    let outbox = strata_outbox::Outbox::new(
        &store,
        crate::config(),
        clock,
        Box::new(strata_engine::SeededRng::new(2)),
    )
    .unwrap();
    outbox.register("orders", "c", Start::Beginning).unwrap();
    let mut envelope = Vec::new();
    strata_codec::encode(
        &event(9),
        &[],
        strata_codec::EncodeOptions::default(),
        &mut envelope,
    )
    .unwrap();
    let entry_row = tuple::pack(&(T0, Some(&b"k9"[..]), envelope.as_slice()));
    let old = tuple::pack(&(entry_row.as_slice(), "it broke", 3u32, T0 - 5, T0 - 1));
    let dead = store.space(strata_outbox::DEAD).unwrap();
    store
        .transact(|tx| {
            tx.put_in(
                &dead,
                tuple::pack(&("x", "orders", "c", 42u64, 3u16)),
                old.clone(),
            )
        })
        .unwrap();
    let listed = outbox.dead_letters("orders", "c").unwrap();
    assert_eq!(listed.len(), 1);
    let d = &listed[0];
    assert_eq!((d.position.version, d.position.order), (42, 3));
    assert_eq!(d.ordering_key.as_deref(), Some(&b"k9"[..]));
    assert_eq!(d.envelope, envelope);
    assert_eq!(
        (
            d.error.as_str(),
            d.attempts,
            d.first_failure_ms,
            d.last_failure_ms
        ),
        ("it broke", 3, T0 - 5, T0 - 1)
    );
    outbox.redrive("orders", "c", d.position).unwrap();
    assert!(outbox.dead_letters("orders", "c").unwrap().is_empty());
    let lease = outbox.acquire("orders", "c", "w").unwrap();
    let again = outbox.poll(&lease, &topic(), 10).unwrap();
    assert_eq!(orders(&again), [9]);
    assert_eq!(again[0].ordering_key.as_deref(), Some(&b"k9"[..]));
}
