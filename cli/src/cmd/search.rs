//! `strata search`: the search indexes the catalog lists, read without
//! their mapping (list, query), and, for the mappings this tool knows
//! ([`Mapping`]), verified against the store and rebuilt.

use std::fmt::Write as _;
use std::sync::Arc;

use serde::Serialize;
use strata_engine::{Engine, ErrorChain, SystemClock};
use strata_keys::Key;
use strata_outbox::Outbox;
use strata_search::inspect::{CatalogIndex, IndexFiles, catalog_indexes};
use strata_search::{Freshness, IndexSpec, Indexer, IndexerConfig, Location};
use strata_store::Store;

use super::{Output, outbox_of, store_on};
use crate::notation::render_key;
use crate::open::Db;
use crate::progress::Progress;
use crate::{Failure, SearchAction};

/// The index mappings this tool knows, by the name the catalog gives
/// their index: the reference schemas' indexes. A mapping is application
/// code (a function from rows to documents), so an index of any other
/// name can be listed and queried, not verified or rebuilt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mapping {
    /// `strata_schemas::agent_memory::search_spec`.
    AgentMemory,
}

impl Mapping {
    /// Every mapping known.
    pub const ALL: &[Self] = &[Self::AgentMemory];

    /// The index name it maps.
    pub const fn name(self) -> &'static str {
        match self {
            Self::AgentMemory => "agent_memory",
        }
    }

    /// The mapping of the index named `name`, if this tool knows it.
    pub fn of(name: &str) -> Option<Self> {
        Self::ALL.iter().copied().find(|m| m.name() == name)
    }

    /// The names of every mapping known.
    fn names() -> Vec<&'static str> {
        Self::ALL.iter().map(|m| m.name()).collect()
    }
}

/// Runs `$body` with `$spec` bound to the `IndexSpec` of mapping `$m` (each
/// spec has its own key type, so the body is instantiated once per
/// mapping), or maps the spec's error with `$err`.
macro_rules! with_mapping {
    ($m:expr, $err:expr, $spec:ident => $body:expr) => {
        match $m {
            Mapping::AgentMemory => {
                let $spec = strata_schemas::agent_memory::search_spec().map_err($err)?;
                $body
            }
        }
    };
}

fn find(db: &Db, name: &str) -> Result<CatalogIndex, Failure> {
    let all = catalog_indexes(&db.catalog);
    all.iter().find(|i| i.name == name).cloned().ok_or_else(|| {
        Failure::Usage(format!(
            "no search index {name:?} in the catalog; it has {:?}",
            all.iter().map(|i| i.name.as_str()).collect::<Vec<_>>()
        ))
    })
}

fn files(index: &CatalogIndex) -> Result<IndexFiles, String> {
    let dir = index
        .dir
        .as_ref()
        .ok_or_else(|| "the index lived in memory".to_owned())?;
    IndexFiles::open(dir).map_err(|e| format!("{}: {}", dir.display(), ErrorChain(&e)))
}

/// What `strata search` reports, by action.
#[derive(Debug, Serialize)]
#[serde(untagged)]
pub(super) enum SearchOut {
    /// `list`: every index of the catalog.
    List {
        /// Every index of the catalog.
        indexes: Vec<IndexListing>,
    },
    /// `query`: the best hits.
    Query(QueryOut),
    /// `rebuild`: the index made again from the store.
    RebuildReport(RebuildReport),
    /// `verify`: the index against the store.
    Verified(Verified),
}

impl SearchOut {
    /// Whether a verification found the index wrong.
    pub(super) fn failed(&self) -> bool {
        matches!(self, Self::Verified(v) if !v.ok)
    }
}

impl Output for SearchOut {
    fn text(&self) -> String {
        match self {
            Self::List { indexes } => list_text(indexes).trim_end().to_owned(),
            Self::Query(q) => q.text(),
            Self::RebuildReport(r) => r.text(),
            Self::Verified(v) => v.text(),
        }
    }
}

