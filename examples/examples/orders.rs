//! An orders service on redb: orders with their lines, a per-customer
//! quota, carts that expire, an `orders` outbox topic, a worker keeping
//! per-customer totals exactly once, a search index over the notes (see
//! `strata_examples::orders`).
//!
//! `cargo run -p strata-examples --example orders [DIR]` (a temporary
//! directory when none is given; it is kept, so the tool can read it).

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = std::env::args().nth(1).map_or_else(
        || std::env::temp_dir().join(format!("strata-orders-{}", std::process::id())),
        std::path::PathBuf::from,
    );
    let report = strata_examples::orders::run(&dir, 3, 30)?;
    println!(
        "placed {} orders, refused {} over the quota; the worker handled {}",
        report.placed, report.refused, report.handled
    );
    for (customer, cents) in &report.totals {
        println!("customer {customer}: total {cents} cents");
    }
    println!("orders whose note says \"gift\": {}", report.gift_hits);
    println!(
        "now try: strata verify {0}; strata outbox {0} list; strata search {0} query orders gift",
        report.path.display()
    );
    Ok(())
}
