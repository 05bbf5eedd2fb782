//! `quiver test`: every `examples` request of a tool or skill must find it in the top 5 of
//! search (hybrid when the embedding model is installed, as `tool_search` is), and no
//! `negative_examples` request may put it first.

use std::path::PathBuf;
use std::process::ExitCode;

use quiver_catalog::{Catalog, CatalogOptions, Entry, EntryKind, Root, Scope};
use quiver_package::Package;
use serde::Serialize;

/// Rank within which an example must find its item.
const TOP: usize = 5;

/// Arguments of `quiver test`.
#[derive(Debug, clap::Args)]
pub struct TestArgs {
    /// Package folders, or folders of packages.
    #[arg(required = true)]
    pub paths: Vec<PathBuf>,
    /// Print the results as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

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

/// Runs `quiver test`: exit 1 on any miss.
pub fn run(args: TestArgs) -> miette::Result<ExitCode> {
    let roots: Vec<Root> = args
        .paths
        .iter()
        .map(|p| Root {
            path: p.clone(),
            scope: Scope::Project,
        })
        .collect();
    let options = CatalogOptions {
        semantic: quiver_host::SearchModels::load(crate::roots::config()?.search).semantic,
        ..CatalogOptions::default()
    };
    let catalog = Catalog::load(&roots, &options);
    let checks = check_examples(&catalog, &options);
    let failed = checks.iter().filter(|c| !c.passed).count();
    if args.json {
        crate::out(&serde_json::to_string_pretty(&checks).unwrap_or_default());
    } else {
        let mut text = format!(
            "{:<6} {:<36} {:<8} {:>4}  query\n",
            "result", "item", "kind", "rank"
        );
        for c in &checks {
            let rank = c.rank.map_or("-".to_owned(), |r| r.to_string());
            let result = if c.passed { "ok" } else { "MISS" };
            text.push_str(&format!(
                "{result:<6} {:<36} {:<8} {rank:>4}  {}\n",
                c.target, c.kind, c.query
            ));
        }
        crate::out(text.trim_end());
    }
    crate::err(&format!(
        "{} checks, {} passed, {failed} failed",
        checks.len(),
        checks.len() - failed
    ));
    Ok(if failed > 0 || checks.is_empty() {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}
