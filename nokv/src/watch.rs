//! Watches: each directory's change log, read from a version.

use strata_engine::Engine;
use strata_keys::KeyRange;
use strata_keys::tuple::{self, Versionstamp};
use strata_store::Scan;

use super::keys::WatchKey;

#[allow(clippy::wildcard_imports)]
use super::*;

/// `("h", family, key length, key)`: a history row's key before its
/// inverted stamp.
pub(crate) fn history_prefix(family: &str, key: &[u8]) -> Vec<u8> {
    tuple::pack(&("h", family, key.len() as u64, key))
}

/// The commit version in a complete versionstamp.
pub(crate) fn stamp_version(stamp: &Versionstamp) -> u64 {
    let b = stamp.transaction_version();
    let mut v = [0u8; 8];
    v.copy_from_slice(&b[..8]);
    u64::from_be_bytes(v)
}

impl<E: Engine> Nokv<E> {
    /// The watch events of `scope`, oldest first, with their commit
    /// versions.
    ///
    /// # Errors
    /// A store error.
    pub fn watch_events(
        &self,
        mount: MountId,
        scope: InodeId,
    ) -> Result<Vec<(u64, WatchEvent)>, NokvError> {
        let prefix = tuple::pack(&("nokv", "watch", mount, scope));
        Ok(self
            .store
            .read()?
            .scan::<WatchKey>(&Scan::range_of(KeyRange::tuple_prefix(&prefix)))?
            .map(|r| r.map(|(k, r)| (stamp_version(&k.stamp), r.event)))
            .collect::<Result<Vec<_>, _>>()?)
    }
}
