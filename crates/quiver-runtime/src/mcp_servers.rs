//! External MCP servers the operator lists in the config file (`mcp_servers:`). Each server
//! becomes a package (id = the server's name) whose tools are the server's `tools/list`, so
//! every policy of the pipeline applies to them unchanged. A local server (`command`) runs in
//! Quiver's sandbox with exactly its declared permissions, for discovery and for calls; a
//! remote one (`url`) is reached over Streamable HTTP with a bearer token from the
//! environment.
//!
//! Discovery connects at every catalog build (through the caller's [`Connect`], so the
//! executor can keep the connection for the calls) and caches what it saw in
//! `<state>/mcp/<server>/tools.json`; a server that cannot be reached is loaded from that
//! cache (with a warning), or, never seen before, left out with an error diagnostic that names
//! the config file. See docs/mcp.md ("External MCP servers").

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use quiver_package::common::{Permissions, Seconds, WordList};
use quiver_package::manifest::{Manifest, McpServer as ManifestServer};
use quiver_package::names::{ItemName, PackageId};
use quiver_package::source::{MAX_FILE_BYTES, expand_home};
use quiver_package::tool::{Approval, Category, ToolScope, first_sentence, parse_tool};
use quiver_package::{Diagnostic, Package};
use quiver_sandbox::mcp::{McpClient, Remote, ToolsChanged};
use quiver_sandbox::{Access, Job, Sandbox, SandboxError};
use serde::Deserialize;
use serde_json::{Value, json};
use thiserror::Error;

/// The folder under the state folder that holds one folder per server (its package folder
/// and its cached tool list).
pub const CACHE_DIR: &str = "mcp";
/// The cached tool list in a server's folder.
pub const CACHE_FILE: &str = "tools.json";
/// Default timeout of a server's calls and of its discovery.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// The config file's `mcp_servers:` section as written: server name → server.
pub type McpServersSection = BTreeMap<String, ServerSpec>;

/// One server of the `mcp_servers:` section as written.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerSpec {
    /// A local server: the program and its arguments, run over stdio in the sandbox.
    pub command: Option<WordList>,
    /// A local server's environment: names passed through from Quiver's environment, or
    /// fixed values.
    pub env: Option<EnvSpec>,
    /// A local server's sandbox permissions (default: nothing).
    pub permissions: Option<Permissions>,
    /// A remote server's Streamable HTTP endpoint.
    pub url: Option<String>,
    /// The environment variable holding a remote server's bearer token.
    pub bearer_token_env: Option<String>,
    /// Further headers sent to a remote server.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// Display name of the package (default: the server's own title or name).
    pub name: Option<String>,
    /// The package's catalog line (default: the server's instructions, first sentence).
    pub description: Option<String>,
    /// Approval mode of every tool (default `on-risk` for a local server, `once` for a remote
    /// one).
    pub approval: Option<Approval>,
    /// Category of every tool, instead of the one read from its annotations.
    pub category: Option<Category>,
    /// Whether the tools are exposed (default `true`).
    pub expose: Option<bool>,
    /// `true` (every tool), `false`, or the server's tool names to offer every turn.
    pub always_loaded: Option<AlwaysLoadedSpec>,
    /// Timeout of each call and of discovery (default 30 s).
    pub timeout: Option<Seconds>,
}

/// `env:` of a local server.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(untagged)]
pub enum EnvSpec {
    /// Variables copied from Quiver's environment when set.
    Names(Vec<String>),
    /// Variables with fixed values.
    Values(BTreeMap<String, String>),
}

/// `always_loaded:` of a server.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(untagged)]
pub enum AlwaysLoadedSpec {
    /// Every tool, or none.
    All(bool),
    /// These tools (names as the server lists them).
    Tools(Vec<String>),
}

/// Why the `mcp_servers:` section cannot work.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("`mcp_servers.{server}`: {why}")]
pub struct McpServersError {
    /// The server's name as written.
    pub server: String,
    /// What is wrong.
    pub why: String,
}

/// The configured servers, checked.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct McpServers {
    /// The config file they come from (named by their diagnostics).
    pub file: PathBuf,
    /// The servers, by name.
    pub servers: Vec<McpServer>,
}

/// One configured server, checked.
#[derive(Debug, Clone, PartialEq)]
pub struct McpServer {
    /// Its name: the package id.
    pub id: PackageId,
    /// Display name, when configured.
    pub name: Option<String>,
    /// Catalog line, when configured.
    pub description: Option<String>,
    /// How it is reached.
    pub transport: Transport,
    /// Approval mode of every tool.
    pub approval: Option<Approval>,
    /// Category of every tool, instead of its annotations'.
    pub category: Option<Category>,
    /// Whether its tools are exposed.
    pub expose: bool,
    /// Which tools are offered every turn.
    pub always_loaded: AlwaysLoadedSpec,
    /// Timeout of calls and discovery.
    pub timeout: Duration,
}

