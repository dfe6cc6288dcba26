//! The engines a run can drive, and how each is opened, crashed and
//! restarted: the reference engine directly (it can plant bugs), and every
//! other engine through a conformance-suite [`Harness`].

use strata_engine::{
    Commit, CommitError, CommitInfo, Engine, EngineError, KeyspaceSpec, Keyspaces, MemEngine,
    ReadError, Rng,
};
use strata_engine_redb::{PowerLossBackend, RedbEngine, RedbOptions};

use strata_engine_testkit::Harness;

use crate::faults::Restart;

/// An engine the simulation can run.
pub trait Target: Restart {
    /// A fresh, empty engine with these keyspaces.
    fn fresh(specs: Vec<KeyspaceSpec>) -> Self;
}

impl Target for MemEngine {
    fn fresh(specs: Vec<KeyspaceSpec>) -> Self {
        MemEngine::open(specs).unwrap_or_else(|e| unreachable!("{e}"))
    }
}

/// An engine driven by a conformance [`Harness`]: opened by it, crashed
/// and restarted through it. The same harness shape runs the conformance
/// suite, so an engine that runs the suite can run the simulation.
pub struct Harnessed<H: Harness> {
    harness: H,
    engine: H::Engine,
}

impl<H> Target for Harnessed<H>
where
    H: LostReplies + Default + Send + Sync,
{
    fn fresh(specs: Vec<KeyspaceSpec>) -> Self {
        let mut harness = H::default();
        let engine = harness.open(&specs);
        Self { harness, engine }
    }
}

impl<H> Restart for Harnessed<H>
where
    H: LostReplies + Send + Sync,
{
    fn crash_restart(mut self, rng: &mut dyn Rng) -> Self {
        let engine = self.harness.crash(self.engine, rng).unwrap_or_else(|| {
            panic!(
                "{} cannot simulate a crash, so it cannot drive the simulation",
                std::any::type_name::<H>()
            )
        });
        Self {
            harness: self.harness,
            engine,
        }
    }

    fn clean_restart(mut self) -> Self {
        let engine = self.harness.reopen(self.engine);
        Self {
            harness: self.harness,
            engine,
        }
    }

    fn loses_real_replies(&self) -> bool {
        self.harness.loses_real_replies()
    }

    fn commit_across_crash(
        &self,
        commit: Commit,
        applied: bool,
    ) -> Result<CommitInfo, CommitError> {
        self.harness
            .commit_across_crash(&self.engine, commit, applied)
    }
}

/// A harness whose engine talks to a server the simulation can crash
/// in the middle of a commit (see [`Restart::commit_across_crash`]).
pub trait LostReplies: Harness {
    /// Whether it can.
    fn loses_real_replies(&self) -> bool {
        false
    }
    /// As [`Restart::commit_across_crash`].
    ///
    /// # Errors
    /// As the engine settled the commit.
    fn commit_across_crash(
        &self,
        engine: &Self::Engine,
        commit: Commit,
        applied: bool,
    ) -> Result<CommitInfo, CommitError> {
        let _ = applied;
        engine.commit(commit)
    }
    /// Told after every commit, group and sync (whatever its result), so
    /// that a harness simulating a power loss can see, from the engine's
    /// backend and not from its reports, what the disk holds for sure.
    fn after_write(&self, engine: &Self::Engine) {
        let _ = engine;
    }
}

impl LostReplies for PowerLossHarness {}

impl LostReplies for PostgresHarness {
    fn loses_real_replies(&self) -> bool {
        true
    }

    fn commit_across_crash(
        &self,
        engine: &Self::Engine,
        commit: Commit,
        applied: bool,
    ) -> Result<CommitInfo, CommitError> {
        // Nothing else is at risk in this crash.
        if engine.sync().is_err() {
            return engine.commit(commit);
        }
        let config = self.config.clone().unwrap_or_default();
        engine.inject_reply_fault(strata_engine_postgres::ReplyFault {
            applied,
            meanwhile: Box::new(move || {
                let server = postgres_server();
                server
                    .kill()
                    .unwrap_or_else(|e| panic!("could not kill the server: {e}"));
                server
                    .restart()
                    .unwrap_or_else(|e| panic!("the server did not restart: {e}"));
                // Transactions that write take the transaction ids the
                // crash forgot, the lost commit's among them, and commit.
                let mut c = config
                    .connect(strata_engine_postgres::postgres::NoTls)
                    .unwrap_or_else(|e| panic!("no connection after the restart: {e}"));
                c.batch_execute(
                    "CREATE TABLE IF NOT EXISTS sim_burn (i int); SET synchronous_commit = off",
                )
                .unwrap_or_else(|e| panic!("{e}"));
                for i in 0..50 {
                    c.execute("INSERT INTO sim_burn VALUES ($1)", &[&i])
                        .unwrap_or_else(|e| panic!("{e}"));
                }
            }),
        });
        engine.commit(commit)
    }
}

