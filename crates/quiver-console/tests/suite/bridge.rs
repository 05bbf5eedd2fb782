//! The package-page bridge over a real socket: a page's call of its own package's item runs
//! through the whole pipeline (its package's consent asked on the console's queue, the call
//! audited), another package's item is refused with nothing run, and the bridge's token opens
//! no other door (approvals, the control plane, operator cards, another package's bridge).

use std::time::Duration;

use quiver_runtime::CallStatus;
use quiver_store::{AuditKind, AuditQuery, CardQuestion, Decision};
use serde_json::{Value, json};

use super::harness::{Served, TOKEN, serve};

/// The bridge token on the page that hosts `package`'s page, and that page's policy.
async fn host_page(s: &Served, cookie: &str, package: &str) -> (String, String) {
    let response = s
        .client()
        .get(format!("{}/packages/{package}/app", s.base))
        .header("cookie", cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let csp = response.headers()["content-security-policy"]
        .to_str()
        .unwrap()
        .to_owned();
    let page = response.text().await.unwrap();
    assert!(
        page.contains(&format!(
            "sandbox=\"allow-scripts\" src=\"/packages/{package}/pages/index.html\""
        )),
        "{page}"
    );
    assert!(page.contains("<script src=\"/static/bridge.js\"></script>"));
    let token = page
        .split("data-bridge=\"")
        .nth(1)
        .unwrap()
        .split('"')
        .next()
        .unwrap()
        .to_owned();
    assert_eq!(token.len(), 64, "{page}");
    (token, csp)
}

/// Posts `fields` with `token` as the form's token, as the console's own page would.
async fn post(
    s: &Served,
    cookie: &str,
    path: &str,
    token: &str,
    fields: &[(&str, &str)],
) -> reqwest::Response {
    let mut form = vec![("csrf", token)];
    form.extend_from_slice(fields);
    s.client()
        .post(format!("{}{path}", s.base))
        .header("cookie", cookie)
        .header("origin", &s.base)
        .header("accept", "application/json")
        .form(&form)
        .send()
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_calls_its_own_packages_items_through_the_pipeline_and_nothing_else() {
    let s = serve().await;
    let (cookie, csrf) = s.sign_in().await;
    let (token, csp) = host_page(&s, &cookie, "weather").await;
    assert!(csp.ends_with("; frame-src 'self'"), "{csp}");
    assert!(csp.contains("script-src 'self';"), "{csp}");
    assert_ne!(token, csrf);
    let bridge = "/packages/weather/bridge/call";

    // Its own item: the package's consent is asked on the console's queue first (the bridge's
    // session is new), then the call runs.
    let call = {
        let (s_base, cookie, token) = (s.base.clone(), cookie.clone(), token.clone());
        let client = s.client();
        tokio::spawn(async move {
            client
                .post(format!("{s_base}{bridge}"))
                .header("cookie", cookie)
                .header("origin", &s_base)
                .header("accept", "application/json")
                .form(&[
                    ("csrf", token.as_str()),
                    ("item", "forecast"),
                    ("arguments", r#"{"city": "北京"}"#),
                ])
                .send()
                .await
                .unwrap()
        })
    };
    let card = s.pending(1).await.remove(0);
    assert_eq!(card.card.question, CardQuestion::Consent);
    assert_eq!(card.card.package, "weather");
    s.admin
        .answer_approval(&card.card.id, Decision::Approve, "test", None)
        .unwrap();
    let answered = tokio::time::timeout(Duration::from_secs(10), call)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(answered.status(), 200);
    let answer: Value = answered.json().await.unwrap();
    assert_eq!(answer["ok"], true, "{answer}");
    assert_eq!(answer["status"], "ok");
    assert_eq!(answer["item"], "forecast");
    assert_eq!(answer["result"]["ran"], "weather.forecast");
    assert_eq!(answer["result"]["args"], json!({"city": "北京"}));
    assert_eq!(
        *s.calls.lock().unwrap(),
        vec![("weather.forecast".to_owned(), json!({"city": "北京"}))]
    );
    // Audited as every call is: the call record, in the bridge's session, as the owner.
    let call_id = answer["call"].as_str().unwrap();
    let records = s
        .admin
        .audit(&AuditQuery {
            kind: Some(AuditKind::Call),
            ..AuditQuery::default()
        })
        .unwrap();
    let record = records
        .iter()
        .find(|r| r.entry.call_id.as_deref() == Some(call_id))
        .unwrap_or_else(|| panic!("{records:#?}"));
    assert_eq!(record.entry.tool.as_deref(), Some("weather.forecast"));
    assert_eq!(record.entry.principal["user_id"], "local");
    let session = s.admin.session(&record.entry.session).unwrap().unwrap();
    assert_eq!(session.session.agent, "console");
    assert_eq!(session.session.id, card.card.session);
    // A second call in the same session asks nothing more.
    let again = post(
        &s,
        &cookie,
        bridge,
        &token,
        &[("item", "forecast"), ("arguments", r#"{"city":"上海"}"#)],
    )
    .await;
    assert_eq!(again.status(), 200);
    assert_eq!(s.calls.lock().unwrap().len(), 2);

    // Another package's item, by any spelling, and anything that is not a call: refused,
    // nothing runs and nobody is asked.
    for item in [
        "notes.add_note",
        "add_note",
        "notes__add_note",
        "../notes/add_note",
        "read_skill",
        "",
    ] {
        let refused = post(
            &s,
            &cookie,
            bridge,
            &token,
            &[("item", item), ("arguments", r#"{"text": "x"}"#)],
        )
        .await;
        assert_eq!(refused.status(), 403, "{item}");
    }
    let not_json = post(
        &s,
        &cookie,
        bridge,
        &token,
        &[("item", "forecast"), ("arguments", "[1]")],
    )
    .await;
    assert_eq!(not_json.status(), 400);
    assert_eq!(s.calls.lock().unwrap().len(), 2);
    assert!(s.admin.pending_approvals(None).unwrap().is_empty());

    // The bridge's token opens no other door: a pending card, the control plane, operator
    // cards, another package's bridge. The console's own token does not open the bridge.
    let session = s.session(&["notes"]);
    let waiting = s.call(&session, "notes__add_note", json!({"text": "keep"}));
    let card = s.pending(1).await.remove(0);
    let digest = quiver_store::argument_digest(&card.card.arguments, &[]);
    let doors: [(&str, Vec<(&str, &str)>); 5] = [
        (
            &format!("/approvals/{}", card.card.id),
            vec![("decision", "approve"), ("digest", &digest)],
        ),
        ("/control", vec![("mode", "read-only"), ("reason", "page")]),
        (
            "/operator-cards",
            vec![("tool", "notes.add_note"), ("arguments", "{}")],
        ),
        (
            "/packages/group-admin/bridge/call",
            vec![("item", "kick_member"), ("arguments", r#"{"user":"1"}"#)],
        ),
        ("/logout", vec![]),
    ];
    for (path, fields) in &doors {
        let refused = post(&s, &cookie, path, &token, fields).await;
        assert_eq!(refused.status(), 403, "{path}");
    }
    let with_csrf = post(
        &s,
        &cookie,
        bridge,
        &csrf,
        &[("item", "forecast"), ("arguments", "{}")],
    )
    .await;
    assert_eq!(with_csrf.status(), 403);
    // The page itself has no cookie (an opaque origin): its own post gets nothing either.
    let from_page = s
        .client()
        .post(format!("{}{bridge}", s.base))
        .header("origin", "null")
        .form(&[("csrf", token.as_str()), ("item", "forecast")])
        .send()
        .await
        .unwrap();
    assert_eq!(from_page.status(), 401);
    assert_eq!(
        s.admin.approval(&card.card.id).unwrap().unwrap().status,
        quiver_store::ApprovalStatus::Pending
    );
    assert!(!s.admin.switches().unwrap().control.read_only);
    assert!(s.admin.operator_cards().unwrap().is_empty());
    assert_eq!(s.calls.lock().unwrap().len(), 2);
    // The console's own token still answers the card (the session is intact).
    let approved = post(
        &s,
        &cookie,
        &format!("/approvals/{}", card.card.id),
        &csrf,
        &[("decision", "deny"), ("digest", &digest)],
    )
    .await;
    assert_eq!(approved.status(), 200);
    assert_eq!(waiting.join().unwrap().status, CallStatus::Refused);

    // A package without pages has no bridge; scripts with the bearer token may call one.
    let none = s
        .client()
        .post(format!("{}/packages/notes/bridge/call", s.base))
        .bearer_auth(TOKEN)
        .form(&[("item", "add_note")])
        .send()
        .await
        .unwrap();
    assert_eq!(none.status(), 404);
    let scripted = s
        .client()
        .get(format!("{}/packages/notes/app", s.base))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(scripted.status(), 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_the_emergency_stop_a_pages_call_is_refused_by_the_pipeline() {
    let s = serve().await;
    let (cookie, _) = s.sign_in().await;
    let (token, _) = host_page(&s, &cookie, "weather").await;
    s.admin
        .set_control(
            quiver_policy::ControlPlane {
                emergency_stop: true,
                ..Default::default()
            },
            "test",
        )
        .unwrap();
    let refused = post(
        &s,
        &cookie,
        "/packages/weather/bridge/call",
        &token,
        &[("item", "forecast"), ("arguments", r#"{"city":"x"}"#)],
    )
    .await;
    assert_eq!(refused.status(), 200);
    let answer: Value = refused.json().await.unwrap();
    assert_eq!(answer["ok"], false, "{answer}");
    assert_eq!(answer["status"], "refused");
    assert!(s.calls.lock().unwrap().is_empty());
    assert!(s.admin.pending_approvals(None).unwrap().is_empty());
}
