//! [`SandboxExecutor`]: runs package tools in `quiver-sandbox` (a process per `command` call,
//! a long-lived process per package for `worker` tools, a long-lived MCP client per server for
//! `mcp` tools and for the config file's external MCP servers), and built-in tools in-process.

use std::collections::HashMap;
use std::num::NonZeroU64;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use quiver_mcp_client::config::{McpServer, McpServers};
use quiver_mcp_client::{McpClient, McpClientError, ToolsChanged};
use quiver_package::distribution::python_env::{COMPLETE, REQUIREMENTS, env_of_package};
use quiver_package::limits::ResourceLimits;
use quiver_package::tool::Run;
use quiver_package::{Diagnostic, Package};
use quiver_sandbox::worker::Worker;
use quiver_sandbox::{Access, Job, LimitRequest, Sandbox, SandboxConfig, SandboxError};
use serde_json::{Value, json};

use crate::executor::{BuiltinExecutor, ExecError, Execution, Executor};
use crate::mcp_servers::{self, Settings};

/// Runs package tools in Quiver's sandbox.
pub struct SandboxExecutor {
    sandbox: Sandbox,
    builtins: BuiltinExecutor,
    workers: Mutex<HashMap<String, Arc<Worker>>>,
    servers: McpConnections,
    external: Arc<McpServers>,
    tools_changed: Option<ToolsChanged>,
}

impl SandboxExecutor {
    /// An executor over a sandbox with `config`.
    pub fn new(config: SandboxConfig) -> Result<Self, ExecError> {
        Ok(Self {
            sandbox: Sandbox::new(config).map_err(map_error)?,
            builtins: BuiltinExecutor::new(),
            workers: Mutex::new(HashMap::new()),
            servers: McpConnections::default(),
            external: Arc::new(McpServers::default()),
            tools_changed: None,
        })
    }

    /// Calls the tools of the external MCP servers of the config file (`mcp_servers:`)
    /// through `servers`: a local one started in the sandbox with exactly its permissions, a
    /// remote one over Streamable HTTP.
    pub fn with_mcp_servers(mut self, servers: Arc<McpServers>) -> Self {
        self.external = servers;
        self
    }

    /// Tells `changed` when an external MCP server says its tool list changed, so the caller
    /// can build the catalog again (see [`SandboxExecutor::discover_mcp_servers`]).
    pub fn with_tools_changed(mut self, changed: ToolsChanged) -> Self {
        self.tools_changed = Some(changed);
        self
    }

    /// Runs the tools registered in `builtins` in-process instead.
    pub fn with_builtins(mut self, builtins: BuiltinExecutor) -> Self {
        self.builtins = builtins;
        self
    }

    /// The sandbox.
    pub fn sandbox(&self) -> &Sandbox {
        &self.sandbox
    }

    /// Discovers the config file's external MCP servers as packages (see
    /// [`mcp_servers::load`]), each with its package `settings`. The clients that listed the
    /// tools stay connected and answer this executor's calls, so a server is not started
    /// twice.
    pub fn discover_mcp_servers(&self, settings: &Settings) -> (Vec<Package>, Vec<Diagnostic>) {
        let state = &self.sandbox.config().state_dir;
        let connect = |server: &McpServer| {
            let root = server.root(state);
            self.servers.get_or_start(&external_key(server), || {
                server.connect(
                    &self.sandbox,
                    &root,
                    settings.get(server.id.as_str()),
                    self.tools_changed.clone(),
                )
            })
        };
        mcp_servers::load(&self.external, state, &connect)
    }

