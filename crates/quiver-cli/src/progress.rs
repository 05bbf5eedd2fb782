//! Progress on stderr for long work (`indicatif`): a bar when the amount is known (`eval`'s
//! cases), a spinner when it is not (a benchmark, `models install`), and a spinner that shows
//! only when loading the catalog takes a while. Drawn only when stderr is a terminal and
//! without `-q`, so pipes, CI logs and tests see none of it; cleared when the work ends.

use std::borrow::Cow;
use std::io::IsTerminal;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// How long a catalog load runs before its spinner shows.
const LOADING_AFTER: Duration = Duration::from_millis(400);

/// How often a spinner turns.
const TICK: Duration = Duration::from_millis(100);

/// Whether progress is drawn: stderr is a terminal and `-q` was not given.
pub fn visible() -> bool {
    std::io::stderr().is_terminal() && !crate::logs::hide_notes()
}

/// A bar or spinner on stderr, cleared when dropped.
pub struct Progress {
    bar: ProgressBar,
    /// Set when the work ended, so a delayed spinner never starts after it.
    done: Arc<Mutex<bool>>,
}

impl Progress {
    fn new(bar: ProgressBar) -> Progress {
        Progress {
            bar,
            done: Arc::new(Mutex::new(false)),
        }
    }

    fn target() -> ProgressDrawTarget {
        if visible() {
            ProgressDrawTarget::stderr()
        } else {
            ProgressDrawTarget::hidden()
        }
    }

    /// A bar of `len` steps, `message` beside it.
    pub fn bar(len: u64, message: impl Into<Cow<'static, str>>) -> Progress {
        let bar = ProgressBar::with_draw_target(Some(len), Self::target()).with_message(message);
        bar.set_style(
            ProgressStyle::with_template("{msg} [{bar:30}] {pos}/{len} {elapsed}")
                .unwrap_or_else(|_| ProgressStyle::default_bar())
                .progress_chars("=> "),
        );
        Progress::new(bar)
    }

    /// A spinner with `message`, turning until the work ends.
    pub fn spinner(message: impl Into<Cow<'static, str>>) -> Progress {
        let progress = Progress::new(Self::spinner_bar(message, Self::target()));
        progress.bar.enable_steady_tick(TICK);
        progress
    }

    /// The spinner of a catalog load: it shows only when the load takes longer than a moment,
    /// so the common small catalog draws nothing.
    pub fn loading() -> Progress {
        let progress = Progress::new(Self::spinner_bar(
            "loading packages",
            ProgressDrawTarget::hidden(),
        ));
        if visible() {
            let bar = progress.bar.clone();
            let done = progress.done.clone();
            std::thread::spawn(move || {
                std::thread::sleep(LOADING_AFTER);
                let done = done.lock().unwrap_or_else(PoisonError::into_inner);
                if !*done {
                    bar.set_draw_target(ProgressDrawTarget::stderr());
                    bar.enable_steady_tick(TICK);
                }
            });
        }
        progress
    }

    fn spinner_bar(
        message: impl Into<Cow<'static, str>>,
        target: ProgressDrawTarget,
    ) -> ProgressBar {
        let bar = ProgressBar::with_draw_target(None, target).with_message(message);
        bar.set_style(
            ProgressStyle::with_template("{spinner} {msg} {elapsed}")
                .unwrap_or_else(|_| ProgressStyle::default_spinner()),
        );
        bar
    }

    /// One more step done.
    pub fn inc(&self) {
        self.bar.inc(1);
    }

    /// What is being done now.
    pub fn set_message(&self, message: impl Into<Cow<'static, str>>) {
        self.bar.set_message(message);
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        let mut done = self.done.lock().unwrap_or_else(PoisonError::into_inner);
        *done = true;
        self.bar.finish_and_clear();
    }
}
