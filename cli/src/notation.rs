//! Keys as people read and type them: FoundationDB tuples in tuple
//! notation (`("doc", 7, b"\x00\xff")`), text keys in quotes, other bytes
//! escaped (`b"\x00\x01"`); and the parser of the same notations (plus
//! hex, `0x...`).

use std::borrow::Cow;
use std::fmt::Write;

use strata_keys::tuple::{self, Bytes, Element};

pub use strata_keys::show::{key_kind, show_key as render_key};

/// Lower-case hex.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

/// A key typed on the command line: tuple notation `(...)`, hex `0x...`,
/// escaped bytes `b"..."`, or anything else as its UTF-8 bytes.
///
/// # Errors
/// A message saying where the notation is wrong.
pub fn parse_key(text: &str) -> Result<Vec<u8>, String> {
    let t = text.trim();
    if t.starts_with('(') {
        let mut p = Parser {
            s: t.as_bytes(),
            i: 0,
            depth: 0,
        };
        let elements = p.tuple()?;
        p.skip_ws();
        if p.i != p.s.len() {
            return Err(p.error("text after the tuple"));
        }
        Ok(tuple::pack(&elements))
    } else if let Some(h) = t.strip_prefix("0x") {
        parse_hex(h)
    } else if t.starts_with("b\"") {
        let mut p = Parser {
            s: t.as_bytes(),
            i: 1,
            depth: 0,
        };
        let b = p.quoted(true)?;
        if p.i != p.s.len() {
            return Err(p.error("text after the bytes"));
        }
        Ok(b)
    } else {
        Ok(text.as_bytes().to_vec())
    }
}

fn parse_hex(h: &str) -> Result<Vec<u8>, String> {
    if !h.len().is_multiple_of(2) {
        return Err(format!("hex {h:?} has an odd number of digits"));
    }
    (0..h.len())
        .step_by(2)
        .map(|i| {
            h.get(i..i + 2)
                .and_then(|d| u8::from_str_radix(d, 16).ok())
                .ok_or_else(|| format!("{h:?} is not hex"))
        })
        .collect()
}

struct Parser<'a> {
    s: &'a [u8],
    i: usize,
    /// Tuples open around the position (each a level of recursion).
    depth: usize,
}

/// The deepest tuple notation the parser reads: it recurses once per
/// level, and a line of thousands of `(` would overflow its stack.
const MAX_DEPTH: usize = 64;

