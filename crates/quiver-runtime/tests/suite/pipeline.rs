//! The call pipeline: resolve, visibility, admission, validation, consent and approval,
//! execution, output, audit.

use quiver_policy::ControlPlane;
use quiver_runtime::CallStatus;
use quiver_runtime::approver::{Answer, Question};
use quiver_store::{AuditQuery, AuditStatus};
use serde_json::json;

use super::common::*;

#[test]
fn a_direct_call_of_a_loadable_tool_loads_it_and_still_asks_consent() {
    let h = harness();
    let s = cli_session(&h);
    h.person.answer(&[Answer::AllowForSession, Answer::Allow]);
    let mut turn = h.runtime.begin_turn(&s, owner(), "记一下：买牛奶").unwrap();
    let out = turn
        .call("notes__add_note", json!({"text": "买牛奶"}))
        .unwrap();
    assert_eq!(out.status, CallStatus::Ok, "{out:?}");
    let cards = h.person.cards();
    assert_eq!(
        cards.iter().map(|c| c.question).collect::<Vec<_>>(),
        [Question::Consent, Question::Approval]
    );
    assert_eq!(
        cards[1].arguments,
        json!({"text": "买牛奶"}),
        "the card shows the exact arguments"
    );
    assert!(
        turn.tools()
            .unwrap()
            .iter()
            .any(|t| t.name == "notes__add_note"),
        "the call loaded it"
    );
    // Consent is once per session: the next call asks only the approval question.
    h.person.clear();
    h.person.answer(&[Answer::Allow]);
    turn.call("notes__add_note", json!({"text": "又一条"}))
        .unwrap();
    assert_eq!(
        h.person
            .cards()
            .iter()
            .map(|c| c.question)
            .collect::<Vec<_>>(),
        [Question::Approval]
    );
    // A new session asks again.
    let s2 = cli_session(&h);
    h.person.clear();
    h.person.answer(&[Answer::Deny]);
    let mut turn2 = h.runtime.begin_turn(&s2, owner(), "").unwrap();
    let out = turn2.call("notes__add_note", json!({"text": "x"})).unwrap();
    assert_eq!(out.status, CallStatus::Refused);
    assert!(error_text(&out.content).contains("do not retry"), "{out:?}");
    assert_eq!(h.person.cards()[0].question, Question::Consent);
}

#[test]
fn unknown_private_and_unadmitted_names_are_refused_without_asking() {
    let h = harness();
    let s = cli_session(&h);
    let mut turn = h.runtime.begin_turn(&s, owner(), "").unwrap();
    for name in [
        "nothing__here",
        "weather__private_helper",
        "group-admin__group_poll",
    ] {
        let out = turn.call(name, json!({})).unwrap();
        assert_eq!(out.status, CallStatus::Unknown, "{name}: {out:?}");
        assert_eq!(error_text(&out.content), format!("unknown tool: {name}"));
    }
    // Once the package is open, its private tool is nameable and refused, without a question.
    turn.call("read_skill", json!({"id": "weather"})).unwrap();
    let out = turn.call("weather__private_helper", json!({})).unwrap();
    assert_eq!(out.status, CallStatus::Refused, "{out:?}");
    assert!(h.person.cards().is_empty());
    // Refused calls are audited too.
    let audit = h
        .store
        .query_audit(&AuditQuery {
            session: Some(s.clone()),
            ..Default::default()
        })
        .unwrap();
    assert!(audit.iter().any(|r| r.entry.status == AuditStatus::Refused
        && r.entry.tool.as_deref() == Some("weather.private_helper")));
    assert!(
        audit
            .iter()
            .filter(|r| r.entry.status == AuditStatus::Refused)
            .count()
            >= 4
    );
}

#[test]
fn a_cli_request_never_gets_a_group_scoped_tool_and_a_group_does() {
    let h = harness();
    let cli = cli_session(&h);
    let turn = h.runtime.begin_turn(&cli, owner(), "").unwrap();
    assert!(
        !turn
            .tools()
            .unwrap()
            .iter()
            .any(|t| t.name == "group-admin__group_poll")
    );
    let group = group_session(&h);
    h.person.answer(&[Answer::AllowForSession]);
    let mut turn = h.runtime.begin_turn(&group, owner(), "").unwrap();
    let out = turn.call("group-admin__group_poll", json!({})).unwrap();
    assert_eq!(out.status, CallStatus::Ok, "{out:?}");
}

