//! The workflow engine's durable records and the [`WorkflowStore`] trait that keeps them.
//!
//! The engine (`quiver-workflow`) decides; the store only commits what it is told, each write
//! in one `BEGIN IMMEDIATE` transaction committed with `synchronous=FULL` before the method
//! returns. [`WorkflowStore::advance`] is the one write of a run's progress: it is conditional
//! on the run still being where the caller saw it (status, step, attempt), so a late result of
//! a step that was cancelled or taken over is discarded, and it writes the attempt, the run's
//! move, a wait, a wait's resolution and an audit record together or not at all. The order of
//! these commits is the contract, written down in `docs/workflows.md`. A move that starts an
//! attempt claims it under a lease on the store's clock and raises the run's fencing epoch;
//! every later write about the attempt carries that epoch, so once another engine claimed the
//! run (the lease ran out) the old holder's writes change nothing (docs/instances.md).

use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::Result;
use crate::instances::{Instance, NewInstance};
use crate::types::AuditEntry;

macro_rules! text_enum {
    ($(#[$doc:meta])* $name:ident { $($(#[$vdoc:meta])* $variant:ident => $text:literal,)* }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
        #[serde(rename_all = "snake_case")]
        pub enum $name {
            $($(#[$vdoc])* $variant,)*
        }

        impl $name {
            /// The stored text.
            pub fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $text,)*
                }
            }

            /// Parses the stored text.
            pub fn parse(text: &str) -> Option<$name> {
                match text {
                    $($text => Some($name::$variant),)*
                    _ => None,
                }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

text_enum! {
    /// Where a run stands.
    RunStatus {
        /// Its current step may run now (or is running).
        Running => "running",
        /// Parked on a wait: an approval, a timer, an event or a retry's pause.
        Waiting => "waiting",
        /// A step that changes the world was found started without a result after a crash;
        /// an operator chooses retry, done or fail.
        InDoubt => "in_doubt",
        /// Ended with an output.
        Completed => "completed",
        /// Ended with an error.
        Failed => "failed",
        /// Cancelled by a person.
        Cancelled => "cancelled",
    }
}

impl RunStatus {
    /// Whether the run has ended.
    pub fn is_final(self) -> bool {
        matches!(
            self,
            RunStatus::Completed | RunStatus::Failed | RunStatus::Cancelled
        )
    }
}

text_enum! {
    /// How one attempt of a step stands.
    AttemptStatus {
        /// Committed as started before its tool or agent ran; no result yet.
        Started => "started",
        /// Succeeded, with an output.
        Ok => "ok",
        /// Failed (an error, a timeout, a refusal).
        Failed => "failed",
        /// Its `if` was false.
        Skipped => "skipped",
        /// Found started without a result after a crash.
        Crashed => "crashed",
        /// Parked on a wait (approval, timer, event).
        Waiting => "waiting",
        /// An approval that was approved.
        Approved => "approved",
        /// An approval that was denied.
        Rejected => "rejected",
        /// A wait or approval whose time ran out.
        TimedOut => "timed_out",
    }
}

text_enum! {
    /// What a wait waits for.
    WaitKind {
        /// A person's answer.
        Approval => "approval",
        /// A moment (`wake_at`).
        Timer => "timer",
        /// A package event.
        Event => "event",
        /// The pause before a failed step's next attempt.
        Retry => "retry",
    }
}

text_enum! {
    /// How a wait stands.
    WaitStatus {
        /// Not resolved yet.
        Pending => "pending",
        /// Resolved (answered, woken, matched, timed out).
        Resolved => "resolved",
        /// Withdrawn because its run was cancelled or moved on.
        Withdrawn => "withdrawn",
    }
}

/// A pinned workflow definition, by the digest of its content.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Definition {
    /// The sha256 of its canonical JSON.
    pub digest: String,
    /// The qualified workflow (`pkg.workflow`).
    pub workflow: String,
    /// The definition the engine runs (JSON).
    pub body: Value,
}

/// What the engine passes to start a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NewRun {
    /// The run id (the engine makes one).
    pub id: String,
    /// The qualified workflow.
    pub workflow: String,
    /// The pinned definition's digest (already stored).
    pub digest: String,
    /// Runs of one workflow with one key are one run.
    pub idempotency_key: Option<String>,
    /// The validated input.
    pub input: Value,
    /// What started it (JSON: kind, fire time, event, delivery).
    pub trigger: Value,
    /// Whose authority its steps run with (JSON).
    pub principal: Value,
    /// Who started it (approvals refuse this id).
    pub started_by: String,
    /// Whether a session waits on it (only then may it ask anyone).
    pub attended: bool,
    /// The package's settings that are not secret, as of the start.
    pub settings: Value,
    /// The rendered concurrency key, if the workflow has one.
    pub concurrency_key: Option<String>,
    /// When the run times out (Unix ms), if it has a timeout.
    pub deadline: Option<i64>,
    /// When it is created (Unix ms; the engine's clock).
    pub now: i64,
    /// The run's own session, created in the run row's transaction (so its first step needs
    /// no commit of its own); kept if a session of that id exists.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<crate::NewSession>,
    /// At most this many runs of the workflow's package may be active (`running`, `waiting`,
    /// `in_doubt`): a start beyond it is refused ([`crate::StoreError::Full`]) in the run
    /// row's own transaction, so processes on one file share the bound.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active_limit: Option<i64>,
}

/// A stored run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Run {
    /// The run id.
    pub id: String,
    /// The qualified workflow.
    pub workflow: String,
    /// The pinned definition's digest.
    pub digest: String,
    /// Its idempotency key.
    pub idempotency_key: Option<String>,
    /// Where it stands.
    pub status: RunStatus,
    /// The index of its current step (the step count once all ran).
    pub step: i64,
    /// The attempt of the current step last started (0: none yet).
    pub attempt: i64,
    /// Crashes found at the current step.
    pub crashes: i64,
    /// The input.
    pub input: Value,
    /// What started it.
    pub trigger: Value,
    /// Whose authority its steps run with.
    pub principal: Value,
    /// Who started it.
    pub started_by: String,
    /// Whether a session waits on it.
    pub attended: bool,
    /// The non-secret settings as of the start.
    pub settings: Value,
    /// The rendered concurrency key.
    pub concurrency_key: Option<String>,
    /// The output, once completed.
    pub output: Option<Value>,
    /// Why it failed or was cancelled.
    pub error: Option<String>,
    /// When it was created (Unix ms).
    pub created_at: i64,
    /// When it last changed (Unix ms).
    pub updated_at: i64,
    /// When it times out (Unix ms).
    pub deadline: Option<i64>,
    /// The engine running its current attempt, while it runs.
    pub lease: Option<Lease>,
    /// The fencing epoch: raised by one by every move that claims an attempt
    /// ([`RunMove::lease`]), so a write of an engine that claimed under an older epoch (it
    /// lost its lease) changes nothing.
    #[serde(default)]
    pub epoch: i64,
}

/// Which engine runs a run's current attempt, and until when it is taken to be alive: another
/// engine finding the attempt started without a result leaves it alone until then. The expiry
/// is on the store's clock (PostgreSQL's `now`, the machine's for SQLite), set by the claim and
/// moved on by the holder's heartbeats ([`WorkflowStore::heartbeat_run`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lease {
    /// The engine's owner id (one live process at a time per id).
    pub owner: String,
    /// Unix ms, on the store's clock.
    pub until: i64,
}

