//! Renderings of the model-facing view under a character budget: the package list, the
//! `<available_skills>` XML of `skills-ref to-prompt`, and a Markdown list.
//!
//! Truncation is deterministic: whole blocks are kept in catalog order while they fit, and
//! every block that does not fit is named in [`Rendered::dropped`].

use serde::Serialize;

use quiver_package::skills_ref::skill_prompt_entry;

use crate::catalog::{Catalog, Entry, EntryKind};

/// A rendering and what the budget left out.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Rendered {
    /// The text.
    pub text: String,
    /// Ids of the packages or skills left out, in catalog order.
    pub dropped: Vec<String>,
}

impl Rendered {
    /// A warning naming what was dropped, if anything was.
    pub fn warning(&self) -> Option<String> {
        (!self.dropped.is_empty()).then(|| {
            format!(
                "the catalog exceeded its budget; left out: {}",
                self.dropped.join(", ")
            )
        })
    }
}

/// The package catalog of DESIGN.md §3: one line per package, then one per exposed item
/// (marked `(SOP)` or `(agent)`) and one per further skill. When the budget leaves packages
/// out, the list ends with `- N more packages: use tool_search`, a line counted in the budget
/// (packages are left out until it fits), so the model knows the list is not everything.
pub fn package_list(catalog: &Catalog, admit: &dyn Fn(&Entry) -> bool, budget: usize) -> Rendered {
    let blocks = package_blocks(catalog, admit)
        .into_iter()
        .map(|(id, entries)| {
            let mut text = String::new();
            for e in entries {
                match e.kind {
                    EntryKind::Package => {
                        let p = e.package.map(|i| &catalog.packages()[i].package);
                        let name = p.map_or(e.id.as_str(), |p| p.name.as_str());
                        if name == e.id {
                            text.push_str(&format!("- {}: {}\n", e.id, one_line(&e.summary)));
                        } else {
                            text.push_str(&format!(
                                "- {name} ({}): {}\n",
                                e.id,
                                one_line(&e.summary)
                            ));
                        }
                    }
                    EntryKind::Skill => {
                        // The package's own skill is opened by the package id itself.
                        if e.id.contains('/') {
                            text.push_str(&format!(
                                "  - {} (skill): {}\n",
                                e.id,
                                one_line(&e.summary)
                            ));
                        }
                    }
                    kind => {
                        let mark = match kind {
                            EntryKind::Agent => " (agent)",
                            EntryKind::Workflow => " (SOP)",
                            _ => "",
                        };
                        let name = e.wire.as_deref().unwrap_or(&e.id);
                        text.push_str(&format!("  - {name}{mark}: {}\n", one_line(&e.summary)));
                    }
                }
            }
            (id, text)
        })
        .collect();
    fit_with_more(blocks, budget)
}

/// The line that ends a package list the budget cut.
fn more_line(count: usize) -> String {
    let s = if count == 1 { "" } else { "s" };
    format!("- {count} more package{s}: use tool_search\n")
}

/// [`fit`], then, when blocks were dropped, [`more_line`] added within the budget: blocks are
/// dropped from the end until the list and that line fit.
fn fit_with_more(blocks: Vec<(String, String)>, budget: usize) -> Rendered {
    let sizes: Vec<usize> = blocks.iter().map(|(_, b)| b.chars().count()).collect();
    let mut rendered = fit(blocks.clone(), budget);
    if rendered.dropped.is_empty() {
        return rendered;
    }
    let mut kept = blocks.len() - rendered.dropped.len();
    let mut used: usize = sizes[..kept].iter().sum();
    while kept > 0 && used + more_line(blocks.len() - kept).chars().count() > budget {
        kept -= 1;
        used -= sizes[kept];
    }
    let more = more_line(blocks.len() - kept);
    let mut text: String = blocks[..kept].iter().map(|(_, b)| b.as_str()).collect();
    if more.chars().count() <= budget {
        text.push_str(&more);
    }
    rendered.text = text;
    rendered.dropped = blocks[kept..].iter().map(|(id, _)| id.clone()).collect();
    rendered
}

