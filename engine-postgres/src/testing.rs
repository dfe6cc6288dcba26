//! A throwaway PostgreSQL server for tests (feature `test-server`; Unix
//! only: it runs over a Unix socket, as an unprivileged user under root).
//!
//! [`TestServer::start`] runs `initdb` in a new temporary directory and
//! starts the server on a Unix socket in that directory, with no TCP
//! listener. When the tests run as root (PostgreSQL refuses to), the
//! directory is given to the unprivileged user `nobody` and the server runs
//! as that user. Dropping the server stops it and removes the directory;
//! a watchdog does the same if the test process dies first (a `SIGKILL`, a
//! timeout).
//!
//! [`TestServer::shared`] attaches to the server `cargo xtask test` starts
//! for the whole run (named by `STRATA_PG_TEST_SOCKET`), or starts a
//! private one; each test then takes its own database with
//! [`TestServer::database`]. A server that cannot start is an error that
//! names why: tests that need one fail, they never pass silently.
//!
//! The server programs are looked for in `STRATA_PG_BIN`, then in
//! Debian's `/usr/lib/postgresql/<version>/bin` (the newest version).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};

/// The socket directory of a shared server, set by `cargo xtask test`.
pub const SHARED_SOCKET_ENV: &str = "STRATA_PG_TEST_SOCKET";

/// The port every test server uses: each has its own socket directory, so
/// the number only names the socket file.
pub const PORT: u16 = 5432;

/// The superuser `initdb` creates.
pub const USER: &str = "strata";

/// The unprivileged user servers run as when the tests run as root.
const NOBODY: u32 = 65_534;

static NEXT: AtomicU64 = AtomicU64::new(0);

/// Why a test server could not be had.
#[derive(Debug, thiserror::Error)]
pub enum TestServerError {
    /// No PostgreSQL server programs were found.
    #[error(
        "no PostgreSQL server programs (initdb, pg_ctl) in $STRATA_PG_BIN or /usr/lib/postgresql/*/bin: install them (Debian: `apt-get install -y postgresql-15`)"
    )]
    NotInstalled,
    /// A command failed.
    #[error("`{command}` failed: {output}")]
    Command {
        /// What was run.
        command: String,
        /// What it said.
        output: String,
    },
    /// The filesystem refused.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// The server could not be reached or refused a statement.
    #[error("the server refused or could not be reached")]
    Server(#[from] postgres::Error),
}

/// A PostgreSQL server in a temporary directory (or the shared one).
#[derive(Debug)]
pub struct TestServer {
    dir: PathBuf,
    bin: PathBuf,
    /// Whether this handle started the server (and stops it on drop).
    owned: bool,
    as_nobody: bool,
    /// The port: it names the socket file, and is the TCP port of a
    /// server that listens on loopback.
    port: u16,
    /// Whether it also listens on 127.0.0.1.
    tcp: bool,
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| o.stdout.trim_ascii() == b"0")
}

/// The directory holding `initdb` and `pg_ctl`.
///
/// # Errors
/// [`TestServerError::NotInstalled`].
pub fn find_bin() -> Result<PathBuf, TestServerError> {
    if let Some(dir) = std::env::var_os("STRATA_PG_BIN") {
        let dir = PathBuf::from(dir);
        if dir.join("initdb").exists() {
            return Ok(dir);
        }
    }
    let mut found: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let version: u32 = e.file_name().to_str()?.parse().ok()?;
            let bin = e.path().join("bin");
            bin.join("initdb").exists().then_some((version, bin))
        })
        .collect();
    found.sort();
    found
        .pop()
        .map(|(_, b)| b)
        .ok_or(TestServerError::NotInstalled)
}

impl TestServer {
    /// Starts a new server in a new temporary directory.
    ///
    /// # Errors
    /// Programs missing, `initdb` or the start failing (with their output).
    pub fn start() -> Result<Self, TestServerError> {
        Self::start_with(&[])
    }

    /// Starts a new server with extra `postgresql.conf` lines.
    ///
    /// # Errors
    /// As [`TestServer::start`].
    pub fn start_with(settings: &[&str]) -> Result<Self, TestServerError> {
        Self::start_inner(settings, false)
    }

    /// Starts a new server that also listens on 127.0.0.1, on a port free
    /// when it starts (for TLS, which PostgreSQL offers over TCP only),
    /// with extra `postgresql.conf` lines.
    ///
    /// # Errors
    /// As [`TestServer::start`].
    pub fn start_tcp(settings: &[&str]) -> Result<Self, TestServerError> {
        Self::start_inner(settings, true)
    }

