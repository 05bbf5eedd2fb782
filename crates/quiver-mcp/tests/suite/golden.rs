//! The MCP wire, pinned byte for byte: raw JSON-RPC requests over Streamable HTTP (both
//! protocol eras) and the front's answers, compared with the files in `tests/golden/`. A
//! changed byte fails here, so every change of the wire is a reviewed diff: rerun with
//! `QUIVER_BLESS=1` to write the new files, and read the diff before committing it.

use std::path::{Path, PathBuf};

use quiver_mcp::McpConfig;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::harness::front_with;
use super::http::{post, stateless};

/// The exchanges pinned: a name (the golden file) and a request of the 2026-07-28 era.
fn exchanges() -> Vec<(&'static str, Value)> {
    vec![
        ("tools-list", stateless("tools/list", json!({}))),
        (
            "tool-search",
            stateless(
                "tools/call",
                json!({"name": "tool_search", "arguments": {"query": "北京明天多少度"}}),
            ),
        ),
        (
            "read-skill",
            stateless(
                "tools/call",
                json!({"name": "read_skill", "arguments": {"id": "weather"}}),
            ),
        ),
        (
            "unknown-tool",
            stateless(
                "tools/call",
                json!({"name": "call_tool", "arguments": {"name": "nope__nothing", "arguments": {}}}),
            ),
        ),
        ("resources-list", stateless("resources/list", json!({}))),
        ("skills-list", stateless("skills/list", json!({}))),
        (
            "initialize-2025-11-25",
            json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "raw", "version": "0"},
            }}),
        ),
    ]
}

/// The JSON-RPC message of an HTTP response (a JSON body, or the first `data:` event).
fn message(response: &str) -> Value {
    let body = response.split("\r\n\r\n").nth(1).unwrap_or_default();
    let body = body
        .lines()
        .filter_map(|line| line.strip_prefix("data:"))
        .find(|data| !data.trim().is_empty())
        .unwrap_or(body);
    serde_json::from_str(body.trim()).unwrap_or_else(|e| panic!("{e}: {response}"))
}

/// What changes from run to run: conversation handles and call ids.
fn normalize(text: &str) -> String {
    [("v1.", "<handle>"), ("call-", "<call>")].iter().fold(
        text.to_owned(),
        |text, (prefix, placeholder)| {
            let mut out = String::with_capacity(text.len());
            let mut rest = text.as_str();
            while let Some(at) = rest.find(prefix) {
                out.push_str(&rest[..at]);
                let tail = &rest[at..];
                let end = tail
                    .find(|c: char| !(c.is_ascii_alphanumeric() || "._-".contains(c)))
                    .unwrap_or(tail.len());
                out.push_str(placeholder);
                rest = &tail[end..];
            }
            out.push_str(rest);
            out
        },
    )
}

fn golden_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden")
}

#[tokio::test(flavor = "multi_thread")]
async fn the_wire_is_pinned() {
    let dir = tempfile::tempdir().unwrap();
    let config = McpConfig {
        allow_anonymous: true,
        ..McpConfig::default()
    };
    let front = front_with(dir.path(), config);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let shutdown = CancellationToken::new();
    let server = tokio::spawn(quiver_mcp::serve_http(front, listener, shutdown.clone()));
    let answers = tokio::task::spawn_blocking(move || {
        exchanges()
            .into_iter()
            .map(|(name, request)| {
                let version = request["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"]
                    .as_str()
                    .unwrap_or("2025-11-25")
                    .to_owned();
                let method = request["method"].as_str().unwrap_or_default().to_owned();
                let mut headers = vec![("MCP-Protocol-Version", version.as_str())];
                if version != "2025-11-25" {
                    headers.push(("Mcp-Method", method.as_str()));
                    if let Some(name) = request["params"]["name"].as_str() {
                        headers.push(("Mcp-Name", name));
                    }
                }
                let (status, response) = post(port, &headers, &request);
                (name, status, message(&response))
            })
            .collect::<Vec<_>>()
    })
    .await
    .unwrap();
    shutdown.cancel();
    server.await.unwrap().unwrap();

    let bless = std::env::var_os("QUIVER_BLESS").is_some();
    let mut changed = Vec::new();
    for (name, status, answer) in answers {
        let text = normalize(&format!(
            "{}\n",
            serde_json::to_string_pretty(&json!({"status": status, "message": answer})).unwrap()
        ));
        let path = golden_dir().join(format!("{name}.json"));
        if bless {
            std::fs::create_dir_all(golden_dir()).unwrap();
            std::fs::write(&path, &text).unwrap();
        } else if std::fs::read_to_string(&path).ok().as_deref() != Some(text.as_str()) {
            changed.push(format!("{name}: got\n{text}"));
        }
    }
    assert!(
        changed.is_empty(),
        "the MCP wire changed (rerun with QUIVER_BLESS=1 and review the diff of tests/golden/):\n{}",
        changed.join("\n")
    );
}
