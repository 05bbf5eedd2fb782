//! The errors of the agent crate.

use thiserror::Error;

use crate::config::ConfigError;
use crate::provider::ProviderError;

/// Why a turn, a sub-agent or an evaluation could not run.
#[derive(Debug, Error)]
pub enum AgentError {
    /// The model's endpoint failed.
    #[error(transparent)]
    Provider(#[from] ProviderError),
    /// The runtime failed.
    #[error(transparent)]
    Runtime(#[from] quiver_runtime::RuntimeError),
    /// The configuration is wrong.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The run's time ran out before the turn finished (a workflow step's `timeout`).
    #[error("the agent ran out of time after {steps} model requests ({seconds:.1} s allowed)")]
    OutOfTime {
        /// The model requests made.
        steps: usize,
        /// The time allowed, in seconds.
        seconds: f64,
    },
    /// No such agent in the catalog.
    #[error("no agent `{0}` in the catalog (agents are `<package>.<agent>`)")]
    UnknownAgent(String),
    /// Several agents declare the same platform.
    #[error("agents {candidates} all declare platform `{platform}`; choose one with `--agent`")]
    AmbiguousPlatform {
        /// The platform.
        platform: String,
        /// The candidates, joined.
        candidates: String,
    },
    /// An evaluation case file is wrong.
    #[error("{file}: {message}")]
    Cases {
        /// The file.
        file: String,
        /// What is wrong.
        message: String,
    },
}
