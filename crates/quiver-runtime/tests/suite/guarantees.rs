//! The guarantees a reviewer reads first, tried through every kind of call the runtime runs:
//! a package tool, a skill script, an agent. Each kind takes the same step 5 (hooks, control
//! plane, consent, approval), so none of them may run where another would be refused.

use std::sync::{Arc, Mutex};

use quiver_policy::{ControlPlane, Origin, ScopeKind};
use quiver_runtime::approver::Answer;
use quiver_runtime::hooks::{Hook, HookError, HookEvent, HookVerdict};
use quiver_runtime::runtime::{AgentReply, AgentRunner, AgentTask};
use quiver_runtime::{CallStatus, Profile, Runtime, RuntimeConfig, SessionRequest};
use serde_json::{Value, json};

use super::common::*;

/// Records every run it is handed; never runs anything itself.
#[derive(Default)]
struct RecordingRunner(Mutex<Vec<String>>);

impl AgentRunner for RecordingRunner {
    fn run(&self, _runtime: &Runtime, task: AgentTask) -> Result<AgentReply, String> {
        self.0.lock().unwrap().push(task.agent.unwrap_or_default());
        Ok(AgentReply {
            session: "child".into(),
            reply: "done".into(),
        })
    }
}

/// Blocks every call it sees, and remembers their names.
#[derive(Default)]
struct BlockAll(Mutex<Vec<String>>);

impl Hook for BlockAll {
    fn name(&self) -> &str {
        "block-all"
    }

    fn applies_to(&self, _tool: &str) -> bool {
        true
    }

    fn before_call(&self, event: &HookEvent) -> Result<HookVerdict, HookError> {
        self.0.lock().unwrap().push(event.tool.clone());
        Ok(HookVerdict::Block("not today".into()))
    }
}

/// The fixture plus a package with a skill script, an exposed agent, a private agent and a
/// private tool, and a second package whose agent is not `gem`'s.
fn with_agents_and_scripts() -> (Harness, Arc<RecordingRunner>) {
    let dir = tempfile::tempdir().unwrap();
    let packages = dir.path().join("packages");
    fixture(&packages);
    write(&packages, "gem/quiver.yaml", "id: gem\ndescription: Gems\n");
    write(
        &packages,
        "gem/SKILL.md",
        "---\nname: gem\ndescription: How to use gems.\n---\nRun scripts/mark.sh.\n",
    );
    write(&packages, "gem/scripts/mark.sh", "echo marked\n");
    write(
        &packages,
        "gem/agents/helper.md",
        "---\ndescription: Helps with gems\nexpose: true\n---\nYou help.\n",
    );
    write(
        &packages,
        "gem/agents/inner.md",
        "---\ndescription: Works inside gem\n---\nYou work.\n",
    );
    write(
        &packages,
        "gem/tools/priv_tool/tool.yaml",
        "description: Private to gem\ncategory: perception\napproval: never\nrun: {command: [a]}\n",
    );
    write(
        &packages,
        "other/quiver.yaml",
        "id: other\ndescription: Other\n",
    );
    write(
        &packages,
        "other/agents/outsider.md",
        "---\ndescription: Not gem's\n---\nYou are elsewhere.\n",
    );
    let db = dir.path().join("state.db");
    let h = build(dir, &packages, db, RuntimeConfig::default(), None);
    let runner = Arc::new(RecordingRunner::default());
    assert!(h.runtime.set_agent_runner(runner.clone()));
    (h, runner)
}

fn session_of(h: &Harness, agent: &str) -> String {
    h.runtime
        .create_session(&SessionRequest {
            origin: Origin::default(),
            agent: agent.into(),
            principal: owner(),
            profile: Profile::Interactive,
        })
        .unwrap()
}

/// One call of each kind, from a chat session that has read the `gem` skill (so its script
/// may run) and granted consent to every package it touches.
struct Kind {
    name: &'static str,
    tool: &'static str,
    arguments: Value,
}