/// How a server is reached.
#[derive(Debug, Clone, PartialEq)]
pub enum Transport {
    /// A process over stdio in the sandbox.
    Local {
        /// Program and arguments.
        command: Vec<String>,
        /// Its sandbox permissions (`env` names included).
        permissions: Permissions,
        /// Fixed environment values.
        env_values: BTreeMap<String, String>,
    },
    /// Streamable HTTP.
    Remote {
        /// The endpoint.
        url: String,
        /// The variable holding the bearer token.
        bearer_token_env: Option<String>,
        /// Further headers.
        headers: BTreeMap<String, String>,
    },
}

fn is_env_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn is_header_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c))
}

impl McpServers {
    /// Checks the section read from `file`: every impossible value is an error naming the
    /// server.
    pub fn from_section(
        section: McpServersSection,
        file: &Path,
    ) -> Result<McpServers, McpServersError> {
        let servers = section
            .into_iter()
            .map(|(name, spec)| McpServer::check(&name, spec))
            .collect::<Result<_, _>>()?;
        Ok(McpServers {
            file: file.to_owned(),
            servers,
        })
    }

    /// Whether no server is configured.
    pub fn is_empty(&self) -> bool {
        self.servers.is_empty()
    }

    /// The server named `id`.
    pub fn get(&self, id: &str) -> Option<&McpServer> {
        self.servers.iter().find(|s| s.id.as_str() == id)
    }
}

impl McpServer {
    fn check(name: &str, spec: ServerSpec) -> Result<McpServer, McpServersError> {
        let fail = |why: String| McpServersError {
            server: name.to_owned(),
            why,
        };
        let id: PackageId = name.parse().map_err(|e| {
            fail(format!(
                "`{name}` cannot be a server name ({e}); the name becomes the package id, so it must match `[a-z0-9][a-z0-9_-]{{0,63}}`"
            ))
        })?;
        let timeout = match spec.timeout {
            Some(Seconds(d)) if d.is_zero() => {
                return Err(fail("`timeout` must be more than 0".into()));
            }
            Some(Seconds(d)) => d,
            None => DEFAULT_TIMEOUT,
        };
        let transport = match (spec.command, spec.url) {
            (Some(_), Some(_)) => {
                return Err(fail(
                    "has both `command` (a local server) and `url` (a remote one); keep one".into(),
                ));
            }
            (None, None) => {
                return Err(fail(
                    "needs `command: [program, args...]` (a local server) or `url: https://...` (a remote one)".into(),
                ));
            }
            (Some(WordList(command)), None) => {
                if command.is_empty() {
                    return Err(fail("`command` is empty".into()));
                }
                if spec.bearer_token_env.is_some() || !spec.headers.is_empty() {
                    return Err(fail(
                        "`bearer_token_env` and `headers` apply to remote servers (`url`); a local server gets `env`".into(),
                    ));
                }
                let mut permissions = spec.permissions.unwrap_or_default();
                let mut env_values = BTreeMap::new();
                match spec.env {
                    Some(EnvSpec::Names(names)) => permissions.env.extend(names),
                    Some(EnvSpec::Values(values)) => env_values = values,
                    None => {}
                }
                for var in permissions.env.iter().chain(env_values.keys()) {
                    if !is_env_name(var) {
                        return Err(fail(format!("`{var}` is not an environment variable name")));
                    }
                }
                for path in permissions
                    .filesystem
                    .read
                    .iter_mut()
                    .chain(permissions.filesystem.write.iter_mut())
                {
                    *path = expand_home(path).to_string_lossy().into_owned();
                    if !Path::new(path).is_absolute() {
                        return Err(fail(format!(
                            "the filesystem path `{path}` must be absolute (or start with `~/`)"
                        )));
                    }
                }
                if permissions.network.iter().any(|h| h.trim().is_empty()) {
                    return Err(fail("an empty host in `permissions.network`".into()));
                }
                Transport::Local {
                    command: command
                        .iter()
                        .map(|w| expand_home(w).to_string_lossy().into_owned())
                        .collect(),
                    permissions,
                    env_values,
                }
            }
            (None, Some(url)) => {
                if spec.env.is_some() || spec.permissions.is_some() {
                    return Err(fail(
                        "`env` and `permissions` apply to local servers, which run in Quiver's sandbox; a remote server (`url`) runs elsewhere".into(),
                    ));
                }
                let rest = url
                    .strip_prefix("https://")
                    .or_else(|| url.strip_prefix("http://"));
                if rest.is_none_or(|r| r.is_empty() || r.starts_with('/')) {
                    return Err(fail(format!(
                        "`url` must be an `http://` or `https://` address with a host, not `{url}`"
                    )));
                }
                if let Some(var) = &spec.bearer_token_env
                    && !is_env_name(var)
                {
                    return Err(fail(format!(
                        "`bearer_token_env` must name an environment variable, not `{var}`"
                    )));
                }
                for header in spec.headers.keys() {
                    if !is_header_name(header) {
                        return Err(fail(format!("`{header}` is not an HTTP header name")));
                    }
                    if header.eq_ignore_ascii_case("authorization")
                        && spec.bearer_token_env.is_some()
                    {
                        return Err(fail(
                            "an `Authorization` header and `bearer_token_env` both set the credentials; keep one".into(),
                        ));
                    }
                }
                Transport::Remote {
                    url,
                    bearer_token_env: spec.bearer_token_env,
                    headers: spec.headers,
                }
            }
        };
        Ok(McpServer {
            id,
            name: spec.name,
            description: spec.description,
            transport,
            approval: spec.approval,
            category: spec.category,
            expose: spec.expose.unwrap_or(true),
            always_loaded: spec.always_loaded.unwrap_or(AlwaysLoadedSpec::All(false)),
            timeout,
        })
    }

