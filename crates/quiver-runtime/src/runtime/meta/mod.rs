//! The meta-tools, one file each: [`read_skill`], [`tool_search`], [`load_tool`],
//! [`ask_user`], [`run_skill_script`], [`tool_output`] and [`get_run`]. They answer from the runtime itself
//! (the catalog, the session's state, the person); the one that runs something,
//! `run_skill_script`, hands its script to the call pipeline as an `action` call of the skill's
//! package.

pub(super) mod ask_user;
pub(super) mod get_run;
pub(super) mod load_tool;
pub(super) mod read_skill;
pub(super) mod run_skill_script;
pub(super) mod tool_output;
pub(super) mod tool_search;

use quiver_store::AuditEntry;
use serde_json::{Value, json};

use super::{CallOutcome, CallStatus, RuntimeError, ToolDefinition, Turn};
use read_skill::Invoker;

/// The meta-tools, by wire name.
pub const META_TOOLS: [&str; 7] = [
    "read_skill",
    "tool_search",
    "load_tool",
    "ask_user",
    "run_skill_script",
    "tool_output",
    get_run::GET_RUN,
];

/// The string argument `key` of `arguments`.
pub(super) fn text_arg(arguments: &Value, key: &str) -> Option<String> {
    arguments
        .get(key)
        .and_then(Value::as_str)
        .map(str::to_owned)
}

/// A meta-tool's answer to arguments without a required string `key`.
fn missing(call_id: &str, key: &str) -> CallOutcome {
    CallOutcome::new(
        call_id,
        CallStatus::Invalid,
        json!({"error": format!("invalid arguments: `{key}` is required")}),
    )
}

impl Turn<'_> {
    /// Runs the meta-tool `name` with `arguments`.
    pub(super) fn meta_call(
        &mut self,
        call_id: &str,
        name: &str,
        arguments: &Value,
        audit: &mut AuditEntry,
    ) -> Result<CallOutcome, RuntimeError> {
        let ok = |content: Value| CallOutcome::new(call_id, CallStatus::Ok, content);
        Ok(match name {
            "read_skill" => match text_arg(arguments, "id") {
                Some(id) => self.read_skill(call_id, &id, Invoker::Model, audit)?,
                None => missing(call_id, "id"),
            },
            "tool_search" => match text_arg(arguments, "query") {
                Some(query) => ok(self.tool_search(&query)?),
                None => missing(call_id, "query"),
            },
            "load_tool" => self.load_tool(call_id, arguments)?,
            "ask_user" => self.ask_user(call_id, arguments),
            "tool_output" => self.tool_output(call_id, arguments)?,
            get_run::GET_RUN => self.get_run(call_id, arguments),
            _ => self.run_skill_script(call_id, arguments, audit)?,
        })
    }
}

/// The definition the model gets of the meta-tool `name`.
pub(super) fn meta_definition(name: &str) -> ToolDefinition {
    let (description, schema) = match name {
        "read_skill" => (
            "Open a skill or package from the catalog by id (`weather`, `weather/cities`), or read a file under a skill (`weather/references/cities.md`). Returns its instructions and tools.",
            json!({"type": "object", "properties": {"id": {"type": "string", "description": "skill id, package id, or skill file"}}, "required": ["id"]}),
        ),
        "tool_search" => (
            "Search the catalog for tools, skills and packages that fit a request. Tools found become callable.",
            json!({"type": "object", "properties": {"query": {"type": "string", "description": "what the user wants, in their words"}}, "required": ["query"]}),
        ),
        "load_tool" => (
            "Load a tool by name so it can be called.",
            json!({"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}),
        ),
        "ask_user" => (
            "Ask the user a question and wait for the answer.",
            json!({"type": "object", "properties": {"question": {"type": "string"}}, "required": ["question"]}),
        ),
        "run_skill_script" => (
            "Run a script from the scripts/ folder of an active skill.",
            json!({"type": "object", "properties": {"skill": {"type": "string"}, "script": {"type": "string"}, "args": {"type": "array", "items": {"type": "string"}}}, "required": ["skill", "script"]}),
        ),
        get_run::GET_RUN => get_run::definition(),
        _ => (
            "Read more of a tool result that was trimmed (`has_more`).",
            json!({"type": "object", "properties": {"call": {"type": "string"}, "offset": {"type": "integer", "minimum": 0}}, "required": ["call"]}),
        ),
    };
    ToolDefinition {
        name: name.to_owned(),
        description: description.to_owned(),
        input_schema: schema,
    }
}
