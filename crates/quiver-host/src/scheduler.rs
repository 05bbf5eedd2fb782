//! The workflow scheduler a long-running front (`quiver serve`) runs beside its protocol:
//! one thread that passes ([`quiver_workflow::scheduler::pass`]) and sleeps until the next
//! wake time, and a few worker threads that drive the runs it hands them through the one call
//! pipeline ([`WorkflowSteps`]).
//!
//! At start it takes an engine owner id for this process (a lock file beside the state
//! database: one live process per id), so the runs a killed process left `running` are
//! resumed at once, every one of them. Then, on each pass: the stored events after the fan-out
//! cursor start the workflows they are for, the due fires of every watched schedule start
//! (each keyed by its fire time), timers and timeouts resolve, and the runs so started or
//! woken are driven. It sleeps until the next fire or wait, at most
//! [`POLL`](quiver_workflow::scheduler::POLL) (to see events stored by another process), and
//! wakes early when told ([`Scheduler::kick`], a webhook's run), when a run it drove ended
//! or parked (a queued run may go; a wait may be due), or when the store hears that any process
//! woke a run, stored an event or reloaded its catalog ([`Runtime::changes`]: on PostgreSQL a
//! `NOTIFY` from another instance; the poll stays as the safety net). [`Scheduler::stop`] ends it cleanly: no pass starts after it, idle
//! workers end, and a step still running is left to the next start, which resumes it under
//! the same owner id.

use std::collections::{HashSet, VecDeque};
use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use quiver_runtime::{Runtime, WorkflowSteps};
use quiver_store::workflow::{RunFilter, RunStatus};
use quiver_store::{ChangeKind, Changes, Heard};
use quiver_workflow::Clock;
use quiver_workflow::scheduler::{self, Watched, Woke};

use crate::HostError;

/// Lock files of engine owner ids tried, from `serve-0`.
const OWNER_SLOTS: usize = 64;

/// How long the wake-up thread waits for a change before it looks whether the scheduler
/// stopped.
const HEARING: Duration = Duration::from_millis(250);

/// How long [`Scheduler::stop`] waits for workers still driving a run.
const STOP_GRACE: Duration = Duration::from_secs(5);

/// An engine owner id held by this process: its lock file stays locked while this lives.
#[derive(Debug)]
pub struct OwnerLock {
    /// The id (`serve-<n>`).
    pub id: String,
    _file: File,
}

impl OwnerLock {
    /// The first free owner id of the database `db`: the lock files live in `<db>.engines/`
    /// beside it (the path made canonical, so two paths to one file share them).
    pub fn acquire(db: &Path) -> std::io::Result<OwnerLock> {
        let dir = owner_dir(db);
        std::os::unix::fs::DirBuilderExt::mode(std::fs::DirBuilder::new().recursive(true), 0o700)
            .create(&dir)?;
        for slot in 0..OWNER_SLOTS {
            let file = OpenOptions::new()
                .create(true)
                .truncate(false)
                .write(true)
                .open(dir.join(format!("{slot}.lock")))?;
            if file.try_lock().is_ok() {
                return Ok(OwnerLock {
                    id: format!("serve-{slot}"),
                    _file: file,
                });
            }
        }
        Err(std::io::Error::other(format!(
            "all {OWNER_SLOTS} engine owner ids in `{}` are taken by live processes",
            dir.display()
        )))
    }
}

/// What the threads share.
#[derive(Default)]
struct Shared {
    state: Mutex<State>,
    changed: Condvar,
}

#[derive(Default)]
struct State {
    stop: bool,
    kicked: bool,
    /// Runs to drive, in order; `pending` holds the same ids.
    queue: VecDeque<String>,
    pending: HashSet<String>,
    /// Runs a worker drives now; `again` those to drive once more after it.
    driving: HashSet<String>,
    again: HashSet<String>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn enqueue(&self, ids: impl IntoIterator<Item = String>) {
        let mut state = self.lock();
        for id in ids {
            if state.driving.contains(&id) {
                state.again.insert(id);
            } else if state.pending.insert(id.clone()) {
                state.queue.push_back(id);
            }
        }
        self.changed.notify_all();
    }

