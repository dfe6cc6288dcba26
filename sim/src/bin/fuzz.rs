//! `cargo xtask fuzz`: the decoders against mutated and random bytes, on
//! stable Rust.
//!
//! For each decoder, valid encodings of random values are mutated (bit
//! flips, byte changes, truncations, insertions, deletions, splices of
//! another encoding) or replaced by random bytes, and decoded. Two laws:
//! the decoder never panics, and whatever it accepts is an encoding of the
//! value it returns: re-encoding the value gives the same bytes back. Three
//! stated leniencies are counted, not failed: the tuple layer reads
//! non-minimal integers, postcard reads non-minimal varints in an envelope
//! without a checksum (the value must still round-trip; with a checksum it
//! is a failure), and a damaged chunk manifest that is itself a whole inline
//! envelope is returned as that value. Everything comes from a seeded
//! generator: a failure prints the seed and the input.

// A fuzz tool draws bytes from 64-bit words; short names read better in
// its mutation code.
#![allow(
    clippy::cast_possible_truncation,
    clippy::cast_possible_wrap,
    clippy::many_single_char_names
)]

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::process::ExitCode;

use serde::{Deserialize, Serialize};
use strata_codec::{
    ChunkPlanner, EncodeOptions, Previous, TupleChunkLayout, Value, decode_with_header, encode,
    value,
};
use strata_engine::{Rng, SeededRng};
use strata_keys::tuple::Uuid;
use strata_keys::{Key, Subspace, Ulid, raw_key, text_key, tuple_key};
use strata_search::Change;

