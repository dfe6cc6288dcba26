//! The durable mark: the highest version known durable, kept in a file
//! beside the database, so an open that lost commits to damage is refused.

use std::path::Path;

use strata_engine::EngineError;

/// The file in the database directory that holds the highest version
/// known durable at the last open or clean close: the version, then its
/// complement (so damage to the file itself is seen), 8 bytes each.
pub(crate) const DURABLE_MARK: &str = "STRATA-DURABLE";

/// The database opened at an earlier state than one it had reached
/// durably: a damaged or cut write-ahead log or manifest lost commits that
/// RocksDB's recovery could not see were there.
#[derive(Debug, thiserror::Error)]
#[error(
    "the database recovers only to version {found}, but version {durable} was durable when it \
     was last opened or closed: commits were lost to damage (RocksOptions::accept_wal_loss \
     opens it anyway)"
)]
pub struct RolledBack {
    /// The version RocksDB recovered.
    pub found: u64,
    /// The version the mark holds.
    pub durable: u64,
}

/// The durable mark's file is itself damaged.
#[derive(Debug, thiserror::Error)]
#[error("the durable-version mark {DURABLE_MARK} is damaged")]
pub struct MarkDamaged;

pub(crate) fn read_mark(dir: &Path) -> Result<Option<u64>, EngineError> {
    let bytes = match std::fs::read(dir.join(DURABLE_MARK)) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(EngineError::Backend(Box::new(e))),
    };
    let word = |at: usize| {
        bytes
            .get(at..at + 8)
            .and_then(|b| <[u8; 8]>::try_from(b).ok())
            .map(u64::from_be_bytes)
    };
    match (bytes.len(), word(0), word(8)) {
        (16, Some(v), Some(not)) if v == !not => Ok(Some(v)),
        _ => Err(EngineError::Corrupt(Box::new(MarkDamaged))),
    }
}

/// Writes the mark: a new file, synced, renamed over the old one, the
/// directory synced.
pub(crate) fn write_mark(dir: &Path, version: u64) -> std::io::Result<()> {
    use std::io::Write as _;
    let tmp = dir.join(format!("{DURABLE_MARK}.tmp"));
    let mut f = std::fs::File::create(&tmp)?;
    f.write_all(&version.to_be_bytes())?;
    f.write_all(&(!version).to_be_bytes())?;
    f.sync_all()?;
    std::fs::rename(&tmp, dir.join(DURABLE_MARK))?;
    std::fs::File::open(dir)?.sync_all()
}
