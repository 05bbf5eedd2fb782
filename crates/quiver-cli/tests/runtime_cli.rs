//! `quiver call`, `quiver session` and `quiver audit` through the built binary and a real
//! SQLite file.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::{Command, Output, Stdio};

use serde_json::Value;

fn repo() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn quiver(home: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_quiver"))
        .args(["--root", repo().join("examples/packages").to_str().unwrap()])
        .args(args)
        .env("QUIVER_HOME", home)
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

fn json(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)))
}

#[test]
fn yes_answers_consent_and_the_tool_runs_in_the_sandbox() {
    let home = tempfile::tempdir().unwrap();
    let out = quiver(
        home.path(),
        &[
            "call",
            "weather.forecast",
            "--args",
            r#"{"city": "北京", "date": "明天"}"#,
            "--yes",
        ],
    );
    assert_eq!(out.status.code(), Some(0));
    let v = json(&out);
    assert_eq!(v["outcome"]["status"], "ok");
    assert_eq!(v["outcome"]["content"]["city_en"], "Beijing");
    // The consent was granted and recorded, and the call audited.
    let session = v["session"].as_str().unwrap();
    let shown = json(&quiver(home.path(), &["session", "show", session]));
    assert_eq!(shown["consents"][0]["package"], "weather");
    assert_eq!(shown["consents"][0]["granted"], true);
    let audit = json(&quiver(
        home.path(),
        &["audit", "--json", "--session", session],
    ));
    assert_eq!(audit[0]["tool"], "weather.forecast");
    assert_eq!(audit[0]["status"], "ok");
}

#[test]
fn yes_never_approves_a_dangerous_tool() {
    let home = tempfile::tempdir().unwrap();
    let out = quiver(
        home.path(),
        &[
            "call",
            "group-admin__kick_member",
            "--args",
            r#"{"user_id": "42"}"#,
            "--platform",
            "qq",
            "--scope",
            "group:10001",
            "--yes",
        ],
    );
    let v = json(&out);
    assert_eq!(v["outcome"]["status"], "refused");
    assert_eq!(
        v["outcome"]["content"]["error"],
        "refused; needs human approval; do not retry"
    );
}

