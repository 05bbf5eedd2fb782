//! The guarantees of issue 12, one table each: nothing runs under emergency-stop whatever the
//! kind of call; a private tool answers its own package's agents only; what is offered is what
//! may be called; and the defects found by trying it as a user and as an attacker would.

use std::sync::{Arc, Mutex};

use quiver_policy::{ControlPlane, Origin, Principal, ScopeKind};
use quiver_runtime::approver::Answer;
use quiver_runtime::hooks::{Hook, HookError, HookEvent, HookVerdict};
use quiver_runtime::runtime::{AgentReply, AgentRunner, AgentTask};
use quiver_runtime::{CallStatus, Profile, Runtime, RuntimeConfig, SessionRequest};
use serde_json::{Value, json};

use super::common::*;

/// The fixture plus: a skill script, a package with a private tool and two agents, a probe
/// package with a master-only tool, and a package whose required setting is unset.
fn harness12() -> Harness {
    let dir = tempfile::tempdir().unwrap();
    let packages = dir.path().join("packages");
    fixture(&packages);
    write(&packages, "weather/scripts/mark.sh", "echo marked\n");
    write(&packages, "gem/quiver.yaml", "id: gem\ndescription: Gems\n");
    write(
        &packages,
        "gem/tools/priv_tool/tool.yaml",
        "description: Private to gem\ncategory: action\napproval: never\nrun: {command: [a]}\n",
    );
    write(
        &packages,
        "gem/agents/inner.md",
        "---\ndescription: Gem's own worker\ntools: [gem.priv_tool]\n---\nYou work inside gem.\n",
    );
    write(
        &packages,
        "gem/agents/bot.md",
        "---\ndescription: Answers questions about gems\nexpose: true\n---\nYou answer.\n",
    );
    write(
        &packages,
        "other/quiver.yaml",
        "id: other\ndescription: Another package\n",
    );
    write(
        &packages,
        "other/agents/spy.md",
        "---\ndescription: Another package's agent\n---\nYou spy.\n",
    );
    write(
        &packages,
        "probe/quiver.yaml",
        "id: probe\ndescription: Probe\n",
    );
    write(
        &packages,
        "probe/tools/t_qq/tool.yaml",
        "description: Owner only\ncategory: perception\nexpose: true\npermissions: ['role(master)']\nrun: {command: [a]}\n",
    );
    write(
        &packages,
        "cfgd/quiver.yaml",
        "id: cfgd\ndescription: Needs a key\nconfig:\n  type: object\n  properties:\n    api_key: {type: string, secret: true}\n  required: [api_key]\n",
    );
    write(
        &packages,
        "cfgd/tools/lookup/tool.yaml",
        "description: Looks things up\ncategory: perception\nexpose: true\nrun: {command: [a]}\n",
    );
    let db = dir.path().join("state.db");
    build(dir, &packages, db, RuntimeConfig::default(), None)
}

/// Runs every agent task by answering "done", and remembers the tasks.
#[derive(Default)]
struct FakeRunner(Mutex<Vec<String>>);

impl AgentRunner for FakeRunner {
    fn run(&self, _runtime: &Runtime, task: AgentTask) -> Result<AgentReply, String> {
        self.0.lock().unwrap().push(task.task);
        Ok(AgentReply {
            session: "ses_child".into(),
            reply: "done".into(),
        })
    }
}

/// Blocks every call it sees, and remembers the tools.
#[derive(Default)]
struct Blocker(Mutex<Vec<String>>);

impl Hook for Blocker {
    fn name(&self) -> &str {
        "blocker"
    }

    fn applies_to(&self, tool: &str) -> bool {
        tool.starts_with("weather.") || tool.starts_with("gem.")
    }

    fn before_call(&self, event: &HookEvent) -> Result<HookVerdict, HookError> {
        self.0.lock().unwrap().push(event.tool.clone());
        Ok(HookVerdict::Block("not today".into()))
    }
}

fn session(runtime: &Runtime, agent: &str, origin: Origin, principal: Principal) -> String {
    runtime
        .create_session(&SessionRequest {
            origin,
            agent: agent.into(),
            principal,
            profile: Profile::Interactive,
        })
        .unwrap()
}

/// A call of each kind: `(what, name, arguments)`, after `read_skill("weather")` where a
/// script needs its skill active.
fn calls_of_every_kind() -> Vec<(&'static str, &'static str, Value)> {
    vec![
        ("package tool", "notes__add_note", json!({"text": "x"})),
        (
            "skill script",
            "run_skill_script",
            json!({"skill": "weather", "script": "mark.sh", "args": []}),
        ),
        ("agent", "gem__bot", json!({"task": "hello"})),
    ]
}

