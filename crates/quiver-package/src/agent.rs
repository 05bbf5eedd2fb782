//! Sub-agents: `agents/<agent>.md` (frontmatter + system prompt) or the folder form
//! `agents/<agent>/{agent.yaml, system.md, boundaries.md, conventions.md, ...}`.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::common::WordList;
use crate::diagnostic::Diagnostic;
use crate::names::ItemName;
use crate::skill::Skill;
use crate::workflow::Workflow;
use crate::{frontmatter, yaml};

/// A parsed agent.
#[derive(Debug, Clone, Serialize)]
pub struct Agent {
    /// Its name.
    pub name: ItemName,
    /// `agents/<agent>.md` or the folder's `agent.yaml`.
    pub file: PathBuf,
    /// What it does (shown when it is exposed).
    pub description: String,
    /// The model the user chose for it, when set.
    pub model: Option<String>,
    /// Tools it may use (names, `pkg.tool`, or meta-tools such as `read_skill`).
    pub tools: Vec<String>,
    /// Skills it may read.
    pub skills: Vec<String>,
    /// Callable like a tool with `{task}`.
    pub expose: bool,
    /// Most model turns per task.
    pub max_turns: Option<u32>,
    /// Platforms whose sessions it serves automatically.
    pub platforms: Option<Vec<String>>,
    /// Its prompt parts.
    pub prompt: AgentPrompt,
    /// Skills under its own `skills/` (folder form).
    pub own_skills: Vec<Skill>,
    /// Workflows under its own `workflows/` (folder form).
    pub own_workflows: Vec<Workflow>,
    /// Files under `hooks/`, relative to the agent folder.
    pub hooks: Vec<String>,
    /// Files under `knowledge/`, relative to the agent folder.
    pub knowledge: Vec<String>,
}

/// The text parts of an agent's system prompt.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct AgentPrompt {
    /// The body (file form) or `system.md`.
    pub system: String,
    /// `boundaries.md`: what it must not do.
    pub boundaries: Option<String>,
    /// `conventions.md`: how it works.
    pub conventions: Option<String>,
}

/// The metadata fields of an agent.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentMeta {
    /// What it does.
    #[serde(default)]
    pub description: String,
    /// The model.
    pub model: Option<String>,
    /// Tools.
    #[serde(default)]
    pub tools: WordList,
    /// Skills.
    #[serde(default)]
    pub skills: WordList,
    /// Exposed.
    #[serde(default)]
    pub expose: bool,
    /// Turn limit.
    pub max_turns: Option<u32>,
    /// Platforms.
    pub platforms: Option<Vec<String>>,
}

/// Parses the file form `agents/<agent>.md`.
pub fn parse_agent_file(
    text: &str,
    file: &Path,
) -> (Option<(AgentMeta, AgentPrompt)>, Vec<Diagnostic>) {
    let split = match frontmatter::split(text) {
        Ok(split) => split,
        Err(err) => {
            return (
                None,
                vec![Diagnostic::error("agent-frontmatter", file, err.to_string())
                    .at(1, 1)
                    .with_help("start the file with `---`, the agent's fields, `---`, then its system prompt")],
            );
        }
    };
    let meta: AgentMeta = match yaml::parse(&split.yaml, file, split.yaml_line) {
        Ok(meta) => meta,
        Err(diag) => return (None, vec![diag]),
    };
    let mut diags = check_meta(&meta, file, &|key| {
        yaml::key_line(&split.yaml, split.yaml_line, key)
    });
    if split.body.trim().is_empty() {
        diags.push(Diagnostic::warning(
            "agent-empty-prompt",
            file,
            "the agent has no system prompt",
        ));
    }
    let prompt = AgentPrompt {
        system: split.body.trim().to_owned(),
        ..AgentPrompt::default()
    };
    let ok = !diags.iter().any(Diagnostic::is_error);
    (ok.then_some((meta, prompt)), diags)
}

/// Parses the folder form's `agent.yaml`.
pub fn parse_agent_yaml(text: &str, file: &Path) -> (Option<AgentMeta>, Vec<Diagnostic>) {
    let meta: AgentMeta = match yaml::parse(text, file, 1) {
        Ok(meta) => meta,
        Err(diag) => return (None, vec![diag]),
    };
    let diags = check_meta(&meta, file, &|key| yaml::key_line(text, 1, key));
    let ok = !diags.iter().any(Diagnostic::is_error);
    (ok.then_some(meta), diags)
}

fn check_meta(
    meta: &AgentMeta,
    file: &Path,
    line: &dyn Fn(&str) -> Option<u64>,
) -> Vec<Diagnostic> {
    let mut diags = Vec::new();
    if meta.expose && meta.description.trim().is_empty() {
        diags.push(
            Diagnostic::error(
                "agent-missing-description",
                file,
                "an exposed agent needs a `description`",
            )
            .at_line(line("expose"))
            .with_help("add one line saying what tasks to give it"),
        );
    }
    diags.extend(crate::text::check(
        file,
        "description",
        &meta.description,
        line("description"),
    ));
    if meta.platforms.as_ref().is_some_and(Vec::is_empty) {
        diags.push(crate::tool::empty_list_error(
            file,
            "platforms",
            line("platforms"),
        ));
    }
    diags
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_form() {
        let text = "---\ndescription: 写日报\ntools: [notes.add, read_skill]\nexpose: true\nmax_turns: 6\n---\n你是日报助手。\n";
        let (parsed, diags) = parse_agent_file(text, Path::new("a.md"));
        assert!(diags.is_empty(), "{diags:?}");
        let (meta, prompt) = parsed.unwrap();
        assert_eq!(meta.tools.0, ["notes.add", "read_skill"]);
        assert_eq!(prompt.system, "你是日报助手。");
        assert_eq!(meta.max_turns, Some(6));
    }

    #[test]
    fn problems() {
        let cases: &[(&str, &[&str])] = &[
            ("---\nexpose: true\n---\nx", &["agent-missing-description"]),
            (
                "---\ndescription: d\nplatforms: []\n---\nx",
                &["empty-restriction-list"],
            ),
            ("---\ndescription: d\n---\n", &["agent-empty-prompt"]),
            (
                "---\ndescription: d\nmax_turns: many\n---\nx",
                &["yaml-wrong-type"],
            ),
            ("no fences", &["agent-frontmatter"]),
        ];
        for (text, want) in cases {
            let (_, d) = parse_agent_file(text, Path::new("a.md"));
            let codes: Vec<_> = d.iter().map(|d| d.code).collect();
            assert_eq!(codes, *want, "{text}");
        }
        let (m, d) = parse_agent_yaml(
            "description: d\ntools: notes.add read_skill\n",
            Path::new("agent.yaml"),
        );
        assert!(d.is_empty());
        assert_eq!(m.unwrap().tools.0, ["notes.add", "read_skill"]);
    }
}