fn kinds() -> Vec<Kind> {
    vec![
        Kind {
            name: "package tool",
            tool: "notes__add_note",
            arguments: json!({"text": "x"}),
        },
        Kind {
            name: "skill script",
            tool: "run_skill_script",
            arguments: json!({"skill": "gem", "script": "mark.sh", "args": []}),
        },
        Kind {
            name: "agent",
            tool: "gem__helper",
            arguments: json!({"task": "help"}),
        },
    ]
}

/// A chat session that read the `gem` skill.
fn prepared_session(h: &Harness) -> String {
    let s = session_of(h, "chat");
    let mut turn = h.runtime.begin_turn(&s, owner(), "").unwrap();
    let read = turn.call("read_skill", json!({"id": "gem"})).unwrap();
    assert_eq!(read.status, CallStatus::Ok, "{read:?}");
    s
}

fn ran(h: &Harness, runner: &RecordingRunner) -> usize {
    h.calls.lock().unwrap().len() + runner.0.lock().unwrap().len()
}

#[test]
fn nothing_runs_under_emergency_stop_whatever_the_kind_of_call() {
    for kind in kinds() {
        let (h, runner) = with_agents_and_scripts();
        let s = prepared_session(&h);
        h.runtime
            .set_control(
                ControlPlane {
                    emergency_stop: true,
                    ..Default::default()
                },
                "operator",
            )
            .unwrap();
        h.person.answer(&[Answer::AllowForSession; 4]);
        let mut turn = h.runtime.begin_turn(&s, owner(), "").unwrap();
        let out = turn.call(kind.tool, kind.arguments.clone()).unwrap();
        assert_eq!(out.status, CallStatus::Refused, "{}: {out:?}", kind.name);
        assert!(
            error_text(&out.content).contains("stopped all tools"),
            "{}: {out:?}",
            kind.name
        );
        assert_eq!(
            ran(&h, &runner),
            0,
            "{} ran under emergency stop",
            kind.name
        );
        assert!(
            h.person.cards().is_empty(),
            "{}: nobody is asked",
            kind.name
        );
    }
}

#[test]
fn read_only_lets_no_script_run_and_the_agent_still_reasons() {
    let cases = [
        ("skill script", 1, CallStatus::Refused),
        ("agent", 2, CallStatus::Ok),
    ];
    for (name, index, want) in cases {
        let (h, runner) = with_agents_and_scripts();
        let s = prepared_session(&h);
        h.runtime
            .set_control(
                ControlPlane {
                    read_only: true,
                    ..Default::default()
                },
                "operator",
            )
            .unwrap();
        h.person.answer(&[Answer::AllowForSession; 4]);
        let kind = &kinds()[index];
        let mut turn = h.runtime.begin_turn(&s, owner(), "").unwrap();
        let out = turn.call(kind.tool, kind.arguments.clone()).unwrap();
        assert_eq!(out.status, want, "{name}: {out:?}");
        assert_eq!(
            ran(&h, &runner),
            usize::from(want == CallStatus::Ok),
            "{name}"
        );
    }
}

#[test]
fn the_operators_hooks_see_every_kind_of_call() {
    for kind in kinds() {
        let (mut h, runner) = with_agents_and_scripts();
        let hook = Arc::new(BlockAll::default());
        h.runtime.add_hook(hook.clone());
        let s = prepared_session(&h);
        h.person.answer(&[Answer::AllowForSession; 4]);
        let mut turn = h.runtime.begin_turn(&s, owner(), "").unwrap();
        let out = turn.call(kind.tool, kind.arguments.clone()).unwrap();
        assert_eq!(out.status, CallStatus::Refused, "{}: {out:?}", kind.name);
        assert!(error_text(&out.content).contains("not today"), "{out:?}");
        assert_eq!(hook.0.lock().unwrap().len(), 1, "{}", kind.name);
        assert_eq!(
            ran(&h, &runner),
            0,
            "{} ran past a blocking hook",
            kind.name
        );
    }
}

