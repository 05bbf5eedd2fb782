//! `/packages`: what is installed, and per package what it can do (README, skills, exposed
//! and private items with category, approval mode, risk, platforms and permissions, declared
//! settings, diagnostics), read from the runtime's catalog.

use askama::Template;
use axum::Extension;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::Response;
use quiver_catalog::{Catalog, ItemKind};
use serde::Serialize;

use crate::pages::{self, Chrome};
use crate::server::{Ctx, Who};
use crate::{ConsoleError, escape_invisible};

/// The largest README shown (bytes).
const MAX_README: u64 = 256 << 10;

/// A package in the list.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct PackageRow {
    pub id: String,
    pub name: String,
    pub version: String,
    pub description: String,
    pub items: usize,
    pub errors: usize,
    pub warnings: usize,
}

/// An item of a package.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct ItemRow {
    pub name: String,
    pub kind: String,
    pub exposed: bool,
    pub summary: String,
    pub category: String,
    pub approval: String,
    pub risk: String,
    pub platforms: String,
    pub permissions: Vec<String>,
}

/// A diagnostic, as shown.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct DiagnosticRow {
    pub severity: String,
    pub code: String,
    pub message: String,
    pub file: String,
}

/// A prompt section's metadata and budget: never its text.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct PromptRow {
    pub package: String,
    pub name: String,
    pub title: String,
    pub layer: String,
    pub order: i64,
    pub retention: String,
    pub budget: String,
    pub chars: usize,
    pub profiles: String,
}

/// The prompt sections of the package at `index` (metadata only).
fn prompt_rows(catalog: &Catalog, index: usize) -> Vec<PromptRow> {
    let package = &catalog.packages()[index].package;
    package
        .prompts
        .iter()
        .map(|p| PromptRow {
            package: escape_invisible(package.id.as_ref()),
            name: escape_invisible(p.name.as_ref()),
            title: escape_invisible(p.title.as_deref().unwrap_or("")),
            layer: word(&p.layer),
            order: p.order,
            retention: word(&p.retention),
            budget: p
                .max_chars
                .map_or_else(|| "none".into(), |m| format!("{m} chars")),
            chars: p.content.chars().count(),
            profiles: p.profiles.iter().map(word).collect::<Vec<_>>().join(", "),
        })
        .collect()
}

/// What a package can do.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct PackageView {
    pub row: PackageRow,
    pub readme: Option<String>,
    pub skills: Vec<(String, String)>,
    pub items: Vec<ItemRow>,
    pub settings: Vec<String>,
    pub prompts: Vec<PromptRow>,
    pub diagnostics: Vec<DiagnosticRow>,
    /// Whether it has a `pages/` folder (served sandboxed at `pages/index.html`).
    pub pages: bool,
}

fn word<T: Serialize>(value: &T) -> String {
    serde_json::to_value(value)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default()
}

fn diagnostics_of(catalog: &Catalog, root: &std::path::Path) -> Vec<DiagnosticRow> {
    catalog
        .diagnostics()
        .iter()
        .filter(|d| d.file.starts_with(root))
        .map(|d| DiagnosticRow {
            severity: if d.is_error() { "error" } else { "warning" }.into(),
            code: d.code.into(),
            message: escape_invisible(&d.message),
            file: escape_invisible(
                &d.file
                    .strip_prefix(root)
                    .unwrap_or(&d.file)
                    .display()
                    .to_string(),
            ),
        })
        .collect()
}

fn rows(catalog: &Catalog) -> Vec<PackageRow> {
    catalog
        .packages()
        .iter()
        .enumerate()
        .filter(|(_, p)| !p.shadowed)
        .map(|(index, p)| {
            let diagnostics = diagnostics_of(catalog, &p.package.root);
            let errors = diagnostics.iter().filter(|d| d.severity == "error").count();
            PackageRow {
                id: escape_invisible(p.package.id.as_ref()),
                name: escape_invisible(&p.package.name),
                version: p
                    .package
                    .version
                    .as_ref()
                    .map(ToString::to_string)
                    .unwrap_or_default(),
                description: escape_invisible(&p.package.description),
                items: catalog
                    .items()
                    .iter()
                    .filter(|i| i.package == index)
                    .count(),
                errors,
                warnings: diagnostics.len() - errors,
            }
        })
        .collect()
}

/// The number of packages and the ids of those with load errors (the overview's line).
pub(crate) fn error_summary(ctx: &Ctx) -> (usize, Vec<String>) {
    let Some(runtime) = &ctx.console.runtime else {
        return (0, Vec::new());
    };
    let rows = rows(&runtime.catalog());
    let with_errors = rows
        .iter()
        .filter(|r| r.errors > 0)
        .map(|r| r.id.clone())
        .collect();
    (rows.len(), with_errors)
}

