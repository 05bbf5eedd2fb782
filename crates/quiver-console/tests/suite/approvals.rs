//! Answering cards over a real socket: exactly what was shown, exactly once, durable and
//! audited with the operator before the reply.

use serde_json::{Value, json};

use super::harness::{TOKEN, serve};

fn digest(arguments: &Value) -> String {
    quiver_store::argument_digest(arguments, &[])
}

#[tokio::test]
async fn approve_runs_the_call_and_the_audit_names_the_operator() {
    let s = serve().await;
    let session = s.session(&["notes"]);
    let text = format!("{}\u{202e}evil", "x".repeat(5 * 1024));
    let call = s.call(&session, "notes__add_note", json!({"text": text}));
    let card = s.pending(1).await.remove(0);
    let (cookie, csrf) = s.sign_in().await;

    // The card's page shows the canonical arguments with the override escaped.
    let page = s
        .client()
        .get(format!("{}/approvals/{}", s.base, card.card.id))
        .header("cookie", &cookie)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(!page.contains('\u{202e}'));
    assert!(page.contains("\\u202eevil"));
    let response = s
        .client()
        .post(format!("{}/approvals/{}", s.base, card.card.id))
        .header("cookie", &cookie)
        .header("origin", &s.base)
        .form(&[
            ("csrf", csrf.as_str()),
            ("digest", &digest(&card.card.arguments)),
            ("decision", "approve"),
            ("reason", "looks right"),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 303);
    let outcome = call.join().unwrap();
    assert_eq!(
        outcome.status,
        quiver_runtime::CallStatus::Ok,
        "{outcome:?}"
    );
    assert_eq!(s.calls.lock().unwrap().len(), 1);
    let answered = s.admin.approval(&card.card.id).unwrap().unwrap();
    assert_eq!(answered.answered_by.as_deref(), Some("console:owner"));
    assert_eq!(answered.note.as_deref(), Some("looks right"));
    let records = s
        .admin
        .audit(&quiver_store::AuditQuery {
            session: Some(session.clone()),
            kind: Some(quiver_store::AuditKind::Operator),
            ..Default::default()
        })
        .unwrap();
    assert!(
        records
            .iter()
            .any(|r| r.entry.decisions[0].decision == "approve"
                && r.entry.principal["user_id"] == "console:owner"
                && r.entry.detail.as_ref().unwrap()["note"] == "looks right"),
        "{records:#?}"
    );
}

#[tokio::test]
async fn a_stale_digest_gets_409_and_nothing_runs() {
    let s = serve().await;
    let session = s.session(&["notes"]);
    let call = s.call(&session, "notes__add_note", json!({"text": "pay 100"}));
    let card = s.pending(1).await.remove(0);
    let response = s
        .client()
        .post(format!("{}/approvals/{}", s.base, card.card.id))
        .bearer_auth(TOKEN)
        .header("accept", "application/json")
        .form(&[
            ("digest", digest(&json!({"text": "pay 1"})).as_str()),
            ("decision", "approve"),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 409);
    // A browser's plain form (no JavaScript) gets the same refusal as a whole page.
    let (cookie, csrf) = s.sign_in().await;
    let page = s
        .client()
        .post(format!("{}/approvals/{}", s.base, card.card.id))
        .header("cookie", &cookie)
        .header("origin", &s.base)
        .form(&[
            ("csrf", csrf.as_str()),
            ("digest", digest(&json!({"text": "pay 1"})).as_str()),
            ("decision", "approve"),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), 409);
    let body = page.text().await.unwrap();
    assert!(
        body.starts_with("<!doctype html>") && body.contains("are not this card"),
        "{body}"
    );
    let still = s.admin.approval(&card.card.id).unwrap().unwrap();
    assert_eq!(still.status, quiver_store::ApprovalStatus::Pending);
    assert!(s.calls.lock().unwrap().is_empty());
    // Deny it properly so the call ends.
    let response = s
        .client()
        .post(format!("{}/approvals/{}", s.base, card.card.id))
        .bearer_auth(TOKEN)
        .form(&[
            ("digest", digest(&card.card.arguments).as_str()),
            ("decision", "deny"),
            ("reason", "not today"),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 303);
    let outcome = call.join().unwrap();
    assert_ne!(outcome.status, quiver_runtime::CallStatus::Ok);
    assert!(s.calls.lock().unwrap().is_empty());
}

#[tokio::test]
async fn two_answers_to_one_card_the_second_gets_409() {
    let s = serve().await;
    let session = s.session(&["notes"]);
    let call = s.call(&session, "notes__add_note", json!({"text": "once"}));
    let card = s.pending(1).await.remove(0);
    let answer = |decision: &'static str| {
        s.client()
            .post(format!("{}/approvals/{}", s.base, card.card.id))
            .bearer_auth(TOKEN)
            .header("accept", "application/json")
            .form(&[
                ("digest", digest(&card.card.arguments)),
                ("decision", decision.to_owned()),
            ])
            .send()
    };
    let (first, second) = tokio::join!(answer("approve"), answer("deny"));
    let mut statuses = [
        first.unwrap().status().as_u16(),
        second.unwrap().status().as_u16(),
    ];
    statuses.sort_unstable();
    assert_eq!(statuses, [200, 409]);
    call.join().unwrap();
    // A third, later answer: 409 too.
    assert_eq!(answer("approve").await.unwrap().status(), 409);
}

#[tokio::test]
async fn a_dangerous_call_is_armed_then_confirmed() {
    let s = serve().await;
    let session = s.session(&["group-admin"]);
    let call = s.call(&session, "group-admin__kick_member", json!({"user": "42"}));
    let card = s.pending(1).await.remove(0);
    assert_eq!(card.card.risk_category.as_deref(), Some("member"));
    let (cookie, csrf) = s.sign_in().await;
    let post = |confirm: bool| {
        let mut fields = vec![
            ("csrf", csrf.clone()),
            ("digest", digest(&card.card.arguments)),
            ("decision", "approve".to_owned()),
        ];
        if confirm {
            fields.push(("confirm", "yes".to_owned()));
        }
        s.client()
            .post(format!("{}/approvals/{}", s.base, card.card.id))
            .header("cookie", &cookie)
            .header("origin", &s.base)
            .form(&fields)
            .send()
    };
    let armed = post(false).await.unwrap();
    assert_eq!(armed.status(), 202);
    let body = armed.text().await.unwrap();
    assert!(
        body.contains("Confirm approval") && body.contains("name=\"confirm\""),
        "{body}"
    );
    assert_eq!(
        s.admin.approval(&card.card.id).unwrap().unwrap().status,
        quiver_store::ApprovalStatus::Pending
    );
    let confirmed = post(true).await.unwrap();
    assert_eq!(confirmed.status(), 303);
    assert_eq!(call.join().unwrap().status, quiver_runtime::CallStatus::Ok);
}

#[tokio::test]
async fn an_expired_card_gets_409() {
    let s = super::harness::serve_waiting(std::time::Duration::from_millis(300)).await;
    let session = s.session(&["notes"]);
    let call = s.call(&session, "notes__add_note", json!({"text": "late"}));
    let card = s.pending(1).await.remove(0);
    let outcome = call.join().unwrap();
    assert_ne!(outcome.status, quiver_runtime::CallStatus::Ok);
    let response = s
        .client()
        .post(format!("{}/approvals/{}", s.base, card.card.id))
        .bearer_auth(TOKEN)
        .form(&[
            ("digest", digest(&card.card.arguments).as_str()),
            ("decision", "approve"),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 409);
    assert!(s.calls.lock().unwrap().is_empty());
}

#[tokio::test]
async fn a_parked_run_is_shown_and_cancelled_once() {
    let s = serve().await;
    let owner = quiver_policy::Principal::user("owner", quiver_package::rules::Role::Master);
    let ops = quiver_runtime::RunOps::new(&s.runtime).unwrap();
    let (run, _) = ops
        .start(
            "notes.publish",
            &owner,
            json!({}),
            json!("manual"),
            true,
            None,
        )
        .unwrap();
    let run = ops.drive(&run.id).unwrap();
    assert_eq!(run.status.to_string(), "waiting");
    let page: Value = s
        .client()
        .get(format!("{}/runs/{}", s.base, run.id))
        .bearer_auth(TOKEN)
        .header("accept", "application/json")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(page["open"], true);
    assert_eq!(page["waits"][0]["kind"], "approval");
    // Its package is loaded here: it waits for no other instance. Once another content of
    // the package is loaded, the page says which one the run waits for (and cancelling it
    // still works here).
    assert_eq!(page["waiting_for"], Value::Null);
    let packages = s._dir.path().join("packages");
    std::fs::write(packages.join("notes/CHANGES.md"), "v2\n").unwrap();
    s.runtime
        .swap_catalog(quiver_catalog::Catalog::load_dirs(&[&packages]));
    let page: Value = s
        .client()
        .get(format!("{}/runs/{}", s.base, run.id))
        .bearer_auth(TOKEN)
        .header("accept", "application/json")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let note = page["waiting_for"].as_str().unwrap_or_default();
    assert!(
        note.starts_with("an instance that has loaded notes@sha256:"),
        "{page}"
    );
    let cancel = || {
        s.client()
            .post(format!("{}/runs/{}/cancel", s.base, run.id))
            .bearer_auth(TOKEN)
            .header("accept", "application/json")
            .send()
    };
    let first = cancel().await.unwrap();
    assert_eq!(first.status(), 200);
    assert_eq!(ops.run(&run.id).unwrap().status.to_string(), "cancelled");
    assert_eq!(cancel().await.unwrap().status(), 409);
    // Nothing of the run ran, and the operator's cancel is audited.
    assert!(s.calls.lock().unwrap().is_empty());
    let records = s
        .admin
        .audit(&quiver_store::AuditQuery {
            kind: Some(quiver_store::AuditKind::Operator),
            ..Default::default()
        })
        .unwrap();
    assert!(
        records
            .iter()
            .any(|r| r.entry.decisions[0].decision == "cancel"
                && r.entry.principal["user_id"] == "console:owner")
    );
}

#[tokio::test]
async fn the_sessions_page_shows_what_a_session_holds() {
    let s = serve().await;
    let session = s.session(&["weather"]);
    let outcome = s
        .call(&session, "weather__forecast", json!({"city": "北京"}))
        .join()
        .unwrap();
    assert_eq!(
        outcome.status,
        quiver_runtime::CallStatus::Ok,
        "{outcome:?}"
    );
    let sessions: Value = s
        .client()
        .get(format!("{}/sessions", s.base))
        .bearer_auth(TOKEN)
        .header("accept", "application/json")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let row = sessions
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["id"] == session.as_str())
        .unwrap_or_else(|| panic!("{sessions:#}"));
    assert_eq!(row["consents"], json!(["weather: granted"]));
    assert_eq!(row["pending"], 0);
    // What the runtime holds for it, as its operator's door reads it.
    let held = s.admin.session(&session).unwrap().unwrap();
    assert!(!held.loaded_tools.is_empty());
    assert_eq!(row["loaded_tools"], json!(held.loaded_tools));
    assert_eq!(row["opened_packages"], json!(held.opened_packages));
    assert_eq!(row["active_skills"], json!(held.active_skills));
    assert!(
        row["principal"]
            .as_str()
            .unwrap()
            .contains("\"user_id\":\"owner\"")
    );
}

#[tokio::test]
async fn a_parked_run_is_answered_from_its_page_and_goes_on() {
    let s = serve().await;
    let owner = quiver_policy::Principal::user("local", quiver_package::rules::Role::Master);
    let ops = quiver_runtime::RunOps::new(&s.runtime).unwrap();
    let start = |ops: &quiver_runtime::RunOps<'_>| {
        let (run, _) = ops
            .start(
                "weather.report",
                &owner,
                json!({}),
                json!("manual"),
                true,
                None,
            )
            .unwrap();
        ops.drive(&run.id).unwrap()
    };
    let run = start(&ops);
    assert_eq!(run.status.to_string(), "waiting");
    let page: Value = s
        .client()
        .get(format!("{}/runs/{}", s.base, run.id))
        .bearer_auth(TOKEN)
        .header("accept", "application/json")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(
        page["question"]
            .as_str()
            .unwrap()
            .contains("Look up Beijing?"),
        "{page:#}"
    );
    // The approvals page lists it, linked to its own page.
    let listed = s
        .client()
        .get(format!("{}/approvals", s.base))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        listed.contains(&format!("href=\"/runs/{}\"", run.id)),
        "{listed}"
    );
    let answer = |id: String, decision: &'static str| {
        s.client()
            .post(format!("{}/runs/{id}/answer", s.base))
            .bearer_auth(TOKEN)
            .header("accept", "application/json")
            .form(&[("decision", decision), ("reason", "ok by me")])
            .send()
    };
    let response = answer(run.id.clone(), "approve").await.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(ops.run(&run.id).unwrap().status.to_string(), "completed");
    assert_eq!(s.calls.lock().unwrap().len(), 1);
    // Answered once: again is 409.
    assert_eq!(answer(run.id.clone(), "deny").await.unwrap().status(), 409);
    // A denial fails the run and runs nothing.
    let denied = start(&ops);
    assert_eq!(
        answer(denied.id.clone(), "deny").await.unwrap().status(),
        200
    );
    assert_eq!(ops.run(&denied.id).unwrap().status.to_string(), "failed");
    assert_eq!(s.calls.lock().unwrap().len(), 1);
}
