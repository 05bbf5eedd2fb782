//! Runs parked on a person: an `approval` step, or a step's call whose question (consent, an
//! `always` or `human` approval, the dangerous gate) nobody could be asked when it ran. What
//! the approval queue lists beside the console's cards, read from the pending approval waits
//! as [`decide`](crate::decide) stored them.

use serde::Serialize;
use serde_json::Value;

use quiver_store::WorkflowStore;
use quiver_store::workflow::{Run, Wait, WaitKind, WaitStatus};

use crate::error::Result;

/// What a parked run waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Question {
    /// An `approval` step: approved, the run goes on; denied, it fails.
    Step,
    /// A step's call that needs a person: approved, the call runs again with the exact
    /// arguments on the card; denied, the run fails.
    Call,
}

/// One run parked on a person, with the approval wait it parks on.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Parked {
    /// The run (what `quiver approvals approve|deny` take).
    pub run_id: String,
    /// The run's workflow, `pkg.workflow`.
    pub workflow: String,
    /// Who started the run (who answers by default; not when `separation_of_duties`).
    pub started_by: String,
    /// The approval wait.
    pub wait_id: i64,
    /// The step's id.
    pub step_id: String,
    /// What it waits for.
    pub question: Question,
    /// An approval step's rendered title.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// An approval step's rendered `show`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub show: Option<Value>,
    /// An approval step's `approvers` (permission rules an authenticated answerer must meet;
    /// none: the starter or the operator).
    pub approvers: Vec<String>,
    /// An approval step's separation of duties: an authenticated answerer other than the
    /// starter.
    pub separation_of_duties: bool,
    /// A call's card: the tool, the exact arguments, whether consent is asked, the reasons,
    /// whether it is dangerous or `human`, its risk categories and permissions.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub card: Option<Value>,
    /// When the run parked (Unix ms).
    pub created_at: i64,
    /// When an unanswered approval step times out (Unix ms).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeout_at: Option<i64>,
}

impl Parked {
    /// The parked view of a pending approval wait of `run`.
    pub fn of(run: &Run, wait: &Wait, step_id: String) -> Parked {
        let detail = &wait.detail;
        let question = match detail.get("kind").and_then(Value::as_str) {
            Some("call") => Question::Call,
            _ => Question::Step,
        };
        Parked {
            run_id: run.id.clone(),
            workflow: run.workflow.clone(),
            started_by: run.started_by.clone(),
            wait_id: wait.id,
            step_id,
            question,
            title: detail
                .get("title")
                .and_then(Value::as_str)
                .map(str::to_owned),
            show: detail.get("show").filter(|v| !v.is_null()).cloned(),
            approvers: detail
                .get("approvers")
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(Value::as_str)
                        .map(str::to_owned)
                        .collect()
                })
                .unwrap_or_default(),
            separation_of_duties: detail
                .get("separation_of_duties")
                .and_then(Value::as_bool)
                .unwrap_or(false),
            card: detail.get("card").cloned(),
            created_at: wait.created_at,
            timeout_at: wait.wake_at,
        }
    }

    /// Whether only a named person may answer: the call is dangerous or its tool is `human`.
    pub fn needs_a_named_person(&self) -> bool {
        let flag = |name: &str| {
            self.card
                .as_ref()
                .and_then(|c| c.get(name))
                .and_then(Value::as_bool)
                .unwrap_or(false)
        };
        flag("dangerous") || flag("human")
    }
}

/// Every run parked on a person, oldest first.
pub fn parked(store: &dyn WorkflowStore) -> Result<Vec<Parked>> {
    let mut out = Vec::new();
    for wait in store.pending_waits(Some(WaitKind::Approval))? {
        if let Some(run) = store.run(&wait.run_id)? {
            out.push(Parked::of(&run, &wait, step_id(store, &wait)?));
        }
    }
    Ok(out)
}

/// The pending approval wait `run` is parked on, if any.
pub fn parked_run(store: &dyn WorkflowStore, run: &Run) -> Result<Option<Parked>> {
    let waits = store.waits(&run.id)?;
    match waits
        .iter()
        .rfind(|w| w.kind == WaitKind::Approval && w.status == WaitStatus::Pending)
    {
        Some(wait) => Ok(Some(Parked::of(run, wait, step_id(store, wait)?))),
        None => Ok(None),
    }
}

fn step_id(store: &dyn WorkflowStore, wait: &Wait) -> Result<String> {
    Ok(store
        .attempts(&wait.run_id)?
        .into_iter()
        .find(|a| a.step == wait.step && a.attempt == wait.attempt)
        .map_or_else(|| format!("step-{}", wait.step + 1), |a| a.step_id))
}
