//! What operators and approvers do to workflow runs, for every front (the CLI's `quiver runs
//! wait|cancel|retry|resolve`, `quiver approvals` on parked runs, `quiver events emit`,
//! `quiver schedules list`): each through the workflow engine over the runtime's workflow
//! store, and a step that runs again goes through the one call pipeline ([`WorkflowSteps`]).

use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use quiver_policy::{Origin, Principal};
use quiver_store::WorkflowStore;
use quiver_store::workflow::{AttemptStatus, Run, RunStatus, WaitKind};
use quiver_workflow::decide::Operator;
use quiver_workflow::schedule::{self, Upcoming};
use quiver_workflow::{Engine, Parked, STORE_CLOCK, WorkflowError};
use serde::Serialize;
use serde_json::Value;

use crate::runtime::{Runtime, WorkflowSteps};

/// Why an operation on a run did not happen.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The front gave the runtime no workflow store.
    #[error("this runtime runs no workflow engine")]
    NoEngine,
    /// No run has this id.
    #[error("no run `{0}`")]
    NoRun(String),
    /// The catalog has no workflow of this name.
    #[error("no workflow `{0}` in the catalog")]
    NoWorkflow(String),
    /// It does not apply to the run as it stands, or the person may not do it (answered
    /// already, self-approval, not an approver, not in doubt, ended).
    #[error("{0}")]
    Refused(String),
    /// The engine or the store failed.
    #[error(transparent)]
    Engine(WorkflowError),
}

impl From<WorkflowError> for RunError {
    fn from(e: WorkflowError) -> RunError {
        match e {
            WorkflowError::NoRun(id) => RunError::NoRun(id),
            WorkflowError::Refused(why) => RunError::Refused(why),
            other => RunError::Engine(other),
        }
    }
}

impl From<quiver_store::StoreError> for RunError {
    fn from(e: quiver_store::StoreError) -> RunError {
        RunError::Engine(e.into())
    }
}

/// A cancelled run and what the cancel stopped.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Cancelled {
    /// The run, now `cancelled`.
    pub run: Run,
    /// The process group of the step's tool that was killed, if one was running on this
    /// machine.
    pub killed: Option<u32>,
    /// The console's cards of the run's session that were pending and are now expired.
    pub expired_cards: Vec<String>,
}

/// An event stored and the runs it woke.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Emitted {
    /// The stored event's id.
    pub event_id: i64,
    /// The runs whose event wait it resolved, as they stand after being driven on.
    pub woke: Vec<Run>,
}

/// One schedule trigger of a workflow of the catalog.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ScheduleEntry {
    /// The workflow, `pkg.workflow`.
    pub workflow: String,
    /// The trigger and its next fire.
    #[serde(flatten)]
    pub upcoming: Upcoming,
    /// The last fire recorded for the workflow (Unix ms), if any.
    pub last_fire_ms: Option<i64>,
}

/// The operations on workflow runs of one runtime.
pub struct RunOps<'r> {
    runtime: &'r Runtime,
    store: &'r dyn WorkflowStore,
    steps: WorkflowSteps<'r>,
}

impl<'r> RunOps<'r> {
    /// The operations of `runtime`; [`RunError::NoEngine`] when its front set no workflow
    /// store.
    pub fn new(runtime: &'r Runtime) -> Result<RunOps<'r>, RunError> {
        let store = runtime.workflow_store().ok_or(RunError::NoEngine)?;
        Ok(RunOps {
            runtime,
            store: store.as_ref(),
            steps: WorkflowSteps::new(runtime),
        })
    }

    fn engine(&self) -> Engine<'_> {
        Engine::new(self.store, &self.steps, &STORE_CLOCK)
    }

