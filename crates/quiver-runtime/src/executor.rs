//! Running tools: the [`Executor`] interface, the call context every tool receives, built-in
//! tools that run in-process, and the refusal to run package code without a sandbox.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use quiver_package::common::Permissions;
use quiver_package::tool::Run;
use serde::Serialize;
use serde_json::Value;
use thiserror::Error;

/// The context a tool gets with its arguments (DESIGN.md §3 step 6).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CallContext {
    /// The call's id.
    pub call_id: String,
    /// The session's id.
    pub session_id: String,
    /// Where the conversation is: platform, scope (kind and id), channel.
    pub origin: Value,
    /// Who asked: user id, role, platform roles.
    pub principal: Value,
    /// Whether nobody is present.
    pub unattended: bool,
    /// The decisions the policy took for this call.
    pub policy: Value,
    /// Key under which a retry of the same call is the same call.
    pub idempotency_key: String,
}

/// One execution request.
#[derive(Debug, Clone)]
pub struct Execution<'a> {
    /// The package.
    pub package: &'a str,
    /// The tool's local name.
    pub tool: &'a str,
    /// How it runs.
    pub run: &'a Run,
    /// The package folder.
    pub package_dir: &'a std::path::Path,
    /// Validated arguments.
    pub arguments: &'a Value,
    /// The context.
    pub context: &'a CallContext,
    /// The timeout.
    pub timeout: Duration,
    /// The folder the tool's command runs from (its `tool.yaml`'s folder; a skill script's
    /// skill folder).
    pub tool_dir: &'a std::path::Path,
    /// The effective permissions the sandbox grants (the tool's `permission`, within the
    /// package ceiling; for a skill script, the package's `permissions`).
    pub permissions: &'a Permissions,
    /// The package's configured settings.
    pub settings: Option<&'a serde_json::Map<String, Value>>,
    /// Answers a tool's mid-call question (a `worker`'s `question`); `None` in unattended
    /// turns, where such questions are refused.
    pub ask: Option<Ask<'a>>,
    /// A skill script rather than a tool: its arguments are already on the command line, its
    /// stdout is text, and its result is `{exit_code, stdout, stderr}`.
    pub script: bool,
    /// For a `run: {mcp: server}` tool, the server's command (`mcp_servers` in `quiver.yaml`).
    pub mcp_command: Option<&'a [String]>,
    /// The resource limits the tool asks for (`limits:` in its `tool.yaml`), granted by the
    /// sandbox within the operator's ceiling.
    pub limits: quiver_package::limits::ResourceLimits,
    /// Told the id of the process group that runs a `command` tool (a process of its own per
    /// call) once it is started: a workflow step records it, so that a cancel from another
    /// process can stop it. Workers and MCP servers serve many calls and are not told.
    pub started: Option<Started<'a>>,
}

/// Told the process group of a call's own process ([`Execution::started`]).
#[derive(Clone, Copy)]
pub struct Started<'a>(pub &'a dyn Fn(u32));

impl std::fmt::Debug for Started<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Started")
    }
}

/// The person who answers a tool's question in this turn.
#[derive(Clone, Copy)]
pub struct Ask<'a>(pub &'a dyn Fn(&str) -> Option<String>);

impl std::fmt::Debug for Ask<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Ask")
    }
}

/// Why a tool did not produce a result.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ExecError {
    /// The tool ran and failed; the model may re-plan.
    #[error("the tool failed: {0}")]
    Failed(String),
    /// It ran past its timeout and was stopped.
    #[error("the tool timed out after {0:?}")]
    TimedOut(Duration),
    /// This machine cannot run it safely (no sandbox), and the operator did not allow
    /// unsandboxed execution.
    #[error("{0}")]
    Unavailable(String),
    /// The sandbox refused something outside the tool's permissions (a host not in its
    /// network allowlist); a policy refusal, final for the turn.
    #[error("{0}")]
    Denied(String),
}

/// Runs tools.
pub trait Executor: Send + Sync {
    /// Runs one call and returns its JSON result.
    fn execute(&self, execution: &Execution<'_>) -> Result<Value, ExecError>;

    /// A note for the audit record when package code runs without isolation (an operator
    /// allowed unsandboxed execution on a machine without the sandbox).
    fn isolation_note(&self) -> Option<String> {
        None
    }

    /// Whether `execution` runs in the runtime's own thread (a built-in tool, microseconds):
    /// then a crash during it is a crash of the runtime before the call's record, and no
    /// start is recorded first. Anything that runs elsewhere (a process, a worker, an MCP
    /// server) is recorded as started before it runs. The default is `false`.
    fn in_process(&self, _execution: &Execution<'_>) -> bool {
        false
    }
}

/// A built-in tool: a function of the arguments and context.
pub type BuiltinFn = Arc<dyn Fn(&Value, &CallContext) -> Result<Value, String> + Send + Sync>;

/// Runs registered built-in tools in-process, keyed `<package>.<tool>`; refuses every other
/// tool (package code runs only in the sandbox: [`crate::sandboxed::SandboxExecutor`]).
#[derive(Default, Clone)]
pub struct BuiltinExecutor {
    tools: BTreeMap<String, BuiltinFn>,
}

impl BuiltinExecutor {
    /// An executor with no built-in tools.
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers `f` as the implementation of `<package>.<tool>`.
    pub fn register(&mut self, qualified: &str, f: BuiltinFn) {
        self.tools.insert(qualified.to_owned(), f);
    }

    /// Whether `<package>.<tool>` is registered.
    pub fn has(&self, qualified: &str) -> bool {
        self.tools.contains_key(qualified)
    }
}

impl Executor for BuiltinExecutor {
    fn execute(&self, execution: &Execution<'_>) -> Result<Value, ExecError> {
        let key = format!("{}.{}", execution.package, execution.tool);
        match self.tools.get(&key) {
            Some(f) => f(execution.arguments, execution.context).map_err(ExecError::Failed),
            None => Err(ExecError::Unavailable(format!(
                "`{key}` cannot run: package tools run only in Quiver's sandbox (`SandboxExecutor`), and this executor runs built-in tools only; nothing was executed"
            ))),
        }
    }

    fn in_process(&self, execution: &Execution<'_>) -> bool {
        self.has(&format!("{}.{}", execution.package, execution.tool))
    }
}
