//! The collision lint: exposed items whose descriptions and triggers overlap strongly.
//!
//! Items are grouped into clusters, each around a leader: in catalog order, an item joins the
//! cluster of the most similar leader it scores at least [`COLLISION_THRESHOLD`] with (cosine
//! of TF-IDF vectors), or leads a cluster of its own. An item is compared with leaders only,
//! through an inverted index of their terms, so 3,000 near-identical tools make one cluster in
//! linear time instead of 4.5 million pairs. A cluster is warned once as "low distinctness";
//! a member whose `when_not_to_use` names the leader (or the reverse) is told apart, and
//! reported in a cluster of information only.

use quiver_package::{Diagnostic, Severity};
use rustc_hash::FxHashMap;
use serde::Serialize;

use crate::catalog::{Catalog, Entry, EntryKind};

/// Similarity above which two items are "low distinctness" (the agent-skills design's 0.7).
pub const COLLISION_THRESHOLD: f32 = 0.7;

/// How many members a diagnostic names before it counts the rest.
const NAMED_MEMBERS: usize = 10;

/// A cluster of items that a model may confuse: a leader and the items similar to it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Collision {
    /// Qualified names: the leader first, then its members in catalog order.
    pub items: Vec<String>,
    /// The lowest similarity of a member to the leader, 0 to 1.
    pub score: f32,
    /// Whether `when_not_to_use` tells every member and the leader apart.
    pub resolved: bool,
}

/// The clusters of exposed tools, agents and workflows similar at or above `threshold`: for
/// each leader with members, one unresolved cluster and one resolved, when not empty. Sorted
/// by size, largest first, then by leader.
pub fn collisions(catalog: &Catalog, threshold: f32) -> Vec<Collision> {
    let entries = catalog.entries();
    let index = catalog.index();
    let candidates = entries.iter().enumerate().filter(|(_, e)| {
        matches!(
            e.kind,
            EntryKind::Tool | EntryKind::Agent | EntryKind::Workflow
        )
    });
    // Leaders' terms: term id → (leader's position, weight).
    let mut inverted: FxHashMap<u32, Vec<(u32, f32)>> = FxHashMap::default();
    let mut leaders: Vec<usize> = Vec::new();
    let mut members: Vec<Vec<(usize, f32)>> = Vec::new();
    let mut dots: Vec<f32> = Vec::new();
    let mut touched: Vec<u32> = Vec::new();
    for (doc, _) in candidates {
        let vector = index.similarity_vector(doc);
        for &(term, w) in vector {
            for &(leader, v) in inverted.get(&term).into_iter().flatten() {
                if dots[leader as usize] == 0.0 {
                    touched.push(leader);
                }
                dots[leader as usize] += w * v;
            }
        }
        let mut best: Option<(u32, f32)> = None;
        for leader in touched.drain(..) {
            let score = dots[leader as usize];
            dots[leader as usize] = 0.0;
            if score >= threshold && best.is_none_or(|(_, s)| score > s) {
                best = Some((leader, score));
            }
        }
        match best {
            Some((leader, score)) => members[leader as usize].push((doc, score.min(1.0))),
            None => {
                let position = leaders.len() as u32;
                for &(term, w) in vector {
                    inverted.entry(term).or_default().push((position, w));
                }
                leaders.push(doc);
                members.push(Vec::new());
                dots.push(0.0);
            }
        }
    }
    let mut out = Vec::new();
    for (leader, members) in leaders.into_iter().zip(members) {
        let lead = &entries[leader];
        let (told_apart, confused): (Vec<_>, Vec<_>) = members.into_iter().partition(|&(m, _)| {
            let member = &entries[m];
            names_other(catalog, lead.item, member) || names_other(catalog, member.item, lead)
        });
        for (group, resolved) in [(confused, false), (told_apart, true)] {
            if group.is_empty() {
                continue;
            }
            let score = group.iter().map(|&(_, s)| s).fold(1.0, f32::min);
            let items = std::iter::once(lead.id.clone())
                .chain(group.iter().map(|&(m, _)| entries[m].id.clone()))
                .collect();
            out.push(Collision {
                items,
                score,
                resolved,
            });
        }
    }
    out.sort_by(|x, y| {
        y.items
            .len()
            .cmp(&x.items.len())
            .then_with(|| x.items[0].cmp(&y.items[0]))
            .then_with(|| x.resolved.cmp(&y.resolved))
    });
    out
}

/// Whether the `when_not_to_use` of item `item` mentions `other` by qualified, wire or local name.
fn names_other(catalog: &Catalog, item: Option<usize>, other: &Entry) -> bool {
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

/// The clusters as diagnostics, one each, on the leader's file.
pub fn collision_diagnostics(catalog: &Catalog, collisions: &[Collision]) -> Vec<Diagnostic> {
    collisions
        .iter()
        .map(|c| {
            let file = catalog
                .item(&c.items[0])
                .and_then(|item| catalog.tool(item).map(|t| t.file.clone()))
                .unwrap_or_default();
            let names = named(&c.items);
            let (severity, message, help) = if c.resolved {
                (
                    Severity::Info,
                    format!("{names} overlap (similarity to `{}` at least {:.2}); `when_not_to_use` tells them apart", c.items[0], c.score),
                    "nothing to do".to_owned(),
                )
            } else {
                (
                    Severity::Warning,
                    format!("{names} have low distinctness (similarity to `{}` at least {:.2}); a model may pick the wrong one", c.items[0], c.score),
                    format!("add `when_not_to_use` to `{}` naming the others, and to each of them naming it, or merge them", c.items[0]),
                )
            };
            Diagnostic::new(severity, "low-distinctness", file, message).with_help(help)
        })
        .collect()
}

/// `` `a` and `b` ``, `` `a`, `b` and `c` ``, or the first ten and "N more" for a large cluster.
fn named(items: &[String]) -> String {
    let quoted: Vec<String> = items
        .iter()
        .take(NAMED_MEMBERS)
        .map(|i| format!("`{i}`"))
        .collect();
    let rest = items.len() - quoted.len();
    if rest > 0 {
        return format!(
            "{} items: {} and {rest} more",
            items.len(),
            quoted.join(", ")
        );
    }
    match quoted.split_last() {
        Some((last, [])) => last.clone(),
        Some((last, init)) => format!("{} and {last}", init.join(", ")),
        None => String::new(),
    }
}
