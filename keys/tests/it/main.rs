//! Integration tests of `strata-keys`, one binary for the crate.

// Pedantic style lints that make test tables and vectors harder to read.
#![allow(
    clippy::many_single_char_names,
    clippy::type_complexity,
    clippy::single_match_else,
    clippy::too_many_lines,
    clippy::zero_sized_map_values,
    clippy::struct_field_names,
    clippy::needless_pass_by_value
)]

mod actor_kv;
mod errors;
mod hygiene;
mod nokv;
mod props;
mod seeds_text;
mod segments;
mod subspace;
mod tuple_vectors;
mod ui;
mod ulid;
mod universaldb;

/// Hex of bytes, for readable assertion failures.
pub fn hex(bytes: &[u8]) -> String {
    bytes
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Parses `"15 01 ff"` into bytes.
pub fn unhex(text: &str) -> Vec<u8> {
    text.split_whitespace()
        .map(|h| u8::from_str_radix(h, 16).expect("hex byte"))
        .collect()
}

#[path = "../../../test-support/proptest_cases.rs"]
mod proptest_cases;
