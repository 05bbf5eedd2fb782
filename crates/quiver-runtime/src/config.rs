//! The `runtime:` section of Quiver's configuration file, read into a [`RuntimeConfig`]:
//! limits, prompt budgets, the meta-tools of each agent profile, the operator's
//! `always_loaded` list, dangerous names and `funds` switch, package settings, hooks and the
//! switch allowing unsandboxed execution.
//! Every field is optional; what is left out keeps its default. See docs/config.md.

use std::collections::BTreeMap;

use quiver_package::tool::RiskCategory;
use quiver_policy::DangerousName;
use serde::Deserialize;
use serde_json::Value;
use thiserror::Error;

use crate::RuntimeConfig;
use crate::hooks::CommandHookSpec;
use crate::presence::OperatorAlwaysLoaded;
use crate::runtime::META_TOOLS;

/// The `runtime:` section as written.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RuntimeSection {
    /// Loaded tools per session (default 12).
    pub max_loaded: Option<usize>,
    /// Results of `tool_search` (default 5).
    pub search_results: Option<usize>,
    /// Invalid-argument retries per tool per turn (default 3).
    pub max_retries: Option<u32>,
    /// Characters for the prompt sections together (default 8,000).
    pub system_prompt_max_chars: Option<usize>,
    /// Characters for the package catalog (default 6,000).
    pub catalog_max_chars: Option<usize>,
    /// Agent profiles by name, each with the meta-tools it has. A profile listed here replaces
    /// the default of the same name (`chat` has every meta-tool by default); a profile listed
    /// nowhere has none.
    pub agents: BTreeMap<String, AgentProfileSpec>,
    /// The operator's `always_loaded` list.
    pub always_loaded: Option<AlwaysLoadedSpec>,
    /// Names added to the dangerous list, and the `funds` switch.
    pub dangerous: DangerousSpec,
    /// Package settings (`config` in quiver.yaml), by package id.
    pub settings: BTreeMap<String, serde_json::Map<String, Value>>,
    /// Hooks run before calls.
    pub hooks: HooksSpec,
    /// Run package tools without the sandbox where this machine cannot enforce it (default
    /// off: they are refused).
    pub allow_unsandboxed: bool,
    /// Seconds a call of a workflow waits for its run in `quiver serve` before it returns
    /// `{run_id, status}` while the run goes on (default 10).
    pub workflow_call_wait: Option<f64>,
}

/// One agent profile.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AgentProfileSpec {
    /// Its meta-tools, from `read_skill`, `tool_search`, `load_tool`, `ask_user`,
    /// `run_skill_script` and `tool_output`.
    pub meta_tools: Vec<String>,
}

/// The operator's `always_loaded` tools, by qualified name (`<package>.<tool>`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "lowercase")]
pub enum AlwaysLoadedSpec {
    /// In addition to the packages' own declarations.
    Extend(Vec<String>),
    /// Instead of the packages' own declarations.
    Replace(Vec<String>),
}

/// Additions to the dangerous gate.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DangerousSpec {
    /// Names added to the built-in list (there is no way to remove one).
    pub extra: Vec<ExtraDangerous>,
    /// Whether `funds` tools may run at all (default off).
    pub funds: bool,
}

/// A name added to the dangerous list: the bare name, or with its risk category.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(untagged)]
pub enum ExtraDangerous {
    /// `delete_repo`.
    Name(String),
    /// `{name: pay_invoice, category: funds}`.
    WithCategory {
        /// The name.
        name: String,
        /// Its risk category.
        category: RiskCategory,
    },
}

/// Hooks by event.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct HooksSpec {
    /// Run after validation and before approval; they can only block.
    pub before_call: Vec<CommandHookSpec>,
}