/// Issue 22 item 14: the perception cache lives in the state database, so a second `quiver
/// call` process answers an identical call from it (and says so, in its outcome and its audit
/// record), while another sender's identical call runs the tool.
#[test]
fn call_processes_share_the_perception_cache_and_never_across_senders() {
    let home = tempfile::tempdir().unwrap();
    let arguments = r#"{"city": "北京", "date": "2025-10-01"}"#;
    // (`--as`, whether the answer comes from the cache)
    let cases = [(None, false), (None, true), (Some("ann:user"), false)];
    let mut results = Vec::new();
    for (sender, cached) in cases {
        let mut args = vec!["call", "weather.forecast", "--args", arguments, "--yes"];
        args.extend(sender.iter().flat_map(|s| ["--as", s]));
        let out = quiver(home.path(), &args);
        assert_eq!(out.status.code(), Some(0), "{sender:?}: {out:?}");
        let v = json(&out);
        assert_eq!(v["outcome"]["status"], "ok", "{sender:?}: {v}");
        assert_eq!(v["outcome"]["cached"], cached, "{sender:?}: {v}");
        let session = v["session"].as_str().unwrap();
        let audit = json(&quiver(
            home.path(),
            &["audit", "--json", "--session", session],
        ));
        assert_eq!(audit[0]["cached"], cached, "{sender:?}: {}", audit[0]);
        let hit = audit[0]["decisions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|d| d["step"] == "cache" && d["decision"] == "hit");
        assert_eq!(hit, cached, "{sender:?}: {}", audit[0]);
        results.push(v["outcome"]["content"].clone());
    }
    assert_eq!(results[1], results[0]);
}

#[test]
fn invalid_arguments_and_unknown_tools() {
    let home = tempfile::tempdir().unwrap();
    let v = json(&quiver(
        home.path(),
        &[
            "call",
            "weather__forecast",
            "--args",
            r#"{"town": 1}"#,
            "--yes",
        ],
    ));
    assert_eq!(v["outcome"]["status"], "invalid");
    assert!(
        v["outcome"]["content"]["error"]
            .as_str()
            .unwrap()
            .starts_with("invalid arguments: ")
    );
    let v = json(&quiver(home.path(), &["call", "nothing__here", "--yes"]));
    assert_eq!(v["outcome"]["status"], "unknown");
    let out = quiver(
        home.path(),
        &["call", "weather__forecast", "--args", "not json"],
    );
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn sessions_are_listed_and_ended() {
    let home = tempfile::tempdir().unwrap();
    let v = json(&quiver(
        home.path(),
        &[
            "call",
            "tool_search",
            "--args",
            r#"{"query": "北京明天多少度"}"#,
        ],
    ));
    assert_eq!(v["outcome"]["status"], "ok");
    assert_eq!(
        v["outcome"]["content"]["results"][0]["name"],
        "weather__forecast"
    );
    let session = v["session"].as_str().unwrap().to_owned();
    let listed = json(&quiver(home.path(), &["session", "list", "--json"]));
    assert_eq!(listed[0]["id"], session);
    assert_eq!(
        quiver(home.path(), &["session", "end", &session])
            .status
            .code(),
        Some(0)
    );
    assert_eq!(
        json(&quiver(home.path(), &["session", "list", "--json"]))
            .as_array()
            .unwrap()
            .len(),
        0
    );
    // Continuing an ended session is an error.
    let out = quiver(
        home.path(),
        &[
            "call",
            "tool_search",
            "--args",
            r#"{"query": "x"}"#,
            "--session",
            &session,
        ],
    );
    assert_eq!(out.status.code(), Some(2));
}

/// Issue 12 D20: `--as USER:ROLE[:PLATFORM_ROLES]` and `--platform-role [PLATFORM:]ROLE` give
/// the sender platform roles, so `platform(adapter,perm)` can hold from the CLI.
#[test]
fn platform_roles_from_the_command_line_decide_platform_rules() {
    let home = tempfile::tempdir().unwrap();
    let packages = home.path().join("packages");
    let tool = packages.join("mod/tools/warn_member");
    std::fs::create_dir_all(&tool).unwrap();
    std::fs::write(
        packages.join("mod/quiver.yaml"),
        "id: mod\ndescription: 群管理提醒 Group reminders\n",
    )
    .unwrap();
    std::fs::write(
        tool.join("tool.yaml"),
        "description: 提醒群成员遵守群规 Remind a member of the group rules\ncategory: perception\nexpose: true\nplatforms: [qq]\npermissions: [\"platform(qq,admin)\"]\ninput: {type: object}\nrun: {command: [sh, -c, 'echo {}']}\n",
    )
    .unwrap();
    let cases: [(&[&str], Option<i32>, &str); 7] = [
        // Not admitted: the tool is unknown to this sender.
        (&["--as", "alice:user"], Some(1), "unknown"),
        (
            &["--as", "alice:user", "--platform-role", "admin"],
            Some(0),
            "ok",
        ),
        (
            &["--as", "alice:user", "--platform-role", "qq:admin"],
            Some(0),
            "ok",
        ),
        (&["--as", "alice:user:owner"], Some(0), "ok"),
        (&["--as", "alice:user:member,admin"], Some(0), "ok"),
        (
            &["--as", "alice:user", "--platform-role", "member"],
            Some(1),
            "unknown",
        ),
        (
            &["--as", "alice:user", "--platform-role", "discord:admin"],
            Some(2),
            "",
        ),
    ];
    for (sender, code, status) in cases {
        let out = Command::new(env!("CARGO_BIN_EXE_quiver"))
            .args(["--root", packages.to_str().unwrap()])
            .args(["call", "mod.warn_member", "--platform", "qq", "--yes"])
            .args(sender)
            .env("QUIVER_HOME", home.path())
            .env("HOME", home.path())
            .env_remove("QUIVER_CONFIG")
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), code, "{sender:?}: {stderr}");
        if status.is_empty() {
            assert!(stderr.contains("names the platform `discord`"), "{stderr}");
        } else {
            assert_eq!(json(&out)["outcome"]["status"], status, "{sender:?}");
        }
    }
}

