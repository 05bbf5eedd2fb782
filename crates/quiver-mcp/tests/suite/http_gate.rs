//! The HTTP gate on a loopback port: sessions answer only their creator, ambiguous or
//! malformed requests are refused, and token configuration carries platform roles.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;

use quiver_mcp::McpConfig;
use quiver_mcp::config::BearerToken;
use quiver_package::rules::Role;
use quiver_policy::{Origin, Principal};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::harness::{examples, front_over};
use super::http::{post, stateless};

fn token(token: &str, user: &str, platform: Option<&str>, roles: &[&str]) -> BearerToken {
    let mut principal = Principal::user(user, Role::User);
    principal.platform_roles = roles.iter().map(|r| (*r).to_owned()).collect();
    BearerToken {
        token: token.into(),
        principal,
        origin: Origin {
            platform: platform.map(str::to_owned),
            ..Origin::default()
        },
    }
}

/// Sends raw bytes and returns the whole response.
fn raw(port: u16, request: &str) -> String {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream.write_all(request.as_bytes()).unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    response
}

/// A package whose skill only a `qq` admin may see.
fn admins_only(root: &Path) {
    let package = root.join("ops");
    std::fs::create_dir_all(&package).unwrap();
    std::fs::write(
        package.join("quiver.yaml"),
        "id: ops\nname: Ops\nversion: 1.0.0\ndescription: Operations runbook for group admins on qq\nlicense: MIT\npermissions: {}\n",
    )
    .unwrap();
    std::fs::write(
        package.join("SKILL.md"),
        "---\nname: ops\ndescription: Runbook for qq group admins handling incidents and escalations\npermissions: [\"platform(qq,admin)\"]\n---\nFollow the runbook.\n",
    )
    .unwrap();
}

async fn serve(config: McpConfig, dir: &Path) -> (u16, CancellationToken) {
    let root = dir.join("packages");
    admins_only(&root);
    let front = front_over(&[examples(), root], dir, config);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let shutdown = CancellationToken::new();
    tokio::spawn(quiver_mcp::serve_http(front, listener, shutdown.clone()));
    (port, shutdown)
}

