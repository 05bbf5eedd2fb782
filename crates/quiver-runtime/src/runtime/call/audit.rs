//! Step 8: audit. Every call writes one record: who, where, the name, a digest of the
//! arguments without their secret fields (never the arguments), each decision of the
//! pipeline, how it ended and how long it took. A call that runs something is first recorded
//! as started, before its tool, script or agent runs, so a process killed mid-call leaves a
//! record that the next start closes as `interrupted`. A workflow step's record is committed
//! by the engine, in the transaction of the step's result.

use std::time::Instant;

use quiver_policy::{Check, Evaluation};
use quiver_store::{AuditDecision, AuditEntry, AuditKind, AuditStatus, AuditStep, argument_digest};
use serde_json::{Value, json};

use crate::runtime::{CallOutcome, CallStatus, RuntimeError, Turn};

impl Turn<'_> {
    /// The audit record of a call of `name` as it starts: who, where, and a digest of the
    /// arguments without their secret fields.
    pub(in crate::runtime) fn call_audit(
        &self,
        call_id: &str,
        name: &str,
        arguments: &Value,
    ) -> AuditEntry {
        let mut audit = AuditEntry::new(AuditKind::Call, self.session.clone());
        audit.call_id = Some(call_id.to_owned());
        audit.principal = serde_json::to_value(&self.sender).unwrap_or_default();
        audit.origin = serde_json::to_value(&self.origin).unwrap_or_default();
        audit.tool = Some(name.to_owned());
        // By wire or qualified name, as step 1 resolves it: a secret is never digested because
        // the caller spelled the tool another way (the resolved target digests again).
        let input = self
            .catalog
            .item_by_wire(name)
            .or_else(|| self.catalog.item(name))
            .and_then(|item| self.catalog.tool(item))
            .map(|tool| &tool.input);
        audit.argument_digest = Some(digest(input, arguments));
        audit
    }

    /// Names the resolved `target` in the call's record, with the digest of `arguments`
    /// without the secret fields of the target's own input schema.
    pub(in crate::runtime) fn audit_target(
        audit: &mut AuditEntry,
        target: &super::Target<'_>,
        arguments: &Value,
    ) {
        audit.tool = Some(target.qualified.clone());
        audit.argument_digest = Some(digest(target.input, arguments));
    }

    /// Records how a call ended and writes its audit record; a workflow step's call hands it
    /// to the engine instead, which commits it with the step's result and the run's move.
    pub(in crate::runtime) fn finish_audit(
        &mut self,
        mut audit: AuditEntry,
        outcome: &mut CallOutcome,
        started: Instant,
    ) -> Result<(), RuntimeError> {
        audit.status = match outcome.status {
            CallStatus::Ok => AuditStatus::Ok,
            CallStatus::Error => AuditStatus::Error,
            CallStatus::Refused | CallStatus::Unknown => AuditStatus::Refused,
            CallStatus::Invalid => AuditStatus::Invalid,
            CallStatus::TimedOut => AuditStatus::TimedOut,
            CallStatus::Pending => AuditStatus::Pending,
        };
        audit.cached = outcome.cached;
        audit.duration_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        outcome.decisions.clone_from(&audit.decisions);
        match &mut self.step {
            Some(step) => step.audit = Some(audit),
            None => {
                self.runtime.store.append_audit(&audit)?;
            }
        }
        Ok(())
    }

    /// Records that call `audit` is about to run something, before it runs
    /// ([`Phase::Running`]), or to ask a person about it first ([`Phase::Asking`]): a process
    /// killed at either point leaves a record the next start closes as `interrupted`.
    pub(in crate::runtime) fn record_started(
        &self,
        audit: &AuditEntry,
        phase: Phase,
    ) -> Result<(), RuntimeError> {
        let mut started = audit.clone();
        started.kind = AuditKind::CallStarted;
        started.status = AuditStatus::Started;
        started.detail = Some(json!({
            "process": quiver_store::waiter::current(),
            "phase": phase,
        }));
        self.runtime.store.append_audit(&started)?;
        Ok(())
    }
}

/// Where a started call stands, in its start record (`detail.phase`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub(in crate::runtime) enum Phase {
    /// Waiting for consent or an approval: nothing ran yet.
    Asking,
    /// Its tool, script, agent or workflow runs.
    Running,
}

/// The digest of `arguments` without the secret fields of `input`.
fn digest(input: Option<&Value>, arguments: &Value) -> String {
    let secrets = input.map(secret_fields).unwrap_or_default();
    let secret_refs: Vec<&str> = secrets.iter().map(String::as_str).collect();
    argument_digest(arguments, &secret_refs)
}

