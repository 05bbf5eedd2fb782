//! Streamable HTTP on a loopback port: bearer tokens, Origin, and the stateless handle.

use std::io::{Read, Write};
use std::net::TcpStream;

use quiver_mcp::McpConfig;
use quiver_mcp::config::BearerToken;
use quiver_package::rules::Role;
use quiver_policy::Principal;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::harness::front_with;

/// One raw HTTP/1.1 POST; returns the status and body.
pub(super) fn post(port: u16, headers: &[(&str, &str)], body: &Value) -> (u16, String) {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    let body = body.to_string();
    let mut request = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    for (k, v) in headers {
        request.push_str(&format!("{k}: {v}\r\n"));
    }
    request.push_str("\r\n");
    request.push_str(&body);
    stream.write_all(request.as_bytes()).unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let status = response[9..12].parse().unwrap();
    (status, response)
}

pub(super) fn stateless(method: &str, params: Value) -> Value {
    let mut params = params;
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "0"},
        "io.modelcontextprotocol/clientCapabilities": {},
    });
    json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
}

#[tokio::test(flavor = "multi_thread")]
async fn tokens_origins_and_stateless_handles() {
    let dir = tempfile::tempdir().unwrap();
    let config = McpConfig {
        tokens: vec![BearerToken {
            token: "t0k3n".into(),
            principal: Principal::user("alice", Role::Trusted),
            origin: Default::default(),
        }],
        allow_anonymous: false,
        ..McpConfig::default()
    };
    let front = front_with(dir.path(), config);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let shutdown = CancellationToken::new();
    let server = tokio::spawn(quiver_mcp::serve_http(front, listener, shutdown.clone()));
    let search = stateless(
        "tools/call",
        json!({"name": "tool_search", "arguments": {"query": "北京明天多少度"}}),
    );
    let result = tokio::task::spawn_blocking(move || {
        let no_token = post(port, &[("MCP-Protocol-Version", "2026-07-28")], &search);
        let bad_token = post(
            port,
            &[
                ("Authorization", "Bearer nope"),
                ("MCP-Protocol-Version", "2026-07-28"),
            ],
            &search,
        );
        let evil_origin = post(
            port,
            &[
                ("Authorization", "Bearer t0k3n"),
                ("Origin", "https://evil.example"),
                ("MCP-Protocol-Version", "2026-07-28"),
            ],
            &search,
        );
        let ok = post(
            port,
            &[
                ("Authorization", "Bearer t0k3n"),
                ("Origin", "http://localhost:6274"),
                ("MCP-Protocol-Version", "2026-07-28"),
                ("Mcp-Method", "tools/call"),
                ("Mcp-Name", "tool_search"),
            ],
            &search,
        );
        (no_token, bad_token, evil_origin, ok)
    })
    .await
    .unwrap();
    let (no_token, bad_token, evil_origin, ok) = result;
    assert_eq!(no_token.0, 401, "{}", no_token.1);
    assert!(
        no_token
            .1
            .to_lowercase()
            .contains("www-authenticate: bearer"),
        "{}",
        no_token.1
    );
    assert_eq!(bad_token.0, 401);
    assert_eq!(evil_origin.0, 403, "{}", evil_origin.1);
    assert_eq!(ok.0, 200, "{}", ok.1);
    assert!(ok.1.contains("weather__forecast"), "{}", ok.1);
    // A stateless result carries the conversation handle for the model.
    assert!(ok.1.contains(r#"\"conversation\":\"v1."#), "{}", ok.1);
    shutdown.cancel();
    server.await.unwrap().unwrap();
}

/// Issue 23 item 2: stateless requests without a handle from one token share that client's
/// default conversation (consent given once holds for the next call); another token's
/// requests never join it.
#[tokio::test(flavor = "multi_thread")]
async fn a_handle_less_client_keeps_one_conversation_per_token() {
    use quiver_store::Decision;

    let dir = tempfile::tempdir().unwrap();
    let token = |token: &str, user: &str| BearerToken {
        token: token.into(),
        principal: Principal::user(user, Role::Trusted),
        origin: Default::default(),
    };
    let config = McpConfig {
        tokens: vec![token("alice-token", "alice"), token("bob-token", "bob")],
        allow_anonymous: false,
        ..McpConfig::default()
    };
    let front = front_with(dir.path(), config);
    let store = super::harness::state(dir.path());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let shutdown = CancellationToken::new();
    let server = tokio::spawn(quiver_mcp::serve_http(front, listener, shutdown.clone()));
    let packing = stateless(
        "tools/call",
        json!({"name": "call_tool", "arguments": {
            "name": "travel-advice__packing_advice",
            "arguments": {"destination": "Oslo"},
        }}),
    );
    // The model's reading of one call by `token` (each request on a connection of its own).
    let call = move |token: &'static str| {
        let packing = packing.clone();
        async move {
            tokio::task::spawn_blocking(move || {
                let bearer = format!("Bearer {token}");
                let (status, response) = post(
                    port,
                    &[
                        ("Authorization", bearer.as_str()),
                        ("MCP-Protocol-Version", "2026-07-28"),
                        ("Mcp-Method", "tools/call"),
                        ("Mcp-Name", "call_tool"),
                    ],
                    &packing,
                );
                assert_eq!(status, 200, "{response}");
                let json: Value =
                    serde_json::from_str(&response[response.find("\r\n\r\n").unwrap() + 4..])
                        .unwrap();
                let text = json["result"]["content"][0]["text"]
                    .as_str()
                    .unwrap()
                    .to_owned();
                serde_json::from_str::<Value>(&text).unwrap()
            })
            .await
            .unwrap()
        }
    };
    let asked = call("alice-token").await;
    let card = asked["waiting_for"]["approval"]
        .as_str()
        .unwrap()
        .to_owned();
    store
        .answer_approval(&card, Decision::Approve, "alice", None)
        .unwrap();
    // Bob's request, from the same address and program, is not Alice's conversation.
    let bob = call("bob-token").await;
    assert!(bob["waiting_for"]["approval"].is_string(), "{bob}");
    assert_ne!(bob["waiting_for"]["approval"], card.as_str());
    // Alice's retry runs in her conversation, and so does her next call.
    let ran = call("alice-token").await;
    assert_eq!(ran["advice"], "pack for Oslo", "{ran}");
    let again = call("alice-token").await;
    assert_eq!(again["advice"], "pack for Oslo", "{again}");
    assert!(ran["conversation"].is_string(), "{ran}");
    shutdown.cancel();
    server.await.unwrap().unwrap();
}
