//! `get_run`, the front's fourth meta-tool: an MCP client reads a workflow run that calling an
//! exposed workflow started (`call_tool` answered `{run_id, status}` because the run waits),
//! and later its output. Only the user who started the run, or the owner (role `master`),
//! reads it; to anyone else (an anonymous caller included) it does not exist.

use quiver_package::rules::Role;
use quiver_store::workflow::{Run, Wait, WaitKind, WaitStatus};
use serde_json::{Value, json};

use crate::front::{Caller, Front, ToolSpec};

/// The meta-tool's name.
pub const GET_RUN: &str = "get_run";

/// `get_run` in the tool list.
pub fn spec() -> ToolSpec {
    ToolSpec {
        name: GET_RUN.into(),
        description: "Read a workflow run that a call started: when calling a workflow (a tool marked `(SOP)`) returned `{run_id, status}` because the run waits (for an approval, a timer, an event), pass that `run_id` to see its status, what it waits for, and its output once it has completed.".into(),
        input_schema: json!({"type": "object", "properties": {
            "run_id": {"type": "string", "description": "the `run_id` a call returned"},
        }, "required": ["run_id"]}),
        output_schema: None,
        read_only: true,
        destructive: false,
    }
}

/// Whether `caller` may read `run`: the same known user who started it, or the owner.
fn may_read(caller: &Caller, run: &Run) -> bool {
    let principal = &caller.principal;
    if principal.effective_role() == Some(Role::Master) {
        return true;
    }
    let started = run.principal.get("user_id").and_then(Value::as_str);
    principal.user_id.is_some() && principal.user_id.as_deref() == started
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

impl Front {
    /// `get_run`: the run's status, what it waits for, and its output or error; `Err` with the
    /// text the model reads when there is no run this caller may read.
    pub fn get_run(&self, caller: &Caller, arguments: &Value) -> Result<Value, String> {
        let Some(id) = arguments.get("run_id").and_then(Value::as_str) else {
            return Err("`get_run` needs `run_id`: the `run_id` a call returned".into());
        };
        let Some(store) = self.runtime().workflow_store() else {
            return Err("this server runs no workflows".into());
        };
        let missing = || format!("no run `{id}` that you may read");
        let run = match store.run(id) {
            Ok(Some(run)) if may_read(caller, &run) => run,
            Ok(_) => return Err(missing()),
            Err(e) => return Err(format!("cannot read run `{id}`: {e}")),
        };
        let waits = store
            .waits(id)
            .map_err(|e| format!("cannot read run `{id}`: {e}"))?;
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
        Ok(out)
    }
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
}
