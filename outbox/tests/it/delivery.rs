//! Delivery: commit order, durability, checkpoints, consumers, trimming.

use strata_engine::{Clock, Durability, Engine};
use strata_outbox::{Delivery, Outbox, OutboxError, Position, Start, Topic};
use strata_store::StoreError;

use crate::engine_tests;
use crate::{Event, OrderKey, ack_all, event, on_every_engine, orders, place, topic};

engine_tests! {
    fn entries_are_delivered_in_commit_order_with_their_data() {
        on_every_engine!(Durability::Immediate, |store, outbox, _clock| {
            outbox
                .register("orders", "mailer", Start::Beginning)
                .unwrap();
            // Two producers: the one that began first commits last. Its entry
            // comes after: order is by commit, not by who started.
            let mut early = store.begin();
            outbox.push(&mut early, &topic(), &event(1)).unwrap();
            early.put(&OrderKey { id: 1 }, &"one".to_owned()).unwrap();
            let mut late = store.begin();
            outbox.push(&mut late, &topic(), &event(2)).unwrap();
            late.commit().unwrap();
            early.commit().unwrap();
            // Two entries in one commit keep their push order.
            store
                .transact(|tx| {
                    outbox.push(tx, &topic(), &event(3))?;
                    outbox.push(tx, &topic(), &event(4))?;
                    Ok::<_, OutboxError>(())
                })
                .unwrap();
            // A transaction that fails leaves no entry.
            let refused = store.transact(|tx| {
                outbox.push(tx, &topic(), &event(99))?;
                tx.put(&OrderKey { id: 99 }, &"x".repeat(600))?;
                Ok::<_, OutboxError>(())
            });
            assert!(matches!(
                refused,
                Err(OutboxError::Store(StoreError::ValueTooLarge { .. }))
            ));
            let lease = outbox.acquire("orders", "mailer", "w1").unwrap();
            let got = outbox.poll(&lease, &topic(), 10).unwrap();
            assert_eq!(orders(&got), [2, 1, 3, 4]);
            assert!(got.windows(2).all(|w| w[0].position < w[1].position));
            assert_eq!(got[2].position.version, got[3].position.version);
            assert_eq!(got[0].attempt, 1);
            // The data of entry 1 committed with it.
            assert_eq!(
                store.get(&OrderKey { id: 1 }).unwrap().as_deref(),
                Some("one")
            );
            // Acknowledged: nothing more; the limit of a poll is respected.
            assert_eq!(orders(&outbox.poll(&lease, &topic(), 2).unwrap()), [2, 1]);
            ack_all(&outbox, &lease, &got);
            assert!(outbox.poll(&lease, &topic(), 10).unwrap().is_empty());
            assert_eq!(outbox.lag("orders", "mailer").unwrap().entries, 0);
        });
    }
}

engine_tests! {
    fn buffered_entries_wait_for_durability() {
        on_every_engine!(Durability::Buffered, |store, outbox, _clock| {
            outbox.register("orders", "c", Start::Beginning).unwrap();
            place(&outbox, 1, None);
            let engine = store.engine();
            assert!(engine.durable_version() < engine.last_version());
            // Polling syncs (interval 0 in these tests) before reading, then
            // delivers: never beyond the durable version.
            let lease = outbox.acquire("orders", "c", "w").unwrap();
            let got = outbox.poll(&lease, &topic(), 10).unwrap();
            assert_eq!(orders(&got), [1]);
            assert!(got[0].position.version <= store.engine().durable_version());
        });
    }
}

