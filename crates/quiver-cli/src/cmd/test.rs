//! `quiver test`: every `examples` request of a tool or skill must find it in the top 5 of
//! search, and no `negative_examples` request may put it first.

use std::path::PathBuf;
use std::process::ExitCode;

use quiver_catalog::{Catalog, CatalogOptions, Entry, EntryKind, Root, Scope};
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

/// Runs every declared example against the catalog's search.
pub fn check_examples(catalog: &Catalog) -> Vec<Check> {
    let mut checks = Vec::new();
    for entry in catalog.entries() {
        let (examples, negatives) = declared_examples(catalog, entry);
        for (queries, kind) in [(examples, "example"), (negatives, "negative")] {
            for query in queries {
                let found = catalog.search(&query, TOP, &|_| true);
                let rank = found
                    .iter()
                    .position(|f| f.entry.id == entry.id)
                    .map(|r| r + 1);
                let passed = if kind == "example" {
                    rank.is_some()
                } else {
                    rank != Some(1)
                };
                checks.push(Check {
                    target: entry.id.clone(),
                    kind,
                    query,
                    rank,
                    passed,
                });
            }
        }
    }
    checks
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
    let catalog = Catalog::load(&roots, &CatalogOptions::default());
    let checks = check_examples(&catalog);
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
