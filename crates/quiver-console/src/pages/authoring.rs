//! `/drafts`: package authoring in the manner of Gem Studio. A person makes a package from a
//! template, edits its files (a textarea per file, a plain form), sees `quiver lint`'s
//! diagnostics beside each file, and installs it through the same checked path as
//! `quiver install --allow-unsigned` (the install store stages, checks and shows it first; the
//! person confirms what was shown). Each step is audited with the operator.

use askama::Template;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Redirect, Response};
use axum::{Extension, Form};
use quiver_install::InstallError;
use quiver_install::store::{CommitOptions, Committed, Record, Staged, Store};
use quiver_package::distribution::permission_diff::{PermissionChange, escalates};
use quiver_runtime::operator::{Action, DraftStep};
use serde::{Deserialize, Serialize};

use crate::auth::OPERATOR;
use crate::console::Authoring;
use crate::drafts::{DraftFile, Drafts, Lint, Starter, template};
use crate::pages::{self, Chrome};
use crate::server::{Ctx, Who};
use crate::{ConsoleError, escape_invisible};

/// The longest description a template takes.
const MAX_DESCRIPTION: usize = 500;

fn authoring(ctx: &Ctx) -> Result<Authoring, ConsoleError> {
    ctx.console.config.authoring.clone().ok_or_else(|| {
        ConsoleError::NotFound(
            "package authoring is off: this console was started without a state folder".into(),
        )
    })
}

/// Runs blocking file work off the async threads.
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, ConsoleError> + Send + 'static,
) -> Result<T, ConsoleError> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| ConsoleError::Io(std::io::Error::other(e)))?
}

async fn audit(
    ctx: &Ctx,
    package: String,
    step: DraftStep,
    what: String,
) -> Result<(), ConsoleError> {
    pages::with_admin(ctx, move |admin| {
        Ok(admin.record(
            Action::Draft {
                package: &package,
                step,
                what: &what,
            },
            OPERATOR,
        )?)
    })
    .await
}

#[derive(Template)]
#[template(path = "drafts.html")]
struct DraftsPage {
    chrome: Chrome,
    drafts: Vec<String>,
}

/// `GET /drafts`: the drafts and the form that makes one.
pub(crate) async fn list(
    State(ctx): State<Ctx>,
    Extension(who): Extension<Who>,
    headers: HeaderMap,
) -> Result<Response, ConsoleError> {
    let a = authoring(&ctx)?;
    let drafts = blocking(move || Drafts::new(&a.state_dir).list()).await?;
    if pages::wants_json(&headers) {
        return Ok(pages::json(&drafts));
    }
    let chrome = pages::chrome(&ctx, &who).await?;
    pages::html(&DraftsPage { chrome, drafts })
}

/// The form that makes a draft.
#[derive(Debug, Deserialize)]
pub(crate) struct CreateForm {
    pub id: String,
    #[serde(default)]
    pub description: String,
    /// `tool` or `skill`.
    pub starter: String,
    /// The tool's or skill's name.
    pub item: String,
}

/// `POST /drafts`: makes draft `id` from the template; 409 when it exists.
pub(crate) async fn create(
    State(ctx): State<Ctx>,
    headers: HeaderMap,
    Form(form): Form<CreateForm>,
) -> Result<Response, ConsoleError> {
    let a = authoring(&ctx)?;
    let starter = Starter::parse(form.starter.trim())?;
    let id = form.id.trim().to_owned();
    let item = form.item.trim().to_owned();
    quiver_package::names::check_name(&item)
        .map_err(|e| ConsoleError::BadRequest(format!("the {} name: {e}", form.starter)))?;
    let description = form.description.trim().to_owned();
    if description.is_empty()
        || description.len() > MAX_DESCRIPTION
        || description.contains(['\n', '\r'])
    {
        return Err(ConsoleError::BadRequest(format!(
            "the description is one line of 1 to {MAX_DESCRIPTION} bytes"
        )));
    }
    let files = template(&id, &description, starter, &item);
    let made = id.clone();
    blocking(move || Drafts::new(&a.state_dir).create(&made, &files)).await?;
    audit(
        &ctx,
        id.clone(),
        DraftStep::Create,
        form.starter.trim().to_owned(),
    )
    .await?;
    if pages::wants_json(&headers) {
        return Ok(pages::json(&serde_json::json!({ "draft": id })));
    }
    Ok(Redirect::to(&format!("/drafts/{id}")).into_response())
}

