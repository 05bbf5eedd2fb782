//! The engine's state machine, as pure functions: given the pinned definition and the stored
//! state of a run, what to commit next. Nothing here reads a clock or the store; the
//! [`Engine`](crate::Engine) loads the [`View`], commits what comes out, and calls the runner.

use serde_json::{Map, Value, json};

use quiver_package::workflow::{OnTimeout, StepAction, WaitFor};
use quiver_store::workflow::{
    Advance, Attempt, AttemptStatus, AttemptWrite, Event, Expect, NewWait, Run, RunMove, RunStatus,
    Wait, WaitKind, WaitResolution,
};
use quiver_store::{AuditEntry, AuditKind, AuditStatus};

use crate::backoff;
use crate::definition::Definition;
use crate::eval;
use crate::runner::{StepCall, StepOutcome, Target};

/// Crashes of the process at one step after which the run is parked as failed.
pub const MAX_CRASHES: i64 = 5;

/// How long an engine's lease on an attempt lasts without a heartbeat, by default: the engine
/// heartbeats every third of it while the step runs, and another engine takes the attempt over
/// once it ran out (by the store's clock).
pub const LEASE_MS: i64 = 15_000;

/// Everything a decision depends on.
#[derive(Debug, Clone, Copy)]
pub struct View<'a> {
    /// The pinned definition.
    pub def: &'a Definition,
    /// The run as stored.
    pub run: &'a Run,
    /// Its attempts, by step then attempt.
    pub attempts: &'a [Attempt],
    /// Its waits, oldest first.
    pub waits: &'a [Wait],
    /// The id of the last stored event (an event wait matches events after it).
    pub last_event: i64,
    /// Now, Unix ms.
    pub now: i64,
    /// The deciding engine's owner id: an attempt started by another owner whose lease has not
    /// run out is that engine's, not a crash.
    pub owner: &'a str,
    /// The store's clock when the run was read (Unix ms): what a lease's expiry is compared
    /// with.
    pub lease_now: i64,
    /// How long the lease this engine takes on an attempt lasts without a heartbeat (ms).
    pub lease_ms: i64,
}

/// What to do next with a run.
#[derive(Debug, Clone, PartialEq)]
pub enum Next {
    /// Nothing: the run waits, is in doubt, or has ended.
    Idle,
    /// Commit `start` (the attempt as started), then run `call`, then commit
    /// [`after_call`]'s result.
    Call {
        /// The commit before the call.
        start: Box<Advance>,
        /// The call.
        call: Box<StepCall>,
    },
    /// Commit this, then decide again.
    Commit(Box<Advance>),
}

/// How a wait ended.
#[derive(Debug, Clone, PartialEq)]
pub enum WaitOutcome {
    /// A person approved.
    Approved {
        /// Who.
        by: String,
    },
    /// A person denied.
    Denied {
        /// Who.
        by: String,
        /// Why, if they said.
        note: Option<String>,
    },
    /// Its time ran out (an approval's or an event's timeout).
    TimedOut,
    /// Its moment came (a timer, a retry's pause).
    Woke,
    /// The event it waited for.
    Event(Event),
}

/// What an operator decides for a run.
#[derive(Debug, Clone, PartialEq)]
pub enum Operator {
    /// Run the step in doubt again.
    Retry,
    /// Take the step in doubt as done, with this output.
    Done(Value),
    /// Fail the run.
    Fail(String),
    /// Cancel the run.
    Cancel,
}

