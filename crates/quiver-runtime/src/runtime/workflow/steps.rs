//! Workflow steps as calls of the one pipeline: [`WorkflowSteps`] is the runtime's
//! [`StepRunner`]. Each tool or agent step of a run is a call in the run's own session
//! (`ses-<run id>`), made for the run's principal with the run's package as the caller
//! (`Caller::Workflow`): admission, the package's private tools (its own, without a consent
//! question; another package's are unknown), consent, approval, the dangerous gate, hooks, the
//! control plane, the sandbox and the audit all apply. An unattended run asks nobody: a
//! question parks the run ([`StepOutcome::NeedsPerson`]) with the card's facts and the exact
//! arguments, and the attempt that follows a person's yes runs with it. An attended run asks
//! the person waiting on it, while one does: with nobody there (the run driven on by
//! `quiver approvals`, a timer, the scheduler, or after its caller stopped waiting), no answer
//! (no terminal, a timeout) or a card the person may not answer (an anonymous sender and the
//! dangerous gate or `human`), its question parks the run as an unattended one's does. While a
//! question is out the attempt is marked [`ASKING`], so a crash then is a question to ask again,
//! never a step in doubt. The tool's call context carries the step's idempotency key.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use quiver_package::rules::Role;
use quiver_policy::{Ask, AskReason, Principal, Reuse};
use quiver_store::workflow::{ASKING, NewRun};
use quiver_store::{AuditEntry, AuditStep, NewSession, StoreError, WorkflowStore};
use quiver_workflow::{StepCall, StepOutcome, StepRunner, Target};
use serde_json::{Value, json};

use crate::approver::{Answer, Approver, Card};
use crate::runtime::call::audit::decision;
use crate::runtime::{CallOutcome, CallStatus, Profile, Runtime, RuntimeError, Turn};

/// What a turn that runs one workflow step knows of it.
#[derive(Debug, Clone)]
pub(in crate::runtime) struct StepContext {
    /// The run.
    pub run_id: String,
    /// The step's index.
    pub step: i64,
    /// The attempt.
    pub attempt: i64,
    /// The run's fencing epoch the attempt was claimed under.
    pub epoch: i64,
    /// The run's package: the caller of the step's call.
    pub package: String,
    /// The step's idempotency key, given to the tool in its call context.
    pub idempotency_key: String,
    /// Who approved this call after an earlier attempt parked the run.
    pub approved_by: Option<String>,
    /// The step's own `timeout`: the attempt's limit instead of the tool's.
    pub timeout: Option<Duration>,
    /// The card of a question nobody could be asked now; the run parks with it.
    pub parked: Option<Value>,
    /// The call's audit record, for the engine to commit with the step's result.
    pub audit: Option<AuditEntry>,
}

/// The runtime's [`StepRunner`]: runs tool and agent steps through the call pipeline.
pub struct WorkflowSteps<'r> {
    runtime: &'r Runtime,
    person: Option<Arc<dyn Approver>>,
}

impl<'r> WorkflowSteps<'r> {
    /// The step runner of `runtime`: an attended run's questions go to the runtime's own
    /// person (the terminal `quiver run` was started at), if it has one; without one nobody
    /// waits on its runs, and every question of a step parks the run, attended or not.
    pub fn new(runtime: &'r Runtime) -> WorkflowSteps<'r> {
        WorkflowSteps {
            runtime,
            person: None,
        }
        .with_person(runtime.approvers.person.clone(), None)
    }

    /// Makes `person` (the front's channel to whoever waits on the run: an MCP client's
    /// elicitation, a chat's terminal) answer an attended run's questions while `waiting`
    /// holds (`None`: for as long as the runner lives); a question it does not answer (no
    /// terminal, a timeout) parks the run.
    pub fn with_person(
        mut self,
        person: Option<Arc<dyn Approver>>,
        waiting: Option<Arc<AtomicBool>>,
    ) -> WorkflowSteps<'r> {
        self.person = person.map(|inner| {
            Arc::new(Present {
                inner,
                waiting: waiting.unwrap_or_else(|| Arc::new(AtomicBool::new(true))),
            }) as Arc<dyn Approver>
        });
        self
    }

