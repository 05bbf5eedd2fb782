//! Quiver's web console and its HTTP API, served by `quiver serve` beside the MCP front.
//!
//! The main types are [`Console`] (the operator's door to the state, [`Admin`], plus the
//! runtime's catalog and the console's login) and [`serve`], which answers HTTP on a listener
//! until a shutdown signal. One set of handlers answers HTML or JSON by `Accept`; every action
//! is a plain form that also works without JavaScript, and htmx (vendored, `static/`) with a
//! Server-Sent Events stream refreshes fragments when something changes.
//!
//! Security (docs/console.md): login always on (a random token, printed once as a login link,
//! exchanged for an `HttpOnly; SameSite=Strict` cookie; the same token as a bearer token for
//! scripts), a `Host` allowlist (a rebinding host gets 421), a CSRF token and an `Origin`
//! check on every state change, a strict CSP. An approval is answered with the digest of the
//! arguments the person saw: a card that changed, expired or was already answered gets 409 and
//! nothing runs. A package's own page runs sandboxed and reaches the console only through the
//! message bridge, which calls that package's own items through the runtime's call path.
//!
//! ```no_run
//! # async fn f(admin: quiver_runtime::admin::Admin) -> Result<(), quiver_console::ConsoleError> {
//! use std::sync::Arc;
//! let token = quiver_console::new_token()?;
//! let console = Arc::new(quiver_console::Console::new(
//!     admin,
//!     None,
//!     quiver_console::ConsoleConfig::new(token, std::time::Duration::from_secs(300)),
//! ));
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:8932").await?;
//! quiver_console::serve(console, listener, tokio_util::sync::CancellationToken::new()).await
//! # }
//! ```

mod assets;
mod auth;
mod chart;
mod console;
mod drafts;
mod error;
mod escape;
mod events;
mod negotiate;
mod pages;
mod security;
mod server;

pub use console::{Authoring, Console, ConsoleConfig, login_url, new_token};
pub use error::ConsoleError;
pub use escape::escape_invisible;
pub use server::{DEFAULT_ADDR, router, serve};

#[doc(no_inline)]
pub use quiver_runtime::admin::Admin;
