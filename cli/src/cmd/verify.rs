//! `strata verify`: the engine's checksums, every envelope, chunks, the
//! expiry index, quotas, outbox consumers and search indexes, and the
//! agent-memory and NoKV records where the database has them.

use super::*;

/// What `strata verify` reports.
#[derive(Debug, Serialize)]
pub(super) struct Verification {
    /// Nothing wrong.
    pub(super) ok: bool,
    pub(super) version: u64,
    values: u64,
    counters: u64,
    chunked_values: u64,
    chunk_rows: u64,
    expiry_entries: u64,
    stale_expiry_entries: u64,
    /// Quota scopes recounted (`None`: the catalog gives no scope rule).
    quota_scopes: Option<u64>,
    outbox_consumers: usize,
    search_indexes: usize,
    /// The agent-memory keyspaces read back, when the database has them.
    agent_memory: Option<AgentMemoryCounts>,
    /// NoKV's namespaces checked, when the database has its keyspaces.
    nokv: Option<NokvCounts>,
    pub(super) problems: Vec<String>,
    notes: Vec<String>,
}

/// What the agent-memory check read.
#[derive(Debug, Serialize)]
struct AgentMemoryCounts {
    events: u64,
    toc_versions: u64,
    nodes: u64,
    grips: u64,
    index_rows: u64,
}

/// What the NoKV check read.
#[derive(Debug, Serialize)]
struct NokvCounts {
    mounts: u64,
    inodes: u64,
    dentries: u64,
    /// Upload records (objects of writes not applied yet, or never).
    uploads: u64,
}

/// NoKV's namespaces, when the database has its history keyspace: each
/// mount's dentries, inodes, parent index and manifests checked against
/// one another (`strata_schemas::nokv::check_namespace`).
fn check_nokv<E: Engine>(
    db: &Db,
    store: &Store<E>,
    problems: &mut Vec<String>,
    notes: &mut Vec<String>,
) -> Option<NokvCounts> {
    use strata_schemas::nokv;
    if !db.keyspaces.iter().any(|k| k == nokv::HISTORY_SPACE) {
        return None;
    }
    let mut counts = NokvCounts {
        mounts: 0,
        inodes: 0,
        dentries: 0,
        uploads: 0,
    };
    let checked = nokv::mounts(store).and_then(|mounts| {
        for mount in mounts {
            let check = nokv::check_namespace(store, mount)?;
            problems.extend(
                check
                    .problems
                    .iter()
                    .map(|p| format!("nokv mount {mount}: {p}")),
            );
            if let Some(oldest) = check.oldest_upload_ms {
                let age_s = store.clock().now_ms().saturating_sub(oldest) / 1_000;
                notes.push(format!(
                    "nokv mount {mount}: {} upload records, the oldest begun {age_s} s ago \
                     (objects of writes not applied yet, or left by writers that died: \
                     `Nokv::collect_uploads` deletes them once older than the grace, an hour by default)",
                    check.uploads
                ));
            }
            counts.mounts += 1;
            counts.inodes += check.inodes;
            counts.dentries += check.dentries;
            counts.uploads += check.uploads;
        }
        Ok(())
    });
    match checked {
        Ok(()) => Some(counts),
        Err(err) => {
            problems.push(format!("nokv: {}", ErrorChain(&err)));
            None
        }
    }
}

/// The agent-memory keyspaces, when the database has every one of them:
/// each row read back and checked against the others
/// (`strata_schemas::agent_memory::verify`).
fn check_agent_memory<E: Engine>(
    db: &Db,
    store: &Store<E>,
    problems: &mut Vec<String>,
) -> Option<AgentMemoryCounts> {
    use strata_schemas::agent_memory as am;
    let has = |n: &str| db.keyspaces.iter().any(|k| k == n);
    if ![am::EVENTS, am::TOC_NODES, am::TOC_LATEST, am::GRIPS]
        .into_iter()
        .all(has)
    {
        return None;
    }
    match am::verify(store) {
        Ok(check) => {
            problems.extend(check.problems.iter().map(|p| format!("agent memory: {p}")));
            Some(AgentMemoryCounts {
                events: check.events,
                toc_versions: check.toc_versions,
                nodes: check.nodes,
                grips: check.grips,
                index_rows: check.index_rows,
            })
        }
        Err(err) => {
            problems.push(format!("agent memory: {}", ErrorChain(&err)));
            None
        }
    }
}