    /// The server's folder under the state folder: its package folder (the sandbox's package
    /// folder for a local server) and the home of its cached tool list.
    pub fn root(&self, state_dir: &Path) -> PathBuf {
        state_dir.join(CACHE_DIR).join(self.id.as_str())
    }

    /// The approval mode of its tools when the config sets none: `on-risk` for a local
    /// server, whose permissions the sandbox enforces; `once` for a remote one, since nothing
    /// Quiver enforces limits what its tools do (its `readOnlyHint` is only its word), so each
    /// tool is confirmed at its first call in a conversation.
    pub fn default_approval(&self) -> Approval {
        if self.is_local() {
            Approval::OnRisk
        } else {
            Approval::Once
        }
    }

    /// Whether this is a local server.
    pub fn is_local(&self) -> bool {
        matches!(self.transport, Transport::Local { .. })
    }

    /// The sandbox permissions of a local server (nothing for a remote one).
    pub fn permissions(&self) -> Permissions {
        match &self.transport {
            Transport::Local { permissions, .. } => permissions.clone(),
            Transport::Remote { .. } => Permissions::default(),
        }
    }

    /// What identifies how the server is reached; a cached list is used only for the same.
    fn source(&self) -> String {
        match &self.transport {
            Transport::Local { command, .. } => format!("command {command:?}"),
            Transport::Remote { url, .. } => format!("url {url}"),
        }
    }

    /// Connects to the server: a local one is started in `sandbox` with exactly its
    /// permissions (its package folder `root`, its data folder, `settings` as for any
    /// package); a remote one gets the bearer token from its environment variable. The same
    /// for discovery and for calls; `changed` hears when the server's tool list changes.
    pub fn connect(
        &self,
        sandbox: &Sandbox,
        root: &Path,
        settings: Option<&serde_json::Map<String, Value>>,
        changed: Option<ToolsChanged>,
    ) -> Result<McpClient, SandboxError> {
        match &self.transport {
            Transport::Local {
                command,
                permissions,
                env_values,
            } => {
                std::fs::create_dir_all(root).map_err(|e| {
                    SandboxError::Setup(format!("creating `{}`: {e}", root.display()))
                })?;
                let job = Job {
                    package: self.id.to_string(),
                    package_dir: root.to_owned(),
                    command: command.clone(),
                    command_dir: root.to_owned(),
                    access: Access {
                        network: permissions.network.clone(),
                        read: permissions
                            .filesystem
                            .read
                            .iter()
                            .map(PathBuf::from)
                            .collect(),
                        write: permissions
                            .filesystem
                            .write
                            .iter()
                            .map(PathBuf::from)
                            .collect(),
                        shell: permissions.shell,
                        env: permissions.env.clone(),
                        env_values: env_values.clone(),
                    },
                    settings: settings.cloned().unwrap_or_default(),
                    timeout: self.timeout,
                };
                McpClient::start(sandbox, &job, changed)
            }
            Transport::Remote {
                url,
                bearer_token_env,
                headers,
            } => {
                let bearer_token = match bearer_token_env {
                    Some(var) => Some(std::env::var(var).ok().filter(|t| !t.is_empty()).ok_or_else(|| {
                        SandboxError::Failed(format!(
                            "the environment variable `{var}` named by `bearer_token_env` is not set, so there is no bearer token for {url}"
                        ))
                    })?),
                    None => None,
                };
                let remote = Remote {
                    url: url.clone(),
                    bearer_token,
                    headers: headers
                        .iter()
                        .map(|(k, v)| (k.clone(), v.clone()))
                        .collect(),
                };
                McpClient::connect(self.id.as_str(), &remote, self.timeout, changed)
            }
        }
    }
}