/// One decision of the pipeline, for the audit record.
pub(in crate::runtime) fn decision(step: AuditStep, decision: &str, reason: &str) -> AuditDecision {
    AuditDecision {
        step,
        decision: decision.to_owned(),
        reason: reason.to_owned(),
    }
}

/// The policy's trace as decisions of the audit record, each step the check's own
/// (`dangerous-gate`, `approval-mode`, `rule`).
pub(in crate::runtime) fn trace(evaluation: &Evaluation) -> Vec<AuditDecision> {
    evaluation
        .trace
        .iter()
        .map(|s| decision(check_step(&s.check), &wire_word(&s.effect), &s.why))
        .collect()
}

/// The audit step of a policy check; a rule is [`AuditStep::Rule`] (its reason quotes it).
fn check_step(check: &Check) -> AuditStep {
    match check {
        Check::Presence => AuditStep::Presence,
        Check::Private => AuditStep::Private,
        Check::Lockout => AuditStep::Lockout,
        Check::Platforms => AuditStep::Platforms,
        Check::Scopes => AuditStep::Scopes,
        Check::Rule(_) => AuditStep::Rule,
        Check::Disallowed => AuditStep::Disallowed,
        Check::ControlPlane => AuditStep::ControlPlane,
        Check::DangerousGate => AuditStep::DangerousGate,
        Check::Consent => AuditStep::Consent,
        Check::PreApproval => AuditStep::PreApproval,
        Check::ApprovalMode => AuditStep::ApprovalMode,
        Check::Approver => AuditStep::Approver,
    }
}

/// A value's serialized spelling when it is a string (a unit enum variant).
fn wire_word(value: &impl serde::Serialize) -> String {
    match serde_json::to_value(value) {
        Ok(Value::String(word)) => word,
        _ => String::new(),
    }
}

/// Property names, at any depth, that the schema marks secret (`secret: true`,
/// `writeOnly: true` or `format: password`): never stored in the audit, hidden on cards.
pub(in crate::runtime) fn secret_fields(schema: &Value) -> Vec<String> {
    let mut out = Vec::new();
    collect_secrets(schema, &mut out, 0);
    out
}

fn collect_secrets(schema: &Value, out: &mut Vec<String>, depth: usize) {
    if depth > 16 {
        return;
    }
    if let Some(items) = schema.get("items") {
        collect_secrets(items, out, depth + 1);
    }
    let Some(props) = schema.get("properties").and_then(Value::as_object) else {
        return;
    };
    for (name, prop) in props {
        let secret = prop.get("secret").and_then(Value::as_bool) == Some(true)
            || prop.get("writeOnly").and_then(Value::as_bool) == Some(true)
            || prop.get("format").and_then(Value::as_str) == Some("password");
        if secret && !out.contains(name) {
            out.push(name.clone());
        }
        collect_secrets(prop, out, depth + 1);
    }
}

/// `arguments` with the values of `secrets` (at any depth) replaced by `"[secret]"`.
pub(in crate::runtime) fn redact(arguments: &Value, secrets: &[String]) -> Value {
    match arguments {
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| {
                    let v = if secrets.contains(k) {
                        json!("[secret]")
                    } else {
                        redact(v, secrets)
                    };
                    (k.clone(), v)
                })
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(|v| redact(v, secrets)).collect()),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use quiver_policy::DecisionKind;

    /// Every check's step is spelled as the policy spells the check (its serialized name, a
    /// rule's key), which is how docs/policy.md names them.
    #[test]
    fn checks_are_named_as_the_docs_spell_them() {
        let cases = [
            (Check::Presence, "presence"),
            (Check::Private, "private"),
            (Check::Lockout, "lockout"),
            (Check::Platforms, "platforms"),
            (Check::Scopes, "scopes"),
            (Check::Rule("role(master)".into()), "rule"),
            (Check::Disallowed, "disallowed"),
            (Check::ControlPlane, "control-plane"),
            (Check::DangerousGate, "dangerous-gate"),
            (Check::Consent, "consent"),
            (Check::PreApproval, "pre-approval"),
            (Check::ApprovalMode, "approval-mode"),
            (Check::Approver, "approver"),
        ];
        for (check, name) in cases {
            let policy = match serde_json::to_value(&check).unwrap() {
                Value::Object(map) => map.keys().next().cloned().unwrap(),
                other => other.as_str().unwrap().to_owned(),
            };
            assert_eq!(policy, name, "{check:?}");
            assert_eq!(check_step(&check).as_str(), name, "{check:?}");
        }
        assert_eq!(wire_word(&DecisionKind::Refuse), "refuse");
    }
}