    fn kick(&self) {
        self.lock().kicked = true;
        self.changed.notify_all();
    }
}

/// The running scheduler; [`Scheduler::stop`] (or dropping it) ends it.
pub struct Scheduler {
    shared: Arc<Shared>,
    looper: Option<JoinHandle<()>>,
    wakeups: Option<JoinHandle<()>>,
    workers: Vec<(JoinHandle<()>, mpsc::Receiver<()>)>,
    // Held while the scheduler lives: the engines of this process use its id.
    _owner: Option<OwnerLock>,
    // This instance in the store's registry, heartbeated while the scheduler lives.
    instance: Option<crate::instance::Registration>,
}

impl Scheduler {
    /// Starts the scheduler over `runtime` (whose workflow store is the state database `db`)
    /// with `workers` threads driving runs, and tells the runtime to hand it the runs it
    /// starts (webhook deliveries). When the database is `shared` with other machines
    /// (PostgreSQL), the owner id names this machine and process too, so no two instances
    /// take one id.
    pub fn start(
        runtime: Arc<Runtime>,
        db: &Path,
        shared: bool,
        workers: usize,
    ) -> Result<Scheduler, HostError> {
        let Some(store) = runtime.workflow_store().cloned() else {
            return Err(HostError::Scheduler("no workflow store is set".into()));
        };
        let owner = match OwnerLock::acquire(db) {
            Ok(lock) => {
                // Instances sharing a database may each hold `serve-0` of their own state
                // folder: the pid tells them apart (a restart then waits for the lease).
                let id = if shared {
                    format!("{}@{}/{}", lock.id, machine(), std::process::id())
                } else {
                    lock.id.clone()
                };
                runtime.set_workflow_owner(id);
                Some(lock)
            }
            Err(error) => {
                tracing::warn!(%error, "no engine owner id: runs a killed process left running are resumed once their leases run out");
                None
            }
        };
        let instance = crate::instance::Registration::start(runtime.clone())?;
        let shared = Arc::new(Shared::default());
        let waker_shared = Arc::downgrade(&shared);
        runtime.set_run_waker(Arc::new(move |id: &str| {
            if let Some(shared) = waker_shared.upgrade() {
                shared.enqueue([id.to_owned()]);
            }
        }));
        // Resume every run left `running` (interrupted by a crash, or never driven).
        let mut running = store
            .runs(&RunFilter {
                statuses: vec![RunStatus::Running],
                ..Default::default()
            })
            .map_err(|e| HostError::Scheduler(e.to_string()))?;
        running.sort_by_key(|r| r.created_at);
        shared.enqueue(running.into_iter().map(|r| r.id));
        let workers = (0..workers.max(1))
            .map(|n| {
                let (done, ended) = mpsc::channel();
                let (runtime, shared) = (runtime.clone(), shared.clone());
                let handle = spawn(&format!("quiver-runs-{n}"), move || {
                    work(&runtime, &shared);
                    let _ = done.send(());
                })?;
                Ok((handle, ended))
            })
            .collect::<Result<Vec<_>, HostError>>()?;
        let wakeups = {
            let (shared, changes) = (shared.clone(), runtime.changes());
            spawn("quiver-wakeups", move || hear(changes, &shared))?
        };
        let looper = {
            let shared = shared.clone();
            spawn("quiver-scheduler", move || run_loop(&runtime, &shared))?
        };
        Ok(Scheduler {
            shared,
            looper: Some(looper),
            wakeups: Some(wakeups),
            workers,
            _owner: owner,
            instance,
        })
    }

    /// Asks for a pass now.
    pub fn kick(&self) {
        self.shared.kick();
    }

    /// Stops: no pass starts after this; idle workers end; workers still driving a run get
    /// a few seconds, then are left to end with the process (their runs resume at the next
    /// start).
    pub fn stop(mut self) {
        self.shut();
    }

