//! Wake-ups: what a write changed, told to whoever listens ([`Store::changes`]) so it looks at
//! the rows at once instead of at its next poll. A change names a kind and one id, never data:
//! the listener reads the rows it cares about, which stay the only truth. A change may be heard
//! twice or not at all (a lost notification, a listener that lagged); [`Heard::Resync`] then
//! says "look at everything", and every consumer keeps a slower poll as its safety net.
//!
//! - **SQLite** ([`SqliteStore`](crate::SqliteStore)): told in this process after the write's
//!   commit. Other processes on the same file are not told: they see the rows at their polls.
//! - **PostgreSQL** ([`PostgresStore`](crate::PostgresStore)): the writing transaction sends
//!   `NOTIFY` with the change as its payload (`kind:id`), delivered on commit to every store on
//!   the database and schema (this one included) through its one `LISTEN` connection; after
//!   each (re)connection of that connection every subscriber hears [`Heard::Resync`].
//!
//! [`Store::changes`]: crate::Store::changes

use std::collections::VecDeque;
use std::fmt;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

/// What kind of thing changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ChangeKind {
    /// An approval card was created or resolved (id: the card).
    Approval,
    /// A workflow run needs a look: created, parked on a wait (a new `wake_at`), a wait
    /// resolved, or the run left `running` (id: the run).
    Run,
    /// A workflow event was stored (id: the event's id).
    Event,
    /// An instance reloaded its catalog (id: the instance, as it names itself).
    Catalog,
    /// One of the operator's switches was set: the control plane, a package switched off (id:
    /// the switch's key).
    Control,
    /// An audit record was appended by a call of this process (id: the record's id). Heard in
    /// the writing process only: no `NOTIFY` is sent for it, since a notifying commit takes a
    /// database-wide lock and calls append records all the time.
    Audit,
}

impl ChangeKind {
    /// Every kind.
    pub const ALL: [ChangeKind; 6] = [
        ChangeKind::Approval,
        ChangeKind::Run,
        ChangeKind::Event,
        ChangeKind::Catalog,
        ChangeKind::Control,
        ChangeKind::Audit,
    ];

    /// Its name in a notification's payload.
    pub fn as_str(self) -> &'static str {
        match self {
            ChangeKind::Approval => "approval",
            ChangeKind::Run => "run",
            ChangeKind::Event => "event",
            ChangeKind::Catalog => "catalog",
            ChangeKind::Control => "control",
            ChangeKind::Audit => "audit",
        }
    }

    /// The kind named `text`.
    pub fn parse(text: &str) -> Option<ChangeKind> {
        ChangeKind::ALL.into_iter().find(|k| k.as_str() == text)
    }
}

/// One change: its kind and the id of what changed.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Change {
    /// What kind of thing changed.
    pub kind: ChangeKind,
    /// Which one.
    pub id: String,
}

impl Change {
    /// A change of `kind` to `id`.
    pub fn new(kind: ChangeKind, id: impl Into<String>) -> Change {
        Change {
            kind,
            id: id.into(),
        }
    }

    /// The notification payload: `kind:id`.
    pub fn payload(&self) -> String {
        format!("{}:{}", self.kind.as_str(), self.id)
    }

    /// The change a payload names; `None` for one this version does not know.
    pub fn parse(payload: &str) -> Option<Change> {
        let (kind, id) = payload.split_once(':')?;
        Some(Change::new(ChangeKind::parse(kind)?, id))
    }
}

impl fmt::Display for Change {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.payload())
    }
}

/// What a subscriber hears.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Heard {
    /// One change.
    Change(Change),
    /// Changes may have been missed (the listener reconnected, or this subscriber fell more
    /// than [`KEPT`] changes behind): look at everything.
    Resync,
}

/// How many changes the hub keeps for subscribers that have not read them yet.
pub const KEPT: usize = 1024;

/// The heard changes, numbered: `entries` holds those numbered `next - entries.len()` to
/// `next - 1`.
#[derive(Default)]
struct Log {
    next: u64,
    entries: VecDeque<Heard>,
}

