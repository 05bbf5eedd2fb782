//! External MCP servers listed in the config file (`mcp_servers:`) become packages: a real
//! server written with the Python `mcp` SDK (installed pinned by
//! `scripts/install-test-deps.sh` into `$QUIVER_TEST_VENV`, default `<repo>/.venv-test`;
//! the script is `tests/mcp/external_server.py`), run by the built `quiver` as a local stdio
//! server in the sandbox and as a remote Streamable HTTP server with a bearer token.
//!
//! Local-server tests need the sandbox; where the machine cannot sandbox they print why and
//! skip.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

use std::io::{BufRead, BufReader, Read};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use serde_json::Value;

mod support;

use support::{Server, json, python_with, repo_root, test_venv};

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp/external_server.py")
}

/// The folders the sandboxed Python server must read: the virtualenv, the interpreter's own
/// installation, and the script's folder.
fn python_reads() -> Vec<String> {
    let out = Command::new(python_with("mcp, uvicorn"))
        .args(["-c", "import sys; print(sys.base_prefix)"])
        .output()
        .unwrap();
    let base = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    let canonical = |p: &Path| std::fs::canonicalize(p).unwrap().display().to_string();
    vec![
        canonical(&test_venv()),
        canonical(Path::new(&base)),
        canonical(script().parent().unwrap()),
    ]
}

fn sandbox_ok() -> bool {
    match quiver_sandbox::support() {
        Ok(()) => true,
        Err(why) => {
            eprintln!("SKIPPED: the sandbox cannot run here: {why}");
            false
        }
    }
}

/// One invocation of the built binary over the example packages with `config`, the state in
/// `home`, and extra environment.
fn quiver(config: &Path, home: &Path, env: &[(&str, &str)], args: &[&str]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_quiver"));
    command
        .args([
            "--root",
            repo_root().join("examples/packages").to_str().unwrap(),
        ])
        .args(args)
        .env("QUIVER_CONFIG", config)
        .env("QUIVER_HOME", home)
        .env("NO_COLOR", "1")
        .env_remove("CRM_TOKEN")
        .stdin(Stdio::null());
    for (k, v) in env {
        command.env(k, v);
    }
    command.output().unwrap()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn local_config(dir: &Path) -> PathBuf {
    let reads = python_reads()
        .iter()
        .map(|p| format!("\"{p}\""))
        .collect::<Vec<_>>()
        .join(", ");
    let config = dir.join("config.yaml");
    std::fs::write(
        &config,
        format!(
            "mcp_servers:\n  team-notes:\n    command: [\"{}\", \"{}\", stdio]\n    env: {{NOTES_MODE: sandboxed}}\n    permissions:\n      filesystem: {{read: [{reads}]}}\n",
            python_with("mcp, uvicorn").display(),
            script().display()
        ),
    )
    .unwrap();
    config
}

/// The package `id` of `quiver list --json`.
fn listed<'a>(list: &'a Value, id: &str) -> Option<&'a Value> {
    list.as_array().unwrap().iter().find(|p| p["id"] == id)
}

fn audit(config: &Path, home: &Path, session: &str) -> Vec<Value> {
    let out = quiver(
        config,
        home,
        &[],
        &["audit", "--json", "--session", session],
    );
    json(&out).as_array().unwrap().clone()
}