impl View<'_> {
    fn step_count(&self) -> i64 {
        i64::try_from(self.def.workflow.steps.len()).unwrap_or(i64::MAX)
    }

    fn step_id(&self, step: i64) -> String {
        usize::try_from(step)
            .ok()
            .and_then(|i| self.def.workflow.steps.get(i))
            .map_or_else(|| format!("step-{}", step + 1), |s| s.id.clone())
    }

    fn key(&self, step: i64) -> String {
        format!("{}:{}", self.run.id, self.step_id(step))
    }

    fn expect(&self) -> Expect {
        Expect {
            status: self.run.status,
            step: self.run.step,
            attempt: self.run.attempt,
            epoch: self.run.epoch,
        }
    }

    fn attempt_write(
        &self,
        step: i64,
        attempt: i64,
        status: AttemptStatus,
        output: Option<Value>,
        error: Option<String>,
    ) -> AttemptWrite {
        AttemptWrite {
            step,
            attempt,
            step_id: self.step_id(step),
            idempotency_key: self.key(step),
            status,
            output,
            error,
        }
    }

    fn advance(&self, attempts: Vec<AttemptWrite>, to: RunMove) -> Advance {
        Advance {
            run_id: self.run.id.clone(),
            expect: self.expect(),
            attempts,
            to,
            wait: None,
            resolve: None,
            withdraw_waits: false,
            audit: None,
            call_audit: None,
            gate: None,
            now: self.now,
        }
    }

    fn to(&self, status: RunStatus, step: i64, attempt: i64) -> RunMove {
        RunMove {
            status,
            step,
            attempt,
            crashes: if step == self.run.step {
                self.run.crashes
            } else {
                0
            },
            output: None,
            error: None,
            lease: None,
        }
    }

    fn next_step(&self) -> RunMove {
        self.to(RunStatus::Running, self.run.step + 1, 0)
    }

    fn failed(&self, error: String) -> RunMove {
        RunMove {
            error: Some(error),
            ..self.to(RunStatus::Failed, self.run.step, self.run.attempt)
        }
    }

    fn fail(&self, attempts: Vec<AttemptWrite>, error: String) -> Advance {
        Advance {
            withdraw_waits: true,
            ..self.advance(attempts, self.failed(error))
        }
    }
}

/// The context templates and conditions see: `input`, `steps.<id>.output|status|approved`,
/// `trigger`, `run.id` and the non-secret `settings`.
pub fn context(view: &View<'_>) -> Value {
    let mut steps = Map::new();
    for a in view.attempts {
        let entry = match a.status {
            AttemptStatus::Ok | AttemptStatus::Skipped | AttemptStatus::Failed => {
                json!({"output": a.output.clone(), "status": a.status.as_str()})
            }
            AttemptStatus::Approved => {
                json!({"output": a.output.clone(), "status": "approved", "approved": true})
            }
            AttemptStatus::Rejected | AttemptStatus::TimedOut => {
                json!({"output": a.output.clone(), "status": a.status.as_str(), "approved": false})
            }
            AttemptStatus::Started | AttemptStatus::Crashed | AttemptStatus::Waiting => continue,
        };
        steps.insert(a.step_id.clone(), entry);
    }
    json!({
        "input": view.run.input,
        "steps": steps,
        "trigger": view.run.trigger,
        "run": {"id": view.run.id},
        "settings": view.run.settings,
    })
}

/// The audit record of one attempt's result, committed with it.
fn audit(view: &View<'_>, call: &StepCall, status: AuditStatus, detail: Value) -> AuditEntry {
    let tool = match &call.target {
        Target::Tool(t) | Target::Agent(t) => t.clone(),
    };
    AuditEntry {
        time: view.now,
        kind: AuditKind::Other("workflow_step".into()),
        session: crate::run_session_id(&view.run.id),
        call_id: Some(format!("{}#{}", call.idempotency_key, call.attempt)),
        principal: view.run.principal.clone(),
        origin: json!({"workflow": view.def.qualified(), "run": view.run.id, "step": call.step_id}),
        tool: Some(tool),
        skill: None,
        argument_digest: Some(quiver_store::argument_digest(&call.arguments, &[])),
        decisions: Vec::new(),
        status,
        duration_ms: 0,
        cached: false,
        detail: Some(detail),
    }
}

