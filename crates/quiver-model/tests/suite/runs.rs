//! Workflow runs through the runtime's engine, beside the model's ([`quiver_model::runs`]): a
//! run started by a call of the conversation or by its trigger (nobody present, for the
//! scheduler's principal), and a person's answer to a parked run given in another process (a
//! second `Runtime` over the same state database file, as `quiver approvals approve` opens
//! it), which drives the run on there with nobody present. After every step each run must
//! stand where the model says: parked (`waiting`, at the same step) rather than failed when a
//! person is missing, never in doubt (no step's tool was cut short), completed or failed as
//! its steps' calls say; and every attempt of its steps' calls left exactly one audit record.
//! What its steps run is checked with every other run ([`Checker::check_runs`]): nothing
//! private outside its package, its package's consent for the run's session, nothing under the
//! emergency stop.

use std::collections::BTreeSet;
use std::sync::Arc;

use quiver_model::rules::Verdict;
use quiver_model::runs::{Presence, Run, Status};
use quiver_model::world::{Role, Step, Target};
use quiver_runtime::{Answerer, ApproverSet, RunOps, Runtime, RuntimeConfig, run_session_id};
use quiver_store::workflow::{RunFilter, RunStatus};
use quiver_store::{AuditKind, AuditQuery, SqliteStore, Store};
use serde_json::json;

use super::check::Invariant;
use super::harness::{Checker, executor, store_options};

/// A run of the case: the model's, and the runtime's id once paired with it.
pub struct Tracked {
    /// The model's run.
    pub model: Run,
    /// The runtime's run id.
    pub id: Option<String>,
    /// A difference was reported (or the runtime has no such run): no longer compared.
    pub diverged: bool,
}

/// Words of a run's error that say it failed for want of a person.
const NO_PERSON: [&str; 4] = [
    "nobody is available",
    "no person is present",
    "needs human approval",
    "anonymous caller cannot give it",
];

