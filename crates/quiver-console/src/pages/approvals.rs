//! `/approvals`: the pending cards, a page per card, and the answer. An answer carries the
//! digest of the arguments the person saw; a card that changed, expired or was already
//! answered gets 409 and nothing runs. A dangerous call is armed, then confirmed. There is no
//! approve-all.

use std::time::Duration;

use askama::Template;
use axum::Extension;
use axum::Form;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use quiver_runtime::approver::RETRY_CARD_TTL;
use quiver_runtime::operator::Action;
use quiver_store::{Approval, ApprovalStatus, CardQuestion, Decision};
use serde::{Deserialize, Serialize};

use crate::auth::OPERATOR;
use crate::pages::{self, Chrome};
use crate::server::{Ctx, Who};
use crate::{ConsoleError, escape_invisible};

/// A card as the console shows it.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct CardView {
    pub id: String,
    pub question: &'static str,
    pub package: String,
    pub tool: String,
    pub session: String,
    pub principal: String,
    pub origin: String,
    pub reason: String,
    pub risk_category: Option<String>,
    pub dangerous: bool,
    pub permissions: Vec<String>,
    /// The exact arguments (JSON).
    pub arguments: serde_json::Value,
    /// Their canonical JSON, invisible characters as escapes: what the person reads.
    pub arguments_shown: String,
    /// The digest of the canonical arguments, sent back with the answer.
    pub digest: String,
    pub created_at: i64,
    pub expires_at: i64,
    pub age: String,
    pub timeout: String,
    pub status: String,
    pub answered_by: Option<String>,
    pub note: Option<String>,
    #[serde(skip)]
    pub armed: bool,
}

impl CardView {
    /// Whether it still waits for an answer.
    pub fn pending(&self) -> bool {
        self.status == "pending"
    }
}

/// When the card stops being answerable: a waited-for card after the wait, a card left for
/// a retry after [`RETRY_CARD_TTL`].
pub(crate) fn deadline(approval: &Approval, wait: Duration) -> i64 {
    let ttl = if approval.card.waiter.is_some() {
        wait
    } else {
        RETRY_CARD_TTL
    };
    approval
        .card
        .created_at
        .saturating_add(i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX))
}

/// What to do with an answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Record it.
    Answer,
    /// A dangerous approval not yet confirmed: show the confirm button.
    Arm,
    /// Refuse it (409): nothing changes, nothing runs.
    Refuse(String),
}

/// Judges an answer to `approval` given with `shown_digest` at `now`, before `deadline`.
pub(crate) fn judge(
    approval: &Approval,
    shown_digest: &str,
    now: i64,
    deadline: i64,
    decision: Decision,
    confirmed: bool,
) -> Verdict {
    if approval.status != ApprovalStatus::Pending {
        return Verdict::Refuse(format!(
            "this card was already resolved ({}); nothing changed",
            approval.status
        ));
    }
    if !crate::security::same_secret(shown_digest, &digest(&approval.card.arguments)) {
        return Verdict::Refuse(
            "the arguments shown are not this card's arguments; reload and read them again".into(),
        );
    }
    if now >= deadline {
        return Verdict::Refuse("this card has expired; nothing runs".into());
    }
    if decision == Decision::Approve && approval.card.risk_category.is_some() && !confirmed {
        return Verdict::Arm;
    }
    Verdict::Answer
}

/// The digest of arguments as shown: SHA-256 of their canonical JSON.
pub(crate) fn digest(arguments: &serde_json::Value) -> String {
    quiver_store::argument_digest(arguments, &[])
}

/// Canonical JSON text of a JSON value, with invisible characters escaped.
fn shown(value: &serde_json::Value) -> String {
    escape_invisible(&quiver_store::canonical_json(value))
}

