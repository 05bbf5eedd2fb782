//! The immutable, versioned snapshot of everything loaded.

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use quiver_package::names::PackageId;
use quiver_package::tool::Tool;
use quiver_package::{Diagnostic, Package, load_package};
use rayon::prelude::*;
use serde::Serialize;

use crate::params::schema_params;
use crate::scan::{self, Root, Scope};
use crate::search::{DenseIndex, Method, SearchDoc, SearchHit, SearchIndex, Semantic, rank};
use crate::wire::wire_name;

static NEXT_VERSION: AtomicU64 = AtomicU64::new(1);

/// How a catalog is built.
#[derive(Debug, Clone)]
pub struct CatalogOptions {
    /// Scope precedence: where two packages share an id, the one whose scope comes first wins.
    pub precedence: Vec<Scope>,
    /// Tools the runtime itself provides, searchable beside the packages.
    pub builtins: Vec<BuiltinTool>,
    /// Dense retrieval, fused with BM25 in [`Catalog::search`]; `None` for BM25 alone.
    /// Building a catalog with it embeds the entries the cache lacks (on rayon's threads; the
    /// caller waits), so build such catalogs off async threads.
    pub semantic: Option<Semantic>,
    /// Package ids the operator lets a package of a higher-precedence scope take over (the
    /// config's override). For any other id, a package whose id is already used in a scope
    /// of lower precedence is refused (`package-shadowing-refused`, not loaded): it may not
    /// claim another package's id, data and settings. Within one scope the first in scan
    /// order wins and the others are shadowed (`package-shadowed`), as for allowed overrides.
    pub allow_shadow: Vec<PackageId>,
}

impl Default for CatalogOptions {
    fn default() -> Self {
        Self {
            precedence: vec![Scope::Project, Scope::User, Scope::Installed],
            builtins: Vec::new(),
            semantic: None,
            allow_shadow: Vec::new(),
        }
    }
}

/// Packages sorted by id and precedence, without those that would shadow a package of a
/// lower-precedence scope (unless `allow` names their id), each refused with an error.
fn refuse_shadowing(
    loaded: Vec<(usize, Package, Scope)>,
    rank: &dyn Fn(Scope) -> usize,
    allow: &[PackageId],
    diagnostics: &mut Vec<Diagnostic>,
) -> Vec<(usize, Package, Scope)> {
    let mut out = Vec::with_capacity(loaded.len());
    let mut rest = loaded.into_iter().peekable();
    while let Some(first) = rest.next() {
        let mut group = vec![first];
        while let Some(next) = rest.next_if(|n| n.1.id == group[0].1.id) {
            group.push(next);
        }
        // The last of a group has the lowest precedence: its scope keeps the id.
        let keeper = group.last().map(|(_, p, s)| (rank(*s), *s, p.root.clone()));
        match keeper {
            Some((low, scope, root)) if !allow.contains(&group[0].1.id) => {
                for (i, package, s) in group {
                    if rank(s) == low {
                        out.push((i, package, s));
                        continue;
                    }
                    diagnostics.push(
                        Diagnostic::error(
                            "package-shadowing-refused",
                            &package.root,
                            format!(
                                "package `{}` here ({}) has the id of the package at {} ({}); it is not loaded, since a package cannot take over another's id, data and settings",
                                package.id,
                                s.as_str(),
                                root.display(),
                                scope.as_str(),
                            ),
                        )
                        .with_help(format!(
                            "rename one of them, or name `{}` in the config's `allow_shadow` to let this one win",
                            package.id
                        )),
                    );
                }
            }
            _ => out.extend(group),
        }
    }
    out
}

/// A tool the runtime provides (such as `read_skill`), listed in search.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BuiltinTool {
    /// Its wire name.
    pub name: String,
    /// What it does.
    pub description: String,
}

/// A package in the catalog, with the scope it came from.
#[derive(Debug, Clone, Serialize)]
pub struct CatalogPackage {
    /// The package.
    pub package: Package,
    /// Its scope.
    pub scope: Scope,
    /// Whether another package with the same id won over this one.
    pub shadowed: bool,
    /// Its content digest, computed the first time it is asked for.
    #[serde(skip)]
    content: std::sync::OnceLock<Option<String>>,
}

