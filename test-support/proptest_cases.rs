//! How many cases a property test runs, for the test crates that use
//! proptest; included with `#[path = ...] mod proptest_cases;`.

use proptest::test_runner::Config;

/// `n` cases, or `PROPTEST_CASES` when set (longer local runs).
pub fn cases(n: u32) -> Config {
    let n = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(n);
    Config::with_cases(n)
}
