//! The trait the runtime implements to run tool and agent steps through its one call pipeline
//! (admission for the run's principal, consent, approval, the dangerous gate, the sandbox,
//! audit).

use std::time::Duration;

use quiver_store::workflow::NewRun;
use quiver_store::{AuditEntry, NewSession};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// What a step calls.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind", content = "name")]
pub enum Target {
    /// A qualified tool (`pkg.tool`).
    Tool(String),
    /// A qualified agent (`pkg.agent`).
    Agent(String),
}

/// One attempt of a tool or agent step, as handed to the [`StepRunner`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepCall {
    /// The run.
    pub run_id: String,
    /// The run's workflow, `pkg.workflow`: its package is the caller of the step's call.
    pub workflow: String,
    /// The step's id.
    pub step_id: String,
    /// The step's index.
    pub step: usize,
    /// The attempt, from 1.
    pub attempt: i64,
    /// The run's fencing epoch the attempt was claimed under: every write about the attempt
    /// (its process, its result) carries it and changes nothing once the run's epoch moved on.
    #[serde(default)]
    pub epoch: i64,
    /// What it calls.
    pub target: Target,
    /// The rendered arguments (for an agent: `{"task": ...}`).
    pub arguments: Value,
    /// Whose authority the call runs with (the run's principal).
    pub principal: Value,
    /// The step's idempotency key: the same across retries and restarts, given to the tool in
    /// its environment so that it can pass it on.
    pub idempotency_key: String,
    /// Whether a session waits on the run (only then may the call ask anyone).
    pub attended: bool,
    /// How long the attempt may take.
    pub timeout: Option<Duration>,
    /// Who approved this call after an earlier attempt needed a person, if anyone.
    pub approved_by: Option<String>,
}

/// How a step call ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "outcome", content = "value")]
pub enum StepOutcome {
    /// It succeeded with this output.
    Output(Value),
    /// It failed (an error, a timeout); retried as the step's `retry` says.
    Failed(String),
    /// The pipeline refused it (policy, the dangerous gate, a denied consent): the step fails
    /// without retry.
    Refused(String),
    /// It needs a person (an `always` or `human` tool, the dangerous gate, consent) and nobody
    /// can be asked now: the run parks with this card (the exact arguments) until someone
    /// answers.
    NeedsPerson(Value),
}

/// Runs tool and agent steps. Implemented by the runtime; tests use a fake.
pub trait StepRunner: Send + Sync {
    /// Runs one attempt. Blocking; the engine calls it between the commit of the attempt as
    /// started and the commit of its result.
    fn run(&self, call: &StepCall) -> StepOutcome;

    /// Runs one attempt as [`StepRunner::run`] does, and returns the record the runner kept of
    /// the call (the runtime's pipeline audit record), which the engine commits in the same
    /// transaction as the attempt's result. By default, no record.
    fn run_recorded(&self, call: &StepCall) -> (StepOutcome, Option<AuditEntry>) {
        (self.run(call), None)
    }

    /// Told that the engine running `call` lost its lease (its heartbeat could not extend it:
    /// another engine took the run over, or it was cancelled): the runner stops the attempt's
    /// tool (kills its process group) at once, since its result will be refused. By default,
    /// nothing.
    fn lease_lost(&self, call: &StepCall) {
        let _ = call;
    }

    /// The content digest of package `id` as loaded where this runner runs steps now
    /// ([`quiver_package::content`]), `None` when it is not loaded here: an engine drives a
    /// run only when every package digest its definition pins is loaded ([`crate::pins`]). By
    /// default none: a runner that loads no packages drives only runs that pin none.
    fn package_digest(&self, id: &str) -> Option<String> {
        let _ = id;
        None
    }

    /// The session the runner keeps for `run`'s calls, which the engine stores with the run
    /// row. By default none (the runner makes what it needs when a step runs).
    fn run_session(&self, run: &NewRun) -> Option<NewSession> {
        let _ = run;
        None
    }
}
