//! Generation directories: each rebuild writes a new one and switches to it.

use std::path::{Path, PathBuf};

use strata_codec::Value;
use strata_engine::Engine;
use strata_keys::Key;
use tantivy::Index;
use tantivy::directory::{Directory, MmapDirectory, RamDirectory};

use crate::SearchError;

#[allow(clippy::wildcard_imports)]
use super::*;

pub(crate) const CURRENT: &str = "CURRENT";

pub(crate) fn generation_name(g: u64) -> String {
    format!("gen-{g}")
}

/// The generation `CURRENT` names in `root` (created as generation 1 when
/// the directory is new).
pub(crate) fn current_generation(root: &std::path::Path) -> Result<u64, SearchError> {
    std::fs::create_dir_all(root)?;
    if let Some(g) = peek_generation(root)? {
        return Ok(g);
    }
    switch_generation(root, 1)?;
    Ok(1)
}

/// The generation `CURRENT` names, `None` when there is none yet (nothing
/// is created).
pub(crate) fn peek_generation(root: &std::path::Path) -> Result<Option<u64>, SearchError> {
    match std::fs::read_to_string(root.join(CURRENT)) {
        Ok(text) => text
            .trim()
            .strip_prefix("gen-")
            .and_then(|n| n.parse().ok())
            .map(Some)
            .ok_or_else(|| SearchError::Current { found: text }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// Replaces the index in the shared directory `shared` by the one in
/// `fresh`: the old index's files removed, the new one's copied in. Done
/// in one call, so no indexer of this process sees it half-way.
pub(crate) fn replace_shared(
    shared: &RamDirectory,
    fresh: &RamDirectory,
) -> Result<(), SearchError> {
    if Index::exists(shared).map_err(tantivy::TantivyError::from)? {
        let files = Index::open(shared.clone())?
            .directory()
            .list_managed_files();
        for file in files
            .iter()
            .map(PathBuf::as_path)
            .chain([Path::new("meta.json"), Path::new(".managed.json")])
        {
            match shared.delete(file) {
                Ok(()) | Err(tantivy::directory::error::DeleteError::FileDoesNotExist(_)) => {}
                Err(e) => return Err(SearchError::Io(std::io::Error::other(e))),
            }
        }
    }
    fresh.persist(shared)?;
    Ok(())
}

/// The directory of generation `g`, emptied first when `fresh`.
pub(crate) fn generation_dir(
    root: &std::path::Path,
    g: u64,
    fresh: bool,
) -> Result<Box<dyn Directory>, SearchError> {
    let dir = root.join(generation_name(g));
    if fresh && dir.exists() {
        std::fs::remove_dir_all(&dir)?;
    }
    std::fs::create_dir_all(&dir)?;
    let mmap = MmapDirectory::open(&dir)
        .map_err(|e| SearchError::Tantivy(tantivy::TantivyError::from(e)))?;
    Ok(Box::new(mmap))
}

/// Points `CURRENT` at generation `g`: a new file written and synced, then
/// renamed over the old one, then the directory synced so the rename
/// survives a power cut.
pub(crate) fn switch_generation(root: &std::path::Path, g: u64) -> Result<(), SearchError> {
    use std::io::Write;
    let tmp = root.join("CURRENT.tmp");
    let mut file = std::fs::File::create(&tmp)?;
    file.write_all(generation_name(g).as_bytes())?;
    file.sync_all()?;
    drop(file);
    std::fs::rename(&tmp, root.join(CURRENT))?;
    std::fs::File::open(root)?.sync_all()?;
    Ok(())
}

pub(crate) fn remove_generations_but(root: &std::path::Path, keep: u64) -> Result<(), SearchError> {
    let keep = generation_name(keep);
    for entry in std::fs::read_dir(root)? {
        let entry = entry?;
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name.starts_with("gen-") && name != keep {
            std::fs::remove_dir_all(entry.path())?;
        }
    }
    Ok(())
}

impl<E, K> Indexer<'_, '_, E, K>
where
    E: Engine,
    K: Key + 'static,
    K::Value: Value,
{
    /// The generation in use (`None` for an index in memory).
    pub fn generation(&self) -> Option<u64> {
        self.generation
    }
}