#[test]
fn a_group_conversation_whose_sender_changes_loses_master_tools() {
    let h = harness();
    let s = group_session(&h);
    h.person.answer(&[Answer::AllowForSession]);
    let mut turn = h.runtime.begin_turn(&s, owner(), "").unwrap();
    assert_eq!(
        turn.call("group-admin__master_only", json!({}))
            .unwrap()
            .status,
        CallStatus::Ok
    );
    drop(turn);
    // The next message comes from an ordinary member: loaded or not, the tool is gone.
    let mut turn = h.runtime.begin_turn(&s, member("alice"), "").unwrap();
    assert!(
        !turn
            .tools()
            .unwrap()
            .iter()
            .any(|t| t.name == "group-admin__master_only")
    );
    assert_eq!(
        turn.call("group-admin__master_only", json!({}))
            .unwrap()
            .status,
        CallStatus::Unknown
    );
}

#[test]
fn dangerous_tools_need_a_person_every_time_and_a_refusal_locks_them_for_the_turn() {
    let h = harness();
    let s = group_session(&h);
    h.person.answer(&[Answer::AllowForSession, Answer::Allow]);
    let mut turn = h.runtime.begin_turn(&s, owner(), "踢掉 42").unwrap();
    let out = turn
        .call("group-admin__kick_member", json!({"user": "42"}))
        .unwrap();
    assert_eq!(out.status, CallStatus::Ok, "{out:?}");
    let cards = h.person.cards();
    assert!(
        cards[1].needs_person && cards[1].risk_categories == ["member"],
        "{cards:?}"
    );
    // Every call asks again; a no is final for the turn.
    h.person.clear();
    h.person.answer(&[Answer::Deny]);
    let out = turn
        .call("group-admin__kick_member", json!({"user": "43"}))
        .unwrap();
    assert_eq!(
        error_text(&out.content),
        "refused; needs human approval; do not retry"
    );
    h.person.clear();
    let out = turn
        .call("group-admin__kick_member", json!({"user": "44"}))
        .unwrap();
    assert_eq!(out.status, CallStatus::Refused);
    assert!(
        h.person.cards().is_empty(),
        "refused at once, without asking"
    );
    assert_eq!(h.calls.lock().unwrap().len(), 1);
}

#[test]
fn invalid_arguments_get_the_validators_message_and_three_retries() {
    let h = harness();
    let s = cli_session(&h);
    let mut turn = h.runtime.begin_turn(&s, owner(), "").unwrap();
    for attempt in 1..=3 {
        let out = turn
            .call("weather__forecast", json!({"date": "明天"}))
            .unwrap();
        assert_eq!(out.status, CallStatus::Invalid);
        assert!(
            error_text(&out.content).contains("\"city\" is a required property"),
            "{attempt}: {out:?}"
        );
    }
    let out = turn.call("weather__forecast", json!({})).unwrap();
    assert!(
        error_text(&out.content).contains("stop and ask the user"),
        "{out:?}"
    );
}

#[test]
fn relative_dates_are_resolved_from_the_session_clock() {
    let h = harness();
    let s = cli_session(&h);
    h.person.answer(&[Answer::AllowForSession]);
    let mut turn = h.runtime.begin_turn(&s, owner(), "北京明天多少度").unwrap();
    let out = turn
        .call(
            "weather__forecast",
            json!({"city": "北京", "date": "2026-11-29"}),
        )
        .unwrap();
    assert_eq!(out.status, CallStatus::Ok, "{out:?}");
    assert_eq!(out.content["args"]["date"], "2026-11-30");
    assert_eq!(out.content["_dates"][0]["from"], "2026-11-29");
    let out = turn
        .call("weather__forecast", json!({"city": "上海", "date": "后天"}))
        .unwrap();
    assert_eq!(out.content["args"]["date"], "2026-12-01");
}

#[test]
fn perception_cache_answers_identical_calls_and_the_audit_says_so() {
    let h = harness();
    let s = cli_session(&h);
    h.person.answer(&[Answer::AllowForSession]);
    let mut turn = h.runtime.begin_turn(&s, owner(), "").unwrap();
    let first = turn
        .call("weather__forecast", json!({"city": "北京"}))
        .unwrap();
    let second = turn
        .call("weather__forecast", json!({"city": "北京"}))
        .unwrap();
    assert!(!first.cached && second.cached);
    assert_eq!(h.calls.lock().unwrap().len(), 1);
    let audit = h
        .store
        .query_audit(&AuditQuery {
            session: Some(s),
            ..Default::default()
        })
        .unwrap();
    assert!(audit[0].entry.cached);
}