engine_tests! {
    fn a_commit_of_many_entries_is_taken_over_several_polls_and_syncs_only_for_entries() {
        on_every_engine!(Durability::Buffered, |store, outbox, _clock| {
            outbox.register("orders", "c", Start::Beginning).unwrap();
            let lease = outbox.acquire("orders", "c", "w").unwrap();
            // The last commit, made durable by the first poll.
            store
                .transact(|tx| {
                    for id in 1..=5 {
                        outbox.push(tx, &topic(), &event(id))?;
                    }
                    Ok::<_, OutboxError>(())
                })
                .unwrap();
            let first = outbox.poll(&lease, &topic(), 2).unwrap();
            assert_eq!(orders(&first), [1, 2]);
            // The consumer's own commit is not durable yet; it carries no
            // entry, so it costs no sync and hides nothing of the durable
            // commit that is only half taken.
            store
                .transact(|tx| outbox.ack_through(tx, &lease, first[1].position))
                .unwrap();
            let engine = store.engine();
            let durable = engine.durable_version();
            assert!(durable < engine.last_version());
            let next = outbox
                .poll_after(&lease, &topic(), first[1].position, 2)
                .unwrap();
            assert_eq!(orders(&next), [3, 4]);
            let rest = outbox
                .poll_after(&lease, &topic(), next[1].position, 10)
                .unwrap();
            assert_eq!(orders(&rest), [5]);
            assert_eq!(engine.durable_version(), durable);
            assert!(
                outbox
                    .poll_after(&lease, &topic(), rest[0].position, 10)
                    .unwrap()
                    .is_empty()
            );
            assert_eq!(engine.durable_version(), durable);
            // A new entry waits for durability: the poll syncs and delivers it.
            place(&outbox, 6, None);
            let six = outbox
                .poll_after(&lease, &topic(), rest[0].position, 10)
                .unwrap();
            assert_eq!(orders(&six), [6]);
            assert_eq!(engine.durable_version(), engine.last_version());
        });
    }
}

engine_tests! {
    fn the_checkpoint_passes_only_finished_entries_in_order() {
        on_every_engine!(Durability::Immediate, |store, outbox, _clock| {
            outbox.register("orders", "c", Start::Beginning).unwrap();
            for id in 1..=4 {
                place(&outbox, id, None);
            }
            let lease = outbox.acquire("orders", "c", "w").unwrap();
            let got = outbox.poll(&lease, &topic(), 10).unwrap();
            // Finish 2 and 4 only: 1 and 3 are still owed.
            ack_all(&outbox, &lease, &[got[1].clone(), got[3].clone()]);
            assert_eq!(orders(&outbox.poll(&lease, &topic(), 10).unwrap()), [1, 3]);
            assert_eq!(outbox.lag("orders", "c").unwrap().entries, 2);
            // The handler's own write and the acknowledgement, one commit.
            store
                .transact(|tx| {
                    tx.put(&OrderKey { id: 100 }, &"mailed 1".to_owned())?;
                    outbox.ack(tx, &lease, got[0].position)
                })
                .unwrap();
            assert_eq!(orders(&outbox.poll(&lease, &topic(), 10).unwrap()), [3]);
            // An acknowledgement whose transaction fails leaves the entry owed.
            let failed = store.transact(|tx| {
                outbox.ack(tx, &lease, got[2].position)?;
                tx.put(&OrderKey { id: 101 }, &"x".repeat(600))?;
                Ok::<_, OutboxError>(())
            });
            assert!(failed.is_err());
            assert_eq!(orders(&outbox.poll(&lease, &topic(), 10).unwrap()), [3]);
            ack_all(&outbox, &lease, &[got[2].clone()]);
            assert!(outbox.poll(&lease, &topic(), 10).unwrap().is_empty());
            // The checkpoint passed all four, out-of-order acknowledgements
            // included: the only consumer lets trimming take every entry.
            assert_eq!(outbox.trim("orders", 0, None).unwrap().entries, 4);
            // A second acknowledgement of a finished entry is refused, so the
            // handler's writes beside it roll back; one of a position with no
            // entry is refused too.
            for d in &got {
                let again = store.transact(|tx| {
                    tx.put(&OrderKey { id: 102 }, &"twice".to_owned())?;
                    outbox.ack(tx, &lease, d.position)
                });
                assert!(
                    matches!(again, Err(OutboxError::AlreadyFinished(p)) if p == d.position),
                    "{again:?}"
                );
            }
            assert_eq!(store.get(&OrderKey { id: 102 }).unwrap(), None);
            let nowhere = Position {
                version: got[3].position.version + 1_000,
                order: 0,
            };
            assert!(matches!(
                store.transact(|tx| outbox.ack(tx, &lease, nowhere)),
                Err(OutboxError::NoEntry(p)) if p == nowhere
            ));
            assert!(outbox.poll(&lease, &topic(), 10).unwrap().is_empty());
        });
    }
}

