#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

mod approvals;
mod authoring;
mod bridge;
mod browser;
mod browser_author;
mod browser_bridge;
mod charts;
mod figures;
mod harness;
mod operator_cards;
mod run_ops;
mod security;
