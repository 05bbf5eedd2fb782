//! The attacks of issue 25 that need a browser to be believed, run in the one browser of
//! [`super::the_console_in_a_browser`]: a stale digest, an operator card made and used, a
//! prompt section's canary and a secret setting on no page, a same-site form from another
//! origin, a DNS-rebinding host, and a shutdown with open tabs.

use std::time::{Duration, Instant};

use fantoccini::{Client, Locator};
use quiver_runtime::CallStatus;
use quiver_store::{ApprovalStatus, Decision};
use serde_json::json;

use super::{Driver, Served, appears, click, console_log, decided, text_of};
use crate::suite::harness::{CANARY, SECRET_SETTING};

/// The host the browser resolves to 127.0.0.1 (`--host-resolver-rules`), as a rebinding
/// attacker's name would after its DNS answer changed.
pub(super) const REBINDING_HOST: &str = "rebind.quiver.test";

/// The cases that leave the console serving, in the normal mode; the log they fill is read
/// and checked here, so the caller's later checks start clean.
pub(super) async fn attacks(s: &Served, driver: &Driver, client: &Client) {
    let base = &s.base;
    stale_digest(s, client).await;
    operator_card(s, client).await;
    nothing_secret_on_any_page(s, client).await;
    cross_origin_form(s, client).await;

    // DNS rebinding: the page's origin is the attacker's name, which the Host allowlist
    // refuses with 421 on every path, signed in or not.
    let port = s.addr.port();
    for path in ["/", "/approvals", "/login", "/static/htmx.min.js"] {
        client
            .goto(&format!("http://{REBINDING_HOST}:{port}{path}"))
            .await
            .unwrap();
        let body = text_of(client, "body").await;
        assert!(
            body.contains("does not answer to that Host"),
            "{path}: {body}"
        );
    }
    let _ = console_log(driver, client).await;
    client.goto(&format!("{base}/")).await.unwrap();
}

/// A decision whose digest is not the one of the arguments on the card (the page was edited,
/// or the card changed under it) gets 409 and decides nothing; the right one then does.
async fn stale_digest(s: &Served, client: &Client) {
    let session = s.session(&["notes"]);
    let call = s.call(&session, "notes__add_note", json!({"text": "stale digest"}));
    let id = s.pending(1).await.remove(0).card.id;
    client
        .goto(&format!("{}/approvals/{id}", s.base))
        .await
        .unwrap();
    appears(client, &format!("#card-{id}"), Duration::from_secs(5)).await;
    client
        .execute(
            "document.querySelectorAll('input[name=digest]').forEach(i => i.value = 'sha256:' + '0'.repeat(64)); return true;",
            vec![],
        )
        .await
        .unwrap();
    click(client, &format!("#card-{id} button.approve")).await;
    appears(
        client,
        &format!("#card-{id}[data-status=conflict]"),
        Duration::from_secs(5),
    )
    .await;
    assert_eq!(
        s.admin.approval(&id).unwrap().unwrap().status,
        ApprovalStatus::Pending,
        "a stale digest decided the card"
    );
    let before = s.calls.lock().unwrap().len();
    // A fresh load (not a reload, which may restore the edited field).
    client
        .goto(&format!("{}/approvals/{id}", s.base))
        .await
        .unwrap();
    appears(client, &format!("#card-{id}"), Duration::from_secs(5)).await;
    click(client, &format!("#card-{id} button.deny")).await;
    decided(s, &id).await;
    let outcome = tokio::task::spawn_blocking(move || call.join().unwrap())
        .await
        .unwrap();
    assert_ne!(outcome.status, CallStatus::Ok);
    assert_eq!(s.calls.lock().unwrap().len(), before);
}

