//! A redb storage backend that can lose power.
//!
//! [`PowerLossBackend`] keeps, apart from what redb has written, the image
//! as of the last `sync_data` and the list of writes and resizes since.
//! [`PowerLossBackend::power_loss`] returns the disk a machine would find
//! after losing power now: the synced image plus a subset of the unsynced
//! operations chosen by a seeded generator, in order, the last byte ranges
//! of a kept write possibly torn off. Drop the engine, open a new one on
//! the returned backend, and check the crash contract.

use std::sync::{Arc, Mutex, PoisonError};

use redb::StorageBackend;
use strata_engine::Rng;

#[derive(Debug, Clone)]
enum Op {
    Write(u64, Vec<u8>),
    SetLen(u64),
}

#[derive(Debug, Default)]
struct Disk {
    /// What reads see.
    current: Vec<u8>,
    /// What survives power loss for sure.
    synced: Vec<u8>,
    /// Operations since the last sync, in order.
    unsynced: Vec<Op>,
    syncs: u64,
}

/// An in-memory redb backend that can lose power. Clones share one disk.
#[derive(Debug, Clone, Default)]
pub struct PowerLossBackend(Arc<Mutex<Disk>>);

fn apply(image: &mut Vec<u8>, op: &Op) {
    match op {
        Op::Write(offset, data) => {
            let start = usize::try_from(*offset).unwrap_or(usize::MAX);
            let end = start.saturating_add(data.len());
            if image.len() < end {
                image.resize(end, 0);
            }
            image[start..end].copy_from_slice(data);
        }
        Op::SetLen(len) => image.resize(usize::try_from(*len).unwrap_or(usize::MAX), 0),
    }
}

impl PowerLossBackend {
    /// An empty disk.
    pub fn new() -> Self {
        Self::default()
    }

    fn disk(&self) -> std::sync::MutexGuard<'_, Disk> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The disk after a power loss now: the synced image plus a seeded
    /// subset of the unsynced operations, in order, any kept write possibly
    /// torn (only a prefix of it reaching the disk).
    #[must_use]
    pub fn power_loss(&self, rng: &mut dyn Rng) -> Self {
        let disk = self.disk();
        let mut image = disk.synced.clone();
        for op in &disk.unsynced {
            if !rng.chance(0.5) {
                continue;
            }
            match op {
                Op::Write(offset, data) if rng.chance(0.2) => {
                    let keep = usize::try_from(rng.below(data.len() as u64 + 1)).unwrap_or(0);
                    apply(&mut image, &Op::Write(*offset, data[..keep].to_vec()));
                }
                _ => apply(&mut image, op),
            }
        }
        Self(Arc::new(Mutex::new(Disk {
            current: image.clone(),
            synced: image,
            unsynced: Vec::new(),
            syncs: 0,
        })))
    }

    /// Operations written since the last sync.
    pub fn unsynced_ops(&self) -> usize {
        self.disk().unsynced.len()
    }

    /// Syncs so far.
    pub fn syncs(&self) -> u64 {
        self.disk().syncs
    }
}

fn out_of_range() -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::UnexpectedEof,
        "read beyond the end of the disk",
    )
}

impl StorageBackend for PowerLossBackend {
    fn len(&self) -> Result<u64, std::io::Error> {
        Ok(self.disk().current.len() as u64)
    }

    fn read(&self, offset: u64, out: &mut [u8]) -> Result<(), std::io::Error> {
        let disk = self.disk();
        let start = usize::try_from(offset).map_err(|_| out_of_range())?;
        let src = disk
            .current
            .get(start..start.saturating_add(out.len()))
            .ok_or_else(out_of_range)?;
        out.copy_from_slice(src);
        Ok(())
    }

    fn set_len(&self, len: u64) -> Result<(), std::io::Error> {
        let mut disk = self.disk();
        let op = Op::SetLen(len);
        apply(&mut disk.current, &op);
        disk.unsynced.push(op);
        Ok(())
    }

    fn sync_data(&self) -> Result<(), std::io::Error> {
        let mut guard = self.disk();
        let disk = &mut *guard;
        disk.synced.clone_from(&disk.current);
        disk.unsynced.clear();
        disk.syncs += 1;
        Ok(())
    }

    fn write(&self, offset: u64, data: &[u8]) -> Result<(), std::io::Error> {
        let mut disk = self.disk();
        let op = Op::Write(offset, data.to_vec());
        apply(&mut disk.current, &op);
        disk.unsynced.push(op);
        Ok(())
    }
}
