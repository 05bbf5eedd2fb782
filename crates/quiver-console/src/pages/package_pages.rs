//! `/packages/{id}/pages/{path}`: a package's own static pages (its `pages/` folder), served
//! sandboxed: `Content-Security-Policy: sandbox allow-scripts` without `allow-same-origin`, so
//! a page runs with an opaque origin, reads no console cookie, and cannot post the console's
//! forms (its requests carry `Origin: null` and no `SameSite=Strict` cookie). It cannot fetch
//! at all (`connect-src 'none'`).
//!
//! Its own CSS, scripts, images and fonts are files beside it, requested by that opaque origin:
//! the browser sends no `SameSite=Strict` cookie with them, so these (and only these: by
//! extension, inside a package's `pages/` folder) are served without a sign-in
//! ([`asset_without_sign_in`]). They are the package's static files, as readable on disk; an
//! HTML page, or any other file, still needs the sign-in. Each is served with the same sandbox
//! policy and `nosniff`, and the page's policy loads them from its own package's folder only.

use std::path::{Component, Path, PathBuf};

use axum::extract::{Path as UrlPath, State};
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::{IntoResponse, Response};

use crate::ConsoleError;
use crate::server::Ctx;

/// The largest file served (bytes).
const MAX_FILE: u64 = 5 << 20;

/// The extensions of a page's own subresources, served without a sign-in.
const ASSETS: [&str; 10] = [
    "css", "js", "mjs", "png", "jpg", "jpeg", "gif", "webp", "woff", "woff2",
];

/// Whether `path` (the request's, still percent-encoded) names a package page's own
/// subresource (CSS, script, image, font) inside `/packages/{id}/pages/`: such a request comes
/// from the page's opaque origin without the cookie, and is served without a sign-in. The
/// handler still keeps it inside the folder.
pub(crate) fn asset_without_sign_in(path: &str) -> bool {
    let Some(rest) = path.strip_prefix("/packages/") else {
        return false;
    };
    let Some((id, rel)) = rest.split_once("/pages/") else {
        return false;
    };
    let id_ok = !id.is_empty()
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    id_ok
        && !rel.contains('%')
        && !rel
            .split('/')
            .any(|part| part.is_empty() || part.starts_with('.'))
        && is_asset(Path::new(rel))
}

/// Whether `file` is a subresource by its extension (CSS, script, image, font).
fn is_asset(file: &Path) -> bool {
    file.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| ASSETS.contains(&e.to_ascii_lowercase().as_str()))
}

/// The policy of a package page of package `id` served to `host`: sandboxed (an opaque
/// origin), no requests out, scripts, styles, images and fonts inline or from this package's
/// own `pages/` folder only, and framed by the console's own pages only (the bridge's host).
pub(crate) fn page_csp(host: &str, id: &str) -> String {
    let own = format!("http://{host}/packages/{id}/pages/");
    format!(
        "sandbox allow-scripts allow-popups; default-src 'none'; script-src 'unsafe-inline' {own}; style-src 'unsafe-inline' {own}; img-src data: {own}; font-src data: {own}; connect-src 'none'; form-action 'none'; base-uri 'none'; frame-ancestors http://{host}"
    )
}

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
    headers: HeaderMap,
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
    let asset = is_asset(&file);
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
    // The guard let only an allowed Host through.
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or_default();
    let csp = HeaderValue::from_str(&page_csp(host, &id))
        .map_err(|e| ConsoleError::BadRequest(e.to_string()))?;
    // The page's opaque origin is not this origin: its own subresources must allow being
    // loaded cross-origin (they are the package's static files, served without a sign-in
    // anyway); everything else keeps `same-origin`.
    let corp = if asset { "cross-origin" } else { "same-origin" };
    Ok((
        [
            (header::CONTENT_TYPE, HeaderValue::from_static(kind)),
            (header::CONTENT_SECURITY_POLICY, csp),
            (
                header::HeaderName::from_static("cross-origin-resource-policy"),
                HeaderValue::from_static(corp),
            ),
            // The console's page that hosts it frames it (`frame-ancestors` above decides).
            (
                header::X_FRAME_OPTIONS,
                HeaderValue::from_static("SAMEORIGIN"),
            ),
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
    fn only_a_pages_own_assets_are_served_without_a_sign_in() {
        let cases = [
            ("/packages/weather/pages/app.js", true),
            ("/packages/weather/pages/css/style.CSS", true),
            ("/packages/weather/pages/img/logo.png", true),
            ("/packages/weather/pages/font.woff2", true),
            ("/packages/weather/pages/index.html", false),
            ("/packages/weather/pages/", false),
            ("/packages/weather/pages/data.json", false),
            ("/packages/weather/pages/readme.txt", false),
            ("/packages/weather/pages/logo.svg", false),
            ("/packages/weather/pages/../secret.css", false),
            ("/packages/weather/pages/..%2fsecret.css", false),
            ("/packages/weather/pages/%2e%2e/x.js", false),
            ("/packages/weather/pages/.hidden/x.js", false),
            ("/packages/weather/pages//x.js", false),
            ("/packages/weather/x.js", false),
            ("/packages//pages/x.js", false),
            ("/packages/a%2fb/pages/x.js", false),
            ("/packages/weather/pages/x.js/../../../approvals", false),
            ("/approvals/x.js", false),
            ("/static/../packages/weather/pages/x.html", false),
        ];
        for (path, want) in cases {
            assert_eq!(asset_without_sign_in(path), want, "{path}");
        }
    }

    #[test]
    fn a_page_loads_from_its_own_folder_only() {
        let csp = page_csp("127.0.0.1:8932", "weather");
        assert!(
            csp.starts_with("sandbox allow-scripts allow-popups;"),
            "{csp}"
        );
        assert!(!csp.contains("allow-same-origin"));
        assert!(
            csp.contains(
                "script-src 'unsafe-inline' http://127.0.0.1:8932/packages/weather/pages/;"
            )
        );
        assert!(csp.contains("connect-src 'none'"));
        assert!(
            csp.ends_with("frame-ancestors http://127.0.0.1:8932"),
            "{csp}"
        );
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
