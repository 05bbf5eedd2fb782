//! read_skill, tool_search, load_tool, ask_user, tool_output.

use quiver_runtime::CallStatus;
use quiver_runtime::approver::Answer;
use serde_json::json;

use super::common::*;

#[test]
fn read_skill_activates_opens_and_never_shows_host_paths() {
    let h = harness();
    let s = cli_session(&h);
    let mut turn = h.runtime.begin_turn(&s, owner(), "天气怎么样").unwrap();
    let out = turn.call("read_skill", json!({"id": "weather"})).unwrap();
    assert_eq!(out.status, CallStatus::Ok, "{out:?}");
    assert_eq!(out.content["status"], "activated");
    assert!(
        out.content["instructions"]
            .as_str()
            .unwrap()
            .contains("weather__forecast")
    );
    assert_eq!(
        out.content["files"],
        json!(["weather/references/cities.md", "weather/scripts/now.sh"])
    );
    assert!(
        out.content["tools"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["name"] == "weather__forecast")
    );
    let text = out.content.to_string();
    assert!(
        !text.contains(&*h._dir.path().to_string_lossy()),
        "no host path: {text}"
    );
    // Opening pins the package's exposed items.
    let names: Vec<String> = turn
        .tools()
        .unwrap()
        .into_iter()
        .map(|t| t.name.clone())
        .collect();
    assert!(names.contains(&"weather__forecast".to_owned()), "{names:?}");
    // A second read is short.
    let again = turn.call("read_skill", json!({"id": "weather"})).unwrap();
    assert!(
        again.content["status"]
            .as_str()
            .unwrap()
            .starts_with("already active")
    );
    assert!(again.content.get("instructions").is_none());
    // Files under the skill, by relative path (and seed 000's form).
    let file = turn
        .call("read_skill", json!({"id": "weather/references/cities.md"}))
        .unwrap();
    assert_eq!(file.content["text"], "Beijing, Shanghai\n");
}

#[test]
fn issue_12_files_under_a_skill_read_in_the_seed_form_and_open_the_package() {
    let h = harness();
    let s = cli_session(&h);
    let mut turn = h.runtime.begin_turn(&s, owner(), "").unwrap();
    let before: Vec<String> = turn
        .tools()
        .unwrap()
        .into_iter()
        .map(|t| t.name.clone())
        .collect();
    assert!(
        !before.contains(&"weather__forecast".to_owned()),
        "{before:?}"
    );
    let cases = [
        ("weather/skill/references/cities.md", "Beijing, Shanghai\n"),
        ("weather/references/cities.md", "Beijing, Shanghai\n"),
        ("weather/skill/scripts/now.sh", "echo now\n"),
        ("weather/scripts/now.sh", "echo now\n"),
    ];
    for (id, want) in cases {
        let out = turn.call("read_skill", json!({ "id": id })).unwrap();
        assert_eq!(out.content["text"], want, "{id}: {out:?}");
    }
    // Reading under the skill opened its package: its exposed tools are offered now.
    let after: Vec<String> = turn
        .tools()
        .unwrap()
        .into_iter()
        .map(|t| t.name.clone())
        .collect();
    assert!(after.contains(&"weather__forecast".to_owned()), "{after:?}");
    let unlisted = turn
        .call(
            "read_skill",
            json!({"id": "weather/skill/references/nope.md"}),
        )
        .unwrap();
    assert_eq!(
        error_text(&unlisted.content),
        "no such skill: weather/skill/references/nope.md"
    );
}

#[test]
fn missing_and_hidden_skills_get_the_same_answer() {
    let h = harness();
    let s = cli_session(&h);
    let mut turn = h.runtime.begin_turn(&s, owner(), "").unwrap();
    let missing = turn
        .call("read_skill", json!({"id": "weather/nope"}))
        .unwrap();
    let hidden = turn
        .call("read_skill", json!({"id": "weather/manual"}))
        .unwrap();
    assert_eq!(error_text(&missing.content), "no such skill: weather/nope");
    assert_eq!(error_text(&hidden.content), "no such skill: weather/manual");
    let escape = turn
        .call(
            "read_skill",
            json!({"id": "weather/references/../../notes/quiver.yaml"}),
        )
        .unwrap();
    assert!(error_text(&escape.content).starts_with("no such skill"));
}

