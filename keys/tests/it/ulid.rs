//! ULIDs: the text form, the recoverable timestamp, and monotonic generation
//! from injected clock readings.

use strata_keys::ulid::{MAX_TIMESTAMP_MS, UlidError};
use strata_keys::{Ulid, UlidGenerator};

#[test]
fn specification_example() {
    // The example id of the ULID specification, decoded independently.
    let id: Ulid = "01ARZ3NDEKTSV4RRFFQ69G5FAV".parse().unwrap();
    assert_eq!(id.to_u128(), 0x0156_3e3a_b5d3_d676_4c61_efb9_9302_bd5b);
    assert_eq!(id.timestamp_ms(), 1_469_922_850_259);
    assert_eq!(id.to_string(), "01ARZ3NDEKTSV4RRFFQ69G5FAV");
    assert_eq!(Ulid::from_bytes(id.to_bytes()), id);
    assert_eq!(format!("{id:?}"), "Ulid(01ARZ3NDEKTSV4RRFFQ69G5FAV)");
    assert_eq!(Ulid::from_u128(0).to_string(), "00000000000000000000000000");
    assert_eq!(
        Ulid::from_u128(u128::MAX).to_string(),
        "7ZZZZZZZZZZZZZZZZZZZZZZZZZ"
    );
}

#[test]
fn parse_errors_are_typed() {
    assert_eq!("01ARZ3".parse::<Ulid>(), Err(UlidError::Length { len: 6 }));
    assert_eq!(
        "01arz3ndektsv4rrffq69g5fav".parse::<Ulid>(),
        Err(UlidError::Character {
            offset: 2,
            byte: b'a'
        })
    );
    for (i, c) in ["I", "L", "O", "U"].iter().enumerate() {
        let text = format!("0{c}ARZ3NDEKTSV4RRFFQ69G5FAV");
        assert_eq!(
            text.parse::<Ulid>(),
            Err(UlidError::Character {
                offset: 1,
                byte: c.as_bytes()[0]
            }),
            "case {i}"
        );
    }
    assert_eq!(
        "80000000000000000000000000".parse::<Ulid>(),
        Err(UlidError::Overflow)
    );
    assert_eq!(
        Ulid::from_parts(MAX_TIMESTAMP_MS + 1, 0),
        Err(UlidError::TimestampTooLarge {
            ms: MAX_TIMESTAMP_MS + 1
        })
    );
}

#[test]
fn generator_is_monotonic_and_keeps_the_timestamp() {
    let mut g = UlidGenerator::new();
    assert_eq!(g.last(), None);
    let mut draws = 0;
    let mut rng = || {
        draws += 1;
        0xFFFF_0000_0000_0000_0000_0000_u128 + draws
    };
    let a = g.generate(1_000, &mut rng).unwrap();
    let b = g.generate(1_000, &mut rng).unwrap();
    let c = g.generate(999, &mut rng).unwrap(); // clock stepped back
    let d = g.generate(1_001, &mut rng).unwrap();
    assert!(a < b && b < c && c < d);
    assert_eq!(
        (
            a.timestamp_ms(),
            b.timestamp_ms(),
            c.timestamp_ms(),
            d.timestamp_ms()
        ),
        (1_000, 1_000, 1_000, 1_001)
    );
    assert_eq!(b.random(), a.random() + 1);
    assert_eq!(c.random(), a.random() + 2);
    // Only the two new milliseconds drew randomness; only 80 bits are kept.
    assert_eq!(draws, 2);
    assert_eq!(a.random(), 1);
    assert_eq!(g.last(), Some(d));
}

#[test]
fn generator_refuses_instead_of_wrapping() {
    let mut g = UlidGenerator::new();
    let top = g.generate(5, || u128::MAX).unwrap();
    assert_eq!(top.random(), (1 << 80) - 1);
    assert_eq!(g.generate(5, || 0), Err(UlidError::RandomExhausted));
    assert_eq!(g.last(), Some(top), "a failed call changes nothing");
    assert_eq!(
        g.generate(MAX_TIMESTAMP_MS + 1, || 0),
        Err(UlidError::TimestampTooLarge {
            ms: MAX_TIMESTAMP_MS + 1
        })
    );
    let next = g.generate(6, || 9).unwrap();
    assert_eq!((next.timestamp_ms(), next.random()), (6, 9));
}
