//! The crate's one error type.

use thiserror::Error;

/// An error of the policy crate.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum PolicyError {
    /// A permission rule that does not parse (such a rule denies wherever it is evaluated).
    #[error("invalid permission rule `{rule}`: {message}")]
    InvalidRule {
        /// The rule as written.
        rule: String,
        /// What is wrong with it.
        message: String,
    },
}