/// Orders 1 to 40 placed for consumer `c`, held by `w`, all delivered once.
fn forty_placed<E: Engine>(outbox: &Outbox<'_, E>) -> (strata_outbox::Lease, Vec<Delivery<Event>>) {
    outbox.register("orders", "c", Start::Beginning).unwrap();
    for id in 1..=40 {
        place(outbox, id, None);
    }
    let lease = outbox.acquire("orders", "c", "w").unwrap();
    let got = outbox.poll(&lease, &topic(), 40).unwrap();
    assert_eq!(orders(&got), (1..=40).collect::<Vec<_>>());
    (lease, got)
}

engine_tests! {
    fn the_checkpoint_jumps_over_a_long_run_of_finished_entries_at_once() {
        on_every_engine!(Durability::Immediate, |store, outbox, _clock| {
            let (lease, got) = forty_placed(&outbox);
            // 2..=30 finished out of order (29 entries), 31 and on owed.
            for d in got[1..30].iter().rev() {
                store
                    .transact(|tx| outbox.ack(tx, &lease, d.position))
                    .unwrap();
            }
            assert_eq!(outbox.checkpoint("orders", "c").unwrap(), Position::START);
            // Finishing 1 moves the checkpoint over all thirty, not further.
            store
                .transact(|tx| outbox.ack(tx, &lease, got[0].position))
                .unwrap();
            assert_eq!(outbox.checkpoint("orders", "c").unwrap(), got[29].position);
            assert_eq!(
                orders(&outbox.poll(&lease, &topic(), 40).unwrap()),
                (31..=40).collect::<Vec<_>>()
            );
        });
    }
}

engine_tests! {
    fn a_poll_reads_past_a_page_of_finished_entries() {
        on_every_engine!(Durability::Immediate, |store, outbox, _clock| {
            let (lease, got) = forty_placed(&outbox);
            // 2..=20 finished out of order; 1 still owed holds the checkpoint.
            for d in &got[1..20] {
                store
                    .transact(|tx| outbox.ack(tx, &lease, d.position))
                    .unwrap();
            }
            // A poll of 16 reads a first page of 16 entries, 15 of them
            // finished: it must read on to find the rest.
            assert_eq!(
                orders(&outbox.poll(&lease, &topic(), 16).unwrap()),
                [1].into_iter().chain(21..=35).collect::<Vec<_>>()
            );
        });
    }
}

engine_tests! {
    fn consumers_are_independent_and_start_where_asked() {
        on_every_engine!(Durability::Immediate, |store, outbox, _clock| {
            place(&outbox, 1, None);
            place(&outbox, 2, None);
            let v2 = store.engine().last_version();
            place(&outbox, 3, None);
            outbox.register("orders", "all", Start::Beginning).unwrap();
            outbox.register("late", "x", Start::End).unwrap();
            outbox.register("orders", "new", Start::End).unwrap();
            outbox
                .register("orders", "after2", Start::AfterVersion(v2))
                .unwrap();
            // Registering again changes nothing.
            outbox.register("orders", "all", Start::End).unwrap();
            // The catalog describes the topics and consumers.
            let catalog: Vec<(String, String)> = store
                .catalog()
                .unwrap()
                .into_iter()
                .filter(|e| e.kind.starts_with("outbox."))
                .map(|e| (e.kind, e.name))
                .collect();
            let pair = |k: &str, n: &str| (k.to_owned(), n.to_owned());
            assert_eq!(
                catalog,
                [
                    pair("outbox.consumer", "late/x"),
                    pair("outbox.consumer", "orders/after2"),
                    pair("outbox.consumer", "orders/all"),
                    pair("outbox.consumer", "orders/new"),
                    pair("outbox.topic", "late"),
                    pair("outbox.topic", "orders"),
                ]
            );
            let poll = |c: &str| {
                let lease = outbox.acquire("orders", c, "w").unwrap();
                let got = orders(&outbox.poll(&lease, &topic(), 10).unwrap());
                outbox.release(&lease).unwrap();
                got
            };
            assert_eq!(poll("all"), [1, 2, 3]);
            assert!(poll("new").is_empty());
            assert_eq!(poll("after2"), [3]);
            place(&outbox, 4, None);
            assert_eq!(poll("new"), [4]);
            // Finishing everything for one consumer does not finish it for
            // the others.
            let lease = outbox.acquire("orders", "all", "w").unwrap();
            let got = outbox.poll(&lease, &topic(), 10).unwrap();
            ack_all(&outbox, &lease, &got);
            outbox.release(&lease).unwrap();
            assert!(poll("all").is_empty());
            assert_eq!(poll("after2"), [3, 4]);
            // A reset replays.
            outbox.reset("orders", "all", Start::Beginning).unwrap();
            assert_eq!(poll("all"), [1, 2, 3, 4]);
            assert!(matches!(
                outbox.reset("orders", "nobody", Start::Beginning),
                Err(OutboxError::UnknownConsumer { .. })
            ));
        });
    }
}

