//! Where packages are looked for: `--root`, `QUIVER_PATH`, the config file, and the standard
//! skill folders of the project and the home directory.

use std::path::{Path, PathBuf};

use quiver_catalog::{CatalogOptions, Root, Scope};
use serde::Deserialize;

/// Arguments shared by every command that reads a catalog.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct RootArgs {
    /// A folder of packages (repeatable). When given, only these roots are read.
    #[arg(long = "root", value_name = "PATH", global = true)]
    pub roots: Vec<PathBuf>,
}

/// The config file (`$QUIVER_CONFIG`, else `~/.config/quiver/config.yaml`).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ConfigFile {
    #[serde(default)]
    roots: Vec<ConfigRoot>,
    precedence: Option<Vec<String>>,
    #[serde(default)]
    runtime: quiver_runtime::config::RuntimeSection,
    search: Option<SearchConfig>,
    /// The MCP front's section, read by `quiver serve` (`quiver_mcp::McpConfig`).
    #[serde(default, rename = "mcp")]
    _mcp: Option<serde::de::IgnoredAny>,
    /// External MCP servers that become packages (`quiver_mcp_client::config`).
    #[serde(default)]
    mcp_servers: quiver_mcp_client::config::McpServersSection,
}

/// The config file's `search` section.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct SearchConfig {
    /// Weight of the dense term when search is hybrid (0 to 1; default 0.7).
    dense_weight: Option<f32>,
    /// Weight of the dense term when the English booster takes part (0 to 1; default 0.8).
    boosted_weight: Option<f32>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ConfigRoot {
    path: String,
    #[serde(default)]
    scope: Option<String>,
}

fn parse_scope(text: &str) -> miette::Result<Scope> {
    match text {
        "project" => Ok(Scope::Project),
        "user" => Ok(Scope::User),
        "installed" => Ok(Scope::Installed),
        other => Err(miette::miette!(
            "unknown scope `{other}`; use `project`, `user` or `installed`"
        )),
    }
}

fn home() -> Option<PathBuf> {
    std::env::var_os("HOME").map(PathBuf::from)
}

/// The roots and catalog options for this invocation.
pub fn resolve(args: &RootArgs) -> miette::Result<(Vec<Root>, CatalogOptions)> {
    let mut options = CatalogOptions::default();
    if !args.roots.is_empty() {
        let roots = args
            .roots
            .iter()
            .map(|p| Root {
                path: p.clone(),
                scope: Scope::Project,
            })
            .collect();
        return Ok((roots, options));
    }
    let mut roots = Vec::new();
    if let Some(paths) = std::env::var_os("QUIVER_PATH") {
        roots.extend(
            std::env::split_paths(&paths)
                .filter(|p| !p.as_os_str().is_empty())
                .map(|path| Root {
                    path,
                    scope: Scope::Project,
                }),
        );
    }
    if let Some(path) = config_path() {
        let config = read_config(&path)?;
        for root in config.roots {
            let scope = root
                .scope
                .as_deref()
                .map(parse_scope)
                .transpose()?
                .unwrap_or(Scope::User);
            roots.push(Root {
                path: quiver_package::source::expand_home(&root.path),
                scope,
            });
        }
        if let Some(order) = config.precedence {
            options.precedence = order
                .iter()
                .map(|s| parse_scope(s))
                .collect::<miette::Result<_>>()?;
        }
    }
    let cwd = std::env::current_dir().unwrap_or_default();
    for dir in [
        ".agents/skills",
        ".claude/skills",
        ".codex/skills",
        ".quiver/packages",
    ] {
        roots.push(Root {
            path: cwd.join(dir),
            scope: Scope::Project,
        });
    }
    if let Some(home) = home() {
        for dir in [".agents/skills", ".claude/skills", ".codex/skills"] {
            roots.push(Root {
                path: home.join(dir),
                scope: Scope::User,
            });
        }
    }
    if let Some(dir) = state_dir() {
        roots.push(Root {
            path: dir.join("packages"),
            scope: Scope::Installed,
        });
    }
    roots.retain(|r| r.path.exists());
    Ok((roots, options))
}

/// Quiver's state folder: `$QUIVER_HOME`, else `$XDG_DATA_HOME/quiver`, else
/// `~/.local/share/quiver`; `None` when none of them is set.
pub fn state_dir() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("QUIVER_HOME") {
        return Some(PathBuf::from(dir));
    }
    match std::env::var_os("XDG_DATA_HOME") {
        Some(xdg) => Some(PathBuf::from(xdg).join("quiver")),
        None => home().map(|home| home.join(".local/share/quiver")),
    }
}

/// The config file's search weights, if set (each checked to lie in 0..=1).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct SearchWeights {
    /// `search.dense_weight`: the dense term's weight in hybrid search.
    pub dense: Option<f32>,
    /// `search.boosted_weight`: the dense term's weight when the English booster takes part.
    pub boosted: Option<f32>,
}

/// The config file's `search.dense_weight` and `search.boosted_weight`.
pub fn search_weights() -> miette::Result<SearchWeights> {
    let Some(path) = config_path() else {
        return Ok(SearchWeights::default());
    };
    let Some(search) = read_config(&path)?.search else {
        return Ok(SearchWeights::default());
    };
    let checked = |key: &str, weight: Option<f32>| match weight {
        Some(w) if !(0.0..=1.0).contains(&w) => Err(miette::miette!(
            "{}: `search.{key}` is {w}; it must lie between 0 and 1",
            path.display()
        )),
        _ => Ok(weight),
    };
    Ok(SearchWeights {
        dense: checked("dense_weight", search.dense_weight)?,
        boosted: checked("boosted_weight", search.boosted_weight)?,
    })
}

/// The config file in use, if there is one (`$QUIVER_CONFIG`, else
/// `~/.config/quiver/config.yaml`).
pub fn config_path() -> Option<PathBuf> {
    std::env::var_os("QUIVER_CONFIG")
        .map(PathBuf::from)
        .or_else(|| home().map(|h| h.join(".config/quiver/config.yaml")))
        .filter(|p| p.is_file())
}

/// The runtime configuration: the config file's `runtime:` section over the defaults.
pub fn runtime_config() -> miette::Result<quiver_runtime::RuntimeConfig> {
    let Some(path) = config_path() else {
        return Ok(quiver_runtime::RuntimeConfig::default());
    };
    read_config(&path)?
        .runtime
        .into_config()
        .map_err(|e| miette::miette!("{}: `runtime`: {e}", path.display()))
}

/// The config file's external MCP servers (`mcp_servers:`), checked; none without a file.
pub fn mcp_servers() -> miette::Result<quiver_mcp_client::config::McpServers> {
    let Some(path) = config_path() else {
        return Ok(Default::default());
    };
    let section = read_config(&path)?.mcp_servers;
    quiver_mcp_client::config::McpServers::from_section(section, &path)
        .map_err(|e| miette::miette!("{}: {e}", path.display()))
}

fn read_config(path: &Path) -> miette::Result<ConfigFile> {
    let text = quiver_package::source::read_text(path).map_err(|d| miette::miette!("{d}"))?;
    quiver_package::yaml::parse(&text, path, 1).map_err(|d| miette::miette!("{d}"))
}
