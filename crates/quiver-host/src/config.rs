//! The config file (`$QUIVER_CONFIG`, else `$XDG_CONFIG_HOME/quiver/config.yaml`, else
//! `~/.config/quiver/config.yaml`), read once into one typed [`Config`]: every section is
//! parsed and checked when the file is read, each error naming the file and the line of its
//! section, and every part of the host takes its values from that one value.

use std::path::{Path, PathBuf};

use quiver_mcp::config::McpSection;
use quiver_mcp_client::config::{McpServers, McpServersSection};
use quiver_package::limits::ResourceLimits;
use quiver_runtime::RuntimeConfig;
use serde::Deserialize;

use crate::HostError;

/// The config file as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ConfigFile {
    #[serde(default)]
    roots: Vec<ConfigRoot>,
    precedence: Option<Vec<String>>,
    #[serde(default)]
    allow_shadow: Vec<String>,
    #[serde(default)]
    runtime: quiver_runtime::config::RuntimeSection,
    search: Option<SearchSection>,
    /// The MCP front's section, resolved by [`Config::mcp`] (`quiver_mcp::McpConfig`).
    mcp: Option<McpSection>,
    /// External MCP servers that become packages (`quiver_mcp_client::config`).
    #[serde(default)]
    mcp_servers: McpServersSection,
    #[serde(default)]
    limits: LimitsSection,
    #[serde(default)]
    reload: ReloadSettings,
}

/// The config file's `reload` section: how `quiver serve` follows edits of the project and
/// user roots (`docs/runtime.md`, "Hot reload").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReloadSettings {
    /// `watch`: reload the packages an edit touches (default `true`); `false` leaves only
    /// `quiver reload`.
    #[serde(default = "yes")]
    pub watch: bool,
    /// `polling`: look at the files a few times a second instead of asking the system for
    /// events (network file systems; chosen anyway when the system's watch limit is hit).
    #[serde(default)]
    pub polling: bool,
}

impl Default for ReloadSettings {
    fn default() -> Self {
        ReloadSettings {
            watch: true,
            polling: false,
        }
    }
}

fn yes() -> bool {
    true
}

/// The config file's `limits` section.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct LimitsSection {
    #[serde(default)]
    ceiling: ResourceLimits,
}

/// The config file's `search` section.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct SearchSection {
    dense_weight: Option<f32>,
    boosted_weight: Option<f32>,
}

/// One entry of `roots:` as written.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigRoot {
    /// The folder (`~/` is the home folder).
    pub path: String,
    /// `project`, `user` (the default) or `installed`.
    #[serde(default)]
    pub scope: Option<String>,
}

/// The config file's search weights, if set (each checked to lie in 0..=1).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct SearchWeights {
    /// `search.dense_weight`: the dense term's weight in hybrid search.
    pub dense: Option<f32>,
    /// `search.boosted_weight`: the dense term's weight when the English booster takes part.
    pub boosted: Option<f32>,
}

/// The config file, read once and checked: what every command and front takes from it.
#[derive(Debug, Clone, Default)]
pub struct Config {
    /// The file, when there is one.
    pub path: Option<PathBuf>,
    /// `mcp:` as written (its shape checked), and the line it starts on.
    mcp: Option<(McpSection, usize)>,
    /// `roots:`.
    pub roots: Vec<ConfigRoot>,
    /// `precedence:`, as written.
    pub precedence: Option<Vec<String>>,
    /// `allow_shadow:`: package ids a higher-precedence root may take over from a lower one
    /// (without it, a package claiming another scope's id is refused).
    pub allow_shadow: Vec<String>,
    /// `runtime:` over the defaults.
    pub runtime: RuntimeConfig,
    /// `search:`.
    pub search: SearchWeights,
    /// `mcp_servers:`, checked.
    pub mcp_servers: McpServers,
    /// `limits.ceiling:`: the most resources a tool may ask for in its `tool.yaml`'s
    /// `limits:` (what is not set stays at the sandbox's default, which a tool may only
    /// lower; a value below the default lowers the default too).
    pub limits_ceiling: ResourceLimits,
    /// `reload:`.
    pub reload: ReloadSettings,
    /// Values that were left at their default, each a whole message naming the file and line.
    pub warnings: Vec<String>,
}

impl Config {
    /// The config file in use ([`crate::paths::config_path`]), read; the defaults when there
    /// is none.
    pub fn load() -> Result<Config, HostError> {
        match crate::paths::config_path() {
            Some(path) => Config::read(&path),
            None => Ok(Config::default()),
        }
    }

    /// Reads and checks the config file at `path`.
    pub fn read(path: &Path) -> Result<Config, HostError> {
        tracing::debug!(file = %path.display(), "reading the config file");
        let text = quiver_package::source::read_text(path)
            .map_err(|d| HostError::Config(d.to_string()))?;
        Config::parse(path, text)
    }