impl CatalogPackage {
    /// The content digest of the package's folder as it is now
    /// ([`quiver_package::content::content_digest`]), computed the first time it is asked for
    /// in this snapshot and kept: what a workflow run pins of the package, and what an
    /// instance holding this snapshot has loaded. `None` for a package without a package folder
    /// of its own (an MCP server's) or one whose folder cannot be read (logged).
    pub fn content_digest(&self) -> Option<&str> {
        self.content
            .get_or_init(|| {
                let root = &self.package.root;
                if !quiver_package::is_package_dir(root) {
                    return None;
                }
                match quiver_package::content::content_digest(root) {
                    Ok(digest) => Some(digest),
                    Err(error) => {
                        tracing::warn!(package = %self.package.id, %error, "the package's content digest cannot be computed: runs that pin it are left to other instances");
                        None
                    }
                }
            })
            .as_deref()
    }
}

/// The kind of a callable item.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ItemKind {
    /// A tool.
    Tool,
    /// An agent, called with `{task}`.
    Agent,
    /// A workflow (SOP).
    Workflow,
}

/// A callable item: a tool, an agent or a workflow.
#[derive(Debug, Clone, Serialize)]
pub struct Item {
    /// Index of its package in [`Catalog::packages`].
    pub package: usize,
    /// Its kind.
    pub kind: ItemKind,
    /// Index in the package's `tools`, `agents` or `workflows`.
    pub index: usize,
    /// Its local name.
    pub name: String,
    /// `<package>.<item>`, or `<scope>:<package>.<item>` for a shadowed package.
    pub qualified: String,
    /// `<package>__<item>` (shortened with a hash when too long); `None` when shadowed or
    /// colliding.
    pub wire: Option<String>,
    /// Part of the package's public face.
    pub exposed: bool,
    /// Registered but never listed or found.
    pub hidden: bool,
    /// The catalog line.
    pub summary: String,
}

/// What a searchable, listable entry is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum EntryKind {
    /// A package.
    Package,
    /// A tool.
    Tool,
    /// An agent.
    Agent,
    /// A workflow.
    Workflow,
    /// A skill.
    Skill,
    /// A runtime tool.
    Builtin,
}

/// One entry of the model-facing view (search and rendering): never private, hidden,
/// shadowed or `disable-model-invocation`.
#[derive(Debug, Clone, Serialize)]
pub struct Entry {
    /// What it is.
    pub kind: EntryKind,
    /// Its package, if any.
    pub package: Option<usize>,
    /// For tools, agents and workflows, the index in [`Catalog::items`].
    pub item: Option<usize>,
    /// Qualified item name, skill id, package id or built-in name.
    pub id: String,
    /// Wire name for callable entries.
    pub wire: Option<String>,
    /// One line.
    pub summary: String,
}

/// A search result.
#[derive(Debug, Clone, Serialize)]
pub struct Found<'a> {
    /// The entry.
    pub entry: &'a Entry,
    /// Its score.
    pub score: f32,
}

/// The immutable snapshot.
#[derive(Debug)]
pub struct Catalog {
    version: u64,
    packages: Vec<CatalogPackage>,
    items: Vec<Item>,
    by_qualified: HashMap<String, usize>,
    by_wire: HashMap<String, usize>,
    entries: Vec<Entry>,
    index: SearchIndex,
    dense: Option<DenseIndex>,
    diagnostics: Vec<Diagnostic>,
}

impl Catalog {
    /// Scans `roots`, loads every package in parallel and builds the snapshot.
    pub fn load(roots: &[Root], options: &CatalogOptions) -> Catalog {
        Catalog::load_with(roots, Vec::new(), Vec::new(), options)
    }

