//! What a workflow's expressions may name: `input` (the fields its schema declares),
//! `steps.<id>.output|status|approved` of earlier steps, `trigger`, `run.id`, the package's
//! settings that are not secret, and (in event conditions) `event`.

use std::collections::BTreeSet;

use serde_json::Value;

use super::WorkflowScope;
use super::expr::{self, Segment, path_text};
use super::template;

/// What is in scope where an expression is written.
pub(super) struct Refs<'a> {
    /// The input schema's declared fields, when it declares `properties`.
    pub input_fields: Option<&'a BTreeSet<String>>,
    /// Steps that come earlier (or, for the output, every step).
    pub earlier: &'a BTreeSet<String>,
    /// The rest of the package.
    pub scope: &'a WorkflowScope,
    /// Whether `steps` may be named at all (not in an idempotency key nor a trigger).
    pub steps: bool,
    /// Whether `event` may be named (event conditions and waits).
    pub event: bool,
}

impl Refs<'_> {
    /// Why `path` may not be named here, if it may not.
    fn check(&self, path: &[Segment], in_template: bool) -> Option<String> {
        let text = if in_template {
            format!("{{{{ {} }}}}", path_text(path))
        } else {
            path_text(path)
        };
        let key = |i: usize| match path.get(i) {
            Some(Segment::Key(k)) => Some(k.as_str()),
            _ => None,
        };
        match key(0) {
            Some("input") => match (key(1), self.input_fields) {
                (Some(field), Some(fields)) if !fields.contains(field) => Some(format!(
                    "`{text}` names an input field the schema does not declare"
                )),
                _ => None,
            },
            Some("steps") if self.steps => match key(1) {
                Some(step) if !self.earlier.contains(step) => Some(format!(
                    "`{text}` names step `{step}`, which does not come earlier"
                )),
                Some(_) => match key(2) {
                    None | Some("output" | "status" | "approved") => None,
                    Some(other) => Some(format!(
                        "`{text}`: a step has `output`, `status` and `approved`, not `{other}`"
                    )),
                },
                None => Some(format!("`{text}` must name a step: `steps.<id>.output`")),
            },
            Some("trigger") => None,
            Some("run") => match (key(1), path.len()) {
                (Some("id"), 2) => None,
                _ => Some(format!("`{text}`: a run has only `run.id`")),
            },
            Some("settings") => match key(1) {
                Some(s) if self.scope.secret_settings.contains(s) => Some(format!(
                    "`{text}` is a secret setting; secrets never enter templates"
                )),
                Some(s) if !self.scope.settings.contains(s) => Some(format!(
                    "`{text}` names a setting the package's `config` does not declare"
                )),
                Some(_) => None,
                None => Some(format!("`{text}` must name one setting")),
            },
            Some("event") if self.event => None,
            _ => {
                let mut roots = vec!["input"];
                if self.steps {
                    roots.push("steps.<id>");
                }
                roots.extend(["trigger", "run.id", "settings"]);
                if self.event {
                    roots.push("event");
                }
                let roots: Vec<String> = roots.iter().map(|r| format!("`{r}`")).collect();
                Some(format!(
                    "`{text}` must start with one of {}",
                    roots.join(", ")
                ))
            }
        }
    }

    /// Problems of one condition (`if:`, `match:`): its syntax, then what it names.
    pub(super) fn condition(&self, text: &str) -> Vec<String> {
        match expr::parse(text) {
            Ok(e) => e
                .paths()
                .into_iter()
                .filter_map(|p| self.check(p, false))
                .collect(),
            Err(err) => vec![format!("`{text}` is not a condition: {err}")],
        }
    }

    /// Problems of every template inside `value`.
    pub(super) fn value(&self, value: &Value) -> Vec<String> {
        let mut out = Vec::new();
        for (_, parsed) in template::parse_value(value) {
            match parsed {
                Ok(t) => {
                    for e in t.exprs() {
                        for p in e.paths() {
                            out.extend(self.check(p, true));
                        }
                    }
                }
                Err(err) => out.push(format!("a template does not parse: {err}")),
            }
        }
        out
    }

    /// Problems of one template string.
    pub(super) fn text(&self, text: &str) -> Vec<String> {
        self.value(&Value::String(text.to_owned()))
    }
}
