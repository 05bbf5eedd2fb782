//! `tool.yaml`: a callable with a JSON Schema input.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::common::{Permissions, Seconds, WordList};
use crate::diagnostic::Diagnostic;
use crate::limits::ResourceLimits;
use crate::names::{ItemName, check_name};
use crate::yaml;

/// Default timeout of a tool call.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);
/// Default characters of output before trimming.
pub const DEFAULT_MAX_OUTPUT: usize = 4000;

/// What a tool does to the world.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Category {
    /// Changes the world (the default).
    Action,
    /// Only reads.
    Perception,
    /// Only reasons.
    Decision,
}

/// When a call needs someone's confirmation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Approval {
    /// Never ask (permissions and sandbox still apply).
    Never,
    /// Ask for action tools and open-ended permissions (the default).
    OnRisk,
    /// Ask on the first call per session.
    Once,
    /// Ask the configured approver on every call.
    Always,
    /// A person approves every call.
    Human,
}

/// The declared risk of a tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Risk {
    /// Every call needs a fresh human approval.
    Dangerous,
    /// Declared safe (cannot lower a name on the built-in dangerous list).
    Safe,
}

/// The kind of harm a dangerous tool can do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RiskCategory {
    /// Acts on other members of a group.
    Member,
    /// Publishes in someone's name.
    Publish,
    /// Moves money.
    Funds,
    /// Changes the bot's own identity.
    Identity,
}

/// The parts of a tool's description.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Description {
    /// One line for the catalog and search.
    pub summary: String,
    /// When the model should use it.
    pub when_to_use: String,
    /// When not to, naming the neighbour to use instead.
    pub when_not_to_use: String,
    /// Rules for the arguments.
    pub input_rules: String,
    /// An example call.
    pub example: String,
}

impl Description {
    /// The catalog line: `summary`, or the first sentence of the text.
    pub fn summary_line(&self) -> String {
        if !self.summary.trim().is_empty() {
            return first_sentence(&self.summary);
        }
        first_sentence(&self.when_to_use)
    }

