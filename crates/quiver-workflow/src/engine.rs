//! The engine: loads a run, decides, commits, calls the runner, commits the result, until the
//! run waits or ends. Every commit goes through [`WorkflowStore::advance`], conditional on the
//! run being where the engine saw it; see docs/workflows.md for the order.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::{Value, json};

use quiver_store::WorkflowStore;
use quiver_store::workflow::{self as store, NewRun, Run, RunStatus, WaitKind, WaitStatus};

use crate::clock::Clock;
use crate::crash;
use crate::decide::{self, Next, View, WaitOutcome};
use crate::definition::Definition;
use crate::driving;
use crate::error::{Result, WorkflowError};
use crate::eval;
use crate::lease;
use crate::pins;
use crate::runner::StepRunner;

mod operator;

/// At most this many runs of one package are active (`running`, `waiting`, `in_doubt`) at
/// once, however they were started (a call, a schedule, an event, a webhook): a start beyond
/// it is refused, in the run row's own transaction.
pub const MAX_ACTIVE_RUNS_PER_PACKAGE: i64 = 2_048;

/// How a run is started.
#[derive(Debug, Clone, PartialEq)]
pub struct Start {
    /// The validated input.
    pub input: Value,
    /// What started it (JSON: `{"kind": "manual"}`, a fire, an event, a delivery).
    pub trigger: Value,
    /// Whose authority its steps run with.
    pub principal: Value,
    /// Who started it.
    pub started_by: String,
    /// Whether a session waits on it.
    pub attended: bool,
    /// The package's non-secret settings.
    pub settings: Value,
    /// An explicit idempotency key (`--key`); otherwise the workflow's `idempotency_key`
    /// template, if any.
    pub key: Option<String>,
}

/// Drives workflow runs over a store, a step runner and a clock.
pub struct Engine<'a> {
    pub(crate) store: &'a dyn WorkflowStore,
    runner: &'a dyn StepRunner,
    pub(crate) clock: &'a dyn Clock,
    owner: String,
    lease_ms: i64,
}

static RUN_COUNTER: AtomicU64 = AtomicU64::new(0);

