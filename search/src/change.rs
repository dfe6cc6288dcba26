//! The outbox entry that feeds an index: one change of one indexed row,
//! carrying what the indexer needs so that it never reads the live store
//! (which may be ahead of the entry's commit).

use strata_codec::{Codec, DecodeError, EncodeError, Value};

const LAYOUT: &str = "search change";

/// A put or a delete of one row of an indexed key type, as its commit
/// wrote it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    /// The row's key, as the store packs it.
    pub key: Vec<u8>,
    /// The value's schema version and body (its codec's bytes), or `None`
    /// for a delete.
    pub value: Option<(u16, Vec<u8>)>,
    /// A put of a row that held no value before its commit
    /// ([`IndexSpec::insert`](crate::IndexSpec::insert)): the index has no
    /// document for the key, so the indexer adds one without deleting
    /// first. Always `false` for a delete.
    pub fresh: bool,
}

const DELETE: u8 = 0;
const PUT: u8 = 1;
const INSERT: u8 = 2;

impl Value for Change {
    const CODEC: Codec = Codec::Raw;
    const VERSION: u16 = 1;

    /// `[kind][key length, u64 BE][key]` then, for a put or an insert,
    /// `[version, u16 BE][body]`. The kind is 0 for a delete, 1 for a put,
    /// 2 for an insert (a put with `fresh`).
    fn encode_body(&self, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        let len = u64::try_from(self.key.len()).unwrap_or(u64::MAX);
        out.push(match (&self.value, self.fresh) {
            (None, _) => DELETE,
            (Some(_), false) => PUT,
            (Some(_), true) => INSERT,
        });
        out.extend_from_slice(&len.to_be_bytes());
        out.extend_from_slice(&self.key);
        if let Some((version, body)) = &self.value {
            out.extend_from_slice(&version.to_be_bytes());
            out.extend_from_slice(body);
        }
        Ok(())
    }

    fn body_size_hint(&self) -> Option<usize> {
        let value = self.value.as_ref().map_or(0, |(_, body)| 2 + body.len());
        Some(1 + 8 + self.key.len() + value)
    }

    fn decode_body(version: u16, body: &[u8]) -> Result<Self, DecodeError> {
        let bad = |why| DecodeError::Malformed {
            layout: LAYOUT,
            why,
        };
        if version != 1 {
            return Err(DecodeError::NoMigration {
                found: version,
                current: 1,
            });
        }
        let (&kind, rest) = body.split_first().ok_or_else(|| bad("empty"))?;
        let (len, rest) = rest
            .split_first_chunk::<8>()
            .ok_or_else(|| bad("no key length"))?;
        let len = usize::try_from(u64::from_be_bytes(*len)).map_err(|_| bad("key length"))?;
        if rest.len() < len {
            return Err(bad("key cut short"));
        }
        let (key, rest) = rest.split_at(len);
        let value = match kind {
            PUT | INSERT => {
                let (v, body) = rest
                    .split_first_chunk::<2>()
                    .ok_or_else(|| bad("no value version"))?;
                Some((u16::from_be_bytes(*v), body.to_vec()))
            }
            DELETE if rest.is_empty() => None,
            DELETE => return Err(bad("bytes after a delete")),
            _ => return Err(bad("unknown kind")),
        };
        Ok(Self {
            key: key.to_vec(),
            value,
            fresh: kind == INSERT,
        })
    }
}

