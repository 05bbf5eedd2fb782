#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

mod approvals;
mod bridge;
mod browser;
mod browser_bridge;
mod figures;
mod harness;
mod operator_cards;
mod run_ops;
mod security;
