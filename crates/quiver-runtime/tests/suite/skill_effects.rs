//! Issue 12, "a skill's effects follow its admission" (defects 3, 4, 6 and 7): what reading a
//! skill brings (its unlocked tools, its `allowed-tools` and `disallowed-tools`) holds only for
//! the senders and origins the skill admits, removes what it disallows from the list itself,
//! unlocks only what its `tools:` names, and an agent's own skill opens for that agent alone.

use quiver_policy::{Origin, Principal, ScopeKind};
use quiver_runtime::approver::Answer;
use quiver_runtime::{CallStatus, Profile, RuntimeConfig, SessionRequest, Turn};
use serde_json::json;

use super::common::*;

fn tool(extra: &str) -> String {
    format!("description: t\ncategory: perception\napproval: never\nrun: {{command: [a]}}\n{extra}")
}

/// The fixture plus: `vip` with a skill for trusted senders whose tool it unlocks, `picky`
/// whose skill's `tools:` unlocks one of its two tools, and `crew` whose agent has a skill of
/// its own with a tool.
fn harness_effects() -> Harness {
    let dir = tempfile::tempdir().unwrap();
    let packages = dir.path().join("packages");
    fixture(&packages);
    write(
        &packages,
        "vip/quiver.yaml",
        "id: vip\ndescription: VIP lounge\n",
    );
    write(
        &packages,
        "vip/skills/gold/SKILL.md",
        "---\nname: gold\ndescription: Gold service for trusted members\npermissions: ['role(trusted)']\n---\nUse shine.\n",
    );
    write(
        &packages,
        "vip/skills/gold/tools/shine/tool.yaml",
        &tool(""),
    );
    write(
        &packages,
        "picky/quiver.yaml",
        "id: picky\ndescription: Picky\n",
    );
    write(
        &packages,
        "picky/skills/choose/SKILL.md",
        "---\nname: choose\ndescription: Chooses\ntools: [keep]\n---\nUse keep.\n",
    );
    write(
        &packages,
        "picky/skills/choose/tools/keep/tool.yaml",
        &tool(""),
    );
    write(
        &packages,
        "picky/skills/choose/tools/drop/tool.yaml",
        &tool(""),
    );
    write(
        &packages,
        "crew/quiver.yaml",
        "id: crew\ndescription: Crew\n",
    );
    write(
        &packages,
        "crew/agents/helper/agent.yaml",
        "description: Helps\ntools: [read_skill]\n",
    );
    write(&packages, "crew/agents/helper/system.md", "You help.\n");
    write(&packages, "crew/agents/helper/boundaries.md", "No.\n");
    write(&packages, "crew/agents/helper/conventions.md", "Yes.\n");
    write(
        &packages,
        "crew/agents/helper/skills/drill/SKILL.md",
        "---\nname: drill\ndescription: Drills\n---\nUse bit.\n",
    );
    write(
        &packages,
        "crew/agents/helper/skills/drill/tools/bit/tool.yaml",
        &tool(""),
    );
    let mut config = RuntimeConfig::default();
    config.agent_meta_tools.insert(
        "crew.helper".into(),
        vec!["read_skill".into(), "tool_search".into()],
    );
    let db = dir.path().join("state.db");
    build(dir, &packages, db, config, None)
}

fn names(turn: &Turn<'_>) -> Vec<String> {
    turn.tools()
        .unwrap()
        .into_iter()
        .map(|t| t.name.clone())
        .collect()
}

fn session_as(h: &Harness, agent: &str, origin: Origin) -> String {
    h.runtime
        .create_session(&SessionRequest {
            origin,
            agent: agent.into(),
            principal: owner(),
            profile: Profile::Interactive,
        })
        .unwrap()
}

