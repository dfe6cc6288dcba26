//! Fixtures shared by the workspace's integration tests (not published).
//!
//! - [`stores`]: a store on `MemEngine`, `RedbEngine`, `RocksEngine` or
//!   (feature `postgres`) `PostgresEngine`, with a manual clock at [`T0`]
//!   and a temporary directory removed on drop;
//! - [`engine_tests!`]: one `#[test]` per engine for each test written
//!   once, so a failure names its engine and the engines run in parallel;
//!   inside it, a crate's own "on every engine" fixture macro runs only the
//!   engine of the test ([`runs`]);
//! - [`Refusing`]: an engine wrapper that refuses its next commits or
//!   snapshots on request (conflicts, or a failing backend);
//! - [`spawn_self`]: this test binary again as a child, for tests that kill
//!   real processes ([`kill_child_after`] kills one once it has
//!   acknowledged enough, [`run_child`] runs one to its end,
//!   [`child_round`] one or the other, [`kill_rounds`] how many);
//!   [`copy_dir`]: a clean copy before damage.
//!
//! The property-test case counts and the metrics recorder
//! (`proptest_cases.rs`, `metrics.rs` beside this folder) stay source files
//! that tests include with `#[path]`: the key and codec crates use them,
//! and must not compile the engines this crate depends on.

use std::cell::Cell;

pub mod refusing;
pub mod stores;

pub use refusing::{Refusal, Refusing};
pub use stores::{Dir, T0, mem, redb, rocks, store_on};

#[cfg(feature = "postgres")]
pub use stores::postgres;

/// An engine a test runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EngineKind {
    /// `MemEngine`, the reference engine.
    Mem,
    /// `RedbEngine`.
    Redb,
    /// `RocksEngine`.
    Rocks,
    /// `PostgresEngine`.
    Postgres,
}

impl EngineKind {
    /// The engine a test function is named after (`mem`, `redb`, `rocks`,
    /// `postgres`).
    ///
    /// # Panics
    /// On any other name: a test generated for an engine that does not
    /// exist is a mistake in the test, not a skip.
    pub fn named(name: &str) -> Self {
        match name {
            "mem" => Self::Mem,
            "redb" => Self::Redb,
            "rocks" => Self::Rocks,
            "postgres" => Self::Postgres,
            other => panic!("no engine is named {other:?}"),
        }
    }
}

thread_local! {
    static ONLY: Cell<Option<EngineKind>> = const { Cell::new(None) };
}

/// Runs `body` with [`runs`] true for `kind` alone on this thread.
pub fn only_on(kind: EngineKind, body: impl FnOnce()) {
    struct Reset(Option<EngineKind>);
    impl Drop for Reset {
        fn drop(&mut self) {
            ONLY.with(|c| c.set(self.0));
        }
    }
    let _reset = Reset(ONLY.with(|c| c.replace(Some(kind))));
    body();
}

/// Whether a fixture should run on `kind` here: inside [`only_on`], for
/// its engine only; elsewhere, for every engine.
pub fn runs(kind: EngineKind) -> bool {
    ONLY.with(|c| c.get().is_none_or(|only| only == kind))
}

