//! Step 4: validate the arguments. A tool's relative dates ("明天", "next Friday") are first
//! resolved against today and the user's message; then the arguments are checked against the
//! input schema, with the compiled validator of the turn's catalog version. Invalid arguments
//! are retried a few times per tool and turn; after that the model is told to ask the user
//! (unattended: the call is refused, final for the turn).

use quiver_policy::{Lockout, Refusal, RefusalReason};
use quiver_store::{AuditEntry, AuditStep};
use serde_json::{Value, json};

use super::audit::decision;
use super::{Runs, Target};
use crate::dates::DateChange;
use crate::runtime::{CallOutcome, CallStatus, RuntimeError, Turn};

impl Turn<'_> {
    /// Resolves dates in and validates `arguments`: the date changes made, or what the model
    /// reads instead of a run.
    pub(in crate::runtime) fn validate(
        &mut self,
        call_id: &str,
        target: &Target<'_>,
        arguments: &mut Value,
        audit: &mut AuditEntry,
    ) -> Result<Result<Vec<DateChange>, CallOutcome>, RuntimeError> {
        let outcome = |status, content| CallOutcome::new(call_id, status, content);
        let Some(schema) = target.input else {
            return Ok(Ok(Vec::new()));
        };
        let mut date_changes = Vec::new();
        if let Runs::Tool(_) = target.runs {
            let today = (self.runtime.clock)();
            date_changes = crate::dates::resolve_dates(arguments, schema, today, &self.message);
            if !date_changes.is_empty() {
                audit.decisions.push(decision(
                    AuditStep::Dates,
                    "resolve",
                    &serde_json::to_string(&date_changes).unwrap_or_default(),
                ));
            }
        }
        let name = &target.asked_as;
        let validator = match self
            .runtime
            .validator(&self.catalog, &target.qualified, schema)
        {
            Ok(v) => v,
            Err(message) => {
                audit
                    .decisions
                    .push(decision(AuditStep::Validate, "error", &message));
                return Ok(Err(outcome(
                    CallStatus::Error,
                    json!({"error": format!("`{name}` has an input schema that cannot be used: {message}")}),
                )));
            }
        };
        let Some(message) = quiver_package::schema::first_error(&validator, arguments) else {
            return Ok(Ok(date_changes));
        };
        let tries = self.retries.entry(target.qualified.clone()).or_insert(0);
        *tries += 1;
        audit
            .decisions
            .push(decision(AuditStep::Validate, "invalid", &message));
        let max = self.runtime.config.max_retries;
        if *tries <= max {
            return Ok(Err(outcome(
                CallStatus::Invalid,
                json!({"error": format!("invalid arguments: {message}")}),
            )));
        }
        if self.unattended {
            let refusal = format!(
                "refused: the arguments of `{name}` were invalid {max} times; do not retry"
            );
            self.state.record_refusal(&Refusal::new(
                RefusalReason::Declined,
                Lockout {
                    tool: target.qualified.clone(),
                    categories: Vec::new(),
                },
            ));
            return Ok(Err(outcome(CallStatus::Refused, json!({"error": refusal}))));
        }
        Ok(Err(outcome(
            CallStatus::Invalid,
            json!({"error": format!("invalid arguments: {message}. You have tried {max} times: stop and ask the user what they want.")}),
        )))
    }
}
