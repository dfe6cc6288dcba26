//! Bundles: the canonical tar archive of a function's `function.js` and
//! `manifest.json`, and its SHA-256.

use std::collections::BTreeMap;
use std::io::Read;

use sha2::{Digest, Sha256};

use super::{BundleError, CodeSousError};

/// The files a bundle must hold.
pub const REQUIRED_FILES: [&str; 2] = ["function.js", "manifest.json"];

/// A function's files, by name. A bundle holds exactly
/// [`REQUIRED_FILES`]; its tar archive is canonical: the files in name
/// order, each a regular file with mode 0644, owner 0, time 0, so the same
/// files always give the same bytes and the same SHA-256.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bundle {
    files: BTreeMap<String, Vec<u8>>,
}

impl Bundle {
    /// A bundle of `function.js` and `manifest.json`.
    pub fn new(function_js: impl Into<Vec<u8>>, manifest_json: impl Into<Vec<u8>>) -> Self {
        let mut files = BTreeMap::new();
        files.insert(REQUIRED_FILES[0].to_owned(), function_js.into());
        files.insert(REQUIRED_FILES[1].to_owned(), manifest_json.into());
        Self { files }
    }

    /// A bundle of these files, which must be exactly [`REQUIRED_FILES`].
    ///
    /// # Errors
    /// [`CodeSousError::BadBundle`] naming what is missing or extra.
    pub fn from_files(files: BTreeMap<String, Vec<u8>>) -> Result<Self, CodeSousError> {
        for required in REQUIRED_FILES {
            if !files.contains_key(required) {
                return Err(BundleError::Missing { file: required }.into());
            }
        }
        if let Some(extra) = files.keys().find(|f| !REQUIRED_FILES.contains(&f.as_str())) {
            return Err(BundleError::Unexpected {
                file: extra.clone(),
            }
            .into());
        }
        Ok(Self { files })
    }

    /// The files, by name.
    pub fn files(&self) -> &BTreeMap<String, Vec<u8>> {
        &self.files
    }

    /// `function.js`.
    pub fn function_js(&self) -> &[u8] {
        self.files
            .get(REQUIRED_FILES[0])
            .map_or(&[][..], Vec::as_slice)
    }

    /// `manifest.json`.
    pub fn manifest_json(&self) -> &[u8] {
        self.files
            .get(REQUIRED_FILES[1])
            .map_or(&[][..], Vec::as_slice)
    }

    /// The canonical tar archive.
    ///
    /// # Errors
    /// [`CodeSousError::BadBundle`] if the archive cannot be written (a
    /// file name too long for a tar header cannot happen here).
    pub fn to_tar(&self) -> Result<Vec<u8>, CodeSousError> {
        let mut builder = tar::Builder::new(Vec::new());
        builder.mode(tar::HeaderMode::Deterministic);
        for (name, contents) in &self.files {
            let mut header = tar::Header::new_ustar();
            header.set_entry_type(tar::EntryType::Regular);
            header.set_mode(0o644);
            header.set_uid(0);
            header.set_gid(0);
            header.set_mtime(0);
            header.set_size(contents.len() as u64);
            builder
                .append_data(&mut header, name, contents.as_slice())
                .map_err(BundleError::Tar)?;
        }
        builder.into_inner().map_err(|e| BundleError::Tar(e).into())
    }

    /// Reads a bundle from its tar archive: regular files only, exactly
    /// [`REQUIRED_FILES`], each once.
    ///
    /// # Errors
    /// [`CodeSousError::BadBundle`] for a malformed archive or other files.
    pub fn from_tar(bytes: &[u8]) -> Result<Self, CodeSousError> {
        let bad = BundleError::Tar;
        let mut archive = tar::Archive::new(bytes);
        let mut files = BTreeMap::new();
        for entry in archive.entries().map_err(bad)? {
            let mut entry = entry.map_err(bad)?;
            if entry.header().entry_type() != tar::EntryType::Regular {
                return Err(BundleError::NotAFile.into());
            }
            let name = entry
                .path()
                .map_err(bad)?
                .to_str()
                .map(str::to_owned)
                .ok_or(BundleError::NameNotUtf8)?;
            let mut contents = Vec::new();
            entry.read_to_end(&mut contents).map_err(bad)?;
            if files.insert(name.clone(), contents).is_some() {
                return Err(BundleError::Twice { file: name }.into());
            }
        }
        Self::from_files(files)
    }

    /// SHA-256 of the canonical archive, lower-case hex.
    ///
    /// # Errors
    /// As [`Bundle::to_tar`].
    pub fn sha256(&self) -> Result<String, CodeSousError> {
        Ok(sha256_hex(&self.to_tar()?))
    }
}

/// SHA-256 of `bytes`, lower-case hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .fold(String::with_capacity(64), |mut s, b| {
            use std::fmt::Write as _;
            let _ = write!(s, "{b:02x}");
            s
        })
}
