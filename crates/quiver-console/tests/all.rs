//! The console's tests: handlers over a real loopback socket, and the browser tests.

mod suite;
