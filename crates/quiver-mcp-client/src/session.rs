//! MCP sessions. A package's MCP server (`run: {mcp: ...}` tools, and a local server the
//! operator lists in the config file) runs over stdio inside the package's sandbox; a remote
//! server the operator lists is reached over Streamable HTTP. Either way Quiver is an MCP
//! client (rmcp), and each call carries the call context in `_meta` under
//! [`CONTEXT_META_KEY`]. With `fetch_skills.rs`, the only module of this crate that names
//! rmcp types.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::time::Duration;

use quiver_sandbox::{Job, Sandbox, SandboxError, Spawned};
use rmcp::model::{CallToolRequestParams, RequestMetaObject};
use rmcp::service::ClientInitializeError;
use rmcp::service::{NotificationContext, RoleClient, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::{
    StreamableHttpClientTransportConfig, StreamableHttpError,
};
use rmcp::{ClientHandler, ServiceError, ServiceExt};
use serde_json::Value;

use crate::McpClientError;
use crate::skills::RemoteSkill;

/// The `_meta` key that carries Quiver's call context to the server.
pub const CONTEXT_META_KEY: &str = "quiver.dev/context";

/// How long the server may take to answer `initialize`.
const START_TIMEOUT: Duration = Duration::from_secs(20);

enum Request {
    Call {
        tool: String,
        arguments: serde_json::Map<String, Value>,
        context: Value,
        reply: mpsc::Sender<Result<Value, McpClientError>>,
    },
    List {
        reply: mpsc::Sender<Result<Vec<Value>, McpClientError>>,
    },
    Skills {
        reply: mpsc::Sender<Result<Vec<RemoteSkill>, McpClientError>>,
    },
}

/// A remote MCP server, reached over Streamable HTTP.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Remote {
    /// The endpoint (`https://mcp.example.com/mcp`).
    pub url: String,
    /// Sent as `Authorization: Bearer <token>` on every request.
    pub bearer_token: Option<String>,
    /// Further headers sent on every request.
    pub headers: Vec<(String, String)>,
}

/// Told when a server says its tool list changed (`notifications/tools/list_changed`). It runs
/// on the client's session thread, so it must only hand the news on, never wait.
pub type ToolsChanged = Arc<dyn Fn() + Send + Sync>;

/// The client side of a session: rmcp's defaults, plus the list-changed news.
struct Watch(Option<ToolsChanged>);

impl ClientHandler for Watch {
    fn on_tool_list_changed(
        &self,
        _context: NotificationContext<RoleClient>,
    ) -> impl Future<Output = ()> + Send + '_ {
        if let Some(changed) = &self.0 {
            changed();
        }
        std::future::ready(())
    }
}

type Client = RunningService<RoleClient, Watch>;
type Connect = Box<
    dyn FnOnce() -> Pin<Box<dyn Future<Output = Result<Client, McpClientError>>>> + Send + 'static,
>;

/// A connected MCP server: a sandboxed process over stdio, or a remote server over HTTP.
pub struct McpClient {
    requests: tokio::sync::mpsc::UnboundedSender<Request>,
    spawned: Option<Arc<Mutex<Spawned>>>,
    alive: Arc<AtomicBool>,
    server: Value,
}

impl McpClient {
    /// Starts `job` (the server's command) in the sandbox and initializes the session;
    /// `changed` hears of changes to the server's tool list.
    pub fn start(
        sandbox: &Sandbox,
        job: &Job,
        changed: Option<ToolsChanged>,
    ) -> Result<McpClient, McpClientError> {
        let mut spawned = sandbox.spawn(job)?;
        let (stdin, stdout) = match (spawned.stdin.take(), spawned.stdout.take()) {
            (Some(i), Some(o)) => (i, o),
            _ => return Err(McpClientError::Setup("the MCP server has no stdio".into())),
        };
        let spawned = Arc::new(Mutex::new(spawned));
        let max_line = sandbox.config().stdout_limit;
        let connect: Connect = Box::new(move || {
            Box::pin(async move {
                let setup = |e: std::io::Error| McpClientError::Setup(e.to_string());
                let reader = tokio::process::ChildStdout::from_std(stdout).map_err(setup)?;
                let reader = quiver_sandbox::output::LineCap::new(reader, max_line);
                let writer = tokio::process::ChildStdin::from_std(stdin).map_err(setup)?;
                Watch(changed)
                    .serve((reader, writer))
                    .await
                    .map_err(|e| McpClientError::Failed(e.to_string()))
            })
        });
        match session(&job.package, connect) {
            Ok((requests, alive, server)) => Ok(McpClient {
                requests,
                spawned: Some(spawned),
                alive,
                server,
            }),
            Err(why) => {
                let mut spawned = spawned
                    .lock()
                    .map_err(|_| McpClientError::Setup(why.to_string()))?;
                spawned.kill();
                spawned.settle_stderr();
                let tail = spawned.stderr();
                let setup = spawned.setup_error(quiver_sandbox::launcher::SETUP_FAILED);
                Err(setup.map(McpClientError::Sandbox).unwrap_or_else(|| {
                    McpClientError::Failed(format!(
                        "the MCP server did not start: {why}{}",
                        tail.lines()
                            .last()
                            .map(|l| format!(" ({l})"))
                            .unwrap_or_default()
                    ))
                }))
            }
        }
    }

