//! Declared examples checked against search: every `examples` request of a tool or skill must
//! find it in the top 5 (as `tool_search` ranks: hybrid when the catalog options carry an
//! embedding model), and no `negative_examples` request may put it first. `quiver test` renders
//! the result.

use quiver_package::Package;
use serde::Serialize;

use crate::{Catalog, CatalogOptions, Entry, EntryKind, Scope};

/// Rank within which an example must find its item.
const TOP: usize = 5;

/// One checked request.
#[derive(Debug, Serialize)]
pub struct Check {
    /// The item or skill.
    pub target: String,
    /// `example` or `negative`.
    pub kind: &'static str,
    /// The request.
    pub query: String,
    /// 1-based rank of the target in the top 5, if there.
    pub rank: Option<usize>,
    /// Whether the check passed.
    pub passed: bool,
}

/// Runs every declared example against the catalog's search, which is `tool_search`'s: hybrid
/// when `options` carry an embedding model, BM25 alone otherwise.
///
/// Example and negative requests are themselves indexed (they steer search), so each one is
/// checked with itself held out: the catalog is rebuilt (with `options`) without that request,
/// which asks whether a new request like it would (or would not) find the item.
pub fn check_examples(catalog: &Catalog, options: &CatalogOptions) -> Vec<Check> {
    let packages: Vec<(Package, Scope)> = catalog
        .packages()
        .iter()
        .map(|cp| (cp.package.clone(), cp.scope))
        .collect();
    let mut checks = Vec::new();
    for entry in catalog.entries() {
        let (examples, negatives) = declared_examples(catalog, entry);
        for (held_out, query) in examples.into_iter().enumerate() {
            let without =
                catalog_without(catalog, &packages, entry, Held::Example(held_out), options);
            let rank = rank_of(&without, &query, entry);
            checks.push(Check {
                target: entry.id.clone(),
                kind: "example",
                query,
                rank,
                passed: rank.is_some(),
            });
        }
        for (held_out, query) in negatives.into_iter().enumerate() {
            let without =
                catalog_without(catalog, &packages, entry, Held::Negative(held_out), options);
            let rank = rank_of(&without, &query, entry);
            checks.push(Check {
                target: entry.id.clone(),
                kind: "negative",
                query,
                rank,
                passed: rank != Some(1),
            });
        }
    }
    checks
}

/// 1-based rank of `entry` in the top 5 for `query`.
fn rank_of(catalog: &Catalog, query: &str, entry: &Entry) -> Option<usize> {
    catalog
        .search(query, TOP, &|_| true)
        .iter()
        .position(|f| f.entry.id == entry.id)
        .map(|r| r + 1)
}

/// Which declared request a rebuilt catalog leaves out.
#[derive(Debug, Clone, Copy)]
enum Held {
    /// `examples[i]`.
    Example(usize),
    /// `negative_examples[i]`.
    Negative(usize),
}

/// Removes the held-out request from one item's examples or negative examples.
fn hold_out<T>(examples: &mut Vec<T>, negatives: &mut Vec<String>, held: Held) {
    match held {
        Held::Example(i) if i < examples.len() => drop(examples.remove(i)),
        Held::Negative(i) if i < negatives.len() => drop(negatives.remove(i)),
        _ => {}
    }
}

/// The catalog rebuilt with request `held` of `entry` removed.
fn catalog_without(
    catalog: &Catalog,
    packages: &[(Package, Scope)],
    entry: &Entry,
    held: Held,
    options: &CatalogOptions,
) -> Catalog {
    let mut packages = packages.to_vec();
    if let Some(pi) = entry.package {
        let package = &mut packages[pi].0;
        match entry.item.map(|i| &catalog.items()[i]) {
            Some(item) => {
                if let Some(tool) = package.tools.get_mut(item.index) {
                    hold_out(&mut tool.examples, &mut tool.negative_examples, held);
                }
            }
            None => {
                let skill = package
                    .skill
                    .iter_mut()
                    .chain(package.skills.iter_mut())
                    .find(|s| s.id == entry.id);
                if let Some(skill) = skill {
                    let meta = &mut skill.meta;
                    hold_out(&mut meta.examples, &mut meta.negative_examples, held);
                }
            }
        }
    }
    Catalog::build(packages, Vec::new(), options)
}

fn declared_examples(catalog: &Catalog, entry: &Entry) -> (Vec<String>, Vec<String>) {
    match entry.kind {
        EntryKind::Tool => {
            let Some(tool) = entry.item.and_then(|i| catalog.tool(&catalog.items()[i])) else {
                return Default::default();
            };
            (
                tool.examples.iter().map(|e| e.query.clone()).collect(),
                tool.negative_examples.clone(),
            )
        }
        EntryKind::Skill => {
            let skill = entry.package.and_then(|p| {
                catalog.packages()[p]
                    .package
                    .all_skills()
                    .find(|s| s.id == entry.id)
            });
            skill.map_or_else(Default::default, |s| {
                (s.meta.examples.clone(), s.meta.negative_examples.clone())
            })
        }
        _ => Default::default(),
    }
}