impl<H> Engine for Harnessed<H>
where
    H: LostReplies + Send + Sync,
{
    type Snapshot<'e>
        = <H::Engine as Engine>::Snapshot<'e>
    where
        Self: 'e;

    fn keyspaces(&self) -> &Keyspaces {
        self.engine.keyspaces()
    }
    fn snapshot(&self) -> Result<Self::Snapshot<'_>, ReadError> {
        self.engine.snapshot()
    }
    fn commit(&self, commit: Commit) -> Result<CommitInfo, CommitError> {
        let result = self.engine.commit(commit);
        self.harness.after_write(&self.engine);
        result
    }
    fn commit_group(&self, commits: Vec<Commit>) -> Vec<Result<CommitInfo, CommitError>> {
        let results = self.engine.commit_group(commits);
        self.harness.after_write(&self.engine);
        results
    }
    fn sync(&self) -> Result<u64, EngineError> {
        let result = self.engine.sync();
        self.harness.after_write(&self.engine);
        result
    }
    fn durable_version(&self) -> u64 {
        self.engine.durable_version()
    }
    fn last_version(&self) -> u64 {
        self.engine.last_version()
    }
}

/// redb on an in-memory disk that loses power at every crash: the synced
/// image survives, unsynced writes survive in part, possibly torn.
pub type RedbTarget = Harnessed<PowerLossHarness>;

/// Opens redb on a [`PowerLossBackend`]; a crash is a power loss.
#[derive(Default)]
pub struct PowerLossHarness {
    disk: PowerLossBackend,
    specs: Vec<KeyspaceSpec>,
}

impl PowerLossHarness {
    fn open_on_disk(&self) -> RedbEngine {
        RedbEngine::open_with_backend(
            self.disk.clone(),
            self.specs.clone(),
            RedbOptions::default(),
        )
        .unwrap_or_else(|e| panic!("redb failed to open after a crash: {e}"))
    }
}

impl Harness for PowerLossHarness {
    type Engine = RedbEngine;

    fn open(&mut self, keyspaces: &[KeyspaceSpec]) -> RedbEngine {
        self.disk = PowerLossBackend::new();
        self.specs = keyspaces.to_vec();
        self.open_on_disk()
    }

    fn reopen(&mut self, engine: RedbEngine) -> RedbEngine {
        drop(engine);
        self.open_on_disk()
    }

    fn crash(&mut self, engine: RedbEngine, rng: &mut dyn Rng) -> Option<RedbEngine> {
        // The disk as the power cut leaves it, taken while the engine is
        // still open (so it has no chance to shut down cleanly).
        let survivor = self.disk.power_loss(rng);
        drop(engine);
        self.disk = survivor;
        Some(self.open_on_disk())
    }
}

/// PostgreSQL: a server of this process (started once, on first use), a
/// new database for each engine; a crash is a `SIGKILL` of every server
/// process and a restart (what reached the server's log survives).
pub type PostgresTarget = Harnessed<PostgresHarness>;

/// Opens `PostgresEngine` on a new database of this process's throwaway
/// server; crashes kill and restart the server.
#[derive(Default)]
pub struct PostgresHarness {
    config: Option<strata_engine_postgres::postgres::Config>,
    specs: Vec<KeyspaceSpec>,
}

/// The server of this process, stopped by its watchdog when the process
/// ends. It runs with `fsync = off`: the simulation's crashes are process
/// kills, which lose what the server had not yet handed to the operating
/// system (its log buffers), with or without fsync; skipping fsync makes
/// each restart's recovery checkpoint take milliseconds instead of a
/// second. Power loss is not simulated on this engine.
fn postgres_server() -> &'static strata_engine_postgres::testing::TestServer {
    static SERVER: std::sync::OnceLock<strata_engine_postgres::testing::TestServer> =
        std::sync::OnceLock::new();
    SERVER.get_or_init(|| {
        strata_engine_postgres::testing::TestServer::start_with(&["fsync = off"])
            .unwrap_or_else(|e| panic!("no PostgreSQL server for the simulation: {e}"))
    })
}