impl<'a> Engine<'a> {
    /// An engine on these parts.
    pub fn new(
        store: &'a dyn WorkflowStore,
        runner: &'a dyn StepRunner,
        clock: &'a dyn Clock,
    ) -> Engine<'a> {
        let n = RUN_COUNTER.fetch_add(1, Ordering::Relaxed);
        let process = quiver_store::waiter::current()
            .unwrap_or_else(|| format!("pid-{}", std::process::id()));
        Engine {
            store,
            runner,
            clock,
            owner: format!("{process}/{n}"),
            lease_ms: lease::configured_ms(),
        }
    }

    /// Sets how long the lease this engine takes on an attempt lasts without a heartbeat
    /// (default [`lease::configured_ms`]): the engine heartbeats it every third of that while the
    /// step runs, and another engine takes the attempt over once it ran out by the store's
    /// clock. At least 3 ms.
    pub fn with_lease(mut self, lease: std::time::Duration) -> Engine<'a> {
        self.lease_ms = i64::try_from(lease.as_millis()).unwrap_or(i64::MAX).max(3);
        self
    }

    /// Sets the owner id under which this engine takes leases on the attempts it runs. One live
    /// process at a time may use an id (the host holds a lock for it): a process restarted
    /// under the same id recovers its interrupted attempts at once, while the attempts of
    /// another live owner are left alone until its lease runs out. The default is unique to
    /// this engine and names its process (`<waiter>/<n>`, [`quiver_store::waiter`]): once that
    /// process is known to be gone (`kill -9`), its leases hold nothing and any engine recovers
    /// its attempts at once.
    pub fn with_owner(mut self, owner: impl Into<String>) -> Engine<'a> {
        self.owner = owner.into();
        self
    }

    /// Stores a definition (if it is not yet) and returns its digest.
    pub fn pin(&self, def: &Definition) -> Result<String> {
        let digest = def.digest()?;
        self.store.put_definition(&store::Definition {
            digest: digest.clone(),
            workflow: def.qualified(),
            body: def.to_json()?,
        })?;
        Ok(digest)
    }

    pub(crate) fn definition(&self, digest: &str) -> Result<Definition> {
        let stored = self
            .store
            .definition(digest)?
            .ok_or_else(|| WorkflowError::Definition {
                digest: digest.to_owned(),
                detail: "not stored".into(),
            })?;
        Definition::from_stored(&stored)
    }

    /// The new run's record, before it is stored: its key rendered, its id made.
    pub(crate) fn new_run(&self, digest: &str, def: &Definition, start: &Start) -> Result<NewRun> {
        let now = self.clock.now_ms();
        let ctx = json!({"input": start.input, "trigger": start.trigger, "settings": start.settings, "run": {"id": null}});
        let key = match (&start.key, &def.workflow.idempotency_key) {
            (Some(k), _) => Some(k.clone()),
            (None, Some(template)) => Some(eval::render_text(template, &ctx)?),
            (None, None) => None,
        };
        let concurrency_key = match &def.workflow.concurrency {
            Some(c) => Some(match &c.key {
                Some(t) => eval::render_text(t, &ctx)?,
                None => String::new(),
            }),
            None => None,
        };
        let n = RUN_COUNTER.fetch_add(1, Ordering::Relaxed);
        let seed = json!([digest, key, now, std::process::id(), n]);
        let id = format!("run-{}", &quiver_store::argument_digest(&seed, &[])[..20]);
        let mut new = NewRun {
            id,
            workflow: def.qualified(),
            digest: digest.to_owned(),
            idempotency_key: key,
            input: start.input.clone(),
            trigger: start.trigger.clone(),
            principal: start.principal.clone(),
            started_by: start.started_by.clone(),
            attended: start.attended,
            settings: start.settings.clone(),
            concurrency_key,
            deadline: def
                .workflow
                .timeout
                .map(|t| now.saturating_add(i64::try_from(t.0.as_millis()).unwrap_or(i64::MAX))),
            now,
            session: None,
            active_limit: Some(MAX_ACTIVE_RUNS_PER_PACKAGE),
        };
        new.session = self.runner.run_session(&new);
        Ok(new)
    }

    /// Starts a run of a pinned definition: the run row is committed before its id is
    /// returned. Same workflow and key → the existing run and `false`.
    pub fn start(&self, digest: &str, start: &Start) -> Result<(Run, bool)> {
        let def = self.definition(digest)?;
        check_input(&def, &start.input)?;
        let new = self.new_run(digest, &def, start)?;
        let started = self.store.create_run(&new)?;
        crash::point("run_created");
        Ok(started)
    }

    fn load(&self, run_id: &str) -> Result<Loaded> {
        self.load_with(run_id, None)
    }

    /// The run as it stands, in one read; `known` is its definition when the caller has it
    /// already (a digest names one content, so it never needs reading again).
    fn load_with(&self, run_id: &str, known: Option<(String, Arc<Definition>)>) -> Result<Loaded> {
        let store::RunState {
            mut run,
            attempts,
            waits,
            last_event,
            now: lease_now,
        } = self
            .store
            .run_state(run_id)?
            .ok_or_else(|| WorkflowError::NoRun(run_id.to_owned()))?;
        let def = match known {
            Some((digest, def)) if digest == run.digest => def,
            _ => Arc::new(self.definition(&run.digest)?),
        };
        // A lease of an engine whose process is known to be gone holds nothing.
        run.lease = run.lease.filter(|l| owner_alive(&l.owner));
        Ok(Loaded {
            attempts,
            waits,
            last_event,
            lease_now,
            run,
            def,
        })
    }

    /// Drives a run until it waits, is in doubt or ends, and returns it then. While another
    /// thread of this process drives the run, this waits for it first; a thread that drives
    /// the run already (a step whose call reaches its own run) gets the run as it stands.
    pub fn drive(&self, run_id: &str) -> Result<Run> {
        match driving::enter(run_id) {
            Some(_guard) => self.drive_held(run_id),
            None => self
                .store
                .run(run_id)?
                .ok_or_else(|| WorkflowError::NoRun(run_id.to_owned())),
        }
    }

    fn drive_held(&self, run_id: &str) -> Result<Run> {
        let mut def = None;
        loop {
            let loaded = self.load_with(run_id, def.take())?;
            def = Some(loaded.known());
            let view = loaded.view(self.clock.now_ms(), &self.owner, self.lease_ms);
            let next = decide::decide(&view);
            if !matches!(next, Next::Idle) && !self.may_drive(&loaded) {
                return Ok(loaded.run);
            }
            match next {
                Next::Idle => return Ok(loaded.run),
                Next::Commit(advance) => {
                    if !self.store.advance(&advance)? {
                        if advance.gate.is_some() {
                            // Queued behind the concurrency limit: `tick` tries again.
                            return Ok(loaded.run);
                        }
                        continue;
                    }
                    crash::committed(&advance, "step_committed");
                }
                Next::Call { start, call } => {
                    if !self.store.advance(&start)? {
                        if start.gate.is_some() {
                            return Ok(loaded.run);
                        }
                        // Someone else moved the run first: look again.
                        continue;
                    }
                    crash::point("attempt_started");
                    let stop = || self.runner.lease_lost(&call);
                    let ((outcome, record), lost) = lease::holding(
                        self.store,
                        &self.owner,
                        self.lease_ms,
                        &call,
                        &stop,
                        || self.runner.run_recorded(&call),
                    );
                    crash::point("tool_exited");
                    if lost {
                        // Another engine may run the attempt again: nothing of this one is
                        // written but the call's own record.
                        lease::refused(&call, "the lease was lost while the step ran");
                        if let Some(record) = &record {
                            self.store.append_step_audit(record)?;
                        }
                        continue;
                    }
                    let mut done = decide::after_call(
                        &View {
                            now: self.clock.now_ms(),
                            ..view
                        },
                        &call,
                        &outcome,
                    );
                    one_record(&mut done, record);
                    // `false`: the run was cancelled or taken over meanwhile; the late result is
                    // discarded, and the call's own record kept.
                    if self.store.advance(&done)? {
                        crash::committed(&done, "result_committed");
                    } else {
                        lease::refused(&call, "the run moved on (cancelled, or taken over)");
                        if let Some(record) = &done.call_audit {
                            self.store.append_step_audit(record)?;
                        }
                    }
                }
            }
        }
    }

    /// Drives every run found `running` (after a restart: a step found started without a
    /// result is recovered as the definition says). Returns the runs as they then stand.
    pub fn resume(&self) -> Result<Vec<Run>> {
        let running = self.store.runs(&store::RunFilter {
            statuses: vec![RunStatus::Running],
            ..Default::default()
        })?;
        running.iter().map(|r| self.drive(&r.id)).collect()
    }

    /// Resolves what is due now (timers, retries' pauses, approval and event timeouts) and
    /// event waits whose event has come, then drives those runs. Returns the runs it moved.
    pub fn tick(&self) -> Result<Vec<Run>> {
        self.wake()?.iter().map(|id| self.drive(id)).collect()
    }

    /// What [`Engine::tick`] resolves, without driving: the ids of the runs to drive now
    /// (woken, matched, timed out, or queued at their first step behind a concurrency limit or
    /// an `overlap: queue`), oldest first. A resolution is committed before its id is
    /// returned; a run so left `running` is driven by whoever drives it next (or by
    /// [`Engine::resume`] after a restart).
    pub fn wake(&self) -> Result<Vec<String>> {
        let now = self.clock.now_ms();
        let mut moved = Vec::new();
        // Events first: one stored before an event wait's timeout wins over the timeout.
        for wait in self.store.pending_waits(Some(WaitKind::Event))? {
            let Some(name) = &wait.event else { continue };
            let loaded = self.load(&wait.run_id)?;
            let view = loaded.view(now, &self.owner, self.lease_ms);
            let event = self
                .store
                .events_after(name, wait.after_event)?
                .into_iter()
                .filter(|e| wait.wake_at.is_none_or(|until| e.created_at <= until))
                .find(|e| decide::event_matches(&view, &wait, e));
            if let Some(event) = event
                && self.resolve(&wait.run_id, wait.id, &WaitOutcome::Event(event))?
            {
                moved.push(wait.run_id.clone());
            }
        }
        for wait in self.store.due_waits(now)? {
            let outcome = match wait.kind {
                WaitKind::Timer | WaitKind::Retry => WaitOutcome::Woke,
                WaitKind::Approval | WaitKind::Event => WaitOutcome::TimedOut,
            };
            if self.resolve(&wait.run_id, wait.id, &outcome)? {
                moved.push(wait.run_id.clone());
            }
        }
        // Runs held back at their first step try again, oldest first.
        let mut queued = self.store.runs(&store::RunFilter {
            statuses: vec![RunStatus::Running],
            ..Default::default()
        })?;
        queued.retain(|r| {
            r.step == 0 && r.attempt == 0 && (r.concurrency_key.is_some() || decide::queued_fire(r))
        });
        queued.sort_by(|a, b| (a.created_at, &a.id).cmp(&(b.created_at, &b.id)));
        moved.extend(queued.into_iter().map(|r| r.id));
        // Runs whose holder stopped heartbeating (killed, stopped, cut off): taken over.
        moved.extend(self.store.expired_leases()?);
        let mut seen = std::collections::HashSet::new();
        moved.retain(|id| seen.insert(id.clone()));
        Ok(moved)
    }

    /// Resolves one wait of a run; `false` if it no longer fits (resolved meanwhile, the run
    /// moved on).
    fn resolve(&self, run_id: &str, wait_id: i64, outcome: &WaitOutcome) -> Result<bool> {
        let loaded = self.load(run_id)?;
        let Some(wait) = loaded
            .waits
            .iter()
            .find(|w| w.id == wait_id && w.status == WaitStatus::Pending)
        else {
            return Ok(false);
        };
        let view = loaded.view(self.clock.now_ms(), &self.owner, self.lease_ms);
        let Some(advance) = decide::resolve(&view, wait, outcome) else {
            return Ok(false);
        };
        if !self.may_drive(&loaded) {
            return Ok(false);
        }
        match self.store.advance(&advance) {
            Ok(done) => {
                if done {
                    crash::point("wait_resolved");
                }
                Ok(done)
            }
            Err(quiver_store::StoreError::Conflict(_)) => Ok(false),
            Err(e) => Err(e.into()),
        }
    }

    /// The pins of `loaded`'s definition that this engine's runner has not loaded now
    /// ([`pins::unmet`]): empty when it may drive the run.
    fn unmet(&self, loaded: &Loaded) -> Vec<pins::Unmet> {
        pins::unmet(&loaded.def.packages, &|id| self.runner.package_digest(id))
    }

    /// Whether this engine may drive `loaded` ([`crate::pins`]); when not, says why once.
    fn may_drive(&self, loaded: &Loaded) -> bool {
        let unmet = self.unmet(loaded);
        if unmet.is_empty() {
            return true;
        }
        pins::log_once(&loaded.run.id, &unmet);
        false
    }

    /// What the run `run_id` waits for before this engine may drive it: `None` when its pinned
    /// packages are all loaded here, else which digests ([`pins::waiting_for`]).
    pub fn waiting_for(&self, run_id: &str) -> Result<Option<String>> {
        let unmet = self.unmet(&self.load(run_id)?);
        Ok((!unmet.is_empty()).then(|| pins::waiting_for(&unmet)))
    }

    /// Stores an event (before anything is told of it), then wakes the runs waiting on it.
    pub fn emit(&self, name: &str, source: &str, payload: &Value) -> Result<i64> {
        let id = self
            .store
            .emit_event(name, source, payload, self.clock.now_ms())?;
        self.tick()?;
        Ok(id)
    }
}

