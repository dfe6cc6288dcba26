//! `strata copy`: every row of one database into another, possibly of
//! another engine; resumable, verified at the end.

use super::{
    Bound, Cli, Commit, Db, Durability, Engine, Failure, KeyspaceSpec, Kind, Output, Path,
    Progress, RangeSpec, Serialize, Snapshot, create_with_mode, give_mode, mode_of, open,
    render_key, stopped, store_on, with_engine,
};

/// The keyspace that recorded how far a copy got, for a source without a
/// system keyspace (and in destinations of copies before 2026-11-27).
pub(super) const COPY_KEYSPACE: &str = "strata.copy";

pub(super) const COPY_ROW: &[u8] = b"progress";

/// Where a copy records how far it got, in the same commit as each batch:
/// one row holding the source's version, the keyspace and the last key
/// copied. A row of the system keyspace (`("strata.copy", "progress")`,
/// deleted when the copy is done, so nothing is left behind), or, for a
/// source without one, the `strata.copy` keyspace's `progress` row.
pub(super) fn progress_place(db: &Db) -> (String, Vec<u8>) {
    if db.keyspaces.contains(&db.options.system_keyspace) {
        (
            db.options.system_keyspace.clone(),
            strata_keys::tuple::pack(&("strata.copy", "progress")),
        )
    } else {
        (COPY_KEYSPACE.to_owned(), COPY_ROW.to_vec())
    }
}

/// Rows per destination commit.
pub(super) const COPY_BATCH: usize = 256;

/// What `strata copy` reports.
#[derive(Debug, Serialize)]
pub(super) struct CopyReport {
    source: String,
    dest: String,
    dest_engine: &'static str,
    rows: u64,
    /// The copy went on from an interrupted one.
    resumed: bool,
    keyspaces: usize,
    /// The destination's version, raised to the source's.
    version: u64,
    /// Indexes whose files stay with the source.
    search_indexes_not_copied: Vec<String>,
}

impl Output for CopyReport {
    fn text(&self) -> String {
        let indexes = if self.search_indexes_not_copied.is_empty() {
            String::new()
        } else {
            format!(
                "\nsearch indexes not copied (their files stay with the source; rebuild them on the copy): {}",
                self.search_indexes_not_copied.join(", ")
            )
        };
        format!(
            "copied {} rows of {} keyspaces{} from {} to {}; verified equal; version raised to {}{indexes}",
            self.rows,
            self.keyspaces,
            if self.resumed {
                " (resumed after an interrupted copy)"
            } else {
                ""
            },
            self.source,
            self.dest,
            self.version
        )
    }
}

pub(super) fn copy(
    cli: &Cli,
    src: &str,
    dest: &str,
    dest_kind: Option<Kind>,
) -> Result<CopyReport, Failure> {
    let src_db = open::open(cli.engine, src, cli.system_keyspace.as_deref(), true)?;
    let dest_kind = match dest_kind {
        Some(k) => k,
        None if Path::new(dest).exists() || dest.contains("://") || dest.contains('=') => {
            open::detect(dest)?
        }
        None if Path::new(dest).extension().is_none() => Kind::Rocks,
        None => Kind::Redb,
    };
    // The destination has the source's keyspaces with their profiles, and
    // the progress keyspace when the progress needs one.
    let mut specs = open::specs_for(&src_db.keyspaces, &src_db.options);
    if progress_place(&src_db).0 == COPY_KEYSPACE && !specs.iter().any(|s| s.name == COPY_KEYSPACE)
    {
        specs.push(KeyspaceSpec::new(
            COPY_KEYSPACE,
            strata_engine::Profile::General,
        ));
    }
    // A new destination file or directory gets the source's mode before
    // anything is written into it (a PostgreSQL source has none: the
    // umask decides, as for any new database).
    let mode = mode_of(src).filter(|_| src_db.kind != Kind::Postgres);
    if dest_kind != Kind::Postgres && !Path::new(dest).exists() {
        create_with_mode(dest, dest_kind, mode)
            .map_err(|err| Failure::failed("cannot create the destination", &err))?;
    }
    let dest_engine = open::open_engine(dest_kind, dest, specs, false)?;
    let out = with_engine!(&src_db.engine, s => {
        with_engine!(&dest_engine, d => copy_rows(&src_db, s, d))
    })?;
    drop(dest_engine);
    if dest_kind != Kind::Postgres {
        give_mode(Path::new(dest), mode)
            .map_err(|err| Failure::failed("cannot give the copy the source's mode", &err))?;
    }
    let indexes: Vec<String> = strata_search::inspect::catalog_indexes(&src_db.catalog)
        .into_iter()
        .map(|i| i.name)
        .collect();
    Ok(CopyReport {
        source: src.to_owned(),
        dest: dest.to_owned(),
        dest_engine: dest_kind.name(),
        rows: out.0,
        resumed: out.1,
        keyspaces: src_db.keyspaces.len(),
        version: out.2,
        search_indexes_not_copied: indexes,
    })
}

