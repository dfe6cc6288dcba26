//! The orders walk-through, checked against totals and hits computed here
//! from the same inputs.

use std::collections::BTreeMap;

use strata_examples::orders::{lines_of, run};

/// A directory removed when dropped.
struct Dir(std::path::PathBuf);

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn the_orders_service_counts_every_order_once_and_finds_its_notes() {
    let dir = Dir(std::env::temp_dir().join(format!("strata-orders-test-{}", std::process::id())));
    let _ = std::fs::remove_dir_all(&dir.0);
    let (customers, orders) = (3u64, 30u64);
    let report = run(&dir.0, customers, orders).unwrap();
    assert_eq!(report.placed, orders);
    assert_eq!(report.refused, 1, "the order over the quota");
    assert_eq!(report.handled, orders, "one handled entry per order");
    // Totals from the inputs: quantity times price, summed per customer.
    let mut expected: BTreeMap<u64, i64> = BTreeMap::new();
    let mut gifts = 0;
    for n in 0..orders {
        let (note, lines) = lines_of(n);
        let cents: u64 = lines
            .iter()
            .map(|l| u64::from(l.quantity) * l.price_cents)
            .sum();
        *expected.entry(n % customers).or_default() += i64::try_from(cents).unwrap();
        gifts += usize::from(note.contains("gift"));
    }
    assert_eq!(report.totals, expected);
    assert_eq!(report.gift_hits, gifts);
    assert_eq!(gifts, 10);

    // Run again on the same files: new orders numbered after the old,
    // totals grown by exactly their sums.
    let again = run(&dir.0, customers, 6).unwrap();
    assert_eq!(again.handled, 6);
    for n in orders..orders + 6 {
        let (_, lines) = lines_of(n);
        let cents: u64 = lines
            .iter()
            .map(|l| u64::from(l.quantity) * l.price_cents)
            .sum();
        *expected.entry(n % customers).or_default() += i64::try_from(cents).unwrap();
    }
    assert_eq!(again.totals, expected);
}