    /// [`Catalog::load`] with packages that come from elsewhere than a folder (the config
    /// file's MCP servers), placed after the scanned ones, and their diagnostics.
    pub fn load_with(
        roots: &[Root],
        extra: Vec<(Package, Scope)>,
        extra_diagnostics: Vec<Diagnostic>,
        options: &CatalogOptions,
    ) -> Catalog {
        // The Chinese dictionary is loaded only if some text needs it (on first use).
        let (found, mut diagnostics) = scan::scan(roots);
        let loaded: Vec<_> = found
            .par_iter()
            .map(|f| (load_package(&f.dir), f.scope))
            .collect();
        let mut packages = Vec::new();
        for (loaded, scope) in loaded {
            diagnostics.extend(loaded.diagnostics);
            if let Some(package) = loaded.package {
                packages.push((package, scope));
            }
        }
        packages.extend(extra);
        diagnostics.extend(extra_diagnostics);
        Catalog::build(packages, diagnostics, options)
    }

    /// Loads the packages under `dirs` (each a root of scope `project`).
    pub fn load_dirs(dirs: &[&Path]) -> Catalog {
        let roots: Vec<Root> = dirs
            .iter()
            .map(|d| Root {
                path: d.to_path_buf(),
                scope: Scope::Project,
            })
            .collect();
        Catalog::load(&roots, &CatalogOptions::default())
    }

    /// Builds a snapshot from loaded packages (in scan order).
    pub fn build(
        loaded: Vec<(Package, Scope)>,
        mut diagnostics: Vec<Diagnostic>,
        options: &CatalogOptions,
    ) -> Catalog {
        let rank = |scope: Scope| {
            options
                .precedence
                .iter()
                .position(|s| *s == scope)
                .unwrap_or(usize::MAX)
        };
        // Stable sort: by id, then precedence, then scan order.
        let mut loaded: Vec<(usize, Package, Scope)> = loaded
            .into_iter()
            .enumerate()
            .map(|(i, (p, s))| (i, p, s))
            .collect();
        loaded.sort_by(|a, b| {
            (a.1.id.as_str(), rank(a.2), a.0).cmp(&(b.1.id.as_str(), rank(b.2), b.0))
        });
        let loaded = refuse_shadowing(loaded, &rank, &options.allow_shadow, &mut diagnostics);
        let mut packages: Vec<CatalogPackage> = Vec::with_capacity(loaded.len());
        // Packages sharing an id are adjacent after the sort, and the first of them wins.
        let mut winner: Option<usize> = None;
        for (_, package, scope) in loaded {
            let shadowed = match winner.map(|w| &packages[w]) {
                Some(first) if first.package.id == package.id => {
                    diagnostics.push(
                        Diagnostic::warning(
                            "package-shadowed",
                            &package.root,
                            format!(
                                "package `{}` here ({}) is shadowed by {} ({}); its items stay reachable as `{}:{}.<item>`",
                                package.id,
                                scope.as_str(),
                                first.package.root.display(),
                                first.scope.as_str(),
                                scope.as_str(),
                                package.id
                            ),
                        )
                        .with_help("rename one of the packages, or change the scope precedence"),
                    );
                    true
                }
                _ => {
                    winner = Some(packages.len());
                    false
                }
            };
            packages.push(CatalogPackage {
                package,
                scope,
                shadowed,
                content: std::sync::OnceLock::new(),
            });
        }

        let mut items = Vec::new();
        for (pi, cp) in packages.iter().enumerate() {
            let p = &cp.package;
            let prefix = if cp.shadowed {
                format!("{}:{}", cp.scope.as_str(), p.id)
            } else {
                p.id.to_string()
            };
            let mut push = |kind, index, name: &str, exposed, hidden, summary: String| {
                items.push(Item {
                    package: pi,
                    kind,
                    index,
                    name: name.to_owned(),
                    qualified: format!("{prefix}.{name}"),
                    wire: (!cp.shadowed).then(|| wire_name(p.id.as_str(), name)),
                    exposed,
                    hidden,
                    summary,
                });
            };
            for (i, t) in p.tools.iter().enumerate() {
                push(
                    ItemKind::Tool,
                    i,
                    t.name.as_str(),
                    t.expose,
                    t.hidden,
                    t.description.summary_line(),
                );
            }
            for (i, a) in p.agents.iter().enumerate() {
                push(
                    ItemKind::Agent,
                    i,
                    a.name.as_str(),
                    a.expose,
                    false,
                    quiver_package::tool::first_sentence(&a.description),
                );
            }
            for (i, w) in p.workflows.iter().enumerate() {
                push(
                    ItemKind::Workflow,
                    i,
                    w.name.as_str(),
                    w.expose,
                    false,
                    quiver_package::tool::first_sentence(&w.description),
                );
            }
        }

        let mut by_qualified = HashMap::new();
        let mut by_wire: HashMap<String, usize> = HashMap::new();
        for i in 0..items.len() {
            by_qualified.insert(items[i].qualified.clone(), i);
            let Some(wire) = items[i].wire.clone() else {
                continue;
            };
            if let Some(&first) = by_wire.get(&wire) {
                diagnostics.push(
                    Diagnostic::error(
                        "wire-name-collision",
                        item_file(&packages, &items[i]),
                        format!(
                            "`{}` maps to the wire name `{wire}`, which `{}` ({}) already uses",
                            items[i].qualified,
                            items[first].qualified,
                            item_file(&packages, &items[first]).display()
                        ),
                    )
                    .with_help(
                        "rename the package or the item; `__` in names can make two names meet",
                    ),
                );
                items[i].wire = None;
            } else {
                by_wire.insert(wire, i);
            }
        }

        diagnostics.extend(forks_into_private_agents(&packages));
        let (entries, docs) = model_view(&packages, &items, &options.builtins);
        let (index, dense) = rayon::join(
            || SearchIndex::build(docs.clone()),
            || {
                options
                    .semantic
                    .clone()
                    .map(|semantic| DenseIndex::build(semantic, &docs))
            },
        );
        Catalog {
            version: NEXT_VERSION.fetch_add(1, Ordering::Relaxed),
            packages,
            items,
            by_qualified,
            by_wire,
            entries,
            index,
            dense,
            diagnostics,
        }
    }