/// The category of an MCP tool from its annotations: `readOnlyHint: true` is `perception`;
/// anything else (`destructiveHint`, no hint, no annotations) is `action`.
pub fn category_from_annotations(annotations: Option<&Value>) -> Category {
    match annotations
        .and_then(|a| a.get("readOnlyHint"))
        .and_then(Value::as_bool)
    {
        Some(true) => Category::Perception,
        _ => Category::Action,
    }
}

/// A valid local tool name for an MCP tool name: kept when valid; otherwise camelCase becomes
/// snake_case (`removeMember` → `remove_member`, so the dangerous gate still matches it),
/// other characters become `_`, and what is still invalid gets a derived name.
pub fn local_tool_name(name: &str) -> ItemName {
    if let Ok(valid) = name.parse::<ItemName>() {
        return valid;
    }
    let mut out = String::new();
    let mut previous: Option<char> = None;
    for c in name.chars() {
        if c.is_ascii_uppercase() {
            if previous.is_some_and(|p| p.is_ascii_lowercase() || p.is_ascii_digit()) {
                out.push('_');
            }
            out.push(c.to_ascii_lowercase());
        } else if c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_' {
            out.push(c);
        } else if !out.ends_with('_') {
            out.push('_');
        }
        previous = Some(c);
    }
    let out = out.trim_matches(|c| c == '_' || c == '-');
    out.parse()
        .unwrap_or_else(|_| ItemName::derive(&name.to_lowercase()))
}

/// What discovery saw: the server's `initialize` result and its tools.
#[derive(Debug, Clone, PartialEq)]
pub struct Listing {
    /// `serverInfo`, `instructions`, ... as the server answered `initialize`.
    pub server: Value,
    /// Each tool as JSON (`name`, `title`, `description`, `inputSchema`, `outputSchema`,
    /// `annotations`).
    pub tools: Vec<Value>,
}

/// Connects to `server` and lists its tools.
fn discover(server: &McpServer, connect: &Connect<'_>) -> Result<Listing, String> {
    let client = connect(server).map_err(|e| e.to_string())?;
    let tools = client.list_tools(server.timeout).map_err(|e| {
        // A server that cannot list its tools is not kept for calls.
        client.stop();
        match e {
            SandboxError::TimedOut(d) => format!("no answer to `tools/list` within {d:?}"),
            other => other.to_string(),
        }
    })?;
    Ok(Listing {
        server: client.server_info().clone(),
        tools,
    })
}

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

fn write_cache(server: &McpServer, root: &Path, listing: &Listing) -> std::io::Result<()> {
    std::fs::create_dir_all(root)?;
    let text = serde_json::to_string_pretty(&json!({
        "source": server.source(),
        "seen": now(),
        "server": listing.server,
        "tools": listing.tools,
    }))?;
    let partial = root.join(format!("{CACHE_FILE}.partial"));
    std::fs::write(&partial, text)?;
    std::fs::rename(partial, root.join(CACHE_FILE))
}

/// The cached listing and when it was seen (unix seconds), if the cache is for this server.
fn read_cache(server: &McpServer, root: &Path) -> Option<(Listing, u64)> {
    let text = std::fs::read_to_string(root.join(CACHE_FILE)).ok()?;
    let value: Value = serde_json::from_str(&text).ok()?;
    if value.get("source").and_then(Value::as_str) != Some(server.source().as_str()) {
        return None;
    }
    let tools = value.get("tools")?.as_array()?.clone();
    Some((
        Listing {
            server: value.get("server").cloned().unwrap_or_default(),
            tools,
        },
        value.get("seen").and_then(Value::as_u64).unwrap_or(0),
    ))
}

/// Settings by package id (the config file's `runtime.settings`).
pub type Settings = std::collections::HashMap<String, serde_json::Map<String, Value>>;

/// How discovery reaches a server: a running client, started (a local server in the sandbox
/// exactly as its calls start it) or reused, so the connection can outlive the listing and
/// answer the calls that follow.
pub type Connect<'a> = dyn Fn(&McpServer) -> Result<Arc<McpClient>, SandboxError> + Sync + 'a;