    fn shut(&mut self) {
        if let Some(instance) = self.instance.take() {
            instance.stop();
        }
        self.shared.lock().stop = true;
        self.shared.changed.notify_all();
        if let Some(looper) = self.looper.take() {
            let _ = looper.join();
        }
        if let Some(wakeups) = self.wakeups.take() {
            let _ = wakeups.join();
        }
        let deadline = std::time::Instant::now() + STOP_GRACE;
        for (handle, ended) in self.workers.drain(..) {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if ended.recv_timeout(left).is_ok() {
                let _ = handle.join();
            } else {
                tracing::warn!(
                    "a workflow step still runs at shutdown; its run resumes at the next start"
                );
            }
        }
    }
}

impl Drop for Scheduler {
    fn drop(&mut self) {
        self.shut();
    }
}

fn spawn(name: &str, f: impl FnOnce() + Send + 'static) -> Result<JoinHandle<()>, HostError> {
    std::thread::Builder::new()
        .name(name.to_owned())
        .spawn(f)
        .map_err(|e| HostError::Scheduler(format!("cannot start a thread: {e}")))
}

/// A worker: drives the queued runs one at a time until told to stop.
fn work(runtime: &Runtime, shared: &Shared) {
    let steps = WorkflowSteps::new(runtime);
    let Some(engine) = runtime.workflow_engine(&steps) else {
        return;
    };
    loop {
        let id = {
            let mut state = shared.lock();
            loop {
                if state.stop {
                    return;
                }
                if let Some(id) = state.queue.pop_front() {
                    state.pending.remove(&id);
                    state.driving.insert(id.clone());
                    break id;
                }
                state = shared
                    .changed
                    .wait(state)
                    .unwrap_or_else(PoisonError::into_inner);
            }
        };
        let driven = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| engine.drive(&id)));
        let settled = match driven {
            // A run that ended may let a queued one go; one that parked may have stored a
            // wait already due (`wait: {until}` in the past).
            Ok(Ok(run)) => run.status.is_final() || run.status == RunStatus::Waiting,
            Ok(Err(error)) => {
                tracing::warn!(run = %id, %error, "driving a workflow run failed");
                false
            }
            Err(_) => {
                tracing::error!(run = %id, "driving a workflow run panicked");
                false
            }
        };
        let again = {
            let mut state = shared.lock();
            state.driving.remove(&id);
            state.again.remove(&id)
        };
        if again {
            shared.enqueue([id]);
        }
        if settled {
            shared.kick();
        }
    }
}

