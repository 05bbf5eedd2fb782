//! The package-page bridge: how a package's own page (served sandboxed, an opaque origin that
//! can reach nothing) calls its own package's items.
//!
//! `GET /packages/{id}/app` is a console page that hosts the package's `pages/index.html` in a
//! sandboxed frame (`sandbox="allow-scripts"`, no `allow-same-origin`) and loads the console's
//! `static/bridge.js`. The page asks by `postMessage` to its parent; the bridge script takes
//! only messages from that frame (`event.source` its window, `event.origin` `"null"`), and
//! only calls, and posts each, with the package id it served and this page's **bridge
//! token**, to `POST /packages/{id}/bridge/call`. The server runs it through the runtime's
//! one call path ([`quiver_runtime::Turn::call`]: admission, consent, approval, the dangerous
//! gate, the control plane, hooks, the audit), as the console's owner, in a runtime session
//! of this sign-in and package, and answers the outcome.
//!
//! What it cannot do: name another package's item (403, nothing runs), or anything that is
//! not a call (the endpoint does one thing). The bridge token is good for this one package's
//! bridge and nothing else: an approval, the control plane or an operator card refuse it
//! (403), as the page itself can send no request at all (`connect-src 'none'`, no forms).

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use askama::Template;
use axum::extract::{Path, State};
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Form};
use quiver_catalog::Catalog;
use quiver_policy::Origin;
use quiver_runtime::{CallOutcome, CallStatus, Profile, Runtime, RuntimeError, SessionRequest};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::auth::Signed;
use crate::pages::{self, Chrome};
use crate::server::{Ctx, Who};
use crate::{Console, ConsoleError, escape_invisible};

/// The agent name of a bridge's runtime sessions (they show on the sessions page under it).
pub(crate) const BRIDGE_AGENT: &str = "console";

/// The runtime session of each bridge, by sign-in (a browser session's cookie, or `bearer`)
/// and package.
pub(crate) type BridgeSessions = Mutex<HashMap<(String, String), String>>;

/// The package of a bridge call's path (`/packages/{id}/bridge/call`, still percent-encoded),
/// or `None` for any other path.
pub(crate) fn bridge_package(path: &str) -> Option<&str> {
    let id = path
        .strip_prefix("/packages/")?
        .strip_suffix("/bridge/call")?;
    plain_name(id).then_some(id)
}

/// Whether `name` is a plain package or item name: letters, digits, `-` and `_` only.
fn plain_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

/// The qualified name of `item` when it names one of `package`'s own items by its local name;
/// else why the bridge refuses it.
pub(crate) fn own_item(catalog: &Catalog, package: &str, item: &str) -> Result<String, String> {
    if !plain_name(item) {
        return Err(format!(
            "a package page calls its own package's items by their local name (letters, digits, `-`, `_`), not `{}`",
            escape_invisible(item)
        ));
    }
    let qualified = format!("{package}.{item}");
    let found = catalog.item(&qualified).filter(|found| {
        catalog
            .packages()
            .get(found.package)
            .is_some_and(|p| !p.shadowed && p.package.id.as_str() == package)
    });
    match found {
        Some(_) => Ok(qualified),
        None => Err(format!(
            "package `{package}` has no item `{}`",
            escape_invisible(item)
        )),
    }
}

/// The package `id`, when the catalog has it with a `pages/` folder: its display name.
fn package_with_pages(ctx: &Ctx, id: &str) -> Result<String, ConsoleError> {
    ctx.console
        .runtime
        .as_ref()
        .and_then(|r| {
            let catalog = r.catalog();
            catalog
                .package(id)
                .filter(|p| p.package.pages.is_some())
                .map(|p| escape_invisible(&p.package.name))
        })
        .ok_or_else(|| {
            ConsoleError::NotFound(format!("package `{}` with pages", escape_invisible(id)))
        })
}

#[derive(Template)]
#[template(path = "package_app.html")]
struct HostPage {
    chrome: Chrome,
    id: String,
    name: String,
    bridge: String,
}

/// `GET /packages/{id}/app`: the package's page in a sandboxed frame, with the bridge.
pub(crate) async fn host(
    State(ctx): State<Ctx>,
    Extension(who): Extension<Who>,
    Path(id): Path<String>,
) -> Result<Response, ConsoleError> {
    let name = package_with_pages(&ctx, &id)?;
    let bridge = match &who.signed {
        Signed::Cookie(session) => ctx.console.auth.bridge(session, &id),
        Signed::Bearer => String::new(),
    };
    let chrome = pages::chrome(&ctx, &who).await?;
    let mut response = pages::html(&HostPage {
        chrome,
        id,
        name,
        bridge,
    })?;
    // The console's policy, and frames from itself (the package's page).
    let csp = format!("{}; frame-src 'self'", crate::server::CSP);
    let csp = HeaderValue::from_str(&csp).map_err(|e| ConsoleError::BadRequest(e.to_string()))?;
    response
        .headers_mut()
        .insert(header::CONTENT_SECURITY_POLICY, csp);
    Ok(response)
}

/// A bridge call's form: the item's local name and its arguments as a JSON object.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct BridgeCall {
    #[serde(default)]
    item: String,
    #[serde(default)]
    arguments: String,
}

/// What the bridge answers: how the call ended and what it returned (or why not).
#[derive(Debug, Serialize)]
pub(crate) struct BridgeAnswer {
    /// The call's id, as the audit names it.
    pub call: String,
    /// The item called.
    pub item: String,
    /// `ok`, `error`, `refused`, `invalid`, `unknown`, `timed_out`.
    pub status: CallStatus,
    /// Whether it ran and succeeded.
    pub ok: bool,
    /// The tool's result, or the pipeline's message.
    pub result: Value,
}

