//! `workflows/<name>.yaml`: declared steps the runtime runs (parsed and validated here).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::common::Seconds;
use crate::diagnostic::Diagnostic;
use crate::names::{ItemName, check_name};
use crate::yaml;

/// What starts a workflow.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Trigger {
    /// Called like a tool (the default).
    Manual,
    /// An event the package subscribes to.
    Event(String),
    /// A cron schedule.
    Schedule(String),
}

/// One step.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Step {
    /// Its id, for later steps' templates (`{{ steps.<id>.output }}`).
    pub id: Option<String>,
    /// What it does.
    pub action: StepAction,
}

/// What a step does.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum StepAction {
    /// Call a tool (`tool` or `pkg.tool`) with templated arguments.
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
        /// What to ask.
        message: String,
    },
    /// Wait for a duration.
    Wait {
        /// How long, in seconds.
        seconds: f64,
    },
}

/// A parsed workflow.
#[derive(Debug, Clone, Serialize)]
pub struct Workflow {
    /// Its name (file stem).
    pub name: ItemName,
    /// The file.
    pub file: PathBuf,
    /// What it does.
    pub description: String,
    /// Part of the package's public face.
    pub expose: bool,
    /// What starts it.
    pub trigger: Trigger,
    /// JSON Schema of its input.
    pub input: Value,
    /// Its steps, in order.
    pub steps: Vec<Step>,
    /// Template of its output.
    pub output: Option<Value>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawWorkflow {
    description: String,
    #[serde(default)]
    expose: bool,
    trigger: Option<Value>,
    input: Option<Value>,
    steps: Vec<RawStep>,
    output: Option<Value>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawStep {
    id: Option<String>,
    tool: Option<String>,
    #[serde(default)]
    arguments: Option<Value>,
    agent: Option<String>,
    task: Option<String>,
    approval: Option<String>,
    wait: Option<Seconds>,
}

/// Parses and validates a workflow. `local_items` are the package's tool and agent names,
/// against which unqualified step targets are checked.
pub fn parse_workflow(
    text: &str,
    file: &Path,
    name: ItemName,
    local_items: &BTreeSet<String>,
) -> (Option<Workflow>, Vec<Diagnostic>) {
    let raw: RawWorkflow = match yaml::parse(text, file, 1) {
        Ok(raw) => raw,
        Err(diag) => return (None, vec![diag]),
    };
    let mut diags = Vec::new();
    let steps_line = yaml::key_line(text, 1, "steps");
    let mut err = |code: &'static str, message: String| {
        diags.push(Diagnostic::error(code, file, message).at_line(steps_line));
    };
    let trigger = match raw.trigger {
        None => Trigger::Manual,
        Some(Value::String(s)) if s == "manual" => Trigger::Manual,
        Some(Value::Object(map)) if map.len() == 1 => match map.iter().next() {
            Some((k, Value::String(v))) if k == "event" => Trigger::Event(v.clone()),
            Some((k, Value::String(v))) if k == "schedule" => {
                if let Err(message) = check_cron(v) {
                    err("workflow-invalid-schedule", message);
                }
                Trigger::Schedule(v.clone())
            }
            _ => {
                err(
                    "workflow-invalid-trigger",
                    "`trigger` must be `manual`, `{event: NAME}` or `{schedule: CRON}`".into(),
                );
                Trigger::Manual
            }
        },
        Some(_) => {
            err(
                "workflow-invalid-trigger",
                "`trigger` must be `manual`, `{event: NAME}` or `{schedule: CRON}`".into(),
            );
            Trigger::Manual
        }
    };
    let input = raw
        .input
        .unwrap_or_else(|| serde_json::json!({"type": "object"}));
    if let Err(message) = crate::schema::compile(&input) {
        err(
            "workflow-invalid-schema",
            format!("the input schema is invalid: {message}"),
        );
    }
    let input_fields: Option<BTreeSet<String>> = input
        .get("properties")
        .and_then(Value::as_object)
        .map(|p| p.keys().cloned().collect());
    if raw.steps.is_empty() {
        err("workflow-no-steps", "the workflow has no steps".into());
    }
    let mut earlier: BTreeSet<String> = BTreeSet::new();
    let mut steps = Vec::new();
    for (index, raw_step) in raw.steps.into_iter().enumerate() {
        let n = index + 1;
        let id = raw_step.id.clone();
        let action = match (
            raw_step.tool,
            raw_step.agent,
            raw_step.approval,
            raw_step.wait,
        ) {
            (Some(tool), None, None, None) => StepAction::Tool {
                name: tool,
                arguments: raw_step.arguments.unwrap_or_else(|| serde_json::json!({})),
            },
            (None, Some(agent), None, None) => StepAction::Agent {
                name: agent,
                task: raw_step.task.unwrap_or_default(),
            },
            (None, None, Some(message), None) => StepAction::Approval { message },
            (None, None, None, Some(wait)) => StepAction::Wait {
                seconds: wait.0.as_secs_f64(),
            },
            _ => {
                err(
                    "workflow-invalid-step",
                    format!(
                        "step {n} must have exactly one of `tool`, `agent`, `approval` or `wait`"
                    ),
                );
                continue;
            }
        };
        if let StepAction::Tool { name, .. } | StepAction::Agent { name, .. } = &action
            && !name.contains('.')
            && !local_items.contains(name)
        {
            err(
                "workflow-unknown-target",
                format!("step {n} calls `{name}`, which this package does not define"),
            );
        }
        let mut templates = Vec::new();
        match &action {
            StepAction::Tool { arguments, .. } => collect_templates(arguments, &mut templates),
            StepAction::Agent { task, .. } => templates_in(task, &mut templates),
            StepAction::Approval { message } => templates_in(message, &mut templates),
            StepAction::Wait { .. } => {}
        }
        for reference in templates {
            if let Some(message) = check_reference(&reference, input_fields.as_ref(), &earlier) {
                err("workflow-bad-template", format!("step {n}: {message}"));
            }
        }
        if let Some(id) = &id {
            if check_name(id).is_err() {
                err(
                    "workflow-invalid-step",
                    format!("step {n} has an invalid id `{id}`"),
                );
            } else if !earlier.insert(id.clone()) {
                err(
                    "workflow-invalid-step",
                    format!("step id `{id}` is used twice"),
                );
            }
        }
        steps.push(Step { id, action });
    }
    if let Some(output) = &raw.output {
        let mut templates = Vec::new();
        collect_templates(output, &mut templates);
        for reference in templates {
            if let Some(message) = check_reference(&reference, input_fields.as_ref(), &earlier) {
                err("workflow-bad-template", format!("output: {message}"));
            }
        }
    }
    diags.extend(crate::text::check(
        file,
        "description",
        &raw.description,
        yaml::key_line(text, 1, "description"),
    ));
    if diags.iter().any(Diagnostic::is_error) {
        return (None, diags);
    }
    let workflow = Workflow {
        name,
        file: file.to_path_buf(),
        description: raw.description,
        expose: raw.expose,
        trigger,
        input,
        steps,
        output: raw.output,
    };
    (Some(workflow), diags)
}

fn collect_templates(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::String(s) => templates_in(s, out),
        Value::Array(items) => items.iter().for_each(|v| collect_templates(v, out)),
        Value::Object(map) => map.values().for_each(|v| collect_templates(v, out)),
        _ => {}
    }
}

