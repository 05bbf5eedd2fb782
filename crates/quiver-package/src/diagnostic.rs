//! Diagnostics: data about a problem in a package, rendered elsewhere (CLI, JSON, console).

use std::fmt;
use std::path::{Path, PathBuf};

use serde::Serialize;

/// How serious a diagnostic is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Informational: nothing to fix.
    Info,
    /// Loaded anyway, but worth fixing.
    Warning,
    /// The file or item it names was not loaded.
    Error,
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Severity::Info => "info",
            Severity::Warning => "warning",
            Severity::Error => "error",
        })
    }
}

/// One problem found while reading a package, with where it is and how to fix it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Diagnostic {
    /// How serious it is.
    pub severity: Severity,
    /// A stable kebab-case code, documented in `docs/diagnostics.md`.
    pub code: &'static str,
    /// What is wrong, one sentence; literals in backticks.
    pub message: String,
    /// The file it concerns.
    pub file: PathBuf,
    /// 1-based line, when known.
    pub line: Option<u32>,
    /// 1-based column, when known.
    pub column: Option<u32>,
    /// How to fix it, when there is something to say.
    pub help: Option<String>,
}

impl Diagnostic {
    /// An error about `file`.
    pub fn error(code: &'static str, file: impl Into<PathBuf>, message: impl Into<String>) -> Self {
        Self::new(Severity::Error, code, file, message)
    }

    /// A warning about `file`.
    pub fn warning(
        code: &'static str,
        file: impl Into<PathBuf>,
        message: impl Into<String>,
    ) -> Self {
        Self::new(Severity::Warning, code, file, message)
    }

    /// A diagnostic of any severity.
    pub fn new(
        severity: Severity,
        code: &'static str,
        file: impl Into<PathBuf>,
        message: impl Into<String>,
    ) -> Self {
        Self {
            severity,
            code,
            message: message.into(),
            file: file.into(),
            line: None,
            column: None,
            help: None,
        }
    }

    /// Sets the 1-based line and column.
    #[must_use]
    pub fn at(mut self, line: u64, column: u64) -> Self {
        self.line = Some(clamp(line));
        self.column = Some(clamp(column));
        self
    }

    /// Sets the 1-based line only.
    #[must_use]
    pub fn at_line(mut self, line: Option<u64>) -> Self {
        self.line = line.map(clamp);
        self.column = line.map(|_| 1);
        self
    }

    /// Adds help text.
    #[must_use]
    pub fn with_help(mut self, help: impl Into<String>) -> Self {
        self.help = Some(help.into());
        self
    }

    /// Whether this is an error.
    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }

    /// Rewrites the file path relative to `base` when it lies under it.
    pub fn relative_to(&mut self, base: &Path) {
        if let Ok(rel) = self.file.strip_prefix(base) {
            self.file = rel.to_path_buf();
        }
    }
}

fn clamp(n: u64) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

impl fmt::Display for Diagnostic {
    /// `file:line:col: severity[code]: message`, the one-line form used in logs.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file.display())?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
            if let Some(col) = self.column {
                write!(f, ":{col}")?;
            }
        }
        write!(f, ": {}[{}]: {}", self.severity, self.code, self.message)
    }
}

/// Counts errors and warnings in a list of diagnostics.
pub fn count(diagnostics: &[Diagnostic]) -> (usize, usize) {
    diagnostics
        .iter()
        .fold((0, 0), |(e, w), d| match d.severity {
            Severity::Error => (e + 1, w),
            Severity::Warning => (e, w + 1),
            Severity::Info => (e, w),
        })
}

impl std::error::Error for Diagnostic {}
