//! Step 5 of DESIGN.md §3, shared by every kind of call (a package tool, an external MCP
//! tool, an agent, a skill script): the operator's hooks, then the policy's decision —
//! control plane, dangerous gate, package consent, approval — and the questions it asks.
//! A call kind that skipped this step would skip emergency-stop, consent and hooks, so there
//! is no other path to execution.

use quiver_package::tool::Category;
use quiver_policy::{Decision, Evaluation, Lockout, Refusal, RefusalReason};
use quiver_store::AuditEntry;
use serde_json::{Value, json};

use super::{CallOutcome, CallStatus, RuntimeError, Turn, decision, redact, secret_fields};
use crate::hooks::{HookEvent, HookVerdict, run_hook};

/// What step 5 needs to know of the callable, whatever its kind.
pub(super) struct Target<'a> {
    /// `<package>.<item>`: what hooks match and lockouts name.
    pub qualified: &'a str,
    /// Its package id.
    pub package: &'a str,
    /// `action`, `perception` or `decision` (an agent is a `decision` call, a skill script an
    /// `action` call).
    pub category: Category,
    /// Its input schema, for the secret fields hidden from hooks and cards (`Null`: none).
    pub input: &'a Value,
}

impl Turn<'_> {
    /// Runs step 5 for `target`: `None` when the call may run, else what the model reads — a
    /// refusal (final for the turn) or a call that waits for a later answer. Hooks run only
    /// for a call the policy has not already refused, before anyone is asked.
    pub(super) fn authorize(
        &mut self,
        call_id: &str,
        evaluation: &Evaluation,
        target: &Target<'_>,
        arguments: &Value,
        audit: &mut AuditEntry,
    ) -> Result<Option<CallOutcome>, RuntimeError> {
        let refused_already =
            matches!(evaluation.decision, Decision::Refuse(_) | Decision::Unknown);
        if !refused_already && let Some(refusal) = self.run_hooks(call_id, target, arguments, audit)
        {
            self.state.record_refusal(&refusal);
            return Ok(Some(CallOutcome::new(
                call_id,
                CallStatus::Refused,
                json!({"error": refusal.message}),
            )));
        }
        match &evaluation.decision {
            Decision::Allow => Ok(None),
            Decision::Refuse(_) | Decision::Unknown => {
                Ok(Some(self.refused(call_id, target.qualified, evaluation)))
            }
            Decision::Ask(ask) | Decision::Park(ask) => {
                self.ask_or_stop(call_id, ask, target.qualified, arguments, audit)
            }
        }
    }

    /// Runs the hooks that match the target, in order; the first block or failure refuses the
    /// call (final for the turn). Each hook's answer is in the audit record.
    fn run_hooks(
        &self,
        call_id: &str,
        target: &Target<'_>,
        arguments: &Value,
        audit: &mut AuditEntry,
    ) -> Option<Refusal> {
        let mut hooks = self
            .runtime
            .hooks
            .iter()
            .filter(|h| h.applies_to(target.qualified))
            .peekable();
        hooks.peek()?;
        let event = HookEvent {
            event: "before_call",
            session: self.session.clone(),
            call_id: call_id.to_owned(),
            tool: target.qualified.to_owned(),
            package: target.package.to_owned(),
            arguments: redact(arguments, &secret_fields(target.input)),
            principal: serde_json::to_value(&self.sender).unwrap_or_default(),
            origin: serde_json::to_value(&self.origin).unwrap_or_default(),
            unattended: self.unattended,
            category: format!("{:?}", target.category).to_lowercase(),
        };
        for hook in hooks {
            let reason = match run_hook(hook.as_ref(), &event) {
                Ok(HookVerdict::Continue) => {
                    audit.decisions.push(decision(
                        "hook",
                        "allow",
                        &format!("`{}` let it go on", hook.name()),
                    ));
                    continue;
                }
                Ok(HookVerdict::Block(why)) => RefusalReason::HookBlocked {
                    hook: hook.name().to_owned(),
                    why,
                },
                Err(error) => RefusalReason::HookFailed {
                    hook: hook.name().to_owned(),
                    why: error.0,
                },
            };
            audit
                .decisions
                .push(decision("hook", "refuse", &reason.to_string()));
            return Some(Refusal::new(
                reason,
                Lockout {
                    tool: target.qualified.to_owned(),
                    categories: Vec::new(),
                },
            ));
        }
        None
    }
}