/// The view of `approval` at `now`; `who` its session's principal and origin, as stored.
pub(crate) fn view(
    approval: Approval,
    session: Option<(&serde_json::Value, &serde_json::Value)>,
    now: i64,
    wait: Duration,
) -> CardView {
    let expires_at = deadline(&approval, wait);
    let card = approval.card;
    let (principal, origin) = session.map_or_else(
        || ("(unknown)".to_owned(), "(unknown)".to_owned()),
        |(p, o)| (shown(p), shown(o)),
    );
    CardView {
        question: match card.question {
            CardQuestion::Consent => "consent",
            CardQuestion::Approval => "approval",
        },
        package: escape_invisible(&card.package),
        tool: escape_invisible(&card.tool),
        session: escape_invisible(&card.session),
        principal,
        origin,
        reason: escape_invisible(&card.reason),
        dangerous: card.risk_category.is_some(),
        risk_category: card.risk_category.map(|r| escape_invisible(&r)),
        permissions: card
            .permissions
            .iter()
            .map(|p| escape_invisible(p))
            .collect(),
        arguments_shown: shown(&card.arguments),
        digest: digest(&card.arguments),
        arguments: card.arguments,
        age: pages::duration_text((now - card.created_at) / 1000),
        timeout: if approval.status == ApprovalStatus::Pending {
            format!("in {}", pages::duration_text((expires_at - now) / 1000))
        } else {
            "-".into()
        },
        created_at: card.created_at,
        expires_at,
        id: card.id,
        status: approval.status.to_string(),
        answered_by: approval.answered_by,
        note: approval.note,
        armed: false,
    }
}

/// Loads the views of the pending cards (or of one card).
async fn load(ctx: &Ctx, one: Option<String>) -> Result<Vec<CardView>, ConsoleError> {
    let wait = ctx.console.config.approval_wait;
    pages::with_admin(ctx, move |admin| {
        let _ = admin.withdraw_orphaned_approvals();
        let approvals = match one {
            Some(id) => admin.approval(&id)?.into_iter().collect(),
            None => admin.pending_approvals(None)?,
        };
        let now = quiver_store::now_ms();
        let mut views = Vec::new();
        for approval in approvals {
            let session = admin.session(&approval.card.session)?;
            let who = session
                .as_ref()
                .map(|s| (&s.session.principal, &s.session.origin));
            views.push(view(approval, who, now, wait));
        }
        Ok(views)
    })
    .await
}

#[derive(Template)]
#[template(path = "approvals.html")]
struct ListPage {
    chrome: Chrome,
    cards: Vec<CardView>,
    runs: Vec<ParkedRun>,
    operator_cards: Vec<pages::operator_cards::OperatorCardView>,
}

/// A workflow run parked on a person's answer, linked to its own page.
#[derive(Debug, Clone)]
pub(crate) struct ParkedRun {
    pub id: String,
    pub workflow: String,
    pub question: String,
}

/// The runs parked on a person.
async fn parked(ctx: &Ctx) -> Result<Vec<ParkedRun>, ConsoleError> {
    pages::with_admin(ctx, |admin| {
        Ok(admin
            .parked_runs()?
            .into_iter()
            .map(|p| ParkedRun {
                id: escape_invisible(&p.run_id),
                workflow: escape_invisible(&p.workflow),
                question: escape_invisible(&format!(
                    "step `{}`: {}",
                    p.step_id,
                    p.title
                        .as_deref()
                        .unwrap_or("a call needs a person's approval")
                )),
            })
            .collect())
    })
    .await
}

#[derive(Template)]
#[template(path = "approvals_list.html")]
struct ListPart {
    chrome: Chrome,
    cards: Vec<CardView>,
}

#[derive(Template)]
#[template(path = "pending_count.html")]
struct CountPart {
    chrome: Chrome,
}

#[derive(Template)]
#[template(path = "approval.html")]
struct CardPage {
    chrome: Chrome,
    card: CardView,
}

#[derive(Template)]
#[template(path = "card.html")]
struct CardPart {
    chrome: Chrome,
    card: CardView,
}

#[derive(Template)]
#[template(path = "conflict.html")]
struct ConflictPart {
    id: String,
    why: String,
}

/// The conflict as a whole page, for a form posted without JavaScript.
#[derive(Template)]
#[template(path = "conflict_page.html")]
struct ConflictPage {
    chrome: Chrome,
    id: String,
    why: String,
}

/// A page's query: `part=list` (the cards) or `part=count` (the frame's count) for the
/// fragments htmx re-fetches.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct PartQuery {
    #[serde(default)]
    part: Option<String>,
}

