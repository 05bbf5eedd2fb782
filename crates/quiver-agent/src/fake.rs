//! A scripted fake model server on 127.0.0.1 (feature `fake-server`): it speaks the
//! OpenAI-compatible or the Anthropic API over real HTTP, answers each request with the next
//! scripted [`Move`] (or a responder's), streams when asked, and records every request, so
//! tests can assert exactly what was sent each turn.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::Response;
use serde_json::{Value, json};

/// Which API the server speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Api {
    /// `POST /v1/chat/completions`.
    OpenAi,
    /// `POST /v1/messages`.
    Anthropic,
}

/// What the model does for one request.
#[derive(Debug, Clone)]
pub enum Move {
    /// Answer with text and tool calls `(name, arguments)`, reporting `usage` tokens.
    Reply {
        /// The text.
        text: String,
        /// The tool calls.
        calls: Vec<(String, Value)>,
        /// Input and output tokens.
        usage: (u64, u64),
    },
    /// Answer with an error status and body (and a `Retry-After` header when set).
    Status {
        /// The status.
        status: u16,
        /// The body.
        body: String,
        /// The `Retry-After` value.
        retry_after: Option<String>,
    },
    /// Answer 200 with this body, verbatim (malformed-field tests).
    Raw(String),
    /// Answer 200 as a stream of these SSE `data:` payloads, verbatim.
    RawStream(Vec<String>),
    /// Wait this long, then answer "late" (timeout tests).
    Stall(Duration),
}

impl Move {
    /// A text answer.
    pub fn text(text: &str) -> Move {
        Move::Reply {
            text: text.to_owned(),
            calls: Vec::new(),
            usage: (100, 10),
        }
    }

    /// One tool call.
    pub fn call(name: &str, arguments: Value) -> Move {
        Move::Reply {
            text: String::new(),
            calls: vec![(name.to_owned(), arguments)],
            usage: (100, 10),
        }
    }

    /// Several tool calls in one reply.
    pub fn calls(calls: &[(&str, Value)]) -> Move {
        Move::Reply {
            text: String::new(),
            calls: calls
                .iter()
                .map(|(n, a)| ((*n).to_owned(), a.clone()))
                .collect(),
            usage: (100, 10),
        }
    }

    /// An error status.
    pub fn status(status: u16) -> Move {
        Move::Status {
            status,
            body: json!({"error": {"message": format!("scripted {status}")}}).to_string(),
            retry_after: None,
        }
    }
}

/// Chooses a move from the request body.
pub type Responder = Arc<dyn Fn(&Value) -> Move + Send + Sync>;

/// One request the server received.
#[derive(Debug, Clone)]
pub struct Recorded {
    /// The path.
    pub path: String,
    /// Headers (lower-case names).
    pub headers: BTreeMap<String, String>,
    /// The JSON body.
    pub body: Value,
}

#[derive(Clone)]
struct Shared {
    api: Api,
    script: Arc<Mutex<VecDeque<Move>>>,
    responder: Option<Responder>,
    requests: Arc<Mutex<Vec<Recorded>>>,
}

/// The running server; it stops when dropped.
pub struct FakeServer {
    base: String,
    shared: Shared,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

impl FakeServer {
    /// A server answering from a script (see [`FakeServer::push`]).
    pub fn start(api: Api) -> std::io::Result<FakeServer> {
        Self::launch(api, None)
    }

    /// A server answering each request with `responder`'s move (after any scripted ones).
    pub fn with_responder(api: Api, responder: Responder) -> std::io::Result<FakeServer> {
        Self::launch(api, Some(responder))
    }

    fn launch(api: Api, responder: Option<Responder>) -> std::io::Result<FakeServer> {
        let shared = Shared {
            api,
            script: Arc::default(),
            responder,
            requests: Arc::default(),
        };
        let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
        listener.set_nonblocking(true)?;
        let port = listener.local_addr()?.port();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let state = shared.clone();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        std::thread::spawn(move || {
            runtime.block_on(async move {
                let Ok(listener) = tokio::net::TcpListener::from_std(listener) else {
                    return;
                };
                let app = axum::Router::new().fallback(handle).with_state(state);
                let _ = axum::serve(listener, app)
                    .with_graceful_shutdown(async {
                        let _ = stopped.await;
                    })
                    .await;
            });
        });
        let base = match api {
            Api::OpenAi => format!("http://127.0.0.1:{port}/v1"),
            Api::Anthropic => format!("http://127.0.0.1:{port}"),
        };
        Ok(FakeServer {
            base,
            shared,
            stop: Some(stop),
        })
    }