    /// Each part with its key, in a fixed order.
    pub fn parts(&self) -> [(&'static str, &str); 5] {
        [
            ("summary", &self.summary),
            ("when_to_use", &self.when_to_use),
            ("when_not_to_use", &self.when_not_to_use),
            ("input_rules", &self.input_rules),
            ("example", &self.example),
        ]
    }

    /// A description block written as `summary: ...` / `when_to_use: ...` lines (seed 001's
    /// `description: |`), read as its parts: each key starts a part, and lines without one
    /// continue it. `None` when the first line does not start with a part's key.
    pub fn from_block(text: &str) -> Option<Description> {
        const KEYS: [&str; 5] = [
            "summary",
            "when_to_use",
            "when_not_to_use",
            "input_rules",
            "example",
        ];
        let mut texts: [Vec<&str>; 5] = Default::default();
        let mut current: Option<usize> = None;
        for line in text.lines() {
            let trimmed = line.trim();
            let keyed = trimmed.split_once(':').and_then(|(key, rest)| {
                KEYS.iter()
                    .position(|k| *k == key.trim())
                    .map(|i| (i, rest.trim()))
            });
            match (keyed, current) {
                (Some((i, rest)), _) => {
                    current = Some(i);
                    texts[i].push(rest);
                }
                (None, Some(i)) => texts[i].push(trimmed),
                (None, None) if trimmed.is_empty() => {}
                (None, None) => return None,
            }
        }
        current?;
        let [summary, when_to_use, when_not_to_use, input_rules, example] =
            texts.map(|lines| lines.join("\n").trim().to_owned());
        Some(Description {
            summary,
            when_to_use,
            when_not_to_use,
            input_rules,
            example,
        })
    }

    /// Every part joined in a fixed order, as sent to the model.
    pub fn full(&self) -> String {
        let parts = [
            ("", &self.summary),
            ("When to use: ", &self.when_to_use),
            ("When not to use: ", &self.when_not_to_use),
            ("Input rules: ", &self.input_rules),
            ("Example: ", &self.example),
        ];
        parts
            .iter()
            .filter(|(_, text)| !text.trim().is_empty())
            .map(|(label, text)| format!("{label}{}", text.trim()))
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// The first sentence of `text` (up to `.`, `。`, `!`, `?`, `！`, `？` or a line break).
pub fn first_sentence(text: &str) -> String {
    let text = text.trim();
    let mut end = text.len();
    for (i, c) in text.char_indices() {
        let next = text[i + c.len_utf8()..].chars().next();
        let ends = match c {
            '\n' | '。' | '！' | '？' => true,
            '.' | '!' | '?' => next.is_none_or(char::is_whitespace),
            _ => false,
        };
        if ends {
            end = if c == '\n' { i } else { i + c.len_utf8() };
            break;
        }
    }
    text[..end].trim().to_owned()
}

/// How a tool is run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Run {
    /// One process per call.
    Command(Vec<String>),
    /// One long-lived process per package speaking JSON lines.
    Worker(Vec<String>),
    /// A tool of an MCP server.
    Mcp {
        /// The server's name.
        server: String,
        /// The tool's name on that server.
        tool: String,
    },
}

/// A request that must (or must not) find the tool, with the arguments it should produce.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Example {
    /// The user's request.
    pub query: String,
    /// The arguments the request should produce, when given.
    pub arguments: Option<Value>,
}

/// Where a tool lives, which decides when it is visible.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
#[serde(tag = "kind", content = "name", rename_all = "lowercase")]
pub enum ToolScope {
    /// `tools/<tool>/`: a root tool of the package.
    Package,
    /// `skills/<skill>/tools/<tool>/`: unlocked when that skill is active.
    Skill(String),
    /// `agents/<agent>/tools/<tool>/`: only that agent's.
    Agent(String),
}

/// A parsed and validated tool.
#[derive(Debug, Clone, Serialize)]
pub struct Tool {
    /// Its local name.
    pub name: ItemName,
    /// Its `tool.yaml`.
    pub file: PathBuf,
    /// Where it lives.
    pub scope: ToolScope,
    /// Version, when declared.
    pub version: Option<String>,
    /// Description parts.
    pub description: Description,
    /// Category (`action` when missing).
    pub category: Category,
    /// Words and phrases that should find it.
    pub triggers: Vec<String>,
    /// JSON Schema of the input (root `type: object`).
    pub input: Value,
    /// JSON Schema of the output, when declared.
    pub output: Option<Value>,
    /// Permissions within the package ceiling.
    pub permission: Permissions,
    /// Timeout of one call.
    pub timeout: Duration,
    /// Approval mode.
    pub approval: Approval,
    /// Declared risk.
    pub risk: Option<Risk>,
    /// Risk category.
    pub risk_category: Option<RiskCategory>,
    /// Platforms it is restricted to.
    pub platforms: Option<Vec<String>>,
    /// Scopes it is restricted to.
    pub scopes: Option<Vec<String>>,
    /// Permission rules the caller must meet.
    pub permissions: Vec<String>,
    /// Part of the package's public face.
    pub expose: bool,
    /// Offered every turn without a search.
    pub always_loaded: bool,
    /// Requests that must find it.
    pub examples: Vec<Example>,
    /// Requests that must not put it first.
    pub negative_examples: Vec<String>,
    /// Seconds an identical `perception` call may be answered from cache.
    pub cache: Option<u64>,
    /// How it runs.
    pub run: Run,
    /// Registered and callable by exact name, never listed or found.
    pub hidden: bool,
    /// Safe to run twice with the same arguments.
    pub idempotent: bool,
    /// Characters of output before trimming.
    pub max_output: usize,
    /// Resource limits it asks for instead of the sandbox's defaults (lower, or higher
    /// within the operator's ceiling).
    pub limits: ResourceLimits,
}

/// `tool.yaml` as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTool {
    name: Option<String>,
    version: Option<VersionText>,
    description: Option<RawDescription>,
    category: Option<Category>,
    #[serde(default)]
    triggers: Vec<String>,
    input: Option<Value>,
    #[serde(rename = "inputSchema")]
    input_schema: Option<Value>,
    inputs: Option<Value>,
    output: Option<Value>,
    #[serde(default)]
    permission: Permissions,
    timeout: Option<Seconds>,
    approval: Option<Approval>,
    risk: Option<Risk>,
    risk_category: Option<RiskCategory>,
    platforms: Option<Vec<String>>,
    scopes: Option<Vec<String>>,
    #[serde(default)]
    permissions: Vec<String>,
    #[serde(default)]
    expose: bool,
    #[serde(default)]
    always_loaded: bool,
    #[serde(default)]
    examples: Vec<Value>,
    #[serde(default)]
    negative_examples: Vec<String>,
    cache: Option<u64>,
    run: Option<RawRun>,
    #[serde(default)]
    hidden: bool,
    #[serde(default)]
    idempotent: bool,
    max_output: Option<usize>,
    #[serde(default)]
    limits: ResourceLimits,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum VersionText {
    Text(String),
    Number(f64),
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum RawDescription {
    Text(String),
    Parts(Description),
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRun {
    command: Option<WordList>,
    worker: Option<WordList>,
    mcp: Option<String>,
    tool: Option<String>,
}

/// Parses and validates one `tool.yaml`. `dir_name` is its folder's name, the default name.
/// Returns the tool (unless an error stops it) and every diagnostic.
pub fn parse_tool(
    text: &str,
    file: &Path,
    dir_name: &str,
    scope: ToolScope,
) -> (Option<Tool>, Vec<Diagnostic>) {
    let mut diags = Vec::new();
    let raw: RawTool = match yaml::parse(text, file, 1) {
        Ok(raw) => raw,
        Err(diag) => {
            diags.push(
                diag.with_help("see docs/package-format.md#toolyaml for the fields of `tool.yaml`"),
            );
            return (None, diags);
        }
    };
    let line = |key: &str| yaml::key_line(text, 1, key);

    let name = raw.name.clone().unwrap_or_else(|| dir_name.to_owned());
    let name: ItemName = match name.parse() {
        Ok(name) => name,
        Err(err) => {
            diags.push(
                Diagnostic::error("tool-invalid-name", file, err.to_string())
                    .at_line(line("name"))
                    .with_help("tool names match `[a-z0-9][a-z0-9_-]{0,63}`"),
            );
            return (None, diags);
        }
    };
    if raw.name.is_some() && name.as_str() != dir_name {
        diags.push(
            Diagnostic::warning(
                "tool-name-dir-mismatch",
                file,
                format!("the tool is named `{name}` but its folder is `{dir_name}`"),
            )
            .at_line(line("name"))
            .with_help("rename the folder or the tool so they agree"),
        );
    }

    let description = match raw.description {
        Some(RawDescription::Text(text)) => match Description::from_block(&text) {
            Some(parts) => parts,
            None => Description {
                summary: text,
                ..Description::default()
            },
        },
        Some(RawDescription::Parts(parts)) => parts,
        None => Description::default(),
    };
    if description.summary_line().is_empty() {
        diags.push(
            Diagnostic::error(
                "tool-missing-description",
                file,
                "the tool has no description",
            )
            .at_line(line("description"))
            .with_help("add `description:` (a string, or `summary:` and `when_to_use:` parts)"),
        );
        return (None, diags);
    }

    let category = raw.category.unwrap_or_else(|| {
        diags.push(
            Diagnostic::warning(
                "tool-missing-category",
                file,
                "the tool has no `category`; it is treated as `action`",
            )
            .with_help("add `category: perception` for a tool that only reads, `decision` for one that only reasons"),
        );
        Category::Action
    });

    let input = match (raw.input, raw.input_schema, raw.inputs) {
        (Some(input), _, _) => Some(input),
        (None, Some(input), _) => {
            diags.push(alias_warning(file, "inputSchema", line("inputSchema")));
            Some(input)
        }
        (None, None, Some(input)) => {
            diags.push(alias_warning(file, "inputs", line("inputs")));
            Some(input)
        }
        (None, None, None) => None,
    };
    let input = input.unwrap_or_else(|| serde_json::json!({"type": "object", "properties": {}}));
    let input_line = line("input").or(line("inputSchema")).or(line("inputs"));
    if input.get("type").and_then(Value::as_str) != Some("object") {
        diags.push(
            Diagnostic::error(
                "tool-input-not-object",
                file,
                "the input schema's root must have `type: object`",
            )
            .at_line(input_line)
            .with_help("wrap the parameters in `type: object` and `properties:`"),
        );
        return (None, diags);
    }
    let validator = match crate::schema::compile(&input) {
        Ok(v) => v,
        Err(message) => {
            diags.push(
                Diagnostic::error(
                    "tool-invalid-schema",
                    file,
                    format!("the input schema is invalid: {message}"),
                )
                .at_line(input_line),
            );
            return (None, diags);
        }
    };
    if let Some(output) = &raw.output
        && let Err(message) = crate::schema::compile(output)
    {
        diags.push(
            Diagnostic::error(
                "tool-invalid-schema",
                file,
                format!("the output schema is invalid: {message}"),
            )
            .at_line(line("output")),
        );
        return (None, diags);
    }

    let run = match raw.run {
        Some(run) => match to_run(run) {
            Ok(run) => run,
            Err(message) => {
                diags.push(
                    Diagnostic::error("tool-invalid-run", file, message)
                        .at_line(line("run"))
                        .with_help("use one of `run: {command: [...]}`, `run: {worker: [...]}` or `run: {mcp: SERVER, tool: NAME}`"),
                );
                return (None, diags);
            }
        },
        None => match default_run(file) {
            Some(run) => run,
            None => {
                diags.push(
                    Diagnostic::error(
                        "tool-missing-run",
                        file,
                        "the tool declares no `run` and has no `main.py` or `run.sh`",
                    )
                    .with_help("add `run: {command: [python3, main.py]}` or similar"),
                );
                return (None, diags);
            }
        },
    };

    let mut examples = Vec::new();
    for value in raw.examples {
        match to_example(value) {
            Some(example) => examples.push(example),
            None => diags.push(
                Diagnostic::error(
                    "tool-invalid-example",
                    file,
                    "each example must be a request string or `{query: ..., arguments: {...}}`",
                )
                .at_line(line("examples")),
            ),
        }
    }
    for example in &examples {
        if let Some(arguments) = &example.arguments
            && let Some(message) = crate::schema::first_error(&validator, arguments)
        {
            diags.push(
                Diagnostic::error(
                    "tool-example-invalid-arguments",
                    file,
                    format!(
                        "the arguments of example `{}` do not match the input schema: {message}",
                        example.query
                    ),
                )
                .at_line(line("examples")),
            );
        }
    }
    for (key, list) in [("platforms", &raw.platforms), ("scopes", &raw.scopes)] {
        diags.extend(restriction_errors(file, key, list.as_deref(), line(key)));
    }
    if raw.timeout.is_some_and(|t| t.0.is_zero()) {
        diags.push(
            Diagnostic::error(
                "tool-invalid-timeout",
                file,
                "`timeout: 0` would stop every call before it starts",
            )
            .at_line(line("timeout"))
            .with_help("give the seconds a call may take, such as `timeout: 30`, or remove it for the default"),
        );
    }
    for (part, text) in description.parts() {
        diags.extend(crate::text::check(file, part, text, line("description")));
    }
    for trigger in &raw.triggers {
        diags.extend(crate::text::check(
            file,
            "triggers",
            trigger,
            line("triggers"),
        ));
    }
    let mut permission = raw.permission;
    diags.extend(crate::common::check_permission_paths(
        &mut permission,
        text,
        file,
        "permission",
        line("permission"),
    ));
    if raw.cache.is_some() && category != Category::Perception {
        diags.push(
            Diagnostic::warning(
                "tool-cache-not-perception",
                file,
                "`cache` only applies to `perception` tools and is ignored",
            )
            .at_line(line("cache")),
        );
    }
    for rule in &raw.permissions {
        if let Err(message) = crate::rules::check_rule(rule) {
            diags.push(
                Diagnostic::error("invalid-permission-rule", file, message)
                    .at_line(line("permissions"))
                    .with_help("rules: adapter(name), group(id,...), private(id,...), channel(id,...), user(id,...), role(master|trusted|user), platform(adapter,perm)"),
            );
        }
    }
    if raw.always_loaded && (raw.hidden || !raw.expose || scope != ToolScope::Package) {
        diags.push(
            Diagnostic::warning(
                "tool-always-loaded-ignored",
                file,
                "`always_loaded` is ignored for private, hidden and skill- or agent-scoped tools",
            )
            .at_line(line("always_loaded")),
        );
    }
    if diags.iter().any(Diagnostic::is_error) {
        return (None, diags);
    }

    let tool = Tool {
        name,
        file: file.to_path_buf(),
        scope,
        version: raw.version.map(|v| match v {
            VersionText::Text(t) => t,
            VersionText::Number(n) => n.to_string(),
        }),
        description,
        category,
        triggers: raw.triggers,
        input,
        output: raw.output,
        permission,
        timeout: raw.timeout.map_or(DEFAULT_TIMEOUT, |s| s.0),
        approval: raw.approval.unwrap_or(Approval::OnRisk),
        risk: raw.risk,
        risk_category: raw.risk_category,
        platforms: raw.platforms,
        scopes: raw.scopes,
        permissions: raw.permissions,
        expose: raw.expose,
        always_loaded: raw.always_loaded,
        examples,
        negative_examples: raw.negative_examples,
        cache: raw.cache,
        run,
        hidden: raw.hidden,
        idempotent: raw.idempotent,
        max_output: raw.max_output.unwrap_or(DEFAULT_MAX_OUTPUT),
        limits: raw.limits,
    };
    (Some(tool), diags)
}

fn to_example(value: Value) -> Option<Example> {
    match value {
        Value::String(query) => Some(Example {
            query,
            arguments: None,
        }),
        Value::Object(mut map) => {
            let query = match map.remove("query")? {
                Value::String(q) => q,
                _ => return None,
            };
            let arguments = map.remove("arguments");
            map.is_empty().then_some(Example { query, arguments })
        }
        _ => None,
    }
}

fn alias_warning(file: &Path, key: &str, line: Option<u64>) -> Diagnostic {
    Diagnostic::warning(
        "tool-input-alias",
        file,
        format!("`{key}` is read as `input`"),
    )
    .at_line(line)
    .with_help(format!("rename `{key}:` to `input:`"))
}

/// The values a `scopes` list may hold: the kinds of conversation on a platform.
pub const SCOPES: [&str; 3] = ["group", "private", "channel"];

/// The errors of a `platforms` or `scopes` list: declared but empty, or (`scopes`) a value
/// that is not one of [`SCOPES`].
pub(crate) fn restriction_errors(
    file: &Path,
    key: &str,
    list: Option<&[String]>,
    line: Option<u64>,
) -> Vec<Diagnostic> {
    let Some(list) = list else {
        return Vec::new();
    };
    if list.is_empty() {
        return vec![empty_list_error(file, key, line)];
    }
    if key != "scopes" {
        return Vec::new();
    }
    list.iter()
        .filter(|scope| !SCOPES.contains(&scope.as_str()))
        .map(|scope| {
            Diagnostic::error(
                "unknown-scope",
                file,
                format!("`{scope}` is not a scope, so the list would never match it"),
            )
            .at_line(line)
            .with_help("scopes are `group`, `private` and `channel`")
        })
        .collect()
}

/// The error for a `platforms` or `scopes` list that is declared but empty.
pub(crate) fn empty_list_error(file: &Path, key: &str, line: Option<u64>) -> Diagnostic {
    Diagnostic::error(
        "empty-restriction-list",
        file,
        format!("`{key}` is declared but empty, which would match nothing"),
    )
    .at_line(line)
    .with_help(format!(
        "remove `{key}:` to allow everywhere, or list at least one entry"
    ))
}

fn to_run(run: RawRun) -> Result<Run, String> {
    match (run.command, run.worker, run.mcp, run.tool) {
        (Some(cmd), None, None, None) if !cmd.0.is_empty() => Ok(Run::Command(cmd.0)),
        (None, Some(cmd), None, None) if !cmd.0.is_empty() => Ok(Run::Worker(cmd.0)),
        (None, None, Some(server), Some(tool)) => {
            check_name(&server).map_err(|e| format!("invalid MCP server name: {e}"))?;
            Ok(Run::Mcp { server, tool })
        }
        (None, None, Some(_), None) => Err("`run.mcp` needs `run.tool`, the tool's name on that server".into()),
        _ => Err("`run` must have exactly one of a non-empty `command`, a non-empty `worker`, or `mcp` with `tool`".into()),
    }
}

/// Extensions of files that are run as a program's script.
const SCRIPT_EXTENSIONS: [&str; 10] = [
    "py", "sh", "bash", "js", "mjs", "ts", "rb", "pl", "lua", "php",
];

/// The first argument of a `command` or `worker` run naming a file outside the package
/// `files`: a relative path (resolved against the tool's folder, as the sandbox does) that
/// leaves the package folder, through a link or lexically (`../../x.py`), or an absolute path
/// to a script. A program looked up in the `PATH` (`python3`) or given by absolute path
/// (`/usr/bin/env`) is not an entry point.
pub(crate) fn entry_outside_package(
    tool: &Tool,
    files: &crate::source::PackageDir,
) -> Option<String> {
    let (Run::Command(argv) | Run::Worker(argv)) = &tool.run else {
        return None;
    };
    let dir = tool.file.parent()?;
    argv.iter().enumerate().find_map(|(i, arg)| {
        let path = Path::new(arg);
        if arg.starts_with('-') || (i == 0 && !arg.contains('/')) {
            return None;
        }
        if path.is_absolute() {
            let script = path
                .extension()
                .is_some_and(|e| SCRIPT_EXTENSIONS.iter().any(|s| e == *s));
            return (i > 0 && script).then(|| arg.clone());
        }
        let joined = dir.join(path);
        let inside = files
            .holds(&joined)
            .unwrap_or_else(|| normalize(&joined).starts_with(normalize(files.path())));
        (!inside).then(|| arg.clone())
    })
}

/// `path` with `.` and `..` resolved lexically.
fn normalize(path: &Path) -> std::path::PathBuf {
    let mut out = std::path::PathBuf::new();
    for part in path.components() {
        match part {
            std::path::Component::CurDir => {}
            std::path::Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

fn default_run(file: &Path) -> Option<Run> {
    let dir = file.parent()?;
    if dir.join("main.py").is_file() {
        Some(Run::Command(vec!["python3".into(), "main.py".into()]))
    } else if dir.join("run.sh").is_file() {
        Some(Run::Command(vec!["sh".into(), "run.sh".into()]))
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> (Option<Tool>, Vec<Diagnostic>) {
        parse_tool(
            text,
            Path::new("tools/t/tool.yaml"),
            "t",
            ToolScope::Package,
        )
    }

    fn codes(d: &[Diagnostic]) -> Vec<&'static str> {
        d.iter().map(|d| d.code).collect()
    }

    const RUN: &str = "run: {command: [python3, main.py]}\n";

    #[test]
    fn minimal_tool_defaults() {
        let (tool, diags) = parse(&format!("description: Get the weather.\n{RUN}"));
        let tool = tool.unwrap();
        assert_eq!(codes(&diags), ["tool-missing-category"]);
        assert_eq!(tool.category, Category::Action);
        assert_eq!(tool.approval, Approval::OnRisk);
        assert_eq!(tool.timeout, DEFAULT_TIMEOUT);
        assert_eq!(tool.max_output, DEFAULT_MAX_OUTPUT);
        assert!(!tool.expose && !tool.hidden && !tool.idempotent);
        assert_eq!(tool.name.as_str(), "t");
        assert_eq!(tool.limits, ResourceLimits::default());
        let (tool, _) = parse(&format!(
            "description: x\ncategory: perception\nlimits: {{memory: 32MiB, cpu: 0.1}}\n{RUN}"
        ));
        let limits = tool.unwrap().limits;
        assert_eq!(
            (limits.memory, limits.cpu),
            (
                Some(crate::limits::Bytes(32 << 20)),
                Some(crate::limits::Cores(100))
            )
        );
    }

    #[test]
    fn table_of_problems() {
        let cases: &[(&str, &[&str])] = &[
            ("category: perception\n", &["tool-missing-description"]),
            (
                "description: x\ncategory: perception\ninput: {type: string}\n",
                &["tool-input-not-object"],
            ),
            (
                "description: x\ncategory: perception\ninputSchema: {type: object}\n",
                &["tool-input-alias"],
            ),
            (
                "description: x\ncategory: perception\ninputs: {type: object}\n",
                &["tool-input-alias"],
            ),
            (
                "description: x\ncategory: perception\ninput: {type: object, properties: {a: {type: 7}}}\n",
                &["tool-invalid-schema"],
            ),
            (
                "description: x\ncategory: perception\nname: Bad\n",
                &["tool-invalid-name"],
            ),
            (
                "description: x\ncategory: perception\nname: other\n",
                &["tool-name-dir-mismatch"],
            ),
            (
                "description: x\ncategory: perception\nplatforms: []\n",
                &["empty-restriction-list"],
            ),
            (
                "description: x\ncategory: perception\npermissions: [bogus(1)]\n",
                &["invalid-permission-rule"],
            ),
            (
                "description: x\ncategory: action\ncache: 5\n",
                &["tool-cache-not-perception"],
            ),
            (
                "description: x\ncategory: perception\nalways_loaded: true\n",
                &["tool-always-loaded-ignored"],
            ),
            (
                "description: x\ncategory: sometimes\n",
                &["yaml-wrong-type"],
            ),
            (
                "description: x\ncategory: perception\nfoo: 1\n",
                &["yaml-wrong-type"],
            ),
            (
                "description: x\ncategory: perception\nlimits: {memory: lots}\n",
                &["yaml-wrong-type"],
            ),
            (
                "description: x\ncategory: perception\ninput: {type: object, properties: {n: {type: integer}}}\nexamples: [{query: q, arguments: {n: two}}]\n",
                &["tool-example-invalid-arguments"],
            ),
        ];
        for (yaml, want) in cases {
            let text = if yaml.contains("run:") {
                (*yaml).to_owned()
            } else {
                format!("{yaml}{RUN}")
            };
            let (_, diags) = parse(&text);
            assert_eq!(codes(&diags), *want, "{yaml}");
        }
    }

    #[test]
    fn run_kinds() {
        let cases: &[(&str, Option<Run>)] = &[
            (
                "run: {command: python3 main.py}",
                Some(Run::Command(vec!["python3".into(), "main.py".into()])),
            ),
            (
                "run: {worker: [node, w.js]}",
                Some(Run::Worker(vec!["node".into(), "w.js".into()])),
            ),
            (
                "run: {mcp: files, tool: read}",
                Some(Run::Mcp {
                    server: "files".into(),
                    tool: "read".into(),
                }),
            ),
            ("run: {mcp: files}", None),
            ("run: {command: []}", None),
            ("run: {command: [a], worker: [b]}", None),
        ];
        for (yaml, want) in cases {
            let (tool, diags) = parse(&format!("description: x\ncategory: decision\n{yaml}\n"));
            assert_eq!(tool.map(|t| t.run), *want, "{yaml}: {diags:?}");
        }
    }

    #[test]
    fn description_parts() {
        let (tool, _) = parse(&format!(
            "description:\n  summary: 查询天气。包括气温\n  when_to_use: 用户问天气\n  when_not_to_use: 出行建议用 travel\ncategory: perception\n{RUN}"
        ));
        let d = tool.unwrap().description;
        assert_eq!(d.summary_line(), "查询天气。");
        assert_eq!(
            d.full(),
            "查询天气。包括气温\nWhen to use: 用户问天气\nWhen not to use: 出行建议用 travel"
        );
    }

    #[test]
    fn first_sentences() {
        let cases = [
            ("Get the weather. Then more.", "Get the weather."),
            ("Version 1.2 is out", "Version 1.2 is out"),
            ("第一句。第二句", "第一句。"),
            ("line one\nline two", "line one"),
            ("", ""),
        ];
        for (text, want) in cases {
            assert_eq!(first_sentence(text), want);
        }
    }
}