    /// The run's own session: stored with the run row ([`StepRunner::run_session`]); made
    /// here at a step only for a run stored without one.
    fn session(&self, call: &StepCall) -> Result<String, RuntimeError> {
        let id = run_session_id(&call.run_id);
        if self.runtime.store.session(&id)?.is_some() {
            return Ok(id);
        }
        let new = self.new_session(&call.run_id, &call.principal, call.attended, &call.workflow);
        match self.runtime.store.create_session(&new) {
            Ok(_) | Err(StoreError::AlreadyExists { .. }) => Ok(id),
            Err(e) => Err(e.into()),
        }
    }

    /// What the session of a run of `workflow` is made of.
    fn new_session(
        &self,
        run_id: &str,
        principal: &Value,
        attended: bool,
        workflow: &str,
    ) -> NewSession {
        let mut new = NewSession::new(run_session_id(run_id), "workflow");
        new.principal = principal.clone();
        new.catalog_version = self.runtime.catalog().version().to_string();
        let profile = if attended {
            Profile::Interactive
        } else {
            Profile::Schedule
        };
        new.state = json!({ "profile": profile, "workflow": workflow });
        new
    }

    fn try_run(&self, call: &StepCall) -> Result<(StepOutcome, Option<AuditEntry>), RuntimeError> {
        let package = call
            .workflow
            .split_once('.')
            .map_or(call.workflow.as_str(), |(p, _)| p);
        let session = self.session(call)?;
        let mut turn = self
            .runtime
            .begin_turn(&session, principal_from(&call.principal), "")?;
        // Nobody waits on the run: its questions park it, attended or not.
        turn.unattended = true;
        if let (true, Some(person)) = (call.attended, &self.person) {
            turn.unattended = false;
            turn.set_person(person.clone());
        }
        turn.step = Some(StepContext {
            run_id: call.run_id.clone(),
            step: i64::try_from(call.step).unwrap_or(i64::MAX),
            attempt: call.attempt,
            epoch: call.epoch,
            package: package.to_owned(),
            idempotency_key: call.idempotency_key.clone(),
            approved_by: call.approved_by.clone(),
            timeout: call.timeout,
            parked: None,
            audit: None,
        });
        let name = match &call.target {
            Target::Tool(name) | Target::Agent(name) => name,
        };
        let called = turn.call(name, call.arguments.clone());
        let (parked, audit) = turn
            .step
            .take()
            .map_or((None, None), |s| (s.parked, s.audit));
        let outcome = match called {
            Ok(outcome) => outcome,
            Err(e) => {
                // The engine records the failure; the call's own record is kept on its own.
                if let Some(audit) = &audit {
                    self.runtime.store.append_audit(audit)?;
                }
                return Err(e);
            }
        };
        let outcome = match parked {
            Some(card) => StepOutcome::NeedsPerson(card),
            None => step_outcome(&outcome),
        };
        Ok((outcome, audit))
    }
}

/// The person waiting on an attended run, as its steps see them: while the caller waits, their
/// answer; a question nobody answers (no terminal, a timeout), or asked once the caller stopped
/// waiting, is [`Answer::Pending`], which parks the run.
struct Present {
    inner: Arc<dyn Approver>,
    waiting: Arc<AtomicBool>,
}

impl Approver for Present {
    fn decide(&self, card: &Card) -> Answer {
        if !self.waiting.load(Ordering::Acquire) {
            return Answer::Pending;
        }
        match self.inner.decide(card) {
            Answer::TimedOut => Answer::Pending,
            answer => answer,
        }
    }

    fn answer_question(&self, question: &str) -> Option<String> {
        self.waiting
            .load(Ordering::Acquire)
            .then(|| self.inner.answer_question(question))
            .flatten()
    }
}

