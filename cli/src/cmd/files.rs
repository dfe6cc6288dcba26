//! Files put in place whole: a private staging directory beside the
//! destination, modes, syncs, renames.

use super::{Failure, Kind, Path, stopped};

/// A private staging directory beside `dest` (mode 0700: nobody else can
/// open what is written there), to build the copy in before it is given
/// its mode and renamed into place.
pub(super) struct Staging {
    dir: std::path::PathBuf,
}

impl Staging {
    pub(super) fn new(dest: &str) -> Result<Self, Failure> {
        let d = Path::new(dest);
        let name = d
            .file_name()
            .map_or_else(|| "strata".into(), |n| n.to_string_lossy().into_owned());
        let dir = d.with_file_name(format!(".{name}.partial-{}", std::process::id()));
        remove_any(&dir);
        let mut builder = std::fs::DirBuilder::new();
        #[cfg(unix)]
        std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
        builder
            .create(&dir)
            .map_err(|e| Failure::failed("cannot create a staging directory", &e))?;
        Ok(Self { dir })
    }

    /// Where the copy is built.
    pub(super) fn path(&self) -> std::path::PathBuf {
        self.dir.join("copy")
    }
}

impl Drop for Staging {
    fn drop(&mut self) {
        remove_any(&self.dir);
    }
}

/// An empty redb file, or an empty RocksDB directory, with `mode` (where
/// given) from the start.
pub(super) fn create_with_mode(dest: &str, kind: Kind, mode: Option<u32>) -> std::io::Result<()> {
    #[cfg(unix)]
    use std::os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _};
    if kind == Kind::Rocks {
        let mut builder = std::fs::DirBuilder::new();
        #[cfg(unix)]
        if let Some(m) = mode {
            builder.mode(dir_mode(m));
        }
        builder.create(dest)
    } else {
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        if let Some(m) = mode {
            options.mode(m);
        }
        options.open(dest).map(drop)
    }
}

pub(super) fn remove_any(p: &Path) {
    let _ = std::fs::remove_dir_all(p).or_else(|_| std::fs::remove_file(p));
}

/// The permission bits a database's files have (`None` for a PostgreSQL
/// database, or where there are none): a redb file's own; for a RocksDB
/// directory, its bits without execute (search) bits.
pub(super) fn mode_of(path: &str) -> Option<u32> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::metadata(path)
            .ok()
            .map(|m| m.permissions().mode() & 0o666)
    }
    #[cfg(not(unix))]
    {
        let _ = path;
        None
    }
}

/// The bits of a directory holding files of `mode`: search where read.
pub(super) const fn dir_mode(mode: u32) -> u32 {
    mode | ((mode & 0o444) >> 2)
}

/// Gives a copy the source's file `mode` (see [`mode_of`]): a file the
/// mode itself; a directory the mode with search bits where it reads, and
/// every file inside it the mode.
pub(super) fn give_mode(p: &Path, mode: Option<u32>) -> std::io::Result<()> {
    #[cfg(unix)]
    if let Some(mode) = mode {
        use std::os::unix::fs::PermissionsExt as _;
        let set =
            |p: &Path, m: u32| std::fs::set_permissions(p, std::fs::Permissions::from_mode(m));
        if p.is_dir() {
            for entry in std::fs::read_dir(p)? {
                let entry = entry?;
                if entry.file_type()?.is_dir() {
                    give_mode(&entry.path(), Some(mode))?;
                } else {
                    set(&entry.path(), mode)?;
                }
            }
            set(p, dir_mode(mode))?;
        } else {
            set(p, mode)?;
        }
    }
    #[cfg(not(unix))]
    let _ = (p, mode);
    Ok(())
}

/// Syncs a file or a directory's entries.
pub(super) fn sync_path(p: &Path) -> std::io::Result<()> {
    if p.is_dir() {
        for entry in std::fs::read_dir(p)? {
            let entry = entry?;
            if entry.file_type()?.is_file() {
                std::fs::File::open(entry.path())?.sync_all()?;
            }
        }
    }
    std::fs::File::open(p)?.sync_all()
}

/// Renames `from` to `dest` and syncs the parent directory.
pub(super) fn put_in_place(from: &Path, dest: &str) -> Result<(), Failure> {
    let io = |err: std::io::Error| Failure::failed("cannot put the copy in place", &err);
    sync_path(from).map_err(io)?;
    std::fs::rename(from, dest).map_err(io)?;
    let parent = Path::new(dest)
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::File::open(parent)
        .and_then(|d| d.sync_all())
        .map_err(io)
}

pub(super) fn refuse_existing(dest: &str) -> Result<(), Failure> {
    if Path::new(dest).exists() {
        return Err(Failure::Usage(format!("{dest} exists; give a new path")));
    }
    Ok(())
}

pub(super) fn copy_tree(from: &Path, to: &Path) -> Result<(), Failure> {
    let io = |err: std::io::Error| Failure::failed("cannot copy the backup", &err);
    if stopped() {
        return Err(Failure::Stopped);
    }
    if from.is_dir() {
        std::fs::create_dir(to).map_err(io)?;
        for entry in std::fs::read_dir(from).map_err(io)? {
            let entry = entry.map_err(io)?;
            copy_tree(&entry.path(), &to.join(entry.file_name()))?;
        }
        Ok(())
    } else {
        std::fs::copy(from, to).map(|_| ()).map_err(io)
    }
}