fn view(catalog: &Catalog, id: &str, is_set: &dyn Fn(&str) -> bool) -> Option<PackageView> {
    let index = catalog
        .packages()
        .iter()
        .position(|p| !p.shadowed && p.package.id.as_ref() == id)?;
    let package = &catalog.packages()[index].package;
    let row = rows(catalog)
        .into_iter()
        .find(|r| r.id == escape_invisible(id))?;
    let readme = package.readme.as_ref().and_then(|path| {
        let file = std::fs::File::open(path).ok()?;
        let mut text = String::new();
        std::io::Read::read_to_string(&mut std::io::Read::take(file, MAX_README), &mut text)
            .ok()?;
        Some(escape_invisible(&text))
    });
    let skills = package
        .all_skills()
        .map(|s| (escape_invisible(&s.name), escape_invisible(&s.description)))
        .collect();
    let items = catalog
        .items()
        .iter()
        .filter(|i| i.package == index && !i.hidden)
        .map(|item| {
            let tool = (item.kind == ItemKind::Tool)
                .then(|| catalog.tool(item))
                .flatten();
            ItemRow {
                name: escape_invisible(&item.name),
                kind: word(&item.kind),
                exposed: item.exposed,
                summary: escape_invisible(&item.summary),
                category: tool.map(|t| word(&t.category)).unwrap_or_default(),
                approval: tool.map(|t| word(&t.approval)).unwrap_or_default(),
                risk: tool
                    .map(|t| {
                        let risk = t.risk.as_ref().map(word).unwrap_or_default();
                        match t.risk_category.as_ref().map(word) {
                            Some(category) => format!("{risk} ({category})"),
                            None => risk,
                        }
                    })
                    .unwrap_or_default(),
                platforms: tool
                    .and_then(|t| t.platforms.as_ref())
                    .map(|p| p.join(", "))
                    .unwrap_or_else(|| "any".into()),
                permissions: tool
                    .map(|t| {
                        quiver_policy::describe_permissions(&t.permission)
                            .iter()
                            .map(|p| escape_invisible(&p.to_string()))
                            .chain(t.permissions.iter().map(|r| escape_invisible(r)))
                            .collect()
                    })
                    .unwrap_or_default(),
            }
        })
        .collect();
    // Declared settings by name, set or unset: values (and secrets) are never shown.
    let secrets = package.manifest.secret_settings();
    let settings = package
        .manifest
        .config
        .as_ref()
        .and_then(|c| c.get("properties"))
        .and_then(serde_json::Value::as_object)
        .map(|props| {
            props
                .keys()
                .map(|name| {
                    let secret = if secrets.contains(name) {
                        ", secret"
                    } else {
                        ""
                    };
                    let set = if is_set(name) { "set" } else { "unset" };
                    format!("{} ({set}{secret})", escape_invisible(name))
                })
                .collect()
        })
        .unwrap_or_default();
    Some(PackageView {
        row,
        readme,
        skills,
        items,
        settings,
        prompts: prompt_rows(catalog, index),
        pages: package.pages.is_some(),
        diagnostics: diagnostics_of(catalog, &package.root),
    })
}

#[derive(Template)]
#[template(path = "packages.html")]
struct ListPage {
    chrome: Chrome,
    packages: Vec<PackageRow>,
}

#[derive(Template)]
#[template(path = "package.html")]
struct PackagePage {
    chrome: Chrome,
    view: PackageView,
}

/// `GET /packages`.
pub(crate) async fn list(
    State(ctx): State<Ctx>,
    Extension(who): Extension<Who>,
    headers: HeaderMap,
) -> Result<Response, ConsoleError> {
    let packages = ctx
        .console
        .runtime
        .as_ref()
        .map(|r| rows(&r.catalog()))
        .unwrap_or_default();
    if pages::wants_json(&headers) {
        return Ok(pages::json(&packages));
    }
    let chrome = pages::chrome(&ctx, &who).await?;
    pages::html(&ListPage { chrome, packages })
}

/// `GET /packages/{id}`.
pub(crate) async fn show(
    State(ctx): State<Ctx>,
    Extension(who): Extension<Who>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Result<Response, ConsoleError> {
    let view = ctx
        .console
        .runtime
        .as_ref()
        .and_then(|r| view(&r.catalog(), &id, &|key| r.setting_is_set(&id, key)))
        .ok_or_else(|| ConsoleError::NotFound(format!("package `{id}`")))?;
    if pages::wants_json(&headers) {
        return Ok(pages::json(&view));
    }
    let chrome = pages::chrome(&ctx, &who).await?;
    pages::html(&PackagePage { chrome, view })
}

#[derive(Template)]
#[template(path = "prompts.html")]
struct PromptsPage {
    chrome: Chrome,
    prompts: Vec<PromptRow>,
}

/// `GET /prompts`: the directory of prompt sections (metadata and budgets, never text).
pub(crate) async fn prompts(
    State(ctx): State<Ctx>,
    Extension(who): Extension<Who>,
    headers: HeaderMap,
) -> Result<Response, ConsoleError> {
    let prompts: Vec<PromptRow> = ctx
        .console
        .runtime
        .as_ref()
        .map(|r| {
            let catalog = r.catalog();
            (0..catalog.packages().len())
                .filter(|i| !catalog.packages()[*i].shadowed)
                .flat_map(|i| prompt_rows(&catalog, i))
                .collect()
        })
        .unwrap_or_default();
    if pages::wants_json(&headers) {
        return Ok(pages::json(&prompts));
    }
    let chrome = pages::chrome(&ctx, &who).await?;
    pages::html(&PromptsPage { chrome, prompts })
}
