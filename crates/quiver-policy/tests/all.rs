//! The policy's table tests: one module per clause of DESIGN.md §4 (and §3's admission and
//! call steps), each comparing whole evaluations.

mod suite;
