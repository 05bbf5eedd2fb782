//! `quiver serve` spoken to by a real MCP client: the Python `mcp` SDK 2.3.0 (installed by
//! `scripts/install-test-deps.sh` into `$QUIVER_TEST_VENV`, default `<repo>/.venv-test`),
//! over stdio and Streamable HTTP, in both protocol eras (2025-11-25 sessions with
//! elicitation requests; 2026-07-28 stateless requests with `input_required`).
//!
//! The script `tests/mcp/python_client.py` lists the tools, searches, reads a skill, answers
//! consent with cancel, decline and accept through its elicitation callback, is refused a
//! dangerous tool, and reads skill resources; it asserts each step.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

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
    http_server_with(dir, None, &[])
}

/// [`http_server`] with one more root and more `serve` arguments.
fn http_server_with(dir: &Path, root: Option<&Path>, extra: &[&str]) -> (Server, String) {
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
        .args(
            root.map(|r| ["--root".as_ref(), r.as_os_str()])
                .into_iter()
                .flatten(),
        )
        .arg("serve")
        .args(extra)
        .args(["--http", &format!("127.0.0.1:{port}"), "--db"])
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

/// Runs `tests/mcp/sdk_retry.py` against `url`.
fn run_retry(url: &str, scenario: &str, mode: &str, token: Option<&str>) {
    run_retry_in(url, scenario, mode, token, None);
}

/// [`run_retry`] with the server's home, where `quiver approvals` finds its state.
fn run_retry_in(url: &str, scenario: &str, mode: &str, token: Option<&str>, home: Option<&Path>) {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp/sdk_retry.py");
    let mut command = Command::new(python_with("mcp, httpx2"));
    command.arg(script).args([url, scenario, mode]);
    if let Some(token) = token {
        command.env("QUIVER_TEST_TOKEN", token);
    }
    if let Some(home) = home {
        command
            .env("QUIVER_TEST_BIN", env!("CARGO_BIN_EXE_quiver"))
            .env("QUIVER_TEST_HOME", home)
            .env_remove("QUIVER_CONFIG");
    }
    let output = command.output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success() && stdout.contains("all ok"),
        "{scenario} {mode}:\n{stdout}\n{stderr}"
    );
    // Figures the script measured (`cargo test -- --nocapture` shows them).
    for line in stdout.lines().filter(|l| l.starts_with("time to")) {
        println!("{scenario} {mode}: {line}");
    }
}

/// MCP 2026-07-28: the SDK's own `input_required` retry, with no handle passed, continues the
/// conversation sealed in its requestState (consent accepted, then declined).
#[test]
fn python_sdk_own_retry_continues_the_sealed_conversation() {
    let dir = tempfile::tempdir().unwrap();
    let (_server, url) = http_server(dir.path());
    run_retry(&url, "retry", "2026-07-28", Some("test-token-1"));
}

/// Issue 23 items 1 and 2: the SDK's default client (no elicitation callback, no handle) is
/// answered at once with the command that answers its consent; after `quiver approvals
/// approve`, the same call runs, and the next call to the package asks nothing.
#[test]
fn python_sdk_default_client_is_answered_at_once_and_its_retry_runs() {
    let dir = tempfile::tempdir().unwrap();
    let (_server, url) = http_server(dir.path());
    run_retry_in(
        &url,
        "ask-later",
        "2026-07-28",
        Some("test-token-1"),
        Some(dir.path()),
    );
}

/// A package open to anyone whose one tool is dangerous and needs a person's approval.
fn payout_package(root: &Path) {
    let tool = root.join("payout/tools/send");
    std::fs::create_dir_all(&tool).unwrap();
    std::fs::write(
        root.join("payout/quiver.yaml"),
        "id: payout\nname: Payout\nversion: 1.0.0\ndescription: Posts a notice in the bot's name; every notice needs a person's approval\nlicense: MIT\npermissions: {}\n",
    )
    .unwrap();
    std::fs::write(
        tool.join("tool.yaml"),
        "name: send\nversion: 1.0.0\ndescription:\n  summary: Post a notice in the bot's name; every call needs a person's approval.\ncategory: action\nrisk: dangerous\nrisk_category: publish\napproval: human\nexpose: true\ninput:\n  type: object\n  properties:\n    amount: {type: integer}\n  required: [amount]\nrun: {command: [python3, main.py]}\n",
    )
    .unwrap();
    std::fs::write(tool.join("main.py"), "print('{\"sent\": true}')\n").unwrap();
}

/// An anonymous caller (`--allow-anonymous`) can never answer a dangerous tool's approval, in
/// either era.
#[test]
fn python_sdk_anonymous_never_approves_a_dangerous_call() {
    for mode in ["legacy", "2026-07-28"] {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("packages");
        payout_package(&root);
        let (_server, url) = http_server_with(dir.path(), Some(&root), &["--allow-anonymous"]);
        run_retry(&url, "anonymous", mode, None);
    }
}

/// Without `--allow-anonymous`, HTTP needs a token: the owner's is made at the first start,
/// kept 0600 in the state folder, and works as a bearer token.
#[test]
fn http_needs_a_token_made_at_first_start() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let (_server, url) = http_server(dir.path());
    let path = dir.path().join("mcp-token");
    let mode = std::fs::metadata(&path).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    let token = std::fs::read_to_string(&path).unwrap().trim().to_owned();
    run_retry(&url, "retry", "2026-07-28", Some(&token));
    let anonymous = Command::new(python_with("mcp, httpx2"))
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp/sdk_retry.py"))
        .args([url.as_str(), "retry", "2026-07-28"])
        .output()
        .unwrap();
    assert!(
        !anonymous.status.success(),
        "{}",
        String::from_utf8_lossy(&anonymous.stdout)
    );
}

/// A package whose skill disallows the example calculator's tool.
fn careful_package(root: &Path) {
    let package = root.join("careful");
    std::fs::create_dir_all(&package).unwrap();
    std::fs::write(
        package.join("quiver.yaml"),
        "id: careful\nname: Careful\nversion: 1.0.0\ndescription: Careful bookkeeping that must never compute sums itself\nlicense: MIT\npermissions: {}\n",
    )
    .unwrap();
    std::fs::write(
        package.join("SKILL.md"),
        "---\nname: careful\ndescription: Careful bookkeeping that must never compute sums itself, only copy them\ndisallowed-tools: [calc.evaluate]\n---\nCopy sums, never compute them.\n",
    )
    .unwrap();
}

/// Over MCP a skill's `disallowed-tools` holds across requests: for the requests of the
/// `_meta` turn that read it, and without a turn id for the rest of the conversation.
#[test]
fn python_sdk_skill_lists_hold_for_the_mcp_turn() {
    for mode in ["legacy", "2026-07-28"] {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("packages");
        careful_package(&root);
        let (_server, url) = http_server_with(dir.path(), Some(&root), &[]);
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp/skill_turns.py");
        let output = Command::new(python_with("mcp, httpx2"))
            .arg(script)
            .args([url.as_str(), mode])
            .env("QUIVER_TEST_TOKEN", "test-token-1")
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(
            output.status.success() && stdout.contains("all ok"),
            "{mode}:\n{stdout}\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
}