/// An operator card made from the approvals page lets one exact dangerous call run without
/// asking, once; other arguments and the second call ask a person.
async fn operator_card(s: &Served, client: &Client) {
    let session = s.session(&["group-admin"]);
    client.goto(&format!("{}/approvals", s.base)).await.unwrap();
    appears(client, "#operator-card-form", Duration::from_secs(5)).await;
    let form = client
        .find(Locator::Css("#operator-card-form"))
        .await
        .unwrap();
    let field = |css: &'static str| {
        let form = form.clone();
        async move { form.find(Locator::Css(css)).await.unwrap() }
    };
    field("input[name=tool]")
        .await
        .send_keys("group-admin.kick_member")
        .await
        .unwrap();
    let arguments = field("textarea[name=arguments]").await;
    arguments.clear().await.unwrap();
    arguments.send_keys(r#"{"user": "77"}"#).await.unwrap();
    field("input[name=session]")
        .await
        .send_keys(&session)
        .await
        .unwrap();
    click(client, "#make-operator-card").await;
    appears(client, "#operator-card-list", Duration::from_secs(5)).await;
    let cards = s.admin.operator_cards().unwrap();
    let card = cards
        .iter()
        .find(|c| c.session.as_deref() == Some(session.as_str()))
        .expect("the card was made");
    assert_eq!(card.created_by, "console:owner");
    let row = format!("#operator-card-list tr[data-card='{}'] .state", card.id);
    assert_eq!(text_of(client, &row).await, "live");

    let ran = s.calls.lock().unwrap().len();
    let out = s
        .call(&session, "group-admin__kick_member", json!({"user": "77"}))
        .join()
        .unwrap();
    assert_eq!(out.status, CallStatus::Ok, "{out:?}");
    assert!(s.admin.pending_approvals(None).unwrap().is_empty());
    client.refresh().await.unwrap();
    assert_eq!(text_of(client, &row).await, "used");

    // Used once: the same call, and a call with other arguments, each ask a person.
    for user in ["77", "78"] {
        let again = s.call(&session, "group-admin__kick_member", json!({"user": user}));
        let pending = s.pending(1).await.remove(0);
        s.admin
            .answer_approval(&pending.card.id, Decision::Deny, "browser test", None)
            .unwrap();
        assert_eq!(again.join().unwrap().status, CallStatus::Refused);
    }
    assert_eq!(s.calls.lock().unwrap().len(), ran + 1);
}

/// Neither a prompt section's text nor a secret setting's value is on any page, whatever
/// the browser builds from it (the rendered DOM, not only the served HTML).
async fn nothing_secret_on_any_page(s: &Served, client: &Client) {
    for path in [
        "/",
        "/approvals",
        "/packages",
        "/packages/weather",
        "/prompts",
        "/audit",
        "/sessions",
        "/runs",
        "/control",
        "/packages/weather/pages/index.html",
    ] {
        client.goto(&format!("{}{path}", s.base)).await.unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
        let html = client
            .execute("return document.documentElement.outerHTML;", vec![])
            .await
            .unwrap();
        let html = html.as_str().unwrap_or_default();
        assert!(
            !html.contains(CANARY) && !html.contains(SECRET_SETTING),
            "{path} shows a prompt section's text or a secret setting"
        );
    }
}

/// A page on another port of the same host (the same site, so the `SameSite=Strict` cookie
/// goes along) posts the control form on load: refused with 403, the mode unchanged.
async fn cross_origin_form(s: &Served, client: &Client) {
    let target = format!("{}/control", s.base);
    let page = format!(
        "<!doctype html><form id=f method=post action='{target}'><input name=csrf value=guess><input name=mode value=emergency-stop><input name=reason value=pwned></form><script>document.getElementById('f').submit()</script>"
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let evil = listener.local_addr().unwrap();
    let app = axum::Router::new().route(
        "/",
        axum::routing::get(move || {
            let page = page.clone();
            async move { axum::response::Html(page) }
        }),
    );
    let server = tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    client.goto(&format!("http://{evil}/")).await.unwrap();
    let started = Instant::now();
    while client.current_url().await.unwrap().path() != "/control" {
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "the form never posted"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let body = text_of(client, "body").await;
    assert!(!body.contains("Control plane"), "{body}");
    assert!(!s.admin.switches().unwrap().control.emergency_stop);
    server.abort();
}

/// Shuts the console down with tabs open on pages that hold event streams: it is gone in
/// under a second.
pub(super) async fn shutdown_with_open_tabs(s: &Served, client: &Client) -> Duration {
    for path in ["/approvals", "/audit", "/"] {
        let tab = client.new_window(true).await.unwrap();
        client.switch_to_window(tab.handle).await.unwrap();
        client.goto(&format!("{}{path}", s.base)).await.unwrap();
        appears(client, "#pending-count", Duration::from_secs(5)).await;
    }
    // The streams are open.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let started = Instant::now();
    s.shutdown.cancel();
    while !s.server.is_finished() {
        assert!(
            started.elapsed() < Duration::from_secs(1),
            "the console still serves a second after shutdown, with tabs open"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    started.elapsed()
}
