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

/// The meta-tools: one enum that names, describes and applies each (a name that is none of
/// them is never run as one).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetaTool {
    /// `read_skill(id)`.
    ReadSkill,
    /// `tool_search(query)`.
    ToolSearch,
    /// `load_tool(name)`.
    LoadTool,
    /// `ask_user(question)`.
    AskUser,
    /// `run_skill_script(skill, script, args)`.
    RunSkillScript,
    /// `tool_output(call, offset)`.
    ToolOutput,
    /// `get_run(run_id)`.
    GetRun,
}

impl MetaTool {
    /// Every meta-tool, in the order they are offered.
    pub const ALL: [MetaTool; 7] = [
        MetaTool::ReadSkill,
        MetaTool::ToolSearch,
        MetaTool::LoadTool,
        MetaTool::AskUser,
        MetaTool::RunSkillScript,
        MetaTool::ToolOutput,
        MetaTool::GetRun,
    ];

    /// Its wire name.
    pub const fn name(self) -> &'static str {
        match self {
            MetaTool::ReadSkill => "read_skill",
            MetaTool::ToolSearch => "tool_search",
            MetaTool::LoadTool => "load_tool",
            MetaTool::AskUser => "ask_user",
            MetaTool::RunSkillScript => "run_skill_script",
            MetaTool::ToolOutput => "tool_output",
            MetaTool::GetRun => get_run::GET_RUN,
        }
    }

    /// The meta-tool called `name`, if one is.
    pub fn from_name(name: &str) -> Option<MetaTool> {
        MetaTool::ALL.into_iter().find(|m| m.name() == name)
    }

    /// Runs it in `turn` with `arguments`.
    pub(super) fn apply(
        self,
        turn: &mut Turn<'_>,
        call_id: &str,
        arguments: &Value,
        audit: &mut AuditEntry,
    ) -> Result<CallOutcome, RuntimeError> {
        let ok = |content: Value| CallOutcome::new(call_id, CallStatus::Ok, content);
        Ok(match self {
            MetaTool::ReadSkill => match text_arg(arguments, "id") {
                Some(id) => turn.read_skill(call_id, &id, Invoker::Model, audit)?,
                None => missing(call_id, "id"),
            },
            MetaTool::ToolSearch => match text_arg(arguments, "query") {
                Some(query) => ok(turn.tool_search(&query)?),
                None => missing(call_id, "query"),
            },
            MetaTool::LoadTool => turn.load_tool(call_id, arguments)?,
            MetaTool::AskUser => turn.ask_user(call_id, arguments),
            MetaTool::ToolOutput => turn.tool_output(call_id, arguments)?,
            MetaTool::GetRun => turn.get_run(call_id, arguments),
            MetaTool::RunSkillScript => turn.run_skill_script(call_id, arguments, audit)?,
        })
    }

    /// What the model is told of it: its description and input schema.
    pub(super) fn definition(self) -> ToolDefinition {
        let (description, schema) = match self {
            MetaTool::ReadSkill => (
                "Open a skill or package from the catalog by id (`weather`, `weather/cities`), or read a file under a skill (`weather/references/cities.md`). Returns its instructions and tools.",
                json!({"type": "object", "properties": {"id": {"type": "string", "description": "skill id, package id, or skill file"}}, "required": ["id"]}),
            ),
            MetaTool::ToolSearch => (
                "Search the catalog for tools, skills and packages that fit a request. Tools found become callable.",
                json!({"type": "object", "properties": {"query": {"type": "string", "description": "what the user wants, in their words"}}, "required": ["query"]}),
            ),
            MetaTool::LoadTool => (
                "Load a tool by name so it can be called.",
                json!({"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}),
            ),
            MetaTool::AskUser => (
                "Ask the user a question and wait for the answer.",
                json!({"type": "object", "properties": {"question": {"type": "string"}}, "required": ["question"]}),
            ),
            MetaTool::RunSkillScript => (
                "Run a script from the scripts/ folder of an active skill.",
                json!({"type": "object", "properties": {"skill": {"type": "string"}, "script": {"type": "string"}, "args": {"type": "array", "items": {"type": "string"}}}, "required": ["skill", "script"]}),
            ),
            MetaTool::GetRun => get_run::definition(),
            MetaTool::ToolOutput => (
                "Read more of a tool result that was trimmed (`has_more`).",
                json!({"type": "object", "properties": {"call": {"type": "string"}, "offset": {"type": "integer", "minimum": 0}}, "required": ["call"]}),
            ),
        };
        ToolDefinition {
            name: self.name().to_owned(),
            description: description.to_owned(),
            input_schema: schema,
        }
    }
}

/// The meta-tools' wire names, in [`MetaTool::ALL`]'s order.
pub const META_TOOLS: [&str; 7] = {
    let mut names = [""; 7];
    let mut i = 0;
    while i < names.len() {
        names[i] = MetaTool::ALL[i].name();
        i += 1;
    }
    names
};

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

#[cfg(test)]
mod tests {
    use super::*;

    /// Each meta-tool's name parses back to it, and its definition carries that name.
    #[test]
    fn names_parse_back_and_name_their_definitions() {
        for tool in MetaTool::ALL {
            assert_eq!(MetaTool::from_name(tool.name()), Some(tool));
            assert_eq!(tool.definition().name, tool.name());
        }
        assert_eq!(META_TOOLS, MetaTool::ALL.map(MetaTool::name));
        for name in ["", "run_skill", "READ_SKILL", "weather__forecast"] {
            assert_eq!(MetaTool::from_name(name), None, "{name}");
        }
    }
}