/// Where a store tells its subscribers what it heard.
#[derive(Default)]
pub(crate) struct Hub {
    log: Mutex<Log>,
    changed: Condvar,
    woken: tokio::sync::Notify,
}

impl Hub {
    fn lock(&self) -> MutexGuard<'_, Log> {
        self.log.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Tells every subscriber `heard`.
    pub(crate) fn publish(&self, heard: Heard) {
        {
            let mut log = self.lock();
            log.entries.push_back(heard);
            if log.entries.len() > KEPT {
                log.entries.pop_front();
            }
            log.next += 1;
        }
        self.changed.notify_all();
        self.woken.notify_waiters();
    }

    /// Tells every subscriber `change`.
    pub(crate) fn change(&self, kind: ChangeKind, id: impl Into<String>) {
        self.publish(Heard::Change(Change::new(kind, id)));
    }

    /// A subscription to what is heard from now on.
    pub(crate) fn subscribe(self: &Arc<Hub>) -> Changes {
        Changes {
            seen: self.lock().next,
            hub: Arc::clone(self),
        }
    }
}

/// Whether a committed move of a run is one every scheduler should look at: it parked the run
/// on a wait (a new `wake_at`), resolved a wait, or took the run out of `running` (a queued run
/// may go). A step that only moves on is the holder's business, and is not announced.
pub(crate) fn advance_wakes(advance: &crate::workflow::Advance) -> bool {
    advance.wait.is_some()
        || advance.resolve.is_some()
        || advance.to.status != crate::workflow::RunStatus::Running
}

/// Takes what `log` holds after `seen` and moves `seen` to its end.
fn take(log: &Log, seen: &mut u64) -> Vec<Heard> {
    let first = log.next - log.entries.len() as u64;
    let got = if *seen < first {
        vec![Heard::Resync]
    } else {
        let skip = usize::try_from(*seen - first).unwrap_or(usize::MAX);
        log.entries.iter().skip(skip).cloned().collect()
    };
    *seen = log.next;
    got
}

/// A subscription to a store's changes ([`Store::changes`](crate::Store::changes)): what was
/// heard after it was made, in order, to read from a thread ([`Changes::wait`]) or a task
/// ([`Changes::next`]).
pub struct Changes {
    hub: Arc<Hub>,
    seen: u64,
}

impl fmt::Debug for Changes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Changes")
            .field("seen", &self.seen)
            .finish_non_exhaustive()
    }
}

