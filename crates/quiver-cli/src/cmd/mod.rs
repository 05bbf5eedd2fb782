//! One module per subcommand.

pub mod approvals;
mod approvals_runs;
pub mod bench;
pub mod catalog;
pub mod chat;
pub mod completions;
pub mod cost;
pub mod eval;
pub mod events;
pub mod init;
pub mod lint;
pub mod mcp_bench;
pub mod models;
pub mod new;
pub mod operator;
pub mod reload;
pub mod resume_bench;
pub mod runs;
pub mod runs_ops;
pub mod runtime;
mod sandbox_bench;
pub mod sandbox_exec;
pub mod schedules;
pub mod serve;
pub mod skill;
pub mod test;