#[test]
fn a_local_server_is_a_sandboxed_package_through_every_policy() {
    if !sandbox_ok() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let config = local_config(dir.path());
    let q = |env: &[(&str, &str)], args: &[&str]| quiver(&config, home.path(), env, args);

    // Listed beside the example packages, with the server's tools and the right categories.
    let out = q(&[], &["list", "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let list = json(&out);
    assert!(
        listed(&list, "weather").is_some(),
        "the other packages load"
    );
    let notes = listed(&list, "team-notes").unwrap_or_else(|| panic!("{list:#}\n{}", stderr(&out)));
    assert_eq!(
        notes["description"],
        "Team notes kept by an external MCP server."
    );
    let wires: Vec<&str> = notes["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["wire"].as_str().unwrap())
        .collect();
    for wire in [
        "team-notes__read_note",
        "team-notes__add_note",
        "team-notes__remove_member",
    ] {
        assert!(wires.contains(&wire), "{wires:?}");
    }
    let cases = [
        ("team-notes.read_note", "perception", "Read a note"),
        (
            "team-notes.add_note",
            "action",
            "Adds a team note under a key.",
        ),
        (
            "team-notes.remove_member",
            "action",
            "Removes a member from the team.",
        ),
        (
            "team-notes.read_path",
            "perception",
            "Reads a file by path.",
        ),
    ];
    for (tool, category, summary) in cases {
        let shown = json(&q(&[], &["show", tool, "--json"]));
        assert_eq!(shown["definition"]["category"], category, "{tool}: {shown}");
        assert_eq!(shown["item"]["summary"], summary, "{tool}");
        assert_eq!(shown["definition"]["file"], config.display().to_string());
    }
    // Found by `quiver search` and by the runtime's `tool_search`.
    let found = json(&q(&[], &["search", "read a team note", "--json"]));
    assert_eq!(found[0]["wire"], "team-notes__read_note", "{found:#}");
    let searched = json(&q(
        &[],
        &[
            "call",
            "tool_search",
            "--args",
            r#"{"query": "add a team note"}"#,
        ],
    ));
    assert_eq!(
        searched["outcome"]["content"]["results"][0]["name"], "team-notes__add_note",
        "{searched:#}"
    );

    // A read-only tool: package consent once (answered by --yes), no approval; the call
    // context reaches the server in `_meta`.
    let first = json(&q(
        &[],
        &[
            "call",
            "team-notes.read_note",
            "--args",
            r#"{"key": "k1"}"#,
            "--yes",
        ],
    ));
    assert_eq!(first["outcome"]["status"], "ok", "{first:#}");
    let session = first["session"].as_str().unwrap().to_owned();
    assert_eq!(first["outcome"]["content"]["key"], "k1");
    assert_eq!(first["outcome"]["content"]["session"], session.as_str());
    // `quiver call TOOL --args ARGS` in that session, `--yes` answering whoever is asked.
    let call_with = |tool: &str, args: &str, yes: bool| {
        let mut argv = vec!["call", tool, "--args", args, "--session", &session];
        if yes {
            argv.push("--yes");
        }
        json(&q(&[], &argv))
    };
    let call = |tool: &str, args: &str| call_with(tool, args, false);
    // In the same session nothing is asked any more: it runs without --yes.
    let again = call("team-notes.read_note", r#"{"key": "k2"}"#);
    assert_eq!(again["outcome"]["status"], "ok", "{again:#}");
    // An action tool asks for approval even after the consent: without anyone to answer it
    // does not run; with --yes it does.
    let unanswered = call("team-notes.add_note", r#"{"key": "k3", "text": "hi"}"#);
    assert_ne!(unanswered["outcome"]["status"], "ok", "{unanswered:#}");
    let answered = call_with(
        "team-notes.add_note",
        r#"{"key": "k3", "text": "hi"}"#,
        true,
    );
    assert_eq!(answered["outcome"]["status"], "ok", "{answered:#}");
    assert_eq!(answered["outcome"]["content"]["added"], "k3");
    // The dangerous gate by name: --yes never approves `remove_member`.
    let removed = call_with("team-notes__remove_member", r#"{"user_id": "42"}"#, true);
    assert_eq!(removed["outcome"]["status"], "refused", "{removed:#}");
    assert_eq!(
        removed["outcome"]["content"]["error"],
        "refused; needs human approval; do not retry"
    );

    // The audit has every call with its decisions, newest first.
    let records = audit(&config, home.path(), &session);
    let tools: Vec<(&str, &str)> = records
        .iter()
        .map(|r| (r["tool"].as_str().unwrap(), r["status"].as_str().unwrap()))
        .collect();
    assert_eq!(
        tools,
        [
            ("team-notes.remove_member", "refused"),
            ("team-notes.add_note", "ok"),
            ("team-notes.add_note", "refused"),
            ("team-notes.read_note", "ok"),
            ("team-notes.read_note", "ok"),
        ],
        "{records:#?}"
    );
    assert_eq!(tools[2].1, "refused");
    // Consent asked once and granted for the session; the read-only tool needed no approval;
    // the action tool did; the dangerous one went to the gate.
    let has = |record: &Value, step: &str, value: &str| {
        record["decisions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|d| d["step"] == step && d["decision"] == value)
    };
    assert!(has(&records[4], "consent", "ask"), "{:#}", records[4]);
    assert!(
        has(&records[4], "consent", "allow-session"),
        "{:#}",
        records[4]
    );
    assert!(
        has(&records[4], "approval-mode", "allow"),
        "{:#}",
        records[4]
    );
    assert!(!has(&records[3], "consent", "ask"), "{:#}", records[3]);
    assert!(
        has(&records[3], "approval-mode", "allow"),
        "{:#}",
        records[3]
    );
    assert!(has(&records[2], "approval-mode", "ask"), "{:#}", records[2]);
    assert!(
        has(&records[2], "approval", "unanswered"),
        "{:#}",
        records[2]
    );
    assert!(
        has(&records[1], "approval", "allow-session"),
        "{:#}",
        records[1]
    );
    assert!(
        has(&records[0], "dangerous-gate", "ask"),
        "{:#}",
        records[0]
    );

    // The sandbox holds: declared environment only, the data folder as home, no secret
    // files, no file outside the declared folders, no undeclared network.
    let who = call("team-notes.whoami", "{}");
    assert_eq!(who["outcome"]["content"]["mode"], "sandboxed", "{who:#}");
    let data = home.path().join("data/team-notes");
    assert_eq!(
        who["outcome"]["content"]["home"],
        data.display().to_string()
    );
    // The server that listed the tools answers the call: one start per `quiver call`.
    let starts = |out: Value| out["outcome"]["content"]["starts"].as_u64().unwrap();
    let before = starts(call("team-notes.starts", "{}"));
    let after = starts(call("team-notes.starts", "{}"));
    assert_eq!(
        after,
        before + 1,
        "each `quiver call` starts the server once"
    );
    let outside = dir.path().join("config.yaml");
    for path in ["/etc/shadow", outside.to_str().unwrap()] {
        let read = call(
            "team-notes.read_path",
            &serde_json::json!({ "path": path }).to_string(),
        );
        assert_eq!(read["outcome"]["status"], "error", "{path}: {read:#}");
        let error = read["outcome"]["content"]["error"].as_str().unwrap();
        // Neither exists in the server's mount view.
        assert!(error.contains("FileNotFoundError"), "{path}: {error}");
    }
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let url = format!("http://{}/", listener.local_addr().unwrap());
    let fetched = call(
        "team-notes.fetch_url",
        &serde_json::json!({ "url": url }).to_string(),
    );
    assert_ne!(fetched["outcome"]["status"], "ok", "{fetched:#}");
    assert!(
        listener.accept().is_err(),
        "the sandboxed server reached the host's loopback"
    );
}

/// The Python server over Streamable HTTP on a free loopback port, requiring `token`.
fn http_server(token: &str) -> (Server, String) {
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut child = Command::new(python_with("mcp, uvicorn"))
        .arg(script())
        .args(["http", &port.to_string(), token])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let server = Server(child);
    for _ in 0..100 {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return (server, format!("http://127.0.0.1:{port}/mcp"));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let mut server = server;
    let mut err = String::new();
    let _ = server.0.stderr.take().unwrap().read_to_string(&mut err);
    panic!("the Python server did not listen on {port}: {line} {err}");
}

/// `quiver serve --stdio` with an external server in its config, spoken to by the Python SDK:
/// `tool_search` finds the server's tool, `call_tool` runs it in the sandbox after package
/// consent by elicitation, and its dangerous tool is refused when the person declines.
#[test]
fn quiver_serve_hands_an_external_server_to_its_clients() {
    if !sandbox_ok() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let config = local_config(dir.path());
    let client = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp/serve_external.py");
    let out = Command::new(python_with("mcp, uvicorn"))
        .arg(&client)
        .arg(env!("CARGO_BIN_EXE_quiver"))
        .arg(repo_root().join("examples/packages"))
        .arg(dir.path().join("state.db"))
        .env("QUIVER_CONFIG", &config)
        .env("QUIVER_HOME", home.path())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let printed = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{printed}\n{}", stderr(&out));
    assert_eq!(
        printed.lines().filter(|l| l.starts_with("ok ")).count(),
        11,
        "{printed}"
    );
}

#[test]
fn a_remote_server_is_called_with_its_bearer_token() {
    let (_server, url) = http_server("s3cret-token");
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.yaml");
    std::fs::write(
        &config,
        format!("mcp_servers:\n  crm:\n    url: {url}\n    bearer_token_env: CRM_TOKEN\n    name: Team CRM\n"),
    )
    .unwrap();
    let config_text = config.display().to_string();

    // A wrong or missing token, never seen before: a clear diagnostic naming the config
    // file, no package, the rest loads.
    let cases = [
        (
            vec![("CRM_TOKEN", "wrong")],
            "answered 401 Unauthorized: it refused the bearer token",
        ),
        (
            vec![],
            "the environment variable `CRM_TOKEN` named by `bearer_token_env` is not set",
        ),
    ];
    for (env, want) in &cases {
        let home = tempfile::tempdir().unwrap();
        let out = quiver(&config, home.path(), env, &["list", "--json"]);
        assert!(out.status.success(), "{}", stderr(&out));
        let list = json(&out);
        assert!(listed(&list, "crm").is_none(), "{list:#}");
        assert!(listed(&list, "weather").is_some());
        let err = stderr(&out);
        assert!(
            err.contains(&format!("{config_text}: error[mcp-server-unreachable]: MCP server `crm` could not list its tools: "))
                && err.contains(want),
            "{err}"
        );
    }

    let home = tempfile::tempdir().unwrap();
    let token = [("CRM_TOKEN", "s3cret-token")];
    let q = |env: &[(&str, &str)], args: &[&str]| quiver(&config, home.path(), env, args);
    let out = q(&token, &["list", "--json"]);
    let list = json(&out);
    let crm = listed(&list, "crm").unwrap_or_else(|| panic!("{list:#}\n{}", stderr(&out)));
    assert_eq!(crm["name"], "Team CRM");
    assert!(
        crm["items"]
            .as_array()
            .unwrap()
            .iter()
            .any(|i| i["wire"] == "crm__read_note"),
        "{crm:#}"
    );
    // A remote tool is confirmed at its first call even with `readOnlyHint` (nothing Quiver
    // enforces limits it): without an approver it is refused, with `--yes` it runs.
    let unapproved = json(&q(
        &token,
        &["call", "crm__read_note", "--args", r#"{"key": "r0"}"#],
    ));
    assert_eq!(unapproved["outcome"]["status"], "refused", "{unapproved:#}");
    let called = json(&q(
        &token,
        &[
            "call",
            "crm__read_note",
            "--args",
            r#"{"key": "r1"}"#,
            "--yes",
        ],
    ));
    assert_eq!(called["outcome"]["status"], "ok", "{called:#}");
    let session = called["session"].as_str().unwrap().to_owned();
    assert_eq!(called["outcome"]["content"]["session"], session.as_str());
    assert_eq!(called["outcome"]["content"]["text"], "note r1");
    let records = audit(&config, home.path(), &session);
    assert_eq!(records[0]["tool"], "crm.read_note");
    assert_eq!(records[0]["status"], "ok");
    let approval = records[0]["decisions"]
        .as_array()
        .unwrap()
        .iter()
        .rfind(|d| d["step"] == "approval")
        .unwrap_or_else(|| panic!("{:#}", records[0]));
    assert_eq!(approval["decision"], "allow-session", "{approval:#}");
    assert_eq!(
        approval["reason"], "the first call of this tool in this session",
        "{approval:#}"
    );
    // `remove_member` on a remote server is dangerous too.
    let removed = json(&q(
        &token,
        &[
            "call",
            "crm.remove_member",
            "--args",
            r#"{"user_id": "7"}"#,
            "--yes",
        ],
    ));
    assert_eq!(removed["outcome"]["status"], "refused", "{removed:#}");
    // Seen before, then a wrong token: the cached list with a warning, and calls fail clearly.
    let wrong = [("CRM_TOKEN", "wrong")];
    let out = q(&wrong, &["list", "--json"]);
    assert!(listed(&json(&out), "crm").is_some());
    assert!(
        stderr(&out)
            .contains("warning[mcp-server-cached]: MCP server `crm` could not list its tools (")
            && stderr(&out).contains("401 Unauthorized"),
        "{}",
        stderr(&out)
    );
    let failed = json(&q(
        &wrong,
        &[
            "call",
            "crm.read_note",
            "--args",
            r#"{"key": "r2"}"#,
            "--yes",
        ],
    ));
    assert_eq!(failed["outcome"]["status"], "error", "{failed:#}");
    assert!(
        failed["outcome"]["content"]["error"]
            .as_str()
            .unwrap()
            .contains("401 Unauthorized"),
        "{failed:#}"
    );
}

#[test]
fn unreachable_servers_are_diagnostics_and_everything_else_loads() {
    let dir = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let closed = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let config = dir.path().join("config.yaml");
    std::fs::write(
        &config,
        format!(
            "mcp_servers:\n  gone:\n    url: http://127.0.0.1:{closed}/mcp\n  missing:\n    command: [/nonexistent/mcp-server, --stdio]\n  mute:\n    command: [sh, -c, 'echo not-json']\n    permissions: {{shell: true}}\n"
        ),
    )
    .unwrap();
    let out = quiver(&config, home.path(), &[], &["list", "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let list = json(&out);
    for id in ["weather", "notes", "group-admin"] {
        assert!(listed(&list, id).is_some(), "{id}");
    }
    let err = stderr(&out);
    for id in ["gone", "missing", "mute"] {
        assert!(listed(&list, id).is_none(), "{id}");
        assert!(
            err.contains(&format!(
                "{}: error[mcp-server-unreachable]: MCP server `{id}` could not list its tools: ",
                config.display()
            )),
            "{id}: {err}"
        );
    }
    // A config the section refuses stops the command, naming the file.
    std::fs::write(&config, "mcp_servers:\n  Bad:\n    command: [x]\n").unwrap();
    let out = quiver(&config, home.path(), &[], &["list"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains(&config.display().to_string())
            && stderr(&out).contains("`mcp_servers.Bad`"),
        "{}",
        stderr(&out)
    );
}
