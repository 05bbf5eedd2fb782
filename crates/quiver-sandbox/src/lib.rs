//! Quiver's sandbox: every package tool runs in its own confined processes, with exactly the
//! permissions its `tool.yaml` and `quiver.yaml` declare.
//!
//! The main types are [`Sandbox`] (the runtime's side: it turns a [`Job`] into a policy file
//! and a launcher process, with a timeout, an output limit and the network [`proxy::Proxy`]),
//! [`worker::Worker`] (a long-lived JSON-lines process per package), [`Spawned`] (a confined
//! process the caller speaks to over stdio, as `quiver-mcp-client` does), and the launcher
//! [`launcher::main`] behind `quiver-sandbox-exec --policy-stdin -- CMD...`, which enforces a
//! [`Policy`]: new session, PID/network/IPC/mount namespaces (a root holding only what the
//! policy grants), cgroups, rlimits, a user of the package's own ([`identity`]), no
//! capabilities, `no_new_privs`, Landlock and seccomp.
//!
//! A front that listens (`quiver serve --http`) registers its addresses with
//! [`proxy::register_own_listener`], so no tool is ever proxied to the runtime itself.
//!
//! ```no_run
//! use std::time::Duration;
//! use quiver_sandbox::{Access, Job, Sandbox, SandboxConfig};
//!
//! let config = SandboxConfig::new(
//!     vec!["/usr/local/bin/quiver-sandbox-exec".into()],
//!     "/var/lib/quiver".into(),
//! );
//! let sandbox = Sandbox::new(config)?;
//! let job = Job {
//!     package: "notes".into(),
//!     package_dir: "/srv/packages/notes".into(),
//!     command: vec!["python3".into(), "main.py".into()],
//!     command_dir: "/srv/packages/notes/tools/add_note".into(),
//!     access: Access::default(),
//!     settings: Default::default(),
//!     timeout: Duration::from_secs(5),
//!     limits: Default::default(),
//!     python_env: None,
//! };
//! let output = sandbox.run(&job, br#"{"arguments": {"text": "hi"}, "context": {}}"#)?;
//! assert_eq!(output.code, 0);
//! # Ok::<(), quiver_sandbox::SandboxError>(())
//! ```

mod cgroup;
mod disk;
pub mod grants;
pub mod identity;
pub mod launcher;
pub mod output;
pub mod ownership;
pub mod policy;
pub mod proxy;
mod relay;
mod sandbox;
mod seccomp;
mod sys;
mod view;
pub mod worker;

pub use policy::{LimitRequest, Limits, Network, Policy};
pub use sandbox::{
    Access, Job, Output, SANDBOX_PATH, Sandbox, SandboxConfig, Spawned, kill_process_group, support,
};
pub use sys::landlock_abi;

/// This build of the sandbox (a hash of its sources and of `Cargo.lock`): a launcher refuses
/// a policy written by another build, and prints its own with `--build-id`.
pub const BUILD: &str = env!("QUIVER_SANDBOX_BUILD");

/// Why a sandboxed run did not produce output.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SandboxError {
    /// This machine cannot enforce the sandbox and the operator did not allow running without it.
    #[error("{0}")]
    Unavailable(String),
    /// Preparing or starting the sandbox failed.
    #[error("the sandbox could not start the tool: {0}")]
    Setup(String),
    /// It ran past its timeout; its processes were killed.
    #[error("timed out after {0:?}")]
    TimedOut(std::time::Duration),
    /// It wrote more than the stdout limit; it was stopped and its output cut.
    #[error("the tool wrote more than {0} bytes to stdout; its output was cut and it was stopped")]
    OutputTooLarge(usize),
    /// It tried to reach a host outside its permissions.
    #[error("{0}")]
    Denied(String),
    /// It failed (a worker's error or exit).
    #[error("{0}")]
    Failed(String),
}
