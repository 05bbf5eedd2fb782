//! The runtime through its API: a scripted conversation harness (no LLM) playing model moves,
//! one named test per rule of DESIGN.md §3 and §4.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod suite;
