//! What a caller is offered, and how a call ended: typed, with its decisions, so no front
//! re-reads the audit log to learn what happened.

use std::sync::Arc;

use quiver_policy::{Refusal, RefusalReason};
use quiver_store::AuditDecision;
use serde::Serialize;
use serde_json::{Value, json};

use super::CallKind;

/// A tool as offered to the model.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolDefinition {
    /// Wire name.
    pub name: String,
    /// Every description part, joined.
    pub description: String,
    /// JSON Schema of the input.
    pub input_schema: Value,
}

/// What a caller is offered in a turn ([`Turn::offer`](crate::Turn::offer)).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Offer {
    /// The tools the model gets: meta-tools first, then the admitted items on offer (shared
    /// definitions of the catalog snapshot).
    pub tools: Vec<Arc<ToolDefinition>>,
    /// Skill ids the model may open with `read_skill` (or read as a resource), catalog order.
    pub skills: Vec<String>,
    /// Tools left out because a required package setting is unset.
    pub not_configured: Vec<NotConfigured>,
}

/// A tool that is off until its package's setting is set.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NotConfigured {
    /// Its wire name.
    pub name: String,
    /// Its package id.
    pub package: String,
    /// The name of the first required setting that is unset (never a value).
    pub setting: String,
}

/// How a call ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CallStatus {
    /// It ran (or a meta-tool answered).
    Ok,
    /// It ran and failed; the model may re-plan.
    Error,
    /// A policy refused it; final for the turn.
    Refused,
    /// Its arguments did not validate.
    Invalid,
    /// No such tool for this caller.
    Unknown,
    /// It ran out of time.
    TimedOut,
    /// Nothing ran: it waits for a person's answer that a later request brings
    /// ([`Answer::Pending`](crate::approver::Answer::Pending)).
    Pending,
}

/// A call's result, as the model reads it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CallOutcome {
    /// The call's id (for `tool_output`).
    pub call_id: String,
    /// How it ended.
    pub status: CallStatus,
    /// What the model reads: the tool's JSON result, or a message.
    pub content: Value,
    /// Whether the result came from the perception cache.
    pub cached: bool,
    /// What kind of call it was (`None`: the name reached nothing).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kind: Option<CallKind>,
    /// Why it was refused, when a policy, a hook, a person or the sandbox refused it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub refusal: Option<RefusalReason>,
    /// How the result was trimmed, when it was (the rest is read with `tool_output`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trimmed: Option<Trimmed>,
    /// Each decision of the pipeline, in order, as the audit record holds them.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub decisions: Vec<AuditDecision>,
}

/// How a result was trimmed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Trimmed {
    /// Characters in the whole result.
    pub total_chars: usize,
    /// Where the next page starts.
    pub next_offset: Option<usize>,
}

impl CallOutcome {
    /// The outcome of call `call_id`, not answered from the cache.
    pub fn new(call_id: &str, status: CallStatus, content: Value) -> CallOutcome {
        CallOutcome {
            call_id: call_id.to_owned(),
            status,
            content,
            cached: false,
            kind: None,
            refusal: None,
            trimmed: None,
            decisions: Vec::new(),
        }
    }

    /// The outcome of call `call_id` that `refusal` refused: final for the turn.
    pub fn refused(call_id: &str, refusal: &Refusal) -> CallOutcome {
        let mut out = CallOutcome::new(
            call_id,
            CallStatus::Refused,
            json!({"error": refusal.message}),
        );
        out.refusal = Some(refusal.reason.clone());
        out
    }

    /// Whether the model should read this as an error.
    pub fn is_error(&self) -> bool {
        self.status != CallStatus::Ok
    }
}
