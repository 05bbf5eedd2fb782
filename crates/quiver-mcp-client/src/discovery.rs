//! Discovery: each configured server's `initialize` answer and `tools/list`, listed in
//! parallel through the caller's [`Connect`] (so the caller can keep the connection for the
//! calls that follow) and cached in `<state>/mcp/<server>/tools.json`; the skills it offers
//! through the MCP Skills extension are mirrored in `<state>/mcp/<server>/skills/`
//! ([`crate::skills`]), kept as they were when fetching them fails. A server that cannot be
//! reached is answered from that cache (with a warning), or, never seen before, left out with
//! an error diagnostic that names the config file. Turning a listing into a package is the
//! catalog's (`quiver_catalog::mcp_listing`), a pure function.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use quiver_package::Diagnostic;
use serde_json::{Value, json};

use crate::McpClientError;
use crate::config::{CACHE_FILE, McpServer, McpServers};
use crate::session::McpClient;
use crate::skills::{MIRROR_DIR, RemoteSkill, write_mirror};

/// What discovery saw: the server's `initialize` result and its tools.
#[derive(Debug, Clone, PartialEq)]
pub struct Listing {
    /// `serverInfo`, `instructions`, ... as the server answered `initialize`.
    pub server: Value,
    /// Each tool as JSON (`name`, `title`, `description`, `inputSchema`, `outputSchema`,
    /// `annotations`).
    pub tools: Vec<Value>,
}

/// Connects to `server` and lists its tools, and the skills it offers (`None` when fetching
/// them failed: the mirror of the last time stays).
fn discover(
    server: &McpServer,
    connect: &Connect<'_>,
) -> Result<(Listing, Option<Vec<RemoteSkill>>), String> {
    let client = connect(server).map_err(|e| e.to_string())?;
    let tools = client.list_tools(server.timeout).map_err(|e| {
        // A server that cannot list its tools is not kept for calls.
        client.stop();
        match e {
            McpClientError::TimedOut(d) => format!("no answer to `tools/list` within {d:?}"),
            other => other.to_string(),
        }
    })?;
    let skills = client
        .skills(server.timeout)
        .inspect_err(|e| {
            tracing::warn!(server = server.id.as_str(), "cannot fetch its skills: {e}");
        })
        .ok();
    Ok((
        Listing {
            server: client.server_info().clone(),
            tools,
        },
        skills,
    ))
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

/// How discovery reaches a server: a running client, started (a local server in the sandbox
/// exactly as its calls start it) or reused, so the connection can outlive the listing and
/// answer the calls that follow.
pub type Connect<'a> = dyn Fn(&McpServer) -> Result<Arc<McpClient>, McpClientError> + Sync + 'a;

/// What discovery found for one server.
#[derive(Debug)]
pub struct Discovered<'a> {
    /// The server.
    pub server: &'a McpServer,
    /// Its folder under the state folder (its package folder).
    pub root: PathBuf,
    /// What it listed now, or its cached listing; `None` when neither exists.
    pub listing: Option<Listing>,
    /// A warning when the listing is the cache's, an error when there is none.
    pub diagnostics: Vec<Diagnostic>,
}

/// Discovers every configured server (in parallel, each reached by `connect`), else answers
/// from its cache under `state_dir`. Each diagnostic names the config file.
pub fn discover_all<'a>(
    servers: &'a McpServers,
    state_dir: &Path,
    connect: &Connect<'_>,
) -> Vec<Discovered<'a>> {
    std::thread::scope(|scope| {
        let handles: Vec<_> = servers
            .servers
            .iter()
            .map(|server| {
                let handle =
                    scope.spawn(move || discover_one(server, &servers.file, state_dir, connect));
                (server, handle)
            })
            .collect();
        handles
            .into_iter()
            .map(|(server, h)| {
                h.join().unwrap_or_else(|_| Discovered {
                    server,
                    root: server.root(state_dir),
                    listing: None,
                    diagnostics: vec![Diagnostic::error(
                        "mcp-server-unreachable",
                        &servers.file,
                        "discovering an MCP server failed unexpectedly",
                    )],
                })
            })
            .collect()
    })
}

fn discover_one<'a>(
    server: &'a McpServer,
    file: &Path,
    state: &Path,
    connect: &Connect<'_>,
) -> Discovered<'a> {
    let root = server.root(state);
    let id = server.id.as_str();
    let mut diagnostics = Vec::new();
    let listing = match discover(server, connect) {
        Ok((listing, skills)) => {
            if let Err(e) = write_cache(server, &root, &listing) {
                tracing::warn!(server = id, "cannot cache the tool list: {e}");
            }
            if let Some(skills) = skills
                && let Err(e) = write_mirror(&root.join(MIRROR_DIR), &skills)
            {
                tracing::warn!(server = id, "cannot keep its skills: {e}");
            }
            Some(listing)
        }
        Err(why) => match read_cache(server, &root) {
            Some((listing, seen)) => {
                diagnostics.push(
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
                Some(listing)
            }
            None => {
                diagnostics.push(
                    Diagnostic::error(
                        "mcp-server-unreachable",
                        file,
                        format!("MCP server `{id}` could not list its tools: {why}"),
                    )
                    .with_help(
                        "check its entry in `mcp_servers` (command, permissions, url, token); the other packages load without it",
                    ),
                );
                None
            }
        },
    };
    Discovered {
        server,
        root,
        listing,
        diagnostics,
    }
}

fn age(seconds: u64) -> String {
    match seconds {
        s if s < 120 => format!("{s} s"),
        s if s < 7200 => format!("{} min", s / 60),
        s if s < 172_800 => format!("{} h", s / 3600),
        s => format!("{} days", s / 86400),
    }
}
