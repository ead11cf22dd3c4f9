//! Progress on stderr, for long work only: nothing unless stderr is a terminal, and a spinner
//! only once the work has taken longer than a moment (a quick run prints nothing to clear).

use std::io::IsTerminal;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// How long work runs before a spinner appears.
const DELAY: Duration = Duration::from_millis(400);

/// A spinner that appears after [`DELAY`] on a terminal and is cleared when dropped.
pub struct Spinner {
    bar: ProgressBar,
    done: Arc<AtomicBool>,
}

impl Spinner {
    pub fn start(message: &str) -> Spinner {
        let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::hidden());
        if let Ok(style) = ProgressStyle::with_template("{spinner} {elapsed} {msg}") {
            bar.set_style(style);
        }
        bar.set_message(message.to_string());
        let done = Arc::new(AtomicBool::new(false));
        if std::io::stderr().is_terminal() {
            let (bar, done) = (bar.clone(), done.clone());
            // No spinner is no loss: a thread the system will not give is not an error here.
            let _ = std::thread::Builder::new().spawn(move || {
                std::thread::sleep(DELAY);
                if !done.load(Ordering::Acquire) {
                    bar.set_draw_target(ProgressDrawTarget::stderr());
                    bar.enable_steady_tick(Duration::from_millis(120));
                }
            });
        }
        Spinner { bar, done }
    }

    pub fn set_message(&self, message: String) {
        self.bar.set_message(message);
    }
}

impl Drop for Spinner {
    fn drop(&mut self) {
        self.done.store(true, Ordering::Release);
        self.bar.finish_and_clear();
    }
}

/// A byte-progress bar for reading a large file (over 64 MiB), on a terminal only.
pub fn byte_bar(size: Option<u64>) -> Option<ProgressBar> {
    let size = size.filter(|&s| s > 64 << 20)?;
    if !std::io::stderr().is_terminal() {
        return None;
    }
    let bar = ProgressBar::new(size);
    if let Ok(style) =
        ProgressStyle::with_template("{bar:40} {bytes}/{total_bytes} {bytes_per_sec} {eta}")
    {
        bar.set_style(style);
    }
    Some(bar)
}

/// A corpus run's progress on a terminal: rows done, and the share of the input read when
/// its size is known (regular files; compressed files count their compressed bytes).
pub struct RowBar {
    bar: Option<ProgressBar>,
    bytes_read: Arc<std::sync::atomic::AtomicU64>,
}

impl RowBar {
    pub fn start(
        total_bytes: Option<u64>,
        bytes_read: Arc<std::sync::atomic::AtomicU64>,
    ) -> RowBar {
        if !std::io::stderr().is_terminal() {
            return RowBar {
                bar: None,
                bytes_read,
            };
        }
        let (bar, template) = match total_bytes {
            Some(total) => (
                ProgressBar::new(total),
                "{bar:30} {percent:>3}% {msg} {elapsed} (eta {eta})",
            ),
            None => (ProgressBar::new_spinner(), "{spinner} {msg} {elapsed}"),
        };
        if let Ok(style) = ProgressStyle::with_template(template) {
            bar.set_style(style);
        }
        bar.set_draw_target(ProgressDrawTarget::stderr_with_hz(8));
        RowBar {
            bar: Some(bar),
            bytes_read,
        }
    }

    /// Called by the workers after each row.
    pub fn rows(&self, done: u64) {
        if let Some(bar) = &self.bar {
            bar.set_position(self.bytes_read.load(Ordering::Relaxed));
            bar.set_message(format!("{done} rows"));
        }
    }
}

impl Drop for RowBar {
    fn drop(&mut self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}