/// `GET /approvals`.
pub(crate) async fn list(
    State(ctx): State<Ctx>,
    Extension(who): Extension<Who>,
    headers: HeaderMap,
    Query(query): Query<PartQuery>,
) -> Result<Response, ConsoleError> {
    if query.part.as_deref() == Some("count") {
        let chrome = pages::chrome(&ctx, &who).await?;
        return pages::html(&CountPart { chrome });
    }
    let cards = load(&ctx, None).await?;
    if pages::wants_json(&headers) {
        return Ok(pages::json(&cards));
    }
    let chrome = pages::chrome(&ctx, &who).await?;
    if query.part.as_deref() == Some("list") {
        return pages::html(&ListPart { chrome, cards });
    }
    let runs = parked(&ctx).await?;
    let operator_cards = pages::operator_cards::load(&ctx).await?;
    pages::html(&ListPage {
        chrome,
        cards,
        runs,
        operator_cards,
    })
}

/// `GET /approvals/{id}`: the card's own page (the link other fronts give).
pub(crate) async fn show(
    State(ctx): State<Ctx>,
    Extension(who): Extension<Who>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Result<Response, ConsoleError> {
    let card = load(&ctx, Some(id.clone()))
        .await?
        .pop()
        .ok_or_else(|| ConsoleError::NotFound(format!("approval `{id}`")))?;
    if pages::wants_json(&headers) {
        return Ok(pages::json(&card));
    }
    let chrome = pages::chrome(&ctx, &who).await?;
    pages::html(&CardPage { chrome, card })
}

/// An answer's form.
#[derive(Debug, Deserialize)]
pub(crate) struct AnswerForm {
    decision: String,
    digest: String,
    #[serde(default)]
    reason: String,
    #[serde(default)]
    confirm: Option<String>,
}

/// `POST /approvals/{id}`: approve or deny, with a reason.
pub(crate) async fn answer(
    State(ctx): State<Ctx>,
    Extension(who): Extension<Who>,
    headers: HeaderMap,
    Path(id): Path<String>,
    Form(form): Form<AnswerForm>,
) -> Result<Response, ConsoleError> {
    let decision = match form.decision.as_str() {
        "approve" => Decision::Approve,
        "deny" => Decision::Deny,
        other => {
            return Err(ConsoleError::BadRequest(format!(
                "decision must be `approve` or `deny`, not `{other}`"
            )));
        }
    };
    let confirmed = form.confirm.as_deref() == Some("yes");
    let reason = form.reason.trim().to_owned();
    let wait = ctx.console.config.approval_wait;
    let lookup = id.clone();
    let outcome = pages::with_admin(&ctx, move |admin| {
        let approval = admin
            .approval(&lookup)?
            .ok_or_else(|| ConsoleError::NotFound(format!("approval `{lookup}`")))?;
        let verdict = judge(
            &approval,
            &form.digest,
            quiver_store::now_ms(),
            deadline(&approval, wait),
            decision,
            confirmed,
        );
        if verdict != Verdict::Answer {
            return Ok(verdict);
        }
        let note = (!reason.is_empty()).then_some(reason.as_str());
        // Durable (committed) before the reply; a second answer loses here.
        match admin.answer_approval(&lookup, decision, OPERATOR, note) {
            Ok(answered) => {
                admin.record(
                    Action::Answer {
                        card: &lookup,
                        session: &answered.card.session,
                        decision,
                        note,
                    },
                    OPERATOR,
                )?;
                Ok(Verdict::Answer)
            }
            Err(quiver_runtime::RuntimeError::Store(
                quiver_store::StoreError::AlreadyAnswered { status, .. },
            )) => Ok(Verdict::Refuse(format!(
                "this card was already resolved ({status}); nothing changed"
            ))),
            Err(e) => Err(e.into()),
        }
    })
    .await?;
    let json = pages::wants_json(&headers);
    let htmx = pages::from_htmx(&headers);
    match outcome {
        Verdict::Refuse(why) if json => Ok((
            StatusCode::CONFLICT,
            pages::json(&serde_json::json!({"id": id, "error": why})),
        )
            .into_response()),
        Verdict::Refuse(why) if htmx => {
            let page = pages::html(&ConflictPart { id, why })?;
            Ok((StatusCode::CONFLICT, page).into_response())
        }
        Verdict::Refuse(why) => {
            let chrome = pages::chrome(&ctx, &who).await?;
            let page = pages::html(&ConflictPage { chrome, id, why })?;
            Ok((StatusCode::CONFLICT, page).into_response())
        }
        Verdict::Arm | Verdict::Answer => {
            let mut card = load(&ctx, Some(id.clone()))
                .await?
                .pop()
                .ok_or_else(|| ConsoleError::NotFound(format!("approval `{id}`")))?;
            card.armed = outcome == Verdict::Arm;
            let status = if card.armed {
                StatusCode::ACCEPTED
            } else {
                StatusCode::OK
            };
            if json {
                let mut value = serde_json::to_value(&card).unwrap_or_default();
                if let serde_json::Value::Object(map) = &mut value {
                    map.insert("armed".into(), card.armed.into());
                }
                return Ok((status, pages::json(&value)).into_response());
            }
            let chrome = pages::chrome(&ctx, &who).await?;
            if htmx {
                return Ok((status, pages::html(&CardPart { chrome, card })?).into_response());
            }
            if card.armed {
                return Ok((status, pages::html(&CardPage { chrome, card })?).into_response());
            }
            Ok(Redirect::to(&format!("/approvals/{id}")).into_response())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use quiver_store::ApprovalCard;
    use serde_json::json;

    fn approval(status: ApprovalStatus, risk: Option<&str>, waiter: bool) -> Approval {
        Approval {
            card: ApprovalCard {
                id: "apr-1".into(),
                session: "s".into(),
                package: "p".into(),
                tool: "p.t".into(),
                arguments: json!({"text": "hi\u{202e}"}),
                reason: "r".into(),
                risk_category: risk.map(str::to_owned),
                created_at: 1_000,
                permissions: vec![],
                waiter: waiter.then(|| "w".to_owned()),
                question: CardQuestion::Approval,
            },
            status,
            answered_by: None,
            answered_at: None,
            note: None,
        }
    }

    #[test]
    fn answers_are_judged() {
        let good = digest(&json!({"text": "hi\u{202e}"}));
        let stale = digest(&json!({"text": "hi"}));
        let pending = approval(ApprovalStatus::Pending, None, true);
        let dangerous = approval(ApprovalStatus::Pending, Some("member"), true);
        let done = approval(ApprovalStatus::Approved, None, true);
        let class = |v: &Verdict| match v {
            Verdict::Answer => "answer",
            Verdict::Arm => "arm",
            Verdict::Refuse(_) => "refuse",
        };
        let cases = [
            (&pending, &good, 2_000, Decision::Approve, false, "answer"),
            (&pending, &good, 2_000, Decision::Deny, false, "answer"),
            (&pending, &stale, 2_000, Decision::Approve, false, "refuse"),
            (
                &pending,
                &String::new(),
                2_000,
                Decision::Deny,
                false,
                "refuse",
            ),
            (&pending, &good, 9_000, Decision::Approve, false, "refuse"),
            (&done, &good, 2_000, Decision::Deny, false, "refuse"),
            (&dangerous, &good, 2_000, Decision::Approve, false, "arm"),
            (&dangerous, &good, 2_000, Decision::Approve, true, "answer"),
            (&dangerous, &good, 2_000, Decision::Deny, false, "answer"),
            (&dangerous, &stale, 2_000, Decision::Approve, true, "refuse"),
        ];
        for (i, (a, shown, now, decision, confirmed, want)) in cases.into_iter().enumerate() {
            let wait = Duration::from_secs(5);
            let verdict = judge(a, shown, now, deadline(a, wait), decision, confirmed);
            assert_eq!(class(&verdict), want, "case {i}: {verdict:?}");
        }
    }

    #[test]
    fn deadlines() {
        let waited = approval(ApprovalStatus::Pending, None, true);
        let retried = approval(ApprovalStatus::Pending, None, false);
        assert_eq!(deadline(&waited, Duration::from_secs(5)), 6_000);
        assert_eq!(
            deadline(&retried, Duration::from_secs(5)),
            1_000 + i64::try_from(RETRY_CARD_TTL.as_millis()).unwrap_or(0)
        );
    }

    #[test]
    fn a_card_shows_escaped_canonical_arguments() {
        let card = view(
            approval(ApprovalStatus::Pending, Some("member"), true),
            None,
            3_500,
            Duration::from_secs(5),
        );
        assert_eq!(card.arguments_shown, r#"{"text":"hi\u202e"}"#);
        assert!(card.dangerous);
        assert_eq!(card.age, "2 s");
        assert_eq!(card.timeout, "in 2 s");
        assert_eq!(card.digest, digest(&json!({"text": "hi\u{202e}"})));
    }
}
