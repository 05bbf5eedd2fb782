//! The MCP client the MCP drivers speak through: an rmcp client whose person answers consent
//! and approval questions by elicitation (asked inline in the 2025-11-25 era; in the
//! 2026-07-28 era rmcp's `call_tool` fulfils each `input_required` round through the same
//! handler and retries with `inputResponses` and `requestState`), connected to a front over
//! some transport.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use quiver_mcp::front::{CONVERSATION_META, TURN_META};
use rmcp::model::{
    CallToolRequestParams, ClientCapabilities, ClientConfig, ElicitRequestParams, ElicitResult,
    ElicitationAction, Implementation, MetaObject, ProtocolVersion, RequestMetaObject,
};
use rmcp::service::{RequestContext, RoleClient, RunningService};
use rmcp::{ClientHandler, ClientLifecycleMode, ClientServiceExt, ErrorData, ServiceExt};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

/// Answers elicitations as the conversation says, and keeps every message.
#[derive(Clone, Default)]
pub struct Client {
    /// The protocol era it speaks: 2026-07-28, or (`None`) 2025-11-25.
    pub era: Option<ProtocolVersion>,
    /// Whether it refuses consent.
    pub consent_no: Arc<AtomicBool>,
    /// Whether it refuses approval.
    pub approval_no: Arc<AtomicBool>,
    /// Every message it was asked, in order.
    pub asked: Arc<Mutex<Vec<String>>>,
}

impl ClientHandler for Client {
    fn get_info(&self) -> ClientConfig {
        let capabilities = ClientCapabilities::builder().enable_elicitation().build();
        ClientConfig::new(capabilities, Implementation::new("model", "0"))
            .with_protocol_version(self.era.clone().unwrap_or(ProtocolVersion::V_2025_11_25))
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        let message = match &request {
            ElicitRequestParams::FormElicitationParams { message, .. } => message.clone(),
            _ => String::new(),
        };
        let consent = message.starts_with("Allow the assistant to use the package");
        self.asked.lock().unwrap().push(message);
        let no = if consent {
            self.consent_no.load(Ordering::SeqCst)
        } else {
            self.approval_no.load(Ordering::SeqCst)
        };
        let choice = match (no, consent) {
            (true, _) => "deny",
            (false, true) => "allow_conversation",
            (false, false) => "allow_once",
        };
        Ok(ElicitResult::new(ElicitationAction::Accept).with_content(json!({"decision": choice})))
    }
}

/// A client connected to a front over some transport, and the server behind it.
pub struct Connected {
    /// The client.
    pub client: RunningService<RoleClient, Client>,
    /// Whether the client passes back the conversation handle of each result in its next
    /// request's `_meta` (stateless HTTP, where no connection holds the conversation).
    pub passes_handle: bool,
    /// The last conversation handle a result carried.
    pub handle: Option<String>,
    /// Stops the server.
    pub shutdown: CancellationToken,
    /// The server's task.
    pub server: tokio::task::JoinHandle<()>,
}

impl Connected {
    /// Calls `name` with `arguments` (and the turn id in `_meta`, when given, and the
    /// conversation handle, when the client passes it); the JSON the model reads.
    pub async fn call(&mut self, name: &str, arguments: Value, turn: Option<String>) -> Value {
        let Value::Object(arguments) = arguments else {
            return Value::Null;
        };
        let mut params = CallToolRequestParams::new(name.to_owned()).with_arguments(arguments);
        let mut meta = serde_json::Map::new();
        if let Some(turn) = turn {
            meta.insert(TURN_META.into(), json!(turn));
        }
        if let Some(handle) = self.handle.as_ref().filter(|_| self.passes_handle) {
            meta.insert(CONVERSATION_META.into(), json!(handle));
        }
        if !meta.is_empty() {
            params.meta = Some(RequestMetaObject(MetaObject(meta)));
        }
        let result = self.client.call_tool(params).await.unwrap();
        if let Some(handle) = result
            .meta
            .as_ref()
            .and_then(|m| m.get(CONVERSATION_META))
            .and_then(Value::as_str)
        {
            self.handle = Some(handle.to_owned());
        }
        result
            .content
            .first()
            .and_then(|c| c.as_text())
            .and_then(|t| serde_json::from_str(&t.text).ok())
            .unwrap_or(Value::Null)
    }

    /// Ends the client's connection or session, then the server.
    pub async fn close(self) {
        let _ = self.client.cancel().await;
        self.shutdown.cancel();
        let _ = self.server.await;
    }
}

/// Starts `person` on `transport`: the 2026-07-28 client discovers the server (no session),
/// the 2025-11-25 one initializes.
pub async fn serve<T, E, A>(person: Client, transport: T) -> RunningService<RoleClient, Client>
where
    T: rmcp::transport::IntoTransport<RoleClient, E, A>,
    E: std::error::Error + Send + Sync + 'static,
{
    if person.era.is_none() {
        return person.serve(transport).await.unwrap();
    }
    let lifecycle = ClientLifecycleMode::Discover {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
    };
    person
        .serve_with_lifecycle(transport, lifecycle)
        .await
        .unwrap()
}
