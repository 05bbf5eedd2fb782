//! `quiver test`: every `examples` request of a tool or skill must find it in the top 5 of
//! search (hybrid when the embedding model is installed, as `tool_search` is), and no
//! `negative_examples` request may put it first. The checks are the catalog's
//! (`quiver_catalog::examples`); this file parses arguments and renders them.

use std::path::PathBuf;
use std::process::ExitCode;

use quiver_catalog::examples::check_examples;
use quiver_catalog::{Catalog, CatalogOptions, Root, Scope};

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

/// Runs `quiver test`: exit 1 on any miss, 0 (said on stderr) when nothing declares
/// examples, 2 when a path does not exist.
pub fn run(args: TestArgs) -> miette::Result<ExitCode> {
    if let Some(missing) = args.paths.iter().find(|p| !p.exists()) {
        return Err(miette::miette!(
            help = "check the path",
            "`{}` does not exist",
            missing.display()
        ));
    }
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
    crate::roots::notices(&quiver_host::load_notices(&catalog));
    let checks = check_examples(&catalog, &options);
    if checks.is_empty() {
        if args.json {
            crate::out("[]");
        }
        crate::err(&format!(
            "nothing to test: no tool or skill among {} package{} declares `examples` or `negative_examples`\n\nhint: add `examples:` (requests that must find the tool) to a `tool.yaml` or a `SKILL.md`",
            catalog.packages().len(),
            if catalog.packages().len() == 1 {
                ""
            } else {
                "s"
            }
        ));
        return Ok(ExitCode::SUCCESS);
    }
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
                crate::shown(&c.target),
                c.kind,
                crate::shown(&c.query)
            ));
        }
        crate::out(text.trim_end());
    }
    crate::err(&format!(
        "{} checks, {} passed, {failed} failed",
        checks.len(),
        checks.len() - failed
    ));
    Ok(if failed > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}