/// Loads every configured server as a package: discovered now (in parallel, each reached by
/// `connect`), else from its cache under `state_dir`. Returns the packages and every
/// diagnostic, each naming the config file.
pub fn load(
    servers: &McpServers,
    state_dir: &Path,
    connect: &Connect<'_>,
) -> (Vec<Package>, Vec<Diagnostic>) {
    let results: Vec<(Option<Package>, Vec<Diagnostic>)> = std::thread::scope(|scope| {
        let handles: Vec<_> = servers
            .servers
            .iter()
            .map(|server| scope.spawn(move || load_one(server, &servers.file, state_dir, connect)))
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join().unwrap_or_else(|_| {
                    (
                        None,
                        vec![Diagnostic::error(
                            "mcp-server-unreachable",
                            &servers.file,
                            "discovering an MCP server failed unexpectedly",
                        )],
                    )
                })
            })
            .collect()
    });
    let mut packages = Vec::new();
    let mut diagnostics = Vec::new();
    for (package, diags) in results {
        packages.extend(package);
        diagnostics.extend(diags);
    }
    (packages, diagnostics)
}

fn load_one(
    server: &McpServer,
    file: &Path,
    state: &Path,
    connect: &Connect<'_>,
) -> (Option<Package>, Vec<Diagnostic>) {
    let root = server.root(state);
    let id = server.id.as_str();
    let mut diags = Vec::new();
    let listing = match discover(server, connect) {
        Ok(listing) => {
            if let Err(e) = write_cache(server, &root, &listing) {
                tracing::warn!(server = id, "cannot cache the tool list: {e}");
            }
            listing
        }
        Err(why) => match read_cache(server, &root) {
            Some((listing, seen)) => {
                diags.push(
                    Diagnostic::warning(
                        "mcp-server-cached",
                        file,
                        format!(
                            "MCP server `{id}` could not list its tools ({why}); its tools are the list it gave {} ago, and calling them will fail until it answers again",
                            age(now().saturating_sub(seen))
                        ),
                    )
                    .with_help("start the server or fix its entry in `mcp_servers`"),
                );
                listing
            }
            None => {
                diags.push(
                    Diagnostic::error(
                        "mcp-server-unreachable",
                        file,
                        format!("MCP server `{id}` could not list its tools: {why}"),
                    )
                    .with_help(
                        "check its entry in `mcp_servers` (command, permissions, url, token); the other packages load without it",
                    ),
                );
                return (None, diags);
            }
        },
    };
    let (package, more) = package_from_listing(server, file, &root, &listing);
    diags.extend(more);
    (Some(package), diags)
}

fn age(seconds: u64) -> String {
    match seconds {
        s if s < 120 => format!("{s} s"),
        s if s < 7200 => format!("{} min", s / 60),
        s if s < 172_800 => format!("{} h", s / 3600),
        s => format!("{} days", s / 86400),
    }
}

/// The most tools one server's package holds (a hostile or broken server may list any
/// number); the rest are left out with a diagnostic.
pub const MAX_SERVER_TOOLS: usize = 1000;

