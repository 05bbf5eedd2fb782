mod check;
mod harness;
mod generated;
mod mcp_driver;
mod runtime_driver;