pub(super) fn verify<E: Engine + strata_engine::Integrity>(
    db: &Db,
    e: &E,
) -> Result<Verification, Failure> {
    // The engine's own checksums first (redb's pages, RocksDB's blocks):
    // damage there may not show in the rows read below.
    let engine_check = e.check_integrity();
    let store = store_on(db, e)?;
    let bar = Progress::new("verify");
    let v = store
        .verify_with(&mut |rows| {
            bar.set(rows);
            if stopped() {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        })
        .map_err(|err| Failure::failed("verify", &err))?;
    drop(bar);
    if !v.complete {
        return Err(Failure::Stopped);
    }
    let mut problems: Vec<String> = v.problems.iter().map(ToString::to_string).collect();
    let mut notes = Vec::new();
    match engine_check {
        Ok(r) => notes.push(match r.checked {
            Some(n) => format!("the engine's own checksums verified ({n} entries)"),
            None => "the engine's own checksums verified".to_owned(),
        }),
        Err(strata_engine::CapabilityError::Unsupported { why, .. }) => {
            notes.push(format!("no engine integrity check: {why}"));
        }
        Err(err) => problems.push(format!(
            "the engine's integrity check failed: {}",
            ErrorChain(&err)
        )),
    }
    if !db.described {
        notes
            .push("no catalog: only the default data and system keyspaces were checked".to_owned());
    }
    if v.quota_scopes.is_none() {
        notes.push(
            "quota counters not recounted: the catalog gives no scope rule (a scope function is application code)"
                .to_owned(),
        );
    }
    let outbox = outbox_of(db, &store)?;
    let (indexes_checked, index_problems, index_notes) =
        super::search::check(db, e, outbox.as_ref());
    problems.extend(index_problems);
    notes.extend(index_notes);
    let consumers_checked = outbox
        .as_ref()
        .map_or(0, |o| check_consumers(db, e, o, &mut problems));
    let agent_memory = check_agent_memory(db, &store, &mut problems);
    let nokv = check_nokv(db, &store, &mut problems, &mut notes);
    Ok(Verification {
        ok: problems.is_empty(),
        version: v.version,
        values: v.values,
        counters: v.counters,
        chunked_values: v.chunked,
        chunk_rows: v.chunk_rows,
        expiry_entries: v.expiry_entries,
        stale_expiry_entries: v.stale_expiry_entries,
        quota_scopes: v.quota_scopes,
        outbox_consumers: consumers_checked,
        search_indexes: indexes_checked,
        agent_memory,
        nokv,
        problems,
        notes,
    })
}

impl Output for Verification {
    fn text(&self) -> String {
        let mut s = String::new();
        for p in &self.problems {
            let _ = writeln!(s, "PROBLEM {p}");
        }
        for n in &self.notes {
            let _ = writeln!(s, "note: {n}");
        }
        let quota = self
            .quota_scopes
            .map_or("not checked".to_owned(), |n| format!("{n} scopes"));
        let _ = writeln!(
            s,
            "checked at version {}: {} values ({} chunked, {} chunk rows), {} counters, {} expiry entries ({} stale), quota {}, {} outbox consumers, {} search indexes",
            self.version,
            self.values,
            self.chunked_values,
            self.chunk_rows,
            self.counters,
            self.expiry_entries,
            self.stale_expiry_entries,
            quota,
            self.outbox_consumers,
            self.search_indexes
        );
        if let Some(am) = &self.agent_memory {
            let _ = writeln!(
                s,
                "agent memory: {} events, {} TOC versions of {} nodes, {} grips, {} index rows",
                am.events, am.toc_versions, am.nodes, am.grips, am.index_rows
            );
        }
        if let Some(n) = &self.nokv {
            let _ = writeln!(
                s,
                "nokv: {} mounts, {} inodes, {} dentries",
                n.mounts, n.inodes, n.dentries
            );
        }
        if self.problems.is_empty() {
            s.push_str("OK: nothing wrong");
        } else {
            let _ = write!(s, "FAILED: {} problems", self.problems.len());
        }
        s
    }
}

/// The outbox's consumers: each the catalog names has a checkpoint, and
/// each checkpoint and its dead letters read, the checkpoint not beyond
/// the last commit. Returns how many consumers were checked.
fn check_consumers<E: Engine>(
    db: &Db,
    e: &E,
    outbox: &Outbox<'_, &E>,
    problems: &mut Vec<String>,
) -> usize {
    let mut checked = 0;
    let registered = match outbox.consumers() {
        Ok(list) => list,
        Err(err) => {
            problems.push(format!("outbox consumers: {}", ErrorChain(&err)));
            Vec::new()
        }
    };
    // The catalog names each consumer the outbox registered; one it
    // names without a checkpoint lost its state.
    for entry in db
        .catalog
        .iter()
        .filter(|c| c.kind == strata_outbox::CATALOG_CONSUMER)
    {
        if !registered
            .iter()
            .any(|(t, c)| format!("{t}/{c}") == entry.name)
        {
            problems.push(format!(
                "outbox consumer {}: in the catalog, but its checkpoint is gone",
                entry.name
            ));
        }
    }
    for (topic, consumer) in registered {
        checked += 1;
        match outbox.checkpoint(&topic, &consumer) {
            Ok(p) if p.version > e.last_version() => problems.push(format!(
                "outbox consumer {topic}/{consumer}: checkpoint {p} is beyond the last commit {}",
                e.last_version()
            )),
            Ok(_) => {}
            Err(err) => problems.push(format!(
                "outbox consumer {topic}/{consumer}: {}",
                ErrorChain(&err)
            )),
        }
        if let Err(err) = outbox.dead_letters(&topic, &consumer) {
            problems.push(format!(
                "outbox consumer {topic}/{consumer}: dead letters: {}",
                ErrorChain(&err)
            ));
        }
    }
    checked
}