/// One file in the editor with its diagnostics.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct EditedFile {
    pub path: String,
    pub text: Option<String>,
    pub lints: Vec<Lint>,
    /// An id for the page (`file-` and the path's bytes in hex).
    pub anchor: String,
}

/// A draft as the editor shows it.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct DraftView {
    pub id: String,
    pub files: Vec<EditedFile>,
    /// Diagnostics about no file of the draft.
    pub other: Vec<Lint>,
    pub errors: usize,
    pub warnings: usize,
}

fn anchor(path: &str) -> String {
    let hex: String = path.bytes().map(|b| format!("{b:02x}")).collect();
    format!("file-{hex}")
}

/// The editor's view of draft `id`: each file with the diagnostics about it.
pub(crate) fn view(id: &str, files: Vec<DraftFile>, lints: Vec<Lint>) -> DraftView {
    let errors = lints.iter().filter(|l| l.severity == "error").count();
    let warnings = lints.iter().filter(|l| l.severity == "warning").count();
    let mut other = Vec::new();
    let mut edited: Vec<EditedFile> = files
        .into_iter()
        .map(|f| EditedFile {
            anchor: anchor(&f.path),
            path: f.path,
            text: f.text,
            lints: Vec::new(),
        })
        .collect();
    for lint in lints {
        match edited.iter_mut().find(|f| f.path == lint.file) {
            Some(f) => f.lints.push(lint),
            None => other.push(lint),
        }
    }
    DraftView {
        id: id.to_owned(),
        files: edited,
        other,
        errors,
        warnings,
    }
}

#[derive(Template)]
#[template(path = "draft.html")]
struct DraftPage {
    chrome: Chrome,
    view: DraftView,
}

/// `GET /drafts/{id}`: the editor, with `quiver lint`'s diagnostics beside each file.
pub(crate) async fn show(
    State(ctx): State<Ctx>,
    Extension(who): Extension<Who>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Result<Response, ConsoleError> {
    let a = authoring(&ctx)?;
    let draft = id.clone();
    let view = blocking(move || {
        let drafts = Drafts::new(&a.state_dir);
        Ok(view(&draft, drafts.files(&draft)?, drafts.lint(&draft)?))
    })
    .await?;
    if pages::wants_json(&headers) {
        return Ok(pages::json(&view));
    }
    let chrome = pages::chrome(&ctx, &who).await?;
    pages::html(&DraftPage { chrome, view })
}

/// The form that saves one file.
#[derive(Debug, Deserialize)]
pub(crate) struct SaveForm {
    pub path: String,
    #[serde(default)]
    pub text: String,
}

/// `POST /drafts/{id}/files`: writes one file of the draft (a new one too), then shows the
/// editor again (a browser is sent back to it; a script gets the diagnostics).
pub(crate) async fn save(
    State(ctx): State<Ctx>,
    headers: HeaderMap,
    Path(id): Path<String>,
    Form(form): Form<SaveForm>,
) -> Result<Response, ConsoleError> {
    let a = authoring(&ctx)?;
    // A browser sends a textarea's line breaks as CRLF.
    let text = form.text.replace("\r\n", "\n");
    let path = form.path.trim().to_owned();
    let (draft, file) = (id.clone(), path.clone());
    let lints = blocking(move || {
        let drafts = Drafts::new(&a.state_dir);
        drafts.write(&draft, &file, &text)?;
        drafts.lint(&draft)
    })
    .await?;
    audit(&ctx, id.clone(), DraftStep::Save, path.clone()).await?;
    if pages::wants_json(&headers) {
        return Ok(pages::json(&lints));
    }
    Ok(Redirect::to(&format!("/drafts/{id}#{}", anchor(&path))).into_response())
}

/// What the person sees before saying yes: the lines `quiver install` prints.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Summary {
    pub id: String,
    pub version: String,
    pub digest: String,
    pub lines: Vec<String>,
    /// The permission changes of an update (`+ dimension: what`, `- ...`).
    pub changes: Vec<String>,
    /// Whether the update asks for more than the installed version.
    pub escalates: bool,
    pub diagnostics: Vec<String>,
}