#[test]
fn issue_12_a_skills_unlocked_tools_hold_only_for_senders_it_admits() {
    let h = harness_effects();
    let s = session_as(&h, "chat", Origin::on("qq", ScopeKind::Group, "7"));
    let trusted = Principal::user("t1", quiver_package::rules::Role::Trusted);
    let mut turn = h.runtime.begin_turn(&s, trusted.clone(), "").unwrap();
    let read = turn.call("read_skill", json!({"id": "vip/gold"})).unwrap();
    assert_eq!(read.content["status"], "activated", "{read:?}");
    assert!(names(&turn).contains(&"vip__shine".to_owned()));
    // The next turn, a plain member of the same group: the skill is not theirs, nor its tool.
    let plain = member("m1");
    let mut turn = h.runtime.begin_turn(&s, plain, "").unwrap();
    assert!(!names(&turn).contains(&"vip__shine".to_owned()));
    let call = turn.call("vip__shine", json!({})).unwrap();
    assert_eq!(call.status, CallStatus::Unknown, "{call:?}");
    let again = turn.call("read_skill", json!({"id": "vip/gold"})).unwrap();
    assert_eq!(error_text(&again.content), "no such skill: vip/gold");
    // The trusted sender still has it.
    let turn = h.runtime.begin_turn(&s, trusted, "").unwrap();
    assert!(names(&turn).contains(&"vip__shine".to_owned()));
}

#[test]
fn issue_12_disallowed_tools_leave_the_list_and_a_second_read_reapplies_them() {
    let h = harness();
    let s = cli_session(&h);
    h.person.answer(&[Answer::AllowForSession]);
    let mut turn = h.runtime.begin_turn(&s, owner(), "").unwrap();
    turn.call("read_skill", json!({"id": "notes"})).unwrap();
    assert!(names(&turn).contains(&"notes__add_note".to_owned()));
    // weather's SKILL.md says `disallowed-tools: notes.add_note`.
    turn.call("read_skill", json!({"id": "weather"})).unwrap();
    assert!(!names(&turn).contains(&"notes__add_note".to_owned()));
    // A new turn (of a front whose transcript holds the instructions) starts without the
    // lists; reading the active skill again applies them.
    let mut turn = h.runtime.begin_turn(&s, owner(), "").unwrap();
    turn.transcript_holds(["weather", "notes"]);
    assert!(names(&turn).contains(&"notes__add_note".to_owned()));
    let again = turn.call("read_skill", json!({"id": "weather"})).unwrap();
    assert!(
        again.content["status"]
            .as_str()
            .unwrap()
            .starts_with("already active")
    );
    assert!(!names(&turn).contains(&"notes__add_note".to_owned()));
    let refused = turn.call("notes__add_note", json!({"text": "x"})).unwrap();
    assert_eq!(refused.status, CallStatus::Refused, "{refused:?}");
}

#[test]
fn issue_12_a_skills_tools_list_unlocks_what_it_names_only() {
    let h = harness_effects();
    let s = cli_session(&h);
    let mut turn = h.runtime.begin_turn(&s, owner(), "").unwrap();
    let read = turn
        .call("read_skill", json!({"id": "picky/choose"}))
        .unwrap();
    assert_eq!(
        read.content["unlocked_tools"],
        json!(["picky__keep"]),
        "{read:?}"
    );
    let offered = names(&turn);
    assert!(offered.contains(&"picky__keep".to_owned()), "{offered:?}");
    assert!(!offered.contains(&"picky__drop".to_owned()), "{offered:?}");
    let dropped = turn.call("picky__drop", json!({})).unwrap();
    assert_eq!(dropped.status, CallStatus::Unknown, "{dropped:?}");
    let kept = turn.call("picky__keep", json!({})).unwrap();
    assert_ne!(kept.status, CallStatus::Unknown, "{kept:?}");
}