    /// This snapshot's version; every build gets a higher one.
    pub fn version(&self) -> u64 {
        self.version
    }

    /// Every package, sorted by id (a shadowed one after its winner).
    pub fn packages(&self) -> &[CatalogPackage] {
        &self.packages
    }

    /// The winning package with id `id`.
    pub fn package(&self, id: &str) -> Option<&CatalogPackage> {
        self.packages
            .iter()
            .find(|p| !p.shadowed && p.package.id.as_str() == id)
    }

    /// Every item.
    pub fn items(&self) -> &[Item] {
        &self.items
    }

    /// The item with qualified name `name` (`weather.forecast`, `user:weather.forecast`).
    pub fn item(&self, name: &str) -> Option<&Item> {
        self.by_qualified.get(name).map(|&i| &self.items[i])
    }

    /// The item with wire name `wire` (`weather__forecast`).
    pub fn item_by_wire(&self, wire: &str) -> Option<&Item> {
        self.by_wire.get(wire).map(|&i| &self.items[i])
    }

    /// The index in [`Catalog::items`] of the item with qualified name `name`.
    pub fn item_index(&self, name: &str) -> Option<usize> {
        self.by_qualified.get(name).copied()
    }

    /// The index in [`Catalog::items`] of the item with wire name `wire`.
    pub fn item_index_by_wire(&self, wire: &str) -> Option<usize> {
        self.by_wire.get(wire).copied()
    }

    /// The tool behind an item, if it is one.
    pub fn tool(&self, item: &Item) -> Option<&Tool> {
        match item.kind {
            ItemKind::Tool => self.packages[item.package].package.tools.get(item.index),
            _ => None,
        }
    }

    /// The model-facing entries, in catalog order.
    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    /// Every diagnostic of the scan, the packages and the snapshot.
    pub fn diagnostics(&self) -> &[Diagnostic] {
        &self.diagnostics
    }

