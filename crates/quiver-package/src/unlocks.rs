//! A skill's `tools:`: what reading it brings into the tool list, checked against the package.
//!
//! A skill may unlock its own tools (`skills/<s>/tools/`, or an agent skill's own `tools/`)
//! and its package's exposed items (tools, agents, workflows). Without `tools:` it unlocks all
//! of its own tools. Any other name is an error and is left out of [`Skill::unlocks`]: a
//! private or hidden root tool (private tools answer only the package's own agents and
//! workflows), a tool of another skill or agent, another package's item, or a name the package
//! does not define.

use std::path::Path;

use crate::agent::Agent;
use crate::diagnostic::Diagnostic;
use crate::names::PackageId;
use crate::skill::Skill;
use crate::tool::{Tool, ToolScope};
use crate::workflow::Workflow;

/// The items of one package, as a skill's `tools:` sees them.
pub(crate) struct PackageItems<'a> {
    /// The package id (`<id>.<item>` names an item of this package).
    pub id: &'a PackageId,
    /// Every tool that loaded.
    pub tools: &'a [Tool],
    /// Every agent that loaded.
    pub agents: &'a [Agent],
    /// Every workflow that loaded.
    pub workflows: &'a [Workflow],
}

/// Sets `skill.unlocks` from its `tools:` (or to `own`, its own tools, without one), with an
/// error for every name it may not unlock.
pub(crate) fn resolve(
    skill: &mut Skill,
    own: Vec<String>,
    items: &PackageItems<'_>,
    diags: &mut Vec<Diagnostic>,
) {
    let own: Vec<String> = own
        .into_iter()
        .filter(|name| items.tools.iter().any(|t| t.name.as_str() == name))
        .collect();
    // Without `tools:` a skill unlocks its own tools; a written list, even an empty one,
    // unlocks only what it names.
    let Some(tools) = &skill.meta.tools else {
        skill.unlocks = own;
        return;
    };
    let mut unlocks = Vec::new();
    for entry in tools {
        let local = match entry.split_once('.') {
            None => entry.as_str(),
            Some((package, local)) if package == items.id.as_str() => local,
            Some(_) => {
                diags.push(refusal(
                    &skill.file,
                    "skill-tool-not-allowed",
                    format!("`tools` names `{entry}`, an item of another package"),
                    "a skill unlocks only its own tools and its package's exposed items; open the other package instead",
                ));
                continue;
            }
        };
        match check(local, &own, items) {
            Ok(()) => {
                if !unlocks.iter().any(|u| u == local) {
                    unlocks.push(local.to_owned());
                }
            }
            Err((code, why, help)) => diags.push(refusal(
                &skill.file,
                code,
                format!("`tools` names `{entry}`, {why}"),
                help,
            )),
        }
    }
    skill.unlocks = unlocks;
}

type Refusal = (&'static str, &'static str, &'static str);

/// Whether the skill may unlock the package's item `local`, or why not.
fn check(local: &str, own: &[String], items: &PackageItems<'_>) -> Result<(), Refusal> {
    if own.iter().any(|o| o == local) {
        return Ok(());
    }
    if let Some(tool) = items.tools.iter().find(|t| t.name.as_str() == local) {
        return match (&tool.scope, tool.expose && !tool.hidden) {
            (ToolScope::Package, true) => Ok(()),
            (ToolScope::Package, false) => Err((
                "skill-tool-private",
                "a private or hidden tool of the package",
                "private tools answer only the package's own agents and workflows; add `expose: true` to the tool, or move it into this skill's `tools/` folder",
            )),
            _ => Err((
                "skill-tool-not-allowed",
                "a tool of another skill or of an agent",
                "a skill unlocks only its own `tools/` and its package's exposed items",
            )),
        };
    }
    let exposed = items
        .agents
        .iter()
        .find(|a| a.name.as_str() == local)
        .map(|a| a.expose)
        .or_else(|| {
            items
                .workflows
                .iter()
                .find(|w| w.name.as_str() == local)
                .map(|w| w.expose)
        });
    match exposed {
        Some(true) => Ok(()),
        Some(false) => Err((
            "skill-tool-private",
            "a private agent or workflow of the package",
            "add `expose: true` to it, or leave it out of `tools`",
        )),
        None => Err((
            "skill-unknown-tool",
            "which this package does not define",
            "fix the name; a skill unlocks its own tools and its package's exposed items",
        )),
    }
}

fn refusal(file: &Path, code: &'static str, message: String, help: &str) -> Diagnostic {
    Diagnostic::error(code, file, message).with_help(help)
}