impl PostgresHarness {
    fn connect(&self) -> strata_engine_postgres::PostgresEngine {
        let config = self.config.clone().unwrap_or_default();
        strata_engine_postgres::PostgresEngine::open(
            config,
            self.specs.clone(),
            strata_engine_postgres::PostgresOptions::default(),
        )
        .unwrap_or_else(|e| panic!("PostgreSQL engine failed to open: {e}"))
    }
}

impl Harness for PostgresHarness {
    type Engine = strata_engine_postgres::PostgresEngine;

    fn open(&mut self, keyspaces: &[KeyspaceSpec]) -> Self::Engine {
        let config = postgres_server()
            .database("sim")
            .unwrap_or_else(|e| panic!("no database for the simulation: {e}"));
        self.config = Some(config);
        self.specs = keyspaces.to_vec();
        self.connect()
    }

    fn reopen(&mut self, engine: Self::Engine) -> Self::Engine {
        drop(engine);
        self.connect()
    }

    fn crash(&mut self, engine: Self::Engine, _rng: &mut dyn Rng) -> Option<Self::Engine> {
        let server = postgres_server();
        server
            .kill()
            .unwrap_or_else(|e| panic!("could not kill the server: {e}"));
        drop(engine);
        server
            .restart()
            .unwrap_or_else(|e| panic!("the server did not restart: {e}"));
        Some(self.connect())
    }
}

#[cfg(feature = "rocks")]
pub use rocks::{RocksHarness, RocksTarget};

#[cfg(feature = "rocks")]
mod rocks {
    use std::collections::BTreeMap;
    use std::path::{Path, PathBuf};
    use std::sync::Mutex;

    use strata_engine::{KeyspaceSpec, Rng};
    use strata_engine_rocks::{RocksEngine, RocksOptions};
    use strata_engine_testkit::Harness;

    use super::{Harnessed, LostReplies};

    /// RocksDB in a temporary directory; a crash is a power loss: the
    /// files as they are, except that each write-ahead log keeps only
    /// what was synced for sure plus a random part of the rest, cut
    /// anywhere (in the middle of a record too).
    pub type RocksTarget = Harnessed<RocksHarness>;

    /// Opens RocksDB in a temporary directory, removed when the harness
    /// goes. It remembers, at every point the engine reported durable,
    /// how long each log file was: that much survives a power loss.
    #[derive(Default)]
    pub struct RocksHarness {
        dir: Option<PathBuf>,
        /// Each crash moves the database to a new directory (the old one is
        /// still open while the power-loss image is taken).
        generation: u64,
        specs: Vec<KeyspaceSpec>,
        synced: Mutex<Synced>,
    }

    /// What the disk holds for sure.
    #[derive(Default)]
    struct Synced {
        /// RocksDB's count of log syncs of the open engine when last seen.
        syncs: u64,
        /// Each log file's length at its last sync.
        lengths: BTreeMap<String, u64>,
    }

    impl Drop for RocksHarness {
        fn drop(&mut self) {
            if let Some(dir) = &self.dir {
                let _ = std::fs::remove_dir_all(dir);
            }
        }
    }

    /// Whether the file `name` is one of RocksDB's write-ahead logs.
    fn is_log(name: &str) -> bool {
        Path::new(name).extension().is_some_and(|ext| ext == "log")
    }

