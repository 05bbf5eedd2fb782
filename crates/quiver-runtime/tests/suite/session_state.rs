//! Issue 12 defect 8 and issue 13 item 14: what a session holds outlives the process that made
//! it. Each test opens a second runtime over the same database file, as the next `quiver call
//! --session S` would.

use quiver_runtime::CallStatus;
use quiver_runtime::approver::Answer;
use quiver_store::{AuditEntry, AuditKind, AuditQuery, AuditStatus};
use serde_json::json;

use super::common::*;

#[test]
fn a_once_approval_holds_in_the_next_process_of_the_session() {
    let h = harness();
    let s = cli_session(&h);
    h.person
        .answer(&[Answer::AllowForSession, Answer::AllowForSession]);
    let args = json!({"server": "notes.example.com", "token": "t"});
    let mut turn = h.runtime.begin_turn(&s, owner(), "").unwrap();
    assert_eq!(
        turn.call("notes__sync_notes", args.clone()).unwrap().status,
        CallStatus::Ok
    );
    assert_eq!(h.person.cards().len(), 2, "consent, then the once approval");
    let next = reopen(&h);
    let mut turn = next.runtime.begin_turn(&s, owner(), "").unwrap();
    let out = turn.call("notes__sync_notes", args).unwrap();
    assert_eq!(out.status, CallStatus::Ok, "{out:?}");
    assert!(next.person.cards().is_empty(), "{:?}", next.person.cards());
}

#[test]
fn a_trimmed_result_is_read_from_the_next_process_of_the_session_only() {
    let h = harness();
    let s = cli_session(&h);
    h.person.answer(&[Answer::AllowForSession]);
    let mut turn = h.runtime.begin_turn(&s, owner(), "").unwrap();
    let out = turn.call("notes__long_list", json!({})).unwrap();
    assert_eq!(out.content["has_more"], true, "{out:?}");
    let trimmed = out.trimmed.expect("the outcome says it was trimmed");
    assert_eq!((trimmed.total_chars, trimmed.next_offset), (120, Some(50)));
    let next = reopen(&h);
    let mut turn = next.runtime.begin_turn(&s, owner(), "").unwrap();
    let rest = turn
        .call("tool_output", json!({"call": out.call_id, "offset": 50}))
        .unwrap();
    assert_eq!(rest.status, CallStatus::Ok, "{rest:?}");
    assert_eq!(rest.content["text"].as_str().unwrap().len(), 70);
    let other = cli_session(&next);
    let mut other_turn = next.runtime.begin_turn(&other, owner(), "").unwrap();
    let stolen = other_turn
        .call("tool_output", json!({"call": out.call_id}))
        .unwrap();
    assert_eq!(stolen.status, CallStatus::Error);
}

/// Issue 12 defect 8: "already active; its instructions are above" only where the caller's
/// transcript holds the instructions; every other reader of an active skill gets them again.
#[test]
fn an_active_skills_instructions_are_repeated_unless_the_transcript_holds_them() {
    let h = harness();
    let s = cli_session(&h);
    let status = |turn: &mut quiver_runtime::Turn<'_>| {
        let out = turn.call("read_skill", json!({"id": "weather"})).unwrap();
        let has_body = out.content["instructions"].as_str().is_some();
        (out.content["status"].as_str().unwrap().to_owned(), has_body)
    };
    let mut turn = h.runtime.begin_turn(&s, owner(), "").unwrap();
    assert_eq!(status(&mut turn), ("activated".to_owned(), true));
    // The same turn delivered it: its transcript holds it.
    assert!(status(&mut turn).0.starts_with("already active"));
    assert!(turn.skills_in_transcript().contains("weather"));
    let held = turn.skills_in_transcript().clone();
    drop(turn);
    // (who reads next, told the transcript holds it, expected: status and a body)
    let cases: [(&str, bool, &str, bool); 3] = [
        (
            "a front that carries its transcript",
            true,
            "already active",
            false,
        ),
        ("a front that does not (quiver call)", false, "active", true),
        ("the next process of the session", false, "active", true),
    ];
    for (who, told, want_status, want_body) in cases {
        let next;
        let runtime = if who.starts_with("the next process") {
            next = reopen(&h);
            &next.runtime
        } else {
            &h.runtime
        };
        let mut turn = runtime.begin_turn(&s, owner(), "").unwrap();
        if told {
            turn.transcript_holds(held.iter().cloned());
        }
        let (got_status, got_body) = status(&mut turn);
        assert!(got_status.starts_with(want_status), "{who}: {got_status}");
        assert_eq!(got_body, want_body, "{who}");
    }
    // A repeat is not a second activation.
    let activations = h
        .store
        .query_audit(&AuditQuery {
            session: Some(s.clone()),
            kind: Some(AuditKind::SkillActivated),
            ..AuditQuery::default()
        })
        .unwrap();
    assert_eq!(activations.len(), 1, "{activations:?}");
}