/// What to do next with a run.
pub fn decide(view: &View<'_>) -> Next {
    let run = view.run;
    if run.status != RunStatus::Running {
        return Next::Idle;
    }
    if run.deadline.is_some_and(|d| view.now >= d) {
        return commit(view.fail(Vec::new(), "the run timed out".into()));
    }
    if run.step >= view.step_count() {
        return complete(view);
    }
    let Some(step) = usize::try_from(run.step)
        .ok()
        .and_then(|i| view.def.workflow.steps.get(i))
    else {
        return commit(view.fail(Vec::new(), format!("step {} does not exist", run.step)));
    };
    let last = view
        .attempts
        .iter()
        .rfind(|a| a.step == run.step && a.attempt == run.attempt);
    match last {
        // First time at this step (the run's first move waits for its concurrency limit).
        None if run.attempt == 0 => gated(view, begin(view, step)),
        None => commit(view.fail(
            Vec::new(),
            format!("attempt {} of step `{}` is missing", run.attempt, step.id),
        )),
        Some(a) => match a.status {
            AttemptStatus::Started => recover(view, a),
            // After a retry's pause, an operator's retry, or a person's answer to a call.
            AttemptStatus::Failed | AttemptStatus::Crashed | AttemptStatus::Approved => {
                let approved_by = (a.status == AttemptStatus::Approved)
                    .then(|| approver(view, a))
                    .flatten();
                call(view, run.attempt + 1, Vec::new(), run.crashes, approved_by)
            }
            AttemptStatus::Waiting => Next::Idle,
            AttemptStatus::Ok
            | AttemptStatus::Skipped
            | AttemptStatus::Rejected
            | AttemptStatus::TimedOut => commit(view.advance(Vec::new(), view.next_step())),
        },
    }
}

/// Whether a run is a schedule's fire with `overlap: queue` (its trigger says so).
pub fn queued_fire(run: &Run) -> bool {
    run.trigger.get("kind").and_then(Value::as_str) == Some("schedule")
        && run.trigger.get("overlap").and_then(Value::as_str) == Some("queue")
}

/// Holds a run's first move behind its workflow's concurrency limit, or, for a schedule's fire
/// with `overlap: queue`, until every run of the workflow created before it has ended and
/// none has begun (which also keeps any concurrency limit).
fn gated(view: &View<'_>, next: Next) -> Next {
    if view.run.step != 0 {
        return next;
    }
    let gate = if queued_fire(view.run) {
        quiver_store::workflow::Gate {
            workflow: view.run.workflow.clone(),
            key: None,
            limit: 1,
            ordered: true,
        }
    } else if let (Some(concurrency), Some(key)) =
        (&view.def.workflow.concurrency, &view.run.concurrency_key)
    {
        quiver_store::workflow::Gate {
            workflow: view.run.workflow.clone(),
            key: Some(key.clone()),
            limit: i64::from(concurrency.limit),
            ordered: false,
        }
    } else {
        return next;
    };
    match next {
        Next::Commit(mut a) if a.to.status != RunStatus::Failed => {
            a.gate = Some(gate);
            Next::Commit(a)
        }
        Next::Call { mut start, call } => {
            start.gate = Some(gate);
            Next::Call { start, call }
        }
        other => other,
    }
}

fn commit(advance: Advance) -> Next {
    Next::Commit(Box::new(advance))
}

fn approver(view: &View<'_>, a: &Attempt) -> Option<String> {
    view.waits
        .iter()
        .rfind(|w| w.step == a.step && w.attempt == a.attempt && w.kind == WaitKind::Approval)
        .and_then(|w| w.resolved_by.clone())
}

fn complete(view: &View<'_>) -> Next {
    let ctx = context(view);
    let output = match &view.def.workflow.output {
        Some(template) => eval::render(template, &ctx),
        // Without `output`, the last step's.
        None => Ok(view
            .attempts
            .iter()
            .rfind(|a| matches!(a.status, AttemptStatus::Ok | AttemptStatus::Approved))
            .and_then(|a| a.output.clone())
            .unwrap_or(Value::Null)),
    };
    match output {
        Ok(output) => commit(view.advance(
            Vec::new(),
            RunMove {
                output: Some(output),
                ..view.to(RunStatus::Completed, view.run.step, 0)
            },
        )),
        Err(e) => commit(view.fail(Vec::new(), format!("the output does not render: {e}"))),
    }
}

