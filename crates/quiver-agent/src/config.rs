//! Provider configuration: a YAML file (`$QUIVER_AGENT_CONFIG`, else
//! `~/.config/quiver/agent.yaml`) and environment variables over it.
//!
//! ```yaml
//! default: deepseek
//! providers:
//!   deepseek:
//!     kind: openai                     # openai (any compatible server) or anthropic
//!     base_url: https://api.deepseek.com/v1
//!     api_key_env: DEEPSEEK_API_KEY    # the variable's name; the key itself never goes here
//!     model: deepseek-chat
//! agents:
//!   daily-report.reporter: {model: deepseek-reasoner}
//! ```
//!
//! Environment: `QUIVER_PROVIDER` picks a provider by name; `QUIVER_PROVIDER_KIND`,
//! `QUIVER_BASE_URL`, `QUIVER_API_KEY_ENV` and `QUIVER_MODEL` override its fields, or describe
//! a provider named `env` when the file has none; without `QUIVER_BASE_URL`, that provider
//! starts from the official SDKs' `OPENAI_*` or `ANTHROPIC_*` variables. An empty variable
//! counts as unset.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use thiserror::Error;

mod sdk;

/// Which wire protocol a provider speaks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ProviderKind {
    /// OpenAI-compatible chat completions (OpenAI, DeepSeek, Qwen, vLLM, Ollama, llama.cpp).
    #[default]
    Openai,
    /// Anthropic messages.
    Anthropic,
}

/// How the model is offered tools.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ToolMode {
    /// The API's own tool calls.
    #[default]
    Native,
    /// The JSON action format in text (`{"thought", "tool", "args"}`), for models without
    /// tool calls.
    Json,
}

/// One provider.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ProviderConfig {
    /// The protocol.
    #[serde(default)]
    pub kind: ProviderKind,
    /// The endpoint's base URL (`https://api.openai.com/v1`, `https://api.anthropic.com`).
    pub base_url: String,
    /// The name of the environment variable holding the API key (none for local servers).
    #[serde(default)]
    pub api_key_env: Option<String>,
    /// The default model.
    pub model: String,
    /// Native tool calls or the JSON action format.
    #[serde(default)]
    pub tools: ToolMode,
    /// Whether to stream replies.
    #[serde(default = "yes")]
    pub stream: bool,
    /// Seconds to wait for the server (to connect, and between bytes of an answer).
    #[serde(default = "default_timeout")]
    pub timeout: f64,
    /// Retries of a request answered 429 or 5xx, or that could not connect.
    #[serde(default = "default_retries")]
    pub max_retries: u32,
    /// First backoff in milliseconds; doubled each retry (a `Retry-After` header wins).
    #[serde(default = "default_backoff")]
    pub retry_backoff_ms: u64,
    /// Most tokens per reply (Anthropic requires one; default 4096).
    #[serde(default)]
    pub max_tokens: Option<u32>,
    /// Sampling temperature.
    #[serde(default)]
    pub temperature: Option<f32>,
    /// Extra HTTP headers.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
}

fn yes() -> bool {
    true
}
fn default_timeout() -> f64 {
    120.0
}
fn default_retries() -> u32 {
    3
}
fn default_backoff() -> u64 {
    500
}

impl ProviderConfig {
    /// `kind`'s vendor as its SDK defaults it: the vendor's API, Quiver's default model for it
    /// and the SDK's key variable (`OPENAI_API_KEY`, `ANTHROPIC_API_KEY`): what the SDKs'
    /// variables describe when they name no URL.
    pub fn vendor(kind: ProviderKind) -> Self {
        sdk::vendor(kind)
    }

    /// A provider of `kind` at `base_url` serving `model`, with every other field defaulted.
    pub fn new(kind: ProviderKind, base_url: &str, model: &str) -> Self {
        Self {
            kind,
            base_url: base_url.to_owned(),
            api_key_env: None,
            model: model.to_owned(),
            tools: ToolMode::Native,
            stream: true,
            timeout: default_timeout(),
            max_retries: default_retries(),
            retry_backoff_ms: default_backoff(),
            max_tokens: None,
            temperature: None,
            headers: BTreeMap::new(),
        }
    }

