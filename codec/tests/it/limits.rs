//! Limits: presets, the size rule, and every boundary.

use strata_codec::{Limit, LimitExceeded, Limits, RowSize, stored_size};

fn rows(n: usize, key: usize, value: usize) -> Vec<RowSize> {
    vec![RowSize { key, value }; n]
}

#[test]
fn presets_are_the_documented_numbers() {
    let a = Limits::ACTOR_KV;
    assert_eq!(
        (
            a.max_key_bytes,
            a.max_value_bytes,
            a.max_batch_entries,
            a.max_batch_bytes,
            a.quota_bytes
        ),
        (2_048, 131_072, 128, 999_424, 10 * 1024 * 1024 * 1024)
    );
    assert_eq!(a.max_batch_bytes, 976 * 1024);
    assert_eq!(a.with_quota(1 << 30).quota_bytes, 1 << 30);
    let f = Limits::FOUNDATIONDB;
    assert_eq!(
        (f.max_key_bytes, f.max_value_bytes, f.max_batch_bytes),
        (10_000, 100_000, 10_000_000)
    );
    assert_eq!(f.max_batch_entries, usize::MAX);
    let p = Limits::POSTGRES;
    assert_eq!(
        (p.max_key_bytes, p.max_value_bytes, p.max_batch_bytes),
        (16_384, 268_435_456, 1_073_741_824)
    );
    assert!(p.check_key(&vec![0; 16_384]).is_ok() && p.check_key(&vec![0; 16_385]).is_err());
    assert!(
        Limits::UNBOUNDED
            .check_batch(rows(10_000, 1 << 20, 1 << 20))
            .is_ok()
    );
}

#[test]
fn the_size_rule_counts_key_and_value_bytes() {
    assert_eq!(stored_size(3, 10), 13);
    assert_eq!(RowSize::put(b"abc", &[0; 10]).size(), 13);
    assert_eq!(RowSize::delete(b"abc").size(), 3);
    let total = Limits::UNBOUNDED
        .check_batch([RowSize::put(b"ab", b"c"), RowSize::delete(b"d")])
        .unwrap();
    assert_eq!((total.entries, total.bytes), (2, 4));
}

#[test]
fn key_and_value_limits_at_minus_one_zero_and_plus_one() {
    let l = Limits::ACTOR_KV;
    assert!(l.check_key(&[0; 2_047]).is_ok());
    assert!(l.check_key(&[0; 2_048]).is_ok());
    assert_eq!(
        l.check_key(&[0; 2_049]),
        Err(LimitExceeded {
            limit: Limit::KeyBytes,
            size: 2_049,
            max: 2_048
        })
    );
    assert!(l.check_value(&vec![0; 131_071]).is_ok());
    assert!(l.check_value(&vec![0; 131_072]).is_ok());
    let err = l.check_value(&vec![0; 131_073]).unwrap_err();
    assert_eq!(
        (err.limit, err.size, err.max),
        (Limit::ValueBytes, 131_073, 131_072)
    );
    assert_eq!(
        err.to_string(),
        "value size (bytes) limit exceeded: 131073 > 131072"
    );
}

#[test]
fn batch_entries_127_128_129_and_bytes_at_the_limit() {
    let l = Limits::ACTOR_KV;
    assert!(l.check_batch(rows(127, 10, 10)).is_ok());
    assert!(l.check_batch(rows(128, 10, 10)).is_ok());
    assert_eq!(
        l.check_batch(rows(129, 10, 10)),
        Err(LimitExceeded {
            limit: Limit::BatchEntries,
            size: 129,
            max: 128
        })
    );
    // 8 rows of 124,928 bytes each: exactly 999,424.
    let at = rows(8, 1_024, 123_904);
    assert_eq!(l.check_batch(at.clone()).unwrap().bytes, 999_424);
    let mut over = at;
    over[0].value += 1;
    assert_eq!(
        l.check_batch(over),
        Err(LimitExceeded {
            limit: Limit::BatchBytes,
            size: 999_425,
            max: 999_424
        })
    );
    // A row over the key limit is named before the batch totals.
    let err = l
        .check_batch([RowSize {
            key: 4_000,
            value: 1,
        }])
        .unwrap_err();
    assert_eq!(err.limit, Limit::KeyBytes);
}

#[test]
fn batches_are_planned_with_the_same_rule() {
    let l = Limits::ACTOR_KV;
    let groups = l.plan_batches(&rows(300, 10, 10)).unwrap();
    assert_eq!(groups, [0..128, 128..256, 256..300]);
    // Byte-bound: 100,000-byte rows fit 9 to a batch (999,424 / 100,010).
    let groups = l.plan_batches(&rows(20, 10, 99_990)).unwrap();
    assert_eq!(groups, [0..9, 9..18, 18..20]);
    for g in &groups {
        assert!(l.check_batch(rows(g.len(), 10, 99_990)).is_ok());
    }
    assert_eq!(
        l.plan_batches(&[]).unwrap(),
        Vec::<std::ops::Range<usize>>::new()
    );
    let err = l
        .plan_batches(&[RowSize {
            key: 1,
            value: 200_000,
        }])
        .unwrap_err();
    assert_eq!(err.limit, Limit::ValueBytes);
}

#[test]
fn quota_charges_growth_and_lets_shrinking_writes_pass() {
    let l = Limits::ACTOR_KV.with_quota(1_000);
    assert!(l.check_quota(990, 10).is_ok());
    assert_eq!(
        l.check_quota(990, 11),
        Err(LimitExceeded {
            limit: Limit::Quota,
            size: 1_001,
            max: 1_000
        })
    );
    assert!(
        l.check_quota(1_000, 0).is_ok(),
        "an overwrite in place at the limit"
    );
    assert!(
        l.check_quota(1_200, -50).is_ok(),
        "a shrinking write over quota"
    );
}