    /// The base URL to configure (`…/v1` for OpenAI, the root for Anthropic).
    pub fn url(&self) -> &str {
        &self.base
    }

    /// Queues moves, answered in order.
    pub fn push(&self, moves: impl IntoIterator<Item = Move>) {
        if let Ok(mut script) = self.shared.script.lock() {
            script.extend(moves);
        }
    }

    /// Every request so far.
    pub fn requests(&self) -> Vec<Recorded> {
        self.shared
            .requests
            .lock()
            .map(|r| r.clone())
            .unwrap_or_default()
    }

    /// Moves not yet used.
    pub fn remaining(&self) -> usize {
        self.shared.script.lock().map(|s| s.len()).unwrap_or(0)
    }
}

impl Drop for FakeServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

async fn handle(
    State(shared): State<Shared>,
    uri: Uri,
    headers: HeaderMap,
    body: String,
) -> Response {
    let body: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
    let recorded = Recorded {
        path: uri.path().to_owned(),
        headers: headers
            .iter()
            .map(|(k, v)| {
                (
                    k.as_str().to_lowercase(),
                    v.to_str().unwrap_or_default().to_owned(),
                )
            })
            .collect(),
        body: body.clone(),
    };
    if let Ok(mut requests) = shared.requests.lock() {
        requests.push(recorded);
    }
    let scripted = shared.script.lock().ok().and_then(|mut s| s.pop_front());
    let next = scripted.or_else(|| shared.responder.as_ref().map(|r| r(&body)));
    let Some(next) = next else {
        return respond(
            500,
            "application/json",
            json!({"error": {"message": "the fake server's script is exhausted"}}).to_string(),
        );
    };
    let stream = body.get("stream").and_then(Value::as_bool) == Some(true);
    match next {
        Move::Status {
            status,
            body,
            retry_after,
        } => {
            let mut r = respond(status, "application/json", body);
            if let Some(v) = retry_after.and_then(|v| v.parse().ok()) {
                r.headers_mut().insert("retry-after", v);
            }
            r
        }
        Move::Raw(body) => respond(200, "application/json", body),
        Move::RawStream(events) => respond(200, "text/event-stream", sse(&events)),
        Move::Stall(d) => {
            tokio::time::sleep(d).await;
            respond(200, "application/json", json!({"late": true}).to_string())
        }
        Move::Reply { text, calls, usage } => match (shared.api, stream) {
            (Api::OpenAi, false) => respond(
                200,
                "application/json",
                openai_reply(&text, &calls, usage).to_string(),
            ),
            (Api::OpenAi, true) => respond(
                200,
                "text/event-stream",
                sse(&openai_stream(&text, &calls, usage)),
            ),
            (Api::Anthropic, false) => respond(
                200,
                "application/json",
                anthropic_reply(&text, &calls, usage).to_string(),
            ),
            (Api::Anthropic, true) => respond(
                200,
                "text/event-stream",
                anthropic_stream(&text, &calls, usage),
            ),
        },
    }
}

fn respond(status: u16, content_type: &str, body: String) -> Response {
    let mut r = Response::new(Body::from(body));
    *r.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    if let Ok(v) = content_type.parse() {
        r.headers_mut().insert("content-type", v);
    }
    r
}

fn sse(payloads: &[String]) -> String {
    payloads.iter().map(|p| format!("data: {p}\n\n")).collect()
}

/// `text` in pieces of `n` characters.
fn pieces(text: &str, n: usize) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    chars.chunks(n.max(1)).map(|c| c.iter().collect()).collect()
}

fn openai_reply(text: &str, calls: &[(String, Value)], usage: (u64, u64)) -> Value {
    let tool_calls: Vec<Value> = calls
        .iter()
        .enumerate()
        .map(|(i, (name, args))| json!({"id": format!("call_{i}"), "type": "function", "function": {"name": name, "arguments": args.to_string()}}))
        .collect();
    json!({
        "id": "chatcmpl-fake", "object": "chat.completion", "model": "fake",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": if text.is_empty() { Value::Null } else { json!(text) }, "tool_calls": if tool_calls.is_empty() { Value::Null } else { json!(tool_calls) }}, "finish_reason": if calls.is_empty() { "stop" } else { "tool_calls" }}],
        "usage": {"prompt_tokens": usage.0, "completion_tokens": usage.1, "total_tokens": usage.0 + usage.1}
    })
}