    /// Starts a new server in a new directory under `parent` (instead of
    /// the temporary directory): on a file system of its own, such as a
    /// small tmpfs a test fills.
    ///
    /// # Errors
    /// As [`TestServer::start`].
    pub fn start_under(parent: &Path, settings: &[&str]) -> Result<Self, TestServerError> {
        Self::start_inner_under(parent, settings, false)
    }

    /// A server handle on a new, empty directory under `parent` (owned by
    /// the server's user), nothing started yet.
    fn in_new_dir(
        parent: &Path,
        bin: PathBuf,
        as_nobody: bool,
        port: u16,
        tcp: bool,
    ) -> Result<Self, TestServerError> {
        let dir = parent.join(format!(
            "strata-pg-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir)?;
        if as_nobody {
            std::os::unix::fs::chown(&dir, Some(NOBODY), Some(NOBODY))?;
        }
        Ok(Self {
            dir,
            bin,
            owned: true,
            as_nobody,
            port,
            tcp,
        })
    }

    fn start_inner(settings: &[&str], tcp: bool) -> Result<Self, TestServerError> {
        Self::start_inner_under(&std::env::temp_dir(), settings, tcp)
    }

    fn start_inner_under(
        parent: &Path,
        settings: &[&str],
        tcp: bool,
    ) -> Result<Self, TestServerError> {
        let bin = find_bin()?;
        let port = if tcp {
            std::net::TcpListener::bind(("127.0.0.1", 0))?
                .local_addr()?
                .port()
        } else {
            PORT
        };
        let server = Self::in_new_dir(parent, bin, is_root(), port, tcp)?;
        server.run(
            "initdb",
            &[
                "-D",
                &server.data().to_string_lossy(),
                "-U",
                USER,
                "--auth=trust",
                "-E",
                "UTF8",
                "--no-sync",
            ],
        )?;
        server.configure(settings)?;
        server.watchdog()?;
        server.pg_ctl_start()?;
        Ok(server)
    }

    /// The server of this test run: the one `cargo xtask test` started
    /// (`STRATA_PG_TEST_SOCKET`), else one started for this process and
    /// stopped when the last handle is dropped.
    ///
    /// # Errors
    /// As [`TestServer::start`].
    pub fn shared() -> Result<Arc<Self>, TestServerError> {
        static SHARED: Mutex<Weak<TestServer>> = Mutex::new(Weak::new());
        let mut slot = SHARED.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(s) = slot.upgrade() {
            return Ok(s);
        }
        let server = Arc::new(match std::env::var_os(SHARED_SOCKET_ENV) {
            Some(dir) => Self {
                dir: PathBuf::from(dir),
                bin: find_bin()?,
                owned: false,
                as_nobody: false,
                port: PORT,
                tcp: false,
            },
            None => Self::start()?,
        });
        *slot = Arc::downgrade(&server);
        Ok(server)
    }

    /// The socket directory (also the server's temporary directory).
    pub fn socket_dir(&self) -> &Path {
        &self.dir
    }

    /// The port (of the socket file, and of TCP for [`TestServer::start_tcp`]).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Appends lines to `pg_hba.conf` before the ones `initdb` wrote (the
    /// first matching line wins) and reloads the server's configuration.
    ///
    /// # Errors
    /// The file unwritable, or the reload refused.
    pub fn hba_first(&self, lines: &[&str]) -> Result<(), TestServerError> {
        let path = self.data().join("pg_hba.conf");
        let old = std::fs::read_to_string(&path)?;
        std::fs::write(&path, format!("{}\n{old}", lines.join("\n")))?;
        self.admin("SELECT pg_reload_conf()")
    }

    /// Writes a file into the data directory, readable by the server only
    /// (mode 0600, owned by its user): a TLS key or certificate.
    ///
    /// # Errors
    /// The file unwritable.
    pub fn write_private(&self, name: &str, contents: &[u8]) -> Result<PathBuf, TestServerError> {
        use std::os::unix::fs::PermissionsExt as _;
        let path = self.data().join(name);
        std::fs::write(&path, contents)?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))?;
        if self.as_nobody {
            std::os::unix::fs::chown(&path, Some(NOBODY), Some(NOBODY))?;
        }
        Ok(path)
    }

    /// The data directory.
    pub fn data(&self) -> PathBuf {
        self.dir.join("data")
    }

    /// A client configuration for database `dbname` on this server.
    pub fn config(&self, dbname: &str) -> postgres::Config {
        let mut c = postgres::Config::new();
        c.host_path(&self.dir)
            .port(self.port)
            .user(USER)
            .dbname(dbname);
        c
    }

