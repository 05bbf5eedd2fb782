//! The console's static files, compiled into the binary: htmx (vendored, see
//! `static/NOTICE`), the console's scripts (its own, and the package-page bridge) and its
//! style sheet.

use axum::extract::Path;
use axum::http::header;
use axum::response::IntoResponse;

use crate::ConsoleError;

/// `GET /static/{file}`.
pub(crate) async fn file(Path(file): Path<String>) -> Result<impl IntoResponse, ConsoleError> {
    let (body, kind) = match file.as_str() {
        "htmx.min.js" => (
            include_str!("../static/htmx.min.js"),
            "text/javascript; charset=utf-8",
        ),
        "console.js" => (
            include_str!("../static/console.js"),
            "text/javascript; charset=utf-8",
        ),
        "bridge.js" => (
            include_str!("../static/bridge.js"),
            "text/javascript; charset=utf-8",
        ),
        "console.css" => (
            include_str!("../static/console.css"),
            "text/css; charset=utf-8",
        ),
        _ => return Err(ConsoleError::NotFound(file)),
    };
    Ok((
        [
            (header::CONTENT_TYPE, kind),
            (header::CACHE_CONTROL, "max-age=3600"),
        ],
        body,
    ))
}