    /// The best `k` entries for `query` among those `admit` accepts: BM25 fused with dense
    /// retrieval when the catalog was built with a model ([`CatalogOptions::semantic`]) (with
    /// the English booster when it has one), else BM25 alone.
    pub fn search(&self, query: &str, k: usize, admit: &dyn Fn(&Entry) -> bool) -> Vec<Found<'_>> {
        let method = match &self.dense {
            Some(dense) if dense.boosted() => Method::HybridMiniLm,
            Some(_) => Method::Hybrid,
            None => Method::Bm25,
        };
        self.search_with(method, query, k, admit)
    }

    /// [`Catalog::search`] with a chosen method; `dense` and `hybrid` fall back to BM25 when
    /// the catalog has no model, and their `+minilm` forms to them without the booster.
    pub fn search_with(
        &self,
        method: Method,
        query: &str,
        k: usize,
        admit: &dyn Fn(&Entry) -> bool,
    ) -> Vec<Found<'_>> {
        let admit_doc = |doc: usize| admit(&self.entries[doc]);
        rank(
            method,
            &self.index,
            self.dense.as_ref(),
            query,
            k,
            &admit_doc,
        )
        .into_iter()
        .map(|SearchHit { doc, score }| Found {
            entry: &self.entries[doc],
            score,
        })
        .collect()
    }

    /// The search index, with documents in the order of [`Catalog::entries`].
    pub fn index(&self) -> &SearchIndex {
        &self.index
    }

    /// The dense index (same document order), when the catalog was built with a model.
    pub fn dense(&self) -> Option<&DenseIndex> {
        self.dense.as_ref()
    }
}

/// The file that defines `item`.
/// `skill-agent-private`: a skill with `context: fork` whose `agent:` names a private agent of
/// another package. Forking into it would run that package's private agent on the
/// conversation's behalf; the runtime answers such a fork as an unknown agent, and lint says
/// why.
fn forks_into_private_agents(packages: &[CatalogPackage]) -> Vec<Diagnostic> {
    let own = |id: &str| {
        packages
            .iter()
            .find(|cp| !cp.shadowed && cp.package.id.as_str() == id)
    };
    let mut out = Vec::new();
    for cp in packages.iter().filter(|cp| !cp.shadowed) {
        let package = cp.package.id.as_str();
        for skill in cp.package.all_skills().filter(|s| s.meta.fork) {
            let Some((other, agent)) = skill.meta.agent.as_deref().and_then(|a| a.split_once('.'))
            else {
                continue;
            };
            if other == package {
                continue;
            }
            let private = own(other).is_some_and(|o| {
                o.package
                    .agents
                    .iter()
                    .any(|a| a.name.as_str() == agent && !a.expose)
            });
            if private {
                out.push(
                    Diagnostic::error(
                        "skill-agent-private",
                        &skill.file,
                        format!(
                            "skill `{}` forks into `{other}.{agent}`, a private agent of another package; private agents answer only their own package, so the fork is answered as an unknown agent",
                            skill.id
                        ),
                    )
                    .with_help(format!(
                        "name an agent of package `{package}`, or ask the author of `{other}` to expose `{agent}`"
                    )),
                );
            }
        }
    }
    out
}

fn item_file(packages: &[CatalogPackage], item: &Item) -> std::path::PathBuf {
    let p = &packages[item.package].package;
    let index = item.index;
    let file = match item.kind {
        ItemKind::Tool => p.tools.get(index).map(|t| t.file.clone()),
        ItemKind::Agent => p.agents.get(index).map(|a| a.file.clone()),
        ItemKind::Workflow => p.workflows.get(index).map(|w| w.file.clone()),
    };
    file.unwrap_or_else(|| p.root.clone())
}