    /// The connection string (libpq's `key=value` form) of database
    /// `dbname` on this server: for a child process, which parses it back
    /// (`postgres::Config`'s `FromStr`) to reach the same database.
    pub fn conninfo(&self, dbname: &str) -> String {
        format!(
            "host={} port={} user={USER} dbname={dbname}",
            self.dir.display(),
            self.port
        )
    }

    /// A new, empty database with a name unique to this process, and a
    /// configuration that connects to it.
    ///
    /// # Errors
    /// The server unreachable.
    pub fn database(&self, label: &str) -> Result<postgres::Config, TestServerError> {
        let label: String = label
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() {
                    c.to_ascii_lowercase()
                } else {
                    '_'
                }
            })
            .take(30)
            .collect();
        let name = format!(
            "t_{label}_{}_{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        let mut admin = self.config("postgres").connect(postgres::NoTls)?;
        // Each alone: neither may run inside a transaction block.
        admin.batch_execute(&format!("DROP DATABASE IF EXISTS {name}"))?;
        admin.batch_execute(&format!("CREATE DATABASE {name}"))?;
        Ok(self.config(&name))
    }

    /// Runs a statement as the superuser on database `postgres`.
    ///
    /// # Errors
    /// The server unreachable or the statement refused.
    pub fn admin(&self, sql: &str) -> Result<(), TestServerError> {
        let mut admin = self.config("postgres").connect(postgres::NoTls)?;
        admin.batch_execute(sql)?;
        Ok(())
    }

    /// Crashes the server: `SIGKILL` to the postmaster and every process
    /// it started, at once, as a power cut would stop them (the operating
    /// system keeps what they wrote).
    ///
    /// # Errors
    /// No postmaster pid file, or `kill` failing.
    pub fn kill(&self) -> Result<(), TestServerError> {
        let pidfile = std::fs::read_to_string(self.data().join("postmaster.pid"))?;
        let pm: u32 = pidfile
            .lines()
            .next()
            .and_then(|l| l.trim().parse().ok())
            .ok_or_else(|| std::io::Error::other("no pid in postmaster.pid"))?;
        let mut pids = vec![pm.to_string()];
        for entry in std::fs::read_dir("/proc")?.flatten() {
            let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
                continue;
            };
            // pid (comm) state ppid ...: the command may hold spaces and
            // parentheses, the fields after its last `)` do not.
            let ppid = stat
                .rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().nth(1))
                .and_then(|p| p.parse::<u32>().ok());
            if ppid == Some(pm) {
                pids.push(entry.file_name().to_string_lossy().into_owned());
            }
        }
        // Running: neither gone nor a zombie.
        let alive = |pid: &str| {
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .is_some_and(|stat| {
                    stat.rsplit_once(')')
                        .and_then(|(_, rest)| rest.split_whitespace().next())
                        .is_some_and(|s| s != "Z")
                })
        };
        let status = Command::new("kill").arg("-KILL").args(&pids).status()?;
        if !status.success() {
            // A backend may have exited between the listing and the kill (a
            // client had just closed its connection): only a process still
            // there after a second kill of its own is an error.
            for pid in &pids {
                if alive(pid)
                    && !Command::new("kill")
                        .arg("-KILL")
                        .arg(pid)
                        .status()?
                        .success()
                    && alive(pid)
                {
                    return Err(TestServerError::Command {
                        command: format!("kill -KILL {pid}"),
                        output: status.to_string(),
                    });
                }
            }
        }
        // Wait until every killed process is gone or a zombie (whoever
        // adopted them may reap them late), then remove the pid file: a
        // zombie still answers `kill -0`, which the next postmaster would
        // take for a running server.
        for _ in 0..1_000 {
            if !pids.iter().any(|p| alive(p)) {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let _ = std::fs::remove_file(self.data().join("postmaster.pid"));
        let _ = std::fs::remove_file(self.dir.join(format!(".s.PGSQL.{}.lock", self.port)));
        Ok(())
    }

    /// Starts the server again (after [`TestServer::kill`] it recovers from
    /// its log first).
    ///
    /// # Errors
    /// As [`TestServer::start`].
    pub fn restart(&self) -> Result<(), TestServerError> {
        self.pg_ctl_start()
    }

    /// A streaming standby of this server in its own temporary directory
    /// (`pg_basebackup -R`), started; the caller makes it synchronous with
    /// `synchronous_standby_names` on this server.
    ///
    /// # Errors
    /// As [`TestServer::start`].
    pub fn start_standby(&self) -> Result<Self, TestServerError> {
        let standby = Self::in_new_dir(
            &std::env::temp_dir(),
            self.bin.clone(),
            self.as_nobody,
            PORT,
            false,
        )?;
        standby.run(
            "pg_basebackup",
            &[
                "-D",
                &standby.data().to_string_lossy(),
                "-h",
                &self.dir.to_string_lossy(),
                "-p",
                &self.port.to_string(),
                "-U",
                USER,
                "-R",
                "-X",
                "stream",
                "--checkpoint=fast",
                "--no-sync",
            ],
        )?;
        // Its own socket directory: the lines appended last win over the
        // primary's, copied with the data.
        standby.configure(&[])?;
        standby.watchdog()?;
        standby.pg_ctl_start()?;
        Ok(standby)
    }

    /// Promotes a standby to a primary and waits until it accepts writes.
    ///
    /// # Errors
    /// `pg_ctl promote` failing.
    pub fn promote(&self) -> Result<(), TestServerError> {
        self.run(
            "pg_ctl",
            &[
                "-D",
                &self.data().to_string_lossy(),
                "-w",
                "-t",
                "60",
                "promote",
            ],
        )
    }

    /// Stops the server (immediate shutdown) and removes its directory.
    pub fn stop(self) {
        drop(self);
    }

    fn configure(&self, extra: &[&str]) -> Result<(), TestServerError> {
        let dir = self.dir.display();
        let listen = if self.tcp { "127.0.0.1" } else { "" };
        let mut lines = vec![
            format!("listen_addresses = '{listen}'"),
            format!("unix_socket_directories = '{dir}'"),
            format!("port = {}", self.port),
            "max_connections = 100".to_owned(),
            "shared_buffers = 32MB".to_owned(),
            "max_wal_senders = 4".to_owned(),
            "wal_level = replica".to_owned(),
            "log_min_messages = warning".to_owned(),
            "logging_collector = off".to_owned(),
        ];
        lines.extend(extra.iter().map(|s| (*s).to_owned()));
        let refs: Vec<&str> = lines.iter().map(String::as_str).collect();
        self.append_conf(&refs)
    }

    fn append_conf(&self, lines: &[&str]) -> Result<(), TestServerError> {
        use std::io::Write as _;
        let path = self.data().join("postgresql.conf");
        let mut f = std::fs::OpenOptions::new().append(true).open(path)?;
        for l in lines {
            writeln!(f, "{l}")?;
        }
        Ok(())
    }

    fn pg_ctl_start(&self) -> Result<(), TestServerError> {
        let log = self.dir.join("server.log");
        self.run(
            "pg_ctl",
            &[
                "-D",
                &self.data().to_string_lossy(),
                "-l",
                &log.to_string_lossy(),
                "-w",
                "-t",
                "120",
                "start",
            ],
        )
        .map_err(|e| match e {
            TestServerError::Command { command, output } => TestServerError::Command {
                command,
                output: format!(
                    "{output}\nserver log:\n{}",
                    std::fs::read_to_string(&log).unwrap_or_default()
                ),
            },
            other => other,
        })
    }

    /// Stops the server and removes its directory if this test process
    /// dies without doing so.
    fn watchdog(&self) -> Result<(), TestServerError> {
        let script = format!(
            "while [ -d /proc/{parent} ]; do sleep 1; done; \
             '{pg_ctl}' -D '{data}' -m immediate stop >/dev/null 2>&1; rm -rf '{dir}'",
            parent = std::process::id(),
            pg_ctl = self.bin.join("pg_ctl").display(),
            data = self.data().display(),
            dir = self.dir.display(),
        );
        let mut cmd = Command::new("sh");
        cmd.args(["-c", &script])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        self.as_user(&mut cmd);
        cmd.spawn()?;
        Ok(())
    }

    fn as_user(&self, cmd: &mut Command) {
        if self.as_nobody {
            use std::os::unix::process::CommandExt as _;
            cmd.uid(NOBODY).gid(NOBODY).env("HOME", &self.dir);
        }
    }

    fn run(&self, program: &str, args: &[&str]) -> Result<(), TestServerError> {
        let mut cmd = Command::new(self.bin.join(program));
        cmd.args(args).current_dir(&self.dir).stdin(Stdio::null());
        self.as_user(&mut cmd);
        let out = cmd.output()?;
        if out.status.success() {
            Ok(())
        } else {
            Err(TestServerError::Command {
                command: format!("{program} {}", args.join(" ")),
                output: format!(
                    "{}{}",
                    String::from_utf8_lossy(&out.stdout),
                    String::from_utf8_lossy(&out.stderr)
                ),
            })
        }
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        if !self.owned {
            return;
        }
        let _ = self.run(
            "pg_ctl",
            &[
                "-D",
                &self.data().to_string_lossy(),
                "-m",
                "immediate",
                "-w",
                "stop",
            ],
        );
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
