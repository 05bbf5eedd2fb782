//! The loop's own system prompt text: the rules every agent follows, and a package agent's
//! prompt (`AGENTS.md`, then its body or `system.md`, `boundaries.md`, `conventions.md`).

use quiver_package::Package;
use quiver_package::agent::Agent;

/// The rules appended to every system prompt.
pub const RULES: &str = "Rules:\n\
- Do not call a tool when none is needed: greetings, chat and questions you can answer from what you know or from the conversation get a direct answer.\n\
- Call only the tools you were given, or tools you found with `tool_search`; never invent a tool name.\n\
- A result that says \"refused\" is final: do not call that tool again in this turn; tell the user what was refused.\n\
- When a result says the arguments are invalid, fix them from the message and try again; when it tells you to stop, ask the user instead.\n\
- Answer in the user's language.";

/// The system prompt of `agent` of `package`, as the agent sees it (no catalog, no other
/// package's sections): the package's `AGENTS.md`, then the agent's own text.
pub fn agent_prompt(package: &Package, agent: &Agent) -> String {
    let mut parts: Vec<String> = Vec::new();
    if let Some(rules) = package
        .agents_md
        .as_deref()
        .filter(|t| !t.trim().is_empty())
    {
        parts.push(rules.trim().to_owned());
    }
    if !agent.prompt.system.trim().is_empty() {
        parts.push(agent.prompt.system.trim().to_owned());
    }
    if let Some(b) = agent
        .prompt
        .boundaries
        .as_deref()
        .filter(|t| !t.trim().is_empty())
    {
        parts.push(format!("## Boundaries\n{}", b.trim()));
    }
    if let Some(c) = agent
        .prompt
        .conventions
        .as_deref()
        .filter(|t| !t.trim().is_empty())
    {
        parts.push(format!("## Conventions\n{}", c.trim()));
    }
    parts.join("\n\n")
}

/// `prompt`, today's date, and the rules.
pub fn with_rules(prompt: &str, today: &str) -> String {
    let mut text = prompt.trim().to_owned();
    if !text.contains("Today's date is") {
        if !text.is_empty() {
            text.push_str("\n\n");
        }
        text.push_str(&format!("Today's date is {today}."));
    }
    text.push_str("\n\n");
    text.push_str(RULES);
    text
}
