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

/// The 64-bit FNV-1a hash of a value's body: stored with each document so
/// a search can tell whether the row it was made from has changed since.
pub(crate) fn body_hash(body: &[u8]) -> u64 {
    const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    body.iter()
        .fold(OFFSET, |h, b| (h ^ u64::from(*b)).wrapping_mul(PRIME))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv1a_matches_the_published_vectors() {
        // From the FNV reference test suite.
        assert_eq!(body_hash(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(body_hash(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(body_hash(b"foobar"), 0x8594_4171_f739_67e8);
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