    /// The write-ahead log files of the database in `dir` and their lengths.
    fn log_lengths(dir: &Path) -> BTreeMap<String, u64> {
        let mut lengths = BTreeMap::new();
        let Ok(entries) = std::fs::read_dir(dir) else {
            return lengths;
        };
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if is_log(&name)
                && let Ok(meta) = entry.metadata()
            {
                lengths.insert(name, meta.len());
            }
        }
        lengths
    }

    impl RocksHarness {
        fn db_dir(&self) -> PathBuf {
            self.dir
                .as_ref()
                .map(|d| d.join(format!("db-{}", self.generation)))
                .unwrap_or_default()
        }

        fn open_in_dir(&self) -> RocksEngine {
            let dir = self.db_dir();
            let options = RocksOptions {
                statistics: true,
                ..RocksOptions::default()
            };
            let engine = RocksEngine::open(&dir, self.specs.clone(), options)
                .unwrap_or_else(|e| panic!("RocksDB failed to open: {e}"));
            // What recovery found is durable (it is flushed to table files,
            // synced, at open); the count of syncs starts again.
            *self.synced.lock().unwrap_or_else(|e| panic!("{e}")) = Synced {
                syncs: engine.ticker("rocksdb.wal.synced").unwrap_or(0),
                lengths: log_lengths(&dir),
            };
            engine
        }

        /// Copies the database in `from` to `to` as a power cut would leave
        /// it: every file but the logs whole (RocksDB syncs table files and
        /// its manifest before it relies on them), each log cut at a random
        /// length between what was synced and what was written.
        fn power_loss_image(&self, from: &Path, to: &Path, rng: &mut dyn Rng) {
            let files = stable_copy(from);
            std::fs::create_dir_all(to).unwrap_or_else(|e| panic!("{e}"));
            let synced = self
                .synced
                .lock()
                .unwrap_or_else(|e| panic!("{e}"))
                .lengths
                .clone();
            for (name, mut bytes) in files {
                if is_log(&name) {
                    let kept = synced.get(&name).copied().unwrap_or(0);
                    let written = bytes.len() as u64;
                    if written > kept {
                        let cut = kept + rng.next_u64() % (written - kept + 1);
                        bytes.truncate(usize::try_from(cut).unwrap_or(usize::MAX));
                    }
                }
                std::fs::write(to.join(&name), bytes).unwrap_or_else(|e| panic!("{e}"));
            }
        }
    }

    /// The names and lengths of the files in `dir`.
    fn listing(dir: &Path) -> BTreeMap<String, u64> {
        std::fs::read_dir(dir)
            .unwrap_or_else(|e| panic!("{e}"))
            .flatten()
            .filter_map(|e| {
                let len = e.metadata().ok()?.len();
                Some((e.file_name().to_string_lossy().into_owned(), len))
            })
            .collect()
    }

    /// Every file of `dir`, read while nothing changed in it: a background
    /// compaction writing a table file and then the manifest naming it
    /// must not be caught half-way by the copy (on a real disk the table
    /// file is synced before the manifest names it).
    fn stable_copy(dir: &Path) -> BTreeMap<String, Vec<u8>> {
        loop {
            let before = listing(dir);
            let files: BTreeMap<String, Vec<u8>> = before
                .keys()
                .filter_map(|name| Some((name.clone(), std::fs::read(dir.join(name)).ok()?)))
                .collect();
            let same = files.len() == before.len()
                && files
                    .iter()
                    .all(|(name, bytes)| before.get(name) == Some(&(bytes.len() as u64)));
            if same && listing(dir) == before {
                return files;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    }

    impl LostReplies for RocksHarness {
        /// When RocksDB's own count of log syncs moved, what the logs held
        /// is on the disk (the simulation is one thread: nothing was
        /// written after that sync). The engine's durability reports are
        /// not trusted here: they are what the crash checks.
        fn after_write(&self, engine: &RocksEngine) {
            let syncs = engine
                .ticker("rocksdb.wal.synced")
                .unwrap_or_else(|| panic!("the simulation opens RocksDB with statistics"));
            let mut synced = self.synced.lock().unwrap_or_else(|e| panic!("{e}"));
            if syncs > synced.syncs {
                synced.syncs = syncs;
                synced.lengths = log_lengths(&self.db_dir());
            }
        }
    }

    impl Harness for RocksHarness {
        type Engine = RocksEngine;

        fn open(&mut self, keyspaces: &[KeyspaceSpec]) -> RocksEngine {
            use std::sync::atomic::{AtomicU64, Ordering};
            static RUNS: AtomicU64 = AtomicU64::new(0);
            let n = RUNS.fetch_add(1, Ordering::SeqCst);
            let dir =
                std::env::temp_dir().join(format!("strata-sim-rocks-{}-{n}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            if let Some(old) = self.dir.replace(dir) {
                let _ = std::fs::remove_dir_all(old);
            }
            self.generation = 0;
            self.specs = keyspaces.to_vec();
            self.open_in_dir()
        }

        fn reopen(&mut self, engine: RocksEngine) -> RocksEngine {
            drop(engine);
            self.open_in_dir()
        }

        fn crash(&mut self, engine: RocksEngine, rng: &mut dyn Rng) -> Option<RocksEngine> {
            // The image is taken while the engine is still open, so its
            // clean close (which syncs the log) happens in a directory
            // that is then thrown away.
            let from = self.db_dir();
            self.generation += 1;
            let to = self.db_dir();
            self.power_loss_image(&from, &to, rng);
            drop(engine);
            let _ = std::fs::remove_dir_all(&from);
            Some(self.open_in_dir())
        }
    }
}
