//! `strata info`: the engine, versions, keyspaces with their roles, the
//! catalog, outbox consumers and search indexes.

use super::*;

/// The role of a keyspace: from the catalog, or guessed from its name.
pub(super) fn role_of(db: &Db, name: &str) -> (String, String, bool) {
    for entry in &db.catalog {
        if entry.kind == "keyspace"
            && entry.name == name
            && let Ok((role, profile)) =
                strata_keys::tuple::unpack::<(String, String)>(&entry.detail).or_else(|_| {
                    strata_keys::tuple::unpack::<(String, String, bool)>(&entry.detail)
                        .map(|(r, p, _)| (r, p))
                })
        {
            return (role, profile, true);
        }
    }
    let role = if name == db.options.data_keyspace {
        "data"
    } else if name == db.options.system_keyspace {
        "system"
    } else if name.starts_with("strata.outbox") {
        "space"
    } else {
        "unknown"
    };
    (role.to_owned(), "unknown".to_owned(), false)
}

/// What `strata info` reports.
#[derive(Debug, Serialize)]
pub(super) struct Info {
    search_indexes: Vec<super::search::IndexListing>,
    engine: &'static str,
    path: String,
    last_version: u64,
    durable_version: u64,
    /// Whether the store's catalog describes the database.
    catalog: bool,
    keyspaces: Vec<KeyspaceInfo>,
    catalog_entries: Vec<CatalogInfo>,
    consumers: Vec<ConsumerInfo>,
}

/// A keyspace, with its role and size.
#[derive(Debug, Serialize)]
struct KeyspaceInfo {
    name: String,
    role: String,
    profile: String,
    described_by_catalog: bool,
    rows: u64,
    rows_exact: bool,
    bytes: u64,
    bytes_exact: bool,
}

/// A catalog entry, without its detail.
#[derive(Debug, Serialize)]
struct CatalogInfo {
    kind: String,
    name: String,
    format_version: u64,
}

/// Where an outbox consumer stands, or why that could not be read.
#[derive(Debug, Serialize)]
pub(super) struct ConsumerInfo {
    pub(super) topic: String,
    consumer: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    checkpoint: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    lag_entries: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    oldest_age_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    dead_letters: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

pub(super) fn info<E: Engine + Statistics>(db: &Db, e: &E) -> Result<Info, Failure> {
    let stats = e
        .stats()
        .map_err(|err| Failure::failed("statistics", &err))?;
    let keyspaces = stats
        .iter()
        .map(|s| {
            let (role, profile, from_catalog) = role_of(db, &s.name);
            KeyspaceInfo {
                name: s.name.clone(),
                role,
                profile,
                described_by_catalog: from_catalog,
                rows: s.entries,
                rows_exact: s.entries_exact,
                bytes: s.bytes,
                bytes_exact: s.bytes_exact,
            }
        })
        .collect();
    let catalog_entries = db
        .catalog
        .iter()
        .map(|c| CatalogInfo {
            kind: c.kind.clone(),
            name: c.name.clone(),
            format_version: c.version,
        })
        .collect();
    let store = store_on(db, e)?;
    let outbox = outbox_of(db, &store)?;
    Ok(Info {
        search_indexes: super::search::list(db, outbox.as_ref()),
        engine: db.kind.name(),
        path: db.path.clone(),
        last_version: e.last_version(),
        durable_version: e.durable_version(),
        catalog: db.described,
        keyspaces,
        catalog_entries,
        consumers: consumers(outbox.as_ref())?,
    })
}

/// Every registered outbox consumer (the outbox's own list), with where
/// it stands.
pub(super) fn consumers<E: Engine>(
    outbox: Option<&Outbox<'_, E>>,
) -> Result<Vec<ConsumerInfo>, Failure> {
    let Some(outbox) = outbox else {
        return Ok(Vec::new());
    };
    let list = outbox
        .consumers()
        .map_err(|err| Failure::failed("outbox consumers", &err))?;
    Ok(list
        .into_iter()
        .map(|(topic, consumer)| match outbox.status(&topic, &consumer) {
            Ok(s) => ConsumerInfo {
                topic,
                consumer,
                checkpoint: Some(s.checkpoint.to_string()),
                lag_entries: Some(s.lag.entries),
                oldest_age_ms: Some(s.lag.oldest_age_ms),
                dead_letters: Some(s.dead_letters),
                error: None,
            },
            Err(err) => ConsumerInfo {
                topic,
                consumer,
                checkpoint: None,
                lag_entries: None,
                oldest_age_ms: None,
                dead_letters: None,
                error: Some(ErrorChain(&err).to_string()),
            },
        })
        .collect())
}

impl Output for Info {
    fn text(&self) -> String {
        let mut s = format!(
            "engine: {} ({})\nversions: last {}, durable {}\n",
            self.engine, self.path, self.last_version, self.durable_version
        );
        s.push_str(if self.catalog {
            "catalog: yes\n"
        } else {
            "catalog: none (roles guessed from the default names; values decoded raw)\n"
        });
        s.push_str("keyspaces:\n");
        for k in &self.keyspaces {
            let approx = |exact: bool| if exact { "" } else { "~" };
            let _ = writeln!(
                s,
                "  {:<24} {:<8} {:<13} {}{} rows, {}{} bytes",
                k.name,
                k.role,
                k.profile,
                approx(k.rows_exact),
                k.rows,
                approx(k.bytes_exact),
                k.bytes
            );
        }
        if !self.catalog_entries.is_empty() {
            s.push_str("catalog entries:\n");
            for c in &self.catalog_entries {
                let _ = writeln!(
                    s,
                    "  {:<16} {} (format {})",
                    c.kind, c.name, c.format_version
                );
            }
        }
        s.push_str(&consumers_text(&self.consumers));
        s.push_str(&super::search::list_text(&self.search_indexes));
        s.trim_end().to_owned()
    }
}

pub(super) fn consumers_text(list: &[ConsumerInfo]) -> String {
    if list.is_empty() {
        return "outbox consumers: none\n".to_owned();
    }
    let mut s = "outbox consumers:\n".to_owned();
    for c in list {
        match &c.error {
            Some(e) => {
                let _ = writeln!(s, "  {}/{}: ERROR {e}", c.topic, c.consumer);
            }
            None => {
                let _ = writeln!(
                    s,
                    "  {}/{}: checkpoint {}, lag {} entries, oldest {} ms, {} dead letters",
                    c.topic,
                    c.consumer,
                    c.checkpoint.as_deref().unwrap_or(""),
                    c.lag_entries.unwrap_or(0),
                    c.oldest_age_ms.unwrap_or(0),
                    c.dead_letters.unwrap_or(0)
                );
            }
        }
    }
    s
}
