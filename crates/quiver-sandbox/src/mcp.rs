//! `mcp` tools: a package's MCP server runs over stdio inside the package's sandbox, and Quiver
//! talks to it as an MCP client (rmcp). Each call carries the call context in `_meta` under
//! [`CONTEXT_META_KEY`]. The only module of this crate that names rmcp types.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::time::Duration;

use rmcp::ServiceExt;
use rmcp::model::{CallToolRequestParams, RequestMetaObject};
use serde_json::Value;

use crate::SandboxError;
use crate::sandbox::{Job, Sandbox, Spawned};

/// The `_meta` key that carries Quiver's call context to the server.
pub const CONTEXT_META_KEY: &str = "quiver.dev/context";

/// How long the server may take to answer `initialize`.
const START_TIMEOUT: Duration = Duration::from_secs(20);

struct Request {
    tool: String,
    arguments: serde_json::Map<String, Value>,
    context: Value,
    reply: mpsc::Sender<Result<Value, SandboxError>>,
}

/// A running MCP server and the client connected to it.
pub struct McpClient {
    requests: tokio::sync::mpsc::UnboundedSender<Request>,
    spawned: Arc<Mutex<Spawned>>,
    alive: Arc<AtomicBool>,
}

impl McpClient {
    /// Starts `job` (the server's command) in the sandbox and initializes the session.
    pub fn start(sandbox: &Sandbox, job: &Job) -> Result<McpClient, SandboxError> {
        let mut spawned = sandbox.spawn(job)?;
        let (stdin, stdout) = match (spawned.stdin.take(), spawned.stdout.take()) {
            (Some(i), Some(o)) => (i, o),
            _ => return Err(SandboxError::Setup("the MCP server has no stdio".into())),
        };
        let spawned = Arc::new(Mutex::new(spawned));
        let alive = Arc::new(AtomicBool::new(true));
        let (requests, mut incoming) = tokio::sync::mpsc::unbounded_channel::<Request>();
        let (ready_tx, ready_rx) = mpsc::channel::<Result<(), String>>();
        let thread_alive = alive.clone();
        let package = job.package.clone();
        std::thread::Builder::new()
            .name(format!("quiver-mcp-{package}"))
            .spawn(move || {
                let runtime = match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(rt) => rt,
                    Err(e) => {
                        let _ = ready_tx.send(Err(e.to_string()));
                        return;
                    }
                };
                let session_alive = thread_alive.clone();
                runtime.block_on(async move {
                    let pipes = tokio::process::ChildStdout::from_std(stdout)
                        .and_then(|o| Ok((o, tokio::process::ChildStdin::from_std(stdin)?)));
                    let (reader, writer) = match pipes {
                        Ok(p) => p,
                        Err(e) => {
                            let _ = ready_tx.send(Err(e.to_string()));
                            return;
                        }
                    };
                    let client = match ().serve((reader, writer)).await {
                        Ok(client) => client,
                        Err(e) => {
                            let _ = ready_tx.send(Err(e.to_string()));
                            return;
                        }
                    };
                    let _ = ready_tx.send(Ok(()));
                    while let Some(request) = incoming.recv().await {
                        let peer = client.peer().clone();
                        let alive = session_alive.clone();
                        tokio::spawn(async move {
                            let mut meta = serde_json::Map::new();
                            meta.insert(CONTEXT_META_KEY.into(), request.context);
                            let mut params = CallToolRequestParams::new(request.tool);
                            params.arguments = Some(request.arguments);
                            params.meta = Some(RequestMetaObject::from(meta));
                            let result = match peer.call_tool(params).await {
                                Ok(result) => {
                                    tool_result(serde_json::to_value(result).unwrap_or_default())
                                }
                                Err(e) => {
                                    alive.store(false, Ordering::SeqCst);
                                    Err(SandboxError::Failed(format!("the MCP server failed: {e}")))
                                }
                            };
                            let _ = request.reply.send(result);
                        });
                    }
                    let _ = client.cancel().await;
                });
                thread_alive.store(false, Ordering::SeqCst);
            })
            .map_err(|e| SandboxError::Setup(format!("starting the MCP client: {e}")))?;
        let started = ready_rx.recv_timeout(START_TIMEOUT);
        let failure = match started {
            Ok(Ok(())) => None,
            Ok(Err(e)) => Some(e),
            Err(_) => Some("no answer to `initialize`".to_owned()),
        };
        if let Some(why) = failure {
            let mut spawned = spawned
                .lock()
                .map_err(|_| SandboxError::Setup(why.clone()))?;
            spawned.kill();
            spawned.settle_stderr();
            let tail = spawned.stderr();
            let setup = spawned.setup_error(crate::launcher::SETUP_FAILED);
            return Err(setup.unwrap_or_else(|| {
                SandboxError::Failed(format!(
                    "the MCP server did not start: {why}{}",
                    tail.lines()
                        .last()
                        .map(|l| format!(" ({l})"))
                        .unwrap_or_default()
                ))
            }));
        }
        Ok(McpClient {
            requests,
            spawned,
            alive,
        })
    }

    /// Whether the server still runs.
    pub fn is_alive(&self) -> bool {
        self.alive.load(Ordering::SeqCst)
            && self
                .spawned
                .lock()
                .is_ok_and(|mut s| matches!(s.child.try_wait(), Ok(None)))
    }

    /// Stops the server and its whole process group.
    pub fn stop(&self) {
        self.alive.store(false, Ordering::SeqCst);
        if let Ok(mut spawned) = self.spawned.lock() {
            spawned.kill();
        }
    }

    /// Calls `tool` with `arguments` (a JSON object), the call context in `_meta`.
    pub fn call(
        &self,
        tool: &str,
        arguments: &Value,
        context: &Value,
        timeout: Duration,
    ) -> Result<Value, SandboxError> {
        let arguments = match arguments {
            Value::Object(map) => map.clone(),
            Value::Null => serde_json::Map::new(),
            _ => {
                return Err(SandboxError::Failed(
                    "MCP tool arguments must be a JSON object".into(),
                ));
            }
        };
        let (reply, answer) = mpsc::channel();
        self.requests
            .send(Request {
                tool: tool.to_owned(),
                arguments,
                context: context.clone(),
                reply,
            })
            .map_err(|_| SandboxError::Failed("the MCP server is not running".into()))?;
        let result = match answer.recv_timeout(timeout) {
            Ok(result) => result,
            Err(_) => {
                self.stop();
                return Err(SandboxError::TimedOut(timeout));
            }
        };
        if let Some(denial) = self.spawned.lock().ok().and_then(|s| s.denial()) {
            return Err(SandboxError::Denied(denial));
        }
        result
    }
}

impl Drop for McpClient {
    fn drop(&mut self) {
        self.stop();
    }
}

/// An MCP `CallToolResult` (as JSON) as a tool result: its `structuredContent`, else its text
/// (parsed when it is JSON); `isError` makes it a failure with that text.
fn tool_result(result: Value) -> Result<Value, SandboxError> {
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
        return Err(SandboxError::Failed(text));
    }
    if let Some(structured) = result.get("structuredContent") {
        return Ok(structured.clone());
    }
    Ok(serde_json::from_str(&text).unwrap_or(Value::String(text)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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
                Err(SandboxError::Failed("no such city".into())),
            ),
        ];
        for (input, want) in cases {
            assert_eq!(tool_result(input.clone()), want, "{input}");
        }
    }
}