fn openai_stream(text: &str, calls: &[(String, Value)], usage: (u64, u64)) -> Vec<String> {
    let chunk = |delta: Value, finish: Value| {
        json!({"id": "chatcmpl-fake", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}).to_string()
    };
    let mut out = vec![chunk(
        json!({"role": "assistant", "content": ""}),
        Value::Null,
    )];
    for p in pieces(text, 3) {
        out.push(chunk(json!({"content": p}), Value::Null));
    }
    for (i, (name, args)) in calls.iter().enumerate() {
        out.push(chunk(json!({"tool_calls": [{"index": i, "id": format!("call_{i}"), "type": "function", "function": {"name": name, "arguments": ""}}]}), Value::Null));
        for p in pieces(&args.to_string(), 5) {
            out.push(chunk(
                json!({"tool_calls": [{"index": i, "function": {"arguments": p}}]}),
                Value::Null,
            ));
        }
    }
    out.push(chunk(
        json!({}),
        json!(if calls.is_empty() {
            "stop"
        } else {
            "tool_calls"
        }),
    ));
    out.push(json!({"id": "chatcmpl-fake", "choices": [], "usage": {"prompt_tokens": usage.0, "completion_tokens": usage.1}}).to_string());
    out.push("[DONE]".into());
    out
}

fn anthropic_reply(text: &str, calls: &[(String, Value)], usage: (u64, u64)) -> Value {
    let mut content = Vec::new();
    if !text.is_empty() {
        content.push(json!({"type": "text", "text": text}));
    }
    for (i, (name, args)) in calls.iter().enumerate() {
        content.push(
            json!({"type": "tool_use", "id": format!("toolu_{i}"), "name": name, "input": args}),
        );
    }
    json!({
        "id": "msg_fake", "type": "message", "role": "assistant", "model": "fake", "content": content,
        "stop_reason": if calls.is_empty() { "end_turn" } else { "tool_use" },
        "usage": {"input_tokens": usage.0, "output_tokens": usage.1}
    })
}