/// A section that parses but says something impossible.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ConfigError {
    /// An agent profile names a meta-tool that does not exist.
    #[error(
        "agent profile `{agent}` lists `{name}`, which is not a meta-tool (known: read_skill, tool_search, load_tool, ask_user, run_skill_script, tool_output)"
    )]
    UnknownMetaTool {
        /// The profile.
        agent: String,
        /// The name.
        name: String,
    },
    /// A limit is zero.
    #[error("`{0}` must be at least 1")]
    Zero(&'static str),
    /// A time is not a number of seconds (negative, not finite).
    #[error("`{0}` is a number of seconds, not {1}")]
    NotSeconds(&'static str, String),
    /// A hook has no command, or two hooks share a name.
    #[error("hook `{name}`: {problem}")]
    Hook {
        /// The hook.
        name: String,
        /// What is wrong.
        problem: &'static str,
    },
}

impl RuntimeSection {
    /// The runtime configuration this section describes, on top of the defaults.
    pub fn into_config(self) -> Result<RuntimeConfig, ConfigError> {
        let mut config = RuntimeConfig::default();
        for (field, value) in [
            ("max_loaded", self.max_loaded),
            ("search_results", self.search_results),
            ("system_prompt_max_chars", self.system_prompt_max_chars),
            ("catalog_max_chars", self.catalog_max_chars),
        ] {
            if value == Some(0) {
                return Err(ConfigError::Zero(field));
            }
        }
        if let Some(n) = self.max_loaded {
            config.max_loaded = n;
        }
        if let Some(n) = self.search_results {
            config.search_results = n;
        }
        if let Some(n) = self.max_retries {
            config.max_retries = n;
        }
        if let Some(seconds) = self.workflow_call_wait {
            config.workflow_call_wait = std::time::Duration::try_from_secs_f64(seconds)
                .map_err(|_| ConfigError::NotSeconds("workflow_call_wait", seconds.to_string()))?;
        }
        if let Some(n) = self.system_prompt_max_chars {
            config.budget.sections = n;
        }
        if let Some(n) = self.catalog_max_chars {
            config.budget.catalog = n;
        }
        for (agent, profile) in self.agents {
            if let Some(name) = profile
                .meta_tools
                .iter()
                .find(|m| !META_TOOLS.contains(&m.as_str()))
            {
                return Err(ConfigError::UnknownMetaTool {
                    agent,
                    name: name.clone(),
                });
            }
            config.agent_meta_tools.insert(agent, profile.meta_tools);
        }
        config.always_loaded = match self.always_loaded {
            None => OperatorAlwaysLoaded::None,
            Some(AlwaysLoadedSpec::Extend(list)) => OperatorAlwaysLoaded::Extend(list),
            Some(AlwaysLoadedSpec::Replace(list)) => OperatorAlwaysLoaded::Replace(list),
        };
        config.operator.funds_enabled = self.dangerous.funds;
        config.operator.extra_dangerous = self
            .dangerous
            .extra
            .into_iter()
            .map(|extra| match extra {
                ExtraDangerous::Name(name) => DangerousName {
                    name,
                    category: None,
                },
                ExtraDangerous::WithCategory { name, category } => DangerousName {
                    name,
                    category: Some(category),
                },
            })
            .collect();
        config.settings = self.settings.into_iter().collect();
        let mut names = std::collections::BTreeSet::new();
        for hook in &self.hooks.before_call {
            if hook.command.is_empty() {
                return Err(ConfigError::Hook {
                    name: hook.name.clone(),
                    problem: "its command is empty",
                });
            }
            if !names.insert(hook.name.as_str()) {
                return Err(ConfigError::Hook {
                    name: hook.name.clone(),
                    problem: "another hook has the same name",
                });
            }
        }
        config.hooks = self.hooks.before_call;
        config.allow_unsandboxed = self.allow_unsandboxed;
        Ok(config)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn section(value: Value) -> Result<RuntimeConfig, String> {
        let section: RuntimeSection = serde_json::from_value(value).map_err(|e| e.to_string())?;
        section.into_config().map_err(|e| e.to_string())
    }

    #[test]
    fn an_empty_section_is_the_default() {
        let config = section(json!({})).unwrap();
        let default = RuntimeConfig::default();
        assert_eq!(config.max_loaded, default.max_loaded);
        assert_eq!(config.agent_meta_tools, default.agent_meta_tools);
        assert!(config.hooks.is_empty());
        assert!(!config.allow_unsandboxed);
    }

    #[test]
    fn unsandboxed_execution_is_an_explicit_switch() {
        assert!(
            section(json!({"allow_unsandboxed": true}))
                .unwrap()
                .allow_unsandboxed
        );
        assert!(
            !section(json!({"allow_unsandboxed": false}))
                .unwrap()
                .allow_unsandboxed
        );
        let error = section(json!({"allow_unsandboxed": "yes"})).unwrap_err();
        assert!(error.contains("expected a boolean"), "{error}");
    }

    #[test]
    fn agent_profiles_set_their_meta_tools() {
        let config = section(json!({
            "agents": {
                "support": {"meta_tools": ["read_skill"]},
                "chat": {"meta_tools": ["tool_search", "tool_output"]},
            },
            "max_loaded": 4,
            "search_results": 3,
        }))
        .unwrap();
        assert_eq!(config.agent_meta_tools["support"], ["read_skill"]);
        assert_eq!(
            config.agent_meta_tools["chat"],
            ["tool_search", "tool_output"]
        );
        assert_eq!((config.max_loaded, config.search_results), (4, 3));
    }

    #[test]
    fn operator_lists_and_switches() {
        let config = section(json!({
            "always_loaded": {"replace": ["weather.forecast"]},
            "dangerous": {"extra": ["delete_repo", {"name": "pay_invoice", "category": "funds"}], "funds": true},
            "settings": {"weather": {"api_key": "k"}},
            "hooks": {"before_call": [{"name": "audit", "command": ["true"], "tools": ["notes.*"]}]},
        }))
        .unwrap();
        assert_eq!(
            config.always_loaded,
            OperatorAlwaysLoaded::Replace(vec!["weather.forecast".into()])
        );
        assert!(config.operator.funds_enabled);
        assert_eq!(config.operator.extra_dangerous.len(), 2);
        assert_eq!(
            config.operator.extra_dangerous[1].category,
            Some(RiskCategory::Funds)
        );
        assert_eq!(config.settings["weather"]["api_key"], "k");
        assert_eq!(config.hooks[0].timeout, 10);
    }

    #[test]
    fn impossible_sections_are_refused_with_their_reason() {
        let cases = [
            (
                json!({"agents": {"bot": {"meta_tools": ["read_skil"]}}}),
                "`read_skil`, which is not a meta-tool",
            ),
            (json!({"max_loaded": 0}), "`max_loaded` must be at least 1"),
            (
                json!({"hooks": {"before_call": [{"name": "a", "command": []}]}}),
                "hook `a`: its command is empty",
            ),
            (
                json!({"hooks": {"before_call": [{"name": "a", "command": ["x"]}, {"name": "a", "command": ["y"]}]}}),
                "same name",
            ),
            (json!({"max_loded": 3}), "unknown field `max_loded`"),
            (
                json!({"always_loaded": {"append": []}}),
                "unknown variant `append`",
            ),
        ];
        for (value, expected) in cases {
            let error = section(value.clone()).unwrap_err();
            assert!(error.contains(expected), "{value}: {error}");
        }
    }
}
