mod chat_driver;
mod check;
mod generated;
mod harness;
mod mcp_driver;
mod regressions;
mod runtime_driver;
