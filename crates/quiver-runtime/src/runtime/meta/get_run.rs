//! `get_run(run_id)`: the model reads a workflow run that a call started (the call answered
//! `{run_id, status}` because the run waits for an approval, a timer or an event): its status,
//! what it waits for, and its output or error once it ended. Offered wherever runs can be
//! started (a runtime with a workflow store), on every front: a chat's model calls it as a
//! meta-tool, and the MCP front lists it among its own tools ([`Runtime::read_run`]). Only the
//! known user who started the run, or the owner (role `master`), reads it; to anyone else,
//! an anonymous caller included, it does not exist.

use quiver_package::rules::Role;
use quiver_policy::Principal;
use quiver_store::workflow::{Run, Wait, WaitKind, WaitStatus};
use serde_json::{Value, json};

use super::text_arg;
use crate::runtime::{CallOutcome, CallStatus, Runtime, Turn};

/// The meta-tool's wire name.
pub const GET_RUN: &str = "get_run";

/// What the model is told of `get_run`, on every front.
pub fn get_run_tool() -> crate::runtime::ToolDefinition {
    super::MetaTool::GetRun.definition()
}

/// `get_run`'s description and input schema.
pub(super) fn definition() -> (&'static str, Value) {
    (
        "Read a workflow run that a call started: when calling a workflow (a tool marked `(SOP)`) returned `{run_id, status}` because the run waits (for an approval, a timer, an event), pass that `run_id` to see its status, what it waits for, and its output once it has completed.",
        json!({"type": "object", "properties": {
            "run_id": {"type": "string", "description": "the `run_id` a call returned"},
        }, "required": ["run_id"]}),
    )
}

impl Turn<'_> {
    /// Runs `get_run` for this turn's sender.
    pub(in crate::runtime) fn get_run(&self, call_id: &str, arguments: &Value) -> CallOutcome {
        let Some(id) = text_arg(arguments, "run_id") else {
            return CallOutcome::new(
                call_id,
                CallStatus::Invalid,
                json!({"error": "invalid arguments: `run_id` is required (the `run_id` a call returned)"}),
            );
        };
        match self.runtime.read_run(&self.sender, &id) {
            Ok(run) => CallOutcome::new(call_id, CallStatus::Ok, run),
            Err(error) => CallOutcome::new(call_id, CallStatus::Error, json!({"error": error})),
        }
    }
}

impl Runtime {
    /// The run `id` as `reader` may read it (`get_run`, on every front): its status, what it
    /// waits for, and its output or error; `Err` with the text the model reads when there is
    /// no run this reader may read.
    pub fn read_run(&self, reader: &Principal, id: &str) -> Result<Value, String> {
        let Some(store) = self.workflow_store() else {
            return Err("this runtime runs no workflows".into());
        };
        let missing = || format!("no run `{id}` that you may read");
        let run = match store.run(id) {
            Ok(Some(run)) if may_read(reader, &run) => run,
            Ok(_) => return Err(missing()),
            Err(e) => return Err(format!("cannot read run `{id}`: {e}")),
        };
        let waits = store
            .waits(id)
            .map_err(|e| format!("cannot read run `{id}`: {e}"))?;
        Ok(describe(run, &waits))
    }
}

/// Whether `reader` may read `run`: the same known user who started it, or the owner.
fn may_read(reader: &Principal, run: &Run) -> bool {
    if reader.effective_role() == Some(Role::Master) {
        return true;
    }
    let started = run.principal.get("user_id").and_then(Value::as_str);
    reader.user_id.is_some() && reader.user_id.as_deref() == started
}

/// The run as the model reads it.
fn describe(run: Run, waits: &[Wait]) -> Value {
    let pending: Vec<Value> = waits
        .iter()
        .filter(|w| w.status == WaitStatus::Pending)
        .map(waiting_for)
        .collect();
    let mut out = json!({
        "run_id": run.id,
        "workflow": run.workflow,
        "status": run.status.as_str(),
        "created_at": rfc3339(run.created_at),
        "updated_at": rfc3339(run.updated_at),
    });
    if !pending.is_empty() {
        out["waiting_for"] = Value::Array(pending);
    }
    if let Some(output) = run.output {
        out["output"] = output;
    }
    if let Some(error) = run.error {
        out["error"] = Value::String(error);
    }
    out
}

/// What a pending wait waits for, as the model reads it.
fn waiting_for(wait: &Wait) -> Value {
    let at = |ms: Option<i64>| ms.and_then(rfc3339).map_or(Value::Null, Value::String);
    match wait.kind {
        WaitKind::Approval => {
            let detail = &wait.detail;
            let what = match detail.get("kind").and_then(Value::as_str) {
                Some("call") => json!({"tool": detail["card"]["tool"]}),
                _ => json!({"title": detail["title"]}),
            };
            json!({"kind": "approval", "what": what, "times_out_at": at(wait.wake_at)})
        }
        WaitKind::Timer => json!({"kind": "timer", "until": at(wait.wake_at)}),
        WaitKind::Retry => json!({"kind": "retry", "until": at(wait.wake_at)}),
        WaitKind::Event => {
            json!({"kind": "event", "event": wait.event, "times_out_at": at(wait.wake_at)})
        }
    }
}

/// A Unix-ms time as RFC 3339 UTC.
fn rfc3339(ms: i64) -> Option<String> {
    chrono::DateTime::from_timestamp_millis(ms)
        .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_read_as_rfc3339() {
        let cases = [
            (0, "1970-01-01T00:00:00Z"),
            (951_782_400_000, "2000-02-29T00:00:00Z"),
            (1_777_886_100_999, "2026-05-04T09:15:00Z"),
            (-1_000, "1969-12-31T23:59:59Z"),
        ];
        for (ms, want) in cases {
            assert_eq!(rfc3339(ms).as_deref(), Some(want), "{ms}");
        }
    }

    #[test]
    fn who_reads_a_run() {
        let run = |started: Value| Run {
            principal: started,
            ..serde_json::from_value(json!({
                "id": "r", "workflow": "p.w", "digest": "d", "idempotency_key": null,
                "status": "waiting", "step": 0, "attempt": 0, "crashes": 0, "input": {},
                "trigger": {}, "principal": {}, "started_by": "x", "attended": true,
                "settings": {}, "concurrency_key": null, "output": null, "error": null,
                "created_at": 0, "updated_at": 0, "deadline": null, "lease": null
            }))
            .unwrap()
        };
        let alice = json!({"user_id": "alice", "role": "user"});
        let cases = [
            (
                "the starter",
                Principal::user("alice", Role::User),
                alice.clone(),
                true,
            ),
            (
                "someone else",
                Principal::user("bob", Role::Trusted),
                alice.clone(),
                false,
            ),
            (
                "the owner",
                Principal::user("local", Role::Master),
                alice,
                true,
            ),
            (
                "anonymous, of an anonymous run",
                Principal::anonymous(),
                json!({}),
                false,
            ),
        ];
        for (case, reader, started, want) in cases {
            assert_eq!(may_read(&reader, &run(started)), want, "{case}");
        }
    }
}