/// One test per engine for each function given: `fn name() { .. }` becomes
/// `mod name` with a `#[test] fn` per engine listed, each running the body
/// under [`only_on`] its engine. Doc comments and attributes before a
/// function go on its module.
///
/// ```
/// strata_test_support::engine_tests! {
///     [mem, redb]
///     /// Runs twice: `adds::mem` and `adds::redb`.
///     fn adds() {
///         assert_eq!(1 + 1, 2);
///     }
/// }
/// ```
#[macro_export]
macro_rules! engine_tests {
    ($engines:tt $($(#[$meta:meta])* fn $name:ident() $body:block)*) => {
        $( $crate::__engine_test!($engines $(#[$meta])* $name $body); )*
    };
}

/// [`engine_tests!`] for one function.
#[doc(hidden)]
#[macro_export]
macro_rules! __engine_test {
    ([$($engine:ident),+ $(,)?] $(#[$meta:meta])* $name:ident $body:block) => {
        $(#[$meta])*
        mod $name {
            #[allow(unused_imports)]
            use super::*;
            $(
                #[test]
                fn $engine() {
                    $crate::only_on($crate::EngineKind::named(stringify!($engine)), || $body);
                }
            )+
        }
    };
}

/// This test binary started again as a child that runs only the test
/// `test` (its full path, as `--exact` takes it), with the environment
/// variables `env` set (how the test tells it is the child, and what to
/// do), its standard output as `stdout` (piped to read what it
/// acknowledges, or null) and its errors silenced (shown when the
/// environment variable `STRATA_CHILD_STDERR` is set): for tests that
/// kill real processes.
///
/// # Panics
/// When the child cannot be started (a test helper).
pub fn spawn_self(
    test: &str,
    env: &[(&str, &str)],
    stdout: std::process::Stdio,
) -> std::process::Child {
    let mut command = std::process::Command::new(std::env::current_exe().unwrap());
    command
        .args(["--exact", test, "--nocapture"])
        .stdout(stdout)
        .stderr(if std::env::var_os("STRATA_CHILD_STDERR").is_some() {
            std::process::Stdio::inherit()
        } else {
            std::process::Stdio::null()
        });
    for (name, value) in env {
        command.env(name, value);
    }
    command.spawn().expect("spawn a child")
}

/// Runs this test binary's `test` as a child with `env` (see
/// [`spawn_self`]) that prints `ack N` for each step it has done, reads
/// its acknowledgements until `enough(N)` says so, waits `pause` and kills
/// it with SIGKILL. Returns the last step acknowledged, those printed
/// before the kill took effect included (`None`: none).
///
/// # Panics
/// When the child stops before acknowledging enough, ends by itself, or
/// cannot be started or reaped.
pub fn kill_child_after(
    test: &str,
    env: &[(&str, &str)],
    mut enough: impl FnMut(u64) -> bool,
    pause: std::time::Duration,
) -> Option<u64> {
    use std::io::BufRead;
    let mut child = spawn_self(test, env, std::process::Stdio::piped());
    let out = child.stdout.take().expect("piped");
    let mut acks = std::io::BufReader::new(out)
        .lines()
        .map_while(Result::ok)
        .filter_map(|line| {
            line.strip_prefix("ack ")
                .and_then(|n| n.parse::<u64>().ok())
        });
    let mut acked = None;
    let mut reached = false;
    for n in acks.by_ref() {
        acked = Some(n);
        if enough(n) {
            reached = true;
            break;
        }
    }
    assert!(
        reached,
        "the child stopped after acknowledging {acked:?} (set STRATA_CHILD_STDERR to see why)"
    );
    std::thread::sleep(pause);
    child.kill().expect("SIGKILL");
    let status = child.wait().expect("reap the child");
    assert!(!status.success(), "the child ended by itself");
    acks.last().or(acked)
}

/// Runs this test binary's `test` as a child with `env` (see
/// [`spawn_self`]) to its end: it must exit successfully after printing
/// `done`. Returns the last step it acknowledged (`ack N`).
///
/// # Panics
/// When the child fails or ends without `done`.
pub fn run_child(test: &str, env: &[(&str, &str)]) -> Option<u64> {
    use std::io::BufRead;
    let mut child = spawn_self(test, env, std::process::Stdio::piped());
    let out = child.stdout.take().expect("piped");
    let (mut acked, mut done) = (None, false);
    for line in std::io::BufReader::new(out).lines().map_while(Result::ok) {
        if let Some(n) = line.strip_prefix("ack ").and_then(|n| n.parse().ok()) {
            acked = Some(n);
        }
        done |= line == "done";
    }
    let status = child.wait().expect("reap the child");
    assert!(
        status.success() && done,
        "the child did not finish: {status}"
    );
    acked
}

/// The rounds a kill test runs: the environment variable
/// `STRATA_KILL_ROUNDS`, or `default`.
pub fn kill_rounds(default: usize) -> usize {
    std::env::var("STRATA_KILL_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

/// One round of a kill test: the child run to its end ([`run_child`])
/// when `finish`, else SIGKILLed `pause` after it acknowledged step
/// `wanted` or a later one ([`kill_child_after`]). Returns the last step
/// acknowledged.
///
/// # Panics
/// As [`run_child`] and [`kill_child_after`].
pub fn child_round(
    test: &str,
    env: &[(&str, &str)],
    finish: bool,
    wanted: u64,
    pause: std::time::Duration,
) -> Option<usize> {
    let acked = if finish {
        run_child(test, env)
    } else {
        kill_child_after(test, env, |n| n >= wanted, pause)
    };
    acked.map(|n| usize::try_from(n).expect("a step number"))
}

/// Copies the directory `from`, with everything under it, to `to`
/// (created): to keep a clean copy of a database or an index before
/// damaging it. Panics on any I/O failure (a test helper).
pub fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_on_limits_runs_to_its_engine_and_restores() {
        assert!(runs(EngineKind::Rocks));
        only_on(EngineKind::Redb, || {
            assert!(runs(EngineKind::Redb));
            assert!(!runs(EngineKind::Mem) && !runs(EngineKind::Rocks));
            assert!(!runs(EngineKind::Postgres));
        });
        assert!(runs(EngineKind::Mem) && runs(EngineKind::Postgres));
    }

    #[test]
    fn engines_are_named_as_their_tests() {
        assert_eq!(EngineKind::named("rocks"), EngineKind::Rocks);
        assert_eq!(EngineKind::named("postgres"), EngineKind::Postgres);
        assert_eq!(EngineKind::named("mem"), EngineKind::Mem);
        assert_eq!(EngineKind::named("redb"), EngineKind::Redb);
        assert!(std::panic::catch_unwind(|| EngineKind::named("sled")).is_err());
    }

    engine_tests! {
        [mem, redb]
        /// Generated twice; each runs only its own engine.
        fn generated() {
            assert!(runs(EngineKind::Mem) != runs(EngineKind::Redb));
            assert!(!runs(EngineKind::Rocks));
        }
    }
}
