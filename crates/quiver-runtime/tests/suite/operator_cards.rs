//! Operator cards: a person approves one exact dangerous call ahead; that call runs without
//! asking, once; the same arguments again, other arguments, another session or an expired card
//! ask as before.

use quiver_runtime::CallStatus;
use quiver_runtime::approver::{Answer, Question};
use quiver_store::{AuditKind, AuditQuery, AuditStep, OperatorCard, now_ms};
use serde_json::{Value, json};

use super::common::{Harness, group_session, harness, owner};

fn card(h: &Harness, id: &str, arguments: Value, session: Option<&str>, ttl_ms: i64) {
    let now = now_ms();
    h.store
        .create_operator_card(&OperatorCard {
            id: id.into(),
            tool: "group-admin.kick_member".into(),
            arguments,
            session: session.map(str::to_owned),
            created_by: "alice".into(),
            created_at: now - 1,
            expires_at: now + ttl_ms,
            used_at: None,
            used_session: None,
            used_call: None,
            revoked_at: None,
            revoked_by: None,
        })
        .unwrap();
}

/// Calls `kick_member` with `arguments` in a new turn of `session`, the person answering
/// `answers`; returns the status and the questions the person saw.
fn kick(
    h: &Harness,
    session: &str,
    arguments: Value,
    answers: &[Answer],
) -> (CallStatus, Vec<Question>) {
    h.person.clear();
    h.person.answer(answers);
    let mut turn = h.runtime.begin_turn(session, owner(), "").unwrap();
    let out = turn.call("group-admin__kick_member", arguments).unwrap();
    let asked = h.person.cards().iter().map(|c| c.question).collect();
    (out.status, asked)
}

#[test]
fn an_operator_card_approves_its_exact_call_once() {
    let h = harness();
    let s = group_session(&h);
    // Consent first (not what a card answers), then the card approves the dangerous call.
    card(&h, "opc-1", json!({"user": "42"}), None, 60_000);
    let (status, asked) = kick(&h, &s, json!({"user": "42"}), &[Answer::AllowForSession]);
    assert_eq!((status, asked), (CallStatus::Ok, vec![Question::Consent]));
    assert_eq!(h.calls.lock().unwrap().len(), 1);
    // The same arguments again: the card is used; the person is asked (and says no).
    let (status, asked) = kick(&h, &s, json!({"user": "42"}), &[Answer::Deny]);
    assert_eq!(
        (status, asked),
        (CallStatus::Refused, vec![Question::Approval])
    );
    // Other arguments never match a card.
    card(&h, "opc-2", json!({"user": "42"}), None, 60_000);
    let (status, asked) = kick(&h, &s, json!({"user": "43"}), &[Answer::Deny]);
    assert_eq!(
        (status, asked),
        (CallStatus::Refused, vec![Question::Approval])
    );
    // A card for another session does not match here; an expired one nowhere.
    card(
        &h,
        "opc-3",
        json!({"user": "44"}),
        Some("elsewhere"),
        60_000,
    );
    let (status, _) = kick(&h, &s, json!({"user": "44"}), &[Answer::Deny]);
    assert_eq!(status, CallStatus::Refused);
    card(&h, "opc-4", json!({"user": "45"}), None, 1);
    std::thread::sleep(std::time::Duration::from_millis(5));
    let (status, _) = kick(&h, &s, json!({"user": "45"}), &[Answer::Deny]);
    assert_eq!(status, CallStatus::Refused);
    assert_eq!(h.calls.lock().unwrap().len(), 1, "only the carded call ran");

    // The audit names the card and who made it; the store names the call that used it.
    let records = h
        .store
        .query_audit(&AuditQuery {
            session: Some(s.clone()),
            kind: Some(AuditKind::Call),
            ..AuditQuery::default()
        })
        .unwrap();
    let carded: Vec<_> = records
        .iter()
        .filter(|r| {
            r.entry.decisions.iter().any(|d| {
                d.step == AuditStep::Approval
                    && d.decision == "allow"
                    && d.reason.contains("operator card `opc-1` made by `alice`")
            })
        })
        .collect();
    assert_eq!(carded.len(), 1, "{records:#?}");
    let used = h.store.operator_cards(now_ms()).unwrap();
    let opc1 = used.iter().find(|c| c.id == "opc-1").unwrap();
    assert_eq!(opc1.used_session.as_deref(), Some(s.as_str()));
    assert_eq!(
        opc1.used_call.as_deref(),
        carded[0].entry.call_id.as_deref()
    );
    let opc2 = used.iter().find(|c| c.id == "opc-2").unwrap();
    assert_eq!(
        opc2.used_at, None,
        "the card for other arguments is still unused"
    );
}