/// Issue 12 item 5: the libraries' warnings reach stderr (tracing-subscriber in `main`,
/// `QUIVER_LOG`, default `warn`): here the runtime's `always_loaded` overflow.
#[test]
fn library_warnings_are_seen_and_quiver_log_filters_them() {
    let home = tempfile::tempdir().unwrap();
    let packages = home.path().join("packages");
    std::fs::create_dir_all(packages.join("many")).unwrap();
    std::fs::write(
        packages.join("many/quiver.yaml"),
        "id: many\ndescription: 很多常驻工具 Many resident tools\n",
    )
    .unwrap();
    for i in 0..10 {
        let dir = packages.join(format!("many/tools/t{i}"));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("tool.yaml"),
            format!("description: 第{i}个工具 Tool number {i} of many\ncategory: perception\nexpose: true\nalways_loaded: true\ninput: {{type: object}}\nrun: {{command: [sh, -c, 'echo {{}}']}}\n"),
        )
        .unwrap();
    }
    let cases = [(None, true), (Some("error"), false), (Some("warn"), true)];
    for (log, seen) in cases {
        let mut command = Command::new(env!("CARGO_BIN_EXE_quiver"));
        command
            .args(["--root", packages.to_str().unwrap()])
            .args(["call", "many.t0", "--yes"])
            .env("QUIVER_HOME", home.path())
            .env("HOME", home.path())
            .env_remove("QUIVER_CONFIG")
            .env_remove("QUIVER_LOG")
            .stdin(Stdio::null());
        if let Some(log) = log {
            command.env("QUIVER_LOG", log);
        }
        let out = command.output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            stderr.contains("tools declare `always_loaded`"),
            seen,
            "{log:?}: {stderr}"
        );
    }
}