/// The scheduler's loop: pass when [`scheduler::should_pass`] says so, sleep otherwise.
fn run_loop(runtime: &Runtime, shared: &Shared) {
    let steps = WorkflowSteps::new(runtime);
    let (Some(engine), Some(store)) = (runtime.workflow_engine(&steps), runtime.workflow_store())
    else {
        return;
    };
    let clock = &quiver_workflow::STORE_CLOCK;
    let mut woke = Woke {
        kicked: true,
        ..Woke::default()
    };
    let mut watched: Vec<Watched> = Vec::new();
    let mut packages = Default::default();
    let mut version = None;
    let mut next_fire = None;
    let mut logged: HashSet<String> = HashSet::new();
    // The soonest stored wait (stored here or by another process) after the last pass: one
    // due at that pass and left pending (its run moved on) waits for the refresh, or it would
    // wake the loop again and again.
    let next_wait = |after: i64| store.next_wake_at().ok().flatten().filter(|at| *at > after);
    loop {
        let now = clock.now_ms();
        let catalog = runtime.catalog().version();
        woke.catalog_changed = version != Some(catalog);
        woke.last_event = store.last_event_id().unwrap_or(woke.handed_event);
        woke.next_wake = scheduler::soonest(next_fire, next_wait(woke.last_pass));
        if scheduler::should_pass(now, &woke) {
            if woke.catalog_changed {
                let problems;
                (watched, problems) = runtime.watched_workflows(&engine);
                packages = runtime.package_ids();
                version = Some(catalog);
                report(&mut logged, problems);
            }
            match scheduler::pass(&engine, &watched, &packages) {
                Ok(pass) => {
                    shared.enqueue(pass.runs);
                    report(&mut logged, pass.problems);
                    next_fire = pass.next_fire;
                    woke.handed_event = pass.last_event;
                }
                Err(error) => tracing::warn!(%error, "the workflow scheduler's pass failed"),
            }
            woke.last_pass = now;
            woke.next_wake = scheduler::soonest(next_fire, next_wait(now));
        }
        let mut state = shared.lock();
        if !state.stop && !state.kicked {
            let sleep = scheduler::sleep_for(clock.now_ms(), woke.next_wake);
            state = shared
                .changed
                .wait_timeout(state, sleep)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        if state.stop {
            return;
        }
        woke.kicked = std::mem::take(&mut state.kicked);
    }
}

/// The wake-up thread: asks for a pass whenever the store hears of something a pass looks at,
/// until the scheduler stops.
fn hear(mut changes: Changes, shared: &Shared) {
    loop {
        let heard = changes.wait(HEARING);
        if shared.lock().stop {
            return;
        }
        if heard.iter().any(wakes_scheduler) {
            shared.kick();
        }
    }
}

/// Whether a pass should look at once: a run woken (created, parked on a new wake time, a wait
/// resolved, a run ended), an event stored, a catalog reloaded, or changes maybe missed.
fn wakes_scheduler(heard: &Heard) -> bool {
    match heard {
        Heard::Resync => true,
        Heard::Change(change) => matches!(
            change.kind,
            ChangeKind::Run | ChangeKind::Event | ChangeKind::Catalog
        ),
    }
}

/// Logs each problem once.
fn report(logged: &mut HashSet<String>, problems: Vec<String>) {
    for problem in problems {
        if logged.insert(problem.clone()) {
            tracing::warn!(%problem, "a workflow trigger could not be handled");
        }
    }
}

/// This machine, for owner ids in a database that several machines share: its host name
/// and the start of its boot id (containers on one host differ by name, hosts by boot).
fn machine() -> String {
    let read = |path: &str| {
        std::fs::read_to_string(path)
            .map(|text| text.trim().to_owned())
            .unwrap_or_default()
    };
    let boot = read("/proc/sys/kernel/random/boot_id");
    format!(
        "{}:{}",
        read("/proc/sys/kernel/hostname"),
        boot.get(..8).unwrap_or(&boot)
    )
}

/// Where the lock files of `db`'s engine owner ids live.
fn owner_dir(db: &Path) -> PathBuf {
    let db = db.canonicalize().unwrap_or_else(|_| db.to_owned());
    let mut name = db.file_name().unwrap_or_default().to_owned();
    name.push(".engines");
    db.with_file_name(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One live holder per owner id: a second lock takes the next id, and an id comes free when
    /// its holder goes (the kernel drops the lock of a killed process the same way).
    #[test]
    fn what_the_store_hears_that_wakes_the_scheduler() {
        use quiver_store::Change;
        let cases = [
            (Heard::Resync, true),
            (Heard::Change(Change::new(ChangeKind::Run, "r")), true),
            (Heard::Change(Change::new(ChangeKind::Event, "7")), true),
            (Heard::Change(Change::new(ChangeKind::Catalog, "i")), true),
            (Heard::Change(Change::new(ChangeKind::Approval, "a")), false),
            (
                Heard::Change(Change::new(ChangeKind::Control, "control")),
                false,
            ),
            (Heard::Change(Change::new(ChangeKind::Audit, "9")), false),
        ];
        for (heard, want) in cases {
            assert_eq!(wakes_scheduler(&heard), want, "{heard:?}");
        }
    }

    #[test]
    fn owner_ids_are_one_per_live_holder() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("state.db");
        let first = OwnerLock::acquire(&db).unwrap();
        let second = OwnerLock::acquire(&db).unwrap();
        assert_eq!(
            (first.id.as_str(), second.id.as_str()),
            ("serve-0", "serve-1")
        );
        drop(first);
        assert_eq!(OwnerLock::acquire(&db).unwrap().id, "serve-0");
        // Another database has ids of its own.
        let other = OwnerLock::acquire(&dir.path().join("other.db")).unwrap();
        assert_eq!(other.id, "serve-0");
        assert!(dir.path().join("state.db.engines/1.lock").is_file());
    }
}