/// The lease a move takes on the attempt it starts: the store sets its expiry to its own clock
/// plus `ms` and raises the run's epoch by one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claim {
    /// The claiming engine's owner id.
    pub owner: String,
    /// How long the lease lasts without a heartbeat, in ms.
    pub ms: i64,
}

/// Which runs [`WorkflowStore::runs`] lists.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunFilter {
    /// Only runs in one of these states (all when empty).
    pub statuses: Vec<RunStatus>,
    /// Only runs of this workflow.
    pub workflow: Option<String>,
    /// Only runs with this concurrency key.
    pub concurrency_key: Option<String>,
    /// At most this many, newest first.
    pub limit: Option<usize>,
}

/// One stored attempt of one step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Attempt {
    /// The run.
    pub run_id: String,
    /// The step's index.
    pub step: i64,
    /// The attempt, from 1.
    pub attempt: i64,
    /// The step's id.
    pub step_id: String,
    /// The step's idempotency key, the same for every attempt and across restarts.
    pub idempotency_key: String,
    /// How it stands.
    pub status: AttemptStatus,
    /// Its output.
    pub output: Option<Value>,
    /// Its error.
    pub error: Option<String>,
    /// When it started (Unix ms).
    pub started_at: i64,
    /// When it ended (Unix ms).
    pub finished_at: Option<i64>,
    /// The process group running it, while a tool runs it in its own process (named as a
    /// waiter is, [`crate::waiter::of`]), so a cancel from another process can kill it; or
    /// [`ASKING`] while its call waits for a person's answer (its tool has not started).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub process: Option<String>,
}