/// The keyspaces a copy copies, in name order: all but the source's own
/// copy progress (it was a copy's destination), which the destination
/// keeps for itself.
pub(super) fn copied_keyspaces(db: &Db) -> Vec<String> {
    let mut names: Vec<String> = db
        .keyspaces
        .iter()
        .filter(|n| *n != COPY_KEYSPACE)
        .cloned()
        .collect();
    names.sort();
    names
}

/// Copies every keyspace of `s` into `d`, resuming from `d`'s progress
/// row; compares both at the end and raises `d`'s version to `s`'s.
/// Returns (rows copied now, whether it resumed, the version).
pub(super) fn copy_rows<S: Engine, D: Engine>(
    db: &Db,
    s: &S,
    d: &D,
) -> Result<(u64, bool, u64), Failure> {
    let fail = |what: &'static str| {
        move |err: &(dyn std::error::Error + 'static)| Failure::failed(what, err)
    };
    let (progress_name, progress_key) = progress_place(db);
    let progress_ks = d
        .keyspace(&progress_name)
        .map_err(|e| fail("destination")(&e))?;
    let snap = s.snapshot().map_err(|e| fail("source snapshot")(&e))?;
    let version = snap.version().map_err(|e| fail("source version")(&e))?;
    let resume: Option<(u64, String, Vec<u8>)> = d
        .snapshot()
        .and_then(|x| x.get(progress_ks, &progress_key))
        .map_err(|e| fail("destination")(&e))?
        .and_then(|v| strata_keys::tuple::unpack::<(u64, String, Vec<u8>)>(&v).ok());
    if let Some((v, _, _)) = &resume
        && *v != version
    {
        return Err(Failure::Usage(format!(
            "an earlier copy into this destination read the source at version {v}, and the source is now at {version}; copy into a new destination"
        )));
    }
    if resume.is_none() && d.last_version() > 0 && !holds_nothing(db, d) {
        return Err(Failure::Usage(
            "the destination holds data and no copy progress; copy into a new destination"
                .to_owned(),
        ));
    }
    let resumed = resume.is_some();
    let bar = Progress::new("copy");
    let mut copied = 0u64;
    let names = copied_keyspaces(db);
    for name in &names {
        let from = match &resume {
            Some((_, ks, _)) if name < ks => continue,
            Some((_, ks, last)) if name == ks => {
                let mut after = last.clone();
                after.push(0);
                Bound::Included(after)
            }
            _ => Bound::Unbounded,
        };
        let sks = s.keyspace(name).map_err(|e| fail("source")(&e))?;
        let dks = d.keyspace(name).map_err(|e| fail("destination")(&e))?;
        let spec = RangeSpec {
            start: from,
            end: Bound::Unbounded,
            reverse: false,
            limit: None,
        };
        let mut batch: Vec<(Vec<u8>, Vec<u8>)> = Vec::with_capacity(COPY_BATCH);
        let mut rows = snap
            .range(sks, spec)
            .map_err(|e| fail("source")(&e))?
            .peekable();
        while rows.peek().is_some() {
            batch.clear();
            for row in rows.by_ref().take(COPY_BATCH) {
                let row = row.map_err(|e| fail("source")(&e))?;
                // A source that was itself an unfinished copy's
                // destination: its progress is not the copy's.
                if *name == progress_name && row.0 == progress_key {
                    continue;
                }
                batch.push(row);
            }
            let Some((last, _)) = batch.last() else { break };
            let mut commit = Commit::new().durability(Durability::Buffered);
            for (k, v) in &batch {
                commit = commit.put(dks, k.clone(), v.clone());
            }
            commit = commit.put(
                progress_ks,
                progress_key.clone(),
                strata_keys::tuple::pack(&(version, name.as_str(), last.as_slice())),
            );
            d.commit(commit)
                .map_err(|e| fail("destination commit")(&e))?;
            copied += batch.len() as u64;
            bar.set(copied);
            if stopped() {
                // Every batch committed is kept with its progress: running
                // again resumes after it.
                d.sync().map_err(|e| fail("destination sync")(&e))?;
                return Err(Failure::Stopped);
            }
        }
    }
    drop(bar);
    compare(&snap, s, d, &names, (&progress_name, &progress_key))?;
    d.commit(Commit::new().delete(progress_ks, progress_key.clone()))
        .map_err(|e| fail("destination commit")(&e))?;
    forget_indexes(db, d)?;
    let raised = d
        .raise_version(version)
        .map_err(|e| fail("destination version")(&e))?;
    Ok((copied, resumed, raised))
}

