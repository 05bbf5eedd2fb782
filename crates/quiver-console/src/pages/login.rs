//! `/login` and `/logout`: the login token (the link `quiver serve` printed) exchanged for an
//! `HttpOnly; SameSite=Strict` cookie, by a form posted from the console's own page.

use askama::Template;
use axum::Form;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use quiver_runtime::operator::Action;
use serde::Deserialize;

use crate::auth::{OPERATOR, cleared_cookie, session_cookie};
use crate::server::{Ctx, Who};
use crate::{ConsoleError, pages};

#[derive(Template)]
#[template(path = "login.html")]
struct LoginPage {
    token: String,
    error: Option<String>,
}

/// The login link's query.
#[derive(Debug, Deserialize)]
pub(crate) struct LoginQuery {
    #[serde(default)]
    token: String,
}

/// `GET /login[?token=...]`: the sign-in form, filled with the link's token. A GET never
/// signs in (a prefetch must not), the button posts it.
pub(crate) async fn show(Query(query): Query<LoginQuery>) -> Result<Response, ConsoleError> {
    pages::html(&LoginPage {
        token: query.token,
        error: None,
    })
}

/// The sign-in form.
#[derive(Debug, Deserialize)]
pub(crate) struct SignIn {
    token: String,
}

/// `POST /login`: the token for a cookie (the form must come from this console's own page).
pub(crate) async fn sign_in(
    State(ctx): State<Ctx>,
    headers: HeaderMap,
    Form(form): Form<SignIn>,
) -> Result<Response, ConsoleError> {
    let host = headers
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let origin = headers.get(header::ORIGIN).and_then(|v| v.to_str().ok());
    if !crate::security::origin_matches(origin, host) {
        return Ok((
            StatusCode::FORBIDDEN,
            "refused: sign in from the console's own login page\n",
        )
            .into_response());
    }
    if !ctx.console.auth.is_token(&form.token) {
        let page = LoginPage {
            token: String::new(),
            error: Some("That is not this console's token.".into()),
        };
        return Ok((StatusCode::UNAUTHORIZED, pages::html(&page)?).into_response());
    }
    let id = URL_SAFE_NO_PAD.encode(crate::console::random_bytes()?);
    let cookie = session_cookie(&ctx.console.auth.open_session(id));
    pages::with_admin(&ctx, |admin| Ok(admin.record(Action::SignIn, OPERATOR)?)).await?;
    Ok(([(header::SET_COOKIE, cookie)], Redirect::to("/")).into_response())
}

/// `POST /logout`.
pub(crate) async fn sign_out(
    State(ctx): State<Ctx>,
    axum::Extension(who): axum::Extension<Who>,
) -> Response {
    if let crate::auth::Signed::Cookie(id) = &who.signed {
        ctx.console.auth.close_session(id);
    }
    (
        [(header::SET_COOKIE, cleared_cookie())],
        Redirect::to("/login"),
    )
        .into_response()
}
