//! The rules' model against the real runtime: generated catalogs, callers and conversations,
//! every invariant of issue 22 checked after every step, and the shrunk counterexamples kept
//! as regression tables.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

mod suite;