/// The expressions inside `{{ ... }}` in `text`.
fn templates_in(text: &str, out: &mut Vec<String>) {
    let mut rest = text;
    while let Some(start) = rest.find("{{") {
        let after = &rest[start + 2..];
        match after.find("}}") {
            Some(end) => {
                out.push(after[..end].trim().to_owned());
                rest = &after[end + 2..];
            }
            None => {
                out.push(String::from("{{"));
                break;
            }
        }
    }
}

fn check_reference(
    reference: &str,
    input: Option<&BTreeSet<String>>,
    earlier: &BTreeSet<String>,
) -> Option<String> {
    let mut parts = reference.split('.');
    match (parts.next(), parts.next()) {
        (Some("input"), Some(field)) => match input {
            Some(fields) if !fields.contains(field) => Some(format!(
                "`{{{{ {reference} }}}}` names an input field the schema does not declare"
            )),
            _ => None,
        },
        (Some("input"), None) => None,
        (Some("steps"), Some(step)) if earlier.contains(step) => None,
        (Some("steps"), Some(step)) => Some(format!(
            "`{{{{ {reference} }}}}` names step `{step}`, which does not come earlier"
        )),
        _ => Some(format!(
            "`{{{{ {reference} }}}}` must start with `input.` or `steps.<id>.`"
        )),
    }
}

