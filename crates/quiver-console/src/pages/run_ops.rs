//! `POST /runs/{id}/retry` and `POST /runs/{id}/resolve`: an operator moves on a run left in
//! doubt (its step found started without a result, after a crash), through the same
//! [`quiver_runtime::RunOps`] as `quiver runs retry|resolve`. Exactly once: the settle is a
//! conditional write, so a second answer, or one to a run not in doubt, gets 409. Audited with
//! the operator.

use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Redirect, Response};
use quiver_runtime::{RunError, RunOps};
use quiver_store::workflow::Run;
use serde::Deserialize;
use serde_json::Value;

use crate::ConsoleError;
use crate::auth::OPERATOR;
use crate::pages;
use crate::server::Ctx;

/// How a run in doubt is resolved.
#[derive(Debug, PartialEq)]
pub(crate) enum Verdict {
    /// The step did happen: done, with its output.
    Done(Value),
    /// The step did not happen or must not count: the run fails, for this reason.
    Fail(String),
}

/// The resolve form.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct ResolveForm {
    #[serde(default)]
    verdict: String,
    #[serde(default)]
    output: String,
    #[serde(default)]
    reason: String,
}

/// Checks the resolve form: `verdict=done` with `output` as JSON, or `verdict=fail` with an
/// optional reason.
pub(crate) fn verdict(form: &ResolveForm) -> Result<Verdict, String> {
    match form.verdict.as_str() {
        "done" => serde_json::from_str(form.output.trim())
            .map(Verdict::Done)
            .map_err(|e| format!("the step's output is not JSON: {e}")),
        "fail" => Ok(Verdict::Fail(match form.reason.trim() {
            "" => "resolved as failed".to_owned(),
            why => why.to_owned(),
        })),
        other => Err(format!("verdict must be `done` or `fail`, not `{other}`")),
    }
}

/// Runs `op` on the runtime's run operations off the async threads; a refusal is 409.
async fn settle(
    ctx: &Ctx,
    id: &str,
    op: impl FnOnce(&RunOps<'_>) -> Result<Run, RunError> + Send + 'static,
) -> Result<Run, ConsoleError> {
    let runtime = ctx
        .console
        .runtime
        .clone()
        .ok_or_else(|| ConsoleError::NotFound(format!("run `{id}`")))?;
    let settled = tokio::task::spawn_blocking(move || op(&RunOps::new(&runtime)?))
        .await
        .map_err(|e| ConsoleError::Io(std::io::Error::other(e)))?;
    match settled {
        Ok(run) => Ok(run),
        Err(RunError::NoRun(_) | RunError::NoEngine) => {
            Err(ConsoleError::NotFound(format!("run `{id}`")))
        }
        Err(e) => Err(ConsoleError::Conflict(e.to_string())),
    }
}

fn answered(headers: &HeaderMap, run: &Run) -> Response {
    if pages::wants_json(headers) {
        return pages::json(run);
    }
    Redirect::to(&format!("/runs/{}", run.id)).into_response()
}

/// `POST /runs/{id}/retry`: runs the step in doubt again, then drives the run on.
pub(crate) async fn retry(
    State(ctx): State<Ctx>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Result<Response, ConsoleError> {
    let run_id = id.clone();
    let run = settle(&ctx, &id, move |ops| ops.retry(&run_id, OPERATOR)).await?;
    tracing::warn!(run = %id, "console: run in doubt retried");
    Ok(answered(&headers, &run))
}

/// `POST /runs/{id}/resolve`: takes the step in doubt as done (`verdict=done`, `output`) or
/// fails the run (`verdict=fail`, `reason`).
pub(crate) async fn resolve(
    State(ctx): State<Ctx>,
    headers: HeaderMap,
    Path(id): Path<String>,
    axum::Form(form): axum::Form<ResolveForm>,
) -> Result<Response, ConsoleError> {
    let verdict = verdict(&form).map_err(ConsoleError::BadRequest)?;
    let run_id = id.clone();
    let run = settle(&ctx, &id, move |ops| match verdict {
        Verdict::Done(output) => ops.done(&run_id, output, OPERATOR),
        Verdict::Fail(why) => ops.fail(&run_id, &why, OPERATOR),
    })
    .await?;
    tracing::warn!(run = %id, status = %run.status, "console: run in doubt resolved");
    Ok(answered(&headers, &run))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn resolve_forms_are_checked() {
        let form = |verdict: &str, output: &str, reason: &str| ResolveForm {
            verdict: verdict.into(),
            output: output.into(),
            reason: reason.into(),
        };
        let cases = [
            (
                form("done", r#"{"paid":true}"#, ""),
                Some(Verdict::Done(json!({"paid": true}))),
            ),
            (form("done", " null ", ""), Some(Verdict::Done(Value::Null))),
            (form("done", "", ""), None),
            (form("done", "{", ""), None),
            (
                form("fail", "", ""),
                Some(Verdict::Fail("resolved as failed".into())),
            ),
            (
                form("fail", "", " never paid "),
                Some(Verdict::Fail("never paid".into())),
            ),
            (form("retry", "", ""), None),
            (form("", "", ""), None),
        ];
        for (i, (form, want)) in cases.into_iter().enumerate() {
            assert_eq!(verdict(&form).ok(), want, "case {i}");
        }
    }
}