/// [`Attempt::process`] while the attempt's call waits for a person's answer: its tool has not
/// started, so an attempt found so after a crash is run again, never in doubt.
pub const ASKING: &str = "asking";

/// A run with its attempts and waits and the last event id, read from one snapshot of the
/// store: what an engine decides a run's next move on.
#[derive(Debug, Clone, PartialEq)]
pub struct RunState {
    /// The run.
    pub run: Run,
    /// Every attempt of the run, by step then attempt.
    pub attempts: Vec<Attempt>,
    /// Every wait of the run, oldest first.
    pub waits: Vec<Wait>,
    /// The id of the last event stored (0 when none).
    pub last_event: i64,
    /// The store's clock when the snapshot was read (Unix ms): what the run's lease expiry is
    /// compared with.
    pub now: i64,
}

/// A stored wait.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Wait {
    /// Its id.
    pub id: i64,
    /// The run.
    pub run_id: String,
    /// The step's index.
    pub step: i64,
    /// The step's attempt.
    pub attempt: i64,
    /// What it waits for.
    pub kind: WaitKind,
    /// When it wakes (a timer, a retry) or times out (an approval, an event), Unix ms.
    pub wake_at: Option<i64>,
    /// The event it waits for.
    pub event: Option<String>,
    /// Events with an id above this one match (the last event id when its step started).
    pub after_event: i64,
    /// What the engine keeps with it (JSON: an approval's card, an event's condition).
    pub detail: Value,
    /// How it stands.
    pub status: WaitStatus,
    /// How it was resolved (JSON).
    pub resolution: Option<Value>,
    /// Who resolved it.
    pub resolved_by: Option<String>,
    /// When it was created (Unix ms).
    pub created_at: i64,
}

/// A wait to store with a run's move.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NewWait {
    /// What it waits for.
    pub kind: WaitKind,
    /// When it wakes or times out, Unix ms.
    pub wake_at: Option<i64>,
    /// The event it waits for.
    pub event: Option<String>,
    /// Events with an id above this one match.
    pub after_event: i64,
    /// What the engine keeps with it.
    pub detail: Value,
}

/// A stored package event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Event {
    /// Its id (increasing).
    pub id: i64,
    /// Its name.
    pub name: String,
    /// Who emitted it (a package id, `operator`).
    pub source: String,
    /// Its payload.
    pub payload: Value,
    /// When it was stored (Unix ms).
    pub created_at: i64,
}

/// Where the caller saw the run: an [`Advance`] is written only if the run is still there.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Expect {
    /// Its status.
    pub status: RunStatus,
    /// Its current step.
    pub step: i64,
    /// Its current attempt.
    pub attempt: i64,
    /// Its fencing epoch ([`Run::epoch`]; after a claim, the claim's).
    #[serde(default)]
    pub epoch: i64,
}

/// An attempt to write (inserted, or replacing the row of the same step and attempt).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AttemptWrite {
    /// The step's index.
    pub step: i64,
    /// The attempt.
    pub attempt: i64,
    /// The step's id.
    pub step_id: String,
    /// The step's idempotency key.
    pub idempotency_key: String,
    /// Its status.
    pub status: AttemptStatus,
    /// Its output.
    pub output: Option<Value>,
    /// Its error.
    pub error: Option<String>,
}

/// Where the run goes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunMove {
    /// Its new status.
    pub status: RunStatus,
    /// Its new current step.
    pub step: i64,
    /// Its new current attempt.
    pub attempt: i64,
    /// Its crash count at the (new) current step.
    pub crashes: i64,
    /// Its output, when it completes.
    pub output: Option<Value>,
    /// Its error, when it fails, is cancelled or is in doubt; `None` clears the error of an
    /// earlier move (a run in doubt that an operator settled goes on without it).
    pub error: Option<String>,
    /// The lease the engine that starts an attempt takes, raising the run's epoch (`None`
    /// clears the lease and keeps the epoch).
    pub lease: Option<Claim>,
}

/// A wait resolved in the same transaction.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WaitResolution {
    /// The wait.
    pub wait_id: i64,
    /// How (JSON).
    pub resolution: Value,
    /// By whom (`engine` for timers and timeouts).
    pub by: String,
}

