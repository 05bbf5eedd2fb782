//! Quiver's MCP client: it speaks to MCP servers as their client (rmcp), so their tools can
//! go through Quiver's governed pipeline like any package tool.
//!
//! The main types are [`McpClient`] (one session: a server process over stdio inside
//! Quiver's sandbox, or a remote server over Streamable HTTP), [`config::McpServers`] (the
//! config file's `mcp_servers:` section, checked) with [`config::McpServer::connect`], and
//! [`discovery::discover_all`] (every configured server's tool list, now or from its cache,
//! and the skills it offers through the MCP Skills extension, mirrored as [`skills`] says).
//! Errors are one [`McpClientError`]; a remote server's 401 and 403 are their own variants,
//! read from rmcp's typed transport errors.
//!
//! ```no_run
//! use std::time::Duration;
//! use quiver_mcp_client::{McpClient, Remote};
//!
//! let remote = Remote { url: "https://mcp.example.com/mcp".into(), ..Remote::default() };
//! let client = McpClient::connect("crm", &remote, Duration::from_secs(10), None)?;
//! let tools = client.list_tools(Duration::from_secs(10))?;
//! println!("{} tools", tools.len());
//! # Ok::<(), quiver_mcp_client::McpClientError>(())
//! ```

pub mod config;
pub mod discovery;
mod fetch_skills;
mod session;
pub mod skills;

use std::time::Duration;

use quiver_sandbox::SandboxError;

pub use session::{CONTEXT_META_KEY, McpClient, Remote, ToolsChanged};

/// Why an MCP session could not start or a request failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum McpClientError {
    /// The sandbox of a local server failed (could not start it, or denied what it tried).
    #[error(transparent)]
    Sandbox(#[from] SandboxError),
    /// A remote server answered 401: it refused the credentials.
    #[error("{url} answered 401 Unauthorized: it refused the bearer token")]
    Unauthorized {
        /// The server's endpoint.
        url: String,
    },
    /// A remote server answered 403: the credentials do not allow this.
    #[error("{url} answered 403 Forbidden: the credentials do not allow this")]
    Forbidden {
        /// The server's endpoint.
        url: String,
    },
    /// A remote server could not be reached or did not start a session.
    #[error("cannot start an MCP session with {url}: {detail}")]
    Connect {
        /// The server's endpoint.
        url: String,
        /// Why, in rmcp's words.
        detail: String,
    },
    /// The session could not be set up on this side (a header, a thread, a missing token).
    #[error("{0}")]
    Setup(String),
    /// The server did not answer in time; a local server was stopped.
    #[error("timed out after {0:?}")]
    TimedOut(Duration),
    /// The server failed, or its tool answered with an error.
    #[error("{0}")]
    Failed(String),
}
