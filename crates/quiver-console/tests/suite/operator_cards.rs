//! Operator cards over a real socket: made in the console (CSRF and origin checked, audited
//! with the operator), used by exactly one matching dangerous call, then the next asks again.

use quiver_runtime::CallStatus;
use quiver_store::{AuditKind, AuditQuery, Decision};
use serde_json::json;

use super::harness::{Served, serve};

async fn make(
    s: &Served,
    cookie: &str,
    csrf: &str,
    origin: &str,
    fields: &[(&str, &str)],
) -> reqwest::Response {
    let mut form = vec![("csrf", csrf)];
    form.extend_from_slice(fields);
    s.client()
        .post(format!("{}/operator-cards", s.base))
        .header("cookie", cookie)
        .header("origin", origin)
        .form(&form)
        .send()
        .await
        .unwrap()
}

#[tokio::test]
async fn a_card_made_in_the_console_lets_one_exact_dangerous_call_run_once() {
    let s = serve().await;
    let session = s.session(&["group-admin"]);
    let (cookie, csrf) = s.sign_in().await;
    let kick = [
        ("tool", "group-admin.kick_member"),
        ("arguments", r#"{ "user": "42" }"#),
        ("minutes", "5"),
    ];
    // Refused: another site's form, no CSRF token, a lifetime past 15 minutes, an unknown tool.
    let cross = make(&s, &cookie, &csrf, "http://evil.example", &kick).await;
    assert_eq!(cross.status(), 403);
    let no_csrf = make(&s, &cookie, "", &s.base, &kick).await;
    assert_eq!(no_csrf.status(), 403);
    let long = [kick[0], kick[1], ("minutes", "16")];
    assert_eq!(make(&s, &cookie, &csrf, &s.base, &long).await.status(), 400);
    let unknown = [("tool", "group-admin.ban_forever"), kick[1]];
    assert_eq!(
        make(&s, &cookie, &csrf, &s.base, &unknown).await.status(),
        400
    );
    assert!(s.admin.operator_cards().unwrap().is_empty());

    let made = make(&s, &cookie, &csrf, &s.base, &kick).await;
    assert_eq!(made.status(), 303);
    let cards = s.admin.operator_cards().unwrap();
    assert_eq!(cards.len(), 1);
    assert_eq!(cards[0].created_by, "console:owner");

    // The call runs without a card being asked.
    let out = s
        .call(&session, "group-admin__kick_member", json!({"user": "42"}))
        .join()
        .unwrap();
    assert_eq!(out.status, CallStatus::Ok, "{out:?}");
    assert!(s.admin.pending_approvals(None).unwrap().is_empty());

    // The same call again asks a person; denied, nothing more runs.
    let again = s.call(&session, "group-admin__kick_member", json!({"user": "42"}));
    let card = s.pending(1).await.remove(0);
    s.admin
        .answer_approval(&card.card.id, Decision::Deny, "test", None)
        .unwrap();
    assert_eq!(again.join().unwrap().status, CallStatus::Refused);
    assert_eq!(s.calls.lock().unwrap().len(), 1);

    // Audited: who made it, and the call record names the card it used.
    let made = s
        .admin
        .audit(&AuditQuery {
            kind: Some(AuditKind::Operator),
            ..AuditQuery::default()
        })
        .unwrap();
    assert!(
        made.iter()
            .any(|r| r.entry.decisions[0].decision == "operator-card"
                && r.entry.principal["user_id"] == "console:owner"
                && r.entry.detail.as_ref().unwrap()["card"] == cards[0].id.as_str()),
        "{made:#?}"
    );
    let used = s
        .admin
        .audit(&AuditQuery {
            session: Some(session.clone()),
            kind: Some(AuditKind::Call),
            ..AuditQuery::default()
        })
        .unwrap();
    let by_card: Vec<_> = used
        .iter()
        .filter(|r| {
            r.entry.decisions.iter().any(|d| {
                d.reason
                    .contains(&format!("operator card `{}`", cards[0].id))
            })
        })
        .collect();
    assert_eq!(by_card.len(), 1, "{used:#?}");

    // The approvals page lists it as used, naming the call.
    let page = s
        .client()
        .get(format!("{}/approvals", s.base))
        .header("cookie", &cookie)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let call_id = by_card[0].entry.call_id.clone().unwrap();
    assert!(page.contains(&cards[0].id), "{page}");
    assert!(page.contains("<td class=\"state\">used</td>"), "{page}");
    assert!(page.contains(&format!("call `{call_id}` in session `{session}`")));
}