/// One audit record per step decision, in the run's session: the runner's record of the
/// step's call (with every decision of the pipeline) carries the engine's facts of the attempt
/// (workflow, step, attempt, its outcome) in its `detail.workflow_step`, instead of a second
/// record beside it; without one, the engine's record is the step's.
fn one_record(done: &mut store::Advance, call: Option<quiver_store::AuditEntry>) {
    let Some(mut call) = call else {
        return;
    };
    if let Some(step) = done.audit.take() {
        let facts = json!({
            "origin": step.origin,
            "attempt": step.call_id,
            "status": step.status,
            "detail": step.detail,
        });
        match &mut call.detail {
            Some(Value::Object(detail)) => {
                detail.insert("workflow_step".into(), facts);
            }
            other => {
                let kept = other.take();
                let mut detail = serde_json::Map::new();
                if let Some(kept) = kept {
                    detail.insert("call".into(), kept);
                }
                detail.insert("workflow_step".into(), facts);
                *other = Some(Value::Object(detail));
            }
        }
    }
    done.call_audit = Some(call);
}

/// Whether the engine that took a lease may still be running: `false` only for a default owner
/// id (`<waiter>/<n>`) whose process is known to be gone.
fn owner_alive(owner: &str) -> bool {
    owner
        .rsplit_once('/')
        .is_none_or(|(process, _)| quiver_store::waiter::alive(process))
}

