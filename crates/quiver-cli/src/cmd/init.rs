//! `quiver init`: the setup step (as `zhin setup --ai` is for zhin.js). It writes a provider
//! configuration (detected from the environment, given by flags, or asked for; keys stay in
//! the environment), makes the project's package root with a first package that lint passes,
//! runs that package's tool once through the sandbox, and prints what to paste into Claude
//! Code, Codex, Cursor and the MCP Inspector. Running it again changes nothing it made.

use std::io::{BufRead, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use quiver_agent::{AgentConfig, ProviderConfig, ProviderKind};
use serde::Serialize;
use serde_json::{Value, json};

use crate::roots::RootArgs;

/// Arguments of `quiver init`.
#[derive(Debug, clap::Args)]
pub struct InitArgs {
    /// Ask nothing: take the flags and the environment, and defaults for the rest.
    #[arg(long, short = 'y')]
    pub yes: bool,
    /// The provider's protocol (default: detected from the environment).
    #[arg(long, value_enum)]
    pub provider: Option<Kind>,
    /// The provider's base URL.
    #[arg(long)]
    pub base_url: Option<String>,
    /// The model.
    #[arg(long)]
    pub model: Option<String>,
    /// The environment variable that holds the API key (the key itself is never written).
    #[arg(long)]
    pub api_key_env: Option<String>,
    /// The first package's name.
    #[arg(long, default_value = "hello")]
    pub package: String,
    /// Skip running the first package's tool through the sandbox.
    #[arg(long)]
    pub no_sandbox_check: bool,
    /// Print one JSON object instead of text.
    #[arg(long)]
    pub json: bool,
}

/// A provider protocol, as `--provider` takes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Kind {
    /// OpenAI-compatible chat completions (OpenAI, DeepSeek, Qwen, vLLM, Ollama).
    Openai,
    /// Anthropic messages.
    Anthropic,
}

impl From<Kind> for ProviderKind {
    fn from(kind: Kind) -> ProviderKind {
        match kind {
            Kind::Openai => ProviderKind::Openai,
            Kind::Anthropic => ProviderKind::Anthropic,
        }
    }
}

/// A provider kind as the configuration file spells it.
fn kind_name(kind: ProviderKind) -> &'static str {
    match kind {
        ProviderKind::Openai => "openai",
        ProviderKind::Anthropic => "anthropic",
    }
}

/// The provider the flags and the environment describe: the environment read as `quiver chat`
/// reads it ([`AgentConfig::apply_env`]: Quiver's variables over the official SDKs'; an empty
/// variable is unset), the flags over it, and the vendor's defaults
/// ([`ProviderConfig::vendor`]) for what neither names; `None` when nothing names a provider.
pub fn detect(
    args: &InitArgs,
    env: &dyn Fn(&str) -> Option<String>,
) -> miette::Result<Option<ProviderConfig>> {
    let mut config = AgentConfig::default();
    config.apply_env(env).map_err(|e| miette::miette!("{e}"))?;
    let from_env = config.providers.into_values().next();
    let wanted = args.provider.map(ProviderKind::from);
    let provider = match (from_env, wanted) {
        (Some(found), None) => found,
        (Some(found), Some(kind)) if found.kind == kind => found,
        (_, Some(kind)) => ProviderConfig::vendor(kind),
        (None, None) => return Ok(None),
    };
    Ok(Some(completed(
        provider,
        args.base_url.clone(),
        args.model.clone(),
        args.api_key_env.clone(),
    )))
}

/// `provider` with the given fields over its own, and its vendor's defaults for what is still
/// empty.
fn completed(
    mut provider: ProviderConfig,
    base_url: Option<String>,
    model: Option<String>,
    api_key_env: Option<String>,
) -> ProviderConfig {
    let vendor = ProviderConfig::vendor(provider.kind);
    provider.base_url = base_url
        .or(Some(provider.base_url).filter(|u| !u.is_empty()))
        .unwrap_or(vendor.base_url);
    provider.model = model
        .or(Some(provider.model).filter(|m| !m.is_empty()))
        .unwrap_or(vendor.model);
    provider.api_key_env = api_key_env.or(provider.api_key_env).or(vendor.api_key_env);
    provider
}