/// Checks a 5-field (or 6-field, with seconds) cron expression's shape.
fn check_cron(expr: &str) -> Result<(), String> {
    let fields: Vec<&str> = expr.split_whitespace().collect();
    let ok_chars = |f: &&str| {
        f.chars()
            .all(|c| c.is_ascii_alphanumeric() || "*/,-?LW#".contains(c))
    };
    if !(5..=6).contains(&fields.len()) || !fields.iter().all(ok_chars) {
        return Err(format!(
            "`{expr}` is not a cron expression (5 fields: minute hour day month weekday)"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table() {
        let local: BTreeSet<String> = ["fetch".to_owned(), "writer".to_owned()].into();
        let cases: &[(&str, bool, &[&str])] = &[
            (
                "description: d\ntrigger: {schedule: '0 8 * * *'}\ninput: {type: object, properties: {city: {type: string}}}\nsteps:\n  - id: a\n    tool: fetch\n    arguments: {city: '{{ input.city }}'}\n  - agent: writer\n    task: 'Summarise {{ steps.a.output }}'\n  - approval: Send?\n  - wait: 10m\noutput: '{{ steps.a.output }}'\n",
                true,
                &[],
            ),
            ("description: d\nsteps: []\n", false, &["workflow-no-steps"]),
            (
                "description: d\nsteps: [{tool: nope}]\n",
                false,
                &["workflow-unknown-target"],
            ),
            ("description: d\nsteps: [{tool: other.tool}]\n", true, &[]),
            (
                "description: d\nsteps: [{tool: fetch, agent: writer}]\n",
                false,
                &["workflow-invalid-step"],
            ),
            (
                "description: d\ntrigger: {schedule: 'every day'}\nsteps: [{tool: fetch}]\n",
                false,
                &["workflow-invalid-schedule"],
            ),
            (
                "description: d\ntrigger: sometimes\nsteps: [{tool: fetch}]\n",
                false,
                &["workflow-invalid-trigger"],
            ),
            (
                "description: d\nsteps: [{tool: fetch, arguments: {x: '{{ steps.b.output }}'}}, {id: b, tool: fetch}]\n",
                false,
                &["workflow-bad-template"],
            ),
            (
                "description: d\ninput: {type: object, properties: {a: {}}}\nsteps: [{tool: fetch, arguments: {x: '{{ input.b }}'}}]\n",
                false,
                &["workflow-bad-template"],
            ),
            (
                "description: d\nsteps: [{id: a, tool: fetch}, {id: a, tool: fetch}]\n",
                false,
                &["workflow-invalid-step"],
            ),
            ("steps: [{tool: fetch}]\n", false, &["yaml-wrong-type"]),
        ];
        for (text, ok, want) in cases {
            let (w, d) = parse_workflow(text, Path::new("w.yaml"), "w".parse().unwrap(), &local);
            let codes: Vec<_> = d.iter().map(|d| d.code).collect();
            assert_eq!((w.is_some(), codes), (*ok, want.to_vec()), "{text}");
        }
    }
}