    /// Starts a run of the workflow `qualified` (`pkg.workflow`) of the current catalog,
    /// pinned by its definition's digest, for `sender` ([`Runtime::run_start`] says how); the
    /// run, and whether this call created it (a run with the same key is that run).
    pub fn start(
        &self,
        qualified: &str,
        sender: &Principal,
        input: Value,
        trigger: Value,
        attended: bool,
        key: Option<String>,
    ) -> Result<(Run, bool), RunError> {
        let definition = self
            .runtime
            .workflow_definition(qualified)
            .ok_or_else(|| RunError::NoWorkflow(qualified.to_owned()))?;
        let engine = self.engine();
        let digest = engine.pin(&definition)?;
        let start = self.runtime.run_start(
            definition.package.as_str(),
            sender,
            input,
            trigger,
            attended,
            key,
        );
        Ok(engine.start(&digest, &start)?)
    }

    /// Drives the run until it ends or waits; the run as it then stands.
    pub fn drive(&self, id: &str) -> Result<Run, RunError> {
        Ok(self.engine().drive(id)?)
    }

    /// What the run waits for before this instance may drive it: `None` when every package
    /// content digest it pins is loaded here, else which ones (`an instance that has loaded
    /// p@sha256:…`; docs/instances.md, "Package digests").
    pub fn waiting_for(&self, id: &str) -> Result<Option<String>, RunError> {
        Ok(self.engine().waiting_for(id)?)
    }

    /// The run with this id.
    pub fn run(&self, id: &str) -> Result<Run, RunError> {
        self.store
            .run(id)?
            .ok_or_else(|| RunError::NoRun(id.to_owned()))
    }

    /// Drives the run (timers, retries' pauses, events, answers given elsewhere) until it ends,
    /// is in doubt (only an operator's `retry` or `resolve` moves it on: waiting would never
    /// end by itself) or `timeout` passes (`None`: no limit), looking again every `poll`;
    /// returns it as it then stands.
    pub fn wait(
        &self,
        id: &str,
        timeout: Option<Duration>,
        poll: Duration,
    ) -> Result<Run, RunError> {
        let engine = self.engine();
        let deadline = timeout.map(|t| Instant::now() + t);
        let mut run = engine.drive(id)?;
        while !run.status.is_final() && run.status != RunStatus::InDoubt {
            let left = deadline.map(|d| d.saturating_duration_since(Instant::now()));
            if left == Some(Duration::ZERO) {
                break;
            }
            std::thread::sleep(left.map_or(poll, |l| l.min(poll)));
            engine.tick()?;
            run = engine.drive(id)?;
        }
        Ok(run)
    }

    /// Cancels a run that has not ended: the cancel is stored first (withdrawing its pending
    /// waits), so a late result of its step is discarded; then the process group of a step's
    /// tool still running on this machine is killed, and the console's pending cards of the
    /// run's session expire.
    pub fn cancel(&self, id: &str, by: &str) -> Result<Cancelled, RunError> {
        let run = self.engine().operate(id, &Operator::Cancel, by)?;
        let killed = self
            .store
            .attempts(id)?
            .iter()
            .rfind(|a| {
                a.step == run.step && a.attempt == run.attempt && a.status == AttemptStatus::Started
            })
            .and_then(|a| a.process.as_deref())
            .and_then(quiver_store::waiter::running_here)
            .filter(|pgid| quiver_sandbox::kill_process_group(*pgid));
        let session = crate::runtime::run_session_id(id);
        let mut expired_cards = Vec::new();
        for card in self.runtime.store.pending_approvals(Some(&session))? {
            if let Ok(card) = self.runtime.store.expire_approval(&card.card.id) {
                expired_cards.push(card.card.id);
            }
        }
        crate::operator::record(
            self.runtime.store.as_ref(),
            crate::operator::Action::CancelRun(id),
            by,
        )?;
        tracing::info!(run = %id, ?killed, "run cancelled by {by}");
        Ok(Cancelled {
            run,
            killed,
            expired_cards,
        })
    }

