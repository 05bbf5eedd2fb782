//! Quiver's host: the application one front runs, assembled once. The config file is read
//! once into one typed [`Config`] (file and line in its errors); [`Host::open`] builds the
//! runtime, the sandbox executor and the catalog (with its [`reload`]: when an external MCP
//! server's tool list changes, when `quiver reload` asks, and, once [`Host::watch_roots`] is
//! called, when the project and user roots change on disk) from it, the same for `quiver call`, `quiver chat` and `quiver serve`,
//! and later the console; [`Host::start_scheduler`] starts the workflow [`Scheduler`] a
//! long-running front runs.
//!
//! ```no_run
//! use quiver_host::{Config, Host, HostOptions, State};
//!
//! let config = Config::load()?;
//! let host = Host::open(config, HostOptions {
//!     roots: vec!["examples/packages".into()],
//!     state: State::open(None)?,
//!     search: None,
//!     approvers: Default::default(),
//!     launcher: vec!["/usr/local/bin/quiver-sandbox-exec".into()],
//!     reload: false,
//! })?;
//! println!("{} packages", host.runtime().catalog().packages().len());
//! # Ok::<(), quiver_host::HostError>(())
//! ```

pub mod config;
mod front;
mod host;
pub mod instance;
mod notices;
pub mod paths;
pub mod reload;
pub mod scheduler;
pub mod search;

use std::path::PathBuf;

pub use config::{Config, ReloadSettings, SearchWeights};
pub use front::{McpFront, Serving, mcp_front};
pub use host::{
    CatalogSource, Host, HostOptions, Loaded, State, agent_meta_tools, executor, sandbox_config,
};
pub use notices::load_notices;
pub use scheduler::Scheduler;
pub use search::SearchModels;

/// Why the host could not be assembled.
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    /// The config file cannot be read or one of its sections is wrong (the message names the
    /// file and the line).
    #[error("{0}")]
    Config(String),
    /// None of `QUIVER_HOME`, `XDG_DATA_HOME` and `HOME` holds an absolute path (an empty or
    /// relative value counts as unset).
    #[error(
        "no state folder: none of QUIVER_HOME, XDG_DATA_HOME and HOME holds an absolute path\n\nhint: set QUIVER_HOME to the absolute path of the folder Quiver keeps its state in"
    )]
    NoStateDir,
    /// A `--root` names a path that does not exist.
    #[error(
        "the root `{}` does not exist\n\nhint: `--root` names a package folder or a folder of packages; check the path",
        .0.display()
    )]
    MissingRoot(PathBuf),
    /// The sandbox cannot be set up.
    #[error("cannot set up the sandbox: {0}")]
    Sandbox(String),
    /// The state database cannot be opened.
    #[error("cannot open the state database `{}`: {why}", path.display())]
    State {
        /// The database.
        path: PathBuf,
        /// Why.
        why: String,
    },
    /// The MCP front's secret cannot be read or written.
    #[error("the MCP secret `{}`: {why}", path.display())]
    Secret {
        /// Its file.
        path: PathBuf,
        /// Why.
        why: String,
    },
    /// The workflow scheduler cannot start.
    #[error("cannot start the workflow scheduler: {0}")]
    Scheduler(String),
    /// The catalog reload cannot start.
    #[error("the catalog reload: {0}")]
    Reload(String),
    /// The web console cannot be set up (its login token).
    #[error("cannot set up the console: {0}")]
    Console(String),
    /// An installed embedding model does not load.
    #[error(
        "{what} does not load: {why}\n\nhint: reinstall it with `quiver models install PATH`, or remove it with `quiver models remove {name}`"
    )]
    Model {
        /// Which model.
        what: String,
        /// Why.
        why: String,
        /// Its name for `quiver models remove`.
        name: &'static str,
    },
}
