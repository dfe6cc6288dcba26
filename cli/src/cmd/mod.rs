//! The commands, one file each; this file dispatches them and holds what
//! they share.

use std::fmt::Write as _;
use std::ops::{Bound, ControlFlow};
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;
use strata_engine::ErrorChain;

use serde::Serialize;
use serde_json::Value as Json;
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

mod backup;
mod copy;
mod files;
mod info;
mod maintain;
mod outbox;
mod rows;
mod search;
mod verify;

use backup::{backup, restore};
use copy::copy;
use files::{
    Staging, copy_tree, create_with_mode, give_mode, mode_of, put_in_place, refuse_existing,
};
use info::{ConsumerInfo, consumers, consumers_text, info};
use maintain::{compact, sweep};
use outbox::outbox;
use rows::{get, scan};
use search::search;
use verify::verify;

/// Runs the command; the exit code on success.
pub fn run(cli: &Cli) -> Result<ExitCode, Failure> {
    let sys = cli.system_keyspace.as_deref();
    let code = |ok: bool| {
        if ok {
            ExitCode::SUCCESS
        } else {
            ExitCode::from(1)
        }
    };
    match &cli.command {
        Command::Info { path } => {
            let db = open::open(cli.engine, path, sys, true)?;
            print(cli, &with_engine!(&db.engine, e => info(&db, e))?);
        }
        Command::Scan(args) => {
            let db = open::open(cli.engine, &args.path, sys, true)?;
            print(cli, &with_engine!(&db.engine, e => scan(&db, e, args))?);
        }
        Command::Get {
            path,
            keyspace,
            key,
        } => {
            let db = open::open(cli.engine, path, sys, true)?;
            let key = parse_key(key).map_err(Failure::Usage)?;
            let out = with_engine!(&db.engine, e => get(&db, e, keyspace, &key))?;
            print(cli, &out);
            return Ok(code(out.found));
        }
        Command::Verify { path } => {
            let db = open::open(cli.engine, path, sys, true)?;
            let out = with_engine!(&db.engine, e => verify(&db, e))?;
            print(cli, &out);
            return Ok(code(out.ok));
        }
        Command::Backup { path, dest } => {
            // RocksDB checkpoints a read-only instance without what its log
            // holds beyond the tables: open it writable (it flushes).
            let kind = match cli.engine {
                Some(k) => k,
                None => open::detect(path)?,
            };
            let db = open::open(Some(kind), path, sys, kind != Kind::Rocks)?;
            print(cli, &with_engine!(&db.engine, e => backup(&db, e, dest))?);
        }
        Command::Restore { backup, dest } => print(cli, &restore(cli.engine, backup, dest)?),
        Command::Copy {
            src,
            dest,
            dest_engine,
        } => print(cli, &copy(cli, src, dest, *dest_engine)?),
        Command::Compact { path } => print(cli, &compact(cli, path)?),
        Command::Sweep { path, max_commits } => {
            let db = open::open(cli.engine, path, sys, false)?;
            print(
                cli,
                &with_engine!(&db.engine, e => sweep(&db, e, *max_commits))?,
            );
        }
        Command::Search { path, action } => {
            let read_only = matches!(action, SearchAction::List | SearchAction::Query { .. });
            let db = open::open(cli.engine, path, sys, read_only)?;
            let out = with_engine!(&db.engine, e => search(&db, e, action))?;
            print(cli, &out);
            return Ok(code(!out.failed()));
        }
        Command::Outbox { path, action } => {
            let read_only = matches!(action, OutboxAction::List | OutboxAction::Dead { .. });
            let db = open::open(cli.engine, path, sys, read_only)?;
            print(cli, &with_engine!(&db.engine, e => outbox(&db, e, action))?);
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// A command's result: printed as JSON with `--json` and as text
/// otherwise, both from this one value.
pub(crate) trait Output: serde::Serialize {
    /// The text view.
    fn text(&self) -> String;
}

fn print(cli: &Cli, out: &impl Output) {
    if cli.json {
        crate::emit(&serde_json::to_string_pretty(out).unwrap_or_default());
    } else {
        crate::emit(&out.text());
    }
}

fn store_on<E: Engine>(db: &Db, e: E) -> Result<Store<E>, Failure> {
    Store::open(e, open::store_options(db))
        .map_err(|err| Failure::failed("cannot open the store", &err))
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
