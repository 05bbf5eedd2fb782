//! Sessions: persistence across restarts, isolation, loaded-tool limits, prompt assembly.

use quiver_runtime::RuntimeConfig;
use quiver_runtime::approver::Answer;
use serde_json::json;

use super::common::*;

#[test]
fn a_restart_keeps_every_sessions_state() {
    let h = harness();
    let s = cli_session(&h);
    h.person.answer(&[Answer::AllowForSession, Answer::Allow]);
    {
        let mut turn = h.runtime.begin_turn(&s, owner(), "").unwrap();
        assert_eq!(
            turn.call("notes__add_note", json!({"text": "x"}))
                .unwrap()
                .status,
            quiver_runtime::CallStatus::Ok
        );
        let mut next = h.runtime.begin_turn(&s, owner(), "").unwrap();
        next.call("read_skill", json!({"id": "weather"})).unwrap();
    }
    let packages = h._dir.path().join("packages");
    let db = h.db.clone();
    let Harness { _dir, runtime, .. } = h;
    drop(runtime);
    let h2 = build(_dir, &packages, db, RuntimeConfig::default(), None);
    let mut turn = h2.runtime.begin_turn(&s, owner(), "").unwrap();
    let names: Vec<String> = turn
        .tools()
        .unwrap()
        .into_iter()
        .map(|t| t.name.clone())
        .collect();
    assert!(
        names.contains(&"weather__forecast".to_owned())
            && names.contains(&"notes__add_note".to_owned()),
        "{names:?}"
    );
    // Consent survived too: only the approval is asked.
    h2.person.answer(&[Answer::Allow]);
    turn.call("notes__add_note", json!({"text": "y"})).unwrap();
    assert_eq!(h2.person.cards().len(), 1);
    // The skill is still active, but this process's transcript never held its
    // instructions: they are given again, not "already active; its instructions are above".
    let again = turn.call("read_skill", json!({"id": "weather"})).unwrap();
    assert_eq!(again.content["status"], "active", "{}", again.content);
    assert!(
        again.content["instructions"]
            .as_str()
            .is_some_and(|b| !b.is_empty())
    );
}

#[test]
fn the_operators_switches_outlive_a_restart_and_reach_other_runtimes() {
    let h = harness();
    let s = cli_session(&h);
    h.runtime.set_enabled("weather", false, "operator").unwrap();
    h.runtime
        .set_control(
            quiver_policy::ControlPlane {
                read_only: true,
                ..Default::default()
            },
            "operator",
        )
        .unwrap();
    // A second runtime on the same file (another process, or this one restarted) sees both
    // from its next turn.
    let packages = h._dir.path().join("packages");
    let db = h.db.clone();
    let Harness { _dir, runtime, .. } = h;
    let h2 = build(_dir, &packages, db, RuntimeConfig::default(), None);
    let mut turn = h2.runtime.begin_turn(&s, owner(), "").unwrap();
    let out = turn
        .call("weather__forecast", json!({"city": "x"}))
        .unwrap();
    assert_eq!(out.status, quiver_runtime::CallStatus::Unknown, "{out:?}");
    h2.person.answer(&[Answer::AllowForSession]);
    let out = turn.call("notes__add_note", json!({"text": "x"})).unwrap();
    assert_eq!(
        out.status,
        quiver_runtime::CallStatus::Refused,
        "read-only: {out:?}"
    );
    drop(turn);
    // Switched back on by the first runtime: the second sees it at its next turn.
    runtime.set_enabled("weather", true, "operator").unwrap();
    runtime
        .set_control(quiver_policy::ControlPlane::default(), "operator")
        .unwrap();
    h2.person.answer(&[Answer::AllowForSession]);
    let mut turn = h2.runtime.begin_turn(&s, owner(), "").unwrap();
    let out = turn
        .call("weather__forecast", json!({"city": "x"}))
        .unwrap();
    assert_eq!(out.status, quiver_runtime::CallStatus::Ok, "{out:?}");
}

#[test]
fn a_user_switches_a_package_off_in_their_conversation_only() {
    let h = harness();
    let mine = cli_session(&h);
    let other = cli_session(&h);
    h.runtime
        .set_enabled_in_session(&mine, "weather", false)
        .unwrap();
    let mut turn = h.runtime.begin_turn(&mine, owner(), "").unwrap();
    assert_eq!(
        turn.call("weather__forecast", json!({"city": "x"}))
            .unwrap()
            .status,
        quiver_runtime::CallStatus::Unknown
    );
    let (prompt, _) = turn.system_prompt().unwrap();
    assert!(
        !prompt.contains("weather"),
        "absent from the catalog: {prompt}"
    );
    drop(turn);
    h.person.answer(&[Answer::AllowForSession]);
    let mut turn = h.runtime.begin_turn(&other, owner(), "").unwrap();
    assert_eq!(
        turn.call("weather__forecast", json!({"city": "x"}))
            .unwrap()
            .status,
        quiver_runtime::CallStatus::Ok
    );
    drop(turn);
    h.runtime
        .set_enabled_in_session(&mine, "weather", true)
        .unwrap();
    h.person.answer(&[Answer::AllowForSession]);
    let mut turn = h.runtime.begin_turn(&mine, owner(), "").unwrap();
    assert_eq!(
        turn.call("weather__forecast", json!({"city": "x"}))
            .unwrap()
            .status,
        quiver_runtime::CallStatus::Ok
    );
}

