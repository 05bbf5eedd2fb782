mod chat_driver;
mod check;
mod harness;
mod generated;
mod mcp_driver;
mod regressions;
mod runtime_driver;