#[test]
fn a_skill_script_asks_for_consent_and_approval_like_any_action() {
    let (h, _runner) = with_agents_and_scripts();
    let s = prepared_session(&h);
    let script = &kinds()[1];
    // Consent refused: nothing runs, and the script is locked for the turn.
    h.person.answer(&[Answer::Deny]);
    let mut turn = h.runtime.begin_turn(&s, owner(), "").unwrap();
    let out = turn.call(script.tool, script.arguments.clone()).unwrap();
    assert_eq!(out.status, CallStatus::Refused, "{out:?}");
    assert_eq!(h.person.cards().len(), 1);
    assert!(h.calls.lock().unwrap().is_empty());
    drop(turn);
    // A new session: consent and the action's approval are both asked, then it runs.
    let s = prepared_session(&h);
    h.person.clear();
    h.person.answer(&[Answer::AllowForSession, Answer::Allow]);
    let mut turn = h.runtime.begin_turn(&s, owner(), "").unwrap();
    let out = turn.call(script.tool, script.arguments.clone()).unwrap();
    assert_eq!(out.status, CallStatus::Ok, "{out:?}");
    let questions: Vec<String> = h
        .person
        .cards()
        .iter()
        .map(|c| format!("{:?}", c.question))
        .collect();
    assert_eq!(questions, ["Consent", "Approval"]);
    assert_eq!(h.calls.lock().unwrap().len(), 1);
}

#[test]
fn a_private_tool_answers_its_own_agents_only() {
    // (session agent, expected status, whether a question is asked)
    let cases = [
        ("gem.inner", CallStatus::Ok),
        ("chat", CallStatus::Unknown),
        ("other.outsider", CallStatus::Unknown),
    ];
    for (agent, want) in cases {
        let (h, _runner) = with_agents_and_scripts();
        let s = session_of(&h, agent);
        let mut turn = h.runtime.begin_turn(&s, owner(), "").unwrap();
        let out = turn.call("gem.priv_tool", json!({})).unwrap();
        assert_eq!(out.status, want, "{agent}: {out:?}");
        assert!(
            h.person.cards().is_empty(),
            "{agent}: no consent question for a package's own agent, none for a refusal"
        );
        assert_eq!(
            h.calls.lock().unwrap().len(),
            usize::from(want == CallStatus::Ok),
            "{agent}"
        );
    }
}

#[test]
fn a_tool_that_exists_but_may_not_be_called_reads_as_one_that_does_not_exist() {
    let h = harness();
    // `master_only` exists but a plain member is not admitted; `nope` does not exist.
    let s = group_session(&h);
    for (exists, missing) in [
        ("group-admin.master_only", "group-admin.nope"),
        ("group-admin__master_only", "group-admin__nope"),
        ("weather.private_helper", "weather.no_helper"),
    ] {
        let mut turn = h.runtime.begin_turn(&s, member("42"), "").unwrap();
        let a = turn.call(exists, json!({})).unwrap();
        let b = turn.call(missing, json!({})).unwrap();
        assert_eq!(a.status, b.status, "{exists} vs {missing}");
        assert_eq!(
            error_text(&a.content).replace(exists, "NAME"),
            error_text(&b.content).replace(missing, "NAME"),
            "{exists} vs {missing}"
        );
    }
}

#[test]
fn the_perception_cache_never_answers_another_sender_or_origin() {
    let h = harness();
    let group = |id: &str| {
        h.runtime
            .create_session(&SessionRequest {
                origin: Origin::on("qq", ScopeKind::Group, id),
                agent: "chat".into(),
                principal: owner(),
                profile: Profile::Interactive,
            })
            .unwrap()
    };
    let (g1, g2) = (group("1"), group("2"));
    let args = json!({"city": "北京"});
    // (session, sender, answered from the cache)
    let cases = [
        (&g1, member("alice"), false),
        (&g1, member("alice"), true),
        (&g1, member("bob"), false),
        (&g2, member("alice"), false),
        (&g2, member("bob"), false),
        (&g2, member("bob"), true),
    ];
    for (i, (session, sender, cached)) in cases.into_iter().enumerate() {
        h.person.answer(&[Answer::AllowForSession]);
        let mut turn = h.runtime.begin_turn(session, sender, "").unwrap();
        let out = turn.call("weather__forecast", args.clone()).unwrap();
        assert_eq!(out.status, CallStatus::Ok, "case {i}: {out:?}");
        assert_eq!(out.cached, cached, "case {i}");
    }
}