/// A call's start is recorded while it runs (in calls in flight, apart from the log) and
/// removed by its record; the CLI's `attacks_orphans` kills one mid-run to see the start.
#[test]
fn a_finished_call_leaves_one_record_and_nothing_in_flight() {
    let h = harness();
    let s = cli_session(&h);
    h.person.answer(&[Answer::AllowForSession]);
    let mut turn = h.runtime.begin_turn(&s, owner(), "").unwrap();
    let out = turn
        .call("weather__forecast", json!({"city": "Paris"}))
        .unwrap();
    assert_eq!(out.status, CallStatus::Ok, "{out:?}");
    let query = |kind| AuditQuery {
        session: Some(s.clone()),
        kind,
        ..Default::default()
    };
    let store = h.store;
    let in_flight = store
        .query_audit(&query(Some(AuditKind::CallStarted)))
        .unwrap();
    assert!(in_flight.is_empty(), "{in_flight:?}");
    let ended = store.query_audit(&query(None)).unwrap();
    assert_eq!(ended.len(), 1, "{ended:?}");
    assert_eq!(ended[0].entry.status, AuditStatus::Ok);
    assert_eq!(
        ended[0].entry.call_id.as_deref(),
        Some(out.call_id.as_str())
    );
    // A finished call is not closed again.
    assert!(h.runtime.close_interrupted_calls().unwrap().is_empty());
}

#[test]
fn a_call_left_running_by_an_ended_process_is_closed_as_interrupted_and_a_live_one_is_not() {
    let h = harness();
    let s = cli_session(&h);
    let started = |call: &str, process: serde_json::Value| {
        let mut entry = AuditEntry::new(AuditKind::CallStarted, s.clone());
        entry.call_id = Some(call.to_owned());
        entry.tool = Some("notes.add_note".into());
        entry.status = AuditStatus::Started;
        entry.detail = Some(json!({ "process": process }));
        h.store.append_audit(&entry).unwrap();
    };
    // A pid no process has, and this very process (another live `quiver` on the same store),
    // named as the console's waiters are.
    let me = quiver_store::waiter::current().unwrap();
    let boot_and_namespace = me.rsplitn(3, ':').last().unwrap();
    started(
        "call_dead",
        json!(format!("{boot_and_namespace}:{}:1", u32::MAX - 7)),
    );
    started("call_live", json!(me));
    assert_eq!(h.runtime.close_interrupted_calls().unwrap(), ["call_dead"]);
    let records = h
        .store
        .query_audit(&AuditQuery {
            session: Some(s),
            ..Default::default()
        })
        .unwrap();
    let closed = records
        .iter()
        .find(|r| r.entry.kind == AuditKind::Call)
        .expect("the interrupted call has its record");
    assert_eq!(closed.entry.call_id.as_deref(), Some("call_dead"));
    assert_eq!(closed.entry.status, AuditStatus::Interrupted);
    assert_eq!(closed.entry.tool.as_deref(), Some("notes.add_note"));
    // Closing again finds nothing new.
    assert!(h.runtime.close_interrupted_calls().unwrap().is_empty());
}