impl StepContext {
    /// Marks the attempt [`ASKING`] while its call waits for a person's answer (`asking`), or
    /// clears the mark before its tool starts: a crash in between leaves a question to ask
    /// again, not a step in doubt.
    fn mark_asking(&self, runtime: &Runtime, asking: bool) -> Result<(), RuntimeError> {
        let Some(store) = runtime.workflow_store() else {
            return Ok(());
        };
        store.set_attempt_process(
            &self.run_id,
            self.step,
            self.attempt,
            self.epoch,
            asking.then_some(ASKING),
        )?;
        if asking {
            quiver_workflow::crash::point("question_asked");
        }
        Ok(())
    }

    /// Records the process group that runs this attempt's tool, so that a cancel from another
    /// process can kill it. When the run no longer runs this attempt (cancelled meanwhile) the
    /// group is killed at once: its result would be discarded.
    pub(in crate::runtime) fn record_process(&self, store: &dyn WorkflowStore, pgid: u32) {
        let Some(process) = quiver_store::waiter::of(pgid) else {
            return;
        };
        match store.set_attempt_process(
            &self.run_id,
            self.step,
            self.attempt,
            self.epoch,
            Some(&process),
        ) {
            Ok(true) => {}
            Ok(false) => {
                tracing::info!(run = %self.run_id, "the run moved on while its step started: the step's process is stopped");
                quiver_sandbox::kill_process_group(pgid);
            }
            Err(e) => {
                tracing::warn!(run = %self.run_id, "cannot record the step's process: {e}");
            }
        }
    }
}

impl StepRunner for WorkflowSteps<'_> {
    fn package_digest(&self, id: &str) -> Option<String> {
        super::calls::package_digest(&self.runtime.catalog(), id)
    }

    fn run_session(&self, run: &NewRun) -> Option<NewSession> {
        Some(self.new_session(&run.id, &run.principal, run.attended, &run.workflow))
    }

    fn run(&self, call: &StepCall) -> StepOutcome {
        let (outcome, audit) = self.run_recorded(call);
        if let Some(audit) = audit
            && let Err(e) = self.runtime.store.append_audit(&audit)
        {
            tracing::warn!(run = %call.run_id, "cannot record the step's call: {e}");
        }
        outcome
    }

    fn lease_lost(&self, call: &StepCall) {
        // The attempt's tool, if one runs on this machine: its result would be refused.
        let Some(store) = self.runtime.workflow_store() else {
            return;
        };
        let step = i64::try_from(call.step).unwrap_or(i64::MAX);
        let killed = store
            .attempts(&call.run_id)
            .unwrap_or_default()
            .iter()
            .find(|a| a.step == step && a.attempt == call.attempt)
            .and_then(|a| a.process.as_deref())
            .and_then(quiver_store::waiter::running_here)
            .filter(|pgid| quiver_sandbox::kill_process_group(*pgid));
        tracing::warn!(run = %call.run_id, step = %call.step_id, ?killed, "the step's lease is lost: its process is stopped");
    }

    fn run_recorded(&self, call: &StepCall) -> (StepOutcome, Option<AuditEntry>) {
        // One span per step's attempt; the step's call is a `call` span inside it.
        let span = tracing::info_span!(
            "workflow_step",
            run = %call.run_id,
            workflow = %call.workflow,
            step = %call.step_id,
            attempt = call.attempt
        );
        let _entered = span.enter();
        tracing::debug!("step started");
        let (outcome, audit) = self
            .try_run(call)
            .unwrap_or_else(|e| (StepOutcome::Failed(e.to_string()), None));
        let ended = match &outcome {
            StepOutcome::Output(_) => "output",
            StepOutcome::Failed(_) => "failed",
            StepOutcome::Refused(_) => "refused",
            StepOutcome::NeedsPerson(_) => "needs a person",
        };
        tracing::debug!(outcome = ended, "step ended");
        (outcome, audit)
    }
}

/// How a step's call ended, for the engine: a refusal, an unknown name or arguments that do not
/// fit fail the step without retry; an error or a timeout is retried as the step says.
fn step_outcome(outcome: &CallOutcome) -> StepOutcome {
    let message = || {
        outcome
            .content
            .get("error")
            .and_then(Value::as_str)
            .map_or_else(|| outcome.content.to_string(), str::to_owned)
    };
    match outcome.status {
        CallStatus::Ok => StepOutcome::Output(outcome.content.clone()),
        CallStatus::Refused | CallStatus::Unknown | CallStatus::Invalid => {
            StepOutcome::Refused(message())
        }
        CallStatus::Error | CallStatus::TimedOut | CallStatus::Pending => {
            StepOutcome::Failed(message())
        }
    }
}