fn begin(view: &View<'_>, step: &quiver_package::workflow::Step) -> Next {
    let ctx = context(view);
    let s = view.run.step;
    if let Some(condition) = &step.condition {
        match eval::condition(condition, &ctx) {
            Ok(true) => {}
            Ok(false) => {
                let skipped = view.attempt_write(s, 1, AttemptStatus::Skipped, None, None);
                return commit(view.advance(vec![skipped], view.next_step()));
            }
            Err(e) => {
                return commit(view.fail(Vec::new(), format!("step `{}`: `if`: {e}", step.id)));
            }
        }
    }
    let park = |kind: WaitKind, wake_at: Option<i64>, event: Option<String>, detail: Value| {
        let waiting = view.attempt_write(s, 1, AttemptStatus::Waiting, None, None);
        commit(Advance {
            wait: Some(NewWait {
                kind,
                wake_at,
                event,
                after_event: view.last_event,
                detail,
            }),
            ..view.advance(vec![waiting], view.to(RunStatus::Waiting, s, 1))
        })
    };
    let after = |d: std::time::Duration| {
        view.now
            .saturating_add(i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
    };
    match &step.action {
        StepAction::Tool { .. } | StepAction::Agent { .. } => {
            call(view, 1, Vec::new(), view.run.crashes, None)
        }
        StepAction::Approval {
            title,
            show,
            approvers,
            separation_of_duties,
            timeout,
            on_timeout,
        } => {
            let rendered = eval::render_text(title, &ctx).and_then(|title| {
                let show = show.as_ref().map(|s| eval::render(s, &ctx)).transpose()?;
                Ok((title, show))
            });
            match rendered {
                Ok((title, show)) => park(
                    WaitKind::Approval,
                    timeout.map(|t| after(t.0)),
                    None,
                    json!({"kind": "step", "title": title, "show": show, "approvers": approvers,
                           "separation_of_duties": separation_of_duties,
                           "on_timeout": on_timeout, "started_by": view.run.started_by}),
                ),
                Err(e) => commit(view.fail(Vec::new(), format!("step `{}`: {e}", step.id))),
            }
        }
        StepAction::Wait(WaitFor::For(d)) => {
            park(WaitKind::Timer, Some(after(d.0)), None, json!({}))
        }
        StepAction::Wait(WaitFor::Until(template)) => {
            let at = eval::render_text(template, &ctx)
                .map_err(|e| e.to_string())
                .and_then(|t| {
                    chrono::DateTime::parse_from_rfc3339(t.trim())
                        .map(|t| t.timestamp_millis())
                        .map_err(|e| format!("`{t}` is not an RFC 3339 time: {e}"))
                });
            match at {
                Ok(at) => park(WaitKind::Timer, Some(at), None, json!({})),
                Err(e) => {
                    commit(view.fail(Vec::new(), format!("step `{}`: `until`: {e}", step.id)))
                }
            }
        }
        StepAction::Wait(WaitFor::Event {
            name,
            matches,
            timeout,
        }) => park(
            WaitKind::Event,
            timeout.map(|t| after(t.0)),
            Some(name.clone()),
            json!({"match": matches}),
        ),
    }
}

/// A call of the current step, attempt `attempt`, after writing `before` (a crashed attempt).
fn call(
    view: &View<'_>,
    attempt: i64,
    mut before: Vec<AttemptWrite>,
    crashes: i64,
    approved_by: Option<String>,
) -> Next {
    let s = view.run.step;
    let Some(step) = usize::try_from(s)
        .ok()
        .and_then(|i| view.def.workflow.steps.get(i))
    else {
        return Next::Idle;
    };
    let ctx = context(view);
    let meta = usize::try_from(s).ok().and_then(|i| view.def.steps.get(i));
    let target_name = meta.and_then(|m| m.target.clone()).unwrap_or_default();
    let (target, arguments) = match &step.action {
        StepAction::Tool { arguments, .. } => {
            (Target::Tool(target_name), eval::render(arguments, &ctx))
        }
        StepAction::Agent { task, .. } => (
            Target::Agent(target_name),
            eval::render_text(task, &ctx).map(|t| json!({"task": t})),
        ),
        _ => return Next::Idle,
    };
    let arguments = match arguments {
        Ok(a) => a,
        Err(e) => return commit(view.fail(before, format!("step `{}`: {e}", step.id))),
    };
    before.push(view.attempt_write(s, attempt, AttemptStatus::Started, None, None));
    let start = view.advance(
        before,
        RunMove {
            crashes,
            lease: Some(quiver_store::workflow::Claim {
                owner: view.owner.to_owned(),
                ms: view.lease_ms,
            }),
            ..view.to(RunStatus::Running, s, attempt)
        },
    );
    Next::Call {
        start: Box::new(start),
        call: Box::new(StepCall {
            run_id: view.run.id.clone(),
            workflow: view.run.workflow.clone(),
            step_id: step.id.clone(),
            step: usize::try_from(s).unwrap_or_default(),
            attempt,
            epoch: view.run.epoch + 1,
            target,
            arguments,
            principal: view.run.principal.clone(),
            idempotency_key: view.key(s),
            attended: view.run.attended,
            timeout: step.timeout.map(|t| t.0),
            approved_by,
        }),
    }
}

/// A step found started without a result: the process crashed while it ran (or before its
/// result was committed).
fn recover(view: &View<'_>, a: &Attempt) -> Next {
    if let Some(lease) = &view.run.lease
        && lease.owner != view.owner
        && view.lease_now < lease.until
    {
        // Another engine runs it and is taken to be alive.
        return Next::Idle;
    }
    let crashes = view.run.crashes + 1;
    let crashed = view.attempt_write(
        a.step,
        a.attempt,
        AttemptStatus::Crashed,
        None,
        Some("the process stopped while this attempt ran".into()),
    );
    if crashes >= MAX_CRASHES {
        let mut fail = view.fail(
            vec![crashed],
            format!(
                "parked as failed: the process crashed {crashes} times at step `{}`",
                a.step_id
            ),
        );
        fail.to.crashes = crashes;
        return commit(fail);
    }
    // A call that was waiting for a person's answer never started its tool: asking again is
    // safe whatever the tool does.
    let never_started = a.process.as_deref() == Some(quiver_store::workflow::ASKING);
    let safe = never_started
        || usize::try_from(a.step)
            .ok()
            .and_then(|i| view.def.steps.get(i))
            .is_some_and(|m| m.rerun_safe);
    if safe {
        return call(view, a.attempt + 1, vec![crashed], crashes, None);
    }
    commit(view.advance(
        vec![crashed],
        RunMove {
            crashes,
            error: Some(format!(
                "step `{}` changes the world and was interrupted; an operator chooses retry, done or fail",
                a.step_id
            )),
            ..view.to(RunStatus::InDoubt, a.step, a.attempt)
        },
    ))
}

/// What to commit once `call` (started from `view`) ended with `outcome`. `view` is the run as
/// it was when the call was decided; the commit is conditional on the run still running that
/// attempt.
pub fn after_call(view: &View<'_>, call: &StepCall, outcome: &StepOutcome) -> Advance {
    let s = view.run.step;
    let expect = Expect {
        status: RunStatus::Running,
        step: s,
        attempt: call.attempt,
        epoch: call.epoch,
    };
    let here = |to: RunMove| RunMove {
        attempt: call.attempt,
        ..to
    };
    let step = usize::try_from(s)
        .ok()
        .and_then(|i| view.def.workflow.steps.get(i));
    let write = |status, output, error| view.attempt_write(s, call.attempt, status, output, error);
    let mut advance = match outcome {
        StepOutcome::Output(v) => {
            let written = write(AttemptStatus::Ok, Some(v.clone()), None);
            let mut advance = end_after_last(view, &written)
                .unwrap_or_else(|| view.advance(Vec::new(), view.next_step()));
            advance.attempts.insert(0, written);
            advance.audit = Some(audit(
                view,
                call,
                AuditStatus::Ok,
                json!({"attempt": call.attempt}),
            ));
            advance
        }
        StepOutcome::Failed(message) => {
            let failed = u32::try_from(call.attempt).unwrap_or(u32::MAX);
            let pause = step
                .and_then(|st| st.retry.as_ref())
                .and_then(|r| backoff::delay(r, failed));
            let entry = audit(view, call, AuditStatus::Error, json!({"error": message}));
            let attempt = write(AttemptStatus::Failed, None, Some(message.clone()));
            match pause {
                Some(pause) => {
                    Advance {
                        wait: Some(NewWait {
                            kind: WaitKind::Retry,
                            wake_at: Some(view.now.saturating_add(
                                i64::try_from(pause.as_millis()).unwrap_or(i64::MAX),
                            )),
                            event: None,
                            after_event: view.last_event,
                            detail: json!({"error": message}),
                        }),
                        audit: Some(entry),
                        ..view.advance(vec![attempt], here(view.to(RunStatus::Waiting, s, 0)))
                    }
                }
                None => Advance {
                    audit: Some(entry),
                    ..view.fail(
                        vec![attempt],
                        format!("step `{}` failed: {message}", call.step_id),
                    )
                },
            }
        }
        StepOutcome::Refused(reason) => Advance {
            audit: Some(audit(
                view,
                call,
                AuditStatus::Refused,
                json!({"reason": reason}),
            )),
            ..view.fail(
                vec![write(AttemptStatus::Failed, None, Some(reason.clone()))],
                format!("step `{}` was refused: {reason}", call.step_id),
            )
        },
        StepOutcome::NeedsPerson(card) => Advance {
            wait: Some(NewWait {
                kind: WaitKind::Approval,
                wake_at: None,
                event: None,
                after_event: view.last_event,
                detail: json!({"kind": "call", "card": card, "started_by": view.run.started_by}),
            }),
            audit: Some(audit(
                view,
                call,
                AuditStatus::Pending,
                json!({"card": card}),
            )),
            ..view.advance(
                vec![write(AttemptStatus::Waiting, None, None)],
                here(view.to(RunStatus::Waiting, s, 0)),
            )
        },
    };
    advance.expect = expect;
    if advance.to.status == RunStatus::Failed {
        advance.to.attempt = call.attempt;
    }
    advance
}

/// When `written` (a success) is of the run's last step, the run's end as [`decide`] would
/// commit it once the result is stored (its output rendered over every step's output, this
/// one's included, or its timeout), so the result and the end are one commit. `None` when
/// steps follow.
fn end_after_last(view: &View<'_>, written: &AttemptWrite) -> Option<Advance> {
    let next = view.next_step();
    if usize::try_from(next.step).ok() != Some(view.def.workflow.steps.len()) {
        return None;
    }
    let mut attempts: Vec<Attempt> = view
        .attempts
        .iter()
        .filter(|a| (a.step, a.attempt) != (written.step, written.attempt))
        .cloned()
        .collect();
    attempts.push(Attempt {
        run_id: view.run.id.clone(),
        step: written.step,
        attempt: written.attempt,
        step_id: written.step_id.clone(),
        idempotency_key: written.idempotency_key.clone(),
        status: written.status,
        output: written.output.clone(),
        error: written.error.clone(),
        started_at: view.now,
        finished_at: Some(view.now),
        process: None,
    });
    let run = Run {
        step: next.step,
        attempt: next.attempt,
        crashes: next.crashes,
        ..view.run.clone()
    };
    let after = View {
        run: &run,
        attempts: &attempts,
        ..*view
    };
    match decide(&after) {
        Next::Commit(advance) => Some(*advance),
        _ => None,
    }
}

/// What to commit when `wait` of the run ends with `outcome`. `None` if the outcome does not
/// fit the wait (an approval answer to a timer).
pub fn resolve(view: &View<'_>, wait: &Wait, outcome: &WaitOutcome) -> Option<Advance> {
    let s = wait.step;
    let step = usize::try_from(s)
        .ok()
        .and_then(|i| view.def.workflow.steps.get(i))?;
    let write = |status, output: Option<Value>, error: Option<String>| {
        view.attempt_write(s, wait.attempt, status, output, error)
    };
    let (by, resolution) = match outcome {
        WaitOutcome::Approved { by } => (by.clone(), json!({"approved": true})),
        WaitOutcome::Denied { by, note } => (by.clone(), json!({"approved": false, "note": note})),
        WaitOutcome::TimedOut => ("engine".to_owned(), json!({"timed_out": true})),
        WaitOutcome::Woke => ("engine".to_owned(), json!({"woke": true})),
        WaitOutcome::Event(e) => ("engine".to_owned(), json!({"event": e.id})),
    };
    let call_approval = wait.detail.get("kind").and_then(Value::as_str) == Some("call");
    let advance = match (wait.kind, outcome) {
        // The call runs again as its next attempt, told who approved it.
        (WaitKind::Approval, WaitOutcome::Approved { by }) if call_approval => view.advance(
            vec![write(
                AttemptStatus::Approved,
                Some(json!({"approved_by": by})),
                None,
            )],
            view.to(RunStatus::Running, s, wait.attempt),
        ),
        (WaitKind::Approval, WaitOutcome::Approved { by }) => view.advance(
            vec![write(
                AttemptStatus::Approved,
                Some(json!({"approved": true, "by": by})),
                None,
            )],
            view.next_step(),
        ),
        (WaitKind::Approval, WaitOutcome::Denied { by, note }) => view.fail(
            vec![write(
                AttemptStatus::Rejected,
                Some(json!({"approved": false, "by": by, "note": note})),
                None,
            )],
            format!("step `{}` was rejected by {by}", step.id),
        ),
        (WaitKind::Approval, WaitOutcome::TimedOut) => {
            let on_timeout = match &step.action {
                StepAction::Approval { on_timeout, .. } if !call_approval => *on_timeout,
                _ => OnTimeout::Fail,
            };
            match on_timeout {
                OnTimeout::Fail => view.fail(
                    vec![write(AttemptStatus::TimedOut, None, None)],
                    format!("nobody answered step `{}` in time", step.id),
                ),
                OnTimeout::Reject => view.fail(
                    vec![write(
                        AttemptStatus::Rejected,
                        Some(json!({"approved": false})),
                        None,
                    )],
                    format!("step `{}` was rejected: nobody answered in time", step.id),
                ),
                OnTimeout::Continue => view.advance(
                    vec![write(
                        AttemptStatus::TimedOut,
                        Some(json!({"approved": false})),
                        None,
                    )],
                    view.next_step(),
                ),
            }
        }
        (WaitKind::Timer, WaitOutcome::Woke) => view.advance(
            vec![write(
                AttemptStatus::Ok,
                Some(json!({"woke_at": view.now})),
                None,
            )],
            view.next_step(),
        ),
        (WaitKind::Retry, WaitOutcome::Woke) => {
            view.advance(Vec::new(), view.to(RunStatus::Running, s, wait.attempt))
        }
        (WaitKind::Event, WaitOutcome::Event(e)) => view.advance(
            vec![write(AttemptStatus::Ok, Some(e.payload.clone()), None)],
            view.next_step(),
        ),
        (WaitKind::Event, WaitOutcome::TimedOut) => view.fail(
            vec![write(AttemptStatus::TimedOut, None, None)],
            format!(
                "step `{}`: no `{}` event came in time",
                step.id,
                wait.event.as_deref().unwrap_or("")
            ),
        ),
        _ => return None,
    };
    Some(Advance {
        expect: Expect {
            status: RunStatus::Waiting,
            step: s,
            attempt: wait.attempt,
            epoch: view.run.epoch,
        },
        resolve: Some(WaitResolution {
            wait_id: wait.id,
            resolution,
            by,
        }),
        ..advance
    })
}

/// Whether an event matches an event wait of the run.
pub fn event_matches(view: &View<'_>, wait: &Wait, event: &Event) -> bool {
    if wait.kind != WaitKind::Event
        || wait.event.as_deref() != Some(event.name.as_str())
        || event.id <= wait.after_event
    {
        return false;
    }
    match wait.detail.get("match").and_then(Value::as_str) {
        None => true,
        Some(condition) => {
            let mut ctx = context(view);
            if let Value::Object(map) = &mut ctx {
                map.insert("event".into(), event.payload.clone());
            }
            eval::condition(condition, &ctx).unwrap_or(false)
        }
    }
}

/// What to commit for an operator's decision on a run. `None` if it does not apply (retry of
/// a run that is not in doubt, anything on an ended run).
pub fn operate(view: &View<'_>, op: &Operator, by: &str) -> Option<Advance> {
    let run = view.run;
    if run.status.is_final() {
        return None;
    }
    let s = run.step;
    Some(match (op, run.status) {
        (Operator::Cancel, _) => Advance {
            withdraw_waits: true,
            ..view.advance(
                Vec::new(),
                RunMove {
                    error: Some(format!("cancelled by {by}")),
                    ..view.to(RunStatus::Cancelled, s, run.attempt)
                },
            )
        },
        (Operator::Fail(message), _) => view.fail(Vec::new(), format!("failed by {by}: {message}")),
        (Operator::Retry, RunStatus::InDoubt) => {
            view.advance(Vec::new(), view.to(RunStatus::Running, s, run.attempt))
        }
        (Operator::Done(output), RunStatus::InDoubt) => view.advance(
            vec![view.attempt_write(
                s,
                run.attempt + 1,
                AttemptStatus::Ok,
                Some(output.clone()),
                Some(format!("marked done by {by}")),
            )],
            view.next_step(),
        ),
        _ => return None,
    })
}

#[cfg(test)]
mod tests;
