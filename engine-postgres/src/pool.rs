//! A small connection pool: at most `size` connections, each with its
//! prepared statements; a broken connection is dropped and replaced by a
//! new one on the next checkout.

use std::collections::HashMap;
use std::sync::{Condvar, Mutex, PoisonError};
use std::time::Duration;

use postgres::{Client, Config, Statement};

/// How connections are made: plain, or TLS through native-tls.
#[derive(Clone)]
pub(crate) enum Connector {
    Plain,
    #[cfg(feature = "tls")]
    Tls(postgres_native_tls::MakeTlsConnector),
}

impl Connector {
    fn connect(&self, config: &Config) -> Result<Client, postgres::Error> {
        match self {
            Self::Plain => config.connect(postgres::NoTls),
            #[cfg(feature = "tls")]
            Self::Tls(tls) => config.connect(tls.clone()),
        }
    }
}

/// One connection and the statements prepared on it.
pub(crate) struct Conn {
    pub client: Client,
    statements: HashMap<String, Statement>,
}

impl Conn {
    /// `sql`, prepared once per connection: later uses cost one round trip
    /// instead of two.
    pub fn prepare(&mut self, sql: &str) -> Result<Statement, postgres::Error> {
        if let Some(s) = self.statements.get(sql) {
            return Ok(s.clone());
        }
        let s = self.client.prepare(sql)?;
        self.statements.insert(sql.to_owned(), s.clone());
        Ok(s)
    }
}

/// Why a connection could not be had.
#[derive(Debug, thiserror::Error)]
pub enum PoolError {
    /// Connecting failed.
    #[error("cannot connect to the server: {}", crate::describe(.0))]
    Connect(#[source] postgres::Error),
    /// Every connection stayed in use for the whole wait.
    #[error(
        "no connection came back for {0:?} (pool of {1}): raise `pool_size`, or hold fewer snapshots at once"
    )]
    Exhausted(Duration, usize),
}

pub(crate) struct Pool {
    config: Config,
    connector: Connector,
    size: usize,
    wait: Duration,
    state: Mutex<State>,
    freed: Condvar,
}

struct State {
    idle: Vec<Conn>,
    /// Connections checked out or idle.
    open: usize,
}

impl Pool {
    pub fn new(config: Config, connector: Connector, size: usize, wait: Duration) -> Self {
        Self {
            config,
            connector,
            size: size.max(1),
            wait,
            state: Mutex::new(State {
                idle: Vec::new(),
                open: 0,
            }),
            freed: Condvar::new(),
        }
    }

    /// A new connection, not counted by the pool (for one-off work such as
    /// resolving a commit whose reply was lost).
    pub fn connect(&self) -> Result<Conn, PoolError> {
        let client = self
            .connector
            .connect(&self.config)
            .map_err(PoolError::Connect)?;
        Ok(Conn {
            client,
            statements: HashMap::new(),
        })
    }

    /// A connection: an idle one that is not known closed, or a new one
    /// while fewer than `size` are open, or the first one returned within
    /// the wait.
    pub fn get(&self) -> Result<Pooled<'_>, PoolError> {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        loop {
            while let Some(conn) = state.idle.pop() {
                if conn.client.is_closed() {
                    state.open -= 1;
                    continue;
                }
                return Ok(Pooled {
                    pool: self,
                    conn: Some(conn),
                });
            }
            if state.open < self.size {
                state.open += 1;
                drop(state);
                return match self.connect() {
                    Ok(conn) => Ok(Pooled {
                        pool: self,
                        conn: Some(conn),
                    }),
                    Err(e) => {
                        self.release(None);
                        Err(e)
                    }
                };
            }
            // No clock is read here (library code takes time from an
            // injected clock): the wait fails when a whole `wait` passes
            // without any connection coming back.
            let (next, timeout) = self
                .freed
                .wait_timeout(state, self.wait)
                .unwrap_or_else(PoisonError::into_inner);
            state = next;
            if timeout.timed_out() && state.idle.is_empty() && state.open >= self.size {
                return Err(PoolError::Exhausted(self.wait, self.size));
            }
        }
    }

    /// Takes a connection back (`None`: it was dropped as broken).
    fn release(&self, conn: Option<Conn>) {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        match conn {
            Some(c) if !c.client.is_closed() => state.idle.push(c),
            _ => state.open -= 1,
        }
        drop(state);
        self.freed.notify_one();
    }

    /// Drops every idle connection (after a server restart, say).
    pub fn clear_idle(&self) {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let n = state.idle.len();
        state.idle.clear();
        state.open -= n;
    }
}

/// A checked-out connection; returned to the pool on drop, unless marked
/// broken.
pub(crate) struct Pooled<'p> {
    pool: &'p Pool,
    conn: Option<Conn>,
}

impl Pooled<'_> {
    /// The connection.
    pub fn conn(&mut self) -> &mut Conn {
        // Present until drop or `discard`, which consume the guard.
        self.conn.as_mut().expect("a checked-out connection")
    }

    /// Drops the connection instead of returning it (its session state is
    /// unknown: a transaction may be open, the socket may be dead).
    pub fn discard(mut self) {
        self.conn = None;
    }
}

impl Drop for Pooled<'_> {
    fn drop(&mut self) {
        self.pool.release(self.conn.take());
    }
}
