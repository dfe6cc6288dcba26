//! `strata compact` and `strata sweep`.

use super::{
    Cli, Compact, Db, Engine, Failure, Kind, Output, Progress, Serialize, open, stopped, store_on,
    with_engine,
};

/// What `strata compact` reports.
#[derive(Debug, Serialize)]
pub(super) struct CompactReport {
    path: String,
    engine: &'static str,
    compacted: bool,
}

impl Output for CompactReport {
    fn text(&self) -> String {
        format!("compacted {} ({})", self.path, self.engine)
    }
}

/// What `strata sweep` reports.
#[derive(Debug, Serialize)]
pub(super) struct Swept {
    removed: u64,
    stale: u64,
    commits: u64,
    /// Expired values remain (a commit budget ran out, or a stop).
    more: bool,
    stopped: bool,
}

impl Output for Swept {
    fn text(&self) -> String {
        format!(
            "removed {} expired values and {} stale index entries in {} commits{}",
            self.removed,
            self.stale,
            self.commits,
            if self.more { "; more remain" } else { "" }
        )
    }
}

pub(super) fn compact(cli: &Cli, path: &str) -> Result<CompactReport, Failure> {
    let kind = match cli.engine {
        Some(k) => k,
        None => open::detect(path)?,
    };
    if kind == Kind::Redb {
        // redb compacts only a file nobody has open.
        strata_engine_redb::RedbEngine::compact_file(path)
            .map_err(|err| Failure::open(path, &err))?;
    } else {
        let db = open::open(Some(kind), path, cli.system_keyspace.as_deref(), false)?;
        with_engine!(&db.engine, e => e.compact())
            .map_err(|err| Failure::failed("compact", &err))?;
    }
    Ok(CompactReport {
        path: path.to_owned(),
        engine: kind.name(),
        compacted: true,
    })
}

pub(super) fn sweep<E: Engine>(db: &Db, e: &E, max_commits: Option<u64>) -> Result<Swept, Failure> {
    let store = store_on(db, e)?;
    let (mut removed, mut stale, mut commits) = (0, 0, 0);
    let mut cursor = None;
    let bar = Progress::new("sweep");
    loop {
        let budget = max_commits.map_or(16, |m| m.saturating_sub(commits).min(16));
        if budget == 0 {
            break;
        }
        let report = store
            .sweep_from(cursor, Some(budget))
            .map_err(|err| Failure::failed("sweep", &err))?;
        removed += report.removed;
        stale += report.stale;
        commits += report.commits;
        bar.set(removed);
        cursor = report.resume;
        if cursor.is_none() || stopped() {
            break;
        }
    }
    drop(bar);
    e.sync().map_err(|err| Failure::failed("sync", &err))?;
    Ok(Swept {
        removed,
        stale,
        commits,
        more: cursor.is_some(),
        stopped: stopped(),
    })
}
