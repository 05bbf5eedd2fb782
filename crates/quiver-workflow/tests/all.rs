//! The engine over real SQLite files, with a fake step runner and a manual clock.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod suite;
