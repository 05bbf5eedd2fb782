//! The JSON action format for models without native tool calls: one JSON object
//! `{"thought": "...", "tool": "<name>", "args": {...}}` per reply (`skill` is accepted for
//! `tool`, as seed 001 writes it), or plain text for the final answer.

use quiver_catalog::{Catalog, ItemKind};
use serde_json::{Map, Value, json};

use crate::provider::{ToolSpec, parse_arguments};

/// What a reply in the action format says.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Call a tool.
    Call {
        /// Why, as the model said.
        thought: Option<String>,
        /// The tool's name (or, from `skill`, a skill id).
        tool: String,
        /// Whether the name came as `skill`.
        as_skill: bool,
        /// The arguments.
        args: Value,
    },
    /// The final answer.
    Answer(String),
    /// A reply that looks like an action but cannot be read; the text says why.
    Malformed(String),
}

/// Reads a reply in the action format.
pub fn parse(reply: &str) -> Action {
    let text = strip_fence(reply.trim());
    let Some(start) = text.find('{') else {
        return Action::Answer(reply.trim().to_owned());
    };
    // Prose that merely mentions braces is an answer; an object at the start, or one that
    // names a tool, is an action.
    let looks_like_action = start == 0
        || text.contains("\"tool\"")
        || text.contains("\"skill\"")
        || text.contains("\"args\"");
    if !looks_like_action {
        return Action::Answer(reply.trim().to_owned());
    }
    let mut stream = serde_json::Deserializer::from_str(&text[start..]).into_iter::<Value>();
    let object = match stream.next() {
        Some(Ok(Value::Object(map))) => map,
        Some(Ok(_)) => return Action::Malformed("the reply is JSON but not an object".into()),
        Some(Err(e)) => return Action::Malformed(format!("the JSON does not parse: {e}")),
        None => return Action::Malformed("the reply holds no JSON object".into()),
    };
    from_object(&object)
}

fn from_object(object: &Map<String, Value>) -> Action {
    let thought = object
        .get("thought")
        .and_then(Value::as_str)
        .map(str::to_owned);
    let (tool, as_skill) = match (object.get("tool"), object.get("skill")) {
        (Some(Value::String(t)), _) if !t.trim().is_empty() => (t.trim().to_owned(), false),
        (_, Some(Value::String(s))) if !s.trim().is_empty() => (s.trim().to_owned(), true),
        (Some(Value::Null) | None, None | Some(Value::Null)) => {
            for key in ["answer", "final", "final_answer", "reply", "response"] {
                if let Some(Value::String(answer)) = object.get(key) {
                    return Action::Answer(answer.clone());
                }
            }
            return Action::Malformed(
                "the object has no `tool`; name the tool in `tool`, or answer in plain text".into(),
            );
        }
        _ => return Action::Malformed("`tool` must be a tool name (a string)".into()),
    };
    let args = match object
        .get("args")
        .or_else(|| object.get("arguments"))
        .or_else(|| object.get("input"))
    {
        None | Some(Value::Null) => Value::Object(Map::new()),
        Some(Value::Object(map)) => Value::Object(map.clone()),
        Some(Value::String(raw)) => match parse_arguments(raw) {
            v @ Value::Object(_) => v,
            _ => return Action::Malformed("`args` must be a JSON object".into()),
        },
        Some(_) => return Action::Malformed("`args` must be a JSON object".into()),
    };
    Action::Call {
        thought,
        tool,
        as_skill,
        args,
    }
}

/// The call an action makes: the tool it names, with its arguments. A name given as `skill`
/// runs the tool it names when it names one (a tool offered this turn, or a catalog tool by
/// its qualified or wire name, which the pipeline then judges as any call); only a name that
/// is no tool reads the skill of that id.
pub fn route(
    tool: String,
    as_skill: bool,
    args: Value,
    offered: &[ToolSpec],
    catalog: &Catalog,
) -> (String, Value) {
    if !as_skill || offered.iter().any(|t| t.name == tool) {
        return (tool, args);
    }
    let catalog_tool = catalog
        .item(&tool)
        .or_else(|| catalog.item_by_wire(&tool))
        .filter(|item| item.kind == ItemKind::Tool)
        .and_then(|item| item.wire.clone());
    match catalog_tool {
        Some(wire) => (wire, args),
        None => ("read_skill".to_owned(), json!({"id": tool})),
    }
}

/// Removes a Markdown code fence around the whole reply.
fn strip_fence(text: &str) -> &str {
    let Some(rest) = text.strip_prefix("```") else {
        return text;
    };
    let rest = rest.trim_start_matches(|c: char| c.is_ascii_alphanumeric());
    rest.strip_suffix("```").unwrap_or(rest).trim()
}

