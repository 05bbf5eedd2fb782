//! The one error type of the store.

use std::path::PathBuf;

use crate::types::ApprovalStatus;

/// Everything a [`Store`](crate::Store) can fail with. No method panics: a bad row is an error
/// naming its table and column, never a crash.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The database engine reported an error.
    #[error("sqlite: {0}")]
    Sqlite(#[from] rusqlite::Error),

    /// PostgreSQL reported an error (the server's message, with its SQLSTATE when it sent one).
    #[error("postgres: {}", postgres_message(.0))]
    Postgres(#[from] tokio_postgres::Error),

    /// No PostgreSQL connection could be had: the server cannot be reached, refused the
    /// login, or every pooled connection stayed busy past the pool's wait timeout.
    #[error("cannot connect to PostgreSQL: {0}")]
    Connect(String),

    /// The database file could not be opened or set up.
    #[error("cannot open the store at {path}: {source}")]
    Open {
        /// The database file.
        path: PathBuf,
        /// What SQLite said.
        source: rusqlite::Error,
    },

    /// The folder for the database file could not be created.
    #[error("cannot create {path}: {source}")]
    Io {
        /// The folder.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },

    /// The file is an SQLite database, but not one of Quiver's.
    #[error("{path} is not a Quiver store (application_id {found:#010x})")]
    NotQuiver {
        /// The database file.
        path: PathBuf,
        /// The `application_id` found in its header.
        found: i64,
    },

    /// The database was written by a newer Quiver: its schema version is above the newest this
    /// build knows. Nothing was changed.
    #[error(
        "the store's schema version is {found}, newer than this Quiver knows ({known}); upgrade Quiver"
    )]
    SchemaTooNew {
        /// The schema version in the file.
        found: i64,
        /// The newest version this build can migrate to.
        known: i64,
    },

    /// A migration step failed; the whole migration was rolled back.
    #[error("migration to schema version {version} failed: {source}")]
    Migration {
        /// The version the failing step migrates to.
        version: i64,
        /// What SQLite said.
        source: rusqlite::Error,
    },

    /// The record does not exist.
    #[error("no such {what}: {id}")]
    NotFound {
        /// What kind of record (`session`, `approval`).
        what: &'static str,
        /// Its id.
        id: String,
    },

    /// A record with this id already exists.
    #[error("{what} {id} already exists")]
    AlreadyExists {
        /// What kind of record (`session`, `approval`).
        what: &'static str,
        /// Its id.
        id: String,
    },

    /// The approval was already answered (or expired); an approval is resolved exactly once.
    #[error("approval {id} was already resolved: {status}")]
    AlreadyAnswered {
        /// The approval id.
        id: String,
        /// How it was resolved.
        status: ApprovalStatus,
    },

    /// A JSON column of a stored row does not parse.
    #[error("corrupt JSON in {table}.{column}: {source}")]
    CorruptJson {
        /// The table.
        table: &'static str,
        /// The column.
        column: &'static str,
        /// The parser's message.
        source: serde_json::Error,
    },

    /// A stored row holds a value the store does not understand.
    #[error("corrupt row in {table}: {detail}")]
    Corrupt {
        /// The table.
        table: &'static str,
        /// What is wrong.
        detail: String,
    },

    /// A value could not be encoded as JSON.
    #[error("cannot encode JSON: {0}")]
    Encode(#[source] serde_json::Error),

    /// The record was changed by someone else first (a wait already resolved).
    #[error("conflict: {0}")]
    Conflict(String),

    /// The caller passed an argument the store refuses (an empty id, a capacity of 0).
    #[error("invalid argument: {0}")]
    Invalid(String),

    /// A bound was reached (the active runs of a package): nothing was written.
    #[error("{0}")]
    Full(String),

    /// The transaction holding this write could not be committed; the write did not happen.
    #[error("commit failed, the write was rolled back: {0}")]
    CommitFailed(String),

    /// The store's writer has stopped (the store is being dropped, or its thread died).
    #[error("the store is closed")]
    Closed,
}

/// The server's own message of a PostgreSQL error (`tokio_postgres::Error` displays only
/// "db error"), with its SQLSTATE.
fn postgres_message(error: &tokio_postgres::Error) -> String {
    match error.as_db_error() {
        Some(db) => format!("{} ({})", db.message(), db.code().code()),
        None => error.to_string(),
    }
}

/// Shorthand for results of store operations.
pub type Result<T, E = StoreError> = std::result::Result<T, E>;