impl Changes {
    /// What was heard since the last read, waiting up to `timeout` for something; empty when
    /// nothing came.
    pub fn wait(&mut self, timeout: Duration) -> Vec<Heard> {
        let start = Instant::now();
        let mut log = self.hub.lock();
        while log.next == self.seen {
            let left = timeout.saturating_sub(start.elapsed());
            if left.is_zero() {
                return Vec::new();
            }
            log = self
                .hub
                .changed
                .wait_timeout(log, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        take(&log, &mut self.seen)
    }

    /// What was heard since the last read, waiting (in a task) until something is.
    pub async fn next(&mut self) -> Vec<Heard> {
        loop {
            let woken = self.hub.woken.notified();
            let mut woken = std::pin::pin!(woken);
            // Registered before the look, so a change published in between still wakes it.
            woken.as_mut().enable();
            let got = take(&self.hub.lock(), &mut self.seen);
            if !got.is_empty() {
                return got;
            }
            woken.await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payloads_name_a_kind_and_an_id() {
        let cases = [
            ("approval:ap-1", Some((ChangeKind::Approval, "ap-1"))),
            (
                "run:r:with:colons",
                Some((ChangeKind::Run, "r:with:colons")),
            ),
            ("event:42", Some((ChangeKind::Event, "42"))),
            (
                "catalog:serve-0@h",
                Some((ChangeKind::Catalog, "serve-0@h")),
            ),
            (
                "control:disabled:notes",
                Some((ChangeKind::Control, "disabled:notes")),
            ),
            ("audit:7", Some((ChangeKind::Audit, "7"))),
            ("control:", Some((ChangeKind::Control, ""))),
            ("weather:1", None),
            ("approval", None),
            ("", None),
        ];
        for (payload, want) in cases {
            let got = Change::parse(payload);
            assert_eq!(
                got.clone().map(|c| (c.kind, c.id)),
                want.map(|(k, id)| (k, id.to_owned())),
                "{payload}"
            );
            if let Some(change) = got {
                assert_eq!(change.payload(), payload);
            }
        }
    }

    #[test]
    fn which_moves_of_a_run_are_announced() {
        use crate::workflow::{
            Advance, Expect, NewWait, RunMove, RunStatus, WaitKind, WaitResolution,
        };
        let plain = Advance {
            run_id: "r".into(),
            expect: Expect {
                status: RunStatus::Running,
                step: 0,
                attempt: 0,
                epoch: 0,
            },
            attempts: Vec::new(),
            to: RunMove {
                status: RunStatus::Running,
                step: 1,
                attempt: 0,
                crashes: 0,
                output: None,
                error: None,
                lease: None,
            },
            wait: None,
            resolve: None,
            withdraw_waits: false,
            audit: None,
            call_audit: None,
            gate: None,
            now: 0,
        };
        let parked = |status| {
            let mut a = plain.clone();
            a.to.status = status;
            a
        };
        let mut waits = parked(RunStatus::Waiting);
        waits.wait = Some(NewWait {
            kind: WaitKind::Timer,
            wake_at: Some(5),
            event: None,
            after_event: 0,
            detail: serde_json::Value::Null,
        });
        let mut resolves = plain.clone();
        resolves.expect.status = RunStatus::Waiting;
        resolves.resolve = Some(WaitResolution {
            wait_id: 1,
            resolution: serde_json::Value::Null,
            by: "engine".into(),
        });
        let cases = [
            (plain.clone(), false),
            (waits, true),
            (resolves, true),
            (parked(RunStatus::Completed), true),
            (parked(RunStatus::Failed), true),
            (parked(RunStatus::Cancelled), true),
            (parked(RunStatus::InDoubt), true),
        ];
        for (advance, want) in cases {
            assert_eq!(advance_wakes(&advance), want, "{advance:?}");
        }
    }

    #[test]
    fn subscribers_hear_what_came_after_them_and_a_resync_when_they_lag() {
        let hub = Arc::new(Hub::default());
        hub.change(ChangeKind::Run, "before");
        let mut early = hub.subscribe();
        hub.change(ChangeKind::Run, "r1");
        hub.change(ChangeKind::Approval, "a1");
        assert_eq!(
            early.wait(Duration::ZERO),
            vec![
                Heard::Change(Change::new(ChangeKind::Run, "r1")),
                Heard::Change(Change::new(ChangeKind::Approval, "a1")),
            ]
        );
        assert!(early.wait(Duration::from_millis(20)).is_empty());
        for n in 0..=KEPT {
            hub.change(ChangeKind::Event, n.to_string());
        }
        assert_eq!(early.wait(Duration::ZERO), vec![Heard::Resync]);
        hub.publish(Heard::Resync);
        assert_eq!(early.wait(Duration::ZERO), vec![Heard::Resync]);
    }

    #[test]
    fn a_waiting_thread_and_a_waiting_task_wake_on_a_change() {
        let hub = Arc::new(Hub::default());
        let mut thread_side = hub.subscribe();
        let mut task_side = hub.subscribe();
        let waiter = std::thread::spawn(move || thread_side.wait(Duration::from_secs(10)));
        // A worker of its own, so the task is already waiting when the change comes.
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .build()
            .unwrap();
        let task = runtime.spawn(async move { task_side.next().await });
        std::thread::sleep(Duration::from_millis(50));
        hub.change(ChangeKind::Control, "control");
        let want = vec![Heard::Change(Change::new(ChangeKind::Control, "control"))];
        assert_eq!(waiter.join().unwrap(), want);
        assert_eq!(runtime.block_on(task).unwrap(), want);
    }
}
