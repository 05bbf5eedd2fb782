//! Quiver's runtime: sessions and turns, the meta-tools, system prompt assembly and the
//! governed call pipeline of DESIGN.md §3.
//!
//! The main types are [`Runtime`] (the catalog, the store, the executor and the approvers),
//! and the [`Turn`] it begins for each user message, whose [`Turn::call`] runs a call through
//! every step and writes its audit record.

pub mod admin;
pub mod approver;
pub mod bench;
pub mod config;
pub mod dates;
pub mod executor;
pub mod hooks;
mod ids;
pub mod mcp_servers;
pub mod operator;
pub mod output;
pub mod presence;
pub mod prompt;
pub mod runtime;
pub mod sandboxed;

pub use runtime::{Answerer, Cancelled, Emitted, RunError, RunOps, ScheduleEntry};
pub use runtime::{
    ApproverSet, CallKind, CallOutcome, CallStatus, Delivery, HookError, NotConfigured, Offer,
    Profile, RunWaker, Runtime, RuntimeConfig, RuntimeError, SCHEDULER_USER, SIGNATURE_HEADER,
    SessionRequest, TIMESTAMP_HEADER, TURN_TOKENS_KIND, ToolDefinition, Trimmed, Turn,
    WEBHOOK_USER, WorkflowSteps, run_session_id,
};