/// The summary of `staged` (as `quiver install` describes a package before its question),
/// with the permission changes against the installed version if any.
fn summary(
    store: &Store,
    staged: &Staged,
    pending: Option<&(Record, Vec<PermissionChange>)>,
) -> Summary {
    let r = &staged.record;
    let mut lines: Vec<String> = quiver_install::summary::confusable_warnings(store, staged)
        .into_iter()
        .chain(quiver_install::summary::describe(staged, None))
        .map(|line| escape_invisible(&line))
        .collect();
    let mut changes = Vec::new();
    if let Some((old, diff)) = pending {
        lines.push(format!("update from {} ({})", old.version, old.digest));
        if diff.is_empty() {
            changes.push("permissions: unchanged".to_owned());
        }
        for c in diff {
            changes.extend(
                c.added
                    .iter()
                    .map(|a| format!("+ {}: {}", c.dimension, escape_invisible(a))),
            );
            changes.extend(
                c.removed
                    .iter()
                    .map(|a| format!("- {}: {}", c.dimension, escape_invisible(a))),
            );
        }
    }
    Summary {
        id: r.id.clone(),
        version: r.version.to_string(),
        digest: r.digest.clone(),
        lines,
        changes,
        escalates: pending.is_some_and(|(_, diff)| escalates(diff)),
        diagnostics: staged.diagnostics.iter().map(diagnostic_line).collect(),
    }
}

fn diagnostic_line(d: &quiver_package::Diagnostic) -> String {
    let at = match d.line {
        Some(line) => format!("{}:{line}", d.file.display()),
        None => d.file.display().to_string(),
    };
    escape_invisible(&format!("{} [{}] {at}: {}", d.severity, d.code, d.message))
}

/// The form of an install: without `confirm=yes` it only shows the summary.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct InstallForm {
    #[serde(default)]
    pub confirm: Option<String>,
    /// The digest the person was shown.
    #[serde(default)]
    pub digest: Option<String>,
    /// `yes`: accept the permissions an update adds.
    #[serde(default)]
    pub accept_permissions: Option<String>,
}

/// How an install went, as the page shows it.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct InstallView {
    pub draft: String,
    pub summary: Option<Summary>,
    /// `installed`, `updated` or `already installed`, once done.
    pub done: Option<String>,
    /// Why it was refused.
    pub error: Option<String>,
    pub diagnostics: Vec<String>,
}

#[derive(Template)]
#[template(path = "draft_install.html")]
struct InstallPage {
    chrome: Chrome,
    view: InstallView,
}

fn refused(draft: &str, e: InstallError) -> Result<InstallView, ConsoleError> {
    match e {
        InstallError::Io { .. } | InstallError::Stream(_) | InstallError::State { .. } => {
            Err(ConsoleError::Io(std::io::Error::other(e.to_string())))
        }
        e => {
            let diagnostics = match &e {
                InstallError::Check(diags) => diags.iter().map(diagnostic_line).collect(),
                _ => Vec::new(),
            };
            Ok(InstallView {
                draft: draft.to_owned(),
                summary: None,
                done: None,
                error: Some(escape_invisible(&e.to_string())),
                diagnostics,
            })
        }
    }
}

