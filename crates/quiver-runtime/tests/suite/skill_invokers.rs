//! Who may start a skill: a person by hand (`Turn::start_skill_by_user`) and the model
//! (`read_skill`), and skills bound to one model (`Turn::set_model`).

use quiver_runtime::{CallStatus, RuntimeConfig};
use quiver_store::{AuditKind, AuditQuery};
use serde_json::json;

use super::common::*;

/// The fixture, plus skills restricted by scope, permission, model and `user-invocable`.
fn skills_harness() -> Harness {
    let dir = tempfile::tempdir().unwrap();
    let packages = dir.path().join("packages");
    fixture(&packages);
    write(
        &packages,
        "weather/skills/group-duty/SKILL.md",
        "---\nname: group-duty\ndescription: Group owners start this by hand.\ndisable-model-invocation: true\nscopes: [group]\npermissions: ['role(master)']\n---\nduty roster\n",
    );
    write(
        &packages,
        "weather/skills/model-only/SKILL.md",
        "---\nname: model-only\ndescription: Only the model opens this.\nuser-invocable: false\n---\nfor the model\n",
    );
    write(
        &packages,
        "weather/skills/deepseek/SKILL.md",
        "---\nname: deepseek\ndescription: Tuned for one model.\nmodel: deepseek-chat\n---\ndeepseek hints\n",
    );
    let db = dir.path().join("state.db");
    build(dir, &packages, db, RuntimeConfig::default(), None)
}

#[test]
fn a_person_starts_a_skill_the_model_may_not_read() {
    let h = skills_harness();
    let s = cli_session(&h);
    let mut turn = h.runtime.begin_turn(&s, owner(), "").unwrap();
    // `/skills`: what this person may start here, and nothing else.
    let listed: Vec<&str> = turn
        .skills_for_user()
        .iter()
        .map(|s| s.id.as_str())
        .collect();
    assert_eq!(listed, ["weather", "weather/manual"]);
    let by_model = turn
        .call("read_skill", json!({"id": "weather/manual"}))
        .unwrap();
    assert_eq!(
        error_text(&by_model.content),
        "no such skill: weather/manual"
    );
    let by_user = turn.start_skill_by_user("weather/manual").unwrap();
    assert_eq!(by_user.status, CallStatus::Ok, "{by_user:?}");
    assert_eq!(by_user.content["status"], "activated");
    assert_eq!(by_user.content["instructions"], "secret\n");
    let records = h
        .store
        .query_audit(&AuditQuery {
            session: Some(s.clone()),
            ..AuditQuery::default()
        })
        .unwrap();
    let activated = records
        .iter()
        .find(|r| r.entry.kind == AuditKind::SkillActivated)
        .expect("an activation record");
    assert_eq!(activated.entry.skill.as_deref(), Some("weather/manual"));
    assert_eq!(
        activated.entry.detail.as_ref().unwrap()["why"],
        "started by the user"
    );
    assert!(
        records.iter().any(|r| r.entry.kind == AuditKind::Call
            && r.entry.skill.as_deref() == Some("weather/manual")
            && r.entry.decisions.iter().any(|d| d.decision == "user")),
        "a call record for the user's start"
    );
    // A skill the user may not start is answered like a missing one.
    let model_only = turn.start_skill_by_user("weather/model-only").unwrap();
    assert_eq!(
        error_text(&model_only.content),
        "no such skill: weather/model-only"
    );
    // A package id is not a skill the user can start.
    let package = turn.start_skill_by_user("notes").unwrap();
    assert_eq!(error_text(&package.content), "no such skill: notes");
}

#[test]
fn a_person_cannot_start_a_skill_the_turn_does_not_admit() {
    let h = skills_harness();
    // Not in a group: the skill's `scopes` are not met, even for the owner.
    let private = cli_session(&h);
    let mut turn = h.runtime.begin_turn(&private, owner(), "").unwrap();
    let out = turn.start_skill_by_user("weather/group-duty").unwrap();
    assert_eq!(
        error_text(&out.content),
        "no such skill: weather/group-duty"
    );
    drop(turn);
    // In a group, a member without the role is refused; the owner is admitted.
    let group = group_session(&h);
    let mut turn = h.runtime.begin_turn(&group, member("u1"), "").unwrap();
    let out = turn.start_skill_by_user("weather/group-duty").unwrap();
    assert_eq!(
        error_text(&out.content),
        "no such skill: weather/group-duty"
    );
    drop(turn);
    let mut turn = h.runtime.begin_turn(&group, owner(), "").unwrap();
    let out = turn.start_skill_by_user("weather/group-duty").unwrap();
    assert_eq!(out.content["instructions"], "duty roster\n", "{out:?}");
    drop(turn);
    // A package switched off hides its skills from the user too.
    h.runtime.set_enabled("weather", false, "op").unwrap();
    let other = group_session(&h);
    let mut turn = h.runtime.begin_turn(&other, owner(), "").unwrap();
    let out = turn.start_skill_by_user("weather/group-duty").unwrap();
    assert_eq!(
        error_text(&out.content),
        "no such skill: weather/group-duty"
    );
}

#[test]
fn a_model_bound_skill_is_shown_to_that_model_only() {
    let h = skills_harness();
    for (model, visible) in [
        (None, false),
        (Some("qwen-max"), false),
        (Some("deepseek-chat"), true),
    ] {
        let s = cli_session(&h);
        let mut turn = h.runtime.begin_turn(&s, owner(), "").unwrap();
        if let Some(model) = model {
            turn.set_model(model);
        }
        let out = turn
            .call("read_skill", json!({"id": "weather/deepseek"}))
            .unwrap();
        if visible {
            assert_eq!(out.content["instructions"], "deepseek hints\n", "{out:?}");
        } else {
            assert_eq!(
                error_text(&out.content),
                "no such skill: weather/deepseek",
                "{model:?}"
            );
        }
        let user = turn.start_skill_by_user("weather/deepseek").unwrap();
        assert_eq!(
            user.status == CallStatus::Ok,
            visible,
            "{model:?}: {user:?}"
        );
    }
}
