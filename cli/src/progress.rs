//! Progress on a terminal, silence in pipes, and a clean stop on Ctrl-C.

use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, Ordering};

use indicatif::{ProgressBar, ProgressStyle};

static STOP: AtomicBool = AtomicBool::new(false);

/// From now on Ctrl-C asks long operations to stop (they check
/// [`stopped`] and undo what they half-wrote) instead of killing the
/// process.
pub fn catch_ctrl_c() {
    // Without a handler (another one is set), Ctrl-C kills as usual.
    let _ = ctrlc::set_handler(|| STOP.store(true, Ordering::SeqCst));
}

/// Whether Ctrl-C was pressed.
pub fn stopped() -> bool {
    STOP.load(Ordering::SeqCst)
}

/// A counter of rows shown on stderr when it is a terminal; hidden
/// otherwise.
pub struct Progress(ProgressBar);

impl Progress {
    pub fn new(what: &str) -> Self {
        let bar = if std::io::stderr().is_terminal() {
            let bar = ProgressBar::new_spinner();
            bar.set_style(
                ProgressStyle::with_template("{spinner} {msg}: {pos} rows ({per_sec}) {elapsed}")
                    .unwrap_or_else(|_| ProgressStyle::default_spinner()),
            );
            bar.set_message(what.to_owned());
            bar
        } else {
            ProgressBar::hidden()
        };
        Self(bar)
    }

    /// A spinner for work that reports no count (a backup, a rebuild):
    /// it turns on its own while the work runs.
    pub fn spinner(what: &str) -> Self {
        let p = Self::new(what);
        p.0.set_style(
            ProgressStyle::with_template("{spinner} {msg} {elapsed}")
                .unwrap_or_else(|_| ProgressStyle::default_spinner()),
        );
        p.0.enable_steady_tick(std::time::Duration::from_millis(120));
        p
    }

    pub fn set(&self, rows: u64) {
        if rows.is_multiple_of(256) {
            self.0.set_position(rows);
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.0.finish_and_clear();
    }
}