impl Parser<'_> {
    fn error(&self, what: &str) -> String {
        format!("{what} at byte {} of the key", self.i)
    }

    fn skip_ws(&mut self) {
        while self.s.get(self.i).is_some_and(u8::is_ascii_whitespace) {
            self.i += 1;
        }
    }

    fn eat(&mut self, c: u8) -> bool {
        self.skip_ws();
        if self.s.get(self.i) == Some(&c) {
            self.i += 1;
            true
        } else {
            false
        }
    }

    fn tuple(&mut self) -> Result<Vec<Element<'static>>, String> {
        if !self.eat(b'(') {
            return Err(self.error("expected '('"));
        }
        let mut out = Vec::new();
        loop {
            if self.eat(b')') {
                return Ok(out);
            }
            out.push(self.element()?);
            if self.eat(b',') {
                continue;
            }
            if self.eat(b')') {
                return Ok(out);
            }
            return Err(self.error("expected ',' or ')'"));
        }
    }

    fn element(&mut self) -> Result<Element<'static>, String> {
        self.skip_ws();
        let rest = &self.s[self.i..];
        if rest.starts_with(b"(") {
            if self.depth >= MAX_DEPTH {
                return Err(self.error(&format!("tuples nested deeper than {MAX_DEPTH}")));
            }
            self.depth += 1;
            let inner = self.tuple();
            self.depth -= 1;
            return Ok(Element::Tuple(inner?));
        }
        if rest.starts_with(b"b\"") {
            self.i += 1;
            return Ok(Element::Bytes(Bytes(Cow::Owned(self.quoted(true)?))));
        }
        if rest.starts_with(b"\"") {
            let b = self.quoted(false)?;
            let s = String::from_utf8(b).map_err(|_| self.error("string is not UTF-8"))?;
            return Ok(Element::String(Cow::Owned(s)));
        }
        let end = rest
            .iter()
            .position(|c| matches!(c, b',' | b')') || c.is_ascii_whitespace())
            .unwrap_or(rest.len());
        let word = std::str::from_utf8(&rest[..end]).map_err(|_| self.error("not UTF-8"))?;
        let element = match word {
            "nil" | "null" => Element::Nil,
            "true" => Element::Bool(true),
            "false" => Element::Bool(false),
            w => {
                if let Ok(i) = w.parse::<i64>() {
                    Element::Int(i)
                } else if let Ok(i) = w.parse::<num_bigint::BigInt>() {
                    Element::BigInt(i)
                } else if let Some(f) = w.strip_suffix("f32").and_then(|f| f.parse::<f32>().ok()) {
                    Element::Float(f)
                } else if let Ok(d) = w.parse::<f64>() {
                    Element::Double(d)
                } else {
                    return Err(self.error(&format!("unknown element {w:?}")));
                }
            }
        };
        self.i += end;
        Ok(element)
    }

    /// A `"..."` literal at `self.i`; `bytes` allows `\xNN` of any value.
    fn quoted(&mut self, bytes: bool) -> Result<Vec<u8>, String> {
        if self.s.get(self.i) != Some(&b'"') {
            return Err(self.error("expected '\"'"));
        }
        self.i += 1;
        let mut out = Vec::new();
        loop {
            let Some(&c) = self.s.get(self.i) else {
                return Err(self.error("unterminated quote"));
            };
            self.i += 1;
            match c {
                b'"' => return Ok(out),
                b'\\' => {
                    let Some(&e) = self.s.get(self.i) else {
                        return Err(self.error("unterminated escape"));
                    };
                    self.i += 1;
                    match e {
                        b'n' => out.push(b'\n'),
                        b't' => out.push(b'\t'),
                        b'r' => out.push(b'\r'),
                        b'0' => out.push(0),
                        b'\\' | b'"' | b'\'' => out.push(e),
                        b'x' => {
                            let h = self
                                .s
                                .get(self.i..self.i + 2)
                                .and_then(|h| std::str::from_utf8(h).ok())
                                .and_then(|h| u8::from_str_radix(h, 16).ok())
                                .ok_or_else(|| self.error("bad \\x escape"))?;
                            if !bytes && h > 0x7f {
                                return Err(self.error("\\x above 7f in a string"));
                            }
                            out.push(h);
                            self.i += 2;
                        }
                        _ => return Err(self.error("unknown escape")),
                    }
                }
                _ => out.push(c),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The bytes of `("doc", 7, b"\x00\xff")` written out by hand from
    /// the tuple layer's type codes: 0x02 string, 0x15 one-byte integer,
    /// 0x01 bytes with 0x00 escaped as 0x00 0xff.
    const DOC7: &[u8] = b"\x02doc\x00\x15\x07\x01\x00\xff\xff\x00";

    #[test]
    fn tuples_render_in_tuple_notation() {
        assert_eq!(render_key(DOC7), r#"("doc", 7, b"\x00\xff")"#);
        assert_eq!(key_kind(DOC7), "tuple");
        assert_eq!(render_key(b"\x02a\x00"), r#"("a",)"#);
        assert_eq!(render_key(b"\x14"), "(0,)");
        assert_eq!(render_key(b"\x13\xfe"), "(-1,)");
    }

    #[test]
    fn text_and_bytes_render_as_such() {
        assert_eq!(render_key(b"users/42"), r#""users/42""#);
        assert_eq!(key_kind(b"users/42"), "text");
        assert_eq!(render_key(b"\xff\x00\""), r#"b"\xff\x00\"""#);
        assert_eq!(key_kind(b"\xff\x00"), "bytes");
    }

    #[test]
    fn every_notation_parses_to_its_bytes() {
        assert_eq!(parse_key(r#"("doc", 7, b"\x00\xff")"#).unwrap(), DOC7);
        assert_eq!(parse_key(r#"( "doc" ,7,b"\x00\xff" , )"#).unwrap(), DOC7);
        assert_eq!(parse_key("0x0a0B").unwrap(), [0x0a, 0x0b]);
        assert_eq!(parse_key(r#"b"a\x00""#).unwrap(), b"a\x00");
        assert_eq!(parse_key("plain").unwrap(), b"plain");
        assert_eq!(parse_key("(nil, true, -1)").unwrap(), b"\x00\x27\x13\xfe");
        assert_eq!(parse_key("((1,),)").unwrap(), b"\x05\x15\x01\x00");
    }

    #[test]
    fn escapes_are_the_bytes_they_name() {
        assert_eq!(
            parse_key(r#"b"\n\t\r\0\\\"\'x""#).unwrap(),
            b"\n\t\r\x00\\\"'x"
        );
        // In a string, `\x` stops at 7f (a string holds UTF-8).
        assert_eq!(parse_key(r#"("\x7f\x41",)"#).unwrap(), b"\x02\x7fA\x00");
        let above = parse_key(r#"("\x80",)"#).unwrap_err();
        assert!(above.contains("above 7f"), "{above}");
        assert_eq!(parse_key(r#"b"\x80""#).unwrap(), [0x80]);
    }

    #[test]
    fn bad_notation_is_an_error_not_a_panic() {
        for bad in [
            "(",
            "(\"a",
            "(1 2)",
            "(x)",
            "0x1",
            "0xzz",
            "b\"\\x",
            "(1))",
            "(\"\\xff\")",
        ] {
            assert!(parse_key(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn rendered_tuples_parse_back() {
        for key in [DOC7, b"\x02a\x00\x15\x01", b"\x05\x15\x01\x00\x02z\x00"] {
            assert_eq!(parse_key(&render_key(key)).unwrap(), key);
        }
    }
}
