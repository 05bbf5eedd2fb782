//! The registry of `quiver serve` instances sharing one database: each registers a row and
//! heartbeats it on the store's clock; an instance whose heartbeat stopped is reaped by one of
//! the others (a conditional update: each dead instance is handed to exactly one reaper), which
//! ends the dead instance's calls in flight as `interrupted` ([`WorkflowStore::close_call`]);
//! its workflow runs are taken over once their leases run out.
//!
//! [`WorkflowStore::close_call`]: crate::WorkflowStore::close_call

use serde::{Deserialize, Serialize};

/// What an instance registers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NewInstance {
    /// Its id, unique per process start.
    pub id: String,
    /// The machine it runs on.
    pub host: String,
    /// Its pid there.
    pub pid: i64,
    /// Its waiter string ([`crate::waiter`]), which its calls in flight record as theirs.
    pub process: Option<String>,
}

/// A registered instance.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Instance {
    /// Its id.
    pub id: String,
    /// The machine it runs on.
    pub host: String,
    /// Its pid there.
    pub pid: i64,
    /// Its waiter string.
    pub process: Option<String>,
    /// When it registered (Unix ms, the store's clock).
    pub started_at: i64,
    /// Its last heartbeat (Unix ms, the store's clock).
    pub heartbeat_at: i64,
    /// When it was reaped (taken for dead), if it was.
    pub reaped_at: Option<i64>,
    /// The instance that reaped it.
    pub reaped_by: Option<String>,
}
