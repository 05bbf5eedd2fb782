//! The console's errors, and how each becomes an HTTP answer.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use thiserror::Error;

/// What went wrong serving the console.
#[derive(Debug, Error)]
pub enum ConsoleError {
    /// The runtime (its store) failed.
    #[error("runtime: {0}")]
    Runtime(#[from] quiver_runtime::RuntimeError),
    /// A page could not be rendered.
    #[error("template: {0}")]
    Template(#[from] askama::Error),
    /// Listening, accepting or reading the random source failed.
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// No such thing (a card, a package).
    #[error("not found: {0}")]
    NotFound(String),
    /// The request cannot be applied as it stands (a card already answered, expired, or
    /// shown with other arguments): nothing changed.
    #[error("conflict: {0}")]
    Conflict(String),
    /// The request is malformed.
    #[error("bad request: {0}")]
    BadRequest(String),
    /// The request asks for what its sender may not do (a package page's bridge naming
    /// another package's item): nothing ran.
    #[error("refused: {0}")]
    Forbidden(String),
}

impl IntoResponse for ConsoleError {
    fn into_response(self) -> Response {
        let status = match &self {
            ConsoleError::NotFound(_) => StatusCode::NOT_FOUND,
            ConsoleError::Conflict(_) => StatusCode::CONFLICT,
            ConsoleError::BadRequest(_) => StatusCode::BAD_REQUEST,
            ConsoleError::Forbidden(_) => StatusCode::FORBIDDEN,
            ConsoleError::Runtime(_) | ConsoleError::Template(_) | ConsoleError::Io(_) => {
                tracing::warn!(error = %self, "console request failed");
                StatusCode::INTERNAL_SERVER_ERROR
            }
        };
        (status, format!("{self}\n")).into_response()
    }
}