/// Activates the `weather` skill in `s` (reading never asks anyone).
fn activate_weather(h: &Harness, s: &str) {
    let mut turn = h.runtime.begin_turn(s, owner(), "").unwrap();
    let out = turn.call("read_skill", json!({"id": "weather"})).unwrap();
    assert_eq!(out.status, CallStatus::Ok, "{out:?}");
}

#[test]
fn issue_12_nothing_runs_under_emergency_stop_whatever_the_kind_of_call() {
    for (what, name, arguments) in calls_of_every_kind() {
        let h = harness12();
        let runner = Arc::new(FakeRunner::default());
        h.runtime.set_agent_runner(runner.clone());
        let s = cli_session(&h);
        activate_weather(&h, &s);
        h.runtime
            .set_control(
                ControlPlane {
                    emergency_stop: true,
                    ..Default::default()
                },
                "operator",
            )
            .unwrap();
        h.person.answer(&[Answer::AllowForSession, Answer::Allow]);
        let mut turn = h.runtime.begin_turn(&s, owner(), "").unwrap();
        let out = turn.call(name, arguments.clone()).unwrap();
        assert_eq!(out.status, CallStatus::Refused, "{what}: {out:?}");
        assert!(h.calls.lock().unwrap().is_empty(), "{what} ran");
        assert!(runner.0.lock().unwrap().is_empty(), "{what} ran an agent");
        assert!(h.person.cards().is_empty(), "{what}: nobody is asked");
        drop(turn);
        // With the stop lifted, the same call runs (after consent and approval).
        h.runtime
            .set_control(ControlPlane::default(), "operator")
            .unwrap();
        h.person.answer(&[Answer::AllowForSession, Answer::Allow]);
        let mut turn = h.runtime.begin_turn(&s, owner(), "").unwrap();
        let out = turn.call(name, arguments).unwrap();
        assert_eq!(out.status, CallStatus::Ok, "{what}: {out:?}");
        let ran = h.calls.lock().unwrap().len() + runner.0.lock().unwrap().len();
        assert_eq!(ran, 1, "{what}");
    }
}

#[test]
fn issue_12_hooks_and_consent_govern_scripts_and_agents_too() {
    for (what, name, arguments) in calls_of_every_kind().into_iter().skip(1) {
        // An operator's hook blocks the call before anyone is asked.
        let mut h = harness12();
        let hook = Arc::new(Blocker::default());
        h.runtime.add_hook(hook.clone());
        let runner = Arc::new(FakeRunner::default());
        h.runtime.set_agent_runner(runner.clone());
        let s = cli_session(&h);
        activate_weather(&h, &s);
        let mut turn = h.runtime.begin_turn(&s, owner(), "").unwrap();
        let out = turn.call(name, arguments.clone()).unwrap();
        assert_eq!(out.status, CallStatus::Refused, "{what}: {out:?}");
        assert!(error_text(&out.content).contains("not today"), "{what}");
        assert_eq!(hook.0.lock().unwrap().len(), 1, "{what}: the hook saw it");
        assert!(h.calls.lock().unwrap().is_empty() && runner.0.lock().unwrap().is_empty());
        drop(turn);
        // Without a hook, a user who refuses the package's consent stops it.
        let h = harness12();
        h.runtime.set_agent_runner(runner.clone());
        let s = cli_session(&h);
        activate_weather(&h, &s);
        h.person.answer(&[Answer::Deny]);
        let mut turn = h.runtime.begin_turn(&s, owner(), "").unwrap();
        let out = turn.call(name, arguments).unwrap();
        assert_eq!(out.status, CallStatus::Refused, "{what}: {out:?}");
        let cards = h.person.cards();
        assert_eq!(cards.len(), 1, "{what}: {cards:?}");
        assert!(h.calls.lock().unwrap().is_empty() && runner.0.lock().unwrap().is_empty());
    }
}

#[test]
fn issue_12_a_private_tool_is_callable_by_its_own_agent_only() {
    // (session agent, expected status, consent questions)
    let cases = [
        ("gem.inner", CallStatus::Ok, 0),
        ("other.spy", CallStatus::Unknown, 0),
        ("chat", CallStatus::Unknown, 0),
    ];
    for (agent, status, questions) in cases {
        let h = harness12();
        let s = session(&h.runtime, agent, Origin::default(), owner());
        h.person.answer(&[Answer::AllowForSession, Answer::Allow]);
        let mut turn = h.runtime.begin_turn(&s, owner(), "").unwrap();
        let out = turn.call("gem__priv_tool", json!({})).unwrap();
        assert_eq!(out.status, status, "{agent}: {out:?}");
        assert_eq!(h.person.cards().len(), questions, "{agent}");
        let ran = usize::from(status == CallStatus::Ok);
        assert_eq!(h.calls.lock().unwrap().len(), ran, "{agent}");
    }
}

