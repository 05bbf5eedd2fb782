//! The one error type of the engine.

use quiver_package::workflow::expr::ExprError;

/// Everything the workflow engine can fail with.
#[derive(Debug, thiserror::Error)]
pub enum WorkflowError {
    /// A condition or template does not parse (the loader checks them, so a pinned definition
    /// that fails here was changed by hand).
    #[error("`{text}` does not parse: {source}")]
    Parse {
        /// The expression or template.
        text: String,
        /// Where and why.
        source: ExprError,
    },

    /// An expression parsed but cannot be evaluated on these values (`"a" < 1`).
    #[error("{0}")]
    Eval(String),

    /// A cron expression or time zone is not valid.
    #[error("schedule: {0}")]
    Schedule(String),

    /// The store failed.
    #[error(transparent)]
    Store(#[from] quiver_store::StoreError),

    /// A pinned definition is missing or does not decode.
    #[error("definition {digest}: {detail}")]
    Definition {
        /// Its digest.
        digest: String,
        /// What is wrong.
        detail: String,
    },

    /// The run does not exist.
    #[error("no such run: {0}")]
    NoRun(String),

    /// The request does not fit the run's state (answering an approval it does not wait on,
    /// approving one's own run).
    #[error("{0}")]
    Refused(String),
}

/// Shorthand for results of the engine.
pub type Result<T, E = WorkflowError> = std::result::Result<T, E>;
