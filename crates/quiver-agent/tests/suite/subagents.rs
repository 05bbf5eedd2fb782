//! Sub-agents in child sessions: isolation (own prompt, only declared tools, only the task),
//! the user's model for the agent, depth and parallelism limits, forked skills, and the
//! automatic choice of an agent for a platform.

use quiver_agent::Quiet;
use quiver_agent::agents::agent_for_platform;
use quiver_agent::config::AgentModel;
use quiver_agent::fake::{Api, Move};
use quiver_catalog::Catalog;
use quiver_runtime::CallStatus;
use quiver_runtime::approver::Answer;
use quiver_store::{AuditKind, AuditQuery};
use serde_json::{Value, json};

use super::common::*;

fn system_of(body: &Value) -> String {
    body["messages"][0]["content"].as_str().unwrap().to_owned()
}

#[test]
fn an_exposed_agent_runs_in_an_isolated_child_session() {
    let h = harness(Api::OpenAi, |_| {});
    h.server.push([
        Move::call("reports__writer", json!({"task": "写今天的日报"})),
        Move::call("notes__list_notes", json!({})),
        Move::text("# 日报\n- 修好登录页"),
        Move::text("日报写好了。"),
    ]);
    h.person
        .answer(&[Answer::AllowForSession, Answer::AllowForSession]);
    let s = session(&h);
    let report = chat(&h, &s).send("帮我写日报", &mut Quiet).unwrap();
    assert_eq!(report.reply, "日报写好了。");
    let call = &report.calls[0];
    assert_eq!(call.status, CallStatus::Ok, "{call:#?}");
    assert_eq!(call.result["result"], "# 日报\n- 修好登录页");
    let child = call.result["session"].as_str().unwrap().to_owned();

    let requests = h.server.requests();
    let first_child = &requests[1].body;
    let system = system_of(first_child);
    assert!(
        system.starts_with("REPORT RULES: never invent facts.\n\nYou are the report writer."),
        "{system}"
    );
    assert!(
        !system.contains("Packages you can use"),
        "no catalog: {system}"
    );
    assert_eq!(
        tool_names(first_child),
        ["notes__list_notes"],
        "only its declared tools, no meta-tools"
    );
    let sent = first_child["messages"].as_array().unwrap();
    assert_eq!(sent.len(), 2, "only its task: {sent:?}");
    assert_eq!(sent[1], json!({"role": "user", "content": "写今天的日报"}));
    assert_eq!(first_child["model"], "fake-model");

    let store = h.store;
    let record = store.session(&child).unwrap().unwrap();
    assert_eq!(record.parent.as_deref(), Some(s.as_str()));
    assert_eq!(record.agent, "reports.writer");
    assert!(!record.is_active(), "the child session ends with its task");
    assert_eq!(
        store.loaded_tools(&s).unwrap(),
        ["reports"],
        "the parent loads the exposed agent's package (one slot), never the child's tools"
    );
    let child_calls = store
        .query_audit(&AuditQuery {
            session: Some(child.clone()),
            kind: Some(AuditKind::Call),
            ..AuditQuery::default()
        })
        .unwrap();
    assert_eq!(child_calls.len(), 1);
    assert_eq!(
        child_calls[0].entry.tool.as_deref(),
        Some("notes.list_notes")
    );
    let parent_call = store
        .query_audit(&AuditQuery {
            session: Some(s.clone()),
            kind: Some(AuditKind::Call),
            ..AuditQuery::default()
        })
        .unwrap();
    assert_eq!(
        parent_call[0].entry.detail.as_ref().unwrap()["child_session"],
        json!(child)
    );
    // The consent for `reports` came from the parent; the child asked about `notes` itself.
    let packages: Vec<String> = h.person.cards().iter().map(|c| c.package.clone()).collect();
    assert_eq!(packages, ["reports", "notes"]);
}

#[test]
fn the_folder_form_prompt_and_the_model_the_user_chose() {
    let h = harness(Api::OpenAi, |c| {
        c.agents.insert(
            "reports.editor".into(),
            AgentModel {
                provider: None,
                model: Some("editor-model".into()),
            },
        );
    });
    h.server.push([
        Move::call("reports__editor", json!({"task": "润色这份日报"})),
        Move::text("润色好了"),
        Move::text("完成。"),
    ]);
    h.person.answer(&[Answer::AllowForSession]);
    let s = session(&h);
    let report = chat(&h, &s).send("润色日报", &mut Quiet).unwrap();
    assert_eq!(report.calls[0].result["result"], "润色好了");
    let child = &h.server.requests()[1].body;
    assert_eq!(child["model"], "editor-model");
    assert_eq!(h.server.requests()[0].body["model"], "fake-model");
    let system = system_of(child);
    let at = |s: &str| system.find(s).unwrap_or_else(|| panic!("{s} in {system}"));
    assert!(
        at("REPORT RULES") < at("You are the editor.")
            && at("You are the editor.") < at("## Boundaries\nNever publish.")
            && at("## Boundaries") < at("## Conventions\nKeep the headings.")
    );
    assert_eq!(tool_names(child), ["reports__writer"]);
}