engine_tests! {
    fn trimming_never_removes_what_a_consumer_still_needs() {
        on_every_engine!(Durability::Immediate, |store, outbox, clock| {
            // No consumer: nothing is trimmed.
            for id in 1..=40 {
                place(&outbox, id, None);
            }
            assert_eq!(outbox.trim("orders", 0, None).unwrap().entries, 0);
            outbox.register("orders", "fast", Start::Beginning).unwrap();
            outbox.register("orders", "slow", Start::Beginning).unwrap();
            let fast = outbox.acquire("orders", "fast", "w").unwrap();
            let got = outbox.poll(&fast, &topic(), 100).unwrap();
            assert_eq!(got.len(), 40);
            ack_all(&outbox, &fast, &got);
            let slow = outbox.acquire("orders", "slow", "w").unwrap();
            let slow_got = outbox.poll(&slow, &topic(), 100).unwrap();
            ack_all(&outbox, &slow, &slow_got[..25]);
            // Retention keeps entries younger than 1 s: none is old enough.
            assert_eq!(outbox.trim("orders", 1_000, None).unwrap().entries, 0);
            clock.advance(2_000);
            // In commits of at most the batch entry limit (16), resumable.
            let first = outbox.trim("orders", 1_000, Some(1)).unwrap();
            assert_eq!((first.entries, first.commits, first.more), (16, 1, true));
            let rest = outbox.trim("orders", 1_000, None).unwrap();
            assert_eq!(rest.entries, 9, "only what the slow consumer passed");
            // The slow consumer still gets the rest.
            assert_eq!(
                orders(&outbox.poll(&slow, &topic(), 100).unwrap()),
                (26..=40).collect::<Vec<_>>()
            );
        });
    }
}

engine_tests! {
    fn an_in_order_consumer_reads_ahead_and_acknowledges_through_a_position() {
        on_every_engine!(Durability::Immediate, |store, outbox, clock| {
            outbox
                .register("orders", "indexer", Start::Beginning)
                .unwrap();
            for id in 1..=5 {
                place(&outbox, id, None);
            }
            let lease = outbox.acquire("orders", "indexer", "w1").unwrap();
            let first = outbox.poll(&lease, &topic(), 2).unwrap();
            assert_eq!(orders(&first), [1, 2]);
            // Reading on after the last entry in hand, nothing acknowledged.
            let next = outbox
                .poll_after(&lease, &topic(), first[1].position, 2)
                .unwrap();
            assert_eq!(orders(&next), [3, 4]);
            assert_eq!(
                outbox.checkpoint("orders", "indexer").unwrap(),
                Position::START
            );
            // A failed entry below the acknowledged position is acknowledged
            // with the rest, and its retry record goes.
            outbox.fail(&lease, first[0].position, "boom").unwrap();
            store
                .transact(|tx| outbox.ack_through(tx, &lease, next[1].position))
                .unwrap();
            assert_eq!(
                outbox.checkpoint("orders", "indexer").unwrap(),
                next[1].position
            );
            clock.advance(60_000);
            let lease = outbox.acquire("orders", "indexer", "w1").unwrap();
            assert_eq!(orders(&outbox.poll(&lease, &topic(), 10).unwrap()), [5]);
            assert_eq!(outbox.lag("orders", "indexer").unwrap().entries, 1);
            // At or below the checkpoint: nothing happens.
            store
                .transact(|tx| outbox.ack_through(tx, &lease, first[0].position))
                .unwrap();
            assert_eq!(
                outbox.checkpoint("orders", "indexer").unwrap(),
                next[1].position
            );
            // A position after the last commit is refused.
            let nowhere = Position::end_of(store.engine().last_version() + 1);
            assert!(matches!(
                store.transact(|tx| outbox.ack_through(tx, &lease, nowhere)),
                Err(OutboxError::NoEntry(p)) if p == nowhere
            ));
            // A stale lease is refused.
            clock.advance(60_000);
            let other = outbox.acquire("orders", "indexer", "w2").unwrap();
            let rest = outbox.poll(&other, &topic(), 10).unwrap();
            assert!(matches!(
                store.transact(|tx| outbox.ack_through(tx, &lease, rest[0].position)),
                Err(OutboxError::StaleLease { .. })
            ));
            assert!(matches!(
                outbox.checkpoint("orders", "nobody"),
                Err(OutboxError::UnknownConsumer { .. })
            ));
        });
    }
}