    /// Runs the step in doubt again (with the same idempotency key), then drives the run on.
    /// Exactly once: the settle is a conditional write, so a second retry is refused. Audited
    /// (`retry`) naming `by`.
    pub fn retry(&self, id: &str, by: &str) -> Result<Run, RunError> {
        let run = self.engine().settle(id, &Operator::Retry, by)?;
        self.settled(crate::operator::Action::RetryRun(id), by, None)?;
        Ok(run)
    }

    /// Takes the step in doubt as done with `output`, then drives the run on (audited:
    /// `resolve-done`).
    pub fn done(&self, id: &str, output: Value, by: &str) -> Result<Run, RunError> {
        let run = self.engine().settle(id, &Operator::Done(output), by)?;
        self.settled(crate::operator::Action::ResolveRun(id, true), by, None)?;
        Ok(run)
    }

    /// Fails the run in doubt (audited: `resolve-fail`, with the reason).
    pub fn fail(&self, id: &str, reason: &str, by: &str) -> Result<Run, RunError> {
        let run = self
            .engine()
            .settle(id, &Operator::Fail(reason.to_owned()), by)?;
        self.settled(
            crate::operator::Action::ResolveRun(id, false),
            by,
            Some(reason),
        )?;
        Ok(run)
    }

    fn settled(
        &self,
        action: crate::operator::Action<'_>,
        by: &str,
        why: Option<&str>,
    ) -> Result<(), RunError> {
        crate::operator::record_because(self.runtime.store.as_ref(), action, by, why)?;
        tracing::info!(action = action.word(), "run settled by {by}");
        Ok(())
    }

    /// The runs parked on a person, oldest first.
    pub fn parked(&self) -> Result<Vec<Parked>, RunError> {
        Ok(quiver_workflow::parked(self.store)?)
    }

    /// A person's answer to the approval run `id` is parked on, then the run driven on (an
    /// approved call runs again with its exact arguments). By default the person who owns the
    /// conversation or started the run answers (or the operator). Refused when the run waits
    /// on no approval (answered already), when an anonymous answerer meets a dangerous or
    /// `human` call, and when a step asks for separation of duties (`approvers` the answerer
    /// does not meet, or `separation_of_duties` and the answerer started the run) and the
    /// answerer is not `authenticated` (a name the front took on trust, such as the CLI's
    /// `--as`, proves nothing).
    pub fn answer(
        &self,
        id: &str,
        approve: bool,
        answerer: &Answerer<'_>,
        note: Option<&str>,
    ) -> Result<Run, RunError> {
        let mut run = self.run(id)?;
        if run.status == RunStatus::Running {
            // Answered already, and left running by a process that ended (a killed `quiver
            // approvals approve`): driven on now, so its step is recovered at once.
            run = self.engine().drive(id)?;
        }
        let Some(parked) = quiver_workflow::parked_run(self.store, &run)? else {
            return Err(RunError::Refused(self.not_parked(&run)?));
        };
        check_answerer(&parked, answerer)?;
        let answerer = answerer.principal;
        let by = answerer.user_id.as_deref().unwrap_or("anonymous");
        Ok(self
            .engine()
            .answer_wait(id, parked.wait_id, approve, by, note)?)
    }

    /// Why a run takes no answer now.
    fn not_parked(&self, run: &Run) -> Result<String, RunError> {
        let last = self
            .store
            .waits(&run.id)?
            .into_iter()
            .rfind(|w| w.kind == WaitKind::Approval);
        Ok(match last {
            Some(w) if w.resolved_by.is_some() => format!(
                "the approval of run {} was already answered by {} ({}); the run is {}",
                run.id,
                w.resolved_by.unwrap_or_default(),
                w.resolution.unwrap_or_default(),
                run.status
            ),
            Some(w) => format!(
                "the approval of run {} was {} (the run is {}); nothing changed",
                run.id, w.status, run.status
            ),
            None => format!("run {} ({}) waits on no approval", run.id, run.status),
        })
    }

