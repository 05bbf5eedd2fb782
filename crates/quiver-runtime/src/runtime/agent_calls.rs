//! Who runs agents and forked skills. The call pipeline governs them like any call (a
//! `decision` call of their package: resolution, visibility, admission, hooks, the control
//! plane, consent, audit) and hands the run itself to the [`AgentRunner`] the front set with
//! [`Runtime::set_agent_runner`] (the agent loop of `quiver-agent`), which runs it in a child
//! session and returns its last reply.

use std::sync::Arc;
use std::time::Instant;

use quiver_catalog::Catalog;
use quiver_policy::Principal;

use super::Runtime;
use crate::approver::Approver;

/// A run the runtime hands to the agent loop: an exposed agent called with `{task}`, or a
/// skill with `context: fork`.
pub struct AgentTask {
    /// The call's id in the parent session.
    pub call_id: String,
    /// The session that made the call; the run gets a child session of it.
    pub parent_session: String,
    /// The agent, `<package>.<agent>`; `None` for a forked skill that names no agent.
    pub agent: Option<String>,
    /// The forked skill's id, when a skill runs.
    pub skill: Option<String>,
    /// What the run is asked to do: the agent's `task`, or the skill's instructions and the
    /// request.
    pub task: String,
    /// Who is talking in the parent turn.
    pub sender: Principal,
    /// Who answers the parent turn's questions (the child asks the same person).
    pub person: Option<Arc<dyn Approver>>,
    /// When the run must end (a workflow step's `timeout`): no model request starts after it.
    pub deadline: Option<Instant>,
    /// The parent turn's catalog snapshot: the run reads its agent there and its turns hold
    /// it ([`Runtime::begin_turn_on`]), so a reload during the parent turn changes nothing the
    /// run sees.
    pub catalog: Arc<Catalog>,
}

/// What a run returns: the child session and its last reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentReply {
    /// The child session it ran in.
    pub session: String,
    /// Its last reply: the call's result.
    pub reply: String,
}

/// Runs agents and forked skills (set by the agent loop; without one, such calls end with a
/// clear error).
pub trait AgentRunner: Send + Sync {
    /// Runs `task` on `runtime` and returns the last reply, or why it could not run.
    fn run(&self, runtime: &Runtime, task: AgentTask) -> Result<AgentReply, String>;
}

impl Runtime {
    /// Sets who runs agents and forked skills; the first runner set stays.
    pub fn set_agent_runner(&self, runner: Arc<dyn AgentRunner>) -> bool {
        self.agent_runner.set(runner).is_ok()
    }
}