#[test]
fn a_package_without_a_skill_opens_too() {
    let h = harness();
    let s = cli_session(&h);
    let mut turn = h.runtime.begin_turn(&s, owner(), "").unwrap();
    let out = turn.call("read_skill", json!({"id": "notes"})).unwrap();
    assert_eq!(out.content["status"], "opened");
    let names: Vec<String> = turn
        .tools()
        .unwrap()
        .into_iter()
        .map(|t| t.name.clone())
        .collect();
    assert!(names.contains(&"notes__add_note".to_owned()));
}

#[test]
fn tool_search_finds_at_most_five_and_loads_tools() {
    let h = harness();
    let s = cli_session(&h);
    let mut turn = h.runtime.begin_turn(&s, owner(), "北京明天多少度").unwrap();
    let out = turn
        .call("tool_search", json!({"query": "北京明天多少度"}))
        .unwrap();
    let results = out.content["results"].as_array().unwrap();
    assert!(results.len() <= 5);
    let first_tool = results.iter().find(|r| r["kind"] == "tool").unwrap();
    assert_eq!(first_tool["name"], "weather__forecast");
    assert_eq!(first_tool["loaded"], true);
    let names: Vec<String> = turn
        .tools()
        .unwrap()
        .into_iter()
        .map(|t| t.name.clone())
        .collect();
    assert!(names.contains(&"weather__forecast".to_owned()));
    // Private and hidden items are never found.
    let out = turn
        .call("tool_search", json!({"query": "internal"}))
        .unwrap();
    assert!(!out.content.to_string().contains("private_helper"));
}

#[test]
fn long_output_is_trimmed_and_readable_with_tool_output_in_the_same_session_only() {
    let h = harness();
    let s = cli_session(&h);
    h.person.answer(&[Answer::AllowForSession]);
    let mut turn = h.runtime.begin_turn(&s, owner(), "").unwrap();
    let out = turn.call("notes__long_list", json!({})).unwrap();
    assert_eq!(out.content["has_more"], true, "{out:?}");
    assert_eq!(out.content["summary"].as_str().unwrap().chars().count(), 50);
    let rest = turn
        .call("tool_output", json!({"call": out.call_id, "offset": 50}))
        .unwrap();
    assert_eq!(rest.content["text"].as_str().unwrap().len(), 70);
    let other = cli_session(&h);
    let mut other_turn = h.runtime.begin_turn(&other, owner(), "").unwrap();
    let stolen = other_turn
        .call("tool_output", json!({"call": out.call_id}))
        .unwrap();
    assert_eq!(stolen.status, CallStatus::Error);
}

#[test]
fn ask_user_is_answered_by_the_person_and_absent_when_unattended() {
    let h = harness();
    let s = cli_session(&h);
    h.person.replies.lock().unwrap().push_back("Beijing".into());
    let mut turn = h.runtime.begin_turn(&s, owner(), "").unwrap();
    let out = turn
        .call("ask_user", json!({"question": "Which city?"}))
        .unwrap();
    assert_eq!(out.content["answer"], "Beijing");
    let unattended = h
        .runtime
        .create_session(&quiver_runtime::SessionRequest {
            origin: Default::default(),
            agent: "chat".into(),
            principal: owner(),
            profile: quiver_runtime::Profile::Schedule,
        })
        .unwrap();
    let mut turn = h.runtime.begin_turn(&unattended, owner(), "").unwrap();
    assert!(!turn.tools().unwrap().iter().any(|t| t.name == "ask_user"));
    let out = turn.call("ask_user", json!({"question": "?"})).unwrap();
    assert_eq!(out.status, CallStatus::Unknown);
}