#[test]
fn issue_12_an_unknown_tool_and_an_unadmitted_one_get_the_same_answer() {
    let h = harness12();
    let s = cli_session(&h);
    // The owner may call the probe by either name; a plain user may not, and cannot tell it
    // from a name that does not exist.
    h.person.answer(&[Answer::AllowForSession]);
    let mut turn = h.runtime.begin_turn(&s, owner(), "").unwrap();
    for name in ["probe.t_qq", "probe__t_qq"] {
        let out = turn.call(name, json!({})).unwrap();
        assert_eq!(out.status, CallStatus::Ok, "{name}: {out:?}");
    }
    drop(turn);
    let mut turn = h.runtime.begin_turn(&s, member("u1"), "").unwrap();
    let answers: Vec<(CallStatus, String)> =
        ["probe.t_qq", "probe.nope", "probe__t_qq", "probe__nope"]
            .iter()
            .map(|name| {
                let out = turn.call(name, json!({})).unwrap();
                (out.status, error_text(&out.content).replace(name, "NAME"))
            })
            .collect();
    for answer in &answers {
        assert_eq!(
            answer,
            &(CallStatus::Unknown, "unknown tool: NAME".to_owned())
        );
    }
}

#[test]
fn issue_12_the_perception_cache_never_answers_another_sender() {
    let h = harness12();
    let s = session(
        &h.runtime,
        "chat",
        Origin::on("qq", ScopeKind::Group, "2"),
        member("a"),
    );
    // (sender, whether the result comes from the cache)
    let cases = [("a", false), ("a", true), ("b", false), ("b", true)];
    h.person.answer(&[Answer::AllowForSession]);
    for (sender, cached) in cases {
        let mut turn = h.runtime.begin_turn(&s, member(sender), "").unwrap();
        let out = turn
            .call("weather__forecast", json!({"city": "Beijing"}))
            .unwrap();
        assert_eq!(out.status, CallStatus::Ok, "{sender}: {out:?}");
        assert_eq!(out.cached, cached, "{sender}");
    }
    assert_eq!(h.calls.lock().unwrap().len(), 2);
}

#[test]
fn issue_12_a_missing_setting_is_named_and_the_tool_marked_not_configured() {
    let h = harness12();
    let s = cli_session(&h);
    let mut turn = h.runtime.begin_turn(&s, owner(), "").unwrap();
    let out = turn.call("cfgd__lookup", json!({})).unwrap();
    assert_eq!(out.status, CallStatus::Error, "{out:?}");
    let text = error_text(&out.content);
    assert!(
        text.contains("`api_key`") && text.contains("not set"),
        "{text}"
    );
    assert!(h.calls.lock().unwrap().is_empty());
    let offer = turn.offer().unwrap();
    assert!(offer.tools.iter().all(|t| t.name != "cfgd__lookup"));
    assert!(
        offer
            .not_configured
            .iter()
            .any(|n| n.name == "cfgd__lookup" && n.setting == "api_key" && n.package == "cfgd"),
        "{:?}",
        offer.not_configured
    );
}

#[test]
fn issue_12_what_is_offered_is_what_may_be_called() {
    let h = harness12();
    let senders = [owner(), member("u1")];
    let origins = [Origin::default(), Origin::on("qq", ScopeKind::Group, "7")];
    let wires: Vec<String> = h
        .runtime
        .catalog()
        .items()
        .iter()
        .filter_map(|i| i.wire.clone())
        .collect();
    for origin in &origins {
        for sender in &senders {
            let s = session(&h.runtime, "chat", origin.clone(), sender.clone());
            // Open every package, so every exposed item is on offer where admitted.
            let mut turn = h.runtime.begin_turn(&s, sender.clone(), "").unwrap();
            for package in [
                "weather",
                "notes",
                "group-admin",
                "gem",
                "probe",
                "cfgd",
                "other",
            ] {
                turn.call("read_skill", json!({"id": package})).unwrap();
            }
            let offer = turn.offer().unwrap();
            let offered: Vec<&str> = offer.tools.iter().map(|t| t.name.as_str()).collect();
            for wire in &wires {
                // Nobody answers: a refusal for want of an answer still means the tool was
                // callable; "unknown", a private tool and an unset setting mean it was not.
                let out = turn
                    .call(wire, json!({"city": "x", "text": "x", "user": "x"}))
                    .unwrap();
                let error = error_text(&out.content);
                // An active skill's `disallowed-tools` takes a tool out of the list and
                // refuses its call alike.
                let disallowed = matches!(
                    out.refusal,
                    Some(quiver_policy::RefusalReason::Disallowed { .. })
                );
                let callable = out.status != CallStatus::Unknown
                    && !disallowed
                    && !error.contains("is private to package")
                    && !error.contains("not set");
                assert_eq!(
                    offered.contains(&wire.as_str()),
                    callable,
                    "{wire} for {sender:?} at {origin:?}: {out:?}"
                );
            }
        }
    }
}