/// Refuses an input its workflow's `input` schema does not accept.
pub(crate) fn check_input(def: &Definition, input: &Value) -> Result<()> {
    let validator = quiver_package::schema::compile(&def.workflow.input)
        .map_err(|e| WorkflowError::Refused(format!("the input schema is invalid: {e}")))?;
    match quiver_package::schema::first_error(&validator, input) {
        Some(e) => Err(WorkflowError::Refused(format!(
            "the input of {} does not fit its schema: {e}",
            def.qualified()
        ))),
        None => Ok(()),
    }
}

/// A run and everything its decisions read.
struct Loaded {
    run: Run,
    def: Arc<Definition>,
    attempts: Vec<store::Attempt>,
    waits: Vec<store::Wait>,
    last_event: i64,
    lease_now: i64,
}

impl Loaded {
    /// Its definition, for the next load of the same run.
    fn known(&self) -> (String, Arc<Definition>) {
        (self.run.digest.clone(), self.def.clone())
    }

    fn view<'v>(&'v self, now: i64, owner: &'v str, lease_ms: i64) -> View<'v> {
        View {
            owner,
            lease_now: self.lease_now,
            lease_ms,
            def: &self.def,
            run: &self.run,
            attempts: &self.attempts,
            waits: &self.waits,
            last_event: self.last_event,
            now,
        }
    }
}
