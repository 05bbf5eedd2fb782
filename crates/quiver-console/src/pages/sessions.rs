//! `/sessions` and `/runs`: the active sessions with what they hold, and the workflow runs
//! with their steps' attempts and what each waits for.

use askama::Template;
use axum::Extension;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use quiver_store::workflow::RunFilter;
use quiver_store::{SessionFilter, SessionStatus};
use serde::Serialize;

use crate::pages::{self, Chrome};
use crate::server::{Ctx, Who};
use crate::{ConsoleError, escape_invisible};

/// A session, as the page shows it.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct SessionRow {
    pub id: String,
    pub agent: String,
    pub principal: String,
    pub updated: String,
    pub active_skills: Vec<String>,
    pub opened_packages: Vec<String>,
    pub loaded_tools: Vec<String>,
    pub consents: Vec<String>,
    pub pending: usize,
}

#[derive(Template)]
#[template(path = "sessions.html")]
struct SessionsPage {
    chrome: Chrome,
    sessions: Vec<SessionRow>,
}

/// `GET /sessions`: the active sessions, most recently used first.
pub(crate) async fn list(
    State(ctx): State<Ctx>,
    Extension(who): Extension<Who>,
    headers: HeaderMap,
) -> Result<Response, ConsoleError> {
    let sessions = pages::with_admin(&ctx, |admin| {
        let listed = admin.sessions(&SessionFilter {
            status: SessionStatus::Active,
            limit: Some(200),
            ..SessionFilter::default()
        })?;
        let mut rows = Vec::new();
        for session in listed {
            let Some(view) = admin.session(&session.id)? else {
                continue;
            };
            let pending = admin.pending_approvals(Some(&session.id))?.len();
            let esc = |v: &[String]| v.iter().map(|s| escape_invisible(s)).collect::<Vec<_>>();
            rows.push(SessionRow {
                id: escape_invisible(&session.id),
                agent: escape_invisible(&session.agent),
                principal: escape_invisible(&quiver_store::canonical_json(&session.principal)),
                updated: pages::time_text(session.updated_at),
                active_skills: esc(&view.active_skills),
                opened_packages: esc(&view.opened_packages),
                loaded_tools: esc(&view.loaded_tools),
                consents: view
                    .consents
                    .iter()
                    .map(|c| {
                        escape_invisible(&format!(
                            "{}: {}",
                            c.package,
                            if c.granted { "granted" } else { "refused" }
                        ))
                    })
                    .collect(),
                pending,
            });
        }
        Ok(rows)
    })
    .await?;
    if pages::wants_json(&headers) {
        return Ok(pages::json(&sessions));
    }
    let chrome = pages::chrome(&ctx, &who).await?;
    pages::html(&SessionsPage { chrome, sessions })
}

/// A workflow run, as the page shows it.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct RunRow {
    pub id: String,
    pub workflow: String,
    pub status: String,
    pub created: String,
}

#[derive(Template)]
#[template(path = "runs.html")]
struct RunsPage {
    chrome: Chrome,
    runs: Vec<RunRow>,
}

/// `GET /runs`: the workflow runs, newest first.
pub(crate) async fn runs(
    State(ctx): State<Ctx>,
    Extension(who): Extension<Who>,
    headers: HeaderMap,
) -> Result<Response, ConsoleError> {
    let runs = pages::with_admin(&ctx, |admin| {
        Ok(admin
            .runs(&RunFilter {
                limit: Some(200),
                ..RunFilter::default()
            })?
            .into_iter()
            .map(|run| RunRow {
                id: escape_invisible(&run.id),
                workflow: escape_invisible(&run.workflow),
                status: run.status.to_string(),
                created: pages::time_text(run.created_at),
            })
            .collect())
    })
    .await?;
    if pages::wants_json(&headers) {
        return Ok(pages::json(&runs));
    }
    let chrome = pages::chrome(&ctx, &who).await?;
    pages::html(&RunsPage { chrome, runs })
}

/// A step's attempt, as the run's page shows it.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct AttemptRow {
    pub step: String,
    pub attempt: i64,
    pub status: String,
    pub started: String,
    pub error: String,
}

/// What a run waited or waits for.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct WaitRow {
    pub step: i64,
    pub kind: String,
    pub status: String,
    pub detail: String,
    pub resolved_by: String,
}

/// A run with its attempts and waits.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct RunDetail {
    pub run: RunRow,
    /// Whether it has not ended (it can be cancelled).
    pub open: bool,
    /// Whether it is in doubt (an operator retries or resolves it).
    pub in_doubt: bool,
    /// What it waits for a person to answer, when it is parked on one.
    pub question: Option<String>,
    /// The package digests it pins that this instance has not loaded, when it has not ended
    /// (`an instance that has loaded p@sha256:…`): only an instance that has them drives it.
    pub waiting_for: Option<String>,
    pub error: String,
    pub attempts: Vec<AttemptRow>,
    pub waits: Vec<WaitRow>,
}

#[derive(Template)]
#[template(path = "run.html")]
struct RunPage {
    chrome: Chrome,
    view: RunDetail,
}

