//! Finding what a path is and opening it: the engine, its keyspaces, and
//! what the store's catalog says about them.

use std::path::Path;
use strata_engine::ErrorChain;

use strata_codec::Limits;
use strata_engine::{Engine, EngineError, KeyspaceSpec, Profile};
use strata_engine_postgres::{PostgresEngine, PostgresOptions, postgres};
use strata_engine_redb::{RedbEngine, RedbOptions};
use strata_engine_rocks::{RocksEngine, RocksOptions};
use strata_store::{CatalogEntry, Store, StoreOptions};

use crate::Failure;

/// The engines the tool opens.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Kind {
    /// A redb file.
    Redb,
    /// A RocksDB directory.
    Rocks,
    /// A PostgreSQL database, named by a URL (`postgresql://...`) or a
    /// connection string (`host=... dbname=...`).
    Postgres,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Self::Redb => "redb",
            Self::Rocks => "rocksdb",
            Self::Postgres => "postgresql",
        }
    }
}

/// The first bytes of every redb file.
const REDB_MAGIC: &[u8] = b"redb";

/// What `path` is: a PostgreSQL URL or connection string, a directory
/// with RocksDB's `CURRENT` file, or a file that starts as redb's do.
pub fn detect(path: &str) -> Result<Kind, Failure> {
    if crate::secrets::is_conninfo(path) {
        return Ok(Kind::Postgres);
    }
    let p = Path::new(path);
    if p.is_dir() {
        if p.join("CURRENT").is_file() {
            return Ok(Kind::Rocks);
        }
        return Err(Failure::NotADatabase(format!(
            "{path} is a directory without RocksDB's CURRENT file"
        )));
    }
    if std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.len() == 0) {
        return Err(Failure::NotADatabase(format!(
            "{path} is an empty file, not a database"
        )));
    }
    let mut head = [0u8; 4];
    match std::fs::File::open(p).and_then(|mut f| std::io::Read::read_exact(&mut f, &mut head)) {
        Ok(()) if head == REDB_MAGIC => Ok(Kind::Redb),
        Ok(()) => Err(Failure::NotADatabase(format!(
            "{path} is not a redb file (its first bytes are {head:02x?})"
        ))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            Err(Failure::NotADatabase(format!("{path} does not exist")))
        }
        Err(e) => Err(Failure::NotADatabase(format!("{path}: {}", ErrorChain(&e)))),
    }
}

/// An open engine of one of the kinds.
#[allow(clippy::large_enum_variant)] // one per command, never moved in a loop
pub enum Opened {
    Redb(RedbEngine),
    Rocks(RocksEngine),
    Postgres(PostgresEngine),
}

/// Runs `$body` with `$e` bound to the engine inside an [`Opened`].
#[macro_export]
macro_rules! with_engine {
    ($opened:expr, $e:ident => $body:expr) => {
        match $opened {
            $crate::open::Opened::Redb($e) => $body,
            $crate::open::Opened::Rocks($e) => $body,
            $crate::open::Opened::Postgres($e) => $body,
        }
    };
}

fn pg_config(url: &str) -> Result<postgres::Config, Failure> {
    url.parse::<postgres::Config>().map_err(|e| {
        Failure::NotADatabase(format!(
            "{} is not a PostgreSQL address: {}",
            ErrorChain(&e),
            strata_engine_postgres::redact(url)
        ))
    })
}

/// The keyspaces stored at `path`.
pub fn stored_keyspaces(kind: Kind, path: &str) -> Result<Vec<String>, Failure> {
    let found = match kind {
        Kind::Redb => repair_first(path, &[])
            .map_err(|f| EngineError::Backend(f.to_string().into()))
            .and_then(|()| RedbEngine::stored_keyspaces(path)),
        Kind::Rocks => RocksEngine::stored_keyspaces(path),
        Kind::Postgres => PostgresEngine::stored_keyspaces(&pg_config(path)?),
    };
    found.map_err(|e| Failure::open(path, &e))
}

/// Whether `--repair` was given.
static REPAIR: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Takes `--repair`.
pub fn set_repair(on: bool) {
    REPAIR.store(on, std::sync::atomic::Ordering::Relaxed);
}

/// Whether `--accept-loss` was given.
static ACCEPT_LOSS: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Takes `--accept-loss`.
pub fn set_accept_loss(on: bool) {
    ACCEPT_LOSS.store(on, std::sync::atomic::Ordering::Relaxed);
}

/// RocksDB's options: with `--accept-loss`, a damaged log opens at the
/// state before the damage.
fn rocks_options() -> RocksOptions {
    RocksOptions {
        accept_wal_loss: ACCEPT_LOSS.load(std::sync::atomic::Ordering::Relaxed),
        ..RocksOptions::default()
    }
}

/// With `--repair`, a redb file that was not closed cleanly is repaired by
/// a writable open (with redb's repair on) before anything else opens it.
fn repair_first(path: &str, specs: &[KeyspaceSpec]) -> Result<(), Failure> {
    if !REPAIR.load(std::sync::atomic::Ordering::Relaxed) {
        return Ok(());
    }
    let options = RedbOptions {
        repair: true,
        ..RedbOptions::default()
    };
    RedbEngine::open(path, specs.to_vec(), options)
        .map(drop)
        .map_err(|e| Failure::open(path, &e))
}

