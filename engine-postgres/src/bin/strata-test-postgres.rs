//! Runs the throwaway PostgreSQL server that `cargo xtask test` shares
//! between the test processes of one run.
//!
//! It starts a [`TestServer`](strata_engine_postgres::testing::TestServer), prints its socket directory on the first
//! line of standard output, and keeps it running until its own standard
//! input closes (the caller ends, or closes the pipe); it then stops the
//! server and removes its directory. If this program is killed instead,
//! the server's watchdog does the same.

use std::process::ExitCode;

#[cfg(not(unix))]
fn main() -> ExitCode {
    eprintln!("strata-test-postgres: the test server runs on Unix only");
    ExitCode::FAILURE
}

#[cfg(unix)]
fn main() -> ExitCode {
    use std::io::Read as _;
    use strata_engine_postgres::testing::TestServer;
    match TestServer::start() {
        Ok(server) => {
            println!("{}", server.socket_dir().display());
            // Until the caller closes our standard input (or dies).
            let mut sink = Vec::new();
            let _ = std::io::stdin().read_to_end(&mut sink);
            server.stop();
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("strata-test-postgres: {e}");
            ExitCode::FAILURE
        }
    }
}
