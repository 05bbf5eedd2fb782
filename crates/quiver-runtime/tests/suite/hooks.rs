//! The operator's hooks: they run after validation and before anyone is asked, they can only
//! block, and a hook that fails blocks the call (fails closed, unlike zhin.js).

use std::sync::Arc;

use quiver_runtime::approver::Answer;
use quiver_runtime::hooks::{CommandHookSpec, Hook, HookError, HookEvent, HookVerdict};
use quiver_runtime::{CallStatus, RuntimeConfig};
use quiver_store::{AuditQuery, AuditStep};
use serde_json::{Value, json};

use super::common::*;

/// An in-process hook that behaves as told.
struct Scripted(&'static str);

impl Hook for Scripted {
    fn name(&self) -> &str {
        self.0
    }

    fn applies_to(&self, tool: &str) -> bool {
        tool.starts_with("notes.")
    }

    fn before_call(&self, _event: &HookEvent) -> Result<HookVerdict, HookError> {
        match self.0 {
            "panics" => panic!("a bug in the hook"),
            "errs" => Err(HookError("the policy server is down".into())),
            "blocks" => Ok(HookVerdict::Block("no notes on Sundays".into())),
            _ => Ok(HookVerdict::Continue),
        }
    }
}

fn command_hook(name: &str, script: &str, timeout: u64) -> CommandHookSpec {
    CommandHookSpec {
        name: name.into(),
        command: vec!["sh".into(), "-c".into(), script.into()],
        tools: vec!["notes.*".into()],
        timeout,
        cwd: None,
    }
}

/// Calls `notes.add_note` once with consent and approval answered yes if asked.
fn add_note(h: &Harness, text: &str) -> (quiver_runtime::CallOutcome, String) {
    let s = cli_session(h);
    h.person.answer(&[Answer::AllowForSession, Answer::Allow]);
    let mut turn = h.runtime.begin_turn(&s, owner(), "").unwrap();
    let out = turn
        .call("notes__add_note", json!({ "text": text }))
        .unwrap();
    (out, s)
}

#[test]
fn a_throwing_hook_fails_closed() {
    for (kind, expected) in [
        ("panics", "failed (it panicked)"),
        ("errs", "failed (the policy server is down)"),
        ("blocks", "blocked this call: no notes on Sundays"),
    ] {
        let mut h = harness();
        h.runtime.add_hook(Arc::new(Scripted(kind)));
        let (out, session) = add_note(&h, "买牛奶");
        assert_eq!(out.status, CallStatus::Refused, "{kind}: {out:?}");
        let error = error_text(&out.content);
        assert!(error.contains(expected), "{kind}: {error}");
        assert!(error.ends_with("do not retry"), "{kind}: {error}");
        assert!(
            h.calls.lock().unwrap().is_empty(),
            "{kind}: the tool never ran"
        );
        assert!(
            h.person.cards().is_empty(),
            "{kind}: nobody is asked about a call a hook refuses"
        );
        let audit = h
            .store
            .query_audit(&AuditQuery {
                session: Some(session),
                ..AuditQuery::default()
            })
            .unwrap();
        assert!(
            audit[0]
                .entry
                .decisions
                .iter()
                .any(|d| d.step == AuditStep::Hook && d.decision == "refuse"),
            "{kind}: {:?}",
            audit[0].entry.decisions
        );
    }
}

#[test]
fn a_hook_refusal_is_final_for_the_turn() {
    let mut h = harness();
    h.runtime.add_hook(Arc::new(Scripted("blocks")));
    let s = cli_session(&h);
    let mut turn = h.runtime.begin_turn(&s, owner(), "").unwrap();
    let first = turn.call("notes__add_note", json!({"text": "a"})).unwrap();
    assert_eq!(first.status, CallStatus::Refused);
    let second = turn.call("notes__add_note", json!({"text": "b"})).unwrap();
    assert_eq!(second.status, CallStatus::Refused);
    assert!(
        error_text(&second.content).contains("already refused in this turn"),
        "{second:?}"
    );
}

#[test]
fn a_passing_hook_lets_the_call_go_on_to_approval() {
    let mut h = harness();
    h.runtime.add_hook(Arc::new(Scripted("passes")));
    let (out, _) = add_note(&h, "x");
    assert_eq!(out.status, CallStatus::Ok, "{out:?}");
    assert_eq!(
        h.person.cards().len(),
        2,
        "consent and approval still asked"
    );
}

#[test]
fn hooks_look_only_at_the_tools_they_match() {
    let mut h = harness();
    h.runtime.add_hook(Arc::new(Scripted("blocks")));
    let s = cli_session(&h);
    h.person.answer(&[Answer::AllowForSession]);
    let mut turn = h.runtime.begin_turn(&s, owner(), "").unwrap();
    let out = turn
        .call("weather__forecast", json!({"city": "北京"}))
        .unwrap();
    assert_eq!(out.status, CallStatus::Ok, "{out:?}");
}

#[test]
fn command_hooks_answer_by_exit_status_and_fail_closed() {
    let dir = tempfile::tempdir().unwrap();
    let seen = dir.path().join("event.json");
    let cases: Vec<(CommandHookSpec, Option<&str>)> = vec![
        (
            command_hook("record", &format!("cat > '{}'", seen.display()), 10),
            None,
        ),
        (
            command_hook("exit-2", "echo '不许记笔记' >&2; exit 2", 10),
            Some("blocked this call: 不许记笔记"),
        ),
        (
            command_hook(
                "json-block",
                r#"echo '{"decision": "block", "reason": "quota"}'"#,
                10,
            ),
            Some("blocked this call: quota"),
        ),
        (
            command_hook("exit-1", "exit 1", 10),
            Some("failed (it exited with status 1)"),
        ),
        (
            command_hook("garbage", "echo not json", 10),
            Some("failed (its output is not the expected JSON answer"),
        ),
        (
            command_hook("slow", "sleep 5", 1),
            Some("failed (it did not answer within 1 s)"),
        ),
        (
            CommandHookSpec {
                command: vec!["/nonexistent/hook".into()],
                ..command_hook("missing", "", 10)
            },
            Some("failed (it could not start"),
        ),
    ];
    for (spec, refusal) in cases {
        let name = spec.name.clone();
        let config = RuntimeConfig {
            hooks: vec![spec],
            ..RuntimeConfig::default()
        };
        let h = harness_with(config);
        let (out, _) = add_note(&h, "买牛奶");
        match refusal {
            None => assert_eq!(out.status, CallStatus::Ok, "{name}: {out:?}"),
            Some(expected) => {
                assert_eq!(out.status, CallStatus::Refused, "{name}: {out:?}");
                let error = error_text(&out.content);
                assert!(error.contains(expected), "{name}: {error}");
                assert!(h.calls.lock().unwrap().is_empty(), "{name}: did not run");
            }
        }
    }
    let event: Value = serde_json::from_str(&std::fs::read_to_string(&seen).unwrap()).unwrap();
    assert_eq!(event["event"], "before_call");
    assert_eq!(event["tool"], "notes.add_note");
    assert_eq!(event["arguments"], json!({"text": "买牛奶"}));
    assert_eq!(event["principal"]["user_id"], "owner");
}
