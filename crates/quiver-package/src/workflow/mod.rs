//! `workflows/<name>.yaml`: declared steps the workflow engine runs (parsed and validated here;
//! run by `quiver-workflow`). Expressions (`if`, `{{ ... }}`) are parsed here so that the
//! loader can check what they name; the engine evaluates them.

pub mod expr;
mod lines;
mod raw;
mod refs;
pub mod template;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::common::Seconds;
use crate::diagnostic::Diagnostic;
use crate::names::ItemName;

/// What starts a workflow.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Trigger {
    /// Called like a tool, from the CLI or the console.
    Manual,
    /// A cron schedule.
    Schedule(Schedule),
    /// A package event.
    Event(EventTrigger),
    /// `POST /hooks/<pkg>/<name>` with an HMAC of the body.
    Webhook(Webhook),
}

/// `schedule: {cron, timezone, overlap, catchup}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Schedule {
    /// 5 fields (minute hour day month weekday), or 6 with seconds first.
    pub cron: String,
    /// An IANA time zone (`Europe/Berlin`); default `UTC`.
    #[serde(default = "utc")]
    pub timezone: String,
    /// What a fire does while an earlier run of the schedule is still going.
    #[serde(default)]
    pub overlap: Overlap,
    /// Which fires missed while nothing ran are made up.
    #[serde(default)]
    pub catchup: Catchup,
}

fn utc() -> String {
    "UTC".to_owned()
}

/// `overlap:` of a schedule.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Overlap {
    /// The fire is dropped (the default).
    #[default]
    Skip,
    /// The fire's run waits for the earlier one.
    Queue,
    /// Runs overlap.
    Allow,
}

/// `catchup:` of a schedule.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Catchup {
    /// Missed fires are dropped (the default).
    #[default]
    None,
    /// Only the last missed fire runs.
    Latest,
    /// Every missed fire runs, oldest first.
    All,
}

/// `event: {name, if}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EventTrigger {
    /// The event's name.
    pub name: String,
    /// A condition over `event` (the payload) and `settings`.
    #[serde(rename = "if", default, skip_serializing_if = "Option::is_none")]
    pub condition: Option<String>,
}

/// `webhook: {name, secret}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Webhook {
    /// The hook's name, in `/hooks/<pkg>/<name>`.
    pub name: String,
    /// The `secret: true` package setting that holds the HMAC key.
    pub secret: String,
}

/// `concurrency: {key, limit}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Concurrency {
    /// A template; runs with the same rendered key count against one limit (default: all runs
    /// of the workflow share one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// Most runs at once per key (default 1).
    #[serde(default = "one")]
    pub limit: u32,
}

fn one() -> u32 {
    1
}

/// One step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Step {
    /// Its id (default `step-<n>`), for later steps' templates (`{{ steps.<id>.output }}`).
    pub id: String,
    /// What it does.
    pub action: StepAction,
    /// A condition: when false the step is skipped.
    #[serde(rename = "if", default, skip_serializing_if = "Option::is_none")]
    pub condition: Option<String>,
    /// How long one attempt may take.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<Seconds>,
    /// How a failed attempt is retried.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry: Option<Retry>,
}

/// `retry: {max_attempts, backoff, initial, max}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Retry {
    /// Attempts in all, the first included (default 3, at least 1).
    #[serde(default = "three")]
    pub max_attempts: u32,
    /// How the pause between attempts grows.
    #[serde(default)]
    pub backoff: Backoff,
    /// The first pause (default 1 s).
    #[serde(default = "one_second")]
    pub initial: Seconds,
    /// The longest pause (default 5 min).
    #[serde(default = "five_minutes")]
    pub max: Seconds,
}

fn three() -> u32 {
    3
}

fn one_second() -> Seconds {
    Seconds(std::time::Duration::from_secs(1))
}

fn five_minutes() -> Seconds {
    Seconds(std::time::Duration::from_secs(300))
}

