//! `/packages/{id}/pages/{path}`: a package's own static pages (its `pages/` folder), served
//! sandboxed: `Content-Security-Policy: sandbox allow-scripts` without `allow-same-origin`, so
//! a page runs with an opaque origin, reads no console cookie, and cannot post the console's
//! forms (its requests carry `Origin: null` and no `SameSite=Strict` cookie). It cannot fetch
//! at all (`connect-src 'none'`).

use std::path::{Component, Path, PathBuf};

use axum::extract::{Path as UrlPath, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};

use crate::ConsoleError;
use crate::server::Ctx;

/// The largest file served (bytes).
const MAX_FILE: u64 = 5 << 20;

/// The policy of every package page.
pub(crate) const PAGE_CSP: &str = "sandbox allow-scripts allow-popups; default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:; font-src data:; connect-src 'none'; form-action 'none'; base-uri 'none'; frame-ancestors 'none'";

/// The file `rel` names inside `root`, or `None` when it would leave it (`..`, an absolute
/// path, a link out) or is not a file. Pure but for the final `canonicalize`.
pub(crate) fn inside(root: &Path, rel: &str) -> Option<PathBuf> {
    let rel = Path::new(rel);
    if rel.components().any(|c| !matches!(c, Component::Normal(_))) {
        return None;
    }
    let root = root.canonicalize().ok()?;
    let file = root.join(rel).canonicalize().ok()?;
    (file.starts_with(&root) && file.is_file()).then_some(file)
}

/// The content type of a page file by its extension (unknown: bytes to download).
pub(crate) fn content_type(path: &Path) -> &'static str {
    match path
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase)
        .as_deref()
    {
        Some("html" | "htm") => "text/html; charset=utf-8",
        Some("css") => "text/css; charset=utf-8",
        Some("js" | "mjs") => "text/javascript; charset=utf-8",
        Some("json") => "application/json",
        Some("txt" | "md") => "text/plain; charset=utf-8",
        Some("svg") => "image/svg+xml",
        Some("png") => "image/png",
        Some("jpg" | "jpeg") => "image/jpeg",
        Some("gif") => "image/gif",
        Some("webp") => "image/webp",
        _ => "application/octet-stream",
    }
}

/// `GET /packages/{id}/pages/{*path}`.
pub(crate) async fn file(
    State(ctx): State<Ctx>,
    UrlPath((id, rel)): UrlPath<(String, String)>,
) -> Result<Response, ConsoleError> {
    let not_found = || ConsoleError::NotFound(format!("page `{rel}` of package `{id}`"));
    let root = ctx
        .console
        .runtime
        .as_ref()
        .and_then(|r| {
            r.catalog()
                .package(&id)
                .filter(|p| !p.shadowed)
                .and_then(|p| p.package.pages.clone())
        })
        .ok_or_else(not_found)?;
    let rel = if rel.is_empty() {
        "index.html".to_owned()
    } else {
        rel.clone()
    };
    let file = inside(&root, &rel).ok_or_else(not_found)?;
    let kind = content_type(&file);
    let bytes = tokio::task::spawn_blocking(move || {
        use std::io::Read;
        let mut bytes = Vec::new();
        std::fs::File::open(&file)?
            .take(MAX_FILE)
            .read_to_end(&mut bytes)?;
        Ok::<_, std::io::Error>(bytes)
    })
    .await
    .map_err(|e| ConsoleError::Io(std::io::Error::other(e)))??;
    Ok((
        [
            (header::CONTENT_TYPE, kind),
            (header::CONTENT_SECURITY_POLICY, PAGE_CSP),
        ],
        bytes,
    )
        .into_response())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn only_files_inside_the_pages_folder() {
        let dir = tempfile::tempdir().unwrap();
        let pages = dir.path().join("pages");
        std::fs::create_dir_all(pages.join("sub")).unwrap();
        std::fs::write(pages.join("index.html"), "hi").unwrap();
        std::fs::write(pages.join("sub/a.css"), "x").unwrap();
        std::fs::write(dir.path().join("secret.txt"), "s").unwrap();
        #[cfg(unix)]
        std::os::unix::fs::symlink(dir.path().join("secret.txt"), pages.join("link.txt")).unwrap();
        let cases = [
            ("index.html", true),
            ("sub/a.css", true),
            ("sub", false),
            ("../secret.txt", false),
            ("sub/../../secret.txt", false),
            ("/etc/passwd", false),
            ("link.txt", false),
            ("missing.html", false),
        ];
        for (rel, want) in cases {
            assert_eq!(inside(&pages, rel).is_some(), want, "{rel}");
        }
    }

    #[test]
    fn content_types() {
        let cases = [
            ("a.html", "text/html; charset=utf-8"),
            ("a.JS", "text/javascript; charset=utf-8"),
            ("a.svg", "image/svg+xml"),
            ("a", "application/octet-stream"),
        ];
        for (name, want) in cases {
            assert_eq!(content_type(Path::new(name)), want);
        }
    }
}
