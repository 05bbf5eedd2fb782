//! Consent and approval questions asked through elicitation: who may answer them, the sealed
//! request state a client returns with its answer, and the messages of a card.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use quiver_runtime::approver::{Answer, Approver, Card, Question};
use quiver_store::{ApprovalCard, CardQuestion, Spend};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::replay::Stored;
use super::{CallRequest, CallResult, Caller, Front, FrontError};

pub(super) const REQUEST_STATE: &str = "request-state";
/// How long a pending question's `requestState` stays valid, in seconds.
pub(super) const REQUEST_STATE_TTL: u64 = 15 * 60;
/// How much longer than its state a spent nonce is remembered, in seconds: room for the
/// instances' clocks (which check a state's expiry) to differ from the store's (which prunes).
const SPENT_STATE_MARGIN: u64 = 5 * 60;

/// How this request can reach the person.
#[derive(Clone)]
pub enum Asker {
    /// Ask now and wait (2025-11-25 elicitation: a request to the client in the middle of
    /// the call).
    Now(Arc<dyn Approver>),
    /// Return the question to the client and go on when its retry brings the answer
    /// (2026-07-28 `input_required` with a sealed `requestState`); the call waits meanwhile.
    Deferred,
    /// The client cannot ask: the card is left in the console's queue and the call answered
    /// at once with where a person answers it.
    Console,
    /// The client shows the card's console page (URL-mode elicitation) and the call waits for
    /// the person's answer there.
    Link(Arc<dyn super::LinkShower>),
    /// The card's console page is returned in `input_required` (URL-mode elicitation,
    /// 2026-07-28), and the client's retry looks at the card again; the call waits meanwhile.
    DeferredLink,
}

/// The client's reply to a question it was returned in `input_required`, as its elicitation
/// result says it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Response {
    /// `accept`, with the form's `decision` choice when it sent one (a link sends none: the
    /// person went to the page).
    Accept(Option<String>),
    /// `decline`.
    Decline,
    /// `cancel` (dismissed).
    Cancel,
}

impl Response {
    /// The decision this reply to a form stands for: an accepted form without a valid
    /// choice is not a yes.
    pub fn decision(&self) -> Decision {
        match self {
            Response::Accept(choice) => choice
                .as_deref()
                .and_then(Decision::from_choice)
                .unwrap_or(Decision::Deny),
            Response::Decline => Decision::Deny,
            Response::Cancel => Decision::Cancel,
        }
    }

    /// Whether the person went to the page of a link (URL mode): `accept`.
    pub fn opened(&self) -> bool {
        matches!(self, Response::Accept(_))
    }
}

/// The user's answer to an elicited question.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    /// Accept: "allow once".
    AllowOnce,
    /// Accept: "allow for this conversation".
    AllowConversation,
    /// Accept with "deny", or the client's `decline`.
    Deny,
    /// The client's `cancel`: dismissed; nothing is recorded, the call does not run.
    Cancel,
}

impl Decision {
    /// The runtime's answer for this choice to `card`. A card that needs a person (the
    /// dangerous gate, `human`) offers only "allow once" and "deny": "allow for this
    /// conversation", not one of its choices, is no yes.
    pub(crate) fn answer_to(self, card: &Card) -> Answer {
        if card.needs_person && self == Decision::AllowConversation {
            return Answer::Deny;
        }
        self.answer()
    }

    /// The runtime's answer for this choice.
    pub(super) fn answer(self) -> Answer {
        match self {
            Decision::AllowOnce => Answer::Allow,
            Decision::AllowConversation => Answer::AllowForSession,
            Decision::Deny => Answer::Deny,
            Decision::Cancel => Answer::Unanswered,
        }
    }

    /// The form's choice values, in order.
    pub const CHOICES: [(&'static str, &'static str); 3] = [
        ("allow_once", "Allow once"),
        ("allow_conversation", "Allow for this conversation"),
        ("deny", "Deny"),
    ];

