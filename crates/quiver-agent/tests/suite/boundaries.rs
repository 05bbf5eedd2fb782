//! Issue 22, boundaries between packages and callers, through the chat loop with a scripted
//! model: a fork, a sub-agent and the catalog resolve and offer exactly what a direct call of
//! the conversation may call, with that package's consent.

use std::path::Path;

use quiver_agent::Quiet;
use quiver_agent::config::ToolMode;
use quiver_agent::fake::{Api, Move};
use quiver_runtime::CallStatus;
use quiver_runtime::approver::Answer;
use serde_json::json;

use super::common::*;

/// `sneak` forks into other packages' agents: `vault.keeper` is private (with a private
/// action tool of its own), `reports.writer` is exposed.
fn sneak(root: &Path) {
    write(
        root,
        "sneak/quiver.yaml",
        "id: sneak\ndescription: Sneaky forks\n",
    );
    for (skill, agent) in [("peek", "vault.keeper"), ("borrow", "reports.writer")] {
        write(
            root,
            &format!("sneak/skills/{skill}/SKILL.md"),
            &format!(
                "---\nname: {skill}\ndescription: Fork {skill} into {agent}\ncontext: fork\nagent: {agent}\n---\nDo the {skill}.\n"
            ),
        );
    }
    write(
        root,
        "vault/quiver.yaml",
        "id: vault\ndescription: A vault\n",
    );
    write(
        root,
        "vault/agents/keeper.md",
        "---\ndescription: Keeps the vault\ntools: [vault.open_safe]\n---\nYou keep the vault.\n",
    );
    write(
        root,
        "vault/tools/open_safe/tool.yaml",
        "description: Open the safe\ncategory: action\napproval: never\ninput: {type: object}\nrun: {command: [a]}\n",
    );
}

/// Item 1: a fork into another package's private agent is an unknown agent, as a direct call
/// of it is: the agent never starts, nobody is asked anything.
#[test]
fn a_fork_into_another_packages_private_agent_is_unknown() {
    let h = harness_over(Api::OpenAi, ToolMode::Native, |_| {}, sneak);
    h.server.push([
        Move::call("read_skill", json!({"id": "sneak/peek"})),
        Move::text("没办法。"),
    ]);
    let s = session(&h);
    let report = chat(&h, &s).send("偷看一下", &mut Quiet).unwrap();
    let call = &report.calls[0];
    assert_eq!(call.status, CallStatus::Unknown, "{call:#?}");
    assert_eq!(
        call.result["error"],
        "skill `sneak/peek` cannot run: unknown agent `vault.keeper`"
    );
    assert_eq!(
        h.server.requests().len(),
        2,
        "no child session ever asked the model"
    );
    assert!(h.person.cards().is_empty(), "{:?}", h.person.cards());
    assert_eq!(h.server.remaining(), 0);
}

/// Item 1: a fork into another package's exposed agent is that package's item called on the
/// conversation's behalf: its package's consent is asked first, and a refusal runs nothing.
#[test]
fn a_fork_into_another_packages_exposed_agent_asks_that_packages_consent() {
    for (answer, status, model_requests) in [
        (Answer::AllowForSession, CallStatus::Ok, 3),
        (Answer::Deny, CallStatus::Refused, 2),
    ] {
        let h = harness_over(Api::OpenAi, ToolMode::Native, |_| {}, sneak);
        h.server
            .push([Move::call("read_skill", json!({"id": "sneak/borrow"}))]);
        if status == CallStatus::Ok {
            h.server.push([Move::text("借到了")]);
        }
        h.server.push([Move::text("好的。")]);
        h.person.answer(&[answer]);
        let s = session(&h);
        let report = chat(&h, &s).send("借一下", &mut Quiet).unwrap();
        let call = &report.calls[0];
        assert_eq!(call.status, status, "{call:#?}");
        let cards = h.person.cards();
        assert_eq!(cards.len(), 1, "{cards:#?}");
        assert_eq!(cards[0].package, "reports");
        assert_eq!(cards[0].tool, "reports.writer");
        assert_eq!(h.server.requests().len(), model_requests);
    }
}

