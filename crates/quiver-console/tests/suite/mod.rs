#![allow(clippy::unwrap_used, clippy::expect_used)]

mod approvals;
mod browser;
mod harness;
mod security;
