//! The router: every page and action behind the checks of [`guard`], the security headers on
//! every answer, and [`serve`] with a graceful shutdown that also ends the event streams.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use tokio_util::sync::CancellationToken;

use crate::auth::{Signed, state_change_allowed};
use crate::events::Hints;
use crate::{Console, ConsoleError, assets, events, pages};

/// The address the console listens on by default (loopback only).
pub const DEFAULT_ADDR: &str = "127.0.0.1:8932";

/// The largest form read (a reason, a few fields, or one file of a package draft).
const MAX_FORM: usize = 256 << 10;

/// What every handler gets: the console, the hosts it answers to, its event hints and the
/// shutdown signal.
#[derive(Clone)]
pub(crate) struct Ctx {
    pub console: Arc<Console>,
    pub hosts: Arc<Vec<String>>,
    pub hints: Hints,
    pub shutdown: CancellationToken,
}

/// Who sent a request that passed [`guard`]: how it signed, and its CSRF token (empty for a
/// bearer token).
#[derive(Debug, Clone)]
pub(crate) struct Who {
    pub signed: Signed,
    pub csrf: String,
}

/// The console's router for a listener bound to `local`. Starts the task that turns state
/// changes into event hints (so it must be called within a Tokio runtime); it and every
/// event stream end when `shutdown` is cancelled.
pub fn router(console: Arc<Console>, local: SocketAddr, shutdown: CancellationToken) -> Router {
    let hosts = crate::security::allowed_hosts(local, &console.config.extra_hosts);
    let hints = Hints::start(console.admin.clone(), shutdown.clone());
    let ctx = Ctx {
        console,
        hosts: Arc::new(hosts),
        hints,
        shutdown,
    };
    Router::new()
        .route("/", get(pages::overview::show))
        .route(
            "/login",
            get(pages::login::show).post(pages::login::sign_in),
        )
        .route("/logout", post(pages::login::sign_out))
        .route("/approvals", get(pages::approvals::list))
        .route(
            "/approvals/{id}",
            get(pages::approvals::show).post(pages::approvals::answer),
        )
        .route(
            "/operator-cards",
            get(pages::operator_cards::list).post(pages::operator_cards::create),
        )
        .route(
            "/control",
            get(pages::control::show).post(pages::control::set),
        )
        .route("/packages", get(pages::packages::list))
        .route("/packages/{id}", get(pages::packages::show))
        .route(
            "/packages/{id}/pages/{*path}",
            get(pages::package_pages::file),
        )
        .route("/prompts", get(pages::packages::prompts))
        .route("/audit", get(pages::audit::list))
        .route("/audit/export", get(pages::audit::export))
        .route("/sessions", get(pages::sessions::list))
        .route("/runs", get(pages::sessions::runs))
        .route("/runs/{id}", get(pages::sessions::run))
        .route("/runs/{id}/cancel", post(pages::sessions::cancel))
        .route("/runs/{id}/answer", post(pages::sessions::answer))
        .route("/runs/{id}/retry", post(pages::run_ops::retry))
        .route("/runs/{id}/resolve", post(pages::run_ops::resolve))
        // Revoking an operator card; a package page's host and its message bridge.
        .route(
            "/operator-cards/{id}/revoke",
            post(pages::operator_cards::revoke),
        )
        .route("/packages/{id}/app", get(pages::bridge::host))
        .route("/packages/{id}/bridge/call", post(pages::bridge::call))
        // Charts and package authoring.
        .route("/charts", get(pages::charts::show))
        .route(
            "/drafts",
            get(pages::authoring::list).post(pages::authoring::create),
        )
        .route("/drafts/{id}", get(pages::authoring::show))
        .route("/drafts/{id}/files", post(pages::authoring::save))
        .route("/drafts/{id}/install", post(pages::authoring::install))
        .route("/events", get(events::stream))
        .route("/static/{file}", get(assets::file))
        .fallback(not_found)
        .layer(axum::middleware::from_fn_with_state(ctx.clone(), guard))
        .layer(axum::middleware::from_fn(headers))
        .with_state(ctx)
}

async fn not_found() -> ConsoleError {
    ConsoleError::NotFound("no such page".into())
}

/// Serves the console on `listener` until `shutdown` is cancelled; open event streams end
/// at once, so shutdown does not wait on open tabs.
pub async fn serve(
    console: Arc<Console>,
    listener: tokio::net::TcpListener,
    shutdown: CancellationToken,
) -> Result<(), ConsoleError> {
    let local = listener.local_addr()?;
    let app = router(console, local, shutdown.clone());
    axum::serve(listener, app)
        .with_graceful_shutdown(shutdown.cancelled_owned())
        .await?;
    Ok(())
}

