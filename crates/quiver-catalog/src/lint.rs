//! The collision lint: exposed items whose descriptions and triggers overlap strongly.
//!
//! Pairs scoring at least [`COLLISION_THRESHOLD`] (cosine of TF-IDF vectors) are warned as
//! "low distinctness"; a `when_not_to_use` that names the other item is the recommended fix,
//! and a pair fixed that way is reported as information only.

use quiver_package::{Diagnostic, Severity};
use serde::Serialize;

use crate::catalog::{Catalog, EntryKind};

/// Similarity above which two items are "low distinctness" (the agent-skills design's 0.7).
pub const COLLISION_THRESHOLD: f32 = 0.7;

/// Two items that a model may confuse.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Collision {
    /// Qualified name of the first item.
    pub a: String,
    /// Qualified name of the second item.
    pub b: String,
    /// Their similarity, 0 to 1.
    pub score: f32,
    /// Whether a `when_not_to_use` of either names the other.
    pub resolved: bool,
}

/// Every pair of exposed tools, agents and workflows at or above `threshold`.
pub fn collisions(catalog: &Catalog, threshold: f32) -> Vec<Collision> {
    let candidates: Vec<usize> = catalog
        .entries()
        .iter()
        .enumerate()
        .filter(|(_, e)| {
            matches!(
                e.kind,
                EntryKind::Tool | EntryKind::Agent | EntryKind::Workflow
            )
        })
        .map(|(i, _)| i)
        .collect();
    let entries = catalog.entries();
    let mut out: Vec<Collision> = catalog
        .index()
        .similar_pairs(&candidates, threshold)
        .into_iter()
        .map(|(i, j, score)| {
            let (a, b) = (&entries[i], &entries[j]);
            let resolved = names_other(catalog, a.item, b) || names_other(catalog, b.item, a);
            Collision {
                a: a.id.clone(),
                b: b.id.clone(),
                score,
                resolved,
            }
        })
        .collect();
    out.sort_by(|x, y| {
        y.score
            .total_cmp(&x.score)
            .then_with(|| (&x.a, &x.b).cmp(&(&y.a, &y.b)))
    });
    out
}

/// Whether the `when_not_to_use` of item `item` mentions `other` by qualified, wire or local name.
fn names_other(catalog: &Catalog, item: Option<usize>, other: &crate::catalog::Entry) -> bool {
    let Some(item) = item.map(|i| &catalog.items()[i]) else {
        return false;
    };
    let Some(tool) = catalog.tool(item) else {
        return false;
    };
    let text = &tool.description.when_not_to_use;
    let local = other.item.map(|i| catalog.items()[i].name.as_str());
    text.contains(other.id.as_str())
        || other.wire.as_deref().is_some_and(|w| text.contains(w))
        || local.is_some_and(|l| text.contains(l))
}

/// The collisions as diagnostics on the first item's file.
pub fn collision_diagnostics(catalog: &Catalog, collisions: &[Collision]) -> Vec<Diagnostic> {
    collisions
        .iter()
        .map(|c| {
            let file = catalog
                .item(&c.a)
                .and_then(|item| catalog.tool(item).map(|t| t.file.clone()))
                .unwrap_or_default();
            let (severity, message, help) = if c.resolved {
                (
                    Severity::Info,
                    format!("`{}` and `{}` overlap (similarity {:.2}); `when_not_to_use` tells them apart", c.a, c.b, c.score),
                    "nothing to do".to_owned(),
                )
            } else {
                (
                    Severity::Warning,
                    format!("`{}` and `{}` have low distinctness (similarity {:.2}); a model may pick the wrong one", c.a, c.b, c.score),
                    format!("add `when_not_to_use` to `{}` naming `{}` (and the reverse)", c.a, c.b),
                )
            };
            Diagnostic::new(severity, "low-distinctness", file, message).with_help(help)
        })
        .collect()
}
