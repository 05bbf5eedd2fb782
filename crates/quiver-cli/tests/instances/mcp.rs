//! A small MCP client over Streamable HTTP (the 2025-11-25 era: `initialize`, then requests in
//! its `Mcp-Session-Id` session), enough to call tools on an instance and read the answer,
//! with the owner's bearer token from the state folder.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;

use serde_json::{Value, json};

/// One session on one instance.
pub struct Client {
    port: u16,
    token: String,
    session: String,
    next: u64,
}

/// One HTTP exchange: the response's headers (lower-cased) and its decoded body.
fn post(port: u16, headers: &[(&str, &str)], body: &str) -> std::io::Result<(String, String)> {
    let mut stream = TcpStream::connect(("127.0.0.1", port))?;
    let mut request = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    request.push_str(body);
    stream.write_all(request.as_bytes())?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw)?;
    let raw = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = raw
        .split_once("\r\n\r\n")
        .ok_or_else(|| std::io::Error::other(format!("no HTTP response: {raw:?}")))?;
    let head = head.to_ascii_lowercase();
    let body = if head.contains("transfer-encoding: chunked") {
        dechunk(body)
    } else {
        body.to_owned()
    };
    Ok((head, body))
}

fn dechunk(mut body: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let Ok(size) = usize::from_str_radix(size.trim(), 16) else {
            break;
        };
        if size == 0 || rest.len() < size {
            break;
        }
        out.push_str(&rest[..size]);
        body = rest[size..].trim_start_matches("\r\n");
    }
    out
}

/// The JSON-RPC message answering `id` in a JSON or SSE body.
fn answer(body: &str, id: u64) -> Option<Value> {
    let messages: Vec<Value> = match serde_json::from_str::<Value>(body.trim()) {
        Ok(message) => vec![message],
        Err(_) => body
            .lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .filter_map(|d| serde_json::from_str(d.trim()).ok())
            .collect(),
    };
    messages.into_iter().find(|m| m["id"] == json!(id))
}

impl Client {
    /// Opens a session on the instance at `port`, with the owner's token of the state
    /// folder `home`.
    pub fn connect(port: u16, home: &Path) -> Client {
        let token = super::find(home, "mcp-token")
            .first()
            .map(|p| std::fs::read_to_string(p).unwrap().trim().to_owned())
            .unwrap_or_else(|| panic!("no mcp-token under {}", home.display()));
        let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "fault-test", "version": "1"}}});
        let bearer = format!("Bearer {token}");
        let (head, body) = post(port, &[("Authorization", &bearer)], &init.to_string()).unwrap();
        assert!(answer(&body, 0).is_some(), "{head}\n{body}");
        let session = head
            .lines()
            .find_map(|l| l.strip_prefix("mcp-session-id:"))
            .unwrap_or_else(|| panic!("no session: {head}"))
            .trim()
            .to_owned();
        let client = Client {
            port,
            token,
            session,
            next: 1,
        };
        let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        client.send(&note.to_string()).unwrap();
        client
    }

    fn send(&self, body: &str) -> std::io::Result<(String, String)> {
        let bearer = format!("Bearer {}", self.token);
        post(
            self.port,
            &[
                ("Authorization", &bearer),
                ("Mcp-Session-Id", &self.session),
                ("MCP-Protocol-Version", "2025-11-25"),
            ],
            body,
        )
    }

    /// Calls `tool` with `arguments`, in the conversation `handle` when given; the result, or
    /// the I/O error when the instance went away mid-call.
    pub fn call(
        &mut self,
        tool: &str,
        arguments: Value,
        handle: Option<&str>,
    ) -> std::io::Result<Value> {
        let id = self.next;
        self.next += 1;
        let mut params = json!({"name": tool, "arguments": arguments});
        if let Some(handle) = handle {
            params["_meta"] = json!({"io.quiver/conversation": handle});
        }
        let request = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params});
        let (head, body) = self.send(&request.to_string())?;
        let message = answer(&body, id)
            .ok_or_else(|| std::io::Error::other(format!("no answer to {id}: {head}\n{body}")))?;
        Ok(message["result"].clone())
    }
}

/// The conversation handle a result carries.
pub fn handle(result: &Value) -> String {
    result["_meta"]["io.quiver/conversation"]
        .as_str()
        .unwrap_or_else(|| panic!("no handle: {result}"))
        .to_owned()
}

/// A result's text.
pub fn text(result: &Value) -> String {
    result["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}
