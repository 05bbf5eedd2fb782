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

async fn revoke(s: &Served, cookie: &str, csrf: &str, id: &str) -> reqwest::Response {
    s.client()
        .post(format!("{}/operator-cards/{id}/revoke", s.base))
        .header("cookie", cookie)
        .header("origin", &s.base)
        .form(&[("csrf", csrf)])
        .send()
        .await
        .unwrap()
}

#[tokio::test]
async fn a_card_revoked_before_it_expires_matches_no_call() {
    let s = serve().await;
    let session = s.session(&["group-admin"]);
    let (cookie, csrf) = s.sign_in().await;
    let kick = [
        ("tool", "group-admin.kick_member"),
        ("arguments", r#"{"user": "7"}"#),
    ];
    assert_eq!(make(&s, &cookie, &csrf, &s.base, &kick).await.status(), 303);
    let id = s.admin.operator_cards().unwrap()[0].id.clone();
    // The approvals page offers to revoke the live card, with its own form.
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
    assert!(
        page.contains(&format!("action=\"/operator-cards/{id}/revoke\"")),
        "{page}"
    );

    // Refused: no CSRF token, another site's form, an unknown card. Nothing changes.
    assert_eq!(revoke(&s, &cookie, "", &id).await.status(), 403);
    let cross = s
        .client()
        .post(format!("{}/operator-cards/{id}/revoke", s.base))
        .header("cookie", &cookie)
        .header("origin", "http://evil.example")
        .form(&[("csrf", csrf.as_str())])
        .send()
        .await
        .unwrap();
    assert_eq!(cross.status(), 403);
    assert_eq!(revoke(&s, &cookie, &csrf, "opc-nope").await.status(), 404);
    assert_eq!(s.admin.operator_cards().unwrap()[0].revoked_at, None);

    let revoked = revoke(&s, &cookie, &csrf, &id).await;
    assert_eq!(revoked.status(), 303);
    let card = s.admin.operator_cards().unwrap().remove(0);
    assert_eq!(card.revoked_by.as_deref(), Some("console:owner"));
    // Once: a second revoke is a conflict.
    assert_eq!(revoke(&s, &cookie, &csrf, &id).await.status(), 409);

    // The exact call it approved now asks a person; denied, nothing runs.
    let call = s.call(&session, "group-admin__kick_member", json!({"user": "7"}));
    let asked = s.pending(1).await.remove(0);
    s.admin
        .answer_approval(&asked.card.id, Decision::Deny, "test", None)
        .unwrap();
    assert_eq!(call.join().unwrap().status, CallStatus::Refused);
    assert!(s.calls.lock().unwrap().is_empty());
    assert!(s.admin.operator_cards().unwrap()[0].used_at.is_none());

    // Audited with the operator; listed as revoked, with who, and no longer offered to revoke.
    let records = s
        .admin
        .audit(&AuditQuery {
            kind: Some(AuditKind::Operator),
            ..AuditQuery::default()
        })
        .unwrap();
    let revokes: Vec<_> = records
        .iter()
        .filter(|r| r.entry.decisions[0].decision == "revoke-operator-card")
        .collect();
    assert_eq!(revokes.len(), 1, "{records:#?}");
    assert_eq!(revokes[0].entry.principal["user_id"], "console:owner");
    assert_eq!(
        revokes[0].entry.detail.as_ref().unwrap()["card"],
        id.as_str()
    );
    let listed: serde_json::Value = s
        .client()
        .get(format!("{}/operator-cards", s.base))
        .bearer_auth(super::harness::TOKEN)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(listed[0]["state"], "revoked");
    assert!(
        listed[0]["revoked_by"]
            .as_str()
            .unwrap()
            .starts_with("console:owner at ")
    );
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
    assert!(page.contains("<td class=\"state\">revoked</td>"), "{page}");
    assert!(!page.contains(&format!("/operator-cards/{id}/revoke")));
}