#[test]
fn the_perception_cache_is_shared_by_every_runtime_on_one_database() {
    let h = harness();
    let s = cli_session(&h);
    h.person.answer(&[Answer::AllowForSession]);
    let mut turn = h.runtime.begin_turn(&s, owner(), "").unwrap();
    let first = turn
        .call("weather__forecast", json!({"city": "北京"}))
        .unwrap();
    assert!(!first.cached);
    // Another process of the state folder: nothing shared in memory.
    let next = reopen(&h);
    let s2 = cli_session(&next);
    next.person.answer(&[Answer::AllowForSession]);
    let mut turn = next.runtime.begin_turn(&s2, owner(), "").unwrap();
    let second = turn
        .call("weather__forecast", json!({"city": "北京"}))
        .unwrap();
    assert!(second.cached, "{second:?}");
    assert_eq!(second.content, first.content);
    assert!(next.calls.lock().unwrap().is_empty());
}

#[test]
fn a_perception_call_with_a_secret_argument_is_never_cached() {
    let dir = tempfile::tempdir().unwrap();
    let packages = dir.path().join("packages");
    fixture(&packages);
    write(
        &packages,
        "vault/quiver.yaml",
        "id: vault\ndescription: Accounts\n",
    );
    write(
        &packages,
        "vault/tools/peek/tool.yaml",
        "description: Look up an account\ncategory: perception\nexpose: true\ncache: 60\ninput:\n  type: object\n  properties:\n    account: {type: string}\n    token: {type: string, secret: true}\n  required: [account]\nrun: {command: [a]}\n",
    );
    let db = dir.path().join("state.db");
    let h = build(dir, &packages, db, Default::default(), None);
    let s = cli_session(&h);
    h.person.answer(&[Answer::AllowForSession]);
    let mut turn = h.runtime.begin_turn(&s, owner(), "").unwrap();
    // (arguments, whether the second identical call comes from the cache)
    let cases = [
        (json!({"account": "a"}), true),
        (json!({"account": "b", "token": "t0ps3cret"}), false),
    ];
    for (arguments, cached) in cases {
        let first = turn.call("vault__peek", arguments.clone()).unwrap();
        assert_eq!(first.status, CallStatus::Ok, "{first:?}");
        let second = turn.call("vault__peek", arguments.clone()).unwrap();
        assert_eq!(
            (first.cached, second.cached),
            (false, cached),
            "{arguments}"
        );
    }
}

#[test]
fn package_code_never_runs_unsandboxed() {
    let h = harness();
    let s = cli_session(&h);
    h.person.answer(&[Answer::AllowForSession]);
    let mut turn = h.runtime.begin_turn(&s, owner(), "").unwrap();
    let out = turn.call("notes__real_code", json!({})).unwrap();
    assert_eq!(out.status, CallStatus::Error);
    assert!(error_text(&out.content).contains("sandbox"), "{out:?}");
}

#[test]
fn control_plane_stops_and_restricts() {
    let h = harness();
    let s = cli_session(&h);
    h.runtime
        .set_control(
            ControlPlane {
                emergency_stop: true,
                ..Default::default()
            },
            "operator",
        )
        .unwrap();
    let mut turn = h.runtime.begin_turn(&s, owner(), "").unwrap();
    assert_eq!(
        turn.call("weather__forecast", json!({"city": "x"}))
            .unwrap()
            .status,
        CallStatus::Refused
    );
    drop(turn);
    h.runtime
        .set_control(
            ControlPlane {
                read_only: true,
                ..Default::default()
            },
            "operator",
        )
        .unwrap();
    h.person
        .answer(&[Answer::AllowForSession, Answer::AllowForSession]);
    let mut turn = h.runtime.begin_turn(&s, owner(), "").unwrap();
    assert_eq!(
        turn.call("weather__forecast", json!({"city": "x"}))
            .unwrap()
            .status,
        CallStatus::Ok
    );
    assert_eq!(
        turn.call("notes__add_note", json!({"text": "x"}))
            .unwrap()
            .status,
        CallStatus::Refused
    );
}