/// The content security policy: scripts and styles from the console itself only, no
/// inline script, no framing, forms only to itself.
pub(crate) const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/// The usual headers on every answer.
async fn headers(request: Request, next: Next) -> Response {
    let mut response = next.run(request).await;
    let h = response.headers_mut();
    let set = |h: &mut HeaderMap, name: &'static str, value: &'static str| {
        if !h.contains_key(name) {
            h.insert(name, HeaderValue::from_static(value));
        }
    };
    set(h, "content-security-policy", CSP);
    set(h, "x-content-type-options", "nosniff");
    set(h, "x-frame-options", "DENY");
    // `same-origin`, not `no-referrer`: under `no-referrer` a browser sends `Origin: null` with
    // a form POST, and the Origin check refuses the console's own forms.
    set(h, "referrer-policy", "same-origin");
    set(h, "cross-origin-opener-policy", "same-origin");
    set(h, "cross-origin-resource-policy", "same-origin");
    set(h, "cache-control", "no-store");
    response
}

fn header_str(headers: &HeaderMap, name: header::HeaderName) -> Option<&str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// The `csrf` field of a URL-encoded form (its value is hex: no decoding needed).
fn form_field<'a>(body: &'a [u8], name: &str) -> Option<&'a str> {
    std::str::from_utf8(body).ok()?.split('&').find_map(|pair| {
        let (key, value) = pair.split_once('=')?;
        (key == name).then_some(value)
    })
}

/// Checks every request: a `Host` this console answers to (else 421), a signed-in caller
/// outside `/login` and `/static/` (else the login page, or 401 for a script), and on every
/// state change the CSRF token and `Origin` of a browser (else 403).
async fn guard(State(ctx): State<Ctx>, request: Request, next: Next) -> Response {
    let headers = request.headers();
    if headers.get_all(header::HOST).iter().count() > 1 {
        return (StatusCode::BAD_REQUEST, "more than one Host header\n").into_response();
    }
    let host = header_str(headers, header::HOST).map(str::to_owned);
    if !crate::security::host_allowed(host.as_deref(), &ctx.hosts) {
        return (
            StatusCode::MISDIRECTED_REQUEST,
            "this console does not answer to that Host (see docs/console.md: allowed hosts)\n",
        )
            .into_response();
    }
    let host = host.unwrap_or_default();
    let path = request.uri().path();
    if path == "/login" || path.starts_with("/static/") {
        return next.run(request).await;
    }
    // A package page's own CSS, scripts, images and fonts, requested by its opaque origin
    // without the cookie (see `package_pages`).
    if (request.method() == Method::GET || request.method() == Method::HEAD)
        && crate::pages::package_pages::asset_without_sign_in(path)
    {
        return next.run(request).await;
    }
    let authorization = header_str(headers, header::AUTHORIZATION);
    let signed = ctx
        .console
        .auth
        .signed(authorization, header_str(headers, header::COOKIE));
    let Some(signed) = signed else {
        let script = authorization.is_some()
            || crate::negotiate::wants_json(header_str(headers, header::ACCEPT));
        if script || request.method() != Method::GET {
            let mut response = (StatusCode::UNAUTHORIZED, "sign in to the console first (the login link `quiver serve` printed, or `Authorization: Bearer <token>`)\n").into_response();
            response.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Bearer realm=\"quiver-console\""),
            );
            return response;
        }
        return Redirect::to("/login").into_response();
    };
    let csrf = match &signed {
        Signed::Cookie(id) => ctx.console.auth.csrf(id),
        Signed::Bearer => String::new(),
    };
    let mut request = request;
    if request.method() != Method::GET && request.method() != Method::HEAD {
        let origin = header_str(request.headers(), header::ORIGIN).map(str::to_owned);
        // A package page's bridge call takes that package's bridge token, no other form does.
        let bridge = crate::pages::bridge::bridge_package(request.uri().path()).map(str::to_owned);
        let (parts, body) = request.into_parts();
        let Ok(bytes) = axum::body::to_bytes(body, MAX_FORM).await else {
            return (StatusCode::PAYLOAD_TOO_LARGE, "form too large\n").into_response();
        };
        let form_csrf = form_field(&bytes, "csrf");
        if !state_change_allowed(
            &ctx.console.secret,
            &signed,
            form_csrf,
            origin.as_deref(),
            &host,
            bridge.as_deref(),
        ) {
            tracing::warn!(origin = ?origin, "console: refused a state change without this console's CSRF token and Origin");
            return (
                StatusCode::FORBIDDEN,
                "refused: a change needs this console's own form (CSRF token and Origin)\n",
            )
                .into_response();
        }
        request = Request::from_parts(parts, Body::from(bytes));
    }
    request.extensions_mut().insert(Who { signed, csrf });
    next.run(request).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn form_fields() {
        let cases: [(&[u8], Option<&str>); 4] = [
            (b"csrf=ab12&decision=approve", Some("ab12")),
            (b"decision=approve&csrf=ab12", Some("ab12")),
            (b"xcsrf=ab12", None),
            (b"", None),
        ];
        for (body, want) in cases {
            assert_eq!(form_field(body, "csrf"), want);
        }
    }
}