    /// Connects to a remote server over Streamable HTTP and initializes the session; `name`
    /// names the client's thread. Requests time out after `timeout` (the transport's own
    /// connect timeout; each call has its own); `changed` hears of changes to its tool list.
    pub fn connect(
        name: &str,
        remote: &Remote,
        timeout: Duration,
        changed: Option<ToolsChanged>,
    ) -> Result<McpClient, McpClientError> {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let mut headers = HashMap::new();
        for (key, value) in &remote.headers {
            let key = reqwest::header::HeaderName::from_bytes(key.as_bytes())
                .map_err(|e| McpClientError::Setup(format!("header `{key}`: {e}")))?;
            let value = reqwest::header::HeaderValue::from_str(value)
                .map_err(|e| McpClientError::Setup(format!("header `{key}`: {e}")))?;
            headers.insert(key, value);
        }
        let http = reqwest::Client::builder()
            .connect_timeout(timeout)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| McpClientError::Setup(format!("the HTTP client: {e}")))?;
        let mut config = StreamableHttpClientTransportConfig::with_uri(remote.url.as_str())
            .custom_headers(headers);
        if let Some(token) = &remote.bearer_token {
            config = config.auth_header(token.as_str());
        }
        let url = remote.url.clone();
        let connect: Connect = Box::new(move || {
            Box::pin(async move {
                let transport = StreamableHttpClientTransport::with_client(http, config);
                Watch(changed)
                    .serve(transport)
                    .await
                    .map_err(|e| http_failure(&url, &e))
            })
        });
        let (requests, alive, server) = session(name, connect)?;
        Ok(McpClient {
            requests,
            spawned: None,
            alive,
            server,
        })
    }

    /// What the server said about itself in `initialize` (`serverInfo`, `instructions`, ...).
    pub fn server_info(&self) -> &Value {
        &self.server
    }

    /// Whether the server still runs (for a remote server: whether the session is usable).
    pub fn is_alive(&self) -> bool {
        self.alive.load(Ordering::SeqCst)
            && self.spawned.as_ref().is_none_or(|spawned| {
                spawned
                    .lock()
                    .is_ok_and(|mut s| matches!(s.child.try_wait(), Ok(None)))
            })
    }

    /// Stops the server and its whole process group (for a remote server: ends the session).
    pub fn stop(&self) {
        self.alive.store(false, Ordering::SeqCst);
        if let Some(spawned) = &self.spawned
            && let Ok(mut spawned) = spawned.lock()
        {
            spawned.kill();
        }
    }

    /// The server's tools (`tools/list`, every page), each as the JSON of an MCP `Tool`.
    pub fn list_tools(&self, timeout: Duration) -> Result<Vec<Value>, McpClientError> {
        let (reply, answer) = mpsc::channel();
        self.requests
            .send(Request::List { reply })
            .map_err(|_| McpClientError::Failed("the MCP server is not running".into()))?;
        match answer.recv_timeout(timeout) {
            Ok(result) => result,
            Err(_) => {
                self.stop();
                Err(McpClientError::TimedOut(timeout))
            }
        }
    }

    /// The skills the server offers through the MCP Skills extension, each with its files'
    /// bytes (see [`crate::skills`]); none when it offers none. Everything must arrive within
    /// `timeout`.
    pub fn skills(&self, timeout: Duration) -> Result<Vec<RemoteSkill>, McpClientError> {
        let (reply, answer) = mpsc::channel();
        self.requests
            .send(Request::Skills { reply })
            .map_err(|_| McpClientError::Failed("the MCP server is not running".into()))?;
        answer
            .recv_timeout(timeout)
            .unwrap_or(Err(McpClientError::TimedOut(timeout)))
    }

    /// Calls `tool` with `arguments` (a JSON object), the call context in `_meta`.
    pub fn call(
        &self,
        tool: &str,
        arguments: &Value,
        context: &Value,
        timeout: Duration,
    ) -> Result<Value, McpClientError> {
        let arguments = match arguments {
            Value::Object(map) => map.clone(),
            Value::Null => serde_json::Map::new(),
            _ => {
                return Err(McpClientError::Failed(
                    "MCP tool arguments must be a JSON object".into(),
                ));
            }
        };
        let (reply, answer) = mpsc::channel();
        self.requests
            .send(Request::Call {
                tool: tool.to_owned(),
                arguments,
                context: context.clone(),
                reply,
            })
            .map_err(|_| McpClientError::Failed("the MCP server is not running".into()))?;
        let result = match answer.recv_timeout(timeout) {
            Ok(result) => result,
            Err(_) => {
                self.stop();
                return Err(McpClientError::TimedOut(timeout));
            }
        };
        let denial = self
            .spawned
            .as_ref()
            .and_then(|s| s.lock().ok().and_then(|s| s.denial()));
        if let Some(denial) = denial {
            return Err(McpClientError::Sandbox(SandboxError::Denied(denial)));
        }
        result
    }
}

