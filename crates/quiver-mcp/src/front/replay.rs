//! What a resumed call answered, stored under its request state's nonce so a retry with the
//! same state (on any instance sharing the database) gets the same answer back instead of
//! running the call again (docs/mcp.md "Retrying an answer").

use quiver_runtime::approver::{Card, Question};
use quiver_runtime::{CallOutcome, CallStatus};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::questions::{Link, PendingQuestion};
use super::{CallResult, FrontError};

/// A stored answer.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "answered", rename_all = "snake_case")]
pub(super) enum Stored {
    /// The call ended: what the wire shows of its outcome.
    Done {
        call_id: String,
        status: CallStatus,
        content: Value,
        handle: String,
    },
    /// The call asked a further question: the question as the client received it.
    Asks {
        consent: bool,
        session: String,
        package: String,
        tool: String,
        arguments: Value,
        needs_person: bool,
        message: String,
        state: String,
        /// The card's id and console page, when the question was a URL-mode link.
        #[serde(default)]
        link: Option<(String, String)>,
    },
    /// The front failed.
    Failed { error: String },
}

impl Stored {
    /// What to store for `result`.
    pub(super) fn of(result: &Result<CallResult, FrontError>) -> Stored {
        match result {
            Ok(CallResult::Done {
                outcome, handle, ..
            }) => Stored::Done {
                call_id: outcome.call_id.clone(),
                status: outcome.status,
                content: outcome.content.clone(),
                handle: handle.clone(),
            },
            Ok(CallResult::NeedsInput(q)) => Stored::Asks {
                consent: q.card.question == Question::Consent,
                session: q.card.session.clone(),
                package: q.card.package.clone(),
                tool: q.card.tool.clone(),
                arguments: q.card.arguments.clone(),
                needs_person: q.card.needs_person,
                message: q.message.clone(),
                state: q.state.clone(),
                link: q.link.as_ref().map(|l| (l.id.clone(), l.url.clone())),
            },
            // Replayed as [`FrontError::Interrupted`], which says so itself.
            Err(FrontError::Interrupted(why)) => Stored::Failed { error: why.clone() },
            Err(error) => Stored::Failed {
                error: error.to_string(),
            },
        }
    }

    /// The stored answer again, marked replayed.
    pub(super) fn replay(self) -> Result<CallResult, FrontError> {
        match self {
            Stored::Done {
                call_id,
                status,
                content,
                handle,
            } => Ok(CallResult::Done {
                outcome: CallOutcome {
                    call_id,
                    status,
                    content,
                    cached: false,
                    kind: None,
                    refusal: None,
                    trimmed: None,
                    decisions: Vec::new(),
                },
                handle,
                replayed: true,
            }),
            Stored::Asks {
                consent,
                session,
                package,
                tool,
                arguments,
                needs_person,
                message,
                state,
                link,
            } => Ok(CallResult::NeedsInput(PendingQuestion {
                card: Card {
                    question: if consent {
                        Question::Consent
                    } else {
                        Question::Approval
                    },
                    session,
                    package,
                    tool,
                    arguments,
                    reasons: Vec::new(),
                    risk_categories: Vec::new(),
                    needs_person,
                    permissions: Vec::new(),
                },
                message,
                state,
                link: link.map(|(id, url)| Link { id, url }),
            })),
            Stored::Failed { error } => Err(FrontError::Interrupted(error)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn each_answer_round_trips_through_its_stored_form() {
        let outcome = CallOutcome {
            call_id: "c1".into(),
            status: CallStatus::Ok,
            content: json!({"sent": true}),
            cached: false,
            kind: None,
            refusal: None,
            trimmed: None,
            decisions: Vec::new(),
        };
        let card = Card {
            question: Question::Approval,
            session: "s".into(),
            package: "mail".into(),
            tool: "mail.send".into(),
            arguments: json!({"to": "a"}),
            reasons: Vec::new(),
            risk_categories: Vec::new(),
            needs_person: true,
            permissions: Vec::new(),
        };
        let cases: Vec<Result<CallResult, FrontError>> = vec![
            Ok(CallResult::Done {
                outcome,
                handle: "h".into(),
                replayed: false,
            }),
            Ok(CallResult::NeedsInput(PendingQuestion {
                card: card.clone(),
                message: "Run?".into(),
                state: "sealed".into(),
                link: None,
            })),
            Ok(CallResult::NeedsInput(PendingQuestion {
                card,
                message: "Open the page".into(),
                state: "sealed-link".into(),
                link: Some(Link {
                    id: "apr-1".into(),
                    url: "http://127.0.0.1:8932/approvals/apr-1".into(),
                }),
            })),
            Err(FrontError::Interrupted("gone".into())),
        ];
        for case in cases {
            let stored = serde_json::to_value(Stored::of(&case)).unwrap();
            let back: Stored = serde_json::from_value(stored).unwrap();
            match (case, back.replay()) {
                (
                    Ok(CallResult::Done {
                        outcome, handle, ..
                    }),
                    Ok(CallResult::Done {
                        outcome: o,
                        handle: h,
                        replayed,
                    }),
                ) => {
                    assert!(replayed);
                    assert_eq!(
                        (outcome.call_id, outcome.status, outcome.content, handle),
                        (o.call_id, o.status, o.content, h)
                    );
                }
                (Ok(CallResult::NeedsInput(q)), Ok(CallResult::NeedsInput(r))) => {
                    let link = |l: Option<Link>| l.map(|l| (l.id, l.url));
                    assert_eq!(
                        (
                            q.card.needs_person,
                            q.card.tool,
                            q.message,
                            q.state,
                            link(q.link)
                        ),
                        (
                            r.card.needs_person,
                            r.card.tool,
                            r.message,
                            r.state,
                            link(r.link)
                        )
                    );
                }
                (Err(e), Err(r)) => assert_eq!(e.to_string(), r.to_string()),
                (case, back) => panic!("{case:?} came back as {back:?}"),
            }
        }
    }
}
