//! `quiver serve` spoken to by a real MCP client: the Python `mcp` SDK 2.3.0 (installed by
//! `scripts/install-test-deps.sh` into `$QUIVER_TEST_VENV`, default `<repo>/.venv-test`),
//! over stdio and Streamable HTTP, in both protocol eras (2025-11-25 sessions with
//! elicitation requests; 2026-07-28 stateless requests with `input_required`).
//!
//! The script `tests/mcp/python_client.py` lists the tools, searches, reads a skill, answers
//! consent with cancel, decline and accept through its elicitation callback, is refused a
//! dangerous tool, and reads skill resources; it asserts each step.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};

mod support;

use support::{Server, python_with, repo_root};

fn run_client(transport: &str, mode: &str, db: &Path, url: Option<&str>, token: Option<&str>) {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp/python_client.py");
    let root = repo_root().join("examples/packages");
    let mut command = Command::new(python_with("mcp, httpx2"));
    command
        .arg(script)
        .args([transport, mode, env!("CARGO_BIN_EXE_quiver")])
        .arg(&root)
        .arg(db);
    if let Some(url) = url {
        command.arg(url);
    }
    if let Some(token) = token {
        command.env("QUIVER_TEST_TOKEN", token);
    }
    let output = command.output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success() && stdout.contains("all ok"),
        "{transport} {mode}:\n{stdout}\n{stderr}"
    );
}

/// Starts `quiver serve --http 127.0.0.1:0`-style on a free port and returns its URL.
fn http_server(dir: &Path) -> (Server, String) {
    let config = dir.join("config.yaml");
    std::fs::write(
        &config,
        "mcp:\n  tokens:\n    - {token: test-token-1, user: alice, role: trusted}\n",
    )
    .unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut child = Command::new(env!("CARGO_BIN_EXE_quiver"))
        .arg("--root")
        .arg(repo_root().join("examples/packages"))
        .args(["serve", "--http", &format!("127.0.0.1:{port}"), "--db"])
        .arg(dir.join("state.db"))
        .env("QUIVER_CONFIG", &config)
        .env("QUIVER_HOME", dir)
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Wait for the line that prints the URL; keep draining stderr so the server never blocks.
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut seen = String::new();
    loop {
        let mut line = String::new();
        assert!(
            stderr.read_line(&mut line).unwrap() > 0,
            "the server exited: {seen}"
        );
        seen.push_str(&line);
        if line.contains("/mcp") {
            break;
        }
    }
    std::thread::spawn(move || std::io::copy(&mut stderr, &mut std::io::sink()));
    (Server(child), format!("http://127.0.0.1:{port}/mcp"))
}

#[test]
fn python_sdk_over_stdio_session_era() {
    let dir = tempfile::tempdir().unwrap();
    run_client("stdio", "legacy", &dir.path().join("state.db"), None, None);
}

#[test]
fn python_sdk_over_stdio_stateless_era() {
    let dir = tempfile::tempdir().unwrap();
    run_client(
        "stdio",
        "2026-07-28",
        &dir.path().join("state.db"),
        None,
        None,
    );
}

#[test]
fn python_sdk_over_http_session_era() {
    let dir = tempfile::tempdir().unwrap();
    let (_server, url) = http_server(dir.path());
    run_client(
        "http",
        "legacy",
        &dir.path().join("unused.db"),
        Some(&url),
        Some("test-token-1"),
    );
}

#[test]
fn python_sdk_over_http_stateless_era() {
    let dir = tempfile::tempdir().unwrap();
    let (_server, url) = http_server(dir.path());
    run_client(
        "http",
        "2026-07-28",
        &dir.path().join("unused.db"),
        Some(&url),
        Some("test-token-1"),
    );
}