impl Drop for McpClient {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Runs an MCP client session on its own thread (a current-thread tokio runtime, so callers
/// never need one): `connect` initializes it, then requests are served until the client is
/// dropped. Returns the request channel, the liveness flag and the server's `initialize`
/// result, or why the session did not start.
fn session(
    name: &str,
    connect: Connect,
) -> Result<
    (
        tokio::sync::mpsc::UnboundedSender<Request>,
        Arc<AtomicBool>,
        Value,
    ),
    McpClientError,
> {
    let alive = Arc::new(AtomicBool::new(true));
    let (requests, mut incoming) = tokio::sync::mpsc::unbounded_channel::<Request>();
    let (ready_tx, ready_rx) = mpsc::channel::<Result<Value, McpClientError>>();
    let thread_alive = alive.clone();
    std::thread::Builder::new()
        .name(format!("quiver-mcp-{name}"))
        .spawn(move || {
            let runtime = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(rt) => rt,
                Err(e) => {
                    let _ = ready_tx.send(Err(McpClientError::Setup(e.to_string())));
                    return;
                }
            };
            let session_alive = thread_alive.clone();
            runtime.block_on(async move {
                let client = match connect().await {
                    Ok(client) => client,
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                        return;
                    }
                };
                let info = client
                    .peer_info()
                    .and_then(|info| serde_json::to_value(&*info).ok())
                    .unwrap_or_default();
                let _ = ready_tx.send(Ok(info));
                while let Some(request) = incoming.recv().await {
                    let peer = client.peer().clone();
                    let alive = session_alive.clone();
                    tokio::spawn(async move {
                        match request {
                            Request::Call {
                                tool,
                                arguments,
                                context,
                                reply,
                            } => {
                                let mut meta = serde_json::Map::new();
                                meta.insert(CONTEXT_META_KEY.into(), context);
                                let mut params = CallToolRequestParams::new(tool);
                                params.arguments = Some(arguments);
                                params.meta = Some(RequestMetaObject::from(meta));
                                let result = match peer.call_tool(params).await {
                                    Ok(result) => tool_result(
                                        serde_json::to_value(result).unwrap_or_default(),
                                    ),
                                    Err(e) => {
                                        if !matches!(e, ServiceError::McpError(_)) {
                                            alive.store(false, Ordering::SeqCst);
                                        }
                                        Err(McpClientError::Failed(format!(
                                            "the MCP server failed: {e}"
                                        )))
                                    }
                                };
                                let _ = reply.send(result);
                            }
                            Request::Skills { reply } => {
                                let _ = reply.send(crate::fetch_skills::fetch(&peer).await);
                            }
                            Request::List { reply } => {
                                let result = match peer.list_all_tools().await {
                                    Ok(tools) => Ok(tools
                                        .iter()
                                        .filter_map(|t| serde_json::to_value(t).ok())
                                        .collect()),
                                    Err(e) => Err(McpClientError::Failed(format!(
                                        "`tools/list` failed: {e}"
                                    ))),
                                };
                                let _ = reply.send(result);
                            }
                        }
                    });
                }
                let _ = client.cancel().await;
            });
            thread_alive.store(false, Ordering::SeqCst);
        })
        .map_err(|e| McpClientError::Setup(format!("starting the MCP client: {e}")))?;
    match ready_rx.recv_timeout(START_TIMEOUT) {
        Ok(Ok(info)) => Ok((requests, alive, info)),
        Ok(Err(e)) => Err(e),
        Err(_) => Err(McpClientError::Failed(
            "no answer to `initialize`".to_owned(),
        )),
    }
}