#[test]
fn concurrent_sessions_never_see_each_others_state() {
    let h = harness();
    let a = cli_session(&h);
    let b = cli_session(&h);
    let mut turn = h.runtime.begin_turn(&a, owner(), "").unwrap();
    turn.call("read_skill", json!({"id": "weather"})).unwrap();
    let turn_b = h.runtime.begin_turn(&b, owner(), "").unwrap();
    let names: Vec<String> = turn_b
        .tools()
        .unwrap()
        .into_iter()
        .map(|t| t.name.clone())
        .collect();
    assert!(
        !names.contains(&"weather__forecast".to_owned()),
        "{names:?}"
    );
}

#[test]
fn loaded_tools_are_capped_least_recently_used_first() {
    let config = RuntimeConfig {
        max_loaded: 1,
        ..RuntimeConfig::default()
    };
    let h = harness_with(config);
    let s = cli_session(&h);
    let mut turn = h.runtime.begin_turn(&s, owner(), "").unwrap();
    turn.call("load_tool", json!({"name": "weather__forecast"}))
        .unwrap();
    turn.call("load_tool", json!({"name": "notes__long_list"}))
        .unwrap();
    let names: Vec<String> = turn
        .tools()
        .unwrap()
        .into_iter()
        .map(|t| t.name.clone())
        .collect();
    assert!(
        names.contains(&"notes__long_list".to_owned())
            && !names.contains(&"weather__forecast".to_owned()),
        "{names:?}"
    );
}

#[test]
fn the_system_prompt_has_the_date_and_the_catalog_without_hidden_skills() {
    let h = harness();
    let s = cli_session(&h);
    let turn = h.runtime.begin_turn(&s, owner(), "").unwrap();
    let (prompt, report) = turn.system_prompt().unwrap();
    assert!(prompt.contains("Today's date is 2026-11-29."), "{prompt}");
    assert!(
        prompt.contains("- 天气 (weather): 天气预报 Weather forecasts"),
        "{prompt}"
    );
    assert!(
        !prompt.contains("manual") && !prompt.contains("private_helper"),
        "{prompt}"
    );
    assert!(!prompt.contains("group_poll"), "scoped to groups: {prompt}");
    assert!(report.catalog_dropped.is_empty());
}

#[test]
fn a_child_sessions_loads_never_touch_the_parent() {
    let h = harness();
    let parent = cli_session(&h);
    let child = h
        .runtime
        .create_child_session(&parent, "chat", &owner())
        .unwrap();
    let mut turn = h.runtime.begin_turn(&child, owner(), "").unwrap();
    turn.call("load_tool", json!({"name": "notes__long_list"}))
        .unwrap();
    let store = h.store;
    // An exposed tool loads its whole package (seed 000), in one slot.
    assert_eq!(store.loaded_tools(&child).unwrap(), ["notes"]);
    assert!(store.loaded_tools(&parent).unwrap().is_empty());
    assert_eq!(
        store.session(&child).unwrap().unwrap().parent.as_deref(),
        Some(parent.as_str())
    );
}

#[test]
fn a_packages_own_agent_sees_no_catalog_and_no_meta_tools_unless_configured() {
    let h = harness();
    let parent = cli_session(&h);
    let agent = h
        .runtime
        .create_child_session(&parent, "weather.reporter", &owner())
        .unwrap();
    let mut turn = h.runtime.begin_turn(&agent, owner(), "").unwrap();
    let (prompt, _) = turn.system_prompt().unwrap();
    assert!(!prompt.contains("Packages you can use"), "{prompt}");
    assert!(
        turn.tools()
            .unwrap()
            .iter()
            .all(|t| t.name != "read_skill" && t.name != "tool_search")
    );
    assert_eq!(
        turn.call("tool_search", json!({"query": "weather"}))
            .unwrap()
            .status,
        quiver_runtime::CallStatus::Unknown
    );
}

#[test]
fn always_loaded_overflow_is_deferred_and_reported() {
    let dir = tempfile::tempdir().unwrap();
    let packages = dir.path().join("packages");
    fixture(&packages);
    for i in 0..10 {
        write(
            &packages,
            &format!("a{i}/quiver.yaml"),
            &format!("id: a{i}\n"),
        );
        write(
            &packages,
            &format!("a{i}/tools/t/tool.yaml"),
            "description: d\ncategory: decision\nexpose: true\nalways_loaded: true\nrun: {command: [a]}\n",
        );
    }
    let db = dir.path().join("state.db");
    let h = build(dir, &packages, db, RuntimeConfig::default(), None);
    assert_eq!(h.runtime.deferred_always_loaded(), ["a8.t", "a9.t"]);
    let s = cli_session(&h);
    let turn = h.runtime.begin_turn(&s, owner(), "").unwrap();
    let names: Vec<String> = turn
        .tools()
        .unwrap()
        .into_iter()
        .map(|t| t.name.clone())
        .collect();
    assert!(
        names.contains(&"a7__t".to_owned()) && !names.contains(&"a8__t".to_owned()),
        "{names:?}"
    );
}
