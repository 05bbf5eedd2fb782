//! The file as written, and its conversion into a [`Workflow`] with every diagnostic.

use std::collections::BTreeSet;
use std::path::Path;

use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use super::refs::Refs;
use super::{
    Concurrency, EventTrigger, OnTimeout, Retry, Schedule, Step, StepAction, Trigger, WaitFor,
    Webhook, Workflow, WorkflowScope, lines,
};
use crate::common::Seconds;
use crate::diagnostic::Diagnostic;
use crate::names::{ItemName, check_name};
use crate::yaml;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawWorkflow {
    description: String,
    #[serde(default)]
    expose: bool,
    trigger: Option<Value>,
    input: Option<Value>,
    idempotency_key: Option<String>,
    concurrency: Option<Concurrency>,
    timeout: Option<Seconds>,
    steps: Vec<RawStep>,
    output: Option<Value>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawStep {
    id: Option<String>,
    tool: Option<String>,
    with: Option<Value>,
    arguments: Option<Value>,
    agent: Option<String>,
    task: Option<String>,
    approval: Option<Value>,
    wait: Option<Value>,
    #[serde(rename = "if")]
    condition: Option<String>,
    timeout: Option<Seconds>,
    retry: Option<Retry>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawApproval {
    title: String,
    show: Option<Value>,
    #[serde(default)]
    approvers: Vec<String>,
    #[serde(default)]
    separation_of_duties: bool,
    timeout: Option<Seconds>,
    #[serde(default)]
    on_timeout: OnTimeout,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawWait {
    #[serde(rename = "for")]
    duration: Option<Seconds>,
    until: Option<String>,
    event: Option<String>,
    #[serde(rename = "match")]
    matches: Option<String>,
    timeout: Option<Seconds>,
}

const TRIGGER_SHAPE: &str = "`trigger` must be `manual`, `{schedule: ...}`, `{event: ...}`, `{webhook: {name, secret}}` or a list of them";

/// Diagnostics of one file, each at a line.
struct Diags<'a> {
    file: &'a Path,
    out: Vec<Diagnostic>,
}

impl Diags<'_> {
    fn err(&mut self, code: &'static str, line: Option<u64>, message: impl Into<String>) {
        self.out
            .push(Diagnostic::error(code, self.file, message).at_line(line));
    }
}

fn from_value<T: DeserializeOwned>(value: &Value) -> Result<T, String> {
    serde_json::from_value(value.clone()).map_err(|e| e.to_string())
}

pub(super) fn parse(
    text: &str,
    file: &Path,
    name: ItemName,
    scope: &WorkflowScope,
) -> (Option<Workflow>, Vec<Diagnostic>) {
    let raw: RawWorkflow = match yaml::parse(text, file, 1) {
        Ok(raw) => raw,
        Err(diag) => return (None, vec![diag]),
    };
    let mut d = Diags {
        file,
        out: Vec::new(),
    };
    let line = |key: &str| yaml::key_line(text, 1, key);
    let steps_line = line("steps");
    let step_lines = lines::list_item_lines(text, "steps");
    let step_line = |index: usize| step_lines.get(index).copied().or(steps_line);

    let input = raw.input.unwrap_or_else(|| json!({"type": "object"}));
    if let Err(message) = crate::schema::compile(&input) {
        d.err(
            "workflow-invalid-schema",
            line("input"),
            format!("the input schema is invalid: {message}"),
        );
    }
    let input_fields: Option<BTreeSet<String>> = input
        .get("properties")
        .and_then(Value::as_object)
        .map(|p| p.keys().cloned().collect());
    let no_steps = BTreeSet::new();
    let top = Refs {
        input_fields: input_fields.as_ref(),
        earlier: &no_steps,
        scope,
        steps: false,
        event: false,
    };

    let triggers = triggers(raw.trigger.as_ref(), scope, &top, line("trigger"), &mut d);
    for (key, template) in [
        ("idempotency_key", raw.idempotency_key.as_deref()),
        (
            "concurrency",
            raw.concurrency.as_ref().and_then(|c| c.key.as_deref()),
        ),
    ] {
        for message in template.map(|t| top.text(t)).unwrap_or_default() {
            d.err(
                "workflow-bad-template",
                line(key),
                format!("{key}: {message}"),
            );
        }
    }
    if raw.concurrency.as_ref().is_some_and(|c| c.limit == 0) {
        d.err(
            "workflow-invalid-concurrency",
            line("concurrency"),
            "`concurrency.limit` must be at least 1",
        );
    }

    if raw.steps.is_empty() {
        d.err("workflow-no-steps", steps_line, "the workflow has no steps");
    }
    let mut earlier: BTreeSet<String> = BTreeSet::new();
    let mut steps = Vec::new();
    for (index, raw_step) in raw.steps.into_iter().enumerate() {
        let n = index + 1;
        let at = step_line(index);
        let refs = Refs {
            earlier: &earlier,
            steps: true,
            ..top
        };
        let id = raw_step.id.clone().unwrap_or_else(|| format!("step-{n}"));
        if let Some(step) = step(raw_step, n, at, &refs, scope, &mut d) {
            steps.push(Step {
                id: id.clone(),
                ..step
            });
        }
        if check_name(&id).is_err() {
            d.err(
                "workflow-invalid-step",
                at,
                format!("step {n} has an invalid id `{id}`"),
            );
        } else if !earlier.insert(id.clone()) {
            d.err(
                "workflow-invalid-step",
                at,
                format!("step id `{id}` is used twice"),
            );
        }
    }
    if let Some(output) = &raw.output {
        let refs = Refs {
            earlier: &earlier,
            steps: true,
            ..top
        };
        for message in refs.value(output) {
            d.err(
                "workflow-bad-template",
                line("output"),
                format!("output: {message}"),
            );
        }
    }
    d.out.extend(crate::text::check(
        file,
        "description",
        &raw.description,
        line("description"),
    ));
    if d.out.iter().any(Diagnostic::is_error) {
        return (None, d.out);
    }
    let workflow = Workflow {
        name,
        file: file.to_path_buf(),
        description: raw.description,
        expose: raw.expose,
        triggers,
        input,
        idempotency_key: raw.idempotency_key,
        concurrency: raw.concurrency,
        timeout: raw.timeout,
        steps,
        output: raw.output,
    };
    (Some(workflow), d.out)
}

fn triggers(
    raw: Option<&Value>,
    scope: &WorkflowScope,
    top: &Refs<'_>,
    at: Option<u64>,
    d: &mut Diags<'_>,
) -> Vec<Trigger> {
    let items: Vec<&Value> = match raw {
        None | Some(Value::Null) => return vec![Trigger::Manual],
        Some(Value::Array(items)) => items.iter().collect(),
        Some(one) => vec![one],
    };
    let mut out = Vec::new();
    for item in items {
        match one_trigger(item) {
            Ok(trigger) => {
                check_trigger(&trigger, scope, top, at, d);
                out.push(trigger);
            }
            Err(message) => d.err("workflow-invalid-trigger", at, message),
        }
    }
    if out.is_empty() && !d.out.iter().any(Diagnostic::is_error) {
        d.err("workflow-invalid-trigger", at, "`trigger` is an empty list");
    }
    out
}

fn one_trigger(item: &Value) -> Result<Trigger, String> {
    let map = match item {
        Value::String(s) if s == "manual" => return Ok(Trigger::Manual),
        Value::Object(map) if map.len() == 1 => map,
        _ => return Err(TRIGGER_SHAPE.to_owned()),
    };
    let bad = |what: &str, e: String| format!("`{what}` trigger: {e}");
    match map.iter().next() {
        Some((k, Value::String(cron))) if k == "schedule" => Ok(Trigger::Schedule(Schedule {
            cron: cron.clone(),
            timezone: super::utc(),
            overlap: Default::default(),
            catchup: Default::default(),
        })),
        Some((k, v)) if k == "schedule" => from_value(v)
            .map(Trigger::Schedule)
            .map_err(|e| bad("schedule", e)),
        Some((k, Value::String(name))) if k == "event" => Ok(Trigger::Event(EventTrigger {
            name: name.clone(),
            condition: None,
        })),
        Some((k, v)) if k == "event" => from_value(v)
            .map(Trigger::Event)
            .map_err(|e| bad("event", e)),
        Some((k, v)) if k == "webhook" => from_value(v)
            .map(Trigger::Webhook)
            .map_err(|e| bad("webhook", e)),
        _ => Err(TRIGGER_SHAPE.to_owned()),
    }
}

fn check_trigger(
    trigger: &Trigger,
    scope: &WorkflowScope,
    top: &Refs<'_>,
    at: Option<u64>,
    d: &mut Diags<'_>,
) {
    match trigger {
        Trigger::Manual => {}
        Trigger::Schedule(s) => {
            if let Err(message) = check_cron(&s.cron) {
                d.err("workflow-invalid-schedule", at, message);
            }
            if s.timezone.parse::<chrono_tz::Tz>().is_err() {
                d.err(
                    "workflow-invalid-timezone",
                    at,
                    format!(
                        "`{}` is not an IANA time zone (`Europe/Berlin`, `UTC`)",
                        s.timezone
                    ),
                );
            }
        }
        Trigger::Event(e) => {
            let refs = Refs {
                event: true,
                ..*top
            };
            for message in e
                .condition
                .as_deref()
                .map(|c| refs.condition(c))
                .unwrap_or_default()
            {
                d.err(
                    "workflow-bad-condition",
                    at,
                    format!("event `{}`: {message}", e.name),
                );
            }
        }
        Trigger::Webhook(Webhook { name, secret }) => {
            if check_name(name).is_err() {
                d.err(
                    "workflow-invalid-trigger",
                    at,
                    format!("webhook name `{name}` is not a valid name"),
                );
            }
            if !scope.secret_settings.contains(secret) {
                d.err(
                    "workflow-webhook-secret",
                    at,
                    format!(
                        "webhook `{name}`: `{secret}` is not a `secret: true` setting of the package's `config`"
                    ),
                );
            }
        }
    }
}

/// Parses a cron expression as the engine will: 5 fields, or 6 with seconds first.
pub(crate) fn check_cron(expr: &str) -> Result<(), String> {
    let fields = expr.split_whitespace().count();
    if !(5..=6).contains(&fields) {
        return Err(format!(
            "`{expr}` is not a cron expression (5 fields: minute hour day month weekday)"
        ));
    }
    croner::parser::CronParser::builder()
        .seconds(croner::parser::Seconds::Optional)
        .build()
        .parse(expr)
        .map(|_| ())
        .map_err(|e| format!("`{expr}` is not a cron expression: {e}"))
}

fn step(
    raw: RawStep,
    n: usize,
    at: Option<u64>,
    refs: &Refs<'_>,
    scope: &WorkflowScope,
    d: &mut Diags<'_>,
) -> Option<Step> {
    let mut problems: Vec<(&'static str, String)> = Vec::new();
    let arguments = match (raw.with, raw.arguments) {
        (Some(_), Some(_)) => {
            problems.push((
                "workflow-invalid-step",
                format!("step {n} has both `with` and `arguments`; use `with`"),
            ));
            None
        }
        (a, b) => a.or(b),
    };
    let action = match (raw.tool, raw.agent, raw.approval, raw.wait) {
        (Some(tool), None, None, None) => Some(StepAction::Tool {
            name: tool,
            arguments: arguments.unwrap_or_else(|| json!({})),
        }),
        (None, Some(agent), None, None) => Some(StepAction::Agent {
            name: agent,
            task: raw.task.unwrap_or_default(),
        }),
        (None, None, Some(approval), None) => match approval {
            Value::String(title) => Some(StepAction::Approval {
                title,
                show: None,
                approvers: Vec::new(),
                separation_of_duties: false,
                timeout: None,
                on_timeout: OnTimeout::Fail,
            }),
            other => match from_value::<RawApproval>(&other) {
                Ok(a) => {
                    for rule in &a.approvers {
                        if let Err(e) = crate::rules::parse_rule(rule) {
                            problems.push((
                                "workflow-invalid-step",
                                format!("step {n}: approver `{rule}`: {e}"),
                            ));
                        }
                    }
                    Some(StepAction::Approval {
                        title: a.title,
                        show: a.show,
                        approvers: a.approvers,
                        separation_of_duties: a.separation_of_duties,
                        timeout: a.timeout,
                        on_timeout: a.on_timeout,
                    })
                }
                Err(e) => {
                    problems.push((
                        "workflow-invalid-step",
                        format!("step {n}: `approval`: {e}"),
                    ));
                    None
                }
            },
        },
        (None, None, None, Some(wait)) => match wait_for(&wait) {
            Ok(w) => Some(StepAction::Wait(w)),
            Err(e) => {
                problems.push(("workflow-invalid-step", format!("step {n}: `wait`: {e}")));
                None
            }
        },
        _ => {
            problems.push((
                "workflow-invalid-step",
                format!("step {n} must have exactly one of `tool`, `agent`, `approval` or `wait`"),
            ));
            None
        }
    };
    if raw.retry.is_some_and(|r| r.max_attempts == 0) {
        problems.push((
            "workflow-invalid-step",
            format!("step {n}: `retry.max_attempts` must be at least 1"),
        ));
    }
    if let Some(action) = action.as_ref().filter(|_| problems.is_empty()) {
        problems.extend(check_action(action, n, refs, scope));
    }
    if let Some(condition) = &raw.condition {
        for message in refs.condition(condition) {
            problems.push((
                "workflow-bad-condition",
                format!("step {n}: `if`: {message}"),
            ));
        }
    }
    let ok = problems.is_empty();
    for (code, message) in problems {
        d.err(code, at, message);
    }
    let action = action.filter(|_| ok)?;
    Some(Step {
        id: String::new(),
        action,
        condition: raw.condition,
        timeout: raw.timeout,
        retry: raw.retry,
    })
}

fn wait_for(value: &Value) -> Result<WaitFor, String> {
    if let Value::String(_) | Value::Number(_) = value {
        return from_value::<Seconds>(value).map(WaitFor::For);
    }
    let raw: RawWait = from_value(value)?;
    match (raw.duration, raw.until, raw.event) {
        (Some(d), None, None) if raw.matches.is_none() && raw.timeout.is_none() => {
            Ok(WaitFor::For(d))
        }
        (None, Some(until), None) if raw.matches.is_none() && raw.timeout.is_none() => {
            Ok(WaitFor::Until(until))
        }
        (None, None, Some(name)) => Ok(WaitFor::Event {
            name,
            matches: raw.matches,
            timeout: raw.timeout,
        }),
        _ => Err("a wait has exactly one of `for`, `until` or `event` (with `match` and `timeout` only beside `event`)".to_owned()),
    }
}

/// Problems of what a step names: its target, its templates, its static arguments.
fn check_action(
    action: &StepAction,
    n: usize,
    refs: &Refs<'_>,
    scope: &WorkflowScope,
) -> Vec<(&'static str, String)> {
    let mut out = Vec::new();
    let mut template = |messages: Vec<String>| {
        for message in messages {
            out.push(("workflow-bad-template", format!("step {n}: {message}")));
        }
    };
    match action {
        StepAction::Tool { arguments, .. } => template(refs.value(arguments)),
        StepAction::Agent { task, .. } => template(refs.text(task)),
        StepAction::Approval { title, show, .. } => {
            template(refs.text(title));
            template(show.as_ref().map(|s| refs.value(s)).unwrap_or_default());
        }
        StepAction::Wait(WaitFor::Until(until)) => template(refs.text(until)),
        StepAction::Wait(WaitFor::Event {
            matches: Some(m), ..
        }) => {
            let event_refs = Refs {
                event: true,
                ..*refs
            };
            for message in event_refs.condition(m) {
                out.push((
                    "workflow-bad-condition",
                    format!("step {n}: `match`: {message}"),
                ));
            }
        }
        StepAction::Wait(_) => {}
    }
    if let StepAction::Tool { name, .. } | StepAction::Agent { name, .. } = action {
        let (package, local) = match name.split_once('.') {
            Some((package, local)) => (Some(package), local),
            None => (None, name.as_str()),
        };
        let own = match (&scope.packages, package) {
            (_, None) => true,
            (Some((id, _)), Some(p)) => p == id,
            (None, Some(_)) => false,
        };
        if own && !scope.items.contains(local) {
            out.push((
                "workflow-unknown-target",
                format!("step {n} calls `{name}`, which this package does not define"),
            ));
        }
        if let (Some((_, required)), Some(p)) = (&scope.packages, package)
            && !own
            && !required.contains(p)
        {
            out.push((
                "workflow-unknown-target",
                format!(
                    "step {n} calls `{name}`, but `{p}` is neither this package nor one it `requires`"
                ),
            ));
        }
    }
    if let StepAction::Tool { name, arguments } = action
        && let Some(schema) = scope.tool_inputs.get(name)
        && let Some(message) = static_argument_error(schema, arguments)
    {
        out.push((
            "workflow-invalid-arguments",
            format!("step {n}: the arguments of `{name}` do not fit its input: {message}"),
        ));
    }
    out
}

/// Checks the arguments that are known at load (those without a template) against the tool's
/// input schema; a templated top-level argument is left out, and so is its `required` entry.
fn static_argument_error(schema: &Value, arguments: &Value) -> Option<String> {
    let Value::Object(args) = arguments else {
        return Some("`with` must be a mapping".to_owned());
    };
    let templated = |v: &Value| !super::template::parse_value(v).is_empty();
    let kept: serde_json::Map<String, Value> = args
        .iter()
        .filter(|(_, v)| !templated(v))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let mut schema = schema.clone();
    if let Some(Value::Array(required)) = schema.get_mut("required") {
        required.retain(|r| {
            r.as_str()
                .is_none_or(|r| !args.get(r).is_some_and(templated))
        });
    }
    let validator = crate::schema::compile(&schema).ok()?;
    crate::schema::first_error(&validator, &Value::Object(kept))
}
