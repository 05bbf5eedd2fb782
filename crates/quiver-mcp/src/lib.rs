//! Quiver's MCP front: any MCP client (Claude Code, Codex, Cursor, an SDK) uses a Quiver
//! catalog with all of its governance.
//!
//! The main types are [`Front`] (a runtime, the identity settings of [`McpConfig`] and the
//! secret that seals conversation handles and pending questions) and the two servers,
//! [`serve_stdio`] and [`serve_http`], which take their transport and a shutdown token.
//!
//! ```no_run
//! # async fn example(runtime: std::sync::Arc<quiver_runtime::Runtime>) -> Result<(), quiver_mcp::McpError> {
//! use std::sync::Arc;
//! use quiver_mcp::{Front, McpConfig, serve_http};
//! use tokio_util::sync::CancellationToken;
//!
//! let front = Arc::new(Front::new(runtime, McpConfig::default(), vec![0x5a; 32]));
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:8931").await?;
//! serve_http(front, listener, CancellationToken::new()).await
//! # }
//! ```
//!
//! Only [`wire`] and [`http`] name rmcp types; [`front`] holds the protocol-free logic (the
//! conversation handle, the fixed tool list, consent questions), [`skills`] the Skills
//! extension's index. See `docs/mcp.md`.

pub mod config;
pub mod front;
pub mod hooks;
pub mod http;
pub mod owner_token;
pub mod runs;
pub mod seal;
pub mod sessions;
pub mod skills;
mod traced;
pub mod wire;

pub use config::{ConfigError, McpConfig};
pub use front::Front;
pub use http::serve_http;

use std::sync::Arc;

use rmcp::ServiceExt;
use tokio_util::sync::CancellationToken;

/// A server failure.
#[derive(Debug, thiserror::Error)]
pub enum McpError {
    /// Socket or stdio I/O.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// The MCP session failed to start.
    #[error("the MCP session failed to start: {0}")]
    Start(String),
    /// The MCP session ended abnormally.
    #[error("the MCP session ended abnormally: {0}")]
    Session(String),
}

/// Serves one MCP client over `transport` (stdin/stdout for `quiver serve --stdio`) until the
/// client disconnects or `shutdown` is cancelled.
pub async fn serve_stdio<R, W>(
    front: Arc<Front>,
    transport: (R, W),
    shutdown: CancellationToken,
) -> Result<(), McpError>
where
    R: tokio::io::AsyncRead + Send + Unpin + 'static,
    W: tokio::io::AsyncWrite + Send + Unpin + 'static,
{
    let server = traced::Traced(wire::QuiverServer::new(front, wire::Transport::Stdio));
    let running = server
        .serve_with_ct(transport, shutdown)
        .await
        .map_err(|e| McpError::Start(e.to_string()))?;
    running
        .waiting()
        .await
        .map(|_| ())
        .map_err(|e| McpError::Session(e.to_string()))
}
