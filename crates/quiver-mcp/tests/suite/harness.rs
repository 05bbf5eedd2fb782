//! A front over the example packages, and an rmcp client that answers elicitation from a
//! script.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use quiver_catalog::{Catalog, CatalogOptions, Root, Scope};
use quiver_mcp::{Front, McpConfig};
use quiver_runtime::executor::BuiltinExecutor;
use quiver_runtime::{ApproverSet, Runtime, RuntimeConfig};
use quiver_store::SqliteStore;
use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientCapabilities, ClientConfig, CustomNotification,
    ElicitRequestParams, ElicitResult, ElicitationAction, ElicitationCapability, Implementation,
    ProtocolVersion,
};
use rmcp::service::{NotificationContext, RequestContext, RoleClient, RunningService};
use rmcp::{ClientHandler, ClientLifecycleMode, ClientServiceExt, ErrorData, ServiceExt};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

pub fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/packages")
}

/// An executor where `travel-advice.packing_advice` and `notes.add_note` really run.
pub fn executor() -> BuiltinExecutor {
    let mut executor = BuiltinExecutor::new();
    executor.register(
        "travel-advice.packing_advice",
        Arc::new(|args, _ctx| Ok(json!({"advice": format!("pack for {}", args["destination"].as_str().unwrap_or("?"))}))),
    );
    executor.register(
        "notes.add_note",
        Arc::new(|args, _ctx| Ok(json!({"saved": args["text"]}))),
    );
    executor
}

pub fn front_with(dir: &Path, config: McpConfig) -> Arc<Front> {
    front_over(&[examples()], dir, config)
}

/// A front over the packages of `roots`, its state in `dir`.
pub fn front_over(roots: &[PathBuf], dir: &Path, config: McpConfig) -> Arc<Front> {
    front_with_runtime(roots, dir, config, RuntimeConfig::default())
}

/// A front over the packages of `roots` and a runtime configured with `runtime_config`.
pub fn front_with_runtime(
    roots: &[PathBuf],
    dir: &Path,
    config: McpConfig,
    runtime_config: RuntimeConfig,
) -> Arc<Front> {
    front_with_executor(roots, dir, config, runtime_config, executor())
}

/// A front over the packages of `roots` whose tools `executor` runs.
pub fn front_with_executor(
    roots: &[PathBuf],
    dir: &Path,
    config: McpConfig,
    runtime_config: RuntimeConfig,
    executor: BuiltinExecutor,
) -> Arc<Front> {
    let roots: Vec<Root> = roots
        .iter()
        .map(|path| Root {
            path: path.clone(),
            scope: Scope::Project,
        })
        .collect();
    let catalog = Catalog::load(&roots, &CatalogOptions::default());
    let store = SqliteStore::open(dir.join("state.db")).unwrap();
    let runtime = Runtime::new(
        catalog,
        Arc::new(store),
        Arc::new(executor),
        ApproverSet::default(),
        runtime_config,
    );
    Arc::new(Front::new(Arc::new(runtime), config, vec![0x42; 32]))
}

/// The state database of a front made over `dir`, opened beside it as another process
/// would: tests look at state there, the runtime keeps its own store private.
pub fn state(dir: &Path) -> Arc<dyn quiver_store::Store> {
    Arc::new(SqliteStore::open(dir.join("state.db")).unwrap())
}

pub fn front(dir: &Path) -> Arc<Front> {
    front_with(dir, McpConfig::default())
}

/// A client that answers each elicitation with the next scripted answer.
#[derive(Clone, Default)]
pub struct Scripted {
    pub answers: Arc<Mutex<VecDeque<ElicitResult>>>,
    pub asked: Arc<Mutex<Vec<String>>>,
    pub version: Option<ProtocolVersion>,
    pub no_elicitation: bool,
    /// The elicitation modes declared, when not the default (a bare `elicitation`: forms).
    pub modes: Option<ElicitationCapability>,
    /// The URL-mode questions shown: (elicitation id, url).
    pub links: Arc<Mutex<Vec<(String, String)>>>,
    /// The elicitation ids `notifications/elicitation/complete` closed.
    pub completed: Arc<Mutex<Vec<String>>>,
}