    /// The Python environment the package in `package_dir` runs in: an installed version
    /// with a `requirements.txt` has one, made by `quiver install`. When it is missing or
    /// unfinished the call fails: nothing is installed at call time, and the system's Python
    /// would lack what the package pins.
    fn python_env(&self, package_dir: &Path) -> Result<Option<PathBuf>, ExecError> {
        if !package_dir.join(REQUIREMENTS).is_file() {
            return Ok(None);
        }
        let real = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_owned());
        let state = real(&self.sandbox.config().state_dir);
        let Some(env) = env_of_package(&state, &real(package_dir)) else {
            // A project or user root: the package runs as its author left it.
            return Ok(None);
        };
        if env.join(COMPLETE).is_file() {
            return Ok(Some(env));
        }
        Err(ExecError::Unavailable(format!(
            "the package's Python environment `{}` is missing or unfinished, so its tools do not run (nothing is installed when a tool is called); run `quiver install` for the package again",
            env.display()
        )))
    }

    fn job(&self, execution: &Execution<'_>, command: &[String]) -> Result<Job, ExecError> {
        let p = execution.permissions;
        Ok(Job {
            package: execution.package.to_owned(),
            package_dir: execution.package_dir.to_owned(),
            command: command.to_vec(),
            command_dir: execution.tool_dir.to_owned(),
            access: Access {
                network: p.network.clone(),
                read: p.filesystem.read.iter().map(PathBuf::from).collect(),
                write: p.filesystem.write.iter().map(PathBuf::from).collect(),
                shell: p.shell,
                env: p.env.clone(),
                env_values: Default::default(),
            },
            settings: execution.settings.cloned().unwrap_or_default(),
            timeout: execution.timeout,
            limits: limit_request(&execution.limits),
            python_env: self.python_env(execution.package_dir)?,
        })
    }

    fn command(&self, execution: &Execution<'_>, command: &[String]) -> Result<Value, ExecError> {
        let job = self.job(execution, command)?;
        let input = if execution.script {
            Vec::new()
        } else {
            json!({"arguments": execution.arguments, "context": execution.context})
                .to_string()
                .into_bytes()
        };
        let started = |pgid: u32| {
            if let Some(started) = execution.started {
                (started.0)(pgid);
            }
        };
        let output = self
            .sandbox
            .run_watched(&job, &input, &started)
            .map_err(map_error)?;
        let stdout = String::from_utf8_lossy(&output.stdout);
        if execution.script {
            return Ok(json!({
                "exit_code": output.code,
                "stdout": stdout,
                "stderr": output.stderr_tail,
            }));
        }
        let parsed = serde_json::from_str::<Value>(stdout.trim());
        if output.code != 0 {
            let message = parsed
                .ok()
                .and_then(|v| v.get("error").cloned())
                .map(|e| e.as_str().map_or_else(|| e.to_string(), str::to_owned))
                .or_else(|| output.stderr_tail.lines().last().map(str::to_owned))
                .unwrap_or_default();
            return Err(ExecError::Failed(format!(
                "exit status {}: {message}",
                output.code
            )));
        }
        parsed.map_err(|e| {
            ExecError::Failed(format!(
                "the tool's stdout is not one JSON value ({e}); it printed: {}",
                stdout.chars().take(200).collect::<String>()
            ))
        })
    }

    fn worker(&self, execution: &Execution<'_>, command: &[String]) -> Result<Value, ExecError> {
        let job = self.job(execution, command)?;
        let key = format!(
            "{}\u{0}{:?}\u{0}{:?}\u{0}{:?}",
            execution.package, command, execution.permissions, execution.limits
        );
        let worker = {
            let mut workers = self
                .workers
                .lock()
                .map_err(|_| ExecError::Failed("the worker table is unusable".into()))?;
            match workers.get(&key) {
                Some(worker) if worker.is_alive() => worker.clone(),
                _ => {
                    let worker = Arc::new(Worker::start(&self.sandbox, &job).map_err(map_error)?);
                    workers.insert(key, worker.clone());
                    worker
                }
            }
        };
        let context = serde_json::to_value(execution.context).unwrap_or_default();
        let ask = |question: &str| execution.ask.and_then(|ask| (ask.0)(question));
        worker
            .call(
                execution.tool,
                execution.arguments,
                &context,
                execution.timeout,
                &ask,
            )
            .map_err(map_error)
    }
}

impl SandboxExecutor {
    /// The configured server behind a package, if the package is that server's (its folder
    /// is the server's folder under the state folder, so a package folder that merely shares
    /// the id never reaches the operator's server).
    fn external_server(&self, execution: &Execution<'_>) -> Option<&McpServer> {
        self.external
            .get(execution.package)
            .filter(|s| s.root(&self.sandbox.config().state_dir) == execution.package_dir)
    }

    fn external_call(
        &self,
        server: &McpServer,
        execution: &Execution<'_>,
        tool: &str,
    ) -> Result<Value, ExecError> {
        let client = self
            .servers
            .get_or_start(&external_key(server), || {
                server.connect(
                    &self.sandbox,
                    execution.package_dir,
                    execution.settings,
                    self.tools_changed.clone(),
                )
            })
            .map_err(map_client_error)?;
        call_server(&client, execution, tool)
    }