/// Why a remote server could not be initialized: rmcp's typed 401 and 403 (its
/// `StreamableHttpError::AuthRequired` and `InsufficientScope`) as their own errors, anything
/// else with rmcp's message without its transport's type names.
fn http_failure(url: &str, error: &ClientInitializeError) -> McpClientError {
    if let ClientInitializeError::TransportError {
        error: transport, ..
    } = error
        && let Some(http) = transport
            .error
            .downcast_ref::<StreamableHttpError<reqwest::Error>>()
    {
        match http {
            StreamableHttpError::AuthRequired(_) => {
                return McpClientError::Unauthorized {
                    url: url.to_owned(),
                };
            }
            StreamableHttpError::InsufficientScope(_) => {
                return McpClientError::Forbidden {
                    url: url.to_owned(),
                };
            }
            _ => {}
        }
    }
    let error = error.to_string();
    let detail = error
        .rsplit_once("] error: ")
        .map_or(error.as_str(), |(_, rest)| rest)
        .trim_end_matches(", when send initialize request");
    McpClientError::Connect {
        url: url.to_owned(),
        detail: detail.to_owned(),
    }
}

/// An MCP `CallToolResult` (as JSON) as a tool result: its `structuredContent`, else its text
/// (parsed when it is JSON); `isError` makes it a failure with that text.
fn tool_result(result: Value) -> Result<Value, McpClientError> {
    let text: Vec<&str> = result
        .get("content")
        .and_then(Value::as_array)
        .map(|blocks| {
            blocks
                .iter()
                .filter_map(|b| b.get("text").and_then(Value::as_str))
                .collect()
        })
        .unwrap_or_default();
    let text = text.join("\n");
    if result.get("isError").and_then(Value::as_bool) == Some(true) {
        return Err(McpClientError::Failed(text));
    }
    if let Some(structured) = result.get("structuredContent") {
        return Ok(structured.clone());
    }
    Ok(serde_json::from_str(&text).unwrap_or(Value::String(text)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::transport::DynamicTransportError;
    use rmcp::transport::streamable_http_client::{AuthRequiredError, InsufficientScopeError};
    use serde_json::json;

    fn transport(error: StreamableHttpError<reqwest::Error>) -> ClientInitializeError {
        ClientInitializeError::TransportError {
            error: DynamicTransportError::from_parts(
                "streamable-http",
                std::any::TypeId::of::<()>(),
                Box::new(error),
            ),
            context: "send initialize request".into(),
        }
    }

    /// A remote server's 401 and 403 are told by rmcp's typed errors, whatever their text: a
    /// body that merely says "401" is not an auth failure.
    #[test]
    fn auth_failures_are_typed() {
        let url = "https://crm.example.com/mcp";
        let cases = [
            (
                transport(StreamableHttpError::AuthRequired(AuthRequiredError::new(
                    "Bearer realm=\"crm\"".into(),
                ))),
                McpClientError::Unauthorized { url: url.into() },
            ),
            (
                transport(StreamableHttpError::InsufficientScope(
                    InsufficientScopeError::new("Bearer scope=\"admin\"".into(), None),
                )),
                McpClientError::Forbidden { url: url.into() },
            ),
            (
                transport(StreamableHttpError::UnexpectedServerResponse(
                    "401 unauthorized, says the body".into(),
                )),
                McpClientError::Connect {
                    url: url.into(),
                    detail: "unexpected server response: 401 unauthorized, says the body".into(),
                },
            ),
            (
                ClientInitializeError::ConnectionClosed("reset".into()),
                McpClientError::Connect {
                    url: url.into(),
                    detail: "connection closed: reset".into(),
                },
            ),
        ];
        for (error, want) in cases {
            assert_eq!(http_failure(url, &error), want, "{error}");
        }
    }

    #[test]
    fn results_become_values() {
        let cases = [
            (
                json!({"content": [{"type": "text", "text": "{\"a\": 1}"}]}),
                Ok(json!({"a": 1})),
            ),
            (
                json!({"content": [{"type": "text", "text": "晴"}]}),
                Ok(json!("晴")),
            ),
            (
                json!({"content": [{"type": "text", "text": "x"}], "structuredContent": {"t": 3}}),
                Ok(json!({"t": 3})),
            ),
            (
                json!({"content": [{"type": "text", "text": "no such city"}], "isError": true}),
                Err(McpClientError::Failed("no such city".into())),
            ),
        ];
        for (input, want) in cases {
            assert_eq!(tool_result(input.clone()), want, "{input}");
        }
    }
}
