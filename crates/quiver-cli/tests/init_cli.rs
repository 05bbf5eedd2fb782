//! `quiver init` through the real binary, non-interactive: it writes the provider, makes the
//! project's first package (lint passes, its tool runs in the sandbox), keeps the MCP token and
//! prints the clients' snippets; run again it changes nothing; with no provider known it says
//! so and still succeeds.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::Instant;

use serde_json::Value;

/// `quiver` in the project `project`, its state and configuration under `home`, with no
/// provider variable of the caller's environment.
fn quiver(home: &Path, project: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_quiver"));
    command
        .args(args)
        .current_dir(project)
        .env("HOME", home)
        .env("QUIVER_HOME", home.join("state"))
        .env("XDG_CONFIG_HOME", home.join("config"))
        .env("NO_COLOR", "1")
        .stdin(Stdio::null());
    for name in [
        "QUIVER_CONFIG",
        "QUIVER_AGENT_CONFIG",
        "QUIVER_PROVIDER",
        "QUIVER_PROVIDER_KIND",
        "QUIVER_BASE_URL",
        "QUIVER_MODEL",
        "QUIVER_API_KEY_ENV",
        "OPENAI_BASE_URL",
        "OPENAI_API_KEY",
        "ANTHROPIC_BASE_URL",
        "ANTHROPIC_API_KEY",
    ] {
        command.env_remove(name);
    }
    command.envs(env.iter().copied());
    command.output().unwrap()
}

fn steps(output: &Output) -> Value {
    assert!(
        output.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap()
}

fn done(report: &Value, step: &str) -> String {
    report["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["step"] == step)
        .map(|s| s["done"].as_str().unwrap().to_owned())
        .unwrap_or_default()
}

#[test]
fn init_sets_up_a_project_once_and_keeps_it() {
    let home = tempfile::tempdir().unwrap();
    let project = home.path().join("project");
    std::fs::create_dir_all(project.join("src/deep")).unwrap();
    let init = [
        "init",
        "--yes",
        "--provider",
        "openai",
        "--base-url",
        "https://api.deepseek.com/v1",
        "--model",
        "deepseek-chat",
        "--api-key-env",
        "DEEPSEEK_API_KEY",
        "--json",
    ];
    let started = Instant::now();
    let first = steps(&quiver(home.path(), &project, &init, &[]));
    println!(
        "quiver init, non-interactive, end to end: {:?}",
        started.elapsed()
    );
    assert!(
        done(&first, "provider").starts_with("openai deepseek-chat"),
        "{first}"
    );
    assert_eq!(done(&first, "package"), "created");
    assert_eq!(done(&first, "lint"), "passed");
    assert!(done(&first, "sandbox").starts_with("works"), "{first}");
    assert_eq!(done(&first, "token"), "created");
    let agent = home.path().join("config/quiver/agent.yaml");
    let written = std::fs::read_to_string(&agent).unwrap();
    assert!(
        written.contains("api_key_env: \"DEEPSEEK_API_KEY\""),
        "{written}"
    );
    let token = std::fs::read_to_string(home.path().join("state/mcp-token")).unwrap();
    let clients = first["clients"].to_string();
    for client in ["Claude Code", "Codex", "Cursor", "MCP Inspector"] {
        assert!(clients.contains(client), "{clients}");
    }
    assert!(
        clients.contains(token.trim()),
        "the HTTP snippets carry the token"
    );
    // Again: everything kept, nothing rewritten.
    let manifest = project.join(".quiver/packages/hello/quiver.yaml");
    let before = std::fs::read_to_string(&manifest).unwrap();
    let again = steps(&quiver(home.path(), &project, &init, &[]));
    for step in ["provider", "package", "token"] {
        assert_eq!(done(&again, step), "kept", "{step}: {again}");
    }
    assert_eq!(std::fs::read_to_string(&agent).unwrap(), written);
    assert_eq!(std::fs::read_to_string(&manifest).unwrap(), before);
    // The project's packages are found from any subfolder.
    let listed = quiver(home.path(), &project.join("src/deep"), &["list"], &[]);
    assert!(
        String::from_utf8_lossy(&listed.stdout).contains("hello"),
        "{}",
        String::from_utf8_lossy(&listed.stderr)
    );
}

#[test]
fn init_takes_the_provider_from_the_sdks_variables_or_says_there_is_none() {
    let home = tempfile::tempdir().unwrap();
    let project = home.path().join("project");
    std::fs::create_dir_all(&project).unwrap();
    let quiet = ["init", "--yes", "--no-sandbox-check", "--json"];
    let none = steps(&quiver(home.path(), &project, &quiet, &[]));
    assert!(done(&none, "provider").starts_with("none"), "{none}");
    let found = steps(&quiver(
        home.path(),
        &project,
        &quiet,
        &[("ANTHROPIC_API_KEY", "sk-ant-test")],
    ));
    assert!(done(&found, "provider").starts_with("anthropic"), "{found}");
    let written = std::fs::read_to_string(home.path().join("config/quiver/agent.yaml")).unwrap();
    assert!(
        !written.contains("sk-ant-test"),
        "the key itself is never written"
    );
    assert!(written.contains("ANTHROPIC_API_KEY"), "{written}");
}