    /// The timeout as a duration.
    pub fn timeout(&self) -> Duration {
        Duration::from_secs_f64(self.timeout.clamp(0.001, 86_400.0))
    }
}

/// The model (and provider) the user chose for one agent.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct AgentModel {
    /// The provider's name (default: the default provider).
    #[serde(default)]
    pub provider: Option<String>,
    /// The model.
    #[serde(default)]
    pub model: Option<String>,
}

/// Limits of the loop.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct Limits {
    /// Model requests per turn before the loop stops.
    pub max_steps: usize,
    /// How deep sub-agents may call sub-agents (1: the chat agent's sub-agents call none).
    pub max_depth: usize,
    /// Sub-agents running at once in this process.
    pub max_parallel: usize,
    /// Characters of conversation kept before older turns are compacted away.
    pub context_chars: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_steps: 12,
            max_depth: 2,
            max_parallel: 4,
            context_chars: 120_000,
        }
    }
}

/// The configuration file.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct AgentConfig {
    /// The provider the chat agent uses.
    #[serde(default)]
    pub default: Option<String>,
    /// Providers by name.
    #[serde(default)]
    pub providers: BTreeMap<String, ProviderConfig>,
    /// Per-agent choices, by `<package>.<agent>`.
    #[serde(default)]
    pub agents: BTreeMap<String, AgentModel>,
    /// Loop limits.
    #[serde(default)]
    pub limits: Limits,
}

/// A configuration problem.
#[derive(Debug, Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read {path}: {message}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        message: String,
    },
    /// The file is not valid.
    #[error("{path}: {message}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// No provider is configured.
    #[error(
        "no model provider is configured; write {path}, or set OPENAI_API_KEY, ANTHROPIC_API_KEY, or QUIVER_BASE_URL and QUIVER_MODEL (see docs/agent.md)"
    )]
    NoProvider {
        /// Where the file was looked for.
        path: String,
    },
    /// A name that no provider has.
    #[error("no provider named `{name}` (configured: {known})")]
    UnknownProvider {
        /// The name asked for.
        name: String,
        /// The names configured.
        known: String,
    },
    /// A bad environment value.
    #[error("`{variable}` is `{value}`; {hint}")]
    BadEnv {
        /// The variable.
        variable: String,
        /// Its value.
        value: String,
        /// What it should be.
        hint: String,
    },
}

impl AgentConfig {
    /// Parses a configuration file's text.
    pub fn parse(text: &str, path: &Path) -> Result<Self, ConfigError> {
        quiver_package::yaml::parse(text, path, 1).map_err(|d| ConfigError::Invalid {
            path: path.to_owned(),
            message: match d.line {
                Some(line) => format!("line {line}: {}", d.message),
                None => d.message,
            },
        })
    }

    /// The default file: `$QUIVER_AGENT_CONFIG`, else `$XDG_CONFIG_HOME/quiver/agent.yaml`,
    /// else `~/.config/quiver/agent.yaml`; a variable that is empty or relative counts as unset.
    pub fn default_path() -> Option<PathBuf> {
        use quiver_package::env::{absolute_path, home};
        absolute_path("QUIVER_AGENT_CONFIG")
            .or_else(|| absolute_path("XDG_CONFIG_HOME").map(|x| x.join("quiver/agent.yaml")))
            .or_else(|| home().map(|h| h.join(".config/quiver/agent.yaml")))
    }

    /// Reads `path` (or the default file; a missing default file is an empty configuration),
    /// then applies the environment.
    pub fn load(path: Option<&Path>) -> Result<Self, ConfigError> {
        let explicit = path.is_some();
        let path = path.map(Path::to_path_buf).or_else(Self::default_path);
        let mut config = match &path {
            Some(p) if p.exists() || explicit => {
                let text = std::fs::read_to_string(p).map_err(|e| ConfigError::Read {
                    path: p.clone(),
                    message: e.to_string(),
                })?;
                Self::parse(&text, p)?
            }
            _ => Self::default(),
        };
        config.apply_env(&|k| std::env::var(k).ok())?;
        Ok(config)
    }

