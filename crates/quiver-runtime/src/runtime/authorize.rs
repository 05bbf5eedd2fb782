//! Step 5 of DESIGN.md §3, shared by every kind of call (package tool, agent, skill script):
//! the policy's decision (control plane, dangerous gate, package consent, approval mode), the
//! operator's hooks before anyone is asked, then the questions. No call kind runs without
//! passing here.

use quiver_policy::{Decision, Evaluation};
use quiver_store::AuditEntry;
use serde_json::{Value, json};

use super::{CallOutcome, CallStatus, RuntimeError, Turn};

/// What a call asks step 5 about.
pub(super) struct Authorize<'a> {
    /// The call's id.
    pub call_id: &'a str,
    /// `<package>.<name>` of what runs (for a script, `<package>.run_skill_script`).
    pub qualified: &'a str,
    /// Its package.
    pub package: &'a str,
    /// Its category, as hooks see it.
    pub category: &'a str,
    /// Its arguments, secrets already redacted for hooks and cards.
    pub arguments: &'a Value,
    /// The policy's evaluation of the call.
    pub evaluation: &'a Evaluation,
}

impl Turn<'_> {
    /// Runs step 5 for `call`: `None` when the call may run, else what the model reads (a
    /// refusal, final for the turn, or a call waiting for a later answer).
    pub(super) fn authorize(
        &mut self,
        call: &Authorize<'_>,
        audit: &mut AuditEntry,
    ) -> Result<Option<CallOutcome>, RuntimeError> {
        let evaluation = call.evaluation;
        // The operator's hooks, before anyone is asked (and only for a call the policy has not
        // already refused): a failing hook blocks the call.
        let refused_already =
            matches!(evaluation.decision, Decision::Refuse(_) | Decision::Unknown);
        if !refused_already
            && let Some(refusal) = self.run_hooks(
                call.call_id,
                call.qualified,
                call.package,
                call.category,
                call.arguments,
                audit,
            )
        {
            self.state.record_refusal(&refusal);
            return Ok(Some(CallOutcome::new(
                call.call_id,
                CallStatus::Refused,
                json!({"error": refusal.message}),
            )));
        }
        match &evaluation.decision {
            Decision::Allow => Ok(None),
            Decision::Refuse(_) | Decision::Unknown => {
                Ok(Some(self.refused(call.call_id, evaluation)))
            }
            Decision::Ask(ask) | Decision::Park(ask) => {
                self.ask_or_stop(call.call_id, ask, call.qualified, call.arguments, audit)
            }
        }
    }
}