pub(super) fn search<E: Engine>(
    db: &Db,
    e: &E,
    action: &SearchAction,
) -> Result<SearchOut, Failure> {
    let store = store_on(db, e)?;
    let outbox = outbox_of(db, &store)?;
    match action {
        SearchAction::List => Ok(SearchOut::List {
            indexes: list(db, outbox.as_ref()),
        }),
        SearchAction::Query { name, text, limit } => {
            query(db, &store, name, text, *limit).map(SearchOut::Query)
        }
        SearchAction::Verify { name } | SearchAction::Rebuild { name } => {
            let outbox = outbox.ok_or_else(|| {
                Failure::Usage(format!("{} has no outbox to feed an index", db.path))
            })?;
            typed(
                db,
                &outbox,
                name,
                matches!(action, SearchAction::Rebuild { .. }),
            )
        }
    }
}

/// An index of the catalog, with its files' state and its consumer's.
#[derive(Debug, Serialize)]
pub(super) struct IndexListing {
    name: String,
    topic: String,
    consumer: String,
    dir: Option<String>,
    mapping_known: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    generation: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    checkpoint: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    documents: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    consumer_checkpoint: Option<String>,
    /// The index's files are behind what its consumer acknowledged.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    behind: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    lag_entries: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    oldest_age_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

/// Every index of the catalog with its files' state and its consumer's.
pub(super) fn list<E: Engine>(db: &Db, outbox: Option<&Outbox<'_, E>>) -> Vec<IndexListing> {
    catalog_indexes(&db.catalog)
        .into_iter()
        .map(|i| {
            let mut out = IndexListing {
                name: i.name.clone(),
                topic: i.topic.clone(),
                consumer: i.consumer.clone(),
                dir: i.dir.as_ref().map(|d| d.display().to_string()),
                mapping_known: Mapping::of(&i.name).is_some(),
                generation: None,
                checkpoint: None,
                documents: None,
                consumer_checkpoint: None,
                behind: false,
                lag_entries: None,
                oldest_age_ms: None,
                error: None,
            };
            let files = files(&i);
            match &files {
                Ok(f) => {
                    out.generation = Some(f.generation());
                    out.checkpoint = Some(f.checkpoint().to_string());
                    out.documents = Some(f.documents());
                }
                Err(e) => out.error = Some(e.clone()),
            }
            // The index's own lag: entries after what its files hold (its
            // consumer's checkpoint may be further on when files were lost).
            if let Some(ob) = outbox {
                match ob.checkpoint(&i.topic, &i.consumer) {
                    Ok(p) => {
                        out.consumer_checkpoint = Some(p.to_string());
                        out.behind = files.as_ref().is_ok_and(|f| f.checkpoint() < p);
                    }
                    Err(e) => out.error = Some(ErrorChain(&e).to_string()),
                }
                if let Ok(f) = &files {
                    match ob.lag_after(&i.topic, f.checkpoint()) {
                        Ok(l) => {
                            out.lag_entries = Some(l.entries);
                            out.oldest_age_ms = Some(l.oldest_age_ms);
                        }
                        Err(e) => out.error = Some(ErrorChain(&e).to_string()),
                    }
                }
            }
            out
        })
        .collect()
}

pub(super) fn list_text(list: &[IndexListing]) -> String {
    if list.is_empty() {
        return "search indexes: none\n".to_owned();
    }
    let mut s = "search indexes:\n".to_owned();
    for i in list {
        let _ = write!(
            s,
            "  {} ({})",
            i.name,
            i.dir.as_deref().unwrap_or("in memory")
        );
        if let Some(e) = &i.error {
            let _ = writeln!(s, ": ERROR {e}");
        } else {
            let _ = write!(
                s,
                ": generation {}, checkpoint {}, {} documents, lag {} entries",
                i.generation.unwrap_or(0),
                i.checkpoint.as_deref().unwrap_or(""),
                i.documents.unwrap_or(0),
                i.lag_entries
                    .map_or_else(|| "unknown".to_owned(), |n| n.to_string())
            );
            if i.behind {
                let _ = write!(
                    s,
                    ", BEHIND its consumer's checkpoint {} (rebuild it)",
                    i.consumer_checkpoint.as_deref().unwrap_or("")
                );
            }
            s.push('\n');
        }
    }
    s
}

/// Read-only checks of every index: its files open, its checkpoint is not
/// beyond the store's last commit, and its consumer did not acknowledge
/// past it; and, for a mapping this tool knows whose consumer has no lag,
/// its documents against the store's rows. Returns the indexes checked,
/// the problems and notes.
pub(super) fn check<E: Engine>(
    db: &Db,
    e: &E,
    outbox: Option<&Outbox<'_, &E>>,
) -> (usize, Vec<String>, Vec<String>) {
    let mut problems = Vec::new();
    let mut notes = Vec::new();
    let all = catalog_indexes(&db.catalog);
    for i in &all {
        let name = &i.name;
        let f = match files(i) {
            Ok(f) => f,
            Err(err) => {
                problems.push(format!("search index {name}: {err}"));
                continue;
            }
        };
        if f.checkpoint().version > e.last_version() {
            problems.push(format!(
                "search index {name}: checkpoint {} is ahead of the store's last commit {}",
                f.checkpoint(),
                e.last_version()
            ));
        }
        let Some(ob) = outbox else { continue };
        match ob.checkpoint(&i.topic, &i.consumer) {
            Ok(acked) if acked > f.checkpoint() => problems.push(format!(
                "search index {name}: the outbox acknowledged {acked}, past the index's checkpoint {}",
                f.checkpoint()
            )),
            Ok(_) => {}
            Err(err) => problems.push(format!("search index {name}: {}", ErrorChain(&err))),
        }
        match ob.lag(&i.topic, &i.consumer) {
            Ok(lag) if lag.entries > 0 => notes.push(format!(
                "search index {name}: {} entries not indexed yet, so not compared with the store (`strata search verify` catches it up and compares)",
                lag.entries
            )),
            Ok(_) => match compare(ob.store(), name, &f) {
                Ok(Some(found)) => problems.extend(found),
                Ok(None) => notes.push(format!(
                    "search index {name}: its mapping is the application's; documents not compared with the store"
                )),
                Err(err) => problems.push(format!("search index {name}: {err}")),
            },
            Err(err) => problems.push(format!("search index {name}: {}", ErrorChain(&err))),
        }
    }
    (all.len(), problems, notes)
}

/// The differences between an index that has every change and the store,
/// for the mappings this tool knows (`None` for others).
fn compare<E: Engine>(
    store: &Store<E>,
    name: &str,
    files: &IndexFiles,
) -> Result<Option<Vec<String>>, String> {
    let Some(mapping) = Mapping::of(name) else {
        return Ok(None);
    };
    let view = store.read().map_err(|e| ErrorChain(&e).to_string())?;
    let fail = |e: strata_search::SearchError| ErrorChain(&e).to_string();
    let verified = with_mapping!(mapping, fail, spec => files.compare(&view, &spec).map_err(fail)?);
    let mut out = Vec::new();
    for (what, keys) in [
        ("missing (a row without its document)", &verified.missing),
        ("extra (a document without its row)", &verified.extra),
        ("stale (a document of another value)", &verified.stale),
        (
            "duplicate (more than one document for one row)",
            &verified.duplicates,
        ),
        (
            "damaged row (its value does not decode; not compared)",
            &verified.damaged,
        ),
    ] {
        for k in keys {
            out.push(format!("search index {name}: {what}: {}", render_key(k)));
        }
    }
    Ok(Some(out))
}

/// What `strata search query` reports.
#[derive(Debug, Serialize)]
pub(super) struct QueryOut {
    index: String,
    checkpoint: String,
    boosts: &'static str,
    hits: Vec<HitOut>,
}

/// One hit, its key decoded.
#[derive(Debug, Serialize)]
struct HitOut {
    key: String,
    score: f32,
    version: u64,
    snippet: String,
    /// Whether its row still holds the indexed value.
    freshness: String,
}

/// `query`: the best hits, each with its key decoded and whether its row
/// still holds the indexed value.
fn query<E: Engine>(
    db: &Db,
    store: &Store<E>,
    name: &str,
    text: &str,
    limit: usize,
) -> Result<QueryOut, Failure> {
    let index = find(db, name)?;
    let f = files(&index).map_err(Failure::Failed)?;
    let hits = f
        .query(text, limit)
        .map_err(|err| Failure::failed("search", &err))?;
    let view = store
        .read()
        .map_err(|err| Failure::failed("snapshot", &err))?;
    let hits = hits
        .iter()
        .map(|h| HitOut {
            key: render_key(&h.key),
            score: h.score,
            version: h.version,
            snippet: h.snippet.clone(),
            freshness: match h.freshness(&view) {
                Ok(Freshness::Current) => "current".to_owned(),
                Ok(Freshness::Changed) => "changed since indexed".to_owned(),
                Ok(Freshness::Vanished) => "gone from the store".to_owned(),
                Err(err) => format!("unknown: {}", ErrorChain(&err)),
            },
        })
        .collect();
    Ok(QueryOut {
        index: name.to_owned(),
        checkpoint: f.checkpoint().to_string(),
        boosts: "not applied (the mapping is the application's)",
        hits,
    })
}

impl Output for QueryOut {
    fn text(&self) -> String {
        let mut s = format!("index {} at checkpoint {}:\n", self.index, self.checkpoint);
        for h in &self.hits {
            let _ = writeln!(
                s,
                "  {:.3} {} ({}): {}",
                h.score,
                h.key,
                h.freshness,
                h.snippet.replace('\n', " / ")
            );
        }
        let _ = write!(s, "({} hits)", self.hits.len());
        s
    }
}

/// What `strata search rebuild` reports.
#[derive(Debug, Serialize)]
pub(super) struct RebuildReport {
    rebuilt: bool,
    documents: u64,
    /// Rows whose mapping makes no document, left out.
    skipped: u64,
    /// Rows that do not decode (damaged), left out.
    damaged: u64,
    version: u64,
    elapsed_ms: u64,
    rate_per_s: u64,
    generation: Option<u64>,
    checkpoint: String,
}

impl Output for RebuildReport {
    fn text(&self) -> String {
        // Rows left out, when there are: how many, which, and where to look.
        let left_out = |n: u64, which: &str| {
            if n > 0 {
                format!(" ({n} {which})")
            } else {
                String::new()
            }
        };
        let skipped = left_out(
            self.skipped,
            "rows left out: their mapping makes no document; `verify` lists them",
        );
        let damaged = left_out(
            self.damaged,
            "damaged rows left out: they do not decode; `strata verify` names them",
        );
        format!(
            "rebuilt generation {}: {} documents from the snapshot at version {} ({} a second){skipped}{damaged}, now at checkpoint {}",
            self.generation
                .map_or_else(|| "none".to_owned(), |g| g.to_string()),
            self.documents,
            self.version,
            self.rate_per_s,
            self.checkpoint
        )
    }
}

/// What `strata search verify` reports.
#[derive(Debug, Serialize)]
pub(super) struct Verified {
    ok: bool,
    store_version: u64,
    checkpoint: String,
    documents: usize,
    rows: usize,
    missing: Vec<String>,
    extra: Vec<String>,
    stale: Vec<String>,
    duplicates: Vec<String>,
    /// Rows whose values do not decode: left out of the comparison.
    damaged: Vec<String>,
}

impl Output for Verified {
    fn text(&self) -> String {
        let mut s = String::new();
        for (keys, label) in [
            (&self.missing, "missing"),
            (&self.extra, "extra"),
            (&self.stale, "stale"),
            (&self.duplicates, "duplicate"),
        ] {
            for k in keys {
                let _ = writeln!(s, "PROBLEM {label} document {k}");
            }
        }
        for k in &self.damaged {
            let _ = writeln!(
                s,
                "PROBLEM damaged row {k} (its value does not decode; `strata verify` checks the store)"
            );
        }
        let _ = write!(
            s,
            "index at checkpoint {}, store at version {}: {} documents for {} rows: {}",
            self.checkpoint,
            self.store_version,
            self.documents,
            self.rows,
            if self.ok {
                "OK, exactly the store's projection"
            } else {
                "FAILED"
            }
        );
        s
    }
}

/// `verify` or `rebuild` with the mapping this tool knows for `name`.
fn typed<E: Engine>(
    db: &Db,
    outbox: &Outbox<'_, E>,
    name: &str,
    rebuild: bool,
) -> Result<SearchOut, Failure> {
    let index = find(db, name)?;
    let Some(dir) = index.dir.clone() else {
        return Err(Failure::Usage(format!(
            "search index {name} lived in memory"
        )));
    };
    let Some(mapping) = Mapping::of(name) else {
        return Err(Failure::Usage(format!(
            "this tool does not know the mapping of search index {name:?} (it knows {:?}): \
             verify and rebuild need the application's IndexSpec; list and query work on any index",
            Mapping::names()
        )));
    };
    let fail = |err: strata_search::SearchError| Failure::failed("the index mapping", &err);
    with_mapping!(mapping, fail, spec => run(outbox, spec, &Location::Dir(dir), rebuild))
}

fn run<E: Engine, K>(
    outbox: &Outbox<'_, E>,
    spec: IndexSpec<K>,
    location: &Location,
    rebuild: bool,
) -> Result<SearchOut, Failure>
where
    K: Key + 'static,
    K::Value: strata_codec::Value,
{
    let config = IndexerConfig::new(format!("strata-cli-{}", std::process::id()));
    let clock = Arc::new(SystemClock);
    let fail = |err: strata_search::SearchError| {
        let hint = if matches!(
            err,
            strata_search::SearchError::Outbox(strata_outbox::OutboxError::LeaseHeld { .. })
        ) {
            " (an indexer runs, or one stopped without closing less than a lease ago: stop it, or wait for the lease to expire)"
        } else {
            ""
        };
        Failure::Failed(format!("search: {}{hint}", ErrorChain(&err)))
    };
    if rebuild {
        let bar = Progress::spinner("rebuild");
        let (ix, done) =
            Indexer::open_rebuilt(outbox, spec, location, config, clock).map_err(fail)?;
        drop(bar);
        let out = RebuildReport {
            rebuilt: true,
            documents: done.documents,
            skipped: done.skipped,
            damaged: done.damaged,
            version: done.version,
            elapsed_ms: done.elapsed_ms,
            rate_per_s: done.rate(),
            generation: ix.generation(),
            checkpoint: ix.checkpoint().to_string(),
        };
        ix.close().map_err(fail)?;
        return Ok(SearchOut::RebuildReport(out));
    }
    let mut ix = Indexer::open(outbox, spec, location, config, clock).map_err(fail)?;
    // The lease goes back even when verify fails (a damaged index): else
    // it would hold off `rebuild`, the remedy, until it expired.
    let verified = ix.verify();
    let closed = ix.close();
    let v = verified.map_err(fail)?;
    closed.map_err(fail)?;
    let keys = |ks: &[Vec<u8>]| ks.iter().map(|k| render_key(k)).collect::<Vec<_>>();
    Ok(SearchOut::Verified(Verified {
        ok: v.is_exact(),
        store_version: v.store_version,
        checkpoint: v.checkpoint.to_string(),
        documents: v.documents,
        rows: v.rows,
        missing: keys(&v.missing),
        extra: keys(&v.extra),
        stale: keys(&v.stale),
        duplicates: keys(&v.duplicates),
        damaged: keys(&v.damaged),
    }))
}