/// `POST /packages/{id}/bridge/call`: runs one of package `id`'s items for its page.
pub(crate) async fn call(
    State(ctx): State<Ctx>,
    Extension(who): Extension<Who>,
    Path(id): Path<String>,
    Form(form): Form<BridgeCall>,
) -> Result<Response, ConsoleError> {
    package_with_pages(&ctx, &id)?;
    let runtime = ctx
        .console
        .runtime
        .clone()
        .ok_or_else(|| ConsoleError::NotFound(format!("package `{id}`")))?;
    let item = form.item.trim().to_owned();
    let qualified = own_item(&runtime.catalog(), &id, &item).map_err(|why| {
        tracing::warn!(package = %id, item = %escape_invisible(&item), "console: a package page's bridge call refused");
        ConsoleError::Forbidden(why)
    })?;
    let arguments = match form.arguments.trim() {
        "" => Value::Object(serde_json::Map::new()),
        text => serde_json::from_str::<Value>(text)
            .map_err(|e| ConsoleError::BadRequest(format!("the arguments are not JSON: {e}")))?,
    };
    if !arguments.is_object() {
        return Err(ConsoleError::BadRequest(
            "the arguments must be one JSON object".into(),
        ));
    }
    let signed_in = match &who.signed {
        Signed::Cookie(session) => session.clone(),
        Signed::Bearer => "bearer".to_owned(),
    };
    let console = ctx.console.clone();
    let key = (signed_in, id);
    let outcome = tokio::task::spawn_blocking(move || {
        run_call(&console, &runtime, &key, &qualified, &arguments)
    })
    .await
    .map_err(|e| ConsoleError::Io(std::io::Error::other(e)))??;
    Ok(pages::json(&BridgeAnswer {
        call: outcome.call_id,
        item,
        ok: outcome.status == CallStatus::Ok,
        status: outcome.status,
        result: outcome.content,
    })
    .into_response())
}

/// Runs `qualified(arguments)` in the bridge session of `key`, made when there is none (or
/// it ended), as the console's owner.
fn run_call(
    console: &Console,
    runtime: &Runtime,
    key: &(String, String),
    qualified: &str,
    arguments: &Value,
) -> Result<CallOutcome, ConsoleError> {
    let owner = console.config.owner.clone();
    let sessions = &console.bridge_sessions;
    for _ in 0..2 {
        let known = sessions
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(key)
            .cloned();
        let session = match known {
            Some(session) => session,
            None => {
                let session = runtime.create_session(&SessionRequest {
                    origin: Origin::local(),
                    agent: BRIDGE_AGENT.to_owned(),
                    principal: owner.clone(),
                    profile: Profile::Interactive,
                })?;
                tracing::info!(session = %session, package = %key.1, "console: a package page's bridge session");
                sessions
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .insert(key.clone(), session.clone());
                session
            }
        };
        match runtime.begin_turn(&session, owner.clone(), "") {
            Ok(mut turn) => return Ok(turn.call(qualified, arguments.clone())?),
            // Ended or purged since: make a new one.
            Err(RuntimeError::NoSession(_)) => {
                sessions
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .remove(key);
            }
            Err(e) => return Err(e.into()),
        }
    }
    Err(ConsoleError::Conflict(
        "the bridge's session ended as it was made".into(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_bridge_calls_path_names_a_bridge() {
        let cases = [
            ("/packages/weather/bridge/call", Some("weather")),
            ("/packages/group-admin/bridge/call", Some("group-admin")),
            ("/packages/a_b/bridge/call", Some("a_b")),
            ("/packages//bridge/call", None),
            ("/packages/a%2fb/bridge/call", None),
            ("/packages/../approvals/bridge/call", None),
            ("/packages/weather/bridge/call/x", None),
            ("/packages/weather/bridge/calls", None),
            ("/packages/weather/bridge", None),
            ("/approvals/x", None),
            ("/control", None),
            ("/packages/weather/pages/bridge/call", None),
        ];
        for (path, want) in cases {
            assert_eq!(bridge_package(path), want, "{path}");
        }
    }

    #[test]
    fn a_page_calls_only_its_own_packages_items() {
        let dir = tempfile::tempdir().unwrap();
        let write = |rel: &str, text: &str| {
            let path = dir.path().join(rel);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        };
        write("weather/quiver.yaml", "id: weather\ndescription: Weather\n");
        write(
            "weather/tools/forecast/tool.yaml",
            "description: Forecast\ncategory: perception\nexpose: true\ninput: {type: object}\nrun: {command: [a]}\n",
        );
        write("notes/quiver.yaml", "id: notes\ndescription: Notes\n");
        write(
            "notes/tools/add_note/tool.yaml",
            "description: Add\ncategory: action\ninput: {type: object}\nrun: {command: [a]}\n",
        );
        let catalog = Catalog::load_dirs(&[dir.path()]);
        let cases = [
            ("weather", "forecast", Some("weather.forecast")),
            ("weather", "add_note", None),
            ("weather", "notes.add_note", None),
            ("weather", "../notes/add_note", None),
            ("weather", "weather.forecast", None),
            ("weather", "notes__add_note", None),
            ("weather", "", None),
            ("weather", "read_skill", None),
            ("notes", "add_note", Some("notes.add_note")),
            ("notes", "forecast", None),
            ("nobody", "forecast", None),
        ];
        for (package, item, want) in cases {
            assert_eq!(
                own_item(&catalog, package, item).ok().as_deref(),
                want,
                "{package} {item}"
            );
        }
    }
}
