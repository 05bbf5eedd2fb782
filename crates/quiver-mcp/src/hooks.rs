//! Webhooks beside MCP on `quiver serve --http`: `POST /hooks/<pkg>/<name>` starts a run of
//! the workflow of `<pkg>` whose trigger is `webhook: {name, secret}`. The request's
//! authentication is the HMAC-SHA256 of `<timestamp>.<Idempotency-Key>.<body>` under the
//! secret setting, in `X-Quiver-Signature: sha256=<hex>`, with `X-Quiver-Timestamp` within
//! the replay window; it needs no bearer token. `Idempotency-Key` makes a delivery once.
//! Answers: `202 {"run_id", "status", "duplicate"}` once the run row is committed; `401` for
//! a missing, repeated, stale or wrong signature; `404` for no such hook; `413` for a body
//! over [`MAX_HOOK_BODY`]; `400` for a body that is not a JSON object or does not fit the
//! workflow's input. The logic is the runtime's ([`quiver_runtime::Runtime::deliver_webhook`]).

use std::sync::Arc;

use axum::Router;
use axum::extract::{Path, Request, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use quiver_runtime::{Delivery, HookError, SIGNATURE_HEADER, TIMESTAMP_HEADER};
use serde_json::json;

use crate::front::Front;

/// The route of webhooks.
pub const HOOKS_PATH: &str = "/hooks/{package}/{name}";

/// The largest webhook body read.
pub const MAX_HOOK_BODY: usize = 1 << 20;

/// The header that deduplicates deliveries.
pub const IDEMPOTENCY_HEADER: &str = "idempotency-key";

/// The router serving [`HOOKS_PATH`].
pub fn router(front: Arc<Front>) -> Router {
    Router::new()
        .route(HOOKS_PATH, post(deliver))
        .with_state(front)
}

fn answer(status: StatusCode, body: serde_json::Value) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

async fn deliver(
    State(front): State<Arc<Front>>,
    Path((package, name)): Path<(String, String)>,
    request: Request,
) -> Response {
    let too_large = || {
        answer(
            StatusCode::PAYLOAD_TOO_LARGE,
            json!({"error": format!("the body is larger than {MAX_HOOK_BODY} bytes")}),
        )
    };
    let (parts, body) = request.into_parts();
    let declared = parts
        .headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    if declared.is_some_and(|n| n > MAX_HOOK_BODY) {
        return too_large();
    }
    let Ok(body) = axum::body::to_bytes(body, MAX_HOOK_BODY).await else {
        return too_large();
    };
    let text = |name: &str| {
        parts
            .headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    // Every value of a header, so a second signature is refused rather than ignored.
    let every = |name: &str| -> Vec<String> {
        parts
            .headers
            .get_all(name)
            .iter()
            .map(|v| v.to_str().unwrap_or_default().to_owned())
            .collect()
    };
    let (signatures, timestamps) = (every(SIGNATURE_HEADER), every(TIMESTAMP_HEADER));
    let key = text(IDEMPOTENCY_HEADER);
    let runtime = front.runtime().clone();
    let delivered = tokio::task::spawn_blocking(move || {
        let signatures: Vec<&str> = signatures.iter().map(String::as_str).collect();
        let timestamps: Vec<&str> = timestamps.iter().map(String::as_str).collect();
        runtime.deliver_webhook(&Delivery {
            package: &package,
            name: &name,
            signatures: &signatures,
            timestamps: &timestamps,
            key: key.as_deref(),
            body: &body,
        })
    })
    .await;
    match delivered {
        Ok(Ok((run, created))) => answer(
            StatusCode::ACCEPTED,
            json!({"run_id": run.id, "status": run.status.as_str(), "duplicate": !created}),
        ),
        Ok(Err(error)) => {
            let status = match &error {
                HookError::NoHook(_) => StatusCode::NOT_FOUND,
                HookError::BadSignature(_) => StatusCode::UNAUTHORIZED,
                HookError::BadInput(_) => StatusCode::BAD_REQUEST,
                HookError::Failed(_) => StatusCode::INTERNAL_SERVER_ERROR,
            };
            answer(status, json!({"error": error.to_string()}))
        }
        Err(error) => answer(
            StatusCode::INTERNAL_SERVER_ERROR,
            json!({"error": format!("the delivery was interrupted: {error}")}),
        ),
    }
}