    /// Parses a form choice.
    pub fn from_choice(choice: &str) -> Option<Decision> {
        match choice {
            "allow_once" => Some(Decision::AllowOnce),
            "allow_conversation" => Some(Decision::AllowConversation),
            "deny" => Some(Decision::Deny),
            _ => None,
        }
    }
}

/// A question waiting for the person, as sealed into `requestState`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct CardKey {
    pub(super) consent: bool,
    pub(super) package: String,
    pub(super) tool: String,
}

impl CardKey {
    pub(super) fn of(card: &Card) -> CardKey {
        CardKey {
            consent: card.question == Question::Consent,
            package: card.package.clone(),
            tool: card.tool.clone(),
        }
    }
}

#[derive(Debug, Serialize, Deserialize)]
pub(super) struct PendingState {
    /// Session.
    pub(super) s: String,
    /// User id of the caller.
    pub(super) u: Option<String>,
    /// Tool name as called.
    pub(super) t: String,
    /// Digest of the arguments.
    pub(super) a: String,
    /// Answers given so far.
    pub(super) done: Vec<(CardKey, Decision)>,
    /// The question being asked.
    pub(super) ask: CardKey,
    /// The console card a link question (URL mode) shows, by its id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) c: Option<String>,
    /// One-time nonce.
    pub(super) n: String,
}

/// A question asked through the page of its card in the console (URL mode).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Link {
    /// The card's id.
    pub id: String,
    /// The card's page in the console.
    pub url: String,
}

/// A question for the person.
#[derive(Debug, Clone)]
pub struct PendingQuestion {
    /// The card.
    pub card: Card,
    /// The message to show.
    pub message: String,
    /// The sealed state to echo back.
    pub state: String,
    /// Where the person answers it, when it is asked through the console's page of its card
    /// (URL mode) rather than a form.
    pub link: Option<Link>,
}

pub(super) fn now_nanos() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos())
}

pub(super) fn digest(value: &Value) -> String {
    let canonical = quiver_store::canonical_json(value);
    let hash = Sha256::digest(canonical.as_bytes());
    hash.iter().map(|b| format!("{b:02x}")).collect()
}

pub(super) fn nonce() -> String {
    // Unique per process and time; unguessability is not needed (the state is sealed).
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let t = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("{t:x}-{n:x}-{:x}", std::process::id())
}

/// The message a form shows for a card.
pub fn card_message(card: &Card) -> String {
    let what = match card.question {
        Question::Consent => format!(
            "Allow the assistant to use the package `{}` in this conversation? (first use: `{}`)",
            card.package, card.tool
        ),
        Question::Approval => format!("Run `{}`?", card.tool),
    };
    let mut text = format!(
        "{what}\narguments: {}\nwhy: {}\n{}",
        card.arguments,
        card.reasons.join("; "),
        quiver_runtime::approver::permissions_text(card, "")
    );
    if !card.risk_categories.is_empty() {
        text.push_str(&format!("\nrisk: {}", card.risk_categories.join(", ")));
    }
    if card.needs_person {
        text.push_str("\nThis needs your own approval for this one call.");
    }
    text
}

/// What a client that cannot show questions reads when `name` waits for a person's answer to
/// `card`: what is needed, where to answer it (the card's page in the console at `console`
/// when it runs, and the exact command), and that the same call retried runs once it is
/// answered. One message for every such question.
pub(super) fn waiting_for_a_person(
    name: &str,
    card: &ApprovalCard,
    console: Option<&str>,
) -> Value {
    let what = match card.question {
        CardQuestion::Consent => format!(
            "the user's consent to use the package `{}` in this conversation",
            card.package
        ),
        CardQuestion::Approval => format!(
            "the user's approval to run `{}` with these arguments",
            card.tool
        ),
    };
    let minutes = quiver_runtime::approver::RETRY_CARD_TTL.as_secs() / 60;
    let id = &card.id;
    let page = console.map(|url| super::links::card_page(url, id));
    let where_ = match &page {
        Some(page) => format!(
            "in the Quiver console at {page} (or from a terminal: `quiver approvals approve {id}` or `quiver approvals deny {id}`)"
        ),
        None => {
            format!("in Quiver: `quiver approvals approve {id}` (or `quiver approvals deny {id}`)")
        }
    };
    let mut waiting = json!({
        "approval": card.id,
        "question": card.question,
        "package": card.package,
        "tool": card.tool,
        "answer_with": format!("quiver approvals approve {id}"),
    });
    if let (Some(page), Value::Object(map)) = (page, &mut waiting) {
        map.insert("answer_at".into(), Value::String(page));
    }
    json!({
        "error": format!(
            "`{name}` has not run: it needs {what}, and this MCP client cannot show questions. Ask the user to answer it {where_}. Once they have, call `{name}` again with the same arguments in this conversation: it then runs. The question stays open for {minutes} minutes.",
        ),
        "waiting_for": waiting,
    })
}

