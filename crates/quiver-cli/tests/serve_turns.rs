//! Two `quiver serve` instances on one PostgreSQL database with one state folder (one MCP
//! secret, one token), as behind a load balancer (issue 26, item 2), driven by a stateless
//! 2026-07-28 client that declares forms:
//!
//! - a turn's dangerous-gate lockout is stored with the refusal: after the person refuses
//!   `guild__kick_member` on instance A, a call of the same turn reaching B is refused at once
//!   (the tool, and another tool of its risk category), while a new turn id is asked again;
//! - a package's consent is asked once per conversation: two first calls of one package racing
//!   on A and B get one consent question between them, and its answer serves both.
//!
//! Skipped, saying why, without `QUIVER_TEST_POSTGRES` (a failure with
//! `QUIVER_REQUIRE_POSTGRES=1`).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::sync::{Arc, Barrier, mpsc};
use std::time::Duration;

use serde_json::{Value, json};

mod instances;
mod support;

use instances::{Env, postgres, psql, write};

const TOKEN: &str = "test-token-turns";

/// The package `guild` (two dangerous `member` tools, asked of a person each call) and the
/// package `atlas` (a perception tool that needs only the package's consent).
fn packages(root: &Path) {
    write(
        root,
        "guild/quiver.yaml",
        "id: guild\nname: Guild\nversion: 1.0.0\ndescription: Moderates a group\nlicense: MIT\npermissions: {}\n",
    );
    for tool in ["kick_member", "ban_member"] {
        write(
            root,
            &format!("guild/tools/{tool}/tool.yaml"),
            &format!(
                "name: {tool}\nversion: 1.0.0\ndescription:\n  summary: Acts on a member of the group\ncategory: action\nexpose: true\nrisk: dangerous\nrisk_category: member\ninput: {{type: object, properties: {{user_id: {{type: string}}}}, required: [user_id]}}\nrun: {{command: [sh, -c, 'cat >/dev/null; echo {{}}']}}\n"
            ),
        );
    }
    write(
        root,
        "atlas/quiver.yaml",
        "id: atlas\nname: Atlas\nversion: 1.0.0\ndescription: Looks places up\nlicense: MIT\npermissions: {}\n",
    );
    write(
        root,
        "atlas/tools/lookup/tool.yaml",
        "name: lookup\nversion: 1.0.0\ndescription:\n  summary: Looks a place up\ncategory: perception\napproval: never\nexpose: true\ninput: {type: object}\nrun: {command: [python3, -c, \"import json, sys; sys.stdin.read(); print(json.dumps({'found': True}))\"]}\n",
    );
}

/// What one `tools/call` of `call_tool` sends.
#[derive(Clone, Default)]
struct Call {
    tool: &'static str,
    arguments: Value,
    handle: Option<String>,
    turn: Option<&'static str>,
    /// The state of the question answered, and the decision.
    answer: Option<(String, &'static str)>,
}

impl Call {
    fn of(tool: &'static str, arguments: Value) -> Call {
        Call {
            tool,
            arguments,
            ..Call::default()
        }
    }

    fn body(&self) -> Value {
        let mut meta = json!({
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientInfo": {"name": "turns-test", "version": "1.0.0"},
            "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}},
        });
        if let Some(handle) = &self.handle {
            meta["io.quiver/conversation"] = json!(handle);
        }
        if let Some(turn) = self.turn {
            meta["io.quiver/turn"] = json!(turn);
        }
        let mut params = json!({
            "name": "call_tool",
            "arguments": {"name": self.tool, "arguments": self.arguments},
            "_meta": meta,
        });
        if let Some((state, decision)) = &self.answer {
            params["requestState"] = json!(state);
            params["inputResponses"] = json!({
                "quiver_decision": {"action": "accept", "content": {"decision": decision}}
            });
        }
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params})
    }

    /// The same call answering the question whose state is `state` with `decision`.
    fn answering(&self, state: &str, decision: &'static str) -> Call {
        Call {
            answer: Some((state.to_owned(), decision)),
            ..self.clone()
        }
    }
}

/// POSTs `call` to the instance on `port`; the JSON-RPC result.
fn post(port: u16, call: &Call) -> Value {
    let body = call.body().to_string();
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(90)))
        .unwrap();
    write!(
        stream,
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2026-07-28\r\nMcp-Method: tools/call\r\nMcp-Name: call_tool\r\nAuthorization: Bearer {TOKEN}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let (head, rest) = response.split_once("\r\n\r\n").unwrap();
    let text = if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        dechunk(rest)
    } else {
        rest.to_owned()
    };
    let json = text
        .lines()
        .find_map(|l| l.strip_prefix("data:"))
        .map_or(text.trim(), str::trim);
    let message: Value = serde_json::from_str(json).unwrap_or_else(|e| panic!("{e}: {response}"));
    assert!(message.get("error").is_none(), "{message}");
    message["result"].clone()
}

