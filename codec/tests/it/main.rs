//! Integration tests of `strata-codec`, one binary for the crate.

#![allow(
    clippy::too_many_lines,
    clippy::needless_pass_by_value,
    clippy::type_complexity
)]

mod chunk;
mod edges;
mod envelope;
mod limits;
mod props;
mod vectors;

/// Hex of bytes, for readable assertion failures.
pub fn hex(bytes: &[u8]) -> String {
    bytes
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Parses `"e1 00 ff"` into bytes.
pub fn unhex(text: &str) -> Vec<u8> {
    text.split_whitespace()
        .map(|h| u8::from_str_radix(h, 16).expect("hex byte"))
        .collect()
}

/// Deterministic filler bytes (splitmix64), so large values need no
/// generator in the strategy.
pub fn filler(len: usize, seed: u64) -> Vec<u8> {
    let mut state = seed;
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        out.extend_from_slice(&(z ^ (z >> 31)).to_le_bytes());
    }
    out.truncate(len);
    out
}

/// A raw-codec envelope (no checksum, 5-byte header) exactly `len` bytes
/// long, `len >= 5`, with filler content.
pub fn envelope_of_len(len: usize, seed: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(len);
    let options = strata_codec::EncodeOptions {
        checksum: false,
        expires_at: None,
    };
    strata_codec::encode(&filler(len - 5, seed), b"", options, &mut out).expect("raw encodes");
    assert_eq!(out.len(), len);
    out
}

#[path = "../../../test-support/proptest_cases.rs"]
mod proptest_cases;
