//! `quiver lint`: load packages and report every diagnostic.

use std::path::PathBuf;
use std::process::ExitCode;

use quiver_catalog::lint::{COLLISION_THRESHOLD, collision_diagnostics, collisions};
use quiver_catalog::{Catalog, CatalogOptions, Root, Scope};
use quiver_package::diagnostic::count;
use quiver_package::{Diagnostic, skills_ref};

/// Arguments of `quiver lint`.
#[derive(Debug, clap::Args)]
pub struct LintArgs {
    /// Also apply the reference validator's rules to every skill (as errors).
    #[arg(long)]
    pub strict: bool,
    /// Print the diagnostics as a JSON array on stdout.
    #[arg(long)]
    pub json: bool,
    /// Package folders, or folders of packages.
    #[arg(required = true)]
    pub paths: Vec<PathBuf>,
}

/// Runs `quiver lint`: exit 1 when any error is found.
pub fn run(args: LintArgs) -> miette::Result<ExitCode> {
    let roots: Vec<Root> = args
        .paths
        .iter()
        .map(|p| Root {
            path: p.clone(),
            scope: Scope::Project,
        })
        .collect();
    for root in &roots {
        if !root.path.exists() {
            return Err(miette::miette!(
                help = "check the path",
                "`{}` does not exist",
                root.path.display()
            ));
        }
    }
    let catalog = Catalog::load(&roots, &CatalogOptions::default());
    let mut diags = catalog.diagnostics().to_vec();
    diags.extend(collision_diagnostics(
        &catalog,
        &collisions(&catalog, COLLISION_THRESHOLD),
    ));
    // What the code and skill text visibly use against what each package declares, with `~`
    // read as the loader expands it (as pack, verify and install do).
    let home = quiver_package::env::home();
    for cp in catalog.packages() {
        diags.extend(quiver_package::declarations::check_dir(
            &cp.package,
            home.as_deref(),
        ));
    }
    if args.strict {
        for cp in catalog.packages() {
            for skill in cp.package.all_skills() {
                diags.extend(skills_ref::validate(&skill.dir).into_iter().map(|problem| {
                    Diagnostic::error(problem.kind.code(), &skill.file, problem.message)
                        .with_help("the Agent Skills reference validator (skills-ref) rejects this")
                }));
            }
        }
    }
    // A strict error supersedes the load-mode warning of the same code on the same file.
    let strict_errors: std::collections::HashSet<(PathBuf, &str)> = diags
        .iter()
        .filter(|d| d.is_error())
        .map(|d| (d.file.clone(), d.code))
        .collect();
    diags.retain(|d| d.is_error() || !strict_errors.contains(&(d.file.clone(), d.code)));
    let base = std::env::current_dir().unwrap_or_default();
    crate::diagnostics::emit(&diags, args.json, &base);
    let (errors, warnings) = count(&diags);
    let packages = catalog.packages().len();
    crate::err(&format!(
        "{packages} package{}, {errors} error{}, {warnings} warning{}",
        plural(packages),
        plural(errors),
        plural(warnings)
    ));
    Ok(if errors > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}