fn dechunk(mut rest: &str) -> String {
    let mut out = String::new();
    while let Some((size, tail)) = rest.split_once("\r\n") {
        let size = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if size == 0 {
            break;
        }
        out.push_str(&tail[..size]);
        rest = tail[size..].trim_start_matches("\r\n");
    }
    out
}

/// The state of the question `result` asks, after checking it asks one about `about`.
fn question(result: &Value, about: &str) -> String {
    assert_eq!(result["resultType"], "input_required", "{result}");
    let message = result["inputRequests"]["quiver_decision"]["params"]["message"]
        .as_str()
        .unwrap_or_default();
    assert!(message.contains(about), "{message}");
    result["requestState"].as_str().unwrap().to_owned()
}

fn text(result: &Value) -> String {
    result["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

#[test]
fn a_turns_lockout_and_a_packages_consent_question_are_shared_by_two_instances() {
    let Some(server) = postgres() else { return };
    let env = Env::with_config(
        &server,
        "turns",
        packages,
        &format!("mcp:\n  tokens:\n    - {{token: {TOKEN}, user: alice, role: trusted}}\n"),
    );
    let url = env.url.clone();
    let (a, b) = (env.serve(), env.serve());
    let (port_a, port_b) = (a.port, b.port);

    // On A, turn `msg-1`: consent to `guild`, then the person refuses the dangerous call.
    let kick = Call {
        turn: Some("msg-1"),
        ..Call::of("guild__kick_member", json!({"user_id": "42"}))
    };
    let consent = question(&post(port_a, &kick), "guild");
    let approval = question(
        &post(port_a, &kick.answering(&consent, "allow_once")),
        "kick_member",
    );
    let refused = post(port_a, &kick.answering(&approval, "deny"));
    assert_eq!(refused["isError"], true, "{refused}");
    assert!(text(&refused).contains("do not retry"), "{refused}");
    let handle = refused["_meta"]["io.quiver/conversation"]
        .as_str()
        .unwrap_or_else(|| panic!("no handle: {refused}"))
        .to_owned();

    // The same turn on B: the tool, and another tool of its risk category, are refused at
    // once (no question), because the lockout was stored with the refusal.
    let in_turn = |tool: &'static str, user: &str| Call {
        handle: Some(handle.clone()),
        turn: Some("msg-1"),
        ..Call::of(tool, json!({"user_id": user}))
    };
    let again = post(port_b, &in_turn("guild__kick_member", "43"));
    assert_ne!(
        again["resultType"], "input_required",
        "asked again: {again}"
    );
    assert_eq!(again["isError"], true, "{again}");
    assert!(
        text(&again).contains("already refused in this turn"),
        "{again}"
    );
    let ban = post(port_b, &in_turn("guild__ban_member", "43"));
    assert_ne!(ban["resultType"], "input_required", "asked again: {ban}");
    assert!(text(&ban).contains("locked until the next turn"), "{ban}");
    // A new turn is not locked out: the person is asked again.
    let next = Call {
        turn: Some("msg-2"),
        ..in_turn("guild__kick_member", "43")
    };
    question(&post(port_b, &next), "kick_member");

    // Two first calls of `atlas` in the conversation, at once on A and on B: one consent
    // question between them. The other call waits for its answer, and runs with it.
    let lookup = Call {
        handle: Some(handle.clone()),
        turn: Some("msg-3"),
        ..Call::of("atlas__lookup", json!({}))
    };
    let barrier = Arc::new(Barrier::new(2));
    let (sent, results) = mpsc::channel();
    for port in [port_a, port_b] {
        let (lookup, barrier, sent) = (lookup.clone(), barrier.clone(), sent.clone());
        std::thread::spawn(move || {
            barrier.wait();
            sent.send((port, post(port, &lookup))).unwrap();
        });
    }
    let (asker, first) = results.recv_timeout(Duration::from_secs(60)).unwrap();
    let state = question(&first, "atlas");
    // The other call has not been asked: it waits for this question's answer.
    assert!(
        results.recv_timeout(Duration::from_millis(1500)).is_err(),
        "both calls returned before the question was answered"
    );
    assert_eq!(
        psql(
            &url,
            "SELECT count(*) FROM shared_questions WHERE key = 'consent:atlas' AND answer IS NULL"
        ),
        "1"
    );
    let ran = post(asker, &lookup.answering(&state, "allow_once"));
    assert_eq!(ran["isError"], false, "{ran}");
    assert!(text(&ran).contains("found"), "{ran}");
    let (other, shared) = results.recv_timeout(Duration::from_secs(30)).unwrap();
    assert_ne!(other, asker);
    assert_ne!(
        shared["resultType"], "input_required",
        "asked twice: {shared}"
    );
    assert_eq!(shared["isError"], false, "{shared}");
    assert!(text(&shared).contains("found"), "{shared}");
    assert_eq!(
        psql(
            &url,
            "SELECT answer FROM shared_questions WHERE key = 'consent:atlas'"
        ),
        "granted"
    );

    drop((a, b));
}