    /// Stores an event (before anything is told of it), then wakes and drives the runs whose
    /// event wait it matches.
    pub fn emit(&self, name: &str, source: &str, payload: &Value) -> Result<Emitted, RunError> {
        let waiting: Vec<_> = self
            .store
            .pending_waits(Some(WaitKind::Event))?
            .into_iter()
            .filter(|w| w.event.as_deref() == Some(name))
            .collect();
        let event_id = self.engine().emit(name, source, payload)?;
        let mut woke = Vec::new();
        for wait in waiting {
            let resolved = self.store.waits(&wait.run_id)?.into_iter().any(|w| {
                w.id == wait.id
                    && w.resolution.as_ref().and_then(|r| r.get("event")) == Some(&event_id.into())
            });
            if resolved {
                woke.push(self.run(&wait.run_id)?);
            }
        }
        Ok(Emitted { event_id, woke })
    }

    /// Every `schedule` trigger of the catalog's workflows, with its next fire after `now` in
    /// its zone, by workflow.
    pub fn schedules(&self, now: DateTime<Utc>) -> Result<Vec<ScheduleEntry>, RunError> {
        let catalog = self.runtime.catalog();
        let mut out = Vec::new();
        for entry in catalog.packages().iter().filter(|p| !p.shadowed) {
            let package = &entry.package;
            for workflow in &package.workflows {
                let qualified = format!("{}.{}", package.id.as_str(), workflow.name.as_str());
                let last_fire_ms = self
                    .store
                    .schedule_fires(&qualified)?
                    .last()
                    .map(|(at, _)| *at);
                out.extend(
                    schedule::upcoming(workflow, now)
                        .into_iter()
                        .map(|upcoming| ScheduleEntry {
                            workflow: qualified.clone(),
                            upcoming,
                            last_fire_ms,
                        }),
                );
            }
        }
        out.sort_by(|a, b| a.workflow.cmp(&b.workflow));
        Ok(out)
    }
}

/// Who answers a parked run, as the front knows them.
#[derive(Debug, Clone, Copy)]
pub struct Answerer<'a> {
    /// The person.
    pub principal: &'a Principal,
    /// Whether the front proved who they are (a token, the local owner), rather than taking a
    /// name on trust (`quiver approvals --as`).
    pub authenticated: bool,
}

/// Whether `answerer` may answer `parked`.
fn check_answerer(parked: &Parked, answerer: &Answerer<'_>) -> Result<(), RunError> {
    let Answerer {
        principal: answerer,
        authenticated,
    } = *answerer;
    let name = answerer.user_id.as_deref().unwrap_or("anonymous");
    if answerer.is_anonymous() && parked.needs_a_named_person() {
        return Err(RunError::Refused(format!(
            "an anonymous person cannot answer run {}: its call is dangerous or needs a named person",
            parked.run_id
        )));
    }
    let separated = parked.separation_of_duties || !parked.approvers.is_empty();
    if separated && !authenticated {
        return Err(RunError::Refused(format!(
            "run {} asks for separation of duties: `{name}` is a name given, not an authenticated identity; answer as yourself",
            parked.run_id
        )));
    }
    if parked.separation_of_duties && name == parked.started_by {
        return Err(RunError::Refused(format!(
            "{name} started run {} and cannot approve it: the step asks for someone else (separation of duties)",
            parked.run_id
        )));
    }
    if !parked.approvers.is_empty() {
        let verdict = quiver_policy::evaluate_rules(&parked.approvers, &Origin::local(), answerer);
        if !verdict.holds {
            let why = verdict
                .trace
                .iter()
                .find(|s| s.effect != quiver_policy::DecisionKind::Allow)
                .map(|s| s.why.clone())
                .unwrap_or_default();
            return Err(RunError::Refused(format!(
                "{name} is not an approver of run {} (approvers: {}): {why}",
                parked.run_id,
                parked.approvers.join(", ")
            )));
        }
    }
    Ok(())
}