engine_tests! {
    fn a_released_lease_passes_at_once_and_its_holder_is_fenced() {
        on_every_engine!(Durability::Immediate, |store, outbox, clock| {
            outbox.register("orders", "c", Start::Beginning).unwrap();
            place(&outbox, 1, None);
            let first = outbox.acquire("orders", "c", "w1").unwrap();
            // Held: another holder waits for the expiry...
            assert!(matches!(
                outbox.acquire("orders", "c", "w2"),
                Err(OutboxError::LeaseHeld { holder, .. }) if holder == "w1"
            ));
            // ...unless the holder gives it up.
            outbox.release(&first).unwrap();
            let second = outbox.acquire("orders", "c", "w2").unwrap();
            assert_eq!(second.token(), first.token() + 1, "a new fencing token");
            let got = outbox.poll(&second, &topic(), 10).unwrap();
            assert!(matches!(
                store.transact(|tx| outbox.ack(tx, &first, got[0].position)),
                Err(OutboxError::StaleLease { .. })
            ));
            // Releasing a lease that already changed hands changes nothing.
            outbox.release(&first).unwrap();
            assert!(matches!(
                outbox.acquire("orders", "c", "w3"),
                Err(OutboxError::LeaseHeld { holder, .. }) if holder == "w2"
            ));
            clock.advance(1);
            store
                .transact(|tx| outbox.ack(tx, &second, got[0].position))
                .unwrap();
        });
    }
}

engine_tests! {
    /// A released lease is given up for good: its holder cannot renew it back,
    /// in the millisecond it released it or later (the documented
    /// `StaleLease` "released since"), and a lease that ran out untaken can,
    /// unless its holder released it.
    fn a_released_lease_cannot_be_renewed() {
        on_every_engine!(Durability::Immediate, |store, outbox, clock| {
            outbox.register("orders", "c", Start::Beginning).unwrap();
            let lease = outbox.acquire("orders", "c", "w1").unwrap();
            let before = store.engine().last_version();
            outbox.release(&lease).unwrap();
            assert!(
                store.engine().last_version() > before,
                "the release committed"
            );
            assert!(matches!(
                outbox.renew(&lease),
                Err(OutboxError::StaleLease { token }) if token == lease.token()
            ));
            clock.advance(5);
            assert!(matches!(
                outbox.renew(&lease),
                Err(OutboxError::StaleLease { .. })
            ));
            // Not renewed back: another holder takes it at once.
            let next = outbox.acquire("orders", "c", "w2").unwrap();
            assert_eq!(next.token(), lease.token() + 1);
            // Run out, not taken: its holder renews it.
            clock.advance(next.expires_ms() - clock.now_ms() + 10);
            let renewed = outbox.renew(&next).unwrap();
            assert_eq!(renewed.token(), next.token());
            assert!(renewed.expires_ms() > clock.now_ms());
            // Run out untaken and then released: given up for good too.
            clock.advance(renewed.expires_ms() - clock.now_ms() + 10);
            outbox.release(&renewed).unwrap();
            assert!(matches!(
                outbox.renew(&renewed),
                Err(OutboxError::StaleLease { .. })
            ));
            // Released in the millisecond it ends.
            let last = outbox.acquire("orders", "c", "w3").unwrap();
            assert_eq!(last.token(), next.token() + 1);
            clock.advance(last.expires_ms() - clock.now_ms());
            outbox.release(&last).unwrap();
            assert!(matches!(
                outbox.renew(&last),
                Err(OutboxError::StaleLease { .. })
            ));
            clock.advance(3);
            assert!(matches!(
                outbox.renew(&last),
                Err(OutboxError::StaleLease { .. })
            ));
            assert_eq!(
                outbox.acquire("orders", "c", "w4").unwrap().token(),
                last.token() + 1
            );
        });
    }
}

