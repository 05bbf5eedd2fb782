//! `ask_user(question)`: asks the person in the conversation and returns the answer (never
//! offered to an unattended turn).

use serde_json::{Value, json};

use super::text_arg;
use crate::runtime::{CallOutcome, CallStatus, Turn};

impl Turn<'_> {
    /// Runs `ask_user`.
    pub(in crate::runtime) fn ask_user(&self, call_id: &str, arguments: &Value) -> CallOutcome {
        let question = text_arg(arguments, "question").unwrap_or_default();
        match self.person().and_then(|p| p.answer_question(&question)) {
            Some(answer) => CallOutcome::new(call_id, CallStatus::Ok, json!({"answer": answer})),
            None => CallOutcome::new(
                call_id,
                CallStatus::Error,
                json!({"error": "nobody answered; continue without the answer or end the turn"}),
            ),
        }
    }
}