/// The XXH3-64 hash (seed 0) of a value's body: stored with each document
/// (field `_xxh3`) so a search can tell whether the row it was made from
/// has changed since. Indexes made before 2026-11-27 stored FNV-1a in
/// `_hash`: their schema differs, so they open as
/// [`SearchError::MappingChanged`](crate::SearchError::MappingChanged) and
/// are rebuilt.
pub(crate) fn body_hash(body: &[u8]) -> u64 {
    xxhash_rust::xxh3::xxh3_64(body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_body_hash_is_xxh3_64() {
        // The empty input's hash is the published XXH3-64 vector; the rest
        // were computed by the reference C library (the Python `xxhash`
        // binding), over bytes (7i + 3) mod 256, at the lengths where
        // XXH3 changes its code path.
        let bytes = |n: usize| -> Vec<u8> {
            (0..n)
                .map(|i| u8::try_from((i * 7 + 3) % 256).unwrap())
                .collect()
        };
        for (n, expected) in [
            (0, 0x2d06_8005_38d3_94c2_u64),
            (1, 0x13e6_08bc_156d_efed),
            (3, 0xa908_8dda_485b_481c),
            (4, 0x6d92_53b1_6c8b_1ed3),
            (8, 0x6053_9db6_3047_1163),
            (9, 0xfeff_6683_61d7_23a8),
            (16, 0xb8c8_59b0_f030_b585),
            (17, 0x714a_0440_8e79_b80f),
            (128, 0x6742_5a03_6502_61bf),
            (129, 0xc664_bf33_11c6_abc4),
            (240, 0x6455_6dc6_b462_a6cf),
            (241, 0x8bea_dd3a_8874_fe17),
            (1000, 0x6c4f_14bd_97bd_9e82),
        ] {
            assert_eq!(body_hash(&bytes(n)), expected, "{n} bytes");
        }
        assert_eq!(body_hash(b"foobar"), 0xd78f_da63_144c_5c84);
    }

    #[test]
    fn changes_round_trip_and_bad_bytes_are_refused() {
        let put = Change {
            key: b"k\x00".to_vec(),
            value: Some((3, b"body".to_vec())),
            fresh: false,
        };
        let insert = Change {
            fresh: true,
            ..put.clone()
        };
        let delete = Change {
            key: b"k".to_vec(),
            value: None,
            fresh: false,
        };
        for c in [&put, &insert, &delete] {
            let mut out = Vec::new();
            c.encode_body(&mut out).unwrap();
            assert_eq!(&Change::decode_body(1, &out).unwrap(), c);
            // Every strict prefix of a put (and of a delete but the empty
            // key's) fails; none panics.
            for cut in 0..out.len() {
                if let Ok(d) = Change::decode_body(1, &out[..cut]) {
                    assert_ne!(&d, c, "a cut encoding read back as the change");
                }
            }
        }
        // The size hints: kind, length, key, then version and body.
        assert_eq!(put.body_size_hint(), Some(1 + 8 + 2 + 2 + 4));
        assert_eq!(insert.body_size_hint(), Some(17));
        assert_eq!(delete.body_size_hint(), Some(1 + 8 + 1));
        let mut out = Vec::new();
        put.encode_body(&mut out).unwrap();
        assert_eq!(&out[..11], &[PUT, 0, 0, 0, 0, 0, 0, 0, 2, b'k', 0]);
        assert_eq!(&out[11..], b"\x00\x03body");
        let mut fresh = Vec::new();
        insert.encode_body(&mut fresh).unwrap();
        assert_eq!(fresh[0], 2);
        assert_eq!(fresh[1..], out[1..]);
        // A delete is never fresh, whatever the field says.
        let mut gone = Vec::new();
        Change {
            fresh: true,
            ..delete.clone()
        }
        .encode_body(&mut gone)
        .unwrap();
        assert_eq!(gone, [DELETE, 0, 0, 0, 0, 0, 0, 0, 1, b'k']);
        assert!(!Change::decode_body(1, &gone).unwrap().fresh);
        assert!(Change::decode_body(2, &out).is_err());
        out[0] = 7;
        assert!(matches!(
            Change::decode_body(1, &out),
            Err(DecodeError::Malformed {
                why: "unknown kind",
                ..
            })
        ));
        let why = |r: Result<Change, DecodeError>| match r {
            Err(DecodeError::Malformed { why, .. }) => why,
            other => panic!("expected a malformed change, got {other:?}"),
        };
        assert_eq!(
            why(Change::decode_body(
                1,
                &[DELETE, 0, 0, 0, 0, 0, 0, 0, 1, b'k', 9]
            )),
            "bytes after a delete"
        );
        assert!(
            Change::decode_body(1, &[DELETE, 0xFF, 0xFF, 0xFF, 0xFF, 0, 0, 0, 1, b'k']).is_err()
        );
    }
}
