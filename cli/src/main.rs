//! `strata`: inspect, decode, verify, back up and operate a Strata
//! database on redb, RocksDB or PostgreSQL. See the crate's README.

mod cmd;
mod notation;
mod open;
mod progress;
mod secrets;
mod show;

use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use strata_engine::ErrorChain;

use crate::open::Kind;

/// Inspect, decode, verify, back up and operate a Strata database.
///
/// PATH is a redb file, a RocksDB directory, or a PostgreSQL URL
/// (`postgresql://user@host/db`, or `host=/run/sock dbname=db`); the engine
/// is detected unless `--engine` says. Read-only commands open redb and
/// RocksDB read-only and never write.
///
/// Exit status: 0 done; 1 `verify` found something wrong; 2 an error
/// (message on stderr); 130 stopped by Ctrl-C.
#[derive(Debug, Parser)]
#[command(name = "strata", version)]
pub struct Cli {
    /// The engine, when detection should not decide.
    #[arg(long, global = true, value_enum)]
    engine: Option<Kind>,
    /// The store's system keyspace (default `strata.system`), where its
    /// catalog is.
    #[arg(long, global = true, value_name = "NAME")]
    system_keyspace: Option<String>,
    /// Machine-readable output: one JSON document on stdout.
    #[arg(long, global = true)]
    json: bool,
    /// Repair a redb file that was not closed cleanly (a crash, a full
    /// disk) before the command runs: redb rebuilds its allocator state
    /// from the file, keeping every durable commit. It writes to the file,
    /// even for a read-only command; without it such a file is refused
    /// with a message that says so.
    #[arg(long, global = true)]
    repair: bool,
    /// Open a RocksDB database whose write-ahead log or manifest is
    /// damaged at the state before the damage, losing the commits after
    /// it (durable ones too). Without it such a database is refused with a
    /// message that says so. Back the directory up first.
    #[arg(long, global = true)]
    accept_loss: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Engine, versions, keyspaces with profiles, rows and sizes, the
    /// catalog, outbox topics with their consumers and lag.
    Info {
        /// The database.
        path: String,
    },
    /// Rows of a keyspace, keys and values decoded.
    Scan(ScanArgs),
    /// One row, decoded.
    Get {
        /// The database.
        path: String,
        /// The keyspace's name (`strata info` lists them).
        keyspace: String,
        /// The key: tuple notation `("doc", 7)`, hex `0x0a0b`, `b"..."`, or text.
        key: String,
    },
    /// Checks envelopes and checksums, chunks, the expiry index, quota
    /// counters (when the catalog gives the scope rule) and the outbox's
    /// consumers; exit status 1 when anything is wrong.
    Verify {
        /// The database.
        path: String,
    },
    /// Writes a consistent copy of the database to DEST (a new file or
    /// directory of the same engine).
    Backup {
        /// The database.
        path: String,
        /// Where the copy goes; must not exist.
        dest: String,
    },
    /// Puts a backup in place as a database at DEST, after checking it.
    Restore {
        /// The file or directory `strata backup` wrote.
        backup: String,
        /// Where the database goes; must not exist.
        dest: String,
    },
    /// Copies every row of SRC into DEST, which may be another engine
    /// (redb to PostgreSQL, say); resumable, verified at the end.
    Copy {
        /// The source database.
        src: String,
        /// The destination (created for redb and RocksDB).
        dest: String,
        /// DEST's engine (default: detected, or from the name: a directory
        /// name without extension is RocksDB, anything else redb).
        #[arg(long, value_enum)]
        dest_engine: Option<Kind>,
    },
    /// Reclaims space now.
    Compact {
        /// The database.
        path: String,
    },
    /// Removes values that have expired.
    Sweep {
        /// The database.
        path: String,
        /// Stop after this many commits (resume by running again).
        #[arg(long)]
        max_commits: Option<u64>,
    },
    /// Search indexes: list, query (any index), verify against the store
    /// and rebuild (indexes whose mapping this tool knows: the reference
    /// schemas').
    Search {
        /// The database.
        path: String,
        #[command(subcommand)]
        action: SearchAction,
    },
    /// The outbox: consumers, lag, dead letters, re-drive, reset.
    Outbox {
        /// The database.
        path: String,
        #[command(subcommand)]
        action: OutboxAction,
    },
}

#[derive(Debug, Args)]
struct ScanArgs {
    /// The database.
    path: String,
    /// The keyspace's name (`strata info` lists them).
    keyspace: String,
    /// Only keys starting with these bytes (key notation).
    #[arg(long, conflicts_with_all = ["tuple_prefix", "start", "end"])]
    prefix: Option<String>,
    /// Only keys inside this tuple (its elements followed by more).
    #[arg(long, conflicts_with_all = ["start", "end"])]
    tuple_prefix: Option<String>,
    /// From this key (included).
    #[arg(long)]
    start: Option<String>,
    /// To this key (excluded).
    #[arg(long)]
    end: Option<String>,
    /// At most this many rows (default 100; 0 for all).
    #[arg(long, default_value_t = 100)]
    limit: usize,
    /// Last key first.
    #[arg(long)]
    reverse: bool,
}

