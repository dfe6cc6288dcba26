//! Keys as people read them: FoundationDB tuples in tuple notation
//! (`("doc", 7, b"\x00\xff")`), text keys in quotes, other bytes escaped
//! (`b"\x00\x01"`). Used by error messages and tools alike, so a key reads
//! the same everywhere.

use std::fmt::Write;

use crate::tuple::{self, Element};

/// How a key reads: in tuple notation when it is a tuple that packs back
/// to the same bytes (nothing hidden), in quotes when it is printable
/// UTF-8, otherwise as escaped bytes.
///
/// ```
/// use strata_keys::{show::show_key, tuple};
///
/// assert_eq!(show_key(&tuple::pack(&("doc", 7))), r#"("doc", 7)"#);
/// assert_eq!(show_key(b"plain"), r#""plain""#);
/// assert_eq!(show_key(&[0xff, 0x00]), r#"b"\xff\x00""#);
/// ```
#[must_use]
pub fn show_key(key: &[u8]) -> String {
    if let Some(t) = as_tuple(key) {
        return t;
    }
    if !key.is_empty()
        && let Ok(text) = std::str::from_utf8(key)
        && text.chars().all(|c| !c.is_control())
    {
        return format!("{text:?}");
    }
    escaped(key)
}

/// What [`show_key`] shows the key as: `tuple`, `text` or `bytes`.
#[must_use]
pub fn key_kind(key: &[u8]) -> &'static str {
    if as_tuple(key).is_some() {
        "tuple"
    } else if show_key(key).starts_with('"') {
        "text"
    } else {
        "bytes"
    }
}

/// The key in tuple notation, when it is a tuple that packs back to the
/// same bytes (so nothing is hidden).
fn as_tuple(key: &[u8]) -> Option<String> {
    if key.is_empty() {
        return None;
    }
    // Bounded: a key of thousands of nested tuples would overflow the
    // stack unpacking; it is shown as bytes.
    let elements = tuple::unpack_bounded::<Vec<Element<'_>>>(key).ok()?;
    if tuple::pack(&elements) != key {
        return None;
    }
    let mut out = String::new();
    write_tuple(&elements, &mut out);
    Some(out)
}

fn write_tuple(elements: &[Element<'_>], out: &mut String) {
    out.push('(');
    for (i, e) in elements.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        write_element(e, out);
    }
    if elements.len() == 1 {
        out.push(',');
    }
    out.push(')');
}

fn write_element(e: &Element<'_>, out: &mut String) {
    match e {
        Element::Nil => out.push_str("nil"),
        Element::Bytes(b) => out.push_str(&escaped(&b.0)),
        Element::String(s) => {
            let _ = write!(out, "{s:?}");
        }
        Element::Tuple(t) => write_tuple(t, out),
        Element::Int(i) => {
            let _ = write!(out, "{i}");
        }
        Element::BigInt(i) => {
            let _ = write!(out, "{i}");
        }
        Element::Float(f) => {
            let _ = write!(out, "{f:?}f32");
        }
        Element::Double(d) => {
            let _ = write!(out, "{d:?}");
        }
        Element::Bool(b) => {
            let _ = write!(out, "{b}");
        }
        Element::Uuid(u) => {
            let _ = write!(out, "uuid({u})");
        }
        Element::Versionstamp(v) => {
            let _ = write!(
                out,
                "vs({}, {})",
                hex(v.transaction_version()),
                v.user_version()
            );
        }
    }
}

/// `b"..."` with printable ASCII as itself and everything else `\xNN`.
#[must_use]
pub fn escaped(bytes: &[u8]) -> String {
    let mut out = String::from("b\"");
    for &b in bytes {
        match b {
            b'"' => out.push_str("\\\""),
            b'\\' => out.push_str("\\\\"),
            0x20..=0x7e => out.push(char::from(b)),
            _ => {
                let _ = write!(out, "\\x{b:02x}");
            }
        }
    }
    out.push('"');
    out
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}
