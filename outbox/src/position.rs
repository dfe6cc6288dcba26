//! Positions of entries: a commit version and an order in it.

use std::fmt;

use strata_keys::tuple;

#[allow(clippy::wildcard_imports)]
use crate::*;

/// Where an entry sits: its commit's version and its order in the commit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Position {
    /// The version of the commit that wrote the entry.
    pub version: u64,
    /// The entry's order among the versionstamped rows of that commit.
    pub order: u16,
}

impl Position {
    /// Before every entry.
    pub const START: Self = Self {
        version: 0,
        order: 0,
    };

    pub(crate) fn stamp_bytes(self) -> [u8; 10] {
        let mut b = [0; 10];
        b[..8].copy_from_slice(&self.version.to_be_bytes());
        b[8..].copy_from_slice(&self.order.to_be_bytes());
        b
    }

    pub(crate) fn from_stamp_bytes(b: [u8; 10]) -> Self {
        let mut v = [0; 8];
        v.copy_from_slice(&b[..8]);
        Self {
            version: u64::from_be_bytes(v),
            order: u16::from_be_bytes([b[8], b[9]]),
        }
    }

    /// The last position of commit `version`.
    pub fn end_of(version: u64) -> Self {
        Self {
            version,
            order: u16::MAX,
        }
    }
}

impl fmt::Display for Position {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.version, self.order)
    }
}

pub(crate) fn pack_position(p: Position) -> Vec<u8> {
    tuple::pack(&(p.version, p.order))
}

/// The checkpoint row at `key` holding `bytes`.
pub(crate) fn read_position(key: &[u8], bytes: &[u8]) -> Result<Position, OutboxError> {
    let (version, order) = tuple::unpack::<(u64, u16)>(bytes)
        .map_err(|e| corrupt_by(OutboxRow::Checkpoint, key, e))?;
    Ok(Position { version, order })
}