impl Front {
    /// Opens a resumed call's sealed state and checks it belongs to `caller` and this call.
    pub(super) fn open_state(
        &self,
        caller: &Caller,
        sealed: &str,
        request: &CallRequest,
        args_digest: &str,
    ) -> Result<PendingState, FrontError> {
        let state: PendingState = self
            .sealer
            .open(REQUEST_STATE, sealed)
            .map_err(|e| FrontError::BadRequestState(e.to_string()))?;
        if state.u != caller.principal.user_id || state.t != request.name || state.a != args_digest
        {
            return Err(FrontError::BadRequestState(
                "it belongs to another call or conversation".into(),
            ));
        }
        Ok(state)
    }

    /// Spends a state's one-time nonce in the store, which every instance on the database
    /// shares: `None` when this request is the first (it resumes the call); else the answer
    /// that call stored, replayed, or [`FrontError::StillRunning`] while it has none.
    pub(super) fn spend(&self, state: &PendingState) -> Result<Option<CallResult>, FrontError> {
        let keep = Duration::from_secs(REQUEST_STATE_TTL + SPENT_STATE_MARGIN);
        match self.runtime.spend_request_state(&state.n, keep)? {
            Spend::First => Ok(None),
            Spend::Running => Err(FrontError::StillRunning),
            Spend::Finished(stored) => {
                let stored: Stored = serde_json::from_value(stored).map_err(|e| {
                    FrontError::Interrupted(format!("the stored answer is unreadable: {e}"))
                })?;
                stored.replay().map(Some)
            }
        }
    }

    /// Stores the answer of the call that spent `nonce`, for a retry of its request to replay.
    /// A failure to store it is logged: the caller has its answer already.
    pub(super) fn keep_answer(&self, nonce: &str, result: &Result<CallResult, FrontError>) {
        let stored = match serde_json::to_value(Stored::of(result)) {
            Ok(stored) => stored,
            Err(error) => {
                tracing::warn!(%error, "cannot encode a resumed call's answer");
                return;
            }
        };
        if let Err(error) = self.runtime.finish_request_state(nonce, &stored) {
            tracing::warn!(%error, "cannot store a resumed call's answer for its retry");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_waiting_question_links_to_its_console_page_when_the_console_runs() {
        let card = ApprovalCard {
            id: "apr-1".into(),
            session: "s".into(),
            package: "notes".into(),
            tool: "notes.add_note".into(),
            arguments: json!({}),
            reason: String::new(),
            risk_category: None,
            created_at: 0,
            permissions: vec![],
            waiter: None,
            question: CardQuestion::Approval,
        };
        let cases = [
            (None, None),
            (
                Some("http://127.0.0.1:8932"),
                Some("http://127.0.0.1:8932/approvals/apr-1"),
            ),
            (
                Some("http://127.0.0.1:8932/"),
                Some("http://127.0.0.1:8932/approvals/apr-1"),
            ),
        ];
        for (console, page) in cases {
            let message = waiting_for_a_person("notes__add_note", &card, console);
            let text = message["error"].as_str().unwrap_or_default();
            assert!(text.contains("quiver approvals approve apr-1"), "{text}");
            assert_eq!(message["waiting_for"]["answer_at"].as_str(), page);
            if let Some(page) = page {
                assert!(text.contains(page), "{text}");
            }
        }
    }
}
