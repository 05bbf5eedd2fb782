//! The engine: loads a run, decides, commits, calls the runner, commits the result, until the
//! run waits or ends. Every commit goes through [`WorkflowStore::advance`], conditional on the
//! run being where the engine saw it; see docs/workflows.md for the order.

use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::{Value, json};

use quiver_store::WorkflowStore;
use quiver_store::workflow::{self as store, NewRun, Run, RunStatus, WaitKind, WaitStatus};

use quiver_package::workflow::{Overlap, Trigger};

use crate::clock::Clock;
use crate::decide::{self, Next, View, WaitOutcome};
use crate::definition::Definition;
use crate::error::{Result, WorkflowError};
use crate::eval;
use crate::runner::StepRunner;
use crate::schedule;

mod operator;

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
    store: &'a dyn WorkflowStore,
    runner: &'a dyn StepRunner,
    clock: &'a dyn Clock,
    owner: String,
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
        }
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

    fn definition(&self, digest: &str) -> Result<Definition> {
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
    fn new_run(&self, digest: &str, def: &Definition, start: &Start) -> Result<NewRun> {
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
        Ok(NewRun {
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
        })
    }

    /// Starts a run of a pinned definition: the run row is committed before its id is
    /// returned. Same workflow and key → the existing run and `false`.
    pub fn start(&self, digest: &str, start: &Start) -> Result<(Run, bool)> {
        let def = self.definition(digest)?;
        check_input(&def, &start.input)?;
        let new = self.new_run(digest, &def, start)?;
        Ok(self.store.create_run(&new)?)
    }

    /// Starts the run of one schedule fire (keyed by its fire time): once across crashes and
    /// processes.
    pub fn fire(&self, digest: &str, fire_at: i64, start: &Start) -> Result<(Run, bool)> {
        let def = self.definition(digest)?;
        let new = self.new_run(digest, &def, start)?;
        Ok(self.store.fire_schedule(&def.qualified(), fire_at, &new)?)
    }

    /// Starts the runs of every schedule fire of the definition that is due now: the fires
    /// after the last one recorded (or after `since`, when none is), as each schedule's
    /// `catchup` says. Each fire is keyed by its fire time, so it starts one run however many
    /// processes call this; a fire recorded already returns its run with `false`. With
    /// `overlap: skip`, no fire starts while a run of the workflow is still going.
    pub fn fire_due(&self, digest: &str, since: i64, start: &Start) -> Result<Vec<(Run, bool)>> {
        let def = self.definition(digest)?;
        let workflow = def.qualified();
        let now = self.clock.now();
        let last = self
            .store
            .schedule_fires(&workflow)?
            .last()
            .map_or(since, |(at, _)| (*at).max(since));
        let mut out = Vec::new();
        for trigger in &def.workflow.triggers {
            let Trigger::Schedule(schedule) = trigger else {
                continue;
            };
            let compiled = schedule::Compiled::new(schedule)?;
            for fire in compiled.due(crate::clock::from_ms(last), now) {
                if schedule.overlap == Overlap::Skip && self.going(&workflow)? {
                    continue;
                }
                let start = Start {
                    trigger: json!({"kind": "schedule", "cron": schedule.cron,
                                    "timezone": schedule.timezone, "fire_at": fire.to_rfc3339()}),
                    key: None,
                    ..start.clone()
                };
                out.push(self.fire(digest, schedule::fire_key(fire), &start)?);
            }
        }
        Ok(out)
    }

    /// Starts the run an event asks for, if one of the definition's `event` triggers names it
    /// and its `if` holds over `event` (the payload) and `settings`. The run is keyed by the
    /// event's id, so handing the same stored event over again (after a crash, by a second
    /// process) returns the same run with `false`.
    pub fn on_event(
        &self,
        digest: &str,
        event: &store::Event,
        start: &Start,
    ) -> Result<Option<(Run, bool)>> {
        let def = self.definition(digest)?;
        let ctx = json!({"event": event.payload, "settings": start.settings, "trigger": {}});
        for trigger in &def.workflow.triggers {
            let Trigger::Event(t) = trigger else { continue };
            if t.name != event.name {
                continue;
            }
            if let Some(condition) = &t.condition
                && !eval::condition(condition, &ctx)?
            {
                continue;
            }
            let start = Start {
                trigger: json!({"kind": "event", "name": event.name, "id": event.id,
                                "source": event.source, "payload": event.payload}),
                key: Some(format!("event:{}", event.id)),
                ..start.clone()
            };
            return self.start(digest, &start).map(Some);
        }
        Ok(None)
    }

    /// Whether a run of the workflow has not ended.
    fn going(&self, workflow: &str) -> Result<bool> {
        Ok(!self
            .store
            .runs(&store::RunFilter {
                statuses: vec![RunStatus::Running, RunStatus::Waiting, RunStatus::InDoubt],
                workflow: Some(workflow.to_owned()),
                limit: Some(1),
                ..Default::default()
            })?
            .is_empty())
    }

    fn load(&self, run_id: &str) -> Result<Loaded> {
        let run = self
            .store
            .run(run_id)?
            .ok_or_else(|| WorkflowError::NoRun(run_id.to_owned()))?;
        let def = self.definition(&run.digest)?;
        // A lease of an engine whose process is known to be gone holds nothing.
        let mut run = run;
        run.lease = run.lease.filter(|l| owner_alive(&l.owner));
        Ok(Loaded {
            attempts: self.store.attempts(run_id)?,
            waits: self.store.waits(run_id)?,
            last_event: self.store.last_event_id()?,
            run,
            def,
        })
    }

    /// Drives a run until it waits, is in doubt or ends, and returns it then.
    pub fn drive(&self, run_id: &str) -> Result<Run> {
        loop {
            let loaded = self.load(run_id)?;
            let view = loaded.view(self.clock.now_ms(), &self.owner);
            match decide::decide(&view) {
                Next::Idle => return Ok(loaded.run),
                Next::Commit(advance) => {
                    if !self.store.advance(&advance)? && advance.gate.is_some() {
                        // Queued behind the concurrency limit: `tick` tries again.
                        return Ok(loaded.run);
                    }
                }
                Next::Call { start, call } => {
                    if !self.store.advance(&start)? {
                        if start.gate.is_some() {
                            return Ok(loaded.run);
                        }
                        // Someone else moved the run first: look again.
                        continue;
                    }
                    let outcome = self.runner.run(&call);
                    let done = decide::after_call(
                        &View {
                            now: self.clock.now_ms(),
                            ..view
                        },
                        &call,
                        &outcome,
                    );
                    // `false`: the run was cancelled or taken over meanwhile; the late result is
                    // discarded.
                    self.store.advance(&done)?;
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
        let now = self.clock.now_ms();
        let mut moved = Vec::new();
        // Events first: one stored before an event wait's timeout wins over the timeout.
        for wait in self.store.pending_waits(Some(WaitKind::Event))? {
            let Some(name) = &wait.event else { continue };
            let loaded = self.load(&wait.run_id)?;
            let view = loaded.view(now, &self.owner);
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
        // Runs queued behind a concurrency limit try again.
        let queued = self.store.runs(&store::RunFilter {
            statuses: vec![RunStatus::Running],
            ..Default::default()
        })?;
        moved.extend(
            queued
                .into_iter()
                .filter(|r| r.step == 0 && r.attempt == 0 && r.concurrency_key.is_some())
                .map(|r| r.id),
        );
        moved.dedup();
        moved.iter().map(|id| self.drive(id)).collect()
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
        let view = loaded.view(self.clock.now_ms(), &self.owner);
        let Some(advance) = decide::resolve(&view, wait, outcome) else {
            return Ok(false);
        };
        match self.store.advance(&advance) {
            Ok(done) => Ok(done),
            Err(quiver_store::StoreError::Conflict(_)) => Ok(false),
            Err(e) => Err(e.into()),
        }
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

/// Whether the engine that took a lease may still be running: `false` only for a default owner
/// id (`<waiter>/<n>`) whose process is known to be gone.
fn owner_alive(owner: &str) -> bool {
    owner
        .rsplit_once('/')
        .is_none_or(|(process, _)| quiver_store::waiter::alive(process))
}

/// Refuses an input its workflow's `input` schema does not accept.
fn check_input(def: &Definition, input: &Value) -> Result<()> {
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
    def: Definition,
    attempts: Vec<store::Attempt>,
    waits: Vec<store::Wait>,
    last_event: i64,
}

impl Loaded {
    fn view<'v>(&'v self, now: i64, owner: &'v str) -> View<'v> {
        View {
            owner,
            def: &self.def,
            run: &self.run,
            attempts: &self.attempts,
            waits: &self.waits,
            last_event: self.last_event,
            now,
        }
    }
}