engine_tests! {
    /// `register` says whether it registered (and where the consumer starts)
    /// or found the consumer there (its checkpoint, the start not applied).
    fn registering_again_says_so_and_keeps_the_checkpoint() {
        on_every_engine!(Durability::Immediate, |store, outbox, _clock| {
            place(&outbox, 1, None);
            let first = outbox.register("orders", "c", Start::Beginning).unwrap();
            assert_eq!(first, strata_outbox::Registered::New(Position::START));
            let lease = outbox.acquire("orders", "c", "w").unwrap();
            let got = outbox.poll(&lease, &topic(), 10).unwrap();
            ack_all(&outbox, &lease, &got);
            let again = outbox.register("orders", "c", Start::End).unwrap();
            assert_eq!(again, strata_outbox::Registered::Existing(got[0].position));
            assert_eq!(outbox.checkpoint("orders", "c").unwrap(), got[0].position);
            let late = outbox.register("orders", "late", Start::End).unwrap();
            assert_eq!(
                late,
                strata_outbox::Registered::New(Position::end_of(store.engine().last_version() - 1))
            );
        });
    }
}

engine_tests! {
    /// A consumer unregistered takes its rows with it (dead letters, finished
    /// marks, the catalog entry), and trimming no longer waits for it; one
    /// whose lease runs is refused.
    fn an_unregistered_consumer_no_longer_holds_trimming_back() {
        on_every_engine!(Durability::Immediate, |store, outbox, clock| {
            for id in 1..=6 {
                place(&outbox, id, None);
            }
            outbox.register("orders", "fast", Start::Beginning).unwrap();
            outbox
                .register("orders", "mistake", Start::Beginning)
                .unwrap();
            let fast = outbox.acquire("orders", "fast", "w").unwrap();
            let got = outbox.poll(&fast, &topic(), 10).unwrap();
            ack_all(&outbox, &fast, &got);
            // The mistaken consumer: a dead letter and an entry finished out
            // of order.
            let mistake = outbox.acquire("orders", "mistake", "w").unwrap();
            let its = outbox.poll(&mistake, &topic(), 10).unwrap();
            outbox
                .dead_letter(&mistake, its[0].position, "nope")
                .unwrap();
            ack_all(&outbox, &mistake, &its[2..3]);
            assert!(matches!(
                outbox.unregister("orders", "mistake"),
                Err(OutboxError::LeaseHeld { .. })
            ));
            outbox.release(&mistake).unwrap();
            clock.advance(1);
            assert_eq!(
                outbox.trim("orders", 0, None).unwrap().entries,
                1,
                "held back"
            );
            let catalog = |name: &str| {
                store
                    .catalog()
                    .unwrap()
                    .iter()
                    .any(|e| e.kind == strata_outbox::CATALOG_CONSUMER && e.name == name)
            };
            assert!(catalog("orders/mistake"));
            assert!(outbox.unregister("orders", "mistake").unwrap());
            assert!(!catalog("orders/mistake"));
            assert!(catalog("orders/fast"));
            assert!(outbox.dead_letters("orders", "mistake").unwrap().is_empty());
            assert!(matches!(
                outbox.checkpoint("orders", "mistake"),
                Err(OutboxError::UnknownConsumer { .. })
            ));
            assert_eq!(outbox.trim("orders", 0, None).unwrap().entries, 5);
            assert!(!outbox.unregister("orders", "mistake").unwrap());
            // Registered again, it starts afresh: nothing of the old one.
            outbox
                .register("orders", "mistake", Start::Beginning)
                .unwrap();
            place(&outbox, 7, None);
            let again = outbox.acquire("orders", "mistake", "w2").unwrap();
            assert_eq!(orders(&outbox.poll(&again, &topic(), 10).unwrap()), [7]);
        });
    }
}