#[test]
fn depth_and_parallelism_limits() {
    for (depth, parallel, want) in [
        (1, 4, "nest at most 1 deep"),
        (2, 1, "1 sub-agents are already running"),
    ] {
        let h = harness(Api::OpenAi, |c| {
            c.limits.max_depth = depth;
            c.limits.max_parallel = parallel;
        });
        h.server.push([
            Move::call("reports__editor", json!({"task": "润色"})),
            Move::call("reports__writer", json!({"task": "先写一份"})),
            Move::text("写不了"),
            Move::text("好的"),
        ]);
        h.person.answer(&[Answer::AllowForSession]);
        let s = session(&h);
        let report = chat(&h, &s).send("润色日报", &mut Quiet).unwrap();
        assert_eq!(report.calls[0].result["result"], "写不了");
        let nested = h.server.requests()[2].body.clone();
        let tool_message = nested["messages"]
            .as_array()
            .unwrap()
            .iter()
            .rev()
            .find(|m| m["role"] == "tool")
            .unwrap()
            .clone();
        assert!(
            tool_message["content"].as_str().unwrap().contains(want),
            "{tool_message}"
        );
        assert_eq!(h.server.remaining(), 0);
    }
}

#[test]
fn a_forked_skill_runs_with_its_agent_and_returns_only_the_answer() {
    let h = harness(Api::OpenAi, |_| {});
    h.server.push([
        Move::call("read_skill", json!({"id": "reports/weekly"})),
        Move::text("# 周报\n- 修好登录页"),
        Move::text("周报在上面。"),
    ]);
    let s = session(&h);
    let report = chat(&h, &s).send("写本周周报", &mut Quiet).unwrap();
    let result = &report.calls[0].result;
    assert_eq!(result["result"], "# 周报\n- 修好登录页", "{result}");
    assert_eq!(result["skill"], "reports/weekly");
    assert!(
        result.get("instructions").is_none(),
        "the parent never sees the skill's text"
    );
    let child = &h.server.requests()[1].body;
    assert!(system_of(child).contains("You are the report writer."));
    assert_eq!(
        child["messages"][1]["content"],
        "Sum up the week's notes.\n\nThe request: 写本周周报"
    );
    assert!(
        h.store.active_skills(&s).unwrap().is_empty(),
        "not active in the parent"
    );
    let child_id = result["session"].as_str().unwrap();
    let activated = h
        .store
        .query_audit(&AuditQuery {
            session: Some(child_id.to_owned()),
            kind: Some(AuditKind::SkillActivated),
            ..AuditQuery::default()
        })
        .unwrap();
    assert_eq!(activated[0].entry.skill.as_deref(), Some("reports/weekly"));
}

#[test]
fn an_agent_declaring_a_platform_serves_it_and_two_are_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(root, "bots/quiver.yaml", "id: bots\n");
    write(
        root,
        "bots/agents/qq.md",
        "---\ndescription: QQ 群助手\nplatforms: [qq]\n---\n你是 QQ 群助手。\n",
    );
    let catalog = Catalog::load_dirs(&[root]);
    assert_eq!(
        agent_for_platform(&catalog, "qq").unwrap().as_deref(),
        Some("bots.qq")
    );
    assert_eq!(agent_for_platform(&catalog, "telegram").unwrap(), None);
    write(root, "more/quiver.yaml", "id: more\n");
    write(
        root,
        "more/agents/helper.md",
        "---\ndescription: another\nplatforms: [qq, discord]\n---\nhi\n",
    );
    let catalog = Catalog::load_dirs(&[root]);
    let err = agent_for_platform(&catalog, "qq").unwrap_err().to_string();
    assert_eq!(
        err,
        "agents `bots.qq`, `more.helper` all declare platform `qq`; choose one with `--agent`"
    );
    assert_eq!(
        agent_for_platform(&catalog, "discord").unwrap().as_deref(),
        Some("more.helper")
    );
}