#[test]
fn issue_12_an_agents_own_skill_opens_for_that_agent_alone_and_then_its_tools_appear() {
    let h = harness_effects();
    // The agent's session: the skill's tool is not there before it reads the skill.
    let s = session_as(&h, "crew.helper", Origin::default());
    let mut turn = h.runtime.begin_turn(&s, owner(), "").unwrap();
    assert!(!names(&turn).contains(&"crew__bit".to_owned()));
    assert_eq!(
        turn.call("crew__bit", json!({})).unwrap().status,
        CallStatus::Unknown
    );
    let read = turn
        .call("read_skill", json!({"id": "crew/helper/drill"}))
        .unwrap();
    assert_eq!(read.content["status"], "activated", "{read:?}");
    assert!(names(&turn).contains(&"crew__bit".to_owned()));
    assert_ne!(
        turn.call("crew__bit", json!({})).unwrap().status,
        CallStatus::Unknown
    );
    // Anyone else: no such skill, no such tool.
    let other = cli_session(&h);
    let mut turn = h.runtime.begin_turn(&other, owner(), "").unwrap();
    let read = turn
        .call("read_skill", json!({"id": "crew/helper/drill"}))
        .unwrap();
    assert_eq!(
        error_text(&read.content),
        "no such skill: crew/helper/drill"
    );
    assert_eq!(
        turn.call("crew__bit", json!({})).unwrap().status,
        CallStatus::Unknown
    );
}

/// A turn keeps the session's presence between its calls and offers (re-read only when the
/// store's stamp moved): what it offers must follow its own writes, another live turn's of the
/// same session, and another process's, at once.
#[test]
fn a_turns_offer_never_goes_stale_after_a_write_to_its_session() {
    let h = harness_effects();
    let s = cli_session(&h);
    h.person.answer(&[Answer::AllowForSession]);
    let offered = |turn: &Turn<'_>| -> Vec<String> {
        turn.offer()
            .unwrap()
            .tools
            .into_iter()
            .map(|t| t.name.clone())
            .collect()
    };
    let mut a = h.runtime.begin_turn(&s, owner(), "").unwrap();
    assert!(!offered(&a).contains(&"notes__add_note".to_owned()));
    // Its own write: `load_tool`, then the offer (and `tools`) show it.
    let load = a
        .call("load_tool", json!({"name": "notes__add_note"}))
        .unwrap();
    assert_eq!(load.status, CallStatus::Ok, "{load:?}");
    assert!(offered(&a).contains(&"notes__add_note".to_owned()));
    assert!(names(&a).contains(&"notes__add_note".to_owned()));
    // Another turn of the same session, live at the same time, reads a skill: this turn's
    // next offer shows the tools it unlocked, and a call of one runs.
    assert!(!offered(&a).contains(&"picky__keep".to_owned()));
    let mut b = h.runtime.begin_turn(&s, owner(), "").unwrap();
    let read = b.call("read_skill", json!({"id": "picky/choose"})).unwrap();
    assert_eq!(read.content["status"], "activated", "{read:?}");
    assert!(offered(&a).contains(&"picky__keep".to_owned()));
    let keep = a.call("picky__keep", json!({})).unwrap();
    assert_ne!(keep.status, CallStatus::Unknown, "{keep:?}");
    // Another process resets the session's skills: the unlocked tool leaves this turn's offer
    // and its call is unknown again.
    let other = reopen(&h);
    assert_eq!(
        other.runtime.reset_skills(&s, "test").unwrap(),
        ["picky/choose"]
    );
    assert!(!offered(&a).contains(&"picky__keep".to_owned()));
    let gone = a.call("picky__keep", json!({})).unwrap();
    assert_eq!(gone.status, CallStatus::Unknown, "{gone:?}");
    // The store itself unloading a tool (no turn involved) is seen too.
    use quiver_store::Store;
    let store = quiver_store::SqliteStore::open(&h.db).unwrap();
    assert!(store.unload_tool(&s, "notes").unwrap());
    assert!(!offered(&a).contains(&"notes__add_note".to_owned()));
}
