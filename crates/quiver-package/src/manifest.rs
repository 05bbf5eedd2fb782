//! `quiver.yaml`: the package manifest.

use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::common::Permissions;
use crate::diagnostic::Diagnostic;
use crate::names::PackageId;
use crate::yaml;

/// Top-level keys of `quiver.yaml`; others are warnings.
pub const KNOWN_KEYS: [&str; 11] = [
    "id",
    "name",
    "version",
    "description",
    "license",
    "permissions",
    "config",
    "data",
    "events",
    "requires",
    "mcp_servers",
];

/// A parsed `quiver.yaml`.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Manifest {
    /// The package id (defaults to the folder name).
    pub id: Option<PackageId>,
    /// Display name.
    pub name: Option<String>,
    /// Semantic version.
    pub version: Option<semver::Version>,
    /// One line for the catalog.
    pub description: Option<String>,
    /// License.
    pub license: Option<String>,
    /// The ceiling of every tool's permissions.
    pub permissions: Permissions,
    /// JSON Schema of user settings (`secret: true` marks secrets).
    pub config: Option<Value>,
    /// What the package keeps in its data folder.
    pub data: Option<Value>,
    /// Event subscriptions that start workflows: names or patterns ([`crate::events`]).
    pub events: Vec<String>,
    /// Other packages and MCP servers it needs.
    pub requires: Requires,
    /// MCP servers the package runs for its `run: {mcp: ...}` tools.
    pub mcp_servers: std::collections::BTreeMap<String, McpServer>,
}

/// Dependencies of a package.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Requires {
    /// Package ids.
    pub packages: Vec<String>,
    /// MCP server names.
    pub mcp: Vec<String>,
}

/// An MCP server a package runs over stdio.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpServer {
    /// The command and its arguments.
    pub command: Vec<String>,
}

#[derive(Debug, Deserialize)]
struct RawManifest {
    id: Option<String>,
    name: Option<String>,
    version: Option<Value>,
    description: Option<String>,
    license: Option<String>,
    #[serde(default)]
    permissions: Permissions,
    config: Option<Value>,
    data: Option<Value>,
    #[serde(default)]
    events: Vec<String>,
    #[serde(default)]
    requires: Requires,
    #[serde(default)]
    mcp_servers: std::collections::BTreeMap<String, McpServer>,
}