    /// Applies `QUIVER_PROVIDER`, `QUIVER_PROVIDER_KIND`, `QUIVER_BASE_URL`,
    /// `QUIVER_API_KEY_ENV` and `QUIVER_MODEL` as read by `env`. Without a provider in the
    /// file and without `QUIVER_BASE_URL`, the official SDKs' variables (`OPENAI_BASE_URL`,
    /// `OPENAI_API_KEY`, `ANTHROPIC_BASE_URL`, `ANTHROPIC_API_KEY`) describe the provider,
    /// Quiver's own variables over them. An empty variable counts as unset.
    pub fn apply_env(&mut self, env: &dyn Fn(&str) -> Option<String>) -> Result<(), ConfigError> {
        let get = |k: &str| env(k).filter(|v| !v.trim().is_empty());
        if let Some(name) = get("QUIVER_PROVIDER") {
            self.default = Some(name);
        }
        let kind = match get("QUIVER_PROVIDER_KIND").as_deref() {
            None => None,
            Some("openai") => Some(ProviderKind::Openai),
            Some("anthropic") => Some(ProviderKind::Anthropic),
            Some(other) => {
                return Err(ConfigError::BadEnv {
                    variable: "QUIVER_PROVIDER_KIND".into(),
                    value: other.into(),
                    hint: "use `openai` or `anthropic`".into(),
                });
            }
        };
        let base = get("QUIVER_BASE_URL");
        let key = get("QUIVER_API_KEY_ENV");
        let model = get("QUIVER_MODEL");
        let sdk = if self.providers.is_empty() && base.is_none() {
            sdk::provider(kind, &get)
        } else {
            None
        };
        if kind.is_none() && base.is_none() && key.is_none() && model.is_none() && sdk.is_none() {
            return Ok(());
        }
        let name = self
            .default
            .clone()
            .or_else(|| self.providers.keys().next().cloned())
            .unwrap_or_else(|| "env".to_owned());
        let entry = self.providers.entry(name.clone()).or_insert_with(|| {
            sdk.unwrap_or_else(|| ProviderConfig::new(ProviderKind::Openai, "", ""))
        });
        if let Some(kind) = kind {
            entry.kind = kind;
        }
        if let Some(base) = base {
            entry.base_url = base;
        }
        if let Some(key) = key {
            entry.api_key_env = Some(key);
        }
        if let Some(model) = model {
            entry.model = model;
        }
        self.default = Some(name);
        Ok(())
    }

    /// The default provider's name.
    pub fn default_provider(&self) -> Result<&str, ConfigError> {
        let name = self
            .default
            .as_deref()
            .or_else(|| self.providers.keys().next().map(String::as_str))
            .ok_or_else(|| ConfigError::NoProvider {
                path: Self::default_path()
                    .map_or_else(|| "agent.yaml".to_owned(), |p| p.display().to_string()),
            })?;
        self.provider(name).map(|_| name)
    }

    /// The provider named `name`.
    pub fn provider(&self, name: &str) -> Result<&ProviderConfig, ConfigError> {
        let found = self
            .providers
            .get(name)
            .ok_or_else(|| ConfigError::UnknownProvider {
                name: name.to_owned(),
                known: self
                    .providers
                    .keys()
                    .cloned()
                    .collect::<Vec<_>>()
                    .join(", "),
            })?;
        if found.base_url.trim().is_empty() || found.model.trim().is_empty() {
            return Err(ConfigError::Invalid {
                path: PathBuf::from(format!("provider `{name}`")),
                message: "needs `base_url` and `model`".into(),
            });
        }
        Ok(found)
    }

