//! Workflows inside the runtime: a call of an exposed workflow starts a run ([`calls`]), a run's
//! tool and agent steps go through the one call pipeline ([`steps`]), schedules, events and
//! webhooks start runs ([`triggers`], [`webhooks`]), and operators and approvers act on runs
//! ([`run_ops`]). The engine itself is the `quiver-workflow` crate.

pub(super) mod calls;
pub(super) mod run_ops;
pub(super) mod steps;
pub(super) mod triggers;
pub(super) mod webhooks;