/// Parses `quiver.yaml`. An error means the package cannot load.
pub fn parse_manifest(text: &str, file: &Path) -> (Option<Manifest>, Vec<Diagnostic>) {
    let mut diags = Vec::new();
    let raw: RawManifest = match yaml::parse(text, file, 1) {
        Ok(raw) => raw,
        Err(diag) => return (None, vec![diag]),
    };
    let line = |key: &str| yaml::key_line(text, 1, key);
    for (key, key_line) in yaml::top_level_key_lines(text, 1) {
        if !KNOWN_KEYS.contains(&key.as_str()) {
            diags.push(
                Diagnostic::warning(
                    "manifest-unknown-field",
                    file,
                    format!("unknown field `{key}` is ignored"),
                )
                .at_line(Some(key_line)),
            );
        }
    }
    let id = match raw.id.as_deref().map(str::parse::<PackageId>) {
        Some(Ok(id)) => Some(id),
        Some(Err(err)) => {
            diags.push(
                Diagnostic::error("manifest-invalid-id", file, err.to_string())
                    .at_line(line("id"))
                    .with_help("package ids match `[a-z0-9][a-z0-9_-]{0,63}`"),
            );
            None
        }
        None => None,
    };
    let version = match raw.version {
        None => None,
        Some(value) => {
            let text = match &value {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            match semver::Version::parse(&text) {
                Ok(v) => Some(v),
                Err(err) => {
                    diags.push(
                        Diagnostic::error(
                            "manifest-invalid-version",
                            file,
                            format!("`{text}` is not a semantic version: {err}"),
                        )
                        .at_line(line("version"))
                        .with_help("write versions as `MAJOR.MINOR.PATCH`, such as `1.0.0`"),
                    );
                    None
                }
            }
        }
    };
    if let Some(config) = &raw.config
        && let Err(message) = crate::schema::compile(config)
    {
        diags.push(
            Diagnostic::error(
                "manifest-invalid-config",
                file,
                format!("`config` is not a valid JSON Schema: {message}"),
            )
            .at_line(line("config")),
        );
    }
    for (key, value) in [("name", &raw.name), ("description", &raw.description)] {
        if let Some(value) = value {
            diags.extend(crate::text::check(file, key, value, line(key)));
        }
    }
    for pattern in &raw.events {
        if let Err(message) = crate::events::check(pattern) {
            diags.push(
                Diagnostic::error("manifest-invalid-event", file, message)
                    .at_line(line("events"))
                    .with_help("subscribe to names such as `order.paid`, `order.*` or `order.**`"),
            );
        }
    }
    let mut permissions = raw.permissions;
    diags.extend(crate::common::check_permission_paths(
        &mut permissions,
        text,
        file,
        "permissions",
        line("permissions"),
    ));
    if diags.iter().any(Diagnostic::is_error) {
        return (None, diags);
    }
    let manifest = Manifest {
        id,
        name: raw.name,
        version,
        description: raw.description,
        license: raw.license,
        permissions,
        config: raw.config,
        data: raw.data,
        events: raw.events,
        requires: raw.requires,
        mcp_servers: raw.mcp_servers,
    };
    (Some(manifest), diags)
}

impl Manifest {
    /// Names of settings marked `secret: true` in `config`.
    pub fn secret_settings(&self) -> Vec<String> {
        let Some(props) = self
            .config
            .as_ref()
            .and_then(|c| c.get("properties"))
            .and_then(Value::as_object)
        else {
            return Vec::new();
        };
        props
            .iter()
            .filter(|(_, schema)| schema.get("secret").and_then(Value::as_bool) == Some(true))
            .map(|(name, _)| name.clone())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn codes(text: &str) -> (bool, Vec<&'static str>) {
        let (m, d) = parse_manifest(text, Path::new("quiver.yaml"));
        (m.is_some(), d.iter().map(|d| d.code).collect())
    }

    #[test]
    fn table() {
        let cases: &[(&str, bool, &[&str])] = &[
            (
                "id: weather\nversion: 1.2.0\ndescription: 天气\n",
                true,
                &[],
            ),
            ("", true, &[]),
            (
                "id: weather\ncolour: blue\n",
                true,
                &["manifest-unknown-field"],
            ),
            ("id: Weather\n", false, &["manifest-invalid-id"]),
            ("version: 1.2\n", false, &["manifest-invalid-version"]),
            ("config: {type: 5}\n", false, &["manifest-invalid-config"]),
            ("events: [order.paid, order.*, shop.**]\n", true, &[]),
            (
                "events: [order.paid, 'ord*']\n",
                false,
                &["manifest-invalid-event"],
            ),
            (
                "permissions: {network: [a.com], shell: maybe}\n",
                false,
                &["yaml-wrong-type"],
            ),
            (
                "permissions: {netwrok: [a.com]}\n",
                false,
                &["yaml-wrong-type"],
            ),
            ("description: 'unclosed\n", false, &["yaml-syntax"]),
        ];
        for (text, ok, want) in cases {
            assert_eq!(codes(text), (*ok, want.to_vec()), "{text}");
        }
    }

    #[test]
    fn secrets() {
        let (m, _) = parse_manifest(
            "config:\n  type: object\n  properties:\n    token: {type: string, secret: true}\n    city: {type: string}\n",
            Path::new("quiver.yaml"),
        );
        assert_eq!(m.unwrap().secret_settings(), ["token"]);
    }
}