/// One step of a run's progress, committed in one transaction or not at all.
#[derive(Debug, Clone, PartialEq)]
pub struct Advance {
    /// The run.
    pub run_id: String,
    /// Where the caller saw it. If it is no longer there, nothing is written and
    /// [`WorkflowStore::advance`] returns `false`.
    pub expect: Expect,
    /// Attempts to write.
    pub attempts: Vec<AttemptWrite>,
    /// Where the run goes.
    pub to: RunMove,
    /// A wait to store (an approval is stored before anyone is told of it; a timer's absolute
    /// wake time before anything sleeps).
    pub wait: Option<NewWait>,
    /// A pending wait to resolve; if it is no longer pending nothing is written and the call
    /// fails with [`StoreError::Conflict`](crate::StoreError::Conflict).
    pub resolve: Option<WaitResolution>,
    /// Withdraw every other pending wait of the run (cancel, a run that moves on).
    pub withdraw_waits: bool,
    /// The audit record of the step, appended in the same transaction.
    pub audit: Option<AuditEntry>,
    /// The call pipeline's own record of the step's call (its decisions), appended in the same
    /// transaction, so a step's result, its records and the run's move commit together.
    pub call_audit: Option<AuditEntry>,
    /// A run's first move, held back while its workflow's concurrency limit is full: nothing
    /// is written (and `advance` returns `false`) when `limit` other runs with the same key have
    /// begun and not ended.
    pub gate: Option<Gate>,
    /// The engine's clock (Unix ms).
    pub now: i64,
}

/// A limit checked in the same transaction as a run's first move: a workflow's concurrency
/// limit, or the queue of a schedule with `overlap: queue`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Gate {
    /// The qualified workflow.
    pub workflow: String,
    /// The rendered concurrency key; `None` counts every run of the workflow.
    pub key: Option<String>,
    /// Most runs (with this key) that may have begun and not ended.
    pub limit: i64,
    /// Also count the runs created before this one that have not ended, begun or not, so
    /// held-back runs start in the order they were created (a queue).
    pub ordered: bool,
}

/// The durable state of workflow runs. Object-safe and `Send + Sync`; every write method
/// returns once its transaction is durable.
pub trait WorkflowStore: Send + Sync {
    /// Stores a definition under its digest; `false` if it was already stored (it is never
    /// replaced: a digest names one content).
    fn put_definition(&self, definition: &Definition) -> Result<bool>;

    /// The definition with this digest.
    fn definition(&self, digest: &str) -> Result<Option<Definition>>;

    /// Creates a run, or (same workflow, same idempotency key) returns the one that exists:
    /// `(run, created)`. [`StoreError::NotFound`](crate::StoreError::NotFound) if its
    /// definition is not stored.
    fn create_run(&self, new: &NewRun) -> Result<(Run, bool)>;

    /// Records a schedule's fire and creates its run in one transaction; a fire already
    /// recorded (same workflow, same fire time, by this or another process) returns the run it
    /// started and `false`.
    fn fire_schedule(&self, workflow: &str, fire_at: i64, new: &NewRun) -> Result<(Run, bool)>;

    /// Records a webhook delivery and creates its run in one transaction; a delivery already
    /// recorded (same hook, same `Idempotency-Key`) returns its run and `false`.
    fn deliver_webhook(&self, hook: &str, delivery_key: &str, new: &NewRun) -> Result<(Run, bool)>;

    /// The run with this id.
    fn run(&self, id: &str) -> Result<Option<Run>>;

    /// Runs matching the filter, newest first.
    fn runs(&self, filter: &RunFilter) -> Result<Vec<Run>>;

    /// The run with this id, its attempts, its waits and the last event id, all read in one
    /// transaction (one consistent snapshot).
    fn run_state(&self, id: &str) -> Result<Option<RunState>>;

    /// Every attempt of a run, by step then attempt.
    fn attempts(&self, run_id: &str) -> Result<Vec<Attempt>>;

    /// Records what runs an attempt now ([`Attempt::process`]): its tool's process group, or
    /// [`ASKING`] while its call waits for a person's answer; `None` clears it. `false` (and
    /// nothing written) unless the run still runs that attempt under `epoch` and it has no
    /// result yet: the caller then stops the process, whose result would be discarded.
    fn set_attempt_process(
        &self,
        run_id: &str,
        step: i64,
        attempt: i64,
        epoch: i64,
        process: Option<&str>,
    ) -> Result<bool>;

