//! Integration tests of `strata-keys`, one binary for the crate.

mod actor_kv;
mod errors;
mod props;
mod seeds_text;
mod subspace;
mod tuple_vectors;
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