/// The agent configuration file for `provider`, named after its kind.
pub fn agent_yaml(provider: &ProviderConfig) -> String {
    let quoted = |s: &str| serde_json::to_string(s).unwrap_or_default();
    format!(
        "# Written by `quiver init`. Keys stay in the environment: `api_key_env` names the variable.\ndefault: {kind}\nproviders:\n  {kind}:\n    kind: {kind}\n    base_url: {}\n    api_key_env: {}\n    model: {}\n",
        quoted(&provider.base_url),
        quoted(provider.api_key_env.as_deref().unwrap_or_default()),
        quoted(&provider.model),
        kind = kind_name(provider.kind),
    )
}

/// What one step did.
#[derive(Debug, Serialize)]
struct Step {
    step: &'static str,
    done: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    path: Option<PathBuf>,
}

/// Runs `quiver init`.
pub fn run(roots: &RootArgs, args: InitArgs) -> miette::Result<ExitCode> {
    quiver_package::names::check_name(&args.package)
        .map_err(|e| miette::miette!(help = "names match `[a-z0-9][a-z0-9_-]{{0,63}}`", "{e}"))?;
    let mut steps = Vec::new();
    steps.push(provider_step(&args)?);
    let root = roots
        .roots
        .first()
        .cloned()
        .unwrap_or_else(|| PathBuf::from(".quiver/packages"));
    let package = root.join(&args.package);
    if package.join("quiver.yaml").exists() {
        steps.push(step("package", "kept", &package));
    } else {
        super::new::create_package(&root, &args.package)?;
        steps.push(step("package", "created", &package));
    }
    steps.push(lint_step(&root)?);
    if !args.no_sandbox_check {
        steps.push(sandbox_step(&root, &args.package)?);
    }
    let state = quiver_host::paths::require_state_dir().map_err(crate::roots::fail)?;
    let token = quiver_mcp::owner_token::load_or_create(&state)
        .map_err(|e| miette::miette!("cannot keep the MCP token in `{}`: {e}", state.display()))?;
    steps.push(step(
        "token",
        if token.created { "created" } else { "kept" },
        &token.path,
    ));
    let url = format!(
        "http://{}{}",
        super::serve::DEFAULT_HTTP,
        quiver_mcp::http::MCP_PATH
    );
    let clients = snippets(&url, &token.token);
    if args.json {
        crate::out(&json!({"steps": steps, "clients": clients}).to_string());
    } else {
        for s in &steps {
            let path = s.path.as_ref().map(|p| format!(" {}", p.display()));
            crate::out(&format!(
                "{:<9} {}{}",
                s.step,
                s.done,
                path.unwrap_or_default()
            ));
        }
        for (client, text) in clients.as_object().into_iter().flatten() {
            crate::out(&format!(
                "\n{client}:\n{}",
                text.as_str().unwrap_or_default()
            ));
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn step(step: &'static str, done: &str, path: &Path) -> Step {
    Step {
        step,
        done: done.to_owned(),
        path: Some(path.to_owned()),
    }
}

/// Writes the provider configuration unless one exists; asks at a terminal when nothing
/// describes a provider and `--yes` is not given.
fn provider_step(args: &InitArgs) -> miette::Result<Step> {
    let Some(path) = AgentConfig::default_path() else {
        return Err(miette::miette!(
            help = "set HOME or XDG_CONFIG_HOME",
            "no folder for the provider configuration"
        ));
    };
    if path.exists() {
        return Ok(step("provider", "kept", &path));
    }
    let env = |name: &str| std::env::var(name).ok();
    let provider = match detect(args, &env)? {
        Some(provider) => Some(provider),
        None if !args.yes && std::io::stdin().is_terminal() => ask(args)?,
        None => None,
    };
    let Some(provider) = provider else {
        return Ok(Step {
            step: "provider",
            done: "none: `quiver chat` needs one (quiver init --provider openai --model ...); `quiver serve` does not".into(),
            path: None,
        });
    };
    super::new::write(&path, &agent_yaml(&provider))?;
    Ok(step(
        "provider",
        &format!(
            "{} {} at {}",
            kind_name(provider.kind),
            provider.model,
            provider.base_url
        ),
        &path,
    ))
}

/// Asks for the provider at the terminal (stderr, stdin); an empty answer takes the default.
fn ask(args: &InitArgs) -> miette::Result<Option<ProviderConfig>> {
    let mut input = std::io::stdin().lock();
    let mut prompt = |question: &str, default: &str| -> String {
        let mut stderr = std::io::stderr();
        let _ = write!(stderr, "{question} [{default}]: ");
        let _ = stderr.flush();
        let mut line = String::new();
        let _ = input.read_line(&mut line);
        let line = line.trim();
        if line.is_empty() { default } else { line }.to_owned()
    };
    let kind = match prompt(
        "Provider: openai (any compatible server) or anthropic",
        "openai",
    )
    .as_str()
    {
        "anthropic" => ProviderKind::Anthropic,
        "openai" => ProviderKind::Openai,
        _ => return Ok(None),
    };
    let vendor = ProviderConfig::vendor(kind);
    let key = vendor.api_key_env.clone().unwrap_or_default();
    let base_url = (args.base_url.clone()).unwrap_or_else(|| prompt("Base URL", &vendor.base_url));
    let model = (args.model.clone()).unwrap_or_else(|| prompt("Model", &vendor.model));
    let api_key_env =
        (args.api_key_env.clone()).unwrap_or_else(|| prompt("Variable holding the API key", &key));
    Ok(Some(completed(
        vendor,
        Some(base_url),
        Some(model),
        Some(api_key_env),
    )))
}

/// This binary, run again with `args` under the package root `root`.
fn quiver(root: &Path, args: &[&str]) -> miette::Result<std::process::Output> {
    let exe = std::env::current_exe().map_err(|e| miette::miette!("cannot find quiver: {e}"))?;
    Command::new(exe)
        .arg("--root")
        .arg(root)
        .args(args)
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| miette::miette!("cannot run quiver: {e}"))
}

/// `quiver lint` of the root, which must pass.
fn lint_step(root: &Path) -> miette::Result<Step> {
    let out = quiver(root, &["lint", &root.to_string_lossy()])?;
    if !out.status.success() {
        return Err(miette::miette!(
            "the package root does not pass lint:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(step("lint", "passed", root))
}

/// The first package's tool, run once through the sandbox as `quiver call` runs it.
fn sandbox_step(root: &Path, package: &str) -> miette::Result<Step> {
    let tool = format!("{package}.hello");
    let out = quiver(
        root,
        &["call", &tool, "--args", r#"{"who": "Quiver"}"#, "--yes"],
    )?;
    let printed: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    let result = &printed["outcome"];
    if result["status"] != "ok" {
        return Err(miette::miette!(
            help = "see docs/sandbox.md: the sandbox needs user namespaces (and python3 for this tool)",
            "running `{tool}` through the sandbox failed:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(Step {
        step: "sandbox",
        done: format!("works: `{tool}` answered {}", result["content"]),
        path: None,
    })
}

/// What to paste into each client, for stdio (`quiver serve`) and for `url` with `token`.
fn snippets(url: &str, token: &str) -> Value {
    let http = quiver_mcp::owner_token::client_config(url, token);
    json!({
        "Claude Code": format!(
            "claude mcp add quiver -- quiver serve --stdio\n# or over HTTP, once `quiver serve --http` runs:\nclaude mcp add --transport http quiver {url} --header \"Authorization: Bearer {token}\""
        ),
        "Codex (~/.codex/config.toml)": "[mcp_servers.quiver]\ncommand = \"quiver\"\nargs = [\"serve\", \"--stdio\"]",
        "Cursor (.cursor/mcp.json)": format!(
            "{{\"mcpServers\": {{\"quiver\": {{\"command\": \"quiver\", \"args\": [\"serve\", \"--stdio\"]}}}}}}\n# or over HTTP:\n{http}"
        ),
        "MCP Inspector": format!(
            "npx @modelcontextprotocol/inspector quiver serve --stdio\n# or its CLI over HTTP:\nnpx @modelcontextprotocol/inspector --cli {url} --transport http --header \"Authorization: Bearer {token}\" --method tools/list"
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(provider: Option<Kind>, model: Option<&str>) -> InitArgs {
        InitArgs {
            yes: true,
            provider,
            base_url: None,
            model: model.map(str::to_owned),
            api_key_env: None,
            package: "hello".into(),
            no_sandbox_check: true,
            json: false,
        }
    }

    #[test]
    fn the_provider_comes_from_flags_then_quivers_variables_then_the_sdks() {
        // (flags, environment, kind, base URL, model, key variable); None: no provider.
        type Case = (
            InitArgs,
            &'static [(&'static str, &'static str)],
            Option<(&'static str, &'static str, &'static str, &'static str)>,
        );
        let cases: Vec<Case> = vec![
            (args(None, None), &[], None),
            (args(None, None), &[("OPENAI_API_KEY", "")], None),
            (
                args(None, None),
                &[("OPENAI_API_KEY", "sk-x")],
                Some((
                    "openai",
                    "https://api.openai.com/v1",
                    "gpt-4.1-mini",
                    "OPENAI_API_KEY",
                )),
            ),
            (
                args(None, None),
                &[("ANTHROPIC_BASE_URL", "http://proxy:8080")],
                Some((
                    "anthropic",
                    "http://proxy:8080",
                    "claude-sonnet-4-5",
                    "ANTHROPIC_API_KEY",
                )),
            ),
            (
                args(None, None),
                &[
                    ("OPENAI_BASE_URL", "https://api.deepseek.com/v1"),
                    ("QUIVER_MODEL", "deepseek-chat"),
                    ("QUIVER_API_KEY_ENV", "DEEPSEEK_API_KEY"),
                ],
                Some((
                    "openai",
                    "https://api.deepseek.com/v1",
                    "deepseek-chat",
                    "DEEPSEEK_API_KEY",
                )),
            ),
            (
                args(None, None),
                &[
                    ("QUIVER_BASE_URL", "http://127.0.0.1:11434/v1"),
                    ("OPENAI_BASE_URL", "http://x"),
                ],
                Some((
                    "openai",
                    "http://127.0.0.1:11434/v1",
                    "gpt-4.1-mini",
                    "OPENAI_API_KEY",
                )),
            ),
            (
                args(Some(Kind::Anthropic), Some("claude-x")),
                &[("OPENAI_API_KEY", "sk-x")],
                Some((
                    "anthropic",
                    "https://api.anthropic.com",
                    "claude-x",
                    "ANTHROPIC_API_KEY",
                )),
            ),
        ];
        for (flags, env, want) in cases {
            let env_fn = |name: &str| {
                env.iter()
                    .find(|(k, _)| *k == name)
                    .map(|(_, v)| (*v).to_owned())
            };
            let got = detect(&flags, &env_fn).unwrap().map(|p| {
                let key = p.api_key_env.unwrap_or_default();
                (kind_name(p.kind), p.base_url, p.model, key)
            });
            let want = want.map(|(k, u, m, e)| (k, u.to_owned(), m.to_owned(), e.to_owned()));
            assert_eq!(got, want, "{env:?}");
        }
    }

    #[test]
    fn the_written_configuration_reads_back() {
        let mut provider = ProviderConfig::new(
            ProviderKind::Openai,
            "https://api.deepseek.com/v1",
            "deepseek-chat",
        );
        provider.api_key_env = Some("DEEPSEEK_API_KEY".into());
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("agent.yaml");
        std::fs::write(&path, agent_yaml(&provider)).unwrap();
        let config = AgentConfig::load(Some(&path)).unwrap();
        let chosen = config.providers.get("openai").unwrap();
        assert_eq!(chosen.kind, ProviderKind::Openai);
        assert_eq!(chosen.base_url, provider.base_url);
        assert_eq!(chosen.model, provider.model);
        assert_eq!(chosen.api_key_env.as_deref(), Some("DEEPSEEK_API_KEY"));
    }
}
