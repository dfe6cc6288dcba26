//! Edges that mutation testing found untested: header lengths, codec
//! names, raw versions, row checks, stale-row sizes, the chunk size. Each
//! expectation is written out by hand.

use strata_codec::envelope::{FIXED_HEADER_LEN, MAX_HEADER_LEN, header_len};
use strata_codec::{
    ChunkPlanner, Codec, DecodeError, Limit, Limits, RowSize, Stale, TupleChunkLayout, decode,
};
use strata_keys::{KeyRange, Subspace};

#[test]
fn header_lengths_are_the_documented_ones() {
    assert_eq!(FIXED_HEADER_LEN, 5);
    assert_eq!(MAX_HEADER_LEN, 17);
    assert_eq!(header_len(false, false), 5);
    assert_eq!(header_len(true, false), 13);
    assert_eq!(header_len(false, true), 9);
    assert_eq!(header_len(true, true), 17);
}

#[test]
fn codecs_have_their_names() {
    assert_eq!(Codec::Raw.to_string(), "raw");
    assert_eq!(Codec::Postcard.to_string(), "postcard");
    assert_eq!(Codec::Json.to_string(), "json");
}

#[test]
fn a_raw_value_of_another_version_is_refused() {
    // format, raw codec, version 0 (older than the raw types' 1), no
    // flags, body "x": there is no migration for raw bytes.
    let bytes = [0xE1, 0, 0, 0, 0, b'x'];
    assert!(matches!(
        decode::<Vec<u8>>(b"k", &bytes),
        Err(DecodeError::NoMigration {
            found: 0,
            current: 1
        })
    ));
    assert!(matches!(
        decode::<String>(b"k", &bytes),
        Err(DecodeError::NoMigration {
            found: 0,
            current: 1
        })
    ));
    assert!(decode::<Vec<u8>>(b"k", &[0xE1, 0, 0, 2, 0, b'x']).is_err());
    // Version 1 reads.
    assert_eq!(
        decode::<Vec<u8>>(b"k", &[0xE1, 0, 0, 1, 0, b'x']).unwrap(),
        b"x"
    );
}

#[test]
fn a_row_is_checked_against_both_of_its_limits() {
    let l = Limits {
        max_key_bytes: 4,
        max_value_bytes: 8,
        max_batch_entries: 10,
        max_batch_bytes: 100,
        quota_bytes: 100,
    };
    assert!(l.check_row(RowSize { key: 4, value: 8 }).is_ok());
    let key = l.check_row(RowSize { key: 5, value: 0 }).unwrap_err();
    assert_eq!((key.limit, key.size, key.max), (Limit::KeyBytes, 5, 4));
    let value = l.check_row(RowSize { key: 1, value: 9 }).unwrap_err();
    assert_eq!(
        (value.limit, value.size, value.max),
        (Limit::ValueBytes, 9, 8)
    );
}

#[test]
fn a_stale_row_is_sized_by_its_key_or_both_bounds() {
    assert_eq!(
        Stale::Key(b"abc".to_vec()).row_size(),
        RowSize { key: 3, value: 0 }
    );
    let range = Stale::Range(KeyRange {
        start: b"ab".to_vec(),
        end: Some(b"abcde".to_vec()),
    });
    assert_eq!(range.row_size(), RowSize { key: 7, value: 0 });
    let open = Stale::Range(KeyRange {
        start: b"ab".to_vec(),
        end: None,
    });
    assert_eq!(open.row_size(), RowSize { key: 2, value: 0 });
}

#[test]
fn a_planner_reports_its_chunk_size() {
    let layout = TupleChunkLayout::new(Subspace::from_bytes(vec![3]), 1, 2).unwrap();
    assert_eq!(ChunkPlanner::new(layout, 123).unwrap().chunk_size(), 123);
}
