//! System prompt assembly: prompt sections under a budget, then today's date and the package
//! catalog under its own budget (DESIGN.md §3; issue 3 point 2).
//!
//! Sections are placed by layer (`role`, `task`, `context`, `safety`) and, within a layer, by
//! `order` (higher first). Under the budget, `opportunistic` sections are dropped before
//! `preferred` ones, lowest `order` first within a class; `required` sections are never dropped,
//! and if they alone cannot fit, assembly fails naming them. Each section is first cut to its own
//! `max_chars` with a visible marker.

use quiver_package::prompt::{PromptSection, Retention};
use serde::Serialize;
use thiserror::Error;

/// The marker appended where a section was cut to its `max_chars`.
pub const CUT_MARKER: &str = "[…cut]";

/// Budgets of the system prompt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PromptBudget {
    /// Characters for all prompt sections together (`system_prompt_max_chars`).
    pub sections: usize,
    /// Characters for the package catalog.
    pub catalog: usize,
}

impl Default for PromptBudget {
    fn default() -> Self {
        Self {
            sections: 8_000,
            catalog: 6_000,
        }
    }
}

/// What assembly left out or shortened.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct PromptReport {
    /// Sections cut to their `max_chars`.
    pub cut: Vec<String>,
    /// Sections dropped under the budget, in the order they were dropped.
    pub dropped: Vec<String>,
    /// Catalog entries (packages or skills) left out under the catalog budget.
    pub catalog_dropped: Vec<String>,
}

/// Why a system prompt cannot be assembled.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum PromptError {
    /// The `required` sections alone exceed the budget.
    #[error("the required prompt sections {} need {needed} characters, more than the budget of {budget}", names.join(", "))]
    RequiredTooLong {
        /// The required sections, `<package>.<section>`.
        names: Vec<String>,
        /// Characters they need.
        needed: usize,
        /// The budget.
        budget: usize,
    },
}

/// A prompt section with the name it is reported under (`<package>.<section>`).
#[derive(Debug, Clone, Copy)]
pub struct NamedSection<'a> {
    /// `<package>.<section>`.
    pub name: &'a str,
    /// The section.
    pub section: &'a PromptSection,
}

