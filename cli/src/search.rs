//! `strata search`: the search indexes the catalog lists, read without
//! their mapping (list, query), and, for mappings this tool knows (the
//! reference schemas'), verified against the store and rebuilt.

use std::fmt::Write as _;
use std::sync::Arc;
use strata_engine::ErrorChain;

use serde_json::{Value as Json, json};
use strata_engine::{Engine, SystemClock};
use strata_keys::Key;
use strata_outbox::Outbox;
use strata_search::inspect::{CatalogIndex, IndexFiles, catalog_indexes};
use strata_search::{Freshness, IndexSpec, Indexer, IndexerConfig, Location};
use strata_store::Store;

use crate::Failure;
use crate::notation::render_key;
use crate::open::Db;
use crate::progress::Progress;

/// The mappings this tool can rebuild and verify: the index names of the
/// reference schemas.
pub const KNOWN: &[&str] = &["agent_memory"];

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
    IndexFiles::open(dir).map_err(|e| format!("{}: {}", ErrorChain(&e), dir.display()))
}

/// Every index of the catalog with its files' state and its consumer's.
pub fn list<E: Engine>(db: &Db, outbox: Option<&Outbox<'_, E>>) -> Vec<Json> {
    catalog_indexes(&db.catalog)
        .into_iter()
        .map(|i| {
            let mut out = json!({
                "name": i.name, "topic": i.topic, "consumer": i.consumer,
                "dir": i.dir.as_ref().map(|d| d.display().to_string()),
                "mapping_known": KNOWN.contains(&i.name.as_str()),
            });
            let files = files(&i);
            match &files {
                Ok(f) => {
                    out["generation"] = json!(f.generation());
                    out["checkpoint"] = json!(f.checkpoint().to_string());
                    out["documents"] = json!(f.documents());
                }
                Err(e) => out["error"] = json!(e),
            }
            // The index's own lag: entries after what its files hold (its
            // consumer's checkpoint may be further on when files were lost).
            if let Some(ob) = outbox {
                match ob.checkpoint(&i.topic, &i.consumer) {
                    Ok(p) => {
                        out["consumer_checkpoint"] = json!(p.to_string());
                        if let Ok(f) = &files
                            && f.checkpoint() < p
                        {
                            out["behind"] = json!(true);
                        }
                    }
                    Err(e) => out["error"] = json!(ErrorChain(&e).to_string()),
                }
                if let Ok(f) = &files {
                    match ob.lag_after(&i.topic, f.checkpoint()) {
                        Ok(l) => {
                            out["lag_entries"] = json!(l.entries);
                            out["oldest_age_ms"] = json!(l.oldest_age_ms);
                        }
                        Err(e) => out["error"] = json!(ErrorChain(&e).to_string()),
                    }
                }
            }
            out
        })
        .collect()
}

