//! `/`: the overview: the control plane's mode, the pending cards, packages with load
//! errors, active sessions and recent refusals.

use askama::Template;
use axum::Extension;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::Response;
use quiver_store::{AuditQuery, AuditStatus, SessionFilter, SessionStatus};
use serde::Serialize;

use crate::ConsoleError;
use crate::pages::{self, Chrome};
use crate::server::{Ctx, Who};

/// A refused call, in the overview.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Refusal {
    pub at: String,
    pub tool: String,
    pub session: String,
    pub why: String,
}

/// What the overview shows.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Overview {
    pub mode: String,
    pub pending: usize,
    pub packages: usize,
    pub packages_with_errors: Vec<String>,
    pub active_sessions: usize,
    pub refusals: Vec<Refusal>,
}

#[derive(Template)]
#[template(path = "overview.html")]
struct OverviewPage {
    chrome: Chrome,
    view: Overview,
}

/// `GET /`.
pub(crate) async fn show(
    State(ctx): State<Ctx>,
    Extension(who): Extension<Who>,
    headers: HeaderMap,
) -> Result<Response, ConsoleError> {
    let (packages, packages_with_errors) = super::packages::error_summary(&ctx);
    let view = pages::with_admin(&ctx, move |admin| {
        let mode = quiver_runtime::operator::control_name(admin.switches()?.control).to_owned();
        let pending = admin.pending_approvals(None)?.len();
        let active_sessions = admin
            .sessions(&SessionFilter {
                status: SessionStatus::Active,
                ..SessionFilter::default()
            })?
            .len();
        let refusals = admin
            .audit(&AuditQuery {
                limit: Some(200),
                ..AuditQuery::default()
            })?
            .into_iter()
            .filter(|r| r.entry.status == AuditStatus::Refused)
            .take(10)
            .map(|r| Refusal {
                at: pages::time_text(r.entry.time),
                tool: crate::escape_invisible(r.entry.tool.as_deref().unwrap_or("-")),
                session: crate::escape_invisible(&r.entry.session),
                why: crate::escape_invisible(
                    &r.entry
                        .decisions
                        .last()
                        .map(|d| d.reason.clone())
                        .unwrap_or_default(),
                ),
            })
            .collect();
        Ok(Overview {
            mode,
            pending,
            packages,
            packages_with_errors,
            active_sessions,
            refusals,
        })
    })
    .await?;
    if pages::wants_json(&headers) {
        return Ok(pages::json(&view));
    }
    let chrome = pages::chrome(&ctx, &who).await?;
    pages::html(&OverviewPage { chrome, view })
}