engine_tests! {
    /// The read-only view: every registered consumer, and where each
    /// stands.
    fn consumers_and_their_status_are_listed() {
        on_every_engine!(Durability::Immediate, |store, outbox, clock| {
            assert!(outbox.consumers().unwrap().is_empty());
            outbox.register("orders", "mailer", Start::Beginning).unwrap();
            outbox.register("orders", "audit", Start::Beginning).unwrap();
            outbox.register("refunds", "mailer", Start::End).unwrap();
            assert_eq!(
                outbox.consumers().unwrap(),
                [
                    ("orders".to_owned(), "audit".to_owned()),
                    ("orders".to_owned(), "mailer".to_owned()),
                    ("refunds".to_owned(), "mailer".to_owned()),
                ]
            );
            for id in 1..=3 {
                place(&outbox, id, Some(&[u8::try_from(id).unwrap()]));
            }
            let lease = outbox.acquire("orders", "mailer", "w1").unwrap();
            let d = outbox.poll(&lease, &topic(), 10).unwrap();
            assert_eq!(orders(&d), [1, 2, 3]);
            ack_all(&outbox, &lease, &d[..1]);
            // Entry 2 fails three times (the test config's maximum): a
            // dead letter; entry 3 stays unfinished.
            for _ in 0..3 {
                outbox.fail(&lease, d[1].position, "no").unwrap();
                clock.advance(1_000);
            }
            let lease = outbox.renew(&lease).unwrap();
            let status = outbox.status("orders", "mailer").unwrap();
            assert_eq!((status.topic.as_str(), status.consumer.as_str()), ("orders", "mailer"));
            // The checkpoint passed 1 and the dead letter 2, not 3.
            assert_eq!(status.checkpoint, d[1].position);
            assert_eq!(status.lag.entries, 1);
            assert_eq!(status.lag.oldest_age_ms, 3_000);
            assert_eq!(status.dead_letters, 1);
            let held = status.lease.expect("a live lease");
            assert_eq!(
                (held.holder.as_str(), held.token, held.until_ms),
                ("w1", lease.token(), clock.now_ms() + 5_000)
            );
            // The other consumer of the topic has read nothing.
            let audit = outbox.status("orders", "audit").unwrap();
            assert_eq!((audit.lag.entries, audit.dead_letters), (3, 0));
            assert_eq!(audit.lease, None);
            // A lease past its expiry is not reported.
            clock.advance(5_000);
            assert_eq!(outbox.status("orders", "mailer").unwrap().lease, None);
            assert!(matches!(
                outbox.status("orders", "nobody"),
                Err(OutboxError::UnknownConsumer { .. })
            ));
        });
    }
}

engine_tests! {
    /// Every topic holding entries is listed, consumed or not, with its
    /// count and first and last positions (the commits' versions, read
    /// from the engine).
    fn topics_with_entries_are_listed_whether_consumed_or_not() {
        on_every_engine!(Durability::Immediate, |store, outbox, _clock| {
            assert!(outbox.topics().unwrap().is_empty());
            let audit = Topic::<Event>::new("audit").unwrap();
            let a = Topic::<Event>::new("a").unwrap();
            let mut versions = Vec::new();
            for id in 1..=3 {
                place(&outbox, id, None);
                versions.push(store.engine().last_version());
            }
            // Two entries of "audit" in one commit (orders 0 and 1), one
            // of "a", none of them consumed.
            store
                .transact(|tx| {
                    outbox.push(tx, &audit, &event(10))?;
                    outbox.push(tx, &audit, &event(11))?;
                    outbox.push(tx, &a, &event(12))
                })
                .unwrap();
            let both = store.engine().last_version();
            outbox.register("orders", "mailer", Start::Beginning).unwrap();
            let at = |version, order| Position { version, order };
            let listed: Vec<(String, u64, Position, Position)> = outbox
                .topics()
                .unwrap()
                .into_iter()
                .map(|t| (t.topic, t.entries, t.first, t.last))
                .collect();
            // In the order the commit stamped them: audit's two, then a's.
            assert_eq!(
                listed,
                [
                    ("a".to_owned(), 1, at(both, 2), at(both, 2)),
                    ("audit".to_owned(), 2, at(both, 0), at(both, 1)),
                    ("orders".to_owned(), 3, at(versions[0], 0), at(versions[2], 0)),
                ]
            );
        });
    }
}