#[test]
fn a_skills_disallowed_tools_last_for_the_turn_only() {
    let h = harness();
    let s = cli_session(&h);
    h.person
        .answer(&[Answer::AllowForSession, Answer::Allow, Answer::Allow]);
    let mut turn = h.runtime.begin_turn(&s, owner(), "").unwrap();
    turn.call("read_skill", json!({"id": "weather"})).unwrap();
    let out = turn.call("notes__add_note", json!({"text": "x"})).unwrap();
    assert_eq!(out.status, CallStatus::Refused, "{out:?}");
    drop(turn);
    let mut next = h.runtime.begin_turn(&s, owner(), "").unwrap();
    let out = next.call("notes__add_note", json!({"text": "x"})).unwrap();
    assert_eq!(out.status, CallStatus::Ok, "restored next turn: {out:?}");
}

#[test]
fn switching_a_package_off_makes_its_tools_unknown() {
    let h = harness();
    let s = cli_session(&h);
    h.runtime.set_enabled("weather", false, "operator").unwrap();
    let mut turn = h.runtime.begin_turn(&s, owner(), "").unwrap();
    assert_eq!(
        turn.call("weather__forecast", json!({"city": "x"}))
            .unwrap()
            .status,
        CallStatus::Unknown
    );
    assert!(
        error_text(
            &turn
                .call("read_skill", json!({"id": "weather"}))
                .unwrap()
                .content
        )
        .starts_with("no such skill")
    );
}

#[test]
fn once_asks_on_the_first_call_per_session_and_secrets_never_reach_the_card_or_audit() {
    let h = harness();
    let s = cli_session(&h);
    h.person
        .answer(&[Answer::AllowForSession, Answer::AllowForSession]);
    let mut turn = h.runtime.begin_turn(&s, owner(), "").unwrap();
    let args = json!({"server": "notes.example.com", "token": "hunter2"});
    assert_eq!(
        turn.call("notes__sync_notes", args.clone()).unwrap().status,
        CallStatus::Ok
    );
    let cards = h.person.cards();
    assert_eq!(cards.len(), 2, "consent, then the `once` approval");
    assert_eq!(
        cards[1].arguments,
        json!({"server": "notes.example.com", "token": "[secret]"})
    );
    // The second call in the session asks nothing.
    h.person.clear();
    assert_eq!(
        turn.call("notes__sync_notes", args.clone()).unwrap().status,
        CallStatus::Ok
    );
    assert!(h.person.cards().is_empty());
    // The digest ignores the secret: another token gives the same digest.
    turn.call(
        "notes__sync_notes",
        json!({"server": "notes.example.com", "token": "other"}),
    )
    .unwrap();
    let audit = h
        .store
        .query_audit(&AuditQuery {
            session: Some(s),
            ..Default::default()
        })
        .unwrap();
    assert_eq!(
        audit[0].entry.argument_digest,
        audit[1].entry.argument_digest
    );
    let stored = serde_json::to_string(&audit).unwrap();
    assert!(!stored.contains("hunter2"));
}

#[test]
fn a_reviewing_model_answers_ordinary_approvals_but_never_a_dangerous_tool() {
    let h = harness_with_reviewer();
    let reviewer = h.reviewer.clone().unwrap();
    let s = group_session(&h);
    // Consent is the person's; the action tool's approval goes to the reviewer, who says no.
    h.person.answer(&[Answer::AllowForSession]);
    reviewer.answer(&[Answer::Deny]);
    let mut turn = h.runtime.begin_turn(&s, owner(), "").unwrap();
    let out = turn.call("notes__add_note", json!({"text": "x"})).unwrap();
    assert_eq!(out.status, CallStatus::Refused, "{out:?}");
    assert_eq!(reviewer.cards().len(), 1);
    assert_eq!(reviewer.cards()[0].question, Question::Approval);
    // A dangerous tool never reaches the reviewer: a person answers.
    h.person.answer(&[Answer::AllowForSession, Answer::Allow]);
    let out = turn
        .call("group-admin__kick_member", json!({"user": "42"}))
        .unwrap();
    assert_eq!(out.status, CallStatus::Ok, "{out:?}");
    assert_eq!(
        reviewer.cards().len(),
        1,
        "the reviewer saw no dangerous card"
    );
}
