//! An external MCP server's listing as a package: what discovery saw (its `initialize`
//! answer and `tools/list`, `quiver_mcp_client::discovery`) becomes a [`Package`] whose tools go
//! through the same parser and checks as a `tool.yaml`, so every policy of the pipeline applies
//! to them unchanged. Pure: no connection, no file.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::Duration;

use quiver_package::common::Permissions;
use quiver_package::manifest::{Manifest, McpServer as ManifestServer};
use quiver_package::names::{ItemName, PackageId};
use quiver_package::source::MAX_FILE_BYTES;
use quiver_package::tool::{Approval, Category, ToolScope, first_sentence, parse_tool};
use quiver_package::{Diagnostic, Package};
use serde_json::{Value, json};

/// What the package of a server takes from the operator's config (its `mcp_servers:` entry,
/// checked).
#[derive(Debug, Clone, PartialEq)]
pub struct ListedServer {
    /// Its name: the package id.
    pub id: PackageId,
    /// Display name, when configured.
    pub name: Option<String>,
    /// Catalog line, when configured.
    pub description: Option<String>,
    /// Approval mode of every tool.
    pub approval: Approval,
    /// Category of every tool, instead of its annotations'.
    pub category: Option<Category>,
    /// Whether its tools are exposed.
    pub expose: bool,
    /// Which tools are offered every turn.
    pub always_loaded: AlwaysLoaded,
    /// Timeout of each call.
    pub timeout: Duration,
    /// Its sandbox permissions (nothing for a remote server).
    pub permissions: Permissions,
    /// A local server's command (`None` for a remote one).
    pub command: Option<Vec<String>>,
}

/// Which of a server's tools are offered every turn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AlwaysLoaded {
    /// Every tool, or none.
    All(bool),
    /// These tools (names as the server lists them).
    Tools(Vec<String>),
}

/// What discovery saw of a server.
#[derive(Debug, Clone, Copy)]
pub struct Listing<'a> {
    /// `serverInfo`, `instructions`, ... as the server answered `initialize`.
    pub server: &'a Value,
    /// Each tool as JSON (`name`, `title`, `description`, `inputSchema`, `outputSchema`,
    /// `annotations`).
    pub tools: &'a [Value],
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

/// The most tools one server's package holds (a hostile or broken server may list any
/// number); the rest are left out with a diagnostic.
pub const MAX_SERVER_TOOLS: usize = 1000;

/// Builds the package of `server` from what it listed. Each tool goes through the same
/// parser and checks as a `tool.yaml` (name, description, schemas, run); a tool that fails
/// them is left out with a diagnostic naming the config file.
pub fn package_from_listing(
    server: &ListedServer,
    file: &Path,
    root: &Path,
    listing: Listing<'_>,
) -> (Package, Vec<Diagnostic>) {
    let id = server.id.as_str();
    let mut diags = Vec::new();
    let mut tools = Vec::new();
    let mut taken: BTreeMap<String, String> = BTreeMap::new();
    let always: BTreeSet<&str> = match &server.always_loaded {
        AlwaysLoaded::Tools(names) => names.iter().map(String::as_str).collect(),
        AlwaysLoaded::All(_) => BTreeSet::new(),
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
            AlwaysLoaded::All(all) => *all,
            AlwaysLoaded::Tools(_) => always.contains(name),
        };
        let mut definition = json!({
            "name": local.as_str(),
            "description": description,
            "category": category,
            "input": listed.get("inputSchema").cloned().unwrap_or(json!({"type": "object"})),
            "permission": server.permissions,
            "timeout": server.timeout.as_secs_f64(),
            "approval": server.approval,
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
    if let Some(command) = &server.command {
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
        permissions: server.permissions.clone(),
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

    fn server(id: &str, always_loaded: AlwaysLoaded) -> ListedServer {
        ListedServer {
            id: id.parse().unwrap(),
            name: None,
            description: None,
            approval: Approval::Once,
            category: None,
            expose: true,
            always_loaded,
            timeout: Duration::from_secs(30),
            permissions: Permissions::default(),
            command: None,
        }
    }

    #[test]
    fn listed_tools_become_package_tools() {
        let server = &server("crm", AlwaysLoaded::Tools(vec!["find_member".into()]));
        let info = json!({"serverInfo": {"name": "crm", "title": "CRM", "version": "1.2.0"}, "instructions": "Members of the team. Use it to find people."});
        let tools = [
            json!({"name": "find_member", "title": "Find a member", "description": "Finds a member by name.", "inputSchema": {"type": "object", "properties": {"name": {"type": "string"}}}, "annotations": {"readOnlyHint": true}}),
            json!({"name": "removeMember", "description": "Removes a member.", "inputSchema": {"type": "object"}, "annotations": {"destructiveHint": true}}),
            json!({"name": "remove_member", "description": "A twin.", "inputSchema": {"type": "object"}}),
            json!({"name": "broken", "description": "Bad schema.", "inputSchema": {"type": "string"}}),
            json!({"description": "No name."}),
            json!({"name": "bare", "inputSchema": {"type": "object"}, "outputSchema": {"type": "object", "properties": {"n": {"type": "integer"}}}}),
        ];
        let listing = Listing {
            server: &info,
            tools: &tools,
        };
        let file = Path::new("/etc/quiver.yaml");
        let (package, diags) =
            package_from_listing(server, file, Path::new("/state/mcp/crm"), listing);
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
        let server = &server("flood", AlwaysLoaded::All(false));
        let huge = "x".repeat(MAX_FILE_BYTES as usize + 1);
        let mut tools = vec![json!({"name": "huge", "description": huge})];
        tools.extend(
            (0..MAX_SERVER_TOOLS + 5)
                .map(|i| json!({"name": format!("t{i}"), "description": "A tool."})),
        );
        let info = json!({});
        let listing = Listing {
            server: &info,
            tools: &tools,
        };
        let file = Path::new("/etc/quiver.yaml");
        let (package, diags) =
            package_from_listing(server, file, Path::new("/state/mcp/flood"), listing);
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