/// The model-facing entries and their search documents, in catalog order: each package, then
/// its exposed items, then its skills; built-in tools last.
fn model_view(
    packages: &[CatalogPackage],
    items: &[Item],
    builtins: &[BuiltinTool],
) -> (Vec<Entry>, Vec<SearchDoc>) {
    let mut entries = Vec::new();
    let mut docs = Vec::new();
    let mut items_of: Vec<Vec<usize>> = vec![Vec::new(); packages.len()];
    for (i, item) in items.iter().enumerate() {
        items_of[item.package].push(i);
    }
    for (pi, cp) in packages.iter().enumerate() {
        if cp.shadowed {
            continue;
        }
        let p = &cp.package;
        let package_name = if p.name == p.id.as_str() {
            p.name.clone()
        } else {
            format!("{} {}", p.name, p.id)
        };
        let visible_items: Vec<usize> = items_of[pi]
            .iter()
            .copied()
            .filter(|&i| items[i].exposed && !items[i].hidden && items[i].wire.is_some())
            .collect();
        let visible_skills: Vec<&quiver_package::skill::Skill> = p
            .all_skills()
            .filter(|s| !s.meta.disable_model_invocation)
            .collect();
        if visible_items.is_empty() && visible_skills.is_empty() {
            continue;
        }
        entries.push(Entry {
            kind: EntryKind::Package,
            package: Some(pi),
            item: None,
            id: p.id.to_string(),
            wire: None,
            summary: p.description.clone(),
        });
        docs.push(SearchDoc {
            name: p.id.to_string(),
            summary: p.description.clone(),
            package_name: package_name.clone(),
            ..SearchDoc::default()
        });
        for &ii in &visible_items {
            let item = &items[ii];
            let doc = match item.kind {
                ItemKind::Tool => {
                    let t = &p.tools[item.index];
                    SearchDoc {
                        name: item.name.clone(),
                        summary: t.description.summary_line(),
                        description: [
                            &t.description.summary,
                            &t.description.when_to_use,
                            &t.description.input_rules,
                            &t.description.example,
                        ]
                        .iter()
                        .filter(|s| !s.is_empty())
                        .map(|s| s.as_str())
                        .collect::<Vec<_>>()
                        .join("\n"),
                        when_not_to_use: t.description.when_not_to_use.clone(),
                        triggers: t.triggers.clone(),
                        examples: t.examples.iter().map(|e| e.query.clone()).collect(),
                        negative_examples: t.negative_examples.clone(),
                        params: schema_params(&t.input),
                        package_name: package_name.clone(),
                        package_description: p.description.clone(),
                    }
                }
                ItemKind::Agent => {
                    let a = &p.agents[item.index];
                    SearchDoc {
                        name: item.name.clone(),
                        summary: item.summary.clone(),
                        description: a.description.clone(),
                        package_name: package_name.clone(),
                        package_description: p.description.clone(),
                        ..SearchDoc::default()
                    }
                }
                ItemKind::Workflow => {
                    let w = &p.workflows[item.index];
                    SearchDoc {
                        name: item.name.clone(),
                        summary: item.summary.clone(),
                        description: w.description.clone(),
                        params: schema_params(&w.input),
                        package_name: package_name.clone(),
                        package_description: p.description.clone(),
                        ..SearchDoc::default()
                    }
                }
            };
            let kind = match item.kind {
                ItemKind::Tool => EntryKind::Tool,
                ItemKind::Agent => EntryKind::Agent,
                ItemKind::Workflow => EntryKind::Workflow,
            };
            entries.push(Entry {
                kind,
                package: Some(pi),
                item: Some(ii),
                id: item.qualified.clone(),
                wire: item.wire.clone(),
                summary: item.summary.clone(),
            });
            docs.push(doc);
        }
        for s in visible_skills {
            entries.push(Entry {
                kind: EntryKind::Skill,
                package: Some(pi),
                item: None,
                id: s.id.clone(),
                wire: None,
                summary: quiver_package::tool::first_sentence(&s.description),
            });
            docs.push(SearchDoc {
                name: s.name.clone(),
                summary: quiver_package::tool::first_sentence(&s.description),
                description: [
                    s.description.as_str(),
                    s.meta.when_to_use.as_deref().unwrap_or(""),
                ]
                .join("\n"),
                examples: s.meta.examples.clone(),
                negative_examples: s.meta.negative_examples.clone(),
                package_name: package_name.clone(),
                package_description: p.description.clone(),
                ..SearchDoc::default()
            });
        }
    }
    for b in builtins {
        entries.push(Entry {
            kind: EntryKind::Builtin,
            package: None,
            item: None,
            id: b.name.clone(),
            wire: Some(b.name.clone()),
            summary: quiver_package::tool::first_sentence(&b.description),
        });
        docs.push(SearchDoc {
            name: b.name.clone(),
            summary: quiver_package::tool::first_sentence(&b.description),
            description: b.description.clone(),
            ..SearchDoc::default()
        });
    }
    (entries, docs)
}