engine_tests! {
    /// A consumer with more rows than one commit may hold (40 finished
    /// marks, a batch limit of 16 entries) is removed in several commits,
    /// each within the limit; its lease, ended at this very millisecond,
    /// no longer holds it.
    fn unregistering_many_rows_takes_several_commits_within_the_limit() {
        on_every_engine!(Durability::Immediate, |store, outbox, clock| {
            for id in 1..=41 {
                place(&outbox, id, None);
            }
            outbox.register("orders", "slow", Start::Beginning).unwrap();
            let lease = outbox.acquire("orders", "slow", "w").unwrap();
            let mut got = Vec::new();
            while got.len() < 41 {
                let after = got.last().map_or(Position::START, |d: &Delivery<Event>| d.position);
                got.extend(outbox.poll_after(&lease, &topic(), after, 41).unwrap());
            }
            // Every entry but the first finished: 40 marks beyond the
            // checkpoint.
            ack_all(&outbox, &lease, &got[1..]);
            clock.advance(5_000);
            assert_eq!(clock.now_ms(), lease.expires_ms());
            let before = store.engine().last_version();
            assert!(outbox.unregister("orders", "slow").unwrap());
            let commits = store.engine().last_version() - before;
            // 16 entries a commit, three of them kept for the checkpoint,
            // the lease and the catalog entry: 13 marks a commit, so 40
            // marks take three full commits and a last one with the rest.
            assert_eq!(commits, 4);
            assert!(matches!(
                outbox.checkpoint("orders", "slow"),
                Err(OutboxError::UnknownConsumer { .. })
            ));
            outbox.register("orders", "slow", Start::Beginning).unwrap();
            let again = outbox.acquire("orders", "slow", "w").unwrap();
            assert_eq!(outbox.poll(&again, &topic(), 50).unwrap().len(), 41);
        });
    }
}

/// A topic longer than one counting page (4,096 entries) is counted whole,
/// and the topic after it is still found; the outbox and a topic describe
/// themselves.
#[test]
fn a_topic_longer_than_a_page_is_counted_whole() {
    let (store, clock, _dir) = crate::mem(crate::options(Durability::Buffered));
    let outbox = crate::outbox(&store, &clock);
    let big = Topic::<Event>::new("big").unwrap();
    let after = Topic::<Event>::new("z").unwrap();
    let mut first = None;
    for chunk in 0..410u64 {
        store
            .transact(|tx| {
                for id in chunk * 10..chunk * 10 + 10 {
                    outbox.push(tx, &big, &event(id))?;
                }
                Ok::<_, OutboxError>(())
            })
            .unwrap();
        first.get_or_insert(store.engine().last_version());
    }
    let last = store.engine().last_version();
    store
        .transact(|tx| outbox.push(tx, &after, &event(1)))
        .unwrap();
    let at = |version, order| Position { version, order };
    let listed: Vec<(String, u64, Position, Position)> = outbox
        .topics()
        .unwrap()
        .into_iter()
        .map(|t| (t.topic, t.entries, t.first, t.last))
        .collect();
    assert_eq!(
        listed,
        [
            ("big".to_owned(), 4_100, at(first.unwrap(), 0), at(last, 9)),
            ("z".to_owned(), 1, at(last + 1, 0), at(last + 1, 0)),
        ]
    );
    assert_eq!(format!("{big:?}"), r#"Topic { name: "big" }"#);
    let shown = format!("{outbox:?}");
    assert!(
        shown.starts_with("Outbox { config: OutboxConfig {"),
        "{shown}"
    );
    assert!(shown.contains("max_attempts: 3"), "{shown}");
}
