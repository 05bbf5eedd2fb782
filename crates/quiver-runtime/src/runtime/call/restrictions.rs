//! Step 3: admission and the turn's restrictions. What the policy refused at visibility or
//! admission ends the call here, before its arguments are looked at (a refusal is final for
//! the turn); a tool whose package lacks a required setting is told which setting (its name,
//! never a value) instead of running.

use quiver_policy::{Decision, Evaluation, Stage};
use quiver_store::{AuditEntry, AuditStep};
use serde_json::json;

use super::audit::decision;
use super::{Runs, Target};
use crate::runtime::{CallOutcome, CallStatus, Turn};

impl Turn<'_> {
    /// The outcome of a call the policy ended at visibility or admission, if it did.
    pub(in crate::runtime) fn stop_unreachable(
        &mut self,
        call_id: &str,
        target: &Target<'_>,
        evaluation: &Evaluation,
    ) -> Option<CallOutcome> {
        if matches!(evaluation.decision, Decision::Unknown) {
            return Some(self.unknown(call_id, &target.asked_as));
        }
        matches!(
            evaluation.deciding_stage(),
            Some(Stage::Visibility | Stage::Admission)
        )
        .then(|| self.refused(call_id, evaluation))
    }

    /// The outcome of a tool call whose package lacks a required setting, if it does.
    pub(in crate::runtime) fn stop_unconfigured(
        &self,
        call_id: &str,
        target: &Target<'_>,
        audit: &mut AuditEntry,
    ) -> Option<CallOutcome> {
        let Runs::Tool(_) = target.runs else {
            return None;
        };
        let setting = self.missing_setting(target.package)?;
        audit.decisions.push(decision(
            AuditStep::Settings,
            "refuse",
            &format!("setting `{setting}` is unset"),
        ));
        Some(CallOutcome::new(
            call_id,
            CallStatus::Error,
            json!({"error": format!("`{}` needs the package setting `{setting}`, which is not set; ask the operator to set it", target.asked_as)}),
        ))
    }
}