    /// Checks `text` as the config file `path`.
    pub fn parse(path: &Path, text: String) -> Result<Config, HostError> {
        let file: ConfigFile = quiver_package::yaml::parse(&text, path, 1)
            .map_err(|d| HostError::Config(d.to_string()))?;
        let at = |key: &str| format!("{}:{}", path.display(), key_line(&text, key));
        let runtime = file
            .runtime
            .into_config()
            .map_err(|e| HostError::Config(format!("{}: `runtime`: {e}", at("runtime"))))?;
        let mcp_servers = McpServers::from_section(file.mcp_servers, path)
            .map_err(|e| HostError::Config(format!("{}: {e}", at("mcp_servers"))))?;
        let mut warnings = Vec::new();
        let search = match file.search {
            None => SearchWeights::default(),
            Some(section) => {
                let mut checked = |key: &str, weight: Option<f32>| match weight {
                    Some(w) if !(0.0..=1.0).contains(&w) => {
                        warnings.push(format!(
                            "warning: {}: `search.{key}` is {w}; it must lie between 0 and 1, so the default is used",
                            at("search")
                        ));
                        None
                    }
                    _ => weight,
                };
                SearchWeights {
                    dense: checked("dense_weight", section.dense_weight),
                    boosted: checked("boosted_weight", section.boosted_weight),
                }
            }
        };
        let mcp = file.mcp.map(|section| (section, key_line(&text, "mcp")));
        Ok(Config {
            path: Some(path.to_owned()),
            mcp,
            roots: file.roots,
            precedence: file.precedence,
            allow_shadow: file.allow_shadow,
            runtime,
            search,
            mcp_servers,
            limits_ceiling: file.limits.ceiling,
            reload: file.reload,
            warnings,
        })
    }

    /// The MCP front's settings (`mcp:`, the defaults without one); tokens name environment
    /// variables, looked up with `env`.
    pub fn mcp(
        &self,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<quiver_mcp::McpConfig, HostError> {
        let Some((section, line)) = &self.mcp else {
            return Ok(quiver_mcp::McpConfig::default());
        };
        quiver_mcp::McpConfig::from_section(Some(section), env).map_err(|e| {
            let path = self.path.as_deref().unwrap_or(Path::new("config.yaml"));
            HostError::Config(format!("{}:{line}: {e}", path.display()))
        })
    }
}

/// The line (from 1) of the top-level key `key` in `text`; 1 when it is not there.
fn key_line(text: &str, key: &str) -> usize {
    text.lines()
        .position(|line| {
            line.strip_prefix(key)
                .is_some_and(|rest| rest.trim_start().starts_with(':'))
        })
        .map_or(1, |i| i + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_name_the_file_and_the_line_of_their_section() {
        let cases = [
            (
                "roots: []\nruntime:\n  max_loaded: 0\n",
                "/etc/q.yaml:2: `runtime`: ",
            ),
            (
                "mcp_servers:\n  Bad:\n    command: [x]\n",
                "/etc/q.yaml:1: `mcp_servers.Bad`",
            ),
            ("roots: []\nbogus: 1\n", "/etc/q.yaml:2"),
            (
                "roots: []\nlimits:\n  ceiling:\n    memory: lots\n",
                "/etc/q.yaml:4",
            ),
            ("roots: []\nlimits:\n  roof: {}\n", "/etc/q.yaml:3"),
            // The MCP front's section is checked with the rest of the file, not when served.
            ("roots: []\nmcp:\n  colour: red\n", "/etc/q.yaml:3"),
            (
                "roots: []\nmcp:\n  stdio: {role: king}\n",
                "/etc/q.yaml:2: unknown role `king`",
            ),
        ];
        let env = |_: &str| None;
        for (text, want) in cases {
            let got = Config::parse(Path::new("/etc/q.yaml"), text.into())
                .and_then(|config| config.mcp(&env).map(|_| config));
            assert!(
                matches!(&got, Err(HostError::Config(m)) if m.starts_with(want)),
                "{text}: {got:?}"
            );
        }
    }

    #[test]
    fn a_weight_out_of_range_is_a_warning_and_the_default() {
        let text = "# c\n\nsearch:\n  dense_weight: 2\n  boosted_weight: 0.5\n";
        let config = Config::parse(Path::new("/etc/q.yaml"), text.into()).unwrap();
        assert_eq!(
            config.search,
            SearchWeights {
                dense: None,
                boosted: Some(0.5)
            }
        );
        assert_eq!(
            config.warnings,
            [
                "warning: /etc/q.yaml:3: `search.dense_weight` is 2; it must lie between 0 and 1, so the default is used"
            ]
        );
    }

    #[test]
    fn every_section_is_read_into_one_value() {
        let text = "roots:\n  - path: /srv/p\n    scope: installed\nprecedence: [installed, user]\nruntime:\n  max_loaded: 3\nsearch:\n  dense_weight: 0.5\nmcp_servers:\n  crm:\n    url: https://crm.example.com/mcp\nlimits:\n  ceiling: {memory: 4GiB, cpu: 2}\nmcp:\n  approval_wait: 5\nreload:\n  watch: false\n";
        let config = Config::parse(Path::new("/etc/q.yaml"), text.into()).unwrap();
        assert_eq!(
            config.reload,
            ReloadSettings {
                watch: false,
                polling: false
            }
        );
        assert!(Config::default().reload.watch);
        let mcp = config.mcp(&|_| None).unwrap();
        assert_eq!(mcp.approval_wait, std::time::Duration::from_secs(5));
        assert_eq!(config.roots.len(), 1);
        assert_eq!(config.runtime.max_loaded, 3);
        assert_eq!(config.search.dense, Some(0.5));
        assert!(config.mcp_servers.get("crm").is_some());
        assert_eq!(
            config.limits_ceiling.memory,
            Some(quiver_package::limits::Bytes(4 << 30))
        );
        assert_eq!(
            config.limits_ceiling.cpu,
            Some(quiver_package::limits::Cores(2000))
        );
        assert_eq!(
            config.precedence.as_deref(),
            Some(&["installed".to_owned(), "user".to_owned()][..])
        );
    }
}
