//! `strata backup` and `strata restore`.

use super::{
    Backup, Db, Engine, Failure, Kind, Output, Path, Progress, Serialize, Staging, copy_tree,
    give_mode, mode_of, open, put_in_place, refuse_existing, stopped, verify, with_engine,
};

/// What `strata backup` reports.
#[derive(Debug, Serialize)]
pub(super) struct BackedUp {
    source: String,
    dest: String,
    engine: &'static str,
    /// The version the backup holds, where the engine says.
    version: Option<u64>,
}

impl Output for BackedUp {
    fn text(&self) -> String {
        format!(
            "backed up {} at version {} to {}",
            self.source,
            self.version
                .map_or_else(|| "unknown".to_owned(), |v| v.to_string()),
            self.dest
        )
    }
}

/// What `strata restore` reports.
#[derive(Debug, Serialize)]
pub(super) struct Restored {
    backup: String,
    dest: String,
    engine: &'static str,
    version: u64,
}

impl Output for Restored {
    fn text(&self) -> String {
        format!(
            "restored {} (version {}) to {}",
            self.backup, self.version, self.dest
        )
    }
}

pub(super) fn backup<E: Engine + Backup>(db: &Db, e: &E, dest: &str) -> Result<BackedUp, Failure> {
    refuse_existing(dest)?;
    let staging = Staging::new(dest)?;
    let tmp = staging.path();
    let bar = Progress::spinner("backup");
    let result = e.backup(&tmp);
    drop(bar);
    let info = result.map_err(|err| Failure::failed("backup", &err))?;
    if stopped() {
        return Err(Failure::Stopped);
    }
    give_mode(&tmp, mode_of(&db.path))
        .map_err(|err| Failure::failed("cannot give the backup the database's mode", &err))?;
    put_in_place(&tmp, dest)?;
    Ok(BackedUp {
        source: db.path.clone(),
        dest: dest.to_owned(),
        engine: db.kind.name(),
        version: info.version,
    })
}

pub(super) fn restore(kind: Option<Kind>, backup: &str, dest: &str) -> Result<Restored, Failure> {
    refuse_existing(dest)?;
    let kind = match kind {
        Some(k) => k,
        None => open::detect(backup)?,
    };
    if kind == Kind::Postgres {
        return Err(Failure::Usage(
            "a PostgreSQL database is restored with the server's tools (pg_restore)".to_owned(),
        ));
    }
    // The backup must open and verify before it is put in place.
    let checked = {
        let db = open::open(Some(kind), backup, None, true)?;
        let v = with_engine!(&db.engine, e => verify(&db, e))?;
        if !v.ok {
            return Err(Failure::Damaged(format!(
                "the backup does not verify: {}",
                v.problems.join("; ")
            )));
        }
        v.version
    };
    let staging = Staging::new(dest)?;
    let tmp = staging.path();
    let bar = Progress::spinner("restore");
    let copied = copy_tree(Path::new(backup), &tmp);
    drop(bar);
    copied?;
    give_mode(&tmp, mode_of(backup))
        .map_err(|err| Failure::failed("cannot give the copy the backup's mode", &err))?;
    put_in_place(&tmp, dest)?;
    Ok(Restored {
        backup: backup.to_owned(),
        dest: dest.to_owned(),
        engine: kind.name(),
        version: checked,
    })
}
