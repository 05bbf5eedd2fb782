//! The config file's `mcp_servers:` section: each external MCP server as written
//! ([`ServerSpec`]) and checked ([`McpServer`]), and how one is reached
//! ([`McpServer::connect`]): a local server started in Quiver's sandbox with exactly its
//! declared permissions, a remote one over Streamable HTTP with a bearer token from the
//! environment. See docs/mcp.md ("External MCP servers").

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use quiver_package::common::{Permissions, Seconds, WordList};
use quiver_package::names::PackageId;
use quiver_package::source::expand_home;
use quiver_package::tool::{Approval, Category};
use quiver_sandbox::{Access, Job, Sandbox};
use serde::Deserialize;
use serde_json::Value;
use thiserror::Error;

use crate::McpClientError;
use crate::session::{McpClient, Remote, ToolsChanged};

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
    pub(crate) fn source(&self) -> String {
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
    ) -> Result<McpClient, McpClientError> {
        match &self.transport {
            Transport::Local {
                command,
                permissions,
                env_values,
            } => {
                std::fs::create_dir_all(root).map_err(|e| {
                    McpClientError::Setup(format!("creating `{}`: {e}", root.display()))
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
                    limits: Default::default(),
                    python_env: None,
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
                        McpClientError::Setup(format!(
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