/// Builds the package of `server` from what it listed. Each tool goes through the same
/// parser and checks as a `tool.yaml` (name, description, schemas, run); a tool that fails
/// them is left out with a diagnostic naming the config file.
pub fn package_from_listing(
    server: &McpServer,
    file: &Path,
    root: &Path,
    listing: &Listing,
) -> (Package, Vec<Diagnostic>) {
    let id = server.id.as_str();
    let mut diags = Vec::new();
    let mut tools = Vec::new();
    let mut taken: BTreeMap<String, String> = BTreeMap::new();
    let always: BTreeSet<&str> = match &server.always_loaded {
        AlwaysLoadedSpec::Tools(names) => names.iter().map(String::as_str).collect(),
        AlwaysLoadedSpec::All(_) => BTreeSet::new(),
    };
    let bad = |message: String| {
        Diagnostic::error("mcp-server-bad-tool", file, message)
            .with_help("the server's tool is left out; the rest of the server's tools load")
    };
    if listing.tools.len() > MAX_SERVER_TOOLS {
        diags.push(bad(format!(
            "MCP server `{id}` listed {} tools; only the first {MAX_SERVER_TOOLS} load",
            listing.tools.len()
        )));
    }
    for listed in listing.tools.iter().take(MAX_SERVER_TOOLS) {
        let Some(name) = listed.get("name").and_then(Value::as_str) else {
            diags.push(bad(format!(
                "MCP server `{id}` listed a tool without a name"
            )));
            continue;
        };
        let local = local_tool_name(name);
        if let Some(first) = taken.get(local.as_str()) {
            diags.push(bad(format!(
                "MCP server `{id}`: the tools `{first}` and `{name}` both become `{id}.{local}`"
            )));
            continue;
        }
        taken.insert(local.to_string(), name.to_owned());
        let annotations = listed.get("annotations");
        let title = listed
            .get("title")
            .or_else(|| annotations.and_then(|a| a.get("title")))
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|t| !t.is_empty());
        let text = listed
            .get("description")
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|t| !t.is_empty());
        let description = match (title, text) {
            (Some(title), Some(text)) => json!({"summary": title, "when_to_use": text}),
            (Some(one), None) | (None, Some(one)) => json!({"summary": one}),
            (None, None) => json!({"summary": format!("`{name}` of the MCP server `{id}`.")}),
        };
        let category = server
            .category
            .unwrap_or_else(|| category_from_annotations(annotations));
        let always_loaded = match &server.always_loaded {
            AlwaysLoadedSpec::All(all) => *all,
            AlwaysLoadedSpec::Tools(_) => always.contains(name),
        };
        let mut definition = json!({
            "name": local.as_str(),
            "description": description,
            "category": category,
            "input": listed.get("inputSchema").cloned().unwrap_or(json!({"type": "object"})),
            "permission": server.permissions(),
            "timeout": server.timeout.as_secs_f64(),
            "approval": server.approval.unwrap_or_else(|| server.default_approval()),
            "expose": server.expose,
            "always_loaded": always_loaded && server.expose,
            "idempotent": annotations
                .and_then(|a| a.get("idempotentHint"))
                .and_then(Value::as_bool)
                .unwrap_or(false),
            "run": {"mcp": id, "tool": name},
        });
        if let Some(output) = listed.get("outputSchema").filter(|o| !o.is_null()) {
            definition["output"] = output.clone();
        }
        // JSON is YAML: the definition goes through the `tool.yaml` parser unchanged, and
        // within the size a `tool.yaml` file may have.
        let text = definition.to_string();
        if text.len() as u64 > MAX_FILE_BYTES {
            diags.push(bad(format!(
                "MCP server `{id}`: the definition of `{name}` is {} bytes, more than the {MAX_FILE_BYTES} a tool may have",
                text.len()
            )));
            continue;
        }
        let (tool, found) = parse_tool(&text, file, local.as_str(), ToolScope::Package);
        for mut d in found {
            d.line = None;
            d.column = None;
            d.message = format!("MCP server `{id}`, tool `{name}`: {}", d.message);
            diags.push(d);
        }
        tools.extend(tool);
    }
    let info = listing.server.get("serverInfo");
    let info_text = |key: &str| {
        info.and_then(|i| i.get(key))
            .and_then(Value::as_str)
            .filter(|s| !s.trim().is_empty())
            .map(str::to_owned)
    };
    let name = server
        .name
        .clone()
        .or_else(|| info_text("title"))
        .unwrap_or_else(|| id.to_owned());
    let description = server.description.clone().unwrap_or_else(|| {
        listing
            .server
            .get("instructions")
            .and_then(Value::as_str)
            .map(first_sentence)
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| format!("Tools of the MCP server `{id}`"))
    });
    let version = info_text("version").and_then(|v| semver::Version::parse(&v).ok());
    let mut mcp_servers = BTreeMap::new();
    if let Transport::Local { command, .. } = &server.transport {
        mcp_servers.insert(
            id.to_owned(),
            ManifestServer {
                command: command.clone(),
            },
        );
    }
    let manifest = Manifest {
        id: Some(server.id.clone()),
        name: Some(name.clone()),
        version: version.clone(),
        description: Some(description.clone()),
        permissions: server.permissions(),
        mcp_servers,
        ..Manifest::default()
    };
    let package = Package {
        id: server.id.clone(),
        name,
        version,
        description,
        root: root.to_owned(),
        manifest,
        has_manifest: false,
        skill: None,
        skills: Vec::new(),
        tools,
        agents: Vec::new(),
        workflows: Vec::new(),
        prompts: Vec::new(),
        agents_md: None,
        requirements: Vec::new(),
        pages: None,
        readme: None,
    };
    (package, diags)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn annotations_map_to_categories() {
        let cases = [
            (None, Category::Action),
            (Some(json!({})), Category::Action),
            (Some(json!({"readOnlyHint": true})), Category::Perception),
            (Some(json!({"readOnlyHint": false})), Category::Action),
            (
                Some(json!({"readOnlyHint": true, "destructiveHint": false})),
                Category::Perception,
            ),
            (Some(json!({"destructiveHint": true})), Category::Action),
            (Some(json!({"destructiveHint": false})), Category::Action),
            (Some(json!({"readOnlyHint": "yes"})), Category::Action),
            (Some(json!({"title": "Read"})), Category::Action),
        ];
        for (annotations, want) in cases {
            assert_eq!(
                category_from_annotations(annotations.as_ref()),
                want,
                "{annotations:?}"
            );
        }
    }

    #[test]
    fn tool_names_become_valid_local_names() {
        let cases = [
            ("read_file", "read_file"),
            ("remove-member", "remove-member"),
            ("removeMember", "remove_member"),
            ("getHTTPStatus", "get_httpstatus"),
            ("files.read", "files_read"),
            ("Search Docs", "search_docs"),
        ];
        for (name, want) in cases {
            assert_eq!(local_tool_name(name).as_str(), want, "{name}");
        }
        assert!(local_tool_name("天气").as_str().starts_with("item-"));
    }

    fn section(yaml: &str) -> Result<McpServers, String> {
        let section: McpServersSection = quiver_package::yaml::parse(yaml, Path::new("c.yaml"), 1)
            .map_err(|e| format!("parse: {e}"))?;
        McpServers::from_section(section, Path::new("/etc/quiver.yaml")).map_err(|e| e.to_string())
    }

    #[test]
    fn the_section_is_checked() {
        let ok = section(
            "files:\n  command: [python3, /opt/files/server.py]\n  env: [FILES_TOKEN]\n  permissions: {filesystem: {read: [/srv/docs]}}\n  approval: always\n  always_loaded: [read_file]\n  timeout: 10s\ncrm:\n  url: https://crm.example.com/mcp\n  bearer_token_env: CRM_TOKEN\n  headers: {X-Team: bots}\n  category: perception\n  expose: false\n",
        )
        .unwrap();
        let files = ok.get("files").unwrap();
        assert_eq!(files.approval, Some(Approval::Always));
        assert_eq!(files.timeout, Duration::from_secs(10));
        assert_eq!(files.permissions().env, ["FILES_TOKEN"]);
        assert_eq!(files.permissions().filesystem.read, ["/srv/docs"]);
        let crm = ok.get("crm").unwrap();
        assert!(!crm.is_local() && !crm.expose);
        assert_eq!(crm.category, Some(Category::Perception));
        assert_eq!(crm.timeout, DEFAULT_TIMEOUT);
        let values = section("x:\n  command: srv --stdio\n  env: {MODE: test}\n").unwrap();
        assert!(matches!(
            &values.get("x").unwrap().transport,
            Transport::Local { command, env_values, .. }
                if command == &["srv", "--stdio"] && env_values["MODE"] == "test"
        ));

        let refused = [
            ("Files:\n  command: [srv]\n", "cannot be a server name"),
            (
                "a:\n  command: [srv]\n  url: https://x.example\n",
                "keep one",
            ),
            ("a:\n  name: A\n", "needs `command"),
            ("a:\n  command: []\n", "`command` is empty"),
            ("a:\n  url: ftp://x.example\n", "`url` must be"),
            ("a:\n  url: https://\n", "`url` must be"),
            (
                "a:\n  url: https://x.example\n  permissions: {network: ['*']}\n",
                "apply to local servers",
            ),
            (
                "a:\n  command: [srv]\n  bearer_token_env: TOKEN\n",
                "apply to remote servers",
            ),
            (
                "a:\n  url: https://x.example\n  bearer_token_env: my-token\n",
                "must name an environment variable",
            ),
            (
                "a:\n  url: https://x.example\n  bearer_token_env: T\n  headers: {Authorization: x}\n",
                "keep one",
            ),
            (
                "a:\n  url: https://x.example\n  headers: {'bad header': x}\n",
                "not an HTTP header name",
            ),
            ("a:\n  command: [srv]\n  timeout: 0\n", "more than 0"),
            (
                "a:\n  command: [srv]\n  permissions: {filesystem: {read: [docs]}}\n",
                "must be absolute",
            ),
            (
                "a:\n  command: [srv]\n  env: [1X]\n",
                "not an environment variable",
            ),
            ("a:\n  command: [srv]\n  comand: [x]\n", "parse: "),
            ("a:\n  command: [srv]\n  approval: sometimes\n", "parse: "),
            (
                "a:\n  command: [srv]\n  permissions: {netwrok: [x]}\n",
                "parse: ",
            ),
        ];
        for (yaml, want) in refused {
            let got = section(yaml);
            assert!(
                matches!(&got, Err(e) if e.contains(want)),
                "{yaml}: {got:?}"
            );
        }
    }

    #[test]
    fn listed_tools_become_package_tools() {
        let servers =
            section("crm:\n  url: https://crm.example.com/mcp\n  always_loaded: [find_member]\n")
                .unwrap();
        let server = servers.get("crm").unwrap();
        let listing = Listing {
            server: json!({"serverInfo": {"name": "crm", "title": "CRM", "version": "1.2.0"}, "instructions": "Members of the team. Use it to find people."}),
            tools: vec![
                json!({"name": "find_member", "title": "Find a member", "description": "Finds a member by name.", "inputSchema": {"type": "object", "properties": {"name": {"type": "string"}}}, "annotations": {"readOnlyHint": true}}),
                json!({"name": "removeMember", "description": "Removes a member.", "inputSchema": {"type": "object"}, "annotations": {"destructiveHint": true}}),
                json!({"name": "remove_member", "description": "A twin.", "inputSchema": {"type": "object"}}),
                json!({"name": "broken", "description": "Bad schema.", "inputSchema": {"type": "string"}}),
                json!({"description": "No name."}),
                json!({"name": "bare", "inputSchema": {"type": "object"}, "outputSchema": {"type": "object", "properties": {"n": {"type": "integer"}}}}),
            ],
        };
        let file = Path::new("/etc/quiver.yaml");
        let (package, diags) =
            package_from_listing(server, file, Path::new("/state/mcp/crm"), &listing);
        assert_eq!(package.id.as_str(), "crm");
        assert_eq!(package.name, "CRM");
        assert_eq!(package.description, "Members of the team.");
        assert_eq!(package.version, Some(semver::Version::new(1, 2, 0)));
        let names: Vec<&str> = package.tools.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["find_member", "remove_member", "bare"]);
        let find = package.tool("find_member").unwrap();
        assert_eq!(find.category, Category::Perception);
        assert_eq!(find.description.summary, "Find a member");
        assert_eq!(find.description.when_to_use, "Finds a member by name.");
        assert!(find.expose && find.always_loaded);
        assert_eq!(find.file, file);
        assert_eq!(
            find.run,
            quiver_package::tool::Run::Mcp {
                server: "crm".into(),
                tool: "find_member".into()
            }
        );
        let remove = package.tool("remove_member").unwrap();
        assert_eq!(remove.category, Category::Action);
        assert!(!remove.always_loaded);
        assert!(
            matches!(&remove.run, quiver_package::tool::Run::Mcp { tool, .. } if tool == "removeMember")
        );
        let bare = package.tool("bare").unwrap();
        assert_eq!(bare.description.summary, "`bare` of the MCP server `crm`.");
        assert!(bare.output.is_some());
        let codes: Vec<(&str, &Path)> = diags.iter().map(|d| (d.code, d.file.as_path())).collect();
        assert_eq!(
            codes,
            [
                ("mcp-server-bad-tool", file),
                ("tool-input-not-object", file),
                ("mcp-server-bad-tool", file),
            ],
            "{diags:#?}"
        );
        assert!(
            diags[1]
                .message
                .starts_with("MCP server `crm`, tool `broken`: ")
        );
    }

    #[test]
    fn a_flood_of_tools_or_a_huge_definition_is_cut_with_a_diagnostic() {
        let servers = section("flood:\n  url: https://flood.example.com/mcp\n").unwrap();
        let server = servers.get("flood").unwrap();
        let huge = "x".repeat(MAX_FILE_BYTES as usize + 1);
        let mut tools = vec![json!({"name": "huge", "description": huge})];
        tools.extend(
            (0..MAX_SERVER_TOOLS + 5)
                .map(|i| json!({"name": format!("t{i}"), "description": "A tool."})),
        );
        let listing = Listing {
            server: json!({}),
            tools,
        };
        let file = Path::new("/etc/quiver.yaml");
        let (package, diags) =
            package_from_listing(server, file, Path::new("/state/mcp/flood"), &listing);
        // The huge one is left out, and only the first MAX_SERVER_TOOLS listed are read.
        assert_eq!(package.tools.len(), MAX_SERVER_TOOLS - 1);
        assert!(package.tool("huge").is_none());
        let messages: Vec<&str> = diags.iter().map(|d| d.message.as_str()).collect();
        assert_eq!(messages.len(), 2, "{messages:?}");
        assert!(messages[0].contains("listed 1006 tools; only the first 1000 load"));
        assert!(messages[1].contains("the definition of `huge` is"));
        assert!(diags.iter().all(|d| d.code == "mcp-server-bad-tool"));
    }
}