impl Checker<'_> {
    /// A call of `target` whose verdict is `verdict`: when it is a workflow the model lets
    /// run, the model's run starts, driven while the call waits.
    pub fn call_starts_run(&mut self, target: &Target, verdict: &Verdict) {
        let (Target::Workflow(p, w), true) = (target, verdict.runs()) else {
            return;
        };
        // Every front puts a run's questions to the person waiting on its call (over MCP, by
        // elicitation or, in the 2026-07-28 era, by the held call's `input_required` round).
        let presence = if !self.model.caller.unattended {
            Presence::Person {
                consent_yes: self.model.consent_yes,
                approval_yes: self.model.approval_yes,
            }
        } else {
            Presence::Nobody
        };
        let role = self.model.caller.role;
        let run = Run::start(self.world, (*p, *w), role, presence, self.model.stopped);
        self.track(run);
    }

    fn track(&mut self, run: Option<Run>) {
        if let Some(model) = run {
            self.runs.push(Tracked {
                model,
                id: None,
                diverged: false,
            });
        }
    }

    /// Workflow `i` of the catalog started by its trigger, as the scheduler starts it: for
    /// its principal (role `trusted`), unattended, driven until it ends or parks.
    pub fn trigger_run(&mut self, i: usize) {
        let Some((p, w)) = self.world.nth_workflow(i) else {
            return;
        };
        let ops = RunOps::new(&self.h.runtime).unwrap();
        let started = ops.start(
            &format!("p{p}.w{w}"),
            &Runtime::scheduler_principal(),
            json!({}),
            json!({"kind": "schedule"}),
            false,
            None,
        );
        if let Ok((run, _)) = started {
            ops.drive(&run.id).unwrap();
        }
        let stopped = self.model.stopped;
        self.track(Run::start(
            self.world,
            (p, w),
            Role::User,
            Presence::Nobody,
            stopped,
        ));
    }

    /// The owner answers the oldest run the model has parked on a person, in the second
    /// process, which drives it on with nobody present.
    pub fn answer_run(&mut self, yes: bool) {
        let parked = self.runs.iter().position(|r| {
            !r.diverged && r.id.is_some() && matches!(r.model.status, Status::Waiting(_))
        });
        let Some(i) = parked else {
            return;
        };
        let id = self.runs[i].id.clone().unwrap_or_default();
        let second = self.second_runtime();
        let owner = quiver_policy::Principal::user("owner", quiver_package::rules::Role::Master);
        let answerer = Answerer {
            principal: &owner,
            authenticated: true,
        };
        let answered = RunOps::new(&second)
            .unwrap()
            .answer(&id, yes, &answerer, None);
        let stopped = self.model.stopped;
        self.runs[i].model.answer(self.world, yes, stopped);
        if let Err(e) = answered {
            self.runs[i].diverged = true;
            self.report(
                Invariant::VerdictIsModels,
                "run-answer-refused",
                format!("the owner's answer to run {id} was refused: {e}"),
            );
        }
    }

    /// The second process: a runtime over the same state database file, with its own
    /// catalog, store connection and executor, and nobody to ask.
    fn second_runtime(&mut self) -> Arc<Runtime> {
        if let Some(second) = &self.second {
            return second.clone();
        }
        let dir = self.h.dir.path();
        // The installed packages too: the second process loads what the first did.
        let catalog = super::installed::load(dir, &dir.join("packages"));
        let store =
            Arc::new(SqliteStore::open_with(dir.join("state.db"), &store_options()).unwrap());
        let runtime = Arc::new(Runtime::new(
            catalog,
            store.clone(),
            Arc::new(executor(&[self.world], &self.h.runs)),
            ApproverSet::default(),
            RuntimeConfig::default(),
        ));
        runtime.set_agent_runner(self.h.runner.clone());
        runtime.set_workflow_store(store);
        self.second = Some(runtime.clone());
        runtime
    }

    /// Pairs the runs started since the last look with the model's, then checks every run.
    pub fn check_run_states(&mut self) {
        let Some(store) = self.h.runtime.workflow_store() else {
            return;
        };
        let stored = store.runs(&RunFilter::default()).unwrap();
        let known: BTreeSet<String> = self.runs.iter().filter_map(|r| r.id.clone()).collect();
        let reported = self
            .violations
            .iter()
            .any(|v| v.detail.starts_with(&format!("step {}:", self.step)));
        let mut fresh = stored.iter().rev().filter(|r| !known.contains(&r.id));
        let mut unpaired = self
            .runs
            .iter_mut()
            .filter(|r| r.id.is_none() && !r.diverged);
        let mut extra = Vec::new();
        for run in fresh.by_ref() {
            match unpaired.next() {
                Some(tracked) => tracked.id = Some(run.id.clone()),
                None => extra.push(run.id.clone()),
            }
        }
        let missing = unpaired.map(|t| t.diverged = true).count();
        // A call the runtime and the model answer differently was reported as such.
        if !reported && (missing > 0 || !extra.is_empty()) {
            self.report(
                Invariant::VerdictIsModels,
                "run-count-differs",
                format!("the runtime started runs {extra:?}; the model {missing} it did not"),
            );
        }
        for i in 0..self.runs.len() {
            self.check_run(i);
        }
    }

    /// Run `i` stands where the model says, and each attempt of its calls has one record.
    fn check_run(&mut self, i: usize) {
        let (Some(id), false) = (self.runs[i].id.clone(), self.runs[i].diverged) else {
            return;
        };
        let store = self.h.runtime.workflow_store().unwrap().clone();
        let Some(stored) = store.run(&id).unwrap() else {
            return;
        };
        let model = &self.runs[i].model;
        let at = i64::try_from(model.at).unwrap_or(i64::MAX);
        let error = stored.error.clone().unwrap_or_default();
        let for_want = NO_PERSON.iter().any(|w| error.contains(w));
        let verdict = match (model.status, stored.status) {
            (Status::Waiting(_), RunStatus::Waiting) if stored.step == at => None,
            (Status::Completed, RunStatus::Completed) => None,
            (Status::Failed(_), RunStatus::Failed) if !for_want => None,
            (_, RunStatus::InDoubt) => Some((Invariant::RunsPark, "run-in-doubt")),
            (Status::Waiting(_), RunStatus::Failed) => {
                Some((Invariant::RunsPark, "run-failed-for-want-of-a-person"))
            }
            (_, RunStatus::Failed) if for_want => {
                Some((Invariant::RunsPark, "run-failed-for-want-of-a-person"))
            }
            _ => Some((Invariant::VerdictIsModels, "run-status-differs")),
        };
        if let Some((invariant, tag)) = verdict {
            let detail = format!(
                "run {id} of p{}: model {:?} at step {}, runtime {} at step {} ({error})",
                model.package, model.status, model.at, stored.status, stored.step
            );
            self.runs[i].diverged = true;
            self.report(invariant, tag, detail);
            return;
        }
        let calls = store
            .attempts(&id)
            .unwrap()
            .iter()
            .filter(|a| {
                let step = usize::try_from(a.step)
                    .ok()
                    .and_then(|s| model.steps.get(s));
                matches!(step, Some(Step::Tool(_) | Step::Agent(_)))
            })
            .count();
        let records = self
            .h
            .store
            .query_audit(&AuditQuery {
                session: Some(run_session_id(&id)),
                kind: Some(AuditKind::Call),
                ..AuditQuery::default()
            })
            .unwrap()
            .len();
        if records != calls {
            self.runs[i].diverged = true;
            self.report(
                Invariant::OneAuditRecord,
                "run-step-audit-count",
                format!("run {id}: {calls} attempts of its calls left {records} call records"),
            );
        }
    }
}
