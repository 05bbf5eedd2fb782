//! `/operator-cards`: a person approves ahead one exact call (a tool, its canonical arguments,
//! optionally one session), used once by the approval step before it expires (at most
//! fifteen minutes), unless a person revokes it first. Made from the form on the approvals
//! page; listed there with who made each, which call used it, and who revoked it.

use std::time::Duration;

use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Redirect, Response};
use axum::{Extension, Form};
use quiver_runtime::admin::OPERATOR_CARD_MAX_TTL;
use quiver_store::OperatorCard;
use serde::{Deserialize, Serialize};

use crate::auth::OPERATOR;
use crate::pages;
use crate::server::{Ctx, Who};
use crate::{ConsoleError, escape_invisible};

/// An operator card as the console shows it.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct OperatorCardView {
    pub id: String,
    pub tool: String,
    /// The canonical arguments, invisible characters as escapes.
    pub arguments_shown: String,
    /// The one session it is for, or `any`.
    pub session: String,
    pub created_by: String,
    pub expires: String,
    /// `live`, `used`, `revoked` or `expired`.
    pub state: &'static str,
    /// The call that used it (`call … in session …`), if any.
    pub used_by: Option<String>,
    /// Who revoked it and when, if anyone did.
    pub revoked_by: Option<String>,
}

/// The view of `card` at `now`.
pub(crate) fn view(card: OperatorCard, now: i64) -> OperatorCardView {
    let state = card.state(now).as_str();
    let used_by = card.used_at.map(|_| {
        escape_invisible(&format!(
            "call `{}` in session `{}`",
            card.used_call.as_deref().unwrap_or("?"),
            card.used_session.as_deref().unwrap_or("?")
        ))
    });
    OperatorCardView {
        tool: escape_invisible(&card.tool),
        arguments_shown: escape_invisible(&quiver_store::canonical_json(&card.arguments)),
        session: card
            .session
            .as_deref()
            .map_or_else(|| "any".to_owned(), escape_invisible),
        created_by: escape_invisible(&card.created_by),
        revoked_by: card.revoked_at.map(|at| {
            escape_invisible(&format!(
                "{} at {}",
                card.revoked_by.as_deref().unwrap_or("?"),
                pages::time_text(at)
            ))
        }),
        expires: match state {
            "live" => format!(
                "in {}",
                pages::duration_text((card.expires_at - now) / 1000)
            ),
            _ => pages::time_text(card.expires_at),
        },
        state,
        used_by,
        id: card.id,
    }
}

/// The cards to list: live ones and those ended in the last hour, newest first.
pub(crate) async fn load(ctx: &Ctx) -> Result<Vec<OperatorCardView>, ConsoleError> {
    pages::with_admin(ctx, |admin| {
        let now = quiver_store::now_ms();
        Ok(admin
            .operator_cards()?
            .into_iter()
            .map(|c| view(c, now))
            .collect())
    })
    .await
}

/// The form that makes a card.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct CardForm {
    #[serde(default)]
    tool: String,
    #[serde(default)]
    arguments: String,
    #[serde(default)]
    session: String,
    #[serde(default)]
    minutes: String,
}

/// A card the form asks for, checked.
#[derive(Debug, PartialEq)]
pub(crate) struct Wanted {
    pub tool: String,
    pub arguments: serde_json::Value,
    pub session: Option<String>,
    pub ttl: Duration,
}

/// Checks the form: a tool named `<package>.<tool>`, arguments as one JSON object, an optional
/// session, and a lifetime in whole minutes from 1 to 15 (5 when left empty).
pub(crate) fn wanted(form: &CardForm) -> Result<Wanted, String> {
    let tool = form.tool.trim();
    if tool.is_empty() || !tool.contains('.') || tool.chars().any(char::is_whitespace) {
        return Err("name the tool as `<package>.<tool>`".into());
    }
    let arguments: serde_json::Value = serde_json::from_str(form.arguments.trim())
        .map_err(|e| format!("the arguments are not JSON: {e}"))?;
    if !arguments.is_object() {
        return Err("the arguments must be one JSON object".into());
    }
    let max = OPERATOR_CARD_MAX_TTL.as_secs() / 60;
    let minutes = match form.minutes.trim() {
        "" => 5,
        text => text
            .parse::<u64>()
            .ok()
            .filter(|m| (1..=max).contains(m))
            .ok_or_else(|| format!("the card lives 1 to {max} minutes"))?,
    };
    let session = form.session.trim();
    Ok(Wanted {
        tool: tool.to_owned(),
        arguments,
        session: (!session.is_empty()).then(|| session.to_owned()),
        ttl: Duration::from_secs(minutes * 60),
    })
}

/// `GET /operator-cards`: the cards as JSON (the approvals page lists them for a browser).
pub(crate) async fn list(State(ctx): State<Ctx>) -> Result<Response, ConsoleError> {
    Ok(pages::json(&load(&ctx).await?))
}