/// Whether every keyspace of `db` is empty in `d`.
pub(super) fn holds_nothing<D: Engine>(db: &Db, d: &D) -> bool {
    db.keyspaces.iter().all(|n| {
        d.keyspace(n).ok().is_some_and(|ks| {
            d.snapshot()
                .and_then(|x| {
                    x.range(ks, RangeSpec::all().limit(1))
                        .map(|mut r| r.next().is_none())
                })
                .unwrap_or(false)
        })
    })
}

/// Removes the search indexes from the copy's catalog: their files stay
/// with the source (a catalog entry names their directory), and a copy
/// that named them would share them with the source. The copy's consumer
/// checkpoints stay, so an index opened on the copy at a new directory is
/// refused as behind until rebuilt (`Indexer::open_rebuilt`).
pub(super) fn forget_indexes<D: Engine>(db: &Db, d: &D) -> Result<(), Failure> {
    let names: Vec<String> = strata_search::inspect::catalog_indexes(&db.catalog)
        .into_iter()
        .map(|i| i.name)
        .collect();
    if names.is_empty() {
        return Ok(());
    }
    store_on(db, d)?
        .transact(|tx| {
            for name in &names {
                tx.catalog_delete(strata_search::inspect::CATALOG_INDEX, name)?;
            }
            Ok::<_, strata_store::StoreError>(())
        })
        .map_err(|err| Failure::failed("destination catalog", &err))
}

/// Fails unless every keyspace in `names` holds the same rows in `d` as in
/// `s` at `snap`, the copy's own progress row (`progress`: keyspace and
/// key) aside.
pub(super) fn compare<S: Engine, D: Engine>(
    snap: &S::Snapshot<'_>,
    s: &S,
    d: &D,
    names: &[String],
    progress: (&str, &[u8]),
) -> Result<(), Failure> {
    let fail = |what: &'static str| {
        move |err: &(dyn std::error::Error + 'static)| Failure::failed(what, err)
    };
    let dsnap = d.snapshot().map_err(|e| fail("destination")(&e))?;
    for name in names {
        let sks = s.keyspace(name).map_err(|e| fail("source")(&e))?;
        let dks = d.keyspace(name).map_err(|e| fail("destination")(&e))?;
        let not_progress = |row: &Result<(Vec<u8>, Vec<u8>), _>| {
            !(name == progress.0 && row.as_ref().is_ok_and(|(k, _)| k == progress.1))
        };
        let a = snap
            .range(sks, RangeSpec::all())
            .map_err(|e| fail("source")(&e))?
            .filter(not_progress);
        let mut b = dsnap
            .range(dks, RangeSpec::all())
            .map_err(|e| fail("destination")(&e))?
            .filter(not_progress);
        for row in a {
            let row = row.map_err(|e| fail("source")(&e))?;
            let other = b.next().transpose().map_err(|e| fail("destination")(&e))?;
            if other.as_ref() != Some(&row) {
                return Err(Failure::Damaged(format!(
                    "the copy differs from the source in {name} at {}",
                    render_key(&row.0)
                )));
            }
        }
        if let Some(extra) = b.next() {
            let extra = extra.map_err(|e| fail("destination")(&e))?;
            return Err(Failure::Damaged(format!(
                "the copy has a row the source lacks in {name}: {}",
                render_key(&extra.0)
            )));
        }
    }
    Ok(())
}