/// Opens `path` with `specs`; read-only where the engine can (redb and
/// RocksDB; PostgreSQL opens as usual and the command only reads).
pub fn open_engine(
    kind: Kind,
    path: &str,
    specs: Vec<KeyspaceSpec>,
    read_only: bool,
) -> Result<Opened, Failure> {
    if kind == Kind::Redb {
        repair_first(path, &specs)?;
    }
    let opened = match (kind, read_only) {
        (Kind::Redb, true) => {
            RedbEngine::open_read_only(path, specs, RedbOptions::default()).map(Opened::Redb)
        }
        (Kind::Redb, false) => {
            let options = RedbOptions {
                repair: false,
                ..RedbOptions::default()
            };
            RedbEngine::open(path, specs, options).map(Opened::Redb)
        }
        (Kind::Rocks, true) => {
            RocksEngine::open_read_only(path, specs, rocks_options()).map(Opened::Rocks)
        }
        (Kind::Rocks, false) => RocksEngine::open(path, specs, rocks_options()).map(Opened::Rocks),
        (Kind::Postgres, _) => {
            PostgresEngine::open(pg_config(path)?, specs, PostgresOptions::default())
                .map(Opened::Postgres)
        }
    };
    opened.map_err(|e| Failure::open(path, &e))
}

/// The limits the tool writes with on each engine.
pub fn limits(kind: Kind) -> Limits {
    match kind {
        Kind::Postgres => Limits::POSTGRES,
        Kind::Redb | Kind::Rocks => Limits::FOUNDATIONDB,
    }
}

/// An open database and what is known of it.
pub struct Db {
    pub kind: Kind,
    /// The path as shown (a PostgreSQL connection string without its
    /// password).
    pub path: String,
    pub engine: Opened,
    /// Every keyspace stored, by name.
    pub keyspaces: Vec<String>,
    /// The store's options as the catalog (or the default names) gave them.
    pub options: StoreOptions,
    /// The catalog's entries (empty without one).
    pub catalog: Vec<CatalogEntry>,
    /// Whether the catalog described the store; `false`: its data and
    /// system keyspaces were taken from the default names.
    pub described: bool,
}

/// Opens the database at `path`: finds its keyspaces, reads the store's
/// catalog (from the system keyspace named `system`), and opens the engine
/// with every keyspace, read-only when `read_only`.
pub fn open(
    kind: Option<Kind>,
    path: &str,
    system: Option<&str>,
    read_only: bool,
) -> Result<Db, Failure> {
    let kind = match kind {
        Some(k) => k,
        None => detect(path)?,
    };
    let keyspaces = stored_keyspaces(kind, path)?;
    let mut options = StoreOptions::new(limits(kind));
    if let Some(s) = system {
        s.clone_into(&mut options.system_keyspace);
    }
    // First look: every keyspace as general, read-only, for the catalog.
    let catalog = if keyspaces.contains(&options.system_keyspace)
        && keyspaces.contains(&options.data_keyspace)
    {
        let engine = open_engine(kind, path, general(&keyspaces), true)?;
        with_engine!(&engine, e => catalog_of(e, &options)).map_err(|e| {
            Failure::Damaged(format!(
                "{path}: the store's catalog does not read: {}",
                ErrorChain(&e)
            ))
        })?
    } else {
        Vec::new()
    };
    let described = options.from_catalog(&catalog);
    let specs = specs_for(&keyspaces, &options);
    // Reopened with the catalog's profiles (for writing, when asked).
    let engine = open_engine(kind, path, specs, read_only)?;
    Ok(Db {
        kind,
        path: if kind == Kind::Postgres {
            strata_engine_postgres::redact(path)
        } else {
            path.to_owned()
        },
        engine,
        keyspaces,
        options,
        catalog,
        described,
    })
}

fn general(names: &[String]) -> Vec<KeyspaceSpec> {
    names
        .iter()
        .map(|n| KeyspaceSpec::new(n.clone(), Profile::General))
        .collect()
}

/// The store's keyspaces with their profiles, then every other stored
/// keyspace (declared as a space, so the store can read it).
pub fn specs_for(names: &[String], options: &StoreOptions) -> Vec<KeyspaceSpec> {
    let mut specs: Vec<KeyspaceSpec> = options
        .keyspace_specs()
        .into_iter()
        .filter(|s| names.contains(&s.name))
        .collect();
    for n in names {
        if !specs.iter().any(|s| &s.name == n) {
            specs.push(KeyspaceSpec::new(n.clone(), Profile::General));
        }
    }
    specs
}

/// Every other stored keyspace declared as a space, so the store opens on
/// an engine that has them all.
pub fn store_options(db: &Db) -> StoreOptions {
    let mut options = db.options.clone();
    let declared: Vec<String> = options
        .keyspace_specs()
        .into_iter()
        .map(|s| s.name)
        .collect();
    for n in &db.keyspaces {
        if !declared.contains(n) {
            options = options.space(n.clone(), Profile::General);
        }
    }
    options
}

/// The catalog, read from the system keyspace (the other keyspaces need
/// not be declared for it).
fn catalog_of<E: Engine>(
    engine: &E,
    options: &StoreOptions,
) -> Result<Vec<CatalogEntry>, strata_store::StoreError> {
    Store::open(engine, options.clone())?.catalog()
}
