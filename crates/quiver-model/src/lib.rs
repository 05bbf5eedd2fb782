//! A small executable model of Quiver's rules (DESIGN.md §3–§4) and generators of the worlds
//! it is tested over.
//!
//! - [`world`]: what the rules reason about: a catalog description, a caller, the steps of a
//!   conversation.
//! - [`grants`]: how long each grant and restriction lasts.
//! - [`rules`]: the rules themselves, as a state machine: what is offered, what a call gets,
//!   how long each grant lasts. This is the spec in code; it says what DESIGN.md says.
//! - [`runs`]: workflow runs as the rules see them: what each step's call gets, and where a
//!   run parks when nobody can answer it.
//! - [`versions`]: catalog versions under hot reload: which catalog a turn sees.
//! - [`write`](mod@write): a world written out as real package folders.
//! - [`generate`]: `proptest` strategies of worlds, callers and conversations.
//!
//! The tests (`tests/`) drive the real runtime and its fronts with the same generated
//! conversations and check the invariants of issue 22 after every step.

pub mod generate;
pub mod grants;
pub mod rules;
pub mod runs;
pub mod versions;
pub mod world;
pub mod write;
