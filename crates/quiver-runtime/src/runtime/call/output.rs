//! Step 7: output. A tool's result is checked against its declared output schema, kept in the
//! perception cache when the tool allows it, and trimmed past the tool's `max_output` (a
//! script's past the default): the model reads the first part with `has_more`, and the rest
//! stays in the session for `tool_output`. Relative dates resolved in step 4 are shown.

use quiver_package::tool::DEFAULT_MAX_OUTPUT;
use quiver_store::{AuditEntry, AuditStep};
use serde_json::{Value, json};

use super::audit::decision;
use super::execute::Ran;
use super::{Runs, Target};
use crate::dates::DateChange;
use crate::output::page;
use crate::runtime::{CallOutcome, CallStatus, Trimmed, Turn};

impl Turn<'_> {
    /// What the model reads of a call that ran.
    pub(in crate::runtime) fn output(
        &self,
        call_id: &str,
        target: &Target<'_>,
        ran: Ran,
        dates: &[DateChange],
        audit: &mut AuditEntry,
    ) -> CallOutcome {
        let max_output = match target.runs {
            Runs::Tool(tool) => {
                if !ran.cached
                    && let Some(schema) = &tool.output
                    && let Ok(v) = quiver_package::schema::compile(schema)
                    && let Some(message) = quiver_package::schema::first_error(&v, &ran.value)
                {
                    audit
                        .decisions
                        .push(decision(AuditStep::Output, "invalid", &message));
                    return CallOutcome::new(
                        call_id,
                        CallStatus::Error,
                        json!({"error": format!("the tool's output does not match its declared schema: {message}")}),
                    );
                }
                tool.max_output
            }
            Runs::Script { .. } => DEFAULT_MAX_OUTPUT,
            // An agent's reply is its whole answer.
            _ => usize::MAX,
        };
        if let Some(key) = &ran.cache_key {
            self.runtime.cache_result(key, &ran.value);
        }
        let mut out = self.trim(call_id, ran.value, max_output);
        out.cached = ran.cached;
        if !dates.is_empty()
            && let Value::Object(map) = &mut out.content
        {
            map.insert("_dates".into(), json!(dates));
        }
        out
    }

    /// `result` as the model reads it: whole, or its first `max_output` characters with the
    /// rest kept for `tool_output`.
    fn trim(&self, call_id: &str, result: Value, max_output: usize) -> CallOutcome {
        let text = match &result {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        if text.chars().count() <= max_output {
            return CallOutcome::new(call_id, CallStatus::Ok, result);
        }
        let first = page(&text, 0, max_output);
        self.runtime.keep_output(&self.session, call_id, text);
        let mut out = CallOutcome::new(
            call_id,
            CallStatus::Ok,
            json!({"summary": first.text, "has_more": true, "call_id": call_id, "next_offset": first.next_offset, "total_chars": first.total_chars}),
        );
        out.trimmed = Some(Trimmed {
            total_chars: first.total_chars,
            next_offset: first.next_offset,
        });
        out
    }
}