pub fn list_text(list: &[Json]) -> String {
    if list.is_empty() {
        return "search indexes: none\n".to_owned();
    }
    let mut s = "search indexes:\n".to_owned();
    for i in list {
        let _ = write!(
            s,
            "  {} ({})",
            i["name"].as_str().unwrap_or(""),
            i["dir"].as_str().unwrap_or("in memory")
        );
        if let Some(e) = i["error"].as_str() {
            let _ = writeln!(s, ": ERROR {e}");
        } else {
            let _ = write!(
                s,
                ": generation {}, checkpoint {}, {} documents, lag {} entries",
                i["generation"],
                i["checkpoint"].as_str().unwrap_or(""),
                i["documents"],
                i["lag_entries"]
            );
            if i["behind"] == json!(true) {
                let _ = write!(
                    s,
                    ", BEHIND its consumer's checkpoint {} (rebuild it)",
                    i["consumer_checkpoint"].as_str().unwrap_or("")
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
pub fn check<E: Engine>(
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
    let view = store.read().map_err(|e| ErrorChain(&e).to_string())?;
    let verified = match name {
        "agent_memory" => {
            let spec = strata_schemas::agent_memory::search_spec()
                .map_err(|e| ErrorChain(&e).to_string())?;
            files
                .compare(&view, &spec)
                .map_err(|e| ErrorChain(&e).to_string())?
        }
        _ => return Ok(None),
    };
    let mut out = Vec::new();
    for (what, keys) in [
        ("missing (a row without its document)", &verified.missing),
        ("extra (a document without its row)", &verified.extra),
        ("stale (a document of another value)", &verified.stale),
        (
            "duplicate (more than one document for one row)",
            &verified.duplicates,
        ),
    ] {
        for k in keys {
            out.push(format!("search index {name}: {what}: {}", render_key(k)));
        }
    }
    Ok(Some(out))
}

/// `query`: the best hits, each with its key decoded and whether its row
/// still holds the indexed value.
pub fn query<E: Engine>(
    db: &Db,
    store: &Store<E>,
    name: &str,
    text: &str,
    limit: usize,
) -> Result<Json, Failure> {
    let index = find(db, name)?;
    let f = files(&index).map_err(Failure::Failed)?;
    let hits = f
        .query(text, limit)
        // The error names itself ("query: ...").
        .map_err(|err| Failure::Failed(ErrorChain(&err).to_string()))?;
    let view = store
        .read()
        .map_err(|err| Failure::failed("snapshot", &err))?;
    let hits: Vec<Json> = hits
        .iter()
        .map(|h| {
            let freshness = match h.freshness(&view) {
                Ok(Freshness::Current) => "current".to_owned(),
                Ok(Freshness::Changed) => "changed since indexed".to_owned(),
                Ok(Freshness::Vanished) => "gone from the store".to_owned(),
                Err(err) => format!("unknown: {}", ErrorChain(&err)),
            };
            json!({
                "key": render_key(&h.key), "score": h.score, "version": h.version,
                "snippet": h.snippet, "freshness": freshness,
            })
        })
        .collect();
    Ok(json!({
        "index": name, "checkpoint": f.checkpoint().to_string(),
        "boosts": "not applied (the mapping is the application's)",
        "hits": hits,
    }))
}

pub fn query_text(o: &Json) -> String {
    let mut s = format!(
        "index {} at checkpoint {}:\n",
        o["index"].as_str().unwrap_or(""),
        o["checkpoint"].as_str().unwrap_or("")
    );
    for h in o["hits"].as_array().into_iter().flatten() {
        let _ = writeln!(
            s,
            "  {:.3} {} ({}): {}",
            h["score"].as_f64().unwrap_or(0.0),
            h["key"].as_str().unwrap_or(""),
            h["freshness"].as_str().unwrap_or(""),
            h["snippet"].as_str().unwrap_or("").replace('\n', " / ")
        );
    }
    let _ = write!(s, "({} hits)", o["hits"].as_array().map_or(0, Vec::len));
    s
}

/// `verify` or `rebuild` with the mapping this tool knows for `name`.
pub fn typed<E: Engine>(
    db: &Db,
    outbox: &Outbox<'_, E>,
    name: &str,
    rebuild: bool,
) -> Result<Json, Failure> {
    let index = find(db, name)?;
    let Some(dir) = index.dir.clone() else {
        return Err(Failure::Usage(format!(
            "search index {name} lived in memory"
        )));
    };
    match name {
        "agent_memory" => {
            let spec = strata_schemas::agent_memory::search_spec()
                .map_err(|err| Failure::failed("the agent memory mapping", &err))?;
            run(outbox, spec, &Location::Dir(dir), rebuild)
        }
        _ => Err(Failure::Usage(format!(
            "this tool does not know the mapping of search index {name:?} (it knows {KNOWN:?}): \
             verify and rebuild need the application's IndexSpec; list and query work on any index"
        ))),
    }
}

fn run<E: Engine, K>(
    outbox: &Outbox<'_, E>,
    spec: IndexSpec<K>,
    location: &Location,
    rebuild: bool,
) -> Result<Json, Failure>
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
        let out = json!({
            "rebuilt": true, "documents": done.documents, "version": done.version,
            "elapsed_ms": done.elapsed_ms, "rate_per_s": done.rate(),
            "generation": ix.generation(), "checkpoint": ix.checkpoint().to_string(),
        });
        ix.close().map_err(fail)?;
        return Ok(out);
    }
    let mut ix = Indexer::open(outbox, spec, location, config, clock).map_err(fail)?;
    let v = ix.verify().map_err(fail)?;
    ix.close().map_err(fail)?;
    let keys = |ks: &[Vec<u8>]| ks.iter().map(|k| render_key(k)).collect::<Vec<_>>();
    Ok(json!({
        "ok": v.is_exact(), "store_version": v.store_version,
        "checkpoint": v.checkpoint.to_string(), "documents": v.documents, "rows": v.rows,
        "missing": keys(&v.missing), "extra": keys(&v.extra), "stale": keys(&v.stale),
        "duplicates": keys(&v.duplicates),
    }))
}

pub fn typed_text(o: &Json) -> String {
    if o["rebuilt"] == json!(true) {
        return format!(
            "rebuilt generation {}: {} documents from the snapshot at version {} ({} a second), now at checkpoint {}",
            o["generation"],
            o["documents"],
            o["version"],
            o["rate_per_s"],
            o["checkpoint"].as_str().unwrap_or("")
        );
    }
    let mut s = String::new();
    for (what, label) in [
        ("missing", "missing"),
        ("extra", "extra"),
        ("stale", "stale"),
        ("duplicates", "duplicate"),
    ] {
        for k in o[what].as_array().into_iter().flatten() {
            let _ = writeln!(s, "PROBLEM {label} document {}", k.as_str().unwrap_or(""));
        }
    }
    let _ = write!(
        s,
        "index at checkpoint {}, store at version {}: {} documents for {} rows: {}",
        o["checkpoint"].as_str().unwrap_or(""),
        o["store_version"],
        o["documents"],
        o["rows"],
        if o["ok"] == json!(true) {
            "OK, exactly the store's projection"
        } else {
            "FAILED"
        }
    );
    s
}