/// `GET /runs/{id}`: a run's steps, their attempts, and what it waits for (a run parked on a
/// person is answered with `quiver approvals approve run-...`).
pub(crate) async fn run(
    State(ctx): State<Ctx>,
    Extension(who): Extension<Who>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Result<Response, ConsoleError> {
    let lookup = id.clone();
    let runtime = ctx.console.runtime.clone();
    let view = pages::with_admin(&ctx, move |admin| {
        let Some(found) = admin.run(&lookup)? else {
            return Err(ConsoleError::NotFound(format!("run `{lookup}`")));
        };
        let waiting_for = match &runtime {
            Some(runtime) if !found.run.status.is_final() => {
                quiver_runtime::RunOps::new(runtime)
                    .and_then(|ops| ops.waiting_for(&lookup))
                    .unwrap_or_else(|error| {
                        tracing::warn!(run = %lookup, %error, "cannot tell which package digests the run waits for");
                        None
                    })
                    .map(|note| escape_invisible(&note))
            }
            _ => None,
        };
        let question = admin
            .parked_runs()?
            .into_iter()
            .find(|p| p.run_id == lookup)
            .map(|p| {
                escape_invisible(&format!(
                    "step `{}`: {}",
                    p.step_id,
                    p.title
                        .as_deref()
                        .unwrap_or("a call needs a person's approval")
                ))
            });
        Ok(RunDetail {
            run: RunRow {
                id: escape_invisible(&found.run.id),
                workflow: escape_invisible(&found.run.workflow),
                status: found.run.status.to_string(),
                created: pages::time_text(found.run.created_at),
            },
            open: !found.run.status.is_final(),
            in_doubt: found.run.status == quiver_store::workflow::RunStatus::InDoubt,
            question,
            waiting_for,
            error: escape_invisible(found.run.error.as_deref().unwrap_or("")),
            attempts: found
                .attempts
                .iter()
                .map(|a| AttemptRow {
                    step: escape_invisible(&a.step_id),
                    attempt: a.attempt,
                    status: a.status.to_string(),
                    started: pages::time_text(a.started_at),
                    error: escape_invisible(a.error.as_deref().unwrap_or("")),
                })
                .collect(),
            waits: found
                .waits
                .iter()
                .map(|w| WaitRow {
                    step: w.step,
                    kind: w.kind.to_string(),
                    status: w.status.to_string(),
                    detail: escape_invisible(&quiver_store::canonical_json(&w.detail)),
                    resolved_by: escape_invisible(w.resolved_by.as_deref().unwrap_or("")),
                })
                .collect(),
        })
    })
    .await?;
    if pages::wants_json(&headers) {
        return Ok(pages::json(&view));
    }
    let chrome = pages::chrome(&ctx, &who).await?;
    pages::html(&RunPage { chrome, view })
}

/// `POST /runs/{id}/cancel`: cancels a run that has not ended (its waits withdrawn, its
/// step's process killed, its cards expired; audited with the operator); 409 when it ended.
pub(crate) async fn cancel(
    State(ctx): State<Ctx>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Result<Response, ConsoleError> {
    let runtime = ctx
        .console
        .runtime
        .clone()
        .ok_or_else(|| ConsoleError::NotFound(format!("run `{id}`")))?;
    let run_id = id.clone();
    let cancelled = tokio::task::spawn_blocking(move || {
        quiver_runtime::RunOps::new(&runtime)?.cancel(&run_id, crate::auth::OPERATOR)
    })
    .await
    .map_err(|e| ConsoleError::Io(std::io::Error::other(e)))?;
    let cancelled = match cancelled {
        Ok(cancelled) => cancelled,
        Err(quiver_runtime::RunError::NoRun(_) | quiver_runtime::RunError::NoEngine) => {
            return Err(ConsoleError::NotFound(format!("run `{id}`")));
        }
        Err(e) => return Err(ConsoleError::Conflict(e.to_string())),
    };
    if pages::wants_json(&headers) {
        return Ok(pages::json(&cancelled));
    }
    Ok(axum::response::Redirect::to(&format!("/runs/{id}")).into_response())
}

/// A run's answer form.
#[derive(Debug, serde::Deserialize)]
pub(crate) struct RunAnswer {
    decision: String,
    #[serde(default)]
    reason: String,
}

/// `POST /runs/{id}/answer`: approve or deny the question a run is parked on, as the local
/// owner (the run's rules on who may answer apply); the run is driven on. 409 when it is not
/// parked or the owner may not answer it.
pub(crate) async fn answer(
    State(ctx): State<Ctx>,
    headers: HeaderMap,
    Path(id): Path<String>,
    axum::Form(form): axum::Form<RunAnswer>,
) -> Result<Response, ConsoleError> {
    let approve = match form.decision.as_str() {
        "approve" => true,
        "deny" => false,
        other => {
            return Err(ConsoleError::BadRequest(format!(
                "decision must be `approve` or `deny`, not `{other}`"
            )));
        }
    };
    let runtime = ctx
        .console
        .runtime
        .clone()
        .ok_or_else(|| ConsoleError::NotFound(format!("run `{id}`")))?;
    let owner = ctx.console.config.owner.clone();
    let (run_id, reason) = (id.clone(), form.reason.trim().to_owned());
    let answered = tokio::task::spawn_blocking(move || {
        let answerer = quiver_runtime::Answerer {
            principal: &owner,
            authenticated: true,
        };
        let note = (!reason.is_empty()).then_some(reason.as_str());
        quiver_runtime::RunOps::new(&runtime)?.answer(&run_id, approve, &answerer, note)
    })
    .await
    .map_err(|e| ConsoleError::Io(std::io::Error::other(e)))?;
    let run = match answered {
        Ok(run) => run,
        Err(quiver_runtime::RunError::NoRun(_) | quiver_runtime::RunError::NoEngine) => {
            return Err(ConsoleError::NotFound(format!("run `{id}`")));
        }
        Err(e) => return Err(ConsoleError::Conflict(e.to_string())),
    };
    if pages::wants_json(&headers) {
        return Ok(pages::json(&run));
    }
    Ok(axum::response::Redirect::to(&format!("/runs/{id}")).into_response())
}