fn anthropic_stream(text: &str, calls: &[(String, Value)], usage: (u64, u64)) -> String {
    let mut events: Vec<(&str, Value)> = vec![(
        "message_start",
        json!({"type": "message_start", "message": {"id": "msg_fake", "type": "message", "role": "assistant", "content": [], "usage": {"input_tokens": usage.0, "output_tokens": 1}}}),
    )];
    let mut index = 0;
    if !text.is_empty() {
        events.push(("content_block_start", json!({"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}})));
        for p in pieces(text, 3) {
            events.push(("content_block_delta", json!({"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": p}})));
        }
        events.push((
            "content_block_stop",
            json!({"type": "content_block_stop", "index": index}),
        ));
        index += 1;
    }
    events.push(("ping", json!({"type": "ping"})));
    for (i, (name, args)) in calls.iter().enumerate() {
        events.push(("content_block_start", json!({"type": "content_block_start", "index": index, "content_block": {"type": "tool_use", "id": format!("toolu_{i}"), "name": name, "input": {}}})));
        for p in pieces(&args.to_string(), 5) {
            events.push(("content_block_delta", json!({"type": "content_block_delta", "index": index, "delta": {"type": "input_json_delta", "partial_json": p}})));
        }
        events.push((
            "content_block_stop",
            json!({"type": "content_block_stop", "index": index}),
        ));
        index += 1;
    }
    events.push(("message_delta", json!({"type": "message_delta", "delta": {"stop_reason": if calls.is_empty() { "end_turn" } else { "tool_use" }}, "usage": {"output_tokens": usage.1}})));
    events.push(("message_stop", json!({"type": "message_stop"})));
    events
        .into_iter()
        .map(|(name, data)| format!("event: {name}\ndata: {data}\n\n"))
        .collect()
}

/// The last user message's text in a request body of either API.
pub fn last_user_text(body: &Value) -> String {
    let Some(messages) = body.get("messages").and_then(Value::as_array) else {
        return String::new();
    };
    for m in messages.iter().rev() {
        if m.get("role").and_then(Value::as_str) != Some("user") {
            continue;
        }
        let content = m.get("content").cloned().unwrap_or(Value::Null);
        let text = crate::provider::text_of(&content);
        if !text.is_empty() {
            return text;
        }
    }
    String::new()
}

/// The names of the tools a request body offers (either API).
pub fn offered_tools(body: &Value) -> Vec<String> {
    body.get("tools")
        .and_then(Value::as_array)
        .map(|tools| {
            tools
                .iter()
                .filter_map(|t| {
                    t.pointer("/function/name")
                        .or_else(|| t.get("name"))
                        .and_then(Value::as_str)
                        .map(str::to_owned)
                })
                .collect()
        })
        .unwrap_or_default()
}

/// One rule of a [`ScriptedModel`]: what the model does for a request containing `when`.
#[derive(Debug, Clone, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    /// A substring of the conversation's first user message.
    pub when: String,
    /// Call this tool (wire name) when it is offered.
    #[serde(default)]
    pub call: Option<String>,
    /// With these arguments.
    #[serde(default)]
    pub args: Option<Value>,
    /// When the tool is not offered but `tool_search` is, search for this first (default: the
    /// request).
    #[serde(default)]
    pub search: Option<String>,
    /// Read this skill with `read_skill` when it is offered.
    #[serde(default)]
    pub skill: Option<String>,
    /// The text answer (after the call, if any).
    #[serde(default)]
    pub reply: Option<String>,
}

/// A rule-following stand-in for a model, for demonstrations and CLI tests: it searches
/// when its tool is deferred, calls it when offered, then answers.
#[derive(Debug, Clone, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptedModel {
    /// The rules, first match wins.
    pub rules: Vec<Rule>,
    /// The answer when no rule matches.
    #[serde(default)]
    pub default_reply: Option<String>,
}

/// The names of the tools the conversation in `body` has called so far (either API).
fn called_tools(body: &Value) -> Vec<String> {
    let mut out = Vec::new();
    for m in body
        .get("messages")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        for c in m
            .get("tool_calls")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if let Some(n) = c.pointer("/function/name").and_then(Value::as_str) {
                out.push(n.to_owned());
            }
        }
        for b in m
            .get("content")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if b.get("type").and_then(Value::as_str) == Some("tool_use")
                && let Some(n) = b.get("name").and_then(Value::as_str)
            {
                out.push(n.to_owned());
            }
        }
    }
    out
}

/// The first user message's text in a request body of either API.
pub fn first_user_text(body: &Value) -> String {
    body.get("messages")
        .and_then(Value::as_array)
        .and_then(|ms| {
            ms.iter()
                .find(|m| m.get("role").and_then(Value::as_str) == Some("user"))
        })
        .map(|m| crate::provider::text_of(m.get("content").unwrap_or(&Value::Null)))
        .unwrap_or_default()
}

impl ScriptedModel {
    /// Parses a scripted model from YAML.
    pub fn parse(text: &str) -> Result<ScriptedModel, String> {
        quiver_package::yaml::parse(text, std::path::Path::new("model.yaml"), 1)
            .map_err(|d| d.message)
    }

    /// The move for a request body.
    pub fn decide(&self, body: &Value) -> Move {
        let request = first_user_text(body);
        let offered = offered_tools(body);
        let called = called_tools(body);
        let Some(rule) = self.rules.iter().find(|r| request.contains(&r.when)) else {
            return Move::text(self.default_reply.as_deref().unwrap_or("OK."));
        };
        let answer = || Move::text(rule.reply.as_deref().unwrap_or("完成。 Done."));
        if let Some(skill) = &rule.skill
            && offered.iter().any(|t| t == "read_skill")
            && !called.iter().any(|c| c == "read_skill")
        {
            return Move::call("read_skill", json!({"id": skill}));
        }
        let Some(tool) = &rule.call else {
            return answer();
        };
        if called.iter().any(|c| c == tool) {
            return answer();
        }
        if offered.iter().any(|t| t == tool) {
            return Move::call(tool, rule.args.clone().unwrap_or_else(|| json!({})));
        }
        if offered.iter().any(|t| t == "tool_search") && !called.iter().any(|c| c == "tool_search")
        {
            return Move::call(
                "tool_search",
                json!({"query": rule.search.clone().unwrap_or(request)}),
            );
        }
        answer()
    }

    /// This model as a server responder.
    pub fn responder(self) -> Responder {
        Arc::new(move |body| self.decide(body))
    }
}