/// The instructions and tool list that teach the format, for the system prompt.
pub fn instructions(tools: &[ToolSpec]) -> String {
    let mut text = String::from(
        "You cannot call tools natively. To use a tool, reply with exactly one JSON object and nothing else:\n\
         {\"thought\": \"why this tool\", \"tool\": \"<tool name>\", \"args\": {<arguments>}}\n\
         The tool's result comes back in the next message. When no tool is needed, or when you have the answer, reply in plain text, not JSON.\n\nTools:\n",
    );
    for t in tools {
        text.push_str(&format!(
            "- {}: {}\n  args: {}\n",
            t.name,
            t.description.replace('\n', " "),
            t.input_schema
        ));
    }
    text
}

/// The feedback for a malformed action.
pub fn feedback(why: &str) -> String {
    format!(
        "Your last reply could not be read as an action: {why}. Reply with exactly one JSON object {{\"thought\": \"...\", \"tool\": \"<tool name>\", \"args\": {{...}}}}, or answer in plain text if no tool is needed."
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn call(tool: &str, as_skill: bool, args: Value) -> Action {
        Action::Call {
            thought: None,
            tool: tool.into(),
            as_skill,
            args,
        }
    }

    #[test]
    fn replies_in_every_shape() {
        let cases: Vec<(&str, Action)> = vec![
            ("北京明天晴。", Action::Answer("北京明天晴。".into())),
            (
                r#"{"tool": "tool_search", "args": {"query": "天气"}}"#,
                call("tool_search", false, json!({"query": "天气"})),
            ),
            (
                "```json\n{\"skill\": \"daily-report/weekly\"}\n```",
                call("daily-report/weekly", true, json!({})),
            ),
            (
                r#"{"tool": "calc__evaluate", "arguments": "{\"expression\": \"1+1\"}"} trailing words"#,
                call("calc__evaluate", false, json!({"expression": "1+1"})),
            ),
            (
                r#"Sure: {"tool": "x", "args": {}}"#,
                call("x", false, json!({})),
            ),
            (
                r#"{"thought": "done", "answer": "42"}"#,
                Action::Answer("42".into()),
            ),
            (
                "Use {braces} like this.",
                Action::Answer("Use {braces} like this.".into()),
            ),
            (
                r#"{"tool": "x", "args": [1]}"#,
                Action::Malformed("`args` must be a JSON object".into()),
            ),
            (
                r#"{"tool": 3}"#,
                Action::Malformed("`tool` must be a tool name (a string)".into()),
            ),
            (
                r#"{"thought": "hmm"}"#,
                Action::Malformed(
                    "the object has no `tool`; name the tool in `tool`, or answer in plain text"
                        .into(),
                ),
            ),
        ];
        for (reply, want) in cases {
            let got = match parse(reply) {
                Action::Call {
                    tool,
                    as_skill,
                    args,
                    ..
                } => call(&tool, as_skill, args),
                other => other,
            };
            assert_eq!(got, want, "{reply}");
        }
        assert!(
            matches!(parse(r#"{"tool": "x", "args": {"#), Action::Malformed(m) if m.contains("does not parse"))
        );
    }

    /// Issue 12 D18: seed 001 writes `{"thought", "skill", "args"}` naming a catalog tool;
    /// that runs the tool, and only a name that is no tool reads a skill.
    #[test]
    fn a_skill_key_that_names_a_tool_runs_the_tool() {
        let packages =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/packages");
        let catalog = Catalog::load_dirs(&[packages.as_path()]);
        let offered = [ToolSpec {
            name: "tool_search".into(),
            description: String::new(),
            input_schema: json!({"type": "object"}),
        }];
        let args = json!({"city": "北京"});
        let cases = [
            (
                "weather.forecast",
                true,
                ("weather__forecast", args.clone()),
            ),
            (
                "weather__forecast",
                true,
                ("weather__forecast", args.clone()),
            ),
            ("tool_search", true, ("tool_search", args.clone())),
            ("weather", true, ("read_skill", json!({"id": "weather"}))),
            (
                "weather.nope",
                true,
                ("read_skill", json!({"id": "weather.nope"})),
            ),
            (
                "weather.forecast",
                false,
                ("weather.forecast", args.clone()),
            ),
        ];
        for (name, as_skill, (want_name, want_args)) in cases {
            let reply = if as_skill {
                json!({"thought": "查天气", "skill": name, "args": args})
            } else {
                json!({"thought": "查天气", "tool": name, "args": args})
            };
            let Action::Call {
                tool,
                as_skill,
                args,
                ..
            } = parse(&reply.to_string())
            else {
                panic!("{reply}: not a call");
            };
            let got = route(tool, as_skill, args, &offered, &catalog);
            assert_eq!(got, (want_name.to_owned(), want_args), "{reply}");
        }
    }
}