    /// The holder's heartbeat: moves the lease of a running run to the store's clock plus
    /// `ms`. `false` (and nothing written) unless the run is `running` under `epoch`, leased to
    /// `owner`, and that lease has not run out: a holder whose lease ran out has lost it, even
    /// before anyone took the run over.
    fn heartbeat_run(&self, run_id: &str, epoch: i64, owner: &str, ms: i64) -> Result<bool>;

    /// The ids of the `running` runs whose lease has run out by the store's clock (their holder
    /// stopped heartbeating), oldest first: runs another engine may take over.
    fn expired_leases(&self) -> Result<Vec<String>>;

    /// The store's clock (Unix ms): PostgreSQL's, which every instance shares; the machine's
    /// for SQLite.
    fn clock_ms(&self) -> Result<i64>;

    /// Commits one step of a run's progress (see [`Advance`]). `false` if the run was no
    /// longer where the caller saw it: nothing was written.
    fn advance(&self, advance: &Advance) -> Result<bool>;

    /// Appends an audit record on its own: the record of a step's call whose result was
    /// discarded (the run was cancelled or taken over while the call ran).
    fn append_step_audit(&self, entry: &AuditEntry) -> Result<()>;

    /// Every wait of a run, oldest first.
    fn waits(&self, run_id: &str) -> Result<Vec<Wait>>;

    /// Pending waits, oldest first: of one kind, or all.
    fn pending_waits(&self, kind: Option<WaitKind>) -> Result<Vec<Wait>>;

    /// Pending waits whose `wake_at` is at or before `now`, soonest first.
    fn due_waits(&self, now: i64) -> Result<Vec<Wait>>;

    /// The soonest `wake_at` of a pending wait or lease expiry of a running run, if any.
    fn next_wake_at(&self) -> Result<Option<i64>>;

    /// Stores an event (before anything is told of it) and returns its id.
    fn emit_event(&self, name: &str, source: &str, payload: &Value, now: i64) -> Result<i64>;

    /// Events of this name with an id above `after`, oldest first.
    fn events_after(&self, name: &str, after: i64) -> Result<Vec<Event>>;

    /// The id of the last event stored (0 when none).
    fn last_event_id(&self) -> Result<i64>;

    /// The recorded fires of a schedule (fire time, run id), oldest first.
    fn schedule_fires(&self, workflow: &str) -> Result<Vec<(i64, String)>>;

    /// The newest recorded fire time of a workflow's schedules, if any.
    fn last_schedule_fire(&self, workflow: &str) -> Result<Option<i64>>;

    /// Events of any name with an id above `after`, oldest first, at most `limit`.
    fn events_since(&self, after: i64, limit: usize) -> Result<Vec<Event>>;

    /// A named position of the scheduler (how far the event fan-out got, since when a
    /// workflow's schedules are watched), if it was ever set.
    fn cursor(&self, name: &str) -> Result<Option<i64>>;

    /// Sets the position `name` to `position` unless it is set already, and returns the
    /// stored one (the first writer across processes wins).
    fn init_cursor(&self, name: &str, position: i64) -> Result<i64>;

    /// Moves the position `name` forward to `position` (never back), and returns the stored
    /// one.
    fn advance_cursor(&self, name: &str, position: i64) -> Result<i64>;

    // --- instances (crate::instances) ---

    /// Registers an instance (again, under an id registered before: its row starts afresh,
    /// not reaped), its start and heartbeat on the store's clock.
    fn register_instance(&self, new: &NewInstance) -> Result<Instance>;

    /// An instance's heartbeat, on the store's clock; `false` when it is not registered or
    /// was reaped (taken for dead): it registers again.
    fn heartbeat_instance(&self, id: &str) -> Result<bool>;

    /// Every registered instance, oldest first.
    fn instances(&self) -> Result<Vec<Instance>>;

    /// Marks reaped by `by` every instance not reaped yet whose last heartbeat is more than
    /// `stale_ms` old by the store's clock, and returns them: each to exactly one reaper.
    fn reap_instances(&self, stale_ms: i64, by: &str) -> Result<Vec<Instance>>;

    /// Ends a call in flight with `entry`, its `call` record (an `interrupted` one, when a
    /// reaper closes a dead instance's calls): written only while the call's start is still in
    /// flight, so of two closers one writes and the other gets `false`.
    fn close_call(&self, entry: &AuditEntry) -> Result<bool>;
}
