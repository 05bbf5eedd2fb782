//! Watching the project and user roots: `notify` (inotify here) through
//! `notify-debouncer-full`, then our own [`QuietWindow`], then the reload thread's
//! [`Signal`]. When the system's watch limit is hit (inotify's `ENOSPC`) or the native
//! watcher cannot start, the watcher falls back to polling (`notify::PollWatcher`), which
//! [`WatchOptions::force_polling`] also chooses.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, channel};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use notify::event::{AccessKind, AccessMode};
use notify::{ErrorKind, EventKind, PollWatcher, RecommendedWatcher, RecursiveMode};
use notify_debouncer_full::{
    DebounceEventResult, Debouncer, NoCache, RecommendedCache, new_debouncer_opt,
};

use super::Signal;
use super::quiet::{Next, QuietWindow};

/// How roots are watched.
#[derive(Debug, Clone)]
pub struct WatchOptions {
    /// The debouncer's own delay before it hands an event over.
    pub debounce: Duration,
    /// Our quiet window: reload once no event came for this long...
    pub quiet: Duration,
    /// ... or once the first pending event is this old, during an edit storm.
    pub max_delay: Duration,
    /// Poll instead of asking the system for events.
    pub force_polling: bool,
    /// How often the polling watcher looks at the files.
    pub poll_interval: Duration,
}

impl Default for WatchOptions {
    fn default() -> Self {
        WatchOptions {
            debounce: Duration::from_millis(50),
            quiet: Duration::from_millis(100),
            max_delay: Duration::from_secs(1),
            force_polling: false,
            poll_interval: Duration::from_millis(250),
        }
    }
}

/// What the debouncer hands the gathering thread.
enum Message {
    Events(DebounceEventResult),
    Stop,
}

/// One of the two debouncers, held to keep it running: the system's events or polling.
enum Active {
    Native {
        _debouncer: Debouncer<RecommendedWatcher, RecommendedCache>,
    },
    Polling {
        _debouncer: Debouncer<PollWatcher, NoCache>,
    },
}

/// The running watcher; dropping it stops it.
pub struct Watcher {
    stop: Sender<Message>,
    thread: Option<JoinHandle<()>>,
}

impl Watcher {
    /// Watches `roots` (recursively; those that do not exist are skipped with a warning) and
    /// asks `signal` for a reload of the changed paths after each quiet window.
    pub fn start(
        roots: Vec<PathBuf>,
        options: WatchOptions,
        signal: Arc<Signal>,
    ) -> std::io::Result<Watcher> {
        let (tx, rx) = channel();
        let events = tx.clone();
        let active = start_active(&roots, &options, &events, options.force_polling);
        let thread = std::thread::Builder::new()
            .name("quiver-root-watch".into())
            .spawn(move || gather(active, roots, options, events, rx, &signal))?;
        Ok(Watcher {
            stop: tx,
            thread: Some(thread),
        })
    }
}