/// Item 14: `load_tool` takes a qualified name as well as a wire name, as the docs say.
#[test]
fn load_tool_takes_a_qualified_name() {
    let h = harness(Api::OpenAi, |_| {});
    h.server.push([
        Move::call("load_tool", json!({"name": "notes.add_note"})),
        Move::call("load_tool", json!({"name": "notes.nothing"})),
        Move::text("好了。"),
    ]);
    let s = session(&h);
    let report = chat(&h, &s).send("加载笔记工具", &mut Quiet).unwrap();
    assert_eq!(
        report.calls[0].status,
        CallStatus::Ok,
        "{:#?}",
        report.calls[0]
    );
    assert_eq!(report.calls[0].result["loaded"], "notes__add_note");
    assert_eq!(report.calls[1].status, CallStatus::Unknown);
    assert!(
        tool_names(&h.server.requests()[2].body).contains(&"notes__add_note".to_owned()),
        "offered after loading"
    );
}

/// `kit` has a root skill, an exposed root tool, and a skill whose own tool says
/// `expose: true`; `spy` has an exposed agent that declares another package's private tool and
/// `read_skill`, and may read no skill.
fn kit_and_spy(root: &Path) {
    sneak(root);
    write(
        root,
        "kit/quiver.yaml",
        "id: kit\ndescription: A kit of tools\n",
    );
    write(
        root,
        "kit/SKILL.md",
        "---\nname: kit\ndescription: Use the kit\n---\nUse kit__open_tool.\n",
    );
    write(
        root,
        "kit/tools/open_tool/tool.yaml",
        "description: An open tool\ncategory: perception\nexpose: true\ninput: {type: object}\nrun: {command: [a]}\n",
    );
    write(
        root,
        "kit/skills/extra/SKILL.md",
        "---\nname: extra\ndescription: Extra kit work\n---\nUse kit__secret_tool.\n",
    );
    write(
        root,
        "kit/skills/extra/tools/secret_tool/tool.yaml",
        "description: A skill's own tool, marked exposed\ncategory: perception\nexpose: true\ninput: {type: object}\nrun: {command: [a]}\n",
    );
    write(root, "spy/quiver.yaml", "id: spy\ndescription: Spies\n");
    write(
        root,
        "spy/agents/agent.md",
        "---\ndescription: Spies on things\ntools: [vault.open_safe, notes.list_notes, read_skill]\nexpose: true\n---\nYou spy.\n",
    );
}

