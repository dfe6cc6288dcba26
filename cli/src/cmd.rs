//! The commands.

use std::fmt::Write as _;
use std::ops::{Bound, ControlFlow};
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;
use strata_engine::ErrorChain;

use serde_json::{Value as Json, json};
use strata_engine::{
    Backup, Commit, Compact, Durability, Engine, KeyspaceSpec, RangeSpec, Snapshot, Statistics,
    SystemClock, SystemRng,
};
use strata_keys::KeyRange;
use strata_outbox::{Outbox, OutboxConfig, Position, Start};
use strata_store::Store;

use crate::notation::{parse_key, render_key};
use crate::open::{self, Db, Kind};
use crate::progress::{Progress, stopped};
use crate::show::{data_value_json, key_json, raw_value_json, row_text};
use crate::{Cli, Command, Failure, OutboxAction, ScanArgs, SearchAction, with_engine};

/// Runs the command; the exit code on success.
#[allow(clippy::too_many_lines)] // one arm per command
pub fn run(cli: &Cli) -> Result<ExitCode, Failure> {
    let sys = cli.system_keyspace.as_deref();
    match &cli.command {
        Command::Info { path } => {
            let db = open::open(cli.engine, path, sys, true)?;
            let out = with_engine!(&db.engine, e => info(&db, e))?;
            print(cli, &out, info_text);
            Ok(ExitCode::SUCCESS)
        }
        Command::Scan(args) => {
            let db = open::open(cli.engine, &args.path, sys, true)?;
            let out = with_engine!(&db.engine, e => scan(&db, e, args))?;
            print(cli, &out, rows_text);
            Ok(ExitCode::SUCCESS)
        }
        Command::Get {
            path,
            keyspace,
            key,
        } => {
            let db = open::open(cli.engine, path, sys, true)?;
            let key = parse_key(key).map_err(Failure::Usage)?;
            let out = with_engine!(&db.engine, e => get(&db, e, keyspace, &key))?;
            let found = out["found"] == json!(true);
            print(cli, &out, |o| {
                if o["found"] == json!(true) {
                    row_text(&o["key"], &o["value"])
                } else {
                    format!("{} not found", o["key"]["key"].as_str().unwrap_or(""))
                }
            });
            Ok(if found {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            })
        }
        Command::Verify { path } => {
            let db = open::open(cli.engine, path, sys, true)?;
            let out = with_engine!(&db.engine, e => verify(&db, e))?;
            let ok = out["ok"] == json!(true);
            print(cli, &out, verify_text);
            Ok(if ok {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            })
        }
        Command::Backup { path, dest } => {
            // RocksDB checkpoints a read-only instance without what its log
            // holds beyond the tables: open it writable (it flushes).
            let kind = match cli.engine {
                Some(k) => k,
                None => open::detect(path)?,
            };
            let db = open::open(Some(kind), path, sys, kind != Kind::Rocks)?;
            let out = with_engine!(&db.engine, e => backup(&db, e, dest))?;
            print(cli, &out, |o| {
                format!(
                    "backed up {} at version {} to {}",
                    o["source"].as_str().unwrap_or(""),
                    o["version"],
                    o["dest"].as_str().unwrap_or("")
                )
            });
            Ok(ExitCode::SUCCESS)
        }
        Command::Restore { backup, dest } => {
            let out = restore(cli.engine, backup, dest)?;
            print(cli, &out, |o| {
                format!(
                    "restored {} (version {}) to {}",
                    o["backup"].as_str().unwrap_or(""),
                    o["version"],
                    o["dest"].as_str().unwrap_or("")
                )
            });
            Ok(ExitCode::SUCCESS)
        }
        Command::Copy {
            src,
            dest,
            dest_engine,
        } => {
            let out = copy(cli, src, dest, *dest_engine)?;
            print(cli, &out, |o| {
                let indexes: Vec<&str> = o["search_indexes_not_copied"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(Json::as_str)
                    .collect();
                let indexes = if indexes.is_empty() {
                    String::new()
                } else {
                    format!(
                        "\nsearch indexes not copied (their files stay with the source; rebuild them on the copy): {}",
                        indexes.join(", ")
                    )
                };
                format!(
                    "copied {} rows of {} keyspaces{} from {} to {}; verified equal; version raised to {}{indexes}",
                    o["rows"],
                    o["keyspaces"],
                    if o["resumed"] == json!(true) {
                        " (resumed after an interrupted copy)"
                    } else {
                        ""
                    },
                    o["source"].as_str().unwrap_or(""),
                    o["dest"].as_str().unwrap_or(""),
                    o["version"]
                )
            });
            Ok(ExitCode::SUCCESS)
        }
        Command::Compact { path } => {
            let out = compact(cli, path)?;
            print(cli, &out, |o| {
                format!(
                    "compacted {} ({})",
                    o["path"].as_str().unwrap_or(""),
                    o["engine"].as_str().unwrap_or("")
                )
            });
            Ok(ExitCode::SUCCESS)
        }
        Command::Sweep { path, max_commits } => {
            let db = open::open(cli.engine, path, sys, false)?;
            let out = with_engine!(&db.engine, e => sweep(&db, e, *max_commits))?;
            print(cli, &out, |o| {
                format!(
                    "removed {} expired values and {} stale index entries in {} commits{}",
                    o["removed"],
                    o["stale"],
                    o["commits"],
                    if o["more"] == json!(true) {
                        "; more remain"
                    } else {
                        ""
                    }
                )
            });
            Ok(ExitCode::SUCCESS)
        }
        Command::Search { path, action } => {
            let read_only = matches!(action, SearchAction::List | SearchAction::Query { .. });
            let db = open::open(cli.engine, path, sys, read_only)?;
            let out = with_engine!(&db.engine, e => search(&db, e, action))?;
            let failed = out["ok"] == json!(false);
            print(cli, &out, |o| match action {
                SearchAction::List => {
                    crate::search::list_text(o["indexes"].as_array().map_or(&[], Vec::as_slice))
                        .trim_end()
                        .to_owned()
                }
                SearchAction::Query { .. } => crate::search::query_text(o),
                SearchAction::Verify { .. } | SearchAction::Rebuild { .. } => {
                    crate::search::typed_text(o)
                }
            });
            Ok(if failed {
                ExitCode::from(1)
            } else {
                ExitCode::SUCCESS
            })
        }
        Command::Outbox { path, action } => {
            let read_only = matches!(action, OutboxAction::List | OutboxAction::Dead { .. });
            let db = open::open(cli.engine, path, sys, read_only)?;
            let out = with_engine!(&db.engine, e => outbox(&db, e, action))?;
            print(cli, &out, outbox_text);
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn print(cli: &Cli, out: &Json, text: impl Fn(&Json) -> String) {
    if cli.json {
        crate::emit(&serde_json::to_string_pretty(out).unwrap_or_default());
    } else {
        crate::emit(&text(out));
    }
}

fn store_on<E: Engine>(db: &Db, e: E) -> Result<Store<E>, Failure> {
    Store::open(e, open::store_options(db))
        .map_err(|err| Failure::failed("cannot open the store", &err))
}

/// The role of a keyspace: from the catalog, or guessed from its name.
fn role_of(db: &Db, name: &str) -> (String, String, bool) {
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

fn info<E: Engine + Statistics>(db: &Db, e: &E) -> Result<Json, Failure> {
    let stats = e
        .stats()
        .map_err(|err| Failure::failed("statistics", &err))?;
    let keyspaces: Vec<Json> = stats
        .iter()
        .map(|s| {
            let (role, profile, from_catalog) = role_of(db, &s.name);
            json!({
                "name": s.name, "role": role, "profile": profile,
                "described_by_catalog": from_catalog,
                "rows": s.entries, "rows_exact": s.entries_exact,
                "bytes": s.bytes, "bytes_exact": s.bytes_exact,
            })
        })
        .collect();
    let catalog: Vec<Json> = db
        .catalog
        .iter()
        .map(|c| json!({ "kind": c.kind, "name": c.name, "format_version": c.version }))
        .collect();
    let store = store_on(db, e)?;
    let outbox = outbox_of(db, &store)?;
    Ok(json!({
        "search_indexes": crate::search::list(db, outbox.as_ref()),
        "engine": db.kind.name(),
        "path": db.path,
        "last_version": e.last_version(),
        "durable_version": e.durable_version(),
        "catalog": db.described,
        "keyspaces": keyspaces,
        "catalog_entries": catalog,
        "consumers": consumers(db, &store)?,
    }))
}

/// Every outbox consumer the catalog names, with checkpoint and lag.
fn consumers<E: Engine>(db: &Db, store: &Store<E>) -> Result<Vec<Json>, Failure> {
    let Some(outbox) = outbox_of(db, store)? else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    for (topic, consumer) in catalog_consumers(db) {
        let checkpoint = outbox.checkpoint(&topic, &consumer);
        let lag = outbox.lag(&topic, &consumer);
        out.push(match (checkpoint, lag) {
            (Ok(c), Ok(l)) => json!({
                "topic": topic, "consumer": consumer, "checkpoint": c.to_string(),
                "lag_entries": l.entries, "oldest_age_ms": l.oldest_age_ms,
            }),
            (c, l) => json!({
                "topic": topic, "consumer": consumer,
                "error": c.err().map(|e| ErrorChain(&e).to_string()).or_else(|| l.err().map(|e| ErrorChain(&e).to_string())),
            }),
        });
    }
    Ok(out)
}

fn catalog_consumers(db: &Db) -> Vec<(String, String)> {
    db.catalog
        .iter()
        .filter(|c| c.kind == strata_outbox::CATALOG_CONSUMER)
        .filter_map(|c| {
            strata_keys::tuple::unpack::<(String, String, u64, u16)>(&c.detail)
                .ok()
                .map(|(t, c, _, _)| (t, c))
        })
        .collect()
}

fn outbox_of<'s, E: Engine>(
    db: &Db,
    store: &'s Store<E>,
) -> Result<Option<Outbox<'s, E>>, Failure> {
    let has = |n: &str| db.keyspaces.iter().any(|k| k == n);
    if !(has(strata_outbox::ENTRIES) && has(strata_outbox::STATE) && has(strata_outbox::DEAD)) {
        return Ok(None);
    }
    Outbox::new(
        store,
        OutboxConfig::default(),
        Arc::new(SystemClock),
        Box::new(SystemRng::new()),
    )
    .map(Some)
    .map_err(|e| Failure::failed("cannot open the outbox", &e))
}

fn info_text(o: &Json) -> String {
    let mut s = format!(
        "engine: {} ({})\nversions: last {}, durable {}\n",
        o["engine"].as_str().unwrap_or(""),
        o["path"].as_str().unwrap_or(""),
        o["last_version"],
        o["durable_version"]
    );
    s.push_str(if o["catalog"] == json!(true) {
        "catalog: yes\n"
    } else {
        "catalog: none (roles guessed from the default names; values decoded raw)\n"
    });
    s.push_str("keyspaces:\n");
    for k in o["keyspaces"].as_array().into_iter().flatten() {
        let approx = |exact: &Json| if *exact == json!(true) { "" } else { "~" };
        let _ = writeln!(
            s,
            "  {:<24} {:<8} {:<13} {}{} rows, {}{} bytes",
            k["name"].as_str().unwrap_or(""),
            k["role"].as_str().unwrap_or(""),
            k["profile"].as_str().unwrap_or(""),
            approx(&k["rows_exact"]),
            k["rows"],
            approx(&k["bytes_exact"]),
            k["bytes"]
        );
    }
    let entries = o["catalog_entries"].as_array().cloned().unwrap_or_default();
    if !entries.is_empty() {
        s.push_str("catalog entries:\n");
        for c in entries {
            let _ = writeln!(
                s,
                "  {:<16} {} (format {})",
                c["kind"].as_str().unwrap_or(""),
                c["name"].as_str().unwrap_or(""),
                c["format_version"]
            );
        }
    }
    s.push_str(&consumers_text(o["consumers"].as_array()));
    s.push_str(&crate::search::list_text(
        o["search_indexes"].as_array().map_or(&[], Vec::as_slice),
    ));
    s.trim_end().to_owned()
}

fn consumers_text(list: Option<&Vec<Json>>) -> String {
    let list = list.cloned().unwrap_or_default();
    if list.is_empty() {
        return "outbox consumers: none\n".to_owned();
    }
    let mut s = "outbox consumers:\n".to_owned();
    for c in list {
        if let Some(e) = c["error"].as_str() {
            let _ = writeln!(
                s,
                "  {}/{}: ERROR {e}",
                c["topic"].as_str().unwrap_or(""),
                c["consumer"].as_str().unwrap_or("")
            );
        } else {
            let _ = writeln!(
                s,
                "  {}/{}: checkpoint {}, lag {} entries, oldest {} ms",
                c["topic"].as_str().unwrap_or(""),
                c["consumer"].as_str().unwrap_or(""),
                c["checkpoint"].as_str().unwrap_or(""),
                c["lag_entries"],
                c["oldest_age_ms"]
            );
        }
    }
    s
}

fn range_of(args: &ScanArgs) -> Result<RangeSpec, Failure> {
    let parse = |s: &str| parse_key(s).map_err(Failure::Usage);
    let mut spec = if let Some(p) = &args.prefix {
        RangeSpec::prefix(&parse(p)?)
    } else if let Some(t) = &args.tuple_prefix {
        // A tuple prefix is a tuple: `am` would be taken as the bytes "am",
        // which begin no tuple, and find nothing without a word.
        if !t.trim_start().starts_with('(') {
            return Err(Failure::Usage(format!(
                "--tuple-prefix takes a tuple, as in ({t:?},) or (\"am\", 7); --prefix takes bytes"
            )));
        }
        RangeSpec::from(KeyRange::tuple_prefix(&parse(t)?))
    } else {
        RangeSpec {
            start: args
                .start
                .as_deref()
                .map(parse)
                .transpose()?
                .map_or(Bound::Unbounded, Bound::Included),
            end: args
                .end
                .as_deref()
                .map(parse)
                .transpose()?
                .map_or(Bound::Unbounded, Bound::Excluded),
            reverse: false,
            limit: None,
        }
    };
    spec.reverse = args.reverse;
    if args.limit > 0 {
        spec.limit = Some(args.limit);
    }
    Ok(spec)
}

fn scan<E: Engine>(db: &Db, e: &E, args: &ScanArgs) -> Result<Json, Failure> {
    let ks = e.keyspace(&args.keyspace).map_err(|_| {
        Failure::Usage(format!(
            "no keyspace {:?}; the database has {:?}",
            args.keyspace, db.keyspaces
        ))
    })?;
    let spec = range_of(args)?;
    let store = store_on(db, e)?;
    let view = store
        .read()
        .map_err(|err| Failure::failed("snapshot", &err))?;
    let snap = e
        .snapshot()
        .map_err(|err| Failure::failed("snapshot", &err))?;
    let data = args.keyspace == db.options.data_keyspace;
    let mut rows = Vec::new();
    for row in snap
        .range(ks, spec)
        .map_err(|err| Failure::Usage(format!("bad range: {}", ErrorChain(&err))))?
    {
        if stopped() {
            return Err(Failure::Stopped);
        }
        let (k, v) = row.map_err(|err| Failure::failed("read", &err))?;
        let value = if data {
            data_value_json(&view, &k, &v, view.now_ms())
        } else {
            raw_value_json(&v)
        };
        rows.push(json!({ "key": key_json(&k), "value": value }));
    }
    Ok(json!({
        "keyspace": args.keyspace,
        "decoded": if data { "envelope" } else { "raw" },
        "version": view.version().unwrap_or(0),
        "rows": rows,
    }))
}

fn rows_text(o: &Json) -> String {
    let rows = o["rows"].as_array().cloned().unwrap_or_default();
    let mut s = String::new();
    if o["decoded"] == json!("raw") {
        let _ = writeln!(
            s,
            "# {}: not the store's data keyspace; values shown raw",
            o["keyspace"].as_str().unwrap_or("")
        );
    }
    for r in &rows {
        s.push_str(&row_text(&r["key"], &r["value"]));
        s.push('\n');
    }
    let _ = write!(s, "({} rows)", rows.len());
    s
}

fn get<E: Engine>(db: &Db, e: &E, keyspace: &str, key: &[u8]) -> Result<Json, Failure> {
    let ks = e.keyspace(keyspace).map_err(|_| {
        Failure::Usage(format!(
            "no keyspace {keyspace:?}; the database has {:?}",
            db.keyspaces
        ))
    })?;
    let store = store_on(db, e)?;
    let view = store
        .read()
        .map_err(|err| Failure::failed("snapshot", &err))?;
    let stored = e
        .snapshot()
        .and_then(|s| s.get(ks, key))
        .map_err(|err| Failure::failed("read", &err))?;
    let value = stored.map(|v| {
        if keyspace == db.options.data_keyspace {
            data_value_json(&view, key, &v, view.now_ms())
        } else {
            raw_value_json(&v)
        }
    });
    Ok(json!({
        "keyspace": keyspace,
        "key": key_json(key),
        "found": value.is_some(),
        "value": value,
    }))
}

fn verify<E: Engine + strata_engine::Integrity>(db: &Db, e: &E) -> Result<Json, Failure> {
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
    // The outbox: every consumer the catalog names has a checkpoint that
    // reads and is not beyond the last commit.
    let mut consumers_checked = 0;
    let outbox = outbox_of(db, &store)?;
    let (indexes_checked, index_problems, index_notes) =
        crate::search::check(db, e, outbox.as_ref());
    problems.extend(index_problems);
    notes.extend(index_notes);
    if let Some(outbox) = outbox {
        for (topic, consumer) in catalog_consumers(db) {
            consumers_checked += 1;
            match outbox.checkpoint(&topic, &consumer) {
                Ok(p) if p.version > e.last_version() => problems.push(format!(
                    "outbox consumer {topic}/{consumer}: checkpoint {p} is beyond the last commit {}",
                    e.last_version()
                )),
                Ok(_) => {}
                Err(err) => problems.push(format!("outbox consumer {topic}/{consumer}: {}", ErrorChain(&err))),
            }
            if let Err(err) = outbox.dead_letters(&topic, &consumer) {
                problems.push(format!(
                    "outbox consumer {topic}/{consumer}: dead letters: {}",
                    ErrorChain(&err)
                ));
            }
        }
    }
    Ok(json!({
        "ok": problems.is_empty(),
        "version": v.version,
        "values": v.values,
        "counters": v.counters,
        "chunked_values": v.chunked,
        "chunk_rows": v.chunk_rows,
        "expiry_entries": v.expiry_entries,
        "stale_expiry_entries": v.stale_expiry_entries,
        "quota_scopes": v.quota_scopes,
        "outbox_consumers": consumers_checked,
        "search_indexes": indexes_checked,
        "problems": problems,
        "notes": notes,
    }))
}

fn verify_text(o: &Json) -> String {
    let mut s = String::new();
    for p in o["problems"].as_array().into_iter().flatten() {
        let _ = writeln!(s, "PROBLEM {}", p.as_str().unwrap_or(""));
    }
    for n in o["notes"].as_array().into_iter().flatten() {
        let _ = writeln!(s, "note: {}", n.as_str().unwrap_or(""));
    }
    let quota = o["quota_scopes"]
        .as_u64()
        .map_or("not checked".to_owned(), |n| format!("{n} scopes"));
    let _ = writeln!(
        s,
        "checked at version {}: {} values ({} chunked, {} chunk rows), {} counters, {} expiry entries ({} stale), quota {}, {} outbox consumers, {} search indexes",
        o["version"],
        o["values"],
        o["chunked_values"],
        o["chunk_rows"],
        o["counters"],
        o["expiry_entries"],
        o["stale_expiry_entries"],
        quota,
        o["outbox_consumers"],
        o["search_indexes"]
    );
    let n = o["problems"].as_array().map_or(0, Vec::len);
    if n == 0 {
        s.push_str("OK: nothing wrong");
    } else {
        let _ = write!(s, "FAILED: {n} problems");
    }
    s
}

/// A private staging directory beside `dest` (mode 0700: nobody else can
/// open what is written there), to build the copy in before it is given
/// its mode and renamed into place.
struct Staging {
    dir: std::path::PathBuf,
}

impl Staging {
    fn new(dest: &str) -> Result<Self, Failure> {
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
    fn path(&self) -> std::path::PathBuf {
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
fn create_with_mode(dest: &str, kind: Kind, mode: Option<u32>) -> std::io::Result<()> {
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

fn remove_any(p: &Path) {
    let _ = std::fs::remove_dir_all(p).or_else(|_| std::fs::remove_file(p));
}

/// The permission bits a database's files have (`None` for a PostgreSQL
/// database, or where there are none): a redb file's own; for a RocksDB
/// directory, its bits without execute (search) bits.
fn mode_of(path: &str) -> Option<u32> {
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
const fn dir_mode(mode: u32) -> u32 {
    mode | ((mode & 0o444) >> 2)
}

/// Gives a copy the source's file `mode` (see [`mode_of`]): a file the
/// mode itself; a directory the mode with search bits where it reads, and
/// every file inside it the mode.
fn give_mode(p: &Path, mode: Option<u32>) -> std::io::Result<()> {
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
fn sync_path(p: &Path) -> std::io::Result<()> {
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
fn put_in_place(from: &Path, dest: &str) -> Result<(), Failure> {
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

fn refuse_existing(dest: &str) -> Result<(), Failure> {
    if Path::new(dest).exists() {
        return Err(Failure::Usage(format!("{dest} exists; give a new path")));
    }
    Ok(())
}

fn backup<E: Engine + Backup>(db: &Db, e: &E, dest: &str) -> Result<Json, Failure> {
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
    Ok(
        json!({ "source": db.path, "dest": dest, "engine": db.kind.name(), "version": info.version }),
    )
}

fn restore(kind: Option<Kind>, backup: &str, dest: &str) -> Result<Json, Failure> {
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
        if v["ok"] != json!(true) {
            return Err(Failure::Damaged(format!(
                "the backup does not verify: {}",
                v["problems"]
            )));
        }
        v["version"].clone()
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
    Ok(json!({ "backup": backup, "dest": dest, "engine": kind.name(), "version": checked }))
}

fn copy_tree(from: &Path, to: &Path) -> Result<(), Failure> {
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

fn compact(cli: &Cli, path: &str) -> Result<Json, Failure> {
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
    Ok(json!({ "path": path, "engine": kind.name(), "compacted": true }))
}

fn sweep<E: Engine>(db: &Db, e: &E, max_commits: Option<u64>) -> Result<Json, Failure> {
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
    Ok(
        json!({ "removed": removed, "stale": stale, "commits": commits, "more": cursor.is_some(), "stopped": stopped() }),
    )
}

fn outbox<E: Engine>(db: &Db, e: &E, action: &OutboxAction) -> Result<Json, Failure> {
    let store = store_on(db, e)?;
    let Some(outbox) = outbox_of(db, &store)? else {
        return Err(Failure::Usage(format!(
            "{} has no outbox (no {} keyspace)",
            db.path,
            strata_outbox::ENTRIES
        )));
    };
    let fail = |err: strata_outbox::OutboxError| Failure::failed("outbox", &err);
    Ok(match action {
        OutboxAction::List => json!({ "consumers": consumers(db, &store)? }),
        OutboxAction::Dead { topic, consumer } => {
            // An unknown consumer is an error here as for every action.
            outbox.checkpoint(topic, consumer).map_err(fail)?;
            let dead = outbox.dead_letters(topic, consumer).map_err(fail)?;
            json!({ "topic": topic, "consumer": consumer, "dead_letters": dead.iter().map(|d| json!({
                "position": d.position.to_string(), "error": d.error, "attempts": d.attempts,
                "first_failure_ms": d.first_failure_ms, "last_failure_ms": d.last_failure_ms,
                "ordering_key": d.ordering_key.as_deref().map(render_key),
                "entry_bytes": d.envelope.len(),
            })).collect::<Vec<_>>() })
        }
        OutboxAction::Redrive { topic, consumer } | OutboxAction::Purge { topic, consumer } => {
            let dead = outbox.dead_letters(topic, consumer).map_err(fail)?;
            let redrive = matches!(action, OutboxAction::Redrive { .. });
            for d in &dead {
                if redrive {
                    outbox.redrive(topic, consumer, d.position).map_err(fail)?;
                } else {
                    outbox.purge(topic, consumer, d.position).map_err(fail)?;
                }
            }
            json!({ "topic": topic, "consumer": consumer,
                    (if redrive { "redriven" } else { "purged" }): dead.len() })
        }
        OutboxAction::Unregister { topic, consumer } => {
            if !outbox.unregister(topic, consumer).map_err(fail)? {
                return Err(fail(strata_outbox::OutboxError::UnknownConsumer {
                    topic: topic.clone(),
                    consumer: consumer.clone(),
                }));
            }
            json!({ "topic": topic, "consumer": consumer, "unregistered": true })
        }
        OutboxAction::Trim { topic, keep_ms } => {
            let t = outbox.trim(topic, *keep_ms, None).map_err(fail)?;
            json!({ "topic": topic, "trimmed": t.entries, "commits": t.commits })
        }
        OutboxAction::Reset {
            topic,
            consumer,
            to,
        } => {
            let start = match to.as_str() {
                "beginning" => Start::Beginning,
                "end" => Start::End,
                v => Start::AfterVersion(v.parse().map_err(|_| {
                    Failure::Usage(format!("{v:?}: give beginning, end or a version"))
                })?),
            };
            outbox.reset(topic, consumer, start).map_err(fail)?;
            let now: Position = outbox.checkpoint(topic, consumer).map_err(fail)?;
            json!({ "topic": topic, "consumer": consumer, "checkpoint": now.to_string() })
        }
    })
}

fn search<E: Engine>(db: &Db, e: &E, action: &SearchAction) -> Result<Json, Failure> {
    let store = store_on(db, e)?;
    let outbox = outbox_of(db, &store)?;
    match action {
        SearchAction::List => Ok(json!({ "indexes": crate::search::list(db, outbox.as_ref()) })),
        SearchAction::Query { name, text, limit } => {
            crate::search::query(db, &store, name, text, *limit)
        }
        SearchAction::Verify { name } | SearchAction::Rebuild { name } => {
            let outbox = outbox.ok_or_else(|| {
                Failure::Usage(format!("{} has no outbox to feed an index", db.path))
            })?;
            crate::search::typed(
                db,
                &outbox,
                name,
                matches!(action, SearchAction::Rebuild { .. }),
            )
        }
    }
}

fn outbox_text(o: &Json) -> String {
    if o.get("consumers").is_some() {
        return consumers_text(o["consumers"].as_array())
            .trim_end()
            .to_owned();
    }
    if let Some(dead) = o["dead_letters"].as_array() {
        let mut s = format!(
            "{} dead letters of {}/{}\n",
            dead.len(),
            o["topic"].as_str().unwrap_or(""),
            o["consumer"].as_str().unwrap_or("")
        );
        for d in dead {
            let _ = writeln!(
                s,
                "  {}: {} attempts, last error {:?}",
                d["position"].as_str().unwrap_or(""),
                d["attempts"],
                d["error"].as_str().unwrap_or("")
            );
        }
        return s.trim_end().to_owned();
    }
    if o["unregistered"] == json!(true) {
        return format!(
            "unregistered {}/{}",
            o["topic"].as_str().unwrap_or(""),
            o["consumer"].as_str().unwrap_or("")
        );
    }
    if let Some(n) = o["trimmed"].as_u64() {
        return format!(
            "trimmed {n} entries of {} in {} commits",
            o["topic"].as_str().unwrap_or(""),
            o["commits"]
        );
    }
    for (field, verb) in [("redriven", "re-drove"), ("purged", "purged")] {
        if let Some(n) = o[field].as_u64() {
            return format!(
                "{verb} {n} dead letters of {}/{}",
                o["topic"].as_str().unwrap_or(""),
                o["consumer"].as_str().unwrap_or("")
            );
        }
    }
    format!(
        "{}/{} now at checkpoint {}",
        o["topic"].as_str().unwrap_or(""),
        o["consumer"].as_str().unwrap_or(""),
        o["checkpoint"].as_str().unwrap_or("")
    )
}

/// The keyspace that recorded how far a copy got, for a source without a
/// system keyspace (and in destinations of copies before 2026-11-27).
const COPY_KEYSPACE: &str = "strata.copy";
const COPY_ROW: &[u8] = b"progress";

/// Where a copy records how far it got, in the same commit as each batch:
/// one row holding the source's version, the keyspace and the last key
/// copied. A row of the system keyspace (`("strata.copy", "progress")`,
/// deleted when the copy is done, so nothing is left behind), or, for a
/// source without one, the `strata.copy` keyspace's `progress` row.
fn progress_place(db: &Db) -> (String, Vec<u8>) {
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
const COPY_BATCH: usize = 256;

fn copy(cli: &Cli, src: &str, dest: &str, dest_kind: Option<Kind>) -> Result<Json, Failure> {
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
    Ok(json!({
        "source": src, "dest": dest, "dest_engine": dest_kind.name(),
        "rows": out.0, "resumed": out.1, "keyspaces": src_db.keyspaces.len(), "version": out.2,
        "search_indexes_not_copied": indexes,
    }))
}

/// The keyspaces a copy copies, in name order: all but the source's own
/// copy progress (it was a copy's destination), which the destination
/// keeps for itself.
fn copied_keyspaces(db: &Db) -> Vec<String> {
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
fn copy_rows<S: Engine, D: Engine>(db: &Db, s: &S, d: &D) -> Result<(u64, bool, u64), Failure> {
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
fn holds_nothing<D: Engine>(db: &Db, d: &D) -> bool {
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
fn forget_indexes<D: Engine>(db: &Db, d: &D) -> Result<(), Failure> {
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
fn compare<S: Engine, D: Engine>(
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
