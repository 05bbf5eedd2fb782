//! `quiver list`, `quiver show` and `quiver search`: reading the catalog.

use std::process::ExitCode;

use quiver_catalog::{Catalog, EntryKind, ItemKind};
use serde_json::json;

use crate::roots::RootArgs;

/// The catalog for listing and showing: BM25 search, no embedding model.
fn load_for_listing(roots: &RootArgs) -> miette::Result<Catalog> {
    crate::roots::catalog(&crate::roots::config()?, roots, None)
}

/// Arguments of `quiver list`.
#[derive(Debug, clap::Args)]
pub struct ListArgs {
    /// Print JSON on stdout.
    #[arg(long)]
    pub json: bool,
    /// Also list private and hidden items.
    #[arg(long)]
    pub all: bool,
}

/// Arguments of `quiver show`.
#[derive(Debug, clap::Args)]
pub struct ShowArgs {
    /// A package id, a qualified item (`weather.forecast`), a wire name or a skill id.
    pub item: String,
    /// Print JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

/// Arguments of `quiver search`.
#[derive(Debug, clap::Args)]
pub struct SearchArgs {
    /// What the user asked for.
    pub query: String,
    /// How many results.
    #[arg(short = 'k', long, default_value_t = 5)]
    pub k: usize,
    /// Print JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

/// Runs `quiver list`.
pub fn list(roots: &RootArgs, args: ListArgs) -> miette::Result<ExitCode> {
    let catalog = load_for_listing(roots)?;
    let mut rows = Vec::new();
    for (pi, cp) in catalog.packages().iter().enumerate() {
        let p = &cp.package;
        let items: Vec<_> = catalog
            .items()
            .iter()
            .filter(|i| i.package == pi && (args.all || (i.exposed && !i.hidden)))
            .map(|i| json!({"name": i.qualified, "wire": i.wire, "kind": i.kind, "exposed": i.exposed, "hidden": i.hidden, "summary": i.summary}))
            .collect();
        let skills: Vec<_> = p
            .all_skills()
            .filter(|s| args.all || !s.meta.disable_model_invocation)
            .map(|s| json!({"id": s.id, "name": s.name, "description": s.description}))
            .collect();
        // A package installed from a folder or a git source says so wherever it is listed.
        let unsigned = super::show_package::installed(p)["unsigned"] == true;
        rows.push(json!({
            "id": p.id, "name": p.name, "version": p.version, "scope": cp.scope, "shadowed": cp.shadowed, "unsigned": unsigned,
            "description": p.description, "root": p.root, "items": items, "skills": skills,
        }));
    }
    if rows.is_empty() {
        crate::err(
            "no package was loaded\n\nhint: `--root PATH` names a folder of packages; `quiver lint PATH` says why a folder is not one",
        );
    }
    if args.json {
        crate::out(&serde_json::to_string_pretty(&rows).unwrap_or_default());
        return Ok(ExitCode::SUCCESS);
    }
    // Whatever a package says is shown, never obeyed: hidden and control characters escaped.
    let shown = |v: &serde_json::Value| {
        quiver_package::text::escape_for_terminal(v.as_str().unwrap_or("")).into_owned()
    };
    let mut text = String::new();
    for row in &rows {
        let shadow = if row["shadowed"] == true {
            " [shadowed]"
        } else {
            ""
        };
        let unsigned = if row["unsigned"] == true {
            " [unsigned]"
        } else {
            ""
        };
        text.push_str(&format!(
            "{}  {}{}{}  {}\n",
            shown(&row["id"]),
            shown(&row["scope"]),
            shadow,
            unsigned,
            shown(&row["description"])
        ));
        for item in row["items"].as_array().into_iter().flatten() {
            text.push_str(&format!(
                "  {:<32} {:<8} {}\n",
                shown(&item["name"]),
                shown(&item["kind"]),
                shown(&item["summary"])
            ));
        }
        for skill in row["skills"].as_array().into_iter().flatten() {
            text.push_str(&format!(
                "  {:<32} {:<8} {}\n",
                shown(&skill["id"]),
                "skill",
                quiver_package::text::escape_for_terminal(&quiver_package::tool::first_sentence(
                    skill["description"].as_str().unwrap_or("")
                ))
            ));
        }
    }
    crate::out(text.trim_end());
    Ok(ExitCode::SUCCESS)
}

/// Runs `quiver show`: exit 1 when nothing has that name.
pub fn show(roots: &RootArgs, args: ShowArgs) -> miette::Result<ExitCode> {
    let config = crate::roots::config()?;
    let catalog = crate::roots::catalog(&config, roots, None)?;
    let name = args.item.as_str();
    let value = if let Some(item) = catalog.item(name).or_else(|| catalog.item_by_wire(name)) {
        let p = &catalog.packages()[item.package].package;
        let detail = match item.kind {
            ItemKind::Tool => serde_json::to_value(&p.tools[item.index]),
            ItemKind::Agent => serde_json::to_value(&p.agents[item.index]),
            ItemKind::Workflow => serde_json::to_value(&p.workflows[item.index]),
        }
        .unwrap_or_default();
        json!({"item": item, "definition": detail})
    } else if let Some(cp) = catalog.package(name) {
        let can_do = super::show_package::can_do(&catalog, cp, &config);
        json!({"package": cp.package.id, "name": cp.package.name, "scope": cp.scope, "description": cp.package.description, "version": cp.package.version, "root": cp.package.root, "manifest": cp.package.manifest, "can_do": can_do})
    } else if let Some(skill) = catalog
        .packages()
        .iter()
        .flat_map(|cp| cp.package.all_skills())
        .find(|s| s.id == name)
    {
        json!({"skill": skill})
    } else {
        crate::err(&format!(
            "error: nothing is named `{}`\n\nhint: `quiver list --all` shows every name",
            crate::shown(name)
        ));
        return Ok(ExitCode::FAILURE);
    };
    crate::out(&serde_json::to_string_pretty(&value).unwrap_or_default());
    Ok(ExitCode::SUCCESS)
}

/// Runs `quiver search`.
pub fn search(roots: &RootArgs, args: SearchArgs) -> miette::Result<ExitCode> {
    let config = crate::roots::config()?;
    let models = crate::roots::search_models(&config);
    let catalog = crate::roots::catalog(&config, roots, Some(&models))?;
    let found = catalog.search(&args.query, args.k, &|_| true);
    if args.json {
        let rows: Vec<_> = found
            .iter()
            .map(|f| json!({"id": f.entry.id, "kind": f.entry.kind, "wire": f.entry.wire, "summary": f.entry.summary, "score": f.score}))
            .collect();
        crate::out(&serde_json::to_string_pretty(&rows).unwrap_or_default());
        return Ok(ExitCode::SUCCESS);
    }
    if found.is_empty() {
        crate::err("no match");
    }
    let mut text = String::new();
    for (rank, f) in found.iter().enumerate() {
        let kind = match f.entry.kind {
            EntryKind::Package => "package",
            EntryKind::Tool => "tool",
            EntryKind::Agent => "agent",
            EntryKind::Workflow => "SOP",
            EntryKind::Skill => "skill",
            EntryKind::Builtin => "built-in",
        };
        text.push_str(&format!(
            "{:>2}. {:<32} {:<8} {:>6.2}  {}\n",
            rank + 1,
            crate::shown(&f.entry.id),
            kind,
            f.score,
            crate::shown(&f.entry.summary)
        ));
    }
    crate::out(text.trim_end());
    Ok(ExitCode::SUCCESS)
}