#[test]
fn issue_12_finding_one_exposed_item_brings_its_whole_package_and_slots_count_packages() {
    let config = quiver_runtime::RuntimeConfig {
        max_loaded: 2,
        ..quiver_runtime::RuntimeConfig::default()
    };
    let h = harness_with(config);
    let s = cli_session(&h);
    let mut turn = h.runtime.begin_turn(&s, owner(), "").unwrap();
    let names = |turn: &quiver_runtime::Turn<'_>| -> Vec<String> {
        turn.tools()
            .unwrap()
            .into_iter()
            .map(|t| t.name.clone())
            .collect()
    };
    // Loading one of notes' exposed tools brings every exposed tool of notes (seed 000).
    let loaded = turn
        .call("load_tool", json!({"name": "notes__add_note"}))
        .unwrap();
    assert_eq!(loaded.status, CallStatus::Ok, "{loaded:?}");
    let offered = names(&turn);
    for tool in ["notes__add_note", "notes__sync_notes", "notes__long_list"] {
        assert!(offered.contains(&tool.to_owned()), "{tool}: {offered:?}");
    }
    // A search hit does the same, and takes one slot for its package.
    let found = turn
        .call("tool_search", json!({"query": "天气预报"}))
        .unwrap();
    assert!(
        found.content.to_string().contains("weather__forecast"),
        "{found:?}"
    );
    let presence = h.store.presence(&s).unwrap();
    assert_eq!(presence.loaded, ["weather", "notes"]);
    // With two slots, a third package evicts the least recently used one, all of it.
    turn.call("load_tool", json!({"name": "group-admin__master_only"}))
        .unwrap();
    let offered = names(&turn);
    assert!(
        !offered.contains(&"notes__sync_notes".to_owned()),
        "{offered:?}"
    );
    assert!(
        offered.contains(&"weather__forecast".to_owned()),
        "{offered:?}"
    );
    let presence = h.store.presence(&s).unwrap();
    assert_eq!(presence.loaded, ["group-admin", "weather"]);
}

/// Issue 23 item 3: every file of a skill's folder is readable, as people write skill
/// folders (Anthropic's `mcp-builder/reference/*.md`, a root-level `forms.md` or
/// `reference.md`), while hidden files, the package format's own files, links that leave the
/// package and `..` stay out of reach.
#[test]
fn issue_23_every_file_of_a_skill_folder_is_readable() {
    use std::os::unix::fs::symlink;
    let dir = tempfile::tempdir().unwrap();
    let packages = dir.path().join("packages");
    let skill = |name: &str| format!("---\nname: {name}\ndescription: d {name}\n---\nbody\n");
    write(&packages, "mcp-builder/SKILL.md", &skill("mcp-builder"));
    write(&packages, "mcp-builder/reference/foo.md", "foo\n");
    write(&packages, "mcp-builder/forms.md", "forms\n");
    write(&packages, "mcp-builder/reference.md", "reference\n");
    write(&packages, "mcp-builder/.env", "SECRET=1\n");
    write(&packages, "mcp-builder/scripts/.cache/x", "cache\n");
    write(&packages, "mcp-builder/__pycache__/x.pyc", "pyc\n");
    write(&packages, "mcp-builder/state.db", "SQLite format 3\n");
    write(&packages, "mcp-builder/mcp-secret", "secret\n");
    write(dir.path(), "outside.md", "CANARY outside\n");
    symlink("../../outside.md", packages.join("mcp-builder/out.md")).unwrap();
    symlink("reference/foo.md", packages.join("mcp-builder/same.md")).unwrap();
    write(&packages, "pkg/quiver.yaml", "id: pkg\ndescription: p\n");
    write(&packages, "pkg/SKILL.md", &skill("pkg"));
    write(&packages, "pkg/guide.md", "guide\n");
    write(&packages, "pkg/skills/sub/SKILL.md", &skill("sub"));
    write(&packages, "pkg/skills/sub/reference.md", "sub reference\n");
    write(
        &packages,
        "pkg/prompts/p.md",
        "---\ntitle: p\nlayer: task\n---\np\n",
    );
    let db = dir.path().join("state.db");
    let h = build(dir, &packages, db, Default::default(), None);
    let s = cli_session(&h);
    let mut turn = h.runtime.begin_turn(&s, owner(), "").unwrap();
    let opened = turn
        .call("read_skill", json!({"id": "mcp-builder"}))
        .unwrap();
    assert_eq!(
        opened.content["files"],
        json!([
            "mcp-builder/forms.md",
            "mcp-builder/reference.md",
            "mcp-builder/reference/foo.md",
            "mcp-builder/same.md",
        ])
    );
    let own = turn.call("read_skill", json!({"id": "pkg"})).unwrap();
    assert_eq!(own.content["files"], json!(["pkg/guide.md"]));
    let cases = [
        ("mcp-builder/reference/foo.md", Some("foo\n")),
        ("mcp-builder/forms.md", Some("forms\n")),
        ("mcp-builder/reference.md", Some("reference\n")),
        ("mcp-builder/same.md", Some("foo\n")),
        ("pkg/guide.md", Some("guide\n")),
        ("pkg/skill/guide.md", Some("guide\n")),
        ("pkg/sub/reference.md", Some("sub reference\n")),
        ("mcp-builder/.env", None),
        ("mcp-builder/scripts/.cache/x", None),
        ("mcp-builder/__pycache__/x.pyc", None),
        ("mcp-builder/state.db", None),
        ("mcp-builder/mcp-secret", None),
        ("mcp-builder/out.md", None),
        ("mcp-builder/SKILL.md", None),
        ("mcp-builder/reference/../forms.md", None),
        ("pkg/quiver.yaml", None),
        ("pkg/prompts/p.md", None),
        ("pkg/skills/sub/SKILL.md", None),
        ("pkg/sub/../../../outside.md", None),
    ];
    for (id, want) in cases {
        let out = turn.call("read_skill", json!({ "id": id })).unwrap();
        match want {
            Some(text) => assert_eq!(out.content["text"], text, "{id}: {out:?}"),
            None => assert_eq!(
                error_text(&out.content),
                format!("no such skill: {id}"),
                "{id}"
            ),
        }
    }
}