/// Stages draft `id` and shows it, or (confirmed, with the digest that was shown) commits it.
fn install_blocking(
    a: &Authoring,
    id: &str,
    form: &InstallForm,
) -> Result<InstallView, ConsoleError> {
    let dir = Drafts::new(&a.state_dir).existing(id)?;
    let store = Store::new(&a.state_dir);
    let staged = match store.stage_folder(&dir, Some(&format!("console draft `{id}`"))) {
        Ok(s) => s,
        Err(e) => return refused(id, e),
    };
    let pending = match store.pending_changes(&staged) {
        Ok(p) => p,
        Err(e) => return refused(id, e),
    };
    let summary = summary(&store, &staged, pending.as_ref());
    if form.confirm.as_deref() != Some("yes") {
        return Ok(InstallView {
            draft: id.to_owned(),
            summary: Some(summary),
            done: None,
            error: None,
            diagnostics: Vec::new(),
        });
    }
    if form.digest.as_deref() != Some(summary.digest.as_str()) {
        return Err(ConsoleError::Conflict(format!(
            "the draft changed since its summary was shown (now {}): look at it again before installing",
            summary.digest
        )));
    }
    let options = CommitOptions {
        accept_permissions: form.accept_permissions.as_deref() == Some("yes"),
        allow_downgrade: false,
        // As `quiver install` reads it: a draft's requirements come from this wheel folder
        // when the operator set one for the server.
        wheels: std::env::var_os("QUIVER_WHEELS")
            .filter(|dir| !dir.is_empty())
            .map(std::path::PathBuf::from),
        fail_at: None,
    };
    let done = match store.commit(staged, &options) {
        Ok(Committed::New) => "installed",
        Ok(Committed::Updated { .. }) => "updated",
        Ok(Committed::Unchanged) => "already installed",
        Err(e) => return refused(id, e),
    };
    (a.after_install)();
    Ok(InstallView {
        draft: id.to_owned(),
        summary: Some(summary),
        done: Some(done.to_owned()),
        error: None,
        diagnostics: Vec::new(),
    })
}

/// `POST /drafts/{id}/install`: shows what would be installed (`quiver install`'s summary,
/// marked unsigned) with a confirm button; `confirm=yes` with the digest shown installs it
/// (409 when the draft changed since). A refused install (lint errors, added permissions not
/// accepted) shows why, with 409.
pub(crate) async fn install(
    State(ctx): State<Ctx>,
    Extension(who): Extension<Who>,
    headers: HeaderMap,
    Path(id): Path<String>,
    Form(form): Form<InstallForm>,
) -> Result<Response, ConsoleError> {
    let a = authoring(&ctx)?;
    let draft = id.clone();
    let view = blocking(move || install_blocking(&a, &draft, &form)).await?;
    if let (Some(_), Some(summary)) = (&view.done, &view.summary) {
        audit(&ctx, id.clone(), DraftStep::Install, summary.digest.clone()).await?;
    }
    let status = if view.error.is_some() {
        axum::http::StatusCode::CONFLICT
    } else {
        axum::http::StatusCode::OK
    };
    if pages::wants_json(&headers) {
        return Ok((status, pages::json(&view)).into_response());
    }
    let chrome = pages::chrome(&ctx, &who).await?;
    Ok((status, pages::html(&InstallPage { chrome, view })?).into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lint(file: &str, severity: &str) -> Lint {
        Lint {
            severity: severity.into(),
            code: "c".into(),
            file: file.into(),
            line: Some(3),
            message: "m".into(),
            help: None,
        }
    }

    #[test]
    fn lints_go_beside_their_file() {
        let files = vec![
            DraftFile {
                path: "quiver.yaml".into(),
                text: Some("id: x\n".into()),
            },
            DraftFile {
                path: "tools/a/tool.yaml".into(),
                text: None,
            },
        ];
        let v = view(
            "x",
            files,
            vec![
                lint("tools/a/tool.yaml", "error"),
                lint("quiver.yaml", "warning"),
                lint("", "error"),
            ],
        );
        assert_eq!((v.errors, v.warnings), (2, 1));
        assert_eq!(v.files[0].lints.len(), 1);
        assert_eq!(v.files[1].lints[0].severity, "error");
        assert_eq!(v.other.len(), 1);
        assert_eq!(anchor("a/b"), "file-612f62");
    }
}
