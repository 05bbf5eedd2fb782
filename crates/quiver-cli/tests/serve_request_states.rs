//! Two `quiver serve` instances on one PostgreSQL database with one state folder (one MCP
//! secret, one token), as behind a load balancer (issue 26, item 2): a gated call (consent, then
//! approval) is answered through 2026-07-28 `input_required` rounds on instance A; the
//! identical consent retry sent to B gets the same second question back; the identical approval
//! retry sent to B while the call runs is told to retry, and once it ended gets A's result
//! replayed (`io.quiver/replayed`): the tool ran exactly once (its ledger has one line).
//!
//! Skipped, saying why, without `QUIVER_TEST_POSTGRES` (a failure with
//! `QUIVER_REQUIRE_POSTGRES=1`).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

mod instances;
mod support;

use instances::{Env, postgres, write};

const TOKEN: &str = "test-token-shared";

/// The package `tally`: its one tool appends a line to a ledger, sleeps two seconds and
/// answers how many lines the ledger holds.
fn package(root: &Path) {
    write(
        root,
        "tally/quiver.yaml",
        "id: tally\nname: Tally\nversion: 1.0.0\ndescription: Counts its own runs\nlicense: MIT\npermissions: {}\n",
    );
    write(
        root,
        "tally/tools/count/tool.yaml",
        "name: count\nversion: 1.0.0\ndescription:\n  summary: Counts a run in a ledger and answers the count\ncategory: action\nexpose: true\ninput: {type: object}\nrun: {command: [python3, main.py]}\n",
    );
    write(
        root,
        "tally/tools/count/main.py",
        "import json, os, sys, time\njson.load(sys.stdin)\npath = os.path.join(os.environ['QUIVER_DATA_DIR'], 'ledger')\nwith open(path, 'a') as f:\n    f.write('run\\n')\ntime.sleep(2)\nprint(json.dumps({'runs': len(open(path).read().splitlines())}))\n",
    );
}

/// The `tools/call` of `call_tool` for `tally__count`, stateless 2026-07-28, with `retry`
/// (the state and the answer) when it answers a question.
fn request(retry: Option<&str>) -> Value {
    let mut params = json!({
        "name": "call_tool",
        "arguments": {"name": "tally__count", "arguments": {}},
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientInfo": {"name": "shared-test", "version": "1.0.0"},
            "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}},
        },
    });
    if let Some(state) = retry {
        params["requestState"] = json!(state);
        params["inputResponses"] = json!({
            "quiver_decision": {"action": "accept", "content": {"decision": "allow_once"}}
        });
    }
    json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params})
}

/// POSTs `body` to the instance on `port` and returns the JSON-RPC response.
fn post(port: u16, body: &Value) -> Value {
    let body = body.to_string();
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
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
    // An SSE body carries the response on its `data:` line.
    let json = text
        .lines()
        .find_map(|l| l.strip_prefix("data:"))
        .map_or(text.trim(), str::trim);
    serde_json::from_str(json).unwrap_or_else(|e| panic!("{e}: {response}"))
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

#[test]
fn an_answer_retried_on_another_instance_replays_the_one_run() {
    let Some(server) = postgres() else { return };
    // One state folder for both: one MCP secret, one token.
    let env = Env::with_config(
        &server,
        "request_states",
        package,
        &format!("mcp:\n  tokens:\n    - {{token: {TOKEN}, user: alice, role: trusted}}\n"),
    );
    let (a, b) = (env.serve(), env.serve());
    let (port_a, port_b) = (a.port, b.port);
    let ledger = || env.ledger().len();

    // The first round asks for consent.
    let asked = post(port_a, &request(None));
    let result = &asked["result"];
    assert_eq!(result["resultType"], "input_required", "{asked}");
    let consent = result["requestState"].as_str().unwrap().to_owned();
    // Consent given on A: the call asks its approval next (an `action` tool).
    let asked = post(port_a, &request(Some(&consent)));
    let result = &asked["result"];
    assert_eq!(result["resultType"], "input_required", "{asked}");
    let state = result["requestState"].as_str().unwrap().to_owned();
    assert_ne!(state, consent);
    // The same consent answer on B gets that second question again, not a second round.
    let replayed = post(port_b, &request(Some(&consent)));
    assert_eq!(
        replayed["result"]["requestState"],
        json!(state),
        "{replayed}"
    );
    assert_eq!(ledger(), 0);

    // The answer goes to A; the identical retry to B while A runs the tool is told to retry.
    let answered = std::thread::spawn({
        let state = state.clone();
        move || post(port_a, &request(Some(&state)))
    });
    std::thread::sleep(Duration::from_millis(700));
    let early = post(port_b, &request(Some(&state)));
    assert_eq!(early["error"]["data"]["retry"], true, "{early}");
    assert!(
        early["error"]["message"]
            .as_str()
            .unwrap()
            .contains("still running"),
        "{early}"
    );
    let first = answered.join().unwrap();
    let first = &first["result"];
    assert_eq!(first["isError"], false, "{first}");
    let text = first["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("\"runs\":1"), "{text}");
    assert!(
        first["_meta"].get("io.quiver/replayed").is_none(),
        "{first}"
    );

    // Once it ended, the same retry on B gets A's answer, marked replayed; nothing ran again.
    let again = post(port_b, &request(Some(&state)));
    let again = &again["result"];
    assert_eq!(again["_meta"]["io.quiver/replayed"], true, "{again}");
    assert_eq!(
        again["_meta"]["io.quiver/call"],
        first["_meta"]["io.quiver/call"]
    );
    assert_eq!(again["content"], first["content"]);
    // And on A.
    let on_a = post(port_a, &request(Some(&state)));
    assert_eq!(
        on_a["result"]["_meta"]["io.quiver/replayed"], true,
        "{on_a}"
    );
    assert_eq!(ledger(), 1, "the tool ran exactly once");
}
