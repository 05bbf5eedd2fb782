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
