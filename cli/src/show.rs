//! Rows decoded for people and for machines: a key in its notation, a
//! value from its envelope (or raw), as JSON objects that the text output
//! is printed from.

use serde_json::{Value as Json, json};
use std::fmt::Write as _;
use strata_codec::{Codec, Header, envelope};
use strata_engine::Engine;
use strata_engine::ErrorChain;
use strata_store::ReadView;

use crate::notation::{hex, key_kind, render_key};

/// The most body bytes shown in hex.
const HEX_SHOWN: usize = 64;

/// A key as JSON: its notation, its kind and its hex.
pub fn key_json(key: &[u8]) -> Json {
    json!({ "key": render_key(key), "kind": key_kind(key), "hex": hex(key) })
}

/// A value without an envelope: bytes, shown as a tuple, text or hex.
pub fn raw_value_json(value: &[u8]) -> Json {
    json!({
        "envelope": false,
        "length": value.len(),
        "shown": if value.is_empty() { "b\"\"".to_owned() } else { render_key(value) },
        "hex": hex(&value[..value.len().min(HEX_SHOWN)]),
    })
}

/// A data row's value: its header, checksum state, chunk count and body.
/// A chunked value is read whole through `view` (one value, its chunk
/// count); `now_ms` tells whether it expired.
pub fn data_value_json<E: Engine>(
    view: &ReadView<'_, E>,
    key: &[u8],
    stored: &[u8],
    now_ms: u64,
) -> Json {
    if let Some(n) = strata_store::counter_row(stored) {
        return json!({ "envelope": false, "counter": n, "length": stored.len() });
    }
    let header = match Header::read(stored) {
        Ok(h) => h,
        Err(e) => {
            let mut raw = raw_value_json(stored);
            raw["error"] = json!(format!("not an envelope: {}", ErrorChain(&e)));
            return raw;
        }
    };
    let checksum = match (header.checksum, envelope::verify(key, stored)) {
        (None, _) => "absent".to_owned(),
        (Some(_), Ok(_)) => "ok".to_owned(),
        (Some(_), Err(e)) => format!("bad: {}", ErrorChain(&e)),
    };
    let mut out = json!({
        "envelope": true,
        "format": format!("{:#04x}", stored.first().copied().unwrap_or(0)),
        "codec": header.codec.to_string(),
        "schema_version": header.version,
        "flags": {
            "expires": header.expires_at.is_some(),
            "checksum": header.checksum.is_some(),
            "chunked": header.chunked,
            "keyless": header.keyless,
        },
        "expires_at_ms": header.expires_at,
        "expires_at": header.expires_at.map(utc),
        "expired": header.is_expired(now_ms),
        "checksum": checksum,
    });
    let whole = if header.chunked {
        match view.raw(key) {
            Ok(Some(raw)) => {
                out["chunks"] = json!(raw.chunks);
                Some(raw.envelope)
            }
            Ok(None) => None,
            Err(e) => {
                out["error"] = json!(format!("chunks: {}", ErrorChain(&e)));
                None
            }
        }
    } else {
        Some(stored.to_vec())
    };
    if let Some(whole) = whole {
        match Header::read(&whole) {
            Ok(h) => {
                let body = &whole[h.len..];
                out["length"] = json!(body.len());
                out["body"] = body_json(header.codec, body);
            }
            Err(e) => out["error"] = json!(format!("reassembled value: {}", ErrorChain(&e))),
        }
    }
    out
}

fn body_json(codec: Codec, body: &[u8]) -> Json {
    match codec {
        Codec::Json => serde_json::from_slice::<Json>(body).map_or_else(
            |e| json!({ "hex": hex(&body[..body.len().min(HEX_SHOWN)]), "error": ErrorChain(&e).to_string() }),
            |v| json!({ "json": v }),
        ),
        Codec::Raw if std::str::from_utf8(body).is_ok_and(|t| !t.contains('\0')) => {
            json!({ "text": String::from_utf8_lossy(body) })
        }
        _ => json!({
            "hex": hex(&body[..body.len().min(HEX_SHOWN)]),
            "truncated": body.len() > HEX_SHOWN,
        }),
    }
}

/// One row as text: `KEY = VALUE` with the value's header on the line.
pub fn row_text(key: &Json, value: &Json) -> String {
    let k = key["key"].as_str().unwrap_or_default();
    if let Some(n) = value["counter"].as_i64() {
        return format!("{k} = counter {n}");
    }
    if value["envelope"] != json!(true) {
        let shown = value["shown"].as_str().unwrap_or_default();
        return format!("{k} = {shown} ({} bytes)", value["length"]);
    }
    let mut head = format!(
        "{} v{}, checksum {}",
        value["codec"].as_str().unwrap_or("?"),
        value["schema_version"],
        value["checksum"].as_str().unwrap_or("?"),
    );
    if let Some(n) = value["chunks"].as_u64() {
        let _ = write!(head, ", {n} chunks");
    }
    if let Some(at) = value["expires_at_ms"].as_u64() {
        let expired = if value["expired"] == json!(true) {
            " (expired)"
        } else {
            ""
        };
        let _ = write!(head, ", expires at {}{expired}", utc(at));
    }
    if let Some(e) = value["error"].as_str() {
        let _ = write!(head, ", ERROR {e}");
    }
    let body = &value["body"];
    let shown = if let Some(j) = body.get("json") {
        serde_json::to_string_pretty(j).unwrap_or_default()
    } else if let Some(t) = body.get("text").and_then(Json::as_str) {
        format!("{t:?}")
    } else if let Some(h) = body.get("hex").and_then(Json::as_str) {
        let more = if body["truncated"] == json!(true) {
            "..."
        } else {
            ""
        };
        format!("0x{h}{more}")
    } else {
        String::new()
    };
    format!("{k} = [{head}] {} bytes: {shown}", value["length"])
}

/// Unix milliseconds as a UTC time, `2026-11-27 11:30:00.123 UTC` (the
/// date from the calendar agent memory's TOC ids use).
pub fn utc(ms: u64) -> String {
    let (year, month, day) = strata_schemas::agent_memory::civil_date(ms);
    let rest = ms / 1_000 % 86_400;
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02}.{:03} UTC",
        rest / 3_600,
        rest % 3_600 / 60,
        rest % 60,
        ms % 1_000
    )
}

#[cfg(test)]
mod tests {
    use super::utc;

    #[test]
    fn utc_times_read_as_the_calendar_does() {
        // Known instants: the epoch, a leap day, the end of a century
        // that is no leap year, a year 2000 leap day.
        assert_eq!(utc(0), "1970-01-01 00:00:00.000 UTC");
        assert_eq!(utc(951_782_400_000), "2000-02-29 00:00:00.000 UTC");
        assert_eq!(utc(1_709_164_800_123), "2024-02-29 00:00:00.123 UTC");
        assert_eq!(utc(1_798_761_599_999), "2026-12-31 23:59:59.999 UTC");
        assert_eq!(utc(4_107_542_400_000), "2100-03-01 00:00:00.000 UTC");
        assert_eq!(utc(1_700_000_000_000), "2023-11-14 22:13:20.000 UTC");
    }
}
