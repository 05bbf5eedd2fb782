//! One module per subcommand.

pub mod approvals;
pub mod bench;
pub mod catalog;
pub mod chat;
pub mod cost;
pub mod lint;
pub mod mcp_bench;
pub mod models;
pub mod new;
pub mod operator;
pub mod runs;
pub mod runtime;
pub mod sandbox_bench;
pub mod sandbox_exec;
pub mod serve;
pub mod skill;
pub mod test;
