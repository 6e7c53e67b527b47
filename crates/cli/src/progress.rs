//! Progress on stderr while a long command works, only when stderr is a
//! terminal (a pipe, a file or a test's capture gets nothing): a bar for
//! work of known size (`import`'s bytes, `gen`'s records), and for the
//! rest a spinner with the elapsed time that appears only once the
//! command has run for a second.

use indicatif::{ProgressBar, ProgressStyle};
use std::io::IsTerminal;
use std::sync::mpsc::{channel, RecvTimeoutError, Sender};
use std::thread::JoinHandle;
use std::time::Duration;

/// How long a command runs before its spinner appears:
/// `$MICROTAB_PROGRESS_DELAY_MS` (for tests), else a second.
fn delay() -> Duration {
    let ms = std::env::var("MICROTAB_PROGRESS_DELAY_MS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000);
    Duration::from_millis(ms)
}

/// Whether progress is shown at all.
fn shown() -> bool {
    std::io::stderr().is_terminal()
}

/// A bar of `total` units (`template`'s `{pos}`/`{bytes}` words say which)
/// after `what`, or `None` when stderr is not a terminal.
pub fn bar(total: u64, what: &str, counts: &str) -> Option<ProgressBar> {
    if !shown() {
        return None;
    }
    let pb = ProgressBar::new(total);
    pb.set_style(
        ProgressStyle::with_template(&format!("{{spinner}} {what} [{{bar:40}}] {counts}"))
            .expect("a valid template")
            .progress_chars("=> "),
    );
    Some(pb)
}

/// A spinner naming what the command does, shown from a second after it
/// starts until the guard is dropped (and cleared then).
pub struct Busy {
    stop: Option<Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

/// Starts the spinner of `what` (`tabulating`, `writing subset.mtab`); a
/// guard that does nothing when stderr is not a terminal.
pub fn busy(what: impl Into<String>) -> Busy {
    if !shown() {
        return Busy {
            stop: None,
            thread: None,
        };
    }
    let what = what.into();
    let wait = delay();
    // Without a delay, drawn before the command goes on (so that even a
    // short command shows it: the tests' case).
    let now = wait.is_zero().then(|| spinner(&what));
    let (tx, rx) = channel::<()>();
    let thread = std::thread::spawn(move || {
        // Dropping the guard disconnects the channel: done before the
        // delay, nothing is drawn.
        let pb = match now {
            Some(pb) => pb,
            None if rx.recv_timeout(wait) == Err(RecvTimeoutError::Timeout) => spinner(&what),
            None => return,
        };
        while rx.recv_timeout(Duration::from_millis(100)) == Err(RecvTimeoutError::Timeout) {
            pb.tick();
        }
        pb.finish_and_clear();
    });
    Busy {
        stop: Some(tx),
        thread: Some(thread),
    }
}

/// The spinner of `what`, drawn.
fn spinner(what: &str) -> ProgressBar {
    let pb = ProgressBar::new_spinner();
    pb.set_style(
        ProgressStyle::with_template("{spinner} {msg} ({elapsed})").expect("a valid template"),
    );
    pb.set_message(what.to_string());
    pb.tick();
    pb
}

impl Drop for Busy {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