impl Drop for Watcher {
    fn drop(&mut self) {
        let _ = self.stop.send(Message::Stop);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The native debouncer over `roots`, else (or with `polling`) the polling one; `None` when
/// neither starts.
fn start_active(
    roots: &[PathBuf],
    options: &WatchOptions,
    events: &Sender<Message>,
    polling: bool,
) -> Option<Active> {
    let handler = |tx: Sender<Message>| move |result| drop(tx.send(Message::Events(result)));
    if !polling {
        let started = new_debouncer_opt::<_, RecommendedWatcher, _>(
            options.debounce,
            None,
            handler(events.clone()),
            RecommendedCache::new(),
            notify::Config::default(),
        )
        .and_then(|mut d| {
            watch_all(roots, |root| d.watch(root, RecursiveMode::Recursive)).map(|()| d)
        });
        match started {
            Ok(debouncer) => {
                tracing::info!(roots = ?roots, "watching the package roots for changes");
                return Some(Active::Native {
                    _debouncer: debouncer,
                });
            }
            Err(error) => {
                tracing::warn!(%error, "the package roots cannot be watched through the system's events; polling them instead")
            }
        }
    }
    // The polling watcher keeps modification times in whole seconds: two saves within one
    // second would look the same, so it compares contents too (package files are small).
    let config = notify::Config::default()
        .with_poll_interval(options.poll_interval)
        .with_compare_contents(true);
    let started = new_debouncer_opt::<_, PollWatcher, _>(
        options.debounce,
        None,
        handler(events.clone()),
        NoCache,
        config,
    )
    .and_then(|mut d| watch_all(roots, |root| d.watch(root, RecursiveMode::Recursive)).map(|()| d));
    match started {
        Ok(debouncer) => {
            tracing::info!(roots = ?roots, interval_ms = options.poll_interval.as_millis() as u64, "polling the package roots for changes");
            Some(Active::Polling {
                _debouncer: debouncer,
            })
        }
        Err(error) => {
            tracing::error!(%error, "the package roots cannot be watched; edits are picked up by `quiver reload` only");
            None
        }
    }
}

/// Watches each existing root; a missing one is skipped, the watch limit is an error.
fn watch_all(
    roots: &[PathBuf],
    mut watch: impl FnMut(&std::path::Path) -> notify::Result<()>,
) -> notify::Result<()> {
    for root in roots {
        if !root.is_dir() {
            tracing::warn!(root = %root.display(), "a package root that is not a folder is not watched");
            continue;
        }
        watch(root)?;
    }
    Ok(())
}

/// The gathering loop: events go into the quiet window; when it closes, their paths go to
/// `signal`. The watch limit switches to polling and reloads every root (events may have
/// been lost).
fn gather(
    mut active: Option<Active>,
    roots: Vec<PathBuf>,
    options: WatchOptions,
    events: Sender<Message>,
    rx: Receiver<Message>,
    signal: &Signal,
) {
    let mut window = QuietWindow::new(options.quiet, options.max_delay);
    let mut pending: Vec<PathBuf> = Vec::new();
    loop {
        let received = match window.next(Instant::now()) {
            Next::Fire => {
                window.take();
                signal.files_changed(std::mem::take(&mut pending));
                continue;
            }
            Next::Idle => rx.recv().map_err(|_| RecvTimeoutError::Disconnected),
            Next::Wait(left) => rx.recv_timeout(left),
        };
        match received {
            Ok(Message::Events(Ok(batch))) => {
                let paths: Vec<PathBuf> = batch
                    .iter()
                    .filter(|e| e.need_rescan() || may_change(&e.kind))
                    .flat_map(|e| {
                        if e.need_rescan() {
                            roots.clone()
                        } else {
                            e.paths.clone()
                        }
                    })
                    .collect();
                let paths = super::paths::relevant(&paths);
                if !paths.is_empty() {
                    pending.extend(paths);
                    window.note(Instant::now());
                }
            }
            Ok(Message::Events(Err(errors))) => {
                let limit = errors
                    .iter()
                    .any(|e| matches!(e.kind, ErrorKind::MaxFilesWatch));
                for error in &errors {
                    tracing::warn!(%error, "watching the package roots");
                }
                if limit && matches!(active, Some(Active::Native { .. })) {
                    tracing::warn!(
                        "the system's limit of watched folders is reached (fs.inotify.max_user_watches); polling the package roots instead"
                    );
                    active = start_active(&roots, &options, &events, true);
                    pending.extend(roots.iter().cloned());
                    window.note(Instant::now());
                }
            }
            Ok(Message::Stop) | Err(RecvTimeoutError::Disconnected) => break,
            Err(RecvTimeoutError::Timeout) => {}
        }
    }
    drop(active);
}

/// Whether an event of this kind may change what a package holds: not a read, an open or a
/// close after reading (parsing a package reads its files, which must not reload it again).
fn may_change(kind: &EventKind) -> bool {
    match kind {
        EventKind::Access(access) => *access == AccessKind::Close(AccessMode::Write),
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use notify::event::{CreateKind, DataChange, ModifyKind, RemoveKind, RenameMode};

    use super::*;

    /// Waits up to 20 s for `signal` to hold a changed path that `want` accepts.
    fn signalled(signal: &Signal, want: impl Fn(&PathBuf) -> bool) -> bool {
        let started = Instant::now();
        while started.elapsed() < Duration::from_secs(20) {
            if std::mem::take(&mut signal.lock().files).iter().any(&want) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }

    /// The system's watch limit reached while watching (`MaxFilesWatch`, inotify's `ENOSPC`):
    /// the watcher switches to polling, reloads every root (events may have been lost), and
    /// goes on seeing edits.
    #[test]
    fn the_watch_limit_switches_to_polling_and_reloads_every_root() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("packages");
        std::fs::create_dir_all(root.join("a")).unwrap();
        let options = WatchOptions {
            poll_interval: Duration::from_millis(50),
            ..WatchOptions::default()
        };
        let (tx, rx) = channel();
        let active = start_active(std::slice::from_ref(&root), &options, &tx, false);
        assert!(matches!(active, Some(Active::Native { .. })));
        let signal = Arc::new(Signal::default());
        let gathering = {
            let (signal, events, roots) = (signal.clone(), tx.clone(), vec![root.clone()]);
            std::thread::spawn(move || gather(active, roots, options, events, rx, &signal))
        };
        let limit = notify::Error::new(ErrorKind::MaxFilesWatch);
        tx.send(Message::Events(Err(vec![limit]))).unwrap();
        assert!(
            signalled(&signal, |p| *p == root),
            "the roots were not reloaded"
        );
        std::fs::write(root.join("a/SKILL.md"), "---\nname: a\n---\n").unwrap();
        assert!(
            signalled(&signal, |p| p.ends_with("a/SKILL.md")),
            "no edit seen after the switch"
        );
        tx.send(Message::Stop).unwrap();
        gathering.join().unwrap();
    }

    #[test]
    fn reads_do_not_count_as_changes() {
        let cases = [
            (EventKind::Access(AccessKind::Open(AccessMode::Read)), false),
            (EventKind::Access(AccessKind::Read), false),
            (
                EventKind::Access(AccessKind::Close(AccessMode::Read)),
                false,
            ),
            (
                EventKind::Access(AccessKind::Close(AccessMode::Write)),
                true,
            ),
            (EventKind::Create(CreateKind::File), true),
            (
                EventKind::Modify(ModifyKind::Data(DataChange::Content)),
                true,
            ),
            (EventKind::Modify(ModifyKind::Name(RenameMode::Both)), true),
            (EventKind::Remove(RemoveKind::Folder), true),
            (EventKind::Any, true),
        ];
        for (kind, want) in cases {
            assert_eq!(may_change(&kind), want, "{kind:?}");
        }
    }
}