/// `backoff:` of a retry.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Backoff {
    /// The same pause each time.
    Fixed,
    /// The pause doubles each time (the default).
    #[default]
    Exponential,
}

/// What a step does.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StepAction {
    /// Call a tool (`tool` or `pkg.tool`) with templated arguments (`with:`).
    Tool {
        /// The tool.
        name: String,
        /// Templated arguments.
        arguments: Value,
    },
    /// Ask an agent to do a task.
    Agent {
        /// The agent.
        name: String,
        /// The templated task.
        task: String,
    },
    /// Wait for a person's approval.
    Approval {
        /// What to ask (templated).
        title: String,
        /// What to show the approver (templated), if anything beyond the title.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        show: Option<Value>,
        /// Permission rules of who may answer (default: the person who owns the conversation
        /// or started the run, or the operator), checked against authenticated identities.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        approvers: Vec<String>,
        /// Separation of duties: someone other than the run's starter answers, by an
        /// authenticated identity.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        separation_of_duties: bool,
        /// How long to wait for an answer (default: forever).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        timeout: Option<Seconds>,
        /// What a timeout does.
        #[serde(default)]
        on_timeout: OnTimeout,
    },
    /// Wait for time to pass, a moment, or an event.
    Wait(WaitFor),
}

/// `on_timeout:` of an approval.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OnTimeout {
    /// The run fails (the default).
    #[default]
    Fail,
    /// As if the approval was denied: the run ends rejected.
    Reject,
    /// The run goes on; `steps.<id>.approved` is `false`.
    Continue,
}

/// What a `wait` step waits for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WaitFor {
    /// A duration (`wait: 10m` or `wait: {for: 10m}`).
    For(Seconds),
    /// A moment: a template rendering to an RFC 3339 time.
    Until(String),
    /// A package event whose payload matches.
    Event {
        /// The event's name.
        name: String,
        /// A condition over `event` and the run's context.
        #[serde(rename = "match", default, skip_serializing_if = "Option::is_none")]
        matches: Option<String>,
        /// How long to wait before the step fails (default: forever).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        timeout: Option<Seconds>,
    },
}

/// A parsed workflow.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Workflow {
    /// Its name (file stem).
    pub name: ItemName,
    /// The file.
    pub file: PathBuf,
    /// What it does.
    pub description: String,
    /// Part of the package's public face.
    pub expose: bool,
    /// What starts it (`manual` when none is declared).
    pub triggers: Vec<Trigger>,
    /// JSON Schema of its input.
    pub input: Value,
    /// A template: runs whose rendered key is equal are one run.
    pub idempotency_key: Option<String>,
    /// How many runs may go at once.
    pub concurrency: Option<Concurrency>,
    /// How long a run may take in all.
    pub timeout: Option<Seconds>,
    /// Its steps, in order.
    pub steps: Vec<Step>,
    /// Template of its output.
    pub output: Option<Value>,
}

/// What the rest of the package tells the workflow checks.
#[derive(Debug, Clone, Default)]
pub struct WorkflowScope {
    /// The package's tool and agent names, against which unqualified step targets are checked.
    pub items: BTreeSet<String>,
    /// The input schemas of the package's tools, against which static arguments are checked.
    pub tool_inputs: BTreeMap<String, Value>,
    /// The package's settings (`config` properties) that are not secret.
    pub settings: BTreeSet<String>,
    /// The package's `secret: true` settings.
    pub secret_settings: BTreeSet<String>,
    /// The package's own id and the packages and MCP servers it `requires`: the only ones a
    /// qualified target (`pkg.tool`) may name. `None`: qualified targets are not checked.
    pub packages: Option<(String, BTreeSet<String>)>,
}

/// Parses and validates a workflow against the rest of its package.
pub fn parse_workflow(
    text: &str,
    file: &Path,
    name: ItemName,
    scope: &WorkflowScope,
) -> (Option<Workflow>, Vec<Diagnostic>) {
    raw::parse(text, file, name, scope)
}

#[cfg(test)]
mod tests;