    fn mcp(&self, execution: &Execution<'_>, server: &str, tool: &str) -> Result<Value, ExecError> {
        if let Some(external) = self.external_server(execution) {
            return self.external_call(external, execution, tool);
        }
        let command = execution.mcp_command.ok_or_else(|| {
            ExecError::Failed(format!(
                "the package declares no MCP server `{server}` (`mcp_servers` in quiver.yaml)"
            ))
        })?;
        let mut job = self.job(execution, command)?;
        job.command_dir = execution.package_dir.to_owned();
        let key = format!(
            "{}\u{0}{server}\u{0}{:?}\u{0}{:?}",
            execution.package, execution.permissions, execution.limits
        );
        let client = self
            .servers
            .get_or_start(&key, || McpClient::start(&self.sandbox, &job, None))
            .map_err(map_client_error)?;
        call_server(&client, execution, tool)
    }
}

/// Where the client of a configured server is kept (no package's key contains a NUL first).
fn external_key(server: &McpServer) -> String {
    format!("\u{0}config\u{0}{}", server.id)
}

/// Running MCP clients by key. Starting one key's server waits only for that key, so
/// discovery starts several servers at once; a client that has died is started again.
#[derive(Default)]
struct McpConnections {
    slots: Mutex<HashMap<String, Arc<Slot>>>,
}

/// One key's client, if started; locked while it starts.
type Slot = Mutex<Option<Arc<McpClient>>>;

impl McpConnections {
    /// The running client under `key`, or a new one from `start` when there is none or it
    /// has died.
    fn get_or_start(
        &self,
        key: &str,
        start: impl FnOnce() -> Result<McpClient, McpClientError>,
    ) -> Result<Arc<McpClient>, McpClientError> {
        // The table only caches clients: one a panicking thread left behind is still usable.
        let slot = {
            let mut slots = self.slots.lock().unwrap_or_else(PoisonError::into_inner);
            Arc::clone(slots.entry(key.to_owned()).or_default())
        };
        let mut slot = slot.lock().unwrap_or_else(PoisonError::into_inner);
        match slot.as_ref() {
            Some(client) if client.is_alive() => Ok(Arc::clone(client)),
            _ => {
                let client = Arc::new(start()?);
                *slot = Some(Arc::clone(&client));
                Ok(client)
            }
        }
    }
}

/// Calls `tool` on an MCP server with the execution's arguments, context and timeout.
fn call_server(
    client: &McpClient,
    execution: &Execution<'_>,
    tool: &str,
) -> Result<Value, ExecError> {
    let context = serde_json::to_value(execution.context).unwrap_or_default();
    client
        .call(tool, execution.arguments, &context, execution.timeout)
        .map_err(map_client_error)
}

impl Executor for SandboxExecutor {
    fn execute(&self, execution: &Execution<'_>) -> Result<Value, ExecError> {
        if self
            .builtins
            .has(&format!("{}.{}", execution.package, execution.tool))
        {
            return self.builtins.execute(execution);
        }
        match execution.run {
            Run::Command(command) => self.command(execution, command),
            Run::Worker(command) => self.worker(execution, command),
            Run::Mcp { server, tool } => self.mcp(execution, server, tool),
        }
    }

    fn in_process(&self, execution: &Execution<'_>) -> bool {
        self.builtins.in_process(execution)
    }

    fn isolation_note(&self) -> Option<String> {
        matches!(self.sandbox.isolation(), Ok(false)).then(|| {
            "package code ran WITHOUT the sandbox: this machine cannot enforce it and the operator allowed unsandboxed execution (`runtime.allow_unsandboxed` or QUIVER_ALLOW_UNSANDBOXED=1)".to_owned()
        })
    }
}

/// Declared `limits:` (a tool's, or the operator's ceiling) as the sandbox's request.
pub fn limit_request(limits: &ResourceLimits) -> LimitRequest {
    LimitRequest {
        memory: limits.memory.map(|b| b.0),
        tasks: limits.processes.map(NonZeroU64::get),
        cpu_millicores: limits.cpu.map(|c| c.0),
        cpu_seconds: limits.cpu_seconds.map(NonZeroU64::get),
        tmp_bytes: limits.tmp.map(|b| b.0),
        data_bytes: limits.disk.map(|b| b.0),
    }
}

fn map_error(err: SandboxError) -> ExecError {
    match err {
        SandboxError::TimedOut(d) => ExecError::TimedOut(d),
        SandboxError::Unavailable(m) => ExecError::Unavailable(m),
        SandboxError::Denied(m) => ExecError::Denied(m),
        other => ExecError::Failed(other.to_string()),
    }
}

fn map_client_error(err: McpClientError) -> ExecError {
    match err {
        McpClientError::Sandbox(e) => map_error(e),
        McpClientError::TimedOut(d) => ExecError::TimedOut(d),
        other => ExecError::Failed(other.to_string()),
    }
}
