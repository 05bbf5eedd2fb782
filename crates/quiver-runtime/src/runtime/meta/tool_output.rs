//! `tool_output(call, offset)`: pages through a result that was trimmed (`has_more`), kept in
//! the session's stored state, so a later process of the same session reads it too.

use serde_json::{Value, json};

use super::text_arg;
use crate::output::page;
use crate::runtime::{CallOutcome, CallStatus, RuntimeError, Turn};

/// Characters per page of `tool_output`.
const PAGE_CHARS: usize = 4000;

impl Turn<'_> {
    /// Runs `tool_output`.
    pub(in crate::runtime) fn tool_output(
        &self,
        call_id: &str,
        arguments: &Value,
    ) -> Result<CallOutcome, RuntimeError> {
        let call = text_arg(arguments, "call").unwrap_or_default();
        let offset = arguments
            .get("offset")
            .and_then(Value::as_u64)
            .and_then(|o| usize::try_from(o).ok())
            .unwrap_or(0);
        Ok(match self.runtime.kept_output(&self.session, &call)? {
            Some(text) => {
                let p = page(&text, offset, PAGE_CHARS);
                CallOutcome::new(
                    call_id,
                    CallStatus::Ok,
                    json!({"text": p.text, "has_more": p.next_offset.is_some(), "next_offset": p.next_offset, "total_chars": p.total_chars}),
                )
            }
            None => CallOutcome::new(
                call_id,
                CallStatus::Error,
                json!({"error": format!("no trimmed output for call `{call}` in this session")}),
            ),
        })
    }
}