fn config() -> McpConfig {
    McpConfig {
        tokens: vec![
            token("alice-token", "alice", None, &[]),
            token("bob-token", "bob", None, &[]),
            token("qq-admin-token", "ops", Some("qq"), &["admin"]),
            token("qq-member-token", "member", Some("qq"), &["member"]),
            token("discord-admin-token", "dadmin", Some("discord"), &["admin"]),
        ],
        allow_anonymous: true,
        header_timeout: std::time::Duration::from_millis(500),
        ..McpConfig::default()
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn slow_headers_are_cut_off() {
    let dir = tempfile::tempdir().unwrap();
    let (port, shutdown) = serve(config(), dir.path()).await;
    let outcome = tokio::task::spawn_blocking(move || {
        let started = std::time::Instant::now();
        let slow: Vec<TcpStream> = (0..50)
            .map(|_| {
                let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
                stream
                    .write_all(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: 1")
                    .unwrap();
                stream
                    .set_read_timeout(Some(std::time::Duration::from_secs(5)))
                    .unwrap();
                stream
            })
            .collect();
        for mut stream in slow {
            let mut rest = Vec::new();
            // The server closes the connection (EOF, perhaps after a 408) well before 5 s.
            stream.read_to_end(&mut rest).unwrap();
        }
        assert!(
            started.elapsed() < std::time::Duration::from_secs(4),
            "{:?}",
            started.elapsed()
        );
        // A normal request still works.
        let (status, response) = post(
            port,
            &[
                ("Authorization", "Bearer alice-token"),
                ("MCP-Protocol-Version", "2026-07-28"),
                ("Mcp-Method", "tools/list"),
            ],
            &stateless("tools/list", json!({})),
        );
        assert_eq!(status, 200, "{response}");
    })
    .await;
    shutdown.cancel();
    outcome.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_session_answers_only_its_creator() {
    let dir = tempfile::tempdir().unwrap();
    let (port, shutdown) = serve(config(), dir.path()).await;
    let outcome = tokio::task::spawn_blocking(move || {
        let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "raw", "version": "0"}}});
        let alice = ("Authorization", "Bearer alice-token");
        let (status, response) = post(port, &[alice], &init);
        assert_eq!(status, 200, "{response}");
        let session = response
            .lines()
            .find_map(|l| {
                l.to_lowercase()
                    .starts_with("mcp-session-id:")
                    .then(|| l[15..].trim().to_owned())
            })
            .unwrap_or_else(|| panic!("no session id: {response}"));
        let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        let versioned = ("MCP-Protocol-Version", "2025-11-25");
        let (status, _) = post(
            port,
            &[alice, ("Mcp-Session-Id", &session), versioned],
            &initialized,
        );
        assert!(status == 202 || status == 200, "{status}");
        let search = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "tool_search", "arguments": {"query": "weather"}}});
        let cases = [
            (
                "bob's token",
                Some(("Authorization", "Bearer bob-token")),
                404,
            ),
            ("no token", None, 404),
            ("alice herself", Some(alice), 200),
        ];
        for (who, auth, want) in cases {
            let mut headers: Vec<(&str, &str)> = auth.into_iter().collect();
            headers.push(("Mcp-Session-Id", &session));
            headers.push(versioned);
            let (status, response) = post(port, &headers, &search);
            assert_eq!(status, want, "{who}: {response}");
            if want == 404 {
                assert!(!response.contains("weather__forecast"), "{who}: {response}");
            }
        }
    })
    .await;
    shutdown.cancel();
    outcome.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn ambiguous_and_malformed_requests_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (port, shutdown) = serve(config(), dir.path()).await;
    let outcome = tokio::task::spawn_blocking(move || {
        let body = "this is not json";
        let cases = [
            (
                "two Host headers",
                format!("POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nHost: evil.example\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{{}}"),
                "400",
                "",
            ),
            (
                "a body that is not JSON",
                format!("POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}", body.len()),
                "400",
                "-32700",
            ),
        ];
        for (what, request, status, needle) in cases {
            let response = raw(port, &request);
            assert_eq!(&response[9..12], status, "{what}: {response}");
            assert!(response.contains(needle), "{what}: {response}");
        }
    })
    .await;
    shutdown.cancel();
    outcome.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn platform_roles_from_the_token_config() {
    let dir = tempfile::tempdir().unwrap();
    let (port, shutdown) = serve(config(), dir.path()).await;
    let outcome = tokio::task::spawn_blocking(move || {
        let cases = [
            ("qq admin", Some("qq-admin-token"), true),
            ("qq member", Some("qq-member-token"), false),
            ("admin on discord", Some("discord-admin-token"), false),
            ("plain token", Some("alice-token"), false),
            ("anonymous", None, false),
        ];
        for (who, token, visible) in cases {
            let bearer = token.map(|t| format!("Bearer {t}"));
            let mut headers = vec![
                ("MCP-Protocol-Version", "2026-07-28"),
                ("Mcp-Method", "resources/list"),
            ];
            if let Some(bearer) = &bearer {
                headers.push(("Authorization", bearer));
            }
            let (status, response) = post(port, &headers, &stateless("resources/list", json!({})));
            assert_eq!(status, 200, "{who}: {response}");
            assert!(
                response.contains("skill://weather/SKILL.md"),
                "{who}: {response}"
            );
            assert_eq!(
                response.contains("skill://ops/SKILL.md"),
                visible,
                "{who}: {response}"
            );
        }
    })
    .await;
    shutdown.cancel();
    outcome.unwrap();
}

/// Issue 22 item 18: one principal holding as many sessions as it may is refused one more,
/// and every other caller still starts theirs.
#[tokio::test(flavor = "multi_thread")]
async fn one_principal_cannot_take_every_session() {
    let dir = tempfile::tempdir().unwrap();
    let (port, shutdown) = serve(config(), dir.path()).await;
    let outcome = tokio::task::spawn_blocking(move || {
        let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "raw", "version": "0"}}});
        let alice = ("Authorization", "Bearer alice-token");
        for i in 0..quiver_mcp::sessions::MAX_SESSIONS_PER_PRINCIPAL {
            let (status, response) = post(port, &[alice], &init);
            assert_eq!(status, 200, "session {i}: {response}");
        }
        let (status, response) = post(port, &[alice], &init);
        assert_eq!(status, 429, "{response}");
        assert!(
            response.contains("too many open MCP sessions"),
            "{response}"
        );
        for (who, auth) in [
            ("bob", Some(("Authorization", "Bearer bob-token"))),
            ("anonymous", None),
        ] {
            let headers: Vec<(&str, &str)> = auth.into_iter().collect();
            let (status, response) = post(port, &headers, &init);
            assert_eq!(status, 200, "{who}: {response}");
        }
    })
    .await;
    shutdown.cancel();
    outcome.unwrap();
}