/// `<available_skills>` XML in the exact shape `skills-ref to-prompt` prints; the location
/// is the skill's id path (`weather/SKILL.md`), never a host path.
pub fn available_skills_xml(
    catalog: &Catalog,
    admit: &dyn Fn(&Entry) -> bool,
    budget: usize,
) -> Rendered {
    let blocks: Vec<(String, String)> = catalog
        .entries()
        .iter()
        .filter(|e| e.kind == EntryKind::Skill && admit(e))
        .map(|e| {
            let skill = skill_of(catalog, e);
            let (name, description) = skill.map_or((e.id.as_str(), e.summary.as_str()), |s| {
                (s.name.as_str(), s.description.as_str())
            });
            let location = format!("{}/SKILL.md", e.id);
            let text = format!("{}\n", skill_prompt_entry(name, description, &location));
            (e.id.clone(), text)
        })
        .collect();
    let open = "<available_skills>\n";
    let close = "</available_skills>";
    let inner = fit(blocks, budget.saturating_sub(open.len() + close.len()));
    Rendered {
        text: format!("{open}{}{close}", inner.text),
        dropped: inner.dropped,
    }
}

/// A Markdown list: a heading per package, its items and skills as bullets.
pub fn markdown(catalog: &Catalog, admit: &dyn Fn(&Entry) -> bool, budget: usize) -> Rendered {
    let blocks = package_blocks(catalog, admit)
        .into_iter()
        .map(|(id, entries)| {
            let mut text = String::new();
            for e in entries {
                match e.kind {
                    EntryKind::Package => {
                        text.push_str(&format!("### `{}`\n\n{}\n\n", e.id, one_line(&e.summary)))
                    }
                    EntryKind::Skill => {
                        text.push_str(&format!("- skill `{}`: {}\n", e.id, one_line(&e.summary)))
                    }
                    _ => text.push_str(&format!(
                        "- {} `{}`: {}\n",
                        kind_word(e.kind),
                        e.wire.as_deref().unwrap_or(&e.id),
                        one_line(&e.summary)
                    )),
                }
            }
            text.push('\n');
            (id, text)
        })
        .collect();
    fit(blocks, budget)
}

fn kind_word(kind: EntryKind) -> &'static str {
    match kind {
        EntryKind::Agent => "agent",
        EntryKind::Workflow => "SOP",
        EntryKind::Builtin => "built-in",
        _ => "tool",
    }
}

/// The admitted entries grouped by package (a package whose every entry is refused is left out).
fn package_blocks<'a>(
    catalog: &'a Catalog,
    admit: &dyn Fn(&Entry) -> bool,
) -> Vec<(String, Vec<&'a Entry>)> {
    let mut blocks: Vec<(String, Vec<&Entry>)> = Vec::new();
    for e in catalog.entries() {
        if e.kind == EntryKind::Builtin || !admit(e) {
            continue;
        }
        if e.kind == EntryKind::Package {
            blocks.push((e.id.clone(), vec![e]));
        } else if let Some((_, block)) =
            blocks.last_mut().filter(|(_, b)| b[0].package == e.package)
        {
            block.push(e);
        }
    }
    blocks.retain(|(_, b)| b.len() > 1 || has_own_skill(catalog, b[0]));
    blocks
}

fn has_own_skill(catalog: &Catalog, e: &Entry) -> bool {
    e.package
        .and_then(|i| catalog.packages()[i].package.skill.as_ref())
        .is_some_and(|s| !s.meta.disable_model_invocation)
}

fn skill_of<'a>(catalog: &'a Catalog, e: &Entry) -> Option<&'a quiver_package::skill::Skill> {
    let p = &catalog.packages()[e.package?].package;
    p.all_skills().find(|s| s.id == e.id)
}

/// Keeps blocks in order while they fit in `budget` characters; once one does not fit, it and
/// every later block are dropped, so the result never depends on block sizes further on.
fn fit(blocks: Vec<(String, String)>, budget: usize) -> Rendered {
    let mut text = String::new();
    let mut used = 0;
    let mut dropped = Vec::new();
    for (id, block) in blocks {
        let size = block.chars().count();
        if dropped.is_empty() && used + size <= budget {
            text.push_str(&block);
            used += size;
        } else {
            dropped.push(id);
        }
    }
    Rendered { text, dropped }
}

/// Collapses whitespace so a description stays on one line.
fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}
