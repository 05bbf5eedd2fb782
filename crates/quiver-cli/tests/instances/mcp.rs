//! A small MCP client over Streamable HTTP (the 2025-11-25 era: `initialize`, then requests in
//! its `Mcp-Session-Id` session), enough to call tools on an instance and read the answer,
//! with the owner's bearer token from the state folder.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::sync::mpsc::{Receiver, Sender, channel};

use serde_json::{Value, json};

/// One session on one instance.
pub struct Client {
    port: u16,
    token: String,
    session: String,
    next: u64,
    /// The messages of the streams of calls started with [`Client::start`] and of the
    /// session's `GET` stream (opened by the first of them).
    streams: (Sender<Tagged>, Receiver<Tagged>),
    listening: bool,
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
        Client::connect_with(port, home, json!({}))
    }

    /// Opens a session declaring `capabilities` (`{"elicitation": {"form": {}}}`: the client
    /// shows forms).
    pub fn connect_with(port: u16, home: &Path, capabilities: Value) -> Client {
        let token = super::find(home, "mcp-token")
            .first()
            .map(|p| std::fs::read_to_string(p).unwrap().trim().to_owned())
            .unwrap_or_else(|| panic!("no mcp-token under {}", home.display()));
        let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": capabilities,
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
            streams: channel(),
            listening: false,
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

    /// Starts a call of `tool` whose answer streams, returning its id: the form questions the
    /// server asks meanwhile are read with [`Client::next`] and answered with
    /// [`Client::answer`].
    pub fn start(&mut self, tool: &str, arguments: Value, handle: Option<&str>) -> u64 {
        let id = self.next;
        self.next += 1;
        let mut params = json!({"name": tool, "arguments": arguments});
        if let Some(handle) = handle {
            params["_meta"] = json!({"io.quiver/conversation": handle});
        }
        let body = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params})
            .to_string();
        if !self.listening {
            self.listening = true;
            let mut events = TcpStream::connect(("127.0.0.1", self.port)).unwrap();
            write!(
                events,
                "GET /mcp HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nAccept: text/event-stream\r\nConnection: close\r\nAuthorization: Bearer {}\r\nMcp-Session-Id: {}\r\nMCP-Protocol-Version: 2025-11-25\r\n\r\n",
                self.port, self.token, self.session
            )
            .unwrap();
            pump(events, 0, self.streams.0.clone());
        }
        let mut stream = TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        write!(
            stream,
            "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\nAuthorization: Bearer {}\r\nMcp-Session-Id: {}\r\nMCP-Protocol-Version: 2025-11-25\r\n\r\n{body}",
            self.port,
            body.len(),
            self.token,
            self.session
        )
        .unwrap();
        pump(stream, id, self.streams.0.clone());
        id
    }

    /// Waits for the next question, or the result of the call `id`.
    pub fn next(&self, id: u64) -> Next {
        loop {
            match self.streams.1.recv() {
                Ok((_, Some(message))) if message["method"] == "elicitation/create" => {
                    let text = message["params"]["message"].as_str().unwrap_or_default();
                    return Next::Question(message["id"].clone(), text.to_owned());
                }
                Ok((_, Some(message))) if message["id"] == json!(id) => {
                    return Next::Result(message["result"].clone());
                }
                Ok((tag, None)) if tag == id || tag == 0 => return Next::Gone,
                Ok(_) => {}
                Err(_) => return Next::Gone,
            }
        }
    }

    /// Answers the server's request `id` (a form) with `decision` (`allow_once`, `deny`, ...).
    pub fn answer(&self, id: &Value, decision: &str) {
        let reply = json!({"jsonrpc": "2.0", "id": id, "result": {
            "action": "accept", "content": {"decision": decision}}});
        let (head, _) = self.send(&reply.to_string()).unwrap();
        assert!(head.starts_with("http/1.1 20"), "{head}");
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

/// What came next on a call's streams.
#[derive(Debug)]
pub enum Next {
    /// The server asks a question: the request's id and its message.
    Question(Value, String),
    /// The call's result.
    Result(Value),
    /// The stream ended without a result (the instance went away).
    Gone,
}

/// One message of a stream (`None`: the stream ended), tagged with the call whose request it
/// answers (0: the session's `GET` stream).
type Tagged = (u64, Option<Value>);

/// Reads the SSE messages of `stream` into `sink`, then `None` once it ends.
fn pump(stream: TcpStream, tag: u64, sink: Sender<Tagged>) {
    std::thread::spawn(move || {
        let mut reader = BufReader::new(stream);
        let mut line = String::new();
        while reader.read_line(&mut line).is_ok_and(|n| n > 0) {
            if let Some(data) = line.trim().strip_prefix("data:")
                && let Ok(message) = serde_json::from_str::<Value>(data.trim())
                && sink.send((tag, Some(message))).is_err()
            {
                return;
            }
            line.clear();
        }
        let _ = sink.send((tag, None));
    });
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