/// Issue 23 item 3: a skill an MCP server offered is read like any skill, but its scripts
/// are never run: they came from the server, and would run with the server package's
/// permissions.
#[test]
fn issue_23_scripts_of_a_servers_skill_are_read_never_run() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("mcp/hub");
    write(
        &root,
        "quiver.yaml",
        "id: hub\ndescription: Skills of a server\n",
    );
    write(
        &root,
        "skills/greet/SKILL.md",
        "---\nname: greet\ndescription: Greets.\n---\nRun scripts/hello.sh.\n",
    );
    write(&root, "skills/greet/scripts/hello.sh", "echo hi\n");
    let id = "hub".parse().unwrap();
    let (skills, _) =
        quiver_package::package::load_mirrored_skills(&root, &root.join("skills"), &id, "hub");
    let mut package = quiver_package::load_package(&root).package.unwrap();
    package.skills = skills;
    let catalog = quiver_catalog::Catalog::build(
        vec![(package, quiver_catalog::Scope::Project)],
        Vec::new(),
        &quiver_catalog::CatalogOptions::default(),
    );
    let db = dir.path().join("state.db");
    let h = build_over(dir, catalog, db, Default::default(), None);
    let s = cli_session(&h);
    let mut turn = h.runtime.begin_turn(&s, owner(), "").unwrap();
    let opened = turn.call("read_skill", json!({"id": "hub/greet"})).unwrap();
    assert_eq!(
        opened.content["files"],
        json!(["hub/greet/scripts/hello.sh"])
    );
    let script = turn
        .call("read_skill", json!({"id": "hub/greet/scripts/hello.sh"}))
        .unwrap();
    assert_eq!(script.content["text"], "echo hi\n");
    let run = turn
        .call(
            "run_skill_script",
            json!({"skill": "hub/greet", "script": "hello.sh"}),
        )
        .unwrap();
    assert_eq!(
        error_text(&run.content),
        "skill `hub/greet` comes from the MCP server `hub`: its scripts can be read with read_skill, not run"
    );
    assert!(h.calls.lock().unwrap().is_empty());
    assert!(h.person.cards().is_empty(), "nobody is asked");
}
