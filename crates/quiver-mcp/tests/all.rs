//! quiver-mcp's integration tests: a real rmcp client over an in-memory duplex (both protocol
//! eras) and over HTTP on a loopback port.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod suite;
