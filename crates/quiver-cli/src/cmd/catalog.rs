//! `quiver list`, `quiver show` and `quiver search`: reading the catalog.

use std::process::ExitCode;
use std::sync::{Arc, Mutex, OnceLock, PoisonError, Weak};

use quiver_catalog::{Catalog, EntryKind, ItemKind, Scope};
use quiver_runtime::Runtime;
use quiver_runtime::sandboxed::SandboxExecutor;
use serde_json::json;

use crate::roots::{RootArgs, resolve};

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

/// Loads the catalog for this invocation, ready for `tool_search`: hybrid search when the
/// embedding model is installed (the tools the vector cache lacks are embedded now), BM25
/// alone otherwise, with a note saying so once. Load errors are reported as warnings on stderr.
pub fn load(roots: &RootArgs) -> miette::Result<Catalog> {
    load_with(roots, super::models::semantic(), None)
}

/// Loads the catalog whose tools `executor` will run, as [`load`] does; the config file's
/// external MCP servers are discovered through `executor`, so a server started to list its
/// tools stays up and answers the calls.
pub fn load_for(roots: &RootArgs, executor: &SandboxExecutor) -> miette::Result<Catalog> {
    load_with(roots, super::models::semantic(), Some(executor))
}

/// Loads the catalog for listing and showing only: BM25 search, no embedding model.
pub fn load_for_listing(roots: &RootArgs) -> miette::Result<Catalog> {
    load_with(roots, None, None)
}

fn load_with(
    roots: &RootArgs,
    semantic: Option<quiver_catalog::search::Semantic>,
    executor: Option<&SandboxExecutor>,
) -> miette::Result<Catalog> {
    let (roots, mut options) = resolve(roots)?;
    options.semantic = semantic;
    // The config file's external MCP servers become packages beside the scanned ones. Their
    // problems (which name the config file) are printed here, since `quiver lint` reads
    // folders only.
    let servers = crate::roots::mcp_servers()?;
    let (extra, extra_diagnostics) = if servers.is_empty() {
        (Vec::new(), Vec::new())
    } else {
        let settings = crate::roots::runtime_config()?.settings;
        // Without an executor to keep them, the servers stop once they have listed their tools.
        let (packages, diagnostics) = match executor {
            Some(executor) => executor.discover_mcp_servers(&settings),
            None => {
                super::sandbox_exec::executor_with(servers.clone())?.discover_mcp_servers(&settings)
            }
        };
        let packages = packages.into_iter().map(|p| (p, Scope::User)).collect();
        (packages, diagnostics)
    };
    let catalog = Catalog::load_with(&roots, extra, extra_diagnostics, &options);
    let mut errors = 0;
    for d in catalog.diagnostics() {
        if !servers.is_empty() && d.file == servers.file {
            crate::err(&d.to_string());
        } else if d.is_error() {
            errors += 1;
        }
    }
    if errors > 0 {
        crate::err(&format!(
            "warning: {errors} problem(s) kept some packages or items from loading; run `quiver lint` for details"
        ));
    }
    Ok(catalog)
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
        rows.push(json!({
            "id": p.id, "name": p.name, "version": p.version, "scope": cp.scope, "shadowed": cp.shadowed,
            "description": p.description, "root": p.root, "items": items, "skills": skills,
        }));
    }
    if args.json {
        crate::out(&serde_json::to_string_pretty(&rows).unwrap_or_default());
        return Ok(ExitCode::SUCCESS);
    }
    let mut text = String::new();
    for row in &rows {
        let shadow = if row["shadowed"] == true {
            " [shadowed]"
        } else {
            ""
        };
        text.push_str(&format!(
            "{}  {}{}  {}\n",
            row["id"].as_str().unwrap_or(""),
            row["scope"].as_str().unwrap_or(""),
            shadow,
            row["description"].as_str().unwrap_or("")
        ));
        for item in row["items"].as_array().into_iter().flatten() {
            text.push_str(&format!(
                "  {:<32} {:<8} {}\n",
                item["name"].as_str().unwrap_or(""),
                item["kind"].as_str().unwrap_or(""),
                item["summary"].as_str().unwrap_or("")
            ));
        }
        for skill in row["skills"].as_array().into_iter().flatten() {
            text.push_str(&format!(
                "  {:<32} {:<8} {}\n",
                skill["id"].as_str().unwrap_or(""),
                "skill",
                quiver_package::tool::first_sentence(skill["description"].as_str().unwrap_or(""))
            ));
        }
    }
    crate::out(text.trim_end());
    Ok(ExitCode::SUCCESS)
}