/// Issue 22 item 14: a session keeps the origin it was created with; `--platform` or `--scope`
/// with `--session` is refused instead of silently ignored.
#[test]
fn platform_and_scope_with_a_session_are_refused() {
    let home = tempfile::tempdir().unwrap();
    let v = json(&quiver(
        home.path(),
        &["call", "tool_search", "--args", r#"{"query": "x"}"#],
    ));
    let session = v["session"].as_str().unwrap().to_owned();
    for flag in [["--platform", "qq"], ["--scope", "group:1"]] {
        let out = quiver(
            home.path(),
            &[
                "call",
                "tool_search",
                "--args",
                r#"{"query": "x"}"#,
                "--session",
                &session,
                flag[0],
                flag[1],
            ],
        );
        assert_eq!(out.status.code(), Some(2), "{flag:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("cannot be used with"), "{flag:?}: {stderr}");
    }
}

/// Issue 22 item 2: `quiver call --agent <package>.<agent>` calls as that agent, which may call
/// only what its `tools:` declares: anything else is unknown, as in its chat.
#[test]
fn call_as_an_agent_reaches_only_its_declared_tools() {
    let home = tempfile::tempdir().unwrap();
    let args = r#"{"city": "北京", "date": "明天"}"#;
    let out = quiver(
        home.path(),
        &[
            "call",
            "weather.forecast",
            "--args",
            args,
            "--yes",
            "--agent",
            "daily-report.reporter",
        ],
    );
    assert_eq!(out.status.code(), Some(1));
    let v = json(&out);
    assert_eq!(v["outcome"]["status"], "unknown", "{v:#}");
    assert_eq!(
        v["outcome"]["content"]["error"],
        "unknown tool: weather.forecast"
    );
    // Its declared tool is callable.
    let out = quiver(
        home.path(),
        &[
            "call",
            "notes.list_notes",
            "--args",
            "{}",
            "--yes",
            "--agent",
            "daily-report.reporter",
        ],
    );
    let v = json(&out);
    assert_ne!(v["outcome"]["status"], "unknown", "{v:#}");
}

/// Issue 22 item 9: an empty or relative `QUIVER_HOME` / `XDG_DATA_HOME` counts as unset (the
/// XDG rule), so the state never lands under the current directory and a sandboxed tool runs.
#[test]
fn empty_or_relative_state_variables_count_as_unset() {
    let home = tempfile::tempdir().unwrap();
    let xdg = tempfile::tempdir().unwrap();
    let from_home = home.path().join(".local/share/quiver/state.db");
    let from_xdg = xdg.path().join("quiver/state.db");
    let cases: [(&str, &str, &Path); 4] = [
        ("", "", &from_home),
        ("state", "", &from_home),
        ("", "data", &from_home),
        ("./state", xdg.path().to_str().unwrap(), &from_xdg),
    ];
    for (quiver_home, xdg_data_home, expected) in cases {
        let cwd = tempfile::tempdir().unwrap();
        let out = Command::new(env!("CARGO_BIN_EXE_quiver"))
            .args(["--root", repo().join("examples/packages").to_str().unwrap()])
            .args(["call", "weather.forecast", "--yes"])
            .args(["--args", r#"{"city": "北京", "date": "明天"}"#])
            .current_dir(cwd.path())
            .env("QUIVER_HOME", quiver_home)
            .env("XDG_DATA_HOME", xdg_data_home)
            .env("HOME", home.path())
            .env_remove("QUIVER_CONFIG")
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let case = format!("QUIVER_HOME={quiver_home:?} XDG_DATA_HOME={xdg_data_home:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{case}: {stderr}");
        assert_eq!(json(&out)["outcome"]["status"], "ok", "{case}");
        assert!(expected.is_file(), "{case}: no {}", expected.display());
        let left: Vec<_> = std::fs::read_dir(cwd.path()).unwrap().collect();
        assert!(left.is_empty(), "{case}: the current folder got {left:?}");
    }
}

/// The package `vault` of the audit tests: a tool with a secret argument, a tool that fails
/// with terminal control sequences in its error, a skill, and a workflow whose approval title
/// is the caller's input.
fn vault(root: &Path) {
    let write = |rel: &str, text: &str| {
        let path = root.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    };
    write(
        "vault/quiver.yaml",
        "id: vault\ndescription: Keeps secrets for the audit tests\n",
    );
    write(
        "vault/SKILL.md",
        "---\nname: vault\ndescription: Use the vault when a password is needed.\n---\nLog in with `vault.login`.\n",
    );
    write(
        "vault/tools/login/tool.yaml",
        "description: Logs in\ncategory: perception\nexpose: true\ninput: {type: object, properties: {user: {type: string}, password: {type: string, format: password}}}\nrun: {command: [sh, -c, 'cat >/dev/null; echo {}']}\n",
    );
    write(
        "vault/tools/fail/tool.yaml",
        "description: Fails loudly\ncategory: perception\nexpose: true\ninput: {type: object}\nrun: {command: [sh, -c, 'cat >/dev/null; printf \"\\033[2J\\033]0;pwned\\007boom\" >&2; exit 3']}\n",
    );
    write(
        "vault/workflows/publish.yaml",
        "description: Publishes after a review\nexpose: true\ninput: {type: object, properties: {text: {type: string}}, required: [text]}\nsteps:\n  - id: ok\n    approval: 'Publish {{ input.text }}?'\n",
    );
}

fn vault_quiver(packages: &Path, home: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_quiver"))
        .args(["--root", packages.to_str().unwrap()])
        .args(args)
        .env("QUIVER_HOME", home)
        .env("HOME", home)
        .env("NO_COLOR", "1")
        .env_remove("QUIVER_CONFIG")
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

/// Issue 22 item 11: the record of a call names each step as the docs spell it, digests the
/// arguments without their secret fields whatever name the call used, and says `unanswered`
/// for a question nobody could be asked (not `timed-out`).
#[test]
fn audit_records_spell_steps_hide_secrets_by_any_name_and_say_unanswered() {
    let packages = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    vault(packages.path());
    let q = |args: &[&str]| vault_quiver(packages.path(), home.path(), args);
    let mut digests = Vec::new();
    for (name, password) in [
        ("vault.login", "hunter2"),
        ("vault.login", "swordfish"),
        ("vault__login", "letmein"),
    ] {
        let arguments = format!(r#"{{"user": "ann", "password": "{password}"}}"#);
        let out = q(&["call", name, "--yes", "--args", &arguments]);
        assert_eq!(out.status.code(), Some(0), "{name}: {out:?}");
        let session = json(&out)["session"].as_str().unwrap().to_owned();
        let audit = json(&q(&["audit", "--json", "--session", &session]));
        let record = &audit[0];
        assert_eq!(record["tool"], "vault.login", "{record}");
        digests.push(record["argument_digest"].as_str().unwrap().to_owned());
        let steps: Vec<&str> = record["decisions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d["step"].as_str().unwrap())
            .collect();
        assert!(steps.contains(&"approval-mode"), "{steps:?}");
        assert!(
            steps.iter().all(|s| !s.contains("approvalmode")),
            "{steps:?}"
        );
    }
    // A password is never part of the digest: three passwords, one digest.
    assert!(digests.iter().all(|d| *d == digests[0]), "{digests:?}");

    // No terminal and no `--yes`: nobody can be asked, at once.
    let out = q(&["call", "vault.login", "--args", r#"{"user": "ann"}"#]);
    assert_eq!(out.status.code(), Some(1));
    let session = json(&out)["session"].as_str().unwrap().to_owned();
    let audit = json(&q(&["audit", "--json", "--session", &session]));
    let decisions = audit[0]["decisions"].to_string();
    assert!(
        decisions.contains(r#""decision":"unanswered""#),
        "{decisions}"
    );
    assert!(!decisions.contains("timed-out"), "{decisions}");
}

/// Issue 22 items 11 and 21: `quiver session end` ends the session's active skills with a
/// `skill_ended` record, and every operator action (session end, control plane, switching a
/// package off and on, cancelling a run) leaves an `operator` record.
#[test]
fn session_end_and_operator_actions_are_audited() {
    let packages = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    vault(packages.path());
    let q = |args: &[&str]| vault_quiver(packages.path(), home.path(), args);
    let out = q(&["call", "read_skill", "--args", r#"{"id": "vault"}"#]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let session = json(&out)["session"].as_str().unwrap().to_owned();
    assert_eq!(q(&["session", "end", &session]).status.code(), Some(0));
    let audit = json(&q(&["audit", "--json", "--session", &session]));
    let kinds: Vec<&str> = audit
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["kind"].as_str().unwrap())
        .collect();
    assert!(kinds.contains(&"skill_ended"), "{kinds:?}");
    assert!(kinds.contains(&"operator"), "{kinds:?}");

    for args in [
        &["control", "emergency-stop"][..],
        &["control", "normal"],
        &["disable", "vault"],
        &["enable", "vault"],
    ] {
        assert_eq!(q(args).status.code(), Some(0), "{args:?}");
    }
    let run = json(&q(&[
        "run",
        "vault.publish",
        "--input",
        r#"{"text": "x"}"#,
        "--json",
    ]));
    let run_id = run["id"].as_str().unwrap().to_owned();
    assert_eq!(run["status"], "waiting", "{run}");
    assert_eq!(q(&["runs", "cancel", &run_id]).status.code(), Some(0));
    let audit = json(&q(&["audit", "--json"]));
    let actions: Vec<String> = audit
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["kind"] == "operator")
        .map(|r| {
            let d = &r["decisions"][0];
            format!(
                "{} {}",
                d["decision"].as_str().unwrap(),
                d["reason"].as_str().unwrap()
            )
        })
        .collect();
    let want = [
        format!("cancel run `{run_id}` cancelled"),
        "enable package `vault` switched on".to_owned(),
        "disable package `vault` switched off".to_owned(),
        "control control plane set to normal".to_owned(),
        "control control plane set to emergency-stop".to_owned(),
        format!("end-session session `{session}` ended"),
    ];
    assert_eq!(actions, want);
}

/// Issue 22 item 20: package-controlled text (a tool's error, a workflow's approval title
/// from the caller's input) reaches the operator's terminal escaped in `quiver audit` and
/// `quiver approvals list`.
#[test]
fn human_renderers_escape_terminal_control_sequences() {
    let packages = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    vault(packages.path());
    let q = |args: &[&str]| vault_quiver(packages.path(), home.path(), args);
    let out = q(&["call", "vault.fail", "--yes"]);
    assert_eq!(out.status.code(), Some(1));
    // The raw record holds the sequence (so this test means something)...
    let raw = String::from_utf8(q(&["audit", "--json"]).stdout).unwrap();
    let raw: Value = serde_json::from_str(&raw).unwrap();
    assert!(raw.to_string().contains("\\u001b[2J"), "{raw}");
    let run = json(&q(&[
        "run",
        "vault.publish",
        "--input",
        r#"{"text": "\u001b[2J\u009b31m\u202eevil"}"#,
        "--json",
    ]));
    assert_eq!(run["status"], "waiting", "{run}");
    // ...and no human renderer prints it raw.
    for args in [&["audit"][..], &["approvals", "list"], &["session", "list"]] {
        let out = q(args);
        let text = String::from_utf8(out.stdout).unwrap();
        assert!(!text.is_empty(), "{args:?}");
        for c in ['\u{1b}', '\u{7}', '\u{9b}', '\u{202e}'] {
            assert!(!text.contains(c), "{args:?} printed {c:?} raw: {text:?}");
        }
    }
    let list = String::from_utf8(q(&["approvals", "list"]).stdout).unwrap();
    assert!(list.contains("Publish \\u{1b}[2J"), "{list}");
}

/// Issue 22 item 21: a call whose question was pending when its process was killed leaves
/// a record: its start is recorded before anyone is asked, and the next start closes it as
/// `interrupted`, saying that nothing ran.
#[test]
fn a_call_killed_while_asking_leaves_an_interrupted_record() {
    let packages = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    vault(packages.path());
    let q = |args: &[&str]| vault_quiver(packages.path(), home.path(), args);
    let mut child = Command::new(env!("CARGO_BIN_EXE_quiver"))
        .args(["--root", packages.path().to_str().unwrap()])
        .args(["call", "vault.login", "--console", "60"])
        .env("QUIVER_HOME", home.path())
        .env("HOME", home.path())
        .env_remove("QUIVER_CONFIG")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(25);
    loop {
        let pending = json(&q(&["approvals", "list", "--json"]));
        if pending.as_array().is_some_and(|a| !a.is_empty()) {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "no card was queued");
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    // The next command that opens the runtime closes what the killed one left.
    q(&["call", "vault.fail", "--yes"]);
    let audit = json(&q(&["audit", "--json"]));
    let record = audit
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["tool"] == "vault.login")
        .unwrap_or_else(|| panic!("no record of the killed call: {audit}"));
    assert_eq!(record["status"], "interrupted", "{record}");
    let last = record["decisions"].as_array().unwrap().last().unwrap();
    assert_eq!(last["step"], "approval", "{record}");
    assert_eq!(last["decision"], "interrupted", "{record}");
}

/// Issue 22 item 19: a skill whose `references`, `assets` or `scripts` folder is a link out of
/// the package lists none of the files there; a link that stays inside the package is listed.
#[test]
fn skill_folders_linked_out_of_the_package_list_nothing() {
    let packages = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret-name.md"), "x").unwrap();
    let skill = packages.path().join("linky");
    std::fs::create_dir_all(skill.join("kept")).unwrap();
    std::fs::write(skill.join("kept/inside.md"), "y").unwrap();
    std::fs::write(
        skill.join("SKILL.md"),
        "---\nname: linky\ndescription: A skill whose folders are links.\n---\nRead the references.\n",
    )
    .unwrap();
    for sub in ["references", "scripts"] {
        std::os::unix::fs::symlink(outside.path(), skill.join(sub)).unwrap();
    }
    std::os::unix::fs::symlink("kept", skill.join("assets")).unwrap();
    let out = vault_quiver(
        packages.path(),
        home.path(),
        &["call", "read_skill", "--args", r#"{"id": "linky"}"#],
    );
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(!text.contains("secret-name"), "{text}");
    assert!(text.contains("assets/inside.md"), "{text}");
}