    /// The provider and model for `agent` (`None`: the chat agent): the user's choice for it
    /// in `agents:`, else the model the agent declares, else the default provider's model.
    pub fn choice_for(
        &self,
        agent: Option<&str>,
        declared_model: Option<&str>,
    ) -> Result<(String, String), ConfigError> {
        let chosen = agent.and_then(|a| self.agents.get(a));
        let provider = match chosen.and_then(|c| c.provider.as_deref()) {
            Some(name) => name.to_owned(),
            None => self.default_provider()?.to_owned(),
        };
        let config = self.provider(&provider)?;
        let model = chosen
            .and_then(|c| c.model.clone())
            .or_else(|| declared_model.map(str::to_owned))
            .unwrap_or_else(|| config.model.clone());
        Ok((provider, model))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = "default: ds\nproviders:\n  ds:\n    base_url: https://api.deepseek.com/v1\n    api_key_env: DEEPSEEK_API_KEY\n    model: deepseek-chat\n  claude:\n    kind: anthropic\n    base_url: https://api.anthropic.com\n    api_key_env: ANTHROPIC_API_KEY\n    model: claude-sonnet-4-5\n    tools: native\nagents:\n  daily-report.reporter: {provider: claude}\n  daily-report.editor: {model: deepseek-reasoner}\nlimits: {max_steps: 5}\n";

    #[test]
    fn choices_per_agent() {
        let c = AgentConfig::parse(FILE, Path::new("agent.yaml")).unwrap();
        type Case<'a> = (Option<&'a str>, Option<&'a str>, (&'a str, &'a str));
        let cases: &[Case<'_>] = &[
            (None, None, ("ds", "deepseek-chat")),
            (
                Some("daily-report.reporter"),
                None,
                ("claude", "claude-sonnet-4-5"),
            ),
            (
                Some("daily-report.editor"),
                Some("x"),
                ("ds", "deepseek-reasoner"),
            ),
            (Some("other.agent"), Some("qwen-max"), ("ds", "qwen-max")),
        ];
        for (agent, declared, (p, m)) in cases {
            let (provider, model) = c.choice_for(*agent, *declared).unwrap();
            assert_eq!((provider.as_str(), model.as_str()), (*p, *m), "{agent:?}");
        }
        assert_eq!(c.limits.max_steps, 5);
        assert_eq!(c.limits.max_depth, 2);
    }

    #[test]
    fn environment_overrides_and_creates() {
        let mut c = AgentConfig::default();
        assert!(matches!(
            c.default_provider(),
            Err(ConfigError::NoProvider { .. })
        ));
        c.apply_env(&|k| match k {
            "QUIVER_BASE_URL" => Some("http://127.0.0.1:11434/v1".into()),
            "QUIVER_MODEL" => Some("qwen2.5:7b".into()),
            _ => None,
        })
        .unwrap();
        assert_eq!(c.default_provider().unwrap(), "env");
        assert_eq!(c.provider("env").unwrap().model, "qwen2.5:7b");

        let mut c = AgentConfig::parse(FILE, Path::new("a.yaml")).unwrap();
        c.apply_env(&|k| (k == "QUIVER_MODEL").then(|| "deepseek-reasoner".into()))
            .unwrap();
        assert_eq!(c.provider("ds").unwrap().model, "deepseek-reasoner");
        let err = c
            .apply_env(&|k| (k == "QUIVER_PROVIDER_KIND").then(|| "gemini".into()))
            .unwrap_err();
        assert!(
            err.to_string().contains("use `openai` or `anthropic`"),
            "{err}"
        );
    }

    #[test]
    fn bad_files_say_where() {
        let cases: &[(&str, &str)] = &[
            ("providers:\n  x:\n    base_url: u\n", "model"),
            (
                "providers:\n  x: {base_url: u, model: m, kind: gemini}\n",
                "gemini",
            ),
            ("colour: blue\n", "colour"),
        ];
        for (text, want) in cases {
            let err = AgentConfig::parse(text, Path::new("agent.yaml")).unwrap_err();
            assert!(err.to_string().contains(want), "{text}: {err}");
        }
        let c = AgentConfig::parse(FILE, Path::new("a.yaml")).unwrap();
        assert!(c.provider("nope").unwrap_err().to_string().contains("ds"));
    }
}