/// `POST /operator-cards`: makes a card (audited with the operator). The tool must be one the
/// catalog knows.
pub(crate) async fn create(
    State(ctx): State<Ctx>,
    Extension(_who): Extension<Who>,
    headers: HeaderMap,
    Form(form): Form<CardForm>,
) -> Result<Response, ConsoleError> {
    let wanted = wanted(&form).map_err(ConsoleError::BadRequest)?;
    if let Some(runtime) = &ctx.console.runtime
        && runtime.catalog().item(&wanted.tool).is_none()
    {
        return Err(ConsoleError::BadRequest(format!(
            "no tool `{}` in the catalog",
            escape_invisible(&wanted.tool)
        )));
    }
    let card = pages::with_admin(&ctx, move |admin| {
        Ok(admin.create_operator_card(
            &wanted.tool,
            &wanted.arguments,
            wanted.session.as_deref(),
            wanted.ttl,
            OPERATOR,
        )?)
    })
    .await?;
    tracing::warn!(card = %card.id, tool = %card.tool, "console: operator card made");
    if pages::wants_json(&headers) {
        return Ok(pages::json(&view(card, quiver_store::now_ms())));
    }
    Ok(Redirect::to("/approvals#operator-cards").into_response())
}

/// `POST /operator-cards/{id}/revoke`: revokes a live card before it expires (audited with
/// the operator); it then matches no call. 409 when it was already used, revoked or expired;
/// 404 when there is no such card.
pub(crate) async fn revoke(
    State(ctx): State<Ctx>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Result<Response, ConsoleError> {
    let card_id = id.clone();
    let revoked = pages::with_admin(&ctx, move |admin| {
        match admin.revoke_operator_card(&card_id, OPERATOR) {
            Ok(card) => Ok(card),
            Err(quiver_runtime::RuntimeError::Store(quiver_store::StoreError::NotFound {
                ..
            })) => Err(ConsoleError::NotFound(format!(
                "operator card `{}`",
                escape_invisible(&card_id)
            ))),
            Err(quiver_runtime::RuntimeError::Store(quiver_store::StoreError::Conflict(why))) => {
                Err(ConsoleError::Conflict(why))
            }
            Err(e) => Err(e.into()),
        }
    })
    .await?;
    tracing::warn!(card = %revoked.id, tool = %revoked.tool, "console: operator card revoked");
    if pages::wants_json(&headers) {
        return Ok(pages::json(&view(revoked, quiver_store::now_ms())));
    }
    Ok(Redirect::to("/approvals#operator-cards").into_response())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn form(tool: &str, arguments: &str, session: &str, minutes: &str) -> CardForm {
        CardForm {
            tool: tool.into(),
            arguments: arguments.into(),
            session: session.into(),
            minutes: minutes.into(),
        }
    }

    #[test]
    fn forms_are_checked() {
        let ok = |tool: &str, args, session: Option<&str>, mins: u64| {
            Ok(Wanted {
                tool: tool.into(),
                arguments: args,
                session: session.map(str::to_owned),
                ttl: Duration::from_secs(mins * 60),
            })
        };
        let cases = [
            (
                form("a.b", r#"{"u":1}"#, "", ""),
                ok("a.b", json!({"u": 1}), None, 5),
            ),
            (
                form(" a.b ", "{}", " s1 ", "15"),
                ok("a.b", json!({}), Some("s1"), 15),
            ),
            (form("a.b", "{}", "", "1"), ok("a.b", json!({}), None, 1)),
            (form("a.b", "{}", "", "16"), Err(String::new())),
            (form("a.b", "{}", "", "0"), Err(String::new())),
            (form("a.b", "{}", "", "-1"), Err(String::new())),
            (form("ab", "{}", "", ""), Err(String::new())),
            (form("a. b", "{}", "", ""), Err(String::new())),
            (form("", "{}", "", ""), Err(String::new())),
            (form("a.b", "[1]", "", ""), Err(String::new())),
            (form("a.b", "{", "", ""), Err(String::new())),
        ];
        for (i, (form, want)) in cases.into_iter().enumerate() {
            let got = wanted(&form);
            match want {
                Ok(want) => assert_eq!(got, Ok(want), "case {i}"),
                Err(_) => assert!(got.is_err(), "case {i}: {got:?}"),
            }
        }
    }

    #[test]
    fn a_card_says_whether_it_is_live_used_or_expired() {
        let card = OperatorCard {
            id: "opc-1".into(),
            tool: "p.t".into(),
            arguments: json!({"b": "\u{202e}", "a": 1}),
            session: None,
            created_by: "operator".into(),
            created_at: 0,
            expires_at: 60_000,
            used_at: None,
            used_session: None,
            used_call: None,
            revoked_at: None,
            revoked_by: None,
        };
        let live = view(card.clone(), 1_000);
        assert_eq!(
            (live.state, live.expires.as_str(), live.session.as_str()),
            ("live", "in 59 s", "any")
        );
        assert_eq!(live.arguments_shown, r#"{"a":1,"b":"\u202e"}"#);
        assert_eq!(view(card.clone(), 60_000).state, "expired");
        let used = OperatorCard {
            used_at: Some(500),
            used_session: Some("s1".into()),
            used_call: Some("c1".into()),
            ..card.clone()
        };
        let used = view(used, 1_000);
        assert_eq!(used.state, "used");
        assert_eq!(used.used_by.as_deref(), Some("call `c1` in session `s1`"));
        let revoked = OperatorCard {
            revoked_at: Some(500),
            revoked_by: Some("console:owner".into()),
            ..card
        };
        let revoked = view(revoked, 1_000);
        assert_eq!(revoked.state, "revoked");
        assert_eq!(
            revoked.revoked_by.as_deref(),
            Some("console:owner at 1970-01-01 00:00:00Z")
        );
    }
}