#[derive(Debug, Clone, PartialEq)]
struct TupleK {
    id: i64,
    name: String,
    blob: Vec<u8>,
    uuid: Uuid,
    path: Vec<String>,
}
tuple_key! {
    TupleK -> () = ([7], 1, {id}, "k", {name}, {blob}, {uuid}, ..{path});
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct RawK {
    tag: u8,
    chunk: u32,
    id: Ulid,
    rest: String,
}
raw_key! {
    RawK -> () = ([9, 1], {tag}, {chunk}, {id}, ..{rest});
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct TextK {
    tenant: String,
    ts: u64,
    id: Ulid,
    note: strata_keys::text::Escaped,
}
text_key! {
    TextK -> () = ("evt:", {tenant}, ":", {ts:013}, ":", {id}, ":", {note});
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Doc {
    title: String,
    n: u64,
    tags: Vec<String>,
}
value!(Doc: postcard, version = 1);

/// One decoder's fuzz run: `iterations` inputs from the generator.
type Target = fn(&mut SeededRng, u64) -> Result<Tally, String>;

/// Counts of one decoder's run.
#[derive(Default)]
struct Tally {
    inputs: u64,
    accepted: u64,
    lenient: u64,
}

fn main() -> ExitCode {
    let mut iterations: u64 = 1_000_000;
    let mut seed: u64 = 1;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let value = args.next().and_then(|v| v.parse().ok());
        match (a.as_str(), value) {
            ("--iterations", Some(n)) => iterations = n,
            ("--seed", Some(s)) => seed = s,
            _ => {
                eprintln!("usage: cargo xtask fuzz [--iterations N] [--seed S]");
                return ExitCode::from(2);
            }
        }
    }
    let mut failed = false;
    let targets: [(&str, Target); 6] = [
        ("tuple key", fuzz_tuple),
        ("raw key", fuzz_raw),
        ("text key", fuzz_text),
        ("envelope", fuzz_envelope),
        ("chunked value", fuzz_chunks),
        ("search change", fuzz_change),
    ];
    for (name, run) in targets {
        let mut rng = SeededRng::new(seed);
        match catch_unwind(AssertUnwindSafe(|| run(&mut rng, iterations))) {
            Ok(Ok(t)) => println!(
                "fuzz {name:<14} {} inputs, {} accepted, {} of them by a stated leniency, 0 failures",
                t.inputs, t.accepted, t.lenient
            ),
            Ok(Err(why)) => {
                failed = true;
                println!("fuzz {name}: FAILED (seed {seed}): {why}");
            }
            Err(_) => {
                failed = true;
                println!("fuzz {name}: PANICKED (seed {seed})");
            }
        }
    }
    if failed {
        println!("fuzz: 0 passed, 1 failed");
        ExitCode::FAILURE
    } else {
        println!("fuzz: {} passed, 0 failed", targets.len());
        ExitCode::SUCCESS
    }
}

fn below(rng: &mut SeededRng, n: usize) -> usize {
    usize::try_from(rng.below(n as u64)).unwrap_or(0)
}

fn bytes(rng: &mut SeededRng, max: usize) -> Vec<u8> {
    let len = below(rng, max + 1);
    (0..len).map(|_| rng.next_u64() as u8).collect()
}

fn text(rng: &mut SeededRng, max: usize) -> String {
    const CHARS: &[u8] = b"abcXYZ09:_-%\x00\xff";
    let len = below(rng, max + 1);
    (0..len)
        .map(|_| char::from(CHARS[below(rng, CHARS.len())]))
        .collect()
}

/// A mutation of `valid` (or random bytes), splicing from `other`.
fn mutate(rng: &mut SeededRng, valid: &[u8], other: &[u8]) -> Vec<u8> {
    let mut b = valid.to_vec();
    let rounds = 1 + below(rng, 3);
    for _ in 0..rounds {
        let at = below(rng, b.len() + 1);
        match rng.below(8) {
            0 if !b.is_empty() => {
                let i = at.min(b.len() - 1);
                b[i] ^= 1 << rng.below(8);
            }
            1 if !b.is_empty() => {
                let i = at.min(b.len() - 1);
                b[i] = rng.next_u64() as u8;
            }
            2 => b.truncate(at),
            3 => b.insert(at, rng.next_u64() as u8),
            4 if at < b.len() => {
                b.remove(at);
            }
            5 => {
                let from = below(rng, other.len() + 1);
                b.truncate(at);
                b.extend_from_slice(&other[from..]);
            }
            6 if !b.is_empty() => {
                let i = at.min(b.len() - 1);
                b[i] = *[0x00, 0xFF, 0x01, 0x7F, 0x80]
                    .get(below(rng, 5))
                    .unwrap_or(&0);
            }
            _ => b = bytes(rng, 64),
        }
    }
    b
}

fn tuple_value(rng: &mut SeededRng) -> TupleK {
    let id = match rng.below(4) {
        0 => 0,
        1 => i64::MIN,
        2 => i64::MAX,
        _ => rng.next_u64() as i64 >> rng.below(64),
    };
    TupleK {
        id,
        name: text(rng, 6),
        blob: bytes(rng, 6),
        uuid: Uuid::from_u128(u128::from(rng.next_u64())),
        path: (0..below(rng, 3)).map(|_| text(rng, 3)).collect(),
    }
}

fn fuzz_tuple(rng: &mut SeededRng, n: u64) -> Result<Tally, String> {
    let mut t = Tally::default();
    for _ in 0..n {
        let (a, b) = (tuple_value(rng).pack(), tuple_value(rng).pack());
        let (a, b) = (a.map_err(|e| e.to_string())?, b.map_err(|e| e.to_string())?);
        let input = mutate(rng, &a, &b);
        t.inputs += 1;
        if let Ok(k) = TupleK::unpack(&input) {
            t.accepted += 1;
            let again = k.pack().map_err(|e| e.to_string())?;
            if again != input {
                // Only a value that round-trips is acceptable.
                if TupleK::unpack(&again).ok().as_ref() != Some(&k) {
                    return Err(format!(
                        "{input:02x?} decoded to {k:?}, which does not round-trip"
                    ));
                }
                t.lenient += 1;
            }
        }
    }
    Ok(t)
}

fn raw_value(rng: &mut SeededRng) -> RawK {
    RawK {
        tag: rng.next_u64() as u8,
        chunk: rng.next_u64() as u32,
        id: Ulid::from_bytes(u128::from(rng.next_u64()).to_be_bytes()),
        rest: text(rng, 8),
    }
}

fn fuzz_raw(rng: &mut SeededRng, n: u64) -> Result<Tally, String> {
    exact(
        rng,
        n,
        |rng| raw_value(rng).pack().map_err(|e| e.to_string()),
        |b| {
            RawK::unpack(b)
                .ok()
                .map(|k| k.pack().map_err(|e| e.to_string()))
        },
    )
}

fn text_value(rng: &mut SeededRng) -> TextK {
    TextK {
        tenant: text(rng, 5).replace(':', ""),
        ts: rng.below(10_000_000_000_000),
        id: Ulid::from_bytes(u128::from(rng.next_u64()).to_be_bytes()),
        note: strata_keys::text::Escaped(text(rng, 6)),
    }
}

fn fuzz_text(rng: &mut SeededRng, n: u64) -> Result<Tally, String> {
    exact(
        rng,
        n,
        |rng| text_value(rng).pack().map_err(|e| e.to_string()),
        |b| {
            TextK::unpack(b)
                .ok()
                .map(|k| k.pack().map_err(|e| e.to_string()))
        },
    )
}

/// The exact law: an accepted input re-encodes to itself.
fn exact(
    rng: &mut SeededRng,
    n: u64,
    valid: impl Fn(&mut SeededRng) -> Result<Vec<u8>, String>,
    decode_again: impl Fn(&[u8]) -> Option<Result<Vec<u8>, String>>,
) -> Result<Tally, String> {
    let mut t = Tally::default();
    for _ in 0..n {
        let (a, b) = (valid(rng)?, valid(rng)?);
        let input = mutate(rng, &a, &b);
        t.inputs += 1;
        if let Some(again) = decode_again(&input) {
            t.accepted += 1;
            let again = again?;
            if again != input {
                return Err(format!(
                    "{input:02x?} was accepted but encodes as {again:02x?}"
                ));
            }
        }
    }
    Ok(t)
}

/// A search index's change entry: a put, an insert (fresh) or a delete.
fn change_value(rng: &mut SeededRng) -> Change {
    let kind = rng.below(3);
    Change {
        key: bytes(rng, 12),
        value: (kind > 0).then(|| (rng.next_u64() as u16, bytes(rng, 16))),
        fresh: kind == 2,
    }
}

/// The change body (`strata-search`): exact, so an accepted input
/// re-encodes to itself; a version other than 1 is refused.
fn fuzz_change(rng: &mut SeededRng, n: u64) -> Result<Tally, String> {
    let encode = |c: &Change| {
        let mut out = Vec::new();
        c.encode_body(&mut out)
            .map(|()| out)
            .map_err(|e| e.to_string())
    };
    let t = exact(
        rng,
        n,
        |rng| encode(&change_value(rng)),
        |b| Change::decode_body(1, b).ok().map(|c| encode(&c)),
    )?;
    let sample = encode(&change_value(rng))?;
    if Change::decode_body(2, &sample).is_ok() {
        return Err("a change body of version 2 was accepted".into());
    }
    Ok(t)
}

fn doc(rng: &mut SeededRng) -> Doc {
    Doc {
        title: text(rng, 8),
        n: rng.next_u64() >> rng.below(64),
        tags: (0..below(rng, 3)).map(|_| text(rng, 4)).collect(),
    }
}

fn fuzz_envelope(rng: &mut SeededRng, n: u64) -> Result<Tally, String> {
    let mut t = Tally::default();
    let key = b"doc/1";
    for _ in 0..n {
        let options = EncodeOptions {
            checksum: rng.chance(0.5),
            expires_at: rng.chance(0.3).then(|| rng.next_u64() >> 20),
        };
        let (mut a, mut b) = (Vec::new(), Vec::new());
        if rng.chance(0.2) {
            // A keyless checksum, as under a versionstamped key.
            strata_codec::encode_keyless(&doc(rng), options.expires_at, &mut a)
                .map_err(|e| e.to_string())?;
        } else {
            encode(&doc(rng), key, options, &mut a).map_err(|e| e.to_string())?;
        }
        encode(&doc(rng), key, EncodeOptions::default(), &mut b).map_err(|e| e.to_string())?;
        let input = mutate(rng, &a, &b);
        t.inputs += 1;
        if let Ok((value, header)) = decode_with_header::<Doc>(key, &input) {
            t.accepted += 1;
            let mut again = Vec::new();
            let same = EncodeOptions {
                checksum: header.checksum.is_some(),
                expires_at: header.expires_at,
            };
            if header.keyless {
                strata_codec::encode_keyless(&value, header.expires_at, &mut again)
                    .map_err(|e| e.to_string())?;
            } else {
                encode(&value, key, same, &mut again).map_err(|e| e.to_string())?;
            }
            if again != input {
                // postcard reads non-minimal varints: without a checksum an
                // envelope may be another encoding of the same value. It
                // must still be that value, and a checksum must rule it out.
                let same_value = decode_with_header::<Doc>(key, &again).ok().map(|(v, _)| v)
                    == Some(value.clone());
                if !same_value || header.checksum.is_some() {
                    return Err(format!(
                        "{input:02x?} was accepted as {value:?} but encodes as {again:02x?}"
                    ));
                }
                t.lenient += 1;
            }
        }
    }
    Ok(t)
}

fn fuzz_chunks(rng: &mut SeededRng, n: u64) -> Result<Tally, String> {
    let mut t = Tally::default();
    let layout =
        TupleChunkLayout::new(Subspace::from_bytes(vec![3]), 1, 2).map_err(|e| e.to_string())?;
    let planner = ChunkPlanner::new(layout, 16)
        .map_err(|e| e.to_string())?
        .always_chunked();
    let key = b"blob";
    for _ in 0..n {
        let value = bytes(rng, 80);
        let mut envelope = Vec::new();
        encode(&value, key, EncodeOptions::default(), &mut envelope).map_err(|e| e.to_string())?;
        let plan = planner
            .plan_write(key, &envelope, Previous::Absent)
            .map_err(|e| e.to_string())?;
        let mut rows: Vec<(Vec<u8>, Vec<u8>)> = plan
            .puts
            .iter()
            .map(|r| (r.key.clone(), r.value.to_vec()))
            .collect();
        let (_, mut meta) = rows.remove(0);
        // Damage one row, the manifest, or the row set.
        t.inputs += 1;
        match rng.below(4) {
            0 => meta = mutate(rng, &meta, &envelope),
            1 if !rows.is_empty() => {
                let i = below(rng, rows.len());
                rows[i].1 = mutate(rng, &rows[i].1, &envelope);
            }
            2 if !rows.is_empty() => {
                let i = below(rng, rows.len());
                rows.remove(i);
            }
            _ if rows.len() > 1 => {
                let (i, j) = (below(rng, rows.len()), below(rng, rows.len()));
                let v = rows[i].1.clone();
                rows[j].1 = v;
            }
            _ => meta = mutate(rng, &meta, &envelope),
        }
        if let Ok(whole) = planner.assemble(key, &meta, rows.iter().map(|(k, v)| (k, v))) {
            t.accepted += 1;
            // Either the value written, or the damaged metadata row is
            // itself a whole inline envelope, returned as it is.
            let inline = whole[..] == meta[..]
                && strata_codec::Header::read(&meta).is_ok_and(|h| !h.chunked);
            let original =
                strata_codec::decode::<Vec<u8>>(key, &whole).ok().as_ref() == Some(&value);
            if inline {
                t.lenient += 1;
            } else if !original {
                return Err(format!(
                    "damaged rows assembled to {:02x?}, not the value written",
                    &whole[..]
                ));
            }
        }
    }
    Ok(t)
}