/// Item 2: a skill's own tool marked `expose: true` is neither in the chat catalog nor in
/// `read_skill`'s list of the package's tools until its skill is read; then it is offered.
#[test]
fn a_skills_own_tool_is_not_listed_before_its_skill_is_read() {
    let h = harness_over(Api::OpenAi, ToolMode::Native, |_| {}, kit_and_spy);
    h.server.push([
        Move::call("read_skill", json!({"id": "kit"})),
        Move::call("read_skill", json!({"id": "kit/extra"})),
        Move::text("好了。"),
    ]);
    let s = session(&h);
    let report = chat(&h, &s).send("用工具箱", &mut Quiet).unwrap();
    let first = &h.server.requests()[0].body;
    let system = first["messages"][0]["content"].as_str().unwrap();
    assert!(system.contains("kit__open_tool"), "{system}");
    assert!(!system.contains("secret_tool"), "{system}");
    let listed: Vec<&str> = report.calls[0].result["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(listed, ["kit__open_tool"], "{:#?}", report.calls[0]);
    assert_eq!(
        report.calls[1].result["unlocked_tools"],
        json!(["kit__secret_tool"])
    );
    assert!(
        tool_names(&h.server.requests()[2].body).contains(&"kit__secret_tool".to_owned()),
        "offered once its skill is active"
    );
}

/// Item 2: a package's agent is never sent another package's private tool it names, and reads
/// only the skills its `skills:` lists.
#[test]
fn an_agent_is_offered_only_what_it_may_call() {
    let h = harness_over(Api::OpenAi, ToolMode::Native, |_| {}, kit_and_spy);
    h.server.push([
        Move::call("spy__agent", json!({"task": "看看保险箱"})),
        Move::call("read_skill", json!({"id": "weather"})),
        Move::call("vault__open_safe", json!({})),
        Move::text("看不了"),
        Move::text("它看不了。"),
    ]);
    h.person.answer(&[Answer::AllowForSession]);
    let s = session(&h);
    let report = chat(&h, &s).send("派间谍去", &mut Quiet).unwrap();
    assert_eq!(
        report.calls[0].status,
        CallStatus::Ok,
        "{:#?}",
        report.calls[0]
    );
    let requests = h.server.requests();
    let child = &requests[1].body;
    assert_eq!(tool_names(child), ["read_skill", "notes__list_notes"]);
    let tool_results: Vec<String> = requests[3].body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap().to_owned())
        .collect();
    assert!(
        tool_results[0].contains("no such skill: weather"),
        "{tool_results:?}"
    );
    assert!(
        tool_results[1].contains("unknown tool: vault__open_safe"),
        "{tool_results:?}"
    );
    assert!(h.calls.lock().unwrap().is_empty(), "nothing ran");
}

/// Item 4: an unattended run of a package's agent (a workflow's agent step, a schedule) gets
/// its package's `profiles: [schedule]` sections, not the interactive ones, and no other
/// package's.
#[test]
fn an_unattended_agent_run_gets_its_packages_schedule_sections() {
    unattended_writer_run(false);
}

/// Issue 24 item 7: a turn holds its snapshot for its whole length, its sub-agents included.
/// The catalog is swapped for one without the agent's package after the parent turn began: the
/// run still finds its agent and its sections in the parent's snapshot.
#[test]
fn an_agent_run_holds_its_parent_turns_snapshot_across_a_reload() {
    unattended_writer_run(true);
}

/// `reports.writer` run unattended for a parent turn; with `reload`, after the catalog was
/// swapped for an empty one.
fn unattended_writer_run(reload: bool) {
    use quiver_agent::SubAgents;
    use quiver_policy::Origin;
    use quiver_runtime::runtime::{AgentRunner, AgentTask};
    use quiver_runtime::{Profile, SessionRequest};

    let h = harness_over(
        Api::OpenAi,
        ToolMode::Native,
        |_| {},
        |root| {
            write(
                root,
                "reports/prompts/nightly.md",
                "---\nprofiles: [schedule]\n---\nNIGHTLY: write for the morning reader.\n",
            );
            write(
                root,
                "reports/prompts/daytime.md",
                "---\nprofiles: [interactive]\n---\nDAYTIME: ask when unsure.\n",
            );
            write(root, "weather/prompts/tone.md", "WEATHER TONE: be brief.\n");
        },
    );
    h.server.push([Move::text("# 日报")]);
    let parent = h
        .runtime
        .create_session(&SessionRequest {
            origin: Origin::default(),
            agent: "workflow".into(),
            principal: owner(),
            profile: Profile::Schedule,
        })
        .unwrap();
    let held = h.runtime.catalog();
    if reload {
        h.runtime
            .swap_catalog(quiver_catalog::Catalog::load_dirs(&[]));
        assert!(h.runtime.catalog().package("reports").is_none());
    }
    let runner = SubAgents::new(h.providers.clone());
    let reply = runner
        .run(
            &h.runtime,
            AgentTask {
                call_id: "call-1".into(),
                parent_session: parent,
                agent: Some("reports.writer".into()),
                skill: None,
                task: "写日报".into(),
                sender: owner(),
                person: None,
                deadline: None,
                catalog: held,
            },
        )
        .unwrap();
    assert_eq!(reply.reply, "# 日报");
    let system = h.server.requests()[0].body["messages"][0]["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(system.contains("You are the report writer."), "{system}");
    assert!(
        system.contains("NIGHTLY: write for the morning reader."),
        "{system}"
    );
    assert!(!system.contains("DAYTIME"), "{system}");
    assert!(!system.contains("WEATHER TONE"), "{system}");
}