/// The run's principal as the runtime stored it (its own record, never message text).
fn principal_from(value: &Value) -> Principal {
    let Some(user) = value.get("user_id").and_then(Value::as_str) else {
        return Principal::anonymous();
    };
    Principal {
        user_id: Some(user.to_owned()),
        role: value
            .get("role")
            .and_then(Value::as_str)
            .and_then(Role::parse),
        platform_roles: value
            .get("platform_roles")
            .and_then(Value::as_array)
            .map(|roles| {
                roles
                    .iter()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default(),
    }
}

impl Turn<'_> {
    /// Step 5's questions for a workflow step: a person's earlier yes to this very call
    /// answers them; an attended run asks as any turn does; an unattended one asks nobody and
    /// parks the run with the card (what a `Pending` answer does too).
    pub(in crate::runtime) fn step_question(
        &mut self,
        call_id: &str,
        ask: &Ask,
        qualified: &str,
        arguments: &Value,
        audit: &mut AuditEntry,
    ) -> Result<Option<CallOutcome>, RuntimeError> {
        let approved_by = self.step.as_ref().and_then(|s| s.approved_by.clone());
        if let Some(by) = approved_by {
            audit.decisions.push(decision(
                AuditStep::Approval,
                "allow",
                &format!("{by} approved this call of the workflow run"),
            ));
            if ask.consent.is_some() {
                self.grants.grant_consent(&ask.package);
                self.runtime
                    .store
                    .set_consent(&self.session, &ask.package, true, &by)?;
            }
            // A yes to a `once` tool holds for the rest of the run's session, as a yes given
            // while the call waited does (the run's later calls of the tool ask nobody).
            if ask
                .approval
                .as_ref()
                .is_some_and(|q| q.reuse == Reuse::Session)
            {
                self.grants.approve_once(qualified);
                self.runtime
                    .store
                    .grant_once(&self.session, qualified, &by)?;
            }
            return Ok(None);
        }
        // An anonymous sender answers no card only a named person may (the dangerous gate,
        // `human`): nobody waiting on the run may answer it, so the run parks for someone who
        // may, as it does when nobody waits.
        let named_only = self.sender.is_anonymous()
            && ask
                .approval
                .as_ref()
                .is_some_and(|q| ask.is_dangerous() || q.reasons.contains(&AskReason::HumanOnly));
        if !self.unattended && !named_only {
            let step = self.step.clone();
            if let Some(step) = &step {
                step.mark_asking(self.runtime, true)?;
            }
            let stop = self.ask_or_stop(call_id, ask, qualified, arguments, audit)?;
            if let Some(step) = &step {
                step.mark_asking(self.runtime, false)?;
            }
            if stop
                .as_ref()
                .is_none_or(|o| o.status != CallStatus::Pending)
            {
                return Ok(stop);
            }
        }
        let card = json!({
            "tool": qualified,
            "package": ask.package,
            "arguments": arguments,
            "consent": ask.consent.is_some(),
            "reasons": ask.approval.as_ref().map(|a| a.reasons.iter().map(ToString::to_string).collect::<Vec<_>>()),
            "dangerous": ask.is_dangerous(),
            "human": ask.approval.as_ref().is_some_and(|a| a.reasons.contains(&AskReason::HumanOnly)),
            "risk_categories": ask.risk_categories,
            "permissions": ask.tool_permissions,
        });
        audit.decisions.push(decision(
            AuditStep::Approval,
            "park",
            "nobody can be asked now: the workflow run waits for a person",
        ));
        if let Some(step) = &mut self.step {
            step.parked = Some(card);
        }
        Ok(Some(CallOutcome::new(
            call_id,
            CallStatus::Pending,
            json!({"pending": "the workflow run waits for a person's answer; nothing ran"}),
        )))
    }
}

pub use quiver_workflow::run_session_id;
