//! `/control`: the control plane (normal, emergency stop, read-only, muted), with who set
//! it, when and why. The emergency stop is one click from every page (the frame's button).

use askama::Template;
use axum::extract::{Query, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Redirect, Response};
use axum::{Extension, Form};
use quiver_policy::ControlPlane;
use quiver_store::{AuditKind, AuditQuery};
use serde::{Deserialize, Serialize};

use crate::ConsoleError;
use crate::auth::OPERATOR;
use crate::pages::{self, Chrome};
use crate::server::{Ctx, Who};

/// The modes, as the form and `quiver control` name them.
pub(crate) const MODES: [&str; 4] = ["normal", "emergency-stop", "read-only", "muted"];

/// The control plane a mode's name sets (`None`: not a mode).
pub(crate) fn control_of(mode: &str) -> Option<ControlPlane> {
    let mut control = ControlPlane::default();
    match mode {
        "normal" => {}
        "emergency-stop" => control.emergency_stop = true,
        "read-only" => control.read_only = true,
        "muted" => control.muted = true,
        _ => return None,
    }
    Some(control)
}

/// One change of the control plane.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Change {
    pub mode: String,
    pub by: String,
    pub at: String,
    pub why: String,
}

/// The control plane and its recent changes.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct ControlView {
    pub mode: String,
    pub changes: Vec<Change>,
}

/// The mode and the last changes, newest first.
pub(crate) async fn load(ctx: &Ctx) -> Result<ControlView, ConsoleError> {
    pages::with_admin(ctx, |admin| {
        let mode = quiver_runtime::operator::control_name(admin.switches()?.control).to_owned();
        let records = admin.audit(&AuditQuery {
            session: Some(quiver_runtime::operator::OPERATOR_SESSION.into()),
            kind: Some(AuditKind::Operator),
            limit: Some(50),
            ..AuditQuery::default()
        })?;
        let changes = records
            .into_iter()
            .filter(|r| {
                r.entry
                    .decisions
                    .first()
                    .is_some_and(|d| d.decision == "control")
            })
            .take(10)
            .map(|r| {
                let detail = r.entry.detail.unwrap_or_default();
                let control: ControlPlane = detail
                    .get("control")
                    .and_then(|c| serde_json::from_value(c.clone()).ok())
                    .unwrap_or_default();
                Change {
                    mode: quiver_runtime::operator::control_name(control).to_owned(),
                    by: r.entry.principal["user_id"]
                        .as_str()
                        .unwrap_or("?")
                        .to_owned(),
                    at: pages::time_text(r.entry.time),
                    why: detail["why"].as_str().unwrap_or("").to_owned(),
                }
            })
            .collect();
        Ok(ControlView { mode, changes })
    })
    .await
}

#[derive(Template)]
#[template(path = "control.html")]
struct ControlPage {
    chrome: Chrome,
    view: ControlView,
    modes: [&'static str; 4],
}

#[derive(Template)]
#[template(path = "banner.html")]
struct BannerPart {
    chrome: Chrome,
}

/// `?part=banner`: the frame's mode banner alone.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct PartQuery {
    #[serde(default)]
    part: Option<String>,
}

/// `GET /control`.
pub(crate) async fn show(
    State(ctx): State<Ctx>,
    Extension(who): Extension<Who>,
    headers: HeaderMap,
    Query(query): Query<PartQuery>,
) -> Result<Response, ConsoleError> {
    if query.part.as_deref() == Some("banner") {
        let chrome = pages::chrome(&ctx, &who).await?;
        return pages::html(&BannerPart { chrome });
    }
    let view = load(&ctx).await?;
    if pages::wants_json(&headers) {
        return Ok(pages::json(&view));
    }
    let chrome = pages::chrome(&ctx, &who).await?;
    pages::html(&ControlPage {
        chrome,
        view,
        modes: MODES,
    })
}

/// The control form.
#[derive(Debug, Deserialize)]
pub(crate) struct SetForm {
    mode: String,
    #[serde(default)]
    reason: String,
}

/// `POST /control`: sets the mode (audited with the operator and the reason).
pub(crate) async fn set(
    State(ctx): State<Ctx>,
    headers: HeaderMap,
    Form(form): Form<SetForm>,
) -> Result<Response, ConsoleError> {
    let control = control_of(&form.mode)
        .ok_or_else(|| ConsoleError::BadRequest(format!("no mode `{}`", form.mode)))?;
    let why = form.reason.trim().to_owned();
    pages::with_admin(&ctx, move |admin| {
        let why = (!why.is_empty()).then_some(why.as_str());
        Ok(admin.set_control_because(control, OPERATOR, why)?)
    })
    .await?;
    tracing::warn!(mode = %form.mode, "console: control plane set");
    if pages::wants_json(&headers) {
        return Ok(pages::json(&load(&ctx).await?));
    }
    Ok(Redirect::to("/control").into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_round_trip() {
        for mode in MODES {
            let control = control_of(mode).unwrap_or_default();
            assert_eq!(quiver_runtime::operator::control_name(control), mode);
        }
        assert_eq!(control_of("off"), None);
    }
}
