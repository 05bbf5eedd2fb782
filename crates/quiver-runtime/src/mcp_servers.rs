//! External MCP servers the operator lists in the config file (`mcp_servers:`), as packages
//! (id = the server's name) whose tools are the server's `tools/list` and whose skills are the
//! ones it offers through the MCP Skills extension (mirrored by discovery), so every policy of the
//! pipeline applies to them unchanged. The runtime only joins the two halves: discovery and
//! its cache are the client's ([`quiver_mcp_client::discovery`]), the listing → package
//! conversion is the catalog's ([`quiver_catalog::mcp_listing`]). See docs/mcp.md ("External
//! MCP servers").

use std::path::Path;

use quiver_catalog::mcp_listing::{self, AlwaysLoaded, ListedServer, Listing};
use quiver_mcp_client::config::{AlwaysLoadedSpec, McpServer, McpServers, Transport};
use quiver_mcp_client::discovery::{self, Connect};
use quiver_package::{Diagnostic, Package};
use serde_json::Value;

/// Settings by package id (the config file's `runtime.settings`).
pub type Settings = std::collections::HashMap<String, serde_json::Map<String, Value>>;

/// Loads every configured server as a package: discovered now (in parallel, each reached by
/// `connect`), else from its cache under `state_dir`. Returns the packages and every
/// diagnostic, each naming the config file.
pub fn load(
    servers: &McpServers,
    state_dir: &Path,
    connect: &Connect<'_>,
) -> (Vec<Package>, Vec<Diagnostic>) {
    let mut packages = Vec::new();
    let mut diagnostics = Vec::new();
    for found in discovery::discover_all(servers, state_dir, connect) {
        diagnostics.extend(found.diagnostics);
        if let Some(listing) = &found.listing {
            let (package, more) = mcp_listing::package_from_listing(
                &listed(found.server),
                &servers.file,
                &found.root,
                Listing {
                    server: &listing.server,
                    tools: &listing.tools,
                },
            );
            let (package, more) = with_skills(package, more, &found.root);
            packages.push(package);
            diagnostics.extend(more);
        }
    }
    (packages, diagnostics)
}

/// `package` (a server's) with the skills the server offered through the MCP Skills extension,
/// as discovery mirrored them under its folder `root`.
fn with_skills(
    mut package: Package,
    mut diagnostics: Vec<Diagnostic>,
    root: &Path,
) -> (Package, Vec<Diagnostic>) {
    let dir = root.join(quiver_mcp_client::skills::MIRROR_DIR);
    let (skills, more) =
        quiver_package::package::load_mirrored_skills(root, &dir, &package.id, package.id.as_str());
    package.skills = skills;
    diagnostics.extend(more);
    (package, diagnostics)
}

/// What the catalog's conversion takes from a configured server.
fn listed(server: &McpServer) -> ListedServer {
    ListedServer {
        id: server.id.clone(),
        name: server.name.clone(),
        description: server.description.clone(),
        approval: server.approval.unwrap_or_else(|| server.default_approval()),
        category: server.category,
        expose: server.expose,
        always_loaded: match &server.always_loaded {
            AlwaysLoadedSpec::All(all) => AlwaysLoaded::All(*all),
            AlwaysLoadedSpec::Tools(tools) => AlwaysLoaded::Tools(tools.clone()),
        },
        timeout: server.timeout,
        permissions: server.permissions(),
        command: match &server.transport {
            Transport::Local { command, .. } => Some(command.clone()),
            Transport::Remote { .. } => None,
        },
    }
}