#[derive(Debug, Subcommand)]
enum OutboxAction {
    /// Every topic and consumer with its checkpoint and lag.
    List,
    /// A consumer's dead letters.
    Dead {
        /// The topic's name.
        topic: String,
        /// The consumer's name (`strata outbox PATH list`).
        consumer: String,
    },
    /// Puts a consumer's dead letters back into the topic, as new entries.
    Redrive {
        /// The topic's name.
        topic: String,
        /// The consumer's name (`strata outbox PATH list`).
        consumer: String,
    },
    /// Deletes a consumer's dead letters.
    Purge {
        /// The topic's name.
        topic: String,
        /// The consumer's name (`strata outbox PATH list`).
        consumer: String,
    },
    /// Removes a consumer (its checkpoint, marks, dead letters and
    /// catalog entry): trimming no longer waits for it. Refused while a
    /// worker holds it.
    Unregister {
        /// The topic's name.
        topic: String,
        /// The consumer's name (`strata outbox PATH list`).
        consumer: String,
    },
    /// Deletes a topic's entries every consumer passed that are older than
    /// `--keep-ms` (a worker does this under its retention).
    Trim {
        /// The topic's name.
        topic: String,
        /// Keep entries younger than this many milliseconds.
        #[arg(long, default_value_t = 0)]
        keep_ms: u64,
    },
    /// Moves a consumer's checkpoint: `beginning`, `end`, or a version
    /// (every entry after it is delivered again).
    Reset {
        /// The topic's name.
        topic: String,
        /// The consumer's name (`strata outbox PATH list`).
        consumer: String,
        /// `beginning`, `end`, or a commit version.
        to: String,
    },
}

#[derive(Debug, Subcommand)]
enum SearchAction {
    /// Every index the catalog lists: directory, generation, checkpoint,
    /// documents, lag.
    List,
    /// The best documents for a query (tantivy syntax) over the index's
    /// text fields, each with its store key and whether its row changed.
    Query {
        /// The index's name (`strata search PATH list`).
        name: String,
        /// What to look for.
        text: String,
        /// At most this many hits.
        #[arg(long, default_value_t = 10)]
        limit: usize,
    },
    /// Catches the index up, then compares it with the store: missing,
    /// extra, stale and duplicate documents; exit status 1 when any.
    Verify {
        /// The index's name.
        name: String,
    },
    /// Builds a new generation from a store snapshot, switches to it
    /// atomically, catches up.
    Rebuild {
        /// The index's name.
        name: String,
    },
}

/// Why a command could not run.
#[derive(Debug)]
pub enum Failure {
    /// The path is no database of a known engine.
    NotADatabase(String),
    /// The engine would not open it (held by another process, damaged).
    Open(String),
    /// What was read is damaged beyond what the command can report.
    Damaged(String),
    /// The command's arguments do not fit the database.
    Usage(String),
    /// An operation failed.
    Failed(String),
    /// Ctrl-C; anything half-written was removed.
    Stopped,
}

impl Failure {
    fn open(path: &str, e: &(dyn std::error::Error + 'static)) -> Self {
        let text = ErrorChain(e).to_string();
        let hint = if text.contains("already open") || text.contains("lock") {
            " (another process holds it; stop it, or use a read-only command)"
        } else if text.contains("accept_wal_loss") || text.contains("Corruption") {
            " (it is damaged; if the damage is in its log or manifest, running the command \
             again with --accept-loss opens it at the state before the damage, losing every \
             commit after it; copy the directory first to keep it as it is)"
        } else if text.contains("repair") || text.contains("needs recovery") {
            " (it was not closed cleanly: a crash or a full disk; run the command again \
             with --repair to repair it, which writes to it and keeps every durable commit; \
             copy the file first to keep it as it is)"
        } else {
            ""
        };
        let path = if secrets::is_conninfo(path) {
            strata_engine_postgres::redact(path)
        } else {
            path.to_owned()
        };
        Self::Open(format!("cannot open {path}: {text}{hint}"))
    }

    fn failed(what: &str, e: &(dyn std::error::Error + 'static)) -> Self {
        Self::Failed(format!("{what}: {}", ErrorChain(e)))
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::NotADatabase(m) => write!(f, "not a database: {m}"),
            Self::Open(m) | Self::Damaged(m) | Self::Usage(m) | Self::Failed(m) => f.write_str(m),
            Self::Stopped => f.write_str("stopped; nothing half-written was left behind"),
        }
    }
}

/// Writes `text` and a newline to stdout, passwords scrubbed; a reader
/// that went away (a closed pipe: `strata info db | head -3`) ends the
/// tool quietly, as it ends any other program that writes to a pipe.
pub fn emit(text: &str) {
    use std::io::Write as _;
    let mut out = std::io::stdout().lock();
    let written = out
        .write_all(secrets::scrub(text).as_bytes())
        .and_then(|()| out.write_all(b"\n"))
        .and_then(|()| out.flush());
    match written {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => std::process::exit(0),
        Err(e) => {
            eprintln!("strata: cannot write the output: {e}");
            std::process::exit(2);
        }
    }
}

fn main() -> ExitCode {
    secrets::learn(std::env::args());
    // A damaged redb file can make redb panic; the engine catches it and
    // this tool reports it as damage, so the panic itself prints nothing.
    strata_engine::BackendPanic::quiet_caught();
    let cli = Cli::parse();
    open::set_repair(cli.repair);
    open::set_accept_loss(cli.accept_loss);
    progress::catch_ctrl_c();
    match cmd::run(&cli) {
        Ok(code) => code,
        Err(Failure::Stopped) => {
            eprintln!("strata: {}", Failure::Stopped);
            ExitCode::from(130)
        }
        Err(e) => {
            eprintln!("strata: {}", secrets::scrub(&e.to_string()));
            ExitCode::from(2)
        }
    }
}
