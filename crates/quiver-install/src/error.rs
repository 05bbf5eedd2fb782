//! The crate's error type.

use std::path::PathBuf;

use quiver_package::Diagnostic;
use quiver_package::distribution::ManifestError;
use quiver_package::distribution::paths::PathProblem;
use quiver_package::distribution::signature::SignatureError;

/// Why packing, verifying or installing stopped.
#[derive(Debug, thiserror::Error)]
pub enum InstallError {
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// An I/O error without a path (a stream).
    #[error(transparent)]
    Stream(#[from] std::io::Error),
    /// The archive breaks a rule of safe unpacking.
    #[error("refused archive: {0}")]
    Archive(String),
    /// An archive entry's path breaks a rule.
    #[error("refused archive: entry `{path}`: {problem}")]
    EntryPath {
        /// The path, escaped as it was read.
        path: String,
        /// The rule.
        problem: PathProblem,
    },
    /// The manifest is malformed.
    #[error("refused manifest: {0}")]
    Manifest(#[from] ManifestError),
    /// The signatures do not let the package in.
    #[error("refused signature: {0}")]
    Signature(#[from] SignatureError),
    /// The package does not pass [`quiver_package::check::check_package`].
    #[error("the package has {} error(s); `quiver lint` shows them", .0.iter().filter(|d| d.is_error()).count())]
    Check(Vec<Diagnostic>),
    /// An update that adds permissions, not accepted.
    #[error(transparent)]
    Escalation(#[from] crate::store::Escalation),
    /// The package's Python environment could not be made (`python3 -m venv`, `pip install`
    /// of its `requirements.txt`, or `pip check` failed); nothing of it is left.
    #[error("the package's Python environment: {0}")]
    Environment(String),
    /// Something the user asked for that cannot be done (a name unknown, a downgrade).
    #[error("{0}")]
    Refused(String),
    /// A state file (trust store, installed list, key) that cannot be parsed.
    #[error("{path}: {message}")]
    State {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
}

/// Wraps an I/O error with its path.
pub(crate) fn io(path: &std::path::Path) -> impl FnOnce(std::io::Error) -> InstallError + '_ {
    move |source| InstallError::Io {
        path: path.to_owned(),
        source,
    }
}
