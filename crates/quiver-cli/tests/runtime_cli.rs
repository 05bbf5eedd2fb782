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