impl Scripted {
    pub fn era(version: ProtocolVersion) -> Scripted {
        Scripted {
            version: Some(version),
            ..Scripted::default()
        }
    }

    pub fn answer(&self, action: &str, choice: Option<&str>) {
        let action = match action {
            "accept" => ElicitationAction::Accept,
            "decline" => ElicitationAction::Decline,
            _ => ElicitationAction::Cancel,
        };
        let mut result = ElicitResult::new(action);
        if let Some(choice) = choice {
            result = result.with_content(json!({"decision": choice}));
        }
        self.answers.lock().unwrap().push_back(result);
    }

    pub fn asked(&self) -> Vec<String> {
        self.asked.lock().unwrap().clone()
    }
}

impl ClientHandler for Scripted {
    fn get_info(&self) -> ClientConfig {
        let capabilities = if self.no_elicitation {
            ClientCapabilities::default()
        } else if let Some(modes) = &self.modes {
            let mut capabilities = ClientCapabilities::default();
            capabilities.elicitation = Some(modes.clone());
            capabilities
        } else {
            ClientCapabilities::builder().enable_elicitation().build()
        };
        ClientConfig::new(capabilities, Implementation::new("scripted", "0")).with_protocol_version(
            self.version
                .clone()
                .unwrap_or(ProtocolVersion::V_2025_11_25),
        )
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        match &request {
            ElicitRequestParams::FormElicitationParams { message, .. } => {
                self.asked.lock().unwrap().push(message.clone());
            }
            ElicitRequestParams::UrlElicitationParams {
                url,
                elicitation_id,
                ..
            } => {
                let link = (elicitation_id.clone(), url.clone());
                self.links.lock().unwrap().push(link);
            }
            _ => {}
        }
        Ok(self
            .answers
            .lock()
            .unwrap()
            .pop_front()
            .unwrap_or_else(|| ElicitResult::new(ElicitationAction::Cancel)))
    }

    async fn on_custom_notification(
        &self,
        notification: CustomNotification,
        _context: NotificationContext<RoleClient>,
    ) {
        if notification.method == "notifications/elicitation/complete" {
            let id = notification.params.unwrap()["elicitationId"]
                .as_str()
                .unwrap()
                .to_owned();
            self.completed.lock().unwrap().push(id);
        }
    }
}

pub type Client = RunningService<RoleClient, Scripted>;

/// Connects `client` to a stdio-style server over an in-memory pipe.
pub async fn connect(front: Arc<Front>, client: Scripted) -> Client {
    let (server_side, client_side) = tokio::io::duplex(1 << 20);
    tokio::spawn(async move {
        let _ = quiver_mcp::serve_stdio(
            front,
            tokio::io::split(server_side),
            CancellationToken::new(),
        )
        .await;
    });
    if client.version == Some(ProtocolVersion::V_2026_07_28) {
        let lifecycle = ClientLifecycleMode::Discover {
            preferred_versions: vec![ProtocolVersion::V_2026_07_28],
        };
        client
            .serve_with_lifecycle(client_side, lifecycle)
            .await
            .unwrap()
    } else {
        client.serve(client_side).await.unwrap()
    }
}

pub async fn call(client: &Client, name: &str, arguments: Value) -> CallToolResult {
    let Value::Object(arguments) = arguments else {
        panic!("arguments must be an object")
    };
    client
        .call_tool(CallToolRequestParams::new(name.to_owned()).with_arguments(arguments))
        .await
        .unwrap()
}

/// The JSON the model reads.
pub fn body(result: &CallToolResult) -> Value {
    let text = &result.content[0].as_text().unwrap().text;
    serde_json::from_str(text).unwrap()
}

pub fn handle(result: &CallToolResult) -> String {
    result.meta.as_ref().unwrap()["io.quiver/conversation"]
        .as_str()
        .unwrap()
        .to_owned()
}
