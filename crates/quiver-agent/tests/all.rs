//! The agent loop against scripted fake model servers over real HTTP: providers, the loop
//! over the real runtime and SQLite store, sub-agents in child sessions.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod suite;