/// Runs `quiver show`: exit 1 when nothing has that name.
pub fn show(roots: &RootArgs, args: ShowArgs) -> miette::Result<ExitCode> {
    let catalog = load_for_listing(roots)?;
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
        json!({"package": cp.package.id, "name": cp.package.name, "scope": cp.scope, "description": cp.package.description, "version": cp.package.version, "root": cp.package.root, "manifest": cp.package.manifest})
    } else if let Some(skill) = catalog
        .packages()
        .iter()
        .flat_map(|cp| cp.package.all_skills())
        .find(|s| s.id == name)
    {
        json!({"skill": skill})
    } else {
        return Err(miette::miette!(
            help = "`quiver list --all` shows every name",
            "nothing is named `{name}`"
        ));
    };
    crate::out(&serde_json::to_string_pretty(&value).unwrap_or_default());
    Ok(ExitCode::SUCCESS)
}

/// Runs `quiver search`.
pub fn search(roots: &RootArgs, args: SearchArgs) -> miette::Result<ExitCode> {
    let catalog = load(roots)?;
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
            f.entry.id,
            kind,
            f.score,
            f.entry.summary
        ));
    }
    crate::out(text.trim_end());
    Ok(ExitCode::SUCCESS)
}

/// Rebuilds of the catalog start at least this far apart.
const MIN_REBUILD_INTERVAL: std::time::Duration = std::time::Duration::from_secs(1);

/// Builds the catalog again when an external MCP server says its tool list changed
/// (`notifications/tools/list_changed`) and swaps it into the runtime: `tool_search` finds the
/// new tools from the next turn on, and turns already running keep the catalog they started
/// with. One rebuild runs at a time, at most one a second; news arriving during one asks for one
/// more.
pub struct CatalogReload {
    roots: RootArgs,
    targets: OnceLock<(Weak<Runtime>, Weak<SandboxExecutor>)>,
    /// (a rebuild is running, another was asked for meanwhile)
    state: Mutex<(bool, bool)>,
}

impl CatalogReload {
    /// The executor for a long-running command over `roots`, whose external MCP servers'
    /// list changes ask the returned reload for a rebuild; [`attach`](Self::attach) the reload
    /// once the runtime exists.
    pub fn with_executor(roots: RootArgs) -> miette::Result<(Arc<Self>, Arc<SandboxExecutor>)> {
        let reload = Arc::new(Self {
            roots,
            targets: OnceLock::new(),
            state: Mutex::new((false, false)),
        });
        let news = Arc::clone(&reload);
        let executor =
            super::sandbox_exec::executor()?.with_tools_changed(Arc::new(move || news.request()));
        Ok((reload, Arc::new(executor)))
    }

    /// The runtime whose catalog is rebuilt, and the executor whose servers are listed again.
    pub fn attach(&self, runtime: &Arc<Runtime>, executor: &Arc<SandboxExecutor>) {
        let _ = self
            .targets
            .set((Arc::downgrade(runtime), Arc::downgrade(executor)));
    }

    /// Asks for a rebuild. Called on an MCP client's session thread, so it only starts one.
    pub fn request(self: &Arc<Self>) {
        {
            let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
            if state.0 {
                state.1 = true;
                return;
            }
            *state = (true, false);
        }
        let this = Arc::clone(self);
        let started = std::thread::Builder::new()
            .name("quiver-catalog-reload".into())
            .spawn(move || {
                loop {
                    let started = std::time::Instant::now();
                    this.rebuild();
                    {
                        let mut state = this.state.lock().unwrap_or_else(PoisonError::into_inner);
                        if !state.1 {
                            state.0 = false;
                            return;
                        }
                        state.1 = false;
                    }
                    // A server that keeps announcing changes cannot keep Quiver rebuilding.
                    std::thread::sleep(MIN_REBUILD_INTERVAL.saturating_sub(started.elapsed()));
                }
            });
        if started.is_err() {
            *self.state.lock().unwrap_or_else(PoisonError::into_inner) = (false, false);
        }
    }

    fn rebuild(&self) {
        let Some((runtime, executor)) = self.targets.get() else {
            return;
        };
        let (Some(runtime), Some(executor)) = (runtime.upgrade(), executor.upgrade()) else {
            return;
        };
        match load_for(&self.roots, &executor) {
            Ok(catalog) => {
                runtime.swap_catalog(catalog);
                crate::err("quiver: an MCP server's tool list changed; the catalog was rebuilt");
            }
            Err(e) => crate::err(&format!(
                "warning: an MCP server's tool list changed but the catalog could not be rebuilt: {e}"
            )),
        }
    }
}
