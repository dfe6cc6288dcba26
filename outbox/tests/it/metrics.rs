//! The outbox's metrics, captured from the `metrics` facade.

use strata_engine::Durability;
use strata_outbox::metrics as m;
use strata_outbox::{Failed, Start};

use crate::{mem, options, outbox, place, topic};

#[path = "../../../test-support/metrics.rs"]
mod metrics_capture;
use metrics_capture::{capture, counter, gauge};

#[test]
fn lag_failures_dead_letters_and_trimming_are_recorded() {
    let (store, clock, _dir) = mem(options(Durability::Immediate));
    let ob = outbox(&store, &clock);
    let ((), rec) = capture(|| {
        ob.register("orders", "mailer", Start::Beginning).unwrap();
        for id in 1..=3 {
            place(&ob, id, None);
        }
        clock.advance(2_500);
        let lag = ob.lag("orders", "mailer").unwrap();
        assert_eq!(lag.entries, 3);
        let lease = ob.acquire("orders", "mailer", "w").unwrap();
        let got = ob.poll(&lease, &topic(), 10).unwrap();
        // Entry 1 fails three times (the limit): twice retried, then dead.
        for attempt in 1..=3 {
            let outcome = ob.fail(&lease, got[0].position, "smtp down").unwrap();
            assert_eq!(outcome == Failed::DeadLettered, attempt == 3);
            clock.advance(1_000);
        }
        let lease = ob.renew(&lease).unwrap();
        for d in &got[1..] {
            store.transact(|tx| ob.ack(tx, &lease, d.position)).unwrap();
        }
        let trimmed = ob.trim("orders", 0, None).unwrap();
        assert_eq!(trimmed.entries, 3);
        ob.lag("orders", "mailer").unwrap();
    });
    let labels = ["topic=orders", "consumer=mailer"];
    assert_eq!(counter(&rec, m::FAILURES, &labels), 2);
    assert_eq!(counter(&rec, m::DEAD_LETTERS, &labels), 1);
    assert_eq!(counter(&rec, m::TRIMMED, &["topic=orders"]), 3);
    // The last measurement: nothing waits.
    assert_eq!(gauge(&rec, m::LAG_ENTRIES, &labels), Some(0.0));
    assert_eq!(gauge(&rec, m::LAG_OLDEST_SECONDS, &labels), Some(0.0));
}

#[test]
fn the_lag_gauges_hold_the_last_measurement() {
    let (store, clock, _dir) = mem(options(Durability::Immediate));
    let ob = outbox(&store, &clock);
    let ((), rec) = capture(|| {
        ob.register("orders", "mailer", Start::Beginning).unwrap();
        place(&ob, 1, None);
        place(&ob, 2, None);
        clock.advance(2_500);
        ob.lag("orders", "mailer").unwrap();
    });
    let labels = ["topic=orders", "consumer=mailer"];
    assert_eq!(gauge(&rec, m::LAG_ENTRIES, &labels), Some(2.0));
    assert_eq!(gauge(&rec, m::LAG_OLDEST_SECONDS, &labels), Some(2.5));
}
