//! quiver-install's integration tests: one binary, one module per subject.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod suite;