/// Assembles the admitted `sections` under `budget` characters.
pub fn assemble_sections(
    sections: &[NamedSection<'_>],
    budget: usize,
    report: &mut PromptReport,
) -> Result<String, PromptError> {
    let mut blocks: Vec<(NamedSection<'_>, String)> = sections
        .iter()
        .map(|s| {
            let (text, cut) = render_section(s.section);
            if cut {
                report.cut.push(s.name.to_owned());
            }
            (*s, text)
        })
        .collect();
    blocks.sort_by(|(a, _), (b, _)| {
        (a.section.layer, std::cmp::Reverse(a.section.order), a.name).cmp(&(
            b.section.layer,
            std::cmp::Reverse(b.section.order),
            b.name,
        ))
    });
    let size = |blocks: &[(NamedSection<'_>, String)]| -> usize {
        blocks.iter().map(|(_, t)| t.chars().count()).sum::<usize>()
            + blocks.len().saturating_sub(1) * 2
    };
    // Drop order: opportunistic, then preferred; lowest `order` first; then by name.
    let mut candidates: Vec<(Retention, i64, String)> = blocks
        .iter()
        .filter(|(s, _)| s.section.retention != Retention::Required)
        .map(|(s, _)| (s.section.retention, s.section.order, s.name.to_owned()))
        .collect();
    candidates.sort();
    let mut candidates = candidates.into_iter();
    while size(&blocks) > budget {
        match candidates.next() {
            Some((_, _, name)) => {
                blocks.retain(|(s, _)| s.name != name);
                report.dropped.push(name);
            }
            None => {
                return Err(PromptError::RequiredTooLong {
                    names: blocks.iter().map(|(s, _)| s.name.to_owned()).collect(),
                    needed: size(&blocks),
                    budget,
                });
            }
        }
    }
    Ok(blocks
        .into_iter()
        .map(|(_, t)| t)
        .collect::<Vec<_>>()
        .join("\n\n"))
}

/// A section's text with its title, cut to `max_chars` (the marker included); and whether it was cut.
fn render_section(section: &PromptSection) -> (String, bool) {
    let body = match &section.title {
        Some(title) => format!("## {title}\n{}", section.content),
        None => section.content.clone(),
    };
    match section.max_chars {
        Some(max) if body.chars().count() > max => {
            let keep = max.saturating_sub(CUT_MARKER.chars().count());
            let mut text: String = body.chars().take(keep).collect();
            text.push_str(CUT_MARKER);
            (text, true)
        }
        _ => (body, false),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use quiver_package::prompt::{Layer, Profile};

    fn section(
        layer: Layer,
        order: i64,
        retention: Retention,
        content: &str,
        max_chars: Option<usize>,
    ) -> PromptSection {
        PromptSection {
            name: "s".parse().unwrap(),
            file: "p.md".into(),
            title: None,
            layer,
            order,
            retention,
            max_chars,
            profiles: vec![Profile::Interactive],
            platforms: None,
            scopes: None,
            content: content.to_owned(),
        }
    }

    fn run(
        sections: &[(&str, PromptSection)],
        budget: usize,
    ) -> (Result<String, PromptError>, PromptReport) {
        let named: Vec<NamedSection<'_>> = sections
            .iter()
            .map(|(n, s)| NamedSection {
                name: n,
                section: s,
            })
            .collect();
        let mut report = PromptReport::default();
        (assemble_sections(&named, budget, &mut report), report)
    }

    #[test]
    fn placement_by_layer_then_order() {
        let sections = [
            (
                "p.ctx",
                section(Layer::Context, 0, Retention::Preferred, "C", None),
            ),
            (
                "p.role_low",
                section(Layer::Role, 1, Retention::Preferred, "R1", None),
            ),
            (
                "p.role_high",
                section(Layer::Role, 9, Retention::Preferred, "R9", None),
            ),
            (
                "p.safety",
                section(Layer::Safety, 0, Retention::Required, "S", None),
            ),
        ];
        let (text, report) = run(&sections, 100);
        assert_eq!(text.unwrap(), "R9\n\nR1\n\nC\n\nS");
        assert_eq!(report, PromptReport::default());
    }

    #[test]
    fn drop_order_under_budget() {
        let sections = [
            (
                "p.req",
                section(Layer::Safety, 0, Retention::Required, &"r".repeat(10), None),
            ),
            (
                "p.pref_hi",
                section(Layer::Task, 5, Retention::Preferred, &"a".repeat(10), None),
            ),
            (
                "p.pref_lo",
                section(Layer::Task, 1, Retention::Preferred, &"b".repeat(10), None),
            ),
            (
                "p.opp_hi",
                section(
                    Layer::Context,
                    5,
                    Retention::Opportunistic,
                    &"c".repeat(10),
                    None,
                ),
            ),
            (
                "p.opp_lo",
                section(
                    Layer::Context,
                    1,
                    Retention::Opportunistic,
                    &"d".repeat(10),
                    None,
                ),
            ),
        ];
        let cases: &[(usize, &[&str])] = &[
            (100, &[]),
            (50, &["p.opp_lo"]),
            (40, &["p.opp_lo", "p.opp_hi"]),
            (24, &["p.opp_lo", "p.opp_hi", "p.pref_lo"]),
            (10, &["p.opp_lo", "p.opp_hi", "p.pref_lo", "p.pref_hi"]),
        ];
        for (budget, dropped) in cases {
            let (text, report) = run(&sections, *budget);
            assert!(text.unwrap().chars().count() <= *budget);
            assert_eq!(report.dropped, *dropped, "budget {budget}");
        }
        let (err, _) = run(&sections, 9);
        assert_eq!(
            err.unwrap_err(),
            PromptError::RequiredTooLong {
                names: vec!["p.req".into()],
                needed: 10,
                budget: 9
            }
        );
    }

    #[test]
    fn sections_are_cut_with_a_visible_marker() {
        let sections = [(
            "p.long",
            section(
                Layer::Context,
                0,
                Retention::Preferred,
                &"长".repeat(50),
                Some(20),
            ),
        )];
        let (text, report) = run(&sections, 100);
        let text = text.unwrap();
        assert_eq!(text.chars().count(), 20);
        assert!(text.ends_with(CUT_MARKER));
        assert_eq!(report.cut, ["p.long"]);
    }
}
